//! Live Actor relocation over real sockets (§8, §8.1, §9; CONTRACT L1–L7):
//! a bound Actor moves between nodes of a loopback mesh while its client
//! stays connected to the node it connected to.

mod bound;
mod runtime_support;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{NodeSettings, RelocateTo, RelocationUnit};
use zlink::client::ClientError;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::wire::client::CloseReason;
use zlink::wire::node::{Command, NodeRecord};

/// Waits until the Actor is hosted by `to` and no longer by `from` (the
/// counts are published at the end of each shard loop turn).
fn wait_moved(from: &Game, to: &Game) {
    wait_until("the actor moved", || {
        from.node.actor_count() == 0 && to.node.actor_count() == 1
    });
}

/// L2 around a busy handler: the Actor's handler blocks its node while a
/// move is asked for, so 20 requests queue behind it and 20 more arrive
/// while the move runs. Where each of those runs (at the source before the
/// capture, or on the target from the saved work) depends on how the
/// source's turn meets the move, so this asserts what holds either way:
/// each ran exactly once, in the connection's order, each was answered,
/// the count continued, and those sent after the commit ran on the target.
/// The hand-over of saved work itself is pinned deterministically in the
/// core (`core_l2_saved_work_and_ingress_hold_processed_once_on_target`,
/// tests/core_relocation.rs); the item under plain load, on every layout,
/// is in tests/mesh_contract.rs.
#[test]
fn l2_messages_queued_behind_a_busy_handler_are_processed_once_around_the_move() {
    let mesh = start_mesh(3, GameOptions::default());
    let player = "player-1";
    mesh[1].node.create_actor("player", &id(player)).unwrap();
    let mut client = login(&mesh[0], player);
    let held = mesh[1].observed.held_receiver();

    // Given the actor's node busy in a handler, with requests queued
    // behind it, when a relocation is asked for meanwhile.
    let hold = client.start_request(HOLD, payload(player, "hold")).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "hold");
    let early: Vec<_> = (0..20)
        .map(|i| {
            let data = format!("early-{i}");
            client.start_request(RELAY, payload(player, &data)).unwrap()
        })
        .collect();
    let source = &mesh[1].node;
    let late = thread::scope(|scope| {
        let mover = scope.spawn(|| source.relocate(&id(player), RelocateTo::Node(3)));
        mesh[1].observed.release();
        // And more requests while the move runs.
        let late: Vec<_> = (0..20)
            .map(|i| {
                let data = format!("late-{i}");
                client.start_request(RELAY, payload(player, &data)).unwrap()
            })
            .collect();
        mover.join().unwrap().unwrap();
        late
    });
    // Where the early and late ones run depends on how the source's turn
    // met the move (all of them may finish there first); the ones sent
    // once it committed can run only on the target.
    let after: Vec<_> = (0..5)
        .map(|i| {
            let data = format!("after-{i}");
            client.start_request(RELAY, payload(player, &data)).unwrap()
        })
        .collect();
    // Then every request got its reply, each message was processed exactly
    // once in all (at the source before capture or on the target), in the
    // connection's order, and the count continued across the move.
    assert!(client.wait_reply(hold, WAIT).unwrap().is_ok());
    for (i, c) in early.into_iter().enumerate() {
        let reply = client.wait_reply(c, WAIT).unwrap().unwrap();
        assert_eq!(reply, payload(player, &format!("early-{i}")));
    }
    for (i, c) in late.into_iter().enumerate() {
        let reply = client.wait_reply(c, WAIT).unwrap().unwrap();
        assert_eq!(reply, payload(player, &format!("late-{i}")));
    }
    for (i, c) in after.into_iter().enumerate() {
        let reply = client.wait_reply(c, WAIT).unwrap().unwrap();
        assert_eq!(reply, payload(player, &format!("after-{i}")));
    }
    let mut processed = mesh[1].observed.delivered.lock().unwrap().clone();
    let on_target = mesh[2].observed.delivered.lock().unwrap().clone();
    assert!(
        on_target.ends_with(&[payload(player, "after-4")]),
        "the messages sent after the commit ran on the target"
    );
    processed.extend(on_target);
    let expected: Vec<Bytes> = std::iter::once(payload(player, "hold"))
        .chain((0..20).map(|i| payload(player, &format!("early-{i}"))))
        .chain((0..20).map(|i| payload(player, &format!("late-{i}"))))
        .chain((0..5).map(|i| payload(player, &format!("after-{i}"))))
        .collect();
    assert_eq!(
        processed, expected,
        "exactly once, in the connection's order"
    );
    assert_eq!(
        client
            .request(COUNT, payload(player, "count"), WAIT)
            .unwrap(),
        Bytes::from("47")
    );
}

#[test]
fn a_type_without_a_snapshot_or_a_user_spot_member_is_not_relocatable_and_stays() {
    let mesh = start_mesh(2, GameOptions::default());
    let hall = mesh[0]
        .node
        .create_spot("hall", &zlink::ids::SpotId::new("hall-1").unwrap())
        .unwrap();
    mesh[0]
        .node
        .create_actor_in(&hall, "player", &id("member"))
        .unwrap();
    let refused = mesh[0]
        .node
        .relocate(&id("member"), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(
        (refused.kind(), refused.reason()),
        (ErrorKind::InvalidOperation, Reason::NotRelocatable)
    );
    // A hint that names no linked peer is refused, and so is a move of an
    // actor this node does not host.
    mesh[0].node.create_actor("player", &id("solo")).unwrap();
    let refused = mesh[0]
        .node
        .relocate(&id("solo"), RelocateTo::Node(9))
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::RelocationTargetInvalid);
    let refused = mesh[1]
        .node
        .relocate(&id("solo"), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Unavailable);
    wait_until("both actors stay on node 1", || {
        mesh[0].node.actor_count() == 2 && mesh[1].node.actor_count() == 0
    });
}

/// A session node (1), the actor's source (2) and the target (3); the link
/// 1–3 (session owner ↔ target) and the link 2–3 (source ↔ target) pass a
/// tap each. The lower RID dials, so `ToAcceptor` is 1→3 and 2→3.
struct Moving {
    session: Game,
    source: Game,
    target: Game,
    session_target: LinkTap,
    source_target: LinkTap,
    /// The session owner's link to the source (the coordinator).
    session_source: LinkTap,
}

