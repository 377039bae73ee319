//! The clock a Location Store judges lease expiry by (§5 "The stored route is
//! only valid within the current owner lease").
//!
//! The core never reads a clock (DESIGN "Layers"); the store layer does,
//! because lease expiry is the store's fact, not its caller's. A store is
//! given its clock at construction instead of taking `now` on each call: the
//! Redis store (issue 6) answers by the server's expiry, so a caller-supplied
//! `now` could not be honoured there, and a trait whose calls carried one
//! would suggest that a caller may move a lease's expiry. Times are the core's
//! [`Instant`], so the lease expiry a store returns is directly comparable
//! with the `now` the shard feeds its state machines.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::time::Instant;

/// A source of monotonic time for a store (§5 leases).
pub trait Clock: Send + Sync {
    /// The current time. Never goes backwards.
    fn now(&self) -> Instant;
}

/// Real monotonic time since the clock was built: what a node gives its
/// embedded store, and the frame the node's shards measure `now` in when they
/// share the same origin.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

impl MonotonicClock {
    /// A clock whose origin ([`Instant::ZERO`]) is now.
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }

    /// A clock whose origin is `origin`, so that it agrees with another
    /// component (the runtime's shards) that measures from the same point.
    pub fn with_origin(origin: std::time::Instant) -> Self {
        Self { origin }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        let micros = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        Instant::from_micros(micros)
    }
}

/// Virtual time that only moves when told to: the tests and the simulator
/// use it to expire leases deterministically. Clones share one time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at `start`.
    pub fn new(start: Instant) -> Self {
        Self {
            micros: Arc::new(AtomicU64::new(start.as_micros())),
        }
    }

    /// Moves time forward by `by` (saturating, never backwards).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        // `fetch_update` with a closure that always returns `Some` cannot fail.
        let _ = self
            .micros
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.micros.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_time() {
        let clock = ManualClock::new(Instant::from_millis(5));
        let other = clock.clone();
        assert_eq!(clock.now(), Instant::from_millis(5));
        other.advance(Duration::from_millis(10));
        assert_eq!(clock.now(), Instant::from_millis(15));
    }

    #[test]
    fn monotonic_clock_never_goes_backwards() {
        let clock = MonotonicClock::new();
        let a = clock.now();
        let b = clock.now();
        assert!(b >= a);
    }
}
