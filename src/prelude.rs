//! One front door (issue 21 item 5): `use zlink::prelude::*;` brings what a
//! game server embedding zlink needs — the node builder and the running
//! node, the Actor and Spot traits, sessions, typed messages, the error
//! vocabulary, the identities, the Location Stores and the cluster secret —
//! and what a Rust game client or bot needs (`Client`).
//!
//! Everything here is also reachable at its home (`zlink::api`,
//! `zlink::typed`, `zlink::error`, `zlink::ids`, `zlink::store`,
//! `zlink::client`), where the rarer types live too (settings, metrics,
//! relocation configuration). Messages derive serde's `Serialize` and
//! `Deserialize`: add `serde` (feature `derive`) to the game's own
//! dependencies.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use serde::{Deserialize, Serialize};
//! use zlink::prelude::*;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Hello { name: String }
//! impl Message for Hello {
//!     const KEY: PacketKey = PacketKey(1);
//!     type Reply = String;
//! }
//!
//! let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), Duration::from_secs(10)));
//! let node = NodeBuilder::new(1)
//!     .listen("127.0.0.1:0".parse().unwrap())
//!     .location_store(store)
//!     .on_message(|_session, hello: Hello| async move {
//!         if hello.name.is_empty() {
//!             return Err(Error::app(400, "a name, please"));
//!         }
//!         Ok(format!("welcome, {}", hello.name))
//!     })
//!     .start()
//!     .unwrap();
//! let mut client = Client::connect(node.stream_addr().unwrap()).unwrap();
//! let welcome = client.call(&Hello { name: "ann".into() }, Duration::from_secs(2)).unwrap();
//! assert_eq!(welcome, "welcome, ann");
//! ```

pub use crate::api::{
    Actor, ActorCaller, ActorContext, ActorMessage, AsyncTurn, CallId, CallReply, ClusterSecret,
    ExecutionMode, LocationSnapshot, Mesh, Node, NodeBuilder, NodeSettings, ObjectRole, Packet,
    RelocateTo, Session, SessionActor, SessionActors, Spot, SpotHandle, StartError, TimerId,
    TimerTick,
};
pub use crate::client::{
    Client, ClientError, ClientEvent, CloseReason, Endpoint, ReconnectEvent, ReconnectPolicy,
    ReconnectingClient,
};
pub use crate::error::{Error, ErrorKind, Reason};
pub use crate::ids::{ActorId, ActorRef, PacketKey, SpotId};
pub use crate::store::{
    EmbeddedStore, LocationStore, MonotonicClock, RedisStore, RedisStoreConfig,
};
pub use crate::typed::{self, Message};
/// The payload type of the raw API beneath the typed one.
pub use bytes::Bytes;
