//! The bounds every decoder enforces (DESIGN "wire": total decoding with
//! bounded sizes; TIGER_STYLE "put a limit on everything").
//!
//! A decoder never allocates: payloads and names are zero-copy slices of the
//! input frame, and a frame is refused from its length prefix alone, before
//! any of it is buffered, when it is longer than [`DecodeLimits::frame_len_max`].
//! The one list on the wire, the saved work of a relocation prepare (60), is
//! bounded by [`DecodeLimits::saved_work_count_max`] before its first item is
//! read.

/// The limits a decoder applies to untrusted input. Node links and client
/// sockets may be given different limits (clients are the less trusted side).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodeLimits {
    /// The largest accepted frame, counted after the 4-byte length prefix.
    /// At the limit the frame is accepted; one byte more is
    /// [`WireError::FrameTooLong`](crate::wire::WireError::FrameTooLong).
    pub frame_len_max: u32,
    /// The largest request budget a peer may ask for, in milliseconds. It
    /// bounds how long a receiver keeps a request's state on a peer's word.
    pub budget_max_ms: u32,
    /// The largest Actor state snapshot a relocation prepare (60) may carry.
    /// At the limit it is accepted; one byte more is
    /// [`WireError::StateTooLong`](crate::wire::WireError::StateTooLong).
    pub handoff_state_len_max: u32,
    /// The most saved-work items one relocation prepare (60) may carry; each
    /// becomes a queued delivery at the target, so the count bounds what a
    /// peer can make a target hold. One more is
    /// [`WireError::TooMuchSavedWork`](crate::wire::WireError::TooMuchSavedWork).
    pub saved_work_count_max: u16,
}

impl DecodeLimits {
    /// 64 KiB frames: a game message is small, and a bigger frame holds a
    /// link's other records back (head-of-line) for longer.
    pub const FRAME_LEN_MAX_DEFAULT: u32 = 64 * 1024;
    /// Ten minutes: far above any request deadline a game server sets, far
    /// below the 49 days a `u32` of milliseconds could name.
    pub const BUDGET_MAX_MS_DEFAULT: u32 = 10 * 60 * 1_000;
    /// 32 KiB: half a default frame, leaving the other half for the saved
    /// work that travels in the same record.
    pub const HANDOFF_STATE_LEN_MAX_DEFAULT: u32 = 32 * 1024;
    /// 1,024 items: an Actor's delivery lane holds far fewer in a healthy
    /// game (each item is at least 13 bytes, so a full default frame could
    /// not carry many more anyway).
    pub const SAVED_WORK_COUNT_MAX_DEFAULT: u16 = 1_024;
}

impl DecodeLimits {
    /// The most bytes a node record adds around the payloads it carries:
    /// its header, command and variant, fixed-width ids and generations,
    /// the request header, and the longest names (an ActorId of 255 bytes,
    /// a MeshName). `tests/wire_node.rs` checks every record but the
    /// prepare (60, bounded on its own) against it.
    pub const RECORD_ENVELOPE_MAX: u32 = 4 * 1024;

    /// The largest client frame a node may be configured to accept
    /// (16 MiB): the mesh-wide bound on what a link record carries.
    pub const FRAME_LEN_MAX_CEILING: u32 = 16 * 1024 * 1024;

    /// The limits for node links: a link frame may be
    /// [`Self::RECORD_ENVELOPE_MAX`] longer than the largest client frame
    /// any node may accept ([`Self::FRAME_LEN_MAX_CEILING`]), whatever this
    /// node's own client limit. So every client frame a node accepts can
    /// cross a link inside its record, to a peer configured with a smaller
    /// client limit too, and no client can make a peer drop a link
    /// (docs/wire.md "Limits"). Bounding links by this node's own client
    /// limit let a client of a node with a larger one close the links of
    /// its peers. The other bounds are this node's.
    pub fn for_links(self) -> Self {
        Self {
            frame_len_max: Self::FRAME_LEN_MAX_CEILING + Self::RECORD_ENVELOPE_MAX,
            ..self
        }
    }

    /// Whether the client frame limit is one a node may run with: from 1
    /// byte to [`Self::FRAME_LEN_MAX_CEILING`].
    pub fn frame_len_max_allowed(self) -> bool {
        (1..=Self::FRAME_LEN_MAX_CEILING).contains(&self.frame_len_max)
    }
}

// The state limit leaves room in a default frame for the rest of the record.
const _: () =
    assert!(DecodeLimits::HANDOFF_STATE_LEN_MAX_DEFAULT < DecodeLimits::FRAME_LEN_MAX_DEFAULT);

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            frame_len_max: Self::FRAME_LEN_MAX_DEFAULT,
            budget_max_ms: Self::BUDGET_MAX_MS_DEFAULT,
            handoff_state_len_max: Self::HANDOFF_STATE_LEN_MAX_DEFAULT,
            saved_work_count_max: Self::SAVED_WORK_COUNT_MAX_DEFAULT,
        }
    }
}
