//! The Actor side of a shard: the Actors it hosts, the User Spots whose home
//! it is, and the turns of their handlers and Spot callbacks (§1, §5, §7,
//! §11; docs/threading.md "Placement" and "Actor turns").
//!
//! Rules this module keeps:
//! - An Actor's turns (its handler, its join callback, its Spot's
//!   `on_disconnect_actor`) run in the shard loop, never in a session
//!   callback's context (§5, §10, W1), one at a time per lane, in arrival
//!   order.
//! - Which lane is the execution mode's (§5): a PerActor Actor has its own
//!   Actor-delivery lane; the Actors of a SpotWide Spot share the Spot's one
//!   Spot lane, its common gate. Both are lanes of the one engine
//!   (`core::lane`, §11, W2); nothing here queues or gates on its own.
//! - Every Actor belongs to exactly one current Spot, fixed when it is
//!   hosted: its type's Entry Spot, or the User Spot it was created into
//!   (§1). Disconnect notifications never change it (§7, D3).
//! - A SpotWide Spot's Actors are named `<spot>/<name>`, so they are placed
//!   on the Spot's shard by their ActorId alone (`ActorId::shard`); the
//!   Spot's lane lives there.
//! - Work queued for an incarnation runs only on that incarnation: a turn
//!   carries the ObjectGeneration it was admitted for, and one whose Actor
//!   was destroyed (or re-created) meanwhile ends with `Unavailable`
//!   (StaleLocation) instead (§4, X6). Nothing admitted ends silently: a
//!   refused request gets a typed error, a refused one-way message is
//!   counted.
//!
//! Which Actors and Spots are hosted here, on which lane, in which Spot and
//! at which instance slot is the core's one registry
//! (`core::actor::ActorOwner`, src/core/actor/placement.rs), and so is the
//! incarnation check of a turn (`ActorOwner::turn_slot`). This module keeps
//! what the core cannot: the instances and Spot callbacks at those slots,
//! and the lanes' queued turns.

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use slab::Slab;

use super::awaits::{TurnLane, TurnOutcome};
use super::{ShardHandle, ShardState, TASK_BUDGET};
use crate::core::actor::{ActorEvent, ActorLane, HostedSpot, InstanceSlot, Placement};
use crate::core::creation::{HostDecision, IntoSpot, RowAnswer};
use crate::core::lane::{ActorDeliveryLane, LaneEngine, Ordinary, SpotLane};
use crate::core::recheck::StepEnd;
use crate::core::shard::ShardCore;
use crate::core::time::Instant;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorRef, ActorTypeName, CallId, ObjectGeneration, PacketKey, Peer, RequestId, SpotId,
    TimerId,
};
use crate::runtime::app::actor::{Actor, ActorContext, ActorMessage, AsyncTurn, Resume, TimerTick};
use crate::runtime::app::spot::{ExecutionMode, Spot, SpotHandle};
use crate::runtime::app::RelocationUnit;
use crate::runtime::caller::CallReply;
use crate::runtime::executor::{completion, Completer, Completion};
use crate::runtime::router::ShardMsg;
use crate::runtime::store_effects::{HostRow, Replaced, StoreAnswer};
use crate::store::{Created, OwnerClaim, RemoveOutcome, RowVersion, StoreError};
use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::DecodeLimits;

/// One item on an Actor's lane: work for one incarnation of one Actor, as
/// the core asked for it. A Spot lane carries the turns of several Actors,
/// so every item names its own (in the event). Kept as the core's
/// [`ActorEvent`] so a relocation's capture hands the queued work back
/// exactly as it was emitted (docs/relocation.md "Capture").
pub(super) struct ActorTurn {
    generation: ObjectGeneration,
    event: ActorEvent,
}

impl crate::core::lane::Detach for ActorTurn {
    fn detach(&mut self) {
        self.event.detach();
    }
}

impl ActorTurn {
    /// The work as the core emitted it (a relocation's capture).
    pub(super) fn into_event(self) -> ActorEvent {
        self.event
    }

    /// The Actor the turn is for.
    pub(super) fn actor(&self) -> &ActorId {
        self.event.actor()
    }
}

/// What the core's hosted-actor registry cannot hold for an Actor, at the
/// slot it names (src/core/actor/placement.rs): the instance, and the Spot
/// whose callbacks it runs under.
pub(super) struct Instance {
    /// `None` while its handler runs.
    pub(super) actor: Option<Box<dyn Actor>>,
    /// Its current Spot (§1, §7): the one whose `on_disconnect_actor` runs.
    pub(super) spot: Arc<dyn Spot>,
}

/// Everything of the Actor side a shard owns besides the core's registry:
/// the lanes, and the instances and Spot handles at the registry's slots.
pub(super) struct ActorHost {
    pub(super) actor_lanes: LaneEngine<ActorDeliveryLane, ActorTurn>,
    pub(super) spot_lanes: LaneEngine<SpotLane, ActorTurn>,
    /// Actor instances, at the slots the core's registry names.
    pub(super) instances: Slab<Instance>,
    /// User Spots' handles, at the slots the core's registry names.
    pub(super) spots: Slab<SpotHandle>,
    /// BindOrGets waiting on the store for an Actor, first asked first.
    pub(super) hosting: HashMap<ActorId, Vec<HostRequest>>,
    /// BindOrGets waiting for an ending Actor's destroy to end
    /// (`HostDecision::AfterDestroy`), first asked first: they start again
    /// when it does ([`ShardState::destroy_answered`]).
    pub(super) after_destroy: HashMap<ActorId, Vec<HostRequest>>,
    /// The BindOrGet store step with the store for an Actor: when it was
    /// made, and whether it writes (a create or a replacement, whose
    /// unknown outcome is asked about again: src/core/recheck.rs).
    pub(super) store_step: HashMap<ActorId, (Instant, bool)>,
    /// Destroys whose row removal's outcome was unknown, waiting for the
    /// core to make it again (src/core/actor/removal.rs): who waits.
    pub(super) destroying: HashMap<ActorId, DestroyReply>,
}

/// Who waits for a destroy: `Node::destroy_actor`.
pub(in crate::runtime) type DestroyReply = std::sync::mpsc::Sender<Result<(), Error>>;

