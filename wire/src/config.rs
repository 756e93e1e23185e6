//! One direction's impairments, from the command line.
//!
//! The Python side passes normalised values (seconds, percent, bits per
//! second, bytes) as `key=value` pairs joined by commas, e.g.
//! `delay=0.02,jitter=0.002,loss=1,rate=50000000,queue_bytes=125000`.

use crate::loss::{GilbertElliott, LossModel};
use crate::qdisc::{Kind, QdiscConfig};
use crate::trace::Trace;

/// Held bytes per direction when nothing smaller is asked for: bounds memory at
/// any delay x rate product (a 1 Gbit/s, 1 s link would otherwise hold 125 MB).
pub const DEFAULT_MAX_HELD: u64 = 64 << 20;
/// A rate-limited direction's queue when none is given: pfifo's default.
pub const DEFAULT_QUEUE_PACKETS: u64 = 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Packets(u64),
    Bytes(u64),
}

#[derive(Clone, Debug)]
pub struct DirConfig {
    pub delay_s: f64,
    pub jitter_s: f64,
    /// With jitter, may a frame overtake an earlier one (netem's behaviour)?
    pub reorder: bool,
    pub loss: LossModel,
    pub duplicate: f64,
    pub rate_bps: Option<u64>,
    /// A ceiling in wire frames per second (a GSO super-frame counts as its segments):
    /// a router limited by its CPU per packet, not by bits. With `rate`, a frame takes
    /// the longer of the two service times.
    pub pps: Option<u64>,
    pub trace: Option<Trace>,
    pub queue: Option<QueueLimit>,
    /// The rate limiter's queue discipline (fifo unless asked).
    pub qdisc: QdiscConfig,
    pub max_held_bytes: u64,
    pub seed: u64,
}

impl Default for DirConfig {
    fn default() -> Self {
        DirConfig {
            delay_s: 0.0,
            jitter_s: 0.0,
            reorder: true,
            loss: LossModel::None,
            duplicate: 0.0,
            rate_bps: None,
            pps: None,
            trace: None,
            queue: None,
            qdisc: QdiscConfig::default(),
            max_held_bytes: DEFAULT_MAX_HELD,
            seed: 1,
        }
    }
}

impl DirConfig {
    pub fn is_shaped(&self) -> bool {
        self.rate_bps.is_some() || self.pps.is_some() || self.trace.is_some()
    }

    /// Served by a clock of our own (a rate, a frame ceiling or both), not by a trace.
    pub fn is_paced(&self) -> bool {
        self.rate_bps.is_some() || self.pps.is_some()
    }
}

fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{key}={v}: not a valid number"))
}

fn pct(key: &str, v: &str) -> Result<f64, String> {
    let p: f64 = num(key, v)?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{key}={v}: a percentage must be within 0..100"));
    }
    Ok(p / 100.0)
}

fn nonneg(key: &str, v: &str) -> Result<f64, String> {
    let x: f64 = num(key, v)?;
    if !(x.is_finite() && x >= 0.0) {
        return Err(format!("{key}={v}: must be 0 or more"));
    }
    Ok(x)
}

