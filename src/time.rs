//! Time as the core and the Location Store see it: a value passed in, never read from a clock.
//!
//! [`Instant`] counts microseconds from an origin the caller chooses (the
//! runtime: its start; the simulator: zero). Inputs never go backwards in
//! time; the state machines assert it where they store `now`.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time, in microseconds since the caller's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Instant = Instant(0);

    /// A point `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Self {
        Self(micros)
    }

    /// A point `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis.saturating_mul(1_000))
    }

    /// Microseconds since the origin.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, rhs: Duration) -> Instant {
        let micros = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(micros))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_a_duration_moves_forward_and_saturates() {
        let t = Instant::from_millis(5) + Duration::from_millis(100);
        assert_eq!(t, Instant::from_millis(105));
        assert_eq!(t - Instant::from_millis(5), Duration::from_millis(100));
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(
            Instant::from_micros(u64::MAX) + Duration::from_secs(1),
            Instant::from_micros(u64::MAX)
        );
    }
}
