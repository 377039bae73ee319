//! `SessionBindingAggregate` (§2): the session-side validation of one physical
//! session — its identity, its bindings per ActorId, their generations and
//! routes — judged in one serial span.
//!
//! The aggregate never reads the Location Store, never picks a relocation
//! target and never re-judges Actor authority (§2). It owns exactly these
//! facts: which bindings are current, what route each stores, which one is
//! sealed for a relocation and what it holds (§8.1), and whether the session
//! is open, replacing or closed.

use foldhash::{HashMap, HashMapExt};

use crate::core::timer::TimerKey;
use crate::error::Reason;
use crate::ids::{
    ActorId, ActorLocation, ActorRef, BindingGeneration, ObjectGeneration, Peer, RequestId,
    SessionSequence,
};
use crate::wire::node::{BoundSessionSend, SealIdentity};

use super::seal::Seal;
use super::Ticket;

/// Where a session is in its life (§6, §7). States, not flags: a closed
/// session cannot also be replacing.
#[derive(Debug)]
pub(crate) enum Lifecycle {
    /// Dispatch, binds and pushes are accepted.
    Open,
    /// §6: a binding was replaced by another session; new inbound
    /// application dispatch is refused, outbound sends still go out, and the
    /// connection closes after the callback.
    Replacing(Replacement),
    /// The connection is closed; the remaining bindings are being cleaned up.
    Closed,
}

/// The replacement of one binding of this session (§6).
#[derive(Debug)]
pub(crate) struct Replacement {
    /// The retired binding generation that the close timer revalidates.
    pub(crate) retired: BindingGeneration,
    /// Names the duplicate-connection callback.
    pub(crate) callback: Ticket,
    /// Where the callback is.
    pub(crate) phase: ReplacementPhase,
}

/// §6: the callback runs under the callback timeout, then the 100 ms close.
#[derive(Debug)]
pub(crate) enum ReplacementPhase {
    /// The callback is running; the timer is SessionReplacementCallbackTimeout.
    CallbackRunning { timeout: TimerKey },
    /// The callback reached a terminal; the timer is the 100 ms close.
    CloseScheduled,
}

/// One binding of this session to one Actor (§4).
#[derive(Debug)]
pub(crate) struct Binding {
    /// The owner-local binding generation.
    pub(crate) generation: BindingGeneration,
    /// The bound incarnation.
    pub(crate) object_generation: ObjectGeneration,
    /// The verified route, stored at bind time (§5).
    pub(crate) location: ActorLocation,
    /// Current, or being notified of a disconnect.
    pub(crate) state: BindingState,
}

/// §7, §8.1: a binding stays current until its disconnect notification is
/// sent; from then on it only waits for the callback terminal and its
/// tombstone. A relocation seal is a state of one binding, not of the session
/// or its lane, so the session's other bindings keep flowing.
#[derive(Debug)]
pub(crate) enum BindingState {
    /// Relay and push use it.
    Current,
    /// §8.1: sealed for a relocation; relays are held until 44 or the seal
    /// timeout.
    Sealed(Seal),
    /// A disconnect notification is in flight; it runs at most once (§7).
    Notifying,
}

impl Binding {
    /// Whether the application still sees the binding (§13 `Bound`, `Find`)
    /// and may relay on it: current, or sealed with no disconnect notice held.
    pub(crate) fn is_bound(&self) -> bool {
        match &self.state {
            BindingState::Current => true,
            BindingState::Sealed(seal) => seal.disconnect.is_none(),
            BindingState::Notifying => false,
        }
    }

    /// The seal of a binding that is being removed, when it was sealed.
    pub(crate) fn into_seal(self) -> Option<Seal> {
        match self.state {
            BindingState::Sealed(seal) => Some(seal),
            _ => None,
        }
    }

    /// The seal, when the binding is sealed (read by a metrics count).
    pub(crate) fn seal(&self) -> Option<&Seal> {
        match &self.state {
            BindingState::Sealed(seal) => Some(seal),
            _ => None,
        }
    }

    /// The seal, when the binding is sealed.
    pub(crate) fn seal_mut(&mut self) -> Option<&mut Seal> {
        match &mut self.state {
            BindingState::Sealed(seal) => Some(seal),
            _ => None,
        }
    }
}

/// What a 42 asks of a binding that matches it (§8.1, §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SealStep {
    /// The binding is current: install the seal.
    Install,
    /// The same relocation already sealed it: answer Ok again, change nothing.
    AlreadySealed,
}

/// The session-side validation of one physical session.
#[derive(Debug)]
pub struct SessionBindingAggregate {
    pub(crate) lifecycle: Lifecycle,
    pub(crate) bindings: HashMap<ActorId, Binding>,
    /// Binds sent and not yet terminal, by ActorId: one at a time per Actor.
    pub(crate) binds_in_flight: HashMap<ActorId, RequestId>,
    sequence: SessionSequence,
}

