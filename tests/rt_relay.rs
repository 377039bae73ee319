//! Relay, reply and execution-order contract items (§5, §10, §12) over real
//! nodes on loopback.

mod bound;
mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::NodeSettings;
use zlink::client::ClientEvent;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::Correlation;
use zlink::wire::client::ClientFrame;

/// The next event on `client` is the reply to a marker relayed to `actor`
/// now: whatever the node sent before it has been read, so nothing else
/// came (no sleep window).
fn assert_marker_is_next(client: &mut zlink::client::Client, actor: &str) {
    let marker = client
        .start_request(RELAY, payload(actor, "marker"))
        .unwrap();
    assert_eq!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Reply {
            correlation: marker,
            outcome: Ok(payload(actor, "marker"))
        })
    );
}

shard_matrix! {
    fn r4_a_request_that_timed_out_is_not_resent_anywhere(shards: usize) {
        let deadline = Duration::from_millis(300);
        let settings = NodeSettings {
            relay_deadline: deadline,
            ..NodeSettings::default()
        };
        let mesh = start_mesh(
            3,
            GameOptions {
                settings: Some(settings),
                shards,
                ..GameOptions::default()
            },
        );
        let player = actor_on("player-1", actor_shard(shards, false), shards);
        mesh[1].node.create_actor("player", &id(&player)).unwrap();
        let mut client = login_on(&mesh[0], &player, session_shard(shards));
        let held = mesh[1].observed.held_receiver();
        let started = Instant::now();
        let correlation = client.start_request(HOLD, payload(&player, "once")).unwrap();
        assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
        let outcome = client.wait_reply(correlation, WAIT).unwrap();
        let elapsed = started.elapsed();
        match outcome {
            Err(error) => assert_eq!(error.kind(), ErrorKind::DeadlineExceeded, "{error:?}"),
            Ok(reply) => panic!("the held request replied {reply:?}"),
        }
        assert!(elapsed >= deadline, "deadline after {elapsed:?}");
        assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
        // The actor finishes the work late: its reply is dropped, nothing is resent.
        mesh[1].observed.release();
        wait_counter(&mesh[0], FlowTrace::LateReplyDropped, 1);
        assert_eq!(
            client.request(RELAY, payload(&player, "after"), WAIT).unwrap(),
            payload(&player, "after")
        );
        let two = mesh[1].observed.delivered.lock().unwrap().clone();
        assert_eq!(
            two,
            vec![payload(&player, "once"), payload(&player, "after")],
            "the timed-out request was delivered again"
        );
        assert!(mesh[0].observed.delivered.lock().unwrap().is_empty());
        assert!(mesh[2].observed.delivered.lock().unwrap().is_empty());
        assert_marker_is_next(&mut client, &player);
    }
}

shard_matrix! {
    fn r5_a_reply_after_its_session_closed_reaches_no_new_session_or_binding(shards: usize) {
        let mesh = start_mesh(
            2,
            GameOptions {
                shards,
                ..GameOptions::default()
            },
        );
        let player = actor_on("player-1", actor_shard(shards, false), shards);
        mesh[1].node.create_actor("player", &id(&player)).unwrap();
        let mut old = login_on(&mesh[0], &player, session_shard(shards));
        let held = mesh[1].observed.held_receiver();
        // Correlation 3 on the old connection (after its shard query and login).
        let late = old.start_request(HOLD, payload(&player, "late")).unwrap();
        assert_eq!(late, Correlation(3));
        assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
        drop(old);
        // A new session on the same shard binds the same actor; its
        // correlations start over, so the late reply would fit its
        // correlation 3.
        let mut new = client_on(&mesh[0], session_shard(shards));
        let login_corr = new
            .start_request(LOGIN, Bytes::copy_from_slice(player.as_bytes()))
            .unwrap();
        mesh[1].observed.release();
        assert_eq!(
            new.wait_reply(login_corr, WAIT).unwrap(),
            Ok(Bytes::from_static(b"bound"))
        );
        wait_counter(&mesh[0], FlowTrace::LateReplyDropped, 1);
        let fresh = new.start_request(RELAY, payload(&player, "fresh")).unwrap();
        assert_eq!(fresh, Correlation(3));
        assert_eq!(
            new.wait_reply(fresh, WAIT).unwrap(),
            Ok(payload(&player, "fresh"))
        );
        assert_marker_is_next(&mut new, &player);
    }
}

