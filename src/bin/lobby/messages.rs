//! The lobby game's messages (issue 21 item 6): each a Rust type with its
//! packet key and its reply type (`zlink::typed::Message`), carried as
//! MessagePack with a struct's fields by name (docs/wire.md "Typed
//! payloads"). docs/wire.md "The lobby game's messages" has them as a table;
//! a client in any language reads and writes them as maps (the TypeScript
//! client's `call`, the C test's hand-written encoder).
//!
//! This file has only the types, so that a client of the lobby includes it
//! alone (`#[path]`): zlink-bench's `--target` load and the tests' helpers.
#![allow(dead_code)]

use serde::{Deserialize, Serialize};
use zlink::ids::PacketKey;
use zlink::typed::Message;

/// Key of [`Login`].
pub const LOGIN: PacketKey = PacketKey(1);
/// Key of [`Move`].
pub const MOVE: PacketKey = PacketKey(2);
/// Key of [`Where`].
pub const WHERE: PacketKey = PacketKey(3);
/// Key of [`Lookup`].
pub const LOOKUP: PacketKey = PacketKey(4);
/// Key of [`Join`].
pub const JOIN: PacketKey = PacketKey(5);
/// Key of [`Locate`].
pub const LOCATE: PacketKey = PacketKey(6);
/// Key of the [`Tick`] push.
pub const TICK: PacketKey = PacketKey(100);
/// Key of the [`Replaced`] notice.
pub const REPLACED_NOTICE: PacketKey = PacketKey(101);

/// The game's own error code (`Error::app`, kind Application): a player
/// name that is no ActorId (empty, or over 255 bytes). A payload that is
/// not the message's type at all is refused by the typed layer before the
/// game sees it (`MalformedPayload`, naming the type).
pub const BAD_PAYLOAD: u32 = 1;

/// Request: binds the player named `player` to the session (creating it on
/// this node when it does not exist yet, §1 step 2). Replies [`Welcome`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Login {
    pub player: String,
}

/// The reply to [`Login`] and [`Join`]: the player now bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub player: String,
}

/// Request: moves the bound player `player` by `(dx, dy)`; relayed to the
/// player, which replies with its new [`Position`] and pushes a [`Tick`]
/// on every fourth MOVE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub player: String,
    pub dx: i64,
    pub dy: i64,
}

/// A player's position: the reply to [`Move`] and [`Where`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub x: i64,
    pub y: i64,
}

/// Request: the bound player `player`'s [`Position`], without moving it
/// (relayed to the player).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Where {
    pub player: String,
}

/// Request: looks the player up (or creates it on this node, §1 step 2)
/// without binding it, and keeps the ActorRef for [`Join`]. Replies
/// [`Found`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lookup {
    pub player: String,
}

/// The reply to [`Lookup`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    pub player: String,
}

/// Request: binds the ActorRef the last [`Lookup`] of this session found,
/// wherever the player is by now (§12: followed once if it moved, never
/// looked up again). Replies [`Welcome`]. No fields: an empty map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Join {}

/// Request about the player `player` bound to this session: replies its
/// [`Location`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locate {
    pub player: String,
}

/// The reply to [`Locate`]: the player, its ObjectGeneration, and `at`, an
/// opaque digest (16 hex digits) of the session's snapshot of where the
/// player is: it changes when the player moves (§8.1), and names no node
/// (§1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub player: String,
    pub generation: u64,
    pub at: String,
}

/// Push from a player to its session on every fourth MOVE: how many MOVEs
/// it has handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tick {
    pub moves: u64,
}

/// Sent to a session whose player another login took (§6), just before
/// its `Close(Replaced)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    pub player: String,
}

impl Message for Login {
    const KEY: PacketKey = LOGIN;
    type Reply = Welcome;
}

impl Message for Move {
    const KEY: PacketKey = MOVE;
    type Reply = Position;
}

impl Message for Where {
    const KEY: PacketKey = WHERE;
    type Reply = Position;
}

impl Message for Lookup {
    const KEY: PacketKey = LOOKUP;
    type Reply = Found;
}

impl Message for Join {
    const KEY: PacketKey = JOIN;
    type Reply = Welcome;
}

impl Message for Locate {
    const KEY: PacketKey = LOCATE;
    type Reply = Location;
}

impl Message for Tick {
    const KEY: PacketKey = TICK;
    type Reply = ();
}

impl Message for Replaced {
    const KEY: PacketKey = REPLACED_NOTICE;
    type Reply = ();
}
