//! The impairment pipeline of one direction, in netem's order:
//! loss -> duplication -> bottleneck (rate or trace, behind a queue discipline:
//! see `qdisc`) -> delay line (delay + jitter, optionally reordering) -> out.
//!
//! A frame leaves the queue when the bottleneck starts sending it (as a qdisc
//! hands a packet to the driver) and reaches the delay line when its last bit
//! is sent; its sojourn (queue wait) is counted in the stats' histogram.
//!
//! Pure: frames and times go in, frames come out when due; the caller owns
//! the clock and the sockets, which keeps every rule here testable.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::config::{DirConfig, QueueLimit, DEFAULT_QUEUE_PACKETS};
use crate::qdisc::Qdisc;
use crate::frame::{Shape, ETH_HLEN};
use crate::loss::LossModel;
use crate::rng::Rng;
use crate::stats::{self, DirStats};
use crate::trace::{Cursor, OPPORTUNITY_BYTES};
use crate::{Nanos, NS_PER_SEC};

/// What a trace opportunity is measured in: mahimahi carries IP packets, so
/// one 1500-byte opportunity holds one full-size packet without its Ethernet header.
fn l3_bytes(s: &Shape) -> u64 {
    s.wire_bytes.saturating_sub(ETH_HLEN as u64 * s.segs as u64).max(1)
}

#[derive(Clone, Debug)]
pub struct Frame {
    /// The vnet header and the frame, as read from the socket.
    pub data: Vec<u8>,
    pub shape: Shape,
    pub arrival: Nanos,
}

struct Held {
    due: Nanos,
    seq: u64,
    frame: Frame,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: BinaryHeap is a max-heap and the earliest frame must come out first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.due, o.seq).cmp(&(self.due, self.seq))
    }
}

pub struct Pipeline {
    cfg: DirConfig,
    rng: Rng,
    loss: LossModel,
    queue: Qdisc,
    busy_until: Nanos,
    cursor: Option<Cursor>,
    credit: u64,
    serving: bool,
    /// When the opportunity that completed the last frame came.
    last_opp: Nanos,
    next_shaper: Option<Nanos>,
    held: BinaryHeap<Held>,
    held_mem: u64,
    held_segs: u64,
    seq: u64,
    last_due: Nanos,
    pub stats: Arc<DirStats>,
}

impl Pipeline {
    /// `origin`: when the trace (if any) starts, normally the wire's start.
    pub fn new(cfg: DirConfig, stats: Arc<DirStats>, origin: Nanos) -> Self {
        let cursor = cfg.trace.as_ref().map(|_| Cursor::new(origin));
        let limit = cfg.queue.or(Some(QueueLimit::Packets(DEFAULT_QUEUE_PACKETS)));
        let queue = Qdisc::new(&cfg.qdisc, limit, cfg.seed, origin);
        Pipeline {
            rng: Rng::new(cfg.seed),
            loss: cfg.loss.clone(),
            cfg,
            queue,
            busy_until: 0,
            cursor,
            credit: 0,
            serving: false,
            last_opp: 0,
            next_shaper: None,
            held: BinaryHeap::new(),
            held_mem: 0,
            held_segs: 0,
            seq: 0,
            last_due: 0,
            stats,
        }
    }

    /// Whether the direction does nothing: frames then skip every data structure.
    pub fn is_transparent(&self) -> bool {
        let c = &self.cfg;
        c.delay_s == 0.0
            && c.jitter_s == 0.0
            && matches!(self.loss, LossModel::None)
            && c.duplicate == 0.0
            && !c.is_shaped()
            && c.queue.is_none()
    }

    /// Whether frames must be dated by their arrival (the kernel's stamp), not by when
    /// the thread read them: any direction that queues, shapes or delays. A thread that
    /// woke late reads what came meanwhile at once; dated by the read, a stall of 30 ms
    /// becomes a burst that overflows the queue behind a shaper (and AQM would judge
    /// the wait from the read). Dated by arrival, the link serves as if it never slept.
    pub fn wants_arrival_stamps(&self) -> bool {
        !self.is_transparent()
    }

    pub fn arrive(&mut self, frame: Frame, now: Nanos) {
        stats::inc(&self.stats.received);
        if self.loss.lose(&mut self.rng) {
            stats::inc(&self.stats.dropped_loss);
            return;
        }
        if self.rng.chance(self.cfg.duplicate) {
            stats::inc(&self.stats.duplicated);
            self.admit(frame.clone(), now);
        }
        self.admit(frame, now);
    }

