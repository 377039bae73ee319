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

use super::shard::ShardCore;
use crate::ids::{ActorId, ActorRef};

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
    /// §1, §4, L6: BindOrGet found the live row for `actor` naming this
    /// node.
    #[must_use]
    pub fn own_row(&self, actor: &ActorId) -> OwnRow {
        if let Some(hosted) = self.actor_owner().actor_ref(actor) {
            return OwnRow::Hosted(hosted);
        }
        let relocation = self.relocation();
        if relocation.is_relocating(actor) || relocation.is_arriving(actor) {
            return OwnRow::InMotion;
        }
        OwnRow::Lost
    }
}
