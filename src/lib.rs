//! zlink: a low-latency engine for game servers on Linux.
//!
//! Clients connect over STREAM sessions; game logic lives in Actors grouped
//! into Spots; nodes form a mesh in which any session reaches any Actor by its
//! global [`ids::ActorId`]. The contract is spec/02 "Session and Actor
//! Binding"; each module cites the section it implements, and
//! docs/contract.md summarises every section and lists every contract ID.
//!
//! The front door is [`prelude`]: `use zlink::prelude::*;` brings what an
//! embedder needs. The public surface behind it is [`api`] (build and run a
//! node: the Actor and Spot traits, sessions, settings), [`typed`] (typed
//! messages over the byte payloads), [`client`] (a STREAM client), [`ids`],
//! [`error`] and [`store`] (the Location Store trait and its stores). The
//! layers below — `wire` (frames and records), `core` (the sans-IO state
//! machines), `time`, `net` (the socket loops; the only layer allowed
//! `unsafe`) and `sim` (an in-memory mesh of cores with virtual time) — are
//! internal: reachable for the crate's own tests, benches and tools, hidden
//! from the documentation, and without stability promises. docs/core.md
//! "Layers" lists which layer may use which; tests/layering.rs enforces it.

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod api;
pub mod client;
#[doc(hidden)]
pub mod core;
pub mod error;
pub mod ids;
#[doc(hidden)]
pub mod net;
pub mod prelude;
mod runtime;
#[doc(hidden)]
pub mod sim;
pub mod store;
#[doc(hidden)]
pub mod time;
pub mod typed;
#[doc(hidden)]
pub mod wire;
