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
//! - Only an Actor of its type's Entry Spot moves alone. A SpotWide Spot
//!   moves as one unit ([`ShardState::start_spot_relocation`]): its lane is
//!   move-sealed at the source for the whole move, its Actors move one after
//!   the other by this same flow, and the Spot is created at the target by
//!   its first arrival, so only one node's Spot lane ever dispatches. The
//!   Actors of a PerActor User Spot do not move (`NotRelocatable`).

use foldhash::HashMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use super::actors::{ActorLane, HostedActor};
use super::ShardState;
use crate::core::actor::ActorEvent;
use crate::core::lane::{LaneId, SpotState};
use crate::core::relocation::{Capture, CasAnswer, RelocationEvent, StoreOp};
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, NodeRid, ObjectGeneration, RelocationId, SpotId};
use crate::runtime::app::spot::ExecutionMode;
use crate::runtime::store_effects::StoreAnswer;
use crate::store::{AbortOutcome, CasOutcome, OwnerClaim};

type Reply = crate::runtime::MoveReply;

/// A SpotWide Spot on its way to `target`, one Actor at a time.
struct SpotMove {
    target: NodeRid,
    lane: LaneId,
    remaining: std::collections::VecDeque<ActorId>,
    reply: Reply,
}

/// The waiting callers of `Node::relocate` and the Spots on their way.
/// The state snapshot is taken at the capture, never earlier: a lifecycle
/// turn (`on_bound` at a full lane) may run between the call and the
/// capture, and the state that moves must include it.
#[derive(Default)]
pub(super) struct Moves {
    waiters: HashMap<RelocationId, Reply>,
    /// Spots moving away from this shard, and which Spot each of their
    /// Actors' relocations belongs to.
    spots: HashMap<SpotId, SpotMove>,
    spot_of: HashMap<RelocationId, SpotId>,
    /// Spots an arriving Actor's restore created here, until one of their
    /// Actors opens: a restore that fails or is discarded takes such a Spot
    /// away again once no Actor is in it, so a failed move leaves no empty
    /// Spot at the target.
    arrived_spots: foldhash::HashSet<SpotId>,
}

impl Moves {
    /// Whether the Spot is moving away (no Actor may join it meanwhile).
    pub(super) fn spot_moving(&self, id: &SpotId) -> bool {
        self.spots.contains_key(id)
    }
}

