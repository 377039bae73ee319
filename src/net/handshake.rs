//! The ROUTER link handshake (docs/threading.md "Node links"): both ends
//! prove they hold the cluster secret, and each learns the other's mesh name,
//! NodeRid and NodeGeneration — the identity the transport attributes every
//! later record to (§2 "Transport ingress").
//!
//! Sans-IO: [`Dialer`] and [`Acceptor`] turn received frames into frames to
//! send and, at the end, the authenticated [`LinkIdentity`] of the peer. A
//! proof is HMAC-SHA256 over both identities and both fresh nonces, so a
//! recorded handshake cannot be replayed into a new link.

use bytes::BytesMut;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN, PROOF_LEN};

type HmacSha256 = Hmac<Sha256>;

/// Shortest accepted cluster secret, in bytes.
pub const SECRET_LEN_MIN: usize = 16;

/// The shared secret every node of a cluster holds.
#[derive(Clone)]
pub struct ClusterSecret(Vec<u8>);

impl ClusterSecret {
    /// A secret of at least [`SECRET_LEN_MIN`] bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, HandshakeError> {
        let bytes = bytes.into();
        if bytes.len() < SECRET_LEN_MIN {
            return Err(HandshakeError::SecretTooShort { len: bytes.len() });
        }
        Ok(Self(bytes))
    }
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a handshake failed; the link is closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The secret is too short to be a secret.
    #[error("the cluster secret is {len} bytes; at least 16 are required")]
    SecretTooShort {
        /// Its length.
        len: usize,
    },
    /// The peer sent a frame that does not belong at this step.
    #[error("unexpected handshake frame")]
    Unexpected,
    /// The peer speaks another link protocol version.
    #[error("link protocol version {0} is not supported")]
    Version(u8),
    /// The peer belongs to another mesh.
    #[error("the peer is in mesh {theirs}, this node in {ours}")]
    MeshMismatch {
        /// This node's mesh.
        ours: String,
        /// The peer's.
        theirs: String,
    },
    /// The peer is this node itself.
    #[error("a node cannot link to itself")]
    SelfLink,
    /// The peer's proof is wrong: it does not hold the cluster secret.
    #[error("the peer's proof is wrong (cluster secrets differ)")]
    BadProof,
}

fn proof(
    secret: &ClusterSecret,
    label: &[u8],
    dialer: (&LinkIdentity, &[u8; NONCE_LEN]),
    acceptor: (&LinkIdentity, &[u8; NONCE_LEN]),
) -> HmacSha256 {
    // A key of any length is accepted by HMAC; the error arm cannot be taken.
    let mut mac = HmacSha256::new_from_slice(&secret.0)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key"));
    let mut transcript = BytesMut::with_capacity(128);
    dialer.0.encode_into(&mut transcript);
    acceptor.0.encode_into(&mut transcript);
    mac.update(label);
    mac.update(&transcript);
    mac.update(dialer.1);
    mac.update(acceptor.1);
    mac
}

fn check_peer(ours: &LinkIdentity, theirs: &LinkIdentity) -> Result<(), HandshakeError> {
    if ours.mesh != theirs.mesh {
        return Err(HandshakeError::MeshMismatch {
            ours: ours.mesh.to_string(),
            theirs: theirs.mesh.to_string(),
        });
    }
    if ours.rid == theirs.rid {
        return Err(HandshakeError::SelfLink);
    }
    Ok(())
}

/// The dialing end.
#[derive(Debug)]
pub struct Dialer {
    secret: ClusterSecret,
    me: LinkIdentity,
    nonce: [u8; NONCE_LEN],
}

impl Dialer {
    /// Starts a handshake; returns the dialer and the Hello to send.
    pub fn start(
        secret: ClusterSecret,
        me: LinkIdentity,
        nonce: [u8; NONCE_LEN],
    ) -> (Self, LinkFrame) {
        let hello = LinkFrame::Hello {
            version: LINK_VERSION,
            identity: me.clone(),
            nonce,
        };
        (Self { secret, me, nonce }, hello)
    }

    /// Checks the Welcome; returns the Proof to send and the peer.
    pub fn on_welcome(self, frame: LinkFrame) -> Result<(LinkFrame, LinkIdentity), HandshakeError> {
        let LinkFrame::Welcome {
            identity,
            nonce,
            proof: theirs,
        } = frame
        else {
            return Err(HandshakeError::Unexpected);
        };
        check_peer(&self.me, &identity)?;
        proof(
            &self.secret,
            b"zlink-welcome",
            (&self.me, &self.nonce),
            (&identity, &nonce),
        )
        .verify_slice(&theirs)
        .map_err(|_| HandshakeError::BadProof)?;
        let mine = proof(
            &self.secret,
            b"zlink-proof",
            (&self.me, &self.nonce),
            (&identity, &nonce),
        );
        let mut out = [0u8; PROOF_LEN];
        out.copy_from_slice(&mine.finalize().into_bytes());
        Ok((LinkFrame::Proof { proof: out }, identity))
    }
}

/// The accepting end, after the Hello.
#[derive(Debug)]
pub struct Acceptor {
    secret: ClusterSecret,
    me: LinkIdentity,
    nonce: [u8; NONCE_LEN],
    peer: LinkIdentity,
    peer_nonce: [u8; NONCE_LEN],
}

