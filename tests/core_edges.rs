//! The deadlines the runtime used to keep on its own clock, now on the
//! shard core's one timer wheel (issue 19 item 2; docs/core.md "Rules that
//! moved into the core"): the client frame deadline, the §10 drain
//! deadline and the §6 admission of a 51 to a full link. Virtual time: each
//! fires at its deadline, never a microsecond sooner.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::replaced_notice;
use zlink::core::admission::{LinkAdmission, LinkRoom};
use zlink::core::session::{SessionEvent, SessionOwnerConfig};
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::{CoreEvent, Transmit};
use zlink::error::Reason;
use zlink::ids::{
    ActorLocation, ActorRef, AuthorityOwnerGeneration, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, SessionRid,
};
use zlink::sim::actor_id;
use zlink::wire::client::CloseReason;
use zlink::wire::node::NodeRecord;

const FRAME_DEADLINE: Duration = Duration::from_millis(10_000);
const SEND_TIMEOUT: Duration = Duration::from_millis(3_000);
const JUST: Duration = Duration::from_micros(1);

/// One shard core of node 1; its send timeout is [`SEND_TIMEOUT`].
fn shard() -> ShardCore {
    common::one_shard(SessionOwnerConfig {
        client_frame_deadline: FRAME_DEADLINE,
        ..SessionOwnerConfig::default()
    })
}

/// The sessions the core asked to close since the last call, with why.
fn closes(core: &mut ShardCore) -> Vec<(SessionRid, CloseReason)> {
    let mut closes = Vec::new();
    while let Some(event) = core.poll_event() {
        if let CoreEvent::Session(SessionEvent::Close { session, reason }) = event {
            closes.push((session, reason));
        }
    }
    closes
}

#[test]
fn core_a_begun_client_frame_not_whole_by_its_deadline_closes_the_session_never_sooner() {
    let mut core = shard();
    let t0 = Instant::from_millis(1_000);
    let slow = core.sessions(t0).open_session();
    let prompt = core.sessions(t0).open_session();
    core.sessions(t0).frame_begun(slow);
    core.sessions(t0).frame_begun(prompt);
    // More bytes of the same frame do not move the deadline: it counts from
    // the first read that left a frame unfinished.
    core.sessions(t0 + Duration::from_secs(5)).frame_begun(slow);
    // The prompt writer's frame arrives whole: its deadline is gone.
    core.sessions(t0 + Duration::from_secs(6))
        .frame_whole(prompt);
    assert_eq!(core.poll_timeout(), Some(t0 + FRAME_DEADLINE));

    core.handle_timeout(t0 + (FRAME_DEADLINE - JUST));
    assert!(closes(&mut core).is_empty(), "closed before its deadline");
    assert_eq!(core.counters().get(FlowTrace::ClientFrameTimeout), 0);

    core.handle_timeout(t0 + FRAME_DEADLINE);
    assert_eq!(closes(&mut core), vec![(slow, CloseReason::ProtocolError)]);
    assert_eq!(core.counters().get(FlowTrace::ClientFrameTimeout), 1);
    assert!(core.session_owner().is_open(prompt));
    assert!(!core.session_owner().is_open(slow));
    // A closed session arms nothing more.
    core.sessions(t0 + FRAME_DEADLINE).frame_begun(slow);
    core.handle_timeout(t0 + 3 * FRAME_DEADLINE);
    assert!(closes(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::ClientFrameTimeout), 1);
}

#[test]
fn core_a_session_closed_for_another_reason_has_no_frame_deadline_left() {
    let mut core = shard();
    let s = core.sessions(Instant::ZERO).open_session();
    core.sessions(Instant::ZERO).frame_begun(s);
    core.sessions(Instant::ZERO).connection_lost(s);
    core.handle_timeout(Instant::ZERO + 2 * FRAME_DEADLINE);
    assert!(closes(&mut core).is_empty());
    assert_eq!(core.counters().get(FlowTrace::ClientFrameTimeout), 0);
}

