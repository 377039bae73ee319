//! A BindOrGet's own store step whose outcome is unknown is asked again
//! (issue 19 item 3, "an unknown outcome is never guessed"; docs/store.md
//! "An outcome the store did not give is never guessed").
//!
//! A create-if-absent, or a lost incarnation's replacement, that ended
//! `StoreUnavailable` (a timeout, a lost connection) may have been applied
//! all the same: the store then holds a row naming this node, which hosts
//! nothing, and no login here would ever learn of it. So the shard asks
//! again — a BindOrGet nobody waits on, [`HostEvent::Recheck`] — after a
//! backoff ([`RECHECK_FIRST`], doubling up to [`RECHECK_MAX`]), and decides
//! on the answer as on any ([`ShardCore::host_found`]): the row made then
//! is hosted here, one naming this node and hosted nowhere is replaced as
//! lost (L6), one naming another node is that node's.
//!
//! Rules this module keeps:
//! - A recheck settles only on an answer to a store step made at least
//!   [`RECHECK_HORIZON`] after the last unknown outcome: several steps
//!   for one Actor can be in flight at the store at once (each timed out
//!   by its caller, not by the store), and an earlier one may be answered
//!   before a later one is applied (the simulator's seed 1645).
//! - A BindOrGet of this node that ended with a row naming this very node,
//!   which it does not host (the core's "in motion": a move arriving, or
//!   leaving past relay-ready), is asked again the same way until the row
//!   is hosted here, replaced as lost, or another node's: a move that then
//!   fails must not leave the row naming a node that hosts nothing (the
//!   simulator's seed 11751).
//! - A recheck asked joins the BindOrGets already waiting for the Actor,
//!   behind them: the shard keeps one store step per Actor at a time.
//! - A recheck never asks on (`for_peer`): a row naming another node is
//!   that node's, and nobody's login should make it act. An Actor hosted
//!   here when its recheck is due settles it: its row names this node.
//! - Rechecks are kept only for BindOrGets outside a User Spot: a Spot's
//!   create needs the Spot's handle, which the core does not hold. Such a
//!   row is replaced at the next login into the Spot.

use std::collections::HashMap;
use std::time::Duration;

use super::effects::{CoreEvent, CoreTimer};
use super::host_ask::HostEvent;
use super::shard::ShardCore;
use super::time::Instant;
use super::timer::TimerKey;
use crate::error::Error;
use crate::ids::{ActorId, ActorRef, ActorTypeName};

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

/// The Actors this shard will ask about again.
#[derive(Debug, Default)]
pub(crate) struct Rechecks {
    open: HashMap<ActorId, Recheck>,
}

#[derive(Debug)]
struct Recheck {
    /// The type a new incarnation is created with.
    actor_type: ActorTypeName,
    /// The backoff it was last armed with.
    backoff: Duration,
    /// Only an answer to a step made from then on settles it.
    settles_from: Instant,
    /// Its timer; `None` once asked, until an answer arms it again.
    due: Option<TimerKey>,
}

impl ShardCore {
    /// The store answered BindOrGet's step for `actor`, made at `issued`;
    /// `unknown`: the type to create with, when it was a create or a
    /// replacement outside a User Spot and ended `StoreUnavailable`. Arms,
    /// re-arms or settles the Actor's recheck (module doc).
    pub fn recheck_after_store(
        &mut self,
        now: Instant,
        actor: &ActorId,
        issued: Instant,
        unknown: Option<&ActorTypeName>,
    ) {
        self.fx.advance(now);
        let last = self.rechecks.open.remove(actor);
        if let Some(due) = last.as_ref().and_then(|r| r.due) {
            self.fx.cancel(due);
        }
        let recheck = match (unknown, last) {
            (Some(actor_type), last) => {
                let backoff = backoff_after(last.map(|r| r.backoff));
                let due = self.fx.arm(backoff, CoreTimer::Recheck(actor.clone()));
                Recheck {
                    actor_type: actor_type.clone(),
                    backoff,
                    settles_from: now + RECHECK_HORIZON,
                    due: Some(due),
                }
            }
            (None, Some(last)) if issued < last.settles_from => {
                let at = (now + last.backoff).max(last.settles_from);
                let due = self.fx.arm_at(at, CoreTimer::Recheck(actor.clone()));
                Recheck {
                    due: Some(due),
                    ..last
                }
            }
            _ => return,
        };
        self.rechecks.open.insert(actor.clone(), recheck);
    }

    /// BindOrGet for `actor` ended with `outcome` on the store's answer: a
    /// row naming this node, which does not host the Actor, is asked about
    /// again (module doc).
    pub fn recheck_unhosted(
        &mut self,
        now: Instant,
        actor: &ActorId,
        actor_type: &ActorTypeName,
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
            actor_type: actor_type.clone(),
            backoff,
            settles_from: last.map_or(now, |r| r.settles_from),
            due: Some(due),
        };
        self.rechecks.open.insert(actor.clone(), recheck);
    }

    /// A recheck is due: the shard runs BindOrGet for the Actor, for nobody
    /// ([`HostEvent::Recheck`]).
    pub(super) fn on_recheck_due(&mut self, actor: ActorId) {
        if self.actor_owner().hosts(&actor) {
            self.rechecks.open.remove(&actor);
            return;
        }
        let Some(recheck) = self.rechecks.open.get_mut(&actor) else {
            return;
        };
        recheck.due = None;
        let actor_type = recheck.actor_type.clone();
        self.fx
            .event(CoreEvent::Host(HostEvent::Recheck { actor, actor_type }));
    }

    /// The Actors this shard will ask about again, and whether each is
    /// armed (testing: the simulator's settle).
    #[cfg(feature = "testing")]
    pub fn rechecks(&self) -> impl Iterator<Item = (&ActorId, bool)> {
        self.rechecks.open.iter().map(|(a, r)| (a, r.due.is_some()))
    }
}
