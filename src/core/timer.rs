//! The per-shard hashed timer wheel (DESIGN "Threads, queues, time").
//!
//! # What it owns
//!
//! Every deadline a shard's cores arm: the 100 ms replacement close (§6), the
//! SessionReplacementCallbackTimeout (30,000 ms by default, §6), the
//! SessionRelocationSealTimeout (3,000 ms by default, §8.1), the 1,000 ms
//! cutover fallback (§8.1) and request deadlines (§12). A timer is a value in
//! this wheel, never a sleeping task, so it never occupies a lane (§6: "It
//! doesn't wait out the 100 ms with sleep, a blocking wait, or occupation of a
//! session serial lane or worker").
//!
//! # Ground rules
//!
//! - The wheel never reads a clock: `now` is passed in, and it never goes
//!   backwards (a debug assertion checks it, as everywhere in the core).
//! - A timer never fires early, to the microsecond: [`TimerWheel::poll_expired`]
//!   returns a timer only when its deadline is `<= now`. The wheel's tick is
//!   a bucket size, not a rounding of deadlines; deadlines keep microseconds.
//! - A timer fires at most once. Firing or cancelling frees its entry, and a
//!   [`TimerKey`] carries a generation that is never reused, so a stale key
//!   (fired or cancelled) cancels nothing and never reaches another timer.
//! - Timers that are due come out in deadline order (ties in insertion
//!   order), one per call, so the caller can run each in its own serial span.
//!
//! # How it works
//!
//! Entries live in a slab (a `Vec` reused through a free list; no allocation
//! per insert once warm). Each of `slots` wheel slots (a power of two) heads
//! an intrusive doubly linked list of entries whose deadline falls in a tick
//! congruent to the slot, so insert and cancel are O(1). An entry stores its
//! absolute expiry tick; its rounds counter is implicit in it (`(expiry_tick -
//! cursor) / slots` revolutions remain), so a deadline beyond one revolution
//! stays in its slot until the sweep reaches its round, and nothing is
//! decremented on every revolution.
//!
//! Polling sweeps the ticks from the cursor up to `now`'s tick (at most one
//! revolution of slots however far time jumped) and moves each entry whose
//! tick has come into a small "due" min-heap ordered by exact deadline. The
//! heap is what gives microsecond exactness inside the current tick and
//! deadline order across ticks. An insert whose tick was already swept goes
//! straight into that heap (O(log due)), which is how a deadline in the past
//! fires on the next poll. Cancelling a due entry frees it and leaves a stale
//! heap item, skipped when it reaches the top.
//!
//! [`TimerWheel::next_deadline`] is a lower bound kept up to date in O(1): each
//! insert lowers it, a cancel leaves it (a bound that is too early only wakes
//! the caller early, which is allowed; oversleeping is not), and a poll that
//! drains everything due recomputes it exactly once it has passed, scanning at
//! most one revolution of slots and the entries in them.
//!
//! # Limits
//!
//! - At most `u32::MAX - 1` timers pending at once (the slab index); the shard
//!   bounds its timers by bounding what arms them (sessions, bindings,
//!   requests in flight), so reaching this is a bug and is asserted.
//! - `slots` is a power of two in `1..=SLOTS_MAX`; `tick` is a whole, non-zero
//!   number of microseconds. Both are asserted at construction.
//! - Deadlines saturate at the end of [`Instant`]'s range; the wheel keeps
//!   working for them (they simply sit in their slot).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use super::time::Instant;

/// The index that means "no entry" in the intrusive lists and the free list.
const NIL: u32 = u32::MAX;

/// Identifies one armed timer. Once that timer fired or was cancelled the key
/// is stale forever: its generation is never issued again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerKey {
    index: u32,
    generation: u64,
}

/// Where a live entry currently is.
#[derive(Debug)]
enum Place {
    /// Linked into the list of wheel slot `expiry_tick & mask`.
    Wheel { prev: u32, next: u32 },
    /// Its tick has been swept; a heap item with its generation is in `due`.
    Due,
}

