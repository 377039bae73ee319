//! The wire layer: client STREAM frames and node-to-node records, with total,
//! bounded decoding (docs/wire.md).
//!
//! Every frame is a `u32` big-endian length prefix and a body. Encoding
//! appends a whole frame to a `BytesMut`; decoding takes one complete body
//! (`decode`) or splits one off a stream buffer (`decode_from`). Every byte
//! string yields a value or a [`WireError`], never a panic, and nothing is
//! allocated past [`DecodeLimits`].

pub mod client;
mod codec;
mod error;
mod limits;
pub mod link;
pub mod node;

pub use error::WireError;
pub use limits::DecodeLimits;
