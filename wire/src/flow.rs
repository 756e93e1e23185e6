//! Which flow a frame belongs to, as tc's `flow` classifier keys it, and ECN marking.
//!
//! Keys (tc-flow names): `src`, `dst`, `proto`, `proto-src`, `proto-dst`, and the
//! same five read from a tunnel's inner headers (`tunnel-src`, ...) where the wire
//! can see them: IP-in-IP (IPv4/IPv6 in IPv4/IPv6, protocols 4 and 41) and VXLAN
//! (UDP port 4789). WireGuard's inner packets are encrypted: a WireGuard flow's
//! tunnel keys read as zero, so only its outer keys tell flows apart.

use std::hash::{Hash, Hasher};

use crate::frame::{ETH_HLEN, VNET_HDR_LEN};

const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_8021AD: u16 = 0x88a8;
const IPPROTO_IPIP: u8 = 4;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_IPV6: u8 = 41;
const IPPROTO_SCTP: u8 = 132;
const IPPROTO_UDPLITE: u8 = 136;
const VXLAN_PORT: u16 = 4789;

pub const SRC: u16 = 1;
pub const DST: u16 = 2;
pub const PROTO: u16 = 4;
pub const PROTO_SRC: u16 = 8;
pub const PROTO_DST: u16 = 16;
const TUNNEL_SHIFT: u16 = 5;
pub const FIVE_TUPLE: u16 = SRC | DST | PROTO | PROTO_SRC | PROTO_DST;

const NAMES: [(&str, u16); 5] =
    [("src", SRC), ("dst", DST), ("proto", PROTO), ("proto-src", PROTO_SRC), ("proto-dst", PROTO_DST)];

/// `src+dst+proto` (tc writes `src,dst,proto`; the wire's spec uses commas between
/// options, so keys are joined by `+`). Also `5-tuple` and `tunnel-5-tuple`.
pub fn parse_keys(s: &str) -> Result<u16, String> {
    let mut keys = 0;
    for k in s.split('+') {
        keys |= match k {
            "5-tuple" => FIVE_TUPLE,
            "tunnel-5-tuple" => FIVE_TUPLE << TUNNEL_SHIFT,
            _ => {
                let (inner, name) = match k.strip_prefix("tunnel-") {
                    Some(rest) => (true, rest),
                    None => (false, k),
                };
                let bit = NAMES.iter().find(|(n, _)| *n == name).map(|(_, b)| *b);
                let bit = bit.ok_or(format!("keys={s}: unknown flow key {k:?}"))?;
                if inner { bit << TUNNEL_SHIFT } else { bit }
            }
        };
    }
    Ok(keys)
}

/// The addressing of one IP header and what follows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuple {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    pub outer: Tuple,
    pub inner: Option<Tuple>,
}

fn be16(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]))
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP | IPPROTO_UDPLITE)
}

/// An IP packet at `b[at..]` of ethertype `ty`: its tuple and where its payload starts.
fn ip(b: &[u8], at: usize, ty: u16) -> Option<(Tuple, usize, bool)> {
    let mut t = Tuple::default();
    let (l4, first_fragment) = match ty {
        ETH_P_IP => {
            let ihl = (*b.get(at)? & 0x0f) as usize * 4;
            if ihl < 20 || b.len() < at + 20 {
                return None;
            }
            t.proto = b[at + 9];
            t.src[..4].copy_from_slice(&b[at + 12..at + 16]);
            t.dst[..4].copy_from_slice(&b[at + 16..at + 20]);
            (at + ihl, be16(b, at + 6)? & 0x1fff == 0)
        }
        ETH_P_IPV6 => {
            if b.len() < at + 40 {
                return None;
            }
            t.proto = b[at + 6];
            t.src.copy_from_slice(&b[at + 8..at + 24]);
            t.dst.copy_from_slice(&b[at + 24..at + 40]);
            (at + 40, true)
        }
        _ => return None,
    };
    if first_fragment && has_ports(t.proto) {
        if let (Some(s), Some(d)) = (be16(b, l4), be16(b, l4 + 2)) {
            (t.sport, t.dport) = (s, d);
        }
    }
    Some((t, l4, first_fragment))
}

