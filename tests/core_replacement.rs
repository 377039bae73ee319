//! Core contract tests for rebind and the replacement of the previous
//! connection (§6, §12): CONTRACT P1–P5, X1, X2, X13, X14, X15, proved on the
//! sans-IO cores with virtual time (timers to the microsecond).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use zlink::core::actor::{ActorEvent, ReplyTicket};
use zlink::core::session::{BindStart, SessionOwnerConfig, REPLACEMENT_CLOSE_DELAY};
use zlink::core::trace::FlowTrace;
use zlink::error::{ErrorKind, Reason};
use zlink::ids::{
    ActorRef, BindingGeneration, Correlation, NodeGeneration, NodeRid, PacketKey, RequestId,
    SessionOwnerId, SessionRid, SessionSequence,
};
use zlink::sim::{actor_id, ActorBehavior, Mesh};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::{
    ActorMessage, ActorSend, ActorSendBody, BindTombstone, BoundSessionBind, BoundSessionTail,
    Command, NodeRecord, RequestHeader, TombstoneCause,
};

/// s1 on `old` bound to "a" on `owner`; s2 on `new`, not bound yet.
struct Given {
    mesh: Mesh,
    old: NodeRid,
    owner: NodeRid,
    new: NodeRid,
    s1: SessionRid,
    s2: SessionRid,
    a: ActorRef,
}

fn given(old_config: SessionOwnerConfig) -> Given {
    let mut mesh = mesh();
    let old = mesh.add_node_with(1, 1, old_config);
    let owner = mesh.add_node(2);
    let new = mesh.add_node(3);
    let a = mesh.host(owner, "a");
    let s1 = mesh.connect(old);
    let s2 = mesh.connect(new);
    bind_ok(&mut mesh, old, s1, &a);
    Given {
        mesh,
        old,
        owner,
        new,
        s1,
        s2,
        a,
    }
}

/// The reply ticket of the request delivered to `actor` with `payload`.
fn reply_ticket(mesh: &Mesh, node: NodeRid, payload: &'static [u8]) -> ReplyTicket {
    mesh.node(node)
        .actor_events
        .iter()
        .find_map(|e| match e {
            ActorEvent::Deliver {
                payload: p,
                reply: Some(t),
                ..
            } if p == payload => Some(*t),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request {payload:?} was delivered"))
}

fn request(
    mesh: &mut Mesh,
    node: NodeRid,
    session: SessionRid,
    actor: &str,
    correlation: Correlation,
    payload: &'static [u8],
) -> Result<(), zlink::error::Error> {
    mesh.sessions(node).relay(
        session,
        &actor_id(actor),
        PacketKey(1),
        Bytes::from_static(payload),
        Some((correlation, Duration::from_secs(60))),
    )
}

#[test]
fn core_p1_rebind_from_new_session_completes_without_waiting_for_old() {
    // Given s1 on node 1 bound to "a" on node 2, and s2 on node 3.
    let Given {
        mut mesh,
        old,
        owner,
        new,
        s1,
        s2,
        a,
    } = given(SessionOwnerConfig::default());
    push(&mut mesh, owner, "a", b"to-s1").unwrap();
    mesh.run();
    let start = mesh.now();

    // When s2 binds "a" and the application never answers s1's callback.
    let ticket = bind_pending(&mut mesh, new, s2, &a);
    mesh.advance(2 * LATENCY - MICRO);
    assert_eq!(mesh.bind_outcome(new, ticket), None);
    mesh.advance(MICRO);

    // Then the bind completed after one round trip, while the old session
    // is neither closed nor done with its callback.
    let bound = mesh
        .bind_outcome(new, ticket)
        .expect("terminal after one round trip");
    assert_eq!(bound.unwrap().generation, a.generation);
    assert_eq!(mesh.now() - start, 2 * LATENCY);
    assert_eq!(replacement_callbacks(&mesh, old, s1).len(), 1);
    assert!(!mesh.closed(old, s1));
    // The terminal went out first; the 51 after it, without being waited on.
    let from_owner: Vec<_> = mesh
        .tap()
        .iter()
        .filter(|t| t.from == owner && t.at > start)
        .map(|t| (t.to, t.command()))
        .collect();
    assert_eq!(
        from_owner,
        vec![
            (new, Command::BoundSessionBind),
            (old, Command::BoundSessionReplaced)
        ]
    );
    assert_eq!(registered(&mesh, owner, "a").unwrap().owner, new);

    // And pushes arrive only on the new session.
    push(&mut mesh, owner, "a", b"to-s2").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, new, s2), vec![b(b"to-s2")]);
    assert_eq!(pushes(&mesh, old, s1), vec![b(b"to-s1")]);
}

