//! Session lanes in the core (issue 19 item 2; src/core/session/lanes.rs;
//! docs/core.md "Rules that moved into the core"): which session callback
//! runs next, that a closing session runs no new application dispatch (§6,
//! X14), the disconnect turn queued once (§7) and the §7 lifecycle deadline
//! of a turn that runs after its session ended, on the shard's one timer
//! wheel. One shard core that hosts the Actor and the sessions itself, so
//! its records loop back to it, on virtual time.

mod common;

use std::time::Duration;

use bytes::Bytes;
use zlink::core::session::{
    BindStart, ClientPacket, SessionEvent, SessionOwnerConfig, SessionTurn, SessionWork, TurnId,
};
use zlink::core::shard::ShardCore;
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::core::CoreEvent;
use zlink::error::Reason;
use zlink::ids::{
    AuthorityOwnerGeneration, Correlation, NodeGeneration, NodeRid, ObjectGeneration, PacketKey,
    Peer, SessionRid,
};
use zlink::sim::actor_id;
use zlink::wire::client::ClientFrame;

const DEADLINE: Duration = Duration::from_millis(5_000);
const JUST: Duration = Duration::from_micros(1);
const ME: Peer = Peer {
    rid: NodeRid(1),
    generation: NodeGeneration(1),
};

fn shard(queue: usize, connect_callback: bool) -> ShardCore {
    common::one_shard(SessionOwnerConfig {
        disconnect_deadline: DEADLINE,
        session_queue_max: queue,
        connect_callback,
        ..SessionOwnerConfig::default()
    })
}

/// What the core asked of the session side, records looped back to the
/// core itself (its sessions' Actor is hosted on it).
#[derive(Default, Debug)]
struct Out {
    turns: Vec<SessionTurn>,
    errors: Vec<(Correlation, Reason)>,
    expired: Vec<TurnId>,
}

/// Drains the core as the runtime's shard does, and checks
/// [`ShardCore::has_output`]'s promise on the way: the shard skips its drain
/// when it says `false`, so `false` must mean nothing can be polled, and a
/// drained core must say `false` (else every loop turn drains for nothing).
fn pump(core: &mut ShardCore, now: Instant) -> Out {
    let mut out = Out::default();
    loop {
        let promised = core.has_output();
        let mut progress = false;
        while let Some(transmit) = core.poll_transmit() {
            progress = true;
            assert_eq!(transmit.to, ME.rid);
            core.handle_record(now, ME, transmit.record);
        }
        while let Some(event) = core.poll_event() {
            progress = true;
            match event {
                CoreEvent::Session(SessionEvent::Turn(turn)) => out.turns.push(turn),
                CoreEvent::Session(SessionEvent::TurnExpired { turn, .. }) => {
                    out.expired.push(turn)
                }
                CoreEvent::Session(SessionEvent::Frame {
                    frame: ClientFrame::Error { correlation, error },
                    ..
                }) => out.errors.push((correlation, error.reason())),
                _ => {}
            }
        }
        assert!(
            promised || !progress,
            "has_output said nothing, yet the core had output"
        );
        if !progress {
            assert!(!core.has_output(), "a drained core says it has output");
            return out;
        }
    }
}

#[test]
fn core_an_idle_core_has_no_output_and_a_packet_for_a_callback_gives_it_some() {
    let mut core = shard(64, false);
    let t0 = Instant::ZERO;
    assert!(!core.has_output());
    let s = core.sessions(t0).open_session();
    pump(&mut core, t0);
    assert!(!core.has_output(), "an open session with nothing to run");
    core.sessions(t0).packet(s, packet(1, "one"), true).unwrap();
    assert!(core.has_output(), "its callback turn is ready");
    let out = pump(&mut core, t0);
    assert_eq!(out.turns.len(), 1);
    // The turn runs; a packet behind it waits for its end, with no output.
    core.sessions(t0).packet(s, packet(2, "two"), true).unwrap();
    assert!(!core.has_output(), "the lane is in its turn");
    core.sessions(t0).turn_done(s, out.turns[0].turn);
    assert!(core.has_output(), "the next turn is ready");
    assert_eq!(pump(&mut core, t0).turns.len(), 1);
}

fn packet(correlation: u32, payload: &'static str) -> ClientPacket {
    ClientPacket {
        key: PacketKey(1),
        correlation: Some(Correlation(correlation)),
        payload: Bytes::from_static(payload.as_bytes()),
    }
}

fn payload(turn: &SessionTurn) -> &[u8] {
    match &turn.work {
        SessionWork::Connect(p) | SessionWork::Packet(p) => &p.payload,
        _ => b"",
    }
}

