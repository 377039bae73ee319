//! The ROUTER link handshake (docs/threading.md "Node links"): both ends
//! prove they hold the cluster secret, and each learns the other's mesh name,
//! NodeRid and NodeGeneration — the identity the transport attributes every
//! later record to (§2 "Transport ingress").
//!
//! Sans-IO: [`Dialer`] and [`Acceptor`] turn received frames into frames to
//! send and, at the end, the authenticated [`LinkIdentity`] of the peer. A
//! proof is HMAC-SHA256 over the link version, both identities and both
//! fresh nonces, so a recorded handshake cannot be replayed into a new link.
//! [`LinkHandshake`] drives them from a connection's receive buffer as the
//! bytes arrive, in any split: it is what the runtime's links run, and what
//! the `link_handshake` fuzz target feeds arbitrary byte splits.

use bytes::BytesMut;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ids::NodeRid;
use crate::wire::link::{
    hello_identity, peek_version, LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN, PROOF_LEN,
};
use crate::wire::{DecodeLimits, WireError};

type HmacSha256 = Hmac<Sha256>;

/// Shortest accepted cluster secret, in bytes.
pub const SECRET_LEN_MIN: usize = 16;

/// The shared secret every node of a cluster holds.
#[derive(Clone)]
pub struct ClusterSecret(Vec<u8>);

