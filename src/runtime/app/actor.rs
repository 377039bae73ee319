//! Actors as the application writes them (§1, §5, §7).
//!
//! An Actor's handler runs on the shard that hosts it, on the Actor's own
//! delivery lane or, in a SpotWide Spot, on that Spot's gate — never in a
//! session callback's context (§5, §10). It answers a
//! request with a typed reply or error, and may push to, or close, its bound
//! session. Its current Spot ([`super::spot`]) receives `on_disconnect_actor`
//! when a bound session ends (§7).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::ids::{ActorId, CallId, Correlation, PacketKey, TimerId};
use crate::typed::{self, Message};
use crate::wire::client::CloseReason;

/// A message from a bound session or from another Actor, as the Actor's
/// handler sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorMessage {
    /// The handler key.
    pub key: PacketKey,
    /// The payload.
    pub payload: Bytes,
    /// The client's original correlation when the client made a request.
    pub correlation: Option<Correlation>,
    /// The Actor that sent it ([`ActorContext::send`],
    /// [`ActorContext::request`]); `None` for a message from a session.
    pub from: Option<ActorId>,
    /// Whether the sender waits for a reply: the handler's return value is
    /// that reply.
    pub wants_reply: bool,
}

impl ActorMessage {
    /// Whether the sender waits for a reply.
    pub fn is_request(&self) -> bool {
        self.wants_reply
    }

    /// The payload decoded as a `T` (docs/wire.md "Typed payloads"); bytes
    /// that are not one give `MalformedPayload` naming `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, Error> {
        typed::decode(&self.payload)
    }

    /// Answers the message as an `M` (issue 21 item 4: request type in,
    /// reply type out): decodes the payload, runs `handler` and encodes its
    /// reply — the value [`Actor::handle`] returns. A payload that is not an
    /// `M` is answered with `MalformedPayload` naming `M`, and `handler`
    /// does not run. Match on the key first: `Move::KEY =>
    /// message.answer(|m: Move| self.step(m))` (the `zlink::api` example).
    pub fn answer<M: Message>(
        &self,
        handler: impl FnOnce(M) -> Result<M::Reply, Error>,
    ) -> Option<Result<Bytes, Error>> {
        Some(typed::encode_outcome(self.decode::<M>().and_then(handler)))
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

    /// Sends a one-way message to the Actor `to`, on this node or another
    /// (docs/actors.md "Messages between Actors"): its handler gets it with
    /// `from` set to this Actor. Messages from one Actor to another keep
    /// their order while neither moves. One that cannot be delivered is
    /// counted (`one_way_record_refused`), never silent; `Err` only when it
    /// cannot even be queued here (`QueueFull`).
    fn send(&mut self, to: &ActorId, key: PacketKey, payload: Bytes) -> Result<(), Error>;

    /// Makes a request of the Actor `to`: its handler's return value comes
    /// back, once, as [`Actor::on_reply`] with the returned [`CallId`] — a
    /// later turn of this Actor, never this one — or a typed error:
    /// `Deadline` after `deadline`, `Unavailable` when the target could not
    /// be reached or has moved on (resolve again by calling again). It is
    /// never sent a second time. Two Actors that request each other and
    /// wait would wait forever without the deadline: answer in the handler,
    /// and do the follow-up work in `on_reply`.
    fn request(
        &mut self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<CallId, Error>;

    /// Makes a request of the Actor `to` whose reply this turn awaits: a
    /// future for [`AsyncTurn::new`] (docs/actors.md "Async turns"). It
    /// ends exactly once, like [`ActorContext::request`], with the reply or
    /// a typed error (`Deadline` after `deadline`). The Actor does not move
    /// while a turn awaits, so the reply comes back here.
    fn request_reply(
        &mut self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        deadline: Duration,
    ) -> crate::runtime::caller::CallReply;

    /// Ends this turn's synchronous part without ending the turn: the
    /// turn awaits `turn`'s future, and its continuation runs as the rest
    /// of the turn (docs/actors.md "Async turns"). Meanwhile the Actor's
    /// lane stays serial (the next message waits), the shard serves
    /// everything else, a SpotWide Spot's gate stays held, and no move
    /// takes the Actor. For a request, the continuation's value is the
    /// reply and the handler's return value is ignored. Once per turn
    /// (`InvalidOperation`, TurnAlreadyAwaits, for a second).
    fn suspend(&mut self, turn: AsyncTurn) -> Result<(), Error>;
}

/// The typed calls of every context (issue 21 item 4): each encodes the
/// message (MessagePack, docs/wire.md "Typed payloads") and makes the raw
/// call with `M::KEY`. They are inherent methods of `dyn ActorContext`, so
/// `ctx.send_typed(…)` needs no import.
impl dyn ActorContext + '_ {
    /// [`ActorContext::push`] of a typed message to the bound session.
    pub fn push_typed<M: Message>(&mut self, message: &M) -> Result<(), Error> {
        let payload = typed::encode(message)?;
        self.push(M::KEY, payload)
    }

    /// [`ActorContext::send`] of a typed one-way message to the Actor `to`.
    pub fn send_typed<M: Message>(&mut self, to: &ActorId, message: &M) -> Result<(), Error> {
        let payload = typed::encode(message)?;
        self.send(to, M::KEY, payload)
    }

    /// [`ActorContext::request`] of a typed request of the Actor `to`; its
    /// outcome comes to [`Actor::on_reply`] as bytes:
    /// [`typed::decode_reply::<M>`](crate::typed::decode_reply) gives the
    /// `M::Reply`.
    pub fn request_typed<M: Message>(
        &mut self,
        to: &ActorId,
        message: &M,
        deadline: Duration,
    ) -> Result<CallId, Error> {
        let payload = typed::encode(message)?;
        self.request(to, M::KEY, payload, deadline)
    }
}

