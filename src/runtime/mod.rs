//! The node runtime: shards on threads, each running a [`ShardCore`] on a
//! reactor (io_uring or epoll, chosen at startup), with the application's
//! Actors and session callbacks (docs/threading.md).
//!
//! # Never block a shard
//!
//! A shard thread makes no blocking call: no Location Store round trip, no
//! wait on a synchronous channel, no sleep. Anything slow is an effect whose
//! answer comes back as an input: the store operations run on the node's
//! store workers ([`store_effects`]) and come back through the shard's inbox.
//! Debug builds check the store half of the rule: every store round trip
//! panics on a thread that [`run_shard`] marked as a shard.
//!
//! Blocking belongs to the embedder's threads: [`start`] waits out a
//! crashed predecessor's lease, and a clean stop removes the rows left and
//! releases the lease once the shards stopped ([`lease`]).

pub(crate) mod app;
pub(crate) mod caller;
pub(crate) mod deadlines;
mod executor;
pub(crate) mod lease;
mod links;
mod membership;
pub(crate) mod metrics;
mod rate_limit;
mod router;
mod shard;
mod stall;
mod store_effects;
pub(crate) mod websocket;

pub(crate) use shard::ShardHandle;

use foldhash::HashMap;
use smallbox::SmallBox;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::core::actor::ActorOwnerIdentity;
use crate::core::relocation::RelocationConfig;
use crate::core::session::{SessionOwnerConfig, SessionOwnerIdentity};
use crate::core::shard::{ShardConfig, ShardCore};
use crate::core::time::Instant;
use crate::core::trace::{FlowCounters, FlowTrace};
use crate::error::Error;
use crate::error::Reason;
use crate::ids::{
    ActorId, ActorRef, MeshName, NodeGeneration, NodeRid, OwnerLeaseGeneration, PacketKey, Peer,
    SessionOwnerId, SpotId,
};
use crate::net::{IoBackend, Reactor, ReactorConfig, ReactorError, ReactorWaker};
use crate::runtime::app::actor::Actor;
use crate::runtime::app::session::{Packet, Session};
use crate::runtime::app::spot::{ExecutionMode, Spot, SpotHandle};
use crate::runtime::app::{NodeSettings, RelocationUnit, StartError};
use crate::store::{LocationStore, OwnerLease};

use self::executor::{Executor, Unpark};
use self::links::{LinkConfig, LinkStatus, Links};
use self::membership::Membership;
use self::router::{Router, ShardMsg, LINK_SHARD};
use self::shard::ShardState;
use crate::net::handshake::ClusterSecret;
use crate::net::ListenerId;

/// A session callback's future: stored inline when it fits
/// [`CallbackSpace`] (512 bytes), so running a packet handler allocates
/// nothing (docs/PERFORMANCE.md "Allocations per relayed message"); a larger
/// one is boxed. It lives in its session's lane task, which awaits it.
type LocalResult = SmallBox<dyn Future<Output = Result<(), Error>>, CallbackSpace>;

/// The inline room of a session callback's future.
pub(crate) type CallbackSpace = smallbox::space::S64;

/// Where a session callback's future is built: the shard's reused slot,
/// empty when handed to a handler. A handler writes its future there
/// itself, so that the slot's [`CallbackSpace`] is written once; returned
/// by value, the whole space was copied twice more for every packet
/// (docs/PERFORMANCE.md "Fewer moves of records").
pub(crate) type CallbackOut<'a> = Pin<&'a mut Option<LocalResult>>;