/// Parse a direction spec; `read` loads a trace file (a parameter so tests need no files).
pub fn parse(spec: &str, read: &dyn Fn(&str) -> Result<String, String>) -> Result<DirConfig, String> {
    let mut c = DirConfig::default();
    let (mut loss, mut burst, mut ge) = (0.0, None, None);
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').ok_or(format!("{item}: expected key=value"))?;
        match k {
            "delay" => c.delay_s = nonneg(k, v)?,
            "jitter" => c.jitter_s = nonneg(k, v)?,
            "reorder" => c.reorder = v == "1" || v == "true",
            "loss" => loss = pct(k, v)?,
            "loss_burst" => {
                let b = nonneg(k, v)?;
                if b < 1.0 {
                    return Err(format!("{item}: a mean burst is 1 frame or more"));
                }
                burst = Some(b)
            }
            "ge" => {
                let parts: Vec<&str> = v.split('/').collect();
                if parts.len() != 4 {
                    return Err(format!("{item}: expected ge=P/R/LOSS_BAD/LOSS_GOOD in percent"));
                }
                ge = Some(GilbertElliott {
                    p: pct(k, parts[0])?,
                    r: pct(k, parts[1])?,
                    loss_bad: pct(k, parts[2])?,
                    loss_good: pct(k, parts[3])?,
                });
            }
            "dup" => c.duplicate = pct(k, v)?,
            "rate" => {
                let r: u64 = num(k, v)?;
                if r == 0 {
                    return Err(format!("{item}: rate must be above 0"));
                }
                c.rate_bps = Some(r)
            }
            "pps" => {
                let r: u64 = num(k, v)?;
                if r == 0 {
                    return Err(format!("{item}: pps must be above 0"));
                }
                c.pps = Some(r)
            }
            "queue_packets" => c.queue = Some(QueueLimit::Packets(num(k, v)?)),
            "queue_bytes" => c.queue = Some(QueueLimit::Bytes(num(k, v)?)),
            "max_held" => c.max_held_bytes = num(k, v)?,
            "seed" => c.seed = num(k, v)?,
            "trace" => c.trace = Some(Trace::parse(&read(v)?).map_err(|e| format!("{v}: {e}"))?),
            _ => {
                if !c.qdisc.set(k, v)? {
                    return Err(format!("{item}: unknown impairment {k:?}"));
                }
            }
        }
    }
    if c.is_paced() && c.trace.is_some() {
        return Err("rate or pps and trace exclude each other".into());
    }
    if c.qdisc.kind != Kind::Fifo && c.trace.is_some() {
        return Err("a trace is served from a fifo queue only".into());
    }
    if c.qdisc.kind != Kind::Fifo && !c.is_paced() {
        return Err("a queue discipline needs a rate or pps (it queues in front of the bottleneck)".into());
    }
    c.loss = match (ge, burst) {
        (Some(params), _) => LossModel::Ge { params, bad: false },
        (None, Some(b)) => LossModel::Ge { params: GilbertElliott::from_burst(loss, b), bad: false },
        (None, None) if loss > 0.0 => LossModel::Random(loss),
        _ => LossModel::None,
    };
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(_: &str) -> Result<String, String> {
        Err("no files here".into())
    }

    #[test]
    fn parses_a_full_spec() {
        let c = parse("delay=0.02,jitter=0.001,reorder=0,loss=1,dup=0.5,rate=50000000,queue_bytes=1000", &no_files).unwrap();
        assert_eq!(c.delay_s, 0.02);
        assert!(!c.reorder);
        assert!(matches!(c.loss, LossModel::Random(p) if (p - 0.01).abs() < 1e-12));
        assert_eq!(c.queue, Some(QueueLimit::Bytes(1000)));
        assert_eq!(c.rate_bps, Some(50_000_000));
        assert_eq!(c.pps, None);
        let c = parse("pps=20000,queue_packets=20", &no_files).unwrap();
        assert_eq!((c.pps, c.rate_bps), (Some(20_000), None));
        assert!(c.is_shaped() && c.is_paced());
    }

    #[test]
    fn qdisc_options_as_tc_names_them() {
        let c = parse("rate=20000000,qdisc=fq_codel,target=0.005,interval=0.1,flows=1024,quantum=1514,limit=10240,memory_limit=33554432,ecn=0,keys=src", &no_files).unwrap();
        assert_eq!(c.qdisc.kind, Kind::FqCodel);
        assert_eq!(c.qdisc.target, 5_000_000);
        assert_eq!(c.qdisc.ecn, Some(false));
        assert_eq!(c.qdisc.keys, crate::flow::SRC);
        assert_eq!(c.qdisc.ce_threshold, None);
        let c = parse("rate=1000000,qdisc=codel,ce_threshold=0.0005", &no_files).unwrap();
        assert_eq!(c.qdisc.ce_threshold, Some(500_000));
        let c = parse("rate=1000000,qdisc=sfq,perturb=5,limit=10,divisor=16", &no_files).unwrap();
        assert_eq!((c.qdisc.perturb, c.qdisc.limit, c.qdisc.divisor), (5_000_000_000, Some(10), 16));
    }

    #[test]
    fn burst_turns_loss_into_gilbert() {
        let c = parse("loss=2,loss_burst=4", &no_files).unwrap();
        assert!(matches!(c.loss, LossModel::Ge { .. }));
    }

    #[test]
    fn refuses_nonsense() {
        for bad in ["delay=-1", "loss=101", "rate=0", "bogus=1", "delay", "ge=1/2", "loss_burst=0.5", "trace=x",
                    "qdisc=fq_codel", "pps=0", "pps=x", "pps=10,trace=t", "rate=1000,qdisc=fq_codel,target=x", "rate=1000,qdisc=sfq,divisor=3"] {
            assert!(parse(bad, &no_files).is_err(), "{bad}");
        }
    }
}
