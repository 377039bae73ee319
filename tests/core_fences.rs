//! Core contract tests for the stale-identity fences (§4, §5, §6, §12):
//! CONTRACT X3, X6, X19, proved on the sans-IO cores with virtual time.

mod common;

use std::time::Duration;

use common::*;
use zlink::core::session::SessionOwnerConfig;
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{
    AuthorityOwnerGeneration, BindingGeneration, BindingIdentity, NodeGeneration, ObjectGeneration,
    RequestId,
};
use zlink::sim::actor_id;
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::{
    BindRequest, BoundSessionBind, BoundSessionBody, Command, NodeRecord, RequestHeader,
};

#[test]
fn core_x3_push_refused_as_not_current_is_traced_and_counted() {
    // Given s on node 1 bound to "a" on node 2, and a real push it received.
    let mut mesh = mesh();
    let (node, owner, other) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    push(&mut mesh, owner, "a", b"real").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, node, s), vec![b(b"real")]);
    let real = match &tapped(&mesh, Command::BoundSessionSend)[0].record {
        NodeRecord::BoundSessionSend(send) => send.clone(),
        other => panic!("not a 36: {other:?}"),
    };

    // When pushes arrive that differ from the binding in one judged value
    // each (and one asks for a close).
    let mut stale = Vec::new();
    let mut p = real.clone();
    p.binding = BindingGeneration(real.binding.0 + 1);
    stale.push((owner, p, "expected binding generation"));
    let mut p = real.clone();
    p.object_generation = ObjectGeneration(real.object_generation.0 + 1);
    stale.push((owner, p, "source ObjectGeneration"));
    let mut p = real.clone();
    p.node_generation = NodeGeneration(real.node_generation.0 + 1);
    stale.push((owner, p, "source NodeGeneration"));
    let mut p = real.clone();
    p.authority = AuthorityOwnerGeneration(real.authority.0 + 1);
    stale.push((owner, p, "AuthorityOwnerGeneration"));
    stale.push((other, real.clone(), "source node is not the route's owner"));
    let mut p = real.clone();
    p.binding = BindingGeneration(real.binding.0 + 1);
    p.body = BoundSessionBody::Close {
        reason: CloseReason::ActorRequested,
    };
    stale.push((owner, p, "a close with a stale binding generation"));
    let total = stale.len() as u64;
    for (n, (from, record, what)) in stale.into_iter().enumerate() {
        mesh.inject(from, node, NodeRecord::BoundSessionSend(record));
        mesh.run();

        // Then it is not submitted, and it is counted under its flow name.
        assert_eq!(pushes(&mesh, node, s), vec![b(b"real")], "{what}");
        assert!(!mesh.closed(node, s), "{what}");
        assert_eq!(
            count(&mesh, node, FlowTrace::PushRejectedNotCurrent),
            n as u64 + 1,
            "{what}"
        );
    }
    assert_eq!(total, 6);
    assert_eq!(
        FlowTrace::PushRejectedNotCurrent.name(),
        "push_rejected_not_current"
    );

    // And the current push is still delivered (the judge is not just closed).
    mesh.inject(owner, node, NodeRecord::BoundSessionSend(real));
    mesh.run();
    assert_eq!(pushes(&mesh, node, s), vec![b(b"real"), b(b"real")]);
}