/// The ethertype and where the network header starts, past any VLAN tags.
fn ether(b: &[u8], mut at: usize) -> Option<(u16, usize)> {
    let mut ty = be16(b, at + 12)?;
    at += ETH_HLEN;
    while ty == ETH_P_8021Q || ty == ETH_P_8021AD {
        ty = be16(b, at + 2)?;
        at += 4;
    }
    Some((ty, at))
}

/// Parse a frame as read from the socket (vnet header first).
pub fn headers(data: &[u8]) -> Option<Headers> {
    let (ty, at) = ether(data, VNET_HDR_LEN)?;
    let (outer, l4, whole) = ip(data, at, ty)?;
    let inner = match outer.proto {
        IPPROTO_IPIP if whole => ip(data, l4, ETH_P_IP).map(|x| x.0),
        IPPROTO_IPV6 if whole => ip(data, l4, ETH_P_IPV6).map(|x| x.0),
        IPPROTO_UDP if outer.dport == VXLAN_PORT => {
            // UDP header (8), VXLAN header (8), then the inner Ethernet frame.
            ether(data, l4 + 16).and_then(|(t, a)| ip(data, a, t)).map(|x| x.0)
        }
        _ => None,
    };
    Some(Headers { outer, inner })
}

/// The flow hash of a frame for `keys`, salted (SFQ's perturbation). Frames that
/// are not IP hash by their key fields' zero values, so they share one flow.
pub fn hash(data: &[u8], keys: u16, salt: u64) -> u64 {
    let h = headers(data).unwrap_or_default();
    let mut s = std::collections::hash_map::DefaultHasher::new();
    salt.hash(&mut s);
    let zero = Tuple::default();
    for (t, shift) in [(&h.outer, 0), (h.inner.as_ref().unwrap_or(&zero), TUNNEL_SHIFT)] {
        let k = keys >> shift;
        if k & SRC != 0 {
            t.src.hash(&mut s);
        }
        if k & DST != 0 {
            t.dst.hash(&mut s);
        }
        if k & PROTO != 0 {
            t.proto.hash(&mut s);
        }
        if k & PROTO_SRC != 0 {
            t.sport.hash(&mut s);
        }
        if k & PROTO_DST != 0 {
            t.dport.hash(&mut s);
        }
    }
    s.finish()
}

