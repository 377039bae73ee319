//! Session callbacks over real sockets (§1 step 1, §7, §10; issue 3 item 2):
//! the connect callback authenticates before any packet handler runs and
//! keeps per-session state for them; the disconnect callback runs once
//! after the connection ended, never overlapping another callback of the
//! session, and never holding up the framework's own disconnect work.

mod bound;
mod runtime_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use runtime_support::*;
use zlink::api::{Node, NodeBuilder, NodeSettings};
use zlink::core::trace::FlowTrace;
use zlink::error::{Error, Reason};
use zlink::ids::{Correlation, PacketKey};
use zlink::wire::client::{ClientFrame, CloseReason};

/// The hello's key: the first packet reaches the connect callback whatever
/// its key, even one with no packet handler (like this one).
const HELLO: PacketKey = PacketKey(7);
/// Replies the authenticated player's name, or "anonymous".
const WHOAMI: PacketKey = PacketKey(1);

/// The player a session authenticated as: its connect callback's attribute.
struct Player(String);

/// What the STREAM-only node's callbacks saw.
#[derive(Default)]
struct Seen {
    /// "connect", "disconnect:<player>", in order.
    events: Mutex<Option<mpsc::Sender<String>>>,
    /// How many times a packet handler ran.
    handled: AtomicUsize,
    /// The connect callback awaits it.
    gate: AsyncGate,
}

impl Seen {
    fn event(&self, what: String) {
        if let Some(events) = self.events.lock().unwrap().as_ref() {
            let _ = events.send(what);
        }
    }
}

/// A STREAM-only node (no object role, no Location Store) whose connect
/// callback accepts any hello but "intruder", once its gate opens.
fn stream_node() -> (Node, Arc<Seen>, mpsc::Receiver<String>) {
    let seen = Arc::new(Seen::default());
    let (tx, events) = mpsc::channel();
    *seen.events.lock().unwrap() = Some(tx);
    let (on_connect, on_packet, on_disconnect) =
        (Arc::clone(&seen), Arc::clone(&seen), Arc::clone(&seen));
    let node = stream_builder(one_shard())
        .on_connect(move |session, hello| {
            let seen = Arc::clone(&on_connect);
            async move {
                seen.event("connect".to_owned());
                seen.gate.wait().await;
                let name = String::from_utf8_lossy(&hello.payload).into_owned();
                if name == "intruder" {
                    return Err(Error::new(Reason::NotAuthenticated));
                }
                session.set_attribute(Player(name.clone()));
                session.reply(hello, Ok(Bytes::from(format!("welcome {name}"))))
            }
        })
        .on_packet(WHOAMI, move |session, packet| {
            let seen = Arc::clone(&on_packet);
            async move {
                seen.handled.fetch_add(1, Ordering::SeqCst);
                let name = player(&session);
                session.reply(packet, Ok(Bytes::from(name)))
            }
        })
        .on_disconnect(move |session| {
            let seen = Arc::clone(&on_disconnect);
            async move {
                seen.event(format!("disconnect:{}", player(&session)));
                Ok(())
            }
        })
        .start()
        .expect("a STREAM-only node with session callbacks starts");
    (node, seen, events)
}

/// The settings of a node of one shard on the suite's io backend.
fn one_shard() -> NodeSettings {
    NodeSettings {
        shards: 1,
        pin_cores: false,
        io_backend: io_backend(),
        ..NodeSettings::default()
    }
}

/// A STREAM-only node (no object role, no Location Store) listening on
/// loopback with `settings`, for its callbacks to be set.
fn stream_builder(settings: NodeSettings) -> NodeBuilder {
    with_transport(NodeBuilder::new(1))
        .listen("127.0.0.1:0".parse().unwrap())
        .settings(settings)
}

fn player(session: &zlink::api::Session) -> String {
    session
        .attribute::<Player>()
        .map_or_else(|| "anonymous".to_owned(), |p| p.0.clone())
}

/// The reply to request `correlation`, with `payload`.
fn reply(correlation: u32, payload: &str) -> ClientFrame {
    ClientFrame::Reply {
        correlation: Correlation(correlation),
        payload: Bytes::copy_from_slice(payload.as_bytes()),
    }
}

fn request(key: PacketKey, correlation: u32, payload: &str) -> ClientFrame {
    Raw::request(key, correlation, Bytes::copy_from_slice(payload.as_bytes()))
}

