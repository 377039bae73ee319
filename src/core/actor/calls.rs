//! Messages between Actors (docs/actors.md "Messages between Actors"): an
//! Actor sends one-way or makes a request of another Actor by its ActorId,
//! on this node or across the mesh, as command 70.
//!
//! Rules this module keeps (the spec's §4 only says a direct send or
//! request targets the Ready Actor a global ActorId points to; the rest is
//! ours, in the spirit of §5, §9 and §12):
//! - A call is admitted by the Actor owner on the incarnation
//!   (ObjectGeneration) and the authority owner generation its sender
//!   resolved, never on the lease (§5); a fenced owner admits none.
//! - A refused request ends with its typed error (`Unavailable` for a stale
//!   route, so the caller may resolve again); a refused one-way message is
//!   counted (`one_way_record_refused`), never silent.
//! - A request ends exactly once: its reply, its deadline, the link to
//!   its target missing (`PeerUnreachable`: never sent) or going down
//!   (`OutcomeUnknown`: it may have run); a late reply is dropped and counted
//!   (`late_reply_dropped`). It is never sent again to another owner.
//! - The outcome comes back to the calling Actor as a later message of its
//!   own ([`ActorEvent::CallOutcome`]), addressed to it like any call: it
//!   follows the caller if the caller moved meanwhile (Message Follow,
//!   §9), and a caller captured for a move gets it after the move.

use std::time::Duration;

use bytes::Bytes;

use super::{ActorEvent, Actors, CallDeadline, ReplyTicket};
use crate::core::effects::{CoreEvent, CoreTimer};
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorRef, AuthorityOwnerGeneration, CallId, NodeRid, ObjectGeneration,
    OwnerLeaseGeneration, PacketKey, Peer, RequestId,
};
use crate::wire::node::{ActorCall, ActorReply, ActorSend, CallBody, NodeRecord, RequestHeader};

/// A request made on this shard, waiting for its outcome.
#[derive(Debug)]
pub(crate) struct PendingCall {
    caller: Caller,
    /// The node the request went to: only its answer ends the request.
    peer: NodeRid,
    deadline: TimerKey,
}

/// Who waits for a request's outcome.
#[derive(Debug)]
enum Caller {
    /// An Actor of this shard, as it was when it called: the outcome is
    /// addressed to it there if it has left this shard since.
    Actor {
        id: ActorId,
        generation: ObjectGeneration,
        authority: AuthorityOwnerGeneration,
        lease: OwnerLeaseGeneration,
        call: CallId,
    },
    /// Node code outside any Actor, waiting on this shard under the number
    /// the shard gave it: it never moves, so the outcome is handed over
    /// here ([`CoreEvent::NodeCallOutcome`]).
    Node(CallId),
}

