//! The runtime's part in live Actor relocation (§8, §8.1; docs/relocation.md
//! "The runtime's part"): it starts a move the application asked for, and
//! carries out the core's [`RelocationEvent`]s — capture, restore, reopen,
//! drop, the Location Store's CAS and durable abort — feeding each result
//! back. It decides nothing the core decides: when to seal, abort, cut over
//! or commit is the core's (the source's coordinator, the target's handoff).
//!
//! Rules this module keeps:
//! - Capture happens between two turns of the Actor (turns run to their end
//!   on the shard loop, so none is in progress when the event is carried
//!   out): the state snapshot and every queued turn, in order, leave the
//!   Actor together, and its lane is gone until Reopen or DropInstance.
//! - The state travels in an envelope that names the Actor's type, so the
//!   target builds it with the same factory and restores it before any
//!   message reaches it (restore without dispatch).
//! - Only an Actor of its type's Entry Spot moves alone; a User Spot's
//!   Actors stay with their Spot, which is local to its node (`NotRelocatable`).

use std::collections::HashMap;
use std::sync::{mpsc, Arc};

use bytes::{BufMut, Bytes, BytesMut};

use super::actors::{ActorLane, HostedActor};
use super::ShardState;
use crate::core::actor::ActorEvent;
use crate::core::relocation::{Capture, RelocationEvent, StoreOp};
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, NodeRid, ObjectGeneration, RelocationId};
use crate::store::{AbortOutcome, CasOutcome};

/// The waiting callers of `Node::relocate` and the snapshots taken when
/// their moves started.
#[derive(Default)]
pub(super) struct Moves {
    waiters: HashMap<RelocationId, mpsc::Sender<Result<(), Error>>>,
    /// The envelope taken when the move was accepted; the capture that
    /// follows in the same loop turn uses it (no turn runs in between).
    snapshots: HashMap<RelocationId, Bytes>,
}