/// Waits until nodes 1 (`session`), 2 (`source`) and 3 (`target`) are
/// each linked to the other two.
fn all_linked(session: &Game, source: &Game, target: &Game) {
    for (node, peers) in [(session, [2, 3]), (source, [1, 3]), (target, [1, 2])] {
        for peer in peers {
            assert!(
                node.node.wait_linked(peer, WAIT),
                "link {} -> {peer}",
                node.rid
            );
        }
    }
}

fn moving(settings: NodeSettings) -> Moving {
    let store = new_store();
    let options = GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    };
    let target = start_node(3, Arc::clone(&store), options.clone(), &[]);
    let session_target = link_tap(target.node.peer_addr().unwrap());
    let source_target = link_tap(target.node.peer_addr().unwrap());
    let source = start_node(
        2,
        Arc::clone(&store),
        options.clone(),
        &[(3, source_target.addr)],
    );
    let session_source = link_tap(source.node.peer_addr().unwrap());
    let session = start_node(
        1,
        store,
        options,
        &[(2, session_source.addr), (3, session_target.addr)],
    );
    all_linked(&session, &source, &target);
    source.node.create_actor("player", &id("player-1")).unwrap();
    Moving {
        session,
        source,
        target,
        session_target,
        source_target,
        session_source,
    }
}

/// A request held under a seal that timed out ends with a typed error
/// (`Unavailable`, RelocationSealed) or with the close itself, and the
/// connection closes with `SealTimeout` (L3).
fn assert_held_request_ended_by_the_seal_timeout(
    client: &mut zlink::client::Client,
    ended: Result<Result<Bytes, zlink::error::Error>, ClientError>,
) {
    match ended {
        Ok(Err(error)) => {
            assert_eq!(error.reason(), Reason::RelocationSealed);
            assert_eq!(
                client.wait_closed(WAIT).unwrap(),
                Some(CloseReason::SealTimeout)
            );
        }
        Err(ClientError::Closed(reason)) => assert_eq!(reason, Some(CloseReason::SealTimeout)),
        other => panic!("a held request after the seal timeout: {other:?}"),
    }
}

/// A 600 ms seal timeout. Startup wants an Actor's turn deadline below the
/// seal timeout minus the prepare timeout (docs/actors.md "Async turns"), so
/// the prepare bound is 500 ms here and a turn may await 50 ms.
fn quick_seal() -> NodeSettings {
    NodeSettings {
        relocation_seal_timeout: Duration::from_millis(600),
        actor_turn_deadline: Duration::from_millis(50),
        relocation: zlink::api::RelocationConfig {
            prepare_timeout: Duration::from_millis(500),
            ..zlink::api::RelocationConfig::default()
        },
        pin_cores: false,
        ..NodeSettings::default()
    }
}

/// When the coordinator's 42 crossed the tap to the session owner, one
/// loopback hop before the session owner sealed the binding and armed its
/// SessionRelocationSealTimeout. The last event the test sees before the
/// arming: a start after it (the 43 at the tap, say) would be late by the
/// tap's own wake-up, as long as the close's way to the client, and a
/// correct timer would then look early now and then.
fn sealed_at(m: &Moving) -> Instant {
    m.session_source
        .first_seen(Direction::ToDialer, Command::SessionRelocationSeal.code())
        .expect("the coordinator asked for the seal")
}

/// The 60 as if the source expected another authority owner generation:
/// the target's CAS then conflicts after relay-ready (L6).
fn stale_expected_authority(record: NodeRecord) -> NodeRecord {
    match record {
        NodeRecord::RelocationPrepare(mut prepare) => {
            prepare.expected_authority.0 += 1;
            NodeRecord::RelocationPrepare(prepare)
        }
        other => other,
    }
}

/// L2 through the seal itself: the 44 commit is kept back at the tap, so a
/// message relayed after the 43 is held by the session owner (§8.1) until
/// it arrives; then it goes to the target, once, before a later relay.
#[test]
fn l2_a_message_relayed_under_the_seal_is_held_and_processed_once_on_the_target() {
    // The default seal timeout (3 s): the test takes its time.
    let settings = NodeSettings {
        pin_cores: false,
        ..NodeSettings::default()
    };
    let (m, mut client) = relocating_with(settings, Some(TapAction::Hold));
    wait_until("the 44 reached the tap", || {
        m.session_target.count(Direction::ToDialer, 44) == 1
    });
    let held = client
        .start_request(RELAY, payload("player-1", "held"))
        .unwrap();
    wait_until("the relay held under the seal", || {
        held_under_seal(&m.session) == 1
    });
    // When the 44 commit arrives.
    assert_eq!(m.session_target.replay(), 1);
    let later = client
        .start_request(RELAY, payload("player-1", "later"))
        .unwrap();
    assert_eq!(
        client.wait_reply(held, WAIT).unwrap(),
        Ok(payload("player-1", "held"))
    );
    assert_eq!(
        client.wait_reply(later, WAIT).unwrap(),
        Ok(payload("player-1", "later"))
    );
    // Then it ran on the target exactly once, before the later relay, and
    // never at the source.
    assert_eq!(
        m.target.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "held"), payload("player-1", "later")]
    );
    assert!(m.source.observed.delivered.lock().unwrap().is_empty());
    assert_eq!(
        m.session
            .node
            .flow_counters()
            .get(FlowTrace::HeldMessageReleased),
        1
    );
    assert_eq!(held_under_seal(&m.session), 0);
}

#[test]
fn l3_without_44_the_session_closes_at_the_seal_timeout_and_held_messages_are_dropped() {
    let m = moving(quick_seal());
    let mut client = login(&m.session, "player-1");
    m.session_target.set(
        Direction::ToDialer,
        Command::SessionRelocationRoute.code(),
        TapAction::Drop,
    );
    m.source
        .node
        .relocate(&id("player-1"), RelocateTo::Node(3))
        .unwrap();
    // The seal timeout was armed when the 42 sealed the binding: the clock
    // starts as the 42 reached the session owner's link.
    let sealed = sealed_at(&m);
    // The move committed at the target, but its 44 is lost: the binding
    // stays sealed at the session owner, which holds what is relayed now.
    let held = client
        .start_request(RELAY, payload("player-1", "held"))
        .unwrap();
    let ended = client.wait_reply(held, WAIT);
    let elapsed = sealed.elapsed();
    assert_held_request_ended_by_the_seal_timeout(&mut client, ended);
    assert!(
        elapsed >= Duration::from_millis(600),
        "ended {elapsed:?} after the 42"
    );
    assert!(elapsed < WAIT);
    assert_eq!(m.session_target.count(Direction::ToDialer, 44), 1);
    // The held message reached no actor, then or later.
    let (source_seen, target_seen) = (&m.source.observed, &m.target.observed);
    wait_counter(&m.session, FlowTrace::SealTimeout, 1);
    assert!(!source_seen
        .delivered
        .lock()
        .unwrap()
        .contains(&payload("player-1", "held")));
    assert!(!target_seen
        .delivered
        .lock()
        .unwrap()
        .contains(&payload("player-1", "held")));
}

