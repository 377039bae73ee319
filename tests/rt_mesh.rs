//! Contract items across several real nodes linked over loopback TCP.

mod bound;
mod runtime_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use runtime_support::*;
use zlink::client::{ClientError, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::ErrorKind;
use zlink::ids::{ActorId, MeshName, NodeGeneration, NodeRid};
use zlink::net::handshake::{fresh_nonce, Dialer};
use zlink::store::{CountingStore, EmbeddedStore, MonotonicClock};
use zlink::wire::client::CloseReason;
use zlink::wire::link::{LinkFrame, LinkIdentity};
use zlink::wire::DecodeLimits;

fn id(name: &str) -> ActorId {
    ActorId::new(name).unwrap()
}

shard_matrix! {
    fn p1_p3_replacement_across_nodes_moves_pushes_and_closes_the_old_session_after_100ms(
        shards: usize,
    ) {
        let mesh = start_mesh(
            3,
            GameOptions {
                shards,
                ..GameOptions::default()
            },
        );
        let player = actor_on("player-1", actor_shard(shards, false), shards);
        mesh[1].node.create_actor("player", &id(&player)).unwrap();
        let mut old = login_on(&mesh[0], &player, session_shard(shards));
        let mut new = login_on(&mesh[2], &player, session_shard(shards));

        // P2: relay from the old session is refused, the current binding stays.
        let refused = old.request(RELAY, payload(&player, "late"), WAIT);
        match refused {
            Err(ClientError::Remote(e)) => assert_eq!(e.kind(), ErrorKind::Unavailable),
            Err(ClientError::Closed(_)) => {}
            other => panic!("relay from the replaced session: {other:?}"),
        }
        assert_eq!(
            new.request(PUSH, payload(&player, "tick"), WAIT).unwrap(),
            Bytes::from_static(b"pushed")
        );
        assert_eq!(
            new.next_event(WAIT).unwrap(),
            Some(ClientEvent::Push {
                key: PUSHED,
                payload: payload(&player, "tick")
            })
        );
        assert_eq!(old.wait_closed(WAIT).unwrap(), Some(CloseReason::Replaced));
        let closed_at = Instant::now();
        let callbacks = mesh[0].observed.replaced_callbacks.lock().unwrap().clone();
        assert_eq!(
            callbacks.len(),
            1,
            "the duplicate-connection callback ran on the old session's node"
        );
        assert!(closed_at - callbacks[0].1 >= Duration::from_millis(100));
    }
}

#[test]
fn d1_disconnect_notifies_actors_on_two_other_nodes() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1].node.create_actor("player", &id("on-two")).unwrap();
    mesh[2]
        .node
        .create_actor("player", &id("on-three"))
        .unwrap();
    let mut client = login(&mesh[0], "on-two");
    assert_eq!(
        client
            .request(LOGIN, Bytes::from_static(b"on-three"), WAIT)
            .unwrap(),
        Bytes::from_static(b"bound")
    );
    drop(client);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "on-two"
    );
    assert_eq!(
        mesh[2].disconnect_events.recv_timeout(WAIT).unwrap(),
        "on-three"
    );
}

/// Handshakes with a node as a fake peer and returns the raw link socket.
fn fake_peer(addr: std::net::SocketAddr, rid: u64) -> (TcpStream, BytesMut) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let me = LinkIdentity {
        mesh: MeshName::new("default").unwrap(),
        rid: NodeRid(rid),
        generation: NodeGeneration(1),
    };
    let (dialer, hello) = Dialer::start(secret(), me, fresh_nonce());
    let mut out = BytesMut::new();
    hello.encode(&mut out);
    stream.write_all(&out).unwrap();
    let mut buf = BytesMut::new();
    let welcome = loop {
        if let Some(frame) = LinkFrame::decode_from(&mut buf, &DecodeLimits::default()).unwrap() {
            break frame;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the node closed the link during the handshake");
        buf.extend_from_slice(&chunk[..n]);
    };
    let (proof, _) = dialer.on_welcome(welcome).unwrap();
    out.clear();
    proof.encode(&mut out);
    stream.write_all(&out).unwrap();
    (stream, buf)
}

