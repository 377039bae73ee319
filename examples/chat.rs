//! Chat rooms: each user is an Actor bound to its client's session, each
//! room is an Actor that knows its members, and a message said in a room
//! travels user → room → every member → its client, as sends between
//! Actors. Nothing is shared between them but messages.
//!
//! ```sh
//! cargo run --example chat
//! ```
//!
//! Three clients join two rooms, talk, one leaves a room; each client must
//! receive exactly the messages of the rooms it was in while it was in
//! them. It exits 0 when every check held, and 1 with the reason when one
//! did not (or when something did not arrive within its deadline).

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zlink::api::AsyncTurn;
use zlink::prelude::*;

/// Every wait in this example is bounded by this.
const WAIT: Duration = Duration::from_secs(5);

// ---- What a client sends (each relayed to the client's user Actor) ----

/// LOGIN: binds the session to the user Actor `user-<name>`.
#[derive(Serialize, Deserialize)]
struct Login {
    name: String,
}
impl Message for Login {
    const KEY: PacketKey = PacketKey(1);
    type Reply = ();
}

/// JOIN: the reply is who is in the room now, the joiner included.
#[derive(Serialize, Deserialize)]
struct Join {
    room: String,
}
impl Message for Join {
    const KEY: PacketKey = PacketKey(2);
    type Reply = Vec<String>;
}

/// LEAVE: once answered, no message of the room reaches this client.
#[derive(Serialize, Deserialize)]
struct Leave {
    room: String,
}
impl Message for Leave {
    const KEY: PacketKey = PacketKey(3);
    type Reply = ();
}

/// SAY: a message to everyone in a room the user is in.
#[derive(Serialize, Deserialize)]
struct Say {
    room: String,
    text: String,
}
impl Message for Say {
    const KEY: PacketKey = PacketKey(4);
    type Reply = ();
}

/// Pushed to a client: something said in one of its rooms.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Said {
    room: String,
    from: String,
    text: String,
}
impl Message for Said {
    const KEY: PacketKey = PacketKey(10);
    type Reply = ();
}

// ---- Between Actors: a user and a room ----

/// A user enters a room; the reply is the room's members.
#[derive(Serialize, Deserialize)]
struct Enter {
    name: String,
}
impl Message for Enter {
    const KEY: PacketKey = PacketKey(20);
    type Reply = Vec<String>;
}

/// A user leaves a room.
#[derive(Serialize, Deserialize)]
struct Exit;
impl Message for Exit {
    const KEY: PacketKey = PacketKey(21);
    type Reply = ();
}

/// A user says something in a room: the room sends it on to its members.
#[derive(Serialize, Deserialize)]
struct Post {
    from: String,
    text: String,
}
impl Message for Post {
    const KEY: PacketKey = PacketKey(22);
    type Reply = ();
}

/// The game's own error: saying something in a room one is not in.
const NOT_IN_ROOM: u32 = 403;

fn user_id(name: &str) -> Result<ActorId, Error> {
    ActorId::new(&format!("user-{name}")).map_err(|_| Error::app(400, "a name, please"))
}

fn room_id(room: &str) -> Result<ActorId, Error> {
    ActorId::new(&format!("room-{room}")).map_err(|_| Error::app(400, "a room name, please"))
}

/// A user: its name and the rooms it is in. Bound to its client's session,
/// so that it can push to it.
struct User {
    name: String,
    rooms: Vec<String>,
}

impl User {
    /// JOIN and LEAVE must be answered only once the room has taken the
    /// user in (or out): otherwise a message said right after could reach
    /// the room first. So the turn awaits the room's reply before it
    /// answers the client. The user's lane stays in this turn meanwhile;
    /// the room never awaits a user, so the two cannot wait on each other.
    fn ask_room<M: Message>(
        ctx: &mut dyn ActorContext,
        room: String,
        message: &M,
        joined: bool,
    ) -> Option<Result<Bytes, Error>> {
        let asked = room_id(&room).and_then(|to| {
            let payload = typed::encode(message)?;
            Ok(ctx.request_reply(&to, M::KEY, payload, WAIT))
        });
        let reply = match asked {
            Ok(reply) => reply,
            Err(e) => return Some(Err(e)),
        };
        let turn = AsyncTurn::new(reply, move |me: &mut User, _, outcome| {
            // The rest of the turn, with the user's state again. Its value
            // is the client's reply: the room's, or the room's error.
            let answer = typed::decode_reply::<M>(outcome).and_then(|answer| {
                me.rooms.retain(|r| *r != room);
                if joined {
                    me.rooms.push(room);
                }
                typed::encode(&answer)
            });
            Some(answer)
        });
        ctx.suspend(turn).err().map(Err)
    }
}

