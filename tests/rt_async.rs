//! Async turns over real sockets (docs/actors.md "Async turns"; issue 21
//! item 3): a turn awaits another Actor's reply or an application future
//! while its shard serves everything else; the Actor's lane stays serial
//! meanwhile; a move waits for the awaiting turn to end before it seals
//! anything, and takes the Actor between two turns; a turn that awaits too
//! long ends `DeadlineExceeded` and its lane goes on.

mod bound;
mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{NodeBuilder, NodeSettings, RelocateTo, StartError};
use zlink::client::{Client, ClientEvent};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};

/// Waits until `game`'s players were handed `data` (a handler started).
fn handed(game: &Game, data: &str) {
    wait_until(&format!("the handler of {data}"), || {
        game.observed
            .delivered
            .lock()
            .unwrap()
            .iter()
            .any(|d| d.ends_with(data.as_bytes()))
    });
}

/// Starts player "p"'s turn that awaits the gate, and waits until its
/// handler ran (the turn now awaits).
fn await_gate(client: &mut Client, game: &Game) -> zlink::ids::Correlation {
    let awaited = client
        .start_request(AWAIT_GATE, payload("p", "await"))
        .unwrap();
    handed(game, "p:await");
    awaited
}

/// Waits until `node` parked a move behind an awaiting turn.
fn parked(node: &zlink::api::Node) {
    wait_until("the move parked behind the turn", || {
        node.flow_counters().get(FlowTrace::RelocationWaitsForTurn) == 1
    });
}

/// The reply to request `correlation`, skipping pushes.
fn reply_to(
    client: &mut Client,
    correlation: zlink::ids::Correlation,
) -> Result<Bytes, zlink::error::Error> {
    loop {
        match client
            .next_event(WAIT)
            .unwrap()
            .expect("a reply within the wait")
        {
            ClientEvent::Reply {
                correlation: c,
                outcome,
            } if c == correlation => return outcome,
            ClientEvent::Closed(reason) => panic!("closed: {reason:?}"),
            _ => {}
        }
    }
}

fn settings(turn: Duration, seal: Duration) -> NodeSettings {
    NodeSettings {
        actor_turn_deadline: turn,
        relocation_seal_timeout: seal,
        pin_cores: false,
        ..NodeSettings::default()
    }
}

