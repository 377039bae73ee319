//! Core contract tests for the session owner's side of a live relocation
//! (§8, §8.1, §8.2): CONTRACT L1–L5 and the seal's rules, proved on the
//! sans-IO cores with virtual time (timers to the microsecond).
//!
//! The coordinator and the target (branch `handoff`) are not built yet, so
//! their records are injected: 42 and 44 abort from the source node (the
//! coordinator, docs/relocation.md), 44 commit from the target node. The
//! target's registration of the handed-over binding (record 60 on the Actor
//! owner side) is stood in for by a 38 the test injects at the target, so
//! that what the session owner sends there is really processed.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use zlink::core::actor::ActorOwnerIdentity;
use zlink::core::latency::SealEnd;
use zlink::core::session::{SessionEvent, SessionOwnerConfig, SessionOwnerIdentity};
use zlink::core::shard::{ShardConfig, ShardCore};
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{
    ActorLocation, ActorRef, AuthorityOwnerGeneration, BindingGeneration, Correlation, MeshName,
    NodeGeneration, NodeRid, ObjectGeneration, OwnerLeaseGeneration, PacketKey, Peer, RelocationId,
    RequestId, SessionOwnerId, SessionRid, SessionSequence,
};
use zlink::sim::{actor_id, error, Mesh};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::{
    ActorSend, ActorSendBody, BindRequest, BindTerminal, BoundRoute, BoundSessionBind,
    BoundSessionSend, Command, NodeRecord, RequestHeader, RouteCommit, SealIdentity,
    SessionRelocationRoute, SessionRelocationSeal,
};

/// Session `s` on `node` (1) bound to "a" hosted on `source` (2); `target`
/// (3, NodeGeneration 7) is where "a" moves.
struct Given {
    mesh: Mesh,
    node: NodeRid,
    source: NodeRid,
    target: NodeRid,
    s: SessionRid,
    a: ActorRef,
    generation: BindingGeneration,
    next_request: u64,
}

fn given(config: SessionOwnerConfig) -> Given {
    let mut mesh = mesh();
    let node = mesh.add_node_with(1, 1, config);
    let source = mesh.add_node(2);
    let target = mesh.add_node_with(3, 7, SessionOwnerConfig::default());
    let hosted = mesh.host(source, "a");
    let s = mesh.connect(node);
    let a = bind_ok(&mut mesh, node, s, &hosted);
    let generation = bind_generation(&mesh, s, "a");
    Given {
        mesh,
        node,
        source,
        target,
        s,
        a,
        generation,
        next_request: 1_000,
    }
}

/// The binding generation of the last 38 a session sent for an Actor.
fn bind_generation(mesh: &Mesh, s: SessionRid, actor: &str) -> BindingGeneration {
    let id = actor_id(actor);
    mesh.tap()
        .iter()
        .rev()
        .find_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r))
                if r.actor == id && r.session.session == s =>
            {
                Some(r.binding)
            }
            _ => None,
        })
        .expect("the session sent a 38")
}

impl Given {
    fn relocation(&self, sequence: u64) -> RelocationId {
        RelocationId {
            coordinator: self.source,
            sequence,
        }
    }

    /// The seal identity of relocation `sequence` on s's binding of "a".
    fn seal_identity(&self, sequence: u64) -> SealIdentity {
        SealIdentity {
            relocation: self.relocation(sequence),
            session: self
                .mesh
                .node(self.node)
                .core()
                .session_owner()
                .session_ref(self.s),
            binding: self.generation,
        }
    }

