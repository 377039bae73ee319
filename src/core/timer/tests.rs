use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;

use super::{Entry, Place, TimerKey, TimerWheel, NIL};
use crate::core::time::Instant;

fn ms(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// Drains everything due at `now`, asserting the ground rules on the way.
fn drain(wheel: &mut TimerWheel<u32>, now: Instant) -> Vec<(TimerKey, u32)> {
    let mut fired = Vec::new();
    while let Some(entry) = wheel.poll_expired(now) {
        fired.push(entry);
    }
    fired
}

#[test]
fn a_timer_fires_once_at_its_deadline_and_not_a_microsecond_sooner() {
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    let deadline = Instant::from_micros(1_500);
    let key = wheel.insert(deadline, 7);
    assert_eq!(wheel.next_deadline(), Some(deadline));

    assert!(wheel.poll_expired(Instant::from_micros(1_499)).is_none());
    assert_eq!(wheel.poll_expired(deadline), Some((key, 7)));
    assert!(wheel.poll_expired(deadline).is_none());
    assert!(wheel.poll_expired(ms(10_000)).is_none());
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_deadline(), None);
}

#[test]
fn replacement_close_100ms_fires_at_its_deadline_not_before() {
    // §6: the close is scheduled 100 ms after the callback terminal.
    let terminal = Instant::from_micros(12_345);
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    let close_at = terminal + Duration::from_millis(100);
    wheel.insert(close_at, 100);
    let mut now = terminal;
    while now < close_at {
        assert!(wheel.poll_expired(now).is_none(), "fired early at {now:?}");
        now = now + Duration::from_micros(250);
    }
    let just_before = Instant::from_micros(close_at.as_micros() - 1);
    assert!(wheel.poll_expired(just_before).is_none());
    assert_eq!(wheel.next_deadline(), Some(close_at));
    assert_eq!(wheel.poll_expired(close_at).map(|(_, v)| v), Some(100));
}

#[test]
fn replacement_callback_timeout_30000ms_fires_at_its_deadline_not_before() {
    // §6: 30,000 ms spans about 58 revolutions of the default wheel.
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    let start = ms(3);
    let deadline = start + Duration::from_millis(30_000);
    wheel.insert(deadline, 30);
    assert_eq!(wheel.next_deadline(), Some(deadline));
    for step in 0..30_000 {
        let now = start + Duration::from_millis(step);
        assert!(wheel.poll_expired(now).is_none(), "fired early at {now:?}");
        assert_eq!(wheel.next_deadline(), Some(deadline));
    }
    let just_before = Instant::from_micros(deadline.as_micros() - 1);
    assert!(wheel.poll_expired(just_before).is_none());
    assert_eq!(wheel.poll_expired(deadline).map(|(_, v)| v), Some(30));
}

#[test]
fn far_deadlines_wait_out_their_rounds_even_when_time_jumps() {
    let mut wheel = TimerWheel::new(Duration::from_millis(1), 8, Instant::ZERO);
    // Same slot (tick % 8 == 3), rounds 0, 1 and 5.
    let near = wheel.insert(ms(3), 0);
    let mid = wheel.insert(ms(11), 1);
    let far = wheel.insert(ms(43), 5);
    assert_eq!(drain(&mut wheel, ms(10)), vec![(near, 0)]);
    assert_eq!(wheel.next_deadline(), Some(ms(11)));
    assert_eq!(drain(&mut wheel, ms(42)), vec![(mid, 1)]);
    assert_eq!(wheel.next_deadline(), Some(ms(43)));
    // A jump of many revolutions sweeps each slot once and misses nothing.
    let later = wheel.insert(ms(1_000), 9);
    assert_eq!(drain(&mut wheel, ms(5_000)), vec![(far, 5), (later, 9)]);
    assert!(wheel.is_empty());
}

