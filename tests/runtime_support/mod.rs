//! A small game for the runtime contract tests: players as Actors in a lobby
//! (their Entry Spot) or in User Spots of the kinds "room" (SpotWide) and
//! "hall" (PerActor), and packet handlers that log in (bind), relay and
//! push. Everything runs over real loopback sockets.
#![allow(dead_code)]

mod fault;
// Used by the fault-injection tests only; every test crate compiles this module.
#[allow(unused_imports)]
pub use fault::FaultProxy;

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use zlink::api::{
    Actor, ActorContext, ActorMessage, AsyncTurn, CallId, ExecutionMode, IoBackend,
    LocationSnapshot, Node, NodeBuilder, NodeSettings, ObjectRole, Spot, SpotHandle, TimerId,
    TimerTick,
};
use zlink::client::Client;
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, ActorRef, Correlation, PacketKey, SpotId};
use zlink::net::handshake::ClusterSecret;
use zlink::store::{CountingStore, EmbeddedStore, LocationStore, MonotonicClock};
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use crate::bound;

/// Binds the actor named by the payload; replies "bound".
pub const LOGIN: PacketKey = PacketKey(1);
/// Relays to the actor named before ':' in the payload; the actor echoes.
pub const RELAY: PacketKey = PacketKey(2);
/// Relays; the actor pushes the payload (key PUSHED) and then replies.
pub const PUSH: PacketKey = PacketKey(3);
/// NotifyDisconnected for the actor named by the payload; replies "notified".
pub const NOTIFY: PacketKey = PacketKey(4);
/// Looks up (or creates) the actor named by the payload and keeps its
/// ActorRef in [`Observed::stash`], without binding; replies "stashed".
pub const STASH: PacketKey = PacketKey(5);
/// Binds the ActorRef in [`Observed::stash`]; replies "bound" or the error.
pub const BIND_STASHED: PacketKey = PacketKey(6);
/// `bind_or_get` of the ActorRef in [`Observed::stash`]; replies "id:generation".
pub const BIND_OR_GET_STASHED: PacketKey = PacketKey(7);
/// `find` of the actor named by the payload; replies "id:generation" or "none".
pub const FIND: PacketKey = PacketKey(8);
/// `bound`; replies the sorted "id:generation" list, comma-separated.
pub const BOUND: PacketKey = PacketKey(9);
/// Relays; the actor's handler blocks its node until [`Observed::release`].
pub const HOLD: PacketKey = PacketKey(10);
/// The session callback awaits [`Observed::gate`] (an async wait), then replies "unstalled".
pub const STALL: PacketKey = PacketKey(11);
/// Relays; the actor replies how many messages this instance has handled.
pub const COUNT: PacketKey = PacketKey(12);
/// Replies the index of the shard that owns the session.
pub const SHARD: PacketKey = PacketKey(13);
/// Relays; the actor's handler works a little (a short spin, so that two
/// handlers running at once would overlap) and echoes.
pub const WORK: PacketKey = PacketKey(14);
/// Creates (or finds) the actor `<spot>/<name>` named by the payload in the
/// User Spot the test put in [`Observed::spots`] under `<spot>`, from the
/// session (`Session::actor_in`), and binds it; replies "bound".
pub const ENTER: PacketKey = PacketKey(15);
/// Keeps the session's location snapshot of the actor named by the payload
/// in [`Observed::locations`]; replies "located" (or "none").
pub const LOCATE: PacketKey = PacketKey(16);
/// Relays a `<actor>:<member>:<data>` payload; the actor pushes it (key
/// PUSHED) to `<member>`'s bound session with `push_to_member`, then replies
/// "pushed" or the error.
pub const PUSH_MEMBER: PacketKey = PacketKey(17);
/// The key of pushes from actors.
/// Request: the player replies with its payload twice over.
pub const GROW_REPLY: PacketKey = PacketKey(18);
/// Request: the player pushes its payload twice over, then replies "pushed".
pub const GROW_PUSH: PacketKey = PacketKey(19);
/// Relays `<actor>:<period in ms>`: the player sets a repeating timer of that
/// period (first tick one period away) and replies its timer number; each
/// tick pushes `<timer>:<tick>` (key TICKED).
pub const TICK_START: PacketKey = PacketKey(20);
/// Relays: the player cancels its repeating timer and replies "stopped" (or
/// "none").
pub const TICK_STOP: PacketKey = PacketKey(21);
/// Relays `<actor>:<target>:<data>`: the player sends `<data>` one-way to the
/// Actor `<target>` (key CALLED) and replies "sent".
pub const CALL_SEND: PacketKey = PacketKey(22);
/// Relays `<actor>:<target>:<data>`: the player requests `<data>` of the
/// Actor `<target>` (key CALLED, 2 s deadline) and replies the call's number;
/// its outcome is pushed as `<call>:ok:<reply>` or `<call>:err:<reason>`
/// (key REPLIED).
pub const CALL_REQUEST: PacketKey = PacketKey(23);
/// Relays `<actor>:<target>:<data>`: the player makes a request of the
/// Actor `<target>` (key CALLED, 5 s deadline) whose reply its turn awaits
/// ([`AsyncTurn`]), then replies `awaited:<reply>` (or the error): an async
/// turn (docs/actors.md "Async turns").
pub const AWAIT_CALL: PacketKey = PacketKey(25);
/// Relays: the player's turn awaits [`Observed::gate`] (an application
/// future, a database call say), then replies `after-gate:<handled>`, the
/// messages its instance had handled when its continuation ran.
pub const AWAIT_GATE: PacketKey = PacketKey(26);
/// Relays: the player closes its bound session (`CloseReason::Application`)
/// and replies "closed", or the error (session-not-bound without a binding).
pub const CLOSE_SESSION: PacketKey = PacketKey(27);
/// The key of messages between players: the callee records the payload with
/// its sender (`<from>><payload>`, [`Observed::delivered`]) and replies
/// `echo:<payload>` — after awaiting [`Observed::gate`] when the payload
/// starts with `gate:`.
pub const CALLED: PacketKey = PacketKey(24);
pub const PUSHED: PacketKey = PacketKey(100);
/// The key of the duplicate-connection notice.
pub const REPLACED_NOTICE: PacketKey = PacketKey(101);
/// The key of the push an actor sends from `on_bound` (a join callback).
pub const JOINED: PacketKey = PacketKey(102);
/// The key of the second notice of a replacement callback that awaited the gate.
pub const REPLACED_AFTER_WAIT: PacketKey = PacketKey(103);
/// The key of the push a player's timer tick sends ([`TICK_START`]).
pub const TICKED: PacketKey = PacketKey(104);
/// The key of the push carrying a request's outcome ([`CALL_REQUEST`]).
pub const REPLIED: PacketKey = PacketKey(105);

pub const WAIT: Duration = Duration::from_secs(10);

/// The environment variable that picks the socket loop's backend for the
/// whole suite (`io_uring`, the default, `epoll` or `auto`): `.ci/run` runs
/// the runtime contract tests once per backend, one matrix (issue 8 item 3).
pub const IO_BACKEND_VAR: &str = "ZLINK_IO_BACKEND";

