//! The relocation seal of one binding, on the session owner's side (§8,
//! §8.1, §8.2): command 42 installs it, the binding's messages are held while
//! it lasts, and command 44 (commit or abort) or SessionRelocationSealTimeout
//! ends it — whichever the session owner's serial span processes first.
//!
//! Rules this module keeps (docs/relocation.md "Session owner side"):
//! - 42 seals exactly the binding it names: session identity and SessionRid,
//!   binding generation, ActorId and ObjectGeneration must all be current.
//!   Anything else is answered 43 with a typed error and changes nothing. The
//!   same relocation again is answered Ok again; another one is refused. 43
//!   carries the result only (§8.2).
//! - The seal is a state of one binding ([`BindingState::Sealed`]), not of
//!   the session or its lane (§11): other bindings keep flowing.
//! - Held messages keep their arrival order and session sequence. There is no
//!   relocation-specific capacity condition (§8.1): what bounds them is the
//!   session lane's ordinary admission and the seal timeout.
//! - A held request that ends while held (its deadline, the session's close)
//!   leaves the held list: it is never sent later (§8.1, §12). A held
//!   one-way message of a session that closes is still submitted over the
//!   route its seal resolves to (D2), except when a seal timeout closed the
//!   session: then none of its held messages goes out (§8.1, the stricter
//!   reading, docs/relocation.md).
//! - Commit: route and location snapshot switch to the target, the held
//!   messages go to the target before anything relayed later, the seal is
//!   released — one span, no disconnect callback, no 51, no rebind (§8.2).
//!   Abort: the held messages go over the unchanged source route.
//! - Timeout: the physical session closes (`SealTimeout`), the held messages
//!   are dropped undelivered, and every binding of the session, the sealed
//!   one included, gets the ordinary disconnect procedure (§7, §8.1): the
//!   sealed one's notice and tombstone go over its stored (source) route
//!   only, and Message Follow takes them on if the move committed (X22).
//! - A 44 that matches no installed seal (late, duplicate, another
//!   relocation or binding) changes nothing and records
//!   `late_session_route_update` (§8.1).

use std::collections::VecDeque;
use std::mem;

use bytes::Bytes;

use super::aggregate::{BindingState, SealStep};
use super::{PendingKind, SendRoute, SessionEvent, SessionTimer, Sessions, Ticket};
use crate::core::effects::CoreTimer;
use crate::core::latency::SealEnd;
use crate::core::time::Instant;
use crate::core::timer::TimerKey;
use crate::core::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorLocation, Correlation, PacketKey, Peer, RelocationId, RequestId, SessionRid,
    SessionSequence,
};
use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::node::{
    NodeRecord, RouteCommit, SealIdentity, SessionRelocationRoute, SessionRelocationSeal,
    SessionRelocationSealed, TombstoneCause,
};

/// An installed relocation seal and what it holds (§8.1).
#[derive(Debug)]
pub(crate) struct Seal {
    /// The relocation that installed it; only its 44 ends it.
    pub(crate) relocation: RelocationId,
    /// SessionRelocationSealTimeout, armed at installation.
    pub(crate) timeout: TimerKey,
    /// When the 42 installed it: the start of the relocation pause the
    /// binding's client sees (core::latency), ended by the 44 or the
    /// timeout.
    pub(crate) since: Instant,
    /// The binding's messages accepted while sealed, in arrival order.
    pub(crate) held: VecDeque<Accepted>,
    /// A disconnect notice for the binding, sent after the held messages over
    /// whichever route the seal resolves to (§7 while sealed).
    pub(crate) disconnect: Option<HeldDisconnect>,
}

/// A client message accepted on a binding (§5): what a 24 carries besides
/// the binding's own route and generations.
#[derive(Debug)]
pub(crate) struct Accepted {
    /// Its session sequence, given when it was accepted.
    pub(crate) sequence: SessionSequence,
    /// The handler key.
    pub(crate) key: PacketKey,
    /// The payload.
    pub(crate) payload: Bytes,
    /// For a request: its id and deadline, which run from acceptance.
    pub(crate) request: Option<AcceptedRequest>,
}