/// A quick-seal three-node move of player-1 from node 2 to node 3, its
/// client bound on node 1; the 44 coming back to node 1 is handled by
/// `route` when given.
fn relocating(route: Option<TapAction>) -> (Moving, zlink::client::Client) {
    relocating_with(quick_seal(), route)
}

/// [`relocating`] with these settings.
fn relocating_with(
    settings: NodeSettings,
    route: Option<TapAction>,
) -> (Moving, zlink::client::Client) {
    let m = moving(settings);
    let client = login(&m.session, "player-1");
    if let Some(action) = route {
        m.session_target.set(
            Direction::ToDialer,
            Command::SessionRelocationRoute.code(),
            action,
        );
    }
    m.source
        .node
        .relocate(&id("player-1"), RelocateTo::Node(3))
        .unwrap();
    (m, client)
}

#[test]
fn l4_a_duplicate_44_changes_no_route_and_only_warns() {
    let (m, mut client) = relocating(Some(TapAction::Keep));
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "after"), WAIT)
            .unwrap(),
        payload("player-1", "after")
    );
    // When the 44 commit arrives again (a late duplicate).
    assert_eq!(m.session_target.replay(), 1);
    wait_counter(&m.session, FlowTrace::LateSessionRouteUpdate, 1);
    // Then the route is unchanged: relay still reaches the target, and the
    // duplicate left the warning and nothing else.
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "again"), WAIT)
            .unwrap(),
        payload("player-1", "again")
    );
    let on_target = m.target.observed.delivered.lock().unwrap().clone();
    assert_eq!(
        on_target,
        vec![payload("player-1", "after"), payload("player-1", "again")]
    );
    assert_eq!(
        m.session
            .node
            .flow_counters()
            .get(FlowTrace::LateSessionRouteUpdate),
        1
    );
    assert!(!client.is_closed());
}

/// The duplicate above is byte for byte the 44 that switched the route, so
/// applying it again would not show. Here the late 44 is an earlier move's:
/// the Actor moved 2 → 3, then back 3 → 2, and only then does the first
/// move's 44 (route: node 3) arrive again. The route must still name node 2.
#[test]
fn l4_a_late_44_of_an_earlier_move_changes_no_route_and_only_warns() {
    let (m, mut client) = relocating(Some(TapAction::Keep));
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "there"), WAIT)
            .unwrap(),
        payload("player-1", "there")
    );
    // The Actor moves back to node 2; that move's 44 comes from node 2.
    m.target
        .node
        .relocate(&id("player-1"), RelocateTo::Node(2))
        .unwrap();
    wait_moved(&m.target, &m.source);
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "back"), WAIT)
            .unwrap(),
        payload("player-1", "back")
    );
    let relays_to_3 = m.session_target.count(Direction::ToAcceptor, 24);
    // When the first move's 44 arrives again, late.
    assert_eq!(m.session_target.replay(), 1);
    wait_counter(&m.session, FlowTrace::LateSessionRouteUpdate, 1);
    // Then the route still names node 2: the next relay goes straight
    // there, none over the link to node 3.
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "still"), WAIT)
            .unwrap(),
        payload("player-1", "still")
    );
    assert_eq!(
        m.session_target.count(Direction::ToAcceptor, 24),
        relays_to_3
    );
    assert_eq!(
        m.source.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "back"), payload("player-1", "still")]
    );
    assert_eq!(
        m.target.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "there")]
    );
    assert_eq!(
        m.session
            .node
            .flow_counters()
            .get(FlowTrace::LateSessionRouteUpdate),
        1
    );
    assert!(!client.is_closed());
}

#[test]
fn l4_a_44_after_the_seal_timeout_changes_no_route_and_only_warns() {
    // The target's 44 commit is kept back until after the seal timeout.
    let (m, mut client) = relocating(Some(TapAction::Hold));
    wait_until("the 44 reached the tap", || {
        m.session_target.count(Direction::ToDialer, 44) == 1
    });
    assert_eq!(
        client.wait_closed(WAIT).unwrap(),
        Some(CloseReason::SealTimeout)
    );
    wait_counter(&m.session, FlowTrace::SealTimeout, 1);
    let sent_before = m.session_target.records.lock().unwrap().len();
    // When the 44 arrives after the timeout.
    assert_eq!(m.session_target.replay(), 1);
    wait_counter(&m.session, FlowTrace::LateSessionRouteUpdate, 1);
    // Then it installed no route: the session owner sent nothing in answer,
    // and a new login finds the Actor through the store on the target, where
    // it relays.
    let mut again = login(&m.session, "player-1");
    assert_eq!(
        again
            .request(RELAY, payload("player-1", "again"), WAIT)
            .unwrap(),
        payload("player-1", "again")
    );
    assert_eq!(
        m.target.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "again")]
    );
    // Nothing answered the late 44: the first records after it are the new
    // login's: its BindOrGet's ask to the row's owner (71), the answer, and
    // its bind (38).
    let after = m.session_target.records.lock().unwrap()[sent_before..].to_vec();
    assert_eq!(
        after[..3],
        [
            (Direction::ToAcceptor, 71),
            (Direction::ToDialer, 71),
            (Direction::ToAcceptor, 38)
        ],
        "{after:?}"
    );
}