impl Actors<'_> {
    /// Numbers and opens a new request of `actor` (hosted here), ending at
    /// `deadline` from now at the latest: its numbers are its own and move
    /// with it, so an outcome is never taken for another call, and its
    /// ledger ends the request at its deadline wherever it is then
    /// (open_calls.rs). `QueueFull` when it has as many open as it may
    /// (256), `StaleLocation` when it is not hosted here.
    pub fn open_call(&mut self, actor: &ActorId, deadline: Duration) -> Result<CallId, Error> {
        let hosted = self
            .owner
            .actors
            .get_mut(actor)
            .ok_or_else(|| Error::new(Reason::StaleLocation))?;
        hosted.calls.open(actor, deadline, self.fx)
    }

    /// The deadline of an open request in its caller's ledger: it ends
    /// `Deadline` now, as a later turn of the caller, whatever became of
    /// the node that sent it. A fenced owner (§5) runs no more turns.
    pub(crate) fn on_caller_deadline(&mut self, fire: &CallDeadline) {
        let fenced = self.owner.fenced;
        let Some(hosted) = self.owner.actors.get_mut(&fire.actor) else {
            return;
        };
        if !hosted.calls.expire(fire.call) || fenced {
            return;
        }
        self.fx.trace(FlowTrace::RequestDeadlineExceeded);
        self.fx.actor_event(ActorEvent::CallOutcome {
            actor: fire.actor.clone(),
            call: fire.call,
            outcome: Err(Reason::Deadline.into()),
        });
    }

    /// A one-way message from `from`, an Actor of this shard (`None`: node
    /// code), to the Actor `to` names (its route as resolved).
    pub fn send(&mut self, from: Option<&ActorId>, to: &ActorRef, key: PacketKey, payload: Bytes) {
        let record = call_record(None, from, to, CallBody::Message { key, payload });
        self.fx.send(to.location.owner, record);
    }

    /// A request from `from`, an Actor of this shard, to the Actor `to`
    /// names: it ends once, with the reply or a typed error, delivered to
    /// `from` as [`ActorEvent::CallOutcome`] with `call`; at `deadline` from
    /// now at the latest (`Deadline`). Refused when `from` is not hosted
    /// here (`StaleLocation`).
    #[cfg(feature = "testing")]
    pub fn request(
        &mut self,
        from: &ActorId,
        to: &ActorRef,
        key: PacketKey,
        payload: Bytes,
        call: CallId,
        deadline: Duration,
    ) -> Result<(), Error> {
        let Some(caller) = self.owner.actor_ref(from) else {
            return Err(Reason::StaleLocation.into());
        };
        self.request_as(&caller, to, key, payload, call, deadline)
    }

    /// A request from the caller `from` as it was when its turn made the
    /// request (otherwise as `request`). A turn's request waits for its target's route after
    /// the turn (the runtime resolves it through the store), and the
    /// caller may have moved away meanwhile: the request goes out all the
    /// same, from here, and its outcome is addressed to the caller as it
    /// was, so that this node's Message Follow entry takes it on (§9) to
    /// the ledger that moved with the caller and keeps the request open.
    /// Refused (`StaleLocation`) only when another incarnation is hosted
    /// here now: the old one's ledger ended with it.
    pub fn request_as(
        &mut self,
        from: &ActorRef,
        to: &ActorRef,
        key: PacketKey,
        payload: Bytes,
        call: CallId,
        deadline: Duration,
    ) -> Result<(), Error> {
        let caller = self.caller_as(from, call)?;
        self.start_request(
            caller,
            Some(&from.id),
            to,
            CallBody::Message { key, payload },
            deadline,
        );
        Ok(())
    }

    /// The caller of request `call`: as hosted here now, or as it was when
    /// it left ([`Self::request_as`]).
    fn caller_as(&self, from: &ActorRef, call: CallId) -> Result<Caller, Error> {
        let (generation, authority) = match self.owner.actors.get(&from.id) {
            Some(hosted) if hosted.generation == from.generation => {
                (hosted.generation, hosted.authority)
            }
            Some(_) => return Err(Reason::StaleLocation.into()),
            None => (from.generation, from.location.authority),
        };
        Ok(Caller::Actor {
            id: from.id.clone(),
            generation,
            authority,
            lease: self.owner.identity.lease,
            call,
        })
    }

    /// A request from node code outside any Actor (docs/actors.md "From
    /// node code"), numbered `call` by the shard: the same rules as an
    /// Actor's request; its outcome is [`CoreEvent::NodeCallOutcome`].
    ///
    /// `sender`: the Actor whose awaiting turn made it (docs/actors.md
    /// "Async turns"), for the receiver's `from`; it waits like node code,
    /// since an awaiting turn's Actor does not move.
    pub fn node_request(
        &mut self,
        sender: Option<&ActorId>,
        to: &ActorRef,
        key: PacketKey,
        payload: Bytes,
        call: CallId,
        deadline: Duration,
    ) {
        let body = CallBody::Message { key, payload };
        self.start_request(Caller::Node(call), sender, to, body, deadline);
    }

    fn start_request(
        &mut self,
        caller: Caller,
        from: Option<&ActorId>,
        to: &ActorRef,
        body: CallBody,
        deadline: Duration,
    ) {
        self.owner.next_call = self.owner.next_call.next();
        let id = self.owner.next_call;
        let header = RequestHeader {
            id,
            budget: deadline,
        };
        self.fx
            .send(to.location.owner, call_record(Some(header), from, to, body));
        let deadline = self.fx.arm(deadline, CoreTimer::Call(id));
        let pending = PendingCall {
            caller,
            peer: to.location.owner,
            deadline,
        };
        self.owner.calls.insert(id, pending);
    }

    /// A request the runtime could not send (its target's route could not
    /// be resolved, or the store's queue was full) ends now, delivered to
    /// its caller like any outcome — as it was when its turn made the
    /// request, when it has moved away since ([`Self::request_as`]).
    pub fn call_failed(&mut self, caller: &ActorRef, call: CallId, error: Error) {
        let Ok(Caller::Actor {
            id,
            generation,
            authority,
            lease,
            ..
        }) = self.caller_as(caller, call)
        else {
            self.fx.trace(FlowTrace::OneWayRecordRefused);
            return;
        };
        self.deliver_outcome(&id, (generation, authority, lease), call, Err(error));
    }

    /// 24 reply to one of this shard's calls (RecordRole::Caller).
    pub(crate) fn on_call_reply(&mut self, from: Peer, reply: ActorReply) {
        let known = self
            .owner
            .calls
            .get(&reply.request)
            .is_some_and(|p| p.peer == from.rid);
        if !known {
            self.fx.trace(FlowTrace::LateReplyDropped);
            return;
        }
        self.end_call(reply.request, reply.outcome);
    }

    /// A request's deadline passed at the node that sent it: no answer will
    /// be taken from now on. Node code's request ends `Deadline` here; an
    /// Actor's is ended by the Actor's own ledger, wherever the Actor is
    /// (open_calls.rs), so nothing is sent for it.
    pub(crate) fn on_call_deadline(&mut self, request: RequestId) {
        match self.owner.calls.get(&request).map(|p| &p.caller) {
            Some(Caller::Node(_)) => {
                self.fx.trace(FlowTrace::RequestDeadlineExceeded);
                self.end_call(request, Err(Reason::Deadline.into()));
            }
            Some(Caller::Actor { .. }) => {
                self.owner.calls.remove(&request);
            }
            None => {}
        }
    }

    /// No link to the call's target: it ends `Unavailable` now.
    pub(crate) fn call_unreachable(&mut self, to: NodeRid, request: RequestId) {
        if self.owner.calls.get(&request).is_some_and(|p| p.peer == to) {
            self.end_call(request, Err(Reason::PeerUnreachable.into()));
        }
    }

    /// The link to `peer` went down (§12): each request made of an Actor
    /// there ends now with `OutcomeUnknown`, in the order they were made;
    /// its reply, should one still come, is late.
    pub(crate) fn calls_peer_down(&mut self, peer: NodeRid) {
        for request in crate::core::sorted_keys(&self.owner.calls, |p| p.peer == peer) {
            self.fx.trace(FlowTrace::RequestLinkDown);
            self.end_call(request, Err(Reason::OutcomeUnknown.into()));
        }
    }

    fn end_call(&mut self, request: RequestId, outcome: Result<Bytes, Error>) {
        let Some(pending) = self.owner.calls.remove(&request) else {
            return;
        };
        self.fx.cancel(pending.deadline);
        let (id, generation, authority, lease, call) = match pending.caller {
            Caller::Actor {
                id,
                generation,
                authority,
                lease,
                call,
            } => (id, generation, authority, lease, call),
            Caller::Node(call) => {
                self.fx.event(CoreEvent::NodeCallOutcome { call, outcome });
                return;
            }
        };
        // Addressed to the caller where it is now when it is still here,
        // else where it was (Message Follow takes it on).
        let to = match self.owner.actors.get(&id) {
            Some(hosted) if hosted.generation == generation => (
                hosted.generation,
                hosted.authority,
                self.owner.identity.lease,
            ),
            _ => (generation, authority, lease),
        };
        self.deliver_outcome(&id, to, call, outcome);
    }

    /// The outcome goes to the caller as a 70 to this node: on this node's
    /// own path, it reaches the caller's lane, its move's ingress hold, or
    /// its Message Follow entry, like any call for it.
    fn deliver_outcome(
        &mut self,
        caller: &ActorId,
        (generation, authority, lease): (
            ObjectGeneration,
            AuthorityOwnerGeneration,
            OwnerLeaseGeneration,
        ),
        call: CallId,
        outcome: Result<Bytes, Error>,
    ) {
        let record = NodeRecord::ActorCall(ActorCall {
            request: None,
            actor: caller.clone(),
            object_generation: generation,
            authority,
            lease,
            from: Some(caller.clone()),
            body: CallBody::Outcome { call, outcome },
        });
        self.fx.send(self.owner.identity.node, record);
    }

    /// Closes request `call` in `actor`'s ledger for its outcome: `true`
    /// when it was open (the outcome is delivered, once), `false` when it
    /// ended already (at its deadline) or the Actor is not hosted here —
    /// the outcome is then late, dropped and counted.
    pub(crate) fn close_call(&mut self, actor: &ActorId, call: CallId) -> bool {
        let open = self
            .owner
            .actors
            .get_mut(actor)
            .is_some_and(|hosted| hosted.calls.close(call, self.fx));
        if !open {
            self.fx.trace(FlowTrace::LateReplyDropped);
        }
        open
    }

    /// 70 at the Actor owner: admitted on the incarnation and authority it
    /// names, then Actor work (see [`Self::admit_call_to_event`]).
    pub(crate) fn on_call(&mut self, from: Peer, call: ActorCall) {
        if let Some(event) = self.admit_call_to_event(from, call) {
            self.fx.actor_event(event);
        }
    }

    /// Admits a 70 and turns it into the Actor work it asks for, owing the
    /// reply of a request; a refusal is answered here (a typed error for a
    /// request, a counted drop otherwise). The relocation coordinator holds
    /// what comes back instead of delivering it (the ingress hold).
    pub(crate) fn admit_call_to_event(
        &mut self,
        from: Peer,
        call: ActorCall,
    ) -> Option<ActorEvent> {
        let verdict = self.admit_call(&call);
        let request = call.request;
        let refusal = match (&verdict, &call.body, request) {
            (Err(error), _, Some(header)) => Some((header, error.clone())),
            // An outcome is never a request.
            (Ok(()), CallBody::Outcome { .. }, Some(header)) => {
                Some((header, Error::new(Reason::MalformedRecord)))
            }
            _ => None,
        };
        if let Some((header, error)) = refusal {
            let reply = ActorReply {
                request: header.id,
                outcome: Err(error),
            };
            self.fx
                .answer(from, NodeRecord::ActorSend(ActorSend::Reply(reply)));
            return None;
        }
        if verdict.is_err() {
            self.fx.trace(FlowTrace::OneWayRecordRefused);
            return None;
        }
        // An outcome is delivered only to a request still open in the
        // caller's ledger: once, never after its own deadline ended it.
        if let CallBody::Outcome { call: id, .. } = &call.body {
            let open = self
                .owner
                .actors
                .get_mut(&call.actor)
                .is_some_and(|hosted| hosted.calls.close(*id, self.fx));
            if !open {
                self.fx.trace(FlowTrace::LateReplyDropped);
                return None;
            }
        }
        let reply: Option<ReplyTicket> = request.map(|h| self.owner.owe(from, h.id));
        Some(match call.body {
            CallBody::Message { key, payload } => ActorEvent::Call {
                actor: call.actor,
                from: call.from,
                key,
                payload,
                reply,
            },
            CallBody::Outcome { call: id, outcome } => ActorEvent::CallOutcome {
                actor: call.actor,
                call: id,
                outcome,
            },
        })
    }

    fn admit_call(&mut self, call: &ActorCall) -> Result<(), Error> {
        if self.owner.fenced {
            return Err(Reason::LeaseExpired.into());
        }
        let Some(hosted) = self.owner.actors.get(&call.actor) else {
            return Err(Reason::StaleLocation.into());
        };
        if hosted.generation != call.object_generation {
            return Err(Reason::StaleLocation.into());
        }
        if hosted.authority != call.authority {
            self.fx.trace(FlowTrace::RelayRejectedStaleFence);
            return Err(Reason::StaleAuthority.into());
        }
        Ok(())
    }
}

/// A 70 from `from` to the Actor at `to`'s route.
fn call_record(
    request: Option<RequestHeader>,
    from: Option<&ActorId>,
    to: &ActorRef,
    body: CallBody,
) -> NodeRecord {
    NodeRecord::ActorCall(ActorCall {
        request,
        actor: to.id.clone(),
        object_generation: to.generation,
        authority: to.location.authority,
        lease: to.location.lease,
        from: from.cloned(),
        body,
    })
}
