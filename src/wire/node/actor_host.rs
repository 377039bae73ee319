//! Command 71, actorHost: BindOrGet asked of the node that owns an Actor's
//! row (docs/store.md "A login on another node"). The spec's §5 table has
//! no command for it; like 70 it is the project's own record, numbered past
//! the relocation handoff so that no §5 number is reused.
//!
//! Why it exists: §1 step 2 hands the application an ActorRef that is
//! Ready, and §8.1 lets only the row's owner judge its own row while that
//! owner's lease lives. A node whose BindOrGet finds a live row naming
//! another node therefore asks that node, which runs the same BindOrGet
//! (`ShardCore::host_step`, `ShardCore::host_found`) on its own shard and
//! answers the ActorRef it serves, hands to its move, or — after an
//! incarnation it lost (L6) — creates anew.
//!
//! Variants: 1 the ask (a request: header, Actor, Actor type); 2 its
//! answer (the ActorRef, or the typed error that ended it), under the
//! ask's RequestId, whose top bits name the asking shard.

use bytes::BytesMut;

use super::{Body, Command, RequestHeader};
use crate::error::Error;
use crate::ids::{ActorId, ActorLocation, ActorRef, ActorTypeName, RequestId};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

/// Command 71.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActorHost {
    /// Variant 1: run BindOrGet for this Actor here.
    Ask(HostAsk),
    /// Variant 2: the ask's outcome.
    Answer(HostAnswer),
}

/// Variant 1 of 71.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAsk {
    /// The ask's id (its top bits name the asking shard) and deadline.
    pub request: RequestHeader,
    /// The Actor.
    pub actor: ActorId,
    /// The type a new incarnation would be created with.
    pub actor_type: ActorTypeName,
}

/// Variant 2 of 71.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAnswer {
    /// The ask it answers.
    pub request: RequestId,
    /// The Ready ActorRef, or the typed error.
    pub outcome: Result<ActorRef, Error>,
}

const ASK: u8 = 1;
const ANSWER: u8 = 2;

impl Field for ActorRef {
    fn put(&self, dst: &mut BytesMut) {
        self.id.put(dst);
        self.generation.put(dst);
        let location = &self.location;
        location.mesh.put(dst);
        location.owner.put(dst);
        location.node_generation.put(dst);
        location.authority.put(dst);
        location.lease.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            id: r.get()?,
            generation: r.get()?,
            location: ActorLocation {
                mesh: r.get()?,
                owner: r.get()?,
                node_generation: r.get()?,
                authority: r.get()?,
                lease: r.get()?,
            },
        })
    }
}

impl Body for ActorHost {
    const COMMAND: Command = Command::ActorHost;

    fn variant(&self) -> u8 {
        match self {
            ActorHost::Ask(_) => ASK,
            ActorHost::Answer(_) => ANSWER,
        }
    }

    fn put_body(&self, dst: &mut BytesMut) {
        match self {
            ActorHost::Ask(ask) => {
                ask.request.put(dst);
                ask.actor.put(dst);
                ask.actor_type.put(dst);
            }
            ActorHost::Answer(answer) => {
                answer.request.put(dst);
                answer.outcome.put(dst);
            }
        }
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        match variant {
            ASK => Ok(ActorHost::Ask(HostAsk {
                request: r.get()?,
                actor: r.get()?,
                actor_type: r.get()?,
            })),
            ANSWER => Ok(ActorHost::Answer(HostAnswer {
                request: r.get()?,
                outcome: r.get()?,
            })),
            other => Err(Self::unknown(other)),
        }
    }
}
