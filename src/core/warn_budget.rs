//! The budget of warnings that something outside the node can trigger
//! again and again: a peer's failed handshakes or stale records, a
//! client's overflowing outbound queue, a store's refusals. Each is still
//! counted where it happens (a flow-trace counter or a metric); only the
//! log line is budgeted, so a flood of them cannot flood the log.
//!
//! Generic over the clock: the core budgets its flow-trace warnings on its
//! input time (virtual in the simulator), the runtime its own warnings on
//! `std::time::Instant`.

use std::ops::Sub;
use std::time::Duration;

/// At most `burst` warnings per `window`; the ones over it are counted and
/// the count is given with the next one logged.
#[derive(Debug)]
pub(crate) struct WarnBudget<I> {
    burst: u32,
    window: Duration,
    since: I,
    used: u32,
    suppressed: u64,
}

impl<I: Copy + Sub<I, Output = Duration>> WarnBudget<I> {
    pub(crate) fn new(now: I, burst: u32, window: Duration) -> Self {
        Self {
            burst,
            window,
            since: now,
            used: 0,
            suppressed: 0,
        }
    }

    /// `Some(suppressed since the last one)` when a warning may be logged.
    pub(crate) fn admit(&mut self, now: I) -> Option<u64> {
        if now - self.since >= self.window {
            self.since = now;
            self.used = 0;
        }
        if self.used >= self.burst {
            self.suppressed += 1;
            return None;
        }
        self.used += 1;
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    #[test]
    fn warnings_over_the_budget_are_counted_and_told_with_the_next() {
        let start = Instant::from_millis(5);
        let mut budget = WarnBudget::new(start, 10, Duration::from_secs(1));
        for _ in 0..10 {
            assert_eq!(budget.admit(start), Some(0));
        }
        assert_eq!(budget.admit(start), None);
        assert_eq!(budget.admit(start + Duration::from_millis(999)), None);
        assert_eq!(budget.admit(start + Duration::from_secs(1)), Some(2));
    }

    #[test]
    fn it_runs_on_the_runtimes_clock_too() {
        let start = std::time::Instant::now();
        let mut budget = WarnBudget::new(start, 1, Duration::from_secs(10));
        assert_eq!(budget.admit(start), Some(0));
        assert_eq!(budget.admit(start), None);
        assert_eq!(budget.admit(start + Duration::from_secs(10)), Some(1));
    }
}
