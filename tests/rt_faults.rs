//! Fault injection on real sockets (issue 7): the network between client and
//! node, and between nodes, resets, cuts and slows connections while the
//! game runs. Whatever the network does, every request ends once — with its
//! reply, a typed error or a close with a reason — and no message is
//! processed twice (§6, §9, §12).

mod runtime_support;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{NodeSettings, RelocateTo};
use zlink::client::{Client, ClientError};
use zlink::error::ErrorKind;
use zlink::wire::client::CloseReason;

fn fast_settings() -> NodeSettings {
    NodeSettings {
        relay_deadline: Duration::from_millis(1_000),
        relocation_seal_timeout: Duration::from_millis(2_000),
        pin_cores: false,
        ..NodeSettings::default()
    }
}

fn options() -> GameOptions {
    GameOptions {
        settings: Some(fast_settings()),
        ..GameOptions::default()
    }
}

/// How one request ended at the client.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Reply,
    /// A typed error of one of the kinds a broken path gives.
    Error(ErrorKind),
    Closed(Option<CloseReason>),
}

/// Sends one request and waits for its end; the reply must be its payload.
fn one(client: &mut Client, data: Bytes) -> Ended {
    match client.request(RELAY, data.clone(), WAIT) {
        Ok(reply) => {
            assert_eq!(reply, data, "a reply for another request");
            Ended::Reply
        }
        Err(ClientError::Remote(error)) => Ended::Error(error.kind()),
        Err(ClientError::Closed(reason)) => Ended::Closed(reason),
        Err(other) => {
            panic!("the request did not end with a reply, a typed error or a close: {other:?}")
        }
    }
}

/// Every payload the actors of `games` processed, checked to be distinct.
fn processed_once(games: &[&Game]) -> HashSet<Bytes> {
    let mut seen = HashSet::new();
    for game in games {
        for payload in game.observed.delivered.lock().unwrap().iter() {
            assert!(seen.insert(payload.clone()), "processed twice: {payload:?}");
        }
    }
    seen
}

/// Each request ended once: a reply (and was processed), a typed error of a
/// lost path, or — where `closes` allows it — a close with that reason.
fn assert_each_ended_once(
    ended: &[(Bytes, Ended)],
    processed: &HashSet<Bytes>,
    closes: Option<CloseReason>,
) {
    for (data, end) in ended {
        match end {
            Ended::Reply => assert!(
                processed.contains(data),
                "{data:?} replied, never processed"
            ),
            Ended::Error(kind) => assert!(
                matches!(kind, ErrorKind::Unavailable | ErrorKind::DeadlineExceeded),
                "{data:?}: {kind:?}"
            ),
            Ended::Closed(reason) => assert!(
                closes.is_some() && *reason == closes,
                "{data:?}: the session closed ({reason:?})"
            ),
        }
    }
}

#[test]
fn resets_of_the_node_link_under_relay_end_every_request_once_and_the_link_comes_back() {
    let store = new_store();
    let owner = start_node(2, Arc::clone(&store), options(), &[]);
    let proxy = FaultProxy::start(owner.node.peer_addr().unwrap());
    let session = start_node(1, store, options(), &[(2, proxy.addr)]);
    assert!(session.node.wait_linked(2, WAIT));
    owner.node.create_actor("player", &id("player-1")).unwrap();
    let mut client = login(&session, "player-1");

    // When the link is reset every few requests while the client relays.
    let mut ended = Vec::new();
    for i in 0..120 {
        if i % 30 == 15 {
            assert!(session.node.wait_linked(2, WAIT), "the link came back");
            assert!(proxy.reset_all() > 0, "a live link to reset");
        }
        let data = payload("player-1", &format!("m-{i}"));
        ended.push((data.clone(), one(&mut client, data)));
    }
    // Then each request ended once: a reply (processed exactly once) or a
    // typed error of a lost path (processed at most once); the session
    // itself stayed open (its own connection was never touched).
    let processed = processed_once(&[&owner]);
    assert_each_ended_once(&ended, &processed, None);
    // And once the network is quiet the link serves relays again.
    wait_until("the link is up again", || session.node.wait_linked(2, WAIT));
    let mut after = Ended::Error(ErrorKind::Unavailable);
    for i in 0..50 {
        after = one(&mut client, payload("player-1", &format!("after-{i}")));
        if after == Ended::Reply {
            break;
        }
    }
    assert_eq!(after, Ended::Reply);
    assert!(!client.is_closed());
    assert_eq!(
        proxy.accepted(),
        5,
        "the link was dialled again after each reset"
    );
}

#[test]
fn a_client_connection_reset_mid_request_runs_the_disconnect_callback_once() {
    let mesh = start_mesh(
        2,
        GameOptions {
            session_disconnect: SessionDisconnect::Logs,
            ..options()
        },
    );
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let proxy = FaultProxy::start(mesh[0].addr());
    let mut client = Client::connect(proxy.addr).unwrap();
    assert_eq!(
        expect_reply(&mut client, LOGIN, "player-1"),
        Bytes::from_static(b"bound")
    );
    let held = mesh[1].observed.held_receiver();
    let _pending = client
        .start_request(HOLD, payload("player-1", "hold"))
        .unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");

    // When the client's connection is reset while its request is in the
    // actor's handler (which then finishes: its reply has no connection).
    assert_eq!(proxy.reset_all(), 1);
    wait_until("the session's disconnect callback ran", || {
        mesh[0]
            .observed
            .session_log()
            .contains(&"disconnect".to_owned())
    });
    mesh[1].observed.release();
    // Then the actor's disconnect callback runs, once (§7).
    wait_until("the disconnect callback ran", || {
        !mesh[1].observed.disconnects.lock().unwrap().is_empty()
    });
    // A new session binds the same player again and is served.
    let mut again = login(&mesh[0], "player-1");
    assert_eq!(
        expect_reply(&mut again, RELAY, "player-1:again"),
        payload("player-1", "again")
    );
    assert_eq!(
        *mesh[1].observed.disconnects.lock().unwrap(),
        vec!["player-1".to_owned()]
    );
}

