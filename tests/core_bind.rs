//! Core contract tests for startup-free bind rules (§4, §5, §12, §13):
//! CONTRACT S2, S4, S5, X8, X9, X11, X12, proved on the sans-IO cores with
//! virtual time.

mod common;

use std::time::Duration;

use common::*;
use zlink::core::actor::ActorEvent;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{NodeGeneration, ObjectGeneration, OwnerLeaseGeneration};
use zlink::sim::{actor_id, ActorBehavior};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::{BoundSessionBind, Command, NodeRecord};

#[test]
fn core_s2_two_actors_bind_with_independent_routes() {
    // Given a session on A and two Actors, "a" on B and "b" on C.
    let mut mesh = mesh();
    let (a_node, b_node, c_node) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.host(b_node, "a");
    let bb = mesh.host(c_node, "b");
    let s = mesh.connect(a_node);

    // When the session binds both and relays once to each.
    let bound_a = bind_ok(&mut mesh, a_node, s, &a);
    let bound_b = bind_ok(&mut mesh, a_node, s, &bb);
    send(&mut mesh, a_node, s, "a", b"to-a").unwrap();
    send(&mut mesh, a_node, s, "b", b"to-b").unwrap();
    mesh.run();

    // Then both are bound, each at its own owner.
    assert_eq!(bound_a.location.owner, b_node);
    assert_eq!(bound_b.location.owner, c_node);
    let bound = mesh.node(a_node).core().session_owner().bound(s);
    assert_eq!(bound, vec![bound_a, bound_b]);

    // And each 38 went to its own owner with its own binding generation.
    let binds: Vec<_> = mesh
        .tap()
        .iter()
        .filter_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => {
                Some((t.to, r.actor.clone(), r.binding))
            }
            _ => None,
        })
        .collect();
    assert_eq!(binds.len(), 2);
    assert_eq!((binds[0].0, &binds[0].1), (b_node, &actor_id("a")));
    assert_eq!((binds[1].0, &binds[1].1), (c_node, &actor_id("b")));
    let (gen_a, gen_b) = (binds[0].2, binds[1].2);
    assert_ne!(gen_a, gen_b, "the two bindings share a token");
    assert_eq!(registered(&mesh, b_node, "a").unwrap().generation, gen_a);
    assert_eq!(registered(&mesh, c_node, "b").unwrap().generation, gen_b);
    // The session owner holds the same binding identity (§4) as each Actor
    // owner registered: what its 24s carry and its 36s are judged against.
    let held = |mesh: &zlink::sim::Mesh, actor| {
        let sessions = mesh.node(a_node).core().session_owner();
        sessions.binding_identity(s, &actor_id(actor))
    };
    assert_eq!(held(&mesh, "a"), registered(&mesh, b_node, "a"));
    assert_eq!(held(&mesh, "b"), registered(&mesh, c_node, "b"));

    // And each relay used its own route and its own binding generation.
    assert_eq!(relayed_generations(&mesh, s, "a"), vec![gen_a]);
    assert_eq!(relayed_generations(&mesh, s, "b"), vec![gen_b]);
    for t in tapped(&mesh, Command::ActorSend) {
        if let NodeRecord::ActorSend(zlink::wire::node::ActorSend::Message(m)) = &t.record {
            let owner = if m.actor == actor_id("a") {
                b_node
            } else {
                c_node
            };
            assert_eq!(
                t.to, owner,
                "a relay for {:?} took the other route",
                m.actor
            );
        }
    }
    assert_eq!(delivered(&mesh, b_node, "a"), vec![b(b"to-a")]);
    assert_eq!(delivered(&mesh, c_node, "b"), vec![b(b"to-b")]);
    assert!(delivered(&mesh, b_node, "b").is_empty());
    assert!(delivered(&mesh, c_node, "a").is_empty());

    // And each Actor's push reaches the session over its own binding.
    push(&mut mesh, b_node, "a", b"from-a").unwrap();
    push(&mut mesh, c_node, "b", b"from-b").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, a_node, s), vec![b(b"from-a"), b(b"from-b")]);
}