impl ActorHost {
    pub(super) fn new() -> Self {
        Self {
            actor_lanes: LaneEngine::new(),
            spot_lanes: LaneEngine::new(),
            instances: Slab::new(),
            spots: Slab::new(),
            hosting: HashMap::new(),
            after_destroy: HashMap::new(),
            store_step: HashMap::new(),
            destroying: HashMap::new(),
        }
    }
}

impl ShardState {
    /// What a node Relocate moves from this shard (§10): each Actor that
    /// moves alone, and each SpotWide Spot (its Actors move with it).
    pub(super) fn relocation_units(&self) -> Vec<RelocationUnit> {
        let owner = self.core.actor_owner();
        let spotwide = |spot: &SpotId| owner.spot(spot).is_some_and(|s| s.lane.is_some());
        let actors = owner
            .placements()
            .filter(|(_, p)| !p.user_spot.as_ref().is_some_and(spotwide))
            .map(|(id, _)| RelocationUnit::Actor(id.clone()));
        let spots = owner
            .spots()
            .filter(|(_, s)| s.lane.is_some())
            .map(|(id, _)| RelocationUnit::Spot(id.clone()));
        actors.chain(spots).collect()
    }

    /// The Actor's instance and lane go: what its own lane still held ends
    /// with a typed error; a Spot lane stays with its Spot.
    pub(super) fn drop_placement(&mut self, placement: Placement) {
        self.host.instances.try_remove(placement.slot.0);
        if let ActorLane::Own(lane) = placement.lane {
            for turn in self.host.actor_lanes.remove_lane(lane) {
                self.refuse_actor_work(turn.event, Reason::StaleLocation);
            }
        }
    }
}

/// Who waits for a BindOrGet on this shard (§1 step 2).
pub(in crate::runtime) enum HostWaiter {
    /// A session turn on this shard.
    Local(Completer<Result<ActorRef, Error>>),
    /// A session turn on shard `origin`, answered with `ActorCreated`.
    Shard { origin: u16, token: u64 },
    /// The embedding application.
    Command(std::sync::mpsc::Sender<Result<ActorRef, Error>>),
    /// A peer node that found the Actor's row naming this one (71): it is
    /// answered, and this shard's BindOrGet never asks on
    /// (src/core/host_ask.rs).
    Peer { to: Peer, request: RequestId },
    /// Nobody: the core checks the row again after an unknown outcome
    /// (src/core/recheck.rs): a look-up, and an orphan's removal; what the
    /// store answers is all it needs.
    Recheck,
}

/// One BindOrGet asked of this shard.
pub(in crate::runtime) struct HostRequest {
    pub(in crate::runtime) actor_type: String,
    /// Create a new Actor into this User Spot; an existing one must be in it.
    pub(in crate::runtime) spot: Option<SpotHandle>,
    pub(in crate::runtime) waiter: HostWaiter,
}

impl ShardState {
    /// §1 step 2 on the Actor's own shard: the hosted Actor, or the Location
    /// Store's row for it — created here (with the request's factory) when
    /// absent and this node hosts Actors. With a Spot, a new Actor is
    /// created into that User Spot, and an existing one must already belong
    /// to it.
    ///
    /// What needs the store is an effect (docs/threading.md "Never block a
    /// shard"): the request waits for its answer in [`ActorHost::hosting`],
    /// and so do later requests for the same Actor, which are answered in
    /// order once the first is (one store operation per Actor at a time, so
    /// two answers can never race each other into two instances).
    pub(in crate::runtime) fn host_or_get(&mut self, id: ActorId, request: HostRequest) {
        if let Some(waiting) = self.host.hosting.get_mut(&id) {
            waiting.push(request);
            return;
        }
        match self.host_without_store(&id, &request) {
            Some(HostDecision::AfterDestroy) => self.wait_for_destroy(id, vec![request]),
            Some(HostDecision::Decided(outcome)) => self.answer_host(request.waiter, outcome),
            // `host_step` and `recheck_step` decide nothing else before
            // the store.
            Some(_) | None => self.ask_store_to_host(id, request),
        }
    }

    /// What BindOrGet decides without the store (`ShardCore::host_step`,
    /// or `recheck_step` for a recheck): the core's Spot rules, an Actor
    /// hosted here, an ending one to wait for; and a node with no store.
    /// `None`: the store must be asked.
    fn host_without_store(&self, id: &ActorId, request: &HostRequest) -> Option<HostDecision> {
        let step = match request.waiter {
            HostWaiter::Recheck => self.core.recheck_step(id),
            _ => self.core.host_step(id, into_spot(request)),
        };
        if step.is_some() {
            return step;
        }
        self.node
            .store
            .is_none()
            .then(|| HostDecision::Decided(Err(Reason::NoActorFactory.into())))
    }

    /// The Actor is ending (`HostDecision::AfterDestroy`): `requests` wait
    /// for its destroy to end, behind any already waiting.
    fn wait_for_destroy(&mut self, id: ActorId, requests: Vec<HostRequest>) {
        for _ in &requests {
            self.core.trace(FlowTrace::HostWaitedForDestroy);
        }
        self.host
            .after_destroy
            .entry(id)
            .or_default()
            .extend(requests);
    }

    /// The Actor's destroy ended: the BindOrGets that waited for it start
    /// again, in order — asking the store afresh, or, if the Actor stays
    /// ending because this owner is fenced (§5), refused `LeaseExpired`
    /// by the core.
    fn after_destroy_ended(&mut self, id: &ActorId) {
        let Some(waiting) = self.host.after_destroy.remove(id) else {
            return;
        };
        for request in waiting {
            self.host_or_get(id.clone(), request);
        }
    }

    /// This node's lease claim, when it may create `actor_type` here.
    fn claim_for(&self, actor_type: &str) -> Option<OwnerClaim> {
        let can_host = self.node.hosts_actors && self.node.actor_types.contains_key(actor_type);
        let lease = self.node.lease.as_ref().filter(|_| can_host)?;
        Some(
            lease
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .claim(),
        )
    }

