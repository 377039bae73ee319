//! The public surface (§1, §3, §13 in Rust form): build a node, register
//! Actor types, Spots and packet handlers, run it.
//!
//! ```no_run
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use zlink::api::{Actor, ActorContext, ActorMessage, ExecutionMode, NodeBuilder, ObjectRole, Spot};
//! use zlink::error::{Error, Reason};
//! use zlink::ids::{ActorId, PacketKey, SpotId};
//! use zlink::store::{EmbeddedStore, MonotonicClock};
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
pub use crate::runtime::app::{NodeSettings, RelocationUnit, StartError};
pub use crate::runtime::caller::{ActorCaller, CallReply};

pub use crate::core::relocation::RelocationConfig;
pub use crate::core::trace::{FlowCounters, FlowTrace};
pub use crate::ids::{CallId, TimerId};
pub use crate::net::handshake::ClusterSecret;
pub use crate::net::IoBackend;
pub use crate::runtime::metrics::{NodeMetrics, Readiness, CONTENT_TYPE as METRICS_CONTENT_TYPE};
pub use crate::wire::DecodeLimits;
pub use actor::{Actor, ActorContext, ActorMessage, AsyncTurn, TimerTick};
pub use builder::{LeaseWatch, Mesh, Node, NodeBuilder, ObjectRole, RelocateTo};
/// The metrics crate [`NodeMetrics`] is a collector of, at the version zlink
/// builds with: register it in a `prometheus_client::registry::Registry`
/// of this crate to serve zlink's series beside an embedder's own.
pub use prometheus_client;
pub use session::{ActorHandle, LocationSnapshot, Packet, Session, SessionActor, SessionActors};
pub use spot::{ExecutionMode, Spot, SpotHandle};