#[test]
fn a_slow_link_with_small_reads_carries_every_record_whole() {
    let store = new_store();
    let owner = start_node(2, Arc::clone(&store), options(), &[]);
    let proxy = FaultProxy::start(owner.node.peer_addr().unwrap());
    // Frames arrive a few bytes at a time, each piece late.
    proxy.set_read_max(7);
    proxy.set_delay(Duration::from_micros(200));
    let session = start_node(1, store, options(), &[(2, proxy.addr)]);
    assert!(session.node.wait_linked(2, WAIT));
    owner.node.create_actor("player", &id("player-1")).unwrap();
    let mut client = login(&session, "player-1");
    for i in 0..20 {
        let data = payload("player-1", &format!("slow-{i}-{}", "x".repeat(i * 50)));
        assert_eq!(one(&mut client, data), Ended::Reply);
    }
    assert_eq!(processed_once(&[&owner]).len(), 20);
}

#[test]
fn relocations_across_a_link_that_resets_lose_nothing_and_process_nothing_twice() {
    let store = new_store();
    let target = start_node(3, Arc::clone(&store), options(), &[]);
    let proxy = FaultProxy::start(target.node.peer_addr().unwrap());
    let source = start_node(2, Arc::clone(&store), options(), &[(3, proxy.addr)]);
    let session = start_node(
        1,
        store,
        options(),
        &[
            (2, source.node.peer_addr().unwrap()),
            (3, target.node.peer_addr().unwrap()),
        ],
    );
    for (game, peers) in [(&session, [2, 3]), (&source, [1, 3]), (&target, [1, 2])] {
        for peer in peers {
            assert!(game.node.wait_linked(peer, WAIT), "{} -> {peer}", game.rid);
        }
    }
    let players = ["player-1", "player-2", "player-3", "player-4"];
    for name in players {
        source.node.create_actor("player", &id(name)).unwrap();
    }
    let mut clients: Vec<Client> = players.iter().map(|p| login(&session, p)).collect();

    // When the players move back and forth between nodes 2 and 3 while
    // their clients relay, and the 2–3 link (the relocation path) resets
    // now and then.
    let stop = AtomicBool::new(false);
    let (source_node, target_node) = (&source.node, &target.node);
    let (moves, ended) = thread::scope(|scope| {
        let mover = scope.spawn(|| {
            let mut outcomes = Vec::new();
            let mut round = 0usize;
            while !stop.load(Ordering::SeqCst) {
                round += 1;
                for name in players {
                    for (from, to) in [(source_node, 3), (target_node, 2)] {
                        let moved = from.relocate(&id(name), RelocateTo::Node(to));
                        outcomes.push(moved.map_err(|e| e.kind()));
                    }
                }
                // Reset the relocation path once it is back up.
                if round % 2 == 0 && source_node.wait_linked(3, WAIT) {
                    proxy.reset_all();
                }
            }
            outcomes
        });
        let mut ended = Vec::new();
        // At least 40 rounds, and until the link was reset and dialled
        // again three times.
        let mut i = 0;
        while i < 40 || (proxy.accepted() < 4 && i < 5_000) {
            i += 1;
            for (client, name) in clients.iter_mut().zip(players) {
                if client.is_closed() {
                    continue;
                }
                let data = payload(name, &format!("r-{i}"));
                ended.push((data.clone(), one(client, data)));
            }
        }
        stop.store(true, Ordering::SeqCst);
        (mover.join().unwrap(), ended)
    });
    // Then every move ended with its outcome within the flow's bounds (the
    // call returned), every request ended once, and nothing was processed
    // twice across both nodes.
    assert!(moves.iter().any(Result::is_ok), "some moves committed");
    assert!(proxy.accepted() >= 4);
    for outcome in &moves {
        if let Err(kind) = outcome {
            assert!(
                matches!(
                    kind,
                    ErrorKind::Unavailable
                        | ErrorKind::DeadlineExceeded
                        | ErrorKind::InvalidOperation
                        | ErrorKind::NotFound
                ),
                "{kind:?}"
            );
        }
    }
    let processed = processed_once(&[&source, &target]);
    // L3: a move that failed after relay-ready leaves the session's seal to
    // time out.
    assert_each_ended_once(&ended, &processed, Some(CloseReason::SealTimeout));
    let replies = ended.iter().filter(|(_, e)| *e == Ended::Reply).count();
    println!(
        "moves {} ({} committed), requests {} ({replies} replied), processed {}, link dials {}",
        moves.len(),
        moves.iter().filter(|m| m.is_ok()).count(),
        ended.len(),
        processed.len(),
        proxy.accepted()
    );
}
