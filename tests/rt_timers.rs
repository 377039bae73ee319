//! An Actor's timers over real sockets (docs/actors.md "Timers"): a
//! repeating timer's ticks reach the client numbered 1, 2, 3 … with no gap
//! and no repeat while its Actor is relocated back and forth 50 times, none
//! before its time; a cancelled timer ticks no more; a timer that cannot be
//! set is a typed error.

mod bound;
mod runtime_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::RelocateTo;
use zlink::client::{Client, ClientEvent};
use zlink::error::Reason;

type Tick = ((u64, u64), Instant);

/// Reads events until `until` says stop; the TICKED pushes among them, as
/// (timer, tick), each with when it was read, go to `ticks`.
fn read_ticks(
    client: &mut Client,
    ticks: &mut Vec<Tick>,
    mut until: impl FnMut(&ClientEvent) -> bool,
) {
    loop {
        let event = client.next_event(WAIT).unwrap();
        let event = event.expect("an event within the wait");
        if let ClientEvent::Push { key, payload } = &event {
            if *key == TICKED {
                let text = String::from_utf8(payload.to_vec()).unwrap();
                let (timer, tick) = text.split_once(':').unwrap();
                ticks.push((
                    (timer.parse().unwrap(), tick.parse().unwrap()),
                    Instant::now(),
                ));
            }
        }
        if let ClientEvent::Closed(reason) = event {
            panic!("closed: {reason:?}");
        }
        if until(&event) {
            return;
        }
    }
}

/// The ticks that arrive before the reply to a marker request sent now.
fn ticks_until_marker(client: &mut Client, ticks: &mut Vec<Tick>) {
    let marker = client
        .start_request(RELAY, payload("ticker", "marker"))
        .unwrap();
    read_ticks(
        client,
        ticks,
        |e| matches!(e, ClientEvent::Reply { correlation, .. } if *correlation == marker),
    );
}

#[test]
fn t1_a_repeating_timer_ticks_contiguously_and_never_early_across_50_relocations() {
    let mesh = start_mesh(3, GameOptions::default());
    mesh[1].node.create_actor("player", &id("ticker")).unwrap();
    let mut client = login(&mesh[0], "ticker");
    let period = Duration::from_millis(10);
    // Measured before the timer is armed: tick n cannot reach the client
    // before `before + n × period` if it never fires early.
    let before = Instant::now();
    let timer: u64 = std::str::from_utf8(
        &client
            .request(TICK_START, payload("ticker", "10"), WAIT)
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();

    // The player moves between nodes 2 and 3, 50 times, each move once a
    // tick has arrived since the last, so that it ticks all along.
    let mut ticks = Vec::new();
    for round in 0..50 {
        read_ticks(
            &mut client,
            &mut ticks,
            |e| matches!(e, ClientEvent::Push { key, .. } if *key == TICKED),
        );
        let (from, to) = if round % 2 == 0 { (1, 3) } else { (2, 2) };
        mesh[from]
            .node
            .relocate(&id("ticker"), RelocateTo::Node(to))
            .unwrap_or_else(|e| panic!("move {round}: {e}"));
    }
    let moves = mesh[1]
        .node
        .flow_counters()
        .get(zlink::api::FlowTrace::RelocationCommitted)
        + mesh[2]
            .node
            .flow_counters()
            .get(zlink::api::FlowTrace::RelocationCommitted);
    let stopped = client
        .request(TICK_STOP, payload("ticker", "stop"), WAIT)
        .unwrap();
    assert_eq!(stopped, Bytes::from_static(b"stopped"));

    // Every tick up to the stop, then none: a marker request sent after
    // the stop comes back with no tick before it that was not counted.
    ticks_until_marker(&mut client, &mut ticks);
    assert_eq!(moves, 50);
    assert!(ticks.len() >= 50, "only {} ticks", ticks.len());
    for (n, &((t, tick), at)) in ticks.iter().enumerate() {
        assert_eq!(t, timer);
        assert_eq!(
            tick,
            n as u64 + 1,
            "ticks {:?}",
            ticks.iter().map(|t| t.0 .1)
        );
        let due = before + period * u32::try_from(tick).unwrap();
        assert!(at >= due, "tick {tick} arrived before its time");
    }
    let mut after = Vec::new();
    ticks_until_marker(&mut client, &mut after);
    assert!(after.is_empty(), "ticks after the stop: {after:?}");
}

#[test]
fn t2_destroying_an_actor_ends_its_timers_and_none_fires_on_its_next_incarnation() {
    let mesh = start_mesh(2, GameOptions::default());
    let first = mesh[1].node.create_actor("player", &id("ticker")).unwrap();
    let mut client = login(&mesh[0], "ticker");
    // Given the first incarnation's repeating timer, ticking every 10 ms,
    let old: u64 = std::str::from_utf8(
        &client
            .request(TICK_START, payload("ticker", "10"), WAIT)
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    let mut ticks = Vec::new();
    for _ in 0..3 {
        read_ticks(
            &mut client,
            &mut ticks,
            |e| matches!(e, ClientEvent::Push { key, .. } if *key == TICKED),
        );
    }
    assert!(ticks.iter().all(|&((t, _), _)| t == old));
    // when the Actor is destroyed and created again, a new incarnation,
    mesh[1].node.destroy_actor(&id("ticker")).unwrap();
    let second = mesh[1].node.create_actor("player", &id("ticker")).unwrap();
    assert_ne!(second.generation, first.generation);
    let mut again = login(&mesh[0], "ticker");
    // which sets a timer of its own,
    let new: u64 = std::str::from_utf8(
        &again
            .request(TICK_START, payload("ticker", "10"), WAIT)
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    // then the new session sees that timer's ticks alone, numbered from 1
    // with no gap: by its fifth tick (50 ms, five of the old period) the
    // old timer, had it survived, would have fired on the new incarnation
    // too, numbered past 3 or twice per number.
    let mut after = Vec::new();
    while after.len() < 5 {
        read_ticks(
            &mut again,
            &mut after,
            |e| matches!(e, ClientEvent::Push { key, .. } if *key == TICKED),
        );
    }
    ticks_until_marker(&mut again, &mut after);
    let seen: Vec<(u64, u64)> = after.iter().map(|&(tick, _)| tick).collect();
    let expected: Vec<(u64, u64)> = (1..=seen.len() as u64).map(|n| (new, n)).collect();
    assert_eq!(
        seen, expected,
        "the old timer ({old}) fired on the new incarnation"
    );
}

#[test]
fn a_timer_that_cannot_be_set_reaches_the_client_as_a_typed_error() {
    let mesh = start_mesh(2, GameOptions::default());
    mesh[1].node.create_actor("player", &id("ticker")).unwrap();
    let mut client = login(&mesh[0], "ticker");
    let error = expect_error(&mut client, TICK_START, "ticker:0");
    assert_eq!(error.reason(), Reason::TimerPeriodTooShort);
    assert_eq!(
        client
            .request(TICK_STOP, payload("ticker", "stop"), WAIT)
            .unwrap(),
        Bytes::from_static(b"none")
    );
}
