//! hoplab-gen send --dst ADDR --port P --payload BYTES [--rate FPS] [--count N]
//!                 [--seconds S] [--flows F]
//!                 [--dev IFACE --src ADDR --src-mac MAC --dst-mac MAC
//!                  [--qdisc through|around]]
//! hoplab-gen recv --port P [--bind ADDR] [--idle S] [--max S]
//!
//! send: frames (UDP datagrams of BYTES of payload) to ADDR:P from F sockets (distinct
//! source ports, so RSS spreads them), or, given --dev, as whole Ethernet frames written
//! to an AF_PACKET socket on IFACE (packet.rs; MACs: its own, the next hop's), through
//! IFACE's qdisc or, with --qdisc around, past it, evenly spaced at FPS (none: as fast as it can),
//! until N are sent or S seconds passed; prints {"sent", "refused", "seconds", "resets",
//! "stalled", "batch"}: paced, "sent" counts the frames offered, "refused" those of them
//! the kernel could not take at their time (counted as offered: the path did not take
//! them), "stalled" the seconds lost in stalls (pace.rs: restarts late by more than twice
//! the lag allowed).
//! recv: counts stamped frames on port P until none came for S seconds (after the
//! first) or --max passed; prints {"received", "out_of_order", "latency_us"}.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ExitCode;

use hoplab_gen::frame::{Frame, Spec};
use hoplab_gen::hist::Hist;
use hoplab_gen::pace::{Schedule, MAX_BATCH};
use hoplab_gen::stamp;

mod packet;

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `due` on the monotonic clock (timer slack 1 ns, real-time priority: woken
/// within some microseconds). It does not spin: a sender spinning through its gaps at
/// real-time priority takes the core from the lab's own processes (a userspace wire lost
/// 15 % of its rate beside one), and a late wake-up is caught up within the lag allowed.
fn wait_until(due: u64) {
    if due <= now_ns(libc::CLOCK_MONOTONIC) {
        return;
    }
    let ts = libc::timespec { tv_sec: (due / 1_000_000_000) as libc::time_t,
                              tv_nsec: (due % 1_000_000_000) as libc::c_long };
    // SAFETY: ts is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts,
                                   std::ptr::null_mut()) };
}

fn setopt(fd: i32, level: i32, name: i32, val: i32) {
    // SAFETY: val lives for the call; a failure leaves the default, which still works.
    unsafe {
        libc::setsockopt(fd, level, name, &val as *const i32 as *const libc::c_void,
                         std::mem::size_of::<i32>() as libc::socklen_t);
    }
}

/// Real-time priority where allowed (root): a sender woken on time, not after the other
/// runnable tasks of a busy machine had their turn. It sleeps through each gap, so it
/// stays below the kernel's real-time throttling. Without it, it paces less evenly.
fn realtime() {
    let p = libc::sched_param { sched_priority: 10 };
    // SAFETY: p is a valid sched_param; pid 0 is this thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
}