#[test]
fn x4_malformed_and_reserved_records_are_dropped_counted_and_the_link_stays_usable() {
    let store = Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )));
    // Node 10 takes links from every lower RID (runtime_support), so the
    // fake peer 9 is expected.
    let game = start_node(10, store, GameOptions::default(), &[]);
    let actor = game.node.create_actor("player", &id("player-1")).unwrap();
    let (mut link, _) = fake_peer(game.node.peer_addr().unwrap(), 9);
    assert!(game.node.wait_linked(9, WAIT));
    // A record with the reserved command 45, one with an unknown command, and
    // a truncated 38: each a whole frame, each refused by the decoder.
    let garbage: &[&[u8]] = &[
        &[0, 0, 0, 2, 45, 1],
        &[0, 0, 0, 2, 99, 1],
        &[0, 0, 0, 3, 38, 1, 0],
    ];
    for frame in garbage {
        link.write_all(frame).unwrap();
    }
    // The link still works: a tombstone for nothing is judged and counted
    // (stale), which proves a well-formed record after the garbage arrived.
    let tombstone = zlink::wire::node::NodeRecord::BoundSessionBind(
        zlink::wire::node::BoundSessionBind::Tombstone(zlink::wire::node::BindTombstone {
            actor: actor.id.clone(),
            object_generation: actor.generation,
            session: zlink::ids::SessionRef {
                owner: NodeRid(9),
                lifecycle: NodeGeneration(1),
                owner_id: zlink::ids::SessionOwnerId(0),
                session: zlink::ids::SessionRid(1),
            },
            binding: zlink::ids::BindingGeneration(1),
            cause: zlink::wire::node::TombstoneCause::Disconnect,
        }),
    );
    let mut out = BytesMut::new();
    tombstone.encode(&mut out);
    link.write_all(&out).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let counters = game.node.flow_counters();
        // Each shard publishes its counters at the end of its own loop turn:
        // wait until both shards' counts are in, then check them exactly.
        if counters.get(FlowTrace::TombstoneStale) == 1
            && counters.get(FlowTrace::MalformedRecordDropped) >= 3
        {
            assert_eq!(counters.get(FlowTrace::MalformedRecordDropped), 3);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the well-formed record never arrived"
        );
        std::thread::yield_now();
    }
    // A malformed request gets a typed error reply naming its RequestId:
    // a 38 request whose header is intact and whose body is cut short.
    let mut malformed = vec![0, 0, 0, 0, 38, 1];
    malformed.extend_from_slice(&77u64.to_be_bytes());
    malformed.extend_from_slice(&1_000u32.to_be_bytes());
    malformed.push(0xff);
    let len = (malformed.len() - 4) as u32;
    malformed[..4].copy_from_slice(&len.to_be_bytes());
    link.write_all(&malformed).unwrap();
    let mut buf = BytesMut::new();
    let reply = loop {
        if let Some(record) =
            zlink::wire::node::NodeRecord::decode_from(&mut buf, &DecodeLimits::default()).unwrap()
        {
            break record;
        }
        let mut chunk = [0u8; 4096];
        let n = link.read(&mut chunk).unwrap();
        assert!(n > 0, "the node closed the link");
        buf.extend_from_slice(&chunk[..n]);
    };
    match reply {
        zlink::wire::node::NodeRecord::BoundSessionBind(
            zlink::wire::node::BoundSessionBind::Terminal(t),
        ) => {
            assert_eq!(t.request, zlink::ids::RequestId(77));
            assert_eq!(
                t.outcome.unwrap_err().reason(),
                zlink::error::Reason::MalformedRecord
            );
        }
        other => panic!("expected a 38 terminal, got {other:?}"),
    }
    // Nothing reached an application queue.
    assert!(game.observed.delivered.lock().unwrap().is_empty());
}
