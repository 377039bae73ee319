//! The shard stall watch (docs/operations.md "Shard stalls").
//!
//! A shard runs every session callback, Actor turn and record of the
//! sessions and Actors it owns on one thread, so a turn of its loop that
//! takes long delays all of them: a handler that blocks (a file read, a
//! synchronous HTTP call, a long computation) stalls every player of that
//! shard, as a blocked reactor does in Seastar, whose "reactor stalled"
//! warning this follows. The watch times the part of each loop turn after
//! the wait, phase by phase; a turn whose work took `NodeSettings::
//! stall_warn` or longer is counted (`shard_stalled`) and logged with the
//! time of each phase, at most once a second per shard (the rest summed
//! into the next line). The wait itself is not counted: an idle shard
//! waits by design.
//!
//! The watch reads the kernel's coarse monotonic clock, five times a turn:
//! it has the resolution of a kernel tick (1 to 4 ms), fine for a bound of
//! tens of milliseconds, and a read is a load from the vDSO page, not the
//! timestamp-counter read of `Instant::now`, so a relayed message does not
//! pay for the watch.

use std::time::Duration;

/// Now on `CLOCK_MONOTONIC_COARSE`, as the time since its origin.
fn coarse_now() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// The parts of a loop turn after its wait, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Client frames, link records, other shards' messages and the core's
    /// timers.
    Records,
    /// Actor turns run synchronously (handlers).
    ActorTurns,
    /// Session callbacks and the tasks of awaiting turns.
    Callbacks,
    /// What the callbacks left in the core, written out, with the Actor
    /// turns that drain hands out, and the turn's bookkeeping.
    Drain,
}

impl Phase {
    const ALL: [Phase; 4] = [
        Phase::Records,
        Phase::ActorTurns,
        Phase::Callbacks,
        Phase::Drain,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Records => "records and timers",
            Phase::ActorTurns => "Actor turns",
            Phase::Callbacks => "session callbacks and tasks",
            Phase::Drain => "drain after callbacks (its Actor turns included)",
        }
    }
}

/// A turn whose work took the limit or longer.
#[derive(Debug)]
pub(crate) struct Stall {
    /// The turn's work, from the end of its wait.
    pub(crate) total: Duration,
    /// Each phase's share, in [`Phase`] order.
    pub(crate) phases: [Duration; 4],
}

impl Stall {
    /// "Actor turns 120 ms, records and timers 0 ms, ...": the phases,
    /// longest first.
    pub(crate) fn describe(&self) -> String {
        let mut phases: Vec<(Phase, Duration)> =
            Phase::ALL.iter().copied().zip(self.phases).collect();
        phases.sort_by_key(|&(_, took)| std::cmp::Reverse(took));
        phases
            .iter()
            .map(|(phase, took)| format!("{} {} ms", phase.name(), took.as_millis()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One shard's watch. With a zero limit it reads no clock.
#[derive(Debug)]
pub(crate) struct StallWatch {
    limit: Duration,
    woke: Option<Duration>,
    ends: [Option<Duration>; 4],
    last_warned: Option<Duration>,
    unreported: u64,
    /// When the last stall's turn ended.
    ended_at: Duration,
}

/// At most one warning a second per shard.
const WARN_EVERY: Duration = Duration::from_secs(1);

impl StallWatch {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            limit,
            woke: None,
            ends: [None; 4],
            last_warned: None,
            unreported: 0,
            ended_at: Duration::ZERO,
        }
    }

    /// The turn's wait ended now.
    pub(crate) fn woke(&mut self) {
        if !self.limit.is_zero() {
            self.woke = Some(coarse_now());
            self.ends = [None; 4];
        }
    }

    /// `phase` of this turn ended now.
    pub(crate) fn ended(&mut self, phase: Phase) {
        if self.woke.is_some() {
            self.ends[phase as usize] = Some(coarse_now());
        }
    }

    /// The turn ended (its [`Phase::Drain`] with it): the stall, if its
    /// work took the limit or longer.
    pub(crate) fn turn_ended(&mut self) -> Option<Stall> {
        self.woke?;
        self.turn_ended_at(coarse_now())
    }

    fn turn_ended_at(&mut self, end: Duration) -> Option<Stall> {
        self.ends[Phase::Drain as usize] = Some(end);
        let woke = self.woke.take()?;
        let total = end.saturating_sub(woke);
        if total < self.limit {
            return None;
        }
        let mut phases = [Duration::ZERO; 4];
        let mut from = woke;
        for (took, &ended) in phases.iter_mut().zip(&self.ends) {
            // A phase a turn skipped took nothing.
            let ended = ended.unwrap_or(from);
            *took = ended.saturating_sub(from);
            from = from.max(ended);
        }
        self.ended_at = end;
        Some(Stall { total, phases })
    }

    /// Whether the stall the last turn ended with is logged: the first in a
    /// second is, with the count of those since the last line; the rest are
    /// only counted.
    pub(crate) fn warn_now(&mut self) -> Option<u64> {
        let now = self.ended_at;
        if self
            .last_warned
            .is_some_and(|last| now.saturating_sub(last) < WARN_EVERY)
        {
            self.unreported += 1;
            return None;
        }
        self.last_warned = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }

    /// The limit (zero: off).
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_under_the_limit_is_no_stall_and_a_zero_limit_reads_no_clock() {
        let mut watch = StallWatch::new(Duration::from_secs(3600));
        watch.woke();
        watch.ended(Phase::Records);
        assert!(watch.turn_ended().is_none());

        let mut off = StallWatch::new(Duration::ZERO);
        off.woke();
        off.ended(Phase::Records);
        assert!(off.ends.iter().all(Option::is_none));
        assert!(off.turn_ended().is_none());
    }

    #[test]
    fn a_stall_names_its_phases_longest_first() {
        let mut watch = StallWatch::new(Duration::from_millis(10));
        let woke = Duration::from_secs(100);
        let at = |ms| woke + Duration::from_millis(ms);
        watch.woke = Some(woke);
        watch.ends[Phase::Records as usize] = Some(at(2));
        // No Actor turn ran; the callbacks took 30 ms, the drain 8.
        watch.ends[Phase::Callbacks as usize] = Some(at(32));
        let found = watch.turn_ended_at(at(40)).expect("40 ms is over 10 ms");
        assert_eq!(found.total, Duration::from_millis(40));
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(found.phases, [ms(2), ms(0), ms(30), ms(8)]);
        // At 9 ms it is none.
        watch.woke = Some(woke);
        assert!(watch.turn_ended_at(at(9)).is_none());
        assert!(
            found
                .describe()
                .starts_with("session callbacks and tasks 30 ms, "),
            "{}",
            found.describe()
        );
    }

    #[test]
    fn one_warning_a_second_and_the_rest_summed_into_the_next() {
        let mut watch = StallWatch::new(Duration::from_millis(10));
        let start = Duration::from_secs(100);
        let mut stalled_until = |ms| {
            watch.woke = Some(start + Duration::from_millis(ms) - Duration::from_millis(20));
            assert!(watch
                .turn_ended_at(start + Duration::from_millis(ms))
                .is_some());
            watch.warn_now()
        };
        assert_eq!(stalled_until(0), Some(0));
        assert_eq!(stalled_until(10), None);
        assert_eq!(stalled_until(900), None);
        assert_eq!(stalled_until(1_000), Some(2));
    }

    #[test]
    fn the_coarse_clock_moves_forward() {
        let first = coarse_now();
        assert!(first > Duration::ZERO, "CLOCK_MONOTONIC_COARSE reads");
        assert!(coarse_now() >= first);
    }
}