/// The rest of a turn, run with the Actor and a fresh context once the
/// awaited future is ready.
pub(crate) type Resume =
    Box<dyn FnOnce(&mut dyn Actor, &mut dyn ActorContext) -> Option<Result<Bytes, Error>>>;

/// A turn that awaits (docs/actors.md "Async turns"): a future — another
/// Actor's reply ([`ActorContext::request_reply`]), an application future
/// such as a database call — and the continuation that finishes the turn
/// with the Actor's state once it is ready. The future owns what it needs
/// (it never borrows the Actor), so the shard polls it while it serves
/// everything else; the continuation gets `&mut` the Actor back.
pub struct AsyncTurn {
    pub(crate) future: Pin<Box<dyn Future<Output = Resume>>>,
}

impl AsyncTurn {
    /// Awaits `future`, then runs `then` with the Actor (of type `A`, the
    /// Actor whose turn this is), a context, and the future's output; for
    /// a request, `then`'s value is the reply (`None`: an empty reply).
    /// `then` may suspend again ([`ActorContext::suspend`]).
    pub fn new<A, T, F, C>(future: F, then: C) -> Self
    where
        A: Actor,
        T: 'static,
        F: Future<Output = T> + 'static,
        C: FnOnce(&mut A, &mut dyn ActorContext, T) -> Option<Result<Bytes, Error>> + 'static,
    {
        let future = async move {
            let value = future.await;
            let resume: Resume = Box::new(move |actor, ctx| {
                let any: &mut dyn Any = actor;
                match any.downcast_mut::<A>() {
                    Some(actor) => then(actor, ctx, value),
                    // The continuation of another type's turn: a bug of the
                    // application, answered typed, never a panic.
                    None => Some(Err(crate::error::Reason::TurnOfAnotherType.into())),
                }
            });
            resume
        };
        Self {
            future: Box::pin(future),
        }
    }
}

impl std::fmt::Debug for AsyncTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncTurn").finish_non_exhaustive()
    }
}

/// Game logic hosted by the runtime. (`Any`: an [`AsyncTurn`]'s
/// continuation gets the Actor back as its own type.)
pub trait Actor: Any {
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

    /// The outcome of a request this Actor made ([`ActorContext::request`]):
    /// the reply, or the typed error that ended it. A turn of this Actor like
    /// any message; it follows the Actor if it moved meanwhile.
    fn on_reply(
        &mut self,
        ctx: &mut dyn ActorContext,
        call: CallId,
        outcome: Result<Bytes, Error>,
    ) {
        let _ = (ctx, call, outcome);
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
