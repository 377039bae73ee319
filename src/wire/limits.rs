//! The bounds every decoder enforces (DESIGN "wire": total decoding with
//! bounded sizes; TIGER_STYLE "put a limit on everything").
//!
//! A decoder never allocates: payloads and names are zero-copy slices of the
//! input frame, and a frame is refused from its length prefix alone, before
//! any of it is buffered, when it is longer than [`DecodeLimits::frame_len_max`].

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
}

impl DecodeLimits {
    /// 64 KiB frames: a game message is small, and a bigger frame holds a
    /// link's other records back (head-of-line) for longer.
    pub const FRAME_LEN_MAX_DEFAULT: u32 = 64 * 1024;
    /// Ten minutes: far above any request deadline a game server sets, far
    /// below the 49 days a `u32` of milliseconds could name.
    pub const BUDGET_MAX_MS_DEFAULT: u32 = 10 * 60 * 1_000;
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            frame_len_max: Self::FRAME_LEN_MAX_DEFAULT,
            budget_max_ms: Self::BUDGET_MAX_MS_DEFAULT,
        }
    }
}