/// An Actor's turn awaits another Actor's reply across nodes, and that
/// Actor's turn awaits an application future (the gate, a database call
/// say). Meanwhile the awaiting Actors' shards serve other sessions — every
/// relay of another player is answered before the await ends — and the
/// caller's lane stays serial: its next message is handled only after the
/// awaiting turn ended. The awaited reply comes back once.
#[test]
fn y1_an_async_turn_awaits_another_actors_reply_while_the_shard_serves_everything_else() {
    // The other player relays back to back for a second: past the default
    // per-session rate (10,000 a second) on a fast machine, so no limit.
    let options = GameOptions {
        settings: Some(NodeSettings {
            session_rate: 0,
            pin_cores: false,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    };
    let mesh = start_mesh(2, options);
    mesh[1].node.create_actor("player", &id("callee")).unwrap();
    let mut caller = login(&mesh[0], "caller");
    let mut other = login(&mesh[0], "other");
    // The caller's turn awaits the callee's reply; the callee's turn awaits
    // the gate.
    let awaited = caller
        .start_request(AWAIT_CALL, payload("caller", "callee:gate:hello"))
        .unwrap();
    handed(&mesh[1], "caller>gate:hello");
    let started = Instant::now();
    // While both turns await (for a second: the case), the
    // caller's shard serves another player, relay after relay.
    let mut latencies = Vec::new();
    for n in 0.. {
        if started.elapsed() >= Duration::from_secs(1) {
            break;
        }
        let sent = Instant::now();
        let reply = other.request(RELAY, payload("other", &n.to_string()), WAIT);
        latencies.push(sent.elapsed());
        assert!(reply.is_ok(), "relay {n}: {reply:?}");
    }
    // And the caller's next message waits behind its awaiting turn.
    let next = caller
        .start_request(COUNT, payload("caller", "next"))
        .unwrap();
    assert!(
        !game_delivered(&mesh[0], "caller:next"),
        "a turn ran beside the awaiting one"
    );
    // The callee's application future completes: its reply goes to the
    // caller's continuation, which answers the client.
    mesh[1].observed.gate.open();
    let outcome = reply_to(&mut caller, awaited).expect("the awaited reply");
    let awaited_for = started.elapsed();
    assert_eq!(outcome, Bytes::from_static(b"awaited:echo:gate:hello"));
    // Then the next message runs, after the continuation (which counted
    // itself as handled): a count of 2 would mean it ran beside the await.
    assert_eq!(
        reply_to(&mut caller, next).unwrap(),
        Bytes::from_static(b"3")
    );
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    eprintln!(
        "relays while a turn awaited {awaited_for:?}: {} answered, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        latencies[latencies.len() / 2],
        p99,
        latencies[latencies.len() - 1]
    );
}

/// Whether `game`'s players were handed exactly `data`.
fn game_delivered(game: &Game, data: &str) -> bool {
    game.observed
        .delivered
        .lock()
        .unwrap()
        .iter()
        .any(|d| d == data.as_bytes())
}

/// The messages waiting on `game`'s Actor lanes, from its metrics.
fn mailbox_depth(game: &Game) -> u64 {
    let text = game.node.metrics().encode();
    text.lines()
        .filter(|line| line.starts_with("zlink_shard_mailbox_depth{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Y2: a move asked for while the Actor's turn awaits waits for the turn
/// to end before it seals or captures anything, then takes the Actor
/// between two turns: the awaited reply comes from the source, once, and
/// the message queued behind the long turn moves with the Actor and is
/// handled at the target, by the same state.
#[test]
fn y2_a_move_waits_for_the_awaiting_turn_then_takes_the_actor_between_two_turns() {
    let mesh = start_mesh(2, GameOptions::default());
    let mut client = login(&mesh[0], "p");
    let awaited = await_gate(&mut client, &mesh[0]);
    let source = &mesh[0].node;
    std::thread::scope(|scope| {
        let mover = scope.spawn(|| source.relocate(&id("p"), RelocateTo::Node(2)));
        parked(source);
        // A message queues behind the awaiting turn.
        let queued = client.start_request(COUNT, payload("p", "queued")).unwrap();
        wait_until("the message queued behind the turn", || {
            mailbox_depth(&mesh[0]) == 1
        });
        // The move is parked: the target is never asked to prepare while
        // the turn awaits. A marker shows it: a relay of another player on
        // the same shard is answered, and still no 60 has been sent.
        let mut other = login(&mesh[0], "marker");
        other.request(RELAY, payload("marker", "m"), WAIT).unwrap();
        let sent = source.flow_counters().get(FlowTrace::RelocationPrepareSent);
        assert_eq!(sent, 0, "a move prepared while a turn awaited");
        mesh[0].observed.gate.open();
        assert_eq!(
            reply_to(&mut client, awaited).unwrap(),
            Bytes::from_static(b"after-gate:1"),
            "the continuation ran at the source, with its state"
        );
        mover
            .join()
            .unwrap()
            .expect("the move, once the turn ended");
        // The queued message moved with the Actor: handled at the target,
        // second after the await.
        assert_eq!(
            reply_to(&mut client, queued).unwrap(),
            Bytes::from_static(b"2")
        );
    });
    assert!(game_delivered(&mesh[1], "p:queued"));
    assert!(!game_delivered(&mesh[0], "p:queued"));
    assert_eq!(
        (mesh[0].node.actor_count(), mesh[1].node.actor_count()),
        (1, 1)
    );
}

/// A turn that awaits past `actor_turn_deadline` ends: the request it
/// answers gets `DeadlineExceeded` (never before the deadline), its
/// continuation never runs (the gate opening later changes nothing), the
/// lane goes on, and a move that waited for it starts.
#[test]
fn a_turn_that_awaits_past_its_deadline_ends_and_the_move_waiting_for_it_goes_on() {
    let turn = Duration::from_millis(400);
    let options = GameOptions {
        settings: Some(settings(turn, Duration::from_secs(3))),
        ..GameOptions::default()
    };
    let mesh = start_mesh(2, options);
    let mut client = login(&mesh[0], "p");
    let asked = Instant::now();
    let awaited = await_gate(&mut client, &mesh[0]);
    let source = &mesh[0].node;
    std::thread::scope(|scope| {
        let mover = scope.spawn(|| source.relocate(&id("p"), RelocateTo::Node(2)));
        parked(source);
        let error = reply_to(&mut client, awaited).expect_err("past its deadline");
        assert_eq!(error.kind(), ErrorKind::DeadlineExceeded, "{error}");
        assert!(asked.elapsed() >= turn, "ended after {:?}", asked.elapsed());
        mover
            .join()
            .unwrap()
            .expect("the move, once the turn ended");
    });
    let counters = mesh[0].node.flow_counters();
    assert_eq!(counters.get(FlowTrace::ActorTurnDeadlineExceeded), 1);
    // The continuation never runs, even once its future is ready: a
    // request after the gate opens is the Actor's 2nd handled message.
    mesh[0].observed.gate.open();
    assert_eq!(
        client.request(COUNT, payload("p", "after"), WAIT).unwrap(),
        Bytes::from_static(b"2")
    );
}

/// A move whose Actor's turn still awaits at the move's prepare bound ends
/// `DeadlineExceeded` with nothing sealed or moved; the turn goes on and
/// answers, at the source.
#[test]
fn a_move_parked_past_its_prepare_bound_ends_with_nothing_sealed() {
    // A turn may await 5 s here (the seal timeout is 10 s): longer than
    // the move's prepare bound (1.5 s).
    let options = GameOptions {
        settings: Some(settings(Duration::from_secs(5), Duration::from_secs(10))),
        ..GameOptions::default()
    };
    let mesh = start_mesh(2, options);
    let mut client = login(&mesh[0], "p");
    let awaited = await_gate(&mut client, &mesh[0]);
    let asked = Instant::now();
    let error = mesh[0]
        .node
        .relocate(&id("p"), RelocateTo::Node(2))
        .expect_err("the turn outlasts the prepare bound");
    let prepare = NodeSettings::default().relocation.prepare_timeout;
    assert_eq!(error.reason(), Reason::Deadline, "{error}");
    assert!(
        asked.elapsed() >= prepare,
        "ended after {:?}",
        asked.elapsed()
    );
    let counters = mesh[0].node.flow_counters();
    assert_eq!(counters.get(FlowTrace::RelocationPrepareSent), 0);
    mesh[0].observed.gate.open();
    assert_eq!(
        reply_to(&mut client, awaited).unwrap(),
        Bytes::from_static(b"after-gate:1")
    );
    assert_eq!(
        (mesh[0].node.actor_count(), mesh[1].node.actor_count()),
        (1, 0)
    );
}

/// Destroying an Actor whose turn awaits ends the turn first: the request
/// it answers gets `StaleLocation`, and nothing of it runs later.
#[test]
fn destroying_an_actor_whose_turn_awaits_ends_the_turn_typed() {
    let mesh = start_mesh(1, GameOptions::default());
    let mut client = login(&mesh[0], "p");
    let awaited = await_gate(&mut client, &mesh[0]);
    mesh[0].node.destroy_actor(&id("p")).unwrap();
    let error = reply_to(&mut client, awaited).expect_err("destroyed");
    assert_eq!(error.reason(), Reason::StaleLocation, "{error}");
    mesh[0].observed.gate.open();
    assert_eq!(mesh[0].node.actor_count(), 0);
}

/// Startup refuses a turn deadline that a waiting move could not outlast:
/// it must be below the seal timeout minus the prepare timeout.
#[test]
fn startup_refuses_a_turn_deadline_not_below_the_seal_timeout_minus_the_prepare_timeout() {
    // Seal 3 s, prepare 1.5 s: 1.5 s is one too many.
    let refused = NodeBuilder::new(1)
        .settings(settings(
            Duration::from_millis(1_500),
            Duration::from_secs(3),
        ))
        .start();
    match refused {
        Err(StartError::Invalid(why)) => assert!(why.contains("actor_turn_deadline"), "{why}"),
        other => panic!("started: {:?}", other.map(|_| ())),
    }
    let started = NodeBuilder::new(1)
        .settings(settings(
            Duration::from_millis(1_499),
            Duration::from_secs(3),
        ))
        .start();
    assert!(started.is_ok(), "{:?}", started.map(|_| ()));
}
