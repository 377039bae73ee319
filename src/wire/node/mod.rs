//! Node-to-node records: one Rust type per command of the §5 table.
//!
//! What the spec implies without a number is a variant of the command it
//! belongs to: the tombstone is a transition of 38 (§6), the disconnect notice
//! and the request reply are variants of 24, the abort a variant of 44.
//! Command 45 is reserved: it has no type, and decoding refuses it
//! (docs/wire.md).

mod actor_send;
mod bind;
mod bound_send;
mod relocation;
mod replaced;

pub use actor_send::{ActorMessage, ActorReply, ActorSend, ActorSendBody, BoundSessionTail};
pub use bind::{
    BindRequest, BindTerminal, BindTombstone, BoundRoute, BoundSessionBind, TombstoneCause,
};
pub use bound_send::{BoundSessionBody, BoundSessionSend};
pub use relocation::{
    RouteCommit, SealIdentity, SessionRelocationRoute, SessionRelocationSeal,
    SessionRelocationSealed,
};
pub use replaced::{AuthorityFence, BoundSessionReplaced};

use std::time::Duration;

use crate::ids::RequestId;

/// The command numbers of the §5 table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    /// actorSend: session → Actor payload, with the bound-session tail.
    ActorSend = 24,
    /// boundSessionSend: Actor → session push or close.
    BoundSessionSend = 36,
    /// boundSessionBind: bind request, its terminal, and the tombstone.
    BoundSessionBind = 38,
    /// sessionRelocationSeal: install a seal on a binding.
    SessionRelocationSeal = 42,
    /// sessionRelocationSealed: the seal-installation result.
    SessionRelocationSealed = 43,
    /// sessionRelocationRoute: route apply (commit) or abort; one-way.
    SessionRelocationRoute = 44,
    /// boundSessionReplaced: one-way notice to the replaced binding.
    BoundSessionReplaced = 51,
}

/// The reserved command number that is neither sent nor accepted (§5, §8.2).
pub const RESERVED_COMMAND: u8 = 45;

/// A request's correlation and its remaining time budget (docs/wire.md,
/// "Requests and deadlines"): the budget travels relative, because the nodes'
/// clocks are not shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// Names the request; its reply carries the same id.
    pub id: RequestId,
    /// Time left until the requester gives up.
    pub budget: Duration,
}

/// One node-to-node record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRecord {
    /// 24.
    ActorSend(ActorSend),
    /// 36.
    BoundSessionSend(BoundSessionSend),
    /// 38.
    BoundSessionBind(BoundSessionBind),
    /// 42.
    SessionRelocationSeal(SessionRelocationSeal),
    /// 43.
    SessionRelocationSealed(SessionRelocationSealed),
    /// 44.
    SessionRelocationRoute(SessionRelocationRoute),
    /// 51.
    BoundSessionReplaced(BoundSessionReplaced),
}

impl NodeRecord {
    /// The record's command number.
    pub fn command(&self) -> Command {
        match self {
            NodeRecord::ActorSend(_) => Command::ActorSend,
            NodeRecord::BoundSessionSend(_) => Command::BoundSessionSend,
            NodeRecord::BoundSessionBind(_) => Command::BoundSessionBind,
            NodeRecord::SessionRelocationSeal(_) => Command::SessionRelocationSeal,
            NodeRecord::SessionRelocationSealed(_) => Command::SessionRelocationSealed,
            NodeRecord::SessionRelocationRoute(_) => Command::SessionRelocationRoute,
            NodeRecord::BoundSessionReplaced(_) => Command::BoundSessionReplaced,
        }
    }
}
