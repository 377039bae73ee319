//! Messages between Actors in the core (docs/actors.md "Messages between
//! Actors"), in virtual time: a request ends exactly once — its reply, its
//! deadline, or a typed refusal — and its outcome reaches the caller as a
//! later message, following the caller or the target across a move; a
//! refused one-way message is counted.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use zlink::core::actor::ActorEvent;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, ActorRef, CallId, NodeRid, ObjectGeneration, PacketKey};
use zlink::sim::{actor_id, error, ActorBehavior, Journal, Mesh, RestoreBehavior};

const KEY: PacketKey = PacketKey(7);
const DEADLINE: Duration = Duration::from_secs(2);

/// Every call outcome the caller's node emitted for `caller`, in order.
fn outcomes(mesh: &Mesh, caller: &str) -> Vec<(NodeRid, CallId, Result<Bytes, Error>)> {
    let caller = actor_id(caller);
    mesh.journal()
        .iter()
        .filter_map(|entry| match entry {
            Journal::Event {
                node,
                event:
                    CoreEvent::Actor(ActorEvent::CallOutcome {
                        actor,
                        call,
                        outcome,
                    }),
                ..
            } if *actor == caller => Some((*node, *call, outcome.clone())),
            _ => None,
        })
        .collect()
}

/// Every call message delivered to `actor`, with its node and sender.
fn calls_to(mesh: &Mesh, actor: &str) -> Vec<(NodeRid, String, Bytes)> {
    let id = actor_id(actor);
    mesh.journal()
        .iter()
        .filter_map(|entry| match entry {
            Journal::Event {
                node,
                event:
                    CoreEvent::Actor(ActorEvent::Call {
                        actor,
                        from,
                        payload,
                        ..
                    }),
                ..
            } if *actor == id => Some((
                *node,
                from.as_ref().map_or_else(String::new, ToString::to_string),
                payload.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// The reply the one call `node`'s Actor was given is owed under.
fn the_call_ticket(mesh: &Mesh, node: NodeRid) -> zlink::core::actor::ReplyTicket {
    match &mesh.node(node).actor_events[..] {
        [ActorEvent::Call {
            reply: Some(ticket),
            ..
        }] => *ticket,
        other => panic!("one call at {node:?}, got {other:?}"),
    }
}

/// `from` (hosted at `node`) opens a request of `to` in its ledger and
/// sends it, as an Actor's turn does: its number comes back.
fn request(
    mesh: &mut Mesh,
    node: NodeRid,
    from: &ActorId,
    to: &ActorRef,
    payload: &'static [u8],
) -> CallId {
    let mut actors = mesh.actors(node);
    let call = actors.open_call(from, DEADLINE).unwrap();
    actors
        .request(from, to, KEY, Bytes::from_static(payload), call, DEADLINE)
        .unwrap();
    call
}

/// Node 1 hosts the caller "a", node 2 the target "b".
fn two() -> (Mesh, NodeRid, NodeRid, ActorRef) {
    let mut mesh = mesh();
    let (one, two) = (mesh.add_node(1), mesh.add_node(2));
    mesh.create(one, "a");
    let b = mesh.create(two, "b");
    (mesh, one, two, b)
}

#[test]
fn core_a_request_across_nodes_ends_once_with_its_reply_as_a_later_message() {
    let (mut mesh, one, two, b) = two();
    let a = actor_id("a");
    let call = request(&mut mesh, one, &a, &b, b"ping");
    // In flight: the sending node keeps it to route its answer.
    assert_eq!(mesh.node(one).core().actor_owner().call_count(), 1);
    mesh.run();
    assert_eq!(
        calls_to(&mesh, "b"),
        vec![(two, "a".to_owned(), Bytes::from_static(b"ping"))]
    );
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Ok(Bytes::from_static(b"ping")))]
    );
    assert_eq!(mesh.node(one).core().actor_owner().call_count(), 0);
    // Later, nothing more: the deadline finds nothing to end.
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
    assert_eq!(mesh.node(one).core().armed_timers(), 0);
}

#[test]
fn core_a_request_without_a_reply_ends_at_its_deadline_never_sooner_and_a_late_reply_is_dropped() {
    let (mut mesh, one, two, b) = two();
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"ping");
    let sent_at = mesh.now();
    mesh.advance(DEADLINE - MICRO);
    assert!(outcomes(&mesh, "a").is_empty(), "ended before its deadline");
    assert_eq!(count(&mesh, one, FlowTrace::RequestDeadlineExceeded), 0);
    mesh.advance(MICRO);
    // It ended at its deadline; the outcome reaches the caller as a message
    // on the node's own path, right after.
    assert_eq!(count(&mesh, one, FlowTrace::RequestDeadlineExceeded), 1);
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Err(error(Reason::Deadline)))]
    );
    assert!(mesh.now() >= sent_at + DEADLINE);
    // The target answers late: dropped and counted, never a second outcome.
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"late")));
    mesh.run();
    assert_eq!(outcomes(&mesh, "a").len(), 1);
    assert_eq!(count(&mesh, one, FlowTrace::LateReplyDropped), 1);
}