#[test]
fn the_connect_callback_runs_before_any_packet_handler_and_its_attribute_reaches_them() {
    let (node, seen, events) = stream_node();
    let mut client = Raw::to(&node);
    client.send(&[request(HELLO, 1, "player-7"), request(WHOAMI, 2, "")]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "connect");
    // Both frames are on the session's lane once the probe is answered;
    // the packet waits behind the connect callback, which awaits.
    assert_eq!(client.ping(1), vec![]);
    assert_eq!(seen.handled.load(Ordering::SeqCst), 0);
    seen.gate.open();
    assert_eq!(client.next(), reply(1, "welcome player-7"));
    assert_eq!(client.next(), reply(2, "player-7"));
    // The disconnect callback still sees the session's attribute.
    drop(client);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "disconnect:player-7");
}

/// A session callback that ends in its first poll runs in the shard's loop
/// and needs no task; a session's lane task is spawned by its first
/// callback that awaits and goes with its lane, even when the callbacks
/// after it (the disconnect callback here) end in their first poll
/// (docs/PERFORMANCE.md "Turns that end in their first poll").
#[test]
fn a_lane_task_lives_from_the_first_callback_that_awaits_until_the_lane_goes() {
    let (node, seen, events) = stream_node();
    let mut awaits = Raw::to(&node);
    awaits.send(&[request(HELLO, 1, "player-7")]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "connect");
    until_tasks(
        &node,
        1,
        "the connect callback awaits its gate in its lane's task",
    );
    seen.gate.open();
    assert_eq!(awaits.next(), reply(1, "welcome player-7"));
    // With the gate open, a second session's connect callback and packet
    // handler end in their first poll: its lane gets no task (the first
    // session's is the one alive while both sessions are open).
    let mut inline = Raw::to(&node);
    inline.send(&[request(HELLO, 1, "player-8"), request(WHOAMI, 2, "")]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "connect");
    assert_eq!(inline.next(), reply(1, "welcome player-8"));
    assert_eq!(inline.next(), reply(2, "player-8"));
    assert_eq!(tasks(&node), 1);
    // The first session's disconnect callback ends in its first poll; its
    // lane goes with it, and the lane's task with the lane.
    drop(awaits);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "disconnect:player-7");
    until_tasks(&node, 0, "the lane task goes with its lane");
    drop(inline);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "disconnect:player-8");
}

/// The tasks alive on `node`'s shards' executors, from its metrics.
fn tasks(node: &Node) -> u64 {
    shard_gauge(node, "zlink_shard_tasks")
}

/// Scrapes `node` until its shards keep `want` tasks, within [`WAIT`]: a
/// scrape reads the count the shard published at the end of its last loop
/// turn, which may be before the turn that spawned or ended one.
fn until_tasks(node: &Node, want: u64, what: &str) {
    let _wait = bound::waiting(what);
    let deadline = Instant::now() + WAIT;
    let mut seen = tasks(node);
    while seen != want {
        assert!(
            Instant::now() < deadline,
            "{what}: {seen} tasks after {WAIT:?}, not {want}"
        );
        seen = tasks(node);
    }
}

#[test]
fn a_failing_connect_callback_closes_with_its_reason_and_no_packet_handler_runs() {
    let (node, seen, events) = stream_node();
    let mut client = Raw::to(&node);
    client.send(&[request(HELLO, 1, "intruder"), request(WHOAMI, 2, "")]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "connect");
    assert_eq!(client.ping(1), vec![]);
    seen.gate.open();
    match client.next() {
        ClientFrame::Error {
            correlation: Correlation(1),
            error,
        } => assert_eq!(error.reason(), Reason::NotAuthenticated),
        other => panic!("the hello got {other:?}"),
    }
    assert_eq!(
        client.next(),
        ClientFrame::Close {
            reason: CloseReason::AuthenticationFailed
        }
    );
    // The disconnect callback is the session's last turn: the packet that
    // waited behind the hello has had its turn by then, without its handler.
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "disconnect:anonymous");
    assert_eq!(seen.handled.load(Ordering::SeqCst), 0);
}