    /// Sends a 42 from `from` and runs the mesh; returns the 43's outcome.
    fn seal_from(
        &mut self,
        from: NodeRid,
        seal: SealIdentity,
        actor: &str,
        generation: u64,
    ) -> Result<(), Error> {
        self.next_request += 1;
        let request = RequestId(self.next_request);
        let record = SessionRelocationSeal {
            request: RequestHeader {
                id: request,
                budget: Duration::from_secs(1),
            },
            seal,
            actor: actor_id(actor),
            object_generation: ObjectGeneration(generation),
        };
        self.mesh
            .inject(from, self.node, NodeRecord::SessionRelocationSeal(record));
        self.mesh.run();
        let answers: Vec<_> = self
            .mesh
            .tap()
            .iter()
            .filter_map(|t| match &t.record {
                NodeRecord::SessionRelocationSealed(r) if r.request == request => {
                    assert_eq!(
                        (t.from, t.to),
                        (self.node, from),
                        "43 goes back to the 42's sender"
                    );
                    Some(r.outcome.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(answers.len(), 1, "one 43 per 42");
        answers[0].clone()
    }

    /// The coordinator (the source) seals s's binding of "a" for relocation
    /// `sequence`.
    fn seal(&mut self, sequence: u64) -> Result<(), Error> {
        let seal = self.seal_identity(sequence);
        self.seal_from(self.source, seal, "a", self.a.generation.0)
    }

    /// When the last 43 left the session owner: the seal was installed then.
    fn sealed_at(&self) -> Instant {
        self.mesh
            .tap()
            .iter()
            .rev()
            .find(|t| t.command() == Command::SessionRelocationSealed)
            .expect("a 43 was sent")
            .at
    }

    /// The target hosts "a" (same incarnation, AuthorityOwnerGeneration 2
    /// after its CAS) and registers s's binding, as the handoff would.
    fn take_over(&mut self) -> ActorRef {
        let moved = self
            .mesh
            .actors(self.target)
            .host(
                actor_id("a"),
                self.a.generation,
                AuthorityOwnerGeneration(2),
            )
            .expect("the target hosts the moved Actor");
        let session = self
            .mesh
            .node(self.node)
            .core()
            .session_owner()
            .session_ref(self.s);
        let handoff = BindRequest {
            request: RequestHeader {
                id: RequestId(9_999),
                budget: Duration::from_secs(5),
            },
            actor: actor_id("a"),
            object_generation: self.a.generation,
            target_node_generation: moved.location.node_generation,
            authority: moved.location.authority,
            lease: moved.location.lease,
            session,
            session_lease: OwnerLeaseGeneration(1),
            binding: self.generation,
        };
        self.mesh.inject(
            self.node,
            self.target,
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(handoff)),
        );
        self.mesh.run();
        moved
    }

    /// The target's 44 commit of relocation `sequence` to `moved`'s location.
    fn commit(&mut self, sequence: u64, moved: &ActorRef) {
        let commit = RouteCommit {
            seal: self.seal_identity(sequence),
            actor: actor_id("a"),
            object_generation: self.a.generation,
            target_mesh: moved.location.mesh.clone(),
            target: moved.location.owner,
            target_node_generation: moved.location.node_generation,
            authority: moved.location.authority,
            lease: moved.location.lease,
        };
        self.route(self.target, SessionRelocationRoute::Commit(commit));
    }

    /// The coordinator's 44 abort of relocation `sequence`.
    fn abort(&mut self, sequence: u64) {
        let seal = self.seal_identity(sequence);
        self.route(self.source, SessionRelocationRoute::Abort(seal));
    }

    fn route(&mut self, from: NodeRid, route: SessionRelocationRoute) {
        self.mesh
            .inject(from, self.node, NodeRecord::SessionRelocationRoute(route));
        self.mesh.run();
    }

    fn find_a(&self) -> Option<ActorRef> {
        self.mesh
            .node(self.node)
            .core()
            .session_owner()
            .find(self.s, &actor_id("a"))
    }

    fn count(&self, event: FlowTrace) -> u64 {
        count(&self.mesh, self.node, event)
    }
}

/// The payloads (with their session sequences) of the 24 messages a session
/// sent to `to` for an Actor, in the order they went out.
fn relayed_to(
    mesh: &Mesh,
    to: NodeRid,
    s: SessionRid,
    actor: &str,
) -> Vec<(Bytes, SessionSequence)> {
    let id = actor_id(actor);
    mesh.tap()
        .iter()
        .filter(|t| t.to == to)
        .filter_map(|t| match &t.record {
            NodeRecord::ActorSend(ActorSend::Message(m))
                if m.actor == id && m.tail.session.session == s =>
            {
                match &m.body {
                    ActorSendBody::Payload { payload, .. } => {
                        Some((payload.clone(), m.tail.sequence))
                    }
                    ActorSendBody::DisconnectNotice => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// Just the payloads of [`relayed_to`].
fn payloads_to(mesh: &Mesh, to: NodeRid, s: SessionRid, actor: &str) -> Vec<Bytes> {
    relayed_to(mesh, to, s, actor)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// How many disconnect notices (24) for an Actor went to `to`.
fn notices_to(mesh: &Mesh, to: NodeRid, actor: &str) -> usize {
    let id = actor_id(actor);
    mesh.tap()
        .iter()
        .filter(|t| {
            t.to == to
                && matches!(&t.record, NodeRecord::ActorSend(ActorSend::Message(m))
                    if m.actor == id && m.body == ActorSendBody::DisconnectNotice)
        })
        .count()
}

/// A request relay with its own budget.
fn request_within(
    mesh: &mut Mesh,
    node: NodeRid,
    s: SessionRid,
    correlation: u32,
    payload: &'static [u8],
    budget: Duration,
) -> Correlation {
    let correlation = Correlation(correlation);
    mesh.sessions(node)
        .relay(
            s,
            &actor_id("a"),
            PacketKey(1),
            Bytes::from_static(payload),
            Some((correlation, budget)),
        )
        .expect("relay accepted");
    correlation
}

fn reply(correlation: Correlation, payload: &'static [u8]) -> ClientFrame {
    ClientFrame::Reply {
        correlation,
        payload: Bytes::from_static(payload),
    }
}

/// A request to the Actor "a" that ended with `reason`: the error names the
/// Actor it is about (docs/wire.md "Errors").
fn failed_for_a(correlation: Correlation, reason: Reason) -> ClientFrame {
    ClientFrame::Error {
        correlation,
        error: error(reason).about_actor(&actor_id("a")),
    }
}

#[test]
fn core_l3_seal_timeout_closes_session_and_drops_held_messages() {
    // Given s bound to "a" (on the source) and to "b" (on another node), and
    // a seal on a's binding with the default SessionRelocationSealTimeout.
    let mut g = given(SessionOwnerConfig::default());
    let other = g.mesh.add_node(4);
    let b_ref = g.mesh.host(other, "b");
    bind_ok(&mut g.mesh, g.node, g.s, &b_ref);
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    let timeout = SessionOwnerConfig::default().relocation_seal_timeout;
    assert_eq!(timeout, Duration::from_millis(3_000));

    // When the client relays on "a" (one-way and a request) and no 44 comes.
    send(&mut g.mesh, g.node, g.s, "a", b"held-1").unwrap();
    let held = g.mesh.request(g.node, g.s, &g.a, b"held-2").unwrap();
    g.mesh.run();
    advance_to(&mut g.mesh, installed + (timeout - MICRO));
    assert!(!g.mesh.closed(g.node, g.s), "closed before 3,000 ms");
    assert_eq!(g.count(FlowTrace::SealTimeout), 0);
    advance_to(&mut g.mesh, installed + timeout);

    // Then the session closes at exactly 3,000 ms, with SealTimeout.
    assert_eq!(closes(&g.mesh, g.node, g.s), vec![CloseReason::SealTimeout]);
    assert_eq!(g.count(FlowTrace::SealTimeout), 1);
    g.mesh.run();
    g.mesh.advance(Duration::from_secs(10));
    // The held messages never went out, to any node.
    for to in [g.source, g.target, other] {
        assert_eq!(payloads_to(&g.mesh, to, g.s, "a"), Vec::<Bytes>::new());
    }
    assert!(delivered(&g.mesh, g.source, "a").is_empty());
    assert_eq!(g.count(FlowTrace::HeldMessageDropped), 2);
    // The held request ended with a typed error (it was never processed),
    // written before the close.
    assert_eq!(
        g.mesh.answers(g.node, g.s, held),
        vec![failed_for_a(held, Reason::RelocationSealed)]
    );
    let events = &g.mesh.node(g.node).session_events;
    let error_at = events
        .iter()
        .position(|e| {
            matches!(
                e,
                SessionEvent::Frame {
                    frame: ClientFrame::Error { .. },
                    ..
                }
            )
        })
        .expect("an error frame");
    let close_at = events
        .iter()
        .position(|e| matches!(e, SessionEvent::Close { .. }))
        .expect("a close");
    assert!(error_at < close_at, "{events:?}");
    // Every binding went through the ordinary disconnect procedure once
    // (§7, X22): the sealed one's notice over its stored (source) route
    // only, never a guessed target.
    assert_eq!(g.mesh.disconnect_callbacks(other, &actor_id("b")).len(), 1);
    assert_eq!(notices_to(&g.mesh, g.source, "a"), 1);
    assert_eq!(notices_to(&g.mesh, g.target, "a"), 0);
    // Binding, held and seal state are gone; nothing is left armed.
    assert!(ended(&g.mesh, g.node, g.s));
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().session_count(),
        0
    );
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().pending_count(),
        0
    );
    assert_eq!(g.mesh.node(g.node).core().armed_timers(), 0);
}

/// §8.1 "the physical Session is closed and the binding, held message, and
/// seal state are cleaned up": a seal timeout drops what the session's
/// other seals hold too, and counts each dropped message once
/// (`HeldMessageDropped`). s is bound to "a" and "b", both sealed: a's seal
/// holds one one-way message, b's two one-way messages and a request. When
/// a's seal times out, its one-way message and b's two are dropped and
/// counted (3); b's request stays held until the close ends it, and
/// nothing held ever goes out.
#[test]
fn core_l3_a_seal_timeout_drops_and_counts_the_one_way_messages_held_on_the_sessions_other_seals() {
    let mut g = given(SessionOwnerConfig::default());
    let other = g.mesh.add_node(4);
    let b_hosted = g.mesh.host(other, "b");
    let b_ref = bind_ok(&mut g.mesh, g.node, g.s, &b_hosted);
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    let b_seal = SealIdentity {
        relocation: RelocationId {
            coordinator: other,
            sequence: 1,
        },
        binding: bind_generation(&g.mesh, g.s, "b"),
        ..g.seal_identity(1)
    };
    assert_eq!(g.seal_from(other, b_seal, "b", b_ref.generation.0), Ok(()));
    send(&mut g.mesh, g.node, g.s, "a", b"a-1").unwrap();
    send(&mut g.mesh, g.node, g.s, "b", b"b-1").unwrap();
    send(&mut g.mesh, g.node, g.s, "b", b"b-2").unwrap();
    g.mesh.request(g.node, g.s, &b_ref, b"b-3").unwrap();
    g.mesh.run();
    assert_eq!(g.count(FlowTrace::HeldMessageDropped), 0);
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().pending_count(),
        1
    );

    // When a's seal times out,
    let timeout = SessionOwnerConfig::default().relocation_seal_timeout;
    advance_to(&mut g.mesh, installed + timeout);

    // then the session closes, the three one-way messages are dropped and
    // counted once each, and b's request ends, never sent.
    assert_eq!(closes(&g.mesh, g.node, g.s), vec![CloseReason::SealTimeout]);
    assert_eq!(g.count(FlowTrace::HeldMessageDropped), 3);
    g.mesh.run();
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().pending_count(),
        0,
        "b's held request ended"
    );
    for (to, actor) in [(g.source, "a"), (other, "b")] {
        assert_eq!(payloads_to(&g.mesh, to, g.s, actor), Vec::<Bytes>::new());
    }
}

#[test]
fn core_l4_late_or_duplicate_44_changes_nothing_and_warns() {
    // Given a's binding moved to the target by relocation 1.
    let mut g = given(SessionOwnerConfig::default());
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));
    g.commit(1, &moved);
    let after_commit = g.find_a().expect("bound");
    assert_eq!(after_commit.location, moved.location);
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 0);

    // When the same commit comes again, an abort of the committed seal
    // comes, and a commit of relocation 1 names another target.
    g.commit(1, &moved);
    g.abort(1);
    let mut elsewhere = moved.clone();
    elsewhere.location.owner = g.source;
    g.commit(1, &elsewhere);

    // Then nothing changed, and each left a late_session_route_update.
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 3);
    assert_eq!(g.find_a(), Some(after_commit.clone()));
    send(&mut g.mesh, g.node, g.s, "a", b"after-duplicates").unwrap();
    g.mesh.run();
    assert_eq!(
        payloads_to(&g.mesh, g.target, g.s, "a"),
        vec![b(b"after-duplicates")]
    );

    // Given a second relocation's seal (the target coordinates it now).
    let mut seal2 = g.seal_identity(2);
    seal2.relocation.coordinator = g.target;
    assert_eq!(g.seal_from(g.target, seal2, "a", g.a.generation.0), Ok(()));
    let installed = g.sealed_at();
    send(&mut g.mesh, g.node, g.s, "a", b"held").unwrap();
    g.mesh.run();

    // When 44s arrive for a foreign relocation id, for another binding
    // generation and for another ObjectGeneration.
    let foreign = SealIdentity {
        relocation: RelocationId {
            coordinator: g.target,
            sequence: 3,
        },
        ..seal2
    };
    g.route(g.target, SessionRelocationRoute::Abort(foreign));
    let other_binding = SealIdentity {
        binding: BindingGeneration(g.generation.0 + 1),
        ..seal2
    };
    g.route(g.target, SessionRelocationRoute::Abort(other_binding));
    let wrong_incarnation = RouteCommit {
        seal: seal2,
        actor: actor_id("a"),
        object_generation: ObjectGeneration(g.a.generation.0 + 1),
        target_mesh: moved.location.mesh.clone(),
        target: g.source,
        target_node_generation: NodeGeneration(1),
        authority: AuthorityOwnerGeneration(3),
        lease: OwnerLeaseGeneration(1),
    };
    g.route(g.target, SessionRelocationRoute::Commit(wrong_incarnation));

    // Then the seal still holds, and each was only a warning.
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 6);
    assert_eq!(
        payloads_to(&g.mesh, g.target, g.s, "a"),
        vec![b(b"after-duplicates")]
    );
    assert_eq!(
        payloads_to(&g.mesh, g.source, g.s, "a"),
        Vec::<Bytes>::new()
    );
    assert_eq!(g.find_a(), Some(after_commit));

