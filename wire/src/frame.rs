//! What the wire knows about a frame: the virtio-net header the kernel puts in
//! front of it (PACKET_VNET_HDR) and the few bytes needed to count it.
//!
//! A GSO super-frame stands for `segs` wire frames; rate, trace and packet
//! limits count those (with their replicated headers), as the kernel's qdiscs
//! do, so that offloads change the cost per byte but not the emulated link.

pub const VNET_HDR_LEN: usize = 10;
pub const ETH_HLEN: usize = 14;
/// Largest frame behind a vnet header: a 64 KiB GSO super-frame plus headers.
pub const MAX_FRAME: usize = 65_535 + ETH_HLEN + 4;

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_UDP: u8 = 3;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    Runt,
    Oversized,
    BadVnetHdr,
}

/// A checked frame's accounting: frames on the wire and bytes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub segs: u32,
    pub wire_bytes: u64,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        if b.len() < VNET_HDR_LEN {
            return None;
        }
        let u16le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16le(2),
            gso_size: u16le(4),
            csum_start: u16le(6),
            csum_offset: u16le(8),
        })
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// Length of the headers repeated in every segment: up to the end of the
/// TCP/UDP header. Parsed from the frame, since the kernel's `hdr_len` is only
/// the linear part of the skb and may include payload.
fn header_len(h: &VnetHdr, frame: &[u8]) -> Option<usize> {
    let l4 = h.csum_start as usize;
    match h.gso_type & !GSO_ECN {
        GSO_TCPV4 | GSO_TCPV6 => {
            let doff = (*frame.get(l4 + 12)? >> 4) as usize * 4;
            (doff >= 20).then_some(l4 + doff)
        }
        GSO_UDP | GSO_UDP_L4 => Some(l4 + 8),
        _ => None,
    }
}

/// Check a received buffer (vnet header + frame, `len` bytes before any
/// truncation) and say how much wire it occupies.
pub fn classify(buf: &[u8], len: usize) -> Result<Shape, Bad> {
    if len > buf.len() || len > VNET_HDR_LEN + MAX_FRAME {
        return Err(Bad::Oversized);
    }
    let h = VnetHdr::parse(buf).ok_or(Bad::Runt)?;
    let frame = &buf[VNET_HDR_LEN..len];
    if frame.len() < ETH_HLEN {
        return Err(Bad::Runt);
    }
    if h.flags & F_NEEDS_CSUM != 0
        && h.csum_start as usize + h.csum_offset as usize + 2 > frame.len()
    {
        return Err(Bad::BadVnetHdr);
    }
    if !h.is_gso() {
        return Ok(Shape { segs: 1, wire_bytes: frame.len() as u64 });
    }
    if h.gso_size == 0 || h.flags & F_NEEDS_CSUM == 0 {
        return Err(Bad::BadVnetHdr);
    }
    let hdr = header_len(&h, frame).ok_or(Bad::BadVnetHdr)?;
    if hdr >= frame.len() {
        return Err(Bad::BadVnetHdr);
    }
    let payload = frame.len() - hdr;
    let segs = payload.div_ceil(h.gso_size as usize) as u32;
    Ok(Shape { segs, wire_bytes: frame.len() as u64 + (segs as u64 - 1) * hdr as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_gso(payload: usize, mss: u16) -> Vec<u8> {
        let mut b = vec![0u8; VNET_HDR_LEN + 14 + 20 + 32 + payload];
        b[0] = F_NEEDS_CSUM;
        b[1] = GSO_TCPV4;
        b[2..4].copy_from_slice(&66u16.to_le_bytes());
        b[4..6].copy_from_slice(&mss.to_le_bytes());
        b[6..8].copy_from_slice(&34u16.to_le_bytes());
        b[8..10].copy_from_slice(&16u16.to_le_bytes());
        b[VNET_HDR_LEN + 34 + 12] = 8 << 4; // 32-byte TCP header (timestamps)
        b
    }

    #[test]
    fn plain_frame_is_one_segment() {
        let b = vec![0u8; VNET_HDR_LEN + 60];
        assert_eq!(classify(&b, b.len()), Ok(Shape { segs: 1, wire_bytes: 60 }));
    }

    #[test]
    fn gso_frame_counts_segments_and_headers() {
        let b = tcp_gso(1448 * 10, 1448);
        let s = classify(&b, b.len()).unwrap();
        assert_eq!(s.segs, 10);
        assert_eq!(s.wire_bytes, 10 * (66 + 1448));
    }

    #[test]
    fn runts_and_bad_headers_are_refused() {
        assert_eq!(classify(&[0u8; 5], 5), Err(Bad::Runt));
        assert_eq!(classify(&[0u8; 20], 20), Err(Bad::Runt));
        let mut b = tcp_gso(100, 0);
        let n = b.len();
        assert_eq!(classify(&b, n), Err(Bad::BadVnetHdr));
        b[4] = 100;
        b[6] = 0xff;
        b[7] = 0xff;
        assert_eq!(classify(&b, n), Err(Bad::BadVnetHdr));
        assert_eq!(classify(&b, n + 1), Err(Bad::Oversized));
    }
}
