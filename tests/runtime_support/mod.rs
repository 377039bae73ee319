//! A small game for the runtime contract tests: players as Actors in a lobby
//! Spot, and packet handlers that log in (bind), relay and push. Everything
//! runs over real loopback sockets.
#![allow(dead_code)]

use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use zlink::api::{
    Actor, ActorContext, ActorMessage, Node, NodeBuilder, NodeSettings, ObjectRole, Spot,
};
use zlink::client::Client;
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, PacketKey};
use zlink::net::handshake::ClusterSecret;
use zlink::store::{CountingStore, EmbeddedStore, MonotonicClock};

/// Binds the actor named by the payload; replies "bound".
pub const LOGIN: PacketKey = PacketKey(1);
/// Relays to the actor named before ':' in the payload; the actor echoes.
pub const RELAY: PacketKey = PacketKey(2);
/// Relays; the actor pushes the payload (key PUSHED) and then replies.
pub const PUSH: PacketKey = PacketKey(3);
/// NotifyDisconnected for the actor named by the payload; replies "notified".
pub const NOTIFY: PacketKey = PacketKey(4);
/// The key of pushes from actors.
pub const PUSHED: PacketKey = PacketKey(100);
/// The key of the duplicate-connection notice.
pub const REPLACED_NOTICE: PacketKey = PacketKey(101);

pub const WAIT: Duration = Duration::from_secs(10);

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
}

struct Player {
    observed: Arc<Observed>,
}

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
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
        if message.key == PUSH {
            if let Err(e) = ctx.push(PUSHED, message.payload.clone()) {
                return Some(Err(e));
            }
            return Some(Ok(Bytes::from_static(b"pushed")));
        }
        Some(Ok(message.payload))
    }
}

struct Lobby {
    observed: Arc<Observed>,
    failing: Option<String>,
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
        if self.failing.as_deref() == Some(actor.as_str()) {
            return Err(Reason::InvalidConfiguration.into());
        }
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
}

pub struct Game {
    pub rid: u64,
    pub node: Node,
    pub store: Arc<CountingStore<EmbeddedStore>>,
    pub observed: Arc<Observed>,
    pub disconnect_events: mpsc::Receiver<String>,
}

impl Game {
    pub fn addr(&self) -> SocketAddr {
        self.node.stream_addr().expect("the node listens")
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr()).expect("connect")
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

pub fn start_node(
    rid: u64,
    store: Arc<CountingStore<EmbeddedStore>>,
    options: GameOptions,
    peers: &[(u64, SocketAddr)],
) -> Game {
    let observed = Arc::new(Observed::default());
    let (events_tx, disconnect_events) = mpsc::channel();
    let lobby = Arc::new(Lobby {
        observed: Arc::clone(&observed),
        failing: options.failing_disconnect.clone(),
        events: Mutex::new(events_tx),
    });
    let o = Arc::clone(&observed);
    let mut builder = NodeBuilder::new(rid)
        .listen("127.0.0.1:0".parse().unwrap())
        .peer_listen("127.0.0.1:0".parse().unwrap())
        .cluster_secret(secret())
        .object_role(ObjectRole::Server)
        .location_store(store.clone())
        .enable_actor_dispatch()
        .actor_type("player", lobby, move |_| {
            Box::new(Player {
                observed: Arc::clone(&o),
            })
        });
    for &(peer, addr) in peers {
        builder = builder.peer(peer, addr);
    }
    // Tests run unpinned, one shard per node unless asked (DESIGN "Threads").
    let mut settings = options.settings.clone().unwrap_or_default();
    settings.shards = options.shards.max(1);
    settings.pin_cores = false;
    builder = builder.settings(settings);
    let o = Arc::clone(&observed);
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
        .on_packet(NOTIFY, |session, packet| async move {
            let id = actor_name(&packet.payload)?;
            let bound = session
                .actors()
                .find(&id)
                .ok_or(Error::new(Reason::SessionNotBound))?;
            bound.notify_disconnected().await?;
            session.reply(packet, Ok(Bytes::from_static(b"notified")))
        });
    let o = Arc::clone(&observed);
    let never = options.replaced_never_finishes;
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
            o.replaced_callbacks
                .lock()
                .unwrap()
                .push((actor.to_string(), Instant::now()));
            Ok(())
        }
    });
    let node = builder.start().expect("the game node starts");
    Game {
        rid,
        node,
        store,
        observed,
        disconnect_events,
    }
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
            yield_once().await;
            let id = actor_name(&packet.payload)?;
            let bound = session
                .actors()
                .find(&id)
                .ok_or(Error::new(Reason::SessionNotBound))?;
            in_callback_context(|| bound.relay(packet))
        })
    }
}

/// Logs in as `actor` on a fresh client.
pub fn login(game: &Game, actor: &str) -> Client {
    let mut client = game.client();
    let reply = client
        .request(LOGIN, Bytes::copy_from_slice(actor.as_bytes()), WAIT)
        .expect("login");
    assert_eq!(reply, Bytes::from_static(b"bound"));
    client
}

pub fn payload(actor: &str, data: &str) -> Bytes {
    Bytes::from(format!("{actor}:{data}"))
}

/// A TCP proxy between two nodes' link endpoints that reads the frames
/// crossing it: the command byte of every record after the handshake.
pub struct LinkTap {
    pub addr: SocketAddr,
    pub commands: Arc<Mutex<Vec<u8>>>,
}

/// Proxies one link connection to `target`, recording record command bytes
/// in both directions (the dialer's first two frames and the acceptor's first
/// frame are the handshake).
pub fn link_tap(target: SocketAddr) -> LinkTap {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let commands = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&commands);
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(inbound) = inbound else { return };
            let Ok(outbound) = std::net::TcpStream::connect(target) else {
                return;
            };
            let pipe = |mut from: std::net::TcpStream,
                        mut to: std::net::TcpStream,
                        skip: usize,
                        seen: Arc<Mutex<Vec<u8>>>| {
                std::thread::spawn(move || {
                    let mut pending: Vec<u8> = Vec::new();
                    let mut frames = 0usize;
                    let mut chunk = [0u8; 16 * 1024];
                    loop {
                        let n = match from.read(&mut chunk) {
                            Ok(0) | Err(_) => {
                                let _ = to.shutdown(std::net::Shutdown::Write);
                                return;
                            }
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&chunk[..n]);
                        while pending.len() >= 5 {
                            let len = u32::from_be_bytes([
                                pending[0], pending[1], pending[2], pending[3],
                            ]) as usize;
                            if pending.len() < 4 + len {
                                break;
                            }
                            if frames >= skip {
                                seen.lock().unwrap().push(pending[4]);
                            }
                            frames += 1;
                            pending.drain(..4 + len);
                        }
                        if to.write_all(&chunk[..n]).is_err() {
                            return;
                        }
                    }
                });
            };
            pipe(
                inbound.try_clone().unwrap(),
                outbound.try_clone().unwrap(),
                2,
                Arc::clone(&seen),
            );
            pipe(outbound, inbound, 1, Arc::clone(&seen));
        }
    });
    LinkTap { addr, commands }
}
