//! An arena: four players queue at a matchmaker, are seated in a room that
//! runs the game at 20 ticks a second, and mid-game the room moves — with
//! its players and its running tick — from node 1 to node 2 while every
//! client stays connected to node 1 and keeps playing.
//!
//! ```sh
//! cargo run --example arena
//! ```
//!
//! - The matchmaker is an Actor that node code reaches by request: the
//!   session's QUEUE handler asks it for a seat.
//! - A room is a SpotWide Spot (docs/actors.md): the room Actor and its
//!   players' Actors share one serial gate, so the room's tick never runs
//!   beside a player's move, and they move as one unit
//!   (`Node::relocate_spot`).
//! - The tick is the room's repeating timer; each tick pushes the state to
//!   every player's client (`push_to_member`).
//!
//! It checks that every client saw ticks 1, 2, 3 … 40 with no gap and no
//! repeat across the move, that every move a client made was applied once,
//! and that every client was still connected and served at the end. It
//! exits 0 when every check held, and 1 with the reason when one did not
//! (or when something did not happen within its deadline).

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{mpsc, Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink::api::ActorCaller;
use zlink::prelude::*;

/// Every single wait in this example is bounded by this.
const WAIT: Duration = Duration::from_secs(5);
/// 20 Hz.
const TICK_PERIOD: Duration = Duration::from_millis(50);
/// A game lasts 40 ticks, two seconds.
const TICKS: u64 = 40;
/// The room moves to node 2 once every client has seen this tick.
const MOVE_AFTER_TICK: u64 = 15;
/// Players a match needs.
const SEATS: usize = 4;
/// The rooms node 1 opens at startup (see `Front`).
const ROOMS: [&str; 1] = ["arena-1"];

// ---- What a client sends and receives ----

/// QUEUE: asks for a seat; answered once the player sits in its room.
#[derive(Serialize, Deserialize)]
struct Queue {
    player: String,
}
#[derive(Debug, Serialize, Deserialize)]
struct Seat {
    room: String,
    seat: usize,
}
impl Message for Queue {
    const KEY: PacketKey = PacketKey(1);
    type Reply = Seat;
}

/// MOVE: relayed to the player's Actor, which answers with where it is.
#[derive(Serialize, Deserialize)]
struct Move {
    dx: i64,
}
#[derive(Debug, Serialize, Deserialize)]
struct Position {
    x: i64,
}
impl Message for Move {
    const KEY: PacketKey = PacketKey(2);
    type Reply = Position;
}

/// Pushed to every player at every tick.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    tick: u64,
    positions: BTreeMap<String, i64>,
    over: bool,
}
impl Message for State {
    const KEY: PacketKey = PacketKey(10);
    type Reply = ();
}

// ---- Between Actors ----

/// Matchmaker → room: the players of the match, once its seats are full.
#[derive(Serialize, Deserialize)]
struct Roster {
    players: Vec<String>,
}
impl Message for Roster {
    const KEY: PacketKey = PacketKey(20);
    type Reply = ();
}

/// Player → room: its client is connected (bound); and later where it is.
#[derive(Serialize, Deserialize)]
struct Moved {
    player: String,
    x: i64,
}
impl Message for Moved {
    const KEY: PacketKey = PacketKey(21);
    type Reply = ();
}

/// The game's own error codes.
const TOO_FAST: u32 = 1;
const ARENA_FULL: u32 = 2;
const BAD_NAME: u32 = 3;
const NOT_OPEN: u32 = 4;

// ---- The matchmaker ----

/// Seats players in the open rooms in the order they queue. It answers at
/// once: a request's reply is its handler's return value, so a matchmaker
/// cannot hold a request open until a match forms. The room starts the
/// match instead, when its roster is complete and every player is there.
#[derive(Default)]
struct Matchmaker {
    seated: usize,
    forming: Vec<String>,
}

