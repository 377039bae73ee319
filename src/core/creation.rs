//! The creation and lost-incarnation policy (§1, §4, §8.1 L6): what a
//! BindOrGet does when the Location Store's live row for an Actor names
//! this very node. Decided here, once, for the runtime's shards and the
//! simulator alike (issue 19 item 2).
//!
//! An incarnation is never hosted anew here under its old ObjectGeneration:
//! that would be a second, blank instance beside the real one (§1, §4).
//! - The Actor is hosted here: that is it.
//! - It is in motion: relocating away past relay-ready (the target's CAS
//!   has not swapped the row yet), or arriving here with the store's answer
//!   to the target's CAS still to come — including a CAS applied whose
//!   answer was lost, which is how a row can name this node before it hosts
//!   the Actor. The request goes to the row's ActorRef: a bind reaches the
//!   coordinator, which follows it to the target once committed, or the
//!   target, which refuses it `RelocationSealed` until then (X5), and the
//!   client retries. Nothing is created, so the player keeps the state its
//!   move carries.
//! - Otherwise the incarnation was lost after relay-ready (L6): the row is
//!   removed at its version and a new incarnation created, which old
//!   ActorRefs and bindings never resolve to.
//!
//! The rest of BindOrGet's decisions are here too, around the store's
//! answers ([`ShardCore::host_step`], [`ShardCore::host_found`]); the
//! shard asks the store (an effect), builds the instance and answers the
//! waiter:
//! - into a SpotWide Spot only an Actor named under it (`<spot>/<name>`,
//!   placed with the Spot's lane), and none while the Spot is moving
//!   (`RelocationSealed`: it would be left behind);
//! - an existing Actor belongs to the Spot asked for, or it is
//!   `ActorInOtherSpot` — and so is one whose live row names another node
//!   (§1: a Spot's Actors live with it);
//! - outside a Spot, a live row naming another node is that node's to
//!   judge (§8.1): BindOrGet asks it (`AskOwner`, src/core/host_ask.rs),
//!   and the asked node decides as here but never asks on (`for_peer`);
//! - a look-up that finds no row is `NoActorFactory` (this node may not
//!   create it); a create that made the row hosts the new incarnation;
//! - while replacing a lost incarnation, a row that changed meanwhile is
//!   its owner's, and one naming this node again is `StaleLocation` (a
//!   second replacement is never started from an answer);
//! - an ending Actor (its destroy's row removal is with the store) is
//!   never an answer: the request waits for the destroy to end and then
//!   starts again, asking the store afresh (once the owner is fenced, §5,
//!   the destroy ends unknown and the Actor stays ending: `LeaseExpired`). Answering with the ending
//!   instance would hand out an incarnation about to go, and a BindOrGet
//!   asked again after a create's unknown outcome would settle on it while
//!   that create's row, made after the removal, names this node hosting
//!   nothing (the simulator's seed 26527).

use super::shard::ShardCore;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, SpotId};

/// What a live row naming this node means (module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnRow {
    /// The Actor is hosted here, as this.
    Hosted(ActorRef),
    /// It is relocating away or arriving here: use the row's ActorRef,
    /// create nothing.
    InMotion,
    /// Its incarnation was lost (L6): remove the row at its version and
    /// create a new incarnation (counted `lost_incarnation_replaced`).
    Lost,
}

impl ShardCore {
    /// §1, §4, L6: BindOrGet found `row`, the live row for its Actor,
    /// naming this node. An arrival is this row's only when it brings the
    /// row's incarnation: a row of another ObjectGeneration beside it is
    /// not in motion (the simulator's seed 11751).
    #[must_use]
    pub fn own_row(&self, row: &ActorRef) -> OwnRow {
        let actor = &row.id;
        if let Some(hosted) = self.actor_owner().actor_ref(actor) {
            return OwnRow::Hosted(hosted);
        }
        let relocation = self.relocation();
        let arriving = relocation.arriving_generation(actor) == Some(row.generation);
        if relocation.is_relocating(actor) || arriving {
            return OwnRow::InMotion;
        }
        OwnRow::Lost
    }
}

/// A BindOrGet into a User Spot (§1).
#[derive(Clone, Copy, Debug)]
pub struct IntoSpot<'a> {
    /// The Spot.
    pub id: &'a SpotId,
    /// SpotWide: its Actors share its lane and are placed with it.
    pub spotwide: bool,
}

/// The Location Store's answer to a BindOrGet step, in the core's terms:
/// each row as its ActorRef (its location is the row's version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowAnswer {
    /// A look-up (this node may not create the Actor): the live row, if any.
    Looked(Option<ActorRef>),
    /// A create-if-absent made this row.
    Created(ActorRef),
    /// A create-if-absent found this live row.
    Existing(ActorRef),
    /// Replacing a lost incarnation: its row had changed meanwhile to this.
    Conflict(ActorRef),
}

