//! The public surface (§1, §3, §13 in Rust form): build a node, register
//! Actor types, Spots and packet handlers, run it. `zlink::prelude` brings
//! all of it in one `use`.
//!
//! The typed API first (issue 21 item 4): each message is a Rust type with
//! its packet key and its reply type ([`Message`](crate::typed::Message)),
//! encoded as MessagePack; a session's handler takes the request type and
//! returns the reply type ([`NodeBuilder::on_message`]), an Actor answers
//! one with [`ActorMessage::answer`], a client calls with
//! [`Client::call`](crate::client::Client::call), and the game's own errors
//! reach the client with their code ([`Error::app`](crate::error::Error::app)).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde::{Deserialize, Serialize};
//! use zlink::prelude::*;
//!
//! /// LOGIN: binds the player it names to the session.
//! #[derive(Serialize, Deserialize)]
//! struct Login { player: String }
//! impl Message for Login { const KEY: PacketKey = PacketKey(1); type Reply = (); }
//!
//! /// MOVE: relayed to the player, which answers with where it is now.
//! #[derive(Serialize, Deserialize)]
//! struct Move { dx: i64, dy: i64 }
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Position { x: i64, y: i64 }
//! impl Message for Move { const KEY: PacketKey = PacketKey(2); type Reply = Position; }
//!
//! #[derive(Default)]
//! struct Player { x: i64, y: i64 }
//! impl Actor for Player {
//!     fn handle(&mut self, _: &mut dyn ActorContext, m: ActorMessage) -> Option<Result<Bytes, Error>> {
//!         match m.key {
//!             Move::KEY => m.answer(|step: Move| {
//!                 if step.dx.abs() > 1 || step.dy.abs() > 1 {
//!                     return Err(Error::app(1, "one step at a time")); // the game's own code
//!                 }
//!                 (self.x, self.y) = (self.x + step.dx, self.y + step.dy);
//!                 Ok(Position { x: self.x, y: self.y })
//!             }),
//!             _ => Some(Err(Reason::NoPacketHandler.into())),
//!         }
//!     }
//! }
//! struct Lobby;
//! impl Spot for Lobby {
//!     fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> { Ok(()) }
//! }
//!
//! let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), Duration::from_secs(10)));
//! let node = NodeBuilder::new(1)
//!     .listen("127.0.0.1:0".parse().unwrap())
//!     .object_role(ObjectRole::Server)
//!     .location_store(store)
//!     .enable_actor_dispatch()
//!     .actor_type("player", Arc::new(Lobby), |_| Box::new(Player::default()))
//!     .on_message(|session: Session, login: Login| async move {
//!         let id = ActorId::new(&login.player).map_err(|_| Error::app(2, "bad player name"))?;
//!         let player = session.actor("player", &id).await?;
//!         session.actors().bind(player).await?;
//!         session.set_attribute(id);
//!         Ok(())
//!     })
//!     .on_packet(Move::KEY, |session, packet| async move {
//!         // Relayed as it is: the player decodes it and answers the client (§5).
//!         let id = session.attribute::<ActorId>().ok_or(Error::new(Reason::SessionNotBound))?;
//!         let player = session.actors().find(&id).ok_or(Error::new(Reason::SessionNotBound))?;
//!         player.relay(packet)
//!     })
//!     .start()
//!     .unwrap();
//!
//! // A game client (here the Rust one; docs/clients.md has the others).
//! let mut client = Client::connect(node.stream_addr().unwrap()).unwrap();
//! let wait = Duration::from_secs(2);
//! client.call(&Login { player: "ann".into() }, wait).unwrap();
//! let at = client.call(&Move { dx: 1, dy: 0 }, wait).unwrap();
//! assert_eq!((at.x, at.y), (1, 0));
//! match client.call(&Move { dx: 5, dy: 0 }, wait) {
//!     Err(ClientError::Remote(e)) => assert_eq!((e.kind(), e.code()), (ErrorKind::Application, 1)),
//!     other => panic!("{other:?}"),
//! }
//! ```
//!
//! Beneath it the raw API takes and gives `Bytes` (a packet handler
//! answers with [`Session::reply`], an Actor returns the reply's bytes),
//! and User Spots group Actors at run time:
//!
//! ```no_run
//! use std::sync::Arc;
//! use zlink::prelude::*;
//!
//! struct Player;
//! impl Actor for Player {
//!     fn handle(&mut self, _: &mut dyn ActorContext, m: ActorMessage) -> Option<Result<Bytes, Error>> {
//!         Some(Ok(m.payload)) // echo
//!     }
//! }
//! struct Lobby;
//! impl Spot for Lobby {
//!     fn on_disconnect_actor(&self, _: &ActorId) -> Result<(), Error> { Ok(()) }
//! }
//!
//! let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), std::time::Duration::from_secs(10)));
//! let node = NodeBuilder::new(1)
//!     .listen("127.0.0.1:0".parse().unwrap())
//!     .object_role(ObjectRole::Server)
//!     .location_store(store)
//!     .enable_actor_dispatch()
//!     .actor_type("player", Arc::new(Lobby), |_| Box::new(Player))
//!     // User Spots created at run time; a room's Actors share its gate (§5).
//!     .spot_kind("room", ExecutionMode::SpotWide, |_| Arc::new(Lobby))
//!     .on_connect(|session, hello| async move {
//!         // §1 step 1: authenticate the hello (here: it names the player).
//!         let name = std::str::from_utf8(&hello.payload).unwrap_or("");
//!         let id = ActorId::new(name).map_err(|_| Error::new(Reason::NotAuthenticated))?;
//!         session.set_attribute(id);
//!         session.reply(hello, Ok(Bytes::from_static(b"welcome")))
//!     })
//!     .on_packet(PacketKey(1), |session, packet| async move {
//!         let id = session.attribute::<ActorId>().ok_or(Error::new(Reason::NotAuthenticated))?;
//!         let player = session.actor("player", &id).await?;
//!         let bound = session.actors().bind(player).await?;
//!         bound.relay(packet)
//!     })
//!     .start()
//!     .unwrap();
//! let room = node.create_spot("room", &SpotId::new("room-7").unwrap()).unwrap();
//! let monster = room.id().actor_id("monster-3").unwrap(); // "room-7/monster-3"
//! node.create_actor_in(&room, "player", &monster).unwrap();
//! ```

mod builder;
pub use crate::runtime::app::{actor, session, spot};
pub use crate::runtime::app::{NodeSettings, RelocationUnit, StartCancel, StartError};
pub use crate::runtime::caller::{ActorCaller, CallReply};

pub use crate::core::relocation::RelocationConfig;
pub use crate::core::trace::{FlowCounters, FlowTrace};
pub use crate::ids::{CallId, TimerId};
pub use crate::net::handshake::{ClusterSecret, HandshakeError};
pub use crate::net::{IoBackend, ReactorError};
pub use crate::runtime::metrics::{NodeMetrics, Readiness, CONTENT_TYPE as METRICS_CONTENT_TYPE};
pub use crate::wire::DecodeLimits;
pub use actor::{Actor, ActorContext, ActorMessage, AsyncTurn, TimerTick};
pub use builder::{LeaseWatch, Mesh, Node, NodeBuilder, ObjectRole, RelocateTo};
/// The metrics crate [`NodeMetrics`] is a collector of, at the version zlink
/// builds with: register it in a `prometheus_client::registry::Registry`
/// of this crate to serve zlink's series beside an embedder's own.
pub use prometheus_client;
pub use session::{LocationSnapshot, Packet, Session, SessionActor, SessionActors};
pub use spot::{ExecutionMode, Spot, SpotHandle};
