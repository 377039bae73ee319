//! Command 70, actorCall: one Actor to another, by ActorId, across the mesh
//! (docs/actors.md "Messages between Actors"). The spec's §5 table has no
//! command for it (§4 only says a direct send or request targets the Ready
//! Actor a global ActorId points to), so it is the project's own record,
//! numbered past the relocation handoff (60–65) so that no §5 number is
//! reused.
//!
//! Variants: 1 a message (one-way, or a request with a header, answered by
//! a 24 reply whose RequestId carries [`RequestId::CALL_BIT`]); 2 the outcome
//! of a request, delivered to the calling Actor as a later message of its
//! own (never to a turn that waits for it), addressed to it like any other
//! call so that it follows the caller when the caller moves.

use bytes::{Bytes, BytesMut};

use super::{Body, Command, RequestHeader};
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, CallId, ObjectGeneration, OwnerLeaseGeneration, PacketKey,
    RequestId,
};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

/// Command 70.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorCall {
    /// `Some` for a request: its id (with [`RequestId::CALL_BIT`]) and
    /// deadline; `None` for a one-way message or an outcome.
    pub request: Option<RequestHeader>,
    /// The Actor it is for.
    pub actor: ActorId,
    /// The incarnation the sender resolved.
    pub object_generation: ObjectGeneration,
    /// The authority owner generation of the route the sender resolved.
    pub authority: AuthorityOwnerGeneration,
    /// The owner lease generation of that route (kept, §5).
    pub lease: OwnerLeaseGeneration,
    /// The Actor that sent it (for an outcome, the Actor it is for);
    /// `None` for a message from node code outside any Actor.
    pub from: Option<ActorId>,
    /// What is delivered.
    pub body: CallBody,
}

/// What a 70 delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallBody {
    /// A message for the Actor's handler.
    Message {
        /// Which handler key.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
    },
    /// The outcome of a request the Actor made.
    Outcome {
        /// The request, as the caller numbered it.
        call: CallId,
        /// The reply, or the typed error that ended it.
        outcome: Result<Bytes, Error>,
    },
}

const MESSAGE: u8 = 1;
const OUTCOME: u8 = 2;

impl Body for ActorCall {
    const COMMAND: Command = Command::ActorCall;

    fn variant(&self) -> u8 {
        match self.body {
            CallBody::Message { .. } => MESSAGE,
            CallBody::Outcome { .. } => OUTCOME,
        }
    }

    fn put_body(&self, dst: &mut BytesMut) {
        self.request.put(dst);
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.authority.put(dst);
        self.lease.put(dst);
        self.from.put(dst);
        match &self.body {
            CallBody::Message { key, payload } => {
                key.put(dst);
                payload.put(dst);
            }
            CallBody::Outcome { call, outcome } => {
                call.put(dst);
                outcome.put(dst);
            }
        }
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        if variant != MESSAGE && variant != OUTCOME {
            return Err(Self::unknown(variant));
        }
        let request: Option<RequestHeader> = r.get()?;
        let actor = r.get()?;
        let object_generation = r.get()?;
        let authority = r.get()?;
        let lease = r.get()?;
        let from = r.get()?;
        let body = if variant == MESSAGE {
            CallBody::Message {
                key: r.get()?,
                payload: r.get()?,
            }
        } else {
            CallBody::Outcome {
                call: r.get()?,
                outcome: r.get()?,
            }
        };
        Ok(Self {
            request,
            actor,
            object_generation,
            authority,
            lease,
            from,
            body,
        })
    }
}

impl ActorCall {
    /// The id of a request call.
    pub fn request_id(&self) -> Option<RequestId> {
        self.request.map(|h| h.id)
    }
}