/// Stays on the CPU it runs on. A veth delivers each frame to the backlog of the CPU that
/// sent it, and each CPU's backlog is processed on its own: a sender that moved from one
/// CPU to the other mid-trial had frames of the second overtake those still queued on
/// the first. A CI run read 0.024 % of the test frames out of order on a path with none.
fn stay_on_this_cpu() {
    // SAFETY: sched_getcpu takes nothing; cpu_set_t is plain data, zeroed then set.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

struct Args(HashMap<String, String>);

impl Args {
    fn parse(argv: &[String]) -> Result<Args, String> {
        let mut map = HashMap::new();
        let mut it = argv.iter();
        while let Some(key) = it.next() {
            let name = key.strip_prefix("--").ok_or(format!("not an option: {key}"))?;
            let value = it.next().ok_or(format!("--{name} needs a value"))?;
            map.insert(name.to_string(), value.clone());
        }
        Ok(Args(map))
    }

    fn get<T: std::str::FromStr>(&self, name: &str, default: Option<T>) -> Result<T, String> {
        match self.0.get(name) {
            Some(v) => v.parse().map_err(|_| format!("--{name}: not a valid value: {v}")),
            None => default.ok_or(format!("--{name} is required")),
        }
    }
}

/// Where frames go: UDP sockets (one per flow), or whole frames (one per flow, each its
/// own source port) to an AF_PACKET socket on the sending interface.
enum Wire {
    Udp(Vec<UdpSocket>),
    Packet(OwnedFd, Vec<Frame>),
}

struct Sender {
    wire: Wire,
    bufs: Vec<Vec<u8>>,
    /// The flow whose frame `bufs` hold (packet wire: copied in when the flow changes).
    filled: Option<usize>,
    seq: u32,
}

/// The packet wire's frames: --dev, --src, --src-mac and --dst-mac (the next hop's).
fn packet_wire(a: &Args, dst: SocketAddr, payload: usize, flows: usize) -> Result<Option<Wire>, String> {
    let Some(dev) = a.0.get("dev") else { return Ok(None) };
    let src: IpAddr = a.get("src", None)?;
    let mac = |name: &str| -> Result<[u8; 6], String> {
        let text: String = a.get(name, None)?;
        packet::mac(&text).ok_or(format!("--{name}: not a MAC address: {text}"))
    };
    let (src_mac, dst_mac) = (mac("src-mac")?, mac("dst-mac")?);
    if src.is_ipv6() != dst.is_ipv6() {
        return Err("--src and --dst are of one family".into());
    }
    let frames = (0..flows).map(|i| Frame::new(&Spec {
        dst_mac, src_mac, src, dst: dst.ip(), sport: SPORT + i as u16, dport: dst.port(), payload,
    })).collect();
    let around = match a.0.get("qdisc").map(String::as_str) {
        None | Some("through") => false,
        Some("around") => true,
        Some(other) => return Err(format!("--qdisc is through or around, not {other}")),
    };
    let sock = packet::socket(dev, around).map_err(|e| format!("AF_PACKET socket on {dev}: {e}"))?;
    Ok(Some(Wire::Packet(sock, frames)))
}

/// The packet wire's first source port (then one more per flow).
const SPORT: u16 = 49152;

impl Sender {
    fn new(wire: Option<Wire>, dst: SocketAddr, payload: usize, flows: usize) -> io::Result<Sender> {
        let wire = match wire {
            Some(w) => w,
            None => Wire::Udp(udp_sockets(dst, flows)?),
        };
        let len = match &wire {
            Wire::Udp(_) => payload,
            Wire::Packet(_, frames) => frames[0].bytes.len(),
        };
        let bufs = vec![vec![0x55u8; len]; MAX_BATCH as usize];
        Ok(Sender { wire, bufs, filled: None, seq: 0 })
    }

    fn name(&self) -> &'static str {
        match self.wire {
            Wire::Udp(_) => "udp",
            Wire::Packet(..) => "packet",
        }
    }

    /// Stamps the first `n` buffers for flow `flow`; the socket to send them on.
    fn fill(&mut self, n: usize, flow: usize) -> i32 {
        let stamp_ns = now_ns(libc::CLOCK_REALTIME);
        match &self.wire {
            Wire::Udp(socks) => {
                for buf in self.bufs.iter_mut().take(n) {
                    stamp::write(buf, self.seq, stamp_ns);
                    self.seq = self.seq.wrapping_add(1);
                }
                socks[flow % socks.len()].as_raw_fd()
            }
            Wire::Packet(sock, frames) => {
                let k = flow % frames.len();
                if self.filled != Some(k) {
                    for buf in self.bufs.iter_mut() {
                        buf.copy_from_slice(&frames[k].bytes);
                    }
                }
                for buf in self.bufs.iter_mut().take(n) {
                    frames[k].stamp(buf, self.seq, stamp_ns);
                    self.seq = self.seq.wrapping_add(1);
                }
                self.filled = Some(k);
                sock.as_raw_fd()
            }
        }
    }

    /// Sends `n` frames (at most MAX_BATCH) in one sendmmsg on flow `flow`: (frames the
    /// kernel took, frames it refused). Paced (`wait` false), a frame the kernel cannot
    /// take now (a full socket buffer, or a full queue at the interface for the packet
    /// wire: a veth's peer pushes back) is refused, not waited for: it was offered at its
    /// time, and a generator that waited would fall behind its schedule. A refusal of the
    /// socket (ICMP port unreachable from an earlier frame) is not a stop.
    fn batch(&mut self, n: usize, flow: usize, wait: bool) -> io::Result<(usize, usize)> {
        let fd = self.fill(n, flow);
        let mut iov: Vec<libc::iovec> = self.bufs.iter_mut().take(n).map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
        // SAFETY: mmsghdr is plain data; zeroed is a valid empty header.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        let mut done = 0usize;
        while done < n {
            // SAFETY: msgs[done..] point at live iovecs and buffers.
            let rc = unsafe { libc::sendmmsg(fd, msgs[done..].as_mut_ptr(), (n - done) as u32, flags) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ECONNREFUSED) | Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) if !wait => return Ok((done, n - done)),
                    Some(libc::ENOBUFS) => continue,
                    _ => return Err(e),
                }
            }
            done += rc as usize;
        }
        Ok((done, 0))
    }
}