#[test]
fn core_p2_relay_from_replaced_session_is_refused() {
    // Given s1 bound to "a", and s2 starting to bind it.
    let Given {
        mut mesh,
        old,
        owner,
        new,
        s1,
        s2,
        a,
    } = given(SessionOwnerConfig::default());
    bind_pending(&mut mesh, new, s2, &a);

    // When the Actor owner has admitted s2 and s1 relays before its 51 arrives.
    mesh.advance(LATENCY);
    let new_identity = registered(&mesh, owner, "a").unwrap();
    assert_eq!(new_identity.owner, new);
    let early = mesh.request(old, s1, &a, b"old-early").unwrap();
    mesh.run();

    // Then the Actor owner refuses the retired binding generation:
    // Unavailable (stale binding), never delivered, the binding unchanged.
    let answers = mesh.answers(old, s1, early);
    assert_eq!(answers.len(), 1);
    let ClientFrame::Error { error, .. } = &answers[0] else {
        panic!("the relay was answered with {answers:?}");
    };
    assert_eq!(error.kind(), ErrorKind::Unavailable);
    assert_eq!(error.reason(), Reason::StaleBinding);
    assert_eq!(count(&mesh, owner, FlowTrace::RelayRejectedStaleBinding), 1);
    assert!(delivered(&mesh, owner, "a").is_empty());

    // And once the 51 arrived, the previous session refuses relay itself.
    assert_eq!(replacement_callbacks(&mesh, old, s1).len(), 1);
    let late = send(&mut mesh, old, s1, "a", b"old-late").unwrap_err();
    assert_eq!(late.kind(), ErrorKind::Unavailable);
    assert_eq!(late.reason(), Reason::SessionClosing);
    mesh.run();
    assert!(delivered(&mesh, owner, "a").is_empty());
    assert_eq!(registered(&mesh, owner, "a"), Some(new_identity));

    // And the new session's relay is the one delivered.
    send(&mut mesh, new, s2, "a", b"new").unwrap();
    mesh.run();
    assert_eq!(delivered(&mesh, owner, "a"), vec![b(b"new")]);
}

#[test]
fn core_p3_close_not_before_100ms_after_callback_terminal() {
    for ok in [true, false] {
        // Given s1 replaced by s2, its duplicate-connection callback running.
        let Given {
            mut mesh,
            old,
            new,
            s1,
            s2,
            a,
            ..
        } = given(SessionOwnerConfig::default());
        bind_ok(&mut mesh, new, s2, &a);
        let callback = the_replacement_callback(&mesh, old, s1);
        mesh.advance(Duration::from_millis(7));

        // When the callback reaches a terminal (success or failure), with
        // nothing queued for the client.
        let terminal = mesh.now();
        mesh.sessions(old)
            .replacement_callback_done(s1, callback, ok);
        assert!(
            mesh.frames(old, s1).is_empty(),
            "the outbound queue is not empty"
        );

        // Then the connection is open until 1 µs before 100 ms...
        assert_eq!(mesh.next_timer(), Some(terminal + REPLACEMENT_CLOSE_DELAY));
        mesh.advance(REPLACEMENT_CLOSE_DELAY - MICRO);
        assert!(!mesh.closed(old, s1), "ok={ok}: closed before 100 ms");

        // ...and closes at exactly 100 ms, once, as replaced.
        mesh.advance(MICRO);
        assert_eq!(mesh.now() - terminal, Duration::from_millis(100));
        assert_eq!(
            closes(&mesh, old, s1),
            vec![CloseReason::Replaced],
            "ok={ok}"
        );
        mesh.advance(Duration::from_secs(60));
        assert_eq!(closes(&mesh, old, s1).len(), 1);
        assert_eq!(
            count(&mesh, old, FlowTrace::ReplacementCallbackFailed),
            u64::from(!ok)
        );
        assert!(!mesh.closed(new, s2));
    }
}

