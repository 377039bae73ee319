//! zlink as a game server would start it: `--nodes` nodes on loopback
//! through the public API (NodeBuilder, as in zlink-demo), one embedded
//! Location Store, `--shards` shards per node, no core pinning by the
//! runtime (`--pin` places the whole system instead). Every session
//! connects to node 1 and every player is an Actor on one of the other
//! nodes, so a RELAY crosses a link both ways (request → actor on another
//! node → reply). The local path (`zlink-local`, `--nodes 1`, issue 24 item
//! 3) starts node 1 alone, with no peer, and creates every player there:
//! a RELAY never leaves the node.
//!
//! `mixed`: each room is a SpotWide User Spot on a host node, its players
//! are its Actors (`room-k/p-i`, §5: they share the room's gate), and so is
//! the room's own Actor (`room-k/room`), which ticks on a repeating timer
//! ([`ActorContext::set_repeating_timer`]) and pushes each tick to every
//! member's bound session ([`ActorContext::push_to_member`]): the game's
//! tick is the server's, as a game would run it. `relocate`: a mover thread moves the
//! bound players one after the other between all the nodes through
//! [`Node::relocate`] (§8) while the load runs, and records each move.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zlink::api::{
    Actor, ActorContext, ActorMessage, ExecutionMode, IoBackend, Node, NodeBuilder, NodeSettings,
    ObjectRole, Packet, RelocateTo, Session, SessionActor, Spot, TimerTick,
};
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, PacketKey, SpotId};
use zlink::net::handshake::ClusterSecret;
use zlink::store::{EmbeddedStore, LocationStore, MonotonicClock};

use super::{Move, Running};
use crate::args::Workload;
use crate::client::{
    login_names, player_name, room_members, room_name, room_number, LoadSpec, TickStamp, LOGIN,
    PUSH, RELAY, ROOM_SIZE, TICK,
};

/// The Actor type of every player.
pub const PLAYER: &str = "player";
/// The Spot kind of `mixed`'s rooms.
const ROOM: &str = "room";
/// The Actor type of `mixed`'s room Actors, and each one's name in its
/// room (`room-k/room`).
const ROOM_ACTOR: &str = "room";
/// Node code's one message to a room Actor: start ticking, every
/// `period` ms (the payload: period ms and push payload bytes, u64 LE).
const START_TICKS: PacketKey = PacketKey(40);
/// `relocate`: the pause between two moves, so that the mover does not
/// take the whole machine from the load it is meant to disturb.
const MOVE_GAP: Duration = Duration::from_millis(10);
/// Owner leases outlive any run's stalls; the runtime renews them every
/// second (NodeSettings::lease_renew_interval).
pub const LEASE_TERM: Duration = Duration::from_secs(10);
/// How long the link between the two nodes may take to come up.
const LINK_WAIT: Duration = Duration::from_secs(10);

/// A player answers a RELAY with its payload and pushes a PUSH back (§5).
struct Player;

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        if message.is_request() {
            return Some(Ok(message.payload));
        }
        // A refused push (the session went away) is the client's lost
        // message: the bench counts it there.
        let _ = ctx.push(PUSH, message.payload);
        None
    }

    /// A player keeps no state between messages: it moves with an empty
    /// snapshot (§8).
    fn snapshot(&self) -> Option<Bytes> {
        Some(Bytes::new())
    }

    fn restore(&mut self, _state: Bytes) -> Result<(), Error> {
        Ok(())
    }
}

/// `mixed`'s room: an Actor of the room's SpotWide Spot that no session
/// binds. Told to start by node code, it sets a repeating timer, and each
/// tick, a turn under the room's gate, pushes a [`TickStamp`] to every
/// member's bound session. A member not bound yet refuses the push (§12:
/// session-not-bound); the client counts only the ticks after its first.
struct Room {
    room: u32,
    members: Vec<ActorId>,
    /// Whether its timer runs (it starts once).
    ticking: bool,
    payload_len: usize,
}

impl Room {
    /// The Actor `room-k/room`, whose members are the players of room k
    /// among the run's `sessions`.
    fn new(id: &ActorId, sessions: usize) -> Self {
        let room = id
            .as_str()
            .split_once('/')
            .and_then(|(room, _)| room_number(room))
            .unwrap_or(u32::MAX);
        let members = room_members(room, sessions)
            .filter_map(|m| ActorId::new(&format!("{}/{}", room_name(m), player_name(m))).ok())
            .collect();
        Self {
            room,
            members,
            ticking: false,
            payload_len: 0,
        }
    }
}