#[test]
fn core_drain_refuses_binds_at_once_and_closes_every_session_at_its_deadline_never_sooner() {
    let mut core = shard();
    let t0 = Instant::from_millis(500);
    let drain = Duration::from_secs(2);
    let deadline = t0 + drain;
    let s1 = core.sessions(t0).open_session();
    let s2 = core.sessions(t0).open_session();
    core.sessions(t0).drain(deadline);
    // A second drain does not move the deadline.
    core.sessions(t0).drain(deadline + Duration::from_secs(60));
    let actor = ActorRef {
        id: actor_id("a"),
        generation: ObjectGeneration(1),
        location: ActorLocation {
            mesh: MeshName::new("sim").unwrap(),
            owner: NodeRid(2),
            node_generation: NodeGeneration(1),
            authority: AuthorityOwnerGeneration(1),
            lease: OwnerLeaseGeneration(1),
        },
    };
    let refused = core.sessions(t0).bind(s1, actor).map(|_| ()).unwrap_err();
    assert_eq!(refused.reason(), Reason::ShuttingDown);

    core.handle_timeout(t0 + (drain - JUST));
    assert!(
        closes(&mut core).is_empty(),
        "closed before the drain deadline"
    );
    core.handle_timeout(deadline);
    assert_eq!(
        closes(&mut core),
        vec![(s1, CloseReason::Shutdown), (s2, CloseReason::Shutdown)]
    );
}

#[test]
fn core_a_51_waiting_for_a_full_link_ends_on_the_wheel_at_the_send_timeout_never_sooner() {
    let mut core = shard();
    let t0 = Instant::from_millis(2_000);
    // A link with room takes the 51 at once, and nothing waits for it; a
    // full one keeps it.
    assert!(core
        .offer_transmit(t0, replaced_notice(2, 1), LinkRoom::Room)
        .is_some());
    assert_eq!(core.poll_timeout(), None, "a 51 sent at once has no timer");
    assert!(core
        .offer_transmit(t0, replaced_notice(3, 1), LinkRoom::Full)
        .is_none());
    // Its send timeout is the core's next deadline: the loop waits on the
    // wheel, with nothing to poll.
    assert_eq!(core.poll_timeout(), Some(t0 + SEND_TIMEOUT));
    // Another full link's 51, admitted before its timeout, goes out once.
    let t1 = t0 + Duration::from_millis(10);
    assert!(core
        .offer_transmit(t1, replaced_notice(4, 1), LinkRoom::Full)
        .is_none());
    assert_eq!(
        core.admit_waiting(|peer| peer == NodeRid(4)),
        vec![replaced_notice(4, 1)]
    );

    core.handle_timeout(t0 + (SEND_TIMEOUT - JUST));
    let exceeded = FlowTrace::ReplacedNoticeDeadlineExceeded;
    assert_eq!(core.counters().get(exceeded), 0, "ended before its timeout");
    core.handle_timeout(t0 + SEND_TIMEOUT);
    assert_eq!(core.counters().get(exceeded), 1);
    // Ended means never sent: a link with room later admits nothing.
    assert!(core.admit_waiting(|_| true).is_empty());
    // The admitted one's timer finds nothing to end.
    core.handle_timeout(t1 + SEND_TIMEOUT);
    assert_eq!(core.counters().get(exceeded), 1);
    assert_eq!(core.armed_timers(), 0);
    // Any other record goes out at once, even to a full link.
    let relay = Transmit {
        record: NodeRecord::ActorSend(zlink::wire::node::ActorSend::Reply(
            zlink::wire::node::ActorReply {
                request: zlink::ids::RequestId(1),
                outcome: Ok(Bytes::new()),
            },
        )),
        ..replaced_notice(3, 1)
    };
    assert_eq!(
        core.offer_transmit(t1 + SEND_TIMEOUT, relay.clone(), LinkRoom::Full),
        Some(relay)
    );
    assert_eq!(core.armed_timers(), 0);
}

