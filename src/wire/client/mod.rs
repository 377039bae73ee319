//! Client STREAM frames: what a game client and a node say to each other.
//!
//! Keepalive frames are transport control: the runtime answers them outside
//! every application queue (§5), so they are their own variants.

mod frame;

pub use frame::{ClientFrame, CloseReason};
