//! The session side of the `tokio` and `ractor` baselines: the game server
//! a user would write on plain tokio (issue 5 item 2). A multi-thread
//! runtime (two workers: the machine's cores), a task per session that
//! reads STREAM frames and a task that writes them, and a directory (a
//! `HashMap` behind a mutex) from player name to the player, which the two
//! baselines implement differently: a tokio task with an mpsc mailbox, or a
//! ractor actor. LOGIN finds or spawns the player and binds the session to
//! it; RELAY goes to the player, which replies; PUSH goes to the player,
//! which pushes it back. For `mixed` a LOGIN also names the player's room,
//! an entity of the same directory (a task or an actor) that the session
//! joins; the room ticks on a server-side timer of its own from when it is
//! spawned (`--tick-ms`, tokio's `Interval` with `MissedTickBehavior::Skip`,
//! as zlink's repeating timer skips a tick due while the last one runs)
//! and pushes each tick to every member ([`PlayerState::tick`]). The
//! players no session binds (`--actors` beyond the sessions) are spawned
//! into the directory at start and stay idle. No
//! second node: the player lives in the same process as the session
//! (docs/PERFORMANCE.md says so).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use zlink::ids::Correlation;
use zlink::wire::client::ClientFrame;
use zlink::wire::DecodeLimits;

use super::Running;
use crate::client::{
    login_names, player_name, room_number, LoadSpec, TickStamp, LOGIN, PUSH, RELAY, TICK,
};

/// Frames queued for one session's writer; a full queue makes the player
/// wait (backpressure), as a bounded mpsc does for a user.
const SESSION_QUEUE_MAX: usize = 1_024;
/// The server's worker threads: one per core of the bench machine.
const WORKERS: usize = 2;

/// What a player is sent.
pub enum ToPlayer {
    /// Bind the player to this session's writer (LOGIN).
    Bind(mpsc::Sender<ClientFrame>),
    /// A RELAY request: reply to the bound session.
    Request {
        correlation: Correlation,
        payload: Bytes,
    },
    /// A PUSH message: push it back to the bound session.
    Message { payload: Bytes },
    /// A room gains a member: this session's writer (LOGIN with a room).
    Join(mpsc::Sender<ClientFrame>),
    /// The room's own timer ticked (never a client's message): push a
    /// tick to every member.
    Tick,
}

/// A room's tick: when its first is due, how many ticks ran, and the flag its
/// ticker sets while a tick it sent is still queued or running (a ractor
/// room's ticker is a task of its own; a tokio room ticks in its own task
/// and needs none).
pub struct RoomClock {
    room: u32,
    first: Instant,
    ticks: u32,
    payload_len: usize,
    pending: Option<Arc<AtomicBool>>,
}

impl RoomClock {
    /// Room `name`'s clock, its first tick `period` from now.
    pub fn new(name: &str, period: Duration, payload_len: usize) -> Result<Self, String> {
        Ok(Self {
            room: room_number(name).ok_or_else(|| format!("{name} is no room"))?,
            first: Instant::now() + period,
            ticks: 0,
            payload_len,
            pending: None,
        })
    }

    /// When the first tick is due, for the room's `Interval`.
    pub fn first(&self) -> Instant {
        self.first
    }

    /// A ticker outside the room's task: it skips a tick while `pending`
    /// is set, and the room clears it once the tick ran.
    pub fn pending(&mut self) -> Arc<AtomicBool> {
        Arc::clone(self.pending.get_or_insert_with(Default::default))
    }
}