impl Actor for Matchmaker {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Queue::KEY => m.answer(|queue: Queue| {
                let room = ROOMS.get(self.seated / SEATS);
                let room = room.ok_or(Error::app(ARENA_FULL, "every room is full"))?;
                let seat = self.seated % SEATS;
                self.seated += 1;
                self.forming.push(queue.player);
                if self.forming.len() == SEATS {
                    let players = std::mem::take(&mut self.forming);
                    ctx.send_typed(&room_actor(room)?, &Roster { players })?;
                }
                Ok(Seat {
                    room: (*room).to_owned(),
                    seat,
                })
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }
}

fn matchmaker() -> Result<ActorId, Error> {
    ActorId::new("matchmaker").map_err(|_| Error::app(BAD_NAME, "bad matchmaker name"))
}

// ---- A room and its players: one SpotWide Spot ----

/// The room Actor of Spot `room`: `<room>/room`.
fn room_actor(room: &str) -> Result<ActorId, Error> {
    ActorId::new(&format!("{room}/room")).map_err(|_| Error::app(BAD_NAME, "bad room name"))
}

/// A player Actor of Spot `room`: `<room>/<player>`.
fn player_actor(room: &str, player: &str) -> Result<ActorId, Error> {
    ActorId::new(&format!("{room}/{player}")).map_err(|_| Error::app(BAD_NAME, "bad player name"))
}

/// The room's state, all of it: what a move carries to the other node.
#[derive(Default, Serialize, Deserialize)]
struct Room {
    name: String,
    roster: Vec<String>,
    positions: BTreeMap<String, i64>,
    started: bool,
}

impl Room {
    /// The match starts once the matchmaker's roster is complete and every
    /// player on it is bound, so that the first tick reaches them all.
    fn start_if_ready(&mut self, ctx: &mut dyn ActorContext) -> Result<(), Error> {
        let here = |p: &String| self.positions.contains_key(p);
        if self.started || self.roster.len() < SEATS || !self.roster.iter().all(here) {
            return Ok(());
        }
        self.started = true;
        ctx.set_repeating_timer(TICK_PERIOD, TICK_PERIOD)
            .map(|_| ())
    }
}

impl Actor for Room {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Roster::KEY => m.answer(|roster: Roster| {
                self.roster = roster.players;
                self.start_if_ready(ctx)
            }),
            Moved::KEY => m.answer(|moved: Moved| {
                self.positions.insert(moved.player, moved.x);
                self.start_if_ready(ctx)
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }

    fn on_timer(&mut self, ctx: &mut dyn ActorContext, tick: TimerTick) {
        // The timer numbers its ticks 1, 2, 3 … with no gap, across moves
        // too: that number is the game's tick.
        let state = State {
            tick: tick.tick,
            positions: self.positions.clone(),
            over: tick.tick >= TICKS,
        };
        let Ok(payload) = typed::encode(&state) else {
            return;
        };
        for player in &self.roster {
            // Pushed to each player's client on that player's behalf: the
            // players are in this room's Spot, and no turn of theirs runs
            // meanwhile. The clients check that none is missing.
            if let Ok(member) = player_actor(&self.name, player) {
                let _ = ctx.push_to_member(&member, State::KEY, payload.clone());
            }
        }
        if state.over {
            ctx.cancel_timer(tick.timer);
        }
    }

    fn snapshot(&self) -> Option<Bytes> {
        typed::encode(self).ok()
    }

    fn restore(&mut self, state: Bytes) -> Result<(), Error> {
        *self = typed::decode(&state)?;
        Ok(())
    }
}

/// A player: where it is. It lives in its room's Spot and moves with it.
#[derive(Default, Serialize, Deserialize)]
struct Player {
    room: String,
    name: String,
    x: i64,
}

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Move::KEY => m.answer(|step: Move| {
                if step.dx.abs() > 1 {
                    return Err(Error::app(TOO_FAST, "one step per move"));
                }
                self.x += step.dx;
                self.tell_room(ctx)?;
                Ok(Position { x: self.x })
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }

    /// Its client is here: the room learns the player is ready.
    fn on_bound(&mut self, ctx: &mut dyn ActorContext) {
        let _ = self.tell_room(ctx);
    }

    fn snapshot(&self) -> Option<Bytes> {
        typed::encode(self).ok()
    }

    fn restore(&mut self, state: Bytes) -> Result<(), Error> {
        *self = typed::decode(&state)?;
        Ok(())
    }
}

impl Player {
    fn tell_room(&self, ctx: &mut dyn ActorContext) -> Result<(), Error> {
        let moved = Moved {
            player: self.name.clone(),
            x: self.x,
        };
        ctx.send_typed(&room_actor(&self.room)?, &moved)
    }
}

/// Told when a player's client goes away (§7). The arena keeps the player
/// in its room: it may reconnect.
struct Arena;
impl Spot for Arena {
    fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

// ---- The nodes ----

/// What the QUEUE handler needs from its node: its caller, to reach the
/// matchmaker, and the rooms it opened, to seat a player in one. Both exist
/// only once the node started, after its handlers were registered, hence
/// the `OnceLock`.
struct Front {
    caller: ActorCaller,
    rooms: BTreeMap<String, SpotHandle>,
}

/// A node of the arena. Both nodes register the same game: a room that
/// moves to node 2 is recreated there from its kind and its Actors' types.
fn arena_node(
    rid: u64,
    store: Arc<EmbeddedStore>,
    secret: ClusterSecret,
    front: Arc<OnceLock<Front>>,
) -> NodeBuilder {
    NodeBuilder::new(rid)
        .listen("127.0.0.1:0".parse().expect("an address"))
        .peer_listen("127.0.0.1:0".parse().expect("an address"))
        .cluster_secret(secret)
        .object_role(ObjectRole::Server)
        .location_store(store)
        .enable_actor_dispatch()
        // Two nodes share this process's cores: one shard each, unpinned.
        .settings(NodeSettings {
            shards: 1,
            pin_cores: false,
            ..NodeSettings::default()
        })
        .actor_type("matchmaker", Arc::new(Arena), |_| {
            Box::<Matchmaker>::default()
        })
        .spot_kind("arena", ExecutionMode::SpotWide, |_| Arc::new(Arena))
        .actor_type("room", Arc::new(Arena), |id| {
            let name = id.as_str().trim_end_matches("/room").to_owned();
            Box::new(Room {
                name,
                ..Room::default()
            })
        })
        .actor_type("player", Arc::new(Arena), |id| {
            let (room, name) = id.as_str().split_once('/').unwrap_or_default();
            Box::new(Player {
                room: room.to_owned(),
                name: name.to_owned(),
                x: 0,
            })
        })
        .on_message(move |session: Session, queue: Queue| {
            let front = Arc::clone(&front);
            async move {
                let front = front
                    .get()
                    .ok_or(Error::app(NOT_OPEN, "the arena opens soon"))?;
                // Node code asks the matchmaker; `.await`, never `wait`, in
                // a session callback: it runs on the node's shard.
                let payload = typed::encode(&queue)?;
                let reply = front
                    .caller
                    .request(&matchmaker()?, Queue::KEY, payload, WAIT);
                let seat = typed::decode_reply::<Queue>(reply.await)?;
                // The player's Actor is created in the room's Spot, and
                // the session bound to it: its client gets the room's ticks.
                let spot = front.rooms.get(&seat.room);
                let spot = spot.ok_or(Error::app(NOT_OPEN, "no such room"))?;
                let id = player_actor(&seat.room, &queue.player)?;
                let player = session.actor_in(spot, "player", &id).await?;
                session.actors().bind(player).await?;
                session.set_attribute(id);
                Ok(seat)
            }
        })
        .on_packet(Move::KEY, |session, packet| async move {
            let id = session.attribute::<ActorId>();
            let player = id.and_then(|id| session.actors().find(&id));
            player
                .ok_or(Error::new(Reason::SessionNotBound))?
                .relay(packet)
        })
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("arena: every check held");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("arena: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn StdError>> {
    let store = Arc::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(10),
    ));
    // The links between the nodes authenticate with this secret (in
    // production: from a file or the environment, never the code).
    let secret = ClusterSecret::new(b"arena-example-secret".to_vec())?;
    // Node 2 takes node 1's link (the lower RID dials), so it starts first.
    // No client connects to it here, so its front is never set (a QUEUE
    // there would be told that the arena opens soon).
    let unused = Arc::new(OnceLock::new());
    let node2 = arena_node(2, store.clone(), secret.clone(), unused)
        .accept_peer(1)
        .start()?;
    let front = Arc::new(OnceLock::new());
    let node2_addr = node2.peer_addr().ok_or("node 2 has no peer address")?;
    let node1 = arena_node(1, store, secret, Arc::clone(&front))
        .peer(2, node2_addr)
        .start()?;
    if !node1.wait_linked(2, WAIT) {
        return Err("the link from node 1 to node 2 did not come up".into());
    }