/// The backend the suite runs on; a name the setting does not know fails
/// the test rather than silently testing the default.
pub fn io_backend() -> IoBackend {
    std::env::var(IO_BACKEND_VAR).map_or(IoBackend::IoUring, |name| {
        name.parse()
            .unwrap_or_else(|e| panic!("{IO_BACKEND_VAR}: {e}"))
    })
}

/// The environment variable that picks how the suite's clients reach a
/// node (`tcp`, the default, or `websocket`): `.ci/run` runs the relay,
/// push, replacement and session contract tests once per transport, one
/// matrix (issue 22 item 1), as [`IO_BACKEND_VAR`] does for the backend.
pub const TRANSPORT_VAR: &str = "ZLINK_CLIENT_TRANSPORT";

/// How the suite's clients reach a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Frames on the STREAM port.
    Tcp,
    /// One frame per binary message on the WebSocket listener.
    WebSocket,
}

/// The transport the suite runs on; a name it does not know fails the test
/// rather than silently testing TCP.
pub fn transport() -> Transport {
    match std::env::var(TRANSPORT_VAR).as_deref() {
        Err(_) | Ok("tcp") => Transport::Tcp,
        Ok("websocket") => Transport::WebSocket,
        Ok(other) => panic!("{TRANSPORT_VAR}: {other:?} is not tcp or websocket"),
    }
}

/// A client of `node` over the suite's transport.
pub fn connect(node: &Node) -> Client {
    bound::arm();
    match transport() {
        Transport::Tcp => Client::connect(node.stream_addr().expect("the node listens")),
        Transport::WebSocket => Client::connect_websocket(&ws_url(node)),
    }
    .expect("connect")
}

/// The `ws://` URL of `node`'s WebSocket listener.
pub fn ws_url(node: &Node) -> String {
    let addr = node
        .websocket_addr()
        .expect("the node listens for WebSocket clients");
    format!("ws://{addr}/")
}

thread_local! {
    /// Set while a session callback's synchronous code runs (W1).
    pub static IN_SESSION_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// What the game observed, shared with the test thread.
#[derive(Default)]
pub struct Observed {
    pub disconnects: Mutex<Vec<String>>,
    pub replaced_callbacks: Mutex<Vec<(String, Instant)>>,
    pub handler_in_session_context: AtomicBool,
    pub session_callbacks_overlapped: AtomicBool,
    pub in_session_turn: AtomicBool,
    pub delivered: Mutex<Vec<Bytes>>,
    /// ActorIds whose `on_bound` ran, in order.
    pub bound_events: Mutex<Vec<String>>,
    /// The ActorRef that [`STASH`] found, or the test put there.
    pub stash: Mutex<Option<ActorRef>>,
    /// Sends an event when a blocking handler or callback starts.
    pub held_events: Mutex<Option<mpsc::Sender<String>>>,
    /// The blocking gate of [`HOLD`] and `blocking_disconnect`.
    hold: (Mutex<bool>, Condvar),
    /// The async gate of [`STALL`] and `replaced_awaits_gate`.
    pub gate: AsyncGate,
    /// What the session callbacks that log did, in order: "stall-end" (the
    /// [`STALL`] handler passed its gate), "disconnect" (the disconnect
    /// callback started), "disconnect-dropped" (the runtime dropped it).
    pub session_log: Mutex<Vec<(String, Instant)>>,
    /// Actor handlers and Spot callbacks running right now, on any shard.
    pub turns_running: AtomicUsize,
    /// The most of them that ever ran at once.
    pub turns_overlap_max: AtomicUsize,
    /// (SpotId, ActorId) of every `on_disconnect_actor` of a User Spot.
    pub spot_disconnects: Mutex<Vec<(String, String)>>,
    /// The location snapshots [`LOCATE`] saw, in order.
    pub locations: Mutex<Vec<LocationSnapshot>>,
    /// User Spots the [`ENTER`] handler creates actors into, by SpotId.
    pub spots: Mutex<HashMap<String, SpotHandle>>,
}

impl Observed {
    /// Opens the blocking gate: held handlers and callbacks return.
    pub fn release(&self) {
        *self.hold.0.lock().unwrap() = true;
        self.hold.1.notify_all();
    }

    /// Blocks the calling (shard) thread until [`Observed::release`], at most [`WAIT`].
    fn block(&self, what: &str) {
        self.held(what);
        let open = self.hold.0.lock().unwrap();
        let _open = self
            .hold
            .1
            .wait_timeout_while(open, WAIT, |open| !*open)
            .unwrap();
    }

    /// A receiver of the "a handler is now blocked / awaiting" events.
    pub fn held_receiver(&self) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        *self.held_events.lock().unwrap() = Some(tx);
        rx
    }

    fn held(&self, what: &str) {
        if let Some(events) = self.held_events.lock().unwrap().as_ref() {
            let _ = events.send(what.to_owned());
        }
    }

    /// Appends to [`Observed::session_log`] and reports it as held `what`.
    fn log(&self, what: &str) {
        self.session_log
            .lock()
            .unwrap()
            .push((what.to_owned(), Instant::now()));
        self.held(what);
    }

    /// Counts an Actor turn (handler or Spot callback) as running until the
    /// guard drops, and records the most that ever overlapped.
    fn turn(&self) -> TurnGuard<'_> {
        let running = self.turns_running.fetch_add(1, Ordering::SeqCst) + 1;
        self.turns_overlap_max.fetch_max(running, Ordering::SeqCst);
        TurnGuard(self)
    }

    /// The names in [`Observed::session_log`], in order.
    pub fn session_log(&self) -> Vec<String> {
        let log = self.session_log.lock().unwrap();
        log.iter().map(|(what, _)| what.clone()).collect()
    }
}

/// What the session's disconnect callback (`on_disconnect`) does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SessionDisconnect {
    /// None is registered.
    #[default]
    None,
    /// It logs "disconnect" and returns.
    Logs,
    /// It logs "disconnect" and never finishes; when the runtime drops it,
    /// it logs "disconnect-dropped".
    AwaitsForever,
}

/// A one-shot gate an async session callback awaits without blocking its
/// shard; the test thread opens it.
#[derive(Default)]
pub struct AsyncGate {
    open: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl AsyncGate {
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        for waker in self.wakers.lock().unwrap().drain(..) {
            waker.wake();
        }
    }

