//! Core contract tests for relay and reply (§5, §12): CONTRACT R3, R5,
//! proved on the sans-IO cores with virtual time.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use zlink::core::actor::{ActorEvent, ReplyTicket};
use zlink::core::latency::PushOrigin;
use zlink::core::trace::FlowTrace;
use zlink::error::Reason;
use zlink::ids::{Correlation, NodeRid, PacketKey};
use zlink::sim::{actor_id, ActorBehavior, Mesh};
use zlink::wire::client::ClientFrame;
use zlink::wire::node::{ActorSend, Command, NodeRecord};

/// The reply ticket and correlation of the request delivered with `payload`.
fn delivered_request(
    mesh: &Mesh,
    node: NodeRid,
    payload: &'static [u8],
) -> (ReplyTicket, Option<Correlation>) {
    mesh.node(node)
        .actor_events
        .iter()
        .find_map(|e| match e {
            ActorEvent::Deliver {
                payload: p,
                reply: Some(t),
                correlation,
                ..
            } if p == payload => Some((*t, *correlation)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request {payload:?} was delivered"))
}

#[test]
fn core_r3_reply_completes_the_original_correlation_exactly_once() {
    // Given s on node 1 bound to "a" on node 2, whose handler echoes.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);

    // When the client makes a request.
    let correlation = mesh.request(node, s, &a, b"ping").unwrap();
    let in_flight = |mesh: &Mesh| mesh.node(node).core().session_owner().pending_count();
    assert_eq!(in_flight(&mesh), 1, "a request in flight is counted");
    mesh.run();

    // Then the handler saw the client's own correlation, and the reply
    // completes that correlation once.
    let (_, seen) = delivered_request(&mesh, owner, b"ping");
    assert_eq!(seen, Some(correlation));
    let once = vec![ClientFrame::Reply {
        correlation,
        payload: b(b"ping"),
    }];
    assert_eq!(mesh.answers(node, s, correlation), once);
    assert_eq!(in_flight(&mesh), 0);

    // When the same reply record arrives again, and the deadline passes.
    let reply = mesh
        .tap()
        .iter()
        .find_map(|t| match &t.record {
            NodeRecord::ActorSend(ActorSend::Reply(r)) => Some(r.clone()),
            _ => None,
        })
        .expect("a 24 reply was sent");
    mesh.inject(owner, node, NodeRecord::ActorSend(ActorSend::Reply(reply)));
    mesh.run();
    mesh.advance(Duration::from_secs(30));

    // Then the correlation is still completed exactly once.
    assert_eq!(mesh.answers(node, s, correlation), once);
    assert_eq!(count(&mesh, node, FlowTrace::LateReplyDropped), 1);
    assert_eq!(count(&mesh, node, FlowTrace::RequestDeadlineExceeded), 0);
    assert_eq!(mesh.frames(node, s).len(), 1);
}

/// §12: a relayed request whose link to the Actor's node goes down while
/// it is in flight may or may not have run there; it is never sent again.
/// It ends at once with `OutcomeUnknown` (Unavailable, code 29), not at its
/// deadline. A request to an Actor on another node is untouched, and a
/// reply that still comes over the link, up again, is late.
#[test]
fn core_r3_a_relay_in_flight_when_its_link_goes_down_ends_outcome_unknown_at_once() {
    let mut mesh = mesh();
    let (node, owner, other) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    mesh.set_behavior(other, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let c = mesh.host(other, "c");
    let (s, t) = (mesh.connect(node), mesh.connect(node));
    bind_ok(&mut mesh, node, s, &a);
    bind_ok(&mut mesh, node, t, &c);
    let to_a = mesh.request(node, s, &a, b"to a").unwrap();
    let to_c = mesh.request(node, t, &c, b"to c").unwrap();
    mesh.run();
    let (ticket, _) = delivered_request(&mesh, owner, b"to a");
    assert!(mesh.answers(node, s, to_a).is_empty());

    // The link between the session's node and "a"'s goes down.
    let at = mesh.now();
    mesh.break_link(node, owner);
    assert_eq!(
        count(&mesh, node, FlowTrace::RequestLinkDown),
        1,
        "ended as the link went down"
    );
    mesh.run();
    assert!(
        mesh.now() < at + Duration::from_secs(5),
        "ended before its deadline"
    );
    let unknown = |correlation| {
        vec![ClientFrame::Error {
            correlation,
            error: zlink::sim::error(Reason::OutcomeUnknown).about_actor(&a.id),
        }]
    };
    assert_eq!(mesh.answers(node, s, to_a), unknown(to_a));
    assert_eq!(count(&mesh, node, FlowTrace::RequestLinkDown), 1);
    assert!(
        mesh.answers(node, t, to_c).is_empty(),
        "node 3's request ended too"
    );

    // "a" still answers, over a link up again: late, dropped.
    mesh.actors(owner).reply(ticket, Ok(b(b"late")));
    mesh.run();
    mesh.advance(Duration::from_secs(60));
    assert_eq!(mesh.answers(node, s, to_a), unknown(to_a));
    assert_eq!(count(&mesh, node, FlowTrace::LateReplyDropped), 1);
    assert_eq!(count(&mesh, node, FlowTrace::RequestLinkDown), 1);
    assert_eq!(
        count(&mesh, node, FlowTrace::RequestDeadlineExceeded),
        1,
        "only node 3's"
    );
}

/// Found by the zlink-sim soak (seed 15366): a session owner node
/// restarted while an Actor elsewhere still owed a reply to one of its
/// requests. RequestIds start again in every NodeGeneration, so the late
/// reply carried the id of the new process's own first request, and that
/// request completed with the other request's reply (a success the client
/// saw for a message the Actor never processed).
#[test]
fn core_r5_a_reply_owed_to_a_restarted_nodes_previous_life_completes_nothing_of_the_new_one() {
    // Given a request of s1 in "a"'s handler, by hand.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let relay = |mesh: &mut Mesh, s, payload: &'static [u8]| {
        mesh.sessions(node).relay(
            s,
            &actor_id("a"),
            PacketKey(1),
            Bytes::from_static(payload),
            Some((Correlation(1), Duration::from_secs(60))),
        )
    };
    let s1 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a);
    relay(&mut mesh, s1, b"old").unwrap();
    mesh.run();
    let (old_ticket, _) = delivered_request(&mesh, owner, b"old");

    // When the session owner's process dies and starts again (a new
    // NodeGeneration), its new session binds "a" and sends a request under
    // the same RequestId, and then the reply owed to the old one is sent.
    mesh.restart(node);
    let s2 = mesh.connect(node);
    bind_ok(&mut mesh, node, s2, &a);
    relay(&mut mesh, s2, b"new").unwrap();
    mesh.run();
    let (new_ticket, _) = delivered_request(&mesh, owner, b"new");
    let ids: Vec<_> = tapped(&mesh, Command::ActorSend)
        .iter()
        .filter(|t| t.from == node)
        .filter_map(|t| t.record.request_id())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the new lifecycle reuses the RequestId");
    mesh.actors(owner).reply(old_ticket, Ok(b(b"for-old")));
    mesh.run();

    // Then the reply goes nowhere: the new request is still open, and the
    // drop is counted at the Actor owner.
    assert!(mesh.answers(node, s2, Correlation(1)).is_empty());
    assert_eq!(
        count(&mesh, owner, FlowTrace::AnswerToPastLifecycleDropped),
        1
    );

    // And the new request ends with its own reply.
    mesh.actors(owner).reply(new_ticket, Ok(b(b"for-new")));
    mesh.run();
    assert_eq!(
        mesh.answers(node, s2, Correlation(1)),
        vec![ClientFrame::Reply {
            correlation: Correlation(1),
            payload: b(b"for-new")
        }]
    );
}

#[test]
fn core_r5_reply_after_session_closed_reaches_no_new_session() {
    // Given s1 bound to "a" (answered by hand) with request 1 in flight.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let s1 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a);
    let one = Correlation(1);
    let relay = |mesh: &mut Mesh, s, payload: &'static [u8]| {
        mesh.sessions(node).relay(
            s,
            &actor_id("a"),
            PacketKey(1),
            Bytes::from_static(payload),
            Some((one, Duration::from_secs(60))),
        )
    };
    relay(&mut mesh, s1, b"old").unwrap();
    mesh.run();
    let (old_ticket, _) = delivered_request(&mesh, owner, b"old");

    // When s1's connection ends (its disconnect callback settles), a new
    // session s2 binds the same Actor and makes its own request 1, and then
    // the reply to s1's request arrives.
    mesh.sessions(node).connection_lost(s1);
    mesh.run();
    let callback = mesh.disconnect_callbacks(owner, &a.id)[0];
    mesh.actors(owner).disconnect_done(callback, Ok(()));
    mesh.run();
    assert!(ended(&mesh, node, s1));
    let s2 = mesh.connect(node);
    bind_ok(&mut mesh, node, s2, &a);
    relay(&mut mesh, s2, b"new").unwrap();
    mesh.run();
    let (new_ticket, _) = delivered_request(&mesh, owner, b"new");
    mesh.actors(owner).reply(old_ticket, Ok(b(b"for-s1")));
    mesh.run();

    // Then the late reply reaches neither the new session nor its binding.
    assert!(mesh.answers(node, s2, one).is_empty());
    assert!(mesh.answers(node, s1, one).is_empty());
    assert_eq!(count(&mesh, node, FlowTrace::LateReplyDropped), 1);

    // And the new session's own reply completes its request.
    mesh.actors(owner).reply(new_ticket, Ok(b(b"for-s2")));
    mesh.run();
    assert_eq!(
        mesh.answers(node, s2, one),
        vec![ClientFrame::Reply {
            correlation: one,
            payload: b(b"for-s2")
        }]
    );
}

/// Issue 24: a push handed to its client (the `zlink_push_duration_seconds`
/// series) is timed on the session's node by where it came from — an Actor
/// of that node, or a 36 off a link — from when it entered that node's path
/// to its frame: a record the session's core handles as it arrives waited
/// nowhere on the node, so its span is zero (the link's flight and the
/// Actor's node are not this node's to time). The Actor's node hands no
/// frame to a client and records nothing; a refused push is not timed.
#[test]
fn core_a_push_handed_to_its_client_is_timed_on_its_sessions_node_by_origin() {
    // Given s on node 1 bound to "far" on node 2 and "near" on node 1.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let far = mesh.host(owner, "far");
    let near = mesh.host(node, "near");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &far);
    bind_ok(&mut mesh, node, s, &near);

    // When "far" pushes twice and "near" once.
    push(&mut mesh, owner, "far", b"from-far-1").unwrap();
    push(&mut mesh, owner, "far", b"from-far-2").unwrap();
    push(&mut mesh, node, "near", b"from-near").unwrap();
    mesh.run();

    // Then all reach the client, each timed once under its origin.
    let mut seen = pushes(&mesh, node, s);
    seen.sort();
    assert_eq!(
        seen,
        vec![b(b"from-far-1"), b(b"from-far-2"), b(b"from-near")]
    );
    let timed = |mesh: &Mesh, at: NodeRid, origin: PushOrigin| {
        let snapshot = mesh.node(at).core().latency().push(origin).snapshot();
        (snapshot.count(), snapshot.sum_micros)
    };
    assert_eq!(timed(&mesh, node, PushOrigin::Local), (1, 0));
    assert_eq!(timed(&mesh, node, PushOrigin::Link), (2, 0));
    assert_eq!(timed(&mesh, owner, PushOrigin::Local), (0, 0));
    assert_eq!(timed(&mesh, owner, PushOrigin::Link), (0, 0));

    // When a 36 arrives from a node that is not the binding's route owner:
    // refused (not current), never handed to the client, not timed.
    let real = tapped(&mesh, Command::BoundSessionSend)
        .into_iter()
        .find(|t| t.from == owner)
        .expect("far's 36");
    let other = mesh.add_node(3);
    mesh.inject(other, node, real.record);
    mesh.run();
    assert_eq!(count(&mesh, node, FlowTrace::PushRejectedNotCurrent), 1);
    assert_eq!(timed(&mesh, node, PushOrigin::Link), (2, 0));
}

