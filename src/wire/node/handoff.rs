//! Commands 60–65: the relocation handoff between the source Actor owner (the
//! relocation coordinator) and the target (docs/relocation.md "The order").
//!
//! The spec numbers only the commands the session owner sees (42, 43, 44,
//! §5 table); the source/target order belongs to a chapter that is not given,
//! so these six are the project's own records, numbered past 51 so that no
//! §5 number is reused. Each has one variant (1):
//!
//! | command | record | direction | completion |
//! | --- | --- | --- | --- |
//! | 60 | [`RelocationPrepare`] | source → target: temporary queue, Restore without dispatch | request |
//! | 61 | [`RelocationReady`] | target → source: relay-ready, or why not | reply of 60 |
//! | 62 | [`RelocationIngressHold`] | source → target: one item that arrived after capture | one-way |
//! | 63 | [`RelocationCutover`] | source → target: the ingress hold is complete | one-way |
//! | 64 | [`RelocationDiscard`] | source → target: drop what was prepared (abort) | one-way |
//! | 65 | [`RelocationFinished`] | target → source: committed with the new route, or failed | one-way |
//!
//! Saved work and the ingress hold are the same kind of item,
//! [`SavedWork`]: work the source admitted for the Actor (§2 "Target queue":
//! the target does not admit it again). A request among them carries a
//! RequestId of the source's, because its reply is proxied through the
//! source (docs/relocation.md "Replies always come from the node a request
//! was sent to").

use bytes::{BufMut, Bytes, BytesMut};

use super::{Body, BoundRoute, Command, RequestHeader, TombstoneCause};
use crate::error::Error;
use crate::ids::{
    ActorId, AuthorityOwnerGeneration, BindingGeneration, CallId, Correlation, ObjectGeneration,
    OwnerLeaseGeneration, PacketKey, RelocationId, RequestId, SessionRef, SessionSequence, TimerId,
};
use crate::wire::codec::{Field, Reader};
use crate::wire::WireError;

/// The binding the Actor had at capture, handed to the target so that it
/// registers the same binding identity as current (§4, §8: the route update
/// "is not a rebind").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingHandoff {
    /// The bound session, with its owner's RID and lifecycle.
    pub session: SessionRef,
    /// The session owner's lease generation, carried back in a later 51 (§6).
    pub session_lease: OwnerLeaseGeneration,
    /// The binding generation the session owner allocated.
    pub binding: BindingGeneration,
}

/// One item of work the source admitted for the Actor: queued at capture
/// (saved work, in 60) or arrived after it (ingress hold, in 62).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SavedWork {
    /// A message for the Actor's handler (§5).
    Deliver {
        /// `Some` for a request: the source's proxy id and its budget.
        request: Option<RequestHeader>,
        /// Which typed handler.
        key: PacketKey,
        /// The client's original correlation, for a request.
        correlation: Option<Correlation>,
        /// The session sequence it was accepted with.
        sequence: SessionSequence,
        /// The payload.
        payload: Bytes,
    },
    /// §7: the Spot's disconnect callback for the binding of `session`.
    Disconnect {
        /// The source's proxy id for the callback's terminal.
        request: RequestHeader,
        /// The session whose binding ends.
        session: SessionRef,
    },
    /// §5 point 1: the join callback of a binding registered at the source.
    Bound {
        /// The bound session.
        session: SessionRef,
    },
    /// A tick of one of the Actor's timers that fired at the source and was
    /// queued at capture: it runs on the target, once (docs/actors.md
    /// "Timers").
    Timer {
        /// The timer.
        timer: TimerId,
        /// Its tick number (1 for the first tick).
        tick: u64,
    },
    /// A message from another Actor (70), for the Actor's handler.
    Call {
        /// `Some` for a request: the source's proxy id and its budget.
        request: Option<RequestHeader>,
        /// The Actor that sent it (`None`: node code outside any Actor).
        from: Option<ActorId>,
        /// Which handler key.
        key: PacketKey,
        /// The payload.
        payload: Bytes,
    },
    /// The outcome of a request the Actor made of another Actor.
    CallOutcome {
        /// The request, as the caller numbered it.
        call: CallId,
        /// The reply, or the typed error that ended it.
        outcome: Result<Bytes, Error>,
    },
    /// §6, §7: a tombstone that reached the source after capture; the target
    /// removes exactly this identity if it is the handed-over binding.
    Tombstone {
        /// The session whose binding ends.
        session: SessionRef,
        /// The binding generation that ends.
        binding: BindingGeneration,
        /// Why.
        cause: TombstoneCause,
    },
}

