//! The wire layer: client STREAM frames and node-to-node records, with total,
//! bounded decoding (docs/wire.md).

pub mod client;
pub mod node;