    /// BindOrGet's store step as an effect: create-if-absent when this node
    /// may host the Actor, else a look-up of the incarnation elsewhere; a
    /// recheck only looks up (src/core/recheck.rs).
    fn ask_store_to_host(&mut self, id: ActorId, request: HostRequest) {
        let recheck = matches!(request.waiter, HostWaiter::Recheck);
        let claim = self.claim_for(&request.actor_type).filter(|_| !recheck);
        let writes = claim.is_some();
        let for_store = id.clone();
        let asked = self.store_effect(move |store| {
            let outcome = match claim {
                Some(claim) => store.create(&for_store, &claim).map(HostRow::Created),
                None => store.lookup(&for_store).map(HostRow::Looked),
            };
            StoreAnswer::Host {
                id: for_store,
                outcome,
            }
        });
        match asked {
            Ok(()) => {
                let now = self.now();
                self.host.store_step.insert(id.clone(), (now, writes));
                self.host.hosting.insert(id, vec![request]);
            }
            Err(error) => {
                self.recheck_refused(&id, &request.waiter);
                self.answer_host(request.waiter, Err(error));
            }
        }
    }

    /// A recheck's store step was refused (the store queue full): it is
    /// not lost, but checks again after its backoff.
    fn recheck_refused(&mut self, id: &ActorId, waiter: &HostWaiter) {
        if matches!(waiter, HostWaiter::Recheck) {
            let now = self.now();
            let unknown = StepEnd::Unknown { writes: true };
            self.core.recheck_after_store(now, id, now, unknown);
        }
    }

    /// The store answered a recheck's removal of an orphan row for `id`.
    pub(in crate::runtime) fn orphan_answered(
        &mut self,
        id: ActorId,
        outcome: Result<RemoveOutcome, StoreError>,
    ) {
        let answer = outcome.map(|removed| match removed {
            RemoveOutcome::Removed | RemoveOutcome::Absent => RowAnswer::Looked(None),
            RemoveOutcome::Conflict { current } => RowAnswer::Conflict(current.actor_ref()),
        });
        self.host_store_answered(id, answer, false);
    }

    /// The store answered BindOrGet's step for `id`: the first request is
    /// decided on it (unless the Actor was hosted meanwhile), the others
    /// start again in order.
    pub(in crate::runtime) fn host_answered(
        &mut self,
        id: ActorId,
        outcome: Result<HostRow, StoreError>,
    ) {
        let answer = outcome.map(|row| match row {
            HostRow::Looked(row) => RowAnswer::Looked(row.map(|r| r.actor_ref())),
            HostRow::Created(Created::New(row)) => RowAnswer::Created(row.actor_ref()),
            HostRow::Created(Created::Existing(row)) => RowAnswer::Existing(row.actor_ref()),
        });
        self.host_store_answered(id, answer, false);
    }

    /// The store answered a lost incarnation's replacement for `id`.
    pub(in crate::runtime) fn replace_answered(
        &mut self,
        id: ActorId,
        outcome: Result<Replaced, StoreError>,
    ) {
        let answer = outcome.map(|replaced| match replaced {
            Replaced::Conflict(row) => RowAnswer::Conflict(row.actor_ref()),
            Replaced::Created(Created::New(row)) => RowAnswer::Created(row.actor_ref()),
            Replaced::Created(Created::Existing(row)) => RowAnswer::Existing(row.actor_ref()),
        });
        self.host_store_answered(id, answer, true);
    }

    /// Decides the first request waiting on `id` on the store's answer, as
    /// the core says (`ShardCore::host_found`): an outcome, a new
    /// incarnation to host here, or a lost one to replace (a further store
    /// effect, the request waiting on). The others start again after it.
    fn host_store_answered(
        &mut self,
        id: ActorId,
        answer: Result<RowAnswer, StoreError>,
        replacing: bool,
    ) {
        let step = self.host.store_step.remove(&id);
        let Some((first, rest)) = self.first_waiting(&id) else {
            return;
        };
        // A write's unknown outcome is checked again, and the answer to a
        // later step settles that (src/core/recheck.rs); outside a User
        // Spot only.
        let unspotted = first.spot.is_none();
        if let Some((issued, writes)) = step {
            let end = match answer {
                Err(StoreError::Unavailable(_)) => StepEnd::Unknown {
                    writes: writes && unspotted,
                },
                _ => StepEnd::Answered,
            };
            let now = self.now();
            self.core.recheck_after_store(now, &id, issued, end);
        }
        let recheck = matches!(first.waiter, HostWaiter::Recheck);
        let for_peer = matches!(first.waiter, HostWaiter::Peer { .. });
        let decision = match (self.host_without_store(&id, &first), answer) {
            (Some(step), _) => step,
            (None, Err(error)) => HostDecision::Decided(Err(error.into())),
            (None, Ok(answer)) if recheck => self.core.recheck_found(&id, answer),
            (None, Ok(answer)) => {
                self.core
                    .host_found(&id, into_spot(&first), answer, replacing, for_peer)
            }
        };
        let decided = match decision {
            HostDecision::Decided(decided) => Some(decided),
            HostDecision::HostNew(row) => {
                Some(self.host(&first.actor_type, &row, first.spot.as_ref()))
            }
            HostDecision::Replace(row) => self.replace_lost(&id, &first, row),
            HostDecision::AskOwner(row) => self.ask_owner(&first, &row),
            HostDecision::RemoveOrphan(row) => self.remove_orphan(&first, row),
            // Ending meanwhile: every request waits for its destroy.
            HostDecision::AfterDestroy => {
                let mut waiting = vec![first];
                waiting.extend(rest);
                return self.wait_for_destroy(id, waiting);
            }
        };
        if let (Some(outcome), true) = (&decided, unspotted) {
            let now = self.now();
            self.core.recheck_unhosted(now, &id, outcome);
        }
        self.settle_hosting(id, first, rest, decided);
    }