/// Command 60: the coordinator asks the target to install a temporary queue
/// and Restore the Actor without dispatch (§8.1 diagram, "\[request\] install
/// temporary queue, Restore, prepare relay without dispatch").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationPrepare {
    /// Correlation and deadline of the 61 reply.
    pub request: RequestHeader,
    /// The relocation identity (§8.1).
    pub relocation: RelocationId,
    /// The Actor.
    pub actor: ActorId,
    /// Its incarnation, kept by the move (§1).
    pub object_generation: ObjectGeneration,
    /// The authority owner generation the target's CAS expects; the
    /// expected owner is the sender, whom the transport authenticated (§2).
    pub expected_authority: AuthorityOwnerGeneration,
    /// The binding at capture, if the Actor was bound.
    pub binding: Option<BindingHandoff>,
    /// The Actor's state snapshot (DESIGN: an Actor type that can move
    /// provides a snapshot and a restore). Bounded by
    /// [`DecodeLimits::handoff_state_len_max`](crate::wire::DecodeLimits).
    pub state: Bytes,
    /// The work queued at capture, in its order. Bounded by
    /// [`DecodeLimits::saved_work_count_max`](crate::wire::DecodeLimits).
    pub saved: Vec<SavedWork>,
    /// The Actor's pending timers, as time remaining (node clocks differ).
    pub timers: TimersHandoff,
    /// The Actor's requests: their numbering and those still open, each
    /// with the time its deadline had left (docs/actors.md "Messages
    /// between Actors").
    pub calls: CallsHandoff,
}

/// An Actor's requests as a relocation carries them: the caller's side of
/// "every request ends exactly once" moves with the caller, so that a
/// request whose outcome never comes (its answer went to a node that died)
/// still ends, at its deadline, wherever the caller now is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallsHandoff {
    /// The number the Actor's last request got: its requests are numbered
    /// by the Actor, wherever it is.
    pub last: CallId,
    /// The requests still open, in number order, each with the time left
    /// until its deadline at capture. At most [`CallsHandoff::OPEN_MAX`].
    pub open: Vec<(CallId, std::time::Duration)>,
}

impl CallsHandoff {
    /// How many requests one Actor may have open at once.
    pub const OPEN_MAX: u16 = 256;
}

/// An Actor's timers as a relocation carries them (docs/actors.md
/// "Timers"): each as the time it had left at capture, never as a clock
/// reading, so it fires on the target no sooner than it would have at the
/// source, and late by at most the move's pause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimersHandoff {
    /// The number the Actor's next timer gets: numbers are never reused.
    pub next: TimerId,
    /// The pending timers, in number order. At most
    /// [`TimerHandoff::PER_ACTOR_MAX`].
    pub timers: Vec<TimerHandoff>,
}

/// One pending timer of a relocating Actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerHandoff {
    /// The timer.
    pub timer: TimerId,
    /// Time left until its next tick, at capture.
    pub remaining: std::time::Duration,
    /// `Some(period)` for a repeating timer.
    pub period: Option<std::time::Duration>,
    /// Ticks delivered so far: the next tick's number is one more. Whether
    /// the last one is still to run is in the saved work (a
    /// [`SavedWork::Timer`] of it).
    pub ticks: u64,
}

impl TimerHandoff {
    /// How many timers one Actor may have pending at once.
    pub const PER_ACTOR_MAX: u16 = 64;
}

/// Command 61: the target's relay-ready reply to 60 (§8.1 "temporary
/// queue/Restore ready · source still owner"), or why it is not ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationReady {
    /// The 60 this answers.
    pub request: RequestId,
    /// Ready, or the typed failure.
    pub outcome: Result<(), Error>,
}

/// Command 62: one item of the ingress hold (§8.1 "post-capture ingress
/// hold"), in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationIngressHold {
    /// The relocation.
    pub relocation: RelocationId,
    /// The Actor (the target's shard is chosen by it).
    pub actor: ActorId,
    /// The item.
    pub work: SavedWork,
}

/// Command 63: cutover, the ingress hold is complete (§8.1 "\[send\] cutover ·
/// pre-boundary relay sent").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationCutover {
    /// The relocation.
    pub relocation: RelocationId,
    /// The Actor.
    pub actor: ActorId,
}

/// Command 64: the coordinator aborted before relay-ready was accepted and
/// confirmed the durable abort; the target drops what it prepared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationDiscard {
    /// The relocation.
    pub relocation: RelocationId,
    /// The Actor.
    pub actor: ActorId,
}

