//! Core contract tests for disconnect notification (§7): CONTRACT D1, D2,
//! D3, X16, X17, proved on the sans-IO cores with virtual time.

mod common;

use std::time::Duration;

use common::*;
use zlink::core::session::{SessionEvent, SessionOwnerConfig, Ticket};
use zlink::core::trace::FlowTrace;
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{ActorId, NodeRid, SessionRid};
use zlink::sim::{ActorBehavior, Mesh};
use zlink::wire::client::CloseReason;
use zlink::wire::node::{BoundSessionBind, NodeRecord};

/// The outcomes of a NotifyDisconnected call.
fn notify_outcomes(mesh: &Mesh, node: NodeRid, ticket: Ticket) -> Vec<Result<(), Error>> {
    mesh.node(node)
        .session_events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::NotifyCompleted {
                ticket: t, outcome, ..
            } if *t == ticket => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// When each tombstone for `actor` of `session` was sent.
fn tombstones_at(
    mesh: &Mesh,
    actor: &ActorId,
    session: SessionRid,
) -> Vec<zlink::core::time::Instant> {
    mesh.tap()
        .iter()
        .filter_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(x))
                if x.actor == *actor && x.session.session == session =>
            {
                Some(t.at)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn core_d1_each_bound_actor_notified_once_all_settled() {
    // Given s on node 1 bound to "a" (node 2) and "b" (node 3), both Spots
    // answered by hand.
    let mut mesh = mesh();
    let (node, a_owner, b_owner) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    mesh.set_behavior(a_owner, ActorBehavior::Manual);
    mesh.set_behavior(b_owner, ActorBehavior::Manual);
    let a = mesh.host(a_owner, "a");
    let bb = mesh.host(b_owner, "b");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    bind_ok(&mut mesh, node, s, &bb);

    // When the connection ends.
    mesh.sessions(node).connection_lost(s);
    mesh.run();

    // Then each Actor's Spot callback is asked for once.
    let a_calls = mesh.disconnect_callbacks(a_owner, &a.id);
    let b_calls = mesh.disconnect_callbacks(b_owner, &bb.id);
    assert_eq!((a_calls.len(), b_calls.len()), (1, 1));

    // When "a"'s callback fails.
    mesh.actors(a_owner)
        .disconnect_done(a_calls[0], Err(Reason::QueueFull.into()));
    mesh.run();

    // Then "a" is cleaned up anyway, and "b" is still awaited, not dropped.
    assert_eq!(count(&mesh, node, FlowTrace::DisconnectCallbackFailed), 1);
    assert_eq!(registered(&mesh, a_owner, "a"), None);
    assert!(registered(&mesh, b_owner, "b").is_some());
    assert!(!ended(&mesh, node, s));

    // When "b"'s callback succeeds.
    mesh.actors(b_owner).disconnect_done(b_calls[0], Ok(()));
    mesh.run();
    mesh.advance(Duration::from_secs(30));

    // Then every binding is settled and no callback ran twice.
    assert!(ended(&mesh, node, s));
    assert_eq!(registered(&mesh, b_owner, "b"), None);
    assert_eq!(mesh.disconnect_callbacks(a_owner, &a.id).len(), 1);
    assert_eq!(mesh.disconnect_callbacks(b_owner, &bb.id).len(), 1);
    assert_eq!(tombstones_at(&mesh, &a.id, s).len(), 1);
    assert_eq!(tombstones_at(&mesh, &bb.id, s).len(), 1);
}

/// §7: a session the application closes ends as a dropped connection
/// does, with a close for the client first: the connection is asked to
/// close (`Application`), each bound Actor's Spot callback runs once, its
/// binding is removed, and the session's cleanup ends.
#[test]
fn core_d1_a_session_the_application_closes_notifies_each_bound_actor_once() {
    // Given s on node 1 bound to "a" (node 2) and "b" (node 3).
    let mut mesh = mesh();
    let (node, a_owner, b_owner) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.host(a_owner, "a");
    let bb = mesh.host(b_owner, "b");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    bind_ok(&mut mesh, node, s, &bb);

    // When the application closes the session.
    mesh.sessions(node).close_session(s);
    mesh.run();

    // Then the connection closes with Application, each Actor was notified
    // once and its binding removed, and the session's cleanup ended.
    assert_eq!(closes(&mesh, node, s), vec![CloseReason::Application]);
    assert_eq!(mesh.disconnect_callbacks(a_owner, &a.id).len(), 1);
    assert_eq!(mesh.disconnect_callbacks(b_owner, &bb.id).len(), 1);
    assert_eq!(registered(&mesh, a_owner, "a"), None);
    assert_eq!(registered(&mesh, b_owner, "b"), None);
    assert!(ended(&mesh, node, s));
    assert!(mesh.node(node).core().session_owner().bound(s).is_empty());
}

#[test]
fn core_d2_notify_racing_disconnect_runs_callback_at_most_once() {
    for order in [
        "notify-then-lost",
        "lost-while-callback-runs",
        "lost-then-notify",
    ] {
        // Given s bound to "a", whose Spot is answered by hand.
        let mut mesh = mesh();
        let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
        mesh.set_behavior(owner, ActorBehavior::Manual);
        let a = mesh.host(owner, "a");
        let s = mesh.connect(node);
        bind_ok(&mut mesh, node, s, &a);

        // When NotifyDisconnected and the physical disconnect race.
        let notify = match order {
            "notify-then-lost" => {
                let t = mesh.sessions(node).notify_disconnected(s, &a.id).unwrap();
                mesh.sessions(node).connection_lost(s);
                Some(t)
            }
            "lost-while-callback-runs" => {
                let t = mesh.sessions(node).notify_disconnected(s, &a.id).unwrap();
                mesh.run();
                assert_eq!(mesh.disconnect_callbacks(owner, &a.id).len(), 1);
                mesh.sessions(node).connection_lost(s);
                Some(t)
            }
            _ => {
                mesh.sessions(node).connection_lost(s);
                let refused = mesh.sessions(node).notify_disconnected(s, &a.id);
                assert_eq!(
                    refused.unwrap_err().kind(),
                    ErrorKind::Unavailable,
                    "{order}"
                );
                None
            }
        };
        mesh.run();
        for ticket in mesh.disconnect_callbacks(owner, &a.id) {
            mesh.actors(owner).disconnect_done(ticket, Ok(()));
        }
        mesh.run();
        mesh.advance(Duration::from_secs(30));

        // Then the callback for that binding ran once, and cleanup finished.
        assert_eq!(mesh.disconnect_callbacks(owner, &a.id).len(), 1, "{order}");
        assert!(ended(&mesh, node, s), "{order}");
        assert_eq!(registered(&mesh, owner, "a"), None, "{order}");
        assert_eq!(tombstones_at(&mesh, &a.id, s).len(), 1, "{order}");
        if let Some(ticket) = notify {
            assert_eq!(
                notify_outcomes(&mesh, node, ticket),
                vec![Ok(())],
                "{order}"
            );
        }
    }
}

#[test]
fn core_d3_actor_survives_disconnect_notification() {
    // Given s1 bound to "a", and what the Actor owner hosts.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s1 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a);
    let hosted = mesh.node(owner).core().actor_owner().actor_count();

    // When s1 notifies "a", and then the connection ends.
    let ticket = mesh.sessions(node).notify_disconnected(s1, &a.id).unwrap();
    mesh.run();
    assert_eq!(notify_outcomes(&mesh, node, ticket), vec![Ok(())]);
    assert!(!mesh.closed(node, s1));
    mesh.sessions(node).connection_lost(s1);
    mesh.run();

    // Then the same incarnation is still hosted, Ready, at the same place.
    let actors = mesh.node(owner).core().actor_owner();
    assert_eq!(actors.actor_count(), hosted);
    assert_eq!(actors.actor_ref(&a.id), Some(a.clone()));
    assert_eq!(mesh.disconnect_callbacks(owner, &a.id).len(), 1);

    // And a new session binds that same incarnation and reaches it.
    let s2 = mesh.connect(node);
    assert_eq!(bind_ok(&mut mesh, node, s2, &a).generation, a.generation);
    send(&mut mesh, node, s2, "a", b"hello-again").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"hello-again")]);
}

