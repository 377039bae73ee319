//! The Actor owner's binding registry (§2, §4–§6): the Actors this shard
//! hosts, and for each exactly one current binding.
//!
//! Rules this module keeps:
//! - Bind admission looks at ObjectGeneration, the target NodeGeneration and
//!   AuthorityOwnerGeneration only — never the lease (§5).
//! - The registration is complete, including everything the push path reads,
//!   before the terminal reply is sent (§5 linearization point 1).
//! - A bind that replaces another session's binding sends 51 one-way to the
//!   previous session owner after the terminal; nothing waits for it (§6).
//! - Relay (24) is admitted only for the current binding identity; a retired
//!   or ended identity is refused as a stale binding (§6, §12).
//! - Destroy ends the incarnation's binding for good (§4), and its timers.
//!
//! The Actor's timers are `timers` (docs/actors.md "Timers").

mod awaits;
mod calls;
mod open_calls;
mod placement;
mod removal;
mod timers;

pub use self::awaits::{AwaitEvent, AwaitId, AwaitTimer};
pub use self::open_calls::CallDeadline;
pub use self::placement::{ActorLane, HostedSpot, InstanceSlot, Placement};
pub use self::timers::ActorTimerFire;
#[cfg(feature = "testing")]
pub use self::timers::TIMER_PERIOD_MIN;

use std::time::Duration;

use foldhash::{HashMap, HashMapExt};

use bytes::Bytes;

use super::effects::Effects;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, ActorRef, AuthorityOwnerGeneration, BindingGeneration, BindingIdentity,
    CallId, Correlation, MeshName, NodeGeneration, NodeRid, ObjectGeneration, OwnerLeaseGeneration,
    PacketKey, Peer, RequestId, SessionOwnerId, SessionRef, SessionSequence, SpotId, TimerId,
};
use crate::wire::client::CloseReason;
use crate::wire::node::{
    ActorMessage, ActorReply, ActorSend, ActorSendBody, AuthorityFence, BindRequest, BindTerminal,
    BindTombstone, BindingHandoff, BoundRoute, BoundSessionBind, BoundSessionBody,
    BoundSessionReplaced, BoundSessionSend, CallsHandoff, NodeRecord, TimersHandoff,
};
use open_calls::OpenCalls;
use removal::Ending;
use timers::ActorTimers;

/// Who this Actor owner is (§4 route fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorOwnerIdentity {
    /// The mesh it is reached through.
    pub mesh: MeshName,
    /// The node.
    pub node: NodeRid,
    /// The node's process lifecycle.
    pub node_generation: NodeGeneration,
    /// The node's owner lease generation.
    pub lease: OwnerLeaseGeneration,
}

/// What a relocation's target hosts: the moved incarnation with what the
/// handoff (60) carried for it.
#[derive(Debug)]
pub(crate) struct HandedActor {
    pub(crate) actor: ActorId,
    pub(crate) generation: ObjectGeneration,
    /// The authority owner generation the target's CAS took.
    pub(crate) authority: AuthorityOwnerGeneration,
    pub(crate) binding: Option<BindingHandoff>,
    pub(crate) timers: TimersHandoff,
    pub(crate) calls: CallsHandoff,
    /// Where the runtime placed the restored instance.
    pub(crate) placement: Option<Placement>,
}

/// Names a reply the Actor owes: a request relay or a disconnect callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplyTicket(pub u64);

/// What the Actor owner asks of the shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActorEvent {
    /// Put a message on the Actor's application queue (§5): the typed handler
    /// runs there, never in a session callback's context.
    Deliver {
        /// The Actor.
        actor: ActorId,
        /// The handler key.
        key: PacketKey,
        /// The client's original correlation, for a request.
        correlation: Option<Correlation>,
        /// The session sequence it was accepted with.
        sequence: SessionSequence,
        /// The payload.
        payload: Bytes,
        /// `Some` for a request: answer with `reply`.
        reply: Option<ReplyTicket>,
    },
    /// §5 point 1: a binding was registered; a join callback may run, and a
    /// push from it is judged against this binding.
    Bound {
        /// The Actor.
        actor: ActorId,
        /// The bound session.
        session: SessionRef,
    },
    /// §7: run the current Spot's `on_disconnect_actor` for this Actor; report
    /// its terminal with `disconnect_done`.
    Disconnect {
        /// The Actor.
        actor: ActorId,
        /// The session whose binding ends.
        session: SessionRef,
        /// Names the callback.
        ticket: ReplyTicket,
    },
    /// A message from another Actor (70): its handler runs; for a request,
    /// answer with `reply` (docs/actors.md "Messages between Actors").
    Call {
        /// The Actor it is for.
        actor: ActorId,
        /// The Actor that sent it; `None` for node code outside any Actor.
        from: Option<ActorId>,
        /// The handler key.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
        /// `Some` for a request: answer with `reply`.
        reply: Option<ReplyTicket>,
    },
    /// The outcome of a request the Actor made of another Actor.
    CallOutcome {
        /// The calling Actor.
        actor: ActorId,
        /// The request, as the caller numbered it.
        call: CallId,
        /// The reply, or the typed error that ended it.
        outcome: Result<Bytes, Error>,
    },
    /// A tick of one of the Actor's timers: run its timer handler, then
    /// report `timer_done` (docs/actors.md "Timers").
    Timer {
        /// The Actor.
        actor: ActorId,
        /// The timer.
        timer: TimerId,
        /// The tick's number: 1, 2, 3 … for this timer.
        tick: u64,
    },
}