/// §12: a request whose link to its target goes down while it is in
/// flight may or may not have run there. It ends at once with
/// `OutcomeUnknown`, not at its deadline; a request to another node is
/// untouched, and a reply that still comes is late.
#[test]
fn core_a_request_in_flight_when_its_link_goes_down_ends_outcome_unknown_at_once() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let c = mesh.create(three, "c");
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    mesh.set_behavior(three, ActorBehavior::Manual);
    let to_b = request(&mut mesh, one, &a, &b, b"to b");
    let to_c = request(&mut mesh, one, &a, &c, b"to c");
    mesh.run();
    let ticket = the_call_ticket(&mesh, two);
    assert!(outcomes(&mesh, "a").is_empty());

    // The link between nodes 1 and 2 goes down, and comes back.
    let at = mesh.now();
    mesh.break_link(one, two);
    assert_eq!(
        count(&mesh, one, FlowTrace::RequestLinkDown),
        1,
        "ended as the link went down"
    );
    mesh.run();
    assert!(mesh.now() < at + DEADLINE, "ended before its deadline");
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, to_b, Err(error(Reason::OutcomeUnknown)))]
    );
    assert_eq!(count(&mesh, one, FlowTrace::RequestLinkDown), 1);

    // The reply the target still sends is late; the request to node 3 ends
    // at its own deadline, and nothing else ends.
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"late")));
    mesh.advance(DEADLINE);
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![
            (one, to_b, Err(error(Reason::OutcomeUnknown))),
            (one, to_c, Err(error(Reason::Deadline))),
        ]
    );
    assert_eq!(count(&mesh, one, FlowTrace::LateReplyDropped), 1);
    assert_eq!(count(&mesh, one, FlowTrace::RequestLinkDown), 1);
}