impl Actor for Room {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        if message.key != START_TICKS || self.ticking {
            return Some(Err(Error::new(Reason::NotSupported)));
        }
        let word = |at: usize| {
            message
                .payload
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
        };
        let (Some(period_ms), Some(len)) = (word(0), word(8)) else {
            return Some(Err(Error::new(Reason::NotSupported)));
        };
        let period = Duration::from_millis(period_ms);
        self.payload_len = usize::try_from(len).unwrap_or(0);
        if let Err(e) = ctx.set_repeating_timer(period, period) {
            return Some(Err(e));
        }
        self.ticking = true;
        None
    }

    fn on_timer(&mut self, ctx: &mut dyn ActorContext, tick: TimerTick) {
        // The timer numbers the ticks that ran, with no gap (skipped ones
        // take no number): what the client checks.
        let number = u32::try_from(tick.tick).unwrap_or(u32::MAX);
        let stamp = TickStamp::now(number, self.room);
        let payload = stamp.encode(self.payload_len);
        for member in &self.members {
            let _ = ctx.push_to_member(member, TICK, payload.clone());
        }
    }
}

/// The players' Spot: a disconnect needs no game action in the bench (§7).
struct Lobby;

impl Spot for Lobby {
    fn on_disconnect_actor(&self, _actor: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

/// LOGIN binds the named player (in its room, for `mixed`) and keeps the
/// binding on the session, so that RELAY and PUSH reach it without parsing
/// their payloads.
async fn login(session: Session, packet: Packet) -> Result<(), Error> {
    let text =
        std::str::from_utf8(&packet.payload).map_err(|_| Error::new(Reason::NotSupported))?;
    let name = match login_names(text) {
        (player, Some(room)) => format!("{room}/{player}"),
        (player, None) => player.to_owned(),
    };
    let id = ActorId::new(&name).map_err(|_| Error::new(Reason::NotSupported))?;
    let player = session.actor(PLAYER, &id).await?;
    let bound = session.actors().bind(player).await?;
    session.set_attribute(bound);
    session.reply(packet, Ok(Bytes::from_static(b"welcome")))
}

/// RELAY and PUSH go to the bound player, which answers the client itself.
async fn relay(session: Session, packet: Packet) -> Result<(), Error> {
    let bound = session
        .attribute::<SessionActor>()
        .ok_or(Error::new(Reason::SessionNotBound))?;
    bound.relay(packet)
}

/// Registers more Actor types on each node [`start_linked`] starts
/// ([`crate::actor_rtt`]'s callers and callees); `&|builder| builder` for
/// none.
pub type Extra<'a> = &'a dyn Fn(NodeBuilder) -> NodeBuilder;

/// Starts node `rid` of the lobby game on loopback, linked to `peers`, on
/// `store`: any Location Store, so that the store axis
/// ([`crate::store_axis`]) runs the same game on Redis that the load runs
/// on the embedded store, instead of a copy of it.
#[allow(clippy::too_many_arguments)]
fn start_node(
    rid: u64,
    sessions: usize,
    shards: usize,
    io_backend: IoBackend,
    store: Arc<dyn LocationStore>,
    secret: ClusterSecret,
    peers: &[(u64, SocketAddr)],
    extra: Extra<'_>,
) -> Result<Node, String> {
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let settings = NodeSettings {
        shards,
        pin_cores: false,
        io_backend,
        // The baselines limit no session's rate: neither does zlink here,
        // so a closed-loop session at tens of thousands a second compares.
        session_rate: 0,
        ..NodeSettings::default()
    };
    let builder = NodeBuilder::new(rid)
        .listen(loopback)
        .peer_listen(loopback)
        .cluster_secret(secret)
        .object_role(ObjectRole::Server)
        .location_store(store)
        .settings(settings)
        .enable_actor_dispatch()
        .actor_type(PLAYER, Arc::new(Lobby), |_| Box::new(Player))
        .actor_type(ROOM_ACTOR, Arc::new(Lobby), move |id| {
            Box::new(Room::new(id, sessions))
        })
        .spot_kind(ROOM, ExecutionMode::SpotWide, |_| Arc::new(Lobby))
        .on_packet(LOGIN, login)
        .on_packet(RELAY, relay)
        .on_packet(PUSH, relay);
    let mut builder = extra(builder);
    for &(rid, addr) in peers {
        builder = builder.peer(rid, addr);
    }
    // The nodes with lower RIDs dial this one: a node takes links only
    // from its peers (docs/threading.md "Node links").
    for lower in 1..rid {
        builder = builder.accept_peer(lower);
    }
    builder
        .start()
        .map_err(|e| format!("zlink node {rid} did not start: {e}"))
}

struct Mesh {
    entry: SocketAddr,
    /// The backend the nodes report running on.
    io_stack: &'static str,
    nodes: Arc<Vec<Node>>,
    mover: Option<Mover>,
}

/// `relocate`'s mover thread and what it recorded.
struct Mover {
    stop: Arc<AtomicBool>,
    /// Cloned for the load client, which signals once every session is
    /// bound; the mover waits for it before its first move, and ends
    /// without moving when every sender is gone unsent.
    bound: mpsc::Sender<()>,
    thread: JoinHandle<Vec<Move>>,
}

impl Running for Mesh {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn io_stack(&self) -> &'static str {
        self.io_stack
    }

    fn actors(&self) -> Option<usize> {
        Some(self.nodes.iter().map(Node::actor_count).sum())
    }

    fn actors_by_node(&self) -> Option<Vec<usize>> {
        Some(self.nodes.iter().map(Node::actor_count).collect())
    }

    fn bound_signal(&self) -> Option<mpsc::Sender<()>> {
        self.mover.as_ref().map(|mover| mover.bound.clone())
    }

    fn stop(self: Box<Self>) -> Vec<Move> {
        let moves = self.mover.map_or_else(Vec::new, |mover| {
            let Mover {
                stop,
                bound,
                thread,
            } = mover;
            stop.store(true, Ordering::Release);
            // The load client (and its clone) is done: a mover still waiting
            // for the signal sees the channel close and ends.
            drop(bound);
            thread.join().unwrap_or_default()
        });
        // The mover is joined: the nodes have no other owner.
        if let Ok(nodes) = Arc::try_unwrap(self.nodes) {
            for node in nodes {
                node.shutdown();
            }
        }
        moves
    }
}

/// Once every session is bound (`bound`), moves the players one after the
/// other, each to the next node after the one hosting it (node RIDs are
/// 1..=nodes, `nodes[rid - 1]`), until told to stop; `hosts[i]` is player
/// `i`'s node at the start.
fn relocate_players(
    nodes: &[Node],
    mut hosts: Vec<u64>,
    bound: &mpsc::Receiver<()>,
    stop: &AtomicBool,
) -> Result<Vec<Move>, String> {
    let mut moves = Vec::new();
    if bound.recv().is_err() {
        // Stopped (or the system is gone) before the load was bound.
        return Ok(moves);
    }
    let count = nodes.len() as u64;
    let mut player = 0;
    while !stop.load(Ordering::Acquire) && !hosts.is_empty() {
        let from = hosts[player];
        let to = from % count + 1;
        let id = ActorId::new(&player_name(player)).map_err(|e| format!("player id: {e}"))?;
        let node = nodes
            .get((from - 1) as usize)
            .ok_or_else(|| format!("no node {from}"))?;
        let start = Instant::now();
        let outcome = node.relocate(&id, RelocateTo::Node(to));
        let end = Instant::now();
        if outcome.is_ok() {
            hosts[player] = to;
        }
        moves.push(Move {
            player,
            start,
            end,
            failed: outcome.err().map(|e| format!("{id} {from} -> {to}: {e}")),
        });
        player = (player + 1) % hosts.len();
        std::thread::sleep(MOVE_GAP);
    }
    Ok(moves)
}

/// Starts the lobby game on nodes `count..=1`, highest RID first so that
/// each new node dials the ones already up (the lower RID dials), each on
/// the store `store(rid)` gives it (one shared embedded store, or one
/// Redis client per node as separate processes would have), and waits for
/// every link. The nodes come back in RID order, `[(1, node 1), ..]`; on an
/// error the ones already started are dropped, which stops them.
pub fn start_linked(
    count: u64,
    sessions: usize,
    shards: usize,
    io_backend: IoBackend,
    mut store: impl FnMut(u64) -> Result<Arc<dyn LocationStore>, String>,
    extra: Extra<'_>,
) -> Result<Vec<(u64, Node)>, String> {
    let secret = ClusterSecret::new(b"zlink-bench-cluster-secret".to_vec())
        .map_err(|e| format!("cluster secret: {e}"))?;
    let mut started: Vec<(u64, Node)> = Vec::new();
    for rid in (1..=count).rev() {
        let peers = started
            .iter()
            .map(|(peer, node)| {
                node.peer_addr()
                    .map(|addr| (*peer, addr))
                    .ok_or_else(|| format!("node {peer} has no link address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let node = start_node(
            rid,
            sessions,
            shards,
            io_backend,
            store(rid)?,
            secret.clone(),
            &peers,
            extra,
        )?;
        started.push((rid, node));
    }
    started.reverse();
    for (a, node) in &started {
        for (b, _) in &started {
            if a != b && !node.wait_linked(*b, LINK_WAIT) {
                return Err(format!("the link {a} -> {b} did not come up"));
            }
        }
    }
    Ok(started)
}

/// Starts `spec.nodes` linked nodes on one embedded store
/// ([`start_linked`]) and creates player `i` on node
/// `2 + i % (nodes - 1)` (on node 1 when it is the only one: the local
/// path), for every one of
/// `spec.actors`: the idle ones ([`LoadSpec::idle_players`]) as plain
/// players in no room, which `relocate` leaves where they are. Every node's shards
/// run on `io_backend` (issue 8: `zlink` on io_uring, `zlink-epoll` on
/// epoll); a backend that cannot run here is the start's error.
pub fn start(spec: &LoadSpec, io_backend: IoBackend) -> Result<Box<dyn Running>, String> {
    let store: Arc<dyn LocationStore> =
        Arc::new(EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM));
    let started = start_linked(
        spec.nodes,
        spec.sessions,
        spec.shards,
        io_backend,
        |_| Ok(Arc::clone(&store)),
        &|builder| builder,
    )?;
    // The players' nodes: every node but the sessions' node 1, or node 1
    // itself when it is alone (the local path).
    let hosts = match started.get(1..) {
        Some(others) if !others.is_empty() => others,
        _ => &started[..],
    };
    let mut placed = Vec::with_capacity(spec.sessions);
    let mut rooms = Vec::new();
    for index in 0..spec.actors {
        let bound = index < spec.sessions;
        if bound && spec.workload == Workload::Mixed {
            // A room's players and its own Actor live with their room (its
            // gate, §5).
            let room = index / ROOM_SIZE;
            let (rid, host) = &hosts[room % hosts.len()];
            let spot = SpotId::new(&room_name(index)).map_err(|e| format!("room id: {e}"))?;
            let id = spot
                .actor_id(&player_name(index))
                .map_err(|e| format!("player id: {e}"))?;
            let handle = host
                .create_spot(ROOM, &spot)
                .map_err(|e| format!("creating {spot} on node {rid}: {e}"))?;
            host.create_actor_in(&handle, PLAYER, &id)
                .map_err(|e| format!("creating {id} on node {rid}: {e}"))?;
            if index % ROOM_SIZE == 0 {
                let id = spot
                    .actor_id(ROOM_ACTOR)
                    .map_err(|e| format!("room actor id: {e}"))?;
                host.create_actor_in(&handle, ROOM_ACTOR, &id)
                    .map_err(|e| format!("creating {id} on node {rid}: {e}"))?;
                rooms.push((host.caller(), id));
            }
            continue;
        }
        let id = ActorId::new(&player_name(index)).map_err(|e| format!("player id: {e}"))?;
        let (rid, host) = &hosts[index % hosts.len()];
        host.create_actor(PLAYER, &id)
            .map_err(|e| format!("creating {id} on node {rid}: {e}"))?;
        if bound {
            placed.push(*rid);
        }
    }
    // Every room starts ticking now: sessions log in to rooms that tick,
    // as players join a running game.
    let mut ticks = Vec::with_capacity(16);
    ticks.extend_from_slice(&(spec.tick.as_millis() as u64).to_le_bytes());
    ticks.extend_from_slice(&(spec.payload_len as u64).to_le_bytes());
    let ticks = Bytes::from(ticks);
    for (caller, room) in rooms {
        // A request, so that a timer the room could not set fails the
        // start instead of a run with no ticks.
        caller
            .request(&room, START_TICKS, ticks.clone(), LINK_WAIT)
            .wait()
            .map_err(|e| format!("starting {room}'s ticks: {e}"))?;
    }
    let entry = started[0].1.stream_addr().ok_or("node 1 does not listen")?;
    let io_stack = match started[0].1.io_backend() {
        IoBackend::IoUring => "io_uring",
        IoBackend::Epoll => "epoll",
        IoBackend::Auto => "auto",
    };
    let nodes = Arc::new(
        started
            .into_iter()
            .map(|(_, node)| node)
            .collect::<Vec<_>>(),
    );
    let mover = (spec.workload == Workload::Relocate)
        .then(|| {
            let stop = Arc::new(AtomicBool::new(false));
            let (bound, bound_rx) = mpsc::channel();
            let (nodes, stopped) = (Arc::clone(&nodes), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("zlink-mover".to_owned())
                .spawn(move || {
                    relocate_players(&nodes, placed, &bound_rx, &stopped).unwrap_or_else(|why| {
                        vec![Move {
                            player: 0,
                            start: Instant::now(),
                            end: Instant::now(),
                            failed: Some(why),
                        }]
                    })
                })
                .map(|thread| Mover {
                    stop,
                    bound,
                    thread,
                })
                .map_err(|e| format!("spawning the mover: {e}"))
        })
        .transpose()?;
    Ok(Box::new(Mesh {
        entry,
        io_stack,
        nodes,
        mover,
    }))
}