/// §6: the 100 ms close "revalidates before closing". When the client went
/// away within the 100 ms, the timer finds the session closed already: it
/// closes nothing and records `replacement_close_superseded`.
#[test]
fn core_p3_the_close_timer_revalidates_and_closes_nothing_when_the_session_is_gone() {
    let Given {
        mut mesh,
        old,
        new,
        s1,
        s2,
        a,
        ..
    } = given(SessionOwnerConfig::default());
    bind_ok(&mut mesh, new, s2, &a);
    let callback = the_replacement_callback(&mesh, old, s1);
    mesh.sessions(old)
        .replacement_callback_done(s1, callback, true);
    // When the client goes away 40 ms later.
    mesh.advance(Duration::from_millis(40));
    mesh.sessions(old).connection_lost(s1);
    assert_eq!(count(&mesh, old, FlowTrace::ReplacementCloseSuperseded), 0);
    // Then at the 100 ms the timer stands down: no close, and it says so.
    mesh.advance(Duration::from_millis(60));
    assert_eq!(count(&mesh, old, FlowTrace::ReplacementCloseSuperseded), 1);
    assert!(closes(&mesh, old, s1).is_empty());
    assert!(!mesh.closed(new, s2));
}

#[test]
fn core_p4_rebinding_the_current_binding_is_idempotent() {
    // Given s1 bound to "a".
    let Given {
        mut mesh,
        old,
        owner,
        s1,
        a,
        ..
    } = given(SessionOwnerConfig::default());
    let identity = registered(&mesh, owner, "a");
    let records = mesh.tap().len();

    // When s1 binds "a" again.
    let again = mesh.sessions(old).bind(s1, a.clone()).unwrap();
    mesh.run();
    mesh.advance(Duration::from_secs(40));

    // Then it is an immediate success with no record, no 51, no callback and
    // no close, and the registered binding is the same one.
    assert!(
        matches!(again, BindStart::Existing(ref r) if r.id == a.id && r.generation == a.generation)
    );
    assert_eq!(mesh.tap().len(), records);
    assert!(replacement_callbacks(&mesh, old, s1).is_empty());
    assert!(!mesh.closed(old, s1));
    assert_eq!(registered(&mesh, owner, "a"), identity);
    assert_eq!(count(&mesh, owner, FlowTrace::BindingReplaced), 0);

    // And the binding still carries pushes.
    push(&mut mesh, owner, "a", b"same").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, old, s1), vec![b(b"same")]);
}