/// Command 65: the target tells the coordinator how the relocation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocationFinished {
    /// The relocation.
    pub relocation: RelocationId,
    /// The Actor (the source's shard is chosen by it).
    pub actor: ActorId,
    /// The Actor's new route after the CAS, or why the target discarded.
    pub outcome: Result<BoundRoute, Error>,
}

impl Field for BindingHandoff {
    fn put(&self, dst: &mut BytesMut) {
        self.session.put(dst);
        self.session_lease.put(dst);
        self.binding.put(dst);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            session: r.get()?,
            session_lease: r.get()?,
            binding: r.get()?,
        })
    }
}

const DELIVER: u8 = 1;
const DISCONNECT: u8 = 2;
const BOUND: u8 = 3;
const TOMBSTONE: u8 = 4;
const TIMER: u8 = 5;
const CALL: u8 = 6;
const CALL_OUTCOME: u8 = 7;

impl Field for SavedWork {
    fn put(&self, dst: &mut BytesMut) {
        match self {
            SavedWork::Deliver {
                request,
                key,
                correlation,
                sequence,
                payload,
            } => {
                dst.put_u8(DELIVER);
                request.put(dst);
                key.put(dst);
                correlation.put(dst);
                sequence.put(dst);
                payload.put(dst);
            }
            SavedWork::Disconnect { request, session } => {
                dst.put_u8(DISCONNECT);
                request.put(dst);
                session.put(dst);
            }
            SavedWork::Bound { session } => {
                dst.put_u8(BOUND);
                session.put(dst);
            }
            SavedWork::Timer { timer, tick } => {
                dst.put_u8(TIMER);
                timer.put(dst);
                dst.put_u64(*tick);
            }
            SavedWork::Call {
                request,
                from,
                key,
                payload,
            } => {
                dst.put_u8(CALL);
                request.put(dst);
                from.put(dst);
                key.put(dst);
                payload.put(dst);
            }
            SavedWork::CallOutcome { call, outcome } => {
                dst.put_u8(CALL_OUTCOME);
                call.put(dst);
                outcome.put(dst);
            }
            SavedWork::Tombstone {
                session,
                binding,
                cause,
            } => {
                dst.put_u8(TOMBSTONE);
                session.put(dst);
                binding.put(dst);
                cause.put(dst);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match r.u8()? {
            DELIVER => SavedWork::Deliver {
                request: r.get()?,
                key: r.get()?,
                correlation: r.get()?,
                sequence: r.get()?,
                payload: r.get()?,
            },
            DISCONNECT => SavedWork::Disconnect {
                request: r.get()?,
                session: r.get()?,
            },
            BOUND => SavedWork::Bound { session: r.get()? },
            TOMBSTONE => SavedWork::Tombstone {
                session: r.get()?,
                binding: r.get()?,
                cause: r.get()?,
            },
            TIMER => SavedWork::Timer {
                timer: r.get()?,
                tick: r.u64()?,
            },
            CALL => SavedWork::Call {
                request: r.get()?,
                from: r.get()?,
                key: r.get()?,
                payload: r.get()?,
            },
            CALL_OUTCOME => SavedWork::CallOutcome {
                call: r.get()?,
                outcome: r.get()?,
            },
            other => return Err(WireError::UnknownSavedWork(other)),
        })
    }
}

/// The state snapshot: a payload whose length is checked against
/// [`DecodeLimits::handoff_state_len_max`](crate::wire::DecodeLimits) before
/// it is sliced.
fn get_state(r: &mut Reader<'_>) -> Result<Bytes, WireError> {
    let len = r.u32()?;
    let max = r.limits().handoff_state_len_max;
    if len > max {
        return Err(WireError::StateTooLong { len, max });
    }
    r.take(usize::try_from(len).unwrap_or(usize::MAX))
}

/// `[u16 count][items]`. The count is checked against
/// [`DecodeLimits::saved_work_count_max`](crate::wire::DecodeLimits) before
/// the first item is read, and nothing is reserved for it: the list grows
/// only by items that are really in the frame.
fn get_saved(r: &mut Reader<'_>) -> Result<Vec<SavedWork>, WireError> {
    let count = r.u16()?;
    let max = r.limits().saved_work_count_max;
    if count > max {
        return Err(WireError::TooMuchSavedWork { count, max });
    }
    let mut saved = Vec::new();
    for _ in 0..count {
        saved.push(r.get()?);
    }
    Ok(saved)
}

/// A duration as whole microseconds.
fn put_micros(duration: std::time::Duration, dst: &mut BytesMut) {
    dst.put_u64(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
}

impl Field for TimersHandoff {
    /// `[u64 next][u16 count]` then per timer `[u64 id][u64 remaining µs]
    /// [u64 period µs, 0 for one-shot][u64 ticks]`.
    fn put(&self, dst: &mut BytesMut) {
        self.next.put(dst);
        // The core never holds more than `PER_ACTOR_MAX`; a longer list
        // saturates the count and the receiver refuses the record.
        dst.put_u16(u16::try_from(self.timers.len()).unwrap_or(u16::MAX));
        for timer in &self.timers {
            timer.timer.put(dst);
            put_micros(timer.remaining, dst);
            put_micros(timer.period.unwrap_or_default(), dst);
            dst.put_u64(timer.ticks);
        }
    }

    /// The count is checked before the first timer is read; nothing is
    /// reserved for it.
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let next = r.get()?;
        let count = r.u16()?;
        let max = TimerHandoff::PER_ACTOR_MAX;
        if count > max {
            return Err(WireError::TooManyTimers { count, max });
        }
        let mut timers = Vec::new();
        for _ in 0..count {
            let timer = r.get()?;
            let remaining = std::time::Duration::from_micros(r.u64()?);
            let period =
                Some(std::time::Duration::from_micros(r.u64()?)).filter(|period| !period.is_zero());
            let ticks = r.u64()?;
            timers.push(TimerHandoff {
                timer,
                remaining,
                period,
                ticks,
            });
        }
        Ok(Self { next, timers })
    }
}

impl Field for CallsHandoff {
    /// `[u64 last][u16 count]` then per open request `[u64 call][u64
    /// remaining µs]`.
    fn put(&self, dst: &mut BytesMut) {
        self.last.put(dst);
        // The core never holds more than `OPEN_MAX`; a longer list saturates
        // the count and the receiver refuses the record.
        dst.put_u16(u16::try_from(self.open.len()).unwrap_or(u16::MAX));
        for (call, remaining) in &self.open {
            call.put(dst);
            put_micros(*remaining, dst);
        }
    }

