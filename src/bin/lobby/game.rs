//! The lobby game, the sample both binaries run (zlink-demo's mesh and every
//! zlink-node): players are Actors of type "player" in a
//! lobby Spot. A client logs in (binds its player), moves it (the MOVE is
//! relayed to the player, which answers with its new position) and receives
//! a lobby "tick" push from its player on every fourth MOVE. A second login
//! of the same player elsewhere replaces the first session (§6). A client
//! may also look a player up without binding it (LOOKUP, which creates the
//! player on the node it asks when it does not exist yet), join it later
//! with the ActorRef so found (JOIN, §1 step 3 with a reference that may
//! have gone stale meanwhile, §12), and ask where its bound player is
//! (LOCATE).
//!
//! Its messages are typed (issue 21 item 6): Rust types implementing
//! `zlink::typed::Message`, carried as MessagePack (messages.rs, and the
//! table in docs/wire.md "The lobby game's messages"). The session
//! handlers read them with `on_message` or `Packet::decode`, the player
//! answers with `ActorMessage::answer` and pushes with `push_typed`.
//!
//! Everything the game observes is counted per node in [`NodeStats`] so that
//! a report can set the server's view beside the clients'. Each binary
//! includes this file as a `#[path]` module; [`register`] adds the game to a
//! node builder.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use zlink::api::{
    Actor, ActorContext, ActorMessage, ExecutionMode, NodeBuilder, Packet, Session, Spot,
};
use zlink::error::{Error, Reason};
use zlink::ids::{ActorId, ActorRef};

#[path = "messages.rs"]
mod messages;
pub use messages::*;

/// The Actor type every player is.
pub const PLAYER: &str = "player";
/// The Spot kind of rooms: SpotWide, so a room's players take turns through
/// one gate (§5), and a room moves as one unit.
pub const ROOM: &str = "room";

/// What one node's game code saw.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// MOVEs handled by players hosted here.
    pub moves: AtomicU64,
    /// Ticks pushed by players hosted here.
    pub pushes: AtomicU64,
    /// Pushes the runtime refused (e.g. session-not-bound after a replacement).
    pub push_refused: AtomicU64,
    /// `on_disconnect_actor` calls of the lobby Spot here.
    pub disconnects: AtomicU64,
    /// Duplicate-connection callbacks run on sessions here.
    pub replaced_callbacks: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A player: its position and how often it moved, across all the sessions
/// that were bound to it.
struct Player {
    x: i64,
    y: i64,
    moves: u64,
    stats: Arc<NodeStats>,
}

impl Player {
    fn position(&self) -> Position {
        Position {
            x: self.x,
            y: self.y,
        }
    }

    /// A MOVE: the step applied once, and a tick pushed on every fourth.
    fn step(&mut self, ctx: &mut dyn ActorContext, step: Move) -> Result<Position, Error> {
        self.x = self.x.saturating_add(step.dx);
        self.y = self.y.saturating_add(step.dy);
        self.moves += 1;
        bump(&self.stats.moves);
        if self.moves % 4 == 0 {
            match ctx.push_typed(&Tick { moves: self.moves }) {
                Ok(()) => bump(&self.stats.pushes),
                Err(_) => bump(&self.stats.push_refused),
            }
        }
        Ok(self.position())
    }
}

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        match message.key {
            MOVE => message.answer(|step: Move| self.step(ctx, step)),
            WHERE => message.answer(|_: Where| Ok(self.position())),
            _ => Some(Err(Reason::NoPacketHandler.into())),
        }
    }

    /// Relocation (§8) carries the position and the move count, so the
    /// clients' position checks and the every-fourth-move tick continue on
    /// the target.
    fn snapshot(&self) -> Option<Bytes> {
        let mut state = Vec::with_capacity(24);
        for value in [self.x, self.y] {
            state.extend_from_slice(&value.to_be_bytes());
        }
        state.extend_from_slice(&self.moves.to_be_bytes());
        Some(Bytes::from(state))
    }

    fn restore(&mut self, state: Bytes) -> Result<(), Error> {
        let word = |i: usize| -> Result<[u8; 8], Error> {
            state
                .get(i * 8..i * 8 + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or(Error::new(Reason::MalformedRecord))
        };
        if state.len() != 24 {
            return Err(Reason::MalformedRecord.into());
        }
        self.x = i64::from_be_bytes(word(0)?);
        self.y = i64::from_be_bytes(word(1)?);
        self.moves = u64::from_be_bytes(word(2)?);
        Ok(())
    }
}

/// The lobby: counts the disconnect notifications it gets (§7).
struct Lobby {
    stats: Arc<NodeStats>,
}

impl Spot for Lobby {
    fn on_disconnect_actor(&self, _actor: &ActorId) -> Result<(), Error> {
        bump(&self.stats.disconnects);
        Ok(())
    }
}

