//! BindOrGet asked of the node that owns the Actor's row (command 71;
//! docs/store.md "A login on another node").
//!
//! §1 step 2 gives the application an ActorRef that is Ready, and §8.1
//! lets only the row's owner judge its own row while that owner's lease
//! lives. So when a BindOrGet finds a live row naming another node
//! ([`super::creation::HostDecision::AskOwner`]), this shard does not hand
//! out the row as found: it asks that node, whose Actor shard runs the same
//! BindOrGet ([`ShardCore::host_step`], [`ShardCore::host_found`]) and
//! answers with the Actor it serves, the row's ActorRef while the Actor is
//! in motion, or — only after an incarnation it lost after relay-ready
//! (L6), recorded and counted `lost_incarnation_replaced` — a new
//! incarnation (new ObjectGeneration and AuthorityOwnerGeneration, so old
//! ActorRefs and bindings stay invalid, §4). Without it, a login on a third
//! node after such a loss bound at the row's owner and was refused
//! `StaleLocation` for as long as the owner lived.
//!
//! Rules this module keeps:
//! - An ask ends exactly once, as [`HostEvent::Answered`]: with the
//!   owner's answer, with `PeerUnreachable` when there is no link to the
//!   owner, or with `Deadline` at the bind timeout (the Get half of a
//!   BindOrGet takes no longer than its bind may). A late answer, or one
//!   from another node, is dropped and counted
//!   (`late_host_answer_dropped`).
//! - An asked node never asks on: its BindOrGet answers from its own
//!   registry and the store (`for_peer`), so an ask is one hop, never a
//!   loop, and the asker takes what it is given.
//! - The answer goes only to the lifecycle of the peer that asked
//!   ([`super::Transmit::lifecycle`]): ids start again in every
//!   NodeGeneration (§4).

use std::collections::HashMap;

use super::effects::{CoreEvent, CoreTimer};
use super::shard::ShardCore;
use super::time::Instant;
use super::timer::TimerKey;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, ActorTypeName, NodeRid, Peer, RequestId, SessionOwnerId};
use crate::wire::node::{ActorHost, HostAnswer, HostAsk, NodeRecord, RequestHeader};

/// What BindOrGet between nodes asks of the shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// A peer asks this shard to run BindOrGet for `actor`: run it as a
    /// local one would but without asking on (`for_peer`), and answer with
    /// [`ShardCore::answer_host_ask`].
    Asked {
        /// The asking node, as its link authenticated it.
        from: Peer,
        /// The ask, to answer under.
        request: RequestId,
        /// The Actor.
        actor: ActorId,
        /// The type a new incarnation would be created with.
        actor_type: ActorTypeName,
    },
    /// The outcome of this shard's ask for `actor`
    /// ([`ShardCore::ask_owner`]): BindOrGet's outcome.
    Answered {
        /// The Actor.
        actor: ActorId,
        /// The Ready ActorRef the owner gave, or the typed error.
        outcome: Result<ActorRef, Error>,
    },
    /// A store step's outcome was unknown, and the row is due to be
    /// checked (src/core/recheck.rs): look it up for nobody, behind any
    /// BindOrGet waiting for `actor`, and decide with
    /// [`ShardCore::recheck_found`](crate::core::shard::ShardCore::recheck_found).
    Recheck {
        /// The Actor.
        actor: ActorId,
    },
    /// An ending Actor's row removal is due again (src/core/actor/removal.rs):
    /// remove the row at this ActorRef's version, and tell the core of an
    /// unknown outcome again ([`crate::core::actor::Actors::removal_unknown`]).
    RemoveAgain {
        /// The ending incarnation; its location is the row version.
        row: ActorRef,
    },
    /// An ending Actor's removal stays unknown and this owner is fenced
    /// (§5): the destroy ends `Unavailable` (StoreUnavailable), and the
    /// Actor stays ending until the process restarts.
    DestroyUnknown {
        /// The Actor.
        actor: ActorId,
    },
}

/// The asks this shard has open.
#[derive(Debug)]
pub(crate) struct HostAsks {
    last: RequestId,
    open: HashMap<RequestId, OpenAsk>,
}

