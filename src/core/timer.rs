//! TEMPORARY stand-in for the hashed timer wheel (replaced on merge of the lanes branch).
#![allow(missing_docs)]
use std::collections::BTreeMap;
use std::time::Duration;

use super::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerKey(u64);

#[derive(Debug)]
pub struct TimerWheel<T> {
    next: u64,
    entries: BTreeMap<(Instant, u64), T>,
    deadlines: std::collections::HashMap<u64, Instant>,
}

impl<T> TimerWheel<T> {
    pub fn new(_tick: Duration, _slots: usize, _now: Instant) -> Self {
        Self {
            next: 0,
            entries: BTreeMap::new(),
            deadlines: Default::default(),
        }
    }
    pub fn insert(&mut self, deadline: Instant, value: T) -> TimerKey {
        self.next += 1;
        self.entries.insert((deadline, self.next), value);
        self.deadlines.insert(self.next, deadline);
        TimerKey(self.next)
    }
    pub fn cancel(&mut self, key: TimerKey) -> Option<T> {
        let d = self.deadlines.remove(&key.0)?;
        self.entries.remove(&(d, key.0))
    }
    pub fn poll_expired(&mut self, now: Instant) -> Option<(TimerKey, T)> {
        let (&(d, k), _) = self.entries.iter().next()?;
        if d > now {
            return None;
        }
        self.deadlines.remove(&k);
        self.entries.remove(&(d, k)).map(|v| (TimerKey(k), v))
    }
    pub fn next_deadline(&self) -> Option<Instant> {
        self.entries.keys().next().map(|&(d, _)| d)
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