#[test]
fn l7_43_has_no_sequence_44_gets_no_response_45_is_never_sent_and_refused() {
    let (m, mut client) = relocating(None);
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "after"), WAIT)
            .unwrap(),
        payload("player-1", "after")
    );
    // 43 on the wire: its body decodes to exactly the request id and the
    // outcome, and encodes back to the same bytes (no sequence, no
    // high-water, nothing trailing: the decoder refuses trailing bytes).
    let sealed = m.session_source.frames(
        Direction::ToAcceptor,
        Command::SessionRelocationSealed.code(),
    );
    assert_eq!(sealed.len(), 1);
    let record = NodeRecord::decode(
        Bytes::copy_from_slice(&sealed[0][4..]),
        &zlink::wire::DecodeLimits::default(),
    )
    .unwrap();
    let NodeRecord::SessionRelocationSealed(body) = record else {
        panic!("a 43 decoded as {record:?}");
    };
    assert_eq!(body.outcome, Ok(()));
    let mut exact = bytes::BytesMut::new();
    NodeRecord::SessionRelocationSealed(zlink::wire::node::SessionRelocationSealed {
        request: body.request,
        outcome: Ok(()),
    })
    .encode(&mut exact);
    assert_eq!(&exact[..], &sealed[0][..]);
    // 44 gets no response: after the 44 arrived, the session owner sent
    // only the relay to the target and nothing more to the coordinator.
    assert_eq!(m.session_target.count(Direction::ToDialer, 44), 1);
    let from_session = |tap: &LinkTap| -> Vec<u8> {
        tap.records
            .lock()
            .unwrap()
            .iter()
            .filter(|(d, _)| *d == Direction::ToAcceptor)
            .map(|(_, c)| *c)
            .collect()
    };
    assert_eq!(from_session(&m.session_target), vec![24]);
    let to_source = from_session(&m.session_source);
    let after_43 = to_source.iter().position(|&c| c == 43).unwrap();
    assert!(
        to_source[after_43 + 1..].is_empty(),
        "after its 43 the session owner sent the coordinator {:?}",
        &to_source[after_43 + 1..]
    );
    // 45 is never sent on any link.
    for tap in [&m.session_target, &m.source_target, &m.session_source] {
        assert!(!tap.commands.lock().unwrap().contains(&45));
    }
    // And refused on receipt: a 45 from the target is dropped and counted,
    // and the link keeps carrying the relay and its reply.
    let dropped = m
        .session
        .node
        .flow_counters()
        .get(FlowTrace::MalformedRecordDropped);
    m.session_target
        .inject(Direction::ToDialer, &[0, 0, 0, 2, 45, 1]);
    wait_counter(&m.session, FlowTrace::MalformedRecordDropped, dropped + 1);
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "still"), WAIT)
            .unwrap(),
        payload("player-1", "still")
    );
    assert!(!client.is_closed());
}

#[test]
fn l5_a_target_lost_before_relay_ready_sends_held_messages_over_the_source_route() {
    let m = moving(NodeSettings {
        relocation_seal_timeout: Duration::from_secs(3),
        pin_cores: false,
        ..NodeSettings::default()
    });
    let mut client = login(&m.session, "player-1");
    // The target never gets the prepare (60): for the source it failed
    // before relay-ready.
    m.source_target.set(
        Direction::ToAcceptor,
        Command::RelocationPrepare.code(),
        TapAction::Drop,
    );
    let refused = thread::scope(|scope| {
        let mover = scope.spawn(|| m.source.node.relocate(&id("player-1"), RelocateTo::Node(3)));
        // The 60 goes out once the session owner sealed the binding (43).
        wait_until("the prepare was sent", || {
            m.source_target.count(Direction::ToAcceptor, 60) == 1
        });
        let held = client
            .start_request(RELAY, payload("player-1", "held"))
            .unwrap();
        // The session owner holds it under the seal (§8.1) ...
        wait_until("the relay held under the seal", || {
            held_under_seal(&m.session) == 1
        });
        let reply = client.wait_reply(held, WAIT).unwrap();
        assert_eq!(reply.unwrap(), payload("player-1", "held"));
        mover.join().unwrap()
    });
    // ... and the 44 abort released it over the source route.
    assert_eq!(
        m.session
            .node
            .flow_counters()
            .get(FlowTrace::HeldMessageReleased),
        1
    );
    assert_eq!(held_under_seal(&m.session), 0);
    assert_eq!(m.session_target.count(Direction::ToAcceptor, 24), 0);
    // The coordinator's bounded wait for relay-ready ended the move.
    let error = refused.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DeadlineExceeded, "{error:?}");
    // The held message was processed at the source; the connection stays,
    // and the actor is still served there.
    assert_eq!(
        m.source.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "held")]
    );
    assert!(m.target.observed.delivered.lock().unwrap().is_empty());
    assert_eq!(
        client
            .request(COUNT, payload("player-1", "count"), WAIT)
            .unwrap(),
        Bytes::from_static(b"2")
    );
    assert!(!client.is_closed());
    assert_eq!(m.source.node.actor_count(), 1);
}

#[test]
fn l6_a_cas_failure_after_relay_ready_never_reopens_the_source_and_the_seal_times_out() {
    let m = moving(quick_seal());
    let before = lost_after_relay_ready(&m);
    // The row still names the source, but that incarnation is lost: a new
    // create makes a new incarnation, never a blank instance under the old
    // ObjectGeneration that old bindings would resolve to (§1, §4).
    let again = m
        .source
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    assert_ne!(again.generation, before.generation);
    wait_counter(&m.source, FlowTrace::LostIncarnationReplaced, 1);
    wait_until("the new incarnation is hosted", || {
        m.source.node.actor_count() == 1
    });
}

/// Issue 19 item 3: after the same loss, a login on a third node (the
/// session's) finds the row naming the source. The row is the source's to
/// judge (§8.1), so the login asks it (71): the source records the loss,
/// replaces the incarnation, and the login binds the new one there. Before
/// the ask, such a login bound at the source and was refused StaleLocation
/// for as long as the source lived.
#[test]
fn l6_after_the_loss_a_login_on_a_third_node_reaches_a_new_incarnation_at_the_rows_owner() {
    let m = moving(quick_seal());
    let before = lost_after_relay_ready(&m);
    let mut client = login(&m.session, "player-1");
    assert_eq!(
        expect_reply(&mut client, RELAY, "player-1:back"),
        payload("player-1", "back")
    );
    wait_counter(&m.source, FlowTrace::LostIncarnationReplaced, 1);
    assert!(m.session.node.flow_counters().get(FlowTrace::HostAsked) >= 1);
    assert_eq!(m.source.node.actor_count(), 1);
    assert_eq!(
        m.session.node.actor_count(),
        0,
        "nothing hosted on the asker"
    );
    // A new incarnation: the old ActorRef names another generation.
    let now = m
        .session
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    assert_ne!(now.generation, before.generation);
    assert_eq!(now.location.owner.0, m.source.rid);
}

