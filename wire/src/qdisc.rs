//! The queue in front of a rate-limited direction: `fifo` (drop-tail), `codel`
//! (RFC 8289), `fq_codel` (RFC 8290) or `sfq`, with Linux's defaults and option
//! names. Facts from the RFCs and from Linux's sch_fq_codel.c, codel_impl.h and
//! sch_sfq.c; the code is the wire's own.
//!
//! A GSO super-frame counts as its segments towards packet limits (as the
//! wire's FIFO always has) and as its wire bytes towards quanta and deficits
//! (qdisc_pkt_len in Linux), so offloads do not change the discipline.

use std::collections::VecDeque;

use crate::codel::{self, Acted};
use crate::config::QueueLimit;
use crate::flow;
use crate::pipeline::Frame;
use crate::rng::Rng;
use crate::stats::{self, DirStats};
use crate::{Nanos, NS_PER_SEC};

pub const MS: Nanos = 1_000_000;

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Fifo,
    Codel,
    FqCodel,
    Sfq,
}

/// Every option any discipline takes, with Linux's defaults (tc's names).
#[derive(Clone, Debug, PartialEq)]
pub struct QdiscConfig {
    pub kind: Kind,
    /// Packets (codel 1000, fq_codel 10240, sfq 127); fifo uses the direction's queue.
    pub limit: Option<u64>,
    pub memory_limit: u64,
    pub target: Nanos,
    pub interval: Nanos,
    pub ecn: Option<bool>,
    /// codel, fq_codel: CE-mark ECT packets that waited longer (Linux's ce_threshold).
    pub ce_threshold: Option<Nanos>,
    pub flows: u32,
    pub quantum: u64,
    pub perturb: Nanos,
    pub divisor: u32,
    pub depth: u64,
    pub keys: u16,
    /// fq_codel: hash hosts first (these keys, e.g. src) and share the link between
    /// them, then flows within each host: the seed's HTB-per-host-bucket with fq_codel
    /// leaves. 0: flows only.
    pub hosts: u16,
}

impl Default for QdiscConfig {
    fn default() -> Self {
        QdiscConfig {
            kind: Kind::Fifo,
            limit: None,
            memory_limit: 32 << 20,
            target: 5 * MS,
            interval: 100 * MS,
            ecn: None,
            ce_threshold: None,
            flows: 0,
            quantum: 1514,
            perturb: 0,
            divisor: 1024,
            depth: 127,
            keys: flow::FIVE_TUPLE,
            hosts: 0,
        }
    }
}