#[test]
fn core_p5_late_response_on_old_connection_not_applied_to_current() {
    // Given s1 and s2 on the same node, "a" answered by hand, and s1's
    // request with correlation 7 in flight.
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    mesh.set_behavior(owner, ActorBehavior::Manual);
    let a = mesh.host(owner, "a");
    let s1 = mesh.connect(node);
    let s2 = mesh.connect(node);
    let seven = Correlation(7);
    bind_ok(&mut mesh, node, s1, &a);
    request(&mut mesh, node, s1, "a", seven, b"old").unwrap();
    mesh.run();
    let old_ticket = reply_ticket(&mesh, owner, b"old");

    // When s2 replaces s1, s1 closes, s2 sends its own request 7, and only
    // then the answer to s1's request arrives.
    bind_ok(&mut mesh, node, s2, &a);
    let callback = the_replacement_callback(&mesh, node, s1);
    mesh.sessions(node)
        .replacement_callback_done(s1, callback, true);
    mesh.advance(REPLACEMENT_CLOSE_DELAY);
    assert!(mesh.closed(node, s1));
    request(&mut mesh, node, s2, "a", seven, b"new").unwrap();
    mesh.run();
    let new_ticket = reply_ticket(&mesh, owner, b"new");
    mesh.actors(owner)
        .reply(old_ticket, Ok(b(b"answer-to-old")));
    mesh.run();

    // Then the late answer is dropped: neither connection gets it.
    assert!(mesh.answers(node, s2, seven).is_empty());
    assert!(mesh.answers(node, s1, seven).is_empty());
    assert_eq!(count(&mesh, node, FlowTrace::LateReplyDropped), 1);

    // And the current connection gets exactly its own answer.
    mesh.actors(owner)
        .reply(new_ticket, Ok(b(b"answer-to-new")));
    mesh.run();
    assert_eq!(
        mesh.answers(node, s2, seven),
        vec![ClientFrame::Reply {
            correlation: seven,
            payload: b(b"answer-to-new")
        }]
    );
}

#[test]
fn core_x1_callback_without_terminal_is_force_closed_at_timeout() {
    let default = SessionOwnerConfig::default().replacement_callback_timeout;
    assert_eq!(default, Duration::from_millis(30_000));
    let shortened = Duration::from_millis(250);
    for timeout in [default, shortened] {
        // Given s1 (with this SessionReplacementCallbackTimeout) bound to "a".
        let config = SessionOwnerConfig {
            replacement_callback_timeout: timeout,
            ..SessionOwnerConfig::default()
        };
        let Given {
            mut mesh,
            old,
            new,
            s1,
            s2,
            a,
            ..
        } = given(config);

        // When s2 replaces it and the 51 arrives (two link latencies later),
        // and the callback never reaches a terminal.
        let ticket = bind_pending(&mut mesh, new, s2, &a);
        mesh.advance(2 * LATENCY);
        let callback = the_replacement_callback(&mesh, old, s1);
        let started = mesh.now();
        assert!(mesh.bind_outcome(new, ticket).unwrap().is_ok());

        // Then it is still open 1 µs before the timeout...
        mesh.advance(timeout - MICRO);
        assert!(!mesh.closed(old, s1), "{timeout:?}: closed early");

        // ...and force-closed at exactly the timeout.
        mesh.advance(MICRO);
        assert_eq!(mesh.now() - started, timeout);
        assert_eq!(closes(&mesh, old, s1), vec![CloseReason::Replaced]);
        assert_eq!(count(&mesh, old, FlowTrace::ReplacementCallbackTimeout), 1);

        // And a terminal reported after that schedules nothing more.
        mesh.sessions(old)
            .replacement_callback_done(s1, callback, true);
        mesh.advance(Duration::from_secs(1));
        assert_eq!(closes(&mesh, old, s1).len(), 1);
        assert!(!mesh.closed(new, s2));
    }
}

