//! CoDel's dequeue-side state machine (RFC 8289), shared by `codel` (one queue)
//! and `fq_codel` (one state per flow queue, RFC 8290).
//!
//! Facts taken from the RFC and Linux's include/net/codel_impl.h: a packet's
//! sojourn above `target` for a whole `interval` (while more than one MTU is
//! queued) enters the dropping state; drops then come at interval/sqrt(count);
//! re-entering soon after leaving resumes with the count it had reached beyond
//! the previous entry's. With ECN, an ECN-capable packet is CE-marked instead of
//! dropped. Apart from all that, `ce_threshold` (Linux's, for DCTCP-style senders)
//! CE-marks every ECN-capable packet that leaves with a sojourn above it, whether
//! or not the control law acts and whether or not `ecn` is set.

use crate::flow;
use crate::pipeline::Frame;
use crate::Nanos;

#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub target: Nanos,
    pub interval: Nanos,
    /// One full frame: below this much backlog nothing is dropped.
    pub mtu: u64,
    pub ecn: bool,
    /// Mark CE on ECT packets whose sojourn exceeds this (strictly, as Linux's
    /// codel_time_after); None: off, Linux's default.
    pub ce_threshold: Option<Nanos>,
}

#[derive(Clone, Debug, Default)]
pub struct Vars {
    count: u32,
    lastcount: u32,
    dropping: bool,
    /// When the sojourn first stayed above target for an interval; 0: it is not above.
    first_above: Nanos,
    drop_next: Nanos,
}

/// What one dequeue dropped or marked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Acted {
    pub dropped: u64,
    pub dropped_segs: u64,
    /// CE marks of the control law (with `ecn`): Linux's ecn_mark.
    pub marked: u64,
    /// CE marks for a sojourn above `ce_threshold`: Linux's ce_mark.
    pub ce_marked: u64,
}

/// `next` takes the queue's head and returns it with the backlog (bytes, of the
/// whole qdisc) left behind it.
pub type Next<'a> = dyn FnMut() -> Option<(Frame, u64)> + 'a;

fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    t + (interval as f64 / (count.max(1) as f64).sqrt()) as Nanos
}

impl Vars {
    fn should_drop(&mut self, head: Option<&(Frame, u64)>, p: &Params, now: Nanos) -> bool {
        let Some((f, backlog)) = head else {
            self.first_above = 0;
            return false;
        };
        let sojourn = now.saturating_sub(f.arrival);
        if sojourn < p.target || *backlog <= p.mtu {
            self.first_above = 0;
            return false;
        }
        if self.first_above == 0 {
            self.first_above = now + p.interval;
            return false;
        }
        now > self.first_above
    }