    // When the seal times out and its commit arrives after that.
    let timeout = SessionOwnerConfig::default().relocation_seal_timeout;
    advance_to(&mut g.mesh, installed + timeout);
    assert_eq!(closes(&g.mesh, g.node, g.s), vec![CloseReason::SealTimeout]);
    let late = RouteCommit {
        seal: seal2,
        actor: actor_id("a"),
        object_generation: g.a.generation,
        target_mesh: moved.location.mesh.clone(),
        target: g.source,
        target_node_generation: NodeGeneration(1),
        authority: AuthorityOwnerGeneration(3),
        lease: OwnerLeaseGeneration(1),
    };
    g.route(g.source, SessionRelocationRoute::Commit(late));

    // Then it changed nothing either: no route, no held message sent, no
    // second close; only the warning.
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 7);
    assert_eq!(
        payloads_to(&g.mesh, g.source, g.s, "a"),
        Vec::<Bytes>::new()
    );
    assert_eq!(
        payloads_to(&g.mesh, g.target, g.s, "a"),
        vec![b(b"after-duplicates")]
    );
    assert_eq!(closes(&g.mesh, g.node, g.s), vec![CloseReason::SealTimeout]);
    assert_eq!(g.count(FlowTrace::SessionRouteCommitted), 1);
}