#[test]
fn core_x2_late_or_duplicate_51_touches_only_the_retired_identity() {
    // Given s1 bound to "a" and "b", and s2 on the same node replacing "a".
    let mut mesh = mesh();
    let (node, owner) = (mesh.add_node(1), mesh.add_node(2));
    let a = mesh.host(owner, "a");
    let bb = mesh.host(owner, "b");
    let s1 = mesh.connect(node);
    let s2 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a);
    bind_ok(&mut mesh, node, s1, &bb);
    bind_ok(&mut mesh, node, s2, &a);
    let replaced = last_replaced(&mesh);
    assert_eq!(replaced.previous.session, s1);

    // When the same 51 is delivered again.
    mesh.inject(
        owner,
        node,
        NodeRecord::BoundSessionReplaced(replaced.clone()),
    );
    mesh.run();

    // Then no second callback runs and the new session is untouched.
    let callback = the_replacement_callback(&mesh, node, s1);
    assert_eq!(count(&mesh, node, FlowTrace::ReplacedNoticeDuplicate), 1);
    assert!(replacement_callbacks(&mesh, node, s2).is_empty());
    let s2_identity = registered(&mesh, owner, "a").unwrap();

    // When s1's callback ends and s1 closes, cleaning up its other binding.
    mesh.sessions(node)
        .replacement_callback_done(s1, callback, true);
    mesh.advance(REPLACEMENT_CLOSE_DELAY);
    mesh.run();

    // Then only "b" is cleaned up; "a"'s new binding stays.
    assert!(ended(&mesh, node, s1));
    assert_eq!(mesh.disconnect_callbacks(owner, &actor_id("b")).len(), 1);
    assert!(mesh.disconnect_callbacks(owner, &actor_id("a")).is_empty());
    assert_eq!(registered(&mesh, owner, "b"), None);
    assert_eq!(registered(&mesh, owner, "a"), Some(s2_identity));

    // When the old 51 arrives once more, late, after s1 is gone, and a 51
    // naming an older identity of s2 itself arrives (s2 notified "a" and
    // bound it again since).
    mesh.inject(
        owner,
        node,
        NodeRecord::BoundSessionReplaced(replaced.clone()),
    );
    let older = s2_identity.generation;
    mesh.sessions(node).notify_disconnected(s2, &a.id).unwrap();
    mesh.run();
    bind_ok(&mut mesh, node, s2, &a);
    let mut stale_for_s2 = replaced;
    stale_for_s2.previous = mesh.node(node).core().session_owner().session_ref(s2);
    stale_for_s2.retired = older;
    mesh.inject(owner, node, NodeRecord::BoundSessionReplaced(stale_for_s2));
    mesh.run();

    // Then neither closes or calls back the new session, and its current
    // binding still carries pushes.
    assert!(replacement_callbacks(&mesh, node, s2).is_empty());
    assert!(!mesh.closed(node, s2));
    assert_eq!(count(&mesh, node, FlowTrace::ReplacedNoticeDuplicate), 3);
    assert!(registered(&mesh, owner, "a").unwrap().generation > older);
    push(&mut mesh, owner, "a", b"still-s2").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, node, s2), vec![b(b"still-s2")]);
}