/// Module docs, "Limits": a deadline saturates at the end of `Instant`'s
/// range and the wheel keeps working for it. Such a timer (`now` plus a
/// timeout too long to represent) stays armed through every earlier poll,
/// is still the next deadline and cancellable, and fires once, when a
/// poll's `now` reaches the last microsecond: with a 1 µs tick (the last
/// tick is `u64::MAX`) and with the default 1 ms tick.
#[test]
fn a_deadline_saturated_at_the_end_of_time_waits_there_and_fires_there() {
    for tick in [Duration::from_micros(1), TimerWheel::<u32>::TICK_DEFAULT] {
        let mut wheel = TimerWheel::new(tick, 8, Instant::ZERO);
        let end = ms(2) + Duration::MAX;
        assert_eq!(end, Instant::from_micros(u64::MAX));
        let last = wheel.insert(end, 1);
        let cancelled = wheel.insert(ms(3) + Duration::MAX, 2);
        let soon = wheel.insert(ms(5), 3);
        assert_eq!(wheel.next_deadline(), Some(ms(5)), "tick {tick:?}");
        assert_eq!(drain(&mut wheel, ms(10)), vec![(soon, 3)], "tick {tick:?}");
        assert_eq!(wheel.next_deadline(), Some(end), "tick {tick:?}");
        assert_eq!(wheel.cancel(cancelled), Some(2), "tick {tick:?}");
        let just_before = Instant::from_micros(u64::MAX - 1);
        assert!(drain(&mut wheel, just_before).is_empty(), "tick {tick:?}");
        assert_eq!(wheel.next_deadline(), Some(end), "tick {tick:?}");
        assert_eq!(drain(&mut wheel, end), vec![(last, 1)], "tick {tick:?}");
        assert!(drain(&mut wheel, end).is_empty(), "tick {tick:?}");
        assert!(wheel.is_empty(), "tick {tick:?}");
        assert_eq!(wheel.next_deadline(), None, "tick {tick:?}");
    }
}

#[test]
fn stale_keys_cancel_nothing() {
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    let fired = wheel.insert(ms(1), 1);
    assert_eq!(drain(&mut wheel, ms(1)), vec![(fired, 1)]);
    let cancelled = wheel.insert(ms(5), 2);
    assert_eq!(wheel.cancel(cancelled), Some(2));
    // Both entries are reused by the next inserts; the old keys must not reach them.
    let a = wheel.insert(ms(7), 3);
    let b = wheel.insert(ms(8), 4);
    assert_eq!(wheel.cancel(fired), None);
    assert_eq!(wheel.cancel(cancelled), None);
    assert_eq!(wheel.len(), 2);
    assert_eq!(drain(&mut wheel, ms(8)), vec![(a, 3), (b, 4)]);
}

#[test]
fn a_past_deadline_fires_on_the_next_poll_and_cancels_from_the_due_set() {
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    assert!(wheel.poll_expired(ms(50)).is_none());
    let past = wheel.insert(ms(10), 1);
    let same_tick_later = wheel.insert(Instant::from_micros(50_600), 2);
    let cancelled = wheel.insert(Instant::from_micros(50_300), 3);
    assert_eq!(wheel.next_deadline(), Some(ms(10)));
    assert_eq!(wheel.cancel(cancelled), Some(3));
    assert_eq!(drain(&mut wheel, ms(50)), vec![(past, 1)]);
    assert!(wheel.poll_expired(Instant::from_micros(50_599)).is_none());
    let fired = drain(&mut wheel, Instant::from_micros(50_600));
    assert_eq!(fired, vec![(same_tick_later, 2)]);
}

#[test]
fn due_timers_come_out_in_deadline_order_ties_in_insert_order() {
    let mut wheel = TimerWheel::with_defaults(Instant::ZERO);
    let deadlines = [900, 100, 500, 100, 1_900, 1_100];
    for (value, us) in deadlines.iter().enumerate() {
        wheel.insert(Instant::from_micros(*us), value as u32);
    }
    let order: Vec<u32> = drain(&mut wheel, ms(2))
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(order, vec![1, 3, 2, 0, 5, 4]);
}

#[test]
#[should_panic(expected = "power of two")]
fn slots_must_be_a_power_of_two() {
    let _ = TimerWheel::<u32>::new(Duration::from_millis(1), 500, Instant::ZERO);
}

#[derive(Clone, Debug)]
enum Op {
    /// Arm a timer `offset_us - 5_000` µs from now (so some lie in the past).
    Insert { offset_us: u64 },
    /// Cancel the n-th armed timer (modulo how many were armed).
    Cancel { nth: usize },
    /// Advance time and poll, partly or fully.
    Advance { by_us: u64, polls_max: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..200_000).prop_map(|offset_us| Op::Insert { offset_us }),
        1 => any::<usize>().prop_map(|nth| Op::Cancel { nth }),
        3 => (0u64..20_000, 0usize..8).prop_map(|(by_us, polls_max)| Op::Advance { by_us, polls_max }),
    ]
}

/// The model: every armed timer's deadline, and what has fired.
#[derive(Default)]
struct Model {
    armed: HashMap<TimerKey, Instant>,
    keys: Vec<TimerKey>,
    fired: HashMap<TimerKey, Instant>,
}

impl Model {
    fn check_poll(&mut self, now: Instant, key: TimerKey, value: u32) -> Instant {
        let deadline = self.armed.remove(&key).expect("fired a timer not armed");
        assert!(deadline <= now, "early: deadline {deadline:?} now {now:?}");
        assert_eq!(u64::from(value), deadline.as_micros() % 1_000_003);
        assert!(self.fired.insert(key, now).is_none(), "fired twice");
        deadline
    }

