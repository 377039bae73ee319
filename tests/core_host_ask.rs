//! BindOrGet asked of the node that owns the Actor's row (command 71;
//! src/core/host_ask.rs, docs/store.md "A login on another node"): one ask
//! to the row's owner, ended exactly once — by that owner's answer, by the
//! bind timeout (never sooner), or by a missing link — and an asked node
//! answers only the lifecycle that asked (§4, §8.1).

mod common;

use std::time::Duration;

use common::one_shard;
use zlink::core::host_ask::HostEvent;
use zlink::core::session::SessionOwnerConfig;
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::{Error, Reason};
use zlink::ids::{
    ActorLocation, ActorRef, ActorTypeName, AuthorityOwnerGeneration, MeshName, NodeGeneration,
    NodeRid, ObjectGeneration, OwnerLeaseGeneration, Peer, RequestId,
};
use zlink::sim::actor_id;
use zlink::wire::node::{ActorHost, HostAnswer, HostAsk, NodeRecord};

const NOW: Instant = Instant::ZERO;
const OWNER: Peer = Peer {
    rid: NodeRid(2),
    generation: NodeGeneration(7),
};
const THIRD: Peer = Peer {
    rid: NodeRid(3),
    generation: NodeGeneration(1),
};

fn row(generation: u64, authority: u64) -> ActorRef {
    ActorRef {
        id: actor_id("player-1"),
        generation: ObjectGeneration(generation),
        location: ActorLocation {
            mesh: MeshName::new("sim").unwrap(),
            owner: OWNER.rid,
            node_generation: OWNER.generation,
            authority: AuthorityOwnerGeneration(authority),
            lease: OwnerLeaseGeneration(1),
        },
    }
}

fn player() -> ActorTypeName {
    ActorTypeName::new("player").unwrap()
}

/// The asking shard's bind timeout: not the default, so that an ask's
/// budget and deadline are seen to come from the shard's own settings.
const BIND_TIMEOUT: Duration = Duration::from_millis(1_500);

fn settings() -> SessionOwnerConfig {
    let settings = SessionOwnerConfig {
        bind_timeout: BIND_TIMEOUT,
        ..SessionOwnerConfig::default()
    };
    assert_ne!(BIND_TIMEOUT, SessionOwnerConfig::default().bind_timeout);
    settings
}

/// A shard that asked the row's owner about `player-1`: its ask as sent.
fn asking() -> (ShardCore, HostAsk) {
    let mut core = one_shard(settings());
    core.ask_owner(NOW, player(), &row(3, 5));
    let sent = core.poll_transmit().expect("the ask went out");
    assert_eq!(sent.to, OWNER.rid);
    assert!(core.poll_transmit().is_none(), "one ask");
    let NodeRecord::ActorHost(ActorHost::Ask(ask)) = sent.record else {
        panic!("not an ask: {:?}", sent.record);
    };
    assert_eq!(core.counters().get(FlowTrace::HostAsked), 1);
    (core, ask)
}

fn answer(request: RequestId, outcome: Result<ActorRef, Error>) -> NodeRecord {
    NodeRecord::ActorHost(ActorHost::Answer(HostAnswer { request, outcome }))
}