/// A packet handler: builds the callback's future on the shard.
pub(crate) type PacketHandler = Arc<dyn Fn(Session, Packet, CallbackOut<'_>) + Send + Sync>;
/// The duplicate-Actor-connection callback (§6).
pub(crate) type ReplacedHandler = Arc<dyn Fn(Session, ActorId, CallbackOut<'_>) + Send + Sync>;
/// The session's disconnect callback (§7).
pub(crate) type DisconnectHandler = Arc<dyn Fn(Session, CallbackOut<'_>) + Send + Sync>;

/// The application's session callbacks.
#[derive(Default)]
pub(crate) struct Handlers {
    pub(crate) packets: HashMap<PacketKey, PacketHandler>,
    /// §1 step 1: authenticates the client with its first packet.
    pub(crate) on_connect: Option<PacketHandler>,
    pub(crate) on_replaced: Option<ReplacedHandler>,
    pub(crate) on_disconnect: Option<DisconnectHandler>,
}

/// Builds an Actor instance for a new incarnation.
pub(crate) type ActorFactory = Arc<dyn Fn(&ActorId) -> Box<dyn Actor> + Send + Sync>;

/// A registered Actor type.
pub(crate) struct ActorType {
    /// Its Entry Spot (§1, §7).
    pub(crate) spot: Arc<dyn Spot>,
    pub(crate) factory: ActorFactory,
}

/// Builds the Spot object of a new User Spot.
pub(crate) type SpotFactory = Arc<dyn Fn(&SpotId) -> Arc<dyn Spot> + Send + Sync>;

/// A registered kind of User Spot (§1, §5).
pub(crate) struct SpotKind {
    pub(crate) mode: ExecutionMode,
    pub(crate) factory: SpotFactory,
}

/// Everything a node is started with.
pub(crate) struct NodeConfig {
    pub(crate) rid: NodeRid,
    pub(crate) generation: NodeGeneration,
    /// The home mesh: the one the Actor owner's rows name and the owner
    /// lease is taken in (§4).
    pub(crate) mesh: MeshName,
    pub(crate) listen: Option<SocketAddr>,
    /// The WebSocket listener's address, if any, and the `Origin`s it allows.
    pub(crate) websocket_listen: Option<SocketAddr>,
    pub(crate) websocket_origins: Vec<String>,
    pub(crate) peer_listen: Option<SocketAddr>,
    /// Every configured peer with the index of its mesh in `meshes`.
    pub(crate) peers: Vec<(NodeRid, Option<SocketAddr>, usize)>,
    /// Find peers of the home mesh in the store's membership and register
    /// there (docs/store.md "Membership").
    pub(crate) discover: bool,
    /// The meshes the node links in, each with its cluster secret, the home
    /// mesh first; empty for a node without links.
    pub(crate) meshes: Vec<(MeshName, ClusterSecret)>,
    pub(crate) hosts_actors: bool,
    pub(crate) store: Option<Arc<dyn LocationStore>>,
    pub(crate) settings: NodeSettings,
    /// Ends the start from another thread (docs/operations.md "Stopping a
    /// start").
    pub(crate) cancel: app::StartCancel,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) actor_types: HashMap<String, ActorType>,
    pub(crate) spot_kinds: HashMap<String, SpotKind>,
}

/// What every shard of a node shares (read-only after start).
pub(crate) struct NodeShared {
    pub(crate) settings: NodeSettings,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) actor_types: HashMap<String, ActorType>,
    pub(crate) spot_kinds: HashMap<String, SpotKind>,
    pub(crate) store: Option<Arc<dyn LocationStore>>,
    /// Where the shards' store operations run (never on a shard thread:
    /// docs/threading.md "Never block a shard").
    pub(crate) store_workers: Option<store_effects::StoreWorkers>,
    /// The owner lease, renewed by the shard loop; read when an Actor is
    /// created (never on the bind, relay, push or disconnect paths).
    pub(crate) lease: Option<std::sync::Mutex<OwnerLease>>,
    pub(crate) hosts_actors: bool,
    /// The meshes this node is in (§3): a bind to a route naming another
    /// is refused before any record (docs/threading.md "Several meshes").
    pub(crate) meshes: Vec<MeshName>,
    /// Sessions open on every shard, against `settings.max_sessions`.
    pub(crate) sessions_open: std::sync::atomic::AtomicUsize,
    /// §10 Shutdown began: the node is not ready for traffic any more
    /// (`/readyz`, [`metrics::NodeMetrics::readiness`]). Set once, by the
    /// embedder's thread that stops the node; read by scrapes only.
    pub(crate) draining: AtomicBool,
    /// §5: the owner lease lapsed and the node fenced its Actors: this
    /// lifecycle is dead to the mesh (set once, by shard 0).
    pub(crate) lease_lapsed: Arc<lease::LeaseLapse>,
    /// How long the application's moves took (`Node::relocate`, a node
    /// Relocate, a Shutdown's), from the ask to the outcome; timed on the
    /// embedder's thread that waits for them.
    pub(crate) relocations: metrics::RelocationMetrics,
    /// The rows of the Actors each shard still hosted when it stopped, for
    /// a clean stop to remove ([`lease::release`]).
    pub(crate) left_rows: std::sync::Mutex<Vec<lease::LeftRow>>,
    /// What the WebSocket listener accepts, when the node has one.
    pub(crate) websocket: Option<websocket::WsPolicy>,
    origin: std::time::Instant,
}

impl NodeShared {
    /// Counts one more session unless the node holds `max_sessions`.
    pub(crate) fn admit_session(&self) -> bool {
        use std::sync::atomic::Ordering;
        let max = self.settings.max_sessions;
        self.sessions_open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .is_ok()
    }

    /// A session counted by [`NodeShared::admit_session`] ended.
    pub(crate) fn session_ended(&self) {
        self.sessions_open
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The core's time: microseconds since the node started.
    pub(crate) fn now(&self) -> Instant {
        self.instant_at(std::time::Instant::now())
    }

    /// `wall` in the core's time (microseconds since the node started): one
    /// clock read serves both (docs/threading.md "One clock per turn").
    pub(crate) fn instant_at(&self, wall: std::time::Instant) -> Instant {
        let micros = wall.saturating_duration_since(self.origin).as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

struct WakeReactor(ReactorWaker);

impl Unpark for WakeReactor {
    fn unpark(&self) {
        self.0.wake();
    }
}

/// The flow-trace counters and the Actor and Spot counts a shard publishes
/// after every loop turn (diagnostics).
pub(crate) struct PublishedCounters {
    counts: Vec<AtomicU64>,
    actors: AtomicUsize,
    spots: AtomicUsize,
    /// The shard core's relay and push latency and relocation pauses,
    /// shared once the core is built on the shard's thread (written by that
    /// core alone; read by scrapes).
    latency: std::sync::OnceLock<Arc<crate::core::latency::CoreLatency>>,
    /// One Actor turn in [`ACTOR_TURN_SAMPLE`], timed by the shard's thread
    /// (its only writer; read by scrapes).
    pub(crate) actor_turns: crate::core::latency::LatencyHistogram,
}

/// One Actor turn in this many is timed: a clock read per turn would cost
/// a visible share of a relayed message's own cost, one in 64 costs a
/// counter's increment (src/runtime/metrics.rs).
pub(crate) const ACTOR_TURN_SAMPLE: u64 = 64;

impl PublishedCounters {
    fn new() -> Self {
        Self {
            counts: FlowTrace::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
            actors: AtomicUsize::new(0),
            spots: AtomicUsize::new(0),
            latency: std::sync::OnceLock::new(),
            actor_turns: crate::core::latency::LatencyHistogram::default(),
        }
    }

    pub(crate) fn publish(&self, counters: &FlowCounters, actors: usize, spots: usize) {
        for (slot, &event) in self.counts.iter().zip(FlowTrace::ALL) {
            slot.store(counters.get(event), Ordering::Relaxed);
        }
        self.actors.store(actors, Ordering::Relaxed);
        self.spots.store(spots, Ordering::Relaxed);
    }

    fn add_into(&self, total: &mut FlowCounters) {
        for (slot, &event) in self.counts.iter().zip(FlowTrace::ALL) {
            total.add(event, slot.load(Ordering::Relaxed));
        }
    }
}

/// A request from outside the shard threads (the embedding application).
pub(crate) enum NodeCommand {
    /// Look up or create an Actor on this node (§1 step 2), into `spot`
    /// when given, else into its type's Entry Spot.
    CreateActor {
        actor_type: String,
        id: ActorId,
        spot: Option<SpotHandle>,
        reply: mpsc::Sender<Result<ActorRef, Error>>,
    },
    /// Create a User Spot at its home shard (§1).
    CreateSpot {
        kind: String,
        id: SpotId,
        reply: mpsc::Sender<Result<SpotHandle, Error>>,
    },
    /// End the incarnation of an Actor this node hosts (§1, §4).
    DestroyActor {
        id: ActorId,
        reply: mpsc::Sender<Result<(), Error>>,
    },
    /// What this shard would move in a node Relocate (§10).
    HostedActors {
        reply: mpsc::Sender<Vec<RelocationUnit>>,
    },
    /// Move a SpotWide Spot with its Actors to `target`, as one unit.
    RelocateSpot {
        id: SpotId,
        target: NodeRid,
        reply: MoveReply,
    },
    /// Move a hosted Actor to `target` (§8; docs/relocation.md).
    Relocate {
        id: ActorId,
        target: NodeRid,
        reply: MoveReply,
    },
    /// A message or request from node code outside any Actor to the Actor
    /// `to` (docs/actors.md "From node code"), at the target's shard.
    Call {
        to: ActorId,
        key: PacketKey,
        payload: bytes::Bytes,
        /// For a request: its deadline from now, and its waiter.
        reply: Option<(std::time::Duration, shard::NodeCallReply)>,
    },
}

/// Where a move's outcome goes: the caller's channel, tagged with the unit
/// it is for, so that one channel collects many moves (a node Relocate or
/// Shutdown asks for all of them at once, §10).
pub(crate) struct MoveReply {
    tag: usize,
    to: mpsc::Sender<(usize, Result<(), Error>)>,
}

impl MoveReply {
    /// Hands the outcome to the caller (gone callers are not waited for).
    pub(crate) fn send(self, outcome: Result<(), Error>) {
        let _ = self.to.send((self.tag, outcome));
    }
}

/// A started node: its shard threads.
pub(crate) struct RunningNode {
    stop: Arc<AtomicBool>,
    router: Arc<Router>,
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<PublishedCounters>>,
    stream_addr: Option<SocketAddr>,
    websocket_addr: Option<SocketAddr>,
    peer_addr: Option<SocketAddr>,
    link_status: Arc<LinkStatus>,
    /// The placement policy's turn: linked peers are chosen in turn.
    placement_turn: AtomicUsize,
    io_backend: IoBackend,
    shared: Arc<NodeShared>,
    metrics: metrics::NodeMetrics,
}

impl RunningNode {
    /// The node's metrics and readiness (src/runtime/metrics.rs).
    pub(crate) fn metrics(&self) -> metrics::NodeMetrics {
        self.metrics.clone()
    }

    pub(crate) fn io_backend(&self) -> IoBackend {
        self.io_backend
    }

    pub(crate) fn stream_addr(&self) -> Option<SocketAddr> {
        self.stream_addr
    }

    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer_addr
    }

    pub(crate) fn websocket_addr(&self) -> Option<SocketAddr> {
        self.websocket_addr
    }

    /// Asks the Actor's shard to look it up or host it (in `spot`, when
    /// given), and waits.
    pub(crate) fn create_actor(
        &self,
        actor_type: &str,
        id: ActorId,
        spot: Option<SpotHandle>,
    ) -> Result<ActorRef, Error> {
        let (reply, answer) = mpsc::channel();
        let shard = id.shard(self.router.shards());
        let command = NodeCommand::CreateActor {
            actor_type: actor_type.to_owned(),
            id,
            spot,
            reply,
        };
        self.router.send(shard, ShardMsg::Command(command));
        answer
            .recv()
            .unwrap_or_else(|_| Err(Reason::SessionClosing.into()))
    }

    /// Asks the Spot's home shard to create it, and waits.
    pub(crate) fn create_spot(&self, kind: &str, id: SpotId) -> Result<SpotHandle, Error> {
        let (reply, answer) = mpsc::channel();
        let shard = id.shard(self.router.shards());
        let command = NodeCommand::CreateSpot {
            kind: kind.to_owned(),
            id,
            reply,
        };
        self.router.send(shard, ShardMsg::Command(command));
        answer
            .recv()
            .unwrap_or_else(|_| Err(Reason::ShuttingDown.into()))
    }

    /// Asks the Actor's shard to end its incarnation, and waits.
    pub(crate) fn destroy_actor(&self, id: ActorId) -> Result<(), Error> {
        let (reply, answer) = mpsc::channel();
        let shard = id.shard(self.router.shards());
        let command = NodeCommand::DestroyActor { id, reply };
        self.router.send(shard, ShardMsg::Command(command));
        answer
            .recv()
            .unwrap_or_else(|_| Err(Reason::ShuttingDown.into()))
    }

    /// §2: the relocation runtime chooses the target — the operator's hint
    /// when it names a linked peer (else the move is refused), or the linked
    /// peers in turn — and asks the Actor's shard to move it; waits for the
    /// commit, abort or failure — at most `wait`, after which the caller gets
    /// `DeadlineExceeded` while the core finishes the move (a durable abort
    /// retries for as long as the store is unreachable).
    pub(crate) fn relocate(
        &self,
        id: ActorId,
        hint: Option<NodeRid>,
        wait: std::time::Duration,
    ) -> Result<(), Error> {
        let until = std::time::Instant::now() + wait;
        let unit = RelocationUnit::Actor(id);
        let mut failed = self.relocate_units(vec![unit], hint, until);
        failed.pop().map_or(Ok(()), |(_, error)| Err(error))
    }

    /// Like [`Self::relocate`] for a SpotWide Spot and all its Actors.
    pub(crate) fn relocate_spot(
        &self,
        id: SpotId,
        hint: Option<NodeRid>,
        wait: std::time::Duration,
    ) -> Result<(), Error> {
        let until = std::time::Instant::now() + wait;
        let unit = RelocationUnit::Spot(id);
        let mut failed = self.relocate_units(vec![unit], hint, until);
        failed.pop().map_or(Ok(()), |(_, error)| Err(error))
    }

    /// The placement policy: the hint alone when it names a linked peer
    /// (else a refusal), or every linked peer, starting with the next in
    /// turn (round robin).
    fn relocation_targets(&self, hint: Option<NodeRid>) -> Result<Vec<NodeRid>, Error> {
        let linked = self.link_status.up();
        match hint {
            Some(rid) if linked.contains(&rid) => Ok(vec![rid]),
            Some(_) => Err(Reason::RelocationTargetInvalid.into()),
            None if linked.is_empty() => Err(Reason::RelocationTargetInvalid.into()),
            None => {
                let turn = self.placement_turn.fetch_add(1, Ordering::Relaxed) % linked.len();
                let mut order = linked[turn..].to_vec();
                order.extend_from_slice(&linked[..turn]);
                Ok(order)
            }
        }
    }

    /// Moves every unit at once, each on its own shard, and waits until
    /// `until` for them all; returns the units that did not move, with their
    /// typed errors (`DeadlineExceeded` for those still moving then). A
    /// target that cannot host the type (NoActorFactory: no factory, or a
    /// client-role node) or that drains itself (ShuttingDown, §10) refused
    /// the move at its prepare, before relay-ready, so the unit is unharmed
    /// here: without a hint the next peer is asked.
    fn relocate_units(
        &self,
        units: Vec<RelocationUnit>,
        hint: Option<NodeRid>,
        until: std::time::Instant,
    ) -> Vec<(RelocationUnit, Error)> {
        struct Move {
            unit: RelocationUnit,
            /// When it was first asked (its duration's start).
            asked: std::time::Instant,
            /// The peers still to ask, in the placement policy's order.
            targets: std::vec::IntoIter<NodeRid>,
            /// `None` while it moves.
            outcome: Option<Result<(), Error>>,
        }
        let (to, answers) = mpsc::channel();
        let mut moves: Vec<Move> = Vec::with_capacity(units.len());
        let mut open = 0;
        for (tag, unit) in units.into_iter().enumerate() {
            let asked = std::time::Instant::now();
            let (mut targets, mut outcome) = match self.relocation_targets(hint) {
                Ok(targets) => (targets.into_iter(), None),
                Err(error) => (Vec::new().into_iter(), Some(Err(error))),
            };
            if outcome.is_none() {
                match targets.next() {
                    Some(target) => {
                        self.ask_move(
                            &unit,
                            target,
                            MoveReply {
                                tag,
                                to: to.clone(),
                            },
                        );
                        open += 1;
                    }
                    None => outcome = Some(Err(Reason::RelocationTargetInvalid.into())),
                }
            }
            moves.push(Move {
                unit,
                asked,
                targets,
                outcome,
            });
        }
        while open > 0 {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let Ok((tag, outcome)) = answers.recv_timeout(left) else {
                break;
            };
            let Some(m) = moves.get_mut(tag) else {
                continue;
            };
            // A Spot is retried elsewhere never: some of its Actors may have
            // committed at the first target, and the rest must join them there.
            if let (Err(refused), RelocationUnit::Actor(_)) = (&outcome, &m.unit) {
                if matches!(
                    refused.reason(),
                    Reason::NoActorFactory | Reason::ShuttingDown
                ) {
                    if let Some(next) = m.targets.next() {
                        self.ask_move(
                            &m.unit,
                            next,
                            MoveReply {
                                tag,
                                to: to.clone(),
                            },
                        );
                        continue;
                    }
                }
            }
            self.shared
                .relocations
                .observe(&m.unit, m.asked.elapsed(), outcome.is_ok());
            m.outcome = Some(outcome);
            open -= 1;
        }
        // Those still moving at the caller's deadline count as not moved.
        for m in moves.iter().filter(|m| m.outcome.is_none()) {
            self.shared
                .relocations
                .observe(&m.unit, m.asked.elapsed(), false);
        }
        moves
            .into_iter()
            .filter_map(|m| match m.outcome {
                Some(Ok(())) => None,
                Some(Err(error)) => Some((m.unit, error)),
                // Still moving at the deadline; the core finishes the move.
                None => Some((m.unit, Reason::Deadline.into())),
            })
            .collect()
    }

    fn ask_move(&self, unit: &RelocationUnit, target: NodeRid, reply: MoveReply) {
        let (shard, command) = match unit {
            RelocationUnit::Actor(id) => (
                id.shard(self.router.shards()),
                NodeCommand::Relocate {
                    id: id.clone(),
                    target,
                    reply,
                },
            ),
            RelocationUnit::Spot(id) => (
                id.shard(self.router.shards()),
                NodeCommand::RelocateSpot {
                    id: id.clone(),
                    target,
                    reply,
                },
            ),
        };
        self.router.send(shard, ShardMsg::Command(command));
    }

    /// §10 Relocate of the Actor owner host: every Actor and SpotWide Spot
    /// this node hosts is moved by the same path as [`Self::relocate`], all
    /// at once, until `until`; what did not move is listed with its typed
    /// error (a unit whose move aborted stays here, unharmed).
    pub(crate) fn relocate_all(
        &self,
        hint: Option<NodeRid>,
        until: std::time::Instant,
    ) -> Vec<(RelocationUnit, Error)> {
        let (reply, answers) = mpsc::channel();
        for shard in 0..self.router.shards() {
            let command = NodeCommand::HostedActors {
                reply: reply.clone(),
            };
            self.router.send(shard, ShardMsg::Command(command));
        }
        drop(reply);
        let units: Vec<RelocationUnit> = answers.iter().flatten().collect();
        self.relocate_units(units, hint, until)
    }

    /// Calls to Actors from node code (docs/actors.md "From node code").
    pub(crate) fn caller(&self) -> caller::ActorCaller {
        caller::ActorCaller::new(Arc::clone(&self.router), self.shared.settings.decode_limits)
    }

    pub(crate) fn wait_linked(&self, rid: NodeRid, up: bool, timeout: std::time::Duration) -> bool {
        self.link_status.wait(rid, up, timeout)
    }

    /// Actors hosted and User Spots created on every shard, summed.
    pub(crate) fn actor_and_spot_counts(&self) -> (usize, usize) {
        self.counters.iter().fold((0, 0), |(actors, spots), c| {
            (
                actors + c.actors.load(Ordering::Relaxed),
                spots + c.spots.load(Ordering::Relaxed),
            )
        })
    }

    pub(crate) fn flow_counters(&self) -> FlowCounters {
        let mut total = FlowCounters::default();
        for counters in &self.counters {
            counters.add_into(&mut total);
        }
        total
    }

    /// §10 Shutdown: every shard first refuses new sessions and bindings;
    /// then the Actors this node hosts move to linked peers, all at once
    /// (when there are any; what cannot move by the deadline finishes with
    /// the node); accepted work (callbacks, replies, cleanup) goes on until
    /// the same deadline, when every session is closed through the ordinary
    /// disconnect procedure; then the shards stop.
    /// The moves get at least `relocation_wait` (the flow's bounded waits),
    /// so that no coordinator is stopped mid-move by a short deadline.
    pub(crate) fn shutdown(
        mut self,
        deadline: std::time::Duration,
        cleanup: std::time::Duration,
        relocation_wait: std::time::Duration,
    ) {
        // Not ready from here on (a probe's /readyz), before anything
        // else: a load balancer stops sending clients while the drain runs.
        self.shared.draining.store(true, Ordering::Release);
        tracing::info!("shutdown: draining; the node is not ready any more");
        let until = std::time::Instant::now() + deadline;
        let moves_until = std::time::Instant::now() + deadline.max(relocation_wait);
        let (done, drained) = mpsc::channel();
        for shard in 0..self.router.shards() {
            let done = done.clone();
            self.router.send(
                shard,
                ShardMsg::Drain {
                    deadline: self.shared.instant_at(until),
                    done,
                },
            );
        }
        drop(done);
        if !self.link_status.up().is_empty() {
            for (unit, error) in self.relocate_all(None, moves_until) {
                tracing::info!(?unit, %error, "shutdown: not relocated, it ends with the node");
            }
        }
        let give_up = until + cleanup;
        for _ in 0..self.router.shards() {
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            if drained.recv_timeout(left).is_err() {
                tracing::warn!("shutdown: a shard did not drain before its deadline");
                break;
            }
        }
        self.stop_and_join();
        self.release_lease();
    }

    /// §5: whether the owner lease lapsed, so that this lifecycle fenced
    /// its Actors and is dead to the mesh (docs/store.md "A lapsed lease").
    pub(crate) fn lease_lapsed(&self) -> bool {
        self.shared.lease_lapsed.is_set()
    }

    /// Waits on the lease's lapse from another thread.
    pub(crate) fn lease_lapse(&self) -> Arc<lease::LeaseLapse> {
        Arc::clone(&self.shared.lease_lapsed)
    }

    /// A clean stop's last step, once the shards stopped: the rows left
    /// behind are removed and the lease given back ([`lease::release`]).
    /// A lease that lapsed is not this lifecycle's to give back.
    fn release_lease(&self) {
        let (Some(store), Some(lease)) = (&self.shared.store, &self.shared.lease) else {
            return;
        };
        if self.lease_lapsed() {
            return;
        }
        let lease = lease
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let rows = std::mem::take(
            &mut *self
                .shared
                .left_rows
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        lease::release(store.as_ref(), &lease, &rows);
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.router.wake_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for RunningNode {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// What a shard thread reports once its reactor listens.
struct ShardReady {
    waker: ReactorWaker,
    addrs: ShardAddrs,
}

/// Starts the node: takes the owner lease, then one thread per shard, each
/// building its reactor on itself (on the backend resolved here: an
/// io_uring demanded but not permitted fails the start at once with a
/// configuration error, `Auto` falls back to epoll with one warning), listening on the same
/// STREAM port (SO_REUSEPORT spreads accepted sessions), and finally running
/// its loop once every shard's inbox is known (docs/threading.md).
pub(crate) fn start(config: NodeConfig) -> Result<RunningNode, StartError> {
    let shards = shard_count(config.settings.shards, config.settings.cores.len())?;
    // Every store call of the node is timed from here on (its store workers,
    // the lease's start and release): all of them off the shards.
    let store_metrics = config
        .store
        .as_ref()
        .map(|_| Arc::new(metrics::StoreMetrics::new()));
    let mut config = config;
    if let (Some(store), Some(measured)) = (config.store.take(), &store_metrics) {
        let wrapped: Arc<dyn LocationStore> =
            Arc::new(metrics::MeasuredStore::new(store, Arc::clone(measured)));
        config.store = Some(wrapped);
    }
    // Resolved once for all shards, so that `Auto` warns once (issue 8).
    let io_backend = config
        .settings
        .io_backend
        .resolve()
        .map_err(reactor_error)?;
    // A discovering node needs a lease even without Actors: membership
    // lasts exactly as long as it (docs/store.md "Membership").
    let lease = match (&config.store, config.hosts_actors || config.discover) {
        (Some(store), true) => Some(lease::acquire(
            store.as_ref(),
            config.rid,
            config.generation,
            &config.mesh,
            &config.cancel,
        )?),
        _ => None,
    };
    // From here on the lease is this start's to give back: a start that
    // fails or is cancelled after taking it would otherwise make the
    // node's next start wait a whole term (docs/operations.md "Stopping a
    // start").
    let store = config.store.clone();
    let cancel = config.cancel.clone();
    match start_leased(config, lease.clone(), shards, io_backend, store_metrics) {
        Ok(mut running) if cancel.is_cancelled() => {
            running.stop_and_join();
            running.release_lease();
            Err(StartError::Cancelled)
        }
        Ok(running) => Ok(running),
        Err(error) => {
            if let (Some(store), Some(lease)) = (&store, &lease) {
                lease::release(store.as_ref(), lease, &[]);
            }
            Err(error)
        }
    }
}

/// The start's steps after the owner lease (if any) was taken: the shard
/// threads, each listening, then the node's shared state.
fn start_leased(
    config: NodeConfig,
    lease: Option<OwnerLease>,
    shards: u16,
    io_backend: IoBackend,
    store_metrics: Option<Arc<metrics::StoreMetrics>>,
) -> Result<RunningNode, StartError> {
    let lease_generation = lease.as_ref().map(|l| l.generation).unwrap_or_default();
    let leased = lease.is_some();
    let me = Peer {
        rid: config.rid,
        generation: config.generation,
    };
    let link_config = (!config.meshes.is_empty()).then(|| LinkConfig {
        rid: config.rid,
        generation: config.generation,
        meshes: config.meshes.clone(),
        peers: config.peers.clone(),
    });
    let websocket = config.websocket_listen.map(|_| {
        websocket::WsPolicy::new(
            config.websocket_origins.clone().into(),
            &config.settings.decode_limits,
        )
    });
    let shared = Arc::new(NodeShared {
        websocket,
        settings: config.settings,
        handlers: config.handlers,
        actor_types: config.actor_types,
        spot_kinds: config.spot_kinds,
        store_workers: match &config.store {
            Some(store) => Some(
                store_effects::StoreWorkers::start(Arc::clone(store), &config.rid.to_string())
                    .map_err(|e| StartError::Io(e.to_string()))?,
            ),
            None => None,
        },
        store: config.store,
        lease: lease.map(std::sync::Mutex::new),
        hosts_actors: config.hosts_actors,
        meshes: if config.meshes.is_empty() {
            vec![config.mesh.clone()]
        } else {
            config.meshes.iter().map(|(mesh, _)| mesh.clone()).collect()
        },
        sessions_open: std::sync::atomic::AtomicUsize::new(0),
        draining: AtomicBool::new(false),
        relocations: metrics::RelocationMetrics::new(),
        lease_lapsed: Arc::default(),
        left_rows: std::sync::Mutex::new(Vec::new()),
        origin: std::time::Instant::now(),
    });
    let identity = ShardIdentity {
        me,
        mesh: config.mesh,
        lease: lease_generation,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let link_status = Arc::new(LinkStatus::default());
    if link_config.is_none() || shared.settings.ready_link_wait.is_zero() {
        // No link round after start to wait for (docs/operations.md "Probes").
        link_status.mark_linked_in();
    }
    let cores = pinned_cores(&shared.settings.cores)?;
    let mut threads = Vec::new();
    let mut routers = Vec::new();
    let mut wakers = Vec::new();
    let mut counters = Vec::new();
    let mut stream_addr = config.listen;
    let mut websocket_addr = config.websocket_listen;
    let mut peer_addr = None;
    for index in 0..shards {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<ShardReady, StartError>>();
        let (router_tx, router_rx) = mpsc::channel::<Arc<Router>>();
        let published = Arc::new(PublishedCounters::new());
        let plan = ShardPlan {
            index,
            identity: identity.clone(),
            shared: Arc::clone(&shared),
            listen: stream_addr,
            websocket_listen: websocket_addr,
            peer_listen: if index == LINK_SHARD {
                config.peer_listen
            } else {
                None
            },
            links: if index == LINK_SHARD {
                link_config.clone()
            } else {
                None
            },
            link_status: Arc::clone(&link_status),
            discover: index == LINK_SHARD && config.discover,
            stop: Arc::clone(&stop),
            counters: Arc::clone(&published),
            io_backend,
            core: shared
                .settings
                .pin_cores
                .then(|| cores.get(usize::from(index) % cores.len().max(1)).copied())
                .flatten(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("zlink-{}-shard-{index}", me.rid))
            .spawn(move || run_shard(plan, &ready_tx, &router_rx))
            .map_err(|e| StartError::Io(e.to_string()))?;
        threads.push(thread);
        counters.push(published);
        match ready_rx.recv() {
            Ok(Ok(ready)) => {
                // Every later shard listens on the port the first one bound.
                stream_addr = ready.addrs.stream.or(stream_addr);
                websocket_addr = ready.addrs.websocket.or(websocket_addr);
                peer_addr = ready.addrs.peer.or(peer_addr);
                wakers.push(ready.waker);
                routers.push(router_tx);
            }
            failed => {
                stop.store(true, Ordering::Release);
                drop(routers);
                for thread in threads {
                    let _ = thread.join();
                }
                return Err(match failed {
                    Ok(Err(error)) => error,
                    _ => StartError::Io("a shard thread ended during start".to_owned()),
                });
            }
        }
    }
    let router = Arc::new(Router::new(wakers));
    for tx in routers {
        let _ = tx.send(Arc::clone(&router));
    }
    let metrics = metrics::NodeMetrics::new(
        me.rid,
        me.generation,
        Arc::clone(&shared),
        counters.clone(),
        Arc::clone(&router),
        Arc::clone(&stop),
        leased,
        store_metrics,
        Arc::clone(&link_status),
    );
    Ok(RunningNode {
        stop,
        router,
        threads,
        counters,
        stream_addr: config.listen.and(stream_addr),
        websocket_addr: config.websocket_listen.and(websocket_addr),
        peer_addr,
        link_status,
        placement_turn: AtomicUsize::new(0),
        io_backend,
        shared,
        metrics,
    })
}

/// The cores the shards are pinned to, in order: the listed ids, each one
/// this process may run on, or every core it may run on.
fn pinned_cores(listed: &[usize]) -> Result<Vec<core_affinity::CoreId>, StartError> {
    let available = core_affinity::get_core_ids().unwrap_or_default();
    if listed.is_empty() {
        return Ok(available);
    }
    listed
        .iter()
        .map(|&id| {
            available
                .iter()
                .find(|core| core.id == id)
                .copied()
                .ok_or_else(|| {
                    StartError::Invalid(format!(
                        "cores: core {id} is not one this process may run on"
                    ))
                })
        })
        .collect()
}

/// `0` means one shard per listed core, or per available core when none is
/// listed.
fn shard_count(setting: usize, listed_cores: usize) -> Result<u16, StartError> {
    let count = match (setting, listed_cores) {
        (0, 0) => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        (0, listed) => listed,
        (set, _) => set,
    };
    u16::try_from(count)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| StartError::Invalid(format!("shards = {setting}: at most 65535")))
}

/// Who every shard of the node is.
#[derive(Clone)]
struct ShardIdentity {
    me: Peer,
    mesh: MeshName,
    lease: OwnerLeaseGeneration,
}

/// Everything one shard thread starts from.
struct ShardPlan {
    index: u16,
    identity: ShardIdentity,
    shared: Arc<NodeShared>,
    listen: Option<SocketAddr>,
    websocket_listen: Option<SocketAddr>,
    peer_listen: Option<SocketAddr>,
    links: Option<LinkConfig>,
    link_status: Arc<LinkStatus>,
    /// This shard follows the membership (shard 0 of a discovering node).
    discover: bool,
    stop: Arc<AtomicBool>,
    counters: Arc<PublishedCounters>,
    /// The backend `start` resolved (never `Auto`).
    io_backend: IoBackend,
    core: Option<core_affinity::CoreId>,
}

fn run_shard(
    plan: ShardPlan,
    ready: &mpsc::Sender<Result<ShardReady, StartError>>,
    router: &mpsc::Receiver<Arc<Router>>,
) {
    // No Location Store call from here on (debug builds check it).
    crate::store::mark_shard_thread();
    if let Some(core) = plan.core {
        if !core_affinity::set_for_current(core) {
            tracing::warn!(shard = plan.index, "could not pin the shard to its core");
        }
    }
    let outbound_max = plan.shared.settings.outbound_max;
    let listens = Listens {
        stream: plan.listen,
        websocket: plan.websocket_listen,
        peer: plan.peer_listen,
    };
    let (reactor, addrs) = match setup_shard(plan.io_backend, outbound_max, &listens) {
        Ok(ok) => ok,
        Err(error) => {
            let _ = ready.send(Err(error));
            return;
        }
    };
    let waker = reactor.waker();
    let peer_listener = addrs.peer_listener;
    let websocket_listener = addrs.websocket_listener;
    let membership = addrs
        .peer
        .filter(|_| plan.discover)
        .map(|address| Membership::new(plan.identity.mesh.clone(), address));
    if ready
        .send(Ok(ShardReady {
            waker: waker.clone(),
            addrs,
        }))
        .is_err()
    {
        return;
    }
    let Ok(router) = router.recv() else {
        return;
    };
    let shared = plan.shared;
    let config = ShardConfig {
        session_owner: SessionOwnerIdentity {
            node: plan.identity.me.rid,
            lifecycle: plan.identity.me.generation,
            owner_id: SessionOwnerId(plan.index),
            lease: plan.identity.lease,
        },
        actor_owner: ActorOwnerIdentity {
            mesh: plan.identity.mesh,
            node: plan.identity.me.rid,
            node_generation: plan.identity.me.generation,
            lease: plan.identity.lease,
        },
        sessions: SessionOwnerConfig {
            replacement_callback_timeout: shared.settings.replacement_callback_timeout,
            bind_timeout: shared.settings.bind_timeout,
            disconnect_deadline: shared.settings.disconnect_deadline,
            relocation_seal_timeout: shared.settings.relocation_seal_timeout,
            client_frame_deadline: shared.settings.client_frame_deadline,
            session_queue_max: shared.settings.session_queue_max,
            connect_callback: shared.handlers.on_connect.is_some(),
        },
        relocation: RelocationConfig {
            limits: shared.settings.decode_limits.for_links(),
            ..shared.settings.relocation.clone()
        },
        send_timeout: shared.settings.send_timeout,
        actor_turn_deadline: shared.settings.actor_turn_deadline,
    };
    let core = ShardCore::new(config, shared.now());
    let _ = plan.counters.latency.set(Arc::clone(core.latency()));
    let executor = Executor::new(WakeReactor(waker));
    let spawner = executor.spawner();
    // A link carries any client frame inside a record (docs/wire.md "Limits").
    let link_limits = shared.settings.decode_limits.for_links();
    let links = Links::new(
        plan.links,
        link_limits,
        plan.link_status,
        shared.settings.link_handshake_deadline,
        (plan.discover, shared.settings.ready_link_wait),
        std::time::Instant::now(),
    );
    let state = ShardState::new(
        Arc::clone(&shared),
        plan.index,
        router,
        reactor,
        links,
        membership,
        shard::Listeners {
            peer: peer_listener,
            websocket: websocket_listener,
        },
        core,
        plan.identity.me,
        Arc::clone(&plan.counters),
    );
    let handle = ShardHandle::new(state, spawner);
    shard::run(handle, executor, plan.stop, &plan.counters);
}

/// What a shard's reactor listens on.
struct ShardAddrs {
    stream: Option<SocketAddr>,
    websocket: Option<SocketAddr>,
    websocket_listener: Option<ListenerId>,
    peer: Option<SocketAddr>,
    peer_listener: Option<ListenerId>,
}

/// What a shard's reactor is to listen on.
struct Listens {
    stream: Option<SocketAddr>,
    websocket: Option<SocketAddr>,
    peer: Option<SocketAddr>,
}

/// The start error of a reactor that could not be built.
fn reactor_error(error: ReactorError) -> StartError {
    match error {
        ReactorError::IoUringUnavailable { .. } => StartError::IoUring(error.to_string()),
        other => StartError::Io(other.to_string()),
    }
}

/// The shard's reactor, with the node's bound on a connection's outbound
/// bytes (`NodeSettings::outbound_max`), and its listeners.
fn setup_shard(
    backend: IoBackend,
    outbound_max: usize,
    listens: &Listens,
) -> Result<(Reactor, ShardAddrs), StartError> {
    let config = ReactorConfig {
        backend,
        outbound_max,
        ..ReactorConfig::default()
    };
    let mut reactor = Reactor::new(config).map_err(reactor_error)?;
    let mut bind = |addr: SocketAddr| {
        reactor
            .listen(addr)
            .map_err(|e| StartError::Io(format!("listen on {addr}: {e}")))
    };
    let stream = listens
        .stream
        .map(&mut bind)
        .transpose()?
        .map(|(_, addr)| addr);
    let websocket = listens.websocket.map(&mut bind).transpose()?;
    let peer = listens.peer.map(&mut bind).transpose()?;
    let addrs = ShardAddrs {
        stream,
        websocket: websocket.map(|(_, addr)| addr),
        websocket_listener: websocket.map(|(listener, _)| listener),
        peer: peer.map(|(_, addr)| addr),
        peer_listener: peer.map(|(listener, _)| listener),
    };
    Ok((reactor, addrs))
}
