//! Ending a node's start from another thread (docs/operations.md
//! "Stopping a start").
//!
//! A start can wait for long: for a crashed predecessor's owner lease to
//! lapse (up to a lease term, §5), or for a store that does not answer (for
//! as long as it does not). A supervisor's SIGTERM during that wait must
//! end it, and must not leave behind an owner lease the start took in the
//! same instant: the next start of the node would wait a whole term for it.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A handle that ends a start from another thread
/// ([`NodeBuilder::cancel_with`](crate::api::NodeBuilder::cancel_with)).
///
/// After [`cancel`](Self::cancel) the start returns
/// [`StartError::Cancelled`](crate::api::StartError::Cancelled) and never a
/// node: a wait ends at once, a store call in flight is let finish (its
/// call timeout bounds it), and an owner lease the start had taken is
/// given back, as a clean stop gives it back, together with any shards
/// already started.
#[derive(Clone, Debug, Default)]
pub struct StartCancel(Arc<Cancelled>);

#[derive(Debug, Default)]
struct Cancelled {
    set: Mutex<bool>,
    changed: Condvar,
}

impl StartCancel {
    /// A handle not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the start this handle was given to; it is kept once set.
    pub fn cancel(&self) {
        *self.0.set.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.changed.notify_all();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        *self.0.set.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits `wait`, or less if cancelled first; whether it was cancelled.
    pub(crate) fn wait(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        let mut set = self.0.set.lock().unwrap_or_else(PoisonError::into_inner);
        while !*set {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            set = self
                .0
                .changed
                .wait_timeout(set, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_runs_its_length_unless_cancelled_and_ends_at_the_cancel() {
        let cancel = StartCancel::new();
        let started = Instant::now();
        assert!(!cancel.wait(Duration::from_millis(30)));
        assert!(started.elapsed() >= Duration::from_millis(30));

        let other = cancel.clone();
        let canceller = std::thread::spawn(move || other.cancel());
        let started = Instant::now();
        assert!(cancel.wait(Duration::from_secs(60)));
        assert!(started.elapsed() < Duration::from_secs(30));
        canceller.join().unwrap();
        assert!(cancel.is_cancelled());
        assert!(cancel.wait(Duration::from_secs(60)), "kept once set");
    }
}