#[test]
fn core_x16_notify_removes_binding_keeps_connection_failure_not_rerun() {
    // Given s bound to "a" and "b" (node 2, answered by hand).
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let bb = mesh.host(owner, "b");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    bind_ok(&mut mesh, node, s, &bb);

    // When s notifies "a" and its Spot callback fails.
    let ticket = mesh.sessions(node).notify_disconnected(s, &a.id).unwrap();
    mesh.run();
    let callback = mesh.disconnect_callbacks(owner, &a.id)[0];
    mesh.actors(owner)
        .disconnect_done(callback, Err(Reason::QueueFull.into()));
    mesh.run();

    // Then the notification ends with the failure, and the binding is gone
    // anyway: a push and a relay both end with session-not-bound.
    let outcomes = notify_outcomes(&mesh, node, ticket);
    assert_eq!(outcomes.len(), 1);
    assert!(outcomes[0].is_err());
    assert_eq!(registered(&mesh, owner, "a"), None);
    let pushed = push(&mut mesh, owner, "a", b"after").unwrap_err();
    assert_eq!(pushed.reason(), Reason::SessionNotBound);
    assert_eq!(pushed.kind(), ErrorKind::InvalidOperation);
    let relayed = send(&mut mesh, node, s, "a", b"after").unwrap_err();
    assert_eq!(relayed.reason(), Reason::SessionNotBound);

    // And the connection stays open; the other binding still works.
    assert!(!mesh.closed(node, s));
    send(&mut mesh, node, s, "b", b"to-b").unwrap();
    push(&mut mesh, owner, "b", b"from-b").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, owner, "b"), vec![b(b"to-b")]);
    assert_eq!(pushes(&mesh, node, s), vec![b(b"from-b")]);

    // And the failed callback is never run again, even at disconnect.
    mesh.advance(Duration::from_secs(10));
    mesh.sessions(node).connection_lost(s);
    mesh.run();
    assert_eq!(mesh.disconnect_callbacks(owner, &a.id).len(), 1);
    assert_eq!(mesh.disconnect_callbacks(owner, &bb.id).len(), 1);
}