/// docs/actors.md "From node code": a request of node code outside any
/// Actor goes out as a 70 request and ends once, as
/// `CoreEvent::NodeCallOutcome` on the shard that sent it: with the reply
/// of the node it went to (the same reply from another node ends nothing),
/// `PeerUnreachable` as soon as the transport reports it unsent on the link
/// to that node (a report naming another node ends nothing), or `Deadline`
/// at its deadline, never sooner, counted. Whatever comes after the end is
/// dropped, and no deadline stays armed.
#[test]
fn core_a_request_of_node_code_ends_once_by_its_reply_its_unreachable_report_or_its_deadline() {
    use zlink::core::session::SessionOwnerConfig;
    use zlink::core::shard::ShardCore;
    use zlink::core::time::Instant;
    use zlink::ids::{
        ActorLocation, AuthorityOwnerGeneration, MeshName, NodeGeneration, OwnerLeaseGeneration,
        Peer, RequestId,
    };
    use zlink::wire::node::{ActorReply, ActorSend, NodeRecord};

    fn ended(core: &mut ShardCore) -> Vec<(CallId, Result<Bytes, Error>)> {
        let mut ended = Vec::new();
        while let Some(event) = core.poll_event() {
            if let CoreEvent::NodeCallOutcome { call, outcome } = event {
                ended.push((call, outcome));
            }
        }
        ended
    }
    fn reply(
        core: &mut ShardCore,
        now: Instant,
        rid: u64,
        request: RequestId,
        text: &'static [u8],
    ) {
        let from = Peer {
            rid: NodeRid(rid),
            generation: NodeGeneration(1),
        };
        let reply = ActorReply {
            request,
            outcome: Ok(Bytes::from_static(text)),
        };
        core.handle_record(now, from, NodeRecord::ActorSend(ActorSend::Reply(reply)));
    }

    let t0 = Instant::from_millis(1_000);
    let mut core = one_shard(SessionOwnerConfig::default());
    let to = ActorRef {
        id: actor_id("b"),
        generation: ObjectGeneration(1),
        location: ActorLocation {
            mesh: MeshName::new("sim").unwrap(),
            owner: NodeRid(2),
            node_generation: NodeGeneration(1),
            authority: AuthorityOwnerGeneration(1),
            lease: OwnerLeaseGeneration(1),
        },
    };
    let mut sent = Vec::new();
    for n in 1..=3 {
        core.actors(t0).node_request(
            None,
            &to,
            KEY,
            Bytes::from_static(b"q"),
            CallId(n),
            DEADLINE,
        );
        let transmit = core.poll_transmit().expect("the 70 request");
        assert_eq!(transmit.to, NodeRid(2));
        sent.push(transmit.record.request_id().expect("a request"));
    }
    assert!(ended(&mut core).is_empty());

    // The first ends with its reply, from node 2 only.
    reply(&mut core, t0, 3, sent[0], b"not yours");
    assert!(ended(&mut core).is_empty());
    reply(&mut core, t0, 2, sent[0], b"pong");
    assert_eq!(
        ended(&mut core),
        vec![(CallId(1), Ok(Bytes::from_static(b"pong")))]
    );
    // The second when it is reported unsent on the link to node 2 only.
    core.handle_unreachable(t0, NodeRid(3), sent[1]);
    assert!(ended(&mut core).is_empty());
    core.handle_unreachable(t0, NodeRid(2), sent[1]);
    assert_eq!(
        ended(&mut core),
        vec![(CallId(2), Err(error(Reason::PeerUnreachable)))]
    );
    // The third at its deadline, not a microsecond sooner.
    let due = t0 + DEADLINE;
    core.handle_timeout(Instant::from_micros(due.as_micros() - 1));
    assert!(ended(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::RequestDeadlineExceeded), 0);
    core.handle_timeout(due);
    assert_eq!(
        ended(&mut core),
        vec![(CallId(3), Err(error(Reason::Deadline)))]
    );
    assert_eq!(core.counters().get(FlowTrace::RequestDeadlineExceeded), 1);
    // Nothing after the end: late answers are dropped, nothing is armed.
    reply(&mut core, due, 2, sent[0], b"again");
    reply(&mut core, due, 2, sent[2], b"late");
    core.handle_unreachable(due, NodeRid(2), sent[1]);
    core.handle_timeout(due + DEADLINE * 2);
    assert!(ended(&mut core).is_empty());
    assert_eq!(core.armed_timers(), 0);
}

/// An outcome is never a request: a 70 outcome that carries a request
/// header (it decodes, docs/wire.md) is answered `MalformedRecord` under
/// that header's id, to the node that sent it, and reaches no Actor: the
/// caller's request it names stays open for its own outcome.
#[test]
fn core_an_outcome_carrying_a_request_header_is_answered_malformed_and_delivers_nothing() {
    use zlink::core::session::SessionOwnerConfig;
    use zlink::core::time::Instant;
    use zlink::ids::{
        AuthorityOwnerGeneration, NodeGeneration, OwnerLeaseGeneration, Peer, RequestId,
    };
    use zlink::wire::node::{
        ActorCall, ActorReply, ActorSend, CallBody, NodeRecord, RequestHeader,
    };

    let now = Instant::from_millis(1_000);
    let mut core = one_shard(SessionOwnerConfig::default());
    let a = actor_id("a");
    core.actors(now)
        .host(a.clone(), ObjectGeneration(1), AuthorityOwnerGeneration(1))
        .unwrap();
    let call = core.actors(now).open_call(&a, DEADLINE).unwrap();
    while core.poll_event().is_some() {}
    let header = RequestHeader {
        id: RequestId(RequestId::CALL_BIT | 77),
        budget: DEADLINE,
    };
    let outcome = ActorCall {
        request: Some(header),
        actor: a.clone(),
        object_generation: ObjectGeneration(1),
        authority: AuthorityOwnerGeneration(1),
        lease: OwnerLeaseGeneration(1),
        from: Some(a.clone()),
        body: CallBody::Outcome {
            call,
            outcome: Ok(Bytes::from_static(b"forged")),
        },
    };
    let from = Peer {
        rid: NodeRid(2),
        generation: NodeGeneration(1),
    };
    core.handle_record(now, from, NodeRecord::ActorCall(outcome));
    let answer = core.poll_transmit().expect("an answer to the sender");
    assert_eq!(answer.to, NodeRid(2));
    assert_eq!(
        answer.record,
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            request: header.id,
            outcome: Err(error(Reason::MalformedRecord)),
        }))
    );
    assert!(core.poll_transmit().is_none());
    while let Some(event) = core.poll_event() {
        assert!(
            !matches!(event, CoreEvent::Actor(_)),
            "reached the Actor: {event:?}"
        );
    }
    assert_eq!(core.actor_owner().open_call_count(&a), 1);
}

