//! A frame's stamp: its sequence number and send time, at the start of its payload.

pub const LEN: usize = 12;

/// Writes the stamp into the start of `buf` (at least LEN bytes).
pub fn write(buf: &mut [u8], seq: u32, sent_ns: u64) {
    buf[..4].copy_from_slice(&seq.to_le_bytes());
    buf[4..LEN].copy_from_slice(&sent_ns.to_le_bytes());
}

/// The stamp of a payload, or None when it is shorter than one.
pub fn read(buf: &[u8]) -> Option<(u32, u64)> {
    if buf.len() < LEN {
        return None;
    }
    let seq = u32::from_le_bytes(buf[..4].try_into().ok()?);
    let sent = u64::from_le_bytes(buf[4..LEN].try_into().ok()?);
    Some((seq, sent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back() {
        let mut buf = [0x55u8; 18];
        write(&mut buf, 0xdead_beef, 1_234_567_890_123);
        assert_eq!(read(&buf), Some((0xdead_beef, 1_234_567_890_123)));
        assert_eq!(buf[LEN], 0x55, "the fill after the stamp is left alone");
        assert_eq!(read(&buf[..11]), None);
    }
}
