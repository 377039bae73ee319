//! Node-link handshake frames (docs/wire.md "Node links"): the three frames
//! that open a ROUTER link before any record flows.
//!
//! A dialer sends [`LinkFrame::Hello`], the acceptor answers
//! [`LinkFrame::Welcome`] with its proof, the dialer ends with
//! [`LinkFrame::Proof`]; an acceptor that does not speak the Hello's version
//! answers [`LinkFrame::VersionRefused`] instead of a Welcome. The proofs are
//! HMACs keyed by the cluster secret (net layer, `net::handshake`); this
//! module only carries the bytes. Kind bytes 0xA1–0xA4 never collide with a
//! record's command byte, so a link that mixes the two phases fails loudly
//! instead of misreading.
//!
//! Every version keeps the first bytes of these frames where they are: the
//! kind, then the version, and in a Hello the identity after it
//! ([`peek_version`], [`hello_identity`]), so a node of any version can
//! refuse another version by name instead of failing to decode the rest
//! (docs/wire.md "Node-link handshake frames").

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
const KIND_VERSION_REFUSED: u8 = 0xA4;
/// The protocol version a node speaks on its links: the handshake frames and
/// every record after them (docs/operations.md "Versions"). Two nodes link
/// only when they speak the same one. 2: the Welcome carries the version,
/// the proofs cover it, and `VersionRefused` exists. 3: every `Error` in a
/// record carries an optional detail (the application's code and text, or
/// what the error is about; docs/wire.md "Primitive fields"), the 60
/// carries the Actor's ledger of open requests (`CallsHandoff`), and a 70
/// may come from node code (no sender). 4: command 71 (BindOrGet asked of
/// the node owning the Actor's row): a node of version 3 would drop it.
pub const LINK_VERSION: u8 = 4;

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
        /// The link protocol version (the acceptor's, equal to the Hello's).
        version: u8,
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
    /// Acceptor → dialer, instead of a Welcome: the Hello's version is not
    /// the acceptor's, which closes the link after it. Unauthenticated: it
    /// only lets the dialer log why (no secret is proved by either side).
    VersionRefused {
        /// The version the acceptor speaks.
        version: u8,
    },
}

/// The version byte of a Hello, Welcome or VersionRefused body, read before
/// the rest is decoded: its place is the same in every version.
pub fn peek_version(body: &[u8]) -> Option<u8> {
    match body {
        [KIND_HELLO | KIND_WELCOME | KIND_VERSION_REFUSED, version, ..] => Some(*version),
        _ => None,
    }
}

/// The identity a Hello body names, decoded from its fixed prefix (kind,
/// version, identity) whatever follows it: a Hello of another version is
/// refused naming its node.
pub fn hello_identity(body: &Bytes, limits: &DecodeLimits) -> Option<LinkIdentity> {
    if body.first() != Some(&KIND_HELLO) || body.len() < 2 {
        return None;
    }
    Reader::new(body.slice(2..), limits).get().ok()
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
    let mut out = [0u8; N];
    out.copy_from_slice(r.slice(N)?);
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
                version,
                identity,
                nonce,
                proof,
            } => {
                dst.put_u8(KIND_WELCOME);
                dst.put_u8(*version);
                identity.put(dst);
                dst.put_slice(nonce);
                dst.put_slice(proof);
            }
            LinkFrame::Proof { proof } => {
                dst.put_u8(KIND_PROOF);
                dst.put_slice(proof);
            }
            LinkFrame::VersionRefused { version } => {
                dst.put_u8(KIND_VERSION_REFUSED);
                dst.put_u8(*version);
            }
        });
    }

    /// Decodes one complete frame body (the bytes after the length prefix).
    pub fn decode(frame: Bytes, limits: &DecodeLimits) -> Result<Self, WireError> {
        codec::check_frame_len(frame.len(), limits)?;
        Self::read(Reader::new(frame, limits))
    }

    /// The fields of one frame, to the end of the frame.
    fn read(mut r: Reader<'_>) -> Result<Self, WireError> {
        let frame = match r.u8()? {
            KIND_HELLO => LinkFrame::Hello {
                version: r.u8()?,
                identity: r.get()?,
                nonce: get_array(&mut r)?,
            },
            KIND_WELCOME => LinkFrame::Welcome {
                version: r.u8()?,
                identity: r.get()?,
                nonce: get_array(&mut r)?,
                proof: get_array(&mut r)?,
            },
            KIND_PROOF => LinkFrame::Proof {
                proof: get_array(&mut r)?,
            },
            KIND_VERSION_REFUSED => LinkFrame::VersionRefused { version: r.u8()? },
            other => return Err(WireError::UnknownFrameKind(other)),
        };
        r.finish()?;
        Ok(frame)
    }

    /// Splits one frame body off a link's receive buffer, undecoded (its
    /// version is read first: [`peek_version`]); `Ok(None)` while it is
    /// incomplete.
    pub fn split_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Bytes>, WireError> {
        codec::split_frame(buf, limits)
    }

    /// Splits one frame off a link's receive buffer; `Ok(None)` while it is
    /// incomplete.
    #[cfg(feature = "testing")]
    pub fn decode_from(
        buf: &mut BytesMut,
        limits: &DecodeLimits,
    ) -> Result<Option<Self>, WireError> {
        codec::read_whole_frame(buf, limits, Self::read)
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
                version: LINK_VERSION,
                identity: identity(),
                nonce: [4; NONCE_LEN],
                proof: [5; PROOF_LEN],
            },
            LinkFrame::Proof {
                proof: [6; PROOF_LEN],
            },
            LinkFrame::VersionRefused { version: 9 },
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
            for cut in 4..whole.len() {
                let body = whole.slice(4..cut);
                assert!(matches!(
                    LinkFrame::decode(body, &limits),
                    Err(WireError::Truncated { .. })
                ));
            }
        }
    }

    #[test]
    fn the_version_and_a_hellos_identity_are_read_before_the_rest() {
        let limits = DecodeLimits::default();
        let mut buf = BytesMut::new();
        LinkFrame::Hello {
            version: 200,
            identity: identity(),
            nonce: [3; NONCE_LEN],
        }
        .encode(&mut buf);
        // A later version's Hello with more after the identity.
        buf.extend_from_slice(&[1, 2, 3]);
        let body = buf.freeze().slice(4..);
        assert!(LinkFrame::decode(body.clone(), &limits).is_err());
        assert_eq!(peek_version(&body), Some(200));
        assert_eq!(hello_identity(&body, &limits), Some(identity()));
        assert_eq!(peek_version(&[KIND_PROOF, 1]), None);
        assert_eq!(peek_version(&[KIND_WELCOME]), None);
        assert_eq!(
            hello_identity(&Bytes::from_static(&[KIND_HELLO]), &limits),
            None
        );
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
