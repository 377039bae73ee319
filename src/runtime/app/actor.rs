//! Actors as the application writes them (§1, §5, §7).
//!
//! An Actor's handler runs on the shard that hosts it, on the Actor's own
//! delivery lane or, in a SpotWide Spot, on that Spot's gate — never in a
//! session callback's context (§5, §10). It answers a
//! request with a typed reply or error, and may push to, or close, its bound
//! session. Its current Spot ([`super::spot`]) receives `on_disconnect_actor`
//! when a bound session ends (§7).

use std::time::Duration;

use bytes::Bytes;

use crate::error::Error;
use crate::ids::{ActorId, Correlation, PacketKey, TimerId};
use crate::wire::client::CloseReason;

/// A message from a bound session, as the Actor's handler sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorMessage {
    /// The handler key.
    pub key: PacketKey,
    /// The payload.
    pub payload: Bytes,
    /// The client's original correlation when the client made a request.
    pub correlation: Option<Correlation>,
}

impl ActorMessage {
    /// Whether the sender waits for a reply.
    pub fn is_request(&self) -> bool {
        self.correlation.is_some()
    }
}

/// A tick of one of the Actor's timers (docs/actors.md "Timers").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerTick {
    /// The timer, as [`ActorContext::set_timer`] or
    /// [`ActorContext::set_repeating_timer`] returned it.
    pub timer: TimerId,
    /// The tick's number for this timer: 1, 2, 3 … with no gap and no
    /// repeat, across relocations too. A tick that came due while the
    /// previous one had not finished was skipped and takes no number.
    pub tick: u64,
}

/// The Actor's view of the runtime while a handler runs.
pub trait ActorContext {
    /// The Actor's global identity.
    fn actor_id(&self) -> &ActorId;

    /// §5: a one-way push to the bound session. With no binding it ends with
    /// session-not-bound (`InvalidOperation`, §12).
    fn push(&mut self, key: PacketKey, payload: Bytes) -> Result<(), Error>;

    /// §5 bound-session push on behalf of `member`, an Actor of the same
    /// SpotWide Spot (a room's tick fanned out to its players): it goes to
    /// `member`'s current binding and is judged exactly as `member`'s own
    /// push would be. Both share the Spot's gate, so no turn of `member`
    /// runs meanwhile (§5). Not a proxy to an arbitrary session (§5): a
    /// `member` outside this Actor's SpotWide Spot, or this Actor outside
    /// any, ends with `InvalidOperation` (ActorInOtherSpot); a member with
    /// no binding with session-not-bound (§12).
    fn push_to_member(
        &mut self,
        member: &ActorId,
        key: PacketKey,
        payload: Bytes,
    ) -> Result<(), Error>;

    /// §5: asks the bound session's owner to close the connection. With no
    /// binding it ends with session-not-bound (§12).
    fn close_session(&mut self, reason: CloseReason) -> Result<(), Error>;

    /// Sets a one-shot timer: [`Actor::on_timer`] runs once, `after` from
    /// now (never sooner), as a turn of this Actor. The timer moves with
    /// the Actor (docs/actors.md "Timers"). At most 64 timers may be
    /// pending per Actor (`TooManyTimers`).
    fn set_timer(&mut self, after: Duration) -> Result<TimerId, Error>;

    /// Sets a repeating timer, a game tick: its first tick is due `first`
    /// from now, then one every `period` at a fixed rate, until cancelled.
    /// A tick due while the previous one has not finished is skipped and
    /// counted, never run in a burst. `period` is at least 1 ms
    /// (`TimerPeriodTooShort`).
    fn set_repeating_timer(&mut self, first: Duration, period: Duration) -> Result<TimerId, Error>;

    /// Cancels a timer: none of its ticks runs from now on. `false` when
    /// there was no such pending timer (a one-shot that ran, a timer
    /// cancelled before).
    fn cancel_timer(&mut self, timer: TimerId) -> bool;
}

/// Game logic hosted by the runtime.
pub trait Actor: 'static {
    /// Handles one message. For a request the return value is its terminal
    /// (`Some(Ok(reply))` or `Some(Err(error))`); `None` answers a request with
    /// an empty reply. For a one-way message the value is ignored.
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>>;

    /// §5 point 1: runs right after a session's binding was registered (a
    /// join callback). A push from here is judged against the new binding.
    fn on_bound(&mut self, ctx: &mut dyn ActorContext) {
        let _ = ctx;
    }

    /// A tick of one of its timers ([`ActorContext::set_timer`],
    /// [`ActorContext::set_repeating_timer`]): a turn of this Actor like any
    /// message, never concurrent with another.
    fn on_timer(&mut self, ctx: &mut dyn ActorContext, tick: TimerTick) {
        let _ = (ctx, tick);
    }

    /// §8 live relocation: the Actor's state, to be carried to another node
    /// between two of its turns. `None` (the default) means the type cannot
    /// move: `Node::relocate` then ends with `InvalidOperation`
    /// (NotRelocatable) and nothing is sealed. Bounded by
    /// `DecodeLimits::handoff_state_len_max` (less a few bytes of the
    /// type's name); a larger state aborts the move (HandoffTooLarge).
    fn snapshot(&self) -> Option<Bytes> {
        None
    }

    /// §8: on the target node, a fresh instance from the type's factory
    /// takes the state [`Actor::snapshot`] gave at the source, before any
    /// message reaches it (restore without dispatch). An error aborts the
    /// move; the Actor stays at the source.
    fn restore(&mut self, state: Bytes) -> Result<(), Error> {
        let _ = state;
        Err(crate::error::Reason::NotRelocatable.into())
    }
}