/// A move of `player-1` (bound on the session node) from the source to
/// the target whose CAS fails after relay-ready (L6): the seal times out,
/// no node hosts the Actor, and the row still names the source. Returns
/// the lost incarnation's ActorRef.
fn lost_after_relay_ready(m: &Moving) -> zlink::ids::ActorRef {
    let before = m
        .source
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let mut client = login(&m.session, "player-1");
    m.source_target.set(
        Direction::ToAcceptor,
        Command::RelocationPrepare.code(),
        TapAction::Rewrite(stale_expected_authority),
    );
    let failed = m
        .source
        .node
        .relocate(&id("player-1"), RelocateTo::Node(3))
        .unwrap_err();
    let sealed = sealed_at(m);
    assert_eq!(failed.kind(), ErrorKind::Unavailable, "{failed:?}");
    // No 44 came: what the client relays now is held, and the seal timeout
    // closes the session; nothing goes back to the source route.
    let held = client
        .start_request(RELAY, payload("player-1", "held"))
        .unwrap();
    let ended = client.wait_reply(held, WAIT);
    assert_held_request_ended_by_the_seal_timeout(&mut client, ended);
    let elapsed = sealed.elapsed();
    assert!(
        elapsed >= Duration::from_millis(600),
        "ended {elapsed:?} after the 42"
    );
    assert_eq!(m.session_target.count(Direction::ToDialer, 44), 0);
    for game in [&m.source, &m.target] {
        assert!(game.observed.delivered.lock().unwrap().is_empty());
    }
    wait_until("neither node hosts it", || {
        m.source.node.actor_count() == 0 && m.target.node.actor_count() == 0
    });
    before
}

#[test]
fn x5_a_bind_that_reaches_the_owner_during_the_pre_commit_seal_is_unavailable() {
    let m = moving(NodeSettings {
        pin_cores: false,
        ..NodeSettings::default()
    });
    let mut bound = login(&m.session, "player-1");
    let mut other = m.session.client();
    assert_eq!(
        expect_reply(&mut other, STASH, "player-1"),
        Bytes::from_static(b"stashed")
    );
    // The move stays pre-commit: its prepare never reaches the target.
    m.source_target.set(
        Direction::ToAcceptor,
        Command::RelocationPrepare.code(),
        TapAction::Drop,
    );
    let moved = thread::scope(|scope| {
        let mover = scope.spawn(|| m.source.node.relocate(&id("player-1"), RelocateTo::Node(3)));
        wait_until("the prepare was sent", || {
            m.source_target.count(Direction::ToAcceptor, 60) == 1
        });
        // The actor owner decides (§12): Unavailable, and the existing
        // binding is not replaced.
        let error = expect_error(&mut other, BIND_STASHED, "");
        assert_eq!(
            (error.kind(), error.reason()),
            (ErrorKind::Unavailable, Reason::RelocationSealed)
        );
        // Nor can the source destroy it mid-move.
        let error = m.source.node.destroy_actor(&id("player-1")).unwrap_err();
        assert_eq!(error.reason(), Reason::RelocationSealed);
        mover.join().unwrap()
    });
    // The 61 never came: the move aborted at its prepare deadline (L5) and
    // the actor stays at the source, bound as before.
    let aborted = moved.unwrap_err();
    assert_eq!(
        (aborted.kind(), aborted.reason()),
        (ErrorKind::DeadlineExceeded, Reason::Deadline)
    );
    assert_eq!(m.source.node.actor_count(), 1);
    assert_eq!(m.target.node.actor_count(), 0);
    assert_eq!(
        bound
            .request(RELAY, payload("player-1", "still"), WAIT)
            .unwrap(),
        payload("player-1", "still")
    );
    assert!(m
        .session
        .observed
        .replaced_callbacks
        .lock()
        .unwrap()
        .is_empty());
}

/// Found by the churn demo (a blank player under the old incarnation): a
/// login on the source after relay-ready and before the target's CAS, when
/// the source no longer hosts the Actor but the store row still names it,
/// must reach the moved Actor (held by the coordinator, then followed),
/// never a blank instance hosted anew at the source (§1, §8.1, P2).
#[test]
fn x5_a_login_on_the_source_after_relay_ready_binds_the_moved_actor_not_a_new_one() {
    let m = moving(NodeSettings {
        pin_cores: false,
        ..NodeSettings::default()
    });
    let mut first = login(&m.session, "player-1");
    assert_eq!(
        expect_reply(&mut first, RELAY, "player-1:one"),
        payload("player-1", "one")
    );
    // The cutover (63) is held back: the target takes authority only at its
    // 1,000 ms fallback, and until then the source is handed over, its
    // registry empty, while the store row still names it.
    m.source_target.set(
        Direction::ToAcceptor,
        Command::RelocationCutover.code(),
        TapAction::Hold,
    );
    let (moved, mut second, login) = thread::scope(|scope| {
        let mover = scope.spawn(|| m.source.node.relocate(&id("player-1"), RelocateTo::Node(3)));
        wait_until("the cutover was held", || {
            m.source_target.count(Direction::ToAcceptor, 63) == 1
        });
        wait_until("the source dropped its instance", || {
            m.source.node.actor_count() == 0
        });
        // A second login of the player on the source node meanwhile.
        let mut second = m.source.client();
        let login = second
            .start_request(LOGIN, Bytes::from_static(b"player-1"))
            .unwrap();
        (mover.join().unwrap(), second, login)
    });
    moved.unwrap();
    // Then the login bound the moved player, which kept its state, and the
    // first session was replaced (§6); the source hosts nothing.
    assert_eq!(
        second.wait_reply(login, WAIT).unwrap().unwrap(),
        Bytes::from_static(b"bound")
    );
    assert_eq!(
        expect_reply(&mut second, COUNT, "player-1:count"),
        Bytes::from_static(b"2")
    );
    assert_eq!(
        first.wait_closed(WAIT).unwrap(),
        Some(CloseReason::Replaced)
    );
    assert_eq!(m.source.node.actor_count(), 0);
    assert_eq!(m.target.node.actor_count(), 1);
}