impl ShardState {
    /// `Node::relocate` on the Actor's shard: checks the Actor can move,
    /// takes its snapshot and hands the move to the core's coordinator.
    /// The caller hears the outcome when the core reports it finished.
    pub(super) fn start_relocation(
        &mut self,
        id: &ActorId,
        target: NodeRid,
        reply: mpsc::Sender<Result<(), Error>>,
    ) {
        let envelope = match self.relocation_envelope(id) {
            Ok(envelope) => envelope,
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        let now = self.now();
        match self.core.relocations(now).relocate(id, target) {
            Ok(relocation) => {
                self.moves.waiters.insert(relocation, reply);
                self.moves.snapshots.insert(relocation, envelope);
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    /// The state envelope of a hosted Actor, or why it cannot move.
    fn relocation_envelope(&self, id: &ActorId) -> Result<Bytes, Error> {
        let Some(hosted) = self.host.actors.get(id) else {
            return Err(Reason::StaleLocation.into());
        };
        if hosted.user_spot.is_some() {
            return Err(Reason::NotRelocatable.into());
        }
        if hosted.lane == ActorLane::Captured {
            return Err(Reason::RelocationSealed.into());
        }
        let state = hosted.instance.as_ref().and_then(|i| i.snapshot());
        let state = state.ok_or(Error::new(Reason::NotRelocatable))?;
        envelope(&hosted.actor_type, &state)
    }

    /// Carries out one relocation event of the core.
    pub(super) fn relocation_event(&mut self, event: RelocationEvent) {
        let now = self.now();
        match event {
            RelocationEvent::Capture { relocation, actor } => {
                let capture = self.capture(relocation, &actor);
                self.core.relocations(now).captured(relocation, capture);
            }
            RelocationEvent::Reopen { relocation, actor } => {
                self.moves.snapshots.remove(&relocation);
                let capacity = self.node.settings.actor_queue_max;
                if let Some(hosted) = self.host.actors.get_mut(&actor) {
                    if hosted.lane == ActorLane::Captured {
                        hosted.lane = ActorLane::Own(self.host.actor_lanes.add_lane(capacity));
                    }
                }
            }
            RelocationEvent::DropInstance { relocation, actor } => {
                self.moves.snapshots.remove(&relocation);
                // The target's restored instance (a discard), or the
                // source's captured one (relay-ready was accepted).
                if self.host.restored.remove(&actor).is_none() {
                    let captured = self
                        .host
                        .actors
                        .get(&actor)
                        .is_some_and(|h| h.lane == ActorLane::Captured);
                    if captured {
                        self.host.actors.remove(&actor);
                    }
                }
            }
            RelocationEvent::Restore {
                relocation,
                actor,
                state,
            } => {
                let outcome = self.restore(&actor, &state);
                self.core.relocations(now).restored(relocation, outcome);
            }
            RelocationEvent::Opened { actor, .. } => self.open(&actor),
            RelocationEvent::Store { relocation, op } => self.store_op(relocation, op),
            RelocationEvent::Finished {
                relocation,
                outcome,
                ..
            } => {
                self.moves.snapshots.remove(&relocation);
                if let Some(waiter) = self.moves.waiters.remove(&relocation) {
                    let _ = waiter.send(outcome.map(|_| ()));
                }
            }
        }
    }

    /// Takes the Actor's state and queued work off it (its lane goes).
    fn capture(&mut self, relocation: RelocationId, actor: &ActorId) -> Result<Capture, Error> {
        let snapshot = self.moves.snapshots.remove(&relocation);
        let state = match snapshot {
            Some(state) => state,
            None => self.relocation_envelope(actor)?,
        };
        let Some(hosted) = self.host.actors.get_mut(actor) else {
            return Err(Reason::StaleLocation.into());
        };
        let ActorLane::Own(lane) = hosted.lane else {
            return Err(Reason::NotRelocatable.into());
        };
        hosted.lane = ActorLane::Captured;
        let queued: Vec<ActorEvent> = self
            .host
            .actor_lanes
            .remove_lane(lane)
            .into_iter()
            .map(|turn| turn.into_event())
            .collect();
        Ok(Capture { state, queued })
    }

    /// The target builds the Actor from its type's factory and restores its
    /// state; it is not dispatched until the move commits ([`Self::open`]).
    fn restore(&mut self, actor: &ActorId, envelope: &Bytes) -> Result<(), Error> {
        let (actor_type, state) = open_envelope(envelope)?;
        let kind = self.node.actor_types.get(&actor_type);
        let Some(kind) = kind.filter(|_| self.node.hosts_actors) else {
            return Err(Reason::NoActorFactory.into());
        };
        let mut instance = (kind.factory)(actor);
        instance.restore(state)?;
        let hosted = HostedActor {
            instance: Some(instance),
            actor_type,
            // The incarnation is the one the move keeps (§1); it is set
            // from the ActorRef when the move commits.
            generation: ObjectGeneration(0),
            lane: ActorLane::Captured,
            spot: Arc::clone(&kind.spot),
            user_spot: None,
        };
        self.host.restored.insert(actor.clone(), hosted);
        Ok(())
    }

    /// After the target's CAS: the restored Actor is hosted here, on a lane
    /// of its own; the temporary queue's deliveries follow.
    fn open(&mut self, actor: &ActorRef) {
        let Some(mut hosted) = self.host.restored.remove(&actor.id) else {
            tracing::error!(actor = ?actor.id, "a committed relocation with no restored instance");
            return;
        };
        let capacity = self.node.settings.actor_queue_max;
        hosted.generation = actor.generation;
        hosted.lane = ActorLane::Own(self.host.actor_lanes.add_lane(capacity));
        self.host.actors.insert(actor.id.clone(), hosted);
    }

    /// A Location Store operation of the relocation. Like the other rare
    /// control operations it runs on the shard thread (docs/store.md).
    fn store_op(&mut self, relocation: RelocationId, op: StoreOp) {
        let now = self.now();
        let Some(store) = self.node.store.clone() else {
            let unavailable = Error::new(Reason::StoreUnavailable);
            match op {
                StoreOp::TakeAuthority { .. } => self
                    .core
                    .relocations(now)
                    .cas_done(relocation, Err(unavailable)),
                StoreOp::AbortRelocation { .. } => self
                    .core
                    .relocations(now)
                    .abort_done(relocation, Err(unavailable)),
            }
            return;
        };
        match op {
            StoreOp::TakeAuthority { actor, expected } => {
                let claim = self.node.lease.as_ref().map(|lease| {
                    lease
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .claim()
                });
                let answer = match claim {
                    Some(claim) => store
                        .compare_and_set(&actor, expected.into(), relocation, &claim)
                        .map(|outcome: CasOutcome| outcome.into())
                        .map_err(Error::from),
                    None => Err(Reason::NoActorFactory.into()),
                };
                self.core.relocations(now).cas_done(relocation, answer);
            }
            StoreOp::AbortRelocation { actor, expected } => {
                let answer = store
                    .abort_relocation(&actor, expected.into(), relocation)
                    .map(|outcome: AbortOutcome| outcome.into())
                    .map_err(Error::from);
                self.core.relocations(now).abort_done(relocation, answer);
            }
        }
    }
}

/// The state envelope: the type's name (u16 length, then UTF-8) and the
/// Actor's own snapshot. The whole is bounded by the handoff's state limit,
/// which the coordinator checks before it sends the 60.
fn envelope(actor_type: &str, state: &Bytes) -> Result<Bytes, Error> {
    let len = u16::try_from(actor_type.len()).map_err(|_| Error::new(Reason::HandoffTooLarge))?;
    let mut out = BytesMut::with_capacity(2 + actor_type.len() + state.len());
    out.put_u16(len);
    out.put_slice(actor_type.as_bytes());
    out.put_slice(state);
    Ok(out.freeze())
}

/// Splits an envelope from a peer; a malformed one is refused, typed.
fn open_envelope(envelope: &Bytes) -> Result<(String, Bytes), Error> {
    let malformed = || Error::new(Reason::MalformedRecord);
    let len_bytes: [u8; 2] = envelope
        .get(..2)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(malformed)?;
    let end = 2 + usize::from(u16::from_be_bytes(len_bytes));
    let name = envelope.get(2..end).ok_or_else(malformed)?;
    let name = std::str::from_utf8(name).map_err(|_| malformed())?;
    Ok((name.to_owned(), envelope.slice(end..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_round_trips_and_a_short_one_is_malformed() {
        let state = Bytes::from_static(b"hp=7");
        let sealed = envelope("player", &state).unwrap();
        assert_eq!(open_envelope(&sealed).unwrap(), ("player".into(), state));
        for bad in [
            &b""[..],
            &b"\x00"[..],
            &b"\x00\x09abc"[..],
            &b"\x00\x01\xff"[..],
        ] {
            let error = open_envelope(&Bytes::copy_from_slice(bad)).unwrap_err();
            assert_eq!(error.reason(), Reason::MalformedRecord);
        }
    }
}
