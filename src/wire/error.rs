//! What a peer or a client can get wrong on the wire: one variant per way a
//! byte string fails to be a frame (docs/wire.md "Decoding rules").
//!
//! The transport checks frame shape once, at ingress (§2 table, §8.1); this
//! enum is that check's vocabulary. Hostile input is never an assertion or a
//! panic: every byte string decodes or yields exactly one of these.

use crate::error::{ErrorKind, Reason};
use crate::ids::NameError;
use crate::wire::node::Command;

/// Why bytes are not a valid client frame or node record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The frame ended inside a field: it needs `need` more bytes, `have` remain.
    #[error("frame truncated: a field needs {need} bytes, {have} remain")]
    Truncated {
        /// Bytes the next field needs.
        need: usize,
        /// Bytes left in the frame.
        have: usize,
    },
    /// The length prefix exceeds the limit; seen before any byte is buffered.
    #[error("frame length {len} exceeds the limit {max}")]
    FrameTooLong {
        /// The announced length (saturated to `u32::MAX`).
        len: u32,
        /// The configured [`DecodeLimits::frame_len_max`](crate::wire::DecodeLimits).
        max: u32,
    },
    /// The command byte names no command of the §5 table.
    #[error("unknown node command {0}")]
    UnknownCommand(u8),
    /// Command 45 is reserved: neither sent nor accepted (§5, §8.2).
    #[error("reserved command 45 refused")]
    ReservedCommand,
    /// The variant byte names no variant of that command.
    #[error("unknown variant {variant} of command {command:?}")]
    UnknownVariant {
        /// The command.
        command: Command,
        /// The variant byte.
        variant: u8,
    },
    /// The kind byte names no client frame kind.
    #[error("unknown client frame kind {0}")]
    UnknownFrameKind(u8),
    /// A client frame's flags byte is not zero (no flag is defined yet).
    #[error("client frame flags {0:#04x} are not defined")]
    InvalidFlags(u8),
    /// An ActorId or MeshName is empty, too long, or not UTF-8.
    #[error("bad {name}: {source}")]
    BadName {
        /// Which kind of name.
        name: &'static str,
        /// What is wrong with it.
        #[source]
        source: NameError,
    },
    /// The error-kind byte names no [`ErrorKind`].
    #[error("unknown error kind code {0}")]
    UnknownErrorKind(u8),
    /// The reason byte names no [`Reason`].
    #[error("unknown error reason code {0}")]
    UnknownReason(u8),
    /// The reason belongs to another kind than the one the frame states.
    #[error("reason {reason:?} is not of kind {kind:?}")]
    ReasonKindMismatch {
        /// The kind the frame states.
        kind: ErrorKind,
        /// The reason the frame carries.
        reason: Reason,
    },
    /// The close-reason byte names no `CloseReason`.
    #[error("unknown close reason code {0}")]
    UnknownCloseReason(u8),
    /// The tombstone-cause byte names no `TombstoneCause`.
    #[error("unknown tombstone cause code {0}")]
    UnknownTombstoneCause(u8),
    /// A presence byte of an optional field is neither 0 nor 1.
    #[error("presence byte {0} is neither 0 nor 1")]
    InvalidPresence(u8),
    /// An outcome tag is neither 0 (ok) nor 1 (error).
    #[error("outcome tag {0} is neither 0 (ok) nor 1 (error)")]
    InvalidOutcome(u8),
    /// A request budget is above the configured maximum.
    #[error("request budget {budget_ms} ms exceeds the limit {max_ms} ms")]
    BudgetOutOfRange {
        /// The budget the record asks for.
        budget_ms: u32,
        /// The configured [`DecodeLimits::budget_max_ms`](crate::wire::DecodeLimits).
        max_ms: u32,
    },
    /// A relocation prepare's state snapshot is longer than the limit.
    #[error("handoff state of {len} bytes exceeds the limit {max}")]
    StateTooLong {
        /// The announced length.
        len: u32,
        /// The configured [`DecodeLimits::handoff_state_len_max`](crate::wire::DecodeLimits).
        max: u32,
    },
    /// A relocation prepare announces more saved-work items than the limit.
    #[error("{count} saved-work items exceed the limit {max}")]
    TooMuchSavedWork {
        /// The announced count.
        count: u16,
        /// The configured [`DecodeLimits::saved_work_count_max`](crate::wire::DecodeLimits).
        max: u16,
    },
    /// A saved-work item's tag names no kind of saved work.
    #[error("unknown saved-work kind {0}")]
    UnknownSavedWork(u8),
    /// A relocation prepare announces more open requests than an Actor may
    /// have.
    #[error("{count} open requests exceed the limit {max}")]
    TooManyOpenCalls {
        /// The announced count.
        count: u16,
        /// The wire's `CallsHandoff::OPEN_MAX`.
        max: u16,
    },
    /// A relocation prepare announces more timers than an Actor may have.
    #[error("{count} timers exceed the limit {max}")]
    TooManyTimers {
        /// The announced count.
        count: u16,
        /// The wire's `TimerHandoff::PER_ACTOR_MAX`.
        max: u16,
    },
    /// An error's detail text is longer than [`Error::DETAIL_MAX`](crate::error::Error::DETAIL_MAX).
    #[error("error detail of {len} bytes exceeds the limit {max}")]
    ErrorDetailTooLong {
        /// The announced length.
        len: u16,
        /// The bound.
        max: u16,
    },
    /// An error's detail is not one the encoder writes: a code on a
    /// framework error, a detail with neither code nor text (written as
    /// none), or a text that is not UTF-8.
    #[error("invalid error detail: {0}")]
    InvalidErrorDetail(&'static str),
    /// Bytes remain after the body: the frame is longer than its record.
    #[error("{len} trailing bytes after the body")]
    TrailingBytes {
        /// How many bytes are left over.
        len: usize,
    },
}
