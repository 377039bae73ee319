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
//! crate-private. The `testing` feature makes them `pub` (and compiles
//! `sim`) for the crate's own tests, benches, fuzz targets and tools,
//! hidden from the documentation and without stability promises; no
//! embedder turns it on. docs/core.md "Layers" lists which layer may use
//! which; tests/layering.rs enforces it, and that an embedder reaches none
//! of the internals.

#![deny(unsafe_code)]
// `unnameable_types`: a type of an internal layer that a public signature
// exposes (a return type, a field, a trait impl on a public type) must be
// re-exported by the public layers, or the build without `testing` warns.
#![warn(missing_docs, unreachable_pub, unnameable_types)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod api;
pub mod client;
pub mod error;
pub mod ids;
pub mod prelude;
mod runtime;
pub mod store;
pub mod typed;

// The internal layers: `pub` with `testing`, crate-private without it. Their
// items stay `pub` in their own files, so that one source serves both
// builds: without the feature they are unreachable by construction, which
// is what `unreachable_pub` would report, hence the allow on each.
// cargo-mutants reads the source without evaluating `cfg`, so it would find
// each of these files through both declarations and list every mutant
// twice; `cfg_attr(zlink_mutants_skip, mutants::skip)` (a cfg never set, so
// never compiled) hides the second declaration from it (docs/TESTING.md
// "Mutation testing").
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod core;
#[cfg(not(feature = "testing"))]
#[cfg_attr(zlink_mutants_skip, mutants::skip)]
#[allow(unreachable_pub)]
mod core;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod net;
#[cfg(not(feature = "testing"))]
#[cfg_attr(zlink_mutants_skip, mutants::skip)]
#[allow(unreachable_pub)]
mod net;
// The simulator is a test harness: not compiled at all without `testing`.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod sim;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod time;
#[cfg(not(feature = "testing"))]
#[cfg_attr(zlink_mutants_skip, mutants::skip)]
#[allow(unreachable_pub)]
mod time;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod wire;
#[cfg(not(feature = "testing"))]
#[cfg_attr(zlink_mutants_skip, mutants::skip)]
#[allow(unreachable_pub)]
mod wire;
