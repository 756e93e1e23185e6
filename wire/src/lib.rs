//! hoplab-wire: a userspace link emulator for hoplab labs.
//!
//! The binary carries frames between two interfaces of a hidden "wire"
//! namespace and impairs each direction on the way (delay, jitter, loss,
//! duplication, rate, trace-driven capacity). Everything but the socket I/O is
//! pure and unit-tested here; `io` and `main.rs` hold the Linux specifics.

pub mod codel;
pub mod config;
pub mod flow;
pub mod frame;
pub mod io;
pub mod loss;
pub mod pipeline;
pub mod qdisc;
pub mod rng;
pub mod stats;
pub mod trace;

/// Nanoseconds on CLOCK_MONOTONIC: the clock of every timestamp in the wire.
pub type Nanos = u64;

pub const NS_PER_SEC: u64 = 1_000_000_000;