/// The request side of an accepted message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AcceptedRequest {
    /// The node request id its reply will name.
    pub(crate) id: RequestId,
    /// The client's correlation.
    pub(crate) correlation: Correlation,
    /// When it ends with DeadlineExceeded, held or not (§8.1, §12).
    pub(crate) deadline: Instant,
}

/// A disconnect notice that arrived while the binding was sealed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeldDisconnect {
    /// Physical disconnect or NotifyDisconnected.
    pub(crate) cause: TombstoneCause,
    /// The NotifyDisconnected call to complete, if it was one.
    pub(crate) ticket: Option<Ticket>,
}

impl Seal {
    fn new(relocation: RelocationId, timeout: TimerKey, since: Instant) -> Self {
        Self {
            relocation,
            timeout,
            since,
            held: VecDeque::new(),
            disconnect: None,
        }
    }

    /// Drops a held request that ended while held; returns whether it was here.
    pub(crate) fn unhold(&mut self, request: RequestId) -> bool {
        let before = self.held.len();
        self.held
            .retain(|m| m.request.map_or(true, |r| r.id != request));
        self.held.len() < before
    }
}

impl Sessions<'_> {
    /// Command 42: install the seal and answer 43 with the result only.
    pub(super) fn on_seal(&mut self, from: Peer, request: SessionRelocationSeal) {
        let outcome = self.install_seal(&request).map_err(Error::from);
        let sealed = SessionRelocationSealed {
            request: request.request.id,
            outcome,
        };
        self.fx
            .answer(from, NodeRecord::SessionRelocationSealed(sealed));
    }

    fn install_seal(&mut self, request: &SessionRelocationSeal) -> Result<(), Reason> {
        let seal = &request.seal;
        if !self.is_mine(&seal.session) {
            return Err(Reason::StaleBinding);
        }
        let session = seal.session.session;
        let Some(aggregate) = self.owner.sessions.get(&session) else {
            return Err(Reason::StaleBinding);
        };
        let step = aggregate.judge_seal(&request.actor, request.object_generation, seal)?;
        if step == SealStep::AlreadySealed {
            return Ok(());
        }
        if !aggregate.is_open() {
            return Err(Reason::SessionClosing);
        }
        let timer = SessionTimer::SealTimeout {
            session,
            actor: request.actor.clone(),
            relocation: seal.relocation,
        };
        let timeout = self.fx.arm(
            self.owner.config.relocation_seal_timeout,
            CoreTimer::Session(timer),
        );
        let binding = self
            .owner
            .sessions
            .get_mut(&session)
            .and_then(|a| a.bindings.get_mut(&request.actor));
        if let Some(binding) = binding {
            let since = self.fx.now();
            binding.state = BindingState::Sealed(Seal::new(seal.relocation, timeout, since));
        }
        Ok(())
    }

    /// Holds an accepted message on a sealed binding (§8.1).
    pub(super) fn hold(&mut self, session: SessionRid, actor: &ActorId, message: Accepted) {
        match self.owner.seal_mut(session, actor) {
            Some(seal) => seal.held.push_back(message),
            None => debug_assert!(false, "hold on a binding that is not sealed"),
        }
    }

    /// §7 while sealed: the NotifyDisconnected notice waits for the seal's
    /// outcome. From here on the binding is no longer bound for the
    /// application, so no second notice can be held for it (at most once).
    pub(super) fn hold_disconnect(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        held: HeldDisconnect,
    ) {
        match self.owner.seal_mut(session, actor) {
            Some(seal) => {
                debug_assert!(seal.disconnect.is_none(), "one notice per binding");
                seal.disconnect = Some(held);
            }
            None => debug_assert!(false, "held disconnect on a binding that is not sealed"),
        }
    }

    /// Command 44: commit or abort, only for the seal installed on the
    /// binding it names; anything else is a late route update.
    pub(super) fn on_route(&mut self, route: SessionRelocationRoute) {
        let (seal, commit) = match route {
            SessionRelocationRoute::Commit(commit) => (commit.seal, Some(commit)),
            SessionRelocationRoute::Abort(seal) => (seal, None),
        };
        let Some(actor) = self.sealed_binding(&seal, commit.as_ref()) else {
            self.fx.trace(FlowTrace::LateSessionRouteUpdate);
            return;
        };
        let session = seal.session.session;
        let binding = self
            .owner
            .sessions
            .get_mut(&session)
            .and_then(|a| a.bindings.get_mut(&actor));
        let Some(binding) = binding else {
            return;
        };
        let BindingState::Sealed(installed) =
            mem::replace(&mut binding.state, BindingState::Current)
        else {
            debug_assert!(false, "sealed_binding names a sealed binding");
            return;
        };
        let end = if commit.is_some() {
            SealEnd::Committed
        } else {
            SealEnd::Aborted
        };
        self.fx.seal_ended(installed.since, end);
        match commit {
            Some(commit) => {
                // §8.2: the route and the location snapshot change together.
                binding.location = ActorLocation {
                    mesh: commit.target_mesh,
                    owner: commit.target,
                    node_generation: commit.target_node_generation,
                    authority: commit.authority,
                    lease: commit.lease,
                };
                self.fx.trace(FlowTrace::SessionRouteCommitted);
            }
            None => self.fx.trace(FlowTrace::SessionSealAborted),
        }
        self.release(session, &actor, installed);
    }

    /// The Actor whose binding carries exactly this seal (§8.1): session
    /// identity, relocation and binding generation, and for a commit also the
    /// ActorId and ObjectGeneration.
    fn sealed_binding(&self, seal: &SealIdentity, commit: Option<&RouteCommit>) -> Option<ActorId> {
        if !self.is_mine(&seal.session) {
            return None;
        }
        let aggregate = self.owner.sessions.get(&seal.session.session)?;
        let actor = aggregate.sealed_by(seal)?;
        let matches = commit.map_or(true, |c| {
            c.actor == *actor
                && aggregate
                    .bindings
                    .get(actor)
                    .is_some_and(|b| b.object_generation == c.object_generation)
        });
        matches.then(|| actor.clone())
    }

    /// Submits what a released seal held, in arrival order, over the
    /// binding's route as it is now (the target's after a commit, the
    /// source's after an abort), then its held disconnect notice. Called in
    /// the span that released the seal, so every held message goes before any
    /// later relay (§8.2).
    fn release(&mut self, session: SessionRid, actor: &ActorId, seal: Seal) {
        self.fx.cancel(seal.timeout);
        let now = self.fx.now();
        // The binding's route as it is now: a relocation may have changed it
        // while the messages were held, and their requests then end only by
        // an answer from the new node. The loop changes no binding, so the
        // route is read once.
        let route = self
            .owner
            .sessions
            .get(&session)
            .and_then(|a| a.bindings.get(actor))
            .map(SendRoute::of);
        for message in seal.held {
            if let Some(request) = message.request {
                let Some(pending) = self.owner.pending.get_mut(&request.id) else {
                    debug_assert!(false, "a held request has its pending entry");
                    continue;
                };
                if request.deadline <= now {
                    // Due, but the shard has not handled its timer yet: it
                    // ends now, as its timer would have ended it, unsent.
                    let deadline = pending.deadline;
                    self.owner.pending.remove(&request.id);
                    self.fx.cancel(deadline);
                    self.fx.trace(FlowTrace::RequestDeadlineExceeded);
                    self.fx.session_event(SessionEvent::Frame {
                        session,
                        frame: ClientFrame::Error {
                            correlation: request.correlation,
                            error: Error::new(Reason::Deadline).about_actor(actor),
                        },
                    });
                    continue;
                }
                pending.kind = PendingKind::Relay {
                    actor: actor.clone(),
                    correlation: request.correlation,
                };
                if let Some(route) = route {
                    pending.peer = route.to;
                }
            }
            self.fx.trace(FlowTrace::HeldMessageReleased);
            let Some(route) = route else {
                debug_assert!(false, "a released seal's binding exists");
                continue;
            };
            self.send_accepted(session, actor, route, message);
        }
        if let Some(held) = seal.disconnect {
            self.send_disconnect_notice(session, actor, held.cause, held.ticket);
        }
    }

    /// Drops the one-way messages still held on the session's other seals
    /// when a seal timeout closes it: none of them is submitted when a 44
    /// comes later (§8.1).
    pub(super) fn drop_held_one_way(&mut self, session: SessionRid) {
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        let mut dropped = 0;
        for seal in aggregate.bindings.values_mut().filter_map(|b| b.seal_mut()) {
            // Held requests stay: the close ends each with its terminal.
            let before = seal.held.len();
            seal.held.retain(|m| m.request.is_some());
            dropped += before - seal.held.len();
        }
        for _ in 0..dropped {
            self.fx.trace(FlowTrace::HeldMessageDropped);
        }
    }

    /// Ends what a seal held without delivering any of it (the seal timed
    /// out, or its binding was retired while sealed): each held request ends
    /// with `error` for its client — it was never sent, so the client knows
    /// it was not processed — a held NotifyDisconnected ends with it too, and
    /// every dropped message is counted.
    pub(super) fn discard(&mut self, session: SessionRid, seal: Seal, error: Error) {
        self.fx.cancel(seal.timeout);
        for message in seal.held {
            self.fx.trace(FlowTrace::HeldMessageDropped);
            let Some(request) = message.request else {
                continue;
            };
            let mut about = error.clone();
            if let Some(pending) = self.owner.pending.remove(&request.id) {
                self.fx.cancel(pending.deadline);
                if let PendingKind::Held { actor, .. } = &pending.kind {
                    about = about.about_actor(actor);
                }
            }
            self.fx.session_event(SessionEvent::Frame {
                session,
                frame: ClientFrame::Error {
                    correlation: request.correlation,
                    error: about,
                },
            });
        }
        if let Some(HeldDisconnect {
            ticket: Some(ticket),
            ..
        }) = seal.disconnect
        {
            self.fx.session_event(SessionEvent::NotifyCompleted {
                session,
                ticket,
                outcome: Err(error),
            });
        }
    }

    /// §8.1 SessionRelocationSealTimeout: no 44 came in time. The physical
    /// session closes and the sealed binding's held messages are dropped;
    /// the sealed binding then ends like every binding of a closing
    /// session (§7, §1 table: every Actor in the binding snapshot is
    /// notified), X22: one disconnect notice and, after its terminal, its
    /// tombstone, over the stored (source) route only — never a guessed
    /// target. If the move committed, the source's Message Follow forwards
    /// them once (§9); one that reaches the source before its follow entry
    /// exists waits at the coordinator and is then forwarded, or ends
    /// `Unavailable`, counted. A late 44 finds no seal and changes nothing.
    pub(super) fn on_seal_timeout(
        &mut self,
        session: SessionRid,
        actor: &ActorId,
        relocation: RelocationId,
    ) {
        let Some(aggregate) = self.owner.sessions.get_mut(&session) else {
            return;
        };
        // A commit or abort cancels this timer in its span; a timer that
        // still finds no seal of its relocation has nothing to do.
        let binding = aggregate
            .bindings
            .get_mut(actor)
            .filter(|b| matches!(&b.state, BindingState::Sealed(s) if s.relocation == relocation));
        let Some(binding) = binding else {
            return;
        };
        // The binding is current again on its stored route: no 44 changed it.
        let BindingState::Sealed(mut seal) =
            mem::replace(&mut binding.state, BindingState::Current)
        else {
            return;
        };
        self.fx.trace(FlowTrace::SealTimeout);
        self.fx.seal_ended(seal.since, SealEnd::TimedOut);
        // A NotifyDisconnected asked while sealed is this binding's notice.
        let asked = seal.disconnect.take();
        self.discard(session, seal, Reason::RelocationSealed.into());
        // §8.1 "the physical Session is closed and the binding, held
        // message, and seal state are cleaned up": the stricter reading —
        // no held message of the closed session goes out later, on any of
        // its sealed bindings (its held requests end in the close below).
        self.drop_held_one_way(session);
        if let Some(HeldDisconnect { cause, ticket }) = asked {
            self.send_disconnect_notice(session, actor, cause, ticket);
        }
        // The close notifies every current binding once, this one included
        // unless its notice went out just above.
        self.close(session, Some(CloseReason::SealTimeout));
        self.end_if_settled(session);
    }
}
