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
//!   Actor together. Its lane stays, empty: the core sends it nothing until
//!   Reopen (the saved work comes back) or DropInstance (the lane goes).
//! - Where an Actor or Spot is hosted, on which lane and at which instance
//!   slot is the core's registry's (src/core/actor/placement.rs): a
//!   restore answers with the placement, and DropInstance names it.
//! - The state travels in an envelope that names the Actor's type, so the
//!   target builds it with the same factory and restores it before any
//!   message reaches it (restore without dispatch).
//! - Only an Actor of its type's Entry Spot moves alone. A SpotWide Spot
//!   moves as one unit, its phases the core's
//!   (src/core/relocation/spot_move.rs): this module seals and reopens its
//!   lane when told, takes each member's share of it at its capture, and
//!   creates the Spot at the target at its first arrival, so only one
//!   node's Spot lane ever dispatches. The Actors of a PerActor User Spot
//!   do not move (`NotRelocatable`).

use foldhash::HashMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::actors::Instance;
use super::ShardState;
use crate::core::actor::{ActorEvent, ActorLane, InstanceSlot, Placement};
use crate::core::lane::SpotState;
use crate::core::relocation::{Capture, CasAnswer, RelocationEvent, StoreOp};
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, NodeRid, RelocationId, SpotId};
use crate::runtime::store_effects::StoreAnswer;
use crate::store::AbortOutcome;

type Reply = crate::runtime::MoveReply;

/// The waiting callers of `Node::relocate` and `Node::relocate_spot`, and
/// the Spots arrivals created here. The state snapshot is taken at the
/// capture, never earlier: a lifecycle turn (`on_bound` at a full lane) may
/// run between the call and the capture, and the state that moves must
/// include it.
#[derive(Default)]
pub(super) struct Moves {
    waiters: HashMap<RelocationId, Reply>,
    spot_waiters: HashMap<SpotId, Reply>,
    /// Spots an arriving Actor's restore created here, until one of their
    /// Actors opens: a restore that fails or is discarded takes such a Spot
    /// away again once no Actor is in it, so a failed move leaves no empty
    /// Spot at the target.
    arrived_spots: foldhash::HashSet<SpotId>,
}

impl ShardState {
    /// `Node::relocate` on the Actor's shard: checks the Actor can move
    /// (its type gives a snapshot, before anything is sealed) and hands the
    /// move to the core, which starts it, or parks it while the Actor's turn
    /// awaits. The caller hears the outcome when the core reports it
    /// finished.
    pub(super) fn start_relocation(&mut self, id: &ActorId, target: NodeRid, reply: Reply) {
        if let Err(error) = self.relocation_envelope(id, false) {
            reply.send(Err(error));
            return;
        }
        let now = self.now();
        match self.core.relocations(now).relocate(id, target) {
            Ok(relocation) => {
                self.moves.waiters.insert(relocation, reply);
            }
            Err(error) => {
                reply.send(Err(error));
            }
        }
    }

    /// The state envelope of a hosted Actor, or why it cannot move: a
    /// member of a User Spot moves only with its Spot (`with_spot`).
    fn relocation_envelope(&self, id: &ActorId, with_spot: bool) -> Result<Bytes, Error> {
        // (An Actor whose row is being removed does not move either: the
        // core refuses it, `ActorOwner::relocation_fence`.)
        let owner = self.core.actor_owner();
        let Some(placement) = owner.placement(id) else {
            return Err(Reason::StaleLocation.into());
        };
        let spot = match &placement.user_spot {
            None => None,
            Some(spot) if with_spot => {
                let kind = owner.spot(spot).map(|s| s.kind.as_str());
                Some((
                    kind.ok_or(Error::new(Reason::StaleLocation))?,
                    spot.as_str(),
                ))
            }
            Some(_) => return Err(Reason::NotRelocatable.into()),
        };
        let instance = self.host.instances.get(placement.slot.0);
        let state = instance.and_then(|i| i.actor.as_ref()?.snapshot());
        let state = state.ok_or(Error::new(Reason::NotRelocatable))?;
        envelope(&placement.actor_type, spot, &state)
    }