    pub async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.open.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            self.wakers.lock().unwrap().push(cx.waker().clone());
            if self.open.load(Ordering::SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

/// An Actor turn in progress (see [`Observed::turn`]).
struct TurnGuard<'a>(&'a Observed);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.0.turns_running.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Player {
    observed: Arc<Observed>,
    push_on_bound: bool,
    failing_restore: bool,
    handled: u64,
    /// Its repeating timer ([`TICK_START`]), kept in its state so that a
    /// relocated player can still cancel it.
    ticker: Option<TimerId>,
}

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        let _turn = self.observed.turn();
        if IN_SESSION_CALLBACK.with(Cell::get) {
            self.observed
                .handler_in_session_context
                .store(true, Ordering::SeqCst);
        }
        self.observed
            .delivered
            .lock()
            .unwrap()
            .push(message.payload.clone());
        self.handled += 1;
        if message.key == HOLD {
            self.observed.block("hold");
        }
        if message.key == WORK {
            let until = Instant::now() + Duration::from_micros(300);
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        if message.key == COUNT {
            return Some(Ok(Bytes::from(self.handled.to_string())));
        }
        if message.key == PUSH_MEMBER {
            let text = String::from_utf8_lossy(&message.payload).into_owned();
            let member = text.split(':').nth(1).unwrap_or_default();
            let Ok(member) = ActorId::new(member) else {
                return Some(Err(Reason::StaleLocation.into()));
            };
            if let Err(e) = ctx.push_to_member(&member, PUSHED, message.payload.clone()) {
                return Some(Err(e));
            }
            return Some(Ok(Bytes::from_static(b"pushed")));
        }
        if message.key == PUSH {
            if let Err(e) = ctx.push(PUSHED, message.payload.clone()) {
                return Some(Err(e));
            }
            return Some(Ok(Bytes::from_static(b"pushed")));
        }
        if message.key == CALLED {
            let from = message
                .from
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            let mut seen = format!("{from}>").into_bytes();
            seen.extend_from_slice(&message.payload);
            self.observed
                .delivered
                .lock()
                .unwrap()
                .push(Bytes::from(seen));
            let mut echo = b"echo:".to_vec();
            echo.extend_from_slice(&message.payload);
            // `gate:<data>`: the answer awaits the gate first (an async
            // turn of the callee, docs/actors.md "Async turns").
            if message.payload.starts_with(b"gate:") {
                let observed = Arc::clone(&self.observed);
                let waited = async move { observed.gate.wait().await };
                let turn = AsyncTurn::new(waited, move |_: &mut Player, _, ()| {
                    Some(Ok(Bytes::from(echo)))
                });
                return Some(ctx.suspend(turn).map(|()| Bytes::new()));
            }
            return Some(Ok(Bytes::from(echo)));
        }
        if message.key == CALL_SEND || message.key == CALL_REQUEST {
            let text = String::from_utf8_lossy(&message.payload).into_owned();
            let mut parts = text.splitn(3, ':');
            let (_, target, data) = (parts.next(), parts.next(), parts.next());
            let (Some(target), Some(data)) = (target, data) else {
                return Some(Err(Reason::MalformedRecord.into()));
            };
            let Ok(target) = ActorId::new(target) else {
                return Some(Err(Reason::MalformedRecord.into()));
            };
            let data = Bytes::from(data.to_owned());
            if message.key == CALL_SEND {
                return Some(
                    ctx.send(&target, CALLED, data)
                        .map(|()| Bytes::from_static(b"sent")),
                );
            }
            let deadline = Duration::from_secs(2);
            return Some(
                ctx.request(&target, CALLED, data, deadline)
                    .map(|call| Bytes::from(call.0.to_string())),
            );
        }
        if message.key == CLOSE_SESSION {
            let closed = ctx.close_session(zlink::wire::client::CloseReason::Application);
            return Some(closed.map(|()| Bytes::from_static(b"closed")));
        }
        if message.key == AWAIT_CALL {
            let text = String::from_utf8_lossy(&message.payload).into_owned();
            let mut parts = text.splitn(3, ':');
            let (_, target, data) = (parts.next(), parts.next(), parts.next());
            let (Some(Ok(target)), Some(data)) = (target.map(ActorId::new), data) else {
                return Some(Err(Reason::MalformedRecord.into()));
            };
            let data = Bytes::from(data.to_owned());
            let reply = ctx.request_reply(&target, CALLED, data, Duration::from_secs(5));
            let turn = AsyncTurn::new(
                reply,
                |me: &mut Player, _, outcome: Result<Bytes, Error>| {
                    me.handled += 1;
                    Some(outcome.map(|reply| Bytes::from([&b"awaited:"[..], &reply[..]].concat())))
                },
            );
            return Some(ctx.suspend(turn).map(|()| Bytes::new()));
        }
        if message.key == AWAIT_GATE {
            let observed = Arc::clone(&self.observed);
            let waited = async move { observed.gate.wait().await };
            let turn = AsyncTurn::new(waited, |me: &mut Player, _, ()| {
                Some(Ok(Bytes::from(format!("after-gate:{}", me.handled))))
            });
            return Some(ctx.suspend(turn).map(|()| Bytes::new()));
        }
        if message.key == TICK_START {
            let text = String::from_utf8_lossy(&message.payload).into_owned();
            let Some(Ok(ms)) = text.split(':').nth(1).map(str::parse::<u64>) else {
                return Some(Err(Reason::MalformedRecord.into()));
            };
            let period = Duration::from_millis(ms);
            return Some(ctx.set_repeating_timer(period, period).map(|timer| {
                self.ticker = Some(timer);
                Bytes::from(timer.0.to_string())
            }));
        }
        if message.key == TICK_STOP {
            let stopped = self.ticker.take().is_some_and(|t| ctx.cancel_timer(t));
            let reply: &'static [u8] = if stopped { b"stopped" } else { b"none" };
            return Some(Ok(Bytes::from_static(reply)));
        }
        let twice = || Bytes::from([&message.payload[..], &message.payload[..]].concat());
        if message.key == GROW_REPLY {
            return Some(Ok(twice()));
        }
        if message.key == GROW_PUSH {
            if let Err(e) = ctx.push(PUSHED, twice()) {
                return Some(Err(e));
            }
            return Some(Ok(Bytes::from_static(b"pushed")));
        }
        Some(Ok(message.payload))
    }

    /// Relocation carries the count of handled messages ([`COUNT`] shows
    /// it continues on the target) and, when it has one, its timer number.
    fn snapshot(&self) -> Option<Bytes> {
        let mut state = self.handled.to_be_bytes().to_vec();
        if let Some(timer) = self.ticker {
            state.extend_from_slice(&timer.0.to_be_bytes());
        }
        Some(Bytes::from(state))
    }

    fn restore(&mut self, state: Bytes) -> Result<(), Error> {
        if self.failing_restore {
            return Err(Reason::MalformedRecord.into());
        }
        let word = |at: usize| -> Result<u64, Error> {
            let bytes: [u8; 8] = state
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| Error::new(Reason::MalformedRecord))?;
            Ok(u64::from_be_bytes(bytes))
        };
        self.handled = word(0)?;
        self.ticker = match state.len() {
            8 => None,
            16 => Some(TimerId(word(8)?)),
            _ => return Err(Reason::MalformedRecord.into()),
        };
        Ok(())
    }

    fn on_reply(
        &mut self,
        ctx: &mut dyn ActorContext,
        call: CallId,
        outcome: Result<Bytes, Error>,
    ) {
        let _turn = self.observed.turn();
        let text = match outcome {
            Ok(reply) => format!("{}:ok:{}", call.0, String::from_utf8_lossy(&reply)),
            Err(error) => format!("{}:err:{:?}", call.0, error.reason()),
        };
        // A caller without a binding has nobody to tell: the outcome ran.
        let _ = ctx.push(REPLIED, Bytes::from(text));
    }

    fn on_timer(&mut self, ctx: &mut dyn ActorContext, tick: TimerTick) {
        let _turn = self.observed.turn();
        let text = format!("{}:{}", tick.timer.0, tick.tick);
        // A player without a binding has nobody to tell: the tick still ran.
        let _ = ctx.push(TICKED, Bytes::from(text));
    }

    fn on_bound(&mut self, ctx: &mut dyn ActorContext) {
        let id = ctx.actor_id().to_string();
        self.observed.bound_events.lock().unwrap().push(id.clone());
        if self.push_on_bound {
            let pushed = ctx.push(JOINED, Bytes::from(id));
            assert!(
                pushed.is_ok(),
                "a push from on_bound was refused: {pushed:?}"
            );
        }
    }
}

