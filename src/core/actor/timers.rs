//! An Actor's timers (docs/actors.md "Timers"): one-shot and repeating, on
//! the shard core's one timer wheel, each tick delivered as a turn of the
//! Actor's lane. The spec is silent on timers; the rules are ours:
//!
//! - A tick never fires before its time. A repeating timer keeps a fixed
//!   rate: its ticks are due at `first + n × period`, not `period` after the
//!   previous turn ended.
//! - A tick due while an earlier tick of the same timer is still queued or
//!   running is skipped and counted (`actor_timer_tick_skipped`), never
//!   queued behind it: a slow tick handler sees fewer ticks, not a burst.
//! - Ticks are numbered 1, 2, 3 … per timer, counting delivered ticks only,
//!   so the numbers an Actor sees are contiguous.
//! - A relocation freezes the timers at capture and carries each as the
//!   time it had left ([`TimersHandoff`]); the target, or the source again
//!   when the move aborts, arms each from the moment it takes the Actor. A
//!   tick is late by at most the move's pause, never early, never doubled.
//! - Destroying the Actor cancels its timers; a fenced owner (§5) fires none.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::effects::{CoreTimer, Effects};
use super::super::time::Instant;
use super::super::timer::TimerKey;
use super::super::trace::FlowTrace;
use super::ActorEvent;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, TimerId};
use crate::wire::node::{TimerHandoff, TimersHandoff};

/// The shortest period a repeating timer may have: the wheel's tick.
pub const TIMER_PERIOD_MIN: Duration = Duration::from_millis(1);

/// A wheel timer of an Actor's timer: `arm` names the arming it was set for,
/// so one left over from a cancelled or re-armed timer fires nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorTimerFire {
    /// The Actor.
    pub actor: ActorId,
    /// Its timer.
    pub timer: TimerId,
    /// The arming this wheel entry belongs to.
    pub arm: u64,
}

#[derive(Debug)]
struct ActorTimer {
    /// `Some` for a repeating timer.
    period: Option<Duration>,
    /// When its next tick is due.
    due: Instant,
    /// Its wheel entry, while armed (`None` while frozen for a move).
    key: Option<TimerKey>,
    arm: u64,
    /// Ticks delivered so far.
    ticks: u64,
    /// A delivered tick has not finished its turn yet.
    running: bool,
    /// While frozen for a move: the time it had left at capture.
    left: Duration,
}

/// The timers of one hosted Actor.
#[derive(Debug, Default)]
pub(crate) struct ActorTimers {
    next: TimerId,
    timers: BTreeMap<TimerId, ActorTimer>,
    next_arm: u64,
}

impl ActorTimers {
    /// The timers a relocation handed over, armed from `now` with the time
    /// each had left (late by the move's pause at most, never early).
    /// `queued` says which have a tick in the handed-over queue, still to
    /// run: the next tick of those is skipped until it has.
    pub(crate) fn handed(
        handoff: TimersHandoff,
        queued: impl Fn(TimerId) -> bool,
        actor: &ActorId,
        fx: &mut Effects,
    ) -> Self {
        let mut timers = Self {
            next: handoff.next,
            ..Self::default()
        };
        for handed in handoff.timers {
            let due = fx.now() + handed.remaining;
            let timer = ActorTimer {
                period: handed.period,
                due,
                key: None,
                arm: 0,
                ticks: handed.ticks,
                running: queued(handed.timer),
                left: Duration::ZERO,
            };
            timers.timers.insert(handed.timer, timer);
            timers.arm(actor, handed.timer, fx);
        }
        timers
    }

    /// Sets a timer whose first tick is due `after` from now; with a
    /// `period`, it then repeats at that fixed rate until cancelled.
    pub(crate) fn set(
        &mut self,
        actor: &ActorId,
        after: Duration,
        period: Option<Duration>,
        fx: &mut Effects,
    ) -> Result<TimerId, Error> {
        if period.is_some_and(|p| p < TIMER_PERIOD_MIN) {
            return Err(Reason::TimerPeriodTooShort.into());
        }
        if self.timers.len() >= usize::from(TimerHandoff::PER_ACTOR_MAX) {
            return Err(Reason::TooManyTimers.into());
        }
        let id = self.next;
        self.next = TimerId(id.0 + 1);
        let timer = ActorTimer {
            period,
            due: fx.now() + after,
            key: None,
            arm: 0,
            ticks: 0,
            running: false,
            left: Duration::ZERO,
        };
        self.timers.insert(id, timer);
        self.arm(actor, id, fx);
        Ok(id)
    }

    /// Cancels a timer: no tick of it is delivered from now on (one already
    /// queued still runs). `false` when there was no such pending timer.
    pub(crate) fn cancel(&mut self, timer: TimerId, fx: &mut Effects) -> bool {
        let Some(cancelled) = self.timers.remove(&timer) else {
            return false;
        };
        if let Some(key) = cancelled.key {
            fx.cancel(key);
        }
        true
    }