#[test]
fn core_s4_other_object_generation_is_invalid_operation() {
    // Given Actor "a" hosted with ObjectGeneration 2, and a caller holding a
    // ref to generation 1.
    let mut mesh = mesh();
    let (a_node, b_node) = (mesh.add_node(1), mesh.add_node(2));
    let current = mesh.host_generation(b_node, "a", 2);
    let mut old = current.clone();
    old.generation = ObjectGeneration(1);
    let s = mesh.connect(a_node);

    // When the session binds the generation-1 ref.
    let outcome = mesh.bind(a_node, s, &old);

    // Then the bind ends with InvalidOperation (ObjectGeneration differs),
    // after exactly one 38, and nothing is bound on either side.
    let error = outcome.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidOperation);
    assert_eq!(error.reason(), Reason::ObjectGenerationMismatch);
    let requests = tapped(&mesh, Command::BoundSessionBind)
        .into_iter()
        .filter(|t| {
            matches!(
                t.record,
                NodeRecord::BoundSessionBind(BoundSessionBind::Request(_))
            )
        })
        .count();
    assert_eq!(requests, 1, "the bind was retried");
    assert_eq!(registered(&mesh, b_node, "a"), None);
    assert_eq!(
        mesh.node(a_node)
            .core()
            .session_owner()
            .find(s, &actor_id("a")),
        None
    );

    // And the current generation binds (the refusal was about the generation).
    assert_eq!(
        bind_ok(&mut mesh, a_node, s, &current).generation,
        ObjectGeneration(2)
    );
}

#[test]
fn core_s5_push_and_close_without_binding_are_session_not_bound() {
    // Given Actor "a" on B that no session has bound.
    let mut mesh = mesh();
    let (a_node, b_node) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(b_node, "a");
    let s = mesh.connect(a_node);

    // When the Actor pushes, and asks for a close.
    let pushed = push(&mut mesh, b_node, "a", b"early");
    let closed = actor_close(&mut mesh, b_node, "a");
    mesh.run();

    // Then both end with InvalidOperation (session-not-bound), and no 36 goes out.
    for outcome in [pushed, closed] {
        let error = outcome.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidOperation);
        assert_eq!(error.reason(), Reason::SessionNotBound);
    }
    assert!(tapped(&mesh, Command::BoundSessionSend).is_empty());

    // When the session binds, the same calls succeed.
    bind_ok(&mut mesh, a_node, s, &a);
    push(&mut mesh, b_node, "a", b"after").unwrap();
    mesh.run();

    // Then the push reaches the client as a push frame.
    let frames = mesh.frames(a_node, s);
    assert_eq!(
        frames,
        vec![ClientFrame::Push {
            key: PUSH_KEY,
            payload: b(b"after")
        }]
    );
    assert!(!mesh.closed(a_node, s));
    actor_close(&mut mesh, b_node, "a").unwrap();
    mesh.run();
    assert_eq!(closes(&mesh, a_node, s), vec![CloseReason::ActorRequested]);
}