struct Lobby {
    observed: Arc<Observed>,
    failing: Option<String>,
    blocking: Option<String>,
    events: Mutex<mpsc::Sender<String>>,
}

impl Spot for Lobby {
    fn on_disconnect_actor(&self, actor: &ActorId) -> Result<(), Error> {
        self.observed
            .disconnects
            .lock()
            .unwrap()
            .push(actor.to_string());
        let _ = self.events.lock().unwrap().send(actor.to_string());
        if self.blocking.as_deref() == Some(actor.as_str()) {
            self.observed.block("disconnect");
        }
        if self.failing.as_deref() == Some(actor.as_str()) {
            return Err(Reason::InvalidConfiguration.into());
        }
        Ok(())
    }
}

/// A User Spot of the kinds "room" (SpotWide) and "hall" (PerActor): it
/// records its `on_disconnect_actor` calls.
struct Room {
    id: SpotId,
    observed: Arc<Observed>,
}

impl Spot for Room {
    fn on_disconnect_actor(&self, actor: &ActorId) -> Result<(), Error> {
        let _turn = self.observed.turn();
        self.observed
            .spot_disconnects
            .lock()
            .unwrap()
            .push((self.id.to_string(), actor.to_string()));
        Ok(())
    }
}

/// How the game is set up.
#[derive(Default, Clone)]
pub struct GameOptions {
    pub settings: Option<NodeSettings>,
    /// The replacement callback never reaches a terminal.
    pub replaced_never_finishes: bool,
    /// This actor's disconnect callback fails.
    pub failing_disconnect: Option<String>,
    /// Shards per node (default 1).
    pub shards: usize,
    /// This actor's disconnect callback blocks until [`Observed::release`].
    pub blocking_disconnect: Option<String>,
    /// Actors push [`JOINED`] from `on_bound`.
    pub push_on_bound: bool,
    /// The replacement callback sends its notice, awaits [`Observed::gate`],
    /// then sends [`REPLACED_AFTER_WAIT`] and finishes.
    pub replaced_awaits_gate: bool,
    /// The node's object role (default Server).
    pub client_role: bool,
    /// The node's NodeGeneration (default: from the wall clock).
    pub node_generation: Option<u64>,
    /// The session's disconnect callback.
    pub session_disconnect: SessionDisconnect,
    /// Find peers in the store's membership (`NodeBuilder::discover_peers`).
    pub discover_peers: bool,
    /// A relocated player's restore fails on this node.
    pub failing_restore: bool,
    /// Further builder settings, applied last (a node's meshes).
    pub configure: Option<Arc<dyn Fn(NodeBuilder) -> NodeBuilder + Send + Sync>>,
}

/// A started game node, over any Location Store (the embedded one unless
/// the test says otherwise).
pub struct Game<S: LocationStore = EmbeddedStore> {
    pub rid: u64,
    pub node: Node,
    pub store: Arc<CountingStore<S>>,
    pub observed: Arc<Observed>,
    pub disconnect_events: mpsc::Receiver<String>,
}

impl<S: LocationStore> Game<S> {
    pub fn addr(&self) -> SocketAddr {
        self.node.stream_addr().expect("the node listens")
    }

    /// A client over the suite's transport ([`TRANSPORT_VAR`]).
    pub fn client(&self) -> Client {
        connect(&self.node)
    }
}

fn actor_name(payload: &Bytes) -> Result<ActorId, Error> {
    let text = std::str::from_utf8(payload).map_err(|_| Error::new(Reason::StaleLocation))?;
    let name = text.split(':').next().unwrap_or(text);
    ActorId::new(name).map_err(|_| Error::new(Reason::StaleLocation))
}

pub fn start_game(options: GameOptions) -> Game {
    let store = Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )));
    start_node(1, store, options, &[])
}

/// The cluster secret of the test meshes.
pub fn secret() -> ClusterSecret {
    ClusterSecret::new(b"zlink-test-cluster-secret".to_vec()).unwrap()
}

/// Starts nodes `1..=n` sharing one embedded store, linked pairwise; waits
/// until every link is up.
pub fn start_mesh(n: u64, options: GameOptions) -> Vec<Game> {
    let store = Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )));
    // The lower RID dials, so start from the highest.
    let mut started: Vec<Game> = Vec::new();
    for rid in (1..=n).rev() {
        let peers: Vec<(u64, SocketAddr)> = started
            .iter()
            .map(|g| (g.rid, g.node.peer_addr().unwrap()))
            .collect();
        started.push(start_node(rid, Arc::clone(&store), options.clone(), &peers));
    }
    started.reverse();
    for a in &started {
        for b in &started {
            if a.rid != b.rid {
                let _wait = bound::waiting(format_args!("link {} -> {}", a.rid, b.rid));
                assert!(
                    a.node.wait_linked(b.rid, WAIT),
                    "link {} -> {} did not come up",
                    a.rid,
                    b.rid
                );
            }
        }
    }
    started
}

