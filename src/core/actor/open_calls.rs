//! The requests an Actor has open: the caller's side of "every request
//! ends exactly once" (docs/actors.md "Messages between Actors").
//!
//! The node that sent a request keeps it ([`super::calls`]) to route its
//! answer, but the caller may move away before the answer comes, and that
//! node may then die with it. So the caller keeps its own ledger, which
//! moves with it like its timers:
//! - a request is opened in the caller's turn, with its deadline, on the
//!   shard core's one timer wheel;
//! - its outcome is delivered only while it is open, and closes it: a
//!   second outcome (the sending node's, after the caller's own deadline
//!   ended it) is dropped and counted (`late_reply_dropped`);
//! - at its deadline an open request ends `Deadline` here, whatever became
//!   of the node that sent it;
//! - a relocation freezes the ledger at capture and carries each open
//!   request as the time its deadline had left ([`CallsHandoff`]), never a
//!   clock reading; the target (or the source again, after an abort) arms
//!   each from the moment it takes the Actor: late by the move's pause at
//!   most, never early;
//! - an outcome that reaches the captured caller goes into the move's
//!   ingress hold and closes its request here, but the request still
//!   travels in the 60 as open, with the time it had left: the target
//!   closes it when the held outcome reaches it (the 62), and if the
//!   outcome never does — the source died before relay-ready's 62 — its
//!   deadline ends it there (found by the simulator, seed 18899).

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::effects::{CoreTimer, Effects};
use super::super::time::Instant;
use super::super::timer::TimerKey;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, CallId};
use crate::wire::node::CallsHandoff;

/// A wheel timer of an open request's deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallDeadline {
    /// The calling Actor.
    pub actor: ActorId,
    /// Its request.
    pub call: CallId,
}

#[derive(Debug)]
struct OpenCall {
    due: Instant,
    /// Its wheel entry, while armed (`None` while frozen for a move).
    key: Option<TimerKey>,
    /// While frozen for a move: the time it had left at capture.
    left: Duration,
}

/// The requests of one hosted Actor.
#[derive(Debug, Default)]
pub(crate) struct OpenCalls {
    last: CallId,
    open: BTreeMap<CallId, OpenCall>,
    /// While frozen for a move: the requests whose outcome arrived and
    /// waits in the ingress hold, with the time each had left (module doc).
    held: BTreeMap<CallId, Duration>,
}

impl OpenCalls {
    /// The ledger a relocation handed over, each deadline armed from now
    /// with the time it had left.
    pub(crate) fn handed(handoff: CallsHandoff, actor: &ActorId, fx: &mut Effects) -> Self {
        let mut calls = Self {
            last: handoff.last,
            open: BTreeMap::new(),
            held: BTreeMap::new(),
        };
        for (call, left) in handoff.open {
            let open = OpenCall {
                due: fx.now() + left,
                key: None,
                left: Duration::ZERO,
            };
            calls.open.insert(call, open);
            calls.arm(actor, call, fx);
        }
        calls
    }

    /// Numbers and opens a request ending at `deadline` from now at the
    /// latest; `QueueFull` when the Actor has as many open as it may.
    pub(crate) fn open(
        &mut self,
        actor: &ActorId,
        deadline: Duration,
        fx: &mut Effects,
    ) -> Result<CallId, Error> {
        if self.open.len() >= usize::from(CallsHandoff::OPEN_MAX) {
            return Err(Reason::QueueFull.into());
        }
        let call = CallId(self.last.0 + 1);
        self.last = call;
        let open = OpenCall {
            due: fx.now() + deadline,
            key: None,
            left: Duration::ZERO,
        };
        self.open.insert(call, open);
        self.arm(actor, call, fx);
        Ok(call)
    }

    /// An outcome of `call` arrived: `true` when it was open, and is now
    /// closed; `false` for a request that already ended. While frozen for
    /// a move, the outcome goes into the ingress hold, and the request is
    /// kept for the 60 (module doc).
    pub(crate) fn close(&mut self, call: CallId, fx: &mut Effects) -> bool {
        let Some(open) = self.open.remove(&call) else {
            return false;
        };
        match open.key {
            Some(key) => fx.cancel(key),
            None => {
                self.held.insert(call, open.left);
            }
        }
        true
    }

    /// The deadline of `call` fired: `true` when it was open and armed, and
    /// is now closed (the caller gets `Deadline`).
    pub(crate) fn expire(&mut self, call: CallId) -> bool {
        let armed = self.open.get(&call).is_some_and(|open| open.key.is_some());
        if armed {
            self.open.remove(&call);
        }
        armed
    }

    /// Takes the deadlines off the wheel for a relocation's capture, each
    /// keeping the time it has left now.
    pub(crate) fn freeze(&mut self, fx: &mut Effects) {
        let now = fx.now();
        for open in self.open.values_mut() {
            if let Some(key) = open.key.take() {
                fx.cancel(key);
            }
            open.left = open.due.saturating_duration_since(now);
        }
    }

    /// The move aborted: every frozen deadline is armed again from now with
    /// the time it had left.
    pub(crate) fn thaw(&mut self, actor: &ActorId, fx: &mut Effects) {
        // The held outcomes run here at the reopen: those requests ended.
        self.held.clear();
        let now = fx.now();
        let frozen: Vec<CallId> = self
            .open
            .iter_mut()
            .filter(|(_, open)| open.key.is_none())
            .map(|(&call, open)| {
                open.due = now + open.left;
                call
            })
            .collect();
        for call in frozen {
            self.arm(actor, call, fx);
        }
    }

    /// The frozen ledger as a relocation carries it: the requests open,
    /// and those whose outcome waits in the ingress hold.
    pub(crate) fn handoff(&self) -> CallsHandoff {
        let mut open: Vec<(CallId, Duration)> = self
            .open
            .iter()
            .map(|(&call, open)| (call, open.left))
            .chain(self.held.iter().map(|(&call, &left)| (call, left)))
            .collect();
        open.sort_unstable_by_key(|&(call, _)| call);
        CallsHandoff {
            last: self.last,
            open,
        }
    }

    /// The Actor is destroyed: no deadline of it fires.
    pub(crate) fn cancel_all(&mut self, fx: &mut Effects) {
        self.held.clear();
        for (_, open) in std::mem::take(&mut self.open) {
            if let Some(key) = open.key {
                fx.cancel(key);
            }
        }
    }

    /// How many requests are open.
    #[cfg(feature = "testing")]
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    fn arm(&mut self, actor: &ActorId, call: CallId, fx: &mut Effects) {
        if let Some(open) = self.open.get_mut(&call) {
            let fire = CallDeadline {
                actor: actor.clone(),
                call,
            };
            open.key = Some(fx.arm_at(open.due, CoreTimer::CallDeadline(fire)));
        }
    }
}