    /// A recheck found an orphan row (src/core/recheck.rs): it is removed
    /// at its version (one store effect, answered by
    /// [`Self::orphan_answered`]); `None` while it runs.
    fn remove_orphan(
        &mut self,
        request: &HostRequest,
        row: ActorRef,
    ) -> Option<Result<ActorRef, Error>> {
        let id = row.id.clone();
        let version = RowVersion::from(&row.location);
        let for_store = id.clone();
        let asked = self.store_effect(move |store| StoreAnswer::Orphan {
            outcome: store.remove(&for_store, version),
            id: for_store,
        });
        match asked {
            Ok(()) => {
                let now = self.now();
                self.host.store_step.insert(id, (now, true));
                None
            }
            Err(error) => {
                self.recheck_refused(&id, &request.waiter);
                Some(Err(error))
            }
        }
    }

    /// §8.1: the live row names another node, which judges it: that node
    /// is asked to run BindOrGet (71, `ShardCore::ask_owner`), the requests
    /// waiting meanwhile; `None` while it runs. A type name no node can
    /// have registered (`NodeBuilder` refuses one that is not an
    /// [`ActorTypeName`]) is `NoActorFactory` at once, and a row in a mesh
    /// this node is not in `MeshUnreachable`, as its bind would be.
    fn ask_owner(
        &mut self,
        request: &HostRequest,
        row: &ActorRef,
    ) -> Option<Result<ActorRef, Error>> {
        let Ok(actor_type) = ActorTypeName::new(&request.actor_type) else {
            return Some(Err(Reason::NoActorFactory.into()));
        };
        // §3, §4: the row names the mesh its owner is reached through; one
        // this node is not in cannot carry the ask (nor the bind).
        if !self.node.meshes.contains(&row.location.mesh) {
            return Some(Err(Reason::MeshUnreachable.into()));
        }
        let now = self.now();
        self.core.ask_owner(now, actor_type, row);
        None
    }

    /// The row's owner answered this shard's ask for `id` (or it ended at
    /// its deadline or for want of a link): the first request waiting has
    /// its outcome, and the rest start again.
    pub(super) fn owner_answered(&mut self, id: ActorId, outcome: Result<ActorRef, Error>) {
        if let Some((first, rest)) = self.first_waiting(&id) {
            self.settle_hosting(id, first, rest, Some(outcome));
        }
    }

    /// The requests waiting on `id`'s store answer: the first, and the rest.
    fn first_waiting(&mut self, id: &ActorId) -> Option<(HostRequest, Vec<HostRequest>)> {
        let mut waiting = self.host.hosting.remove(id)?.into_iter();
        let first = waiting.next()?;
        Some((first, waiting.collect()))
    }

    /// Answers the first request with `decided`, or keeps it waiting (with
    /// the rest behind it) when another store answer is due; the rest then
    /// start again, in order: most find the Actor hosted now.
    fn settle_hosting(
        &mut self,
        id: ActorId,
        first: HostRequest,
        rest: Vec<HostRequest>,
        decided: Option<Result<ActorRef, Error>>,
    ) {
        let Some(outcome) = decided else {
            let waiting = self.host.hosting.entry(id).or_default();
            waiting.insert(0, first);
            waiting.extend(rest);
            return;
        };
        self.answer_host(first.waiter, outcome);
        for request in rest {
            self.host_or_get(id.clone(), request);
        }
    }

    /// L6: the row names an incarnation this node lost. It is removed at
    /// its version and a new incarnation created (one store effect,
    /// answered by [`Self::replace_answered`]); `None` while it runs.
    fn replace_lost(
        &mut self,
        id: &ActorId,
        request: &HostRequest,
        row: ActorRef,
    ) -> Option<Result<ActorRef, Error>> {
        let Some(claim) = self.claim_for(&request.actor_type) else {
            return Some(Err(Reason::NoActorFactory.into()));
        };
        let for_store = id.clone();
        let asked = self.store_effect(move |store| {
            let replaced = || -> Result<Replaced, StoreError> {
                match store.remove(&row.id, RowVersion::from(&row.location))? {
                    RemoveOutcome::Removed | RemoveOutcome::Absent => {}
                    RemoveOutcome::Conflict { current } => return Ok(Replaced::Conflict(current)),
                }
                Ok(Replaced::Created(store.create(&row.id, &claim)?))
            };
            StoreAnswer::Replace {
                id: for_store,
                outcome: replaced(),
            }
        });
        match asked {
            Ok(()) => {
                let now = self.now();
                self.host.store_step.insert(id.clone(), (now, true));
                None
            }
            Err(error) => Some(Err(error)),
        }
    }

    /// Gives a BindOrGet its outcome.
    fn answer_host(&mut self, waiter: HostWaiter, outcome: Result<ActorRef, Error>) {
        match waiter {
            HostWaiter::Local(completer) => completer.complete(outcome),
            HostWaiter::Shard { origin, token } => {
                self.router
                    .send(origin, ShardMsg::ActorCreated { token, outcome });
            }
            HostWaiter::Command(reply) => {
                let _ = reply.send(outcome);
            }
            HostWaiter::Peer { to, request } => {
                let now = self.now();
                self.core.answer_host_ask(now, to, request, outcome);
            }
            HostWaiter::Recheck => {}
        }
    }

    /// Hosts a new Actor instance of `actor_type` on this shard, in `spot`
    /// or else its type's Entry Spot, on the lane its execution mode gives;
    /// the core's registry records where (placement.rs).
    fn host(
        &mut self,
        actor_type: &str,
        row: &ActorRef,
        spot: Option<&SpotHandle>,
    ) -> Result<ActorRef, Error> {
        if let Some(hosted) = self.core.actor_owner().actor_ref(&row.id) {
            return Ok(hosted);
        }
        let Some(kind) = self.node.actor_types.get(actor_type) else {
            return Err(Reason::NoActorFactory.into());
        };
        let lane = match spot.map(|s| (s, s.mode)) {
            Some((spot, ExecutionMode::SpotWide)) => {
                // The Spot's home is this shard (the Actor is placed with
                // it); a handle this shard never registered is another
                // node's Spot.
                let home = self.core.actor_owner().spot(&spot.id);
                let registered = home.filter(|h| {
                    let handle = self.host.spots.get(h.slot.0);
                    handle.is_some_and(|handle| Arc::ptr_eq(&handle.spot, &spot.spot))
                });
                let Some(lane) = registered.and_then(|h| h.lane) else {
                    return Err(Reason::StaleLocation.into());
                };
                ActorLane::Spot(lane)
            }
            Some((_, ExecutionMode::PerActor)) | None => {
                let capacity = self.node.settings.actor_queue_max;
                ActorLane::Own(self.host.actor_lanes.add_lane(capacity))
            }
        };
        let instance = Instance {
            actor: Some((kind.factory)(&row.id)),
            spot: spot.map_or_else(|| Arc::clone(&kind.spot), |s| Arc::clone(&s.spot)),
        };
        let placement = Placement {
            actor_type: actor_type.to_owned(),
            user_spot: spot.map(|s| s.id.clone()),
            lane,
            slot: InstanceSlot(self.host.instances.insert(instance)),
        };
        let now = self.now();
        let hosted = self.core.actors(now).host_placed(
            row.id.clone(),
            row.generation,
            row.location.authority,
            placement.clone(),
        );
        if hosted.is_err() {
            self.drop_placement(placement);
        }
        hosted
    }

