//! Whole Ethernet frames (Ethernet, IPv4 or IPv6, UDP, payload; no FCS: the NIC or veth
//! adds none to count) for the AF_PACKET sender, built once per flow, then stamped per
//! frame with the UDP checksum brought up to date from a precomputed partial sum: the
//! stamp is the only part of a frame that changes.

use std::net::IpAddr;

use crate::stamp;

pub const ETH_LEN: usize = 14;
pub const UDP_LEN: usize = 8;

#[derive(Debug, Clone)]
pub struct Spec {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub payload: usize,
}

/// One flow's frame: its bytes (stamp zero) and what stamping it needs.
#[derive(Debug, Clone)]
pub struct Frame {
    pub bytes: Vec<u8>,
    /// Offset of the UDP header in `bytes`.
    udp: usize,
    /// One's-complement sum (unfolded) of the pseudo-header, the UDP header with a zero
    /// checksum and the payload with a zero stamp.
    base: u64,
}

/// Adds big-endian 16-bit words of `data` (an odd last byte padded with zero).
pub fn sum16(data: &[u8]) -> u64 {
    let mut s = 0u64;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        s += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        s += u64::from(*last) << 8;
    }
    s
}

/// The one's-complement of the folded sum: an Internet checksum (RFC 1071).
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn ip_header(spec: &Spec, udp_len: usize) -> (Vec<u8>, Vec<u8>) {
    match (spec.src, spec.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
            h[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = fold(sum16(&h));
            h[10..12].copy_from_slice(&c.to_be_bytes());
            let mut pseudo = [s.octets(), d.octets()].concat();
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
            (h, pseudo)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&(udp_len as u16).to_be_bytes());
            h.extend_from_slice(&[17, 64]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let mut pseudo = [s.octets(), d.octets()].concat();
            pseudo.extend_from_slice(&(udp_len as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            (h, pseudo)
        }
        _ => panic!("source and destination of one family"),
    }
}

impl Frame {
    pub fn new(spec: &Spec) -> Frame {
        let udp_len = UDP_LEN + spec.payload;
        let (ip, pseudo) = ip_header(spec, udp_len);
        let ethertype: u16 = if spec.dst.is_ipv6() { 0x86dd } else { 0x0800 };
        let mut bytes = Vec::with_capacity(ETH_LEN + ip.len() + udp_len);
        bytes.extend_from_slice(&spec.dst_mac);
        bytes.extend_from_slice(&spec.src_mac);
        bytes.extend_from_slice(&ethertype.to_be_bytes());
        bytes.extend_from_slice(&ip);
        let udp = bytes.len();
        bytes.extend_from_slice(&spec.sport.to_be_bytes());
        bytes.extend_from_slice(&spec.dport.to_be_bytes());
        bytes.extend_from_slice(&(udp_len as u16).to_be_bytes());
        bytes.extend_from_slice(&[0, 0]);
        bytes.resize(udp + udp_len, 0x55);
        bytes[udp + UDP_LEN..udp + UDP_LEN + stamp::LEN].fill(0);
        let base = sum16(&pseudo) + sum16(&bytes[udp..]);
        Frame { bytes, udp, base }
    }

    /// Writes the stamp into `buf` (a copy of `bytes`) and its UDP checksum to match.
    pub fn stamp(&self, buf: &mut [u8], seq: u32, sent_ns: u64) {
        let at = self.udp + UDP_LEN;
        stamp::write(&mut buf[at..], seq, sent_ns);
        let c = match fold(self.base + sum16(&buf[at..at + stamp::LEN])) {
            0 => 0xffff, // a computed zero is sent as all ones (RFC 768)
            c => c,
        };
        buf[self.udp + 6..self.udp + 8].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str, dst: &str, payload: usize) -> Spec {
        Spec { dst_mac: [2, 0, 0, 0, 0, 2], src_mac: [2, 0, 0, 0, 0, 1],
               src: src.parse().unwrap(), dst: dst.parse().unwrap(), sport: 40000,
               dport: 5201, payload }
    }

    /// A received frame checks as a receiver checks it: the sum over the header (IPv4)
    /// and over pseudo-header and UDP datagram, checksums included, folds to zero.
    fn verifies(f: &Frame, buf: &[u8], pseudo_len: &[u8], src_dst: &[u8]) -> bool {
        let udp = &buf[f.udp..];
        let pseudo = sum16(src_dst) + sum16(pseudo_len);
        fold(pseudo + sum16(udp)) == 0
    }

    #[test]
    fn an_ipv4_frame_of_64_bytes_with_valid_checksums() {
        let f = Frame::new(&spec("10.0.0.1", "10.0.1.2", 18));
        assert_eq!(f.bytes.len(), 60, "64 bytes on the wire with the FCS");
        assert_eq!(&f.bytes[12..14], &[0x08, 0x00]);
        assert_eq!(fold(sum16(&f.bytes[14..34])), 0, "IPv4 header checksum");
        assert_eq!(&f.bytes[16..18], &46u16.to_be_bytes(), "IPv4 total length");
        let mut buf = f.bytes.clone();
        for (seq, ns) in [(0u32, 0u64), (1, 1_700_000_000_123_456_789), (u32::MAX, u64::MAX)] {
            f.stamp(&mut buf, seq, ns);
            assert_eq!(stamp::read(&buf[42..]), Some((seq, ns)));
            assert!(verifies(&f, &buf, &[0, 17, 0, 26], &buf[26..34]),
                    "UDP checksum of seq {seq}");
        }
        // Known answer: a checksum computed independently (Python's one's-complement
        // sum over the same pseudo-header and datagram) for seq 1, stamp 1000 ns.
        f.stamp(&mut buf, 1, 1000);
        assert_eq!(&buf[40..42], &[0x51, 0x22]);
    }

    #[test]
    fn an_ipv6_frame_of_78_bytes_with_a_valid_udp_checksum() {
        let f = Frame::new(&spec("fd00::1", "fd00:1::2", 12));
        assert_eq!(f.bytes.len(), 74, "78 bytes on the wire with the FCS (RFC 5180)");
        assert_eq!(&f.bytes[12..14], &[0x86, 0xdd]);
        let mut buf = f.bytes.clone();
        f.stamp(&mut buf, 7, 123_456_789);
        let len = [0, 0, 0, 20, 0, 0, 0, 17];
        assert!(verifies(&f, &buf, &len, &buf[22..54]));
        assert_ne!(&buf[60..62], &[0, 0], "IPv6 UDP always carries a checksum");
    }

    #[test]
    fn an_odd_payload_is_padded_in_the_sum() {
        let f = Frame::new(&spec("10.0.0.1", "10.0.1.2", 1473));
        let mut buf = f.bytes.clone();
        f.stamp(&mut buf, 9, 99);
        assert_eq!(buf.len(), 14 + 20 + 8 + 1473);
        assert!(verifies(&f, &buf, &[0, 17, 0x05, 0xc9], &buf[26..34]));
    }
}