impl ClusterSecret {
    /// A secret of at least `SECRET_LEN_MIN` (16) bytes.
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
    /// The dialer's Hello names another link protocol version than this
    /// node's: answered with `VersionRefused` (docs/operations.md
    /// "Versions").
    #[error("the peer speaks link protocol version {theirs}, this node {ours}")]
    Version {
        /// The version this node speaks.
        ours: u8,
        /// The version the peer's Hello named.
        theirs: u8,
        /// The node the Hello named, if its identity could be read.
        peer: Option<NodeRid>,
    },
    /// The acceptor refused this node's version, or its Welcome names another.
    #[error("the peer refused link protocol version {ours}: it speaks {theirs}")]
    PeerRefusedVersion {
        /// The version this node speaks.
        ours: u8,
        /// The version the peer speaks.
        theirs: u8,
    },
    /// The bytes are not a handshake frame.
    #[error("malformed handshake frame: {0}")]
    Wire(WireError),
    /// The acceptor's node does not take this Hello (a peer it does not
    /// expect, a lifecycle it knows to be over, a mesh it is not in); the
    /// text says which.
    #[error("{0}")]
    Refused(String),
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

/// The frame to send before closing, if the refusal has one: a dialer of
/// another version is told the acceptor's, so that both ends can log both
/// versions. A function rather than a method: `HandshakeError` is public
/// (`ClusterSecret::new` returns it), the link frame is not.
pub fn refusal_frame(error: &HandshakeError) -> Option<LinkFrame> {
    match error {
        HandshakeError::Version { ours, .. } => Some(LinkFrame::VersionRefused { version: *ours }),
        _ => None,
    }
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
    // Both ends reached this point speaking LINK_VERSION; covering it means
    // a proof of one version is never a proof of another.
    transcript.extend_from_slice(&[LINK_VERSION]);
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
        let (identity, nonce, theirs) = match frame {
            LinkFrame::Welcome {
                version,
                identity,
                nonce,
                proof,
            } => {
                if version != LINK_VERSION {
                    return Err(HandshakeError::PeerRefusedVersion {
                        ours: LINK_VERSION,
                        theirs: version,
                    });
                }
                (identity, nonce, proof)
            }
            LinkFrame::VersionRefused { version } => {
                return Err(HandshakeError::PeerRefusedVersion {
                    ours: LINK_VERSION,
                    theirs: version,
                })
            }
            _ => return Err(HandshakeError::Unexpected),
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
            return Err(HandshakeError::Version {
                ours: LINK_VERSION,
                theirs: version,
                peer: Some(identity.rid),
            });
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
            version: LINK_VERSION,
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

/// How an accepting node answers a Hello it takes: the secret of the mesh
/// the Hello names, its own identity in that mesh, and a fresh nonce.
#[derive(Debug)]
pub struct Answer {
    /// The secret of the Hello's mesh.
    pub secret: ClusterSecret,
    /// This node in that mesh.
    pub me: LinkIdentity,
    /// A fresh nonce ([`fresh_nonce`]).
    pub nonce: [u8; NONCE_LEN],
}

/// One end of a link's handshake, read from its receive buffer.
// Each state is named by the frame it waits for. Clippy skips the lint on
// an exported enum (as this one is with the `testing` feature), so it
// fires only without the feature.
#[allow(clippy::enum_variant_names)]
#[derive(Debug)]
pub enum LinkHandshake {
    /// Accepted; waiting for the Hello.
    AwaitHello,
    /// Hello sent; waiting for the Welcome.
    AwaitWelcome(Dialer),
    /// Welcome sent; waiting for the Proof.
    AwaitProof(Acceptor),
}

/// Where a handshake stands after [`LinkHandshake::advance`].
#[derive(Debug)]
pub enum Progress {
    /// The buffer holds no whole frame yet: keep the state, wait for bytes.
    Pending(LinkHandshake),
    /// The Hello was taken: send the Welcome and wait for the Proof.
    Welcome(LinkHandshake, LinkFrame),
    /// Authenticated: send `send` (the dialer's Proof), if any. Bytes left
    /// in the buffer are the peer's first records.
    Up {
        /// The last handshake frame, to send.
        send: Option<LinkFrame>,
        /// The authenticated peer.
        peer: LinkIdentity,
    },
}

impl LinkHandshake {
    /// The accepting end of a new connection.
    pub fn accept() -> Self {
        LinkHandshake::AwaitHello
    }

    /// The dialing end; returns it and the Hello to send.
    pub fn dial(
        secret: ClusterSecret,
        me: LinkIdentity,
        nonce: [u8; NONCE_LEN],
    ) -> (Self, LinkFrame) {
        let (dialer, hello) = Dialer::start(secret, me, nonce);
        (LinkHandshake::AwaitWelcome(dialer), hello)
    }

    /// The peer as far as the handshake knows it, unproved: for log lines.
    pub fn claimed(&self) -> Option<&LinkIdentity> {
        match self {
            LinkHandshake::AwaitProof(acceptor) => Some(acceptor.claimed()),
            LinkHandshake::AwaitHello | LinkHandshake::AwaitWelcome(_) => None,
        }
    }

    /// Takes at most one frame off `inbound` and advances. A Hello goes to
    /// `admit` (the node's policy: which peers and meshes it takes, §2)
    /// before any Welcome is computed. The version byte is read before the
    /// rest of a frame is decoded, so a peer of any other version is
    /// refused as such, naming both versions, whatever its frame's layout.
    pub fn advance(
        self,
        inbound: &mut BytesMut,
        limits: &DecodeLimits,
        admit: &mut dyn FnMut(&LinkIdentity) -> Result<Answer, HandshakeError>,
    ) -> Result<Progress, HandshakeError> {
        let Some(body) = LinkFrame::split_from(inbound, limits).map_err(HandshakeError::Wire)?
        else {
            return Ok(Progress::Pending(self));
        };
        if let Some(version) = peek_version(&body).filter(|&v| v != LINK_VERSION) {
            return Err(match self {
                LinkHandshake::AwaitHello => HandshakeError::Version {
                    ours: LINK_VERSION,
                    theirs: version,
                    peer: hello_identity(&body, limits).map(|id| id.rid),
                },
                _ => HandshakeError::PeerRefusedVersion {
                    ours: LINK_VERSION,
                    theirs: version,
                },
            });
        }
        let frame = LinkFrame::decode(body, limits).map_err(HandshakeError::Wire)?;
        match self {
            LinkHandshake::AwaitHello => {
                let LinkFrame::Hello { identity, .. } = &frame else {
                    return Err(HandshakeError::Unexpected);
                };
                let answer = admit(identity)?;
                let (acceptor, welcome) =
                    Acceptor::on_hello(answer.secret, answer.me, answer.nonce, frame)?;
                Ok(Progress::Welcome(
                    LinkHandshake::AwaitProof(acceptor),
                    welcome,
                ))
            }
            LinkHandshake::AwaitWelcome(dialer) => {
                let (proof, peer) = dialer.on_welcome(frame)?;
                Ok(Progress::Up {
                    send: Some(proof),
                    peer,
                })
            }
            LinkHandshake::AwaitProof(acceptor) => {
                let peer = acceptor.on_proof(frame)?;
                Ok(Progress::Up { send: None, peer })
            }
        }
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
    use crate::ids::{MeshName, NodeGeneration};

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

    fn answer(hello: &LinkIdentity) -> Result<Answer, HandshakeError> {
        assert_eq!(hello.rid, NodeRid(1));
        Ok(Answer {
            secret: secret("0123456789abcdef"),
            me: id(2, "m"),
            nonce: [2; NONCE_LEN],
        })
    }

    /// Feeds `stream` to an acceptor in `chunk`-byte reads: what it sent,
    /// the peer, and the bytes after the handshake.
    fn accept_in_chunks(stream: &[u8], chunk: usize) -> (Vec<LinkFrame>, LinkIdentity, Vec<u8>) {
        let limits = DecodeLimits::default();
        let mut state = LinkHandshake::accept();
        let mut buf = BytesMut::new();
        let mut sent = Vec::new();
        let mut fed = 0;
        for piece in stream.chunks(chunk) {
            buf.extend_from_slice(piece);
            fed += piece.len();
            loop {
                match state.advance(&mut buf, &limits, &mut answer).unwrap() {
                    Progress::Pending(next) => {
                        state = next;
                        break;
                    }
                    Progress::Welcome(next, welcome) => {
                        sent.push(welcome);
                        state = next;
                    }
                    Progress::Up { send, peer } => {
                        sent.extend(send);
                        // What is left: in the buffer, then still unread.
                        let mut rest = buf.to_vec();
                        rest.extend_from_slice(&stream[fed..]);
                        return (sent, peer, rest);
                    }
                }
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn the_handshake_reads_the_same_in_any_split_and_leaves_the_records() {
        let (dialer, hello) =
            LinkHandshake::dial(secret("0123456789abcdef"), id(1, "m"), [1; NONCE_LEN]);
        let mut out = BytesMut::new();
        hello.encode(&mut out);
        let (acceptor, welcome) = Acceptor::on_hello(
            secret("0123456789abcdef"),
            id(2, "m"),
            [2; NONCE_LEN],
            hello,
        )
        .unwrap();
        let LinkHandshake::AwaitWelcome(dialer) = dialer else {
            unreachable!("dial awaits the Welcome");
        };
        let (proof, _) = dialer.on_welcome(welcome.clone()).unwrap();
        drop(acceptor);
        proof.encode(&mut out);
        // A record right behind the Proof, in the same read.
        out.extend_from_slice(&[0, 0, 0, 2, 45, 1]);
        let whole = accept_in_chunks(&out, out.len());
        assert_eq!(whole.0, [welcome]);
        assert_eq!(whole.1, id(1, "m"));
        assert_eq!(whole.2, [0, 0, 0, 2, 45, 1]);
        for chunk in [1, 2, 3, 7, 40] {
            let cut = accept_in_chunks(&out, chunk);
            assert_eq!(cut.0, whole.0, "{chunk}-byte reads");
            assert_eq!(cut.1, whole.1, "{chunk}-byte reads");
            // The record is left whole, in the buffer or still to be read.
            assert_eq!(cut.2, whole.2, "{chunk}-byte reads");
        }
    }

    #[test]
    fn another_version_is_refused_naming_the_peer_and_both_versions() {
        let limits = DecodeLimits::default();
        let mut buf = BytesMut::new();
        LinkFrame::Hello {
            version: LINK_VERSION + 1,
            identity: id(1, "m"),
            nonce: [1; NONCE_LEN],
        }
        .encode(&mut buf);
        let error = LinkHandshake::accept()
            .advance(&mut buf, &limits, &mut answer)
            .unwrap_err();
        assert_eq!(
            error,
            HandshakeError::Version {
                ours: LINK_VERSION,
                theirs: LINK_VERSION + 1,
                peer: Some(NodeRid(1)),
            }
        );
        assert_eq!(
            error.to_string(),
            format!(
                "the peer speaks link protocol version {}, this node {LINK_VERSION}",
                LINK_VERSION + 1
            )
        );
        assert_eq!(
            refusal_frame(&error),
            Some(LinkFrame::VersionRefused {
                version: LINK_VERSION
            })
        );
        // A dialer refused by a node of the next version names both too.
        let (dialer, _) =
            LinkHandshake::dial(secret("0123456789abcdef"), id(1, "m"), [1; NONCE_LEN]);
        let mut back = BytesMut::new();
        LinkFrame::VersionRefused {
            version: LINK_VERSION + 1,
        }
        .encode(&mut back);
        let error = dialer.advance(&mut back, &limits, &mut answer).unwrap_err();
        assert_eq!(
            error,
            HandshakeError::PeerRefusedVersion {
                ours: LINK_VERSION,
                theirs: LINK_VERSION + 1
            }
        );
        assert_eq!(refusal_frame(&error), None);
    }

    /// docs/wire.md "Node-link handshake frames": a proof is an HMAC over
    /// both identities as encoded in the frames (and both nonces), so an
    /// identity altered in flight, another node or another lifecycle of the
    /// same mesh, makes the proof fail at the other end.
    #[test]
    fn an_identity_altered_in_flight_fails_the_proof() {
        let key = "0123456789abcdef";
        let altered = [
            id(3, "m"),
            LinkIdentity {
                generation: NodeGeneration(21),
                ..id(2, "m")
            },
        ];
        // The acceptor's identity in the Welcome.
        for claimed in altered.clone() {
            let (dialer, hello) = Dialer::start(secret(key), id(1, "m"), [1; NONCE_LEN]);
            let (_, welcome) =
                Acceptor::on_hello(secret(key), id(2, "m"), [2; NONCE_LEN], hello).unwrap();
            let LinkFrame::Welcome {
                version,
                nonce,
                proof,
                ..
            } = welcome
            else {
                panic!("no welcome: {welcome:?}");
            };
            let forged = LinkFrame::Welcome {
                version,
                identity: claimed.clone(),
                nonce,
                proof,
            };
            assert_eq!(
                dialer.on_welcome(forged).unwrap_err(),
                HandshakeError::BadProof,
                "{claimed:?}"
            );
        }
        // The dialer's identity in the Hello (node 2 dialing node 4): the
        // real dialer refuses the Welcome made for the claimed identity.
        for claimed in altered {
            let (dialer, _) = Dialer::start(secret(key), id(2, "m"), [1; NONCE_LEN]);
            let forged = LinkFrame::Hello {
                version: LINK_VERSION,
                identity: claimed.clone(),
                nonce: [1; NONCE_LEN],
            };
            let (acceptor, welcome) =
                Acceptor::on_hello(secret(key), id(4, "m"), [2; NONCE_LEN], forged).unwrap();
            assert_eq!(
                dialer.on_welcome(welcome).unwrap_err(),
                HandshakeError::BadProof,
                "{claimed:?}"
            );
            // Nor does the real dialer's Proof prove the claimed identity.
            let (real_dialer, hello) = Dialer::start(secret(key), id(2, "m"), [1; NONCE_LEN]);
            let (_, welcome) =
                Acceptor::on_hello(secret(key), id(4, "m"), [2; NONCE_LEN], hello).unwrap();
            let (proof, _) = real_dialer.on_welcome(welcome).unwrap();
            assert_eq!(
                acceptor.on_proof(proof).unwrap_err(),
                HandshakeError::BadProof,
                "{claimed:?}"
            );
        }
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