#[test]
fn x18_a_seal_and_a_commit_proceed_while_the_session_callback_awaits() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1]
        .node
        .create_actor("player", &id("player-1"))
        .unwrap();
    let held = mesh[0].observed.held_receiver();
    let mut client = login(&mesh[0], "player-1");
    let stall = client.start_request(STALL, Bytes::new()).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "stall");
    // While the session's callback awaits, the 42 → 43 seal and the 44
    // commit run on the session owner: the move completes.
    mesh[1]
        .node
        .relocate(&id("player-1"), RelocateTo::Node(3))
        .unwrap();
    wait_moved(&mesh[1], &mesh[2]);
    mesh[0].observed.gate.open();
    assert_eq!(
        client.wait_reply(stall, WAIT).unwrap().unwrap(),
        Bytes::from_static(b"unstalled")
    );
    assert_eq!(
        client
            .request(RELAY, payload("player-1", "after"), WAIT)
            .unwrap(),
        payload("player-1", "after")
    );
    assert_eq!(
        *mesh[2].observed.delivered.lock().unwrap(),
        vec![payload("player-1", "after")]
    );
}

#[test]
fn x7_shutdown_of_an_actor_owner_moves_its_actors_and_their_clients_keep_playing() {
    let mut mesh = start_mesh(3, GameOptions::default());
    for name in ["player-1", "player-2"] {
        mesh[2].node.create_actor("player", &id(name)).unwrap();
    }
    let mut clients: Vec<_> = ["player-1", "player-2"]
        .iter()
        .map(|name| {
            let mut client = login(&mesh[0], name);
            client
                .request(RELAY, payload(name, "before"), WAIT)
                .unwrap();
            client
        })
        .collect();
    // When the actors' node shuts down (a deploy drains it).
    let owner = mesh.pop().unwrap();
    owner.node.shutdown();
    // Then the actors live on the other nodes, with their state, and the
    // clients — connected elsewhere — never noticed.
    wait_until("the actors moved", || {
        mesh[0].node.actor_count() + mesh[1].node.actor_count() == 2
    });
    for (client, name) in clients.iter_mut().zip(["player-1", "player-2"]) {
        assert_eq!(
            client.request(COUNT, payload(name, "count"), WAIT).unwrap(),
            Bytes::from_static(b"2")
        );
        assert!(!client.is_closed());
    }
    assert!(owner.observed.disconnects.lock().unwrap().is_empty());
}

#[test]
fn relocate_all_moves_every_actor_and_lists_those_that_cannot_move() {
    let mesh = start_mesh(2, GameOptions::default());
    let hall = mesh[0]
        .node
        .create_spot("hall", &zlink::ids::SpotId::new("hall-1").unwrap())
        .unwrap();
    mesh[0]
        .node
        .create_actor_in(&hall, "player", &id("member"))
        .unwrap();
    for name in ["a", "b", "c"] {
        mesh[0].node.create_actor("player", &id(name)).unwrap();
    }
    let room = mesh[0]
        .node
        .create_spot("room", &zlink::ids::SpotId::new("room-9").unwrap())
        .unwrap();
    for name in ["room-9/x", "room-9/y"] {
        mesh[0]
            .node
            .create_actor_in(&room, "player", &id(name))
            .unwrap();
    }
    let stayed = mesh[0].node.relocate_all(RelocateTo::Node(2));
    assert_eq!(stayed.len(), 1, "{stayed:?}");
    assert_eq!(stayed[0].0, RelocationUnit::Actor(id("member")));
    assert_eq!(stayed[0].1.reason(), Reason::NotRelocatable);
    // The three alone and the room with its two moved; the hall member
    // (a PerActor User Spot) and its hall stayed.
    wait_until("five moved", || {
        mesh[0].node.actor_count() == 1
            && mesh[1].node.actor_count() == 5
            && (mesh[0].node.spot_count(), mesh[1].node.spot_count()) == (1, 1)
    });
}

#[test]
fn a_spotwide_spot_moves_as_one_unit_with_its_actors_and_their_queued_work() {
    let mesh = start_mesh(3, GameOptions::default());
    let room = zlink::ids::SpotId::new("room-1").unwrap();
    let handle = mesh[1].node.create_spot("room", &room).unwrap();
    let members = ["room-1/a", "room-1/b", "room-1/c"];
    for name in members {
        mesh[1]
            .node
            .create_actor_in(&handle, "player", &id(name))
            .unwrap();
    }
    let mut clients: Vec<_> = members.iter().map(|name| login(&mesh[0], name)).collect();
    for (client, name) in clients.iter_mut().zip(members) {
        client
            .request(RELAY, payload(name, "before"), WAIT)
            .unwrap();
    }
    // When the room moves to node 3 while every member's client keeps
    // sending.
    let source = &mesh[1].node;
    let sent = thread::scope(|scope| {
        let mover = scope.spawn(|| source.relocate_spot(&room, RelocateTo::Node(3)));
        let mut sent = Vec::new();
        for round in 0..10 {
            for (client, name) in clients.iter_mut().zip(members) {
                let data = format!("during-{round}");
                sent.push((
                    client.start_request(RELAY, payload(name, &data)).unwrap(),
                    name,
                    data,
                ));
            }
        }
        mover.join().unwrap().unwrap();
        sent
    });
    // Then every request was answered once, in each connection's order.
    for (correlation, name, data) in sent {
        let client = &mut clients[members.iter().position(|m| *m == name).unwrap()];
        assert_eq!(
            client.wait_reply(correlation, WAIT).unwrap().unwrap(),
            payload(name, &data)
        );
    }
    // The Spot and its three Actors live on node 3 now, with their state,
    // and their turns never overlapped on either node (one gate).
    wait_until("the room moved", || {
        (mesh[1].node.spot_count(), mesh[1].node.actor_count()) == (0, 0)
            && (mesh[2].node.spot_count(), mesh[2].node.actor_count()) == (1, 3)
    });
    for (client, name) in clients.iter_mut().zip(members) {
        assert_eq!(
            client.request(COUNT, payload(name, "count"), WAIT).unwrap(),
            Bytes::from_static(b"12")
        );
    }
    for game in &mesh[1..] {
        assert!(
            game.observed
                .turns_overlap_max
                .load(std::sync::atomic::Ordering::SeqCst)
                <= 1
        );
    }
    let delivered: usize = mesh[1..]
        .iter()
        .map(|g| g.observed.delivered.lock().unwrap().len())
        .sum();
    assert_eq!(delivered, 3 * 12, "each message processed exactly once");
    // An empty room does not move (nothing would create it at the target).
    let empty = zlink::ids::SpotId::new("room-2").unwrap();
    mesh[2].node.create_spot("room", &empty).unwrap();
    let refused = mesh[2]
        .node
        .relocate_spot(&empty, RelocateTo::Any)
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::NotRelocatable);
    // A member cannot move alone, and a PerActor Spot does not move.
    mesh[2]
        .node
        .create_spot("hall", &zlink::ids::SpotId::new("hall-1").unwrap())
        .unwrap();
    let refused = mesh[2]
        .node
        .relocate_spot(&zlink::ids::SpotId::new("hall-1").unwrap(), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::NotRelocatable);
    let refused = mesh[2]
        .node
        .relocate(&id("room-1/a"), RelocateTo::Any)
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::NotRelocatable);
}