#[test]
fn core_w1_a_sessions_callbacks_run_one_turn_at_a_time_in_order() {
    let mut core = shard(64, false);
    let t0 = Instant::ZERO;
    let s = core.sessions(t0).open_session();
    let other = core.sessions(t0).open_session();
    for (i, p) in ["one", "two", "three"].into_iter().enumerate() {
        core.sessions(t0)
            .packet(s, packet(i as u32, p), true)
            .unwrap();
    }
    core.sessions(t0)
        .packet(other, packet(9, "x"), true)
        .unwrap();
    // One turn per lane at a time; lanes served side by side.
    let out = pump(&mut core, t0);
    let seen: Vec<_> = out.turns.iter().map(|t| (t.session, payload(t))).collect();
    assert_eq!(seen, [(s, &b"one"[..]), (other, &b"x"[..])]);
    let mut order = vec![];
    let mut turn = out.turns[0].turn;
    for _ in 0..2 {
        core.sessions(t0).turn_done(s, turn);
        let out = pump(&mut core, t0);
        assert_eq!(out.turns.len(), 1, "{out:?}");
        order.push(payload(&out.turns[0]).to_vec());
        turn = out.turns[0].turn;
    }
    assert_eq!(order, [b"two".to_vec(), b"three".to_vec()]);
    // A turn's end reported twice moves nothing.
    core.sessions(t0).turn_done(s, turn);
    core.sessions(t0).turn_done(s, turn);
    assert!(pump(&mut core, t0).turns.is_empty());
}

#[test]
fn core_a_connect_callback_gets_the_first_packet_and_the_rest_wait_behind_it() {
    let mut core = shard(64, true);
    let t0 = Instant::ZERO;
    let s = core.sessions(t0).open_session();
    // The hello goes to the connect callback whatever its key.
    let hello = ClientPacket {
        key: PacketKey(77),
        ..packet(1, "hello")
    };
    core.sessions(t0).packet(s, hello, false).unwrap();
    core.sessions(t0)
        .packet(s, packet(2, "next"), true)
        .unwrap();
    // After the hello, a key without a handler is refused at once.
    let refused = core.sessions(t0).packet(s, packet(3, "x"), false);
    assert_eq!(refused.unwrap_err().reason(), Reason::NoPacketHandler);
    let out = pump(&mut core, t0);
    assert_eq!(out.turns.len(), 1);
    assert!(matches!(out.turns[0].work, SessionWork::Connect(_)));
    core.sessions(t0).turn_done(s, out.turns[0].turn);
    let out = pump(&mut core, t0);
    assert!(matches!(&out.turns[..], [t] if matches!(t.work, SessionWork::Packet(_))));
}

#[test]
fn core_x14_packets_queued_before_the_session_began_closing_are_answered_session_closing_never_run()
{
    let mut core = shard(64, false);
    let t0 = Instant::ZERO;
    let actor = core
        .actors(t0)
        .host(
            actor_id("a"),
            ObjectGeneration(1),
            AuthorityOwnerGeneration(1),
        )
        .unwrap();
    let s1 = core.sessions(t0).open_session();
    let s2 = core.sessions(t0).open_session();
    assert!(matches!(
        core.sessions(t0).bind(s1, actor.clone()),
        Ok(BindStart::Pending(_))
    ));
    pump(&mut core, t0);
    // s1's first packet runs; two more (one a request, one one-way) wait.
    core.sessions(t0)
        .packet(s1, packet(1, "running"), true)
        .unwrap();
    core.sessions(t0)
        .packet(s1, packet(2, "queued"), true)
        .unwrap();
    let one_way = ClientPacket {
        correlation: None,
        ..packet(0, "one-way")
    };
    core.sessions(t0).packet(s1, one_way, true).unwrap();
    let running = pump(&mut core, t0).turns;
    assert_eq!(running.len(), 1);

    // When s2 binds "a", s1 is replaced: it is closing now (§6).
    core.sessions(t0).bind(s2, actor).unwrap();
    let out = pump(&mut core, t0);
    assert!(out.turns.is_empty(), "the lane is still in its turn");
    // A new packet is refused at once.
    let late = core.sessions(t0).packet(s1, packet(3, "late"), true);
    assert_eq!(late.unwrap_err().reason(), Reason::SessionClosing);

    // Then, once the running turn ends, the queued packets never run: the
    // request is answered SessionClosing; the replacement callback runs.
    core.sessions(t0).turn_done(s1, running[0].turn);
    let out = pump(&mut core, t0);
    assert_eq!(out.errors, [(Correlation(2), Reason::SessionClosing)]);
    assert_eq!(out.turns.len(), 1, "{out:?}");
    assert!(matches!(out.turns[0].work, SessionWork::Replaced { .. }));
}

