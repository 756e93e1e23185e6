//! AF_PACKET sockets with PACKET_VNET_HDR: each read or write moves one frame
//! or one GSO super-frame (up to 64 KiB) with its virtio-net header, so bulk
//! TCP costs one system call per ~44 segments and no segmentation happens in
//! the wire. See docs/wire.md for why this beats mmap rings here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Socket buffers: room for a few ms of 10 Gbit/s bursts of super-frames.
const SOCK_BUF: libc::c_int = 16 << 20;

pub struct PacketSocket {
    fd: OwnedFd,
    pub ifname: String,
    pub ifindex: u32,
}

fn check(rc: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(rc)
}

fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int, what: &str) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to a live c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &val as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(rc, what).map(|_| ())
}

pub fn ifindex(ifname: &str) -> Option<u32> {
    let c = CString::new(ifname).ok()?;
    // SAFETY: c is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

impl PacketSocket {
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        let index = ifindex(ifname)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}")))?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call.
        let raw = check(
            unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, proto as libc::c_int) },
            "socket(AF_PACKET)",
        )?;
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let f = fd.as_raw_fd();
        setopt(f, libc::SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
        // Our own transmissions on this interface (the other direction) must not come back.
        setopt(f, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING")?;
        setopt(f, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SOCK_BUF, "SO_RCVBUFFORCE")?;
        setopt(f, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SOCK_BUF, "SO_SNDBUFFORCE")?;
        // SAFETY: zeroed sockaddr_ll is a valid value; fields are set below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        check(
            unsafe {
                libc::bind(f, &sll as *const libc::sockaddr_ll as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
            },
            "bind",
        )?;
        Ok(PacketSocket { fd, ifname: ifname.to_string(), ifindex: index })
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Ask the kernel to stamp each received frame with its arrival (SO_TIMESTAMPNS):
    /// a thread that wakes late would otherwise date frames by when it read them.
    pub fn enable_timestamps(&self) -> io::Result<()> {
        setopt(self.raw(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")
    }

    /// Read one frame and its kernel arrival stamp (CLOCK_REALTIME, ns) when
    /// timestamps are on; the length is as `recv`'s.
    pub fn recv_stamped(&self, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg points at live buffers of the sizes it states.
        let n = unsafe { libc::recvmsg(self.raw(), &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
        // msg_controllen; a timespec is read unaligned from the cmsg's data.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok((n as usize, stamp))
    }

    /// Read one frame. Returns its full length, which is more than `buf` holds
    /// when it was truncated (MSG_TRUNC), so the caller can count it as oversized.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: buf is valid for writes of buf.len() bytes.
        let n = unsafe { libc::recv(self.raw(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_TRUNC) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    pub fn send(&self, data: &[u8]) -> io::Result<()> {
        // SAFETY: data is valid for reads of data.len() bytes.
        let n = unsafe { libc::send(self.raw(), data.as_ptr() as *const libc::c_void, data.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A pending socket error (ENETDOWN once the interface went away).
    pub fn take_error(&self) -> Option<io::Error> {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: err and len are valid for the sizes given.
        let rc = unsafe {
            libc::getsockopt(self.raw(), libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut libc::c_int as *mut libc::c_void, &mut len)
        };
        (rc == 0 && err != 0).then(|| io::Error::from_raw_os_error(err))
    }
}

/// Wait until `fd` is readable or `timeout_ns` passed; returns poll's revents.
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> io::Result<i16> {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t, tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: pfd and ts are valid; no signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(pfd.revents)
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, in ns: turns a kernel packet stamp
/// (realtime) into the wire's clock.
pub fn realtime_offset_ns() -> i64 {
    let mut rt = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: rt is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut rt) };
    let rt = rt.tv_sec * 1_000_000_000 + rt.tv_nsec;
    rt - now_ns() as i64
}

pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Timers fire within 1 us instead of the default 50 us slack: the delay
/// accuracy target is 0.5 ms over a round trip, and idle-link latency counts.
pub fn tight_timer_slack() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
}