    fn over(limit: Option<QueueLimit>, segs: u64, bytes: u64, f: &Frame) -> bool {
        // An empty queue takes any one frame, so a super-frame above the limit still passes.
        match limit {
            _ if segs == 0 => false,
            Some(QueueLimit::Packets(n)) => segs + f.shape.segs as u64 > n,
            Some(QueueLimit::Bytes(n)) => bytes + f.shape.wire_bytes > n,
            None => false,
        }
    }

    fn memory_full(&self, f: &Frame) -> bool {
        self.queue.mem() + self.held_mem + f.data.len() as u64 > self.cfg.max_held_bytes
    }

    fn admit(&mut self, f: Frame, now: Nanos) {
        if !self.cfg.is_shaped() {
            return self.hold(f, now);
        }
        if self.memory_full(&f) {
            stats::inc(&self.stats.dropped_queue);
            return;
        }
        // The link served what it owed up to this frame's arrival before the frame
        // meets the queue's limit: a thread that woke late (a stall on a busy machine)
        // reads a batch of frames at once, and judging them against a queue not yet
        // served since would drop frames that a real link had room for.
        self.advance(now);
        if self.queue.is_empty() && self.cfg.is_paced() {
            // An idle bottleneck starts on this frame when it arrives.
            self.busy_until = self.busy_until.max(f.arrival);
        }
        self.queue.enqueue(f, &self.stats);
        self.publish_queue();
        self.advance(now);
    }

    /// Put a frame that left the bottleneck at `t` on the delay line.
    fn hold(&mut self, f: Frame, t: Nanos) {
        let limit = if self.cfg.is_shaped() { None } else { self.cfg.queue };
        if Self::over(limit, self.held_segs, self.held_mem, &f) || self.memory_full(&f) {
            stats::inc(&self.stats.dropped_queue);
            return;
        }
        let mut delay = self.cfg.delay_s;
        if self.cfg.jitter_s > 0.0 {
            // Uniform in delay +- jitter, as netem without a distribution table.
            delay += self.cfg.jitter_s * (2.0 * self.rng.unit() - 1.0);
        }
        let mut due = t + (delay.max(0.0) * NS_PER_SEC as f64) as Nanos;
        if !self.cfg.reorder {
            due = due.max(self.last_due);
        }
        self.last_due = self.last_due.max(due);
        self.held_mem += f.data.len() as u64;
        self.held_segs += f.shape.segs as u64;
        self.seq += 1;
        self.held.push(Held { due, seq: self.seq, frame: f });
        stats::set(&self.stats.held_bytes, self.held_mem);
        stats::set(&self.stats.held_packets, self.held_segs);
    }

    fn publish_queue(&self) {
        stats::set(&self.stats.queue_bytes, self.queue.bytes());
        stats::set(&self.stats.queue_packets, self.queue.segs());
        stats::set(&self.stats.flows_active, self.queue.flows_active());
    }

    fn sojourn(&self, f: &Frame, t: Nanos) {
        let b = stats::sojourn_bucket(t.saturating_sub(f.arrival));
        stats::add(&self.stats.sojourn[b], f.shape.segs as u64);
    }

    /// Start sending every frame the bottleneck is free for by `now`.
    pub fn advance(&mut self, now: Nanos) {
        self.next_shaper = None;
        self.queue.tick(now, &self.stats);
        if self.cfg.is_paced() {
            while !self.queue.is_empty() {
                if self.busy_until > now {
                    self.next_shaper = Some(self.busy_until);
                    break;
                }
                // The link frees up at t; the discipline decides now. Both are the same
                // when the thread wakes on time; when it wakes late, frames read since t
                // carry arrival stamps after t, and only `now` measures their wait
                // without calling it zero (which would reset CoDel's above-target timer).
                let t = self.busy_until;
                let Some(f) = self.queue.dequeue(now, &self.stats) else { break };
                self.sojourn(&f, now);
                let finish = t + self.service_time(&f.shape);
                self.busy_until = finish;
                self.hold(f, finish);
            }
            self.publish_queue();
        } else if let (Some(tr), Some(cur)) = (self.cfg.trace.as_ref(), self.cursor.as_mut()) {
            let mut out = Vec::new();
            while let Some(head) = self.queue.fifo_front() {
                if !self.serving {
                    cur.seek(tr, head.arrival);
                    self.credit = 0;
                    self.serving = true;
                }
                let need = l3_bytes(&head.shape);
                while self.credit < need {
                    let t = cur.time(tr);
                    if t > now {
                        self.next_shaper = Some(t);
                        break;
                    }
                    self.credit += OPPORTUNITY_BYTES;
                    self.last_opp = t;
                    cur.advance(tr);
                }
                if self.next_shaper.is_some() {
                    break;
                }
                let f = self.queue.dequeue(now, &self.stats).expect("head exists");
                self.credit -= need;
                let left = self.last_opp;
                if self.queue.is_empty() {
                    self.serving = false;
                }
                out.push((f, left));
            }
            for (f, t) in out {
                self.sojourn(&f, t);
                self.hold(f, t);
            }
            self.publish_queue();
        }
    }