#[test]
fn x20_keepalive_is_answered_while_session_and_actor_queues_are_saturated() {
    let settings = NodeSettings {
        session_queue_max: 8,
        actor_queue_max: 4,
        ..NodeSettings::default()
    };
    let game = start_game(GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    });
    let mut raw = Raw::to(&game.node);
    raw.login("player-1");
    let mut burst = Vec::new();
    let requests = 600u32;
    for i in 0..requests {
        burst.push(Raw::request(
            RELAY,
            100 + i,
            payload("player-1", &i.to_string()),
        ));
        if i % 60 == 0 {
            burst.push(ClientFrame::Ping {
                nonce: u64::from(i),
            });
        }
    }
    raw.send(&burst);
    let mut pongs = Vec::new();
    let mut terminals = 0;
    let mut refused = 0;
    while terminals < requests || pongs.len() < 10 {
        match raw.next() {
            ClientFrame::Pong { nonce } => pongs.push(nonce),
            ClientFrame::Reply { .. } => terminals += 1,
            ClientFrame::Error { error, .. } => {
                assert_eq!(error.reason(), Reason::QueueFull, "{error:?}");
                refused += 1;
                terminals += 1;
            }
            ClientFrame::Ping { nonce } => raw.send(&[ClientFrame::Pong { nonce }]),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(refused > 0, "the queues never filled up");
    assert_eq!(pongs, (0..10).map(|i| i * 60).collect::<Vec<u64>>());
    // No keepalive reached the actor's application queue.
    let delivered = game.observed.delivered.lock().unwrap().clone();
    assert!(delivered.iter().all(|p| p.starts_with(b"player-1:")));
}

#[test]
fn x20_keepalive_is_answered_while_a_spotwide_gate_is_saturated() {
    // Only the SpotWide gate can fill: a session's burst fits its lane, and
    // the room's Actors have no lane of their own (§5: they share the gate).
    let settings = NodeSettings {
        session_queue_max: 1_024,
        actor_queue_max: 1_024,
        // One place: a burst fills it whatever the transport batches.
        spot_queue_max: 1,
        ..NodeSettings::default()
    };
    let game = start_game(GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    });
    let room = game
        .node
        .create_spot("room", &zlink::ids::SpotId::new("room-1").unwrap())
        .unwrap();
    let mut sessions: Vec<(String, Raw)> = ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .map(|name| {
            let actor = room.id().actor_id(name).unwrap();
            game.node.create_actor_in(&room, "player", &actor).unwrap();
            let mut raw = Raw::to(&game.node);
            raw.login(actor.as_str());
            (actor.to_string(), raw)
        })
        .collect();
    let (requests, pings) = (50u32, 5u64);
    for (actor, raw) in &mut sessions {
        let mut burst = Vec::new();
        for i in 0..requests {
            burst.push(Raw::request(RELAY, 100 + i, payload(actor, &i.to_string())));
            if i % 10 == 0 {
                burst.push(ClientFrame::Ping {
                    nonce: u64::from(i / 10),
                });
            }
        }
        raw.send(&burst);
    }
    let mut refused = 0;
    for (actor, raw) in &mut sessions {
        let (mut pongs, mut terminals) = (Vec::new(), 0);
        while terminals < requests || pongs.len() < 5 {
            match raw.next() {
                ClientFrame::Pong { nonce } => pongs.push(nonce),
                ClientFrame::Reply { .. } => terminals += 1,
                ClientFrame::Error { error, .. } => {
                    assert_eq!(error.reason(), Reason::QueueFull, "{actor}: {error:?}");
                    refused += 1;
                    terminals += 1;
                }
                other => panic!("{actor}: unexpected {other:?}"),
            }
        }
        assert_eq!(pongs, (0..pings).collect::<Vec<u64>>(), "{actor}");
    }
    assert!(refused > 0, "the SpotWide gate never filled up");
    // No keepalive reached the room's application queue.
    let delivered = game.observed.delivered.lock().unwrap().clone();
    assert!(delivered.iter().all(|p| p.starts_with(b"room-1/")));
}