/// A slab entry: free, or one live timer.
#[derive(Debug)]
enum Entry<T> {
    Free {
        next_free: u32,
    },
    Live {
        generation: u64,
        deadline: Instant,
        expiry_tick: u64,
        place: Place,
        value: T,
    },
}

/// A heap item of the due set: `(deadline µs, generation, index)`. The
/// generation is the global insertion sequence, so ties fire in insert order.
type DueItem = Reverse<(u64, u64, u32)>;

/// A hashed timer wheel driven by the `now` its caller passes in.
///
/// See the module documentation for the ground rules (never early, at most
/// once, stale keys are harmless) and the limits.
#[derive(Debug)]
pub struct TimerWheel<T> {
    tick_us: u64,
    mask: u64,
    origin: Instant,
    /// The first tick not yet swept into `due`.
    cursor_tick: u64,
    /// The latest `now` seen, to assert that time never goes backwards.
    now_last: Instant,
    heads: Box<[u32]>,
    entries: Vec<Entry<T>>,
    free_head: u32,
    due: BinaryHeap<DueItem>,
    /// A time `<=` every deadline still in the wheel lists (not in `due`).
    wheel_bound: Option<Instant>,
    /// The generation the next insert gets; strictly increasing, never reused.
    generation_next: u64,
    len: usize,
}

impl<T> TimerWheel<T> {
    /// The tick of [`TimerWheel::with_defaults`]: fine enough that a sweep
    /// moves few entries, coarse enough that a revolution spans half a second.
    pub const TICK_DEFAULT: Duration = Duration::from_millis(1);
    /// The slot count of [`TimerWheel::with_defaults`].
    pub const SLOTS_DEFAULT: usize = 512;
    /// The largest slot count accepted: a bound on the sweep of one poll.
    pub const SLOTS_MAX: usize = 1 << 20;

    /// A wheel whose ticks are `tick` long, with `slots` slots (a power of
    /// two), starting at `now`.
    pub fn new(tick: Duration, slots: usize, now: Instant) -> Self {
        assert!(slots.is_power_of_two(), "slots must be a power of two");
        assert!(slots <= Self::SLOTS_MAX, "slots above SLOTS_MAX");
        assert_eq!(tick.subsec_nanos() % 1_000, 0, "tick in whole µs");
        let tick_us = u64::try_from(tick.as_micros()).unwrap_or(u64::MAX);
        assert!(tick_us > 0, "tick must be at least 1 µs");
        Self {
            tick_us,
            mask: slots as u64 - 1,
            origin: now,
            cursor_tick: 0,
            now_last: now,
            heads: vec![NIL; slots].into_boxed_slice(),
            entries: Vec::new(),
            free_head: NIL,
            due: BinaryHeap::new(),
            wheel_bound: None,
            generation_next: 0,
            len: 0,
        }
    }

    /// A wheel with a 1 ms tick and 512 slots, starting at `now`.
    pub fn with_defaults(now: Instant) -> Self {
        Self::new(Self::TICK_DEFAULT, Self::SLOTS_DEFAULT, now)
    }

    /// How many timers are armed (neither fired nor cancelled).
    #[cfg(feature = "testing")]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Arms a timer that fires with `value` once a poll's `now` reaches
    /// `deadline`. A deadline already passed fires on the next poll.
    pub fn insert(&mut self, deadline: Instant, value: T) -> TimerKey {
        let generation = self.generation_next;
        self.generation_next += 1;
        let expiry_tick = self.tick_of(deadline);
        let index = self.alloc_entry();
        let place = if expiry_tick < self.cursor_tick {
            // That tick was swept already: the entry is due as soon as `now`
            // reaches its deadline, which the heap checks exactly.
            self.due
                .push(Reverse((deadline.as_micros(), generation, index)));
            Place::Due
        } else {
            self.wheel_bound = Some(self.wheel_bound.map_or(deadline, |b| b.min(deadline)));
            let next = self.link_front(index, expiry_tick);
            Place::Wheel { prev: NIL, next }
        };
        self.entries[index as usize] = Entry::Live {
            generation,
            deadline,
            expiry_tick,
            place,
            value,
        };
        self.len += 1;
        debug_assert!(self.len <= self.entries.len());
        TimerKey { index, generation }
    }