#[test]
fn on_disconnect_runs_once_after_the_running_packet_callback_finished() {
    let game = start_game(GameOptions {
        session_disconnect: SessionDisconnect::Logs,
        ..GameOptions::default()
    });
    let held = game.observed.held_receiver();
    let mut witness = game.client();
    let mut client = login(&game, "player-1");
    let _stalled = client.start_request(STALL, Bytes::new()).unwrap();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "stall");
    drop(client);
    // The framework notifies the bound Actor while the packet callback
    // still awaits (§7, §10)...
    assert_eq!(
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        "player-1"
    );
    // ...while the session's disconnect callback waits for that callback
    // to finish: they never overlap (W1). (Another session's round trip
    // shows the shard has run its turns since it saw the close.)
    expect_reply(&mut witness, SHARD, "");
    assert_eq!(game.observed.session_log(), Vec::<String>::new());
    game.observed.gate.open();
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "stall-end");
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect");
    assert_eq!(game.observed.session_log(), ["stall-end", "disconnect"]);
    // It does not run again: another session's round trip after it shows
    // the shard has run the turns queued behind it (no sleep window).
    expect_reply(&mut witness, SHARD, "");
    assert_eq!(
        held.try_recv(),
        Err(std::sync::mpsc::TryRecvError::Empty),
        "the disconnect callback ran again: {:?}",
        game.observed.session_log()
    );
    // Its lane went with its last turn: the witness's is the one left.
    assert_eq!(session_lanes(&game), 1);
}

/// The session callback lanes `game`'s shards keep, from its metrics.
fn session_lanes(game: &Game) -> u64 {
    shard_gauge(&game.node, "zlink_shard_session_lanes")
}

