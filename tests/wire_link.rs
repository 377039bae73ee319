//! Seeds for the `link_handshake` fuzz target (docs/TESTING.md): the link
//! frames of the round-trip test in src/wire/link.rs, and the two halves of
//! a real handshake between node 1 (dialing) and node 2 (accepting) under
//! the secret, identities and nonces the target uses
//! (fuzz/fuzz_targets/link_handshake.rs), whole, cut byte by byte and in
//! uneven pieces, and followed by a record. Each seed starts with the
//! target's split plan (a length, then chunk sizes).

mod fuzz_seed;

use bytes::BytesMut;
use zlink::ids::{MeshName, NodeGeneration, NodeRid};
use zlink::net::handshake::{Acceptor, ClusterSecret, Dialer};
use zlink::wire::link::{LinkFrame, LinkIdentity, LINK_VERSION, NONCE_LEN, PROOF_LEN};

fn identity(rid: u64) -> LinkIdentity {
    LinkIdentity {
        mesh: MeshName::new("m").unwrap(),
        rid: NodeRid(rid),
        generation: NodeGeneration(rid * 10),
    }
}

fn secret() -> ClusterSecret {
    ClusterSecret::new(b"0123456789abcdef".to_vec()).unwrap()
}

fn stream(frames: &[&LinkFrame]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    for frame in frames {
        frame.encode(&mut buf);
    }
    buf.to_vec()
}

/// A seed: the split plan `plan`, then the stream.
fn seed(plan: &[u8], stream: &[u8]) -> Vec<u8> {
    let mut seed = vec![u8::try_from(plan.len()).unwrap()];
    seed.extend_from_slice(plan);
    seed.extend_from_slice(stream);
    seed
}

/// Writes the seeds (run by hand: `cargo test --test wire_link --
/// --ignored`).
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_corpus() {
    let (dialer, hello) = Dialer::start(secret(), identity(1), [1; NONCE_LEN]);
    let (acceptor, welcome) =
        Acceptor::on_hello(secret(), identity(2), [2; NONCE_LEN], hello.clone()).unwrap();
    let (proof, _) = dialer.on_welcome(welcome.clone()).unwrap();
    // The seeds are a real handshake: check it before writing it.
    assert_eq!(acceptor.on_proof(proof.clone()).unwrap(), identity(1));
    let samples = [
        LinkFrame::Hello {
            version: LINK_VERSION,
            identity: identity(7),
            nonce: [3; NONCE_LEN],
        },
        LinkFrame::Welcome {
            version: LINK_VERSION,
            identity: identity(7),
            nonce: [4; NONCE_LEN],
            proof: [5; PROOF_LEN],
        },
        LinkFrame::Proof {
            proof: [6; PROOF_LEN],
        },
        LinkFrame::VersionRefused {
            version: LINK_VERSION + 1,
        },
        // A Hello of another version, and one from a node the target does
        // not expect.
        LinkFrame::Hello {
            version: LINK_VERSION + 1,
            identity: identity(1),
            nonce: [1; NONCE_LEN],
        },
        LinkFrame::Hello {
            version: LINK_VERSION,
            identity: identity(3),
            nonce: [1; NONCE_LEN],
        },
    ];
    // A record (a keepalive-sized body) right after the handshake, in the
    // same read: it must be left for the record reader.
    let record = [0, 0, 0, 2, 45, 1];
    let accept = stream(&[&hello, &proof]);
    let dial = stream(&[&welcome]);
    let with_record = |mut s: Vec<u8>| {
        s.extend_from_slice(&record);
        s
    };
    let mut seeds = vec![
        ("accept".to_string(), seed(&[], &accept)),
        ("accept-bytes".to_string(), seed(&[1], &accept)),
        ("accept-pieces".to_string(), seed(&[3, 40, 7], &accept)),
        (
            "accept-record".to_string(),
            seed(&[50], &with_record(accept.clone())),
        ),
        ("dial".to_string(), seed(&[], &dial)),
        ("dial-bytes".to_string(), seed(&[1], &dial)),
        (
            "dial-record".to_string(),
            seed(&[5, 64], &with_record(dial)),
        ),
    ];
    for (i, frame) in samples.iter().enumerate() {
        seeds.push((format!("{i:02}"), seed(&[], &stream(&[frame]))));
    }
    fuzz_seed::write("link_handshake", seeds);
}