#[derive(Debug)]
struct OpenAsk {
    actor: ActorId,
    /// Only this node's answer ends the ask.
    peer: NodeRid,
    deadline: TimerKey,
}

impl HostAsks {
    /// Ids start at this shard's origin for asks, so an answer, which
    /// carries only the id, comes back to this shard (`record_shard`).
    pub(crate) fn new(owner: SessionOwnerId) -> Self {
        Self {
            last: RequestId::host_origin(owner),
            open: HashMap::new(),
        }
    }

    /// Whether `request` is an ask of this shard to `to`, still open.
    pub(crate) fn asked(&self, to: NodeRid, request: RequestId) -> bool {
        self.open.get(&request).is_some_and(|open| open.peer == to)
    }
}

impl ShardCore {
    /// BindOrGet found `row`, a live row naming another node: ask that
    /// node (module doc). Ends as [`HostEvent::Answered`]. The shard keeps
    /// one BindOrGet per Actor with the store or an owner at a time, so
    /// there is at most one ask per Actor.
    pub fn ask_owner(&mut self, now: Instant, actor_type: ActorTypeName, row: &ActorRef) {
        self.fx.advance(now);
        let budget = self.sessions.config().bind_timeout;
        let asks = &mut self.host_asks;
        asks.last = RequestId(asks.last.0 + 1);
        let request = asks.last;
        let ask = HostAsk {
            request: RequestHeader {
                id: request,
                budget,
            },
            actor: row.id.clone(),
            actor_type,
        };
        let fx = &mut self.fx;
        fx.send(
            row.location.owner,
            NodeRecord::ActorHost(ActorHost::Ask(ask)),
        );
        fx.trace(FlowTrace::HostAsked);
        let deadline = fx.arm(budget, CoreTimer::HostAsk(request));
        self.host_asks.open.insert(
            request,
            OpenAsk {
                actor: row.id.clone(),
                peer: row.location.owner,
                deadline,
            },
        );
    }

    /// The outcome of a peer's ask ([`HostEvent::Asked`]), to that
    /// lifecycle of the peer only.
    pub fn answer_host_ask(
        &mut self,
        now: Instant,
        to: Peer,
        request: RequestId,
        outcome: Result<ActorRef, Error>,
    ) {
        self.fx.advance(now);
        let answer = HostAnswer { request, outcome };
        self.fx
            .answer(to, NodeRecord::ActorHost(ActorHost::Answer(answer)));
    }

    /// 71 from an authenticated peer.
    pub(super) fn on_actor_host(&mut self, from: Peer, host: ActorHost) {
        match host {
            ActorHost::Ask(ask) => self.fx.event(CoreEvent::Host(HostEvent::Asked {
                from,
                request: ask.request.id,
                actor: ask.actor,
                actor_type: ask.actor_type,
            })),
            ActorHost::Answer(answer) => {
                if !self.host_asks.asked(from.rid, answer.request) {
                    self.fx.trace(FlowTrace::LateHostAnswerDropped);
                    return;
                }
                self.host_ask_ended(answer.request, answer.outcome);
            }
        }
    }

    /// An ask's deadline passed: it ends `Deadline`; an answer after it is
    /// late.
    pub(super) fn on_host_ask_deadline(&mut self, request: RequestId) {
        if self.host_asks.open.contains_key(&request) {
            self.fx.trace(FlowTrace::RequestDeadlineExceeded);
            self.host_ask_ended(request, Err(Reason::Deadline.into()));
        }
    }

    /// Ends an open ask with `outcome`, once. An answer naming another
    /// Actor than the one asked about is malformed.
    pub(super) fn host_ask_ended(&mut self, request: RequestId, outcome: Result<ActorRef, Error>) {
        let Some(open) = self.host_asks.open.remove(&request) else {
            return;
        };
        let outcome = match outcome {
            Ok(answered) if answered.id != open.actor => Err(Reason::MalformedRecord.into()),
            outcome => outcome,
        };
        let fx = &mut self.fx;
        fx.cancel(open.deadline);
        fx.event(CoreEvent::Host(HostEvent::Answered {
            actor: open.actor,
            outcome,
        }));
    }
}