#[test]
fn core_x13_mismatched_51_runs_nothing_and_lost_51_delays_nothing() {
    // Given s1 on node 1 bound to "a" on node 2, s3 another open session on
    // node 1, and the link from the Actor owner to node 1 cut.
    let Given {
        mut mesh,
        old,
        owner,
        new,
        s1,
        s2,
        a,
    } = given(SessionOwnerConfig::default());
    let s3 = mesh.connect(old);
    mesh.set_link(old, owner, false);

    // When s2 binds "a": the 51 to node 1 cannot be delivered.
    let start = mesh.now();
    let ticket = bind_pending(&mut mesh, new, s2, &a);
    mesh.advance(2 * LATENCY);

    // Then the bind terminal is not delayed: one round trip.
    assert!(mesh.bind_outcome(new, ticket).unwrap().is_ok());
    assert_eq!(mesh.now() - start, 2 * LATENCY);
    assert_eq!(mesh.lost(), 1);
    let real = last_replaced(&mesh);
    assert!(replacement_callbacks(&mesh, old, s1).is_empty());

    // And the retired binding generation is still refused at the Actor owner.
    mesh.set_link(old, owner, true);
    let relay = mesh.request(old, s1, &a, b"retired").unwrap();
    mesh.run();
    match mesh.answers(old, s1, relay).as_slice() {
        [ClientFrame::Error { error, .. }] => {
            assert_eq!(error.kind(), ErrorKind::Unavailable);
            assert_eq!(error.reason(), Reason::StaleBinding);
        }
        other => panic!("the retired relay was answered with {other:?}"),
    }
    assert!(delivered(&mesh, owner, "a").is_empty());

    // When 51s arrive whose values do not all match the replacement target.
    let mut forged = Vec::new();
    let mut r = real.clone();
    r.fence.node_generation = NodeGeneration(real.fence.node_generation.0 + 1);
    forged.push((owner, r, "fence NodeGeneration is not the sender's"));
    forged.push((new, real.clone(), "sender is not the fence's owner"));
    let mut r = real.clone();
    r.previous.owner = new;
    forged.push((owner, r, "previous owner RID"));
    let mut r = real.clone();
    r.previous.lifecycle = NodeGeneration(real.previous.lifecycle.0 + 1);
    forged.push((owner, r, "previous lifecycle generation"));
    let mut r = real.clone();
    r.previous.owner_id = SessionOwnerId(real.previous.owner_id.0 + 1);
    forged.push((owner, r, "previous owner id"));
    let mut r = real.clone();
    r.previous_lease.0 += 1;
    forged.push((owner, r, "previous owner lease generation"));
    let mut r = real.clone();
    r.previous.session = s3;
    forged.push((owner, r, "previous session RID"));
    let mut r = real.clone();
    r.retired = BindingGeneration(real.retired.0 + 1);
    forged.push((owner, r, "retired binding generation"));
    for (from, record, what) in forged {
        mesh.inject(from, old, NodeRecord::BoundSessionReplaced(record));
        mesh.run();

        // Then no callback runs, no session closes, s1 still takes dispatch.
        assert!(replacement_callbacks(&mesh, old, s1).is_empty(), "{what}");
        assert!(replacement_callbacks(&mesh, old, s3).is_empty(), "{what}");
        assert!(!mesh.closed(old, s1) && !mesh.closed(old, s3), "{what}");
        assert!(send(&mut mesh, old, s1, "a", b"open").is_ok(), "{what}");
    }
    assert_eq!(count(&mesh, old, FlowTrace::BindingRetired), 0);

    // And the exact 51 does run the callback (the forged ones could have).
    mesh.inject(owner, old, NodeRecord::BoundSessionReplaced(real));
    mesh.run();
    assert_eq!(replacement_callbacks(&mesh, old, s1).len(), 1);
}

#[test]
fn core_x14_replaced_session_refuses_inbound_but_sends_outbound() {
    // Given s1 bound to "a" (node 2) and "b" (node 3, answered by hand), with
    // a request to "b" in flight, and "c" not bound.
    let mut mesh = mesh();
    let (node, a_owner, b_owner) = (mesh.add_node(1), mesh.add_node(2), mesh.add_node(3));
    mesh.set_behavior(b_owner, ActorBehavior::Manual);
    let a = mesh.host(a_owner, "a");
    let bb = mesh.host(b_owner, "b");
    let c = mesh.host(a_owner, "c");
    let s1 = mesh.connect(node);
    let s2 = mesh.connect(node);
    bind_ok(&mut mesh, node, s1, &a);
    bind_ok(&mut mesh, node, s1, &bb);
    request(&mut mesh, node, s1, "b", Correlation(1), b"before").unwrap();
    mesh.run();
    let pending = reply_ticket(&mesh, b_owner, b"before");

    // When s2 replaces "a" and s1's callback is about to run.
    bind_ok(&mut mesh, node, s2, &a);
    the_replacement_callback(&mesh, node, s1);
    let relays_before = tapped(&mesh, Command::ActorSend).len();

    // Then new inbound application dispatch is refused as closing.
    let refused = [
        send(&mut mesh, node, s1, "b", b"in"),
        send(&mut mesh, node, s1, "a", b"in"),
        mesh.sessions(node).bind(s1, c).map(|_| ()),
    ];
    for outcome in refused {
        let error = outcome.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unavailable);
        assert_eq!(error.reason(), Reason::SessionClosing);
    }
    mesh.run();
    assert_eq!(tapped(&mesh, Command::ActorSend).len(), relays_before);
    assert!(delivered(&mesh, b_owner, "b").iter().all(|p| p != "in"));

    // And outbound sends to the client still go out: the other binding's
    // push, and the answer to the request accepted before.
    push(&mut mesh, b_owner, "b", b"notice").unwrap();
    mesh.actors(b_owner).reply(pending, Ok(b(b"after")));
    mesh.run();
    assert_eq!(pushes(&mesh, node, s1), vec![b(b"notice")]);
    assert_eq!(
        mesh.answers(node, s1, Correlation(1)),
        vec![ClientFrame::Reply {
            correlation: Correlation(1),
            payload: b(b"after")
        }]
    );
    assert!(!mesh.closed(node, s1));
}

