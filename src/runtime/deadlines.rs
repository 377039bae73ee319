//! Deadlines of one fixed length on connections (the client frame deadline,
//! the link handshake deadline: docs/threading.md "Timeouts on the edges").
//! All have the same length, so arming order is deadline order and a FIFO
//! queue needs no timer wheel; a disarmed entry is skipped when it comes up.

use std::collections::VecDeque;
use std::hash::Hash;
use std::time::{Duration, Instant};

use foldhash::{HashMap, HashMapExt};

/// Armed deadlines of length `after`, keyed by connection.
pub(crate) struct FifoDeadlines<K> {
    after: Duration,
    /// (deadline, arming number, key), in arming order.
    queue: VecDeque<(Instant, u64, K)>,
    /// The arming number of each armed key: an entry whose number is not
    /// its key's is stale.
    armed: HashMap<K, u64>,
    next: u64,
}

impl<K: Copy + Eq + Hash> FifoDeadlines<K> {
    pub(crate) fn new(after: Duration) -> Self {
        Self {
            after,
            queue: VecDeque::new(),
            armed: HashMap::new(),
            next: 0,
        }
    }

    /// Arms `key`'s deadline from `now`, unless it is armed already.
    pub(crate) fn arm(&mut self, key: K, now: Instant) {
        if self.armed.contains_key(&key) {
            return;
        }
        self.next += 1;
        self.armed.insert(key, self.next);
        self.queue.push_back((now + self.after, self.next, key));
        // Entries of disarmed keys wait in the queue until their time: keep
        // it within twice the armed ones, so arming and disarming at a high
        // rate cannot grow it without bound.
        if self.queue.len() > 2 * self.armed.len() + 64 {
            let armed = &self.armed;
            self.queue
                .retain(|(_, number, key)| armed.get(key) == Some(number));
        }
    }

    /// Disarms `key`'s deadline, if armed.
    pub(crate) fn disarm(&mut self, key: K) {
        self.armed.remove(&key);
    }

    /// How many deadlines are armed.
    pub(crate) fn armed(&self) -> usize {
        self.armed.len()
    }

    /// The keys whose deadline passed by `now`, disarmed, oldest first.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<K> {
        let mut expired = Vec::new();
        while let Some(&(at, number, key)) = self.queue.front() {
            if at > now {
                break;
            }
            self.queue.pop_front();
            if self.armed.get(&key) == Some(&number) {
                self.armed.remove(&key);
                expired.push(key);
            }
        }
        expired
    }

    /// Time until the earliest queued deadline (perhaps of a disarmed key:
    /// an early wake-up is harmless).
    pub(crate) fn next_in(&self, now: Instant) -> Option<Duration> {
        let &(at, _, _) = self.queue.front()?;
        Some(at.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_expires_at_its_time_never_sooner_and_not_once_disarmed() {
        let after = Duration::from_millis(100);
        let mut deadlines = FifoDeadlines::new(after);
        let start = Instant::now();
        deadlines.arm(1, start);
        deadlines.arm(2, start + Duration::from_millis(10));
        deadlines.arm(1, start + Duration::from_millis(20)); // already armed
        deadlines.disarm(2);
        assert!(deadlines
            .expire(start + after - Duration::from_micros(1))
            .is_empty());
        assert_eq!(deadlines.expire(start + after), vec![1]);
        assert!(deadlines.expire(start + 2 * after).is_empty());
        assert_eq!(deadlines.next_in(start), None);
    }

    #[test]
    fn arming_and_disarming_at_a_high_rate_keeps_the_queue_bounded() {
        let mut deadlines = FifoDeadlines::new(Duration::from_secs(10));
        let now = Instant::now();
        for _ in 0..100_000 {
            deadlines.arm(7, now);
            deadlines.disarm(7);
        }
        assert!(
            deadlines.queue.len() <= 2 + 64 + 1,
            "{}",
            deadlines.queue.len()
        );
    }
}
