//! The sans-IO protocol core: deterministic state machines that take
//! `(now, input)` and return what to send, what to deliver and which timers to
//! arm. Nothing here reads a clock, touches a socket, spawns or locks.
//!
//! docs/core.md says which state machine owns which rule of the spec.

pub mod actor;
pub mod admission;
pub mod creation;
mod effects;
pub mod host_ask;
pub mod lane;
pub mod latency;
pub mod recheck;
pub mod relocation;
pub mod session;
pub mod shard;
/// Time as the core counts it (kept below the core and the store: both use it).
#[cfg(feature = "testing")]
pub use crate::time;
/// Time as the core counts it (kept below the core and the store: both use it).
#[cfg(not(feature = "testing"))]
pub(crate) use crate::time;
pub mod timer;
pub mod trace;
pub(crate) mod warn_budget;

#[cfg(feature = "testing")]
pub use effects::CoreTimer;
pub use effects::{CoreEvent, Transmit};

/// The keys of `map` whose values `keep` selects, in order. The core's
/// tables are hash maps: what it does to several entries at once goes in
/// key order, so that the same inputs give the same outputs (the simulator
/// replays a seed exactly).
pub(crate) fn sorted_keys<K: Ord + Copy, V, S>(
    map: &std::collections::HashMap<K, V, S>,
    keep: impl Fn(&V) -> bool,
) -> Vec<K> {
    let mut keys: Vec<K> = map
        .iter()
        .filter(|&(_, v)| keep(v))
        .map(|(&k, _)| k)
        .collect();
    keys.sort_unstable();
    keys
}