pub fn start_node<S: LocationStore + 'static>(
    rid: u64,
    store: Arc<CountingStore<S>>,
    options: GameOptions,
    peers: &[(u64, SocketAddr)],
) -> Game<S> {
    // Every test that starts a game is under the bound from here.
    bound::arm();
    let observed = Arc::new(Observed::default());
    let (events_tx, disconnect_events) = mpsc::channel();
    let lobby = Arc::new(Lobby {
        observed: Arc::clone(&observed),
        failing: options.failing_disconnect.clone(),
        blocking: options.blocking_disconnect.clone(),
        events: Mutex::new(events_tx),
    });
    let o = Arc::clone(&observed);
    let push_on_bound = options.push_on_bound;
    let failing_restore = options.failing_restore;
    let role = if options.client_role {
        ObjectRole::Client
    } else {
        ObjectRole::Server
    };
    let mut builder = with_transport(NodeBuilder::new(rid))
        .listen("127.0.0.1:0".parse().unwrap())
        .peer_listen("127.0.0.1:0".parse().unwrap())
        .cluster_secret(secret())
        .object_role(role)
        .location_store(store.clone())
        .enable_actor_dispatch()
        .actor_type("player", lobby, move |_| {
            Box::new(Player {
                observed: Arc::clone(&o),
                push_on_bound,
                failing_restore,
                handled: 0,
                ticker: None,
            })
        });
    for (kind, mode) in [
        ("room", ExecutionMode::SpotWide),
        ("hall", ExecutionMode::PerActor),
    ] {
        let o = Arc::clone(&observed);
        builder = builder.spot_kind(kind, mode, move |id| {
            Arc::new(Room {
                id: id.clone(),
                observed: Arc::clone(&o),
            })
        });
    }
    if let Some(generation) = options.node_generation {
        builder = builder.node_generation(generation);
    }
    for &(peer, addr) in peers {
        builder = builder.peer(peer, addr);
    }
    // A node takes links only from its peers (docs/threading.md "Node
    // links"): a test node expects every lower RID, its dialers, unless the
    // test configures its meshes and peers itself.
    if options.configure.is_none() {
        for lower in (1..rid).filter(|r| peers.iter().all(|&(p, _)| p != *r)) {
            builder = builder.accept_peer(lower);
        }
    }
    if options.discover_peers {
        builder = builder.discover_peers();
    }
    if let Some(configure) = &options.configure {
        builder = configure(builder);
    }
    // Tests run unpinned, one shard per node unless asked (DESIGN "Threads").
    let mut settings = options.settings.clone().unwrap_or_default();
    settings.shards = options.shards.max(1);
    settings.pin_cores = false;
    settings.io_backend = io_backend();
    builder = builder.settings(settings);
    let o = Arc::clone(&observed);
    let entering = Arc::clone(&observed);
    let builder = builder
        .on_packet(LOGIN, move |session, packet| {
            let o = Arc::clone(&o);
            async move {
                let _turn = enter(&o);
                let id = actor_name(&packet.payload)?;
                let player = session.actor("player", &id).await?;
                session.actors().bind(player).await?;
                session.reply(packet, Ok(Bytes::from_static(b"bound")))
            }
        })
        .on_packet(RELAY, relay_handler(Arc::clone(&observed)))
        .on_packet(PUSH, relay_handler(Arc::clone(&observed)))
        .on_packet(HOLD, relay_handler(Arc::clone(&observed)))
        .on_packet(COUNT, relay_handler(Arc::clone(&observed)))
        .on_packet(WORK, relay_handler(Arc::clone(&observed)))
        .on_packet(PUSH_MEMBER, relay_handler(Arc::clone(&observed)))
        .on_packet(GROW_REPLY, relay_handler(Arc::clone(&observed)))
        .on_packet(GROW_PUSH, relay_handler(Arc::clone(&observed)))
        .on_packet(TICK_START, relay_handler(Arc::clone(&observed)))
        .on_packet(TICK_STOP, relay_handler(Arc::clone(&observed)))
        .on_packet(CALL_SEND, relay_handler(Arc::clone(&observed)))
        .on_packet(CALL_REQUEST, relay_handler(Arc::clone(&observed)))
        .on_packet(AWAIT_CALL, relay_handler(Arc::clone(&observed)))
        .on_packet(AWAIT_GATE, relay_handler(Arc::clone(&observed)))
        .on_packet(CLOSE_SESSION, relay_handler(Arc::clone(&observed)))
        .on_packet(ENTER, move |session, packet| {
            let o = Arc::clone(&entering);
            async move {
                let id = actor_name(&packet.payload)?;
                let spot_name = id.as_str().split('/').next().unwrap_or_default();
                let spot = o.spots.lock().unwrap().get(spot_name).cloned();
                let spot = spot.ok_or(Error::new(Reason::NoSpotKind))?;
                let actor = session.actor_in(&spot, "player", &id).await?;
                session.actors().bind(actor).await?;
                session.reply(packet, Ok(Bytes::from_static(b"bound")))
            }
        })
        .on_packet(NOTIFY, |session, packet| async move {
            let id = actor_name(&packet.payload)?;
            let bound = session
                .actors()
                .find(&id)
                .ok_or(Error::new(Reason::SessionNotBound))?;
            bound.notify_disconnected().await?;
            session.reply(packet, Ok(Bytes::from_static(b"notified")))
        });
    let builder = stash_handlers(builder, &observed);
    let o = Arc::clone(&observed);
    let never = options.replaced_never_finishes;
    let awaits = options.replaced_awaits_gate;
    let builder = builder.on_replaced(move |session, actor| {
        let o = Arc::clone(&o);
        async move {
            session.send_to_client(
                REPLACED_NOTICE,
                Bytes::copy_from_slice(actor.as_str().as_bytes()),
            )?;
            if never {
                std::future::pending::<()>().await;
            }
            if awaits {
                o.held("replaced");
                o.gate.wait().await;
                session.send_to_client(
                    REPLACED_AFTER_WAIT,
                    Bytes::copy_from_slice(actor.as_str().as_bytes()),
                )?;
            }
            o.replaced_callbacks
                .lock()
                .unwrap()
                .push((actor.to_string(), Instant::now()));
            Ok(())
        }
    });
    let builder = with_session_disconnect(builder, &observed, options.session_disconnect);
    let node = builder.start().expect("the game node starts");
    Game {
        rid,
        node,
        store,
        observed,
        disconnect_events,
    }
}

/// A node of the suite listens for WebSocket clients too when they are the
/// suite's transport.
pub fn with_transport(builder: NodeBuilder) -> NodeBuilder {
    match transport() {
        Transport::Tcp => builder,
        Transport::WebSocket => builder.websocket_listen("127.0.0.1:0".parse().unwrap()),
    }
}

/// Logs "disconnect-dropped" when the disconnect callback's future is dropped.
struct DropLog(Arc<Observed>);

impl Drop for DropLog {
    fn drop(&mut self) {
        self.0.log("disconnect-dropped");
    }
}

fn with_session_disconnect(
    builder: NodeBuilder,
    observed: &Arc<Observed>,
    mode: SessionDisconnect,
) -> NodeBuilder {
    if mode == SessionDisconnect::None {
        return builder;
    }
    let o = Arc::clone(observed);
    builder.on_disconnect(move |_session| {
        let o = Arc::clone(&o);
        async move {
            o.log("disconnect");
            if mode == SessionDisconnect::AwaitsForever {
                let _dropped = DropLog(o);
                std::future::pending::<()>().await;
            }
            Ok(())
        }
    })
}

fn describe(actor: &zlink::ids::ActorRef) -> String {
    format!("{}:{}", actor.id, actor.generation.0)
}

