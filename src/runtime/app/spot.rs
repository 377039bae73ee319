//! Spots: the logical instance an Actor belongs to (§1), and how its Actors'
//! turns are ordered (§5, §11).
//!
//! Every Actor belongs to exactly one current Spot, which receives
//! `on_disconnect_actor` when a session bound to the Actor goes away (§7).
//! Neither that notification nor NotifyDisconnected destroys the Actor or
//! changes its Spot (D3).
//!
//! - The **Entry Spot** is the one registered with the Actor's type
//!   ([`NodeBuilder::actor_type`]): an Actor created by `create_actor` or
//!   `Session::actor` belongs to it. Its Actors run [`ExecutionMode::PerActor`].
//! - A **User Spot** is one the application creates at run time — a room, a
//!   match — of a kind registered at startup ([`NodeBuilder::spot_kind`],
//!   [`Node::create_spot`]); [`Node::create_actor_in`] creates an Actor into
//!   it. Its kind fixes its [`ExecutionMode`].
//!
//! A SpotWide Spot's Actors share the Spot's one gate, so they live on the
//! Spot's shard: their ActorId is `<spot>/<name>` ([`SpotId::actor_id`]), and
//! any node routes a record to them by the ActorId alone
//! (docs/threading.md "Placement").
//!
//! [`NodeBuilder::actor_type`]: crate::api::NodeBuilder::actor_type
//! [`NodeBuilder::spot_kind`]: crate::api::NodeBuilder::spot_kind
//! [`Node::create_spot`]: crate::api::Node::create_spot
//! [`Node::create_actor_in`]: crate::api::Node::create_actor_in

use std::sync::Arc;

use crate::error::Error;
use crate::ids::{ActorId, SpotId};

/// The logical group an Actor belongs to (§1): it is told when a bound
/// session goes away.
pub trait Spot: Send + Sync + 'static {
    /// §7: the session bound to `actor` disconnected (or the application
    /// called NotifyDisconnected). Runs at most once per binding, on the
    /// Actor's lane (for a SpotWide Spot, its gate); a failure is recorded and
    /// never retried, and the binding is removed either way.
    fn on_disconnect_actor(&self, actor: &ActorId) -> Result<(), Error>;
}

/// How the turns of a Spot's Actors are ordered (§5 "Execution order
/// between Actors is determined by the Actor model's execution mode").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExecutionMode {
    /// Each Actor has its own delivery lane: its turns run one at a time in
    /// arrival order, independently of every other Actor's (on its own
    /// shard, concurrently with Actors of other shards).
    PerActor,
    /// §5: the Spot's Actors share the Spot's common gate, one Spot lane
    /// (§11): at most one handler or Spot callback of its Actors runs at a
    /// time, in arrival order across all of them.
    SpotWide,
}

/// A User Spot the node created ([`Node::create_spot`]): give it to
/// [`Node::create_actor_in`] to create Actors into it. Cheap to clone and
/// `Send`, so the application may keep it where its game logic needs it.
///
/// [`Node::create_spot`]: crate::api::Node::create_spot
/// [`Node::create_actor_in`]: crate::api::Node::create_actor_in
#[derive(Clone)]
pub struct SpotHandle {
    pub(crate) id: SpotId,
    pub(crate) mode: ExecutionMode,
    pub(crate) spot: Arc<dyn Spot>,
}

impl SpotHandle {
    /// The Spot's id.
    pub fn id(&self) -> &SpotId {
        &self.id
    }

    /// The execution mode of its kind.
    pub fn mode(&self) -> ExecutionMode {
        self.mode
    }
}

impl std::fmt::Debug for SpotHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpotHandle")
            .field("id", &self.id)
            .field("mode", &self.mode)
            .finish()
    }
}