impl crate::core::lane::Detach for ActorEvent {
    fn detach(&mut self) {
        use crate::core::lane::detached;
        match self {
            ActorEvent::Deliver { payload, .. } | ActorEvent::Call { payload, .. } => {
                *payload = detached(payload);
            }
            ActorEvent::CallOutcome {
                outcome: Ok(reply), ..
            } => *reply = detached(reply),
            _ => {}
        }
    }
}

impl ActorEvent {
    /// The Actor the work is for.
    pub fn actor(&self) -> &ActorId {
        match self {
            ActorEvent::Deliver { actor, .. }
            | ActorEvent::Bound { actor, .. }
            | ActorEvent::Disconnect { actor, .. }
            | ActorEvent::Call { actor, .. }
            | ActorEvent::CallOutcome { actor, .. }
            | ActorEvent::Timer { actor, .. } => actor,
        }
    }
}

/// One binding as the Actor owner registered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegisteredBinding {
    session: SessionRef,
    session_lease: OwnerLeaseGeneration,
    generation: BindingGeneration,
}

impl RegisteredBinding {
    /// The binding as the relocation handoff carries it (60).
    fn handoff(&self) -> BindingHandoff {
        BindingHandoff {
            session: self.session,
            session_lease: self.session_lease,
            binding: self.generation,
        }
    }

    fn identity(&self) -> BindingIdentity {
        BindingIdentity {
            owner: self.session.owner,
            lifecycle: self.session.lifecycle,
            generation: self.generation,
        }
    }

    /// Whether a record's session and binding generation name this binding.
    fn is(&self, session: &SessionRef, generation: BindingGeneration) -> bool {
        self.session == *session && self.generation == generation
    }
}

#[derive(Debug)]
struct HostedActor {
    generation: ObjectGeneration,
    authority: AuthorityOwnerGeneration,
    binding: Option<RegisteredBinding>,
    timers: ActorTimers,
    /// Its requests: numbered by the Actor, never reused by it, and those
    /// open, each with its deadline; they move with it (open_calls.rs).
    calls: OpenCalls,
    /// Where it runs (placement.rs); `None` for a driver that keeps no
    /// instances and lanes of its own (the simulator, core tests).
    placement: Option<Placement>,
    /// Its row's removal is with the Location Store (a destroy): no move
    /// starts meanwhile, and no second destroy (removal.rs).
    ending: Option<Ending>,
}

/// The state of every Actor this shard hosts.
#[derive(Debug)]
pub struct ActorOwner {
    identity: ActorOwnerIdentity,
    /// §5: set when the owner lease could not be renewed; from then on no
    /// bind or relay is admitted (a stored route is valid only within the
    /// lease).
    fenced: bool,
    /// §10 Shutdown: the node is draining. It takes no Actor by
    /// relocation from then on: one that arrived now would be left behind
    /// when the node stops (its moves away were chosen at the drain's
    /// start), and a moved Actor carries state that must not be lost.
    leaving: bool,
    actors: HashMap<ActorId, HostedActor>,
    /// The User Spots whose home is this shard (§1).
    spots: HashMap<SpotId, HostedSpot>,
    owed: HashMap<ReplyTicket, (Peer, RequestId)>,
    next_ticket: u64,
    /// Requests this shard's Actors made of other Actors (calls.rs).
    calls: HashMap<RequestId, calls::PendingCall>,
    next_call: RequestId,
    /// Turns that await and the moves parked behind them (awaits.rs).
    awaits: awaits::TurnAwaits,
}

impl ActorOwner {
    pub(crate) fn new(
        identity: ActorOwnerIdentity,
        shard: SessionOwnerId,
        turn_deadline: Duration,
    ) -> Self {
        Self {
            identity,
            fenced: false,
            leaving: false,
            actors: HashMap::new(),
            spots: HashMap::new(),
            owed: HashMap::new(),
            next_ticket: 0,
            calls: HashMap::new(),
            next_call: RequestId::call_origin(shard),
            awaits: awaits::TurnAwaits::new(turn_deadline),
        }
    }

