//! Messages between Actors on the shard's side (docs/actors.md "Messages
//! between Actors"): what an Actor's turn sends by ActorId is routed here
//! after the turn, through a per-shard route cache, and handed to the core
//! (`Actors::send`, `Actors::request`), which owns the rules.
//!
//! Rules this module keeps:
//! - A route is resolved once and cached on the shard: from the core when
//!   the Actor is hosted here, else from the Location Store, as a store
//!   effect (never on the shard thread, docs/threading.md "Never block a
//!   shard"). No store read per message.
//! - A cached route is used for at most `follow_lifetime` (30 s by
//!   default): within it, a move of the target is covered by its Message
//!   Follow entry, which forwards once (§9). A route naming a peer whose
//!   link went down, or one a call found stale, is dropped: the next call
//!   resolves again. A request is never sent again to another owner.
//! - Calls to one target keep their order: while its route is being
//!   resolved they wait, in order, behind the look-up (at most
//!   [`WAITING_MAX`] on the shard; past it a call is refused, `QueueFull`).
//! - Node code outside any Actor calls by the same path (docs/actors.md
//!   "From node code"): its call is a node command to the target's shard,
//!   with no sender; a request's outcome goes to its waiter
//!   ([`NodeCallReply`]), which the core hands over once.

use std::time::Duration;

use bytes::Bytes;
use foldhash::HashMap;

use super::ShardState;
use crate::core::time::Instant;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, CallId, NodeRid, PacketKey};
use crate::runtime::store_effects::StoreAnswer;
use crate::store::StoreError;

/// The most calls that may wait on route look-ups on one shard.
pub(super) const WAITING_MAX: usize = 4_096;

/// Where the outcome of a request from node code goes: the caller blocks
/// on, or awaits, the other half ([`crate::api::ActorCaller`]).
pub(crate) type NodeCallReply = oneshot::Sender<Result<Bytes, Error>>;

/// A call an Actor's turn (or node code) made, to be routed.
pub(super) struct Outgoing {
    /// The calling Actor; `None` for node code.
    pub(super) from: Option<ActorId>,
    /// For an Actor's own request (its outcome goes to its ledger): the
    /// caller as its turn was, so that the request still goes out if the
    /// caller moves away while the route is resolved
    /// (`Actors::request_as`).
    pub(super) caller: Option<ActorRef>,
    pub(super) to: ActorId,
    pub(super) key: PacketKey,
    pub(super) payload: Bytes,
    /// `Some` for a request: its number and when it must have ended.
    pub(super) request: Option<(CallId, Instant)>,
    /// The request's outcome goes to a waiter ([`Routes::wait_for`]: node
    /// code, or a turn that awaits it), not to the calling Actor's ledger.
    pub(super) waiter: bool,
}

/// The shard's routes to other Actors and the calls waiting on look-ups.
#[derive(Default)]
pub(super) struct Routes {
    /// Resolved routes, each with when it was resolved.
    cached: HashMap<ActorId, (ActorRef, Instant)>,
    /// Calls waiting, in order, for their target's look-up.
    resolving: HashMap<ActorId, Vec<Outgoing>>,
    waiting: usize,
    /// The target of each request in flight, by caller (`None`: node code)
    /// and number, to drop its route when the request finds it stale.
    targets: HashMap<(Option<ActorId>, CallId), ActorId>,
    /// Node code's requests waiting for their outcomes, by the shard's
    /// number for them.
    waiters: HashMap<CallId, NodeCallReply>,
    /// The last number given to a request from node code.
    last_node_call: CallId,
    /// What this loop turn's Actor turns sent, in order.
    pub(super) outgoing: Vec<Outgoing>,
}

impl Routes {
    /// The peer `peer`'s link went down: no route to it is used again.
    pub(super) fn forget_peer(&mut self, peer: NodeRid) {
        self.cached
            .retain(|_, (route, _)| route.location.owner != peer);
    }

    /// Numbers a request whose outcome `reply` waits for (node code, or a
    /// turn that awaits it).
    pub(super) fn wait_for(&mut self, reply: NodeCallReply) -> CallId {
        let id = CallId(self.last_node_call.0 + 1);
        self.last_node_call = id;
        self.waiters.insert(id, reply);
        id
    }

    /// The Actor left this shard (moved away): nothing of its requests is
    /// kept here.
    pub(super) fn forget_caller(&mut self, caller: &ActorId) {
        self.targets
            .retain(|(from, _), _| from.as_ref() != Some(caller));
    }

    /// A request ended: when its error says the route was stale, the next
    /// call to that target resolves again. Returns the target, when this
    /// shard routed the request, for the error to name it.
    pub(super) fn ended(
        &mut self,
        caller: Option<&ActorId>,
        call: CallId,
        outcome: &Result<Bytes, Error>,
    ) -> Option<ActorId> {
        let target = self.targets.remove(&(caller.cloned(), call))?;
        let stale = outcome.as_ref().err().is_some_and(|e| {
            matches!(
                e.reason(),
                Reason::StaleLocation
                    | Reason::StaleAuthority
                    | Reason::StaleNodeGeneration
                    | Reason::LeaseExpired
                    | Reason::PeerUnreachable
                    | Reason::MeshUnreachable
            )
        });
        if stale {
            self.cached.remove(&target);
        }
        Some(target)
    }
}