fn udp_sockets(dst: SocketAddr, flows: usize) -> io::Result<Vec<UdpSocket>> {
    let any: IpAddr = if dst.is_ipv6() { "::".parse().unwrap() } else { "0.0.0.0".parse().unwrap() };
    let mut socks = Vec::new();
    for _ in 0..flows {
        let s = UdpSocket::bind((any, 0))?;
        s.connect(dst)?;
        setopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);
        socks.push(s);
    }
    Ok(socks)
}

fn send(a: &Args) -> Result<String, String> {
    let dst: IpAddr = a.get("dst", None)?;
    let port: u16 = a.get("port", None)?;
    let payload: usize = a.get("payload", None)?;
    let rate: f64 = a.get("rate", Some(0.0))?;
    let count: u64 = a.get("count", Some(u64::MAX))?;
    let seconds: f64 = a.get("seconds", Some(f64::INFINITY))?;
    let flows: usize = a.get("flows", Some(1))?;
    if !(stamp::LEN..=65_507).contains(&payload) {
        return Err(format!("--payload is {} to 65507 bytes (the stamp's), not {payload}", stamp::LEN));
    }
    if count == u64::MAX && seconds.is_infinite() {
        return Err("--count or --seconds is required".into());
    }
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    realtime();
    stay_on_this_cpu();
    let to = SocketAddr::new(dst, port);
    let wire = packet_wire(a, to, payload, flows.max(1))?;
    let mut tx = Sender::new(wire, to, payload, flows.max(1))
        .map_err(|e| format!("socket to {dst}:{port}: {e}"))?;
    let start = now_ns(libc::CLOCK_MONOTONIC);
    let limit = start + (seconds.min(1e6) * 1e9) as u64;
    let mut sched = (rate > 0.0).then(|| Schedule::new(rate, start));
    let batch = sched.as_ref().map_or(MAX_BATCH, |s| s.batch);
    // `sent` counts the frames offered: those the kernel took and those it refused.
    let (mut sent, mut refused, mut first, mut last, mut k) = (0u64, 0u64, 0u64, start, 0usize);
    while sent < count {
        if let Some(s) = &sched {
            wait_until(s.due_ns());
        }
        let now = now_ns(libc::CLOCK_MONOTONIC);
        if now >= limit {
            break;
        }
        if sent == 0 {
            first = now;
        }
        let n = batch.min(count - sent) as usize;
        let (took, no) = tx.batch(n, k, sched.is_none()).map_err(|e| format!("sendmmsg: {e}"))?;
        sent += (took + no) as u64;
        refused += no as u64;
        k += 1;
        last = now_ns(libc::CLOCK_MONOTONIC);
        if let Some(s) = &mut sched {
            s.sent(now);
        }
    }
    // Paced: N frames take N gaps (the last one's gap included); unpaced: the time taken.
    let took = match &sched {
        Some(s) => (last.max(first) - first) as f64 / 1e9 + s.interval_ns / 1e9,
        None => (last - first) as f64 / 1e9,
    };
    let resets = sched.as_ref().map_or(0, |s| s.resets);
    let stalled = sched.as_ref().map_or(0, |s| s.stalled_ns) as f64 / 1e9;
    Ok(format!("{{\"sent\": {sent}, \"refused\": {refused}, \"seconds\": {took:.9}, \
                \"resets\": {resets}, \"stalled\": {stalled:.9}, \"batch\": {batch}, \
                \"wire\": \"{}\"}}", tx.name()))
}