#[test]
fn core_l1_commit_switches_route_and_location_keeps_actor_and_generation() {
    // Given s bound to "a" on the source, sealed for relocation 1.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.find_a().map(|r| r.location), Some(g.a.location.clone()));
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));
    let binds_before = tapped(&g.mesh, Command::BoundSessionBind).len();
    let events_before = g.mesh.node(g.node).session_events.len();

    // When the target's 44 commit arrives.
    g.commit(1, &moved);

    // Then the location snapshot names the target; ActorId and
    // ObjectGeneration are kept.
    let expected = ActorRef {
        id: actor_id("a"),
        generation: g.a.generation,
        location: moved.location.clone(),
    };
    assert_ne!(moved.location, g.a.location);
    assert_eq!(g.find_a(), Some(expected.clone()));
    let bound = g.mesh.node(g.node).core().session_owner().bound(g.s);
    assert_eq!(bound, vec![expected]);
    // It was not a rebind: no 38, no 51, no callback, no close, no event.
    assert_eq!(
        tapped(&g.mesh, Command::BoundSessionBind).len(),
        binds_before
    );
    assert!(tapped(&g.mesh, Command::BoundSessionReplaced).is_empty());
    assert!(g
        .mesh
        .disconnect_callbacks(g.source, &actor_id("a"))
        .is_empty());
    assert!(g
        .mesh
        .disconnect_callbacks(g.target, &actor_id("a"))
        .is_empty());
    assert_eq!(g.mesh.node(g.node).session_events.len(), events_before);
    assert_eq!(g.count(FlowTrace::SessionRouteCommitted), 1);
    // The commit cancelled the seal timeout in its span: nothing is armed.
    assert_eq!(g.mesh.node(g.node).core().armed_timers(), 0);

    // And a relay after the commit is processed on the target, and its
    // reply completes the client's correlation once.
    let c = g.mesh.request(g.node, g.s, &g.a, b"after").unwrap();
    g.mesh.run();
    assert_eq!(payloads_to(&g.mesh, g.target, g.s, "a"), vec![b(b"after")]);
    assert_eq!(
        payloads_to(&g.mesh, g.source, g.s, "a"),
        Vec::<Bytes>::new()
    );
    assert_eq!(delivered(&g.mesh, g.target, "a"), vec![b(b"after")]);
    assert_eq!(g.mesh.answers(g.node, g.s, c), vec![reply(c, b"after")]);
    // The seal timeout was cancelled with the commit: the connection stays.
    g.mesh.advance(Duration::from_secs(10));
    assert!(!g.mesh.closed(g.node, g.s));
    assert_eq!(g.count(FlowTrace::SealTimeout), 0);
}

#[test]
fn core_l2_held_messages_go_to_target_before_later_relays() {
    // Given s bound to "a", sealed, with three messages held (one a request).
    let mut g = given(SessionOwnerConfig::default());
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));
    send(&mut g.mesh, g.node, g.s, "a", b"held-1").unwrap();
    let c2 = g.mesh.request(g.node, g.s, &g.a, b"held-2").unwrap();
    send(&mut g.mesh, g.node, g.s, "a", b"held-3").unwrap();
    g.mesh.run();
    assert!(
        relayed_to(&g.mesh, g.source, g.s, "a").is_empty(),
        "held, not sent"
    );
    assert!(
        relayed_to(&g.mesh, g.target, g.s, "a").is_empty(),
        "held, not sent"
    );

    // When the commit is processed and the client relays right after it.
    let commit = RouteCommit {
        seal: g.seal_identity(1),
        actor: actor_id("a"),
        object_generation: g.a.generation,
        target_mesh: moved.location.mesh.clone(),
        target: moved.location.owner,
        target_node_generation: moved.location.node_generation,
        authority: moved.location.authority,
        lease: moved.location.lease,
    };
    g.mesh.inject(
        g.target,
        g.node,
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(commit)),
    );
    g.mesh.advance(LATENCY);
    send(&mut g.mesh, g.node, g.s, "a", b"later-1").unwrap();
    let c5 = g.mesh.request(g.node, g.s, &g.a, b"later-2").unwrap();
    g.mesh.run();

    // Then the held messages went to the target first, in arrival order and
    // with their session sequences, and nothing went to the source.
    let sent = relayed_to(&g.mesh, g.target, g.s, "a");
    let payloads: Vec<Bytes> = sent.iter().map(|(p, _)| p.clone()).collect();
    let order = [
        b(b"held-1"),
        b(b"held-2"),
        b(b"held-3"),
        b(b"later-1"),
        b(b"later-2"),
    ];
    assert_eq!(payloads, order);
    assert!(sent.windows(2).all(|w| w[0].1 < w[1].1), "{sent:?}");
    assert!(relayed_to(&g.mesh, g.source, g.s, "a").is_empty());
    // Each was processed on the target once, in that order.
    assert_eq!(delivered(&g.mesh, g.target, "a"), order);
    assert_eq!(g.mesh.answers(g.node, g.s, c2), vec![reply(c2, b"held-2")]);
    assert_eq!(g.mesh.answers(g.node, g.s, c5), vec![reply(c5, b"later-2")]);
}

#[test]
fn core_l5_abort_sends_held_messages_over_the_source_route_and_keeps_the_connection() {
    // Given s bound to "a", sealed, with two messages held.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    send(&mut g.mesh, g.node, g.s, "a", b"held-1").unwrap();
    let c = g.mesh.request(g.node, g.s, &g.a, b"held-2").unwrap();
    g.mesh.run();
    assert!(delivered(&g.mesh, g.source, "a").is_empty());

    // When the coordinator's 44 abort arrives.
    g.abort(1);

    // Then the held messages went over the source route, in order, and
    // were processed there; the request's reply completes its correlation.
    assert_eq!(
        payloads_to(&g.mesh, g.source, g.s, "a"),
        vec![b(b"held-1"), b(b"held-2")]
    );
    assert_eq!(
        delivered(&g.mesh, g.source, "a"),
        vec![b(b"held-1"), b(b"held-2")]
    );
    assert_eq!(g.mesh.answers(g.node, g.s, c), vec![reply(c, b"held-2")]);
    assert!(payloads_to(&g.mesh, g.target, g.s, "a").is_empty());
    // The location is unchanged and later relays use it too.
    assert_eq!(g.find_a(), Some(g.a.clone()));
    send(&mut g.mesh, g.node, g.s, "a", b"later").unwrap();
    g.mesh.run();
    assert_eq!(delivered(&g.mesh, g.source, "a").last(), Some(&b(b"later")));
    assert_eq!(g.count(FlowTrace::SessionSealAborted), 1);
    // And the connection is kept: the seal timeout was cancelled.
    g.mesh.advance(Duration::from_secs(10));
    assert!(!g.mesh.closed(g.node, g.s));
    assert_eq!(g.count(FlowTrace::SealTimeout), 0);
    assert_eq!(g.mesh.node(g.node).core().armed_timers(), 0);
}

