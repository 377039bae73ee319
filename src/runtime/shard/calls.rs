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

/// A call an Actor's turn made, to be routed after the turn.
pub(super) struct Outgoing {
    pub(super) from: ActorId,
    pub(super) to: ActorId,
    pub(super) key: PacketKey,
    pub(super) payload: Bytes,
    /// `Some` for a request: its number and when it must have ended.
    pub(super) request: Option<(CallId, Instant)>,
}

/// The shard's routes to other Actors and the calls waiting on look-ups.
#[derive(Default)]
pub(super) struct Routes {
    /// Resolved routes, each with when it was resolved.
    cached: HashMap<ActorId, (ActorRef, Instant)>,
    /// Calls waiting, in order, for their target's look-up.
    resolving: HashMap<ActorId, Vec<Outgoing>>,
    waiting: usize,
    /// The target of each request in flight, by caller and number, to drop
    /// its route when the request finds it stale.
    targets: HashMap<(ActorId, CallId), ActorId>,
    /// What this loop turn's Actor turns sent, in order.
    pub(super) outgoing: Vec<Outgoing>,
}

impl Routes {
    /// The peer `peer`'s link went down: no route to it is used again.
    pub(super) fn forget_peer(&mut self, peer: NodeRid) {
        self.cached
            .retain(|_, (route, _)| route.location.owner != peer);
    }

    /// A request ended: when its error says the route was stale, the next
    /// call to that target resolves again. Returns the target, when this
    /// shard routed the request, for the error to name it.
    pub(super) fn ended(
        &mut self,
        caller: &ActorId,
        call: CallId,
        outcome: &Result<Bytes, Error>,
    ) -> Option<ActorId> {
        let target = self.targets.remove(&(caller.clone(), call))?;
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
            to,
            key,
            payload,
            request,
        } = call;
        let Some((id, deadline_at)) = request else {
            self.core.actors(now).send(&from, route, key, payload);
            return;
        };
        let left = deadline_at.saturating_duration_since(now);
        if left == Duration::ZERO {
            self.core.trace(FlowTrace::RequestDeadlineExceeded);
            self.core
                .actors(now)
                .call_failed(&from, id, Reason::Deadline.into());
            return;
        }
        match self
            .core
            .actors(now)
            .request(&from, route, key, payload, id, left)
        {
            Ok(()) => {
                self.routes.targets.insert((from, id), to);
            }
            // The caller is no longer here: nobody waits for the outcome.
            Err(_) => self.core.trace(FlowTrace::OneWayRecordRefused),
        }
    }

    fn fail_call(&mut self, call: Outgoing, error: Error) {
        let now = self.now();
        match call.request {
            Some((id, _)) => self.core.actors(now).call_failed(&call.from, id, error),
            None => self.core.trace(FlowTrace::OneWayRecordRefused),
        }
    }
}
