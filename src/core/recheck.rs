//! A store step whose outcome is unknown is checked again (issue 19 item
//! 3, "an unknown outcome is never guessed"; docs/store.md "An outcome the
//! store did not give is never guessed").
//!
//! A create-if-absent, or a lost incarnation's replacement, that ended
//! `StoreUnavailable` (a timeout, a lost connection) may have been applied
//! all the same: the store then holds a row naming this node, which hosts
//! nothing, and no login here would ever learn of it. So the shard checks
//! again — [`HostEvent::Recheck`], a look-up nobody waits on — after a
//! backoff ([`RECHECK_FIRST`], doubling up to [`RECHECK_MAX`]), and decides
//! on the answer ([`ShardCore::recheck_found`]): a row this node hosts, or
//! another node's, or none, ends that check (and settles the recheck if
//! the look-up was made past the horizon below); a row naming this node
//! for an incarnation it neither hosts nor is moving is an orphan, removed
//! at its version ([`HostDecision::RemoveOrphan`]). A fenced owner (§5)
//! checks nothing more.
//!
//! Rules this module keeps:
//! - A recheck never creates and never asks the row's owner: nobody asked
//!   for the Actor. Creating there would bring back an Actor the
//!   application destroyed meanwhile; the next login creates what a player
//!   needs.
//! - A recheck settles only on an answer to a store step made at least
//!   [`RECHECK_HORIZON`] after the last unknown outcome of a write: several
//!   steps for one Actor can be in flight at the store at once (each timed
//!   out by its caller, not by the store), and an earlier one may be
//!   answered before a later one is applied (the simulator's seed 1645). A
//!   step of its own that ends unknown asks again after a longer backoff.
//! - A BindOrGet of this node that ended with a row naming this very node,
//!   which it does not host (the core's "in motion": a move arriving, or
//!   leaving past relay-ready), is checked again the same way until the row
//!   is hosted here, an orphan removed, or another node's: a move that then
//!   fails must not leave the row naming a node that hosts nothing (the
//!   simulator's seed 11751).
//! - A recheck joins the BindOrGets already waiting for the Actor, behind
//!   them (the shard keeps one store step per Actor at a time), and waits
//!   for an ending Actor's destroy like them.
//! - Rechecks are armed only for BindOrGets outside a User Spot: a Spot's
//!   create is asked again by the Spot's next login. A row a recheck
//!   misses is replaced at the next login anywhere (docs/store.md "A login
//!   on another node").

use std::collections::HashMap;
use std::time::Duration;

use super::creation::{HostDecision, OwnRow, RowAnswer};
use super::effects::{CoreEvent, CoreTimer};
use super::host_ask::HostEvent;
use super::shard::ShardCore;
use super::time::Instant;
use super::timer::TimerKey;
use super::trace::FlowTrace;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef};

/// The first backoff before a store step is made again.
pub const RECHECK_FIRST: Duration = Duration::from_millis(200);

/// The longest backoff: each one doubles the last, up to this.
pub const RECHECK_MAX: Duration = Duration::from_millis(3_200);

/// How long after its caller's timeout a store step may still be applied
/// (module doc): a recheck settles only on a step made this long after
/// the last unknown outcome. The simulator's store applies a step at most
/// 700 ms after it was made, 200 ms past the 500 ms call timeout, and a
/// hung store applies what it held, in order, before anything made later.
/// Redis applies one connection's commands in order, but the runtime's
/// store workers use several connections, and a command held in a socket
/// while Redis hangs is applied when it resumes, however late: a row such
/// a create makes, naming this node with nothing hosted, is replaced at
/// the next login anywhere (docs/store.md "A login on another node").
pub const RECHECK_HORIZON: Duration = Duration::from_millis(1_000);

/// The backoff after `last`: [`RECHECK_FIRST`], then twice the last, up to
/// [`RECHECK_MAX`].
#[must_use]
pub fn backoff_after(last: Option<Duration>) -> Duration {
    last.map_or(RECHECK_FIRST, |last| (last * 2).min(RECHECK_MAX))
}

/// How a store step for an Actor ended, as a recheck reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepEnd {
    /// `StoreUnavailable`: its outcome unknown. `writes`: it was a create,
    /// a replacement or an orphan's removal, which may have left a row
    /// naming this node; a look-up leaves nothing.
    Unknown {
        /// The step writes.
        writes: bool,
    },
    /// The store answered it.
    Answered,
}

/// The Actors this shard will check again.
#[derive(Debug, Default)]
pub(crate) struct Rechecks {
    open: HashMap<ActorId, Recheck>,
}

#[derive(Debug)]
struct Recheck {
    /// The backoff it was last armed with.
    backoff: Duration,
    /// Only an answer to a step made from then on settles it.
    settles_from: Instant,
    /// Its timer; `None` once asked, until an answer arms it again.
    due: Option<TimerKey>,
}