    /// The count is checked before the first request is read.
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let last = r.get()?;
        let count = r.u16()?;
        let max = Self::OPEN_MAX;
        if count > max {
            return Err(WireError::TooManyOpenCalls { count, max });
        }
        let mut open = Vec::new();
        for _ in 0..count {
            let call = r.get()?;
            open.push((call, std::time::Duration::from_micros(r.u64()?)));
        }
        Ok(Self { last, open })
    }
}

/// The variant byte of a command that has one variant.
const ONLY: u8 = 1;

impl Body for RelocationPrepare {
    const COMMAND: Command = Command::RelocationPrepare;

    fn variant(&self) -> u8 {
        ONLY
    }

    fn put_body(&self, dst: &mut BytesMut) {
        self.request.put(dst);
        self.relocation.put(dst);
        self.actor.put(dst);
        self.object_generation.put(dst);
        self.expected_authority.put(dst);
        self.binding.put(dst);
        self.state.put(dst);
        // The coordinator never builds more than `saved_work_count_max`
        // items (docs/relocation.md); a list past u16 saturates the count,
        // and the receiver refuses the record (trailing bytes).
        dst.put_u16(u16::try_from(self.saved.len()).unwrap_or(u16::MAX));
        for work in &self.saved {
            work.put(dst);
        }
        self.timers.put(dst);
        self.calls.put(dst);
    }

    fn get_body(variant: u8, r: &mut Reader<'_>) -> Result<Self, WireError> {
        if variant != ONLY {
            return Err(Self::unknown(variant));
        }
        Ok(Self {
            request: r.get()?,
            relocation: r.get()?,
            actor: r.get()?,
            object_generation: r.get()?,
            expected_authority: r.get()?,
            binding: r.get()?,
            state: get_state(r)?,
            saved: get_saved(r)?,
            timers: r.get()?,
            calls: r.get()?,
        })
    }
}

one_variant_body!(RelocationReady { request, outcome });

one_variant_body!(RelocationIngressHold {
    relocation,
    actor,
    work
});

one_variant_body!(RelocationCutover { relocation, actor });
one_variant_body!(RelocationDiscard { relocation, actor });

one_variant_body!(RelocationFinished {
    relocation,
    actor,
    outcome
});