#[test]
fn core_x8_push_from_join_callback_is_delivered() {
    for local in [false, true] {
        // Given Actor "a" whose application is driven by hand, on another node
        // (or on the session's own node).
        let mut mesh = mesh();
        let a_node = mesh.add_node(1);
        let b_node = if local { a_node } else { mesh.add_node(2) };
        mesh.set_behavior(b_node, ActorBehavior::Manual);
        let a = mesh.host(b_node, "a");
        let s = mesh.connect(a_node);

        // When the bind is admitted (the Bound event: a join callback runs) and
        // the Actor pushes at that same instant.
        let ticket = bind_pending(&mut mesh, a_node, s, &a);
        mesh.advance(LATENCY);
        assert!(
            matches!(
                mesh.node(b_node).actor_events.last(),
                Some(ActorEvent::Bound { .. })
            ),
            "local={local}: the 38 was not admitted at one latency"
        );
        let joined_at = mesh.now();
        push(&mut mesh, b_node, "a", b"welcome").unwrap();
        mesh.run();

        // Then the push left in the same instant as the terminal, and the
        // session delivers it: judged against the registered binding.
        let sent: Vec<_> = mesh
            .tap()
            .iter()
            .filter(|t| t.from == b_node && t.at == joined_at)
            .map(|t| t.command())
            .collect();
        assert_eq!(
            sent,
            vec![Command::BoundSessionBind, Command::BoundSessionSend]
        );
        assert!(mesh.bind_outcome(a_node, ticket).unwrap().is_ok());
        assert_eq!(
            pushes(&mesh, a_node, s),
            vec![b(b"welcome")],
            "local={local}"
        );
        assert_eq!(count(&mesh, a_node, FlowTrace::PushRejectedNotCurrent), 0);
        assert_eq!(count(&mesh, a_node, FlowTrace::PushRejectedNoSession), 0);
    }
}

#[test]
fn core_x9_lease_copy_mismatch_does_not_refuse_bind_or_stale_pushes() {
    // Given a caller whose ActorRef carries an owner lease generation that
    // differs from the Actor owner's (a stale derived copy).
    let mut mesh = mesh();
    let (a_node, b_node) = (mesh.add_node(1), mesh.add_node(2));
    let fresh = mesh.host(b_node, "a");
    let mut stale_lease = fresh.clone();
    stale_lease.location.lease = OwnerLeaseGeneration(fresh.location.lease.0 + 41);
    let s = mesh.connect(a_node);

    // When the session binds with it.
    let bound = mesh.bind(a_node, s, &stale_lease);

    // Then the bind is admitted (the lease is preserved, never admitted on),
    // and the 38 carried the caller's copy unchanged.
    let bound = bound.expect("a lease mismatch refused the bind");
    let carried: Vec<_> = mesh
        .tap()
        .iter()
        .filter_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => Some(r.lease),
            _ => None,
        })
        .collect();
    assert_eq!(carried, vec![stale_lease.location.lease]);
    assert_eq!(bound.generation, fresh.generation);

    // And the binding's pushes and relays are current.
    push(&mut mesh, b_node, "a", b"p1").unwrap();
    send(&mut mesh, a_node, s, "a", b"r1").unwrap();
    push(&mut mesh, b_node, "a", b"p2").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, a_node, s), vec![b(b"p1"), b(b"p2")]);
    assert_eq!(delivered(&mesh, b_node, "a"), vec![b(b"r1")]);
    assert_eq!(count(&mesh, a_node, FlowTrace::PushRejectedNotCurrent), 0);
}