    /// The awaiting turn of `actor`, if its turn awaits (docs/actors.md
    /// "Async turns").
    pub fn awaiting(&self, actor: &ActorId) -> Option<AwaitId> {
        self.awaits.of(actor)
    }

    /// How many requests this shard's Actors have in flight.
    #[cfg(feature = "testing")]
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// This owner's identity.
    pub fn identity(&self) -> &ActorOwnerIdentity {
        &self.identity
    }

    /// How many timers the hosted Actor has pending.
    #[cfg(feature = "testing")]
    pub fn timer_count(&self, actor: &ActorId) -> usize {
        self.actors
            .get(actor)
            .map_or(0, |hosted| hosted.timers.len())
    }

    /// How many requests the hosted Actor has open.
    #[cfg(feature = "testing")]
    pub fn open_call_count(&self, actor: &ActorId) -> usize {
        self.actors
            .get(actor)
            .map_or(0, |hosted| hosted.calls.len())
    }

    /// A relocation captures the Actor: its timers and its requests'
    /// deadlines stop, each keeping the time it has left (docs/actors.md
    /// "Timers", "Messages between Actors").
    pub(crate) fn freeze_timers(&mut self, actor: &ActorId, fx: &mut Effects) {
        if let Some(hosted) = self.actors.get_mut(actor) {
            hosted.timers.freeze(fx);
            hosted.calls.freeze(fx);
        }
    }

    /// The captured Actor's requests as the 60 carries them.
    pub(crate) fn calls_handoff(&self, actor: &ActorId) -> CallsHandoff {
        self.actors
            .get(actor)
            .map(|hosted| hosted.calls.handoff())
            .unwrap_or_default()
    }

    /// The captured Actor's timers as the 60 carries them.
    pub(crate) fn timers_handoff(&self, actor: &ActorId) -> TimersHandoff {
        self.actors
            .get(actor)
            .map(|hosted| hosted.timers.handoff())
            .unwrap_or_default()
    }

    /// The move aborted and the Actor reopens here: its timers and its
    /// requests' deadlines run again.
    pub(crate) fn thaw_timers(&mut self, actor: &ActorId, fx: &mut Effects) {
        if let Some(hosted) = self.actors.get_mut(actor) {
            hosted.timers.thaw(actor, fx);
            hosted.calls.thaw(actor, fx);
        }
    }

    /// The hosted Actor as a Ready ActorRef at this location.
    pub fn actor_ref(&self, actor: &ActorId) -> Option<ActorRef> {
        let hosted = self.actors.get(actor)?;
        Some(self.make_ref(actor, hosted))
    }

    /// The binding identity currently registered for `actor`, if any.
    pub fn current_binding(&self, actor: &ActorId) -> Option<BindingIdentity> {
        self.actors
            .get(actor)?
            .binding
            .as_ref()
            .map(RegisteredBinding::identity)
    }

    /// Whether the owner fenced itself after losing its lease (§5).
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// Whether the node is draining (§10 Shutdown), so that it takes no
    /// Actor by relocation ([`Actors::leave`]).
    pub fn is_leaving(&self) -> bool {
        self.leaving
    }

    /// How many Actors are hosted.
    pub fn actor_count(&self) -> usize {
        self.actors.len()
    }

    /// How many User Spots have their home here.
    pub fn spot_count(&self) -> usize {
        self.spots.len()
    }

    /// How many replies are owed (requests and callbacks in progress).
    #[cfg(feature = "testing")]
    pub fn owed_count(&self) -> usize {
        self.owed.len()
    }

    fn make_ref(&self, actor: &ActorId, hosted: &HostedActor) -> ActorRef {
        ActorRef {
            id: actor.clone(),
            generation: hosted.generation,
            location: ActorLocation {
                mesh: self.identity.mesh.clone(),
                owner: self.identity.node,
                node_generation: self.identity.node_generation,
                authority: hosted.authority,
                lease: self.identity.lease,
            },
        }
    }

    /// What a relocation of `actor` starts from: its incarnation, its
    /// authority owner generation (the CAS's expected value, §8.1) and its
    /// current binding, if it is hosted here.
    pub(crate) fn relocation_fence(
        &self,
        actor: &ActorId,
    ) -> Option<(
        ObjectGeneration,
        AuthorityOwnerGeneration,
        Option<BindingHandoff>,
    )> {
        // An Actor whose row is being removed is ending: nothing to move.
        let hosted = self.actors.get(actor).filter(|h| h.ending.is_none())?;
        let binding = hosted.binding.as_ref().map(RegisteredBinding::handoff);
        Some((hosted.generation, hosted.authority, binding))
    }

