//! The per-session inbound rate limit (issue 20 item 7; docs/threading.md
//! "Timeouts on the edges"): a token bucket per session, refilled at
//! `NodeSettings::session_rate` messages a second up to
//! `NodeSettings::session_burst`. A packet over it is refused at ingress,
//! before any application queue: a request ends `RateLimited`, a one-way
//! message is dropped and counted (`session_rate_limited`). Nothing a
//! client sends can make a node queue more than the rate allows.

use std::time::Instant;

/// One session's bucket.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn new(now: Instant, burst: u32) -> Self {
        Self {
            tokens: f64::from(burst),
            last: now,
        }
    }

    /// Takes one token at `now` (refilled at `rate` a second, at most
    /// `burst`); `false` when there is none. A `rate` of 0 is no limit.
    pub(crate) fn take(&mut self, now: Instant, rate: u32, burst: u32) -> bool {
        if rate == 0 {
            return true;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * f64::from(rate)).min(f64::from(burst));
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate_and_no_limit_at_zero() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(start, 3);
        let taken = (0..5).filter(|_| bucket.take(start, 10, 3)).count();
        assert_eq!(taken, 3, "the burst");
        // 100 ms at 10 a second: one more token, not two.
        let later = start + Duration::from_millis(100);
        assert!(bucket.take(later, 10, 3));
        assert!(!bucket.take(later, 10, 3));
        // Refills never pass the burst.
        let much_later = start + Duration::from_secs(60);
        assert_eq!((0..5).filter(|_| bucket.take(much_later, 10, 3)).count(), 3);
        let mut unlimited = TokenBucket::new(start, 0);
        assert!((0..1000).all(|_| unlimited.take(start, 0, 0)));
    }
}