#[test]
fn core_x15_closing_replaced_session_cleans_others_once_never_the_new_binding() {
    // Given s1 on node 1 bound to "a", "b" (node 2) and "c" (node 3), and s2
    // on node 4 replacing "a".
    let mut mesh = mesh();
    let (node, owner, c_owner, new) = (
        mesh.add_node(1),
        mesh.add_node(2),
        mesh.add_node(3),
        mesh.add_node(4),
    );
    let a = mesh.host(owner, "a");
    let bb = mesh.host(owner, "b");
    let c = mesh.host(c_owner, "c");
    let s1 = mesh.connect(node);
    let s2 = mesh.connect(new);
    for actor in [&a, &bb, &c] {
        bind_ok(&mut mesh, node, s1, actor);
    }
    bind_ok(&mut mesh, new, s2, &a);
    let retired = last_replaced(&mesh).retired;
    let s2_identity = registered(&mesh, owner, "a").unwrap();

    // When s1's callback ends and the previous connection closes.
    let callback = the_replacement_callback(&mesh, node, s1);
    mesh.sessions(node)
        .replacement_callback_done(s1, callback, true);
    mesh.advance(REPLACEMENT_CLOSE_DELAY);
    mesh.run();

    // Then "b" and "c" get the ordinary disconnect procedure once each, and
    // "a" none; each tombstone names its own binding.
    assert!(ended(&mesh, node, s1));
    assert_eq!(mesh.disconnect_callbacks(owner, &actor_id("b")).len(), 1);
    assert_eq!(mesh.disconnect_callbacks(c_owner, &actor_id("c")).len(), 1);
    assert!(mesh.disconnect_callbacks(owner, &actor_id("a")).is_empty());
    let tombstones: Vec<_> = mesh
        .tap()
        .iter()
        .filter_map(|t| match &t.record {
            NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(x)) => {
                Some((t.to, x.actor.clone(), x.session.session))
            }
            _ => None,
        })
        .collect();
    let mut tombstones = tombstones;
    tombstones.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(
        tombstones,
        vec![(owner, actor_id("b"), s1), (c_owner, actor_id("c"), s1)]
    );
    assert_eq!(registered(&mesh, owner, "b"), None);
    assert_eq!(registered(&mesh, c_owner, "c"), None);
    assert_eq!(registered(&mesh, owner, "a"), Some(s2_identity));

    // When a late tombstone and a late disconnect notice for s1's retired
    // identity of "a" arrive at the Actor owner.
    let s1_ref = mesh.node(node).core().session_owner().session_ref(s1);
    let tombstone = BindTombstone {
        actor: a.id.clone(),
        object_generation: a.generation,
        session: s1_ref,
        binding: retired,
        cause: TombstoneCause::Replaced,
    };
    let notice = ActorMessage {
        request: Some(RequestHeader {
            id: RequestId(9_999),
            budget: Duration::from_secs(5),
        }),
        actor: a.id.clone(),
        object_generation: a.generation,
        authority: a.location.authority,
        lease: a.location.lease,
        tail: BoundSessionTail {
            session: s1_ref,
            binding: retired,
            sequence: SessionSequence(99),
        },
        body: ActorSendBody::DisconnectNotice,
    };
    let stale_tombstones = count(&mesh, owner, FlowTrace::TombstoneStale);
    mesh.inject(
        node,
        owner,
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(tombstone)),
    );
    mesh.inject(
        node,
        owner,
        NodeRecord::ActorSend(ActorSend::Message(notice)),
    );
    mesh.run();

    // Then neither removes or notifies the new binding.
    assert_eq!(
        count(&mesh, owner, FlowTrace::TombstoneStale),
        stale_tombstones + 1
    );
    assert!(mesh.disconnect_callbacks(owner, &actor_id("a")).is_empty());
    assert_eq!(registered(&mesh, owner, "a"), Some(s2_identity));
    push(&mut mesh, owner, "a", b"s2-only").unwrap();
    mesh.run();
    assert_eq!(pushes(&mesh, new, s2), vec![b(b"s2-only")]);
    assert!(pushes(&mesh, node, s1).is_empty());
}