/// A shard core of node 1 whose session `s` is bound to "a" on node 2 and
/// sealed at 1 s for relocation 1; returns the core, s, the commit to node 3
/// and the seal deadline. Driven directly, so that a 44 and the timeout can
/// be handled in one span, in either order.
fn sealed_shard() -> (ShardCore, SessionRid, RouteCommit, Instant) {
    let mesh = MeshName::new("sim").unwrap();
    let me = SessionOwnerIdentity {
        node: NodeRid(1),
        lifecycle: NodeGeneration(1),
        owner_id: SessionOwnerId(0),
        lease: OwnerLeaseGeneration(1),
    };
    let config = ShardConfig {
        session_owner: me,
        actor_owner: ActorOwnerIdentity {
            mesh: mesh.clone(),
            node: NodeRid(1),
            node_generation: NodeGeneration(1),
            lease: OwnerLeaseGeneration(1),
        },
        sessions: SessionOwnerConfig::default(),
        relocation: zlink::core::relocation::RelocationConfig::default(),
        send_timeout: std::time::Duration::from_millis(3_000),
        actor_turn_deadline: std::time::Duration::from_millis(1_400),
    };
    let mut core = ShardCore::new(config, Instant::ZERO);
    let source = Peer {
        rid: NodeRid(2),
        generation: NodeGeneration(1),
    };
    let location = ActorLocation {
        mesh: mesh.clone(),
        owner: source.rid,
        node_generation: source.generation,
        authority: AuthorityOwnerGeneration(1),
        lease: OwnerLeaseGeneration(1),
    };
    let a = ActorRef {
        id: actor_id("a"),
        generation: ObjectGeneration(1),
        location: location.clone(),
    };
    let s = core.sessions(Instant::ZERO).open_session();
    core.sessions(Instant::ZERO).bind(s, a.clone()).unwrap();
    let Some(NodeRecord::BoundSessionBind(BoundSessionBind::Request(bind))) =
        core.poll_transmit().map(|t| t.record)
    else {
        panic!("bind sends a 38");
    };
    let terminal = BindTerminal {
        request: bind.request.id,
        outcome: Ok(BoundRoute {
            mesh: mesh.clone(),
            owner: location.owner,
            node_generation: location.node_generation,
            authority: location.authority,
            lease: location.lease,
        }),
    };
    let at = Instant::from_millis(1);
    core.handle_record(
        at,
        source,
        NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal)),
    );
    let seal = SealIdentity {
        relocation: RelocationId {
            coordinator: source.rid,
            sequence: 1,
        },
        session: core.session_owner().session_ref(s),
        binding: bind.binding,
    };
    let sealed_at = Instant::from_millis(1_000);
    let request = SessionRelocationSeal {
        request: RequestHeader {
            id: RequestId(1),
            budget: Duration::from_secs(1),
        },
        seal,
        actor: a.id.clone(),
        object_generation: a.generation,
    };
    core.handle_record(
        sealed_at,
        source,
        NodeRecord::SessionRelocationSeal(request),
    );
    core.sessions(sealed_at)
        .relay(s, &a.id, PacketKey(1), Bytes::from_static(b"held"), None)
        .unwrap();
    while core.poll_transmit().is_some() {}
    while core.poll_event().is_some() {}
    let commit = RouteCommit {
        seal,
        actor: a.id.clone(),
        object_generation: a.generation,
        target_mesh: mesh,
        target: NodeRid(3),
        target_node_generation: NodeGeneration(7),
        authority: AuthorityOwnerGeneration(2),
        lease: OwnerLeaseGeneration(7),
    };
    let deadline = sealed_at + SessionOwnerConfig::default().relocation_seal_timeout;
    assert_eq!(core.poll_timeout(), Some(deadline));
    (core, s, commit, deadline)
}

fn outputs(core: &mut ShardCore) -> (Vec<(NodeRid, NodeRecord)>, Vec<CoreEvent>) {
    let transmits = std::iter::from_fn(|| core.poll_transmit().map(|t| (t.to, t.record))).collect();
    let events = std::iter::from_fn(|| core.poll_event()).collect();
    (transmits, events)
}

#[test]
fn core_l4_seal_timeout_and_44_in_one_span_only_the_first_wins() {
    let target = Peer {
        rid: NodeRid(3),
        generation: NodeGeneration(7),
    };
    let commit_record = |c: &RouteCommit| {
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(c.clone()))
    };

    // Given a sealed binding; when its 44 is handled at the very deadline,
    // before the timeout.
    let (mut core, s, commit, deadline) = sealed_shard();
    core.handle_record(deadline, target, commit_record(&commit));
    core.handle_timeout(deadline);
    // Then the commit won: the held message went to the target, no close,
    // and the timeout was a no-op.
    let (transmits, events) = outputs(&mut core);
    assert_eq!(transmits.len(), 1);
    assert!(matches!(&transmits[0],
        (to, NodeRecord::ActorSend(ActorSend::Message(m))) if *to == target.rid && m.tail.binding == commit.seal.binding));
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(core.counters().get(FlowTrace::SealTimeout), 0);
    assert_eq!(core.counters().get(FlowTrace::LateSessionRouteUpdate), 0);
    let found = core.session_owner().find(s, &actor_id("a")).unwrap();
    assert_eq!(found.location.owner, target.rid);

    // Given the same; when the timeout is handled first, then the 44.
    let (mut core, s, commit, deadline) = sealed_shard();
    core.handle_timeout(deadline);
    core.handle_record(deadline, target, commit_record(&commit));
    // Then the timeout won: the session closed, the held message was not
    // sent, the sealed binding's one disconnect notice went over the stored
    // (source) route only (X22), and the 44 was only a late route update:
    // it sent nothing to the target.
    let (transmits, events) = outputs(&mut core);
    assert_eq!(transmits.len(), 1, "{transmits:?}");
    assert!(matches!(&transmits[0],
        (to, NodeRecord::ActorSend(ActorSend::Message(m)))
            if *to == NodeRid(2) && m.body == ActorSendBody::DisconnectNotice));
    assert!(events.contains(&CoreEvent::Session(SessionEvent::Close {
        session: s,
        reason: CloseReason::SealTimeout,
    })));
    assert_eq!(core.counters().get(FlowTrace::SealTimeout), 1);
    assert_eq!(core.counters().get(FlowTrace::LateSessionRouteUpdate), 1);
    assert_eq!(core.session_owner().find(s, &actor_id("a")), None);
}

