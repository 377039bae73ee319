//! An in-memory mesh of shard cores with virtual time: the real sans-IO cores
//! of several nodes, joined by an ordered record network (TCP's ordering per
//! link, a fixed one-way latency), driven by one event loop.
//!
//! It is the ground the core's scenario tests stand on, and the seed of the
//! seeded simulator (a later issue adds a PRNG-chosen schedule, faults and
//! invariant checks on top of the same [`Mesh`]). Everything is
//! deterministic: the same calls give the same run.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::ops::Deref;
use std::panic::Location;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::core::actor::AwaitEvent;
use crate::core::actor::{ActorEvent, ActorOwnerIdentity, Actors, ReplyTicket};
use crate::core::creation::{HostDecision, RowAnswer};
use crate::core::host_ask::HostEvent;
use crate::core::recheck::StepEnd;
use crate::core::relocation::{
    AbortAnswer, Capture, CasAnswer, RelocationConfig, RelocationEvent, Relocations, StoreOp,
};
use crate::core::session::{
    BindStart, SessionEvent, SessionOwnerConfig, SessionOwnerIdentity, Sessions, Ticket, TurnId,
};
use crate::core::shard::{ShardConfig, ShardCore};
use crate::core::time::Instant;
use crate::core::trace::FlowTrace;
use crate::core::CoreEvent;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorRef, AuthorityOwnerGeneration, Correlation, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, PacketKey, Peer, RelocationId, RequestId,
    SessionOwnerId, SessionRid,
};
use crate::store::{
    Clock, Created, EmbeddedStore, LocationStore, ManualClock, OwnerLease, RemoveOutcome,
    RowVersion,
};
use crate::wire::client::ClientFrame;
use crate::wire::node::{Command, NodeRecord};
use crate::wire::DecodeLimits;

pub mod invariants;
pub mod schedule;
pub mod script;

/// How a simulated node's application answers Actor work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorBehavior {
    /// Requests are answered with their own payload and disconnect callbacks
    /// succeed, at once.
    Echo,
    /// Nothing is answered; the test answers through [`Mesh::actors`].
    Manual,
    /// Work waits on the Actor's lane (the stand-in runtime's queue) until
    /// the test runs it with [`Mesh::run_lane`]; a capture takes what is
    /// still queued as saved work.
    Queue,
}

/// The one Actor type of the simulated game, as a BindOrGet names it to
/// the row's owner (71).
fn sim_actor_type() -> crate::ids::ActorTypeName {
    crate::ids::ActorTypeName::new("player").unwrap_or_else(|_| unreachable!("a valid name"))
}

/// How a simulated node's runtime answers a Restore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreBehavior {
    /// The Actor is restored at once.
    Succeed,
    /// Restore fails at once with this error.
    Fail(Error),
    /// The restore waits until [`Mesh::finish_restore`].
    Hold,
}

/// How the mesh's Location Store answers. `Hold`, `Down` and `LoseReply`
/// are the relocation's operations' only: a node's own operation
/// ([`NodeStoreOp`]) under them, as under `Immediate`, is applied and
/// answered at the instant it was made (an input of its own after the one
/// that made it). `Latency` and `Hang` apply to every operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreBehavior {
    /// Each operation is carried out at once.
    Immediate,
    /// Operations wait until [`Mesh::release_store`].
    Hold,
    /// Each operation fails as if the store were unreachable.
    Down,
    /// Each operation is carried out, and its answer lost: the caller gets
    /// `StoreUnavailable` (a call timeout) and cannot know it was applied.
    LoseReply,
    /// Each operation reaches the store after a virtual delay of up to the
    /// given bound, and its answer comes back after another such delay;
    /// several are in flight at once, so answers come back in any order
    /// across Actors (the runtime's store workers, src/runtime/store_effects.rs,
    /// keep several calls in flight). An answer later than the caller's call
    /// timeout ([`STORE_CALL_TIMEOUT`]) is never seen: the call ends
    /// `StoreUnavailable` at its timeout, applied or not as it happened.
    Latency(Duration),
    /// The store hangs (Redis stopped with SIGSTOP): an operation gets no
    /// answer, and ends `StoreUnavailable` at the caller's call timeout.
    /// Whether the store still applies it when it comes back (the command
    /// sat in its socket buffer) or never (it never got there) is the
    /// mesh's PRNG's choice ([`Mesh::set_store_seed`]); one that comes back
    /// before the call timed out is answered as usual.
    Hang,
}

/// The caller's call timeout on a store operation: the runtime's Redis
/// client's (`RedisStoreConfig::call_timeout`, 500 ms by default; a test
/// in tests/sim.rs holds the two equal). A hung store's operation ends
/// `StoreUnavailable` this long after it was made.
pub const STORE_CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// A Location Store operation the stand-in runtime carried out, and its
/// answer, as the core got it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreDone {
    /// The target's CAS.
    Cas(Result<CasAnswer, Error>),
    /// The coordinator's durable abort.
    Abort(Result<AbortAnswer, Error>),
    /// BindOrGet's create-if-absent, or a lost incarnation's replacement:
    /// the row, as the core reads it ([`RowAnswer`]).
    Host(Result<RowAnswer, Error>),
    /// A destroy's removal of the row at the incarnation's version.
    Remove(Result<(), Error>),
    /// A lease round: the renewal (the lease as renewed), and the mesh's
    /// live members as the store listed them then (each node and the
    /// lifecycle it registered), when it could.
    Renew(
        Result<OwnerLease, Error>,
        Option<Vec<(NodeRid, NodeGeneration)>>,
    ),
}

/// A Location Store operation a node's runtime makes for itself, not for a
/// relocation (those are [`StoreOp`]s): issued as an effect at one step,
/// applied at the store later, answered later still as an input of its
/// own — as the runtime's store workers do (src/runtime/store_effects.rs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeStoreOp {
    /// BindOrGet's create-if-absent (§1 step 2; the runtime's
    /// `ask_store_to_host`).
    Create(ActorId),
    /// A lost incarnation's replacement (L6; the runtime's
    /// `replace_lost`): the row removed at its version, then created anew.
    Replace(ActorRef),
    /// A recheck's look-up (src/core/recheck.rs; the runtime's
    /// `ask_store_to_host` for `HostWaiter::Recheck`).
    Lookup(ActorId),
    /// A recheck's removal of an orphan row at its version (the runtime's
    /// `remove_orphan`).
    RemoveOrphan(ActorRef),
    /// A destroy's removal of the row at the incarnation's version (§1,
    /// §4; the runtime's `destroy`).
    Remove(ActorId, RowVersion),
    /// A lease round (§5; the runtime's `lease_round`): the owner lease's
    /// renewal, then this lifecycle's membership registered and the mesh
    /// listed (docs/store.md "Membership").
    Renew(OwnerLease),
}

/// What a store operation on the virtual clock is for.
#[derive(Clone, Debug)]
enum StoreJob {
    /// A relocation's CAS or durable abort.
    Relocation(RelocationId, StoreOp),
    /// One of the node's own.
    Node(NodeStoreOp),
}

/// A BindOrGet's or a destroy's outcome, for whoever waits on it
/// ([`Mesh::take_answers`]): the session turn that logs in, the embedder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// BindOrGet at `node` ended so.
    Host(NodeRid, Result<ActorRef, Error>),
    /// A destroy ended so.
    Destroy(Result<(), Error>),
}

/// The mesh's Location Store, guarded: every call goes through [`Deref`],
/// which records the caller when the mesh is handling a node's input at
/// that moment (its shard thread) — what `no_shard_input_waits_on_the_store`
/// refuses (src/sim/invariants.rs). The store workers' calls, and the
/// embedder's lease acquisition before a node serves, go through
/// [`SimStore::off_shard`] instead, as the runtime's go through its store
/// workers and `lease::acquire` (docs/threading.md "Never block a shard").
#[derive(Debug)]
pub struct SimStore {
    inner: EmbeddedStore<ManualClock>,
    /// The node whose input the mesh is handling now, if any.
    handling: Cell<Option<NodeRid>>,
    /// Calls made while a node's input was handled: the node, and where.
    waits: RefCell<Vec<(NodeRid, &'static Location<'static>)>>,
}

impl SimStore {
    /// A call off any shard thread: a store worker's, or the embedder's.
    fn off_shard(&self) -> &EmbeddedStore<ManualClock> {
        &self.inner
    }
}

impl Deref for SimStore {
    type Target = EmbeddedStore<ManualClock>;

    #[track_caller]
    fn deref(&self) -> &Self::Target {
        if let Some(node) = self.handling.get() {
            self.waits.borrow_mut().push((node, Location::caller()));
        }
        &self.inner
    }
}

/// One entry of the mesh's journal: everything observable, in the order it
/// happened (records when sent, core events when drained, store operations
/// when carried out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Journal {
    /// A record put on a link.
    Sent(Tapped),
    /// An event a node's core emitted.
    Event {
        /// When it was drained.
        at: Instant,
        /// The node.
        node: NodeRid,
        /// The event.
        event: CoreEvent,
    },
    /// A store operation carried out for a node.
    Store {
        /// The node whose runtime carried it out.
        node: NodeRid,
        /// The relocation it was for.
        relocation: RelocationId,
        /// The operation.
        op: StoreOp,
        /// Its answer.
        done: StoreDone,
    },
    /// An answer to a node lifecycle that is gone, dropped as the transport
    /// drops it (never delivered to the lifecycle after it).
    AnswerDropped(Tapped),
    /// A store operation of [`StoreBehavior::Latency`] or
    /// [`StoreBehavior::Hang`] reached the store and was applied there (its
    /// answer, if the caller sees it, is a [`Journal::Store`] later).
    StoreApplied {
        /// The node whose runtime made it.
        node: NodeRid,
        /// The relocation it was for.
        relocation: RelocationId,
        /// The store's outcome.
        done: StoreDone,
    },
    /// A node's own store operation ([`NodeStoreOp`]) reached the store
    /// and was applied there.
    NodeStoreApplied {
        /// The node whose runtime made it.
        node: NodeRid,
        /// The operation.
        op: NodeStoreOp,
        /// The store's outcome.
        done: StoreDone,
    },
    /// A node's own store operation was answered at its caller (the
    /// store's answer, or `StoreUnavailable` at the call timeout).
    NodeStore {
        /// The node whose runtime made it.
        node: NodeRid,
        /// The operation.
        op: NodeStoreOp,
        /// Its answer.
        done: StoreDone,
    },
    /// The store was called while the mesh handled a node's input, not
    /// through the store path: the shard waited on the store
    /// (`no_shard_input_waits_on_the_store`).
    StoreWaited {
        /// The node whose input was being handled.
        node: NodeRid,
        /// The call, by its place in the source.
        call: String,
        /// When.
        at: Instant,
    },
    /// A node's lease round no longer listed a peer's lifecycle, which it
    /// had listed: the link between them was dropped (the runtime's `bury`).
    PeerBuried {
        /// The node that dropped it.
        node: NodeRid,
        /// The peer.
        peer: NodeRid,
        /// The peer's lifecycle, dead to the mesh.
        generation: NodeGeneration,
        /// When.
        at: Instant,
    },
    /// A node's process was stopped (SIGSTOP) or went on again (SIGCONT).
    Paused {
        /// The node.
        node: NodeRid,
        /// Stopped (`true`) or going on.
        paused: bool,
        /// When.
        at: Instant,
    },
}

/// One record seen on a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tapped {
    /// When it was sent.
    pub at: Instant,
    /// Sender.
    pub from: NodeRid,
    /// Receiver.
    pub to: NodeRid,
    /// The record.
    pub record: NodeRecord,
}

impl Tapped {
    /// Its command number.
    pub fn command(&self) -> Command {
        self.record.command()
    }
}