/// Every outcome the core handed the shard so far.
fn answered(core: &mut ShardCore) -> Vec<Result<ActorRef, Reason>> {
    let mut seen = Vec::new();
    while let Some(event) = core.poll_event() {
        match event {
            CoreEvent::Host(HostEvent::Answered { actor, outcome }) => {
                assert_eq!(actor, actor_id("player-1"));
                seen.push(outcome.map_err(|e| e.reason()));
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    seen
}

#[test]
fn core_host_ask_goes_to_the_rows_owner_and_its_answer_ends_it_once() {
    let (mut core, ask) = asking();
    assert_eq!(ask.actor, actor_id("player-1"));
    assert_eq!(ask.actor_type, player());
    // The Get half of a BindOrGet takes no longer than its bind may.
    assert_eq!(ask.request.budget, BIND_TIMEOUT);
    assert!(ask.request.id.is_host(), "{:?}", ask.request.id);
    // The owner replaced a lost incarnation: the new one is the outcome.
    let replaced = row(4, 6);
    let later = NOW + Duration::from_millis(3);
    core.handle_record(later, OWNER, answer(ask.request.id, Ok(replaced.clone())));
    assert_eq!(answered(&mut core), vec![Ok(replaced.clone())]);
    assert_eq!(core.armed_timers(), 0, "the deadline went with the ask");
    // The same answer again is late: dropped and counted, nothing more.
    core.handle_record(later, OWNER, answer(ask.request.id, Ok(replaced)));
    assert!(answered(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::LateHostAnswerDropped), 1);
}

#[test]
fn core_host_ask_ends_at_the_bind_timeout_never_sooner() {
    let (mut core, ask) = asking();
    let timeout = BIND_TIMEOUT;
    core.handle_timeout(NOW + (timeout - Duration::from_millis(1)));
    assert!(
        answered(&mut core).is_empty(),
        "not before the bind timeout"
    );
    core.handle_timeout(NOW + timeout);
    assert_eq!(answered(&mut core), vec![Err(Reason::Deadline)]);
    // An answer after the deadline is late.
    core.handle_record(NOW + timeout, OWNER, answer(ask.request.id, Ok(row(3, 5))));
    assert!(answered(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::LateHostAnswerDropped), 1);
}

#[test]
fn core_host_ask_each_ask_has_its_own_id_and_its_answer_ends_that_ask_only() {
    let (mut core, first) = asking();
    let mut other = row(2, 2);
    other.id = actor_id("player-2");
    core.ask_owner(NOW, player(), &other);
    let sent = core.poll_transmit().expect("the second ask went out");
    let NodeRecord::ActorHost(ActorHost::Ask(second)) = sent.record else {
        panic!("not an ask: {:?}", sent.record);
    };
    assert_eq!(second.actor, other.id);
    assert!(second.request.id.is_host(), "{:?}", second.request.id);
    assert_ne!(second.request.id, first.request.id);
    assert_eq!(core.armed_timers(), 2, "a deadline for each");
    // The second's answer ends the second; the first still waits.
    core.handle_record(NOW, OWNER, answer(second.request.id, Ok(other.clone())));
    assert_eq!(
        core.poll_event(),
        Some(CoreEvent::Host(HostEvent::Answered {
            actor: other.id.clone(),
            outcome: Ok(other),
        }))
    );
    assert_eq!(core.poll_event(), None);
    assert_eq!(core.armed_timers(), 1);
    core.handle_record(NOW, OWNER, answer(first.request.id, Ok(row(3, 5))));
    assert_eq!(answered(&mut core), vec![Ok(row(3, 5))]);
    assert_eq!(core.armed_timers(), 0);
    assert_eq!(core.counters().get(FlowTrace::LateHostAnswerDropped), 0);
}

#[test]
fn core_host_ask_takes_only_the_asked_nodes_answer() {
    let (mut core, ask) = asking();
    core.handle_record(NOW, THIRD, answer(ask.request.id, Ok(row(3, 5))));
    assert!(answered(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::LateHostAnswerDropped), 1);
    // The owner's answer still ends it; one naming another Actor is
    // malformed, not taken.
    let mut other = row(3, 5);
    other.id = actor_id("player-2");
    core.handle_record(NOW, OWNER, answer(ask.request.id, Ok(other)));
    assert_eq!(answered(&mut core), vec![Err(Reason::MalformedRecord)]);
}

#[test]
fn core_host_ask_with_no_link_to_the_owner_ends_peer_unreachable() {
    let (mut core, ask) = asking();
    // Not an ask to that node: nothing ends.
    core.handle_unreachable(NOW, THIRD.rid, ask.request.id);
    assert!(answered(&mut core).is_empty());
    core.handle_unreachable(NOW, OWNER.rid, ask.request.id);
    assert_eq!(answered(&mut core), vec![Err(Reason::PeerUnreachable)]);
    assert_eq!(core.armed_timers(), 0);
}

#[test]
fn core_host_ask_at_the_asked_node_is_answered_to_that_lifecycle_only() {
    let mut core = one_shard(SessionOwnerConfig::default());
    let request = RequestId::host_origin(zlink::ids::SessionOwnerId(0));
    let ask = HostAsk {
        request: zlink::wire::node::RequestHeader {
            id: request,
            budget: Duration::from_secs(5),
        },
        actor: actor_id("player-1"),
        actor_type: player(),
    };
    core.handle_record(NOW, THIRD, NodeRecord::ActorHost(ActorHost::Ask(ask)));
    assert_eq!(
        core.poll_event(),
        Some(CoreEvent::Host(HostEvent::Asked {
            from: THIRD,
            request,
            actor: actor_id("player-1"),
            actor_type: player(),
        }))
    );
    let served = row(3, 5);
    core.answer_host_ask(NOW, THIRD, request, Ok(served.clone()));
    let sent = core.poll_transmit().expect("the answer went out");
    assert_eq!(
        (sent.to, sent.lifecycle),
        (THIRD.rid, Some(THIRD.generation))
    );
    assert_eq!(sent.record, answer(request, Ok(served)));
}

/// Through the simulator, which runs the ask as the runtime does: a
/// BindOrGet on a node that does not own the row asks the owner (one 71
/// each way) and takes its answer, the hosted Actor; nothing is created
/// on the asker, and the owner never asks on.
#[test]
fn core_host_ask_a_bind_or_get_on_another_node_is_the_owners_answer() {
    let mut mesh = common::mesh();
    let (one, two) = (mesh.add_node(1), mesh.add_node(2));
    let hosted = mesh.create(one, "player-1");
    let got = mesh.host_or_get(two, &actor_id("player-1")).unwrap();
    assert_eq!(got, hosted);
    let asker = mesh.node(two).core().counters().get(FlowTrace::HostAsked);
    assert_eq!(asker, 1);
    assert!(mesh
        .node(two)
        .core()
        .actor_owner()
        .actor_ref(&got.id)
        .is_none());
    assert_eq!(
        mesh.node(one).core().counters().get(FlowTrace::HostAsked),
        0
    );
}
