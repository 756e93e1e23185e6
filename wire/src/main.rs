//! hoplab-wire: carry one lab link between interfaces A and B and impair it.
//!
//! ```text
//! hoplab-wire --a IFACE --b IFACE [--forward SPEC] [--reverse SPEC]
//!             [--stats PATH] [--interval SECONDS]
//! ```
//! `--forward` impairs A -> B, `--reverse` B -> A (see `config` for SPEC).
//! The stats file, rewritten atomically every interval, appears once both
//! sockets are bound: that is the readiness signal. Exit status: 0 after
//! SIGTERM/SIGINT, 3 when an interface went away (the link is gone),
//! 2 for bad arguments, 1 for other errors.

use std::io::{self, ErrorKind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use hoplab_wire::config::{self, DirConfig};
use hoplab_wire::frame::{classify, MAX_FRAME, VNET_HDR_LEN};
use hoplab_wire::io::{ifindex, now_ns, realtime_offset_ns, tight_timer_slack, wait_readable, PacketSocket};
use hoplab_wire::pipeline::{Frame, Pipeline};
use hoplab_wire::stats::{self, DirStats};

static STOP: AtomicBool = AtomicBool::new(false);
/// Why the wire stops: 0 signal, 1 error, 3 link gone.
static REASON: AtomicU8 = AtomicU8::new(0);
const MAX_WAIT_NS: u64 = 100_000_000;
const LINK_CHECK_NS: u64 = 250_000_000;
const RX_BATCH: usize = 256;

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Relaxed);
}

struct Args {
    a: String,
    b: String,
    forward: DirConfig,
    reverse: DirConfig,
    stats: Option<PathBuf>,
    interval: Duration,
}

fn usage() -> String {
    "usage: hoplab-wire --a IFACE --b IFACE [--forward SPEC] [--reverse SPEC] [--stats PATH] [--interval S]\n\
     SPEC: comma-separated delay=S,jitter=S,reorder=0|1,loss=PCT,loss_burst=N,ge=P/R/BAD/GOOD,\n\
     dup=PCT,rate=BPS,pps=FRAMES_PER_S,queue_packets=N,queue_bytes=N,trace=FILE,max_held=BYTES,seed=N,\n\
     qdisc=fifo|codel|fq_codel|sfq, and tc's options: limit=N,memory_limit=BYTES,target=S,\n\
     interval=S,ecn=0|1,ce_threshold=S,flows=N,quantum=BYTES,perturb=S,divisor=N,depth=N,
     keys=K+K (tc flow keys),hosts=K+K"
        .into()
}

fn parse_args() -> Result<Args, String> {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let mut it = std::env::args().skip(1);
    let (mut a, mut b, mut stats_path) = (None, None, None);
    let (mut fwd, mut rev) = (String::new(), String::new());
    let mut interval = Duration::from_millis(100);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(usage());
        }
        let v = it.next().ok_or(format!("{flag} needs a value\n{}", usage()))?;
        match flag.as_str() {
            "--a" => a = Some(v),
            "--b" => b = Some(v),
            "--forward" => fwd = v,
            "--reverse" => rev = v,
            "--stats" => stats_path = Some(PathBuf::from(v)),
            "--interval" => {
                let s: f64 = v.parse().map_err(|_| format!("--interval {v}: not a number"))?;
                if !(s > 0.0 && s.is_finite()) {
                    return Err(format!("--interval {v}: must be above 0"));
                }
                interval = Duration::from_secs_f64(s)
            }
            _ => return Err(format!("unknown option {flag}\n{}", usage())),
        }
    }
    let mut forward = config::parse(&fwd, &read).map_err(|e| format!("--forward: {e}"))?;
    let mut reverse = config::parse(&rev, &read).map_err(|e| format!("--reverse: {e}"))?;
    // Two directions with one seed would lose the same frames in step.
    forward.seed = forward.seed.wrapping_mul(2);
    reverse.seed = reverse.seed.wrapping_mul(2).wrapping_add(1);
    Ok(Args {
        a: a.ok_or(format!("--a is required\n{}", usage()))?,
        b: b.ok_or(format!("--b is required\n{}", usage()))?,
        forward,
        reverse,
        stats: stats_path,
        interval,
    })
}

fn link_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV))
}

fn send(tx: &PacketSocket, data: &[u8], st: &DirStats) {
    for attempt in 0..4 {
        match tx.send(data) {
            Ok(()) => {
                stats::inc(&st.passed);
                stats::add(&st.passed_bytes, (data.len() - VNET_HDR_LEN) as u64);
                return;
            }
            // A full send buffer drains within microseconds (veth frees at once).
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) || e.raw_os_error() == Some(libc::ENOBUFS) => {
                if attempt < 3 {
                    thread::sleep(Duration::from_micros(20));
                }
            }
            Err(_) => break,
        }
    }
    stats::inc(&st.dropped_error);
}