    // Node 1 opens the rooms and the matchmaker; its QUEUE handler can
    // reach them from now on.
    let mut rooms = BTreeMap::new();
    for room in ROOMS {
        let spot = node1.create_spot("arena", &SpotId::new(room)?)?;
        node1.create_actor_in(&spot, "room", &room_actor(room)?)?;
        rooms.insert(room.to_owned(), spot);
    }
    node1.create_actor("matchmaker", &matchmaker()?)?;
    let caller = node1.caller();
    if front.set(Front { caller, rooms }).is_err() {
        return Err("the front was set twice".into());
    }

    // Four clients on threads of their own, all connected to node 1.
    let addr = node1.stream_addr().ok_or("node 1 has no address")?;
    let (seen, progress) = mpsc::channel();
    let clients: Vec<_> = ["ann", "bob", "cy", "dee"]
        .into_iter()
        .map(|name| {
            let seen = seen.clone();
            thread::spawn(move || play(addr, name, seen))
        })
        .collect();
    drop(seen);

    // Mid-game, the room moves to node 2 with its players and its timer.
    for _ in 0..clients.len() {
        progress
            .recv_timeout(WAIT)
            .map_err(|_| format!("not every client saw tick {MOVE_AFTER_TICK}"))?;
    }
    let started = Instant::now();
    node1.relocate_spot(&SpotId::new(ROOMS[0])?, RelocateTo::Node(2))?;
    println!("the room moved to node 2 in {:?}", started.elapsed());