#[test]
fn x20_keepalive_is_answered_while_the_bound_actor_is_busy_on_its_node() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut raw = Raw::to(&mesh[0].node);
    raw.login("player-1");
    let held = mesh[1].observed.held_receiver();
    raw.send(&[Raw::request(HOLD, 2, payload("player-1", "busy"))]);
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
    for nonce in 1..=3 {
        raw.send(&[ClientFrame::Ping { nonce }]);
        assert_eq!(raw.next(), ClientFrame::Pong { nonce });
    }
    mesh[1].observed.release();
    assert_eq!(
        raw.next(),
        ClientFrame::Reply {
            correlation: Correlation(2),
            payload: payload("player-1", "busy")
        }
    );
}

#[test]
fn x18_bind_terminals_relays_and_disconnect_cleanup_proceed_while_a_callback_awaits() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    mesh[1]
        .node
        .create_actor("player", &id("player-2"))
        .unwrap();
    let held = mesh[0].observed.held_receiver();
    let mut stalled = login(&mesh[0], "player-1");
    let stall = stalled.start_request(STALL, Bytes::new()).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "stall");
    // While that session callback awaits: another session's bind reaches its
    // terminal, its relay is answered and its actor's push arrives.
    let mut other = login(&mesh[0], "player-2");
    assert_eq!(
        other
            .request(PUSH, payload("player-2", "tick"), WAIT)
            .unwrap(),
        Bytes::from_static(b"pushed")
    );
    assert_eq!(
        other.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push {
            key: PUSHED,
            payload: payload("player-2", "tick")
        })
    );
    // The awaiting session's own connection drops: its disconnect cleanup
    // runs although its callback never finished.
    drop(stalled);
    assert_eq!(
        mesh[1].disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    // A new session binds the actor again meanwhile.
    let _again = login(&mesh[0], "player-1");
    let _ = stall;
    mesh[0].observed.gate.open();
}