#[test]
fn core_x6_recreated_actor_never_revalidates_the_old_binding() {
    // Given s1 on node 1 bound to "a" (ObjectGeneration 1) on node 2.
    let mut mesh = mesh();
    let (node, owner, new) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    let a1 = mesh.host(owner, "a");
    let s1 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a1);

    // When "a" is destroyed and re-created under the same ActorId with
    // ObjectGeneration 2, and s1 relays over its old binding.
    mesh.actors(owner).destroy(&a1.id).unwrap();
    let a2 = mesh.host_generation(owner, "a", 2);
    assert_eq!(a2.generation, ObjectGeneration(2));
    let before_rebind = mesh.request(node, s1, &a1, b"old-1").unwrap();
    mesh.run();

    // Then the relay is refused as a stale binding and never delivered.
    let refused = |mesh: &zlink::sim::Mesh, c| match mesh.answers(node, s1, c).as_slice() {
        [ClientFrame::Error { error, .. }] => {
            assert_eq!(error.kind(), ErrorKind::Unavailable);
            assert_eq!(error.reason(), Reason::StaleBinding);
        }
        other => panic!("the old binding's relay was answered with {other:?}"),
    };
    refused(&mesh, before_rebind);

    // When another session binds the new incarnation, and s1 relays again.
    let s2 = mesh.connect(new);
    bind_ok(&mut mesh, new, s2, &a2);
    let new_identity = registered(&mesh, owner, "a").unwrap();
    let after_rebind = mesh.request(node, s1, &a1, b"old-2").unwrap();
    mesh.run();

    // Then it is still refused: the old token did not become valid again.
    refused(&mesh, after_rebind);
    assert!(delivered(&mesh, owner, "a").is_empty());

    // When s1's connection ends: a late disconnect and tombstone for the old
    // binding reach the new incarnation.
    mesh.sessions(node).connection_lost(s1);
    mesh.run();
    mesh.advance(Duration::from_secs(10));

    // Then they do nothing to it: no callback, the new binding stays.
    assert!(mesh.disconnect_callbacks(owner, &a2.id).is_empty());
    assert_eq!(count(&mesh, owner, FlowTrace::TombstoneStale), 1);
    assert_eq!(registered(&mesh, owner, "a"), Some(new_identity));
    assert!(ended(&mesh, node, s1));
    assert!(replacement_callbacks(&mesh, new, s2).is_empty());
    push(&mut mesh, owner, "a", b"to-new").unwrap();
    send(&mut mesh, new, s2, "a", b"from-new").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, new, s2), vec![b(b"to-new")]);
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"from-new")]);
}

#[test]
fn core_x19_restarted_session_owner_binds_with_a_smaller_generation() {
    // Given node 1 (lifecycle 1) whose session bound "a" on node 2 with its
    // third binding generation.
    let mut mesh = mesh();
    let node = mesh.add_node(1);
    let owner = mesh.add_node(2);
    let (x, y, a) = (
        mesh.host(owner, "x"),
        mesh.host(owner, "y"),
        mesh.host(owner, "a"),
    );
    let s = mesh.connect(node);
    for actor in [&x, &y, &a] {
        bind_ok(&mut mesh, node, s, actor);
    }
    let before = registered(&mesh, owner, "a").unwrap();
    assert_eq!(before.lifecycle, NodeGeneration(1));
    assert!(before.generation > BindingGeneration(1));

    // When node 1 restarts (lifecycle 2) and a new session binds "a" again.
    mesh.add_node_with(1, 2, SessionOwnerConfig::default());
    let s_new = mesh.connect(node);
    let outcome = mesh.bind(node, s_new, &a);

    // Then the new identity is accepted, though its generation is smaller.
    assert!(
        outcome.is_ok(),
        "the restarted owner's bind was refused: {outcome:?}"
    );
    let after = registered(&mesh, owner, "a").unwrap();
    assert_eq!(
        after,
        BindingIdentity {
            owner: node,
            lifecycle: NodeGeneration(2),
            generation: after.generation,
        }
    );
    assert!(after.generation < before.generation);

    // And the 51 for the pre-restart identity runs nothing on the new lifecycle.
    assert_eq!(count(&mesh, node, FlowTrace::ReplacedNoticeMismatch), 1);
    assert!(replacement_callbacks(&mesh, node, s_new).is_empty());
    assert!(!mesh.closed(node, s_new));
    push(&mut mesh, owner, "a", b"after-restart").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, node, s_new), vec![b(b"after-restart")]);

    // And within one lifecycle magnitudes still order: an older generation
    // from lifecycle 2 arriving late is refused as a stale binding.
    let session = mesh.node(node).core().session_owner().session_ref(s_new);
    let lease = mesh.node(node).core().session_owner().identity().lease;
    let late = BindRequest {
        request: RequestHeader {
            id: RequestId(77_777),
            budget: Duration::from_secs(5),
        },
        actor: actor_id("a"),
        object_generation: a.generation,
        target_node_generation: a.location.node_generation,
        authority: a.location.authority,
        lease: a.location.lease,
        session,
        session_lease: lease,
        binding: BindingGeneration(after.generation.0 - 1),
    };
    mesh.inject(
        node,
        owner,
        NodeRecord::BoundSessionBind(BoundSessionBind::Request(late)),
    );
    mesh.run();
    let terminal = mesh
        .tap()
        .iter()
        .find_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(x))
                if x.request == RequestId(77_777) =>
            {
                Some(x.outcome.clone())
            }
            _ => None,
        })
        .expect("the late bind got a terminal");
    assert_eq!(terminal.unwrap_err().reason(), Reason::StaleBinding);
    assert_eq!(registered(&mesh, owner, "a"), Some(after));
}