/// The handlers of [`STASH`], [`BIND_STASHED`], [`BIND_OR_GET_STASHED`],
/// [`FIND`], [`BOUND`], [`SHARD`] and [`STALL`].
fn stash_handlers(builder: NodeBuilder, observed: &Arc<Observed>) -> NodeBuilder {
    let o = Arc::clone(observed);
    let builder = builder.on_packet(STASH, move |session, packet| {
        let o = Arc::clone(&o);
        async move {
            // "type/id" names another actor type; plain "id" is a player.
            let text = String::from_utf8_lossy(&packet.payload).into_owned();
            let (kind, name) = text.split_once('/').unwrap_or(("player", &text));
            let id = ActorId::new(name).map_err(|_| Error::new(Reason::StaleLocation))?;
            let found = session.actor(kind, &id).await?;
            *o.stash.lock().unwrap() = Some(found);
            session.reply(packet, Ok(Bytes::from_static(b"stashed")))
        }
    });
    let o = Arc::clone(observed);
    let builder = builder.on_packet(BIND_STASHED, move |session, packet| {
        let o = Arc::clone(&o);
        async move {
            let stashed = o.stash.lock().unwrap().clone().expect("a stashed ActorRef");
            session.actors().bind(stashed).await?;
            session.reply(packet, Ok(Bytes::from_static(b"bound")))
        }
    });
    let o = Arc::clone(observed);
    let builder = builder.on_packet(BIND_OR_GET_STASHED, move |session, packet| {
        let o = Arc::clone(&o);
        async move {
            let stashed = o.stash.lock().unwrap().clone().expect("a stashed ActorRef");
            let bound = session.actors().bind_or_get(stashed).await?;
            session.reply(packet, Ok(Bytes::from(describe(&bound.actor_ref()))))
        }
    });
    let builder = builder.on_packet(FIND, |session, packet| async move {
        let id = actor_name(&packet.payload)?;
        let found = session
            .actors()
            .find(&id)
            .map_or_else(|| "none".to_owned(), |b| describe(&b.actor_ref()));
        session.reply(packet, Ok(Bytes::from(found)))
    });
    let builder = builder.on_packet(BOUND, |session, packet| async move {
        let mut all: Vec<String> = session
            .actors()
            .bound()
            .iter()
            .map(|b| describe(&b.actor_ref()))
            .collect();
        all.sort();
        session.reply(packet, Ok(Bytes::from(all.join(","))))
    });
    let o = Arc::clone(observed);
    let builder = builder.on_packet(LOCATE, move |session, packet| {
        let o = Arc::clone(&o);
        async move {
            let id = actor_name(&packet.payload)?;
            let Some(bound) = session.actors().find(&id) else {
                return session.reply(packet, Ok(Bytes::from_static(b"none")));
            };
            o.locations.lock().unwrap().push(bound.location());
            session.reply(packet, Ok(Bytes::from_static(b"located")))
        }
    });
    let builder = builder.on_packet(SHARD, |session, packet| async move {
        let shard = session.shard().to_string();
        session.reply(packet, Ok(Bytes::from(shard)))
    });
    let o = Arc::clone(observed);
    builder.on_packet(STALL, move |session, packet| {
        let o = Arc::clone(&o);
        async move {
            o.held("stall");
            o.gate.wait().await;
            o.log("stall-end");
            session.reply(packet, Ok(Bytes::from_static(b"unstalled")))
        }
    })
}

/// Marks a session callback's turn (W1), across its awaits, until dropped.
struct InTurn<'a>(&'a Observed);

fn enter(o: &Observed) -> InTurn<'_> {
    if o.in_session_turn.swap(true, Ordering::SeqCst) {
        o.session_callbacks_overlapped.store(true, Ordering::SeqCst);
    }
    InTurn(o)
}

impl Drop for InTurn<'_> {
    fn drop(&mut self) {
        self.0.in_session_turn.store(false, Ordering::SeqCst);
    }
}

/// Runs `f` as synchronous session-callback code: an Actor handler run from
/// inside it would see the flag (W1).
fn in_callback_context<T>(f: impl FnOnce() -> T) -> T {
    IN_SESSION_CALLBACK.with(|flag| flag.set(true));
    let out = f();
    IN_SESSION_CALLBACK.with(|flag| flag.set(false));
    out
}

/// Returns Pending once, so that a callback really suspends mid-turn.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}

fn relay_handler(
    observed: Arc<Observed>,
) -> impl Fn(
    zlink::api::Session,
    zlink::api::Packet,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Error>>>>
       + Send
       + Sync
       + 'static {
    move |session, packet| {
        let o = Arc::clone(&observed);
        Box::pin(async move {
            let _turn = enter(&o);
            // Find the binding in the turn's first poll (the runtime starts
            // no turn on a closing session), then really suspend mid-turn.
            let id = actor_name(&packet.payload)?;
            let bound = session
                .actors()
                .find(&id)
                .ok_or(Error::new(Reason::SessionNotBound))?;
            yield_once().await;
            in_callback_context(|| bound.relay(packet))
        })
    }
}

/// Creates the SpotWide User Spot `room` of kind "room" and registers it
/// in [`Observed::spots`], so that [`ENTER`] creates Actors into it.
pub fn room(game: &Game, room: &str) -> SpotHandle {
    let spot = game
        .node
        .create_spot("room", &SpotId::new(room).unwrap())
        .unwrap();
    game.observed
        .spots
        .lock()
        .unwrap()
        .insert(room.to_owned(), spot.clone());
    spot
}

/// Logs in as `actor` on a fresh client.
pub fn login<S: LocationStore>(game: &Game<S>, actor: &str) -> Client {
    let mut client = game.client();
    let _wait = bound::waiting(format_args!("the login of {actor:?} on node {}", game.rid));
    let reply = client
        .request(LOGIN, Bytes::copy_from_slice(actor.as_bytes()), WAIT)
        .expect("login");
    assert_eq!(reply, Bytes::from_static(b"bound"));
    client
}

/// The shard a matrix test puts its sessions on: the last one, so that
/// with two shards a session's records to another node (links live on
/// shard 0) or to an Actor on shard 0 take the cross-shard hop.
pub fn session_shard(shards: usize) -> u16 {
    u16::try_from(shards - 1).unwrap()
}

/// The shard a matrix test puts its Actors on: on the session's node the
/// other one than [`session_shard`] (0), on another node the last one, away
/// from the link shard 0. Either way, with two shards every record between
/// session and Actor crosses shards at least once.
pub fn actor_shard(shards: usize, same_node: bool) -> u16 {
    if same_node {
        0
    } else {
        session_shard(shards)
    }
}

/// `prefix` if the Actor of that name lives on `shard` of `shards` (by
/// ActorId placement), else the first `prefix-k` that does.
pub fn actor_on(prefix: &str, shard: u16, shards: usize) -> String {
    let shards = u16::try_from(shards).unwrap();
    std::iter::once(prefix.to_owned())
        .chain((1..).map(|k| format!("{prefix}-{k}")))
        .find(|name| id(name).shard(shards) == shard)
        .unwrap()
}

/// A client whose session the kernel gave to `shard` of the node
/// (SO_REUSEPORT spreads connections by their ports): connects until one
/// lands there, asserting it with [`SHARD`] (its correlation 1).
pub fn client_on(game: &Game, shard: u16) -> Client {
    for _ in 0..64 {
        let mut client = game.client();
        let reply = client.request(SHARD, Bytes::new(), WAIT).expect("shard");
        if reply == shard.to_string() {
            return client;
        }
    }
    panic!("64 connections in a row missed shard {shard}");
}

/// Logs in as `actor` from a session on `shard` (correlations 1 and 2).
pub fn login_on(game: &Game, actor: &str, shard: u16) -> Client {
    let mut client = client_on(game, shard);
    let reply = client
        .request(LOGIN, Bytes::copy_from_slice(actor.as_bytes()), WAIT)
        .expect("login");
    assert_eq!(reply, Bytes::from_static(b"bound"));
    client
}