impl QdiscConfig {
    pub fn set(&mut self, k: &str, v: &str) -> Result<bool, String> {
        let int = |v: &str| v.parse::<u64>().map_err(|_| format!("{k}={v}: not a whole number"));
        let secs = |v: &str| match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Ok((s * NS_PER_SEC as f64).round() as Nanos),
            _ => Err(format!("{k}={v}: expected seconds, 0 or more")),
        };
        match k {
            "qdisc" => {
                self.kind = match v {
                    "fifo" => Kind::Fifo,
                    "codel" => Kind::Codel,
                    "fq_codel" => Kind::FqCodel,
                    "sfq" => Kind::Sfq,
                    _ => return Err(format!("qdisc={v}: the wire has fifo, codel, fq_codel and sfq")),
                }
            }
            "limit" => self.limit = Some(int(v)?.max(1)),
            "memory_limit" => self.memory_limit = int(v)?,
            "target" => self.target = secs(v)?,
            "interval" => self.interval = secs(v)?.max(1),
            "ecn" => self.ecn = Some(v == "1" || v == "true"),
            "ce_threshold" => self.ce_threshold = Some(secs(v)?),
            "flows" => self.flows = int(v)?.clamp(1, 65536) as u32,
            "quantum" => self.quantum = int(v)?.max(1),
            "perturb" => self.perturb = secs(v)?,
            "divisor" => {
                let d = int(v)?;
                if !(d.is_power_of_two() && d <= 65536) {
                    return Err(format!("{k}={v}: a power of two up to 65536, as in Linux"));
                }
                self.divisor = d as u32
            }
            "depth" => self.depth = int(v)?.clamp(1, 127),
            "keys" => self.keys = flow::parse_keys(v)?,
            "hosts" => self.hosts = flow::parse_keys(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Bytes, segments and buffer memory of what a queue holds.
#[derive(Clone, Copy, Debug, Default)]
struct Backlog {
    bytes: u64,
    segs: u64,
    mem: u64,
}

impl Backlog {
    fn add(&mut self, f: &Frame) {
        self.bytes += f.shape.wire_bytes;
        self.segs += f.shape.segs as u64;
        self.mem += f.data.len() as u64;
    }
    fn sub(&mut self, f: &Frame) {
        self.bytes -= f.shape.wire_bytes;
        self.segs -= f.shape.segs as u64;
        self.mem -= f.data.len() as u64;
    }
}

fn count(st: &DirStats, a: Acted) {
    stats::add(&st.dropped_aqm, a.dropped);
    stats::add(&st.ecn_marked, a.marked);
    stats::add(&st.ce_marked, a.ce_marked);
}

struct Fifo {
    q: VecDeque<Frame>,
    limit: Option<QueueLimit>,
}

struct Codel {
    q: VecDeque<Frame>,
    limit: u64,
    params: codel::Params,
    vars: codel::Vars,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

struct FlowQueue {
    q: VecDeque<Frame>,
    bytes: u64,
    deficit: i64,
    list: List,
    /// The host bucket whose lists hold this flow while it is in one.
    host: usize,
}

/// One host bucket: its flows' new and old lists, and its own deficit in the
/// round between hosts.
#[derive(Default)]
struct Host {
    new: VecDeque<usize>,
    old: VecDeque<usize>,
    deficit: i64,
    active: bool,
}

struct FqCodel {
    flows: Vec<FlowQueue>,
    vars: Vec<codel::Vars>,
    /// One bucket (flows only) unless `hosts` keys are set.
    hosts: Vec<Host>,
    /// Host buckets with flows, in service order.
    ring: VecDeque<usize>,
    host_keys: u16,
    params: codel::Params,
    quantum: i64,
    limit: u64,
    memory_limit: u64,
    keys: u16,
}

struct Slot {
    q: VecDeque<Frame>,
    bucket: usize,
    allot: i64,
}

struct Sfq {
    slots: Vec<Slot>,
    /// Hash bucket -> slot, as Linux's `ht`.
    buckets: Vec<Option<usize>>,
    /// Free slots, lowest index last (taken first).
    free: Vec<usize>,
    /// Active slots in service order; the front is served.
    ring: VecDeque<usize>,
    limit: u64,
    depth: u64,
    quantum: i64,
    keys: u16,
    salt: u64,
    rng: Rng,
    perturb: Nanos,
    next_perturb: Nanos,
}

enum Inner {
    Fifo(Fifo),
    Codel(Codel),
    FqCodel(FqCodel),
    Sfq(Sfq),
}

pub struct Qdisc {
    inner: Inner,
    backlog: Backlog,
}

/// Linux's bound on SFQ's slots (0x10000 - SFQ_MAX_DEPTH - 1); 128 by default.
const SFQ_MAX_FLOWS: usize = 65408;
const SFQ_DEFAULT_FLOWS: usize = 128;
/// Packets fq_codel drops at most from the fattest flow when over a limit.
const DROP_BATCH: usize = 64;

impl Qdisc {
    /// `fifo_limit`: the direction's queue (drop-tail); `origin`: the wire's start,
    /// from which SFQ's perturbation timer runs.
    pub fn new(c: &QdiscConfig, fifo_limit: Option<QueueLimit>, seed: u64, origin: Nanos) -> Qdisc {
        let params = |ecn_default: bool| codel::Params {
            target: c.target,
            interval: c.interval,
            mtu: 1514,
            ecn: c.ecn.unwrap_or(ecn_default),
            ce_threshold: c.ce_threshold,
        };
        let inner = match c.kind {
            Kind::Fifo => Inner::Fifo(Fifo { q: VecDeque::new(), limit: fifo_limit }),
            Kind::Codel => Inner::Codel(Codel {
                q: VecDeque::new(),
                limit: c.limit.unwrap_or(1000),
                params: params(false),
                vars: codel::Vars::default(),
            }),
            Kind::FqCodel => {
                let n = if c.flows == 0 { 1024 } else { c.flows as usize };
                Inner::FqCodel(FqCodel {
                    flows: (0..n)
                        .map(|_| FlowQueue { q: VecDeque::new(), bytes: 0, deficit: 0, list: List::None, host: 0 })
                        .collect(),
                    vars: vec![codel::Vars::default(); n],
                    hosts: (0..if c.hosts == 0 { 1 } else { c.divisor as usize }).map(|_| Host::default()).collect(),
                    ring: VecDeque::new(),
                    host_keys: c.hosts,
                    params: params(true),
                    quantum: c.quantum as i64,
                    limit: c.limit.unwrap_or(10240),
                    memory_limit: c.memory_limit,
                    keys: c.keys,
                })
            }
            Kind::Sfq => {
                let n = if c.flows == 0 { SFQ_DEFAULT_FLOWS } else { (c.flows as usize).min(SFQ_MAX_FLOWS) };
                let mut rng = Rng::new(seed ^ 0x5f71_5f71);
                let salt = rng.next_u64();
                Inner::Sfq(Sfq {
                    slots: (0..n).map(|_| Slot { q: VecDeque::new(), bucket: 0, allot: 0 }).collect(),
                    buckets: vec![None; c.divisor as usize],
                    free: (0..n).rev().collect(),
                    ring: VecDeque::new(),
                    limit: c.limit.unwrap_or(127),
                    depth: c.depth,
                    quantum: c.quantum as i64,
                    keys: c.keys,
                    salt,
                    rng,
                    perturb: c.perturb,
                    next_perturb: if c.perturb > 0 { origin + c.perturb } else { 0 },
                })
            }
        };
        Qdisc { inner, backlog: Backlog::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.backlog.segs == 0
    }
    pub fn bytes(&self) -> u64 {
        self.backlog.bytes
    }
    pub fn segs(&self) -> u64 {
        self.backlog.segs
    }
    pub fn mem(&self) -> u64 {
        self.backlog.mem
    }

    /// Flow queues that hold packets or wait in a service list.
    pub fn flows_active(&self) -> u64 {
        match &self.inner {
            Inner::FqCodel(q) => q.ring.iter().map(|&h| (q.hosts[h].new.len() + q.hosts[h].old.len()) as u64).sum(),
            Inner::Sfq(q) => q.ring.len() as u64,
            _ => u64::from(!self.is_empty()),
        }
    }

    /// The FIFO's head, for the trace-driven server (which serves FIFO only).
    pub fn fifo_front(&self) -> Option<&Frame> {
        match &self.inner {
            Inner::Fifo(q) => q.q.front(),
            _ => None,
        }
    }

    pub fn enqueue(&mut self, f: Frame, st: &DirStats) {
        let b = &mut self.backlog;
        match &mut self.inner {
            Inner::Fifo(q) => {
                // An empty queue takes any one frame, so a super-frame above the limit still passes.
                let over = b.segs > 0
                    && match q.limit {
                        Some(QueueLimit::Packets(n)) => b.segs + f.shape.segs as u64 > n,
                        Some(QueueLimit::Bytes(n)) => b.bytes + f.shape.wire_bytes > n,
                        None => false,
                    };
                if over {
                    return stats::inc(&st.dropped_queue);
                }
                b.add(&f);
                q.q.push_back(f);
            }
            Inner::Codel(q) => {
                if b.segs > 0 && b.segs + f.shape.segs as u64 > q.limit {
                    return stats::inc(&st.dropped_queue);
                }
                b.add(&f);
                q.q.push_back(f);
            }
            Inner::FqCodel(q) => q.enqueue(f, b, st),
            Inner::Sfq(q) => q.enqueue(f, b, st),
        }
    }

    pub fn dequeue(&mut self, now: Nanos, st: &DirStats) -> Option<Frame> {
        let b = &mut self.backlog;
        match &mut self.inner {
            Inner::Fifo(q) => {
                let f = q.q.pop_front()?;
                b.sub(&f);
                Some(f)
            }
            Inner::Codel(q) => {
                let mut acted = Acted::default();
                let queue = &mut q.q;
                let mut next = || {
                    let f = queue.pop_front()?;
                    b.sub(&f);
                    Some((f, b.bytes))
                };
                let f = q.vars.dequeue(&q.params, now, &mut acted, &mut next);
                count(st, acted);
                f
            }
            Inner::FqCodel(q) => q.dequeue(now, b, st),
            Inner::Sfq(q) => q.dequeue(b),
        }
    }

    /// Timers of the discipline (SFQ's perturbation), run at `now`.
    pub fn tick(&mut self, now: Nanos, st: &DirStats) {
        if let Inner::Sfq(q) = &mut self.inner {
            while q.perturb > 0 && now >= q.next_perturb {
                q.rehash(&mut self.backlog, st);
                stats::inc(&st.rehashes);
                q.next_perturb += q.perturb;
            }
        }
    }

    /// When `tick` next has something to do.
    pub fn next_timer(&self) -> Option<Nanos> {
        match &self.inner {
            Inner::Sfq(q) if q.perturb > 0 => Some(q.next_perturb),
            _ => None,
        }
    }
}

impl FqCodel {
    fn enqueue(&mut self, f: Frame, b: &mut Backlog, st: &DirStats) {
        let (host, salt) = if self.host_keys == 0 {
            (0, 0)
        } else {
            let h = flow::hash(&f.data, self.host_keys, 0);
            ((h % self.hosts.len() as u64) as usize, h)
        };
        let idx = (flow::hash(&f.data, self.keys, salt) % self.flows.len() as u64) as usize;
        b.add(&f);
        let fl = &mut self.flows[idx];
        fl.bytes += f.shape.wire_bytes;
        fl.q.push_back(f);
        if fl.list == List::None {
            fl.list = List::New;
            fl.deficit = self.quantum;
            fl.host = host;
            let hq = &mut self.hosts[host];
            hq.new.push_back(idx);
            if !hq.active {
                hq.active = true;
                hq.deficit = self.quantum;
                self.ring.push_back(host);
            }
        }
        if b.segs > self.limit || b.mem > self.memory_limit {
            self.drop_from_fattest(b, st);
        }
    }

    /// Over a limit: drop from the head of the flow with the most bytes queued,
    /// up to half its backlog (at most 64 packets), as Linux's fq_codel_drop.
    fn drop_from_fattest(&mut self, b: &mut Backlog, st: &DirStats) {
        let Some(fat) = (0..self.flows.len()).max_by_key(|&i| self.flows[i].bytes) else { return };
        let fl = &mut self.flows[fat];
        let threshold = fl.bytes / 2;
        let mut dropped = 0;
        for _ in 0..DROP_BATCH {
            let Some(f) = fl.q.pop_front() else { break };
            fl.bytes -= f.shape.wire_bytes;
            b.sub(&f);
            dropped += f.shape.wire_bytes;
            stats::inc(&st.dropped_queue);
            if dropped >= threshold {
                break;
            }
        }
    }

    /// Deficit round robin between host buckets (one bucket without `hosts`), then
    /// fq_codel's new/old flow lists within the bucket served.
    fn dequeue(&mut self, now: Nanos, b: &mut Backlog, st: &DirStats) -> Option<Frame> {
        loop {
            let &h = self.ring.front()?;
            if self.hosts.len() > 1 && self.hosts[h].deficit <= 0 {
                self.hosts[h].deficit += self.quantum;
                self.ring.rotate_left(1);
                continue;
            }
            match self.dequeue_host(h, now, b, st) {
                Some(f) => {
                    self.hosts[h].deficit -= f.shape.wire_bytes as i64;
                    return Some(f);
                }
                None => {
                    self.ring.pop_front();
                    self.hosts[h].active = false;
                }
            }
        }
    }

    fn dequeue_host(&mut self, h: usize, now: Nanos, b: &mut Backlog, st: &DirStats) -> Option<Frame> {
        loop {
            let hq = &mut self.hosts[h];
            let (from_new, idx) = match (hq.new.front(), hq.old.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let list = if from_new { &mut hq.new } else { &mut hq.old };
            if self.flows[idx].deficit <= 0 {
                self.flows[idx].deficit += self.quantum;
                list.pop_front();
                hq.old.push_back(idx);
                self.flows[idx].list = List::Old;
                continue;
            }
            let mut acted = Acted::default();
            let fl = &mut self.flows[idx];
            let mut next = || {
                let f = fl.q.pop_front()?;
                fl.bytes -= f.shape.wire_bytes;
                b.sub(&f);
                Some((f, b.bytes))
            };
            let got = self.vars[idx].dequeue(&self.params, now, &mut acted, &mut next);
            count(st, acted);
            match got {
                Some(f) => {
                    self.flows[idx].deficit -= f.shape.wire_bytes as i64;
                    return Some(f);
                }
                None => {
                    // An emptied new flow goes to the end of the old list once (so a
                    // flow cannot regain priority by emptying its queue), an emptied
                    // old flow leaves the lists.
                    let hq = &mut self.hosts[h];
                    let list = if from_new { &mut hq.new } else { &mut hq.old };
                    list.pop_front();
                    if from_new && !hq.old.is_empty() {
                        hq.old.push_back(idx);
                        self.flows[idx].list = List::Old;
                    } else {
                        self.flows[idx].list = List::None;
                    }
                }
            }
        }
    }
}

impl Sfq {
    fn bucket(&self, f: &Frame) -> usize {
        (flow::hash(&f.data, self.keys, self.salt) % self.buckets.len() as u64) as usize
    }

    /// Put a frame in its flow's slot; false when it was dropped (no slot free, or
    /// the slot is at its depth).
    fn place(&mut self, f: Frame, b: &mut Backlog, st: &DirStats) -> bool {
        let bucket = self.bucket(&f);
        let x = match self.buckets[bucket] {
            Some(x) => x,
            None => {
                let Some(x) = self.free.pop() else {
                    stats::inc(&st.dropped_queue);
                    return false;
                };
                self.buckets[bucket] = Some(x);
                self.slots[x].bucket = bucket;
                x
            }
        };
        let slot = &mut self.slots[x];
        if slot.q.len() as u64 >= self.depth {
            stats::inc(&st.dropped_queue);
            if slot.q.is_empty() {
                self.release(x);
            }
            return false;
        }
        b.add(&f);
        slot.q.push_back(f);
        if slot.q.len() == 1 {
            // A new flow joins at the end of the round.
            slot.allot = self.quantum;
            self.ring.push_back(x);
        }
        true
    }

    fn release(&mut self, x: usize) {
        self.buckets[self.slots[x].bucket] = None;
        self.free.push(x);
    }

    fn enqueue(&mut self, f: Frame, b: &mut Backlog, st: &DirStats) {
        if self.place(f, b, st) && b.segs > self.limit {
            // Over the limit: drop the newest packet of the longest flow.
            let Some(&x) = self.ring.iter().max_by_key(|&&x| self.slots[x].q.len()) else { return };
            if let Some(f) = self.slots[x].q.pop_back() {
                b.sub(&f);
                stats::inc(&st.dropped_queue);
            }
            if self.slots[x].q.is_empty() {
                self.ring.retain(|&y| y != x);
                self.release(x);
            }
        }
    }

    fn dequeue(&mut self, b: &mut Backlog) -> Option<Frame> {
        loop {
            let &x = self.ring.front()?;
            let slot = &mut self.slots[x];
            if slot.allot <= 0 {
                slot.allot += self.quantum;
                self.ring.rotate_left(1);
                continue;
            }
            let f = slot.q.pop_front()?;
            b.sub(&f);
            if slot.q.is_empty() {
                self.ring.pop_front();
                self.release(x);
            } else {
                slot.allot -= f.shape.wire_bytes as i64;
            }
            return Some(f);
        }
    }

    /// A new hash, and every queued packet moved to its new flow's slot, as Linux's
    /// sfq_rehash: packets are taken out slot by slot in slot order and put back in
    /// that order, so flows are served in a new order (and may now share a slot).
    fn rehash(&mut self, b: &mut Backlog, st: &DirStats) {
        self.salt = self.rng.next_u64();
        let mut all = Vec::with_capacity(b.segs as usize);
        for slot in self.slots.iter_mut() {
            all.extend(slot.q.drain(..));
        }
        *b = Backlog::default();
        self.ring.clear();
        self.buckets.iter_mut().for_each(|x| *x = None);
        self.free = (0..self.slots.len()).rev().collect();
        for f in all {
            self.place(f, b, st);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Shape;

    fn cfg(spec: &[(&str, &str)]) -> QdiscConfig {
        let mut c = QdiscConfig::default();
        for (k, v) in spec {
            assert!(c.set(k, v).unwrap());
        }
        c
    }

    fn pkt(host: u8, port: u16, at: Nanos) -> Frame {
        let mut data = flow::tests::v4([10, 0, 0, host], [10, 0, 9, 9], 6, port, 5201, 0);
        data.resize(1024, 0);
        Frame { data, shape: Shape { segs: 1, wire_bytes: 1014 }, arrival: at }
    }

    fn src_of(f: &Frame) -> u8 {
        flow::headers(&f.data).unwrap().outer.src[3]
    }

    /// Keep every flow backlogged; return the share of dequeues per source host.
    fn shares(q: &mut Qdisc, flows: &[(u8, u16)], n: usize) -> std::collections::BTreeMap<u8, f64> {
        let st = DirStats::default();
        let mut got = std::collections::BTreeMap::new();
        for i in 0..n {
            for &(h, p) in flows {
                q.enqueue(pkt(h, p, i as Nanos), &st);
            }
            for _ in 0..flows.len() / 2 {
                let f = q.dequeue(i as Nanos, &st).unwrap();
                *got.entry(src_of(&f)).or_insert(0.0) += 1.0;
            }
        }
        let total: f64 = got.values().sum();
        got.values_mut().for_each(|v| *v /= total);
        got
    }

    const FOUR: [(u8, u16); 4] = [(1, 1000), (1, 1001), (1, 1002), (2, 1000)];

    #[test]
    fn fq_codel_shares_by_flow_or_by_host() {
        let mut q = Qdisc::new(&cfg(&[("qdisc", "fq_codel"), ("limit", "100000")]), None, 1, 0);
        let s = shares(&mut q, &FOUR, 2000);
        assert!((s[&2] - 0.25).abs() < 0.01, "{s:?}");
        let mut q = Qdisc::new(&cfg(&[("qdisc", "fq_codel"), ("keys", "src"), ("limit", "100000")]), None, 1, 0);
        let s = shares(&mut q, &FOUR, 2000);
        assert!((s[&2] - 0.5).abs() < 0.01, "{s:?}");
    }

    #[test]
    fn fq_codel_hosts_first_then_flows() {
        // Host 1 has three flows, host 2 two: each host gets half, and host 2's two
        // flows a quarter each.
        let flows = [(1, 1000), (1, 1001), (1, 1002), (2, 1000), (2, 1001), (2, 1002)];
        let c = cfg(&[("qdisc", "fq_codel"), ("hosts", "src"), ("limit", "100000")]);
        let mut q = Qdisc::new(&c, None, 1, 0);
        let st = DirStats::default();
        let mut by_flow = std::collections::BTreeMap::new();
        for i in 0..3000u64 {
            for &(h, p) in &flows[..5] {
                q.enqueue(pkt(h, p, i), &st);
            }
            for _ in 0..2 {
                let f = q.dequeue(i, &st).unwrap();
                let t = flow::headers(&f.data).unwrap().outer;
                *by_flow.entry((t.src[3], t.sport)).or_insert(0.0) += 1.0 / 6000.0;
            }
        }
        let host2: f64 = by_flow.iter().filter(|(k, _)| k.0 == 2).map(|(_, v)| v).sum();
        assert!((host2 - 0.5).abs() < 0.01, "{by_flow:?}");
        assert!((by_flow[&(2, 1000)] - 0.25).abs() < 0.01, "{by_flow:?}");
        assert!((by_flow[&(1, 1000)] - 1.0 / 6.0).abs() < 0.01, "{by_flow:?}");
    }

    #[test]
    fn sfq_shares_by_host_with_src_key() {
        let c = cfg(&[("qdisc", "sfq"), ("keys", "src"), ("limit", "100000"), ("depth", "127")]);
        let mut q = Qdisc::new(&c, None, 1, 0);
        let s = shares(&mut q, &FOUR, 500);
        assert!((s[&2] - 0.5).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn fq_codel_new_flow_goes_first() {
        let st = DirStats::default();
        let mut q = Qdisc::new(&cfg(&[("qdisc", "fq_codel")]), None, 1, 0);
        for i in 0..50 {
            q.enqueue(pkt(1, 1000, i), &st);
        }
        q.dequeue(50, &st).unwrap();
        q.dequeue(50, &st).unwrap(); // the bulk flow has used its quantum: now old
        q.enqueue(pkt(2, 7, 60), &st);
        assert_eq!(src_of(&q.dequeue(60, &st).unwrap()), 2, "a sparse flow skips the bulk queue");
        assert_eq!(q.flows_active(), 2);
    }

    #[test]
    fn fq_codel_over_limit_drops_from_the_fattest_flow() {
        let st = DirStats::default();
        let mut q = Qdisc::new(&cfg(&[("qdisc", "fq_codel"), ("limit", "100")]), None, 1, 0);
        for i in 0..100 {
            q.enqueue(pkt(1, 1000, i), &st);
        }
        q.enqueue(pkt(2, 7, 100), &st);
        // 101 > 100: half of the fat flow's bytes go (50 packets), the new one stays.
        assert_eq!(st.dropped_queue.load(std::sync::atomic::Ordering::Relaxed), 50);
        assert_eq!(q.segs(), 51);
        let mut srcs = Vec::new();
        while let Some(f) = q.dequeue(200, &st) {
            srcs.push(src_of(&f));
        }
        assert_eq!(srcs.iter().filter(|&&s| s == 2).count(), 1);
    }

    #[test]
    fn sfq_rehash_keeps_every_packet_and_counts_on_the_grid() {
        let st = DirStats::default();
        let c = cfg(&[("qdisc", "sfq"), ("perturb", "5"), ("limit", "1000")]);
        let mut q = Qdisc::new(&c, None, 7, 1000);
        for i in 0..40 {
            q.enqueue(pkt(1 + (i % 4) as u8, 1000 + i as u16 % 4, i), &st);
        }
        assert_eq!(q.next_timer(), Some(1000 + 5 * NS_PER_SEC));
        q.tick(1000 + 5 * NS_PER_SEC - 1, &st);
        assert_eq!(st.rehashes.load(std::sync::atomic::Ordering::Relaxed), 0);
        q.tick(1000 + 15 * NS_PER_SEC, &st);
        assert_eq!(st.rehashes.load(std::sync::atomic::Ordering::Relaxed), 3);
        assert_eq!(q.next_timer(), Some(1000 + 20 * NS_PER_SEC));
        assert_eq!(q.segs(), 40);
        let mut n = 0;
        while q.dequeue(0, &st).is_some() {
            n += 1;
        }
        assert_eq!(n, 40);
        assert!(q.is_empty());
    }

    #[test]
    fn sfq_depth_and_limit() {
        let st = DirStats::default();
        let mut q = Qdisc::new(&cfg(&[("qdisc", "sfq"), ("depth", "10")]), None, 1, 0);
        for i in 0..20 {
            q.enqueue(pkt(1, 1000, i), &st);
        }
        assert_eq!(q.segs(), 10);
        let mut q = Qdisc::new(&cfg(&[("qdisc", "sfq"), ("limit", "8")]), None, 1, 0);
        for i in 0..6 {
            q.enqueue(pkt(1, 1000, i), &st);
            q.enqueue(pkt(2, 1000, i), &st);
        }
        assert_eq!(q.segs(), 8);
    }

    #[test]
    fn options_refused_with_their_name() {
        let mut c = QdiscConfig::default();
        assert!(c.set("divisor", "1000").unwrap_err().contains("divisor"));
        assert!(c.set("qdisc", "cake").is_err());
        assert!(c.set("keys", "src+bogus").is_err());
        assert!(!c.set("delay", "1").unwrap());
    }
}
