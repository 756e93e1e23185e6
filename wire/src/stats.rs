//! Counters of one direction, shared between its I/O thread and the thread
//! that publishes them as a JSON file (rewritten atomically: write, rename).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        #[derive(Default, Debug)]
        pub struct DirStats { $(pub $name: AtomicU64,)* }

        impl DirStats {
            pub fn to_json(&self) -> String {
                let fields: Vec<String> = vec![
                    $(format!("\"{}\": {}", stringify!($name), self.$name.load(Relaxed)),)*
                ];
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
    }
}