/// docs/actors.md "Messages between Actors": an Actor's requests are
/// numbered in its own ledger, 1, 2, …, so that two open at once each end
/// with their own outcome, never one taken for the other.
#[test]
fn core_two_requests_open_at_once_are_numbered_apart_and_each_ends_with_its_own_reply() {
    let (mut mesh, one, two, b) = two();
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let first = request(&mut mesh, one, &a, &b, b"first");
    let second = request(&mut mesh, one, &a, &b, b"second");
    assert_eq!((first, second), (CallId(1), CallId(2)));
    mesh.run();
    assert_eq!(mesh.node(one).core().actor_owner().open_call_count(&a), 2);
    let tickets: Vec<_> = mesh
        .node(two)
        .actor_events
        .iter()
        .map(|event| match event {
            ActorEvent::Call {
                payload,
                reply: Some(ticket),
                ..
            } => (payload.clone(), *ticket),
            other => panic!("not a request: {other:?}"),
        })
        .collect();
    // Answered in the other order.
    for (payload, ticket) in tickets.into_iter().rev() {
        mesh.actors(two).reply(ticket, Ok(payload));
    }
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![
            (one, second, Ok(Bytes::from_static(b"second"))),
            (one, first, Ok(Bytes::from_static(b"first"))),
        ]
    );
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 2);
    assert_eq!(mesh.node(one).core().actor_owner().open_call_count(&a), 0);
}

/// open_calls.rs: a relocation freezes the caller's open requests at
/// capture; when the move aborts, each deadline is armed again with the
/// time it had left, so a request that gets no answer still ends
/// `Deadline` on the caller's node, late by the move's pause at most.
#[test]
fn core_a_request_frozen_for_an_aborted_move_still_ends_at_its_deadline() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"q");
    let sent_at = mesh.now();
    mesh.run();
    mesh.set_restore(three, RestoreBehavior::Hold);
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    mesh.finish_restore(three, Err(error(Reason::NoActorFactory)));
    mesh.run();
    assert!(mesh.node(one).core().actor_owner().actor_ref(&a).is_some());
    assert!(outcomes(&mesh, "a").is_empty());
    mesh.advance(DEADLINE * 2);
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Err(error(Reason::Deadline)))]
    );
    assert!(mesh.now() >= sent_at + DEADLINE);
    assert_eq!(mesh.node(one).core().actor_owner().open_call_count(&a), 0);
}

/// docs/actors.md "Messages between Actors": an outcome is addressed to
/// the incarnation that made the request. When the caller was destroyed and
/// a new incarnation hosted in its place, the old request's reply reaches
/// no one (refused as another incarnation's, counted), even when the new
/// incarnation has a request open under the same number: that one ends
/// with its own reply.
#[test]
fn core_a_reply_to_a_replaced_incarnations_request_never_reaches_the_new_incarnation() {
    let mut mesh = mesh();
    let (one, two) = (mesh.add_node(1), mesh.add_node(2));
    let b = mesh.create(two, "b");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let a = actor_id("a");
    mesh.host_generation(one, "a", 1);
    let old = request(&mut mesh, one, &a, &b, b"old");
    mesh.run();
    mesh.destroy(one, &a).unwrap();
    mesh.host_generation(one, "a", 2);
    let new = request(&mut mesh, one, &a, &b, b"new");
    assert_eq!(old, new, "each ledger numbers from 1");
    mesh.run();
    let tickets: Vec<_> = mesh
        .node(two)
        .actor_events
        .iter()
        .map(|event| match event {
            ActorEvent::Call {
                payload,
                reply: Some(ticket),
                ..
            } => (payload.clone(), *ticket),
            other => panic!("not a request: {other:?}"),
        })
        .collect();
    let refused_before = count(&mesh, one, FlowTrace::OneWayRecordRefused);
    for (payload, ticket) in tickets {
        let mut answer = payload.to_vec();
        answer.extend_from_slice(b" answered");
        mesh.actors(two).reply(ticket, Ok(Bytes::from(answer)));
        mesh.run();
    }
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, new, Ok(Bytes::from_static(b"new answered")))]
    );
    assert_eq!(
        count(&mesh, one, FlowTrace::OneWayRecordRefused),
        refused_before + 1
    );
}