    /// `Node::relocate_spot` on the Spot's home shard: checks that every
    /// Actor of the Spot can move (its type gives a snapshot) before
    /// anything is sealed, then hands the move to the core
    /// (src/core/relocation/spot_move.rs). The caller hears the outcome when
    /// the last Actor committed, or the first failure.
    pub(super) fn start_spot_relocation(&mut self, id: &SpotId, target: NodeRid, reply: Reply) {
        for member in self.core.actor_owner().spot_members(id) {
            if let Err(error) = self.relocation_envelope(&member, true) {
                reply.send(Err(error));
                return;
            }
        }
        let now = self.now();
        match self.core.relocations(now).relocate_spot(id, target) {
            Ok(()) => {
                self.moves.spot_waiters.insert(id.clone(), reply);
            }
            Err(error) => reply.send(Err(error)),
        }
    }

    /// Carries out one relocation event of the core.
    pub(super) fn relocation_event(&mut self, event: RelocationEvent) {
        let now = self.now();
        match event {
            RelocationEvent::Capture { relocation, actor } => {
                let capture = self.capture(relocation, &actor);
                self.core.relocations(now).captured(relocation, capture);
            }
            // The Actor's lane stayed through the capture, empty; the core
            // sends its saved work and the ingress hold next, in order.
            RelocationEvent::Reopen { .. } => {}
            // The target's restored instance (a discard), or the source's
            // captured one (relay-ready was accepted): the core's registry
            // let it go and says where it was.
            RelocationEvent::DropInstance {
                actor, placement, ..
            } => {
                if let Some(placement) = placement {
                    self.drop_moved_placement(placement);
                }
                // Its open requests' outcomes follow it; their routes'
                // bookkeeping here ends with it.
                self.routes.forget_caller(&actor);
            }
            RelocationEvent::Restore {
                relocation,
                actor,
                state,
            } => {
                let outcome = self.restore(&actor, &state);
                let back = self.core.relocations(now).restored(relocation, outcome);
                // Discarded while it was restored: it goes again.
                if let Some(placement) = back {
                    self.drop_moved_placement(placement);
                }
            }
            RelocationEvent::Opened { actor, .. } => self.open(&actor),
            RelocationEvent::Store { relocation, op } => self.store_op(relocation, op),
            RelocationEvent::Unparked { actor, .. } => {
                tracing::debug!(%actor, "a move parked behind an awaiting turn goes on");
            }
            RelocationEvent::Finished {
                relocation,
                outcome,
                ..
            } => {
                if let Some(waiter) = self.moves.waiters.remove(&relocation) {
                    waiter.send(outcome.map(|_| ()));
                }
            }
            RelocationEvent::SpotSealed { lane, .. } => {
                self.host.spot_lanes.set_state(lane, SpotState::MoveSealing);
            }
            RelocationEvent::SpotFinished {
                spot,
                outcome,
                gone,
            } => {
                match gone {
                    Some(gone) => self.drop_spot(gone),
                    None => {
                        let lane = self.core.actor_owner().spot(&spot).and_then(|s| s.lane);
                        if let Some(lane) = lane {
                            self.host.spot_lanes.set_state(lane, SpotState::Open);
                        }
                    }
                }
                if let Some(waiter) = self.moves.spot_waiters.remove(&spot) {
                    waiter.send(outcome);
                }
            }
        }
    }

    /// Takes the Actor's state and queued work off it (its lane goes).
    fn capture(&mut self, relocation: RelocationId, actor: &ActorId) -> Result<Capture, Error> {
        let with_spot = self.core.relocation().moves_with_spot(relocation);
        let state = self.relocation_envelope(actor, with_spot)?;
        let Some(placement) = self.core.actor_owner().placement(actor) else {
            return Err(Reason::StaleLocation.into());
        };
        // Its lane stays, empty, until the move aborts (the saved work
        // comes back) or commits (the lane goes with the instance).
        let turns = match placement.lane {
            ActorLane::Own(lane) => self.host.actor_lanes.take_where(lane, |_| true),
            // Its share of the Spot's (move-sealed) lane.
            ActorLane::Spot(lane) if with_spot => self
                .host
                .spot_lanes
                .take_where(lane, |t| t.actor() == actor),
            ActorLane::Spot(_) => return Err(Reason::NotRelocatable.into()),
        };
        let queued: Vec<ActorEvent> = turns.into_iter().map(|t| t.into_event()).collect();
        Ok(Capture { state, queued })
    }