#[test]
fn a_spot_move_whose_restore_fails_leaves_no_empty_spot_at_the_target() {
    let store = new_store();
    let target = start_node(
        3,
        Arc::clone(&store),
        GameOptions {
            failing_restore: true,
            ..GameOptions::default()
        },
        &[],
    );
    let source = start_node(
        2,
        store,
        GameOptions::default(),
        &[(3, target.node.peer_addr().unwrap())],
    );
    assert!(source.node.wait_linked(3, WAIT));
    let room = zlink::ids::SpotId::new("room-1").unwrap();
    let handle = source.node.create_spot("room", &room).unwrap();
    source
        .node
        .create_actor_in(&handle, "player", &id("room-1/a"))
        .unwrap();
    let mut client = login(&source, "room-1/a");

    // When the first member's restore fails at the target.
    let failed = source
        .node
        .relocate_spot(&room, RelocateTo::Node(3))
        .unwrap_err();
    assert_eq!(failed.reason(), Reason::MalformedRecord, "{failed:?}");

    // Then the room and its member stay at the source and keep playing, and
    // the target keeps no empty room (the restore had created it there).
    assert_eq!(
        expect_reply(&mut client, RELAY, "room-1/a:after"),
        payload("room-1/a", "after")
    );
    wait_until("the target holds no room", || {
        (target.node.spot_count(), target.node.actor_count()) == (0, 0)
    });
    assert_eq!(
        (source.node.spot_count(), source.node.actor_count()),
        (1, 1)
    );
}

#[test]
fn without_a_hint_a_peer_that_cannot_host_is_skipped_and_the_next_one_takes_the_actor() {
    let store = new_store();
    let server = start_node(3, Arc::clone(&store), GameOptions::default(), &[]);
    let client_role = start_node(
        2,
        Arc::clone(&store),
        GameOptions {
            client_role: true,
            ..GameOptions::default()
        },
        &[(3, server.node.peer_addr().unwrap())],
    );
    let source = start_node(
        1,
        store,
        GameOptions::default(),
        &[
            (2, client_role.node.peer_addr().unwrap()),
            (3, server.node.peer_addr().unwrap()),
        ],
    );
    assert!(source.node.wait_linked(2, WAIT) && source.node.wait_linked(3, WAIT));
    for name in ["player-1", "player-2", "player-3"] {
        source.node.create_actor("player", &id(name)).unwrap();
    }
    // The placement policy's first choice (the peers in turn, RID order) is
    // the client-role node 2: it refuses, and node 3 is asked next.
    source
        .node
        .relocate(&id("player-1"), RelocateTo::Any)
        .unwrap();
    assert!(source.node.relocate_all(RelocateTo::Any).is_empty());
    wait_until("every actor is on node 3", || {
        (source.node.actor_count(), server.node.actor_count()) == (0, 3)
    });
    assert_eq!(client_role.node.actor_count(), 0);
    // A hint is never replaced by another target.
    server.node.create_actor("player", &id("player-4")).unwrap();
    let refused = server
        .node
        .relocate(&id("player-4"), RelocateTo::Node(2))
        .unwrap_err();
    assert_eq!(refused.reason(), Reason::NoActorFactory, "{refused:?}");
}