#[test]
fn core_51_waits_for_admission_to_a_full_link_until_the_send_timeout_never_sooner() {
    use zlink::core::admission::{Expired, LinkAdmission, LinkRoom};
    use zlink::core::time::Instant;
    let timeout = Duration::from_millis(5_000);
    let mut admission = LinkAdmission::new(timeout);
    let t0 = Instant::from_millis(1_000);

    // A link with room: the 51 goes at once. Any other record goes at once
    // even to a full link (only 51 has the §6 admission rule).
    assert!(admission
        .offer(t0, replaced_notice(1, 1), LinkRoom::Room)
        .is_some());
    let reply = zlink::core::Transmit {
        record: NodeRecord::ActorSend(ActorSend::Reply(zlink::wire::node::ActorReply {
            request: RequestId(1),
            outcome: Ok(Bytes::new()),
        })),
        ..replaced_notice(1, 1)
    };
    assert_eq!(
        admission.offer(t0, reply.clone(), LinkRoom::Full),
        Some(reply)
    );
    assert_eq!(admission.waiting(), 0);

    // Given link 1 full: a 51 waits, and a second one waits behind it even
    // when the link has room by then (order is kept).
    assert!(admission
        .offer(t0, replaced_notice(1, 2), LinkRoom::Full)
        .is_none());
    let t1 = t0 + Duration::from_millis(10);
    assert!(admission
        .offer(t1, replaced_notice(1, 3), LinkRoom::Room)
        .is_none());
    assert_eq!(admission.next_deadline(), Some(t0 + timeout));
    // A 51 to link 3, full too.
    assert!(admission
        .offer(t1, replaced_notice(3, 4), LinkRoom::Full)
        .is_none());

    // Nothing ends a microsecond before its send timeout.
    let just_before = t0 + (timeout - Duration::from_micros(1));
    assert_eq!(admission.expire(just_before), Expired::default());
    assert_eq!(admission.waiting(), 3);
    // Link 3 gets room first: only its 51 is admitted.
    let admitted = admission.admit(|to| to == NodeRid(3));
    assert_eq!(admitted, vec![replaced_notice(3, 4)]);

    // At its send timeout the first 51 on link 1 ends (DeadlineExceeded);
    // the second, offered 10 ms later, still waits until its own.
    assert_eq!(
        admission.expire(t0 + timeout),
        Expired {
            notices: 1,
            routes: 0
        }
    );
    assert_eq!(admission.next_deadline(), Some(t1 + timeout));
    let admitted = admission.admit(|_| true);
    assert_eq!(admitted, vec![replaced_notice(1, 3)]);
    assert_eq!(admission.waiting(), 0);
    assert_eq!(admission.next_deadline(), None);
}