    /// The target builds the Actor from its type's factory and restores its
    /// state, at a slot and on a lane of its own (or its Spot's); it is not
    /// dispatched until the move commits and the core hosts it there.
    fn restore(&mut self, actor: &ActorId, envelope: &Bytes) -> Result<Option<Placement>, Error> {
        let opened = open_envelope(envelope)?;
        let kind = self.node.actor_types.get(&opened.actor_type);
        let Some(kind) = kind.filter(|_| self.node.hosts_actors) else {
            return Err(Reason::NoActorFactory.into());
        };
        let (factory, entry) = (Arc::clone(&kind.factory), Arc::clone(&kind.spot));
        // A moving Spot's first arrival creates it here (§1: a Spot of a
        // kind registered at startup); the others join it.
        let (spot, user_spot, lane) = match &opened.spot {
            None => (entry, None, None),
            Some((spot_kind, spot_id)) => {
                let id = SpotId::new(spot_id).map_err(|_| Error::new(Reason::MalformedRecord))?;
                if !actor.is_under(&id) {
                    return Err(Reason::NotPlacedWithSpot.into());
                }
                let arrived = self.core.actor_owner().spot(&id).is_none();
                let handle = self.create_spot(spot_kind, &id)?;
                if arrived {
                    self.moves.arrived_spots.insert(id.clone());
                }
                let lane = self.core.actor_owner().spot(&id).and_then(|s| s.lane);
                if lane.is_none() {
                    self.forget_arrived_spot(&id);
                    return Err(Reason::NotRelocatable.into());
                }
                (Arc::clone(&handle.spot), Some(id), lane)
            }
        };
        let mut instance = factory(actor);
        if let Err(error) = instance.restore(opened.state) {
            if let Some(spot) = &user_spot {
                self.forget_arrived_spot(spot);
            }
            return Err(error);
        }
        let lane = match lane {
            Some(lane) => ActorLane::Spot(lane),
            None => {
                let capacity = self.node.settings.actor_queue_max;
                ActorLane::Own(self.host.actor_lanes.add_lane(capacity))
            }
        };
        let instance = Instance {
            actor: Some(instance),
            spot,
        };
        Ok(Some(Placement {
            actor_type: opened.actor_type,
            user_spot,
            lane,
            slot: InstanceSlot(self.host.instances.insert(instance)),
        }))
    }

    /// Removes a Spot an arrival created here once no Actor is in it or on
    /// its way into it (see [`Moves::arrived_spots`]).
    /// A moved Actor's instance the core let go of (discarded at the target,
    /// or handed over at the source) goes, and with it a Spot its arrival
    /// created that holds nothing now.
    fn drop_moved_placement(&mut self, placement: Placement) {
        let spot = placement.user_spot.clone();
        self.drop_placement(placement);
        if let Some(spot) = spot {
            self.forget_arrived_spot(&spot);
        }
    }

    fn forget_arrived_spot(&mut self, id: &SpotId) {
        if !self.moves.arrived_spots.contains(id) {
            return;
        }
        let in_it = |p: &Placement| p.user_spot.as_ref() == Some(id);
        let hosted = self.core.actor_owner().placements().any(|(_, p)| in_it(p));
        if hosted || self.core.relocation().arrivals().any(in_it) {
            return;
        }
        self.moves.arrived_spots.remove(id);
        self.remove_spot(id);
    }

    /// After the target's CAS the core hosts the restored Actor here (its
    /// registry took the placement); a Spot its arrival created stays.
    fn open(&mut self, actor: &ActorRef) {
        let placement = self.core.actor_owner().placement(&actor.id);
        if let Some(spot) = placement.and_then(|p| p.user_spot.clone()) {
            self.moves.arrived_spots.remove(&spot);
        }
    }

