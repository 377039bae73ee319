//! What a completion is about: the `user_data` of every submission (and,
//! on the epoll backend, the mio token of every readiness source: a
//! listener as `Accept`, a connection as `Recv`, the waker as `Wake`).
//!
//! A `user_data` packs the operation kind, the slot index and the low bits
//! of the slot's generation, so that a completion for a slot that has since
//! been reused is recognised and ignored. The reactor frees a slot only when
//! none of its operations is in flight, so a stale completion is a defect
//! this check contains, not a path the reactor relies on.

/// Which operation a completion belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpKind {
    /// The multishot accept of a listener (slot = listener index).
    Accept = 1,
    /// The multishot receive of a connection.
    Recv = 2,
    /// The one send in flight of a connection.
    Send = 3,
    /// The connect of an outgoing connection.
    Connect = 4,
    /// The close of a released descriptor; its result is not needed.
    Close = 5,
    /// A cancellation; its result is not needed.
    Cancel = 6,
    /// The read of the waker's eventfd.
    Wake = 7,
}

impl OpKind {
    fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            1 => Self::Accept,
            2 => Self::Recv,
            3 => Self::Send,
            4 => Self::Connect,
            5 => Self::Close,
            6 => Self::Cancel,
            7 => Self::Wake,
            _ => return None,
        })
    }
}

/// The generation bits a token carries.
const GENERATION_MASK: u32 = 0x00FF_FFFF;

/// A decoded `user_data`: kind, slot and the low 24 bits of the generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Token {
    pub(super) kind: OpKind,
    pub(super) slot: u32,
    generation_low: u32,
}

impl Token {
    /// The token for an operation on `slot` at `generation`.
    pub(super) fn new(kind: OpKind, slot: u32, generation: u32) -> Self {
        Self {
            kind,
            slot,
            generation_low: generation & GENERATION_MASK,
        }
    }

    /// Whether this token was made for `generation` of its slot.
    pub(super) fn is_for(self, generation: u32) -> bool {
        self.generation_low == generation & GENERATION_MASK
    }

    /// The packed form: kind in the top byte, generation, slot.
    pub(super) fn to_user_data(self) -> u64 {
        (u64::from(self.kind as u8) << 56)
            | (u64::from(self.generation_low) << 32)
            | u64::from(self.slot)
    }

    /// The token a completion carries, or `None` for a value no submission
    /// of this reactor made.
    pub(super) fn from_user_data(user_data: u64) -> Option<Self> {
        let kind = OpKind::from_bits((user_data >> 56) as u8)?;
        Some(Self {
            kind,
            slot: user_data as u32,
            generation_low: ((user_data >> 32) as u32) & GENERATION_MASK,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_through_user_data() {
        let token = Token::new(OpKind::Send, 0xABCD_EF01, 0x1234_5678);
        assert_eq!(Token::from_user_data(token.to_user_data()), Some(token));
        assert!(token.is_for(0x1234_5678));
        assert!(!token.is_for(0x1234_5679));
    }

    #[test]
    fn a_foreign_user_data_decodes_to_none() {
        assert_eq!(Token::from_user_data(0), None);
        assert_eq!(Token::from_user_data(u64::MAX), None);
    }
}