/// One simulated node: a shard core and what its application saw.
#[derive(Debug)]
pub struct SimNode {
    core: ShardCore,
    peer: Peer,
    behavior: ActorBehavior,
    /// Every session event, in order.
    pub session_events: Vec<SessionEvent>,
    /// Every Actor event, in order.
    pub actor_events: Vec<ActorEvent>,
    /// Every relocation event, in order.
    pub relocation_events: Vec<RelocationEvent>,
    /// The stand-in runtime's Actor lanes ([`ActorBehavior::Queue`]).
    lanes: BTreeMap<ActorId, VecDeque<ActorEvent>>,
    /// The hosted Actors' states: what a capture snapshots.
    pub states: BTreeMap<ActorId, Bytes>,
    /// What a relocation's target restored, until the move opens (its
    /// state becomes the hosted Actor's) or is dropped (§8.1). Kept apart
    /// from `states`: the node may host another incarnation of the Actor
    /// meanwhile, which a dropped move must leave alone.
    restored: Vec<(RelocationId, ActorId, Bytes)>,
    restore: RestoreBehavior,
    held_restores: Vec<RelocationId>,
    sessions_config: SessionOwnerConfig,
    /// Session callback turns running ([`Mesh::hold_session_turns`]), in
    /// the order they started.
    open_turns: Vec<(SessionRid, TurnId)>,
    /// Actor turns that await ([`Mesh::suspend_turn`]): the message each
    /// began with, answered when it resumes. The Actor's lane waits.
    suspended: BTreeMap<ActorId, ActorEvent>,
    /// BindOrGets waiting on the store for an Actor, first asked first, by
    /// ticket (the runtime's `ActorHost::hosting`): one store operation per
    /// Actor at a time, so two answers never race into two instances.
    hosting: BTreeMap<ActorId, Vec<u64>>,
    /// BindOrGets waiting for an ending Actor's destroy to end, by ticket
    /// (the runtime's `ActorHost::after_destroy`).
    after_destroy: BTreeMap<ActorId, Vec<u64>>,
    /// Destroys whose removal's outcome is unknown (made again until the
    /// store answers): each one's ticket, answered with the final outcome
    /// (the runtime's `ActorHost::destroying`).
    destroying: BTreeMap<ActorId, u64>,
    /// The peers' lifecycles the last lease rounds listed (the runtime's
    /// `Links::listed`).
    listed: BTreeMap<NodeRid, NodeGeneration>,
    /// A lease round (renewal) is with the store.
    renewing: bool,
    /// When the next lease round is due.
    next_renewal: Instant,
}

impl SimNode {
    fn take_restored(
        &mut self,
        relocation: RelocationId,
    ) -> Option<(RelocationId, ActorId, Bytes)> {
        let at = self
            .restored
            .iter()
            .position(|(id, _, _)| *id == relocation)?;
        Some(self.restored.remove(at))
    }

    /// The node's core.
    pub fn core(&self) -> &ShardCore {
        &self.core
    }

    /// The node as its peers see it.
    pub fn peer(&self) -> Peer {
        self.peer
    }
}

#[derive(Debug)]
struct InFlight {
    from: Peer,
    to: NodeRid,
    record: NodeRecord,
}

/// One store operation on the virtual clock: made by a node lifecycle (for
/// a relocation, or for itself), applied (or not) at the store, answered
/// (or timed out) at the caller.
#[derive(Debug)]
struct StoreCall {
    node: NodeRid,
    generation: NodeGeneration,
    job: StoreJob,
    /// Who waits on a destroy's answer.
    ticket: Option<u64>,
    /// When it was made.
    issued: Instant,
    /// The claim of the lease the caller held when it made the call.
    claim: Result<crate::store::OwnerClaim, Error>,
    /// The store's outcome, once applied.
    applied: Option<StoreDone>,
    /// The caller has its answer (the store's, or a timeout).
    ended: bool,
    /// Made while the store hung: whether the store applies it when it
    /// comes back.
    hung: Option<bool>,
    /// Applied and answered at the instant it was made (a node's own
    /// operation at a store that answers at once).
    at_once: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StoreStep {
    /// The operation reaches the store.
    Apply,
    /// Its answer reaches the caller.
    Answer,
    /// The caller's call timeout.
    Timeout,
}

/// An input that reached a stopped node, given to it when it goes on.
#[derive(Debug)]
enum Deferred {
    Record(InFlight),
    PeerDown(NodeRid),
    Store(StoreJob, Option<u64>, Instant, StoreDone),
}

/// What the store on the virtual clock did, for the simulator's tally.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Operations that ended `StoreUnavailable` at the caller's call
    /// timeout (a hung store, or an answer slower than the timeout).
    pub timeouts: u64,
    /// Of those, the ones the store applied all the same (before or after
    /// the timeout): the caller cannot know.
    pub applied_unanswered: u64,
    /// Operations answered after a latency (not timed out).
    pub answered_late: u64,
    /// Paused nodes that went on again with their lease still live.
    pub resumed_within_lease: u64,
    /// Paused nodes that went on past their lease, and fenced.
    pub resumed_past_lease: u64,
    /// Links a node dropped because its lease round no longer listed the
    /// peer's lifecycle (its lease lapsed).
    pub peers_buried: u64,
}

/// A mesh of simulated nodes.
#[derive(Debug)]
pub struct Mesh {
    now: Instant,
    latency: Duration,
    nodes: BTreeMap<NodeRid, SimNode>,
    in_flight: BTreeMap<(Instant, u64), InFlight>,
    sent: u64,
    cut: HashSet<(NodeRid, NodeRid)>,
    unlinked: HashSet<(NodeRid, NodeRid)>,
    dropped: HashSet<(NodeRid, NodeRid, Command)>,
    tap: Vec<Tapped>,
    journal: Vec<Journal>,
    lost: u64,
    next_correlation: u32,
    relocation: RelocationConfig,
    clock: ManualClock,
    store: SimStore,
    leases: BTreeMap<NodeRid, OwnerLease>,
    /// The generation of the last lease each node acquired.
    leases_acquired: BTreeMap<NodeRid, u64>,
    store_behavior: StoreBehavior,
    held_store: VecDeque<(NodeRid, RelocationId, StoreOp)>,
    /// Store operations on the virtual clock ([`StoreBehavior::Latency`],
    /// [`StoreBehavior::Hang`]), by number.
    store_calls: BTreeMap<u64, StoreCall>,
    /// What happens to them when: (time, order) → (call, step).
    store_steps: BTreeMap<(Instant, u64), (u64, StoreStep)>,
    store_seq: u64,
    /// The PRNG of store latencies and of a hung operation's fate.
    store_rng: u64,
    store_counts: StoreCounts,
    /// Nodes whose process is stopped, with the inputs that reached them
    /// meanwhile, in order (given when they go on).
    paused: BTreeMap<NodeRid, VecDeque<Deferred>>,
    /// Nodes whose owner lease lapsed (a renewal or a resume found it so)
    /// and that fenced their Actors (§5, X21), until they restart.
    lapsed: BTreeSet<NodeRid>,
    timer_lateness: Duration,
    observer: ObserverSlot,
    /// Whether session callback turns run until [`Mesh::end_session_turn`]
    /// (else each ends as soon as it starts).
    hold_session_turns: bool,
    /// BindOrGet and destroy outcomes not taken yet, by ticket.
    answers: BTreeMap<u64, Answer>,
    next_ticket: u64,
    /// The BindOrGets other nodes asked (71), by ticket: answered to that
    /// peer instead of [`Mesh::take_answers`].
    peer_asks: BTreeMap<u64, (Peer, RequestId)>,
}

/// Sees every core event as it is drained, with the core that emitted it as
/// it is at that moment: what the simulator's invariants that compare an
/// event with the state it was decided on need (src/sim/invariants.rs).
///
/// Its arguments: the event's position in the journal, the node, the time,
/// the event, and the node's core.
pub type Observer = Box<dyn FnMut(usize, NodeRid, Instant, &CoreEvent, &ShardCore)>;

#[derive(Default)]
struct ObserverSlot(Option<Observer>);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(observer)"
        } else {
            "None"
        })
    }
}

/// The sim store's lease term: longer than any test runs in virtual time.
const SIM_LEASE_TERM: Duration = Duration::from_secs(3_600);

/// The ticket of a BindOrGet nobody waits on (a recheck).
const NOBODY: u64 = 0;

/// How many times timers may fire at one instant before the mesh calls the
/// core stuck ([`Mesh::step_until`]): far above any real burst of timers
/// falling due together.
const MAX_FIRINGS_AT_ONE_INSTANT: u32 = 100_000;

/// How often a node's runtime renews its owner lease (the runtime's
/// `NodeSettings::lease_renew_interval` default).
pub const LEASE_RENEW_INTERVAL: Duration = Duration::from_millis(1_000);

impl Default for Mesh {
    fn default() -> Self {
        Self::new(Duration::from_micros(50))
    }
}

impl Mesh {
    /// An empty mesh whose links deliver after `latency`.
    pub fn new(latency: Duration) -> Self {
        Self::with_lease_term(latency, SIM_LEASE_TERM)
    }

    /// An empty mesh whose store grants owner leases for `lease_term`; the
    /// leases are renewed whenever [`Mesh::advance`] moves time, so only a
    /// dead node's lease lapses.
    pub fn with_lease_term(latency: Duration, lease_term: Duration) -> Self {
        let clock = ManualClock::new(Instant::ZERO);
        Self {
            now: Instant::ZERO,
            latency,
            nodes: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            sent: 0,
            cut: HashSet::new(),
            unlinked: HashSet::new(),
            dropped: HashSet::new(),
            tap: Vec::new(),
            journal: Vec::new(),
            lost: 0,
            next_correlation: 0,
            relocation: RelocationConfig::default(),
            store: SimStore {
                inner: EmbeddedStore::new(clock.clone(), lease_term),
                handling: Cell::new(None),
                waits: RefCell::new(Vec::new()),
            },
            clock,
            leases: BTreeMap::new(),
            leases_acquired: BTreeMap::new(),
            store_behavior: StoreBehavior::Immediate,
            held_store: VecDeque::new(),
            store_calls: BTreeMap::new(),
            store_steps: BTreeMap::new(),
            store_seq: 0,
            store_rng: 0,
            store_counts: StoreCounts::default(),
            paused: BTreeMap::new(),
            lapsed: BTreeSet::new(),
            timer_lateness: Duration::ZERO,
            observer: ObserverSlot::default(),
            hold_session_turns: false,
            answers: BTreeMap::new(),
            next_ticket: 0,
            peer_asks: BTreeMap::new(),
        }
    }

    /// The relocation settings of nodes added from now on.
    pub fn set_relocation_config(&mut self, config: RelocationConfig) {
        self.relocation = config;
    }

    /// Adds a node with the default settings and the Echo behavior.
    pub fn add_node(&mut self, rid: u64) -> NodeRid {
        self.add_node_with(rid, 1, SessionOwnerConfig::default())
    }

    /// Adds a node (or restarts one: a new `generation` replaces the old core
    /// and everything in it, as a process restart does).
    pub fn add_node_with(
        &mut self,
        rid: u64,
        generation: u64,
        config: SessionOwnerConfig,
    ) -> NodeRid {
        self.add_node_leased(rid, generation, OwnerLeaseGeneration(generation), config)
    }

    /// Adds a node whose lifecycle's owner lease has generation `lease`.
    fn add_node_leased(
        &mut self,
        rid: u64,
        generation: u64,
        lease: OwnerLeaseGeneration,
        config: SessionOwnerConfig,
    ) -> NodeRid {
        let rid = NodeRid(rid);
        let node_generation = NodeGeneration(generation);
        let mesh = MeshName::new("sim").unwrap_or_else(|_| unreachable!("a valid literal"));
        let sessions_config = config.clone();
        let config = ShardConfig {
            session_owner: SessionOwnerIdentity {
                node: rid,
                lifecycle: node_generation,
                owner_id: SessionOwnerId(0),
                lease,
            },
            actor_owner: ActorOwnerIdentity {
                mesh,
                node: rid,
                node_generation,
                lease,
            },
            sessions: config,
            relocation: self.relocation.clone(),
            send_timeout: Duration::from_millis(3_000),
            // The simulator's Actors answer in their turn: none awaits.
            actor_turn_deadline: Duration::from_millis(1_400),
        };
        let node = SimNode {
            core: ShardCore::new(config, self.now),
            peer: Peer {
                rid,
                generation: node_generation,
            },
            behavior: ActorBehavior::Echo,
            session_events: Vec::new(),
            actor_events: Vec::new(),
            relocation_events: Vec::new(),
            lanes: BTreeMap::new(),
            states: BTreeMap::new(),
            restore: RestoreBehavior::Succeed,
            held_restores: Vec::new(),
            restored: Vec::new(),
            sessions_config,
            open_turns: Vec::new(),
            suspended: BTreeMap::new(),
            hosting: BTreeMap::new(),
            after_destroy: BTreeMap::new(),
            destroying: BTreeMap::new(),
            listed: BTreeMap::new(),
            renewing: false,
            next_renewal: self.now,
        };
        self.nodes.insert(rid, node);
        rid
    }

    /// Sets how a node's application answers Actor work.
    pub fn set_behavior(&mut self, node: NodeRid, behavior: ActorBehavior) {
        self.node_mut(node).behavior = behavior;
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A node.
    pub fn node(&self, node: NodeRid) -> &SimNode {
        self.nodes
            .get(&node)
            .unwrap_or_else(|| panic!("no node {node:?} in the mesh"))
    }

    fn node_mut(&mut self, node: NodeRid) -> &mut SimNode {
        self.nodes
            .get_mut(&node)
            .unwrap_or_else(|| panic!("no node {node:?} in the mesh"))
    }

    /// A node's session-owner commands, now. Call [`Mesh::run`] afterwards.
    pub fn sessions(&mut self, node: NodeRid) -> Sessions<'_> {
        let now = self.now;
        self.node_mut(node).core.sessions(now)
    }