/// R2 over real sockets, record by record: with the Actor on node 2 and
/// the session on node 1 (which dials node 2), the bind crosses as a 38
/// request towards node 2 and its terminal back; each relay as a 24 message
/// towards node 2 carrying the bound-session tail — node 1's session, its
/// binding, and the session's order, one more per message — and its 24
/// reply back; the push as a 36 towards node 1, never the other way.
#[test]
fn r2_bind_relay_and_push_cross_the_link_each_way_with_the_bound_session_tail() {
    use bytes::BytesMut;
    use zlink::ids::NodeRid;
    use zlink::wire::node::{ActorSend, BoundSessionBind, NodeRecord};
    use zlink::wire::DecodeLimits;

    let store = new_store();
    let two = start_node(
        2,
        std::sync::Arc::clone(&store),
        GameOptions::default(),
        &[],
    );
    let tap = link_tap(two.node.peer_addr().unwrap());
    let one = start_node(1, store, GameOptions::default(), &[(2, tap.addr)]);
    assert!(one.node.wait_linked(2, WAIT));
    two.node.create_actor("player", &id("p")).unwrap();
    let mut client = login(&one, "p");
    for n in 0..3 {
        let reply = client.request(RELAY, payload("p", &n.to_string()), WAIT);
        assert!(reply.is_ok(), "{reply:?}");
    }
    client.request(PUSH, payload("p", "hello"), WAIT).unwrap();
    assert!(matches!(
        client.next_event(WAIT).unwrap(),
        Some(ClientEvent::Push { key: PUSHED, .. })
    ));
    let decode = |frame: &Vec<u8>| {
        let mut bytes = BytesMut::from(&frame[..]);
        NodeRecord::decode_from(&mut bytes, &DecodeLimits::default())
            .expect("a record")
            .expect("a whole record")
    };
    let records = |direction, command: u8| -> Vec<NodeRecord> {
        tap.frames(direction, command).iter().map(decode).collect()
    };
    // 38: the request towards the Actor's node, the terminal back.
    let bind_out = records(Direction::ToAcceptor, 38);
    assert!(
        matches!(
            bind_out[..],
            [NodeRecord::BoundSessionBind(BoundSessionBind::Request(_))]
        ),
        "{bind_out:?}"
    );
    let bind_back = records(Direction::ToDialer, 38);
    assert!(
        matches!(
            bind_back[..],
            [NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(_))]
        ),
        "{bind_back:?}"
    );
    // 24: four messages out (three relays and the PUSH request), each with
    // the tail of node 1's session and binding, in the session's order;
    // four replies back.
    let tails: Vec<_> = records(Direction::ToAcceptor, 24)
        .into_iter()
        .map(|record| match record {
            NodeRecord::ActorSend(ActorSend::Message(message)) => message.tail,
            other => panic!("a 24 towards node 2 that is no message: {other:?}"),
        })
        .collect();
    assert_eq!(tails.len(), 4, "{tails:?}");
    for pair in tails.windows(2) {
        assert_eq!(pair[0].session, pair[1].session);
        assert_eq!(pair[0].binding, pair[1].binding);
        assert_eq!(pair[1].sequence.0, pair[0].sequence.0 + 1, "{tails:?}");
    }
    assert_eq!(tails[0].session.owner, NodeRid(1));
    let replies = records(Direction::ToDialer, 24);
    assert_eq!(replies.len(), 4);
    assert!(replies
        .iter()
        .all(|r| matches!(r, NodeRecord::ActorSend(ActorSend::Reply(_)))));
    // 36: the push, towards the session's node only, for the same
    // session and binding the tail named.
    assert_eq!(tap.count(Direction::ToAcceptor, 36), 0);
    match &records(Direction::ToDialer, 36)[..] {
        [NodeRecord::BoundSessionSend(push)] => {
            assert_eq!(push.session, tails[0].session);
            assert_eq!(push.binding, tails[0].binding);
        }
        other => panic!("one 36 towards node 1: {other:?}"),
    }
}