#[test]
fn core_l2_seal_holds_only_its_binding_other_actors_keep_flowing() {
    // Given s bound to "a" and "b", both hosted on the source, and a's
    // binding sealed.
    let mut g = given(SessionOwnerConfig::default());
    let b_ref = g.mesh.host(g.source, "b");
    bind_ok(&mut g.mesh, g.node, g.s, &b_ref);
    assert_eq!(g.seal(1), Ok(()));

    // When the client relays to both, and both Actors push.
    send(&mut g.mesh, g.node, g.s, "a", b"to-a").unwrap();
    let c = g.mesh.request(g.node, g.s, &b_ref, b"to-b").unwrap();
    push(&mut g.mesh, g.source, "b", b"from-b").unwrap();
    push(&mut g.mesh, g.source, "a", b"from-a").unwrap();
    g.mesh.run();

    // Then b's relay is processed and answered at once, a's is held; pushes
    // flow on both (the source is still a's owner until the commit).
    assert_eq!(delivered(&g.mesh, g.source, "b"), vec![b(b"to-b")]);
    assert_eq!(g.mesh.answers(g.node, g.s, c), vec![reply(c, b"to-b")]);
    assert!(delivered(&g.mesh, g.source, "a").is_empty());
    assert_eq!(
        pushes(&g.mesh, g.node, g.s),
        vec![b(b"from-b"), b(b"from-a")]
    );
    // The session is open and both are still bound.
    assert!(g.mesh.node(g.node).core().session_owner().is_open(g.s));
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().bound(g.s).len(),
        2
    );

    // And when the seal is aborted, a's held message follows.
    g.abort(1);
    assert_eq!(delivered(&g.mesh, g.source, "a"), vec![b(b"to-a")]);
}

#[test]
fn core_x3_after_commit_pushes_from_target_are_delivered_and_from_source_refused() {
    // Given s bound to "a", sealed; a push from the source while sealed is
    // still current (the source owns "a" until the commit).
    let mut g = given(SessionOwnerConfig::default());
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));
    push(&mut g.mesh, g.source, "a", b"source-before").unwrap();
    g.mesh.run();
    assert_eq!(pushes(&g.mesh, g.node, g.s), vec![b(b"source-before")]);

    // When the commit switches the route, and both nodes push.
    g.commit(1, &moved);
    push(&mut g.mesh, g.target, "a", b"target-after").unwrap();
    push(&mut g.mesh, g.source, "a", b"source-after").unwrap();
    g.mesh.run();

    // Then the target's push is judged on the new location and delivered;
    // the source's fails judgment and is counted as refused.
    assert_eq!(
        pushes(&g.mesh, g.node, g.s),
        vec![b(b"source-before"), b(b"target-after")]
    );
    assert_eq!(g.count(FlowTrace::PushRejectedNotCurrent), 1);

    // And a push from the target that carries the source's authority
    // generation is refused too: the new location's generations judge.
    let real = tapped(&g.mesh, Command::BoundSessionSend)
        .into_iter()
        .find_map(|t| match t.record {
            NodeRecord::BoundSessionSend(send) if t.from == g.target => Some(send),
            _ => None,
        })
        .expect("the target pushed");
    assert_eq!(real.node_generation, NodeGeneration(7));
    let stale = BoundSessionSend {
        authority: g.a.location.authority,
        ..real
    };
    g.mesh
        .inject(g.target, g.node, NodeRecord::BoundSessionSend(stale));
    g.mesh.run();
    assert_eq!(pushes(&g.mesh, g.node, g.s).len(), 2);
    assert_eq!(g.count(FlowTrace::PushRejectedNotCurrent), 2);
}

#[test]
fn core_l2_held_request_ends_at_its_deadline_and_is_never_sent_later() {
    // Given a seal whose timeout is longer than a request's deadline.
    let config = SessionOwnerConfig {
        relocation_seal_timeout: Duration::from_secs(10),
        ..SessionOwnerConfig::default()
    };
    let mut g = given(config);
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));

    // When a request with a 1 s deadline is held between two one-way messages.
    send(&mut g.mesh, g.node, g.s, "a", b"before").unwrap();
    let accepted = g.mesh.now();
    let budget = Duration::from_secs(1);
    let c = request_within(&mut g.mesh, g.node, g.s, 77, b"expires", budget);
    send(&mut g.mesh, g.node, g.s, "a", b"after").unwrap();
    advance_to(&mut g.mesh, accepted + (budget - MICRO));
    assert!(g.mesh.answers(g.node, g.s, c).is_empty(), "ended early");
    advance_to(&mut g.mesh, accepted + budget);

    // Then it ends at its deadline with a typed error, while still held.
    assert_eq!(
        g.mesh.answers(g.node, g.s, c),
        vec![failed_for_a(c, Reason::Deadline)]
    );
    assert_eq!(error(Reason::Deadline).kind(), ErrorKind::DeadlineExceeded);

    // And when the commit comes, only the other held messages go out.
    g.commit(1, &moved);
    assert_eq!(
        payloads_to(&g.mesh, g.target, g.s, "a"),
        vec![b(b"before"), b(b"after")]
    );
    assert_eq!(
        delivered(&g.mesh, g.target, "a"),
        vec![b(b"before"), b(b"after")]
    );
    assert!(payloads_to(&g.mesh, g.source, g.s, "a").is_empty());
    assert_eq!(g.mesh.answers(g.node, g.s, c).len(), 1);
    assert_eq!(
        g.mesh.node(g.node).core().session_owner().pending_count(),
        0
    );
}

#[test]
fn core_d2_disconnect_while_sealed_is_held_and_sent_over_the_resolved_route() {
    // Given s bound to "a", sealed, with a message held; the client goes away.
    let mut g = given(SessionOwnerConfig::default());
    let moved = g.take_over();
    assert_eq!(g.seal(1), Ok(()));
    send(&mut g.mesh, g.node, g.s, "a", b"held").unwrap();
    g.mesh.sessions(g.node).connection_lost(g.s);
    g.mesh.run();
    // The notice waits with the held message; the session is not done.
    assert_eq!(notices_to(&g.mesh, g.source, "a"), 0);
    assert!(!ended(&g.mesh, g.node, g.s));

    // When the commit comes.
    g.commit(1, &moved);

    // Then the held message and then the notice go to the target: one
    // callback there, none at the source, and the session's cleanup ends.
    assert_eq!(delivered(&g.mesh, g.target, "a"), vec![b(b"held")]);
    assert_eq!(notices_to(&g.mesh, g.target, "a"), 1);
    assert_eq!(
        g.mesh.disconnect_callbacks(g.target, &actor_id("a")).len(),
        1
    );
    assert!(g
        .mesh
        .disconnect_callbacks(g.source, &actor_id("a"))
        .is_empty());
    assert!(ended(&g.mesh, g.node, g.s));

    // Given another session's sealed binding; NotifyDisconnected while sealed.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    let ticket = g
        .mesh
        .sessions(g.node)
        .notify_disconnected(g.s, &actor_id("a"))
        .unwrap();
    // From now on the binding is gone for the application.
    assert_eq!(
        send(&mut g.mesh, g.node, g.s, "a", b"refused"),
        Err(error(Reason::SessionNotBound))
    );
    assert_eq!(
        g.mesh
            .sessions(g.node)
            .notify_disconnected(g.s, &actor_id("a")),
        Err(error(Reason::SessionNotBound))
    );
    g.mesh.run();
    assert_eq!(
        notices_to(&g.mesh, g.source, "a"),
        0,
        "held until the seal ends"
    );

    // When the seal is aborted.
    g.abort(1);

    // Then the notice goes over the source route, its callback runs once,
    // the notify completes, and the connection is kept.
    assert_eq!(notices_to(&g.mesh, g.source, "a"), 1);
    assert_eq!(
        g.mesh.disconnect_callbacks(g.source, &actor_id("a")).len(),
        1
    );
    assert!(g
        .mesh
        .node(g.node)
        .session_events
        .contains(&SessionEvent::NotifyCompleted {
            session: g.s,
            ticket,
            outcome: Ok(()),
        }));
    assert!(!g.mesh.closed(g.node, g.s));
    assert_eq!(g.find_a(), None);
}

