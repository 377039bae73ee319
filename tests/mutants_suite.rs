//! The judges of cargo-mutants as one test crate (scripts/mutants.sh,
//! docs/TESTING.md "Mutation testing"): every core test file
//! (`tests/core_*.rs`), wire test file (`tests/wire_*.rs`) and the lane
//! tests, each as a module, unchanged. A mutant changes the library, and
//! cargo then rebuilds every test crate that depends on it: one crate here
//! instead of 22 took a mutant's build from about 18 s to 7–8 s. Built only
//! with the `mutants-suite` feature; `cargo test` runs the same files as
//! their own crates. tests/layering.rs checks that this list names every
//! such file.

// Each file declares its support modules (`mod common;` and the like), as
// it does as its own crate; here they are loaded once per file that uses
// them, which is what keeps the files unchanged.
#![allow(clippy::duplicate_mod)]
#[path = "core_async_turns.rs"]
mod core_async_turns;
#[path = "core_bind.rs"]
mod core_bind;
#[path = "core_bind_or_get.rs"]
mod core_bind_or_get;
#[path = "core_calls.rs"]
mod core_calls;
#[path = "core_disconnect.rs"]
mod core_disconnect;
#[path = "core_edges.rs"]
mod core_edges;
#[path = "core_fences.rs"]
mod core_fences;
#[path = "core_fuzz.rs"]
mod core_fuzz;
#[path = "core_host_ask.rs"]
mod core_host_ask;
#[path = "core_recheck.rs"]
mod core_recheck;
#[path = "core_registry.rs"]
mod core_registry;
#[path = "core_relay.rs"]
mod core_relay;
#[path = "core_relocation.rs"]
mod core_relocation;
#[path = "core_replacement.rs"]
mod core_replacement;
#[path = "core_seal.rs"]
mod core_seal;
#[path = "core_session_lanes.rs"]
mod core_session_lanes;
#[path = "core_spot_moves.rs"]
mod core_spot_moves;
#[path = "core_timers.rs"]
mod core_timers;
#[path = "lanes.rs"]
mod lanes;
#[path = "wire_client.rs"]
mod wire_client;
#[path = "wire_link.rs"]
mod wire_link;
#[path = "wire_node.rs"]
mod wire_node;