#[test]
fn core_x17_stuck_disconnect_callback_does_not_stall_cleanup() {
    let default = SessionOwnerConfig::default().disconnect_deadline;
    let deadline = Duration::from_millis(200);
    assert!(deadline < default);
    // Given s (lifecycle deadline 200 ms) bound to "a" (node 2) and "b"
    // (node 3), both answered by hand.
    let mut mesh = mesh();
    let config = SessionOwnerConfig {
        disconnect_deadline: deadline,
        ..SessionOwnerConfig::default()
    };
    let node = mesh.add_node_with(1, 1, config);
    let (a_owner, b_owner) = (mesh.add_node(2), mesh.add_node(3));
    mesh.set_behavior(a_owner, ActorBehavior::Manual);
    mesh.set_behavior(b_owner, ActorBehavior::Manual);
    let a = mesh.host(a_owner, "a");
    let bb = mesh.host(b_owner, "b");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    bind_ok(&mut mesh, node, s, &bb);

    // When the connection ends, "b"'s callback finishes, "a"'s never does.
    let lost = mesh.now();
    mesh.sessions(node).connection_lost(s);
    mesh.run();
    let b_call = mesh.disconnect_callbacks(b_owner, &bb.id)[0];
    mesh.actors(b_owner).disconnect_done(b_call, Ok(()));
    mesh.run();

    // Then "b" is cleaned up without waiting for "a".
    let b_tombstone = tombstones_at(&mesh, &bb.id, s);
    assert_eq!(b_tombstone.len(), 1);
    assert!(b_tombstone[0] < lost + deadline);
    assert_eq!(registered(&mesh, b_owner, "b"), None);

    // And "a" waits until 1 µs before the lifecycle deadline...
    advance_to(&mut mesh, lost + (deadline - MICRO));
    assert!(tombstones_at(&mesh, &a.id, s).is_empty());
    assert!(!ended(&mesh, node, s));

    // ...and at the deadline its tombstone and the session's cleanup proceed.
    mesh.advance(MICRO);
    mesh.run();
    assert_eq!(tombstones_at(&mesh, &a.id, s), vec![lost + deadline]);
    assert_eq!(count(&mesh, node, FlowTrace::DisconnectCallbackTimeout), 1);
    assert_eq!(registered(&mesh, a_owner, "a"), None);
    assert!(ended(&mesh, node, s));
    assert_eq!(mesh.disconnect_callbacks(a_owner, &a.id).len(), 1);

    // And a callback finishing after the deadline changes nothing.
    let a_call = mesh.disconnect_callbacks(a_owner, &a.id)[0];
    mesh.actors(a_owner).disconnect_done(a_call, Ok(()));
    mesh.run();
    assert_eq!(count(&mesh, node, FlowTrace::LateReplyDropped), 1);
    assert_eq!(mesh.node(node).core().session_owner().session_count(), 0);
}