#[test]
fn x22_l3_d1_a_seal_timeout_ends_the_sealed_binding_with_one_disconnect_callback_at_the_target() {
    // Given a move of player-1 whose 44 commit never reaches the session
    // owner (node 1), and player-2, hosted on the target, for the marker.
    let (m, mut client) = relocating(Some(TapAction::Drop));
    m.target
        .node
        .create_actor("player", &id("player-2"))
        .unwrap();
    // When the seal times out, the session closes with SealTimeout.
    assert_eq!(
        client.wait_closed(WAIT).unwrap(),
        Some(CloseReason::SealTimeout)
    );
    // Then the Actor, now on the target, sees on_disconnect_actor (§7, §1
    // table: every Actor of the binding snapshot), carried there from the
    // source by Message Follow.
    assert_eq!(
        m.target.disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    // Exactly once: the next callback on the target is the marker's, a
    // session that binds player-2 and leaves.
    let marker = login(&m.session, "player-2");
    drop(marker);
    assert_eq!(
        m.target.disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-2"
    );
    assert!(!m
        .source
        .observed
        .disconnects
        .lock()
        .unwrap()
        .contains(&"player-1".to_owned()));
    wait_counter(&m.source, FlowTrace::MessageFollowed, 2);
}

/// A mesh of `n` nodes whose drain lasts 3 s: long enough for a test's
/// steps during it on a loaded 2-core machine.
fn mesh_with_a_long_drain(n: u64) -> Vec<Game> {
    let settings = NodeSettings {
        shutdown_deadline: Duration::from_millis(3_000),
        ..NodeSettings::default()
    };
    start_mesh(
        n,
        GameOptions {
            settings: Some(settings),
            ..GameOptions::default()
        },
    )
}

/// Starts the shutdown of `game` in another thread and returns once its
/// drain has begun (it refuses a login with `ShuttingDown`). A session of
/// its own, returned with the stopper, keeps the drain going until its
/// deadline.
fn start_draining(game: Game) -> (thread::JoinHandle<()>, zlink::client::Client) {
    let mut keeper = login(&game, "k");
    let stopper = thread::spawn(move || game.node.shutdown());
    let deadline = Instant::now() + WAIT;
    loop {
        match keeper.request(LOGIN, Bytes::from_static(b"k2"), WAIT) {
            Err(ClientError::Remote(e)) if e.reason() == Reason::ShuttingDown => break,
            Ok(_) => assert!(Instant::now() < deadline, "the drain never began"),
            Err(other) => panic!("a login during the drain: {other}"),
        }
    }
    (stopper, keeper)
}

/// §10 Shutdown, found by driving real processes: a player moved onto a
/// node while that node drained was left behind by its drain (whose moves
/// away were chosen at its start) and ended at its stop, and its session
/// was answered StaleLocation for good. A node that drains takes no Actor
/// by relocation: a move to it ends `ShuttingDown`, and the player stays
/// at its source with its state, its session served as before.
#[test]
fn a_move_to_a_draining_node_is_refused_and_the_player_stays_with_its_state() {
    let mut mesh = mesh_with_a_long_drain(2);
    let mut player = login(&mesh[0], "p");
    assert_eq!(
        player.request(COUNT, payload("p", "one"), WAIT).unwrap(),
        Bytes::from_static(b"1")
    );
    // Node 2 drains.
    let (stopper, _keeper) = start_draining(mesh.pop().unwrap());
    let refused = mesh[0]
        .node
        .relocate(&id("p"), RelocateTo::Node(2))
        .expect_err("a draining node takes no actor");
    assert_eq!(refused.reason(), Reason::ShuttingDown, "{refused}");
    // The player is still at node 1, with its state.
    assert_eq!(
        player.request(COUNT, payload("p", "two"), WAIT).unwrap(),
        Bytes::from_static(b"2")
    );
    stopper.join().unwrap();
    assert_eq!(
        player.request(COUNT, payload("p", "three"), WAIT).unwrap(),
        Bytes::from_static(b"3")
    );
}

/// §10, docs/relocation.md ("A draining target"): a move with no hint
/// that a draining peer refuses (`ShuttingDown`, before anything moved)
/// is asked of the next linked peer, as one a peer cannot host. Two moves
/// take the two peers in turn, so one of them asks the draining node
/// first; both commit (at the other peer, the only one that takes them),
/// with the players' state.
#[test]
fn a_move_without_a_hint_passes_over_a_draining_peer() {
    let mut mesh = mesh_with_a_long_drain(3);
    let mut players: Vec<_> = ["p", "q"]
        .iter()
        .map(|p| (*p, login(&mesh[0], p)))
        .collect();
    for (name, client) in &mut players {
        assert_eq!(
            client.request(COUNT, payload(name, "one"), WAIT).unwrap(),
            Bytes::from_static(b"1")
        );
    }
    let (stopper, _keeper) = start_draining(mesh.remove(1));
    for (name, client) in &mut players {
        mesh[0]
            .node
            .relocate(&id(name), RelocateTo::Any)
            .unwrap_or_else(|e| panic!("{name} not moved: {e}"));
        assert_eq!(
            client.request(COUNT, payload(name, "two"), WAIT).unwrap(),
            Bytes::from_static(b"2")
        );
    }
    stopper.join().unwrap();
}

/// docs/relocation.md "A 44 waits for its link" (§8.1): the target commits
/// a move while its link to the session owner is down — as when the target
/// has just restarted and links to its peers one by one — and the link
/// comes up within the seal timeout. The 44 waits for that link and goes
/// out once it is up: the session owner switches the route, the request it
/// held is answered by the target, and the session stays open. Dropped
/// instead, the seal would time out and close the session though the move
/// succeeded.
#[test]
fn a_44_committed_while_the_target_has_no_link_to_the_session_owner_goes_out_when_the_link_is_up() {
    // Given a session on node 1 bound to player-1 on node 2, and node 3
    // reached by node 1 through a proxy (node 1 dials node 3),
    let settings = NodeSettings {
        // The seal must outlast node 1's redial backoff (at most 2 s).
        relocation_seal_timeout: Duration::from_secs(10),
        pin_cores: false,
        ..NodeSettings::default()
    };
    let options = GameOptions {
        settings: Some(settings),
        ..GameOptions::default()
    };
    let store = new_store();
    let target = start_node(3, Arc::clone(&store), options.clone(), &[]);
    let proxy = FaultProxy::start(target.node.peer_addr().unwrap());
    let source = start_node(
        2,
        Arc::clone(&store),
        options.clone(),
        &[(3, target.node.peer_addr().unwrap())],
    );
    let session = start_node(
        1,
        store,
        options,
        &[(2, source.node.peer_addr().unwrap()), (3, proxy.addr)],
    );
    all_linked(&session, &source, &target);
    source.node.create_actor("player", &id("player-1")).unwrap();
    let mut client = login(&session, "player-1");
    // when the link between node 1 and node 3 is down (node 1's redials
    // refused),
    proxy.set_refusing(true);
    proxy.cut_all();
    assert!(
        target.node.wait_unlinked(1, WAIT),
        "node 3 saw its link to node 1 go"
    );
    // the player moves to node 3, which commits (its 44 for node 1 has no
    // link), and the client relays while its binding is sealed,
    source
        .node
        .relocate(&id("player-1"), RelocateTo::Node(3))
        .unwrap();
    let held = client
        .start_request(RELAY, payload("player-1", "held"))
        .unwrap();
    // and then node 1's next dial gets through,
    proxy.set_refusing(false);
    // then the 44 reaches node 1 once the link is up: the held request is
    // answered by the player on node 3,
    assert_eq!(
        client.wait_reply(held, WAIT).unwrap(),
        Ok(payload("player-1", "held"))
    );
    assert_eq!(
        target.observed.delivered.lock().unwrap().clone(),
        vec![payload("player-1", "held")]
    );
    // the session is still served, and no seal timed out.
    assert_eq!(
        expect_reply(&mut client, RELAY, "player-1:after"),
        payload("player-1", "after")
    );
    assert_eq!(session.node.flow_counters().get(FlowTrace::SealTimeout), 0);
    assert_eq!(
        target
            .node
            .flow_counters()
            .get(FlowTrace::RouteUpdateUnroutable),
        0
    );
}
