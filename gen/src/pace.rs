//! The sender's schedule: batches of frames due at fixed times, no catch-up burst beyond
//! a short lag.

/// A batch is as many frames as fall due in this long, at least one.
pub const BATCH_NS: u64 = 20_000;
/// At most this many frames in one sendmmsg.
pub const MAX_BATCH: u64 = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Frames a batch.
    pub batch: u64,
    /// Nanoseconds from one batch to the next.
    pub interval_ns: f64,
    /// Behind by more than this, the schedule starts again from now.
    pub max_lag_ns: u64,
    start_ns: u64,
    index: u64,
    /// Times the schedule started again.
    pub resets: u64,
    /// Time lost in stalls: the lateness of each restart that came more than twice the
    /// lag allowed late. A sender too slow for its rate falls behind a batch at a time
    /// and restarts at the lag allowed (plus one batch); one late by more went unrun for
    /// longer than the lag in one go (the hypervisor, an interrupt storm, a higher
    /// priority): a stall, not a pace it cannot keep.
    pub stalled_ns: u64,
}

impl Schedule {
    /// Frames at `rate` a second (above 0) from `now_ns`.
    pub fn new(rate: f64, now_ns: u64) -> Schedule {
        let gap = 1e9 / rate;
        let batch = ((BATCH_NS as f64 / gap).floor() as u64).clamp(1, MAX_BATCH);
        let interval_ns = gap * batch as f64;
        // A lag of ten frames (or half a millisecond, or two batches) is caught up: timer
        // noise, not a stall; a burst of ten frames is what a 20-frame queue holds.
        let max_lag_ns = (10.0 * gap).max(2.0 * interval_ns).max(500_000.0) as u64;
        Schedule { batch, interval_ns, max_lag_ns, start_ns: now_ns, index: 0, resets: 0,
                   stalled_ns: 0 }
    }

    /// When the next batch is due.
    pub fn due_ns(&self) -> u64 {
        self.start_ns + (self.index as f64 * self.interval_ns) as u64
    }

    /// A batch went out at `now_ns`: the next is due one interval after this one, or,
    /// when this one was late by more than the lag allowed, one interval from now.
    pub fn sent(&mut self, now_ns: u64) {
        let due = self.due_ns();
        if now_ns > due + self.max_lag_ns {
            if now_ns - due > 2 * self.max_lag_ns {
                self.stalled_ns += now_ns - due;
            }
            self.start_ns = now_ns;
            self.index = 1;
            self.resets += 1;
        } else {
            self.index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_whole_frames_within_twenty_microseconds() {
        let s = Schedule::new(20_889.0, 0);
        assert_eq!(s.batch, 1);
        assert!((s.interval_ns - 1e9 / 20_889.0).abs() < 1e-6);
        let s = Schedule::new(1_000_000.0, 0);
        assert_eq!(s.batch, 20);
        assert!((s.interval_ns - 20_000.0).abs() < 1e-6);
        assert_eq!(Schedule::new(1e9, 0).batch, MAX_BATCH);
    }

    #[test]
    fn on_time_batches_keep_the_schedule_and_a_stall_restarts_it() {
        let mut s = Schedule::new(1_000.0, 0);
        s.sent(0);
        assert_eq!(s.due_ns(), 1_000_000);
        assert_eq!(s.max_lag_ns, 10_000_000, "ten frames");
        s.sent(9_000_000); // late by 8 ms (8 frames): caught up
        assert_eq!(s.due_ns(), 2_000_000);
        assert_eq!(s.resets, 0);
        s.sent(14_000_000); // late by 12 ms: restarted, not made up
        assert_eq!(s.resets, 1);
        assert_eq!(s.due_ns(), 15_000_000);
        assert_eq!(s.stalled_ns, 0, "12 ms late is within twice the lag allowed: a pace");
        s.sent(40_000_000); // due at 15 ms, late by 25 ms: a stall
        assert_eq!((s.resets, s.stalled_ns), (2, 25_000_000));
    }
}