/// Runs a contract test with one and with two shards per node (issue 3 item
/// 9): `fn name(shards: usize) { .. }` becomes the tests `name::one_shard`
/// and `name::two_shards`, so `cargo test name` runs both.
#[allow(unused_macros)]
macro_rules! shard_matrix {
    ($(#[$meta:meta])* fn $name:ident($shards:ident: usize $(,)?) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($shards: usize) $body

            #[test]
            fn one_shard() {
                run(1);
            }

            #[test]
            fn two_shards() {
                run(2);
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use shard_matrix;

pub fn payload(actor: &str, data: &str) -> Bytes {
    Bytes::from(format!("{actor}:{data}"))
}

/// Which way a record crosses a [`LinkTap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the dialing node (the lower RID) to the node behind the tap.
    ToAcceptor,
    /// From the node behind the tap to the dialing node.
    ToDialer,
}

/// What a tap does with one record.
#[derive(Clone, Copy, Debug)]
pub enum TapAction {
    /// Forward it.
    Forward,
    /// Drop it: the record is lost on the way.
    Drop,
    /// Forward it and keep a copy for [`LinkTap::replay`] (a late duplicate).
    Keep,
    /// Keep it back until [`LinkTap::replay`] forwards it (a slow delivery;
    /// later records in that direction pass it).
    Hold,
    /// Forward the record as rewritten by the function.
    Rewrite(fn(zlink::wire::node::NodeRecord) -> zlink::wire::node::NodeRecord),
}

#[derive(Default)]
struct TapState {
    actions: HashMap<(Direction, u8), TapAction>,
    kept: Vec<(Direction, Vec<u8>)>,
    /// Every record frame after the handshake, as it arrived.
    frames: Vec<(Direction, Vec<u8>)>,
    /// When the tap read each record (direction, command), in order.
    seen_at: Vec<(Direction, u8, Instant)>,
    writers: HashMap<Direction, Arc<Mutex<std::net::TcpStream>>>,
}

/// A TCP proxy between two nodes' link endpoints that reads the frames
/// crossing it: the command byte of every record after the handshake; it can
/// drop, duplicate later, or rewrite records by command.
pub struct LinkTap {
    pub addr: SocketAddr,
    pub commands: Arc<Mutex<Vec<u8>>>,
    /// (direction, command) of every record after the handshake.
    pub records: Arc<Mutex<Vec<(Direction, u8)>>>,
    state: Arc<Mutex<TapState>>,
}

impl LinkTap {
    /// What to do from now on with records of `command` going `direction`.
    pub fn set(&self, direction: Direction, command: u8, action: TapAction) {
        self.state
            .lock()
            .unwrap()
            .actions
            .insert((direction, command), action);
    }

    /// Closes the tapped link both ways (FIN to both nodes), as a peer
    /// process that dies does: each node sees its link go down.
    pub fn cut(&self) {
        let state = self.state.lock().unwrap();
        for writer in state.writers.values() {
            let _ = writer.lock().unwrap().shutdown(std::net::Shutdown::Both);
        }
    }

    /// How many records of `command` crossed (or were dropped) going `direction`.
    pub fn count(&self, direction: Direction, command: u8) -> usize {
        self.records
            .lock()
            .unwrap()
            .iter()
            .filter(|&&r| r == (direction, command))
            .count()
    }

    /// The frames (length prefix included) of `command` that arrived going
    /// `direction`, in order, whatever the tap then did with them.
    pub fn frames(&self, direction: Direction, command: u8) -> Vec<Vec<u8>> {
        let state = self.state.lock().unwrap();
        state
            .frames
            .iter()
            .filter(|(d, f)| *d == direction && f[4] == command)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// When the tap read the first record of `command` going `direction`:
    /// after the sending node sent it, so after anything that node did
    /// before sending it (a timer it armed, say).
    pub fn first_seen(&self, direction: Direction, command: u8) -> Option<Instant> {
        let state = self.state.lock().unwrap();
        state
            .seen_at
            .iter()
            .find(|&&(d, c, _)| d == direction && c == command)
            .map(|&(_, _, at)| at)
    }

    /// Writes `frame` as is into the link going `direction`, as if the
    /// sending node had written it.
    pub fn inject(&self, direction: Direction, frame: &[u8]) {
        use std::io::Write;
        let writer = Arc::clone(&self.state.lock().unwrap().writers[&direction]);
        writer.lock().unwrap().write_all(frame).unwrap();
    }

    /// Sends every kept copy again, in order; returns how many.
    pub fn replay(&self) -> usize {
        use std::io::Write;
        let mut state = self.state.lock().unwrap();
        let kept = std::mem::take(&mut state.kept);
        for (direction, frame) in &kept {
            let writer = Arc::clone(&state.writers[direction]);
            writer.lock().unwrap().write_all(frame).unwrap();
        }
        kept.len()
    }
}

/// Proxies one link connection to `target`, recording record command bytes
/// in both directions (the dialer's first two frames and the acceptor's first
/// frame are the handshake).
pub fn link_tap(target: SocketAddr) -> LinkTap {
    use std::io::{Read, Write};
    bound::arm();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let commands = Arc::new(Mutex::new(Vec::new()));
    let records = Arc::new(Mutex::new(Vec::new()));
    let state = Arc::new(Mutex::new(TapState::default()));
    let tap = LinkTap {
        addr,
        commands: Arc::clone(&commands),
        records: Arc::clone(&records),
        state: Arc::clone(&state),
    };
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(inbound) = inbound else { return };
            let Ok(outbound) = std::net::TcpStream::connect(target) else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let pipe = |mut from: std::net::TcpStream,
                        to: std::net::TcpStream,
                        skip: usize,
                        direction: Direction| {
                let to = Arc::new(Mutex::new(to));
                state
                    .lock()
                    .unwrap()
                    .writers
                    .insert(direction, Arc::clone(&to));
                let seen = Arc::clone(&commands);
                let records = Arc::clone(&records);
                let state = Arc::clone(&state);
                std::thread::spawn(move || {
                    let mut pending: Vec<u8> = Vec::new();
                    let mut frames = 0usize;
                    let mut chunk = [0u8; 16 * 1024];
                    loop {
                        let n = match from.read(&mut chunk) {
                            Ok(0) | Err(_) => {
                                let _ = to.lock().unwrap().shutdown(std::net::Shutdown::Write);
                                return;
                            }
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&chunk[..n]);
                        let mut out: Vec<u8> = Vec::new();
                        while pending.len() >= 5 {
                            let len = u32::from_be_bytes([
                                pending[0], pending[1], pending[2], pending[3],
                            ]) as usize;
                            if pending.len() < 4 + len {
                                break;
                            }
                            let frame: Vec<u8> = pending.drain(..4 + len).collect();
                            if frames < skip {
                                frames += 1;
                                out.extend_from_slice(&frame);
                                continue;
                            }
                            frames += 1;
                            let command = frame[4];
                            seen.lock().unwrap().push(command);
                            records.lock().unwrap().push((direction, command));
                            let mut state = state.lock().unwrap();
                            state.frames.push((direction, frame.clone()));
                            state.seen_at.push((direction, command, Instant::now()));
                            let action = state
                                .actions
                                .get(&(direction, command))
                                .copied()
                                .unwrap_or(TapAction::Forward);
                            match action {
                                TapAction::Forward => out.extend_from_slice(&frame),
                                TapAction::Drop => {}
                                TapAction::Keep => {
                                    out.extend_from_slice(&frame);
                                    state.kept.push((direction, frame));
                                }
                                TapAction::Hold => state.kept.push((direction, frame)),
                                TapAction::Rewrite(rewrite) => {
                                    let record = zlink::wire::node::NodeRecord::decode(
                                        Bytes::copy_from_slice(&frame[4..]),
                                        &zlink::wire::DecodeLimits::default(),
                                    )
                                    .expect("the tap decodes the record it rewrites");
                                    let mut encoded = bytes::BytesMut::new();
                                    rewrite(record).encode(&mut encoded);
                                    out.extend_from_slice(&encoded);
                                }
                            }
                        }
                        if !out.is_empty() && to.lock().unwrap().write_all(&out).is_err() {
                            return;
                        }
                    }
                });
            };
            pipe(
                inbound.try_clone().unwrap(),
                outbound.try_clone().unwrap(),
                2,
                Direction::ToAcceptor,
            );
            pipe(outbound, inbound, 1, Direction::ToDialer);
        }
    });
    tap
}

/// Waits until `condition` holds, at most [`WAIT`]; panics with `what` otherwise.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let _wait = bound::waiting(what);
    let deadline = Instant::now() + WAIT;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// Waits until the node's flow counter for `event` reaches `at_least`.
pub fn wait_counter<S: LocationStore>(
    game: &Game<S>,
    event: zlink::core::trace::FlowTrace,
    at_least: u64,
) {
    wait_until(
        &format!("{event} >= {at_least} on node {}", game.rid),
        || game.node.flow_counters().get(event) >= at_least,
    );
}

/// A fresh counting store over an embedded store (leases of 60 s).
pub fn new_store() -> Arc<CountingStore<EmbeddedStore>> {
    Arc::new(CountingStore::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(60),
    )))
}

