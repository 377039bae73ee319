//! A destroy's row removal whose outcome was unknown is made again (issue
//! 19 item 3, "an unknown outcome is never guessed"; docs/store.md).
//!
//! A removal that ended `StoreUnavailable` may have been applied: the row
//! may be gone, and a new incarnation made elsewhere by the next login.
//! Serving the Actor again would put two incarnations beside each other
//! (§1, §4); forgetting it would guess the other way. So the Actor stays
//! ending — no bind, no relay, no move, no second destroy — and the
//! removal is made again at the same version after a backoff
//! ([`RECHECK_FIRST`](crate::core::recheck::RECHECK_FIRST), doubling up to
//! [`RECHECK_MAX`](crate::core::recheck::RECHECK_MAX), the same numbers as
//! BindOrGet's rechecks), on the core's timer wheel, until the store
//! answers: removed, absent (it was applied) or changed (the row is
//! another's now) all end the incarnation here. Once this owner fenced
//! itself (its lease lapsed, §5) nothing is made again: the destroy ends
//! `Unavailable` and the Actor stays ending until the process restarts.

use std::time::Duration;

use super::Actors;
use crate::core::effects::{CoreEvent, CoreTimer};
use crate::core::host_ask::HostEvent;
use crate::core::recheck::backoff_after;
use crate::core::timer::TimerKey;
use crate::ids::ActorId;

/// An ending Actor's removal: the backoff it was last made again after,
/// and its timer while one is due.
#[derive(Debug, Default)]
pub(super) struct Ending {
    backoff: Option<Duration>,
    pub(super) again: Option<TimerKey>,
}

impl Actors<'_> {
    /// The ending Actor's row removal ended `StoreUnavailable`: it is made
    /// again after the backoff ([`HostEvent::RemoveAgain`]), or the destroy
    /// ends unknown once this owner is fenced ([`HostEvent::DestroyUnknown`])
    /// (module doc).
    pub fn removal_unknown(&mut self, actor: &ActorId) {
        let hosted = self.owner.actors.get_mut(actor);
        let Some(ending) = hosted.and_then(|h| h.ending.as_mut()) else {
            return;
        };
        if let Some(again) = ending.again.take() {
            self.fx.cancel(again);
        }
        let backoff = backoff_after(ending.backoff);
        ending.backoff = Some(backoff);
        ending.again = Some(self.fx.arm(backoff, CoreTimer::RemoveAgain(actor.clone())));
    }

    /// The removal is due again (module doc).
    pub(crate) fn on_remove_again(&mut self, actor: ActorId) {
        let owner = &mut *self.owner;
        let Some(hosted) = owner.actors.get_mut(&actor) else {
            return;
        };
        let Some(ending) = hosted.ending.as_mut() else {
            return;
        };
        ending.again = None;
        let event = if owner.fenced {
            HostEvent::DestroyUnknown { actor }
        } else {
            let hosted = &owner.actors[&actor];
            HostEvent::RemoveAgain {
                row: owner.make_ref(&actor, hosted),
            }
        };
        self.fx.event(CoreEvent::Host(event));
    }
}