/// Issue 24 (src/core/latency.rs `CoreLatency::relay`): a relayed request
/// is timed once, on its session's node, from the relay to its reply
/// reaching the session owner (one clock: the round trip over the link); a
/// one-way relay, which has no reply, is not timed.
#[test]
fn core_a_relayed_request_is_timed_once_from_relay_to_reply_on_its_sessions_node() {
    // Given s on node 1 bound to "a" on node 2, whose handler echoes.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);

    // When the client makes one request and sends one one-way message.
    let correlation = mesh.request(node, s, &a, b"ping").unwrap();
    send(&mut mesh, node, s, "a", b"one-way").unwrap();
    mesh.run();

    // Then the reply arrived, and the session's node timed that one round
    // trip: the 24 and its reply, one link latency each.
    assert_eq!(mesh.answers(node, s, correlation).len(), 1);
    let timed = |mesh: &Mesh, at: NodeRid| {
        let snapshot = mesh.node(at).core().latency().relay.snapshot();
        (snapshot.count(), snapshot.sum_micros)
    };
    let round_trip = (LATENCY * 2).as_micros() as u64;
    assert_eq!(timed(&mesh, node), (1, round_trip));
    assert_eq!(timed(&mesh, owner), (0, 0));
}

/// §12: work the runtime will not run still ends. When an Actor is
/// destroyed with messages still on its lane (`Actors::refuse`), a queued
/// request gets its typed error (`StaleLocation`) at the client, and a
/// queued one-way message is a counted drop (`OneWayRecordRefused`).
#[test]
fn core_work_queued_for_a_destroyed_actor_still_ends_typed_or_counted() {
    // Given s on node 1 bound to "a" on node 2, whose lane the test runs
    // by hand, with a request and a one-way message waiting on it.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.create(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    mesh.set_behavior(owner, ActorBehavior::Queue);
    let correlation = mesh.request(node, s, &a, b"request").unwrap();
    send(&mut mesh, node, s, "a", b"one-way").unwrap();
    mesh.run();
    assert_eq!(mesh.lane(owner, &a.id).len(), 2);
    assert!(mesh.answers(node, s, correlation).is_empty());

    // When the Actor is destroyed before its lane ran them.
    mesh.destroy(owner, &a.id).unwrap();
    mesh.run();

    // Then the request ends with StaleLocation at the client, once, and the
    // one-way message is counted as refused at the Actor owner.
    let answers = mesh.answers(node, s, correlation);
    assert!(
        matches!(&answers[..], [ClientFrame::Error { error, .. }] if error.reason() == Reason::StaleLocation),
        "{answers:?}"
    );
    assert_eq!(count(&mesh, owner, FlowTrace::OneWayRecordRefused), 1);
    assert!(mesh.lane(owner, &a.id).is_empty());
}