    /// Disarms the timer of `key` and returns its value, or `None` when the
    /// key is stale (the timer fired or was cancelled already).
    pub fn cancel(&mut self, key: TimerKey) -> Option<T> {
        debug_assert!(
            key.generation < self.generation_next,
            "a key this wheel never issued"
        );
        let entry = self.entries.get(key.index as usize)?;
        let Entry::Live { generation, .. } = entry else {
            return None;
        };
        if *generation != key.generation {
            return None;
        }
        // A due entry leaves a stale heap item behind; poll skips it.
        Some(self.remove(key.index))
    }

    /// One timer whose deadline is `<= now`, earliest deadline first, or
    /// `None` when none is due. Call it until `None` after every wake-up.
    ///
    /// It never returns a timer whose deadline is later than `now`.
    #[must_use]
    pub fn poll_expired(&mut self, now: Instant) -> Option<(TimerKey, T)> {
        debug_assert!(now >= self.now_last, "time went backwards");
        self.now_last = now;
        self.sweep(self.tick_of(now));
        while let Some(&Reverse((deadline_us, generation, index))) = self.due.peek() {
            if !self.is_live_due(index, generation) {
                self.due.pop();
                continue;
            }
            if deadline_us > now.as_micros() {
                break;
            }
            self.due.pop();
            let value = self.remove(index);
            debug_assert!(deadline_us <= now.as_micros(), "fired early");
            return Some((TimerKey { index, generation }, value));
        }
        if self.wheel_bound.is_some_and(|bound| bound <= now) {
            self.wheel_bound = self.wheel_earliest();
        }
        None
    }