    /// §1: registers the User Spot `id` of `kind` at its home, this shard.
    /// Creating an existing Spot again with the same kind returns it.
    pub(super) fn create_spot(&mut self, kind: &str, id: &SpotId) -> Result<SpotHandle, Error> {
        let Some(spot_kind) = self.node.spot_kinds.get(kind) else {
            return Err(Reason::NoSpotKind.into());
        };
        if let Some(existing) = self.core.actor_owner().spot(id) {
            let handle = self.host.spots.get(existing.slot.0);
            return match handle.filter(|_| existing.kind == kind) {
                Some(handle) => Ok(handle.clone()),
                None => Err(Reason::SpotIdInUse.into()),
            };
        }
        let handle = SpotHandle {
            id: id.clone(),
            mode: spot_kind.mode,
            spot: (spot_kind.factory)(id),
        };
        let lane = match spot_kind.mode {
            ExecutionMode::SpotWide => {
                let capacity = self.node.settings.spot_queue_max;
                Some(self.host.spot_lanes.add_lane(capacity))
            }
            ExecutionMode::PerActor => None,
        };
        let spot = HostedSpot {
            kind: kind.to_owned(),
            lane,
            slot: InstanceSlot(self.host.spots.insert(handle.clone())),
        };
        let now = self.now();
        self.core.actors(now).host_spot(id.clone(), spot);
        Ok(handle)
    }

    /// The User Spot `id` leaves this shard: its handle and its lane go;
    /// what the lane still held ends with a typed error.
    pub(super) fn remove_spot(&mut self, id: &SpotId) {
        let now = self.now();
        if let Some(spot) = self.core.actors(now).remove_spot(id) {
            self.drop_spot(spot);
        }
    }

    /// A Spot the core's registry let go: its handle and its lane go.
    pub(super) fn drop_spot(&mut self, spot: HostedSpot) {
        self.host.spots.try_remove(spot.slot.0);
        if let Some(lane) = spot.lane {
            for turn in self.host.spot_lanes.remove_lane(lane) {
                self.refuse_actor_work(turn.into_event(), Reason::StaleLocation);
            }
        }
    }