impl ShardState {
    /// `Node::relocate` on the Actor's shard: checks the Actor can move
    /// (its type gives a snapshot, before anything is sealed) and hands the
    /// move to the core's coordinator. The caller hears the outcome when the
    /// core reports it finished.
    pub(super) fn start_relocation(&mut self, id: &ActorId, target: NodeRid, reply: Reply) {
        if let Err(error) = self.relocation_envelope(id, false) {
            reply.send(Err(error));
            return;
        }
        // An awaiting turn is never captured: the move waits for it to end
        // before anything is sealed (awaits.rs).
        if self.turn_awaits(id) {
            return self.park_move(id.clone(), target, reply);
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
        // An Actor whose row is being removed is ending: nothing to move.
        let hosted = self
            .host
            .actors
            .get(id)
            .filter(|_| !self.host.destroying.contains(id));
        let Some(hosted) = hosted else {
            return Err(Reason::StaleLocation.into());
        };
        let spot = match &hosted.user_spot {
            None => None,
            Some(spot) if with_spot => {
                let kind = self.host.spots.get(spot).map(|s| s.kind.as_str());
                Some((
                    kind.ok_or(Error::new(Reason::StaleLocation))?,
                    spot.as_str(),
                ))
            }
            Some(_) => return Err(Reason::NotRelocatable.into()),
        };
        if matches!(hosted.lane, ActorLane::Captured(_)) {
            return Err(Reason::RelocationSealed.into());
        }
        let state = hosted.instance.as_ref().and_then(|i| i.snapshot());
        let state = state.ok_or(Error::new(Reason::NotRelocatable))?;
        envelope(&hosted.actor_type, spot, &state)
    }

    /// `Node::relocate_spot` on the Spot's home shard: a SpotWide Spot
    /// moves as one unit. Its lane is move-sealed (its Actors' work is held,
    /// in order) and its Actors move one after the other; each capture
    /// takes that Actor's work off the shared lane. The caller hears the
    /// outcome when the last Actor committed, or the first failure.
    pub(super) fn start_spot_relocation(&mut self, id: &SpotId, target: NodeRid, reply: Reply) {
        let Some(spot) = self.host.spots.get(id) else {
            reply.send(Err(Reason::StaleLocation.into()));
            return;
        };
        let (Some(lane), ExecutionMode::SpotWide) = (spot.lane, spot.handle.mode) else {
            reply.send(Err(Reason::NotRelocatable.into()));
            return;
        };
        if self.moves.spots.contains_key(id) {
            reply.send(Err(Reason::RelocationSealed.into()));
            return;
        }
        let has_members = self
            .host
            .actors
            .values()
            .any(|a| a.user_spot.as_ref() == Some(id));
        if !has_members {
            // Nothing would create it at the target: it stays here.
            reply.send(Err(Reason::NotRelocatable.into()));
            return;
        }
        let mut members: Vec<ActorId> = self
            .host
            .actors
            .iter()
            .filter(|(_, a)| a.user_spot.as_ref() == Some(id))
            .map(|(actor, _)| actor.clone())
            .collect();
        members.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        self.host.spot_lanes.set_state(lane, SpotState::MoveSealing);
        let spot_move = SpotMove {
            target,
            lane,
            remaining: members.into(),
            reply,
        };
        self.moves.spots.insert(id.clone(), spot_move);
        self.next_spot_member(id);
    }

    /// Starts the next Actor of a moving Spot, or ends the move.
    pub(super) fn next_spot_member(&mut self, spot: &SpotId) {
        loop {
            let Some(spot_move) = self.moves.spots.get_mut(spot) else {
                return;
            };
            // The next member's turn awaits: the Spot's move waits for it.
            if let Some(next) = spot_move.remaining.front() {
                if self.core.actor_owner().awaiting(next).is_some() {
                    let next = next.clone();
                    return self.park_spot_member(spot.clone(), next);
                }
            }
            let Some(spot_move) = self.moves.spots.get_mut(spot) else {
                return;
            };
            let Some(actor) = spot_move.remaining.pop_front() else {
                return self.finish_spot_move(spot, Ok(()));
            };
            let target = spot_move.target;
            match self.relocation_envelope(&actor, true) {
                Ok(_) => {}
                // Destroyed meanwhile: nothing of it is left to move.
                Err(error) if error.reason() == Reason::StaleLocation => continue,
                Err(error) => return self.finish_spot_move(spot, Err(error)),
            }
            let now = self.now();
            match self.core.relocations(now).relocate(&actor, target) {
                Ok(relocation) => {
                    self.moves.spot_of.insert(relocation, spot.clone());
                }
                Err(error) => self.finish_spot_move(spot, Err(error)),
            }
            return;
        }
    }

    /// Ends a Spot move. Committed: the Spot leaves this node (its lane is
    /// empty: every Actor took its work along). Failed part-way: the Actors
    /// still here keep the Spot and its lane reopens; those already moved
    /// stay at the target, in the Spot there — a second `relocate_spot`
    /// moves the rest (docs/relocation.md).
    pub(super) fn finish_spot_move(&mut self, spot: &SpotId, outcome: Result<(), Error>) {
        let Some(spot_move) = self.moves.spots.remove(spot) else {
            return;
        };
        let left_behind = self
            .host
            .actors
            .values()
            .any(|a| a.user_spot.as_ref() == Some(spot));
        if outcome.is_ok() && !left_behind {
            self.host.spots.remove(spot);
            for turn in self.host.spot_lanes.remove_lane(spot_move.lane) {
                self.refuse_actor_work(turn.into_event(), Reason::StaleLocation);
            }
        } else {
            self.host
                .spot_lanes
                .set_state(spot_move.lane, SpotState::Open);
        }
        spot_move.reply.send(outcome);
    }

    /// Carries out one relocation event of the core.
    pub(super) fn relocation_event(&mut self, event: RelocationEvent) {
        let now = self.now();
        match event {
            RelocationEvent::Capture { relocation, actor } => {
                let capture = self.capture(relocation, &actor);
                self.core.relocations(now).captured(relocation, capture);
            }
            RelocationEvent::Reopen { actor, .. } => {
                let capacity = self.node.settings.actor_queue_max;
                if let Some(hosted) = self.host.actors.get_mut(&actor) {
                    match hosted.lane {
                        ActorLane::Captured(Some(lane)) => hosted.lane = ActorLane::Spot(lane),
                        ActorLane::Captured(None) => {
                            hosted.lane = ActorLane::Own(self.host.actor_lanes.add_lane(capacity))
                        }
                        ActorLane::Own(_) | ActorLane::Spot(_) => {}
                    }
                }
            }
            RelocationEvent::DropInstance { actor, .. } => {
                // The target's restored instance (a discard), or the
                // source's captured one (relay-ready was accepted).
                if let Some(discarded) = self.host.restored.remove(&actor) {
                    if let Some(spot) = discarded.user_spot {
                        self.forget_arrived_spot(&spot);
                    }
                } else {
                    let captured = self
                        .host
                        .actors
                        .get(&actor)
                        .is_some_and(|h| matches!(h.lane, ActorLane::Captured(_)));
                    if captured {
                        self.host.actors.remove(&actor);
                        // Its open requests' outcomes follow it; their
                        // routes' bookkeeping here ends with it.
                        self.routes.forget_caller(&actor);
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
                if let Some(waiter) = self.moves.waiters.remove(&relocation) {
                    waiter.send(outcome.map(|_| ()));
                } else if let Some(spot) = self.moves.spot_of.remove(&relocation) {
                    match outcome {
                        Ok(_) => self.next_spot_member(&spot),
                        Err(error) => self.finish_spot_move(&spot, Err(error)),
                    }
                }
            }
        }
    }

    /// Takes the Actor's state and queued work off it (its lane goes).
    fn capture(&mut self, relocation: RelocationId, actor: &ActorId) -> Result<Capture, Error> {
        let with_spot = self.moves.spot_of.contains_key(&relocation);
        let state = self.relocation_envelope(actor, with_spot)?;
        let Some(hosted) = self.host.actors.get_mut(actor) else {
            return Err(Reason::StaleLocation.into());
        };
        let turns = match hosted.lane {
            ActorLane::Own(lane) => {
                hosted.lane = ActorLane::Captured(None);
                self.host.actor_lanes.remove_lane(lane).into()
            }
            // Its share of the Spot's (move-sealed) lane.
            ActorLane::Spot(lane) if with_spot => {
                hosted.lane = ActorLane::Captured(Some(lane));
                self.host
                    .spot_lanes
                    .take_where(lane, |t| t.actor() == actor)
            }
            ActorLane::Spot(_) | ActorLane::Captured(_) => {
                return Err(Reason::NotRelocatable.into())
            }
        };
        let queued: Vec<ActorEvent> = turns.into_iter().map(|t| t.into_event()).collect();
        Ok(Capture { state, queued })
    }

    /// The target builds the Actor from its type's factory and restores its
    /// state; it is not dispatched until the move commits ([`Self::open`]).
    fn restore(&mut self, actor: &ActorId, envelope: &Bytes) -> Result<(), Error> {
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
                let arrived = !self.host.spots.contains_key(&id);
                let handle = self.create_spot(spot_kind, &id)?;
                if arrived {
                    self.moves.arrived_spots.insert(id.clone());
                }
                let lane = self.host.spots.get(&id).and_then(|s| s.lane);
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
        let hosted = HostedActor {
            instance: Some(instance),
            actor_type: opened.actor_type,
            // The incarnation is the one the move keeps (§1); it is set
            // from the ActorRef when the move commits.
            generation: ObjectGeneration(0),
            lane: ActorLane::Captured(lane),
            spot,
            user_spot,
        };
        self.host.restored.insert(actor.clone(), hosted);
        Ok(())
    }

    /// Removes a Spot an arrival created here once no Actor is in it or on
    /// its way into it (see [`Moves::arrived_spots`]).
    fn forget_arrived_spot(&mut self, id: &SpotId) {
        if !self.moves.arrived_spots.contains(id) {
            return;
        }
        let in_it = |a: &HostedActor| a.user_spot.as_ref() == Some(id);
        if self.host.actors.values().any(in_it) || self.host.restored.values().any(in_it) {
            return;
        }
        self.moves.arrived_spots.remove(id);
        if let Some(spot) = self.host.spots.remove(id) {
            if let Some(lane) = spot.lane {
                for turn in self.host.spot_lanes.remove_lane(lane) {
                    self.refuse_actor_work(turn.into_event(), Reason::StaleLocation);
                }
            }
        }
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
        if let Some(spot) = &hosted.user_spot {
            self.moves.arrived_spots.remove(spot);
        }
        hosted.lane = match hosted.lane {
            ActorLane::Captured(Some(lane)) => ActorLane::Spot(lane),
            _ => ActorLane::Own(self.host.actor_lanes.add_lane(capacity)),
        };
        self.host.actors.insert(actor.id.clone(), hosted);
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
                        .map(|outcome| cas_answer(outcome, &claim))
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

/// The core's view of a CAS outcome, for the target that made it under
/// `claim`. A CAS is made again when an earlier one's outcome was unknown
/// (docs/relocation.md "An unknown CAS outcome"); if that earlier one was
/// applied and only its answer lost, the row now names this very lifecycle
/// under this lease, past the version expected, and the new CAS finds a
/// conflict. No other operation can have put it there: the row stayed live
/// at the source until a CAS moved it, a create makes no row while one is
/// live, and this lifecycle hosts no instance of the Actor to move on. So
/// that conflict is this relocation's own swap, and answered as one.
fn cas_answer(outcome: CasOutcome, claim: &OwnerClaim) -> CasAnswer {
    match outcome {
        CasOutcome::Conflict { current }
            if current.location.owner == claim.owner
                && current.location.node_generation == claim.node_generation
                && current.location.lease == claim.lease =>
        {
            CasAnswer::Swapped {
                authority: current.location.authority,
            }
        }
        outcome => outcome.into(),
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