#[test]
fn core_x11_bind_or_get_find_and_bound_see_only_this_session() {
    // Given sessions s1 and s2 on A, and Actors "a" and "b" on B.
    let mut mesh = mesh();
    let (a_node, b_node) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(b_node, ActorBehavior::Manual);
    let a = mesh.host(b_node, "a");
    let bb = mesh.host(b_node, "b");
    let s1 = mesh.connect(a_node);
    let s2 = mesh.connect(a_node);
    let (id_a, id_b) = (actor_id("a"), actor_id("b"));

    // When s1 binds "a", then binds (BindOrGet) it again.
    let first = bind_ok(&mut mesh, a_node, s1, &a);
    let records_before = mesh.tap().len();
    let again = bind_ok(&mut mesh, a_node, s1, &a);

    // Then the second call returns the same binding without a record.
    assert_eq!(again, first);
    assert_eq!(mesh.tap().len(), records_before);

    // And find sees only this session's bindings: none on s2 (even though the
    // Actor exists and is bound elsewhere), none for an unbound Actor.
    let owner = mesh.node(a_node).core().session_owner();
    assert_eq!(owner.find(s1, &id_a), Some(first.clone()));
    assert_eq!(owner.find(s2, &id_a), None);
    assert_eq!(owner.find(s1, &id_b), None);
    assert_eq!(owner.find(s1, &actor_id("nobody")), None);

    // And bound lists exactly the current ones.
    let second = bind_ok(&mut mesh, a_node, s1, &bb);
    let owner = mesh.node(a_node).core().session_owner();
    assert_eq!(owner.bound(s1), vec![first.clone(), second.clone()]);
    assert!(owner.bound(s2).is_empty());

    // When "a" is being notified of a disconnect, it is no longer current.
    let notify = mesh
        .sessions(a_node)
        .notify_disconnected(s1, &id_a)
        .unwrap();
    mesh.run();
    let owner = mesh.node(a_node).core().session_owner();
    assert_eq!(owner.bound(s1), vec![second.clone()]);
    assert_eq!(owner.find(s1, &id_a), None);
    let ticket = mesh.disconnect_callbacks(b_node, &id_a)[0];
    mesh.actors(b_node).disconnect_done(ticket, Ok(()));
    mesh.run();
    assert!(mesh.node(a_node).session_events.iter().any(|e| matches!(
        e,
        zlink::core::session::SessionEvent::NotifyCompleted { ticket: t, .. } if *t == notify
    )));

    // When "a" is destroyed and re-created with ObjectGeneration 2, and s1
    // binds the old generation's ref again.
    mesh.actors(b_node).destroy(&id_a).unwrap();
    let a2 = mesh.host_generation(b_node, "a", 2);
    bind_ok(&mut mesh, a_node, s2, &a2);
    let stale = mesh.bind(a_node, s1, &a);

    // Then it is not served from another generation or from the directory: a
    // real bind runs and is refused, and find stays empty.
    assert_eq!(
        stale.unwrap_err().reason(),
        Reason::ObjectGenerationMismatch
    );
    let owner = mesh.node(a_node).core().session_owner();
    assert_eq!(owner.find(s1, &id_a), None);
    assert_eq!(owner.bound(s1), vec![second]);
    assert_eq!(
        owner.find(s2, &id_a).map(|r| r.generation),
        Some(ObjectGeneration(2))
    );
}

#[test]
fn core_x12_failed_rebind_keeps_the_existing_binding_and_route() {
    // Given s1 on A bound to "a" (generation 1) on B.
    let mut mesh = mesh();
    let (a_node, b_node, c_node) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.host(b_node, "a");
    let s1 = mesh.connect(a_node);
    let s2 = mesh.connect(c_node);
    let bound = bind_ok(&mut mesh, a_node, s1, &a);
    let identity = registered(&mesh, b_node, "a").unwrap();

    // When rebinds fail: s1 with a wrong generation, and another session s2
    // with a pre-restart NodeGeneration and with a wrong generation. (s1
    // with the same generation is BindOrGet's idempotent path, X11.)
    let mut wrong_generation = a.clone();
    wrong_generation.generation = ObjectGeneration(7);
    let mut wrong_node = a.clone();
    wrong_node.location.node_generation = NodeGeneration(a.location.node_generation.0 + 1);
    let e1 = mesh.bind(a_node, s1, &wrong_generation).unwrap_err();
    let e2 = mesh.bind(c_node, s2, &wrong_node).unwrap_err();
    let e3 = mesh.bind(c_node, s2, &wrong_generation).unwrap_err();

    // Then each fails with its typed error.
    assert_eq!(e1.kind(), ErrorKind::InvalidOperation);
    assert_eq!(e2.kind(), ErrorKind::Unavailable);
    assert_eq!(e2.reason(), Reason::StaleNodeGeneration);
    assert_eq!(e3.kind(), ErrorKind::InvalidOperation);

    // And the existing binding and its route stay on both sides.
    assert_eq!(registered(&mesh, b_node, "a"), Some(identity));
    let owner = mesh.node(a_node).core().session_owner();
    assert_eq!(owner.find(s1, &actor_id("a")), Some(bound));
    assert!(tapped(&mesh, Command::BoundSessionReplaced).is_empty());
    assert!(replacement_callbacks(&mesh, a_node, s1).is_empty());

    // And pushes still reach it, and relay still works.
    push(&mut mesh, b_node, "a", b"still-here").unwrap();
    send(&mut mesh, a_node, s1, "a", b"still-there").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, a_node, s1), vec![b(b"still-here")]);
    assert_eq!(delivered(&mesh, b_node, "a"), vec![b(b"still-there")]);
    assert!(!mesh.closed(a_node, s1));
}