impl ShardCore {
    /// A store step for `actor`, made at `issued`, ended as `end`: arms,
    /// re-arms or settles the Actor's recheck (module doc). The runtime
    /// and the simulator call it for every BindOrGet step outside a User
    /// Spot, and for every step of a recheck.
    pub fn recheck_after_store(
        &mut self,
        now: Instant,
        actor: &ActorId,
        issued: Instant,
        end: StepEnd,
    ) {
        self.fx.advance(now);
        let last = self.rechecks.open.remove(actor);
        if let Some(due) = last.as_ref().and_then(|r| r.due) {
            self.fx.cancel(due);
        }
        let (backoff, settles_from, at) = match (end, last) {
            // A write's outcome unknown: check again, and settle only on a
            // step made a horizon from now.
            (StepEnd::Unknown { writes: true }, last) => {
                let backoff = backoff_after(last.map(|r| r.backoff));
                (backoff, now + RECHECK_HORIZON, now + backoff)
            }
            // A check of its own unanswered: again, later.
            (StepEnd::Unknown { writes: false }, Some(last)) => {
                let backoff = backoff_after(Some(last.backoff));
                (backoff, last.settles_from, now + backoff)
            }
            // Answered, but a step made too early to settle it.
            (StepEnd::Answered, Some(last)) if issued < last.settles_from => {
                let at = (now + last.backoff).max(last.settles_from);
                (last.backoff, last.settles_from, at)
            }
            _ => return,
        };
        let due = self.fx.arm_at(at, CoreTimer::Recheck(actor.clone()));
        let recheck = Recheck {
            backoff,
            settles_from,
            due: Some(due),
        };
        self.rechecks.open.insert(actor.clone(), recheck);
    }

    /// BindOrGet (or a recheck) for `actor` ended with `outcome` on the
    /// store's answer: a row naming this node, which does not host the
    /// Actor, is checked again (module doc).
    pub fn recheck_unhosted(
        &mut self,
        now: Instant,
        actor: &ActorId,
        outcome: &Result<ActorRef, Error>,
    ) {
        self.fx.advance(now);
        let Ok(row) = outcome else {
            return;
        };
        let me = self.actor_owner().identity().node;
        if row.location.owner != me || self.actor_owner().hosts(actor) {
            return;
        }
        let last = self.rechecks.open.remove(actor);
        if let Some(due) = last.as_ref().and_then(|r| r.due) {
            self.fx.cancel(due);
        }
        let backoff = backoff_after(last.as_ref().map(|r| r.backoff));
        let due = self.fx.arm(backoff, CoreTimer::Recheck(actor.clone()));
        let recheck = Recheck {
            backoff,
            settles_from: last.map_or(now, |r| r.settles_from),
            due: Some(due),
        };
        self.rechecks.open.insert(actor.clone(), recheck);
    }

    /// A recheck is due: the shard looks the row up for nobody
    /// ([`HostEvent::Recheck`]).
    pub(super) fn on_recheck_due(&mut self, actor: ActorId) {
        // A fenced owner (§5) writes nothing more: its rows are any node's
        // to replace once its lease lapsed.
        if self.actor_owner().is_fenced() {
            self.rechecks.open.remove(&actor);
            return;
        }
        let Some(recheck) = self.rechecks.open.get_mut(&actor) else {
            return;
        };
        recheck.due = None;
        self.fx.event(CoreEvent::Host(HostEvent::Recheck { actor }));
    }

    /// A recheck before the store: it waits for an ending Actor's destroy
    /// like any BindOrGet ([`ShardCore::host_step`]); otherwise `None`, the
    /// row must be looked up — even for an Actor hosted here, whose answer
    /// may be one made too early to settle.
    #[must_use]
    pub fn recheck_step(&self, actor: &ActorId) -> Option<HostDecision> {
        match self.host_step(actor, None)? {
            step @ HostDecision::AfterDestroy => Some(step),
            step @ HostDecision::Decided(Err(_)) => Some(step),
            _ => None,
        }
    }

    /// A recheck's answer from the store (module doc): never a create,
    /// never an ask of the row's owner. An orphan — a row naming this node
    /// for an incarnation it neither hosts nor is moving — is removed at
    /// its version ([`HostDecision::RemoveOrphan`]); anything else ends it
    /// (the outcome goes to nobody; `Ok` with a row naming this node
    /// unhosted is checked again by [`ShardCore::recheck_unhosted`]).
    pub fn recheck_found(&mut self, actor: &ActorId, answer: RowAnswer) -> HostDecision {
        if let Some(step) = self.recheck_step(actor) {
            return step;
        }
        let me = self.actor_owner().identity().node;
        let row = match answer {
            RowAnswer::Looked(None) => {
                return HostDecision::Decided(Err(Reason::StaleLocation.into()))
            }
            RowAnswer::Looked(Some(row))
            | RowAnswer::Created(row)
            | RowAnswer::Existing(row)
            | RowAnswer::Conflict(row) => row,
        };
        if row.location.owner != me {
            return HostDecision::Decided(Ok(row));
        }
        match self.own_row(&row) {
            OwnRow::Hosted(hosted) => HostDecision::Decided(Ok(hosted)),
            OwnRow::InMotion => HostDecision::Decided(Ok(row)),
            OwnRow::Lost => {
                self.fx.trace(FlowTrace::OrphanRowFound);
                HostDecision::RemoveOrphan(row)
            }
        }
    }

    /// The Actors this shard will check again, and whether each is armed.
    #[cfg(feature = "testing")]
    pub fn rechecks(&self) -> impl Iterator<Item = (&ActorId, bool)> {
        self.rechecks.open.iter().map(|(a, r)| (a, r.due.is_some()))
    }
}