/// docs/actors.md "Messages between Actors": the outcome of a request
/// whose caller moved away and back since it was made is addressed to the
/// caller as it is now (its authority moved on twice), so it is delivered,
/// not refused as stale: the request ends with its reply, once.
#[test]
fn core_the_reply_to_a_caller_that_moved_away_and_back_is_delivered_to_it() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"q");
    mesh.run();
    let before = mesh.node(one).core().actor_owner().actor_ref(&a).unwrap();
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    mesh.relocations(three).relocate(&a, one).unwrap();
    mesh.run();
    let after = mesh.node(one).core().actor_owner().actor_ref(&a).unwrap();
    assert_eq!(after.generation, before.generation);
    assert_ne!(after.location.authority, before.location.authority);
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Ok(Bytes::from_static(b"answer")))]
    );
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
}

/// open_calls.rs and relocation/target.rs, found by the simulator (seed
/// 16527): a move whose relay-ready (61) is lost commits at the target by
/// its cutover fallback, and the source hands over only when the store
/// tells it the target's CAS won; the outcome it held meanwhile reaches the
/// target (62) after the commit. It closes the request in the ledger the
/// target hosts: the caller gets its reply there, once, nothing is counted
/// late, and the request's deadline then finds nothing open.
#[test]
fn core_an_outcome_held_past_the_callers_commit_ends_the_request_once_at_the_target() {
    use zlink::wire::node::Command;

    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    // A deadline far past the move's fallback and prepare timeout.
    let deadline = Duration::from_secs(30);
    let call = mesh.actors(one).open_call(&a, deadline).unwrap();
    mesh.actors(one)
        .request(&a, &b, KEY, Bytes::from_static(b"q"), call, deadline)
        .unwrap();
    mesh.run();
    let ticket = the_call_ticket(&mesh, two);
    mesh.set_dropping(three, one, Command::RelocationReady, true);
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    // Node 1 holds nothing yet for the move (a metrics scrape reads it).
    assert_eq!(mesh.node(one).core().held_messages(), (0, 0));
    // The answer reaches node 1 while it holds the captured caller.
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.run();
    assert!(
        outcomes(&mesh, "a").is_empty(),
        "delivered to a captured caller"
    );
    assert_eq!(mesh.node(one).core().held_messages(), (0, 1));
    // Node 3 commits at its fallback; node 1 learns it from the store.
    mesh.advance(Duration::from_secs(3));
    assert_eq!(count(&mesh, three, FlowTrace::CutoverTimeout), 1);
    assert!(!mesh.node(one).core().relocation().is_relocating(&a));
    assert_eq!(mesh.node(one).core().held_messages(), (0, 0));
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(three, call, Ok(Bytes::from_static(b"answer")))]
    );
    assert_eq!(count(&mesh, three, FlowTrace::LateReplyDropped), 0);
    mesh.advance(deadline * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
    assert_eq!(mesh.node(three).core().actor_owner().open_call_count(&a), 0);
}

/// open_calls.rs: a destroyed Actor's open requests end with it, their
/// deadlines too: none fires on a new incarnation, even on a request it
/// opened under the same number (each ledger numbers anew), which ends at
/// its own deadline, not the old one's.
#[test]
fn core_a_destroyed_callers_deadline_never_ends_the_same_numbered_request_of_the_next() {
    let mut mesh = mesh();
    let (one, two) = (mesh.add_node(1), mesh.add_node(2));
    let b = mesh.create(two, "b");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let a = actor_id("a");
    mesh.create(one, "a");
    let old = request(&mut mesh, one, &a, &b, b"old");
    mesh.run();
    mesh.destroy(one, &a).unwrap();
    mesh.advance(DEADLINE / 2);
    mesh.create(one, "a");
    let opened = mesh.now();
    let new = request(&mut mesh, one, &a, &b, b"new");
    assert_eq!(old, new, "each ledger numbers from 1");
    mesh.advance(DEADLINE - MICRO);
    assert_eq!(outcomes(&mesh, "a"), vec![], "ended before its deadline");
    mesh.advance(DEADLINE);
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, new, Err(error(Reason::Deadline)))]
    );
    assert!(mesh.now() >= opened + DEADLINE);
}

/// §5: a fenced Actor owner runs no more turns. A request its Actor made
/// before the fence ends nothing at its deadline there: no `Deadline`
/// outcome reaches the caller, none is counted.
#[test]
fn core_a_request_open_when_its_callers_owner_fences_ends_nothing_at_its_deadline() {
    let (mut mesh, one, two, b) = two();
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    request(&mut mesh, one, &a, &b, b"ping");
    mesh.actors(one).fence();
    mesh.advance(DEADLINE * 2);
    mesh.run();
    assert_eq!(outcomes(&mesh, "a"), vec![]);
    assert_eq!(count(&mesh, one, FlowTrace::RequestDeadlineExceeded), 0);
}