    /// A Location Store operation of the relocation, as an effect: a
    /// store worker makes it and the answer comes back to the core by
    /// `cas_done` or `abort_done` (docs/threading.md "Never block a
    /// shard"). Refused at once (no store, a full queue): answered now with
    /// `Unavailable`, which the core handles as any unreachable store.
    fn store_op(&mut self, relocation: RelocationId, op: StoreOp) {
        let claim = self.node.lease.as_ref().map(|lease| {
            lease
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .claim()
        });
        let is_cas = matches!(op, StoreOp::TakeAuthority { .. });
        let asked = self.store_effect(move |store| match op {
            StoreOp::TakeAuthority { actor, expected } => StoreAnswer::Cas {
                relocation,
                answer: match claim {
                    Some(claim) => store
                        .compare_and_set(&actor, expected.into(), relocation, &claim)
                        .map(CasAnswer::from)
                        .map_err(Error::from),
                    None => Err(Reason::NoActorFactory.into()),
                },
            },
            StoreOp::AbortRelocation { actor, expected } => StoreAnswer::Abort {
                relocation,
                answer: store
                    .abort_relocation(&actor, expected.into(), relocation)
                    .map(|outcome: AbortOutcome| outcome.into())
                    .map_err(Error::from),
            },
        });
        if let Err(refused) = asked {
            let now = self.now();
            if is_cas {
                self.core
                    .relocations(now)
                    .cas_done(relocation, Err(refused));
            } else {
                self.core
                    .relocations(now)
                    .abort_done(relocation, Err(refused));
            }
        }
    }
}

/// The state envelope: the type's name, the Spot it moves with (its kind and
/// id; both empty for its type's Entry Spot), each as a u16 length and
/// UTF-8, then the Actor's own snapshot. The whole is bounded by the
/// handoff's state limit, which the coordinator checks before it sends 60.
fn envelope(actor_type: &str, spot: Option<(&str, &str)>, state: &Bytes) -> Result<Bytes, Error> {
    let (kind, id) = spot.unwrap_or(("", ""));
    let mut out =
        BytesMut::with_capacity(6 + actor_type.len() + kind.len() + id.len() + state.len());
    for text in [actor_type, kind, id] {
        let len = u16::try_from(text.len()).map_err(|_| Error::new(Reason::HandoffTooLarge))?;
        out.put_u16(len);
        out.put_slice(text.as_bytes());
    }
    out.put_slice(state);
    Ok(out.freeze())
}

/// What an envelope from a peer holds.
#[derive(Debug, PartialEq, Eq)]
struct Opened {
    actor_type: String,
    /// The Spot's kind and id, for an Actor of a moving Spot.
    spot: Option<(String, String)>,
    state: Bytes,
}

/// Splits an envelope from a peer; a malformed one is refused, typed.
fn open_envelope(envelope: &Bytes) -> Result<Opened, Error> {
    let malformed = || Error::new(Reason::MalformedRecord);
    let mut at = 0;
    let mut text = || -> Result<String, Error> {
        let len_bytes: [u8; 2] = envelope
            .get(at..at + 2)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(malformed)?;
        let end = at + 2 + usize::from(u16::from_be_bytes(len_bytes));
        let bytes = envelope.get(at + 2..end).ok_or_else(malformed)?;
        at = end;
        Ok(std::str::from_utf8(bytes)
            .map_err(|_| malformed())?
            .to_owned())
    };
    let actor_type = text()?;
    let kind = text()?;
    let id = text()?;
    let spot = (!kind.is_empty()).then_some((kind, id));
    Ok(Opened {
        actor_type,
        spot,
        state: envelope.slice(at..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_round_trips_and_a_short_one_is_malformed() {
        let state = Bytes::from_static(b"hp=7");
        let sealed = envelope("player", None, &state).unwrap();
        let opened = Opened {
            actor_type: "player".into(),
            spot: None,
            state: state.clone(),
        };
        assert_eq!(open_envelope(&sealed).unwrap(), opened);
        let sealed = envelope("player", Some(("room", "room-1")), &state).unwrap();
        let opened = Opened {
            spot: Some(("room".into(), "room-1".into())),
            ..opened
        };
        assert_eq!(open_envelope(&sealed).unwrap(), opened);
        for bad in [
            &b""[..],
            &b"\x00"[..],
            &b"\x00\x09abc"[..],
            &b"\x00\x01\xff\x00\x00\x00\x00"[..],
            &b"\x00\x01p\x00\x00"[..],
        ] {
            let error = open_envelope(&Bytes::copy_from_slice(bad)).unwrap_err();
            assert_eq!(error.reason(), Reason::MalformedRecord);
        }
    }
}