impl Actor for User {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match m.key {
            Join::KEY => match m.decode::<Join>() {
                Ok(join) => Self::ask_room(
                    ctx,
                    join.room,
                    &Enter {
                        name: self.name.clone(),
                    },
                    true,
                ),
                Err(e) => Some(Err(e)),
            },
            Leave::KEY => match m.decode::<Leave>() {
                Ok(leave) => Self::ask_room(ctx, leave.room, &Exit, false),
                Err(e) => Some(Err(e)),
            },
            Say::KEY => m.answer(|say: Say| {
                if !self.rooms.contains(&say.room) {
                    let detail = format!("{} is not in {}", self.name, say.room);
                    return Err(Error::app(NOT_IN_ROOM, detail));
                }
                let post = Post {
                    from: self.name.clone(),
                    text: say.text,
                };
                ctx.send_typed(&room_id(&say.room)?, &post)
            }),
            // From a room: on to the client. A user whose client has gone
            // has no binding to push to; the message is simply not shown.
            Said::KEY => {
                if let Ok(said) = m.decode::<Said>() {
                    let _ = ctx.push_typed(&said);
                }
                None
            }
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }
}

/// A room: its members, in the order they entered.
struct Room {
    name: String,
    members: Vec<(ActorId, String)>,
}

impl Actor for Room {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        m: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        // Only users talk to rooms: `from` is the user Actor that sent it.
        let Some(from) = m.from.clone() else {
            return Some(Err(Reason::NoPacketHandler.into()));
        };
        match m.key {
            Enter::KEY => m.answer(|enter: Enter| {
                self.members.retain(|(id, _)| *id != from);
                self.members.push((from, enter.name));
                Ok(self.members.iter().map(|(_, name)| name.clone()).collect())
            }),
            Exit::KEY => m.answer(|Exit| {
                self.members.retain(|(id, _)| *id != from);
                Ok(())
            }),
            // The broadcast: one send per member, each to a user Actor
            // wherever it lives. A room handles one message at a time, so
            // every member sees the room's messages in the same order.
            Post::KEY => m.answer(|post: Post| {
                let said = Said {
                    room: self.name.clone(),
                    from: post.from,
                    text: post.text,
                };
                for (member, _) in &self.members {
                    ctx.send_typed(member, &said)?;
                }
                Ok(())
            }),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }
}