/// A 44 for the session owner `to` (an abort: the smallest body).
fn route_update(to: u64) -> Transmit {
    use zlink::ids::{
        BindingGeneration, NodeGeneration, RelocationId, SessionOwnerId, SessionRef, SessionRid,
    };
    use zlink::wire::node::{SealIdentity, SessionRelocationRoute};
    Transmit {
        to: NodeRid(to),
        lifecycle: None,
        record: NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Abort(SealIdentity {
            relocation: RelocationId {
                coordinator: NodeRid(2),
                sequence: 1,
            },
            session: SessionRef {
                owner: NodeRid(to),
                lifecycle: NodeGeneration(1),
                owner_id: SessionOwnerId(0),
                session: SessionRid(1),
            },
            binding: BindingGeneration(1),
        })),
    }
}

/// §8.1 (docs/relocation.md "A 44 waits for its link"): a 44 goes out
/// once and nothing resends it, so one offered while there is no link to
/// the session owner (a node just restarted links to its peers one by
/// one) waits for the link, in order with that peer's other waiting
/// records, and goes out once when the link is up; not up by the send
/// timeout, it is dropped and counted, never sooner. A 44 to a full link
/// goes out at once, as every record but the 51.
#[test]
fn core_a_44_with_no_link_waits_for_its_link_and_goes_out_once_or_ends_at_the_send_timeout() {
    // The link shard offers the 44 and the 51 for admission, and writes
    // every other record at once (a reply here).
    assert!(LinkAdmission::waits(&route_update(1).record));
    assert!(LinkAdmission::waits(&replaced_notice(1, 1).record));
    let reply = NodeRecord::ActorSend(zlink::wire::node::ActorSend::Reply(
        zlink::wire::node::ActorReply {
            request: zlink::ids::RequestId(1),
            outcome: Ok(Bytes::new()),
        },
    ));
    assert!(!LinkAdmission::waits(&reply));
    let mut core = shard();
    let t0 = Instant::from_millis(2_000);
    // A link up takes it at once, full or not.
    assert_eq!(
        core.offer_transmit(t0, route_update(1), LinkRoom::Room),
        Some(route_update(1))
    );
    assert_eq!(
        core.offer_transmit(t0, route_update(1), LinkRoom::Full),
        Some(route_update(1))
    );
    assert_eq!(core.poll_timeout(), None, "a 44 sent at once has no timer");
    // No link to node 3: it waits, on the wheel.
    assert!(core
        .offer_transmit(t0, route_update(3), LinkRoom::Down)
        .is_none());
    assert_eq!(core.poll_timeout(), Some(t0 + SEND_TIMEOUT));
    // A 51 for node 3 offered meanwhile, to a link up by then, waits behind
    // it: order is kept.
    let t1 = t0 + Duration::from_millis(10);
    assert!(core
        .offer_transmit(t1, replaced_notice(3, 1), LinkRoom::Room)
        .is_none());
    // Node 3's link is not up yet: nothing goes.
    assert!(core.admit_waiting(|peer| peer != NodeRid(3)).is_empty());
    // It comes up: the 44, then the 51, once.
    assert_eq!(
        core.admit_waiting(|peer| peer == NodeRid(3)),
        vec![route_update(3), replaced_notice(3, 1)]
    );
    assert!(core.admit_waiting(|_| true).is_empty());

    // A 44 for node 4, whose link never comes up: dropped and counted at
    // its send timeout, not a microsecond before.
    let t2 = t0 + Duration::from_millis(20);
    assert!(core
        .offer_transmit(t2, route_update(4), LinkRoom::Down)
        .is_none());
    let unroutable = FlowTrace::RouteUpdateUnroutable;
    core.handle_timeout(t2 + (SEND_TIMEOUT - JUST));
    assert_eq!(
        core.counters().get(unroutable),
        0,
        "ended before its timeout"
    );
    core.handle_timeout(t2 + SEND_TIMEOUT);
    assert_eq!(core.counters().get(unroutable), 1);
    assert_eq!(
        core.counters()
            .get(FlowTrace::ReplacedNoticeDeadlineExceeded),
        0
    );
    // Ended means never sent.
    assert!(core.admit_waiting(|_| true).is_empty());
}
