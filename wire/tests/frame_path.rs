//! Property tests of the frame path: whatever bytes arrive, the wire classifies
//! them without panicking, refuses runts and oversized frames, and the
//! pipeline's held memory stays under its bound.

use std::sync::Arc;

use hoplab_wire::config::parse;
use hoplab_wire::frame::{classify, Bad, ETH_HLEN, MAX_FRAME, VNET_HDR_LEN};
use hoplab_wire::pipeline::{Frame, Pipeline};
use hoplab_wire::stats::DirStats;
use proptest::prelude::*;

fn no_files(_: &str) -> Result<String, String> {
    Err("no files".into())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn classify_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..3000), extra in 0usize..200_000) {
        let _ = classify(&bytes, bytes.len());
        // A length above what was read is how the socket reports truncation.
        let r = classify(&bytes, bytes.len() + extra + 1);
        prop_assert_eq!(r, Err(Bad::Oversized));
    }

    #[test]
    fn runts_are_refused(len in 0usize..(VNET_HDR_LEN + ETH_HLEN)) {
        let bytes = vec![0u8; len];
        prop_assert_eq!(classify(&bytes, len), Err(Bad::Runt));
    }

    #[test]
    fn accepted_frames_have_sane_shapes(mut bytes in proptest::collection::vec(any::<u8>(), 24..4000)) {
        bytes[1] &= 0x87; // keep gso_type within the known values more often
        if let Ok(shape) = classify(&bytes, bytes.len()) {
            prop_assert!(shape.segs >= 1);
            prop_assert!(shape.wire_bytes >= (bytes.len() - VNET_HDR_LEN) as u64);
            prop_assert!(shape.segs as usize <= bytes.len());
        }
    }

    #[test]
    fn pipeline_memory_is_bounded(sizes in proptest::collection::vec(24usize..3000, 1..400),
                                  gaps in proptest::collection::vec(0u64..2_000_000, 400)) {
        let cfg = parse("delay=1,jitter=0.01,loss=5,dup=20,rate=1000000,queue_bytes=20000,max_held=50000", &no_files).unwrap();
        let mut p = Pipeline::new(cfg, Arc::new(DirStats::default()), 0);
        let mut now = 0;
        for (i, n) in sizes.iter().enumerate() {
            let mut data = vec![0u8; *n];
            data[0] = 0; data[1] = 0;
            if let Ok(shape) = classify(&data, data.len()) {
                p.arrive(Frame { data, shape, arrival: now }, now);
            }
            now += gaps[i];
            p.advance(now);
            while p.pop_due(now).is_some() {}
            prop_assert!(p.held_memory() <= 50_000);
        }
    }
}

#[test]
fn largest_frame_is_accepted() {
    let bytes = vec![0u8; VNET_HDR_LEN + MAX_FRAME];
    assert!(classify(&bytes, bytes.len()).is_ok());
}