#[test]
fn core_a3_a_call_to_a_stale_route_is_refused_typed_or_counted_never_silent() {
    let (mut mesh, one, two, b) = two();
    let a = actor_id("a");
    // The target is destroyed; the caller still holds its old route.
    mesh.destroy(two, &b.id).unwrap();
    let call = request(&mut mesh, one, &a, &b, b"r");
    mesh.actors(one)
        .send(Some(&a), &b, KEY, Bytes::from_static(b"one-way"));
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Err(error(Reason::StaleLocation)))]
    );
    assert_eq!(count(&mesh, two, FlowTrace::OneWayRecordRefused), 1);
    assert!(calls_to(&mesh, "b").is_empty());
}

#[test]
fn core_a3_one_way_messages_between_two_actors_keep_their_order() {
    let (mut mesh, one, _, b) = two();
    let a = actor_id("a");
    for n in 0..20u8 {
        mesh.actors(one)
            .send(Some(&a), &b, KEY, Bytes::from(vec![n]));
    }
    mesh.run();
    let got: Vec<u8> = calls_to(&mesh, "b").iter().map(|c| c.2[0]).collect();
    assert_eq!(got, (0..20).collect::<Vec<_>>());
}

#[test]
fn core_a1_a_request_whose_target_moved_ends_once_at_the_moved_target() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    // The target moves; the caller still holds the route from before.
    mesh.relocations(two).relocate(&b.id, three).unwrap();
    mesh.run();
    let call = request(&mut mesh, one, &a, &b, b"after-move");
    mesh.run();
    // Message Follow took it on, once; the reply came back through the
    // source to the caller, once.
    assert_eq!(
        calls_to(&mesh, "b"),
        vec![(three, "a".to_owned(), Bytes::from_static(b"after-move"))]
    );
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Ok(Bytes::from_static(b"after-move")))]
    );
    assert_eq!(count(&mesh, two, FlowTrace::MessageFollowed), 1);
}

/// §12 across a Message Follow: the source re-issued the request to the
/// node the target moved to, and the link between those two goes down
/// while it is in flight there. The source ends it at once with
/// `OutcomeUnknown`, which reaches the caller, and keeps no proxy.
#[test]
fn core_a1_a_request_followed_to_the_moved_target_ends_outcome_unknown_when_that_link_goes_down() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.relocations(two).relocate(&b.id, three).unwrap();
    mesh.run();
    mesh.set_behavior(three, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"after-move");
    mesh.run();
    assert_eq!(count(&mesh, two, FlowTrace::MessageFollowed), 1);
    assert_eq!(mesh.node(two).core().relocation().proxy_count(), 1);
    let at = mesh.now();
    mesh.break_link(two, three);
    assert_eq!(count(&mesh, two, FlowTrace::RequestLinkDown), 1);
    assert_eq!(mesh.node(two).core().relocation().proxy_count(), 0);
    mesh.run();
    assert!(mesh.now() < at + DEADLINE, "ended before its deadline");
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Err(error(Reason::OutcomeUnknown)))]
    );
    // The moved target's late reply ends nothing more.
    let ticket = the_call_ticket(&mesh, three);
    mesh.actors(three)
        .reply(ticket, Ok(Bytes::from_static(b"late")));
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
}

#[test]
fn core_a2_the_outcome_follows_a_caller_that_moved_before_its_reply() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"q");
    mesh.run();
    // The caller moves to node 3 while its request waits.
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    assert!(mesh
        .node(three)
        .core()
        .actor_owner()
        .actor_ref(&a)
        .is_some());
    // The target answers now.
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.run();
    // The outcome is a message of the caller: node 1 addressed it, its
    // Message Follow took it to node 3, where the caller got it, once.
    let got = outcomes(&mesh, "a");
    assert_eq!(
        got.iter()
            .filter(|o| o.0 == three)
            .cloned()
            .collect::<Vec<_>>(),
        vec![(three, call, Ok(Bytes::from_static(b"answer")))]
    );
    assert!(got.iter().all(|o| o.0 == three), "{got:?}");
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
}