/// The ActorId of a player's name; a name that is none (empty, or over
/// 255 bytes) is the game's own error.
fn player_id(name: &str) -> Result<ActorId, Error> {
    ActorId::new(name)
        .map_err(|_| Error::app(BAD_PAYLOAD, "a player name of 1 to 255 bytes of UTF-8"))
}

/// The ActorRef the last LOOKUP of a session found (a session attribute).
struct LookedUp(ActorRef);

/// Relays a packet to the player `player`, which must be bound to this
/// session: the player answers the client directly (§5), reading the same
/// bytes as its type again.
fn relay_to_player(session: &Session, player: &str, packet: Packet) -> Result<(), Error> {
    let id = player_id(player)?;
    let bound = session
        .actors()
        .find(&id)
        .ok_or(Error::new(Reason::SessionNotBound))?;
    bound.relay(packet)
}

/// Adds the game to `builder`: the "player" Actor type in the lobby (its
/// Entry Spot), the SpotWide "room" Spot kind, the LOGIN, MOVE, WHERE,
/// LOOKUP, JOIN and LOCATE handlers and the duplicate-connection callback, all counting into
/// `stats`. The caller sets the node's role, store, addresses and links.
pub fn register(builder: NodeBuilder, stats: &Arc<NodeStats>) -> NodeBuilder {
    let lobby = Arc::new(Lobby {
        stats: Arc::clone(stats),
    });
    let factory_stats = Arc::clone(stats);
    let room_stats = Arc::clone(stats);
    let replaced_stats = Arc::clone(stats);
    builder
        .spot_kind(ROOM, ExecutionMode::SpotWide, move |_| {
            let room: Arc<dyn Spot> = Arc::new(Lobby {
                stats: Arc::clone(&room_stats),
            });
            room
        })
        .actor_type(PLAYER, lobby, move |_| {
            Box::new(Player {
                x: 0,
                y: 0,
                moves: 0,
                stats: Arc::clone(&factory_stats),
            })
        })
        .on_message(|session, login: Login| async move {
            let id = player_id(&login.player)?;
            let player = session.actor(PLAYER, &id).await?;
            session.actors().bind(player).await?;
            Ok(Welcome {
                player: login.player,
            })
        })
        .on_packet(MOVE, |session, packet| async move {
            let step: Move = packet.decode()?;
            relay_to_player(&session, &step.player, packet)
        })
        .on_packet(WHERE, |session, packet| async move {
            let at: Where = packet.decode()?;
            relay_to_player(&session, &at.player, packet)
        })
        .on_message(|session, lookup: Lookup| async move {
            let id = player_id(&lookup.player)?;
            let player = session.actor(PLAYER, &id).await?;
            session.set_attribute(LookedUp(player));
            Ok(Found {
                player: lookup.player,
            })
        })
        .on_message(|session, _: Join| async move {
            let player = session
                .attribute::<LookedUp>()
                .ok_or(Error::new(Reason::SessionNotBound))?;
            let id = player.0.id.clone();
            session.actors().bind(player.0.clone()).await?;
            Ok(Welcome {
                player: id.as_str().to_owned(),
            })
        })
        .on_message(|session, locate: Locate| async move {
            let id = player_id(&locate.player)?;
            let bound = session
                .actors()
                .find(&id)
                .ok_or(Error::new(Reason::SessionNotBound))?;
            let actor = bound.actor_ref();
            // §1: no node id, endpoint or authority generation reaches a
            // client: the location is shown as an opaque tag, which
            // changes when the player moves (§8.1).
            let mut tag = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&format!("{:?}", bound.location()), &mut tag);
            Ok(Location {
                player: actor.id.as_str().to_owned(),
                generation: actor.generation.0,
                at: format!("{:016x}", std::hash::Hasher::finish(&tag)),
            })
        })
        .on_replaced(move |session, actor| {
            let stats = Arc::clone(&replaced_stats);
            async move {
                bump(&stats.replaced_callbacks);
                let notice = zlink::typed::encode(&Replaced {
                    player: actor.as_str().to_owned(),
                })?;
                session.send_to_client(REPLACED_NOTICE, notice)
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zlink::typed;

    #[test]
    fn messages_are_maps_of_their_fields_and_names_are_checked() {
        let bytes = typed::encode(&Move {
            player: "p".into(),
            dx: 1,
            dy: -1,
        })
        .unwrap();
        // A map of three entries whose first key is "player".
        assert_eq!(&bytes[..8], b"\x83\xa6player");
        let back: Move = typed::decode(&bytes).unwrap();
        assert_eq!((back.dx, back.dy), (1, -1));
        assert_eq!(typed::encode(&Join {}).unwrap().as_ref(), b"\x80");
        assert_eq!(player_id("player-7").unwrap().as_str(), "player-7");
        let e = player_id("").unwrap_err();
        assert_eq!(e.code(), BAD_PAYLOAD, "{e}");
    }
}