/// The Spot of both Actor types. It hears when a client goes away (§7);
/// this small chat keeps the user in its rooms, to be found on reconnect.
struct Lobby;
impl Spot for Lobby {
    fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

/// A session's packet goes on to its user Actor, whose reply goes straight
/// back to the client (§5).
fn relay_to_user(session: &Session, packet: Packet) -> Result<(), Error> {
    let user = session.attribute::<ActorId>();
    let bound = user.and_then(|id| session.actors().find(&id));
    bound
        .ok_or(Error::new(Reason::SessionNotBound))?
        .relay(packet)
}

fn start_node() -> Result<Node, StartError> {
    let store = Arc::new(EmbeddedStore::new(
        MonotonicClock::new(),
        Duration::from_secs(10),
    ));
    NodeBuilder::new(1)
        .listen("127.0.0.1:0".parse().expect("an address"))
        .object_role(ObjectRole::Server)
        .location_store(store)
        .enable_actor_dispatch()
        .settings(NodeSettings {
            shards: 1,
            pin_cores: false,
            ..NodeSettings::default()
        })
        .actor_type("user", Arc::new(Lobby), |id| {
            Box::new(User {
                name: id.as_str().trim_start_matches("user-").to_owned(),
                rooms: Vec::new(),
            })
        })
        .actor_type("room", Arc::new(Lobby), |id| {
            Box::new(Room {
                name: id.as_str().trim_start_matches("room-").to_owned(),
                members: Vec::new(),
            })
        })
        .on_message(|session: Session, login: Login| async move {
            let id = user_id(&login.name)?;
            let user = session.actor("user", &id).await?;
            session.actors().bind(user).await?;
            session.set_attribute(id);
            Ok(())
        })
        .on_packet(Join::KEY, |session, packet| async move {
            // A room exists once someone joins it: look it up, or create it.
            let join = packet.decode::<Join>()?;
            session.actor("room", &room_id(&join.room)?).await?;
            relay_to_user(&session, packet)
        })
        .on_packet(Leave::KEY, |session, packet| async move {
            relay_to_user(&session, packet)
        })
        .on_packet(Say::KEY, |session, packet| async move {
            relay_to_user(&session, packet)
        })
        .start()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => {
            println!("chat: every check held");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chat: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn StdError>> {
    let node = start_node()?;
    let addr = node.stream_addr().ok_or("the node has no address")?;
    let mut ann = login(addr, "ann")?;
    let mut bob = login(addr, "bob")?;
    let mut cy = login(addr, "cy")?;

    // ann and bob in the lobby, ann and cy in dev.
    join(&mut ann, "lobby", &["ann"])?;
    join(&mut bob, "lobby", &["ann", "bob"])?;
    join(&mut ann, "dev", &["ann"])?;
    join(&mut cy, "dev", &["ann", "cy"])?;
    say(&mut ann, "lobby", "hi lobby")?;
    say(&mut cy, "dev", "hi dev")?;

    // bob is not in dev: the user Actor refuses with the game's own error.
    match bob.call(&say_in("dev", "let me in"), WAIT) {
        Err(ClientError::Remote(e)) if e.code() == NOT_IN_ROOM => {}
        other => return Err(format!("bob said in dev: {other:?}").into()),
    }

    // bob leaves the lobby; what ann says next must not reach him.
    let lobby = "lobby".to_owned();
    bob.call(&Leave { room: lobby }, WAIT)?;
    say(&mut ann, "lobby", "bob left?")?;

    // Everyone joins both rooms and each room says "the end". A room sends
    // to a member in order, so any message a client should not have had
    // would reach it before that room's "the end": each client reads until
    // both, and must have seen exactly what was said while it was in.
    join(&mut bob, "lobby", &["ann", "bob"])?;
    join(&mut bob, "dev", &["ann", "cy", "bob"])?;
    join(&mut cy, "lobby", &["ann", "bob", "cy"])?;
    say(&mut ann, "lobby", "the end")?;
    say(&mut cy, "dev", "the end")?;

    // What each client heard, room by room, in order.
    let heard = read_until_the_end(&mut ann, "ann")?;
    heard.expect(
        "lobby",
        &["ann: hi lobby", "ann: bob left?", "ann: the end"],
    )?;
    heard.expect("dev", &["cy: hi dev", "cy: the end"])?;
    let heard = read_until_the_end(&mut bob, "bob")?;
    heard.expect("lobby", &["ann: hi lobby", "ann: the end"])?;
    heard.expect("dev", &["cy: the end"])?;
    let heard = read_until_the_end(&mut cy, "cy")?;
    heard.expect("lobby", &["ann: the end"])?;
    heard.expect("dev", &["cy: hi dev", "cy: the end"])?;

    // The clients leave first: a shutdown gives the sessions still open
    // until its deadline (`NodeSettings::shutdown_deadline`) to finish.
    drop((ann, bob, cy));
    node.shutdown();
    Ok(())
}

fn login(addr: std::net::SocketAddr, name: &str) -> Result<Client, ClientError> {
    let mut client = Client::connect(addr)?;
    client.call(&Login { name: name.into() }, WAIT)?;
    Ok(client)
}

/// Joins `room` and checks who the room says is in it.
fn join(client: &mut Client, room: &str, members: &[&str]) -> Result<(), Box<dyn StdError>> {
    let roster = client.call(&Join { room: room.into() }, WAIT)?;
    if roster != members {
        return Err(format!("{room} has {roster:?}, expected {members:?}").into());
    }
    Ok(())
}

fn say_in(room: &str, text: &str) -> Say {
    Say {
        room: room.into(),
        text: text.into(),
    }
}

fn say(client: &mut Client, room: &str, text: &str) -> Result<(), ClientError> {
    client.call(&say_in(room, text), WAIT)
}

/// What one client was pushed, by room, as "from: text" lines.
struct Heard {
    name: String,
    rooms: BTreeMap<String, Vec<String>>,
}

impl Heard {
    /// Checks that the client heard exactly `lines` in `room`, in order.
    fn expect(&self, room: &str, lines: &[&str]) -> Result<(), String> {
        let heard = self.rooms.get(room).map(Vec::as_slice).unwrap_or_default();
        if heard != lines {
            return Err(format!(
                "{} heard {heard:?} in {room}, expected {lines:?}",
                self.name
            ));
        }
        println!("{} heard in {room}: {heard:?}", self.name);
        Ok(())
    }

    fn ended(&self, room: &str) -> bool {
        let said = self.rooms.get(room).map(Vec::as_slice).unwrap_or_default();
        said.iter().any(|line| line.ends_with(": the end"))
    }
}

/// Reads a client's pushes up to "the end" of both rooms.
fn read_until_the_end(client: &mut Client, name: &str) -> Result<Heard, Box<dyn StdError>> {
    let deadline = Instant::now() + WAIT;
    let mut heard = Heard {
        name: name.to_owned(),
        rooms: BTreeMap::new(),
    };
    while !(heard.ended("lobby") && heard.ended("dev")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match client.next_event(left)? {
            Some(ClientEvent::Push {
                key: Said::KEY,
                payload,
            }) => {
                let said = typed::decode::<Said>(&payload)?;
                let line = format!("{}: {}", said.from, said.text);
                heard.rooms.entry(said.room).or_default().push(line);
            }
            Some(ClientEvent::Closed(reason)) => {
                return Err(format!("{name}'s connection closed: {reason:?}").into())
            }
            Some(_) => {}
            None => {
                let so_far = &heard.rooms;
                return Err(format!("{name} still waits for \"the end\": {so_far:?}").into());
            }
        }
    }
    Ok(heard)
}
