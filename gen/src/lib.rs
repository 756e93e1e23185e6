//! hoplab-gen: the frame generator and receiver of hoplab's RFC 2544 tests.
//!
//! The sender spaces frames evenly: batches of a few frames (sendmmsg), each batch due at
//! a fixed time on the monotonic clock, slept for and then spun for. A sender that falls
//! behind (a stall on a busy machine) does not catch up in a burst beyond a short lag: it
//! starts its schedule again, so the stall shows in its own record (frames over sending
//! time) instead of as loss the path did not cause.
//!
//! Every frame's payload starts with its sequence number (u32, little-endian) and its send
//! time (u64 ns of CLOCK_MONOTONIC, one clock for all namespaces of a machine): 12 bytes,
//! the payload of RFC 5180's smallest IPv6 frame.

pub mod frame;
pub mod hist;
pub mod pace;
pub mod stamp;