/// The sum over `node`'s shards of the gauge `name`, from its metrics.
fn shard_gauge(node: &Node, name: &str) -> u64 {
    let prefix = format!("{name}{{");
    node.metrics()
        .encode()
        .lines()
        .filter(|line| line.starts_with(&prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn spot_callbacks_run_while_on_disconnect_awaits_forever_and_it_is_dropped_at_the_deadline() {
    let deadline = Duration::from_millis(500);
    let game = start_game(GameOptions {
        session_disconnect: SessionDisconnect::AwaitsForever,
        settings: Some(NodeSettings {
            disconnect_deadline: deadline,
            ..NodeSettings::default()
        }),
        ..GameOptions::default()
    });
    let held = game.observed.held_receiver();
    let mut client = login(&game, "player-a");
    assert_eq!(
        expect_reply(&mut client, LOGIN, "player-b"),
        Bytes::from_static(b"bound")
    );
    let closed = Instant::now();
    drop(client);
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect");
    // The framework's notifications do not wait for the application's
    // disconnect callback (§7: it does not iterate bound Actors; §10).
    let mut notified = vec![
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
        game.disconnect_events.recv_timeout(WAIT).unwrap(),
    ];
    notified.sort();
    assert_eq!(notified, ["player-a", "player-b"]);
    // The callback that never finishes is dropped at the §7 lifecycle
    // deadline (counted from its start, which follows the close), never
    // sooner.
    assert_eq!(held.recv_timeout(WAIT).unwrap(), "disconnect-dropped");
    let log = game.observed.session_log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    let dropped = log[1].1 - closed;
    assert!(dropped >= deadline, "dropped {dropped:?} after the close");
    assert!(dropped < Duration::from_secs(5), "{dropped:?}");
    // The shard keeps serving sessions, and the dropped callback's lane
    // went with it: the new session's is the one left.
    let mut again = login(&game, "player-a");
    assert_eq!(
        expect_reply(&mut again, RELAY, "player-a:still"),
        payload("player-a", "still")
    );
    assert_eq!(session_lanes(&game), 1);
}

#[test]
fn a_connection_over_max_sessions_is_closed_with_session_limit_and_counted() {
    // Given a node of two shards that holds at most 2 sessions, over both,
    let game = start_game(GameOptions {
        settings: Some(NodeSettings {
            max_sessions: 2,
            ..NodeSettings::default()
        }),
        shards: 2,
        ..GameOptions::default()
    });
    // with two sessions open (each answered, so each was accepted),
    let mut open: Vec<zlink::client::Client> = (0..2)
        .map(|_| {
            let mut client = game.client();
            expect_reply(&mut client, SHARD, "");
            client
        })
        .collect();
    // When a third client connects, Then it is told SessionLimit and closed,
    let mut third = game.client();
    match third.next_event(WAIT) {
        Ok(Some(zlink::client::ClientEvent::Closed(Some(CloseReason::SessionLimit)))) => {}
        other => panic!("the third connection got {other:?}"),
    }
    // the refusal is counted, and the open sessions are served as before.
    wait_counter(&game, FlowTrace::SessionLimitRefused, 1);
    for client in &mut open {
        expect_reply(client, SHARD, "");
    }
    // When one session ends, a new client is admitted once its disconnect
    // procedure is done (until then it is refused like the third).
    drop(open.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut client = game.client();
        match client.request(SHARD, Bytes::new(), WAIT) {
            Ok(_) => break,
            Err(zlink::client::ClientError::Closed(Some(CloseReason::SessionLimit)))
            | Err(zlink::client::ClientError::Io(_)) => {
                assert!(
                    Instant::now() < deadline,
                    "no session admitted after one ended"
                );
            }
            Err(other) => panic!("a client after the end of a session got {other:?}"),
        }
    }
    expect_reply(&mut open[0], SHARD, "");
}

/// Review of the first-poll change (3bca008): a turn that ends in its
/// first poll in the shard loop's last `start_session_turns` moves its lane
/// on in the core, and the lane's next turn waits in the core's output; a
/// shard whose wait did not look at that output parked up to
/// `IDLE_WAIT_MAX` (100 ms) with a turn ready, about every third turn.
/// Pipelined one-way messages (no reply, so no write completion wakes the
/// wait) then took some 2 s for 60, where they take milliseconds. The
/// marker request after them is answered once all were handled (one lane,
/// in order); the bound is a liveness bound, not a speed: a tenth of what
/// the stall cost, and far above what the work takes on a loaded machine.
#[test]
fn pipelined_messages_whose_handlers_end_in_their_first_poll_are_not_held_up() {
    let (node, seen, _events) = stream_node();
    seen.gate.open();
    let mut client = Raw::to(&node);
    client.send(&[request(HELLO, 1, "player-7")]);
    assert_eq!(client.next(), reply(1, "welcome player-7"));
    const N: usize = 60;
    let mut frames: Vec<ClientFrame> = (0..N)
        .map(|_| ClientFrame::Message {
            key: WHOAMI,
            payload: Bytes::new(),
        })
        .collect();
    frames.push(request(WHOAMI, 2, ""));
    let started = Instant::now();
    client.send(&frames);
    assert_eq!(client.next(), reply(2, "player-7"));
    let took = started.elapsed();
    assert_eq!(seen.handled.load(Ordering::SeqCst), N + 1);
    assert!(
        took < Duration::from_millis(1000),
        "{N} pipelined messages handled in their first poll took {took:?}"
    );
}

/// Sets its flag when dropped: a callback's future holds it.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Review of the first-poll change (3bca008): §7/W1, a packet handler
/// still awaiting at its lifecycle deadline is over and "the shard drops
/// the callback"; `on_disconnect` never overlaps it. The disconnect turn
/// the core hands out next now runs in its first poll in the shard loop,
/// before the lane task (woken by the abort) has dropped the expired
/// handler's future: the disconnect callback sees the handler still alive.
#[test]
fn the_disconnect_callback_runs_after_an_expired_handler_was_dropped() {
    const STUCK: PacketKey = PacketKey(3);
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let never = Arc::new(AsyncGate::default());
    let (tx, events) = mpsc::channel::<String>();
    let tx = Arc::new(Mutex::new(tx));
    let (on_stuck, on_disconnect) = (Arc::clone(&tx), Arc::clone(&tx));
    let (flag_set, flag_read) = (Arc::clone(&dropped), Arc::clone(&dropped));
    let node = stream_builder(NodeSettings {
        disconnect_deadline: Duration::from_millis(200),
        ..one_shard()
    })
    .on_packet(STUCK, move |_session, _packet| {
        let (tx, never) = (Arc::clone(&on_stuck), Arc::clone(&never));
        let guard = DropFlag(Arc::clone(&flag_set));
        async move {
            let _guard = guard;
            let _ = tx.lock().unwrap().send("stuck".to_owned());
            never.wait().await;
            Ok(())
        }
    })
    .on_disconnect(move |_session| {
        let (tx, flag) = (Arc::clone(&on_disconnect), Arc::clone(&flag_read));
        // The callback's synchronous part, before its future: it does
        // not overlap the expired handler either.
        let built = flag.load(Ordering::SeqCst);
        async move {
            let dropped = flag.load(Ordering::SeqCst);
            let _ = tx
                .lock()
                .unwrap()
                .send(format!("disconnect: handler dropped {built} {dropped}"));
            Ok(())
        }
    })
    .start()
    .expect("a STREAM-only node starts");
    let mut client = Raw::to(&node);
    client.send(&[ClientFrame::Message {
        key: STUCK,
        payload: Bytes::new(),
    }]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "stuck");
    drop(client);
    assert_eq!(
        events.recv_timeout(WAIT).unwrap(),
        "disconnect: handler dropped true true"
    );
}

/// Pending once (waking itself), then ready: a callback that awaits.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await;
}

/// Review of the first-poll change (3bca008): a stopped node closes its
/// clients' connections (its shard's handle goes with its tasks,
/// shard.rs `run`). A turn whose callback awaited now waits in its lane's
/// mailbox as its future, which holds the `Session`, so an `Rc` of the
/// shard's handle: the lane (in the handle's state) holds the mailbox, so
/// a turn still there when the shard stops is a cycle, and the handle,
/// its reactor and every connection of the shard leak.
#[test]
fn a_node_stopped_while_awaiting_turns_wait_in_their_mailbox_closes_its_connections() {
    const SLOW: PacketKey = PacketKey(4);
    let node = stream_builder(one_shard())
        .on_packet(SLOW, move |session, packet| async move {
            yield_once().await;
            session.reply(packet, Ok(Bytes::new()))
        })
        .start()
        .expect("a STREAM-only node starts");
    let addr = node.stream_addr().unwrap();
    let mut clients: Vec<Raw> = (0..8).map(|_| Raw::connect(addr)).collect();
    for client in &mut clients {
        let frames: Vec<ClientFrame> = (0..1000).map(|i| request(SLOW, i + 1, "")).collect();
        client.send(&frames);
    }
    // Every client has answers coming: its turns run, each awaiting once.
    for client in &mut clients {
        let first = client.next();
        assert!(matches!(first, ClientFrame::Reply { .. }), "{first:?}");
    }
    drop(node);
    for client in &mut clients {
        // Answers already sent may come first; then the connection ends.
        while client.next_or_end().is_some() {}
    }
}

/// A callback future larger than its inline room (512 bytes: the heap
/// case of the callback slot's SmallBox) ends in its first poll or awaits
/// in its lane's task alike, and its state survives the move to the task
/// (review of 3bca008; passes).
#[test]
fn a_callback_future_larger_than_its_inline_room_runs_inline_and_after_an_await() {
    const BIG: PacketKey = PacketKey(5);
    let node = stream_builder(one_shard())
        .on_packet(BIG, move |session, packet| async move {
            let mut big = [0u8; 2048];
            big[0] = 1;
            big[2047] = packet.payload.first().copied().unwrap_or(9);
            if packet.payload.is_empty() {
                yield_once().await;
            }
            let sum: u32 = big.iter().map(|b| u32::from(*b)).sum();
            session.reply(packet, Ok(Bytes::from(sum.to_string())))
        })
        .start()
        .expect("a STREAM-only node starts");
    let mut client = Raw::to(&node);
    client.send(&[
        Raw::request(BIG, 1, Bytes::from_static(&[4])),
        Raw::request(BIG, 2, Bytes::new()),
        Raw::request(BIG, 3, Bytes::from_static(&[6])),
    ]);
    assert_eq!(client.next(), reply(1, "5"));
    assert_eq!(client.next(), reply(2, "10"));
    assert_eq!(client.next(), reply(3, "7"));
}

/// §10 Shutdown with a packet handler that awaits forever in its lane's
/// task: at the drain's deadline the session closes (Shutdown), the
/// handler is dropped at its lifecycle deadline, the disconnect callback
/// runs, the lane and its task go, and the shutdown returns (review of
/// 3bca008; passes).
#[test]
fn a_shutdown_with_a_handler_awaiting_forever_runs_the_disconnect_callback_and_returns() {
    const STUCK: PacketKey = PacketKey(3);
    let never = Arc::new(AsyncGate::default());
    let (tx, events) = mpsc::channel::<String>();
    let tx = Arc::new(Mutex::new(tx));
    let (on_stuck, on_disconnect) = (Arc::clone(&tx), Arc::clone(&tx));
    let node = stream_builder(NodeSettings {
        disconnect_deadline: Duration::from_millis(200),
        shutdown_deadline: Duration::from_millis(300),
        ..one_shard()
    })
    .on_packet(STUCK, move |_session, _packet| {
        let (tx, never) = (Arc::clone(&on_stuck), Arc::clone(&never));
        async move {
            let _ = tx.lock().unwrap().send("stuck".to_owned());
            never.wait().await;
            Ok(())
        }
    })
    .on_disconnect(move |_session| {
        let tx = Arc::clone(&on_disconnect);
        async move {
            let _ = tx.lock().unwrap().send("disconnect".to_owned());
            Ok(())
        }
    })
    .start()
    .expect("a STREAM-only node starts");
    let mut client = Raw::connect(node.stream_addr().unwrap());
    client.send(&[request(STUCK, 1, "")]);
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "stuck");
    let started = Instant::now();
    let stopper = std::thread::spawn(move || node.shutdown());
    assert_eq!(
        client.next_or_end(),
        Some(ClientFrame::Close {
            reason: CloseReason::Shutdown
        })
    );
    assert_eq!(events.recv_timeout(WAIT).unwrap(), "disconnect");
    stopper.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the shutdown took {:?}",
        started.elapsed()
    );
}