/// Mark Congestion Experienced on an ECN-capable IP packet (RFC 3168), as the
/// kernel's INET_ECN_set_ce: true when the packet now carries CE (it was ECT or
/// already CE), false for a Not-ECT packet (which the caller drops instead). A
/// GSO super-frame's segments copy this header, so one mark marks them all.
pub fn set_ce(data: &mut [u8]) -> bool {
    let Some((ty, at)) = ether(data, VNET_HDR_LEN) else { return false };
    match ty {
        ETH_P_IP if data.len() >= at + 20 => {
            let tos = data[at + 1];
            match tos & 3 {
                0 => false,
                3 => true,
                _ => {
                    data[at + 1] = tos | 3;
                    // RFC 1624 incremental update of the header checksum: the 16-bit
                    // word holding TOS changed from (ver/ihl, tos) to (ver/ihl, tos|3).
                    let old = u16::from_be_bytes([data[at], tos]);
                    let new = u16::from_be_bytes([data[at], tos | 3]);
                    let ck = u16::from_be_bytes([data[at + 10], data[at + 11]]);
                    let mut sum = (!ck as u32) + (!old as u32) + new as u32;
                    sum = (sum & 0xffff) + (sum >> 16);
                    sum = (sum & 0xffff) + (sum >> 16);
                    data[at + 10..at + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
                    true
                }
            }
        }
        ETH_P_IPV6 if data.len() >= at + 2 => {
            // Traffic class: low nibble of byte 0, high nibble of byte 1; ECN is
            // the class's two low bits, bits 4-5 of byte 1. No header checksum.
            match (data[at + 1] >> 4) & 3 {
                0 => false,
                3 => true,
                _ => {
                    data[at + 1] |= 0x30;
                    true
                }
            }
        }
        _ => false,
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// vnet header + Ethernet + IPv4 + (TCP or UDP ports), for tests here and in the qdiscs.
    pub fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, tos: u8) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN + ETH_HLEN + 20 + 20];
        let e = VNET_HDR_LEN;
        b[e + 12..e + 14].copy_from_slice(&ETH_P_IP.to_be_bytes());
        let i = e + ETH_HLEN;
        b[i] = 0x45;
        b[i + 1] = tos;
        b[i + 8] = 64;
        b[i + 9] = proto;
        b[i + 12..i + 16].copy_from_slice(&src);
        b[i + 16..i + 20].copy_from_slice(&dst);
        let ck = checksum(&b[i..i + 20]);
        b[i + 10..i + 12].copy_from_slice(&ck.to_be_bytes());
        b[i + 20..i + 22].copy_from_slice(&sport.to_be_bytes());
        b[i + 22..i + 24].copy_from_slice(&dport.to_be_bytes());
        b
    }

    pub fn checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    #[test]
    fn keys_parse_as_tc_names_them() {
        assert_eq!(parse_keys("src").unwrap(), SRC);
        assert_eq!(parse_keys("src+dst+proto+proto-src+proto-dst").unwrap(), FIVE_TUPLE);
        assert_eq!(parse_keys("tunnel-src").unwrap(), SRC << TUNNEL_SHIFT);
        assert!(parse_keys("src+port").is_err());
    }

    #[test]
    fn src_key_groups_a_hosts_flows() {
        let a1 = v4([10, 0, 0, 1], [10, 0, 1, 1], IPPROTO_TCP, 40000, 5201, 0);
        let a2 = v4([10, 0, 0, 1], [10, 0, 1, 1], IPPROTO_TCP, 40001, 5201, 0);
        let b1 = v4([10, 0, 0, 2], [10, 0, 1, 1], IPPROTO_TCP, 40000, 5201, 0);
        assert_eq!(hash(&a1, SRC, 0), hash(&a2, SRC, 0));
        assert_ne!(hash(&a1, SRC, 0), hash(&b1, SRC, 0));
        assert_ne!(hash(&a1, FIVE_TUPLE, 0), hash(&a2, FIVE_TUPLE, 0));
        assert_ne!(hash(&a1, FIVE_TUPLE, 0), hash(&a1, FIVE_TUPLE, 1), "salt perturbs");
    }

    #[test]
    fn tunnel_keys_see_inside_ipip() {
        let wrap = |inner: Vec<u8>| {
            let mut o = v4([192, 0, 2, 1], [192, 0, 2, 2], IPPROTO_IPIP, 0, 0, 0);
            o.truncate(VNET_HDR_LEN + ETH_HLEN + 20);
            o.extend_from_slice(&inner[VNET_HDR_LEN + ETH_HLEN..]);
            o
        };
        let x = wrap(v4([10, 0, 0, 1], [10, 9, 9, 9], IPPROTO_TCP, 1000, 22, 0));
        let y = wrap(v4([10, 0, 0, 2], [10, 9, 9, 9], IPPROTO_TCP, 1000, 22, 0));
        assert_eq!(hash(&x, FIVE_TUPLE, 0), hash(&y, FIVE_TUPLE, 0), "one outer flow");
        let k = parse_keys("5-tuple+tunnel-5-tuple").unwrap();
        assert_ne!(hash(&x, k, 0), hash(&y, k, 0));
        assert_eq!(headers(&x).unwrap().inner.unwrap().dport, 22);
    }

    #[test]
    fn ce_marks_ect_only_and_keeps_the_checksum_valid() {
        let i = VNET_HDR_LEN + ETH_HLEN;
        for (tos, marks) in [(0u8, false), (1, true), (2, true), (3, true), (0xb8 | 2, true)] {
            let mut p = v4([10, 0, 0, 1], [10, 0, 0, 2], IPPROTO_TCP, 1, 2, tos);
            assert_eq!(set_ce(&mut p), marks, "tos {tos:#x}");
            let want = if marks { tos | 3 } else { tos };
            assert_eq!(p[i + 1], want);
            assert_eq!(checksum(&p[i..i + 20]), 0, "checksum after marking tos {tos:#x}");
        }
    }
}