/// One direction: read from `rx`, impair, write to `tx`, until stopped.
fn run_direction(rx: &PacketSocket, tx: &PacketSocket, mut p: Pipeline) -> io::Result<()> {
    tight_timer_slack();
    let st = p.stats.clone();
    let transparent = p.is_transparent();
    // Date frames by the kernel's arrival stamp, not by when this thread got round to
    // reading them (late on a busy machine): see Pipeline::wants_arrival_stamps.
    let stamped = p.wants_arrival_stamps() && rx.enable_timestamps().is_ok();
    let mut offset = realtime_offset_ns();
    let mut buf = vec![0u8; VNET_HDR_LEN + MAX_FRAME + 1];
    let mut next_check = now_ns() + LINK_CHECK_NS;
    let mut last: u64 = 0;
    while !STOP.load(Relaxed) {
        for _ in 0..RX_BATCH {
            let got = if stamped { rx.recv_stamped(&mut buf) } else { rx.recv(&mut buf).map(|n| (n, None)) };
            match got {
                Ok((n, stamp)) => {
                    let read_at = now_ns();
                    // Never later than the read, never before the previous reads' clock.
                    let now = stamp.map_or(read_at, |t| ((t as i64 - offset).max(0) as u64).min(read_at)).max(last);
                    last = now;
                    match classify(&buf, n) {
                        Ok(_) if transparent => {
                            stats::inc(&st.received);
                            send(tx, &buf[..n], &st)
                        }
                        Ok(shape) => p.arrive(Frame { data: buf[..n].to_vec(), shape, arrival: now }, now),
                        Err(_) => stats::inc(&st.dropped_malformed),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        let now = now_ns();
        if stamped && now >= next_check {
            offset = realtime_offset_ns();
        }
        p.advance(now);
        while let Some(f) = p.pop_due(now) {
            send(tx, &f.data, &st);
        }
        if now >= next_check {
            next_check = now + LINK_CHECK_NS;
            for s in [rx, tx] {
                if ifindex(&s.ifname) != Some(s.ifindex) {
                    return Err(io::Error::from_raw_os_error(libc::ENODEV));
                }
                if let Some(e) = s.take_error() {
                    return Err(e);
                }
            }
        }
        let wait = match p.next_wake() {
            Some(w) => w.saturating_sub(now_ns()).min(MAX_WAIT_NS),
            None => MAX_WAIT_NS,
        };
        if wait > 0 {
            let rev = wait_readable(rx.raw(), wait)?;
            if rev & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                if let Some(e) = rx.take_error() {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

fn write_stats(path: &PathBuf, started: f64, fwd: &DirStats, rev: &DirStats) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let doc = stats::document(std::process::id(), started, now_ns() as f64 / 1e9, fwd, rev);
    std::fs::write(&tmp, doc)?;
    std::fs::rename(&tmp, path)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("hoplab-wire: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let open = |name: &str| {
        PacketSocket::open(name).map(Arc::new).map_err(|e| format!("interface {name}: {e}"))
    };
    let (sa, sb) = match (open(&args.a), open(&args.b)) {
        (Ok(sa), Ok(sb)) => (sa, sb),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("hoplab-wire: {e}");
            return ExitCode::from(3);
        }
    };
    let origin = now_ns();
    let (fs, rs) = (Arc::new(DirStats::default()), Arc::new(DirStats::default()));
    let dirs = [
        (sa.clone(), sb.clone(), Pipeline::new(args.forward, fs.clone(), origin), "a->b"),
        (sb.clone(), sa.clone(), Pipeline::new(args.reverse, rs.clone(), origin), "b->a"),
    ];
    let mut threads = Vec::new();
    for (rx, tx, p, name) in dirs {
        threads.push(thread::Builder::new().name(format!("wire {name}")).spawn(move || {
            if let Err(e) = run_direction(&rx, &tx, p) {
                let gone = link_gone(&e);
                REASON.store(if gone { 3 } else { 1 }, Relaxed);
                if gone {
                    eprintln!("hoplab-wire: {name}: the link went away ({e}); exiting");
                } else {
                    eprintln!("hoplab-wire: {name}: {e}");
                }
                STOP.store(true, Relaxed);
            }
        }).expect("spawn a direction thread"));
    }
    let started = origin as f64 / 1e9;
    while !STOP.load(Relaxed) {
        if let Some(path) = &args.stats {
            if let Err(e) = write_stats(path, started, &fs, &rs) {
                eprintln!("hoplab-wire: stats file {}: {e}", path.display());
            }
        }
        thread::sleep(args.interval);
    }
    for t in threads {
        let _ = t.join();
    }
    if let Some(path) = &args.stats {
        let _ = write_stats(path, started, &fs, &rs);
    }
    ExitCode::from(REASON.load(Relaxed))
}
