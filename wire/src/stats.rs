//! Counters of one direction, shared between its I/O thread and the thread
//! that publishes them as a JSON file (rewritten atomically: write, rename).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sojourn histogram buckets (upper edges, microseconds): 100 us wide up to
/// 20 ms (where CoDel's target lives), 1 ms to 200 ms, 10 ms to 2 s, then one
/// bucket for everything longer.
pub fn sojourn_edges_us() -> Vec<u64> {
    let mut e: Vec<u64> = (1..=200).map(|i| i * 100).collect();
    e.extend((21..=200).map(|i| i * 1000));
    e.extend((21..=200).map(|i| i * 10_000));
    e.push(u64::MAX);
    e
}

const SOJOURN_BUCKETS: usize = 200 + 180 + 180 + 1;

/// Bucket of a sojourn time in nanoseconds.
pub fn sojourn_bucket(ns: u64) -> usize {
    let us = ns / 1000;
    match us {
        0..=19_999 => (us / 100) as usize,
        20_000..=199_999 => 200 + (us / 1000 - 20) as usize,
        200_000..=1_999_999 => 380 + (us / 10_000 - 20) as usize,
        _ => SOJOURN_BUCKETS - 1,
    }
}

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        #[derive(Debug)]
        pub struct DirStats {
            $(pub $name: AtomicU64,)*
            /// Packets (segments) by time spent in the queue: see sojourn_edges_us.
            pub sojourn: Vec<AtomicU64>,
        }

        impl Default for DirStats {
            fn default() -> Self {
                DirStats {
                    $($name: AtomicU64::new(0),)*
                    sojourn: (0..SOJOURN_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
                }
            }
        }

        impl DirStats {
            pub fn to_json(&self) -> String {
                let mut fields: Vec<String> = vec![
                    $(format!("\"{}\": {}", stringify!($name), self.$name.load(Relaxed)),)*
                ];
                // Trailing empty buckets are left out; a reader pads with zeros.
                let counts: Vec<u64> = self.sojourn.iter().map(|c| c.load(Relaxed)).collect();
                let used = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
                let list: Vec<String> = counts[..used].iter().map(u64::to_string).collect();
                fields.push(format!("\"sojourn_hist\": [{}]", list.join(",")));
                format!("{{{}}}", fields.join(", "))
            }
        }
    };
}

counters!(
    received,
    passed,
    passed_bytes,
    dropped_loss,
    dropped_queue,
    dropped_malformed,
    dropped_error,
    duplicated,
    queue_bytes,
    queue_packets,
    held_bytes,
    held_packets,
    dropped_aqm,
    ecn_marked,
    ce_marked,
    flows_active,
    rehashes,
);

pub fn inc(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

pub fn set(c: &AtomicU64, n: u64) {
    c.store(n, Relaxed);
}

/// The stats file: both directions plus what a reader needs to interpret them.
pub fn document(pid: u32, started_s: f64, now_s: f64, fwd: &DirStats, rev: &DirStats) -> String {
    format!(
        "{{\"pid\": {pid}, \"started\": {started_s:.6}, \"time\": {now_s:.6}, \"forward\": {}, \"reverse\": {}}}\n",
        fwd.to_json(),
        rev.to_json()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_every_counter() {
        let s = DirStats::default();
        inc(&s.passed);
        let j = s.to_json();
        assert!(j.contains("\"passed\": 1"));
        assert!(j.contains("\"held_packets\": 0"));
        assert!(j.contains("\"sojourn_hist\": []"));
        add(&s.sojourn[sojourn_bucket(5_050_000)], 3);
        assert!(s.to_json().contains(&format!("\"sojourn_hist\": [{}3]", "0,".repeat(50))));
    }

    #[test]
    fn sojourn_buckets_match_their_edges() {
        let edges = sojourn_edges_us();
        assert_eq!(edges.len(), SOJOURN_BUCKETS);
        for ns in [0, 99_999, 100_000, 19_999_999, 20_000_000, 199_999_999, 200_000_000, 1_999_999_999, 5_000_000_000u64] {
            let b = sojourn_bucket(ns);
            assert!(ns / 1000 < edges[b], "{ns} in bucket {b}");
            assert!(b == 0 || ns / 1000 >= edges[b - 1], "{ns} in bucket {b}");
        }
    }
}