    fn check_drained(&self, wheel: &TimerWheel<u32>, now: Instant) {
        assert!(
            self.armed.values().all(|d| *d > now),
            "a due timer did not fire"
        );
        assert_eq!(wheel.len(), self.armed.len());
        let earliest = self.armed.values().min().copied();
        match (wheel.next_deadline(), earliest) {
            (None, None) => {}
            (Some(bound), Some(earliest)) => assert!(bound <= earliest, "would oversleep"),
            (bound, earliest) => panic!("next_deadline {bound:?}, earliest {earliest:?}"),
        }
    }
}

/// The wheel's own bookkeeping after an operation (module docs, "How it
/// works"): walking each slot's list, in at most as many steps as there
/// are entries, meets only live wheel entries whose tick hashes to that
/// slot, each naming the one before it as `prev`; a fired, cancelled or
/// due entry is in no list; and the listed and due entries are the armed
/// timers. A stale link would make a later sweep walk a freed or reused
/// entry, or spin in a cycle, so the property test checks this after every
/// step and fails there instead.
fn assert_lists_consistent(wheel: &TimerWheel<u32>) {
    let mut listed = 0;
    for (slot, &head) in wheel.heads.iter().enumerate() {
        let (mut prev_want, mut index) = (NIL, head);
        while index != NIL {
            listed += 1;
            assert!(listed <= wheel.entries.len(), "slot {slot}: a cycle");
            let Entry::Live {
                expiry_tick,
                place: Place::Wheel { prev, next },
                ..
            } = &wheel.entries[index as usize]
            else {
                panic!("slot {slot} links {:?}", wheel.entries[index as usize]);
            };
            assert_eq!(*prev, prev_want, "slot {slot}: prev of entry {index}");
            assert_eq!(wheel.slot_of(*expiry_tick), slot, "entry {index}'s slot");
            (prev_want, index) = (index, *next);
        }
    }
    let in_wheel = |e: &&Entry<u32>| {
        matches!(
            e,
            Entry::Live {
                place: Place::Wheel { .. },
                ..
            }
        )
    };
    let live = |e: &&Entry<u32>| matches!(e, Entry::Live { .. });
    assert_eq!(listed, wheel.entries.iter().filter(in_wheel).count());
    assert_eq!(wheel.entries.iter().filter(live).count(), wheel.len());
}

fn run(ops: Vec<Op>, slots: usize, tick_us: u64) {
    let mut wheel = TimerWheel::new(Duration::from_micros(tick_us), slots, Instant::ZERO);
    let mut model = Model::default();
    let mut now = ms(10);
    for op in ops {
        match op {
            Op::Insert { offset_us } => {
                let deadline =
                    Instant::from_micros((now.as_micros() + offset_us).saturating_sub(5_000));
                let value = (deadline.as_micros() % 1_000_003) as u32;
                let key = wheel.insert(deadline, value);
                model.armed.insert(key, deadline);
                model.keys.push(key);
                assert_lists_consistent(&wheel);
            }
            Op::Cancel { nth } if !model.keys.is_empty() => {
                let key = model.keys[nth % model.keys.len()];
                let want = model.armed.remove(&key);
                assert_eq!(
                    wheel.cancel(key).is_some(),
                    want.is_some(),
                    "cancel of {key:?}"
                );
                assert_eq!(wheel.cancel(key), None, "a second cancel is stale");
                assert_lists_consistent(&wheel);
            }
            Op::Cancel { .. } => {}
            Op::Advance { by_us, polls_max } => {
                now = now + Duration::from_micros(by_us);
                let mut polls = 0;
                let mut deadline_last = Instant::ZERO;
                while polls < polls_max {
                    let polled = wheel.poll_expired(now);
                    assert_lists_consistent(&wheel);
                    let Some((key, value)) = polled else {
                        break;
                    };
                    let deadline = model.check_poll(now, key, value);
                    assert!(deadline >= deadline_last, "out of deadline order");
                    deadline_last = deadline;
                    polls += 1;
                }
                if polls < polls_max {
                    model.check_drained(&wheel, now);
                }
            }
        }
    }
    now = now + Duration::from_secs(1);
    while let Some((key, value)) = wheel.poll_expired(now) {
        assert_lists_consistent(&wheel);
        model.check_poll(now, key, value);
    }
    assert_lists_consistent(&wheel);
    model.check_drained(&wheel, now);
    assert!(wheel.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn timers_never_fire_early_and_all_due_timers_fire_once(
        ops in prop::collection::vec(op(), 1..300),
        slots_log2 in 0u32..7,
        tick_us in prop_oneof![Just(1u64), Just(1_000), 1u64..5_000],
    ) {
        run(ops, 1 << slots_log2, tick_us);
    }
}