    /// A node's Actor-owner commands, now. Call [`Mesh::run`] afterwards.
    pub fn actors(&mut self, node: NodeRid) -> Actors<'_> {
        let now = self.now;
        self.node_mut(node).core.actors(now)
    }

    /// A node's relocation commands and answers, now. Call [`Mesh::run`]
    /// afterwards.
    pub fn relocations(&mut self, node: NodeRid) -> Relocations<'_> {
        let now = self.now;
        self.node_mut(node).core.relocations(now)
    }

    /// Every record sent on any link so far, in order.
    pub fn tap(&self) -> &[Tapped] {
        &self.tap
    }

    /// Everything observable so far, in order.
    pub fn journal(&self) -> &[Journal] {
        &self.journal
    }

    /// Records dropped because their link was cut or their node was gone.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Cuts or restores the link between two nodes (both directions); records
    /// sent over a cut link are lost, as a broken TCP connection loses them.
    pub fn set_link(&mut self, a: NodeRid, b: NodeRid, up: bool) {
        for pair in [(a, b), (b, a)] {
            if up {
                self.cut.remove(&pair);
            } else {
                self.cut.insert(pair);
            }
        }
    }

    /// Takes the link between two nodes away altogether (both directions), or
    /// gives it back: a request sent while there is none ends at once with
    /// `PeerUnreachable` on its sender, as the runtime does
    /// (`ShardCore::handle_unreachable`); other records are lost.
    ///
    /// Taking it away tells both cores the peer is down, as the runtime's
    /// link shard does when a link closes (`ShardCore::handle_peer_down`).
    pub fn set_linked(&mut self, a: NodeRid, b: NodeRid, linked: bool) {
        for pair in [(a, b), (b, a)] {
            if linked {
                self.unlinked.remove(&pair);
            } else {
                self.unlinked.insert(pair);
            }
        }
        if !linked {
            self.peer_down(a, b);
        }
    }

    /// Tells each node of the pair that its link to the other went down.
    fn peer_down(&mut self, a: NodeRid, b: NodeRid) {
        let now = self.now;
        for (node, peer) in [(a, b), (b, a)] {
            // A stopped process learns it when it goes on.
            if let Some(inputs) = self.paused.get_mut(&node) {
                inputs.push_back(Deferred::PeerDown(peer));
                continue;
            }
            if let Some(sim) = self.nodes.get_mut(&node) {
                sim.core.handle_peer_down(now, peer);
            }
        }
    }

    /// Loses every record of `command` sent from `from` to `to` from now on
    /// (tapped, never delivered), or stops doing so.
    pub fn set_dropping(&mut self, from: NodeRid, to: NodeRid, command: Command, drop: bool) {
        if drop {
            self.dropped.insert((from, to, command));
        } else {
            self.dropped.remove(&(from, to, command));
        }
    }

    /// Sets how a node's runtime answers a Restore.
    pub fn set_restore(&mut self, node: NodeRid, behavior: RestoreBehavior) {
        self.node_mut(node).restore = behavior;
    }

    /// Sets how the Location Store answers relocation operations.
    pub fn set_store(&mut self, behavior: StoreBehavior) {
        if self.store_behavior == StoreBehavior::Hang && behavior != StoreBehavior::Hang {
            self.unhang();
        }
        self.store_behavior = behavior;
    }

    /// Seeds the PRNG of the store's latencies and of a hung operation's
    /// fate (the schedule gives it one from its own seed).
    pub fn set_store_seed(&mut self, seed: u64) {
        self.store_rng = seed;
    }

    /// What the store on the virtual clock did so far, and how paused
    /// nodes went on.
    pub fn store_counts(&self) -> StoreCounts {
        self.store_counts
    }

    /// A number below `below` from the store's PRNG (SplitMix64).
    fn store_random(&mut self, below: u64) -> u64 {
        self.store_rng = self.store_rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.store_rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % below.max(1)
    }

    fn schedule_store(&mut self, at: Instant, call: u64, step: StoreStep) {
        self.store_seq += 1;
        self.store_steps.insert((at, self.store_seq), (call, step));
    }

    /// A store operation the core asked for (a relocation's CAS or durable
    /// abort) under [`StoreBehavior::Latency`] or [`StoreBehavior::Hang`]:
    /// see [`Mesh::issue`]; its answer comes back to the core through
    /// `cas_done` / `abort_done`, the inputs the runtime's `store_answered`
    /// uses.
    fn issue_store(&mut self, node: NodeRid, relocation: RelocationId, op: StoreOp) {
        self.issue(node, StoreJob::Relocation(relocation, op), None);
    }

    /// A store operation made as the runtime's store worker makes it
    /// (src/runtime/store_effects.rs): it leaves now, gets to the store
    /// later (or, hung, maybe never), and its answer — or the call timeout
    /// — comes back to the node as an input of its own. A node's own
    /// operation ([`NodeStoreOp`]) under a store that answers at once
    /// ([`StoreBehavior::Immediate`], and `Hold`, `Down` and `LoseReply`,
    /// which are the relocation's) is applied and answered at this very
    /// instant, still as an input after this one.
    fn issue(&mut self, node: NodeRid, job: StoreJob, ticket: Option<u64>) {
        let claim = self.lease(node).map(|lease| lease.claim());
        let generation = self.node(node).peer.generation;
        self.store_seq += 1;
        let id = self.store_seq;
        let now = self.now;
        let hung = match self.store_behavior {
            StoreBehavior::Hang => Some(self.store_random(2) == 0),
            _ => None,
        };
        self.store_calls.insert(
            id,
            StoreCall {
                node,
                generation,
                job,
                ticket,
                issued: now,
                claim,
                applied: None,
                ended: false,
                hung,
                at_once: !matches!(
                    self.store_behavior,
                    StoreBehavior::Latency(_) | StoreBehavior::Hang
                ),
            },
        );
        match self.store_behavior {
            StoreBehavior::Latency(bound) => {
                let micros = u64::try_from(bound.as_micros()).unwrap_or(u64::MAX) + 1;
                let apply = now + Duration::from_micros(self.store_random(micros));
                let answer = apply + Duration::from_micros(self.store_random(micros));
                self.schedule_store(apply, id, StoreStep::Apply);
                self.schedule_store(answer, id, StoreStep::Answer);
                self.schedule_store(now + STORE_CALL_TIMEOUT, id, StoreStep::Timeout);
            }
            StoreBehavior::Hang => {
                self.schedule_store(now + STORE_CALL_TIMEOUT, id, StoreStep::Timeout);
            }
            StoreBehavior::Immediate
            | StoreBehavior::Hold
            | StoreBehavior::Down
            | StoreBehavior::LoseReply => {
                self.schedule_store(now, id, StoreStep::Apply);
                self.schedule_store(now, id, StoreStep::Answer);
            }
        }
    }

    /// The store comes back: what reached it while it hung is applied now,
    /// in order, and answered if its caller still waits.
    fn unhang(&mut self) {
        let now = self.now;
        let waiting: Vec<(u64, bool, bool)> = self
            .store_calls
            .iter()
            .filter_map(|(&id, call)| call.hung.map(|applies| (id, applies, call.ended)))
            .collect();
        for (id, applies, ended) in waiting {
            if let Some(call) = self.store_calls.get_mut(&id) {
                call.hung = None;
            }
            if !applies {
                // It never got there: its caller times out; nothing waits.
                if ended {
                    self.store_calls.remove(&id);
                }
                continue;
            }
            self.schedule_store(now, id, StoreStep::Apply);
            if !ended {
                self.schedule_store(now, id, StoreStep::Answer);
            }
        }
    }

    /// One step of a store operation on the virtual clock.
    fn store_step(&mut self, id: u64, step: StoreStep) {
        let Some(call) = self.store_calls.get(&id) else {
            return;
        };
        let node = call.node;
        match step {
            StoreStep::Apply => {
                if call.applied.is_some() {
                    return;
                }
                let (job, claim, ended) = (call.job.clone(), call.claim.clone(), call.ended);
                self.sync_clock();
                let done = self.execute_job(&job, claim);
                match job {
                    StoreJob::Relocation(relocation, _) => {
                        let done = done.clone();
                        self.journal.push(Journal::StoreApplied {
                            node,
                            relocation,
                            done,
                        });
                    }
                    // A renewal that went through is not journaled: one a
                    // second per node would crowd every trail.
                    StoreJob::Node(_) if matches!(done, StoreDone::Renew(Ok(_), _)) => {}
                    StoreJob::Node(op) => {
                        let done = done.clone();
                        self.journal
                            .push(Journal::NodeStoreApplied { node, op, done });
                    }
                }
                if ended {
                    // Its caller timed out before the store acted.
                    self.store_counts.applied_unanswered += 1;
                }
                if let Some(call) = self.store_calls.get_mut(&id) {
                    call.applied = Some(done);
                }
            }
            StoreStep::Answer => {
                let Some(done) = call.applied.clone().filter(|_| !call.ended) else {
                    return;
                };
                if !call.at_once {
                    self.store_counts.answered_late += 1;
                }
                self.end_store_call(id, done);
            }
            StoreStep::Timeout => {
                if call.ended {
                    return;
                }
                self.store_counts.timeouts += 1;
                if call.applied.is_some() {
                    self.store_counts.applied_unanswered += 1;
                }
                let done = refused_job(&call.job, Error::new(Reason::StoreUnavailable));
                self.end_store_call(id, done);
            }
        }
        let finished = self
            .store_calls
            .get(&id)
            .is_some_and(|c| c.ended && (c.applied.is_some() || c.hung == Some(false)));
        if finished {
            self.store_calls.remove(&id);
        }
    }

    /// The store carries out one operation on the virtual clock, as a
    /// store worker calls it (off any shard thread).
    fn execute_job(
        &mut self,
        job: &StoreJob,
        claim: Result<crate::store::OwnerClaim, Error>,
    ) -> StoreDone {
        let claim = match (job, claim) {
            // A lease round needs no claim: it carries its lease.
            (StoreJob::Node(NodeStoreOp::Renew(lease)), _) => {
                return self.lease_round_at_store(lease);
            }
            (_, Ok(claim)) => claim,
            (job, Err(error)) => return refused_job(job, error),
        };
        let store = self.store.off_shard();
        let row = |created: Created| match created {
            Created::New(row) => RowAnswer::Created(row.actor_ref()),
            Created::Existing(row) => RowAnswer::Existing(row.actor_ref()),
        };
        match job {
            StoreJob::Relocation(relocation, op) => {
                self.execute_store(*relocation, op, &claim, false)
            }
            StoreJob::Node(NodeStoreOp::Create(actor)) => {
                StoreDone::Host(store.create(actor, &claim).map(row).map_err(Error::from))
            }
            StoreJob::Node(NodeStoreOp::Replace(lost)) => {
                let version = RowVersion::from(&lost.location);
                StoreDone::Host(
                    match store.remove(&lost.id, version) {
                        Ok(RemoveOutcome::Conflict { current }) => {
                            Ok(RowAnswer::Conflict(current.actor_ref()))
                        }
                        Ok(RemoveOutcome::Removed | RemoveOutcome::Absent) => {
                            store.create(&lost.id, &claim).map(row)
                        }
                        Err(error) => Err(error),
                    }
                    .map_err(Error::from),
                )
            }
            StoreJob::Node(NodeStoreOp::Lookup(actor)) => StoreDone::Host(
                store
                    .lookup(actor)
                    .map(|row| RowAnswer::Looked(row.map(|r| r.actor_ref())))
                    .map_err(Error::from),
            ),
            StoreJob::Node(NodeStoreOp::RemoveOrphan(orphan)) => {
                let version = RowVersion::from(&orphan.location);
                StoreDone::Host(
                    store
                        .remove(&orphan.id, version)
                        .map(|removed| match removed {
                            RemoveOutcome::Removed | RemoveOutcome::Absent => {
                                RowAnswer::Looked(None)
                            }
                            RemoveOutcome::Conflict { current } => {
                                RowAnswer::Conflict(current.actor_ref())
                            }
                        })
                        .map_err(Error::from),
                )
            }
            StoreJob::Node(NodeStoreOp::Remove(actor, version)) => {
                StoreDone::Remove(store.remove(actor, *version).map(drop).map_err(Error::from))
            }
            StoreJob::Node(NodeStoreOp::Renew(lease)) => self.lease_round_at_store(lease),
        }
    }

    /// A lease round at the store, as the runtime's `lease_round` makes it
    /// on its store worker: the renewal, then — the lease renewed — this
    /// lifecycle registered in the membership and the mesh listed.
    fn lease_round_at_store(&self, lease: &OwnerLease) -> StoreDone {
        let store = self.store.off_shard();
        let renewed = store.renew_lease(lease).map_err(Error::from);
        let listed = renewed.as_ref().ok().and_then(|renewed| {
            let _ = store.register_member(renewed, member_address(renewed.node));
            let members = store.members(&renewed.mesh).ok()?;
            Some(
                members
                    .iter()
                    .map(|m| (m.node, m.node_generation))
                    .collect(),
            )
        });
        StoreDone::Renew(renewed, listed)
    }

    /// The caller gets its answer: journaled, then given to the core of the
    /// lifecycle that asked — later if its process is stopped, never if it
    /// is gone (its store worker died with it).
    fn end_store_call(&mut self, id: u64, done: StoreDone) {
        let Some(call) = self.store_calls.get_mut(&id) else {
            return;
        };
        call.ended = true;
        let (node, generation, job, ticket, issued) = (
            call.node,
            call.generation,
            call.job.clone(),
            call.ticket,
            call.issued,
        );
        match &job {
            StoreJob::Relocation(relocation, op) => self.journal.push(Journal::Store {
                node,
                relocation: *relocation,
                op: op.clone(),
                done: done.clone(),
            }),
            // (As when applied: a renewal that went through is not journaled.)
            StoreJob::Node(_) if matches!(done, StoreDone::Renew(Ok(_), _)) => {}
            StoreJob::Node(op) => self.journal.push(Journal::NodeStore {
                node,
                op: op.clone(),
                done: done.clone(),
            }),
        }
        if self.nodes.get(&node).map(|n| n.peer.generation) != Some(generation) {
            return;
        }
        if let Some(inputs) = self.paused.get_mut(&node) {
            inputs.push_back(Deferred::Store(job, ticket, issued, done));
            return;
        }
        self.store_answered(node, job, ticket, issued, done);
    }

    /// A store answer into the node, an input of its own, as the runtime's
    /// `store_answered` (src/runtime/shard.rs) takes its store workers'.
    fn store_answered(
        &mut self,
        node: NodeRid,
        job: StoreJob,
        ticket: Option<u64>,
        issued: Instant,
        done: StoreDone,
    ) {
        self.on_node(node, |mesh| match (job, done) {
            (StoreJob::Relocation(relocation, _), done) => {
                mesh.relocation_answered(node, relocation, done)
            }
            (StoreJob::Node(NodeStoreOp::Create(actor)), StoreDone::Host(answer)) => {
                mesh.host_store_answered(node, actor, (issued, true), answer, false)
            }
            (StoreJob::Node(NodeStoreOp::Replace(lost)), StoreDone::Host(answer)) => {
                mesh.host_store_answered(node, lost.id, (issued, true), answer, true)
            }
            (StoreJob::Node(NodeStoreOp::Lookup(actor)), StoreDone::Host(answer)) => {
                mesh.host_store_answered(node, actor, (issued, false), answer, false)
            }
            (StoreJob::Node(NodeStoreOp::RemoveOrphan(orphan)), StoreDone::Host(answer)) => {
                mesh.host_store_answered(node, orphan.id, (issued, true), answer, false)
            }
            (StoreJob::Node(NodeStoreOp::Remove(actor, _)), StoreDone::Remove(outcome)) => {
                mesh.destroy_answered(node, &actor, ticket, outcome)
            }
            (StoreJob::Node(NodeStoreOp::Renew(_)), StoreDone::Renew(renewed, listed)) => {
                mesh.lease_renewed(node, renewed, listed)
            }
            // No operation is answered with another's kind of answer.
            (StoreJob::Node(_), _) => {}
        });
        self.pump();
    }

    /// A relocation's store answer into the core, as the runtime's
    /// `store_answered`.
    fn relocation_answered(&mut self, node: NodeRid, relocation: RelocationId, done: StoreDone) {
        let now = self.now;
        let mut relocations = self.node_mut(node).core.relocations(now);
        match done {
            StoreDone::Cas(answer) => relocations.cas_done(relocation, answer),
            StoreDone::Abort(answer) => relocations.abort_done(relocation, answer),
            StoreDone::Host(_) | StoreDone::Remove(_) | StoreDone::Renew(..) => {}
        }
    }

    /// What a shard that waits on the store does: the row of `actor` read
    /// at once, inside an input of `node`, rather than through the store
    /// path. Only for the test that proves `no_shard_input_waits_on_the_store`
    /// fires (tests/sim.rs).
    #[doc(hidden)]
    pub fn look_up_inside_input(&mut self, node: NodeRid, actor: &ActorId) -> Option<ActorRef> {
        self.on_node(node, |mesh| {
            let row = mesh.store.lookup(actor).ok().flatten();
            row.map(|row| row.actor_ref())
        })
    }

    /// Runs `f` as the handling of one of `node`'s inputs (its shard
    /// thread): a store call made meanwhile other than through the store
    /// path is journaled as [`Journal::StoreWaited`].
    fn on_node<R>(&mut self, node: NodeRid, f: impl FnOnce(&mut Self) -> R) -> R {
        let before = self.store.handling.replace(Some(node));
        let result = f(self);
        self.store.handling.set(before);
        let waits = self.store.waits.take();
        let at = self.now;
        for (node, call) in waits {
            let call = call.to_string();
            self.journal.push(Journal::StoreWaited { node, call, at });
        }
        result
    }

    /// A node's process is stopped (SIGSTOP): from now on it gets no input —
    /// no timer, no record, no store answer — and renews no lease, while the
    /// others go on. What reaches it waits, in order, for [`Mesh::resume`].
    pub fn pause(&mut self, node: NodeRid) {
        self.paused.entry(node).or_default();
        let at = self.now;
        self.journal.push(Journal::Paused {
            node,
            paused: true,
            at,
        });
    }

    /// Whether a node's process is stopped.
    pub fn is_paused(&self, node: NodeRid) -> bool {
        self.paused.contains_key(&node)
    }

    /// Whether the node's lifecycle is dead to the mesh: its owner lease
    /// lapsed (it fenced, or will fence the moment it goes on, §5 X21).
    pub fn is_lapsed(&self, node: NodeRid) -> bool {
        self.lapsed.contains(&node) || (self.is_paused(node) && !self.lease_live(node))
    }

    /// The nodes that fenced after their lease lapsed and have not
    /// restarted yet.
    pub fn lapsed(&self) -> Vec<NodeRid> {
        self.lapsed.iter().copied().collect()
    }

    /// Whether the node's owner lease (the one its lifecycle holds) is still
    /// live by the store's clock. A node that holds none yet has none to
    /// lose.
    fn lease_live(&self, node: NodeRid) -> bool {
        self.sync_clock();
        let Some(held) = self.leases.get(&node) else {
            return true;
        };
        matches!(self.store.lease(node), Ok(Some(live))
            if live.generation == held.generation && live.node_generation == held.node_generation)
    }

    /// §5, X21, as the runtime's `fence_owner`: the lifecycle's lease
    /// lapsed, so its Actor owner fences (every later bind and relay ends
    /// `Unavailable`); it stays so until the process restarts.
    fn fence_lapsed(&mut self, node: NodeRid) {
        let now = self.now;
        self.lapsed.insert(node);
        self.node_mut(node).core.actors(now).fence();
    }

    /// The stopped process goes on (SIGCONT). As the runtime's shard loop
    /// does on its first turn after, it reads the clock, and — its lease
    /// being past its `expires_at` — fences its Actor owner before it reads
    /// anything (`fence_if_lapsed`, src/runtime/shard.rs); a live lease is
    /// renewed. Then its timers fire, late, and what reached it meanwhile is
    /// handled in order. Returns whether its lease was still live.
    pub fn resume(&mut self, node: NodeRid) -> bool {
        let Some(inputs) = self.paused.remove(&node) else {
            return !self.lapsed.contains(&node);
        };
        let now = self.now;
        self.journal.push(Journal::Paused {
            node,
            paused: false,
            at: now,
        });
        // Its own reading of its lease, before any input (the runtime's
        // `fence_if_lapsed` reads `lease_expires_at`, not the store).
        let live = !self.lease_lapsed_by_its_reading(node);
        if live {
            self.store_counts.resumed_within_lease += 1;
            // Its lease round is due: the next one goes to the store.
            self.node_mut(node).next_renewal = now;
        } else {
            self.store_counts.resumed_past_lease += 1;
            self.on_node(node, |mesh| mesh.fence_lapsed(node));
        }
        self.pump();
        let sim = self.node_mut(node);
        if sim.core.poll_timeout().is_some_and(|d| d <= now) {
            sim.core.handle_timeout(now);
        }
        self.pump();
        for input in inputs {
            match input {
                Deferred::Record(flight) => {
                    self.node_mut(node)
                        .core
                        .handle_record(now, flight.from, flight.record);
                }
                Deferred::PeerDown(peer) => self.node_mut(node).core.handle_peer_down(now, peer),
                Deferred::Store(job, ticket, issued, done) => {
                    self.store_answered(node, job, ticket, issued, done)
                }
            }
            self.pump();
        }
        live
    }

    /// Answers a held restore at `node` with `outcome`.
    pub fn finish_restore(&mut self, node: NodeRid, outcome: Result<(), Error>) {
        let now = self.now;
        let sim = self.node_mut(node);
        assert!(
            !sim.held_restores.is_empty(),
            "no restore is held at {node:?}"
        );
        let relocation = sim.held_restores.remove(0);
        // The simulator places no instances: nothing comes back.
        let _ = sim
            .core
            .relocations(now)
            .restored(relocation, outcome.map(|()| None));
        self.pump();
    }

    /// Carries out the oldest held store operation.
    pub fn release_store(&mut self) {
        let (node, relocation, op) = self
            .held_store
            .pop_front()
            .unwrap_or_else(|| panic!("no store operation is held"));
        self.carry_out_store(node, relocation, op);
        self.pump();
    }

    /// Store operations waiting for [`Mesh::release_store`].
    pub fn held_store(&self) -> usize {
        self.held_store.len()
    }

    /// The mesh's Location Store (what the stand-in runtimes use).
    pub fn store(&self) -> &EmbeddedStore<ManualClock> {
        &self.store
    }

    /// Creates an Actor's row in the store, owned by `node`, and hosts it
    /// there with the row's generations (what a node's runtime does on
    /// create, §1 step 2): BindOrGet, [`Mesh::host_or_get`].
    pub fn create(&mut self, node: NodeRid, actor: &str) -> ActorRef {
        self.try_create(node, &actor_id(actor))
            .unwrap_or_else(|e| panic!("creating {actor} failed: {e}"))
    }

    /// BindOrGet at `node`, run until its outcome, as [`Mesh::bind_or_get`]
    /// takes it: virtual time passes while the store takes its time (each
    /// timer, record and store step on the way happens as usual). A store
    /// that answers at once answers at this instant. A BindOrGet that gets
    /// no answer (its node stopped or gone) ends `StoreUnavailable`.
    pub fn host_or_get(&mut self, node: NodeRid, actor: &ActorId) -> Result<ActorRef, Error> {
        let ticket = self.bind_or_get(node, actor);
        match self.wait_answer(ticket) {
            Some(Answer::Host(_, outcome)) => outcome,
            _ => Err(Reason::StoreUnavailable.into()),
        }
    }

    /// [`Mesh::host_or_get`] (kept for the tests that create at random).
    pub fn try_create(&mut self, node: NodeRid, actor: &ActorId) -> Result<ActorRef, Error> {
        self.host_or_get(node, actor)
    }

    /// BindOrGet's create step at `node` (§1 step 2), as the runtime's
    /// `host_or_get` takes it (runtime/shard/actors.rs): what the core
    /// decides without the store (an Actor its Actor owner holds — hosted,
    /// or captured for a move — is that ActorRef, and the store is not
    /// asked: the simulator's seed 4330) is answered at once; otherwise the
    /// store's create-if-absent is an effect ([`NodeStoreOp::Create`]) and
    /// the request waits for its answer — behind the first, when one is
    /// already with the store for this Actor (the runtime's `hosting`).
    /// The answer is an input of its own, decided by the core
    /// ([`ShardCore::host_found`]): a live row naming another node is that
    /// node's; one naming this node is the hosted Actor, one in motion (the
    /// row's ActorRef), or a lost incarnation (L6), replaced by a new one
    /// after removing the row at its version (a second effect,
    /// [`NodeStoreOp::Replace`]).
    ///
    /// Returns the ticket whose outcome [`Mesh::take_answers`] gives.
    pub fn bind_or_get(&mut self, node: NodeRid, actor: &ActorId) -> u64 {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.host_request(node, actor.clone(), ticket);
        self.pump();
        ticket
    }

    /// The BindOrGet and destroy outcomes come so far and not taken yet, by
    /// ticket.
    pub fn take_answers(&mut self) -> BTreeMap<u64, Answer> {
        std::mem::take(&mut self.answers)
    }

    /// Lets virtual time pass, store step by store step and record by
    /// record (an ask of the row's owner, 71, travels as a record), until
    /// `ticket` is answered; `None` if nothing is left to answer it.
    fn wait_answer(&mut self, ticket: u64) -> Option<Answer> {
        loop {
            if let Some(answer) = self.answers.remove(&ticket) {
                return Some(answer);
            }
            let store = self.store_steps.keys().next().map(|&(at, _)| at);
            let record = self.in_flight.keys().next().map(|&(at, _)| at);
            let at = match (store, record) {
                (Some(a), Some(b)) => a.min(b),
                (Some(at), None) | (None, Some(at)) => at,
                (None, None) => return None,
            };
            self.step_until(at.max(self.now));
        }
    }

    /// The runtime's `host_or_get` on one request.
    fn host_request(&mut self, node: NodeRid, actor: ActorId, ticket: u64) {
        self.on_node(node, |mesh| {
            if let Some(waiting) = mesh.node_mut(node).hosting.get_mut(&actor) {
                waiting.push(ticket);
                return;
            }
            match mesh.core_host(node, &actor, None, ticket) {
                Some(decision) => mesh.host_decided(node, actor, ticket, Vec::new(), decision),
                None => {
                    mesh.node_mut(node)
                        .hosting
                        .insert(actor.clone(), vec![ticket]);
                    // A recheck only looks up (src/core/recheck.rs).
                    let op = match ticket {
                        NOBODY => NodeStoreOp::Lookup(actor),
                        _ => NodeStoreOp::Create(actor),
                    };
                    mesh.issue(node, StoreJob::Node(op), None);
                }
            }
        });
    }

    /// The core's BindOrGet decisions, the one place the simulator asks
    /// them, as the runtime's `host_without_store` and
    /// `host_store_answered` do: [`ShardCore::host_step`] before the store
    /// (`None`: the store must be asked), then [`ShardCore::host_found`] on
    /// its answer (`replacing`: the answer is a lost incarnation's
    /// replacement's; `for_peer` when another node asked, 71) — or, for a
    /// recheck (`ticket` [`NOBODY`]), `recheck_step` and `recheck_found`.
    fn core_host(
        &mut self,
        node: NodeRid,
        actor: &ActorId,
        answer: Option<(Result<RowAnswer, Error>, bool)>,
        ticket: u64,
    ) -> Option<HostDecision> {
        let for_peer = self.peer_asks.contains_key(&ticket);
        let core = &mut self.node_mut(node).core;
        let step = match ticket {
            NOBODY => core.recheck_step(actor),
            _ => core.host_step(actor, None),
        };
        if step.is_some() {
            return step;
        }
        Some(match answer? {
            (Err(error), _) => HostDecision::Decided(Err(error)),
            (Ok(answer), _) if ticket == NOBODY => core.recheck_found(actor, answer),
            (Ok(answer), replacing) => core.host_found(actor, None, answer, replacing, for_peer),
        })
    }

    /// The store answered BindOrGet's step for `actor`: the first request
    /// waiting is decided on it, the others start again in order (the
    /// runtime's `host_store_answered`).
    fn host_store_answered(
        &mut self,
        node: NodeRid,
        actor: ActorId,
        (issued, writes): (Instant, bool),
        answer: Result<RowAnswer, Error>,
        replacing: bool,
    ) {
        let Some(mut waiting) = self.node_mut(node).hosting.remove(&actor) else {
            return;
        };
        if waiting.is_empty() {
            return;
        }
        let first = waiting.remove(0);
        self.recheck_after(node, &actor, (issued, writes), &answer);
        if let Some(decision) = self.core_host(node, &actor, Some((answer, replacing)), first) {
            self.host_decided(node, actor, first, waiting, decision);
        }
    }

    /// Issue 19 item 3, "an unknown outcome is never guessed": the core
    /// arms, re-arms or settles the Actor's recheck on the store's answer
    /// to a step made at `issued` (`writes`: a create, a replacement or an
    /// orphan's removal; src/core/recheck.rs), as the runtime's
    /// `host_store_answered` has it do. The simulator's seeds 6 and 1645.
    fn recheck_after(
        &mut self,
        node: NodeRid,
        actor: &ActorId,
        (issued, writes): (Instant, bool),
        answer: &Result<RowAnswer, Error>,
    ) {
        let now = self.now;
        let end = match answer {
            Err(error) if error.reason() == Reason::StoreUnavailable => StepEnd::Unknown { writes },
            _ => StepEnd::Answered,
        };
        self.node_mut(node)
            .core
            .recheck_after_store(now, actor, issued, end);
    }

    /// A BindOrGet at this node that ended with a row naming this very node
    /// that it does not host is asked again (src/core/recheck.rs; the
    /// simulator's seed 11751).
    fn recheck_unhosted(
        &mut self,
        node: NodeRid,
        actor: &ActorId,
        outcome: &Result<ActorRef, Error>,
    ) {
        let now = self.now;
        self.node_mut(node)
            .core
            .recheck_unhosted(now, actor, outcome);
    }

    /// Carries out the core's decision for the first request (`first`): an
    /// outcome, a new incarnation hosted here, or a lost one to replace (a
    /// further store effect, which every request keeps waiting on). Once
    /// the first has its outcome, the rest start again, in order (the
    /// runtime's `settle_hosting`): most find the Actor hosted now.
    fn host_decided(
        &mut self,
        node: NodeRid,
        actor: ActorId,
        first: u64,
        rest: Vec<u64>,
        decision: HostDecision,
    ) {
        let outcome = match decision {
            HostDecision::Decided(decided) => decided,
            // Ending: every request waits for its destroy to end, then
            // starts again ([`Mesh::after_destroy_ended`]).
            HostDecision::AfterDestroy => {
                let waiting = self.node_mut(node).after_destroy.entry(actor).or_default();
                waiting.push(first);
                waiting.extend(rest);
                return;
            }
            // The row's owner decides (71): the requests wait for its
            // answer ([`Mesh::owner_answered`]), as the runtime's do.
            HostDecision::AskOwner(row) => {
                let mut waiting = vec![first];
                waiting.extend(rest);
                self.node_mut(node).hosting.insert(actor, waiting);
                let now = self.now;
                self.node_mut(node)
                    .core
                    .ask_owner(now, sim_actor_type(), &row);
                return;
            }
            HostDecision::HostNew(row) => self.host_row(node, &row),
            HostDecision::Replace(row) => {
                let mut waiting = vec![first];
                waiting.extend(rest);
                self.node_mut(node).hosting.insert(actor, waiting);
                self.issue(node, StoreJob::Node(NodeStoreOp::Replace(row)), None);
                return;
            }
            // A recheck's orphan: removed at its version, the requests
            // waiting on that answer (the runtime's `remove_orphan`).
            HostDecision::RemoveOrphan(row) => {
                let mut waiting = vec![first];
                waiting.extend(rest);
                self.node_mut(node).hosting.insert(actor, waiting);
                let remove = NodeStoreOp::RemoveOrphan(row);
                self.issue(node, StoreJob::Node(remove), None);
                return;
            }
        };
        self.recheck_unhosted(node, &actor, &outcome);
        self.answer_host(node, first, outcome);
        for ticket in rest {
            self.host_request(node, actor.clone(), ticket);
        }
    }

    /// Gives BindOrGet `ticket` at `node` its outcome: to the peer that
    /// asked (71), or to [`Mesh::take_answers`].
    fn answer_host(&mut self, node: NodeRid, ticket: u64, outcome: Result<ActorRef, Error>) {
        if let Some((peer, request)) = self.peer_asks.remove(&ticket) {
            let now = self.now;
            self.node_mut(node)
                .core
                .answer_host_ask(now, peer, request, outcome);
        } else if ticket != NOBODY {
            self.answers.insert(ticket, Answer::Host(node, outcome));
        }
    }

    /// BindOrGet between nodes (71), as the runtime's shard carries it out:
    /// an ask runs as one more BindOrGet at the asked node (answered to
    /// the peer, never asking on); an answer decides the first request
    /// waiting at the asker, and the rest start again.
    fn host_event(&mut self, node: NodeRid, event: HostEvent) {
        match event {
            HostEvent::Asked {
                from,
                request,
                actor,
                ..
            } => {
                self.next_ticket += 1;
                let ticket = self.next_ticket;
                self.peer_asks.insert(ticket, (from, request));
                self.host_request(node, actor, ticket);
            }
            HostEvent::Answered { actor, outcome } => {
                let Some(mut waiting) = self.node_mut(node).hosting.remove(&actor) else {
                    return;
                };
                if waiting.is_empty() {
                    return;
                }
                let first = waiting.remove(0);
                self.answer_host(node, first, outcome);
                for ticket in waiting {
                    self.host_request(node, actor.clone(), ticket);
                }
            }
            // A BindOrGet nobody waits on (src/core/recheck.rs).
            HostEvent::Recheck { actor } => self.host_request(node, actor, NOBODY),
            // An ending Actor's removal, made again (src/core/actor/removal.rs).
            HostEvent::RemoveAgain { row } => {
                let version = RowVersion::from(&row.location);
                let remove = NodeStoreOp::Remove(row.id, version);
                self.on_node(node, |mesh| {
                    mesh.issue(node, StoreJob::Node(remove), None);
                });
            }
            // Fenced with the removal unknown (the runtime's
            // `destroy_unknown`): the Actor stays ending, and the core
            // refuses the BindOrGets that waited (`LeaseExpired`).
            HostEvent::DestroyUnknown { actor } => {
                self.after_destroy_ended(node, &actor);
                if let Some(ticket) = self.node_mut(node).destroying.remove(&actor) {
                    let outcome = Err(Reason::StoreUnavailable.into());
                    self.answers.insert(ticket, Answer::Destroy(outcome));
                }
            }
        }
    }

    fn host_row(&mut self, node: NodeRid, row: &ActorRef) -> Result<ActorRef, Error> {
        let id = row.id.clone();
        let hosted = self
            .actors(node)
            .host(id.clone(), row.generation, row.location.authority)?;
        let state = Bytes::from(format!("state of {}", id.as_str()));
        self.node_mut(node).states.insert(id, state);
        self.pump();
        Ok(hosted)
    }

    /// Runs the work queued on an Actor's lane ([`ActorBehavior::Queue`])
    /// in order, answering as [`ActorBehavior::Echo`] would.
    /// Returns the work it ran.
    pub fn run_lane(&mut self, node: NodeRid, actor: &ActorId) -> Vec<ActorEvent> {
        let now = self.now;
        let sim = self.node_mut(node);
        if sim.suspended.contains_key(actor) {
            // Its turn awaits: the lane waits with it.
            return Vec::new();
        }
        let queued = sim.lanes.remove(actor).unwrap_or_default();
        for event in &queued {
            echo(&mut sim.core.actors(now), event);
        }
        self.pump();
        queued.into()
    }

    /// The next message on the Actor's lane starts a turn that awaits
    /// (docs/actors.md "Async turns"): the core keeps its deadline, the lane
    /// waits, and [`Mesh::resume_turn`] answers it. Returns the message, or
    /// `None` when the lane has no message first or already awaits.
    pub fn suspend_turn(&mut self, node: NodeRid, actor: &ActorId) -> Option<ActorEvent> {
        let now = self.now;
        let sim = self.node_mut(node);
        if sim.suspended.contains_key(actor) {
            return None;
        }
        let lane = sim.lanes.get_mut(actor)?;
        if !matches!(lane.front(), Some(ActorEvent::Deliver { .. })) {
            return None;
        }
        let event = lane.pop_front()?;
        sim.core.actors(now).turn_suspended(actor);
        sim.suspended.insert(actor.clone(), event.clone());
        Some(event)
    }

    /// The awaiting turn's future is ready: the turn answers its message
    /// and ends; moves parked behind it go on.
    pub fn resume_turn(&mut self, node: NodeRid, actor: &ActorId) {
        let now = self.now;
        let sim = self.node_mut(node);
        let Some(event) = sim.suspended.remove(actor) else {
            return;
        };
        echo(&mut sim.core.actors(now), &event);
        sim.core.turn_ended(now, actor);
        self.pump();
    }

    /// The Actors at `node` whose turns await.
    pub fn suspended(&self, node: NodeRid) -> Vec<ActorId> {
        self.node(node).suspended.keys().cloned().collect()
    }

    /// Ends an awaiting turn without its continuation (a destroy): its
    /// message is answered with `reason`.
    fn end_suspended(&mut self, node: NodeRid, actor: &ActorId, reason: Reason) {
        let now = self.now;
        let sim = self.node_mut(node);
        if let Some(event) = sim.suspended.remove(actor) {
            sim.core.actors(now).refuse(event, reason);
            sim.core.turn_ended(now, actor);
        }
    }

    /// Relocates `actor` from `from` to `to`, as the runtime's
    /// `Node::relocate` does: the core parks a move of an Actor whose turn
    /// awaits until the turn ends, at most the prepare bound.
    pub fn relocate(&mut self, from: NodeRid, actor: &ActorId, to: NodeRid) -> bool {
        let now = self.now;
        let sim = self.node_mut(from);
        let started = sim.core.relocations(now).relocate(actor, to).is_ok();
        self.pump();
        started
    }

    /// The Actors at a node whose lanes have work waiting, in order.
    pub fn busy_lanes(&self, node: NodeRid) -> Vec<ActorId> {
        let sim = self.node(node);
        sim.lanes
            .iter()
            .filter(|(actor, lane)| !lane.is_empty() && !sim.suspended.contains_key(*actor))
            .map(|(actor, _)| actor.clone())
            .collect()
    }

    /// The work waiting on an Actor's lane ([`ActorBehavior::Queue`]).
    pub fn lane(&self, node: NodeRid, actor: &ActorId) -> Vec<ActorEvent> {
        self.node(node)
            .lanes
            .get(actor)
            .map(|lane| lane.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The node's owner lease, acquired at first use. A restarted node gets
    /// none while its dead lifecycle's lease is still live (§5: the store
    /// waits out the old lease).
    fn lease(&mut self, node: NodeRid) -> Result<OwnerLease, Error> {
        if let Some(lease) = self.leases.get(&node) {
            return Ok(lease.clone());
        }
        self.sync_clock();
        let peer = self.node(node).peer;
        let mesh = self.node(node).core.actor_owner().identity().mesh.clone();
        // The embedder's call before the node serves (the runtime's
        // `lease::acquire`), off any shard thread.
        let lease = self
            .store
            .off_shard()
            .acquire_lease(node, peer.generation, &mesh)
            .map_err(Error::from)?;
        *self.leases_acquired.entry(node).or_default() = lease.generation.0;
        self.leases.insert(node, lease.clone());
        Ok(lease)
    }

    /// The lease rounds and the lapse check of each node's runtime, called
    /// whenever [`Mesh::advance`] moves time (src/runtime/shard.rs):
    ///
    /// - every [`LEASE_RENEW_INTERVAL`] a node with no round in flight makes
    ///   one, a store effect ([`NodeStoreOp::Renew`]) answered as an input
    ///   of its own (`lease_round`, answered in `lease_renewed`);
    /// - a node whose lease is past its `expires_at` by its own reading (the
    ///   renewals did not come back: the store hung or was slow) fences its
    ///   Actor owner (`fence_if_lapsed`, §5 X21).
    ///
    /// A stopped node does neither.
    fn renew_leases(&mut self) {
        self.sync_clock();
        let now = self.now;
        let running = |mesh: &Self, node: &NodeRid| {
            !mesh.paused.contains_key(node) && !mesh.lapsed.contains(node)
        };
        let due: Vec<(NodeRid, OwnerLease)> = self
            .leases
            .iter()
            .filter(|(node, _)| running(self, node))
            .filter(|(node, _)| {
                let sim = self.node(**node);
                !sim.renewing && sim.next_renewal <= now
            })
            .map(|(node, lease)| (*node, lease.clone()))
            .collect();
        for (node, lease) in due {
            self.on_node(node, |mesh| {
                let sim = mesh.node_mut(node);
                sim.renewing = true;
                sim.next_renewal = now + LEASE_RENEW_INTERVAL;
                mesh.issue(node, StoreJob::Node(NodeStoreOp::Renew(lease)), None);
            });
        }
        let lapsed: Vec<NodeRid> = self
            .leases
            .keys()
            .copied()
            .filter(|node| running(self, node) && self.lease_lapsed_by_its_reading(*node))
            .collect();
        for node in lapsed {
            self.on_node(node, |mesh| mesh.fence_lapsed(node));
        }
        self.pump();
    }

    /// Whether the node's lease is past its `expires_at` by the node's own
    /// reading: the lease as the last renewal answer gave it (the runtime's
    /// `lease_left`). A node that holds none has none to lose.
    fn lease_lapsed_by_its_reading(&self, node: NodeRid) -> bool {
        self.leases
            .get(&node)
            .is_some_and(|lease| lease.expires_at <= self.now)
    }

    /// §5: a lease round's answer, as the runtime's `lease_renewed`: the
    /// renewed lease is the node's reading from now on; a store that could
    /// not be reached leaves it as it was (the node fences at its
    /// `expires_at` unless a later round comes back); a store that says the
    /// lease lapsed fences the node at once.
    ///
    /// Then the listing, as the runtime's links follow it
    /// (`Links::follow_members`, src/runtime/links.rs): a peer lifecycle
    /// this node listed before and the store no longer lists is dead to the
    /// mesh (its lease lapsed: §5, X21) — its link is dropped, what was in
    /// flight on it lost, and both ends told the peer is down; it is not
    /// linked again until a new lifecycle of that node is (the schedule's
    /// restart). This is the runtime's keepalive between nodes: a peer
    /// stopped past its lease loses its links this way, not by a timeout.
    fn lease_renewed(
        &mut self,
        node: NodeRid,
        renewed: Result<OwnerLease, Error>,
        listed: Option<Vec<(NodeRid, NodeGeneration)>>,
    ) {
        self.node_mut(node).renewing = false;
        if self.lapsed.contains(&node) {
            return;
        }
        match renewed {
            Ok(renewed) => {
                self.leases.insert(node, renewed);
            }
            Err(error) if error.reason() == Reason::StoreUnavailable => {}
            Err(_) => self.fence_lapsed(node),
        }
        if let Some(live) = listed.filter(|_| !self.lapsed.contains(&node)) {
            self.follow_members(node, &live);
        }
    }

    /// The runtime's `follow_members` at `node`, on a listing of the live
    /// members (see [`Mesh::lease_renewed`]).
    fn follow_members(&mut self, node: NodeRid, live: &[(NodeRid, NodeGeneration)]) {
        let sim = self.node_mut(node);
        let lapsed: Vec<(NodeRid, NodeGeneration)> = sim
            .listed
            .iter()
            .map(|(&rid, &generation)| (rid, generation))
            .filter(|member| !live.contains(member))
            .collect();
        for &(rid, generation) in live.iter().filter(|(rid, _)| *rid != node) {
            sim.listed.insert(rid, generation);
        }
        for (rid, generation) in lapsed {
            self.bury(node, rid, generation);
        }
    }

    /// `generation` of `peer` is dead to `node` (the runtime's `bury`): the
    /// link between them goes, if it is still that lifecycle's.
    fn bury(&mut self, node: NodeRid, peer: NodeRid, generation: NodeGeneration) {
        let sim = self.node_mut(node);
        if sim.listed.get(&peer) == Some(&generation) {
            sim.listed.remove(&peer);
        }
        let current = self.nodes.get(&peer).map(|p| p.peer.generation);
        if current.map_or(true, |current| current > generation)
            || self.unlinked.contains(&(node, peer))
        {
            return;
        }
        self.store_counts.peers_buried += 1;
        self.journal.push(Journal::PeerBuried {
            node,
            peer,
            generation,
            at: self.now,
        });
        // The connection is aborted: what was in flight on it is lost, and
        // no record goes until the peer's next lifecycle is linked.
        self.break_link(node, peer);
        self.unlinked.insert((node, peer));
        self.unlinked.insert((peer, node));
    }

    fn sync_clock(&self) {
        let behind = self.now - self.clock.now();
        self.clock.advance(behind);
    }

    /// The stand-in runtime's part in a relocation: it carries out what the
    /// core asked and feeds the result back, deciding nothing.
    fn stand_in(&mut self, rid: NodeRid, event: RelocationEvent) {
        let now = self.now;
        match event {
            RelocationEvent::Capture { relocation, actor } => {
                let sim = self.node_mut(rid);
                let queued = sim.lanes.remove(&actor).unwrap_or_default().into();
                let state = sim.states.get(&actor).cloned().unwrap_or_default();
                let capture = Capture { state, queued };
                sim.core.relocations(now).captured(relocation, Ok(capture));
            }
            RelocationEvent::Restore {
                relocation,
                actor,
                state,
            } => {
                let sim = self.node_mut(rid);
                match sim.restore.clone() {
                    RestoreBehavior::Succeed => {
                        sim.restored.push((relocation, actor, state));
                        let _ = sim.core.relocations(now).restored(relocation, Ok(None));
                    }
                    RestoreBehavior::Fail(error) => {
                        let _ = sim.core.relocations(now).restored(relocation, Err(error));
                    }
                    RestoreBehavior::Hold => {
                        sim.restored.push((relocation, actor, state));
                        sim.held_restores.push(relocation);
                    }
                }
            }
            RelocationEvent::Opened { relocation, .. } => {
                let sim = self.node_mut(rid);
                if let Some((_, actor, state)) = sim.take_restored(relocation) {
                    sim.states.insert(actor, state);
                }
            }
            // At the target: what it restored for the move. At the source:
            // the instance that moved away.
            RelocationEvent::DropInstance {
                relocation, actor, ..
            } => {
                let sim = self.node_mut(rid);
                if sim.take_restored(relocation).is_none() {
                    sim.states.remove(&actor);
                    sim.lanes.remove(&actor);
                }
            }
            RelocationEvent::Store { relocation, op } => match self.store_behavior {
                StoreBehavior::Hold => self.held_store.push_back((rid, relocation, op)),
                StoreBehavior::Immediate | StoreBehavior::Down | StoreBehavior::LoseReply => {
                    self.carry_out_store(rid, relocation, op)
                }
                StoreBehavior::Latency(_) | StoreBehavior::Hang => {
                    self.issue_store(rid, relocation, op)
                }
            },
            RelocationEvent::Reopen { .. }
            | RelocationEvent::Finished { .. }
            | RelocationEvent::Unparked { .. } => {}
            // The simulator hosts no Spots.
            RelocationEvent::SpotSealed { .. } | RelocationEvent::SpotFinished { .. } => {}
        }
    }

    fn carry_out_store(&mut self, node: NodeRid, relocation: RelocationId, op: StoreOp) {
        let now = self.now;
        let claim = self.lease(node).map(|lease| lease.claim());
        self.sync_clock();
        let down = self.store_behavior == StoreBehavior::Down;
        let unreachable = || Error::new(Reason::StoreUnavailable);
        let claim = match claim {
            Ok(claim) => claim,
            Err(error) => {
                let mut relocations = self.node_mut(node).core.relocations(now);
                match op {
                    StoreOp::TakeAuthority { .. } => relocations.cas_done(relocation, Err(error)),
                    StoreOp::AbortRelocation { .. } => {
                        relocations.abort_done(relocation, Err(error))
                    }
                }
                return;
            }
        };
        let done = self.execute_store(relocation, &op, &claim, down);
        // Applied, but the caller never hears how.
        let done = match (self.store_behavior, done) {
            (StoreBehavior::LoseReply, StoreDone::Cas(_)) => StoreDone::Cas(Err(unreachable())),
            (StoreBehavior::LoseReply, StoreDone::Abort(_)) => StoreDone::Abort(Err(unreachable())),
            (_, done) => done,
        };
        self.journal.push(Journal::Store {
            node,
            relocation,
            op,
            done: done.clone(),
        });
        self.on_node(node, |mesh| {
            mesh.relocation_answered(node, relocation, done)
        });
    }

    /// The store carries out one relocation operation (or, `down`, fails
    /// it as unreachable).
    fn execute_store(
        &mut self,
        relocation: RelocationId,
        op: &StoreOp,
        claim: &crate::store::OwnerClaim,
        down: bool,
    ) -> StoreDone {
        if down {
            return refused(op, Error::new(Reason::StoreUnavailable));
        }
        match op {
            StoreOp::TakeAuthority { actor, expected } => StoreDone::Cas(
                self.store
                    .off_shard()
                    .compare_and_set(actor, (*expected).into(), relocation, claim)
                    .map(CasAnswer::from)
                    .map_err(Error::from),
            ),
            StoreOp::AbortRelocation { actor, expected } => StoreDone::Abort(
                self.store
                    .off_shard()
                    .abort_relocation(actor, (*expected).into(), relocation)
                    .map(AbortAnswer::from)
                    .map_err(Error::from),
            ),
        }
    }

    /// Sends a hand-made record from `from` to `to` as the link would: it is
    /// tapped, lost if the link is cut, and delivered after the latency with
    /// `from`'s current peer identity (the transport's authenticated peer).
    /// Call [`Mesh::run`] afterwards. For tests of late, duplicate and forged
    /// records.
    pub fn inject(&mut self, from: NodeRid, to: NodeRid, record: NodeRecord) {
        let peer = self.node(from).peer;
        self.transmit(peer, to, record);
    }

    /// Sends a hand-made record to `to` as if the transport had authenticated
    /// `from`, which need not be a node of the mesh nor its current
    /// generation (a stale, restarted or unknown peer). Otherwise as
    /// [`Mesh::inject`].
    pub fn inject_as(&mut self, from: Peer, to: NodeRid, record: NodeRecord) {
        self.transmit(from, to, record);
    }

    /// A core's transmit, as the link shard carries it out: an answer to a
    /// lifecycle of `to` that is no longer its current one is dropped and
    /// counted at the sender (the runtime's `Shard::transmit`).
    fn transmit_answer(&mut self, from: Peer, transmit: crate::core::Transmit) {
        let current = self.nodes.get(&transmit.to).map(|n| n.peer.generation);
        if transmit.lifecycle.is_some_and(|l| current != Some(l)) {
            self.lost += 1;
            self.journal.push(Journal::AnswerDropped(Tapped {
                at: self.now,
                from: from.rid,
                to: transmit.to,
                record: transmit.record,
            }));
            if let Some(node) = self.nodes.get_mut(&from.rid) {
                node.core.trace(FlowTrace::AnswerToPastLifecycleDropped);
            }
            return;
        }
        self.transmit(from, transmit.to, transmit.record);
    }

    /// Puts one record on the link from `from` to `to`: tapped, lost if the
    /// link is cut, and carried as bytes — encoded and decoded by the wire
    /// layer, so every scenario also exercises the codec.
    fn transmit(&mut self, from: Peer, to: NodeRid, record: NodeRecord) {
        let now = self.now;
        let tapped = Tapped {
            at: now,
            from: from.rid,
            to,
            record: record.clone(),
        };
        self.journal.push(Journal::Sent(tapped.clone()));
        self.tap.push(tapped);
        if self.unlinked.contains(&(from.rid, to)) {
            self.lost += 1;
            if let Some(request) = record.request_id() {
                if let Some(node) = self.nodes.get_mut(&from.rid) {
                    node.core.handle_unreachable(now, to, request);
                }
            }
            return;
        }
        let dropped = self.dropped.contains(&(from.rid, to, record.command()));
        if self.cut.contains(&(from.rid, to)) || dropped {
            self.lost += 1;
            return;
        }
        let mut bytes = BytesMut::new();
        record.encode(&mut bytes);
        let decoded = NodeRecord::decode_from(&mut bytes, &DecodeLimits::default());
        let record = match decoded {
            Ok(Some(decoded)) if bytes.is_empty() => decoded,
            other => panic!("the wire did not carry {record:?} intact: {other:?}"),
        };
        self.sent += 1;
        let flight = InFlight { from, to, record };
        self.in_flight
            .insert((now + self.latency, self.sent), flight);
    }

    /// Delivers records until none is in flight, firing every timer that falls
    /// due on the way. Timers later than the last delivery stay armed.
    pub fn run(&mut self) {
        self.pump();
        while let Some((&(at, _), _)) = self.in_flight.iter().next() {
            self.step_until(at);
        }
    }

    /// Moves time forward by `by`, delivering records and firing timers that
    /// fall due up to and including the new time.
    pub fn advance(&mut self, by: Duration) {
        let until = self.now + by;
        self.pump();
        loop {
            let next = self.next_moment();
            match next {
                Some(at) if at <= until => self.step_until(at),
                _ => break,
            }
        }
        self.now = until;
        self.pump();
        self.renew_leases();
    }

    /// The earliest timer deadline of any node, without firing it (for "not
    /// sooner" checks).
    pub fn next_timer(&self) -> Option<Instant> {
        self.nodes
            .iter()
            .filter(|(rid, _)| !self.paused.contains_key(rid))
            .filter_map(|(_, n)| n.core.poll_timeout())
            .min()
    }

    /// When the earliest timer is handled: its deadline plus the lateness
    /// the shard loop is set to have (never sooner than the deadline).
    fn next_firing(&self) -> Option<Instant> {
        self.next_timer().map(|d| d + self.timer_lateness)
    }

    fn next_moment(&self) -> Option<Instant> {
        let delivery = self.in_flight.keys().next().map(|&(at, _)| at);
        let store = self.store_steps.keys().next().map(|&(at, _)| at);
        [delivery, store, self.next_firing()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Makes every timer from now on fire `lateness` after its deadline, as
    /// a busy shard loop calls `handle_timeout` late (the core's time
    /// contract: late is allowed, early never is). Zero by default.
    pub fn set_timer_lateness(&mut self, lateness: Duration) {
        self.timer_lateness = lateness;
    }

    /// Sets the observer that sees every core event as it is drained.
    pub fn set_observer(&mut self, observer: Observer) {
        self.observer = ObserverSlot(Some(observer));
    }

    /// The nodes of the mesh, in RID order.
    pub fn rids(&self) -> Vec<NodeRid> {
        self.nodes.keys().copied().collect()
    }

    /// A node's process dies (kill -9) and starts again with the next
    /// NodeGeneration (§9): its core and everything in it are gone, the TCP
    /// connections of the dead process are reset (every record in flight to
    /// or from it is lost), its store operations and restores that were
    /// waiting are dropped, and it takes a new owner lease. Its rows stay in
    /// the store, naming the dead generation. Returns the new generation.
    pub fn restart(&mut self, rid: NodeRid) -> NodeGeneration {
        let old = self.node(rid);
        let generation = old.peer.generation.0 + 1;
        let (behavior, restore, config) = (
            old.behavior,
            old.restore.clone(),
            old.sessions_config.clone(),
        );
        let before = self.in_flight.len();
        self.in_flight
            .retain(|_, flight| flight.from.rid != rid && flight.to != rid);
        self.lost += (before - self.in_flight.len()) as u64;
        self.held_store.retain(|(node, _, _)| *node != rid);
        // Its store calls already made still reach the store; their answers
        // go nowhere (`end_store_call` checks the lifecycle). A lease round
        // not applied yet dies with the process's lease worker: a dead
        // lifecycle's lease is never extended after it died.
        self.store_calls.retain(|_, call| {
            let renewal = matches!(call.job, StoreJob::Node(NodeStoreOp::Renew(_)));
            !(call.node == rid && renewal && call.applied.is_none())
        });
        self.paused.remove(&rid);
        self.lapsed.remove(&rid);
        self.leases.remove(&rid);
        // The core's identity names the lease the new lifecycle will hold:
        // the store numbers a node's leases one after another, and a
        // lifecycle that never needed one took none (the runtime builds
        // its core from the lease it acquired; a guess from the
        // NodeGeneration made a target's CAS, made again after its answer
        // was lost, miss its own swap: the simulator's seed 205).
        let acquired = self.leases_acquired.get(&rid).copied().unwrap_or(0);
        let lease = OwnerLeaseGeneration(acquired + 1);
        self.add_node_leased(rid.0, generation, lease, config);
        self.set_behavior(rid, behavior);
        self.set_restore(rid, restore);
        NodeGeneration(generation)
    }

    /// The link between two nodes breaks and is re-established at once:
    /// every record in flight on it, in both directions, is lost, as a
    /// broken TCP connection loses what it had not delivered. Records sent
    /// afterwards travel on the new connection.
    pub fn break_link(&mut self, a: NodeRid, b: NodeRid) {
        let before = self.in_flight.len();
        self.in_flight.retain(|_, flight| {
            let (from, to) = (flight.from.rid, flight.to);
            !((from == a && to == b) || (from == b && to == a))
        });
        self.lost += (before - self.in_flight.len()) as u64;
        // The runtime sees the connection close before the redial.
        self.peer_down(a, b);
    }

    /// Destroys an Actor as a node's runtime does ([`Mesh::start_destroy`]),
    /// run until its outcome (virtual time passes while the store takes its
    /// time, as in [`Mesh::host_or_get`]).
    pub fn destroy(&mut self, node: NodeRid, actor: &ActorId) -> Result<(), Error> {
        let ticket = self.start_destroy(node, actor)?;
        match self.wait_answer(ticket) {
            Some(Answer::Destroy(outcome)) => outcome,
            _ => Err(Reason::StoreUnavailable.into()),
        }
    }

    /// Starts destroying an Actor as the runtime's `destroy` does
    /// (runtime/shard/actors.rs): refused at once when it is not hosted
    /// here (`StaleLocation`) or is moving (`RelocationSealed`); otherwise
    /// the core marks it ending (`begin_destroy`: no move, no second
    /// destroy) and the store's row of this incarnation is removed at its
    /// version, an effect ([`NodeStoreOp::Remove`]). When the store
    /// answers, the incarnation ends here (so the next create of the same
    /// ActorId gets greater generations, §1, §4), or, the store failing, it
    /// goes on as before (`destroy_failed`). Returns the ticket whose
    /// outcome [`Mesh::take_answers`] gives.
    pub fn start_destroy(&mut self, node: NodeRid, actor: &ActorId) -> Result<u64, Error> {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        let started = self.on_node(node, |mesh| {
            let now = mesh.now;
            let core = &mut mesh.node_mut(node).core;
            if !core.actor_owner().hosts(actor) {
                return Err(Error::new(Reason::StaleLocation));
            }
            // A move decides first where the Actor lives.
            if core.relocation().is_relocating(actor) {
                return Err(Error::new(Reason::RelocationSealed));
            }
            let actor_ref = core.actors(now).begin_destroy(actor)?;
            let version = RowVersion::from(&actor_ref.location);
            let remove = NodeStoreOp::Remove(actor.clone(), version);
            mesh.issue(node, StoreJob::Node(remove), Some(ticket));
            Ok(ticket)
        });
        self.pump();
        started
    }

    /// The store answered a destroy's removal (the runtime's
    /// `destroy_answered`).
    ///
    /// A removal that ended `StoreUnavailable` may have been applied all the
    /// same (issue 19 item 3: an unknown outcome is never guessed): the
    /// Actor stays ending and the core makes the removal again
    /// (src/core/actor/removal.rs; [`HostEvent::RemoveAgain`]) until the
    /// store answers — `Removed`, `Absent` (it was applied) and `Conflict`
    /// (the row is another's now) all end the incarnation here. Going on as
    /// before would leave an Actor served with no row, beside the new
    /// incarnation the next login makes elsewhere (seed 6). As in the
    /// runtime, the destroy's ticket waits meanwhile and has the final
    /// outcome: the removal's, or `StoreUnavailable` once the node is
    /// fenced with it still unknown ([`HostEvent::DestroyUnknown`]).
    fn destroy_answered(
        &mut self,
        node: NodeRid,
        actor: &ActorId,
        ticket: Option<u64>,
        outcome: Result<(), Error>,
    ) {
        let now = self.now;
        // A removal made again carries no ticket: the destroy's waits here.
        let waiting = ticket.or_else(|| self.node_mut(node).destroying.remove(actor));
        let outcome = match outcome {
            Ok(()) => {
                let forgotten = self.forget(node, actor);
                self.after_destroy_ended(node, actor);
                forgotten
            }
            Err(error) if error.reason() == Reason::StoreUnavailable => {
                self.node_mut(node).core.actors(now).removal_unknown(actor);
                if let Some(ticket) = waiting {
                    self.node_mut(node).destroying.insert(actor.clone(), ticket);
                }
                return;
            }
            Err(error) => {
                self.node_mut(node).core.actors(now).destroy_failed(actor);
                self.after_destroy_ended(node, actor);
                Err(error)
            }
        };
        if let Some(ticket) = waiting {
            self.answers.insert(ticket, Answer::Destroy(outcome));
        }
    }

    /// The Actor's destroy ended (the runtime's `after_destroy_ended`):
    /// the BindOrGets that waited for it start again, in order.
    fn after_destroy_ended(&mut self, node: NodeRid, actor: &ActorId) {
        let waiting = self.node_mut(node).after_destroy.remove(actor);
        for ticket in waiting.unwrap_or_default() {
            self.host_request(node, actor.clone(), ticket);
        }
    }

    /// The incarnation ends here: the core forgets it, its state and lane go.
    fn forget(&mut self, node: NodeRid, actor: &ActorId) -> Result<(), Error> {
        // An awaiting turn ends first (docs/actors.md "Async turns").
        self.end_suspended(node, actor, Reason::StaleLocation);
        self.actors(node).destroy(actor)?;
        self.node_mut(node).states.remove(actor);
        // The lane goes with the Actor; what it held still ends (§12).
        let dropped = self.node_mut(node).lanes.remove(actor).unwrap_or_default();
        for work in dropped {
            self.actors(node).refuse(work, Reason::StaleLocation);
        }
        Ok(())
    }

    /// Fires the timers due before `at`, then delivers the records due at `at`.
    fn step_until(&mut self, at: Instant) {
        let mut same_instant = 0u32;
        while let Some(firing) = self.next_firing().filter(|&f| f <= at) {
            // A core whose `handle_timeout` leaves a deadline due at the
            // same instant, firing after firing, would spin here for ever:
            // fail at once, naming it (a timer handler may arm a timer due
            // now, but not without end).
            same_instant = if firing <= self.now {
                same_instant + 1
            } else {
                0
            };
            assert!(
                same_instant < MAX_FIRINGS_AT_ONE_INSTANT,
                "a core's timers stay due at {:?} after {MAX_FIRINGS_AT_ONE_INSTANT} \
                 firings: its handle_timeout never moves its deadline",
                self.now
            );
            self.now = self.now.max(firing);
            let now = self.now;
            for (rid, node) in self.nodes.iter_mut() {
                if self.paused.contains_key(rid) {
                    continue;
                }
                if node.core.poll_timeout().is_some_and(|d| d <= now) {
                    node.core.handle_timeout(now);
                }
            }
            self.pump();
        }
        self.now = self.now.max(at);
        while let Some(entry) = self.store_steps.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let (call, step) = entry.remove();
            self.store_step(call, step);
            self.pump();
        }
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let flight = entry.remove();
            let now = self.now;
            // A stopped process's socket buffers what reaches it.
            if let Some(inputs) = self.paused.get_mut(&flight.to) {
                inputs.push_back(Deferred::Record(flight));
                continue;
            }
            match self.nodes.get_mut(&flight.to) {
                Some(node) => node.core.handle_record(now, flight.from, flight.record),
                None => self.lost += 1,
            }
            self.pump();
        }
    }

    /// Drains every node's outputs: records onto the links, events into the
    /// logs, and the Echo behavior's answers back into the cores.
    fn pump(&mut self) {
        let now = self.now;
        let mut progress = true;
        while progress {
            progress = false;
            let rids: Vec<NodeRid> = self.nodes.keys().copied().collect();
            for rid in rids {
                progress |= self.pump_node(rid, now);
            }
        }
    }

    /// Drains one node's outputs: the handling of its core's effects, on
    /// its shard thread.
    fn pump_node(&mut self, rid: NodeRid, now: Instant) -> bool {
        self.on_node(rid, |mesh| mesh.drain_node(rid, now))
    }

    fn drain_node(&mut self, rid: NodeRid, now: Instant) -> bool {
        let mut progress = false;
        let Some(node) = self.nodes.get_mut(&rid) else {
            return false;
        };
        // As the runtime's shard does: an empty core is not drained.
        if !node.core.has_output() {
            return false;
        }
        let from = node.peer;
        // As the runtime's shard does: every queued transmit at once.
        let mut transmits = std::collections::VecDeque::new();
        node.core.swap_transmits(&mut transmits);
        let mut relocation_events = Vec::new();
        let mut host_events = Vec::new();
        while let Some(event) = node.core.poll_event() {
            progress = true;
            if let Some(observe) = self.observer.0.as_mut() {
                observe(self.journal.len(), rid, now, &event, &node.core);
            }
            self.journal.push(Journal::Event {
                at: now,
                node: rid,
                event: event.clone(),
            });
            match event {
                CoreEvent::Session(event) => {
                    // A session callback turn: the simulated application's
                    // callback ends at once, or when the schedule says (a
                    // replacement callback's terminal is an action of its
                    // own); one over at its lifecycle deadline is gone.
                    match &event {
                        SessionEvent::Turn(turn) if self.hold_session_turns => {
                            node.open_turns.push((turn.session, turn.turn));
                        }
                        SessionEvent::Turn(turn) => {
                            node.core.sessions(now).turn_done(turn.session, turn.turn);
                        }
                        SessionEvent::TurnExpired { session, turn } => {
                            node.open_turns.retain(|open| *open != (*session, *turn));
                        }
                        _ => {}
                    }
                    node.session_events.push(event);
                }
                CoreEvent::Actor(event) => {
                    match node.behavior {
                        ActorBehavior::Echo => echo(&mut node.core.actors(now), &event),
                        ActorBehavior::Queue => node
                            .lanes
                            .entry(event.actor().clone())
                            .or_default()
                            .push_back(event.clone()),
                        ActorBehavior::Manual => {}
                    }
                    node.actor_events.push(event);
                }
                CoreEvent::Relocation(event) => {
                    node.relocation_events.push(event.clone());
                    relocation_events.push(event);
                }
                // Node code's request ended: the checker saw it in the
                // journal; nobody else waits for it.
                CoreEvent::NodeCallOutcome { .. } => {}
                CoreEvent::Host(event) => host_events.push(event),
                // The core's word on an awaiting turn or a parked move.
                CoreEvent::Await(AwaitEvent::TurnExpired { actor, .. }) => {
                    if let Some(event) = node.suspended.remove(&actor) {
                        node.core.actors(now).refuse(event, Reason::Deadline);
                    }
                }
            }
        }
        progress |= !transmits.is_empty();
        for transmit in transmits {
            self.transmit_answer(from, transmit);
        }
        for event in relocation_events {
            self.stand_in(rid, event);
        }
        for event in host_events {
            self.host_event(rid, event);
        }
        progress
    }

    /// Drains every node's outputs now, delivering nothing in flight.
    pub fn drain_outputs(&mut self) {
        self.pump();
    }

    /// Session callback turns run until [`Mesh::end_session_turn`] ends
    /// each (`true`), or end as soon as they start (`false`, the default).
    pub fn hold_session_turns(&mut self, hold: bool) {
        self.hold_session_turns = hold;
    }

    /// The session callback turns running at `node`, oldest first.
    pub fn open_session_turns(&self, node: NodeRid) -> &[(SessionRid, TurnId)] {
        &self.node(node).open_turns
    }

    /// The application's session callback `turn` ends.
    pub fn end_session_turn(&mut self, node: NodeRid, session: SessionRid, turn: TurnId) {
        let now = self.now;
        let sim = self.node_mut(node);
        sim.open_turns.retain(|open| *open != (session, turn));
        sim.core.sessions(now).turn_done(session, turn);
        self.pump();
    }

    /// Hosts a Ready Actor at a node (generation and authority 1 unless given).
    pub fn host(&mut self, node: NodeRid, actor: &str) -> ActorRef {
        self.host_generation(node, actor, 1)
    }

    /// Hosts a Ready Actor with a given ObjectGeneration.
    pub fn host_generation(&mut self, node: NodeRid, actor: &str, generation: u64) -> ActorRef {
        let id = actor_id(actor);
        let hosted = self.actors(node).host(
            id,
            ObjectGeneration(generation),
            AuthorityOwnerGeneration(1),
        );
        hosted.unwrap_or_else(|e| panic!("hosting {actor} failed: {e}"))
    }

    /// A client connects to `node`.
    pub fn connect(&mut self, node: NodeRid) -> SessionRid {
        self.sessions(node).open_session()
    }

    /// Binds and runs the mesh until the bind's terminal; returns it.
    pub fn bind(
        &mut self,
        node: NodeRid,
        session: SessionRid,
        actor: &ActorRef,
    ) -> Result<ActorRef, Error> {
        match self.sessions(node).bind(session, actor.clone())? {
            BindStart::Existing(bound) => Ok(bound),
            BindStart::Pending(ticket) => {
                self.run();
                self.bind_outcome(node, ticket)
                    .unwrap_or_else(|| panic!("bind {ticket:?} reached no terminal"))
            }
        }
    }

    /// The terminal of a bind, if it arrived.
    pub fn bind_outcome(&self, node: NodeRid, ticket: Ticket) -> Option<Result<ActorRef, Error>> {
        self.node(node).session_events.iter().find_map(|e| match e {
            SessionEvent::BindCompleted {
                ticket: t, outcome, ..
            } if *t == ticket => Some(outcome.clone()),
            _ => None,
        })
    }

    /// Sends a request relay with a fresh correlation; returns the correlation.
    pub fn request(
        &mut self,
        node: NodeRid,
        session: SessionRid,
        actor: &ActorRef,
        payload: &'static [u8],
    ) -> Result<Correlation, Error> {
        self.next_correlation += 1;
        let correlation = Correlation(self.next_correlation);
        self.sessions(node).relay(
            session,
            &actor.id,
            PacketKey(1),
            Bytes::from_static(payload),
            Some((correlation, Duration::from_secs(5))),
        )?;
        Ok(correlation)
    }

    /// Every frame written to a session's client, in order.
    pub fn frames(&self, node: NodeRid, session: SessionRid) -> Vec<ClientFrame> {
        self.node(node)
            .session_events
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Frame { session: s, frame } if *s == session => Some(frame.clone()),
                _ => None,
            })
            .collect()
    }

    /// The frames that answered `correlation` (a reply or an error).
    pub fn answers(
        &self,
        node: NodeRid,
        session: SessionRid,
        correlation: Correlation,
    ) -> Vec<ClientFrame> {
        self.frames(node, session)
            .into_iter()
            .filter(|f| match f {
                ClientFrame::Reply { correlation: c, .. }
                | ClientFrame::Error { correlation: c, .. } => *c == correlation,
                _ => false,
            })
            .collect()
    }

    /// Whether the node asked to close a session's connection.
    pub fn closed(&self, node: NodeRid, session: SessionRid) -> bool {
        self.node(node)
            .session_events
            .iter()
            .any(|e| matches!(e, SessionEvent::Close { session: s, .. } if *s == session))
    }

    /// The Actor handler deliveries at a node for an Actor, as payloads.
    pub fn delivered(&self, node: NodeRid, actor: &ActorId) -> Vec<Bytes> {
        self.node(node)
            .actor_events
            .iter()
            .filter_map(|e| match e {
                ActorEvent::Deliver {
                    actor: a, payload, ..
                } if a == actor => Some(payload.clone()),
                _ => None,
            })
            .collect()
    }

    /// The disconnect callbacks asked of a node for an Actor, with their tickets.
    pub fn disconnect_callbacks(&self, node: NodeRid, actor: &ActorId) -> Vec<ReplyTicket> {
        self.node(node)
            .actor_events
            .iter()
            .filter_map(|e| match e {
                ActorEvent::Disconnect {
                    actor: a, ticket, ..
                } if a == actor => Some(*ticket),
                _ => None,
            })
            .collect()
    }
}