    /// Where the hosted Actor runs, if the runtime placed it.
    pub fn placement(&self, actor: &ActorId) -> Option<&Placement> {
        self.actors.get(actor)?.placement.as_ref()
    }

    /// §4, X6: the instance a turn admitted for incarnation `generation` of
    /// `actor` runs on — `None` when that incarnation is gone (destroyed,
    /// moved away, or re-created since): the turn ends `StaleLocation`.
    pub fn turn_slot(&self, actor: &ActorId, generation: ObjectGeneration) -> Option<InstanceSlot> {
        let hosted = self.actors.get(actor)?;
        (hosted.generation == generation).then_some(hosted.placement.as_ref()?.slot)
    }

    /// The lane the Actor's work goes to, and the incarnation it is for.
    pub fn turn_lane(&self, actor: &ActorId) -> Option<(ActorLane, ObjectGeneration)> {
        let hosted = self.actors.get(actor)?;
        Some((hosted.placement.as_ref()?.lane, hosted.generation))
    }

    /// Every placed Actor and where it runs.
    pub fn placements(&self) -> impl Iterator<Item = (&ActorId, &Placement)> {
        self.actors
            .iter()
            .filter_map(|(id, hosted)| Some((id, hosted.placement.as_ref()?)))
    }

    /// The User Spot `id`, if its home is this shard.
    pub fn spot(&self, id: &SpotId) -> Option<&HostedSpot> {
        self.spots.get(id)
    }

    /// The User Spots whose home is this shard.
    pub fn spots(&self) -> impl Iterator<Item = (&SpotId, &HostedSpot)> {
        self.spots.iter()
    }

    /// The Actors of User Spot `id` hosted here, in ActorId order (the
    /// order a Spot's move takes them in).
    pub fn spot_members(&self, id: &SpotId) -> Vec<ActorId> {
        let mut members: Vec<ActorId> = self
            .placements()
            .filter(|(_, p)| p.user_spot.as_ref() == Some(id))
            .map(|(actor, _)| actor.clone())
            .collect();
        members.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        members
    }

    /// Whether the Actor's row removal is with the store (a destroy).
    pub fn is_ending(&self, actor: &ActorId) -> bool {
        self.actors.get(actor).is_some_and(|h| h.ending.is_some())
    }

    /// Whether `actor` is hosted here.
    pub(crate) fn hosts(&self, actor: &ActorId) -> bool {
        self.actors.contains_key(actor)
    }

    /// Whether the reply `ticket` names is still owed (it has not ended,
    /// for instance at a proxy's deadline).
    pub(crate) fn owes(&self, ticket: ReplyTicket) -> bool {
        self.owed.contains_key(&ticket)
    }

    /// Owes a reply to `request` of node `to` (that lifecycle of it: the
    /// reply goes to it alone); the ticket names it.
    pub(crate) fn owe(&mut self, to: Peer, request: RequestId) -> ReplyTicket {
        self.next_ticket += 1;
        let ticket = ReplyTicket(self.next_ticket);
        self.owed.insert(ticket, (to, request));
        ticket
    }
}

/// The Actor owner with the shard's effects: every command and input.
pub struct Actors<'a> {
    pub(crate) owner: &'a mut ActorOwner,
    pub(crate) fx: &'a mut Effects,
}