/// Found by the zlink-sim soak once destroys became store effects (issue 19
/// item 5, seed 12): an Actor whose destroy's row removal was with the
/// store went on admitting binds and relays, while the store had already
/// removed its row and a login elsewhere had made a new incarnation, bound
/// too: two current bindings of one Actor, both served (§4).
#[test]
fn core_one_current_binding_per_actor_an_ending_actor_admits_no_bind_and_no_relay() {
    use zlink::sim::StoreBehavior;
    // Given "a" on B, bound by s on A, and a destroy of "a" at B whose row
    // removal is with a store that hangs,
    let mut mesh = mesh();
    let (a_node, b_node) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.create(b_node, "a");
    let s = mesh.connect(a_node);
    bind_ok(&mut mesh, a_node, s, &a);
    mesh.set_store(StoreBehavior::Hang);
    mesh.start_destroy(b_node, &a.id).unwrap();
    mesh.run();
    assert!(mesh.node(b_node).core().actor_owner().is_ending(&a.id));

    // when s relays to it and another session binds it,
    let relayed = mesh.request(a_node, s, &a, b"late").unwrap();
    let other = mesh.connect(a_node);
    let bound = mesh.bind(a_node, other, &a);
    mesh.run();

    // then neither is admitted: the relay is answered StaleLocation, not
    // delivered, and the bind is refused.
    let answers = mesh.answers(a_node, s, relayed);
    assert!(
        matches!(&answers[..], [ClientFrame::Error { error, .. }] if error.reason() == Reason::StaleLocation),
        "{answers:?}"
    );
    assert!(mesh.delivered(b_node, &a.id).is_empty());
    assert_eq!(bound.map_err(|e| e.reason()), Err(Reason::StaleLocation));
}

/// §12, §4: a bind whose terminal never comes ends at its bind deadline
/// (`Unavailable`, Deadline), and the session owner tombstones that binding
/// at the Actor owner in case it was admitted there: the owner keeps no
/// binding its session does not know of, and the session may bind again.
#[test]
fn core_a_bind_whose_terminal_is_lost_ends_at_its_deadline_and_is_tombstoned() {
    // Given s on node 1 and "a" on node 2, whose 38 terminals to node 1
    // are lost.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    mesh.set_dropping(owner, node, Command::BoundSessionBind, true);

    // When s binds "a": node 2 admits it, but its terminal is lost.
    let ticket = bind_pending(&mut mesh, node, s, &a);
    mesh.run();
    assert!(registered(&mesh, owner, "a").is_some());
    assert_eq!(mesh.bind_outcome(node, ticket), None);

    // And the bind deadline (5,000 ms) passes.
    mesh.set_dropping(owner, node, Command::BoundSessionBind, false);
    mesh.advance(Duration::from_millis(5_000));
    mesh.run();

    // Then the bind ended with Deadline, and its tombstone removed the
    // binding at node 2.
    let outcome = mesh.bind_outcome(node, ticket).expect("a terminal");
    assert_eq!(outcome.map_err(|e| e.reason()), Err(Reason::Deadline));
    let tombstones = tapped(&mesh, Command::BoundSessionBind)
        .into_iter()
        .filter(|t| {
            t.from == node
                && matches!(
                    t.record,
                    NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(_))
                )
        })
        .count();
    assert_eq!(tombstones, 1);
    assert_eq!(registered(&mesh, owner, "a"), None);

    // And s binds "a" again.
    assert_eq!(bind_ok(&mut mesh, node, s, &a).id, a.id);
    assert!(registered(&mesh, owner, "a").is_some());
}