#[test]
fn core_seal_42_installs_only_on_the_binding_it_names_and_is_idempotent() {
    // Given s bound to "a".
    let mut g = given(SessionOwnerConfig::default());
    let good = g.seal_identity(1);
    let generation = g.a.generation.0;

    // When 42s arrive that each differ from the binding in one value.
    let wrong_binding = SealIdentity {
        binding: BindingGeneration(g.generation.0 + 1),
        ..good
    };
    let mut wrong_session = good;
    wrong_session.session.session = SessionRid(g.s.0 + 1);
    let mut wrong_lifecycle = good;
    wrong_lifecycle.session.lifecycle = NodeGeneration(2);
    let source = g.source;
    let refusals = [
        (
            g.seal_from(source, wrong_binding, "a", generation),
            Reason::StaleBinding,
        ),
        (
            g.seal_from(source, good, "a", generation + 1),
            Reason::ObjectGenerationMismatch,
        ),
        (
            g.seal_from(source, wrong_session, "a", generation),
            Reason::StaleBinding,
        ),
        (
            g.seal_from(source, wrong_lifecycle, "a", generation),
            Reason::StaleBinding,
        ),
        (
            g.seal_from(source, good, "b", generation),
            Reason::StaleBinding,
        ),
    ];

    // Then each is answered with a typed error and nothing is sealed.
    for (outcome, reason) in refusals {
        assert_eq!(outcome, Err(error(reason)));
    }
    send(&mut g.mesh, g.node, g.s, "a", b"not-held").unwrap();
    g.mesh.run();
    assert_eq!(delivered(&g.mesh, g.source, "a"), vec![b(b"not-held")]);
    assert_eq!(g.mesh.next_timer(), None);

    // When the right 42 comes, then again, then one of another relocation.
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    let deadline = installed + SessionOwnerConfig::default().relocation_seal_timeout;
    g.mesh.advance(Duration::from_millis(500));
    assert_eq!(g.seal(1), Ok(()), "the same relocation again is Ok again");
    assert_eq!(g.seal(2), Err(error(Reason::RelocationSealed)));

    // Then one seal is installed, its timeout not re-armed by the repeat.
    assert_eq!(g.mesh.next_timer(), Some(deadline));
    send(&mut g.mesh, g.node, g.s, "a", b"held").unwrap();
    g.mesh.run();
    assert_eq!(delivered(&g.mesh, g.source, "a"), vec![b(b"not-held")]);
    // No relocation runs at the source: its coordinator counts each 43 as
    // stale, never a panic.
    assert_eq!(
        count(&g.mesh, g.source, FlowTrace::RelocationRecordStale),
        8
    );
    // And the seal ends with its relocation's abort only.
    g.abort(2);
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 1);
    g.abort(1);
    assert_eq!(
        delivered(&g.mesh, g.source, "a"),
        vec![b(b"not-held"), b(b"held")]
    );
}

#[test]
fn core_p2_replaced_while_sealed_ends_held_messages_and_the_seal() {
    // Given s's binding of "a" sealed, with a one-way message and a request
    // held.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    send(&mut g.mesh, g.node, g.s, "a", b"held-1").unwrap();
    let c = g.mesh.request(g.node, g.s, &g.a, b"held-2").unwrap();
    g.mesh.run();

    // When another session binds "a" and the 51 retires s's binding.
    let other = g.mesh.add_node(4);
    let s2 = g.mesh.connect(other);
    bind_ok(&mut g.mesh, other, s2, &g.a);

    // Then the held request ends with a stale-binding error, nothing held
    // is ever sent, and the seal's timeout no longer exists.
    assert_eq!(
        g.mesh.answers(g.node, g.s, c),
        vec![failed_for_a(c, Reason::StaleBinding)]
    );
    assert_eq!(g.count(FlowTrace::HeldMessageDropped), 2);
    assert_eq!(g.find_a(), None);
    advance_to(
        &mut g.mesh,
        installed + SessionOwnerConfig::default().relocation_seal_timeout,
    );
    assert_eq!(g.count(FlowTrace::SealTimeout), 0);
    assert!(payloads_to(&g.mesh, g.source, g.s, "a").is_empty());
    // The replacement itself goes on as §6 says: one callback.
    assert_eq!(replacement_callbacks(&g.mesh, g.node, g.s).len(), 1);
    // And a 44 for the retired seal is only late.
    g.abort(1);
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 1);
}