/// What BindOrGet does: before the store ([`ShardCore::host_step`]) and
/// with its answer ([`ShardCore::host_found`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostDecision {
    /// The outcome.
    Decided(Result<ActorRef, Error>),
    /// The Actor is ending here: its destroy's row removal is with the
    /// store. The request waits for the destroy to end, then starts again
    /// (module doc, "an ending Actor").
    AfterDestroy,
    /// Host a new incarnation here, as this row made it.
    HostNew(ActorRef),
    /// The row names an incarnation this node lost (L6): remove it at its
    /// version, then create anew (answered as a replacement).
    Replace(ActorRef),
    /// The live row names another node: ask it to run BindOrGet
    /// ([`ShardCore::ask_owner`]); its answer is the outcome.
    AskOwner(ActorRef),
    /// A recheck found an orphan: a row naming this node for an
    /// incarnation it neither hosts nor is moving. Remove it at its
    /// version; create nothing (src/core/recheck.rs).
    RemoveOrphan(ActorRef),
}

impl ShardCore {
    /// §1 step 2 before the store: the Spot rules and an Actor hosted here
    /// — [`HostDecision::Decided`], or [`HostDecision::AfterDestroy`] for
    /// an ending one. `None`: the store must be asked.
    #[must_use]
    pub fn host_step(&self, actor: &ActorId, spot: Option<IntoSpot<'_>>) -> Option<HostDecision> {
        if let Some(spot) = spot {
            if spot.spotwide && !actor.is_under(spot.id) {
                return Some(HostDecision::Decided(Err(Reason::NotPlacedWithSpot.into())));
            }
            // A Spot moving as one unit takes no new Actor: it would be
            // left behind, a second gate (docs/relocation.md).
            if self.relocation().spot_moving(spot.id) {
                return Some(HostDecision::Decided(Err(Reason::RelocationSealed.into())));
            }
        }
        let hosted = self.actor_owner().actor_ref(actor)?;
        if self.actor_owner().is_ending(actor) {
            // Fenced (§5), its destroy ends unknown and the Actor stays
            // ending: nothing to wait for.
            if self.actor_owner().is_fenced() {
                return Some(HostDecision::Decided(Err(Reason::LeaseExpired.into())));
            }
            return Some(HostDecision::AfterDestroy);
        }
        let member = self.actor_owner().placement(actor);
        Some(HostDecision::Decided(
            match (spot, member.map(|p| p.user_spot.as_ref())) {
                (Some(spot), Some(Some(current))) if current == spot.id => Ok(hosted),
                (Some(_), _) => Err(Reason::ActorInOtherSpot.into()),
                (None, _) => Ok(hosted),
            },
        ))
    }

    /// §1 step 2 on the store's answer (module doc). `replacing`: the
    /// answer is to a lost incarnation's replacement. `for_peer`: another
    /// node asked this one (71): it answers and never asks on. (A recheck
    /// is decided by `ShardCore::recheck_found`, src/core/recheck.rs.)
    pub fn host_found(
        &mut self,
        actor: &ActorId,
        spot: Option<IntoSpot<'_>>,
        answer: RowAnswer,
        replacing: bool,
        for_peer: bool,
    ) -> HostDecision {
        // Hosted meanwhile (an earlier request's answer, or an arrival):
        // that is it — or, ending meanwhile, wait for its destroy.
        if let Some(step) = self.host_step(actor, spot) {
            return step;
        }
        let me = self.actor_owner().identity().node;
        let elsewhere = |row: ActorRef| match spot {
            // It lives on another node: not in a Spot of this one (§1).
            Some(_) => HostDecision::Decided(Err(Reason::ActorInOtherSpot.into())),
            // Its owner judges its row (§8.1), once, one hop.
            None if !replacing && !for_peer && row.location.owner != me => {
                HostDecision::AskOwner(row)
            }
            None => HostDecision::Decided(Ok(row)),
        };
        let row = match answer {
            RowAnswer::Looked(Some(row)) => return elsewhere(row),
            RowAnswer::Looked(None) => {
                return HostDecision::Decided(Err(Reason::NoActorFactory.into()))
            }
            RowAnswer::Created(row) => {
                if replacing {
                    self.trace(FlowTrace::LostIncarnationReplaced);
                }
                return HostDecision::HostNew(row);
            }
            RowAnswer::Existing(row) | RowAnswer::Conflict(row) if row.location.owner != me => {
                return elsewhere(row)
            }
            RowAnswer::Existing(row) | RowAnswer::Conflict(row) => row,
        };
        if replacing {
            // The row names this node again after the removal: never a
            // second replacement from one answer.
            return HostDecision::Decided(Err(Reason::StaleLocation.into()));
        }
        match self.own_row(&row) {
            OwnRow::Hosted(hosted) => HostDecision::Decided(Ok(hosted)),
            // In motion: the row's ActorRef, nothing created — but not in a
            // Spot, which must host it here.
            OwnRow::InMotion => HostDecision::Decided(match spot {
                Some(_) => Err(Reason::RelocationSealed.into()),
                None => Ok(row),
            }),
            OwnRow::Lost => HostDecision::Replace(row),
        }
    }
}