const RX_BATCH: usize = 64;
const CMSG_SPACE: usize = 64;

fn recv(a: &Args) -> Result<String, String> {
    let port: u16 = a.get("port", None)?;
    let bind: IpAddr = a.get("bind", Some("0.0.0.0".parse().unwrap()))?;
    let idle: f64 = a.get("idle", Some(2.0))?;
    let max: f64 = a.get("max", Some(3600.0))?;
    let sock = UdpSocket::bind((bind, port)).map_err(|e| format!("bind {bind}:{port}: {e}"))?;
    let fd = sock.as_raw_fd();
    setopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 16 << 20);
    setopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    sock.set_read_timeout(Some(std::time::Duration::from_millis(50))).map_err(|e| e.to_string())?;
    let start = now_ns(libc::CLOCK_MONOTONIC);
    let (idle_ns, max_ns) = ((idle * 1e9) as u64, (max * 1e9) as u64);
    let mut bufs = vec![[0u8; 2048]; RX_BATCH];
    let mut ctl = vec![[0u8; CMSG_SPACE]; RX_BATCH];
    let mut hist = Hist::default();
    let (mut received, mut ooo, mut top, mut last) = (0u64, 0u64, None::<u32>, start);
    loop {
        let now = now_ns(libc::CLOCK_MONOTONIC);
        if now - start > max_ns || (received > 0 && now - last > idle_ns) {
            break;
        }
        let mut iov: Vec<libc::iovec> = bufs.iter_mut().map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
        // SAFETY: zeroed mmsghdr is a valid empty header; pointers set below stay live.
        let mut msgs: Vec<libc::mmsghdr> = (0..RX_BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        for ((m, v), c) in msgs.iter_mut().zip(iov.iter_mut()).zip(ctl.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_control = c.as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = CMSG_SPACE as _;
        }
        // SAFETY: msgs points at RX_BATCH headers with live buffers.
        let rc = unsafe { libc::recvmmsg(fd, msgs.as_mut_ptr(), RX_BATCH as u32,
                                         libc::MSG_WAITFORONE, std::ptr::null_mut()) };
        if rc <= 0 {
            continue;
        }
        let fallback = now_ns(libc::CLOCK_REALTIME);
        for (i, m) in msgs.iter().take(rc as usize).enumerate() {
            let Some((seq, sent)) = stamp::read(&bufs[i][..m.msg_len as usize]) else { continue };
            received += 1;
            match top {
                Some(t) if seq < t => ooo += 1,
                _ => top = Some(seq),
            }
            let arrived = rx_time(&m.msg_hdr).unwrap_or(fallback);
            hist.add(arrived.saturating_sub(sent));
        }
        last = now_ns(libc::CLOCK_MONOTONIC);
    }
    let us = |q: f64| hist.quantile(q).map_or("null".to_string(), |v| format!("{:.3}", v / 1e3));
    let max_us = if hist.n > 0 { format!("{:.3}", hist.max_ns as f64 / 1e3) } else { "null".into() };
    Ok(format!("{{\"received\": {received}, \"out_of_order\": {ooo}, \"latency_us\": \
                {{\"median\": {}, \"p99\": {}, \"max\": {max_us}}}}}", us(0.5), us(0.99)))
}

/// The kernel's receive time of a message (SO_TIMESTAMPNS, CLOCK_REALTIME), if given.
fn rx_time(h: &libc::msghdr) -> Option<u64> {
    // SAFETY: the CMSG_* macros walk the control buffer recvmmsg filled in for `h`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        Some("send") => Args::parse(&argv[1..]).and_then(|a| send(&a)),
        Some("recv") => Args::parse(&argv[1..]).and_then(|a| recv(&a)),
        _ => Err("usage: hoplab-gen send|recv --option value ...".into()),
    };
    match result {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hoplab-gen: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sender_stays_on_one_cpu() {
        super::stay_on_this_cpu();
        // SAFETY: cpu_set_t is plain data for sched_getaffinity to fill.
        let count = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(),
                                               &mut set), 0);
            libc::CPU_COUNT(&set)
        };
        assert_eq!(count, 1);
    }
}