/// The `Interval` of a room's ticker: ticks at `first`, then every
/// `period`; a tick missed while the room was busy is skipped, not run in
/// a burst (zlink's repeating timer's rule, docs/actors.md "Timers").
pub fn room_interval(first: Instant, period: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(first.into(), period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    interval
}

/// A player's (or a room's) game state and logic, the same in both
/// baselines.
#[derive(Default)]
pub struct PlayerState {
    session: Option<mpsc::Sender<ClientFrame>>,
    /// A room's members' sessions; a player has none.
    members: Vec<mpsc::Sender<ClientFrame>>,
    /// A room's tick; a player has none.
    clock: Option<RoomClock>,
}

impl PlayerState {
    /// A room's state, ticking on `clock`.
    pub fn room(clock: RoomClock) -> Self {
        Self {
            clock: Some(clock),
            ..Self::default()
        }
    }

    /// One tick of the room: a [`TickStamp`] pushed to every member, as
    /// zlink's room Actor does in its timer turn.
    async fn tick(&mut self) {
        let Some(clock) = &mut self.clock else {
            return;
        };
        clock.ticks += 1;
        let payload = TickStamp::now(clock.ticks, clock.room).encode(clock.payload_len);
        let mut gone = Vec::new();
        for (i, member) in self.members.iter().enumerate() {
            let frame = ClientFrame::Push {
                key: TICK,
                payload: payload.clone(),
            };
            if member.send(frame).await.is_err() {
                gone.push(i);
            }
        }
        for i in gone.into_iter().rev() {
            self.members.swap_remove(i);
        }
        if let Some(pending) = &clock.pending {
            pending.store(false, Ordering::Release);
        }
    }

    /// Handles one message; a message for a player with no live session is
    /// dropped (the client counts it lost).
    pub async fn handle(&mut self, message: ToPlayer) {
        let frame = match message {
            ToPlayer::Bind(session) => {
                self.session = Some(session);
                return;
            }
            ToPlayer::Request {
                correlation,
                payload,
            } => ClientFrame::Reply {
                correlation,
                payload,
            },
            ToPlayer::Message { payload } => ClientFrame::Push { key: PUSH, payload },
            ToPlayer::Join(member) => {
                self.members.push(member);
                return;
            }
            ToPlayer::Tick => {
                self.tick().await;
                return;
            }
        };
        if let Some(session) = &self.session {
            if session.send(frame).await.is_err() {
                self.session = None;
            }
        }
    }
}

/// How a baseline finds, spawns and messages its players.
pub trait Directory: Send + Sync + 'static {
    type Player: Clone + Send + Sync + 'static;
    /// The player named `name`, spawned on first use.
    fn find_or_spawn(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Self::Player, String>> + Send;
    /// The room named `name` (`mixed`), spawned on first use with its
    /// tick running ([`RoomClock`]).
    fn find_or_spawn_room(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Self::Player, String>> + Send;
    /// How many entities the directory holds (players, and under `mixed`
    /// the rooms, each a task or actor of its own); `None` while it is
    /// locked.
    fn hosted(&self) -> Option<usize>;
    /// Sends `message` to `player`.
    fn deliver(
        player: &Self::Player,
        message: ToPlayer,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// Writes the frames queued for one session, gathering what is queued.
async fn write_frames(mut out: OwnedWriteHalf, mut frames: mpsc::Receiver<ClientFrame>) {
    let mut buf = BytesMut::with_capacity(16 * 1024);
    while let Some(frame) = frames.recv().await {
        frame.encode(&mut buf);
        while let Ok(frame) = frames.try_recv() {
            frame.encode(&mut buf);
        }
        if out.write_all(&buf).await.is_err() {
            return;
        }
        buf.clear();
    }
}

/// One session: reads frames until the client goes or misbehaves.
async fn session<D: Directory>(stream: TcpStream, directory: Arc<D>) {
    let (mut input, output) = stream.into_split();
    let (tx, rx) = mpsc::channel(SESSION_QUEUE_MAX);
    tokio::spawn(write_frames(output, rx));
    let limits = DecodeLimits::default();
    let mut inbound = BytesMut::with_capacity(16 * 1024);
    let mut player: Option<D::Player> = None;
    loop {
        match input.read_buf(&mut inbound).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            let frame = match ClientFrame::decode_from(&mut inbound, &limits) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return,
            };
            let delivered = match (frame, &player) {
                (
                    ClientFrame::Request {
                        key,
                        correlation,
                        payload,
                    },
                    _,
                ) if key == LOGIN => {
                    let text = String::from_utf8_lossy(&payload).into_owned();
                    let (name, room_name) = login_names(&text);
                    let Ok(found) = directory.find_or_spawn(name).await else {
                        return;
                    };
                    let mut bound = D::deliver(&found, ToPlayer::Bind(tx.clone())).await;
                    player = Some(found);
                    if let Some(room_name) = room_name {
                        let Ok(joined) = directory.find_or_spawn_room(room_name).await else {
                            return;
                        };
                        bound = bound.and(D::deliver(&joined, ToPlayer::Join(tx.clone())).await);
                    }
                    let welcome = ClientFrame::Reply {
                        correlation,
                        payload: Bytes::from_static(b"welcome"),
                    };
                    bound.is_ok() && tx.send(welcome).await.is_ok()
                }
                (
                    ClientFrame::Request {
                        key,
                        correlation,
                        payload,
                    },
                    Some(p),
                ) if key == RELAY => D::deliver(
                    p,
                    ToPlayer::Request {
                        correlation,
                        payload,
                    },
                )
                .await
                .is_ok(),
                (ClientFrame::Message { key, payload }, Some(p)) if key == PUSH => {
                    D::deliver(p, ToPlayer::Message { payload }).await.is_ok()
                }
                // Anything else is not this game's: ignored, as a user's
                // server would.
                _ => true,
            };
            if !delivered {
                return;
            }
        }
    }
}

struct Server {
    entry: SocketAddr,
    /// The directory's [`Directory::hosted`].
    hosted: Box<dyn Fn() -> Option<usize> + Send>,
    thread: JoinHandle<()>,
    stop: oneshot::Sender<()>,
}

impl Running for Server {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn io_stack(&self) -> &'static str {
        "epoll (tokio)"
    }

    fn actors(&self) -> Option<usize> {
        (self.hosted)()
    }

    fn stop(self: Box<Self>) -> Vec<super::Move> {
        let _ = self.stop.send(());
        let _ = self.thread.join();
        Vec::new()
    }
}

/// Starts the server on its own thread with `directory` for its players,
/// and spawns `spec`'s idle players into it before it listens.
pub fn start<D: Directory>(
    name: &str,
    directory: D,
    spec: &LoadSpec,
) -> Result<Box<dyn Running>, String> {
    let (tx, rx) = std_mpsc::channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let directory = Arc::new(directory);
    let counted = Arc::clone(&directory);
    let hosted = Box::new(move || counted.hosted());
    let idle = spec.idle_players();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = tx.send(Err(format!("runtime: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                for index in idle {
                    if let Err(e) = directory.find_or_spawn(&player_name(index)).await {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
                let listener = match super::listen_loopback() {
                    Ok(listener) => listener,
                    Err(e) => {
                        let _ = tx.send(Err(format!("listen: {e}")));
                        return;
                    }
                };
                let _ = tx.send(listener.local_addr().map_err(|e| e.to_string()));
                let accept = async {
                    while let Ok((conn, _)) = listener.accept().await {
                        let _ = conn.set_nodelay(true);
                        tokio::spawn(session(conn, Arc::clone(&directory)));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
            runtime.shutdown_background();
        })
        .map_err(|e| format!("spawning {name}: {e}"))?;
    let entry = rx
        .recv()
        .map_err(|_| format!("{name} ended during setup"))??;
    Ok(Box::new(Server {
        entry,
        hosted,
        thread,
        stop,
    }))
}
