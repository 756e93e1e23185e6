//! Trace-driven capacity in the mahimahi format: one line per delivery
//! opportunity, the time in milliseconds since the trace started; each
//! opportunity carries one 1500-byte packet. The trace repeats with a period
//! of its last timestamp.

use crate::Nanos;

/// Bytes one delivery opportunity carries (mahimahi's MTU-sized packet).
pub const OPPORTUNITY_BYTES: u64 = 1500;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Opportunity times in ms, non-decreasing, within (0, period].
    pub ms: Vec<u64>,
    pub period_ms: u64,
}

impl Trace {
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let t: u64 = line
                .parse()
                // The line is never quoted: the file may be anyone's (issue 29).
                .map_err(|_| format!("line {}: expected a time in ms (digits only)", i + 1))?;
            if let Some(&prev) = ms.last() {
                if t < prev {
                    return Err(format!("line {}: its time comes before the previous line's", i + 1));
                }
            }
            ms.push(t);
        }
        let period_ms = *ms.last().ok_or("the trace has no delivery opportunities")?;
        if period_ms == 0 {
            return Err("the trace's last time must be above 0 ms (it is the period)".into());
        }
        Ok(Trace { ms, period_ms })
    }

    /// Average capacity over one period, bits per second.
    pub fn mean_bps(&self) -> f64 {
        self.ms.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 / (self.period_ms as f64 / 1e3)
    }
}

/// Walks a trace's opportunities in absolute time from `origin`.
#[derive(Clone, Debug)]
pub struct Cursor {
    origin: Nanos,
    cycle: u64,
    idx: usize,
}

impl Cursor {
    pub fn new(origin: Nanos) -> Self {
        Cursor { origin, cycle: 0, idx: 0 }
    }

    pub fn time(&self, tr: &Trace) -> Nanos {
        self.origin + (self.cycle * tr.period_ms + tr.ms[self.idx]) * 1_000_000
    }

    pub fn advance(&mut self, tr: &Trace) {
        self.idx += 1;
        if self.idx == tr.ms.len() {
            self.idx = 0;
            self.cycle += 1;
        }
    }

    /// Move to the first opportunity at or after `t` (opportunities pass unused
    /// while nothing waits, as in mahimahi).
    pub fn seek(&mut self, tr: &Trace, t: Nanos) {
        if self.time(tr) >= t {
            return;
        }
        let rel_ms = (t.saturating_sub(self.origin)).div_ceil(1_000_000);
        let mut cycle = rel_ms / tr.period_ms;
        let within = rel_ms % tr.period_ms;
        let mut idx = tr.ms.partition_point(|&m| m < within);
        if idx == tr.ms.len() {
            idx = 0;
            cycle += 1;
        }
        self.cycle = cycle;
        self.idx = idx;
        while self.time(tr) < t {
            self.advance(tr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_computes_rate() {
        let text: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        let tr = Trace::parse(&text).unwrap();
        assert_eq!(tr.period_ms, 1000);
        assert!((tr.mean_bps() - 12e6).abs() < 1.0);
    }

    #[test]
    fn refuses_bad_traces() {
        assert!(Trace::parse("").is_err());
        assert!(Trace::parse("0\n").is_err());
        assert!(Trace::parse("5\n3\n").unwrap_err().contains("line 2"));
        assert!(Trace::parse("1\nx\n").unwrap_err().contains("line 2"));
    }

    #[test]
    fn cursor_seeks_and_wraps() {
        let tr = Trace::parse("10\n10\n20\n").unwrap();
        let mut c = Cursor::new(0);
        assert_eq!(c.time(&tr), 10_000_000);
        c.seek(&tr, 15_000_000);
        assert_eq!(c.time(&tr), 20_000_000);
        c.advance(&tr);
        assert_eq!(c.time(&tr), 30_000_000); // next period, first opportunity
        c.seek(&tr, 75_000_000);
        assert_eq!(c.time(&tr), 80_000_000);
    }
}