/// The sample of `series` in a scrape of `game`'s node (0 when absent).
fn scraped(game: &Game, series: &str) -> f64 {
    let text = game.node.metrics().encode();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A shard's loop turn takes at most its budget of inbox messages (1,024,
/// src/runtime/shard.rs `INBOX_BUDGET`) and leaves the rest for its next
/// turn, so that a flood from other shards cannot keep it from its own
/// sockets and timers; nothing left over is lost or reordered out of its
/// session. Shard 1, which hosts both players, is held in an Actor turn
/// while the sessions on shard 0 relay 1,500 requests to it; the scrape
/// sees them wait in its inbox (`zlink_shard_inbox_depth`). Released, the
/// shard takes them over more than one turn (`inbox_budget_spent`), and
/// every request is answered, in the order it was sent.
#[test]
fn a_shard_takes_its_inbox_a_budget_at_a_time_and_answers_every_request() {
    const RELAYS: usize = 1_500;
    let game = start_game(GameOptions {
        settings: Some(NodeSettings {
            pin_cores: false,
            relay_deadline: Duration::from_secs(60),
            session_queue_max: 4_096,
            ..NodeSettings::default()
        }),
        shards: 2,
        ..GameOptions::default()
    });
    let slow = actor_on("slow", 1, 2);
    let busy = actor_on("busy", 1, 2);
    let mut holder = login_on(&game, &slow, 0);
    let mut client = login_on(&game, &busy, 0);
    let spent = || game.node.flow_counters().get(FlowTrace::InboxBudgetSpent);
    assert_eq!(spent(), 0);

    let held = game.observed.held_receiver();
    let hold = holder.start_request(HOLD, payload(&slow, "held")).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
    let sent: Vec<Correlation> = (0..RELAYS)
        .map(|i| {
            client
                .start_request(RELAY, payload(&busy, &i.to_string()))
                .unwrap()
        })
        .collect();
    let depth = r#"zlink_shard_inbox_depth{node="1",shard="1"}"#;
    wait_until("the relays wait in shard 1's inbox", || {
        scraped(&game, depth) >= RELAYS as f64
    });
    game.observed.release();

    assert_eq!(
        holder.wait_reply(hold, WAIT).unwrap(),
        Ok(payload(&slow, "held"))
    );
    for (i, correlation) in sent.into_iter().enumerate() {
        match client.next_event(WAIT).unwrap() {
            Some(ClientEvent::Reply {
                correlation: replied,
                outcome,
            }) => {
                assert_eq!(replied, correlation, "reply {i} out of order");
                assert_eq!(outcome, Ok(payload(&busy, &i.to_string())));
            }
            other => panic!("reply {i}: {other:?}"),
        }
    }
    assert!(spent() >= 1, "the inbox was taken in one turn");
}

/// A session's full lane refuses a request with QueueFull and drops a
/// one-way message; both are counted (`session_queue_full`), so an
/// operator sees a client that pipelines faster than its handler runs
/// (before, neither moved any counter, and the one-way drops were silent).
#[test]
fn a_full_session_lane_counts_its_refused_requests_and_dropped_messages() {
    let game = start_game(GameOptions {
        settings: Some(NodeSettings {
            session_queue_max: 8,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    });
    let counted = || game.node.flow_counters().get(FlowTrace::SessionQueueFull);
    let mut raw = Raw::to(&game.node);
    raw.login("player-1");
    // Given 40 requests in one write, more than the lane holds,
    let requests: Vec<ClientFrame> = (0..40u32)
        .map(|i| Raw::request(RELAY, 100 + i, payload("player-1", &i.to_string())))
        .collect();
    raw.send(&requests);
    let mut refused = 0;
    for _ in 0..40 {
        match raw.next() {
            ClientFrame::Reply { .. } => {}
            ClientFrame::Error { error, .. } => {
                assert_eq!(error.reason(), Reason::QueueFull, "{error:?}");
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // then each refusal is counted,
    assert!(refused > 0, "the lane never filled");
    assert_eq!(counted(), refused);
    // and so is each one-way message the full lane drops: of 40 in one
    // write, those the player never got (a request after them, answered
    // once every one of them was delivered or dropped, is the marker).
    let delivered_before = game.observed.delivered.lock().unwrap().len();
    let messages: Vec<ClientFrame> = (0..40u32)
        .map(|i| ClientFrame::Message {
            key: RELAY,
            payload: payload("player-1", &format!("m{i}")),
        })
        .collect();
    raw.send(&messages);
    // (a marker refused while the lane is still full is counted too, and
    // sent again)
    let mut markers_refused = 0;
    for attempt in 0..1_000u32 {
        raw.send(&[Raw::request(
            RELAY,
            1_000 + attempt,
            payload("player-1", "marker"),
        )]);
        match raw.next() {
            ClientFrame::Reply { .. } => break,
            ClientFrame::Error { error, .. } if error.reason() == Reason::QueueFull => {
                markers_refused += 1;
            }
            other => panic!("the marker's answer, not {other:?}"),
        }
    }
    let delivered = game.observed.delivered.lock().unwrap().len() - delivered_before;
    let dropped = 40 - (delivered - 1) as u64;
    assert!(dropped > 0, "the lane never filled");
    assert_eq!(counted(), refused + dropped + markers_refused);
}