    /// Dequeue through CoDel at `now`; dropped and marked frames are counted in `acted`.
    pub fn dequeue(&mut self, p: &Params, now: Nanos, acted: &mut Acted, next: &mut Next) -> Option<Frame> {
        let mut head = next();
        if head.is_none() {
            self.dropping = false;
            return None;
        }
        let drop = self.should_drop(head.as_ref(), p, now);
        if self.dropping {
            if !drop {
                self.dropping = false;
            } else {
                while self.dropping && now >= self.drop_next {
                    self.count += 1;
                    let (f, _) = head.as_mut()?;
                    if p.ecn && flow::set_ce(&mut f.data) {
                        acted.marked += 1;
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                        break;
                    }
                    acted.dropped += 1;
                    acted.dropped_segs += f.shape.segs as u64;
                    head = next();
                    if !self.should_drop(head.as_ref(), p, now) {
                        self.dropping = false;
                    } else {
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                    }
                }
            }
        } else if drop {
            let marked = match head.as_mut() {
                Some((f, _)) if p.ecn => flow::set_ce(&mut f.data),
                _ => false,
            };
            if marked {
                acted.marked += 1;
            } else {
                if let Some((f, _)) = &head {
                    acted.dropped += 1;
                    acted.dropped_segs += f.shape.segs as u64;
                }
                head = next();
                // The new head's verdict only updates first_above, as in Linux.
                self.should_drop(head.as_ref(), p, now);
            }
            self.dropping = true;
            // Re-entering soon after the last dropping state: start from how far
            // the count had gone there, so the drop rate picks up where it was.
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = if delta > 1 && now.saturating_sub(self.drop_next) < 16 * p.interval {
                delta
            } else {
                1
            };
            self.lastcount = self.count;
            self.drop_next = control_law(now, p.interval, self.count);
        }
        // The packet that leaves, judged on its own sojourn. set_ce is true for a
        // packet already CE too (the control law's mark above, or upstream's), so
        // such a packet counts here as well, as in Linux.
        if let (Some(threshold), Some((f, _))) = (p.ce_threshold, head.as_mut()) {
            if now.saturating_sub(f.arrival) > threshold && flow::set_ce(&mut f.data) {
                acted.ce_marked += 1;
            }
        }
        head.map(|(f, _)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Shape;
    use std::collections::VecDeque;

    const MS: Nanos = 1_000_000;

    fn params(ecn: bool) -> Params {
        Params { target: 5 * MS, interval: 100 * MS, mtu: 1514, ecn, ce_threshold: None }
    }

    fn f(at: Nanos, tos: u8) -> Frame {
        let mut data = crate::flow::tests::v4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1, 2, tos);
        data.resize(1500, 0);
        Frame { data, shape: Shape { segs: 1, wire_bytes: 1514 }, arrival: at }
    }

    fn ecn_bits(f: &Frame) -> u8 {
        f.data[crate::frame::VNET_HDR_LEN + 14 + 1] & 3
    }

    /// A queue that always holds `standing` of sojourn: what does CoDel do over 1 s,
    /// serving one packet per ms?
    fn run(ecn: bool, tos: u8) -> (Acted, Vec<Nanos>) {
        run_with(params(ecn), tos).0
    }

    /// The same with any parameters; also the ECN bits of every packet served.
    fn run_with(p: Params, tos: u8) -> ((Acted, Vec<Nanos>), Vec<u8>) {
        let mut v = Vars::default();
        let mut q: VecDeque<Frame> = VecDeque::new();
        let mut acted = Acted::default();
        let mut drops_at = Vec::new();
        let mut served = Vec::new();
        for ms in 0..1000u64 {
            let now = (1000 + ms) * MS;
            // 20 ms of standing queue: packets that arrived 20 ms ago and since.
            while q.len() < 40 {
                let last = q.back().map(|x| x.arrival + MS / 2).unwrap_or(now.saturating_sub(20 * MS));
                q.push_back(f(last, tos));
            }
            let before = acted.dropped;
            let mut next = || q.pop_front().map(|x| (x, 40 * 1514));
            if let Some(out) = v.dequeue(&p, now, &mut acted, &mut next) {
                served.push(ecn_bits(&out));
            }
            if acted.dropped > before {
                drops_at.push(now - 1000 * MS);
            }
        }
        ((acted, drops_at), served)
    }

    #[test]
    fn first_drop_after_one_interval_then_faster() {
        let (acted, at) = run(false, 0);
        // Above target from the start: the first drop once an interval has passed.
        assert_eq!(at[0], 101 * MS);
        // Then at interval/sqrt(n): 100, 70.7, 57.7, 50 ... ms apart.
        let gaps: Vec<Nanos> = at.windows(2).map(|w| (w[1] - w[0]) / MS).collect();
        assert_eq!(&gaps[..5], &[100, 71, 58, 50, 45]);
        assert_eq!(acted.marked, 0);
    }

    #[test]
    fn ecn_marks_instead_of_dropping_ect_packets() {
        let (acted, _) = run(true, 2);
        assert_eq!(acted.dropped, 0);
        assert!(acted.marked >= 10, "{acted:?}");
        let (acted, _) = run(true, 0);
        assert!(acted.dropped >= 10 && acted.marked == 0, "Not-ECT is dropped: {acted:?}");
    }

    #[test]
    fn ce_threshold_marks_ect_packets_by_their_own_sojourn() {
        // All below target (no control law at work), ecn off: the threshold alone marks.
        let p = Params { ce_threshold: Some(MS), ..params(false) };
        let now = 100 * MS;
        // (sojourn, ECN bits in): ECT(0) = 2, ECT(1) = 1, CE = 3, Not-ECT = 0.
        let cases = [(MS / 2, 2, 2), (MS, 2, 2), (MS + 1, 2, 3), (3 * MS / 2, 1, 3),
                     (2 * MS, 0, 0), (4 * MS, 3, 3)];
        let mut q: VecDeque<Frame> = cases.iter().map(|&(s, tos, _)| f(now - s, tos)).collect();
        let mut v = Vars::default();
        let mut acted = Acted::default();
        for &(sojourn, _, out) in &cases {
            let mut next = || q.pop_front().map(|x| (x, 6 * 1514));
            let got = v.dequeue(&p, now, &mut acted, &mut next).expect("a packet");
            assert_eq!(ecn_bits(&got), out, "sojourn {sojourn} ns");
            let h = crate::frame::VNET_HDR_LEN + 14;
            assert_eq!(crate::flow::tests::checksum(&got.data[h..h + 20]), 0, "IPv4 checksum");
        }
        // Above the threshold: ECT(0), ECT(1) and the CE packet (counted, as Linux's
        // INET_ECN_set_ce succeeds on CE); equal to it and Not-ECT: no.
        assert_eq!(acted, Acted { ce_marked: 3, ..Acted::default() });
    }

    #[test]
    fn ce_threshold_leaves_the_control_law_alone() {
        // A 20 ms standing queue of ECT packets, ecn off: the same drops at the same
        // times as without a threshold, and every packet served leaves CE-marked.
        let ((plain, plain_at), _) = run_with(params(false), 2);
        let p = Params { ce_threshold: Some(MS), ..params(false) };
        let ((acted, at), served) = run_with(p, 2);
        assert_eq!((acted.dropped, acted.marked), (plain.dropped, 0));
        assert_eq!(at, plain_at);
        assert!(served.len() > 900 && served.iter().all(|&b| b == 3), "{served:?}");
        assert_eq!(acted.ce_marked, served.len() as u64);
        // With ecn on, the control law marks instead of dropping; the threshold marks
        // the rest: every packet leaves CE, and nothing is dropped.
        let ((both, _), served) = run_with(Params { ecn: true, ..p }, 2);
        assert_eq!(both.dropped, 0);
        assert!(both.marked >= 10 && both.ce_marked == served.len() as u64, "{both:?}");
    }

    #[test]
    fn below_target_nothing_happens() {
        let p = params(false);
        let mut v = Vars::default();
        let mut acted = Acted::default();
        for ms in 10..1000u64 {
            let now = ms * MS;
            let mut q = VecDeque::from([f(now - 4 * MS, 0), f(now, 0), f(now, 0)]);
            let mut next = || q.pop_front().map(|x| (x, 3 * 1514));
            assert!(v.dequeue(&p, now, &mut acted, &mut next).is_some());
        }
        assert_eq!(acted, Acted::default());
    }
}