#[test]
fn core_d1_disconnect_notices_go_out_in_the_same_order_every_run() {
    // Given a session bound to many Actors on one node (its bindings live
    // in a hash map, whose iteration order differs between map instances).
    let run = || {
        let mut mesh = mesh();
        let (sessions, owner) = (mesh.add_node(1), mesh.add_node(2));
        let session = mesh.connect(sessions);
        for i in 0..16 {
            let actor = mesh.host(owner, &format!("a{i}"));
            bind_ok(&mut mesh, sessions, session, &actor);
        }
        // When the client's connection is lost.
        mesh.sessions(sessions).connection_lost(session);
        mesh.run();
        // The Actors the disconnect notices went to, in the order sent.
        mesh.node(owner)
            .actor_events
            .iter()
            .filter_map(|e| match e {
                zlink::core::actor::ActorEvent::Disconnect { actor, .. } => Some(actor.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };

    // Then every run notifies the same Actors in the same order (the
    // simulator's replay of a seed depends on it), and each exactly once.
    let first = run();
    assert_eq!(first.len(), 16);
    for _ in 0..8 {
        assert_eq!(run(), first);
    }
}

/// Issue 24 (the node's gauges, src/runtime/shard.rs): the session owner
/// counts its sessions (open or still cleaning up), the sessions with at
/// least one binding the application sees (§13 `Bound`), and those
/// bindings; a session leaves the counts once its disconnect cleanup ends
/// (§7).
#[test]
fn core_the_session_owner_counts_its_sessions_and_bindings_until_cleanup_ends() {
    // Given three sessions on node 1, and three Actors on node 2.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let actors = [
        mesh.host(owner, "a"),
        mesh.host(owner, "b"),
        mesh.host(owner, "c"),
    ];
    let (s1, s2, s3) = (mesh.connect(node), mesh.connect(node), mesh.connect(node));
    let counts = |mesh: &Mesh| {
        let sessions = mesh.node(node).core().session_owner();
        (sessions.session_count(), sessions.bound_counts())
    };
    assert_eq!(counts(&mesh), (3, (0, 0)));

    // When s1 binds "a" and "b", and s2 binds "c" (s3 binds nothing).
    bind_ok(&mut mesh, node, s1, &actors[0]);
    bind_ok(&mut mesh, node, s1, &actors[1]);
    bind_ok(&mut mesh, node, s2, &actors[2]);

    // Then two sessions hold three bindings in all.
    assert_eq!(counts(&mesh), (3, (2, 3)));

    // When s1's connection ends and its cleanup runs to its end.
    mesh.sessions(node).connection_lost(s1);
    mesh.run();
    assert!(ended(&mesh, node, s1));

    // Then s1 is counted no more, nor its bindings.
    assert_eq!(counts(&mesh), (2, (1, 1)));
    assert!(!ended(&mesh, node, s3));
}

/// §7, §5: once its connection is gone, a session takes no push, though
/// its cleanup still waits on a disconnect callback: the push is refused
/// and counted (`PushRejectedNoSession`), and nothing is written for it.
#[test]
fn core_a_push_to_a_session_whose_connection_ended_is_refused_while_cleanup_runs() {
    // Given s on node 1 bound to "a" on node 2, whose Spot answers by hand.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);

    // When the connection ends, and "a" pushes before its disconnect
    // callback ended.
    mesh.sessions(node).connection_lost(s);
    mesh.run();
    assert_eq!(mesh.disconnect_callbacks(owner, &a.id).len(), 1);
    assert!(!ended(&mesh, node, s));
    push(&mut mesh, owner, "a", b"too late").unwrap();
    mesh.run();

    // Then no frame is written for it, and it is counted as refused.
    assert_eq!(pushes(&mesh, node, s), Vec::<bytes::Bytes>::new());
    assert_eq!(count(&mesh, node, FlowTrace::PushRejectedNoSession), 1);
}
