//! zlink: a low-latency engine for game servers on Linux.
//!
//! Clients connect over STREAM sessions; game logic lives in Actors grouped
//! into Spots; nodes form a mesh in which any session reaches any Actor by its
//! global [`ids::ActorId`]. The contract is spec/02 "Session and Actor
//! Binding"; each module cites the section it implements.
//!
//! Layers (DESIGN "Layers"): [`wire`] (frames and records), [`core`] (the
//! sans-IO state machines), [`sim`] (an in-memory mesh of cores with virtual
//! time, used by the tests), [`store`] (the Location Store trait and its
//! embedded implementation), [`net`] (the io_uring socket loop; the only
//! layer allowed `unsafe`, in the files that hand memory to the kernel), the
//! node runtime (shards on threads) and [`api`] (the public surface), and
//! [`client`] (a STREAM client).

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod api;
pub mod client;
pub mod core;
pub mod error;
pub mod ids;
pub mod net;
mod runtime;
pub mod sim;
pub mod store;
pub mod time;
pub mod wire;