/// The id of a test actor.
pub fn id(name: &str) -> ActorId {
    ActorId::new(name).unwrap()
}

/// Sends `key` with `payload` as a request and expects the typed error.
pub fn expect_error(client: &mut Client, key: PacketKey, payload: &str) -> Error {
    let _wait = bound::waiting(format_args!("the error to {key:?} {payload:?}"));
    match client.request(key, Bytes::copy_from_slice(payload.as_bytes()), WAIT) {
        Err(zlink::client::ClientError::Remote(error)) => error,
        other => panic!("expected a typed error for {key:?} {payload:?}, got {other:?}"),
    }
}

/// Sends `key` with `payload` as a request and expects a reply.
pub fn expect_reply(client: &mut Client, key: PacketKey, payload: &str) -> Bytes {
    let _wait = bound::waiting(format_args!("the reply to {key:?} {payload:?}"));
    client
        .request(key, Bytes::copy_from_slice(payload.as_bytes()), WAIT)
        .unwrap_or_else(|e| panic!("{key:?} {payload:?}: {e:?}"))
}

/// A STREAM connection driven frame by frame (keepalive included), over
/// TCP or, with [`Raw::to`], over the suite's transport.
pub struct Raw {
    stream: TcpStream,
    ws: Option<Box<tungstenite::WebSocket<TcpStream>>>,
    buf: BytesMut,
}

impl Raw {
    /// A TCP connection to a STREAM port.
    pub fn connect(addr: SocketAddr) -> Self {
        bound::arm();
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            ws: None,
            buf: BytesMut::new(),
        }
    }

    /// A connection to `node` over the suite's transport ([`TRANSPORT_VAR`]).
    pub fn to(node: &Node) -> Self {
        match transport() {
            Transport::Tcp => Self::connect(node.stream_addr().unwrap()),
            Transport::WebSocket => {
                let stream = TcpStream::connect(node.websocket_addr().unwrap()).unwrap();
                stream.set_nodelay(true).unwrap();
                stream.set_read_timeout(Some(WAIT)).unwrap();
                let (ws, _) =
                    tungstenite::client::client(ws_url(node), stream.try_clone().unwrap())
                        .expect("websocket upgrade");
                Self {
                    stream,
                    ws: Some(Box::new(ws)),
                    buf: BytesMut::new(),
                }
            }
        }
    }

    pub fn send(&mut self, frames: &[ClientFrame]) {
        let mut out = BytesMut::new();
        for frame in frames {
            frame.encode(&mut out);
            if let Some(ws) = &mut self.ws {
                let message = tungstenite::Message::Binary(out.split().freeze());
                ws.write(message).unwrap();
            }
        }
        match &mut self.ws {
            Some(ws) => ws.flush().unwrap(),
            None => self.stream.write_all(&out).unwrap(),
        }
    }

    pub fn next(&mut self) -> ClientFrame {
        let _wait = bound::waiting("a frame from the node (Raw::next)");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(frame) = ClientFrame::decode_from(&mut self.buf, &DecodeLimits::default())
                .expect("a well-formed frame")
            {
                return frame;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no frame from the server");
            self.stream.set_read_timeout(Some(left)).unwrap();
            if let Some(ws) = &mut self.ws {
                match ws.read().expect("a websocket message") {
                    tungstenite::Message::Binary(message) => self.buf.extend_from_slice(&message),
                    tungstenite::Message::Close(close) => {
                        panic!("the server closed the connection ({close:?})")
                    }
                    _ => {}
                }
                continue;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Ends the client's side of the connection (a FIN): the node sees the
    /// client go away, and may still send until it closes its side.
    pub fn shutdown_write(&mut self) {
        self.stream.shutdown(std::net::Shutdown::Write).unwrap();
    }

    /// The next frame, or `None` once the node closed the connection
    /// without another frame.
    pub fn next_or_end(&mut self) -> Option<ClientFrame> {
        assert!(self.ws.is_none(), "next_or_end reads TCP connections only");
        let _wait = bound::waiting("a frame or the close from the node (Raw::next_or_end)");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(frame) = ClientFrame::decode_from(&mut self.buf, &DecodeLimits::default())
                .expect("a well-formed frame")
            {
                return Some(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no frame and no close from the server");
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    pub fn request(key: PacketKey, correlation: u32, payload: Bytes) -> ClientFrame {
        ClientFrame::Request {
            key,
            correlation: Correlation(correlation),
            payload,
        }
    }

    /// Sends a keepalive probe and reads up to its answer: every frame sent
    /// before it has been taken off the socket and put on its lane by then.
    /// Returns the frames that came first.
    pub fn ping(&mut self, nonce: u64) -> Vec<ClientFrame> {
        let _wait = bound::waiting(format_args!("the pong to ping {nonce}"));
        self.send(&[ClientFrame::Ping { nonce }]);
        let mut before = Vec::new();
        loop {
            match self.next() {
                ClientFrame::Pong { nonce: n } if n == nonce => return before,
                other => before.push(other),
            }
        }
    }

    pub fn login(&mut self, actor: &str) {
        let _wait = bound::waiting(format_args!("the login of {actor:?} (Raw::login)"));
        self.send(&[Self::request(
            LOGIN,
            1,
            Bytes::copy_from_slice(actor.as_bytes()),
        )]);
        match self.next() {
            ClientFrame::Reply {
                correlation: Correlation(1),
                payload,
            } => assert_eq!(payload, Bytes::from_static(b"bound")),
            other => panic!("login: {other:?}"),
        }
    }
}

/// How many messages `game`'s sessions hold under relocation seals now
/// (§8.1; the public gauge `zlink_held_messages{hold="session_seal"}`).
pub fn held_under_seal<S: LocationStore>(game: &Game<S>) -> u64 {
    let text = game.node.metrics().encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("zlink_held_messages{") && l.contains(r#"hold="session_seal""#))
        .unwrap_or_else(|| panic!("no held-messages gauge in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}
