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
use zlink::ids::{ActorId, ActorRef, PacketKey};

/// Request: binds the player named by the payload; replies "welcome".
pub const LOGIN: PacketKey = PacketKey(1);
/// Request `"<player>:<dx>,<dy>"`: relayed to the player, which replies with
/// its new position `"<x>,<y>"`.
pub const MOVE: PacketKey = PacketKey(2);
/// Request `"<player>"`: relayed to the player, which replies with its
/// position without moving (the clients' final check).
pub const WHERE: PacketKey = PacketKey(3);
/// Request `"<player>"`: looks the player up (or creates it on this node,
/// §1 step 2) without binding it, and keeps the ActorRef for JOIN; replies
/// "found".
pub const LOOKUP: PacketKey = PacketKey(4);
/// Request: binds the ActorRef the last LOOKUP of this session found,
/// wherever the player is by now (§12: followed once if it moved, never
/// looked up again); replies "welcome".
pub const JOIN: PacketKey = PacketKey(5);
/// Request `"<player>"` of a player bound to this session: replies
/// `"<player>:<ObjectGeneration> at <tag>"`, the tag an opaque digest of
/// the session's snapshot of where the player is: it changes when the
/// player moves (§8.1), and names no node (§1).
pub const LOCATE: PacketKey = PacketKey(6);
/// Push from a player to its session: `"tick <moves>"`.
pub const TICK: PacketKey = PacketKey(100);
/// Sent by the duplicate-connection callback to the replaced session.
pub const REPLACED_NOTICE: PacketKey = PacketKey(101);

/// The game's own error code (`Error::app`, kind Application): a payload
/// this game cannot read. Its detail says what was expected.
pub const BAD_PAYLOAD: u32 = 1;

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

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        if message.key == WHERE {
            return Some(Ok(Bytes::from(format!("{},{}", self.x, self.y))));
        }
        if message.key != MOVE {
            return Some(Err(Reason::NoPacketHandler.into()));
        }
        let Some((dx, dy)) = parse_step(&message.payload) else {
            // A payload this game cannot read is the game's own error.
            return Some(Err(Error::app(BAD_PAYLOAD, "a MOVE is <player>:<dx>,<dy>")));
        };
        self.x = self.x.saturating_add(dx);
        self.y = self.y.saturating_add(dy);
        self.moves += 1;
        bump(&self.stats.moves);
        if self.moves % 4 == 0 {
            match ctx.push(TICK, Bytes::from(format!("tick {}", self.moves))) {
                Ok(()) => bump(&self.stats.pushes),
                Err(_) => bump(&self.stats.push_refused),
            }
        }
        Some(Ok(Bytes::from(format!("{},{}", self.x, self.y))))
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

/// The player named before the first ':' of a payload.
fn player_of(payload: &[u8]) -> Result<ActorId, Error> {
    let bad = || Error::app(BAD_PAYLOAD, "a player name of 1 to 255 bytes of UTF-8");
    let text = std::str::from_utf8(payload).map_err(|_| bad())?;
    let name = text.split(':').next().unwrap_or(text);
    ActorId::new(name).map_err(|_| bad())
}

/// The `<dx>,<dy>` after the ':' of a MOVE payload.
fn parse_step(payload: &[u8]) -> Option<(i64, i64)> {
    let text = std::str::from_utf8(payload).ok()?;
    let (_, step) = text.split_once(':')?;
    let (dx, dy) = step.split_once(',')?;
    Some((dx.parse().ok()?, dy.parse().ok()?))
}

/// The ActorRef the last LOOKUP of a session found (a session attribute).
struct LookedUp(ActorRef);

/// Relays a packet to the player it names, which must be bound to this
/// session: the player answers the client directly (§5).
async fn relay_to_player(session: Session, packet: Packet) -> Result<(), Error> {
    let id = player_of(&packet.payload)?;
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
        .on_packet(LOGIN, |session, packet| async move {
            let id = player_of(&packet.payload)?;
            let player = session.actor(PLAYER, &id).await?;
            session.actors().bind(player).await?;
            session.reply(packet, Ok(Bytes::from_static(b"welcome")))
        })
        .on_packet(MOVE, relay_to_player)
        .on_packet(WHERE, relay_to_player)
        .on_packet(LOOKUP, |session, packet| async move {
            let id = player_of(&packet.payload)?;
            let player = session.actor(PLAYER, &id).await?;
            session.set_attribute(LookedUp(player));
            session.reply(packet, Ok(Bytes::from_static(b"found")))
        })
        .on_packet(JOIN, |session, packet| async move {
            let player = session
                .attribute::<LookedUp>()
                .ok_or(Error::new(Reason::SessionNotBound))?;
            session.actors().bind(player.0.clone()).await?;
            session.reply(packet, Ok(Bytes::from_static(b"welcome")))
        })
        .on_packet(LOCATE, |session, packet| async move {
            let id = player_of(&packet.payload)?;
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
            let where_ = format!(
                "{}:{} at {:016x}",
                actor.id,
                actor.generation.0,
                std::hash::Hasher::finish(&tag)
            );
            session.reply(packet, Ok(Bytes::from(where_)))
        })
        .on_replaced(move |session, actor| {
            let stats = Arc::clone(&replaced_stats);
            async move {
                bump(&stats.replaced_callbacks);
                session.send_to_client(
                    REPLACED_NOTICE,
                    Bytes::copy_from_slice(actor.as_str().as_bytes()),
                )
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_parse_or_are_refused() {
        assert_eq!(parse_step(b"player-1:3,-2"), Some((3, -2)));
        assert_eq!(parse_step(b"player-1:3"), None);
        assert_eq!(parse_step(b"player-1"), None);
        assert_eq!(parse_step(&[0xff, b':', b'1', b',', b'1']), None);
        assert_eq!(player_of(b"player-7:1,1").unwrap().as_str(), "player-7");
        assert!(player_of(&[0xff]).is_err());
        assert!(player_of(b"").is_err());
    }
}