/// Found by tests/rt_calls.rs under load: a turn's request waits after
/// the turn for its target's route (the runtime resolves it through the
/// store), and the caller moved away meanwhile. The request still goes out,
/// from the node the turn ran on, as the caller was then, and its outcome
/// follows the caller to its ledger, once — it was refused as if the
/// caller were gone, and the ledger ended it `Deadline` 2 s later.
#[test]
fn core_a2_a_request_routed_after_its_caller_moved_still_goes_out_and_its_outcome_follows() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    // The turn opens the request; its route is not resolved yet.
    let as_it_was = mesh.node(one).core().actor_owner().actor_ref(&a).unwrap();
    let call = mesh.actors(one).open_call(&a, DEADLINE).unwrap();
    // The caller moves to node 3 meanwhile.
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    assert!(mesh.node(one).core().actor_owner().actor_ref(&a).is_none());
    // The route is resolved: the request goes out from node 1.
    mesh.actors(one)
        .request_as(
            &as_it_was,
            &b,
            KEY,
            Bytes::from_static(b"late"),
            call,
            DEADLINE,
        )
        .unwrap();
    mesh.run();
    assert_eq!(
        calls_to(&mesh, "b"),
        vec![(two, "a".to_owned(), Bytes::from_static(b"late"))]
    );
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(three, call, Ok(Bytes::from_static(b"answer")))]
    );
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1, "ended once");
}

/// The same, when the route cannot be resolved: the typed error reaches
/// the caller where it moved, at once, not its deadline.
#[test]
fn core_a2_a_request_that_could_not_be_routed_after_its_caller_moved_ends_with_its_error() {
    let (mut mesh, one, _, _) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    let as_it_was = mesh.node(one).core().actor_owner().actor_ref(&a).unwrap();
    let call = mesh.actors(one).open_call(&a, DEADLINE).unwrap();
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    let unavailable = Error::new(Reason::StoreUnavailable);
    mesh.actors(one)
        .call_failed(&as_it_was, call, unavailable.clone());
    mesh.run();
    assert_eq!(outcomes(&mesh, "a"), vec![(three, call, Err(unavailable))]);
}

/// A turn's request routed after the turn goes out as its caller was —
/// unless another incarnation of the caller is hosted here now (lost and
/// replaced, L6): the old incarnation's ledger ended with it, so the
/// request is refused `StaleLocation` and sends nothing, and a failure to
/// route it reaches no one, least of all the new incarnation.
#[test]
fn core_a2_a_request_of_a_replaced_incarnation_is_refused_and_its_failure_reaches_no_one() {
    let mut mesh = mesh();
    let (one, two) = (mesh.add_node(1), mesh.add_node(2));
    let b = mesh.create(two, "b");
    let a = actor_id("a");
    let current = mesh.host_generation(one, "a", 2);
    let mut replaced = current.clone();
    replaced.generation = ObjectGeneration(1);
    let call = mesh.actors(one).open_call(&a, DEADLINE).unwrap();
    let refused = mesh.actors(one).request_as(
        &replaced,
        &b,
        KEY,
        Bytes::from_static(b"old"),
        call,
        DEADLINE,
    );
    assert_eq!(refused.map_err(|e| e.reason()), Err(Reason::StaleLocation));
    mesh.actors(one)
        .call_failed(&replaced, call, Error::new(Reason::StoreUnavailable));
    assert_eq!(count(&mesh, one, FlowTrace::OneWayRecordRefused), 1);
    // The current incarnation's request under the same number goes out:
    // once it has arrived, the refused one would have too.
    mesh.actors(one)
        .request_as(
            &current,
            &b,
            KEY,
            Bytes::from_static(b"new"),
            call,
            DEADLINE,
        )
        .unwrap();
    mesh.run();
    assert_eq!(
        calls_to(&mesh, "b"),
        vec![(two, "a".to_owned(), Bytes::from_static(b"new"))]
    );
    // b echoes: the one outcome is that reply's, none the failure's.
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(one, call, Ok(Bytes::from_static(b"new")))]
    );
}