impl ShardState {
    /// A call from node code outside any Actor (a node command): routed at
    /// once like an Actor's, a request with `reply` waiting for its outcome
    /// until `deadline` from now.
    pub(super) fn node_call(
        &mut self,
        to: ActorId,
        key: PacketKey,
        payload: Bytes,
        reply: Option<(Duration, NodeCallReply)>,
    ) {
        let now = self.now();
        let request = reply.map(|(deadline, reply)| (self.routes.wait_for(reply), now + deadline));
        let call = Outgoing {
            from: None,
            caller: None,
            to,
            key,
            payload,
            request,
            waiter: true,
        };
        self.route_call(call);
    }

    /// A request from node code ended: its waiter gets the outcome (a
    /// waiter that gave up is not waited for).
    pub(super) fn node_call_ended(&mut self, call: CallId, outcome: Result<Bytes, Error>) {
        self.routes.ended(None, call, &outcome);
        if let Some(waiter) = self.routes.waiters.remove(&call) {
            let _ = waiter.send(outcome);
        }
    }

    /// Routes what this loop turn's Actor turns sent.
    pub(super) fn route_outgoing(&mut self) {
        if self.routes.outgoing.is_empty() {
            return;
        }
        for call in std::mem::take(&mut self.routes.outgoing) {
            self.route_call(call);
        }
    }

    fn route_call(&mut self, call: Outgoing) {
        let now = self.now();
        if let Some(waiting) = self.routes.resolving.get_mut(&call.to) {
            if self.routes.waiting >= WAITING_MAX {
                return self.fail_call(call, Reason::QueueFull.into());
            }
            self.routes.waiting += 1;
            waiting.push(call);
            return;
        }
        let lifetime = self.node.settings.relocation.follow_lifetime;
        let cached = self
            .routes
            .cached
            .get(&call.to)
            .filter(|(_, at)| now.saturating_duration_since(*at) < lifetime)
            .map(|(route, _)| route.clone());
        if let Some(route) = cached {
            return self.dispatch_call(call, &route);
        }
        // Hosted here: the core's registry is the route, no store read.
        if let Some(route) = self.core.actor_owner().actor_ref(&call.to) {
            self.routes
                .cached
                .insert(call.to.clone(), (route.clone(), now));
            return self.dispatch_call(call, &route);
        }
        if self.routes.waiting >= WAITING_MAX {
            return self.fail_call(call, Reason::QueueFull.into());
        }
        let id = call.to.clone();
        let asked = self.store_effect(move |store| StoreAnswer::Resolve {
            outcome: store.lookup(&id).map(|row| row.map(|row| row.actor_ref())),
            id,
        });
        match asked {
            Ok(()) => {
                self.routes.waiting += 1;
                self.routes.resolving.insert(call.to.clone(), vec![call]);
            }
            Err(error) => self.fail_call(call, error),
        }
    }

    /// The store answered a route look-up: the calls waiting for it go, in
    /// order, or end with the typed error.
    pub(super) fn route_resolved(
        &mut self,
        id: ActorId,
        outcome: Result<Option<ActorRef>, StoreError>,
    ) {
        let waiting = self.routes.resolving.remove(&id).unwrap_or_default();
        self.routes.waiting -= waiting.len();
        let route = match outcome {
            Ok(Some(route)) => route,
            // No live row: the Actor does not exist (or its owner's lease
            // lapsed, §5).
            Ok(None) => {
                for call in waiting {
                    self.fail_call(call, Reason::StaleLocation.into());
                }
                return;
            }
            Err(_) => {
                for call in waiting {
                    self.fail_call(call, Reason::StoreUnavailable.into());
                }
                return;
            }
        };
        let now = self.now();
        self.routes.cached.insert(id, (route.clone(), now));
        for call in waiting {
            self.dispatch_call(call, &route);
        }
    }

    fn dispatch_call(&mut self, call: Outgoing, route: &ActorRef) {
        let now = self.now();
        let Outgoing {
            from,
            caller,
            to,
            key,
            payload,
            request,
            waiter,
        } = call;
        let Some((id, deadline_at)) = request else {
            self.core
                .actors(now)
                .send(from.as_ref(), route, key, payload);
            return;
        };
        let left = deadline_at.saturating_duration_since(now);
        if left == Duration::ZERO {
            self.core.trace(FlowTrace::RequestDeadlineExceeded);
            return self.call_not_sent(caller, waiter, id, Reason::Deadline.into());
        }
        if waiter {
            self.core
                .actors(now)
                .node_request(from.as_ref(), route, key, payload, id, left);
            self.routes.targets.insert((None, id), to);
            return;
        }
        let Some(caller) = caller else {
            return;
        };
        match self
            .core
            .actors(now)
            .request_as(&caller, route, key, payload, id, left)
        {
            Ok(()) => {
                self.routes.targets.insert((from, id), to);
            }
            // Another incarnation is hosted here now: the old one's ledger
            // ended with it.
            Err(_) => self.core.trace(FlowTrace::OneWayRecordRefused),
        }
    }

    /// A request that could not be sent ends now: an Actor's through the
    /// core (a later turn of the caller), a waiter's at its waiter.
    fn call_not_sent(
        &mut self,
        caller: Option<ActorRef>,
        waiter: bool,
        call: CallId,
        error: Error,
    ) {
        let now = self.now();
        match caller {
            Some(caller) if !waiter => self.core.actors(now).call_failed(&caller, call, error),
            _ => self.node_call_ended(call, Err(error)),
        }
    }

    fn fail_call(&mut self, call: Outgoing, error: Error) {
        match call.request {
            Some((id, _)) => self.call_not_sent(call.caller, call.waiter, id, error),
            None => self.core.trace(FlowTrace::OneWayRecordRefused),
        }
    }
}