    /// Ends the incarnation of a hosted Actor (§1, §4): the Location Store
    /// row goes first (only the row of this incarnation, by its version;
    /// a store effect, answered in [`Self::destroy_answered`]), so no
    /// lookup returns it once the call returned; then the core forgets the
    /// incarnation and its binding for good (a later message for it is
    /// refused as stale, X6) and the instance is dropped. Work still queued
    /// for it ends with `Unavailable` rather than silently: at once on its
    /// own lane, at its turn on a Spot lane (which it shares). While the
    /// Actor is relocating, `Unavailable` (RelocationSealed).
    pub(in crate::runtime) fn destroy(
        &mut self,
        id: ActorId,
        reply: std::sync::mpsc::Sender<Result<(), Error>>,
    ) {
        if !self.core.actor_owner().hosts(&id) {
            let _ = reply.send(Err(Reason::StaleLocation.into()));
            return;
        }
        // A move decides first where the Actor lives (docs/relocation.md).
        if self.core.relocation().is_relocating(&id) {
            let _ = reply.send(Err(Reason::RelocationSealed.into()));
            return;
        }
        if self.node.store.is_none() {
            let _ = reply.send(self.forget(&id));
            return;
        }
        let now = self.now();
        let actor_ref = match self.core.actors(now).begin_destroy(&id) {
            Ok(actor_ref) => actor_ref,
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        if let Err(error) = self.remove_row(&actor_ref, reply.clone()) {
            self.core.actors(now).destroy_failed(&id);
            self.after_destroy_ended(&id);
            let _ = reply.send(Err(error));
        }
    }

    /// A destroy's row removal, at the version of `row` (an effect,
    /// answered in [`Self::destroy_answered`]).
    fn remove_row(&mut self, row: &ActorRef, reply: DestroyReply) -> Result<(), Error> {
        let expected = RowVersion::from(&row.location);
        let id = row.id.clone();
        self.store_effect(move |store| StoreAnswer::Destroy {
            outcome: store.remove(&id, expected).map(drop),
            id,
            reply,
        })
    }

    /// The core makes an ending Actor's removal again (its last outcome
    /// unknown, src/core/actor/removal.rs). A full store queue is one more
    /// unknown outcome.
    pub(in crate::runtime) fn remove_again(&mut self, row: &ActorRef) {
        let Some(reply) = self.host.destroying.remove(&row.id) else {
            return;
        };
        if self.remove_row(row, reply.clone()).is_err() {
            let now = self.now();
            self.core.actors(now).removal_unknown(&row.id);
            self.host.destroying.insert(row.id.clone(), reply);
        }
    }

    /// The removal stays unknown and this node is fenced (§5): the destroy
    /// ends `Unavailable` (StoreUnavailable), and the BindOrGets that
    /// waited for it are refused `LeaseExpired`; the Actor stays ending,
    /// serving nothing, never served again beside a removal that may have
    /// been applied.
    pub(in crate::runtime) fn destroy_unknown(&mut self, id: &ActorId) {
        self.after_destroy_ended(id);
        if let Some(reply) = self.host.destroying.remove(id) {
            let _ = reply.send(Err(Reason::StoreUnavailable.into()));
        }
    }

    /// The store answered a destroy's removal: the incarnation ends here.
    pub(in crate::runtime) fn destroy_answered(
        &mut self,
        id: &ActorId,
        outcome: Result<(), StoreError>,
        reply: DestroyReply,
    ) {
        let outcome = match outcome {
            Ok(()) => self.forget(id),
            // Unknown: it may have been applied. The Actor stays ending and
            // the core makes the removal again (src/core/actor/removal.rs).
            Err(StoreError::Unavailable(_)) => {
                let now = self.now();
                self.core.actors(now).removal_unknown(id);
                self.host.destroying.insert(id.clone(), reply);
                return;
            }
            // A refusal: nothing was removed, the Actor goes on.
            Err(error) => {
                let now = self.now();
                self.core.actors(now).destroy_failed(id);
                Err(error.into())
            }
        };
        self.after_destroy_ended(id);
        let _ = reply.send(outcome);
    }

    /// The core forgets the incarnation; its instance and lane go.
    fn forget(&mut self, id: &ActorId) -> Result<(), Error> {
        let now = self.now();
        let placement = self.core.actors(now).destroy(id)?;
        // An awaiting turn ends first: its lane is then between turns.
        self.end_turn_of(id);
        if let Some(placement) = placement {
            self.drop_placement(placement);
        }
        self.routes.forget_caller(id);
        Ok(())
    }

    /// Puts the work the Actor owner asks for on the Actor's lane (§5: the
    /// application queue; control records never come here, X20).
    pub(super) fn actor_event(&mut self, event: ActorEvent) {
        let actor = event.actor();
        let Some((lane, generation)) = self.core.actor_owner().turn_lane(actor) else {
            // The core hosts no Actor the runtime lacks; answer anyway, so
            // that no request is left without a terminal.
            self.refuse_actor_work(event, Reason::StaleLocation);
            return;
        };
        let turn = ActorTurn { generation, event };
        let refused = match lane {
            ActorLane::Own(lane) => self.host.actor_lanes.submit(lane, Ordinary, turn),
            ActorLane::Spot(lane) => self.host.spot_lanes.submit(lane, Ordinary, turn),
        };
        let Err(refused) = refused else {
            return;
        };
        match refused.item.event {
            // Lifecycle work is bounded (one per binding, one binding per
            // Actor) and must run exactly once (§5 point 1, §7): at a full
            // lane it runs now rather than be lost. No other turn is in
            // progress on this shard now, so it overlaps none.
            ActorEvent::Bound { .. } | ActorEvent::Disconnect { .. } => {
                self.actor_turn(refused.item, TurnLane::Outside)
            }
            // A tick that finds the lane full is skipped, counted; a call
            // is refused like a session's message.
            event @ (ActorEvent::Deliver { .. }
            | ActorEvent::Timer { .. }
            | ActorEvent::Call { .. }
            | ActorEvent::CallOutcome { .. }) => self.refuse_actor_work(event, Reason::QueueFull),
        }
    }

    /// Ends refused Actor work with a typed error (a request) or a counted
    /// drop (a one-way message).
    pub(super) fn refuse_actor_work(&mut self, event: ActorEvent, reason: Reason) {
        let now = self.now();
        self.core.actors(now).refuse(event, reason);
    }

    /// Carries out the core's outputs and runs the Actor turns they start, a
    /// bounded number of rounds per loop turn; `true` when work is left over.
    pub(super) fn run_actor_work(&mut self) -> bool {
        self.drain_core();
        for _ in 0..4 {
            if self.run_actor_turns() == 0 {
                return false;
            }
            self.route_outgoing();
            self.drain_core();
        }
        true
    }

    /// Runs ready Actor turns, taking from the Actor-delivery lanes and the
    /// Spot lanes in turn so neither kind starves the other, at most
    /// [`TASK_BUDGET`] per call.
    fn run_actor_turns(&mut self) -> usize {
        let mut turns = 0;
        while turns < TASK_BUDGET {
            let before = turns;
            if let Some((lane, turn)) = self.host.actor_lanes.next_turn() {
                self.actor_turn(turn, TurnLane::Actor(lane));
                turns += 1;
            }
            if let Some((lane, turn)) = self.host.spot_lanes.next_turn() {
                self.actor_turn(turn, TurnLane::Spot(lane));
                turns += 1;
            }
            if turns == before {
                break;
            }
        }
        turns
    }

    /// One Actor turn, on the incarnation it was admitted for, holding
    /// `lane` until it ends: at once, or — a turn that suspended on an
    /// [`AsyncTurn`] — when its continuation ends (awaits.rs).
    fn actor_turn(&mut self, turn: ActorTurn, lane: TurnLane) {
        let ActorTurn { generation, event } = turn;
        let actor = event.actor().clone();
        let now = self.now();
        let slot = self.core.actor_owner().turn_slot(&actor, generation);
        let Some((slot, hosted)) = slot.and_then(|s| Some((s, self.host.instances.get_mut(s.0)?)))
        else {
            // Destroyed, moved away or re-created since it was admitted (X6).
            self.refuse_actor_work(event, Reason::StaleLocation);
            return self.finish_turn_lane(lane);
        };
        if let ActorEvent::Disconnect { ticket, .. } = event {
            let outcome = Arc::clone(&hosted.spot).on_disconnect_actor(&actor);
            self.core.actors(now).disconnect_done(ticket, outcome);
            return self.finish_turn_lane(lane);
        }
        let Some(mut instance) = hosted.actor.take() else {
            debug_assert!(false, "an Actor turn inside another turn of {actor:?}");
            self.refuse_actor_work(event, Reason::QueueFull);
            return self.finish_turn_lane(lane);
        };
        // One turn in ACTOR_TURN_SAMPLE is timed (src/runtime/metrics.rs).
        self.actor_turns_seen = self.actor_turns_seen.wrapping_add(1);
        // A measurement, not a protocol input: the only clock read outside
        // the loop turn's `tick` (docs/threading.md "One clock per turn").
        let timed = (self.actor_turns_seen % crate::runtime::ACTOR_TURN_SAMPLE == 0)
            .then(std::time::Instant::now);
        let limits = self.node.settings.decode_limits;
        let mut ctx = TurnContext {
            core: &mut self.core,
            limits,
            now,
            actor: &actor,
            routes: &mut self.routes,
            suspended: None,
        };
        let mut end = TurnEnd::default();
        let mut outcome = None;
        match event {
            ActorEvent::Deliver {
                key,
                correlation,
                payload,
                reply,
                ..
            } => {
                let message = ActorMessage {
                    key,
                    payload,
                    correlation,
                    from: None,
                    wants_reply: correlation.is_some(),
                };
                outcome = instance.handle(&mut ctx, message);
                end.reply = reply;
            }
            ActorEvent::Bound { .. } => instance.on_bound(&mut ctx),
            ActorEvent::Timer { timer, tick, .. } => {
                instance.on_timer(&mut ctx, TimerTick { timer, tick });
                end.timer = Some(timer);
            }
            ActorEvent::Call {
                from,
                key,
                payload,
                reply,
                ..
            } => {
                let message = ActorMessage {
                    key,
                    payload,
                    correlation: None,
                    from,
                    wants_reply: reply.is_some(),
                };
                outcome = instance.handle(&mut ctx, message);
                end.reply = reply;
            }
            ActorEvent::CallOutcome { call, outcome, .. } => {
                let target = ctx.routes.ended(Some(&actor), call, &outcome);
                // The error names the Actor the request went to, when this
                // shard routed it (issue 21 item 4).
                let outcome = match (outcome, target) {
                    (Err(e), Some(target)) => Err(e.about_actor(&target)),
                    (outcome, _) => outcome,
                };
                instance.on_reply(&mut ctx, call, outcome);
            }
            ActorEvent::Disconnect { .. } => {}
        }
        let suspended = ctx.suspended.take();
        if let Some(started) = timed {
            self.published.actor_turns.record(started.elapsed());
        }
        self.put_back(slot, instance);
        match suspended {
            Some(turn) => self.suspend_turn(actor, generation, lane, end, turn),
            None => {
                self.end_turn(&actor, end, outcome);
                self.finish_turn_lane(lane);
            }
        }
    }

    /// The rest of an awaiting turn: its continuation, with the Actor.
    /// Returns its value and the turn it suspended on again, if it did.
    pub(super) fn continue_turn(
        &mut self,
        actor: &ActorId,
        instance: &mut dyn Actor,
        resume: Resume,
    ) -> (TurnOutcome, Option<AsyncTurn>) {
        let now = self.now();
        let limits = self.node.settings.decode_limits;
        let mut ctx = TurnContext {
            core: &mut self.core,
            limits,
            now,
            actor,
            routes: &mut self.routes,
            suspended: None,
        };
        let outcome = resume(instance, &mut ctx);
        let suspended = ctx.suspended.take();
        (outcome, suspended)
    }

    /// The instance a turn took goes back to the slot it was taken from.
    /// A turn cannot change the slots: what it asks of the core (no
    /// destroy, no move) is carried out after it, in the drain. So the slot
    /// is still the empty one it left, and is looked at, not looked up
    /// again by the Actor's id; a slot that holds an instance is never
    /// overwritten.
    pub(super) fn put_back(&mut self, slot: InstanceSlot, instance: Box<dyn Actor>) {
        if let Some(hosted) = self.host.instances.get_mut(slot.0) {
            debug_assert!(hosted.actor.is_none(), "a slot filled during a turn");
            if hosted.actor.is_none() {
                hosted.actor = Some(instance);
            } else {
                // A broken invariant of the runtime's own, not anything a
                // peer can cause: kept visible in a release build.
                tracing::error!(slot = slot.0, "an Actor slot was filled during a turn");
            }
        }
    }

    /// What ends with a turn: the reply of the request it answered, and a
    /// timer tick's `timer_done` (its timer's next tick may come).
    pub(super) fn end_turn(&mut self, actor: &ActorId, end: TurnEnd, outcome: TurnOutcome) {
        let now = self.now();
        let limits = self.node.settings.decode_limits;
        if let Some(ticket) = end.reply {
            self.core
                .actors(now)
                .reply(ticket, reply_of(outcome, &limits));
        }
        if let Some(timer) = end.timer {
            self.core.actors(now).timer_done(actor, timer);
        }
    }

    /// The turn on `lane` ended: its next item may run. A PerActor lane
    /// removed meanwhile (its Actor destroyed) has nothing to end.
    pub(super) fn finish_turn_lane(&mut self, lane: TurnLane) {
        match lane {
            TurnLane::Actor(lane) if self.host.actor_lanes.in_turn(lane) => {
                self.host.actor_lanes.finish_turn(lane);
            }
            TurnLane::Spot(lane) if self.host.spot_lanes.in_turn(lane) => {
                self.host.spot_lanes.finish_turn(lane);
            }
            TurnLane::Actor(_) | TurnLane::Spot(_) | TurnLane::Outside => {}
        }
    }
}

/// What a turn owes when it ends (now, or after its continuation).
#[derive(Debug, Default)]
pub(super) struct TurnEnd {
    /// The request it answers.
    reply: Option<crate::core::actor::ReplyTicket>,
    /// The timer whose tick it is.
    timer: Option<TimerId>,
}

/// The terminal of a request a handler answered: `None` is an empty reply;
/// a reply that could not reach a client as a frame ends the request typed
/// (`MessageTooLarge`, docs/wire.md "Limits") — a session's reply goes to
/// its client, and an Actor's may be relayed on to one (docs/actors.md).
fn reply_of(outcome: Option<Result<Bytes, Error>>, limits: &DecodeLimits) -> Result<Bytes, Error> {
    match outcome.unwrap_or_else(|| Ok(Bytes::new())) {
        Ok(payload) if !ClientFrame::payload_fits(true, payload.len(), limits) => {
            Err(Reason::MessageTooLarge.into())
        }
        outcome => outcome,
    }
}

/// The runtime side of [`ActorContext`] for one handler turn.
struct TurnContext<'a> {
    core: &'a mut ShardCore,
    /// The client frame limits: a push that a client would refuse is
    /// refused here, to the Actor (docs/wire.md "Limits").
    limits: DecodeLimits,
    now: Instant,
    actor: &'a ActorId,
    /// Where the turn's calls to other Actors wait to be routed (calls.rs).
    routes: &'a mut super::calls::Routes,
    /// What the turn suspended on, if it did ([`ActorContext::suspend`]).
    suspended: Option<AsyncTurn>,
}