    /// Cancels every timer (the Actor is destroyed or leaves this node).
    pub(crate) fn cancel_all(&mut self, fx: &mut Effects) {
        for (_, timer) in std::mem::take(&mut self.timers) {
            if let Some(key) = timer.key {
                fx.cancel(key);
            }
        }
    }

    /// The tick turn of `timer` ended: its next tick may be delivered.
    pub(crate) fn done(&mut self, timer: TimerId) {
        if let Some(timer) = self.timers.get_mut(&timer) {
            timer.running = false;
        }
    }

    /// A delivered tick could not run (its lane was full, or it was
    /// refused): it is a skipped tick, and its number is given back, so the
    /// numbers the Actor sees stay contiguous.
    pub(crate) fn refused(&mut self, timer: TimerId, tick: u64) {
        if let Some(timer) = self.timers.get_mut(&timer) {
            if timer.ticks == tick {
                timer.ticks -= 1;
            }
            timer.running = false;
        }
    }

    /// A wheel entry fired at `now`: the tick is delivered, or skipped when
    /// the previous one has not finished; a repeating timer is armed for
    /// its next due time (skipping, and counting, those already past).
    /// `fenced` owners deliver nothing and stop the timer.
    pub(crate) fn fire(&mut self, fire: &ActorTimerFire, fenced: bool, fx: &mut Effects) {
        let Some(timer) = self.timers.get_mut(&fire.timer) else {
            return;
        };
        if timer.arm != fire.arm {
            return;
        }
        timer.key = None;
        if fenced {
            self.timers.remove(&fire.timer);
            return;
        }
        if timer.running {
            fx.trace(FlowTrace::ActorTimerTickSkipped);
        } else {
            timer.ticks += 1;
            timer.running = true;
            fx.actor_event(ActorEvent::Timer {
                actor: fire.actor.clone(),
                timer: fire.timer,
                tick: timer.ticks,
            });
        }
        let Some(period) = timer.period else {
            self.timers.remove(&fire.timer);
            return;
        };
        // Fixed rate: the next tick is one period on. A shard that fired
        // this one late (a long turn, a stopped process) skips, and counts,
        // every tick whose time has passed too, in one step however many:
        // no burst makes up for them, and no loop runs once per period.
        // `passed`: the whole periods from this tick's time to now, each
        // one a tick whose time has come too.
        let period_us = u64::try_from(period.as_micros()).map_or(u64::MAX, |p| p.max(1));
        let behind_us = u64::try_from((fx.now() - timer.due).as_micros()).unwrap_or(u64::MAX);
        let passed = behind_us / period_us;
        fx.trace_many(FlowTrace::ActorTimerTickSkipped, passed);
        let ahead = passed.saturating_add(1).saturating_mul(period_us);
        timer.due = timer.due + Duration::from_micros(ahead);
        self.arm(&fire.actor, fire.timer, fx);
    }

    /// Takes the timers off the wheel for a relocation's capture, each
    /// keeping the time it has left now; no tick fires until [`Self::thaw`]
    /// (the move aborted) or the Actor leaves with [`Self::handoff`].
    pub(crate) fn freeze(&mut self, fx: &mut Effects) {
        let now = fx.now();
        for timer in self.timers.values_mut() {
            if let Some(key) = timer.key.take() {
                fx.cancel(key);
            }
            timer.left = timer.due.saturating_duration_since(now);
        }
    }

    /// The frozen timers as a relocation carries them.
    pub(crate) fn handoff(&self) -> TimersHandoff {
        let timers = self
            .timers
            .iter()
            .map(|(&id, timer)| TimerHandoff {
                timer: id,
                remaining: timer.left,
                period: timer.period,
                ticks: timer.ticks,
            })
            .collect();
        TimersHandoff {
            next: self.next,
            timers,
        }
    }

    /// The move aborted: every frozen timer is armed again from now with the
    /// time it had left (late by the attempt's pause at most, never early).
    pub(crate) fn thaw(&mut self, actor: &ActorId, fx: &mut Effects) {
        let now = fx.now();
        let frozen: Vec<TimerId> = self
            .timers
            .iter_mut()
            .filter(|(_, timer)| timer.key.is_none())
            .map(|(&id, timer)| {
                timer.due = now + timer.left;
                id
            })
            .collect();
        for id in frozen {
            self.arm(actor, id, fx);
        }
    }

    /// How many timers are pending.
    #[cfg(feature = "testing")]
    pub(crate) fn len(&self) -> usize {
        self.timers.len()
    }

    fn arm(&mut self, actor: &ActorId, id: TimerId, fx: &mut Effects) {
        self.next_arm += 1;
        let arm = self.next_arm;
        let Some(timer) = self.timers.get_mut(&id) else {
            return;
        };
        let fire = ActorTimerFire {
            actor: actor.clone(),
            timer: id,
            arm,
        };
        timer.arm = arm;
        timer.key = Some(fx.arm_at(timer.due, CoreTimer::Actor(fire)));
    }
}
