//! Node-link handshake frames (docs/wire.md "Node links"): the three frames
//! that open a ROUTER link before any record flows.
//!
//! A dialer sends [`LinkFrame::Hello`], the acceptor answers
//! [`LinkFrame::Welcome`] with its proof, the dialer ends with
//! [`LinkFrame::Proof`]. The proofs are HMACs keyed by the cluster secret
//! (net layer, `net::handshake`); this module only carries the bytes. Kind
//! bytes 0xA1–0xA3 never collide with a record's command byte, so a link that
//! mixes the two phases fails loudly instead of misreading.

use bytes::{BufMut, Bytes, BytesMut};

use super::codec::{self, Field, Reader};
use super::{DecodeLimits, WireError};
use crate::ids::{MeshName, NodeGeneration, NodeRid};

/// Bytes of a handshake nonce.
pub const NONCE_LEN: usize = 16;
/// Bytes of a handshake proof (HMAC-SHA256).
pub const PROOF_LEN: usize = 32;

const KIND_HELLO: u8 = 0xA1;
const KIND_WELCOME: u8 = 0xA2;
const KIND_PROOF: u8 = 0xA3;
/// The protocol version a node speaks on its links.
pub const LINK_VERSION: u8 = 1;

/// Who a node says it is on a link (§2 "Authenticated peer RID/node
/// generation").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkIdentity {
    /// The mesh the link belongs to.
    pub mesh: MeshName,
    /// The node.
    pub rid: NodeRid,
    /// Its process lifecycle.
    pub generation: NodeGeneration,
}

/// One handshake frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkFrame {
    /// Dialer → acceptor: who I am, and a fresh nonce.
    Hello {
        /// The link protocol version.
        version: u8,
        /// The dialer.
        identity: LinkIdentity,
        /// The dialer's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Acceptor → dialer: who I am, my nonce, and proof that I hold the secret.
    Welcome {
        /// The acceptor.
        identity: LinkIdentity,
        /// The acceptor's nonce.
        nonce: [u8; NONCE_LEN],
        /// HMAC over both identities and nonces.
        proof: [u8; PROOF_LEN],
    },
    /// Dialer → acceptor: proof that the dialer holds the secret.
    Proof {
        /// HMAC over both identities and nonces.
        proof: [u8; PROOF_LEN],
    },
}

impl Field for LinkIdentity {
    fn put(&self, dst: &mut BytesMut) {
        self.mesh.put(dst);
        self.rid.put(dst);
        self.generation.put(dst);
    }

    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            mesh: r.get()?,
            rid: r.get()?,
            generation: r.get()?,
        })
    }
}

impl LinkIdentity {
    /// Appends the identity's encoding (a handshake proof covers it).
    pub fn encode_into(&self, dst: &mut BytesMut) {
        self.put(dst);
    }
}

fn get_array<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], WireError> {
    let bytes = r.take(N)?;
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes);
    Ok(out)
}

impl LinkFrame {
    /// Appends the whole length-prefixed frame to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        codec::put_frame(dst, |dst| match self {
            LinkFrame::Hello {
                version,
                identity,
                nonce,
            } => {
                dst.put_u8(KIND_HELLO);
                dst.put_u8(*version);
                identity.put(dst);
                dst.put_slice(nonce);
            }
            LinkFrame::Welcome {
                identity,
                nonce,
                proof,
            } => {
                dst.put_u8(KIND_WELCOME);
                identity.put(dst);
                dst.put_slice(nonce);
                dst.put_slice(proof);
            }
            LinkFrame::Proof { proof } => {
                dst.put_u8(KIND_PROOF);
                dst.put_slice(proof);
            }
        });
    }

    /// Decodes one complete frame body (the bytes after the length prefix).
    pub fn decode(frame: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        codec::check_frame_len(frame.len(), limits)?;
        let mut r = Reader::new(frame, limits);
        let frame = match r.u8()? {
            KIND_HELLO => LinkFrame::Hello {
                version: r.u8()?,
                identity: r.get()?,
                nonce: get_array(&mut r)?,
            },
            KIND_WELCOME => LinkFrame::Welcome {
                identity: r.get()?,
                nonce: get_array(&mut r)?,
                proof: get_array(&mut r)?,
            },
            KIND_PROOF => LinkFrame::Proof {
                proof: get_array(&mut r)?,
            },
            other => return Err(WireError::UnknownFrameKind(other)),
        };
        r.finish()?;
        Ok(frame)
    }

    /// Splits one frame off a link's receive buffer; `Ok(None)` while it is
    /// incomplete.
    pub fn decode_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Self>, WireError> {
        match codec::split_frame(buf, limits)? {
            None => Ok(None),
            Some(frame) => Self::decode(frame, limits).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> LinkIdentity {
        LinkIdentity {
            mesh: MeshName::new("mesh").unwrap(),
            rid: NodeRid(7),
            generation: NodeGeneration(99),
        }
    }

    #[test]
    fn every_frame_round_trips_and_every_strict_prefix_is_truncated() {
        let frames = [
            LinkFrame::Hello {
                version: LINK_VERSION,
                identity: identity(),
                nonce: [3; NONCE_LEN],
            },
            LinkFrame::Welcome {
                identity: identity(),
                nonce: [4; NONCE_LEN],
                proof: [5; PROOF_LEN],
            },
            LinkFrame::Proof {
                proof: [6; PROOF_LEN],
            },
        ];
        let limits = DecodeLimits::default();
        for frame in frames {
            let mut buf = BytesMut::new();
            frame.encode(&mut buf);
            let whole = buf.clone().freeze();
            assert_eq!(
                LinkFrame::decode_from(&mut buf, &limits).unwrap(),
                Some(frame)
            );
            assert!(buf.is_empty());
            for cut in 4..whole.len() - 1 {
                let body = whole.slice(4..cut);
                assert!(matches!(
                    LinkFrame::decode(body, &limits),
                    Err(WireError::Truncated { .. })
                ));
            }
        }
    }

    #[test]
    fn a_record_is_not_a_handshake_frame() {
        let limits = DecodeLimits::default();
        let body = Bytes::from_static(&[24, 1, 0, 0]);
        assert_eq!(
            LinkFrame::decode(body, &limits),
            Err(WireError::UnknownFrameKind(24))
        );
    }
}
