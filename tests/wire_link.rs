//! Seeds for the `link_handshake` fuzz target (docs/TESTING.md): the link
//! frames of the round-trip test in src/wire/link.rs, and the two halves of
//! a real handshake between node 1 (dialing) and node 2 (accepting) under
//! the secret, identities and nonces the target uses
//! (fuzz/fuzz_targets/link_handshake.rs).

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
            identity: identity(7),
            nonce: [4; NONCE_LEN],
            proof: [5; PROOF_LEN],
        },
        LinkFrame::Proof {
            proof: [6; PROOF_LEN],
        },
    ];
    let mut seeds = vec![
        ("accept".to_string(), stream(&[&hello, &proof])),
        ("dial".to_string(), stream(&[&welcome])),
    ];
    for (i, frame) in samples.iter().enumerate() {
        seeds.push((format!("{i:02}"), stream(&[frame])));
    }
    fuzz_seed::write("link_handshake", seeds);
}