#[test]
fn core_the_disconnect_turn_is_the_lanes_last_and_runs_once() {
    let mut core = shard(64, false);
    let t0 = Instant::ZERO;
    let s = core.sessions(t0).open_session();
    core.sessions(t0)
        .packet(s, packet(1, "running"), true)
        .unwrap();
    core.sessions(t0)
        .packet(s, packet(2, "queued"), true)
        .unwrap();
    let running = pump(&mut core, t0).turns;
    core.sessions(t0).connection_lost(s);
    core.sessions(t0).connection_lost(s);
    core.sessions(t0).turn_done(s, running[0].turn);
    let out = pump(&mut core, t0);
    assert_eq!(out.errors, [(Correlation(2), Reason::SessionClosing)]);
    assert!(matches!(&out.turns[..], [t] if t.work == SessionWork::Disconnected));
    assert_eq!(core.session_owner().lane_count(), 1);
    core.sessions(t0).turn_done(s, out.turns[0].turn);
    assert!(pump(&mut core, t0).turns.is_empty());
    assert_eq!(core.session_owner().lane_count(), 0, "the lane is gone");
    assert_eq!(core.session_owner().session_count(), 0);
}

#[test]
fn core_a_disconnect_turn_at_a_full_lane_is_queued_when_a_place_frees() {
    let mut core = shard(2, false);
    let t0 = Instant::ZERO;
    let s = core.sessions(t0).open_session();
    core.sessions(t0)
        .packet(s, packet(1, "running"), true)
        .unwrap();
    let running = pump(&mut core, t0).turns;
    core.sessions(t0).packet(s, packet(2, "a"), true).unwrap();
    core.sessions(t0).packet(s, packet(3, "b"), true).unwrap();
    let full = core.sessions(t0).packet(s, packet(4, "c"), true);
    assert_eq!(full.unwrap_err().reason(), Reason::QueueFull);
    core.sessions(t0).connection_lost(s);
    core.sessions(t0).turn_done(s, running[0].turn);
    let out = pump(&mut core, t0);
    assert_eq!(
        out.errors,
        [
            (Correlation(2), Reason::SessionClosing),
            (Correlation(3), Reason::SessionClosing)
        ]
    );
    assert!(matches!(&out.turns[..], [t] if t.work == SessionWork::Disconnected));
}

#[test]
fn core_a_turn_running_after_its_session_ended_is_over_at_the_lifecycle_deadline_never_sooner() {
    let mut core = shard(64, false);
    let t0 = Instant::from_millis(1_000);
    let s = core.sessions(t0).open_session();
    core.sessions(t0)
        .packet(s, packet(1, "stuck"), true)
        .unwrap();
    let stuck = pump(&mut core, t0).turns[0].turn;
    // No deadline while the session is open: a callback may take its time.
    assert_eq!(core.poll_timeout(), None);
    let ended = t0 + Duration::from_secs(2);
    core.sessions(ended).connection_lost(s);
    assert!(pump(&mut core, ended).turns.is_empty());
    assert_eq!(core.poll_timeout(), Some(ended + DEADLINE));

    core.handle_timeout(ended + (DEADLINE - JUST));
    let out = pump(&mut core, ended + (DEADLINE - JUST));
    assert!(out.expired.is_empty() && out.turns.is_empty(), "{out:?}");
    assert_eq!(core.counters().get(FlowTrace::SessionTurnExpired), 0);

    let at = ended + DEADLINE;
    core.handle_timeout(at);
    let out = pump(&mut core, at);
    assert_eq!(out.expired, [stuck]);
    assert_eq!(core.counters().get(FlowTrace::SessionTurnExpired), 1);
    // The lane moved on: the disconnect turn runs, with a deadline of its
    // own from its start; the late end of the dropped turn moves nothing.
    let [disconnect] = &out.turns[..] else {
        panic!("{out:?}")
    };
    assert_eq!(disconnect.work, SessionWork::Disconnected);
    core.sessions(at).turn_done(s, stuck);
    assert_eq!(core.session_owner().lane_count(), 1);
    assert_eq!(core.poll_timeout(), Some(at + DEADLINE));
    core.handle_timeout(at + DEADLINE);
    let out = pump(&mut core, at + DEADLINE);
    assert_eq!(out.expired, [disconnect.turn]);
    assert_eq!(core.session_owner().lane_count(), 0);
}

#[test]
fn core_a_turn_that_ends_before_its_lifecycle_deadline_leaves_no_timer() {
    let mut core = shard(64, false);
    let t0 = Instant::ZERO;
    let s: SessionRid = core.sessions(t0).open_session();
    core.sessions(t0).connection_lost(s);
    let out = pump(&mut core, t0);
    let [disconnect] = &out.turns[..] else {
        panic!("{out:?}")
    };
    assert_eq!(core.poll_timeout(), Some(t0 + DEADLINE));
    core.sessions(t0).turn_done(s, disconnect.turn);
    assert_eq!(core.poll_timeout(), None);
    core.handle_timeout(t0 + 2 * DEADLINE);
    assert!(pump(&mut core, t0 + 2 * DEADLINE).expired.is_empty());
    assert_eq!(core.counters().get(FlowTrace::SessionTurnExpired), 0);
}