/// Why a push (36) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushVerdict {
    /// All four generation values are current (§5, §8.1): submit it.
    Current,
    /// The session has no binding for the Actor.
    NoBinding,
    /// A generation value differs from the binding's.
    NotCurrent,
}

impl SessionBindingAggregate {
    pub(crate) fn new() -> Self {
        Self {
            lifecycle: Lifecycle::Open,
            bindings: HashMap::new(),
            binds_in_flight: HashMap::new(),
            sequence: SessionSequence(0),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Open)
    }

    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Closed)
    }

    /// The next session sequence (§5): the order of accepted messages.
    pub(crate) fn next_sequence(&mut self) -> SessionSequence {
        self.sequence = self.sequence.next();
        self.sequence
    }

    /// The binding for `actor`, if the application still sees it (current
    /// or sealed, not being notified).
    pub(crate) fn current(&self, actor: &ActorId) -> Option<&Binding> {
        self.bindings.get(actor).filter(|b| b.is_bound())
    }

    /// The binding as the application sees it: an ActorRef whose location is
    /// the current snapshot (§1, §13).
    pub(crate) fn view(actor: &ActorId, binding: &Binding) -> ActorRef {
        ActorRef {
            id: actor.clone(),
            generation: binding.object_generation,
            location: binding.location.clone(),
        }
    }

    /// Every current binding, as ActorRefs (§13 `Bound`).
    pub(crate) fn bound(&self) -> Vec<ActorRef> {
        let mut refs: Vec<_> = self
            .bindings
            .iter()
            .filter(|(_, b)| b.is_bound())
            .map(|(id, b)| Self::view(id, b))
            .collect();
        refs.sort_by(|a, b| a.id.cmp(&b.id));
        refs
    }

    /// §5 linearization point 2: the binding commit and every state the push
    /// judgment consults are published together, here, in one step. Returns
    /// the binding it replaced, if any (a rebind to another incarnation).
    pub(crate) fn commit_binding(
        &mut self,
        actor: ActorId,
        generation: BindingGeneration,
        object_generation: ObjectGeneration,
        location: ActorLocation,
    ) -> (ActorRef, Option<Binding>) {
        let binding = Binding {
            generation,
            object_generation,
            location,
            state: BindingState::Current,
        };
        let view = Self::view(&actor, &binding);
        let replaced = self.bindings.insert(actor, binding);
        (view, replaced)
    }

    /// §8.1: a 42 names exactly one binding — its binding generation, ActorId
    /// and ObjectGeneration must all be this session's current ones; a seal
    /// of another relocation is never replaced. Nothing changes here.
    pub(crate) fn judge_seal(
        &self,
        actor: &ActorId,
        object_generation: ObjectGeneration,
        seal: &SealIdentity,
    ) -> Result<SealStep, Reason> {
        let Some(binding) = self.bindings.get(actor) else {
            return Err(Reason::StaleBinding);
        };
        if binding.generation != seal.binding {
            return Err(Reason::StaleBinding);
        }
        if binding.object_generation != object_generation {
            return Err(Reason::ObjectGenerationMismatch);
        }
        match &binding.state {
            BindingState::Current => Ok(SealStep::Install),
            BindingState::Sealed(installed) if installed.relocation == seal.relocation => {
                Ok(SealStep::AlreadySealed)
            }
            BindingState::Sealed(_) => Err(Reason::RelocationSealed),
            BindingState::Notifying => Err(Reason::StaleBinding),
        }
    }

    /// §8.1 "whether the binding the seal was installed on matches the
    /// binding whose route is being changed": the Actor whose binding carries
    /// this seal (relocation identity and binding generation), if any.
    pub(crate) fn sealed_by(&self, seal: &SealIdentity) -> Option<&ActorId> {
        self.bindings.iter().find_map(|(actor, binding)| {
            let matches = binding.generation == seal.binding
                && matches!(&binding.state, BindingState::Sealed(s) if s.relocation == seal.relocation);
            matches.then_some(actor)
        })
    }

    /// §5, §8.1: a push is judged on the source ObjectGeneration, source
    /// NodeGeneration (of the sending node), AuthorityOwnerGeneration and the
    /// expected binding generation — nothing else, no derived copy.
    pub(crate) fn judge_push(&self, from: Peer, push: &BoundSessionSend) -> PushVerdict {
        let Some(binding) = self.bindings.get(&push.actor) else {
            return PushVerdict::NoBinding;
        };
        let current = binding.generation == push.binding
            && binding.object_generation == push.object_generation
            && binding.location.owner == from.rid
            && binding.location.node_generation == push.node_generation
            && binding.location.authority == push.authority;
        if current {
            PushVerdict::Current
        } else {
            PushVerdict::NotCurrent
        }
    }
}