    /// A time `<=` the earliest armed deadline, `None` when nothing is armed.
    ///
    /// The caller may sleep until it: never late, and early (a harmless
    /// early wake-up) after a cancel, until a poll that drains everything due
    /// passes the cancelled deadline and recomputes it (module doc).
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.is_empty() {
            return None;
        }
        let due = self
            .due
            .peek()
            .map(|Reverse((deadline_us, _, _))| Instant::from_micros(*deadline_us));
        let bound = match (due, self.wheel_bound) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        debug_assert!(bound.is_some(), "armed timers but no bound");
        bound
    }

    fn tick_of(&self, at: Instant) -> u64 {
        at.as_micros().saturating_sub(self.origin.as_micros()) / self.tick_us
    }

    fn slot_of(&self, tick: u64) -> usize {
        // The mask is below `SLOTS_MAX`, so the slot fits in `usize`.
        (tick & self.mask) as usize
    }

    fn is_live_due(&self, index: u32, generation_want: u64) -> bool {
        match self.entries.get(index as usize) {
            Some(Entry::Live {
                generation, place, ..
            }) if *generation == generation_want => {
                debug_assert!(matches!(place, Place::Due), "heap item for a wheel entry");
                true
            }
            _ => false,
        }
    }

    /// Moves every wheel entry whose tick is `<= now_tick` into `due`.
    fn sweep(&mut self, now_tick: u64) {
        if now_tick < self.cursor_tick {
            return;
        }
        // However far time jumped, one revolution visits every slot once.
        let span = (now_tick - self.cursor_tick).saturating_add(1);
        let visits = span.min(self.mask + 1);
        for offset in 0..visits {
            let slot = self.slot_of(self.cursor_tick + offset);
            let mut index = self.heads[slot];
            while index != NIL {
                let (next, expiry_tick) = self.wheel_links(index);
                if expiry_tick <= now_tick {
                    self.move_to_due(index);
                }
                index = next;
            }
        }
        self.cursor_tick = now_tick.saturating_add(1);
        debug_assert!(self.cursor_tick > now_tick || now_tick == u64::MAX);
    }

    fn wheel_links(&self, index: u32) -> (u32, u64) {
        match &self.entries[index as usize] {
            Entry::Live {
                place: Place::Wheel { next, .. },
                expiry_tick,
                ..
            } => (*next, *expiry_tick),
            _ => unreachable!("a wheel list links only wheel entries"),
        }
    }

    fn move_to_due(&mut self, index: u32) {
        self.unlink(index);
        let Entry::Live {
            generation,
            deadline,
            place,
            ..
        } = &mut self.entries[index as usize]
        else {
            unreachable!("moving a free entry");
        };
        *place = Place::Due;
        self.due
            .push(Reverse((deadline.as_micros(), *generation, index)));
    }

    /// The earliest deadline in the wheel lists, scanning from the cursor: the
    /// first tick whose slot holds an entry of that very tick wins; when a
    /// whole revolution has none, the minimum over all entries is exact.
    fn wheel_earliest(&self) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        for offset in 0..=self.mask {
            let tick = self.cursor_tick.saturating_add(offset);
            let mut in_tick: Option<Instant> = None;
            let mut index = self.heads[self.slot_of(tick)];
            while index != NIL {
                let Entry::Live {
                    deadline,
                    expiry_tick,
                    place: Place::Wheel { next, .. },
                    ..
                } = &self.entries[index as usize]
                else {
                    unreachable!("a wheel list links only wheel entries");
                };
                debug_assert!(*expiry_tick >= self.cursor_tick, "unswept past entry");
                earliest = Some(earliest.map_or(*deadline, |e| e.min(*deadline)));
                if *expiry_tick == tick {
                    in_tick = Some(in_tick.map_or(*deadline, |e| e.min(*deadline)));
                }
                index = *next;
            }
            if in_tick.is_some() {
                return in_tick;
            }
        }
        earliest
    }

    fn alloc_entry(&mut self) -> u32 {
        if self.free_head != NIL {
            let index = self.free_head;
            let Entry::Free { next_free } = self.entries[index as usize] else {
                unreachable!("free list links a live entry");
            };
            self.free_head = next_free;
            return index;
        }
        let index = u32::try_from(self.entries.len()).unwrap_or(NIL);
        assert!(index != NIL, "timer wheel: u32::MAX - 1 timers pending");
        self.entries.push(Entry::Free { next_free: NIL });
        index
    }

    /// Links `index` at the front of its slot's list; returns the old head.
    fn link_front(&mut self, index: u32, expiry_tick: u64) -> u32 {
        let slot = self.slot_of(expiry_tick);
        let head = self.heads[slot];
        if head != NIL {
            let Entry::Live {
                place: Place::Wheel { prev, .. },
                ..
            } = &mut self.entries[head as usize]
            else {
                unreachable!("a wheel head is a wheel entry");
            };
            *prev = index;
        }
        self.heads[slot] = index;
        head
    }

    fn unlink(&mut self, index: u32) {
        let (prev, next, slot) = match &self.entries[index as usize] {
            Entry::Live {
                place: Place::Wheel { prev, next },
                expiry_tick,
                ..
            } => (*prev, *next, self.slot_of(*expiry_tick)),
            _ => unreachable!("unlinking an entry that is not in the wheel"),
        };
        if prev == NIL {
            debug_assert_eq!(self.heads[slot], index);
            self.heads[slot] = next;
        } else {
            self.set_link(prev, |_, n| *n = next);
        }
        if next != NIL {
            self.set_link(next, |p, _| *p = prev);
        }
    }

    fn set_link(&mut self, index: u32, f: impl FnOnce(&mut u32, &mut u32)) {
        let Entry::Live {
            place: Place::Wheel { prev, next },
            ..
        } = &mut self.entries[index as usize]
        else {
            unreachable!("a wheel neighbour is a wheel entry");
        };
        f(prev, next);
    }

    /// Frees the live entry `index` (wherever it is) and returns its value.
    fn remove(&mut self, index: u32) -> T {
        if let Entry::Live {
            place: Place::Wheel { .. },
            ..
        } = self.entries[index as usize]
        {
            self.unlink(index);
        }
        let entry = std::mem::replace(
            &mut self.entries[index as usize],
            Entry::Free {
                next_free: self.free_head,
            },
        );
        self.free_head = index;
        let Entry::Live { value, .. } = entry else {
            unreachable!("removing a free entry");
        };
        debug_assert!(self.len > 0);
        self.len -= 1;
        value
    }
}

#[cfg(test)]
mod tests;