    /// How long the bottleneck is busy with a frame: its bits at the rate or its wire
    /// frames at the frame ceiling, whichever is longer (a CPU-bound router forwards
    /// small frames at its packet rate and large ones at its bit rate).
    fn service_time(&self, s: &Shape) -> Nanos {
        let by_rate = self.cfg.rate_bps.map_or(0, |r| (s.wire_bytes * 8 * NS_PER_SEC).div_ceil(r));
        let by_pps = self.cfg.pps.map_or(0, |p| (s.segs as u64 * NS_PER_SEC).div_ceil(p));
        by_rate.max(by_pps)
    }

    /// The next frame due by `now`, if any.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Frame> {
        if self.held.peek()?.due > now {
            return None;
        }
        let h = self.held.pop()?;
        self.held_mem -= h.frame.data.len() as u64;
        self.held_segs -= h.frame.shape.segs as u64;
        stats::set(&self.stats.held_bytes, self.held_mem);
        stats::set(&self.stats.held_packets, self.held_segs);
        Some(h.frame)
    }

    /// When something next has to happen, if anything waits.
    pub fn next_wake(&self) -> Option<Nanos> {
        let held = self.held.peek().map(|h| h.due);
        [held, self.next_shaper, self.queue.next_timer()].into_iter().flatten().min()
    }

    pub fn held_memory(&self) -> u64 {
        self.queue.mem() + self.held_mem
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use crate::trace::Trace;

    const MS: Nanos = 1_000_000;

    fn pipe(spec: &str) -> Pipeline {
        let cfg = parse(spec, &|_| Err("no files".into())).unwrap();
        Pipeline::new(cfg, Arc::new(DirStats::default()), 0)
    }

    fn frame(bytes: usize, at: Nanos) -> Frame {
        Frame {
            data: vec![0; bytes + 10],
            shape: Shape { segs: 1, wire_bytes: bytes as u64 },
            arrival: at,
        }
    }

    /// Run the pipeline in 10 us steps; return each frame's exit time.
    fn drive(p: &mut Pipeline, arrivals: &[(Nanos, usize)], until: Nanos) -> Vec<Nanos> {
        let mut out = Vec::new();
        let mut i = 0;
        let mut now = 0;
        while now <= until {
            while i < arrivals.len() && arrivals[i].0 <= now {
                p.arrive(frame(arrivals[i].1, arrivals[i].0), now);
                i += 1;
            }
            p.advance(now);
            while p.pop_due(now).is_some() {
                out.push(now);
            }
            now += 10_000;
        }
        out
    }

    #[test]
    fn fixed_delay() {
        let mut p = pipe("delay=0.02");
        let out = drive(&mut p, &[(0, 100), (5 * MS, 100)], 40 * MS);
        assert_eq!(out, vec![20 * MS, 25 * MS]);
    }

    #[test]
    fn jitter_stays_in_bounds_and_keeps_order_without_reorder() {
        let mut p = pipe("delay=0.02,jitter=0.005,reorder=0");
        let arr: Vec<_> = (0..500).map(|i| (i * 100_000, 100)).collect();
        let mut now = 0;
        let mut seen = Vec::new();
        let mut k = 0;
        while now < 200 * MS {
            while k < arr.len() && arr[k].0 <= now {
                let mut f = frame(100, now);
                f.data[0] = (k % 256) as u8;
                p.arrive(f, now);
                k += 1;
            }
            while let Some(f) = p.pop_due(now) {
                seen.push((f.data[0], now - f.arrival));
            }
            now += 10_000;
        }
        assert_eq!(seen.len(), 500);
        assert!(seen.iter().all(|&(_, d)| (15 * MS..=76 * MS).contains(&d)));
        let order: Vec<u8> = seen.iter().map(|s| s.0).collect();
        let want: Vec<u8> = (0..500).map(|k| (k % 256) as u8).collect();
        assert_eq!(order, want);
    }

    #[test]
    fn jitter_with_reorder_reorders() {
        let mut p = pipe("delay=0.02,jitter=0.005");
        let mut seqs = Vec::new();
        for k in 0..200u64 {
            let mut f = frame(100, k * 100_000);
            f.data[0] = k as u8;
            p.arrive(f, k * 100_000);
        }
        while let Some(f) = p.pop_due(u64::MAX) {
            seqs.push(f.data[0]);
        }
        assert!(seqs.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn rate_paces_frames() {
        // 1500 bytes at 12 Mbit/s = 1 ms each.
        let mut p = pipe("rate=12000000");
        let out = drive(&mut p, &[(0, 1500), (0, 1500), (0, 1500)], 10 * MS);
        assert_eq!(out, vec![MS, 2 * MS, 3 * MS]);
    }

    #[test]
    fn pps_paces_frames_whatever_their_size() {
        // 1000 frames/s: 1 ms each, small or large, where the rate alone would be faster.
        for bytes in [60, 1514] {
            let mut p = pipe("pps=1000");
            let out = drive(&mut p, &[(0, bytes), (0, bytes), (0, bytes)], 10 * MS);
            assert_eq!(out, vec![MS, 2 * MS, 3 * MS], "{bytes} bytes");
        }
        // With a rate too, the slower of the two serves: 1500 B at 1.2 Mbit/s = 10 ms.
        let mut p = pipe("rate=1200000,pps=1000");
        let out = drive(&mut p, &[(0, 1500), (0, 60)], 20 * MS);
        assert_eq!(out, vec![10 * MS, 11 * MS]);
    }

    #[test]
    fn pps_counts_a_super_frame_as_its_segments() {
        let mut p = pipe("pps=1000");
        let mut f = frame(4500, 0);
        f.shape.segs = 3;
        p.arrive(f, 0);
        p.arrive(frame(60, 0), 0);
        let mut out = Vec::new();
        let mut now = 0;
        while now <= 10 * MS {
            p.advance(now);
            while p.pop_due(now).is_some() {
                out.push(now);
            }
            now += 10_000;
        }
        assert_eq!(out, vec![3 * MS, 4 * MS]);
    }

    #[test]
    fn queue_limit_bounds_latency() {
        // 100 frames at once into a 10-packet queue at 12 Mbit/s: the first goes on
        // the wire at once (out of the queue, as a qdisc hands it to the driver), 10
        // wait, 89 are dropped; the last one is out after 11 ms (frames / rate).
        let mut p = pipe("rate=12000000,queue_packets=10");
        let arr: Vec<_> = (0..100).map(|_| (0, 1500)).collect();
        let out = drive(&mut p, &arr, 50 * MS);
        assert_eq!(out.len(), 11);
        assert_eq!(*out.last().unwrap(), 11 * MS);
        assert_eq!(p.stats.dropped_queue.load(std::sync::atomic::Ordering::Relaxed), 89);
        let mut p = pipe("rate=12000000,queue_bytes=4500");
        let out = drive(&mut p, &arr, 50 * MS);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn a_late_batch_meets_the_queue_a_link_would_have_had() {
        // 25,000 frames/s offered for 200 ms into pps=20000 with a 1000-frame queue:
        // the queue fills to 1000 by the end, nothing is dropped. One driver runs every
        // 10 us; the other stalls for 40 ms near the end and then reads the 1000 frames
        // that came meanwhile in one batch, dated by their arrival (as the kernel
        // stamps them). Both must drop nothing and pass the same frames.
        let arr: Vec<Nanos> = (0..5000).map(|i| i * 40_000).collect();
        let until = 600 * MS;
        let steady = {
            let mut p = pipe("pps=20000,queue_packets=1000");
            drive(&mut p, &arr.iter().map(|&t| (t, 60)).collect::<Vec<_>>(), until);
            p
        };
        let mut p = pipe("pps=20000,queue_packets=1000");
        stall_then_read(&mut p, &arr, (150 * MS, 190 * MS), until, true);
        // 5000 frames in 200 ms at 25k/s: 1000 more than 20k/s serves; the queue of
        // 1000 holds them but for the one the link is sending.
        assert_eq!((dropped(&steady), passed(&steady)), (0, 5000));
        assert_eq!((dropped(&p), passed(&p)), (0, 5000));
        // A stall of 90 ms from 100 ms, when 500 frames wait: dated by arrival, the link
        // drains those by 125 ms and holds 950 at 190 ms. Dated by the read (what the
        // wire did before it stamped every shaped direction), the link looks idle from
        // 125 to 190 ms and 2250 frames come at once: 1 to send, 1000 to queue, 1249 lost.
        let mut p = pipe("pps=20000,queue_packets=1000");
        stall_then_read(&mut p, &arr, (100 * MS, 190 * MS), until, true);
        assert_eq!((dropped(&p), passed(&p)), (0, 5000));
        let mut p = pipe("pps=20000,queue_packets=1000");
        stall_then_read(&mut p, &arr, (100 * MS, 190 * MS), until, false);
        assert!(dropped(&p) >= 1249, "{}", dropped(&p));
        assert!(pipe("pps=20000").wants_arrival_stamps() && pipe("delay=0.01").wants_arrival_stamps());
        assert!(!pipe("").wants_arrival_stamps());
    }

    fn dropped(p: &Pipeline) -> u64 {
        p.stats.dropped_queue.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn passed(p: &Pipeline) -> u64 {
        p.stats.received.load(std::sync::atomic::Ordering::Relaxed) - dropped(p)
    }

    /// Drive in 10 us steps but for a stall, after which the frames that came meanwhile
    /// are read in one batch, dated by their arrival (`stamped`) or by the read.
    fn stall_then_read(p: &mut Pipeline, arr: &[Nanos], stall: (Nanos, Nanos), until: Nanos, stamped: bool) {
        let mut now = 0;
        let mut i = 0;
        while now <= until {
            if !(stall.0..stall.1).contains(&now) {
                while i < arr.len() && arr[i] <= now {
                    let at = if stamped { arr[i] } else { now };
                    p.arrive(frame(60, at), at);
                    i += 1;
                }
                p.advance(now);
                while p.pop_due(now).is_some() {}
            }
            now += 10_000;
        }
    }

    #[test]
    fn memory_is_bounded_at_any_delay_rate_product() {
        // 1 Gbit/s offered into a 1 s delay: the held bytes stop at max_held.
        let mut p = pipe("delay=1,rate=1000000000,queue_bytes=1000000,max_held=8000000");
        let mut now = 0;
        for _ in 0..100_000 {
            p.arrive(frame(1500, now), now);
            now += 12_000;
            p.advance(now);
            assert!(p.held_memory() <= 8_000_000 + 1510);
        }
        assert!(p.stats.dropped_queue.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }

    #[test]
    fn trace_sets_capacity() {
        // One opportunity per ms for 1 s, two per ms for the next: 12 then 24 Mbit/s.
        let mut text = String::new();
        for ms in 1..=1000 {
            text += &format!("{ms}\n");
        }
        for ms in 1001..=2000 {
            text += &format!("{ms}\n{ms}\n");
        }
        let mut cfg = parse("queue_packets=100000", &|_| Err("x".into())).unwrap();
        cfg.trace = Some(Trace::parse(&text).unwrap());
        let mut p = Pipeline::new(cfg, Arc::new(DirStats::default()), 0);
        // Offer 40 Mbit/s of full-size (1514-byte) frames for two periods (4 s).
        let arr: Vec<_> = (0..13334u64).map(|i| (i * 300_000, 1514)).collect();
        let out = drive(&mut p, &arr, 4000 * MS);
        for cycle in 0..2 {
            let base = cycle * 2000 * MS;
            let first = out.iter().filter(|&&t| t > base && t <= base + 1000 * MS).count();
            let second =
                out.iter().filter(|&&t| t > base + 1000 * MS && t <= base + 2000 * MS).count();
            assert!((first as i64 - 1000).abs() <= 2, "cycle {cycle}: {first}");
            assert!((second as i64 - 2000).abs() <= 2, "cycle {cycle}: {second}");
        }
    }

    #[test]
    fn random_loss_and_duplication_rates() {
        let mut p = pipe("loss=1,dup=2");
        for i in 0..200_000 {
            p.arrive(frame(100, i), i);
        }
        let s = &p.stats;
        let lost = s.dropped_loss.load(std::sync::atomic::Ordering::Relaxed) as f64 / 2e5;
        let dup = s.duplicated.load(std::sync::atomic::Ordering::Relaxed) as f64 / 2e5;
        assert!((lost - 0.01).abs() < 0.001, "{lost}");
        assert!((dup - 0.0198).abs() < 0.001, "{dup}");
    }
}