    let mut failures = Vec::new();
    for client in clients {
        match client.join().map_err(|_| "a client thread panicked")? {
            Ok(report) => println!("{report}"),
            Err(e) => failures.push(e),
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("; ").into());
    }
    // The room and its four players are on node 2; the matchmaker stayed.
    let hosted = [
        (node1.spot_count(), node1.actor_count()),
        (node2.spot_count(), node2.actor_count()),
    ];
    if hosted != [(0, 1), (1, 1 + SEATS)] {
        return Err(format!("(Spots, Actors) on nodes 1 and 2: {hosted:?}").into());
    }
    node1.shutdown();
    node2.shutdown();
    Ok(())
}

/// One client: queues, plays a move every fifth tick, and checks every
/// tick it is pushed. Tells `seen` when it saw tick `MOVE_AFTER_TICK`.
fn play(addr: SocketAddr, name: &str, seen: mpsc::Sender<()>) -> Result<String, String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{name}: {what}: {e}");
    let mut client = Client::connect(addr).map_err(|e| fail("connect", &e))?;
    let queue = Queue {
        player: name.to_owned(),
    };
    let seat = client.call(&queue, WAIT).map_err(|e| fail("queue", &e))?;
    let (mut tick, mut x, mut gap_max) = (0, 0, Duration::ZERO);
    let mut last_at = Instant::now();
    loop {
        let event = client.next_event(WAIT).map_err(|e| fail("read", &e))?;
        let payload = match event {
            Some(ClientEvent::Push {
                key: State::KEY,
                payload,
            }) => payload,
            Some(ClientEvent::Closed(reason)) => {
                return Err(fail("closed", &format!("{reason:?}")))
            }
            Some(_) => continue,
            None => return Err(fail("no tick within the wait after tick", &tick)),
        };
        let state = typed::decode::<State>(&payload).map_err(|e| fail("state", &e))?;
        // The check of this example: no tick lost, none repeated, none out
        // of order — before, during and after the move.
        if state.tick != tick + 1 {
            return Err(fail("after tick", &format!("{tick} came {}", state.tick)));
        }
        tick = state.tick;
        gap_max = gap_max.max(last_at.elapsed());
        last_at = Instant::now();
        if tick == MOVE_AFTER_TICK {
            let _ = seen.send(());
        }
        if state.over {
            break;
        }
        if tick % 5 == 0 {
            // A move is a request relayed to the player's Actor, wherever
            // the room is now; its reply says the move was applied once.
            let at = client
                .call(&Move { dx: 1 }, WAIT)
                .map_err(|e| fail("move", &e))?;
            x += 1;
            if at.x != x {
                return Err(fail("position", &format!("{} after {x} moves", at.x)));
            }
        }
    }
    // Still connected to node 1 and served by the player on node 2: a move
    // too large is the game's own error, a valid one is applied.
    match client.call(&Move { dx: 3 }, WAIT) {
        Err(ClientError::Remote(e)) if e.code() == TOO_FAST => {}
        other => return Err(fail("a move of 3", &format!("{other:?}"))),
    }
    let at = client
        .call(&Move { dx: -1 }, WAIT)
        .map_err(|e| fail("last move", &e))?;
    if at.x != x - 1 {
        return Err(fail("last position", &at.x));
    }
    Ok(format!(
        "{name}, seat {} in {}: ticks 1..={tick} in order, {x} moves, longest gap {gap_max:?}",
        seat.seat, seat.room
    ))
}