#[test]
fn core_x21_a_fenced_actor_owner_ends_relay_and_bind_with_unavailable() {
    // Given s on node 1 bound to "a" on node 2, relaying fine, and a second
    // session holding a's ActorRef.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    let before = mesh.request(node, s, &a, b"before").unwrap();
    mesh.run();
    assert!(matches!(
        mesh.answers(node, s, before).as_slice(),
        [ClientFrame::Reply { .. }]
    ));
    let late = mesh.connect(node);

    // When the owner's lease lapses and its Actor owner fences itself (the
    // runtime does it at the lease's expires_at, rt X21),
    mesh.actors(owner).fence();

    // then relay ends with Unavailable (LeaseExpired) rather than using the
    // stored route, and the handler never sees it;
    let after = mesh.request(node, s, &a, b"after").unwrap();
    mesh.run();
    let answers = mesh.answers(node, s, after);
    let [ClientFrame::Error { error, .. }] = answers.as_slice() else {
        panic!("expected one typed error, got {answers:?}");
    };
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert_eq!(error.reason(), Reason::LeaseExpired);
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"before")]);
    // and a bind with the ActorRef in hand ends the same way.
    let bound = mesh.bind(node, late, &a);
    let error = bound.expect_err("a fenced owner admits no bind");
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert_eq!(error.reason(), Reason::LeaseExpired);
    // Nor does it start moving its Actor (§5: no authority past its lease).
    assert!(mesh.node(owner).core().actor_owner().is_fenced());
    let moved = mesh.relocations(owner).relocate(&a.id, node);
    assert_eq!(moved.unwrap_err().reason(), Reason::LeaseExpired);
}

/// §4, §9 (docs/store.md "Restart with the same RID"): a record of a
/// session owned by the sending node but naming another of its lifecycles
/// than the link's (sent before a restart, late or replayed on the new
/// link) is refused unanswered and counted (`StaleLifecycleRecord`), even
/// while the old lifecycle's binding is still registered: its requester is
/// gone, and the new lifecycle, which reuses request ids, must not get the
/// answer.
#[test]
fn core_records_of_a_restarted_session_owners_past_lifecycle_are_refused_unanswered() {
    // Given s on node 1 (lifecycle 1) bound to "a" on node 2, and the bind
    // (38) and a request (24) it sent, as the link carried them.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    mesh.request(node, s, &a, b"old").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"old")]);
    let sent_by = |mesh: &zlink::sim::Mesh, command| {
        tapped(mesh, command)
            .into_iter()
            .find(|t| t.from == node && t.to == owner)
            .unwrap_or_else(|| panic!("node 1 sent no {command:?}"))
            .record
    };
    let (bind, relay) = (
        sent_by(&mesh, Command::BoundSessionBind),
        sent_by(&mesh, Command::ActorSend),
    );
    assert!(bind.request_id().is_some() && relay.request_id().is_some());

    // When node 1 restarts with the same RID (lifecycle 2), and both
    // records reach node 2 again on the new link.
    mesh.restart(node);
    let binding = registered(&mesh, owner, "a");
    assert_eq!(binding.map(|b| b.lifecycle), Some(NodeGeneration(1)));
    let replayed_at = mesh.now();
    mesh.inject(node, owner, bind);
    mesh.inject(node, owner, relay);
    mesh.run();

    // Then both are refused and counted, the relay never reaches the Actor,
    // the old binding is left as it was, and nothing answers them.
    assert_eq!(count(&mesh, owner, FlowTrace::StaleLifecycleRecord), 2);
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"old")]);
    assert_eq!(registered(&mesh, owner, "a"), binding);
    let answers: Vec<_> = mesh
        .tap()
        .iter()
        .filter(|t| t.at >= replayed_at && t.from == owner)
        .map(|t| t.command())
        .collect();
    assert!(answers.is_empty(), "node 2 answered: {answers:?}");
}