/// Found by the simulator (seed 506): the caller moved away while its
/// request waited, and the node that had sent the request then died with
/// the request's routing state. The caller's own ledger moved with it, so
/// the request still ends, once, at its deadline (late by the move's pause
/// at most, never sooner), where the caller now is; the target's late
/// answer finds nobody waiting and changes nothing.
#[test]
fn core_a2_a_caller_that_moved_gets_its_deadline_though_the_node_that_sent_the_request_died() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let sent_at = mesh.now();
    let call = request(&mut mesh, one, &a, &b, b"q");
    mesh.run();
    // The caller moves to node 3 while its request waits,
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    let moved = mesh.node(three).core().actor_owner();
    assert!(moved.actor_ref(&a).is_some());
    assert_eq!(moved.open_call_count(&a), 1, "the ledger moved with it");
    // and the node that sent the request dies before any answer.
    mesh.restart(one);
    let due = sent_at + DEADLINE;
    mesh.advance(due.saturating_duration_since(mesh.now()) - MICRO);
    assert!(outcomes(&mesh, "a").is_empty(), "ended before its deadline");
    mesh.advance(Duration::from_secs(1));
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(three, call, Err(error(Reason::Deadline)))]
    );
    // The target answers late: nobody waits for it; no second outcome.
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"late")));
    mesh.run();
    mesh.advance(DEADLINE);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
    assert_eq!(mesh.node(three).core().actor_owner().open_call_count(&a), 0);
}

/// Found by the simulator (seed 18899, the first 20,000-seed run with
/// nodes paused past their lease, issue 19 item 5): the caller's outcome
/// reached its old node after the capture and before the 60 left (the
/// seal of its binding still under way), so the ingress hold took it and
/// the ledger the 60 carried no longer had the request. The old node then
/// died before relay-ready's 62 could carry the outcome on: the caller,
/// alive at the target, waited for its request for ever. A request whose
/// outcome waits in the ingress hold travels in the 60 still open; the
/// target closes it when the outcome arrives, or ends it at its deadline.
#[test]
fn core_a2_an_outcome_held_before_the_60_left_still_ends_the_request_if_the_source_dies() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    // The caller is bound to a session of node 2, so its move seals first.
    let a_ref = mesh.node(one).core().actor_owner().actor_ref(&a).unwrap();
    let session = mesh.connect(two);
    mesh.bind(two, session, &a_ref).unwrap();
    let call = request(&mut mesh, one, &a, &b, b"q");
    mesh.run();
    // The answer leaves, and just after it the caller is captured for a
    // move to node 3: the answer reaches node 1 after the capture and
    // before the seal's 43, so before the 60 leaves.
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.advance(MICRO);
    mesh.relocations(one).relocate(&a, three).unwrap();
    // The 60 reaches node 3, which answers relay-ready; node 1 dies first.
    mesh.advance(LATENCY * 3);
    assert!(mesh.node(three).core().relocation().is_arriving(&a));
    mesh.restart(one);
    // Node 3 takes the Actor on its own (the cutover fallback, its CAS).
    mesh.advance(Duration::from_secs(2));
    assert!(mesh
        .node(three)
        .core()
        .actor_owner()
        .actor_ref(&a)
        .is_some());
    // The request ends, once: at its deadline (its answer died with node 1).
    mesh.advance(DEADLINE * 2);
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(three, call, Err(error(Reason::Deadline)))]
    );
    assert_eq!(mesh.node(three).core().actor_owner().open_call_count(&a), 0);
}

/// Found by the simulator (seed 26): the caller's outcome reached its old
/// node while the caller was mid-move, after the 60 had carried its ledger
/// with the request still open. The outcome went to the target in the
/// ingress hold; the ledger the target hosts must count it as closed, or
/// the request ends twice — its reply, then its deadline.
#[test]
fn core_a2_an_outcome_held_during_the_callers_move_ends_the_request_once() {
    let (mut mesh, one, two, b) = two();
    let three = mesh.add_node(3);
    let a = actor_id("a");
    mesh.set_behavior(two, ActorBehavior::Manual);
    let call = request(&mut mesh, one, &a, &b, b"q");
    mesh.run();
    // The caller's move waits at the target's restore: the 60 has left,
    mesh.set_restore(three, RestoreBehavior::Hold);
    mesh.relocations(one).relocate(&a, three).unwrap();
    mesh.run();
    // and the answer comes now, to the caller's old node, which holds it.
    let ticket = the_call_ticket(&mesh, two);
    mesh.actors(two)
        .reply(ticket, Ok(Bytes::from_static(b"answer")));
    mesh.run();
    assert!(
        outcomes(&mesh, "a").is_empty(),
        "delivered to a captured caller"
    );
    mesh.finish_restore(three, Ok(()));
    mesh.run();
    assert_eq!(
        outcomes(&mesh, "a"),
        vec![(three, call, Ok(Bytes::from_static(b"answer")))]
    );
    // Its deadline then finds nothing open: no second outcome.
    mesh.advance(DEADLINE * 2);
    assert_eq!(outcomes(&mesh, "a").len(), 1);
    assert_eq!(mesh.node(three).core().actor_owner().open_call_count(&a), 0);
}