impl TurnContext<'_> {
    /// A payload that fits a client frame, or `MessageTooLarge`: a push, or
    /// a message to another Actor (one a client could not be given is
    /// refused at its sender, docs/actors.md).
    fn fits(&self, payload: &Bytes) -> Result<(), Error> {
        if ClientFrame::payload_fits(false, payload.len(), &self.limits) {
            Ok(())
        } else {
            Err(Reason::MessageTooLarge.into())
        }
    }
}

impl ActorContext for TurnContext<'_> {
    fn actor_id(&self) -> &ActorId {
        self.actor
    }

    fn push(&mut self, key: PacketKey, payload: Bytes) -> Result<(), Error> {
        self.fits(&payload)?;
        self.core.actors(self.now).push(self.actor, key, payload)
    }

    fn push_to_member(
        &mut self,
        member: &ActorId,
        key: PacketKey,
        payload: Bytes,
    ) -> Result<(), Error> {
        // The member must share this Actor's SpotWide gate (§5).
        let owner = self.core.actor_owner();
        let gate = |id: &ActorId| owner.placement(id).and_then(|p| p.lane.spot_gate());
        match (gate(self.actor), gate(member)) {
            (Some(mine), Some(theirs)) if mine == theirs => {
                self.fits(&payload)?;
                self.core.actors(self.now).push(member, key, payload)
            }
            _ => Err(Reason::ActorInOtherSpot.into()),
        }
        .map_err(|e| e.about_actor(member))
    }

    fn close_session(&mut self, reason: CloseReason) -> Result<(), Error> {
        self.core.actors(self.now).close_session(self.actor, reason)
    }

    fn set_timer(&mut self, after: Duration) -> Result<TimerId, Error> {
        self.core
            .actors(self.now)
            .set_timer(self.actor, after, None)
    }

    fn set_repeating_timer(&mut self, first: Duration, period: Duration) -> Result<TimerId, Error> {
        self.core
            .actors(self.now)
            .set_timer(self.actor, first, Some(period))
    }

    fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.core.actors(self.now).cancel_timer(self.actor, timer)
    }

    fn send(&mut self, to: &ActorId, key: PacketKey, payload: Bytes) -> Result<(), Error> {
        self.fits(&payload).map_err(|e| e.about_actor(to))?;
        self.routes.outgoing.push(super::calls::Outgoing {
            from: Some(self.actor.clone()),
            caller: None,
            to: to.clone(),
            key,
            payload,
            request: None,
            waiter: false,
        });
        Ok(())
    }

    fn request(
        &mut self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        deadline: Duration,
    ) -> Result<CallId, Error> {
        self.fits(&payload).map_err(|e| e.about_actor(to))?;
        let call = self.core.actors(self.now).open_call(self.actor, deadline)?;
        self.routes.outgoing.push(super::calls::Outgoing {
            from: Some(self.actor.clone()),
            caller: self.core.actor_owner().actor_ref(self.actor),
            to: to.clone(),
            key,
            payload,
            request: Some((call, self.now + deadline)),
            waiter: false,
        });
        Ok(call)
    }

    fn request_reply(
        &mut self,
        to: &ActorId,
        key: PacketKey,
        payload: Bytes,
        deadline: Duration,
    ) -> CallReply {
        let (reply, outcome) = oneshot::channel();
        if let Err(error) = self.fits(&payload) {
            let _ = reply.send(Err(error));
            return CallReply::new(outcome);
        }
        // Its outcome goes to the awaiting turn, like node code's: the
        // Actor does not move meanwhile (awaits.rs).
        let call = self.routes.wait_for(reply);
        self.routes.outgoing.push(super::calls::Outgoing {
            from: Some(self.actor.clone()),
            caller: None,
            to: to.clone(),
            key,
            payload,
            request: Some((call, self.now + deadline)),
            waiter: true,
        });
        CallReply::new(outcome)
    }

    fn suspend(&mut self, turn: AsyncTurn) -> Result<(), Error> {
        if self.suspended.is_some() {
            return Err(Reason::TurnAlreadyAwaits.into());
        }
        self.suspended = Some(turn);
        Ok(())
    }
}