impl Actors<'_> {
    /// Hosts a Ready Actor with the incarnation and authority generation the
    /// Location Store gave it, with no placement (a driver that keeps no
    /// instances: the simulator, core tests). Hosting an Actor that is
    /// already here under another incarnation is refused: destroy it first.
    #[cfg(feature = "testing")]
    pub fn host(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        authority: AuthorityOwnerGeneration,
    ) -> Result<ActorRef, Error> {
        self.host_at(actor, generation, authority, None)
    }

    /// [`Self::host`] where the runtime placed the Actor: the registry
    /// holds its lane, Spot and instance slot from now on (placement.rs).
    pub fn host_placed(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        authority: AuthorityOwnerGeneration,
        placement: Placement,
    ) -> Result<ActorRef, Error> {
        self.host_at(actor, generation, authority, Some(placement))
    }

    fn host_at(
        &mut self,
        actor: ActorId,
        generation: ObjectGeneration,
        authority: AuthorityOwnerGeneration,
        placement: Option<Placement>,
    ) -> Result<ActorRef, Error> {
        if let Some(existing) = self.owner.actors.get(&actor) {
            if existing.generation != generation {
                return Err(Reason::ObjectGenerationMismatch.into());
            }
            return Ok(self.owner.make_ref(&actor, existing));
        }
        let hosted = HostedActor {
            generation,
            authority,
            binding: None,
            timers: ActorTimers::default(),
            calls: OpenCalls::default(),
            placement,
            ending: None,
        };
        let actor_ref = self.owner.make_ref(&actor, &hosted);
        self.owner.actors.insert(actor, hosted);
        Ok(actor_ref)
    }

    /// §1: registers the User Spot `id` at its home, this shard.
    pub fn host_spot(&mut self, id: SpotId, spot: HostedSpot) {
        self.owner.spots.insert(id, spot);
    }

    /// The User Spot `id` leaves this shard (its move committed, or an
    /// arrival that created it failed).
    pub fn remove_spot(&mut self, id: &SpotId) -> Option<HostedSpot> {
        self.owner.spots.remove(id)
    }

    /// §1, §4: a destroy asks the store to remove the Actor's row; until it
    /// answers ([`Self::destroy`] or [`Self::destroy_failed`]) the Actor is
    /// ending: it does not move (`StaleLocation` to a relocation) and a
    /// second destroy is refused. Returns its ActorRef, whose location is
    /// the row version to remove.
    pub fn begin_destroy(&mut self, actor: &ActorId) -> Result<ActorRef, Error> {
        let hosted = self.owner.actors.get(actor).filter(|h| h.ending.is_none());
        let Some(actor_ref) = hosted.map(|h| self.owner.make_ref(actor, h)) else {
            return Err(Reason::StaleLocation.into());
        };
        if let Some(hosted) = self.owner.actors.get_mut(actor) {
            hosted.ending = Some(Ending::default());
        }
        Ok(actor_ref)
    }

    /// The store could not remove the row: the Actor goes on as before.
    pub fn destroy_failed(&mut self, actor: &ActorId) {
        let ending = self
            .owner
            .actors
            .get_mut(actor)
            .and_then(|h| h.ending.take());
        if let Some(again) = ending.and_then(|ending| ending.again) {
            self.fx.cancel(again);
        }
    }

    /// docs/relocation.md: the target hosts a relocated Actor after its CAS,
    /// under the new authority owner generation, with the handed-over
    /// binding registered as current — the same binding identity, so the
    /// route update is not a rebind (§4, §8.2). The ObjectGeneration is kept.
    pub(crate) fn host_handed(
        &mut self,
        handed: HandedActor,
        queued: impl Fn(TimerId) -> bool,
    ) -> ActorRef {
        let HandedActor {
            actor,
            generation,
            authority,
            binding,
            timers,
            calls,
            placement,
        } = handed;
        debug_assert!(!self.owner.actors.contains_key(&actor));
        let hosted = HostedActor {
            generation,
            authority,
            binding: binding.map(|b| RegisteredBinding {
                session: b.session,
                session_lease: b.session_lease,
                generation: b.binding,
            }),
            timers: ActorTimers::handed(timers, queued, &actor, self.fx),
            calls: OpenCalls::handed(calls, &actor, self.fx),
            placement,
            ending: None,
        };
        let actor_ref = self.owner.make_ref(&actor, &hosted);
        self.owner.actors.insert(actor, hosted);
        actor_ref
    }

    /// §4: destroying an Actor ends its incarnation's binding for good; a
    /// later incarnation under the same ActorId starts with none. Returns
    /// where it ran: the runtime drops that instance and lane.
    pub fn destroy(&mut self, actor: &ActorId) -> Result<Option<Placement>, Error> {
        let mut destroyed = self
            .owner
            .actors
            .remove(actor)
            .ok_or_else(|| Error::new(Reason::StaleLocation))?;
        destroyed.timers.cancel_all(self.fx);
        destroyed.calls.cancel_all(self.fx);
        if let Some(again) = destroyed.ending.and_then(|ending| ending.again) {
            self.fx.cancel(again);
        }
        Ok(destroyed.placement)
    }

    /// Sets one of the Actor's timers: its first tick is due `after` from
    /// now; with a `period` it repeats at that fixed rate until cancelled
    /// (docs/actors.md "Timers"). Refused for an Actor not hosted here
    /// (`StaleLocation`), a period under [`TIMER_PERIOD_MIN`], or an Actor
    /// with as many pending timers as it may have (`TooManyTimers`).
    pub fn set_timer(
        &mut self,
        actor: &ActorId,
        after: Duration,
        period: Option<Duration>,
    ) -> Result<TimerId, Error> {
        let hosted = self
            .owner
            .actors
            .get_mut(actor)
            .ok_or_else(|| Error::new(Reason::StaleLocation))?;
        hosted.timers.set(actor, after, period, self.fx)
    }

    /// Cancels one of the Actor's timers; `false` when it had no such
    /// pending timer (a one-shot that fired, a timer cancelled before).
    pub fn cancel_timer(&mut self, actor: &ActorId, timer: TimerId) -> bool {
        self.owner
            .actors
            .get_mut(actor)
            .is_some_and(|hosted| hosted.timers.cancel(timer, self.fx))
    }

    /// The turn of a tick of `timer` ended: its next tick may be delivered.
    pub fn timer_done(&mut self, actor: &ActorId, timer: TimerId) {
        if let Some(hosted) = self.owner.actors.get_mut(actor) {
            hosted.timers.done(timer);
        }
    }

    /// A timer entry of the wheel fired.
    pub(crate) fn fire_timer(&mut self, fire: &ActorTimerFire) {
        let fenced = self.owner.fenced;
        if let Some(hosted) = self.owner.actors.get_mut(&fire.actor) {
            hosted.timers.fire(fire, fenced, self.fx);
        }
    }

    /// §5: the owner lease lapsed or could not be renewed. The owner fences
    /// itself: every later bind and relay ends with `Unavailable`
    /// (LeaseExpired), never with a route used past its lease.
    pub fn fence(&mut self) {
        self.owner.fenced = true;
    }

    /// §10 Shutdown: the node drains. Its Actors move away (the runtime
    /// asks once, at the drain's start), and from now on a move to this
    /// node is refused at its prepare with `Unavailable` (ShuttingDown):
    /// the Actor stays at its source instead of arriving at a node that
    /// would end it at its stop. Binds and relays to the Actors still
    /// here go on until they move or the node stops.
    pub fn leave(&mut self) {
        self.owner.leaving = true;
    }

    /// §5 bound-session push: a one-way 36 to the current binding. With no
    /// binding it ends with session-not-bound (§12).
    pub fn push(&mut self, actor: &ActorId, key: PacketKey, payload: Bytes) -> Result<(), Error> {
        self.bound_send(actor, BoundSessionBody::Push { key, payload })
    }

    /// §5 bound-session close: asks the bound session's owner to close the
    /// connection. With no binding it ends with session-not-bound (§12).
    pub fn close_session(&mut self, actor: &ActorId, reason: CloseReason) -> Result<(), Error> {
        self.bound_send(actor, BoundSessionBody::Close { reason })
    }

    /// The Actor's handler answered a request: the terminal of the 24 (§12).
    pub fn reply(&mut self, ticket: ReplyTicket, outcome: Result<Bytes, Error>) {
        self.answer(ticket, outcome);
    }

    /// §7: the Spot's `on_disconnect_actor` reached a terminal.
    pub fn disconnect_done(&mut self, ticket: ReplyTicket, outcome: Result<(), Error>) {
        self.answer(ticket, outcome.map(|()| Bytes::new()));
    }

    /// Work the runtime will not run (its lane is gone: the Actor was
    /// destroyed, or the lane refused it) still ends (§12): a request and a
    /// disconnect callback get `reason` as their typed terminal, a one-way
    /// message is a counted drop.
    pub fn refuse(&mut self, work: ActorEvent, reason: Reason) {
        let error = Error::new(reason);
        match work {
            ActorEvent::Deliver {
                reply: Some(ticket),
                ..
            } => self.reply(ticket, Err(error)),
            ActorEvent::Disconnect { ticket, .. } => self.disconnect_done(ticket, Err(error)),
            ActorEvent::Deliver { reply: None, .. } => {
                self.fx.trace(FlowTrace::OneWayRecordRefused);
            }
            ActorEvent::Bound { .. } => {}
            ActorEvent::Call {
                reply: Some(ticket),
                ..
            } => self.reply(ticket, Err(error)),
            // A one-way message, or an outcome its caller cannot take now.
            ActorEvent::Call { reply: None, .. } | ActorEvent::CallOutcome { .. } => {
                self.fx.trace(FlowTrace::OneWayRecordRefused);
            }
            // A tick that cannot run is a skipped tick; the next may run,
            // under the number this one would have had.
            ActorEvent::Timer { actor, timer, tick } => {
                self.fx.trace(FlowTrace::ActorTimerTickSkipped);
                if let Some(hosted) = self.owner.actors.get_mut(&actor) {
                    hosted.timers.refused(timer, tick);
                }
            }
        }
    }

    fn answer(&mut self, ticket: ReplyTicket, outcome: Result<Bytes, Error>) {
        let Some((to, request)) = self.owner.owed.remove(&ticket) else {
            debug_assert!(false, "reply for a ticket that is not owed: {ticket:?}");
            return;
        };
        self.fx.answer(
            to,
            NodeRecord::ActorSend(ActorSend::Reply(ActorReply { request, outcome })),
        );
    }

    fn bound_send(&mut self, actor: &ActorId, body: BoundSessionBody) -> Result<(), Error> {
        let hosted = self.owner.actors.get(actor);
        let Some((hosted, binding)) = hosted.and_then(|h| h.binding.map(|b| (h, b))) else {
            return Err(Reason::SessionNotBound.into());
        };
        let record = BoundSessionSend {
            session: binding.session,
            binding: binding.generation,
            actor: actor.clone(),
            object_generation: hosted.generation,
            node_generation: self.owner.identity.node_generation,
            authority: hosted.authority,
            body,
        };
        self.fx
            .send(binding.session.owner, NodeRecord::BoundSessionSend(record));
        Ok(())
    }

    pub(crate) fn handle_record(&mut self, from: Peer, record: NodeRecord) {
        match record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(request)) => {
                self.on_bind(from, request)
            }
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)) => {
                self.on_tombstone(tombstone)
            }
            NodeRecord::ActorSend(ActorSend::Message(message)) => self.on_message(from, message),
            NodeRecord::ActorCall(call) => self.on_call(from, call),
            other => {
                debug_assert!(false, "record not for the actor owner: {other:?}");
                self.fx.trace(FlowTrace::UnhandledRecord);
            }
        }
    }

    /// §5 bind admission on the three values, then registration, then the
    /// terminal, then 51 to a replaced session (§6).
    fn on_bind(&mut self, from: Peer, request: BindRequest) {
        if self.refused_as_past_lifecycle(from, &request.session) {
            return;
        }
        let outcome = self.admit_bind(&request);
        let replaced = match outcome {
            Ok(replaced) => replaced,
            Err(error) => {
                self.terminal(from, request.request.id, Err(error));
                return;
            }
        };
        let Some(hosted) = self.owner.actors.get(&request.actor) else {
            return;
        };
        let route = BoundRoute {
            mesh: self.owner.identity.mesh.clone(),
            owner: self.owner.identity.node,
            node_generation: self.owner.identity.node_generation,
            authority: hosted.authority,
            lease: self.owner.identity.lease,
        };
        let (generation, authority) = (hosted.generation, hosted.authority);
        self.terminal(from, request.request.id, Ok(route));
        self.fx.actor_event(ActorEvent::Bound {
            actor: request.actor.clone(),
            session: request.session,
        });
        if let Some(previous) = replaced {
            self.fx.trace(FlowTrace::BindingReplaced);
            let notice = BoundSessionReplaced {
                fence: AuthorityFence {
                    actor: request.actor,
                    object_generation: generation,
                    owner: self.owner.identity.node,
                    node_generation: self.owner.identity.node_generation,
                    authority,
                },
                previous: previous.session,
                previous_lease: previous.session_lease,
                retired: previous.generation,
            };
            self.fx.send(
                previous.session.owner,
                NodeRecord::BoundSessionReplaced(notice),
            );
        }
    }

    /// Admits and registers; returns the binding of another session it
    /// replaced, if any.
    fn admit_bind(&mut self, request: &BindRequest) -> Result<Option<RegisteredBinding>, Error> {
        if self.owner.fenced {
            return Err(Reason::LeaseExpired.into());
        }
        let node_generation = self.owner.identity.node_generation;
        // An Actor whose row removal is with the store (a destroy) admits
        // no bind: the row may be gone already, and a new incarnation made
        // elsewhere (§4: one current binding; docs/store.md).
        let Some(hosted) = self
            .owner
            .actors
            .get_mut(&request.actor)
            .filter(|h| h.ending.is_none())
        else {
            return Err(Reason::StaleLocation.into());
        };
        if hosted.generation != request.object_generation {
            return Err(Reason::ObjectGenerationMismatch.into());
        }
        if node_generation != request.target_node_generation {
            return Err(Reason::StaleNodeGeneration.into());
        }
        if hosted.authority != request.authority {
            return Err(Reason::StaleAuthority.into());
        }
        let new = RegisteredBinding {
            session: request.session,
            session_lease: request.session_lease,
            generation: request.binding,
        };
        if let Some(current) = hosted.binding {
            // §4: within one session owner lifecycle a later binding wins; an
            // older one arriving late is stale. Each shard of a node is its
            // own session owner with its own counter, so magnitudes compare
            // only within one (node, lifecycle, owner id); across them the
            // new bind wins.
            let same_owner = current.session.owner_id == new.session.owner_id;
            if same_owner && current.identity().is_newer_than(&new.identity()) == Some(true) {
                return Err(Reason::StaleBinding.into());
            }
        }
        let previous = hosted.binding.replace(new);
        // Resubmission from the same physical session never notifies itself.
        Ok(previous.filter(|p| p.session != new.session))
    }

    pub(crate) fn terminal(
        &mut self,
        to: Peer,
        request: RequestId,
        outcome: Result<BoundRoute, Error>,
    ) {
        let terminal = BindTerminal { request, outcome };
        self.fx.answer(
            to,
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal)),
        );
    }

    /// §6, §7: a tombstone removes exactly the identity it names; a late one
    /// for a previous identity never removes a newer binding.
    pub(crate) fn on_tombstone(&mut self, tombstone: BindTombstone) {
        let hosted = self.owner.actors.get_mut(&tombstone.actor);
        let Some(hosted) = hosted.filter(|h| h.generation == tombstone.object_generation) else {
            self.fx.trace(FlowTrace::TombstoneStale);
            return;
        };
        if hosted
            .binding
            .is_some_and(|b| b.is(&tombstone.session, tombstone.binding))
        {
            hosted.binding = None;
        } else {
            self.fx.trace(FlowTrace::TombstoneStale);
        }
    }

    /// §5, §6: relay and disconnect notices are admitted only for the current
    /// binding identity of the current incarnation.
    fn on_message(&mut self, from: Peer, message: ActorMessage) {
        if let Some(event) = self.admit_to_event(from, message) {
            self.fx.actor_event(event);
        }
    }

    /// Admits a 24 and turns it into the Actor work it asks for, owing its
    /// reply; a refusal is answered here (a typed error for a request, a
    /// counted drop for a one-way message). The relocation coordinator
    /// holds what comes back instead of delivering it (the ingress hold).
    pub(crate) fn admit_to_event(
        &mut self,
        from: Peer,
        message: ActorMessage,
    ) -> Option<ActorEvent> {
        if self.refused_as_past_lifecycle(from, &message.tail.session) {
            return None;
        }
        let verdict = self.admit_message(&message);
        let request = message.request;
        if let Err(error) = verdict {
            match request {
                Some(header) => {
                    let reply = ActorReply {
                        request: header.id,
                        outcome: Err(error),
                    };
                    self.fx
                        .send(from.rid, NodeRecord::ActorSend(ActorSend::Reply(reply)));
                }
                None => self.fx.trace(FlowTrace::OneWayRecordRefused),
            }
            return None;
        }
        let reply = request.map(|h| self.owner.owe(from, h.id));
        let event = match message.body {
            ActorSendBody::Payload {
                key,
                correlation,
                payload,
            } => ActorEvent::Deliver {
                actor: message.actor,
                key,
                correlation,
                sequence: message.tail.sequence,
                payload,
                reply,
            },
            ActorSendBody::DisconnectNotice => {
                let Some(ticket) = reply else {
                    // A one-way notice has no terminal to wait for (§6).
                    self.fx.trace(FlowTrace::OneWayRecordRefused);
                    return None;
                };
                ActorEvent::Disconnect {
                    actor: message.actor,
                    session: message.tail.session,
                    ticket,
                }
            }
        };
        Some(event)
    }

    /// §4, issue 6 "node failure": a record of a session owned by the
    /// sending node but naming another of its lifecycles than the link's
    /// (one sent before a restart, replayed or late on the new link) is
    /// refused and counted, and not answered: its requester is gone, and
    /// the new lifecycle, which reuses request ids, must not get the answer.
    /// A record forwarded by another node (Message Follow) is judged by its
    /// binding as usual.
    fn refused_as_past_lifecycle(&mut self, from: Peer, session: &SessionRef) -> bool {
        let past = session.owner == from.rid && session.lifecycle != from.generation;
        if past {
            self.fx.trace(FlowTrace::StaleLifecycleRecord);
        }
        past
    }

    fn admit_message(&mut self, message: &ActorMessage) -> Result<(), Error> {
        if self.owner.fenced {
            return Err(Reason::LeaseExpired.into());
        }
        // An ending Actor (its row removal with the store) admits no relay,
        // as no bind: see `admit_bind`.
        let Some(hosted) = self
            .owner
            .actors
            .get(&message.actor)
            .filter(|h| h.ending.is_none())
        else {
            return Err(Reason::StaleLocation.into());
        };
        let current = hosted
            .binding
            .is_some_and(|b| b.is(&message.tail.session, message.tail.binding));
        if !current || hosted.generation != message.object_generation {
            self.fx.trace(FlowTrace::RelayRejectedStaleBinding);
            return Err(Reason::StaleBinding.into());
        }
        if hosted.authority != message.authority {
            self.fx.trace(FlowTrace::RelayRejectedStaleFence);
            return Err(Reason::StaleAuthority.into());
        }
        Ok(())
    }
}
