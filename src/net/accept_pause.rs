//! What a listener does when accepting fails for want of resources (EMFILE,
//! ENFILE, ENOBUFS, ENOMEM; issue 20 item 3): it pauses, backing off from
//! 10 ms to 1 s, instead of retrying at once — a full descriptor table made
//! a node spin at 193% CPU and log 400 MB of warnings in 5 s — and it logs
//! at most one line a second, with the count of failures since the last.
//! The connections waiting meanwhile stay in the kernel's backlog and are
//! accepted once a descriptor frees.

use std::time::{Duration, Instant};

/// The first pause after a failure.
const PAUSE_MIN: Duration = Duration::from_millis(10);
/// The longest pause.
const PAUSE_MAX: Duration = Duration::from_secs(1);
/// At most one warning per listener in this long.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Whether an accept error is a lack of resources, which a retry at once
/// cannot cure.
pub(super) fn is_exhaustion(errno: i32) -> bool {
    matches!(
        errno,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
    )
}

/// One listener's pause state.
#[derive(Debug)]
pub(super) struct AcceptPause {
    backoff: Duration,
    until: Option<Instant>,
    /// Failures not yet reported in a log line.
    unreported: u64,
    last_log: Option<Instant>,
}

impl AcceptPause {
    pub(super) fn new() -> Self {
        Self {
            backoff: PAUSE_MIN,
            until: None,
            unreported: 0,
            last_log: None,
        }
    }

    /// Accepting failed for want of resources: the listener pauses. Logs
    /// the warning (listener `index`, `errno`) when one is due, with the
    /// failures since the last; returns whether it did.
    pub(super) fn failed(&mut self, now: Instant, index: u32, errno: i32) -> bool {
        self.unreported += 1;
        let pause = self.backoff;
        self.until = Some(now + pause);
        self.backoff = (self.backoff * 2).min(PAUSE_MAX);
        let due = self.last_log.map_or(true, |last| now - last >= LOG_EVERY);
        if !due {
            return false;
        }
        self.last_log = Some(now);
        let failures = std::mem::take(&mut self.unreported);
        tracing::warn!(
            listener = index,
            errno,
            failures,
            pause_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
            "accept failed: out of descriptors or memory; pausing the listener"
        );
        true
    }

    /// A connection was accepted: the next failure pauses briefly again.
    pub(super) fn accepted(&mut self) {
        self.backoff = PAUSE_MIN;
    }

    /// Whether the listener is paused.
    pub(super) fn paused(&self) -> bool {
        self.until.is_some()
    }

    /// Ends a pause whose time has come; `true` if it ended now.
    pub(super) fn resume_if_due(&mut self, now: Instant) -> bool {
        if self.until.is_some_and(|until| now >= until) {
            self.until = None;
            return true;
        }
        false
    }

    /// How long until the pause ends, if the listener is paused.
    pub(super) fn left(&self, now: Instant) -> Option<Duration> {
        self.until.map(|until| until.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_pause_with_backoff_and_log_once_a_second_with_the_count() {
        let mut pause = AcceptPause::new();
        let start = Instant::now();
        assert!(pause.failed(start, 0, libc::EMFILE));
        assert_eq!(pause.unreported, 0);
        assert_eq!(pause.left(start), Some(PAUSE_MIN));
        assert!(!pause.resume_if_due(start + PAUSE_MIN / 2));
        assert!(pause.resume_if_due(start + PAUSE_MIN));
        assert!(!pause.paused());
        // More failures within the second: no line, a longer pause each.
        for n in 1..=8 {
            assert!(!pause.failed(start + Duration::from_millis(n), 0, libc::EMFILE));
        }
        assert_eq!(pause.backoff, PAUSE_MAX);
        assert_eq!(pause.unreported, 8);
        // The next line a second later carries the count since the last.
        assert!(pause.failed(start + LOG_EVERY, 0, libc::EMFILE));
        assert_eq!(pause.unreported, 0);
        pause.accepted();
        assert_eq!(pause.backoff, PAUSE_MIN);
        assert!(is_exhaustion(libc::EMFILE) && !is_exhaustion(libc::ECONNABORTED));
    }
}