#[test]
fn core_l2_held_request_past_its_deadline_is_not_sent_by_a_commit_handled_first() {
    // Given a sealed binding holding a request with a 1 s deadline.
    let target = Peer {
        rid: NodeRid(3),
        generation: NodeGeneration(7),
    };
    let (mut core, s, commit, deadline) = sealed_shard();
    assert_eq!(deadline, Instant::from_millis(4_000));
    let accepted = Instant::from_millis(2_000);
    let c = Correlation(5);
    core.sessions(accepted)
        .relay(
            s,
            &actor_id("a"),
            PacketKey(1),
            Bytes::from_static(b"expired"),
            Some((c, Duration::from_secs(1))),
        )
        .unwrap();

    // When the commit is handled after that deadline, before the shard
    // got to the request's timer.
    let late = accepted + Duration::from_millis(1_500);
    core.handle_record(
        late,
        target,
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(commit)),
    );
    core.handle_timeout(late);

    // Then only the one-way held message goes to the target; the request
    // ends once, with DeadlineExceeded, and is never sent.
    let (transmits, events) = outputs(&mut core);
    let payloads: Vec<_> = transmits
        .iter()
        .filter_map(|(to, r)| match r {
            NodeRecord::ActorSend(ActorSend::Message(m)) => match &m.body {
                ActorSendBody::Payload { payload, .. } => Some((*to, payload.clone())),
                ActorSendBody::DisconnectNotice => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(payloads, vec![(target.rid, b(b"held"))]);
    assert_eq!(
        events,
        vec![CoreEvent::Session(SessionEvent::Frame {
            session: s,
            frame: failed_for_a(c, Reason::Deadline),
        })]
    );
    assert_eq!(core.session_owner().pending_count(), 0);
    assert_eq!(core.armed_timers(), 0);
}

/// Found by zlink-sim (seed 328 of `--steps 2000`): a seal timeout closed a
/// session that had a second sealed binding; a one-way message held on that
/// binding was still submitted when its 44 abort came later.
#[test]
fn core_l3_a_seal_timeout_leaves_no_held_message_of_the_session_to_send_later() {
    // Given s bound to "a" and to "c", both on the source; "a" sealed by
    // relocation 1, and 2 s later "c" sealed by relocation 2 with a one-way
    // message held on it.
    let mut g = given(SessionOwnerConfig::default());
    let c = g.mesh.host(g.source, "c");
    bind_ok(&mut g.mesh, g.node, g.s, &c);
    let c_binding = bind_generation(&g.mesh, g.s, "c");
    assert_eq!(g.seal(1), Ok(()));
    g.mesh.advance(Duration::from_secs(2));
    let c_seal = SealIdentity {
        binding: c_binding,
        ..g.seal_identity(2)
    };
    assert_eq!(g.seal_from(g.source, c_seal, "c", c.generation.0), Ok(()));
    send(&mut g.mesh, g.node, g.s, "c", b"held on c").unwrap();

    // When the seal of "a" times out (the session closes), then the 44 abort
    // of "c"'s seal comes.
    g.mesh.advance(Duration::from_millis(1_100));
    assert_eq!(closes(&g.mesh, g.node, g.s), vec![CloseReason::SealTimeout]);
    g.route(g.source, SessionRelocationRoute::Abort(c_seal));

    // Then the message held on "c" was never submitted.
    let submitted = g.mesh.tap().iter().any(|t| {
        matches!(&t.record, NodeRecord::ActorSend(ActorSend::Message(m))
            if matches!(&m.body, ActorSendBody::Payload { payload, .. } if payload.as_ref() == b"held on c"))
    });
    assert!(!submitted);
    assert!(delivered(&g.mesh, g.source, "c").is_empty());
}

/// Issue 24: the relocation pause a session owner records (the
/// `zlink_relocation_pause_seconds` series) runs from the 42 that installed
/// the seal to the 44 that released it — commit or abort — or to the seal
/// timeout, by outcome, in the core's own time: exact under virtual time.
/// A 44 that matches no seal ends no pause.
#[test]
fn core_the_relocation_pause_runs_from_the_42_to_the_44_or_the_seal_timeout() {
    let pause = |g: &Given, end: SealEnd| {
        let latency = g.mesh.node(g.node).core().latency();
        latency.pause(end).snapshot()
    };
    let counts = |g: &Given| SealEnd::ALL.map(|end| pause(g, end).count());
    // The last 44 reached the session owner one link latency after it left.
    let route_handled = |g: &Given| {
        let routes = tapped(&g.mesh, Command::SessionRelocationRoute);
        routes.last().expect("a 44 was sent").at + LATENCY
    };

    // Committed: sealed, 7 ms later the target takes over and commits.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    assert_eq!(counts(&g), [0, 0, 0], "a seal in place is no pause yet");
    g.mesh.advance(Duration::from_millis(7));
    let moved = g.take_over();
    g.commit(1, &moved);
    let released = route_handled(&g);
    assert!(released - installed >= Duration::from_millis(7));
    assert_eq!(counts(&g), [1, 0, 0]);
    let committed = pause(&g, SealEnd::Committed);
    assert_eq!(
        Duration::from_micros(committed.sum_micros),
        released - installed
    );

    // Aborted: sealed, 3 ms later the coordinator aborts; a second 44
    // abort finds no seal and changes nothing.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    g.mesh.advance(Duration::from_millis(3));
    g.abort(1);
    let released = route_handled(&g);
    g.abort(1);
    assert_eq!(g.count(FlowTrace::LateSessionRouteUpdate), 1);
    assert_eq!(counts(&g), [0, 1, 0]);
    let aborted = pause(&g, SealEnd::Aborted);
    assert_eq!(
        Duration::from_micros(aborted.sum_micros),
        released - installed
    );

    // Timed out: no 44 at all; the pause is the seal timeout, to the µs.
    let mut g = given(SessionOwnerConfig::default());
    assert_eq!(g.seal(1), Ok(()));
    let installed = g.sealed_at();
    let timeout = SessionOwnerConfig::default().relocation_seal_timeout;
    advance_to(&mut g.mesh, installed + timeout);
    assert_eq!(g.count(FlowTrace::SealTimeout), 1);
    assert_eq!(counts(&g), [0, 0, 1]);
    let timed_out = pause(&g, SealEnd::TimedOut);
    assert_eq!(Duration::from_micros(timed_out.sum_micros), timeout);
}

/// §8.1, §12: a held request was never sent, so nothing can answer it yet:
/// a 24 reply under its id, even from the node of its route, is a counted
/// mismatch that ends nothing. Released, it goes out under that id, and its
/// real reply completes it once.
#[test]
fn core_a_reply_to_a_held_request_before_it_was_sent_ends_nothing() {
    // Given s's binding of "a" sealed, and a request held by the seal.
    let mut g = given(SessionOwnerConfig::default());
    let bind = tapped(&g.mesh, Command::BoundSessionBind)
        .into_iter()
        .find_map(|t| match t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Request(r)) => Some(r.request.id),
            _ => None,
        })
        .expect("s's bind");
    // Node 1 numbers its requests in order: the held one comes next.
    let held_id = bind.next();
    assert_eq!(g.seal(1), Ok(()));
    let held = g.mesh.request(g.node, g.s, &g.a, b"held").unwrap();
    g.mesh.run();

    // When a 24 reply under the held request's id comes from the source.
    let forged = zlink::wire::node::ActorReply {
        request: held_id,
        outcome: Ok(Bytes::from_static(b"forged")),
    };
    g.mesh.inject(
        g.source,
        g.node,
        NodeRecord::ActorSend(ActorSend::Reply(forged)),
    );
    g.mesh.run();

    // Then it is a counted mismatch, and the client has no answer.
    assert_eq!(g.count(FlowTrace::ReplyMismatch), 1);
    assert!(g.mesh.answers(g.node, g.s, held).is_empty());

    // When the seal is aborted: the request goes out over the source route.
    g.abort(1);

    // Then it went out under that id, and its real reply completed it once.
    let sent: Vec<_> = tapped(&g.mesh, Command::ActorSend)
        .into_iter()
        .filter(|t| t.from == g.node)
        .filter_map(|t| t.record.request_id())
        .collect();
    assert_eq!(sent, [held_id]);
    assert_eq!(g.mesh.answers(g.node, g.s, held), [reply(held, b"held")]);
}
