//! Latencies in bounded memory: a count per microsecond up to one second, and the
//! exact maximum.

pub const BUCKET_NS: u64 = 1_000;
pub const BUCKETS: usize = 1_000_000;

pub struct Hist {
    counts: Vec<u32>,
    pub n: u64,
    pub max_ns: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist { counts: vec![0; BUCKETS + 1], n: 0, max_ns: 0 }
    }
}

impl Hist {
    pub fn add(&mut self, ns: u64) {
        let i = ((ns / BUCKET_NS) as usize).min(BUCKETS);
        self.counts[i] = self.counts[i].saturating_add(1);
        self.n += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// The q-quantile (0..=1) in ns: the middle of the bucket the rank falls in
    /// (nearest rank), or None when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += u64::from(*c);
            if seen >= rank {
                let mid = (i as u64 * BUCKET_NS + BUCKET_NS / 2) as f64;
                return Some(mid.min(self.max_ns as f64));
            }
        }
        Some(self.max_ns as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_to_the_microsecond() {
        let mut h = Hist::default();
        for us in 1..=100u64 {
            h.add(us * 1_000 + 300);
        }
        assert_eq!(h.quantile(0.5), Some(50_500.0));
        assert_eq!(h.quantile(0.99), Some(99_500.0));
        assert_eq!(h.max_ns, 100_300);
        assert_eq!(Hist::default().quantile(0.5), None);
    }
}