/// A store operation's answer when it was not carried out.
fn refused(op: &StoreOp, error: Error) -> StoreDone {
    match op {
        StoreOp::TakeAuthority { .. } => StoreDone::Cas(Err(error)),
        StoreOp::AbortRelocation { .. } => StoreDone::Abort(Err(error)),
    }
}

/// A store operation's answer when it was not carried out.
fn refused_job(job: &StoreJob, error: Error) -> StoreDone {
    match job {
        StoreJob::Relocation(_, op) => refused(op, error),
        StoreJob::Node(
            NodeStoreOp::Create(_)
            | NodeStoreOp::Replace(_)
            | NodeStoreOp::Lookup(_)
            | NodeStoreOp::RemoveOrphan(_),
        ) => StoreDone::Host(Err(error)),
        StoreJob::Node(NodeStoreOp::Remove(..)) => StoreDone::Remove(Err(error)),
        StoreJob::Node(NodeStoreOp::Renew(_)) => StoreDone::Renew(Err(error), None),
    }
}

/// Where a simulated node's peers would connect to it (its membership
/// registration needs an address; nobody connects to it).
fn member_address(node: NodeRid) -> std::net::SocketAddr {
    let port = u16::try_from(node.0 % 60_000).unwrap_or(0) + 1_000;
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

/// The Echo behavior's answer to one Actor event.
fn echo(actors: &mut Actors<'_>, event: &ActorEvent) {
    match event {
        ActorEvent::Deliver {
            payload,
            reply: Some(ticket),
            ..
        } => actors.reply(*ticket, Ok(payload.clone())),
        ActorEvent::Disconnect { ticket, .. } => actors.disconnect_done(*ticket, Ok(())),
        ActorEvent::Timer { actor, timer, .. } => actors.timer_done(actor, *timer),
        ActorEvent::Call {
            payload,
            reply: Some(ticket),
            ..
        } => actors.reply(*ticket, Ok(payload.clone())),
        ActorEvent::Deliver { reply: None, .. }
        | ActorEvent::Call { reply: None, .. }
        | ActorEvent::CallOutcome { .. }
        | ActorEvent::Bound { .. } => {}
    }
}

/// An ActorId from a literal the test wrote.
pub fn actor_id(actor: &str) -> ActorId {
    ActorId::new(actor).unwrap_or_else(|e| panic!("bad actor id {actor:?}: {e}"))
}

/// The failure a test expects, for comparisons.
pub fn error(reason: Reason) -> Error {
    Error::new(reason)
}