/// §12, `ShardCore::handle_unreachable`: the transport reports a request
/// record it could not send on its link to one node; the report ends a
/// request that went to that node at once with `Unavailable`
/// (PeerUnreachable), never at its deadline, and a report naming another
/// node ends nothing.
#[test]
fn core_an_unreachable_report_ends_only_a_request_sent_to_that_node() {
    use zlink::core::session::{BindStart, SessionEvent, SessionOwnerConfig};
    use zlink::core::shard::ShardCore;
    use zlink::core::time::Instant;
    use zlink::core::CoreEvent;
    use zlink::ids::{AuthorityOwnerGeneration, NodeGeneration, ObjectGeneration, Peer};

    const ME: Peer = Peer {
        rid: NodeRid(1),
        generation: NodeGeneration(1),
    };
    let now = Instant::ZERO;
    /// The client errors the core raised; records to itself loop back.
    fn errors(core: &mut ShardCore, now: Instant) -> Vec<(Correlation, Reason)> {
        let mut errors = Vec::new();
        loop {
            let mut progress = false;
            while let Some(transmit) = core.poll_transmit() {
                progress = true;
                core.handle_record(now, ME, transmit.record);
            }
            while let Some(event) = core.poll_event() {
                progress = true;
                if let CoreEvent::Session(SessionEvent::Frame {
                    frame: ClientFrame::Error { correlation, error },
                    ..
                }) = event
                {
                    errors.push((correlation, error.reason()));
                }
            }
            if !progress {
                return errors;
            }
        }
    }

    // Given one shard core (node 1) whose session s is bound to "a",
    // hosted on it, and a request of s to "a" whose 24 the transport holds.
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = core
        .actors(now)
        .host(
            actor_id("a"),
            ObjectGeneration(1),
            AuthorityOwnerGeneration(1),
        )
        .unwrap();
    let s = core.sessions(now).open_session();
    let bind = core.sessions(now).bind(s, a.clone());
    assert!(matches!(bind, Ok(BindStart::Pending(_))), "{bind:?}");
    assert!(errors(&mut core, now).is_empty());
    let correlation = Correlation(7);
    core.sessions(now)
        .relay(
            s,
            &a.id,
            PacketKey(1),
            b(b"request"),
            Some((correlation, Duration::from_secs(5))),
        )
        .unwrap();
    let sent = core.poll_transmit().expect("the 24");
    assert_eq!(sent.to, NodeRid(1));
    let request = sent.record.request_id().expect("a request");

    // When the transport reports it unsent on a link to another node.
    core.handle_unreachable(now, NodeRid(2), request);

    // Then nothing ends: the request is still in flight.
    assert!(errors(&mut core, now).is_empty());
    assert_eq!(core.session_owner().pending_count(), 1);

    // When the transport reports it unsent on the link to node 1.
    core.handle_unreachable(now, NodeRid(1), request);

    // Then the request ends now with PeerUnreachable, once.
    assert_eq!(
        errors(&mut core, now),
        [(correlation, Reason::PeerUnreachable)]
    );
    assert_eq!(core.session_owner().pending_count(), 0);
}