/// The User Spot a BindOrGet asks for, as the core's rules take it.
fn into_spot(request: &HostRequest) -> Option<IntoSpot<'_>> {
    request.spot.as_ref().map(|spot| IntoSpot {
        id: &spot.id,
        spotwide: spot.mode == ExecutionMode::SpotWide,
    })
}

impl ShardHandle {
    /// §1 step 2: the Ready ActorRef for `id`, from the shard that hosts or
    /// will host it (placement by ActorId), created there with
    /// `actor_type`'s factory when absent — into `spot` if given, else into
    /// the type's Entry Spot.
    pub(crate) fn actor(
        &self,
        actor_type: &str,
        id: &ActorId,
        spot: Option<&SpotHandle>,
    ) -> Completion<Result<ActorRef, Error>> {
        let (completer, completion) = completion();
        let mut state = self.state.borrow_mut();
        let shard = id.shard(state.router.shards());
        if shard == state.index {
            let request = HostRequest {
                actor_type: actor_type.to_owned(),
                spot: spot.cloned(),
                waiter: HostWaiter::Local(completer),
            };
            state.host_or_get(id.clone(), request);
        } else {
            state.next_actor_token += 1;
            let token = state.next_actor_token;
            state.actor_waiters.insert(token, completer);
            let msg = ShardMsg::CreateActor {
                actor_type: actor_type.to_owned(),
                id: id.clone(),
                spot: spot.cloned(),
                origin: state.index,
                token,
            };
            state.router.send(shard, msg);
        }
        completion
    }
}