impl Acceptor {
    /// Checks the Hello; returns the acceptor and the Welcome to send.
    pub fn on_hello(
        secret: ClusterSecret,
        me: LinkIdentity,
        nonce: [u8; NONCE_LEN],
        frame: LinkFrame,
    ) -> Result<(Self, LinkFrame), HandshakeError> {
        let LinkFrame::Hello {
            version,
            identity,
            nonce: peer_nonce,
        } = frame
        else {
            return Err(HandshakeError::Unexpected);
        };
        if version != LINK_VERSION {
            return Err(HandshakeError::Version(version));
        }
        check_peer(&me, &identity)?;
        let mine = proof(
            &secret,
            b"zlink-welcome",
            (&identity, &peer_nonce),
            (&me, &nonce),
        );
        let mut out = [0u8; PROOF_LEN];
        out.copy_from_slice(&mine.finalize().into_bytes());
        let welcome = LinkFrame::Welcome {
            identity: me.clone(),
            nonce,
            proof: out,
        };
        Ok((
            Self {
                secret,
                me,
                nonce,
                peer: identity,
                peer_nonce,
            },
            welcome,
        ))
    }

    /// The identity the Hello claimed, not yet proved: for log lines only.
    pub fn claimed(&self) -> &LinkIdentity {
        &self.peer
    }

    /// Checks the Proof; returns the authenticated peer.
    pub fn on_proof(self, frame: LinkFrame) -> Result<LinkIdentity, HandshakeError> {
        let LinkFrame::Proof { proof: theirs } = frame else {
            return Err(HandshakeError::Unexpected);
        };
        proof(
            &self.secret,
            b"zlink-proof",
            (&self.peer, &self.peer_nonce),
            (&self.me, &self.nonce),
        )
        .verify_slice(&theirs)
        .map_err(|_| HandshakeError::BadProof)?;
        Ok(self.peer)
    }
}

/// A fresh random nonce for a handshake.
pub fn fresh_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    if getrandom::fill(&mut nonce).is_err() {
        // Without an entropy source, fall back to the clock: still unique per
        // handshake, which is what replay protection needs here.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        nonce.copy_from_slice(&now.to_le_bytes());
    }
    nonce
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{MeshName, NodeGeneration, NodeRid};

    fn id(rid: u64, mesh: &str) -> LinkIdentity {
        LinkIdentity {
            mesh: MeshName::new(mesh).unwrap(),
            rid: NodeRid(rid),
            generation: NodeGeneration(rid * 10),
        }
    }

    fn secret(s: &str) -> ClusterSecret {
        ClusterSecret::new(s.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn both_ends_learn_the_other_when_secrets_match() {
        let (dialer, hello) = Dialer::start(secret("0123456789abcdef"), id(1, "m"), [1; NONCE_LEN]);
        let (acceptor, welcome) = Acceptor::on_hello(
            secret("0123456789abcdef"),
            id(2, "m"),
            [2; NONCE_LEN],
            hello,
        )
        .unwrap();
        let (proof, acceptor_id) = dialer.on_welcome(welcome).unwrap();
        assert_eq!(acceptor_id, id(2, "m"));
        assert_eq!(acceptor.on_proof(proof).unwrap(), id(1, "m"));
    }

    #[test]
    fn a_wrong_secret_mesh_or_self_link_is_refused() {
        let (dialer, hello) = Dialer::start(secret("0123456789abcdef"), id(1, "m"), [1; NONCE_LEN]);
        let (_, welcome) = Acceptor::on_hello(
            secret("fedcba9876543210"),
            id(2, "m"),
            [2; NONCE_LEN],
            hello.clone(),
        )
        .unwrap();
        assert_eq!(
            dialer.on_welcome(welcome).unwrap_err(),
            HandshakeError::BadProof
        );

        let (_, hello_other_mesh) =
            Dialer::start(secret("0123456789abcdef"), id(1, "x"), [1; NONCE_LEN]);
        assert!(matches!(
            Acceptor::on_hello(
                secret("0123456789abcdef"),
                id(2, "m"),
                [2; NONCE_LEN],
                hello_other_mesh
            ),
            Err(HandshakeError::MeshMismatch { .. })
        ));
        assert_eq!(
            Acceptor::on_hello(
                secret("0123456789abcdef"),
                id(1, "m"),
                [2; NONCE_LEN],
                hello
            )
            .unwrap_err(),
            HandshakeError::SelfLink
        );
        assert!(matches!(
            ClusterSecret::new(b"short".to_vec()),
            Err(HandshakeError::SecretTooShort { len: 5 })
        ));
    }

    #[test]
    fn a_dialer_with_the_wrong_secret_is_refused_by_the_acceptor() {
        let (dialer, hello) = Dialer::start(secret("fedcba9876543210"), id(1, "m"), [1; NONCE_LEN]);
        let (acceptor, welcome) = Acceptor::on_hello(
            secret("0123456789abcdef"),
            id(2, "m"),
            [2; NONCE_LEN],
            hello,
        )
        .unwrap();
        // The dialer would refuse the welcome; a forged proof is refused too.
        assert_eq!(
            dialer.on_welcome(welcome).unwrap_err(),
            HandshakeError::BadProof
        );
        let forged = LinkFrame::Proof {
            proof: [0; PROOF_LEN],
        };
        assert_eq!(
            acceptor.on_proof(forged).unwrap_err(),
            HandshakeError::BadProof
        );
    }
}