/// §12: a reply ends a request only when it comes from the node the
/// request went to: the same reply from another node is a counted mismatch
/// that ends nothing, and the real reply still completes the request once.
#[test]
fn core_r3_a_reply_from_another_node_than_the_requests_ends_nothing() {
    // Given s on node 1 bound to "a" on node 2 (answered by hand), with a
    // request in "a"'s handler, and node 3 linked to node 1.
    let mut mesh = mesh();
    let (node, owner, other) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let s = mesh.connect(node);
    bind_ok(&mut mesh, node, s, &a);
    let correlation = mesh.request(node, s, &a, b"ping").unwrap();
    mesh.run();
    let (ticket, _) = delivered_request(&mesh, owner, b"ping");
    let request = tapped(&mesh, Command::ActorSend)
        .into_iter()
        .find_map(|t| t.record.request_id())
        .expect("the 24 request");

    // When a reply under that request's id comes from node 3.
    let forged = zlink::wire::node::ActorReply {
        request,
        outcome: Ok(b(b"forged")),
    };
    mesh.inject(other, node, NodeRecord::ActorSend(ActorSend::Reply(forged)));
    mesh.run();

    // Then it is a counted mismatch, and the request is still open.
    assert_eq!(count(&mesh, node, FlowTrace::ReplyMismatch), 1);
    assert!(mesh.answers(node, s, correlation).is_empty());

    // When "a" replies.
    mesh.actors(owner).reply(ticket, Ok(b(b"pong")));
    mesh.run();

    // Then its reply completes the request, once.
    assert_eq!(
        mesh.answers(node, s, correlation),
        vec![ClientFrame::Reply {
            correlation,
            payload: b(b"pong")
        }]
    );
}
