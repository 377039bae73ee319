//! The seeded simulator (issue 7): from one seed, a schedule of client,
//! Actor, node, link and store events over a [`Mesh`] of 3–5 real cores,
//! with every invariant of [`super::invariants`] checked after every step.
//! The same seed gives the same run, event for event: the PRNG (ChaCha8) is
//! the only source of choice, the cores are deterministic, and time is
//! virtual.
//!
//! The store's operations — the relocation's CAS and abort, and the nodes'
//! own: logins' creates and lost incarnations' replacements, destroys' row
//! removals, lease rounds — can take their time or hang (each ends at the
//! runtime's call timeout, applied or not; each answer is an input of its
//! own, and no node input may call the store: `no_shard_input_waits_on_the_store`),
//! and a node can be
//! stopped past its owner lease, coming back fenced to close its sessions
//! and start again as a new lifecycle (§5, X21). Two invariants are
//! checked at the settle point only: `no_actor_hosted_nowhere` and
//! `no_acknowledged_relay_lost` (docs/TESTING.md "The store on the virtual
//! clock").
//!
//! What it does not model, and why (docs/TESTING.md): Spots (they live in
//! the runtime, above the core; the core moves one Actor at a time), slow
//! single links (the mesh has one latency; a slower link would reorder
//! records within one TCP stream), and records from a dead NodeGeneration
//! (the transport ingress refuses those before the core, §2; a restart here
//! resets the dead process's connections).

use std::cell::RefCell;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::time::Duration;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::invariants::{
    call_payload, message_payload, push_payload, Caller, Checker, SentMessage, Tally, Violation,
};
use super::{ActorBehavior, Answer, Journal, Mesh, RestoreBehavior, StoreBehavior};
use crate::core::relocation::RelocationConfig;
use crate::core::session::{BindStart, SessionOwnerConfig, TurnId};
use crate::core::time::Instant;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorRef, CallId, Correlation, NodeRid, ObjectGeneration, PacketKey, SessionRid,
};
use crate::store::LocationStore;

/// The size of one simulated run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Steps of the schedule, before the run settles and is checked for
    /// leaks.
    pub steps: u64,
    /// Nodes; `None` lets the seed choose 3–5.
    pub nodes: Option<u64>,
    /// Simulated players (each with at most one connection at a time).
    pub players: usize,
    /// Distinct ActorIds the players bind.
    pub actors: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            steps: 2_000,
            nodes: None,
            players: 200,
            actors: 24,
        }
    }
}

/// One step's event, as the seed chose it. (Each variant's doc names what
/// its fields are: a player by index, nodes by RID.)
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A player connects to a node.
    Connect { player: usize, node: NodeRid },
    /// A player binds an Actor: with the store's row (BindOrGet, creating it
    /// if absent), or with an ActorRef it kept from earlier (maybe stale).
    Login {
        player: usize,
        actor: ActorId,
        kept: bool,
    },
    /// A player sends a request (`id` in its payload).
    Request {
        player: usize,
        actor: ActorId,
        id: u64,
    },
    /// A player sends a one-way message.
    OneWay {
        player: usize,
        actor: ActorId,
        id: u64,
    },
    /// A player's connection drops.
    Disconnect { player: usize },
    /// A player asks to leave one Actor while it stays connected (§7).
    Notify { player: usize, actor: ActorId },
    /// The application's replacement callback reaches its terminal (§6).
    CallbackDone {
        node: NodeRid,
        session: SessionRid,
        ok: bool,
    },
    /// A session callback turn (its replacement or disconnect callback)
    /// ends (§10).
    EndSessionTurn {
        node: NodeRid,
        session: SessionRid,
        turn: TurnId,
    },
    /// An Actor pushes to its bound session.
    Push { actor: ActorId, id: u64 },
    /// An Actor is destroyed at its owner.
    Destroy { actor: ActorId, node: NodeRid },
    /// An Actor (`from`), or node code on `node` when `from` is `None`,
    /// sends a message to an Actor (`request`: and waits for its outcome),
    /// over the route the store has now.
    Call {
        from: Option<ActorId>,
        node: NodeRid,
        to: ActorId,
        request: bool,
        id: u64,
    },
    /// An Actor sets a timer at its owner: one-shot, or repeating with
    /// `period` (docs/actors.md "Timers").
    SetTimer {
        actor: ActorId,
        node: NodeRid,
        after: Duration,
        period: Option<Duration>,
    },
    /// An Actor is relocated.
    Relocate {
        actor: ActorId,
        from: NodeRid,
        to: NodeRid,
    },
    /// An Actor's lane runs its queued work (its handlers).
    RunLane { node: NodeRid, actor: ActorId },
    /// The next message on an Actor's lane starts a turn that awaits
    /// (docs/actors.md "Async turns").
    SuspendTurn { node: NodeRid, actor: ActorId },
    /// An awaiting turn's future is ready: the turn answers and ends.
    ResumeTurn { node: NodeRid, actor: ActorId },
    /// Time passes.
    Advance(Duration),
    /// The link between two nodes breaks; what was in flight is lost.
    BreakLink(NodeRid, NodeRid),
    /// A node's process dies and starts again.
    Restart(NodeRid),
    /// A node's process is stopped (SIGSTOP) for `time` while the others
    /// go on; past its lease term it comes back fenced (§5, X21).
    Pause { node: NodeRid, time: Duration },
    /// The Location Store starts answering this way.
    Store(StoreBehavior),
    /// A held store operation is carried out (the store was slow).
    ReleaseStore,
    /// A node's restores start failing, or stop.
    RestoreFails { node: NodeRid, fail: bool },
}

/// What one run did and found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Steps run (fewer than asked when a violation stopped the run).
    pub steps: u64,
    /// The first violation, the step it was seen at, and the events that
    /// led there (the last journal entries and actions).
    pub violation: Option<Failure>,
    /// A hash of every action and journal entry, when asked for.
    pub trace_hash: Option<u64>,
    /// Messages the players sent that their nodes accepted.
    pub messages: u64,
    /// Relocations started.
    pub relocations: u64,
    /// What the run exercised.
    pub tally: Tally,
}

/// A violation and where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The step (`steps` + 1 for the end-of-run checks).
    pub step: u64,
    /// The broken invariant.
    pub violation: Violation,
    /// The last actions and journal entries before it, oldest first.
    pub trail: Vec<String>,
}

/// How much a run writes down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observe {
    /// Hash every action and journal entry (for the replay check).
    pub hash: bool,
    /// Print every action and journal entry to stdout as it happens.
    pub print: bool,
}

#[derive(Debug, Default)]
struct Player {
    /// The node, its generation, and the session there.
    session: Option<(NodeRid, u64, SessionRid)>,
    /// ActorRefs this player was given, kept (they go stale).
    kept: BTreeMap<ActorId, ActorRef>,
}

const TRAIL: usize = 40;

/// The owner lease term: a dead node's Actors can be created again elsewhere
/// this long after it died (issue 6 item 4).
const LEASE_TERM: Duration = Duration::from_secs(10);

/// One seeded run.
pub struct World {
    seed: u64,
    rng: ChaCha8Rng,
    mesh: Mesh,
    checker: Rc<RefCell<Checker>>,
    nodes: Vec<NodeRid>,
    actors: Vec<ActorId>,
    players: Vec<Player>,
    next_id: u64,
    next_correlation: u32,
    relocations: u64,
    observe: Observe,
    hasher: DefaultHasher,
    printed: usize,
    /// The last actions, each with the journal length when it was taken.
    recent: VecDeque<(usize, String)>,
    relocation: RelocationConfig,
    /// Restarted nodes waiting out their dead lifecycle's lease before they
    /// serve (the runtime does so at startup, docs/store.md), and until when.
    down: BTreeMap<NodeRid, Instant>,
    /// Stopped nodes (SIGSTOP), and when they go on.
    paused: BTreeMap<NodeRid, Instant>,
    /// Nodes whose lease lapsed, stopping as `zlink-node` does then (their
    /// sessions closed with `Shutdown`), and when the process exits to be
    /// started again as a new lifecycle (docs/store.md "A lapsed lease").
    stopping: BTreeMap<NodeRid, Instant>,
    /// Rows checked by `no_actor_hosted_nowhere`, acknowledged messages by
    /// `no_acknowledged_relay_lost`.
    rows_checked: u64,
    acked_checked: u64,
    /// Rows found naming an incarnation lost after relay-ready (L6).
    rows_lost: u64,
    /// Logins waiting on their BindOrGet's outcome, by ticket: the player
    /// and the session it logged in on.
    logins: BTreeMap<u64, (usize, (NodeRid, u64, SessionRid))>,
}

/// How long a node whose lease lapsed takes, from closing its sessions, to
/// exit (its last records go out meanwhile) before its next lifecycle
/// starts.
const STOP_TIME: Duration = Duration::from_millis(200);

impl World {
    /// A new world for `seed`.
    pub fn new(seed: u64, config: &SimConfig, observe: Observe) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let latency = Duration::from_micros(20 + rng.next_u64() % 480);
        let mut mesh = Mesh::with_lease_term(latency, LEASE_TERM);
        mesh.set_store_seed(rng.next_u64());
        let relocation = RelocationConfig::default();
        mesh.set_relocation_config(relocation.clone());
        let sessions = SessionOwnerConfig::default();
        let count = config.nodes.unwrap_or(3 + rng.next_u64() % 3);
        let nodes: Vec<NodeRid> = (1..=count)
            .map(|rid| mesh.add_node_with(rid, 1, sessions.clone()))
            .collect();
        for &node in &nodes {
            mesh.set_behavior(node, ActorBehavior::Queue);
        }
        // Session callbacks take their time: the lanes and the lifecycle
        // deadline are the core's (src/core/session/lanes.rs).
        mesh.hold_session_turns(true);
        // A busy shard loop handles its timers late, never early.
        mesh.set_timer_lateness(Duration::from_micros(rng.next_u64() % 3_000));
        let checker = Rc::new(RefCell::new(Checker::new(
            sessions.replacement_callback_timeout,
        )));
        let seen = Rc::clone(&checker);
        mesh.set_observer(Box::new(move |position, _, at, event, core| {
            seen.borrow_mut().observe(position, at, event, core);
        }));
        let actors = (0..config.actors)
            .map(|i| super::actor_id(&format!("actor-{i}")))
            .collect();
        let players = (0..config.players).map(|_| Player::default()).collect();
        Self {
            seed,
            rng,
            mesh,
            checker,
            nodes,
            actors,
            players,
            next_id: 0,
            next_correlation: 0,
            relocations: 0,
            observe,
            hasher: DefaultHasher::new(),
            printed: 0,
            recent: VecDeque::new(),
            relocation,
            down: BTreeMap::new(),
            paused: BTreeMap::new(),
            stopping: BTreeMap::new(),
            rows_checked: 0,
            acked_checked: 0,
            rows_lost: 0,
            logins: BTreeMap::new(),
        }
    }

    /// Runs the schedule, then settles the mesh and checks that nothing is
    /// left; stops at the first violation.
    pub fn run(mut self, steps: u64) -> Outcome {
        let mut failure = None;
        let mut done = 0;
        for step in 1..=steps {
            done = step;
            self.revive();
            let action = self.choose();
            let line = format!("step {step} @{:?}: {action:?}", self.mesh.now());
            self.note(line);
            self.apply(&action);
            // While a node is stopped the others go on in coarser steps,
            // so that a pause past the lease term fits in a run.
            let tick = if self.paused.is_empty() {
                Duration::from_micros(self.rng.next_u64() % 150)
            } else {
                Duration::from_micros(self.rng.next_u64() % 50_000)
            };
            self.mesh.advance(tick);
            if let Some(violation) = self.check() {
                failure = Some(self.failure(step, violation));
                break;
            }
        }
        if failure.is_none() {
            if let Some(violation) = self.settle() {
                failure = Some(self.failure(steps + 1, violation));
            }
        }
        Outcome {
            seed: self.seed,
            steps: done,
            violation: failure,
            trace_hash: self.observe.hash.then(|| self.hasher.finish()),
            messages: self.next_id,
            relocations: self.relocations,
            tally: self.tally(),
        }
    }

    /// The checker's tally, with what the store and the paused nodes did
    /// and what the settle-time invariants checked.
    fn tally(&self) -> Tally {
        let mut tally = self.checker.borrow().tally();
        let store = self.mesh.store_counts();
        tally.store_timeouts = store.timeouts;
        tally.store_applied_unanswered = store.applied_unanswered;
        tally.store_answered_late = store.answered_late;
        tally.resumed_within_lease = store.resumed_within_lease;
        tally.resumed_past_lease = store.resumed_past_lease;
        tally.peers_buried = store.peers_buried;
        tally.rows_checked = self.rows_checked;
        tally.acked_checked = self.acked_checked;
        tally.rows_lost_after_relay_ready = self.rows_lost;
        tally
    }

    /// The failure, with its trail: the last actions and journal entries,
    /// merged in the order they happened (formatted only now).
    fn failure(&self, step: u64, violation: Violation) -> Failure {
        let journal = self.mesh.journal();
        let first = journal.len().saturating_sub(TRAIL);
        let mut trail = Vec::new();
        let mut actions = self.recent.iter().peekable();
        for (position, entry) in journal.iter().enumerate().skip(first) {
            while let Some((_, line)) = actions.next_if(|(at, _)| *at <= position) {
                trail.push(line.clone());
            }
            trail.push(format!("  [{position}] {}", describe(entry)));
        }
        trail.extend(actions.map(|(_, line)| line.clone()));
        Failure {
            step,
            violation,
            trail,
        }
    }

    /// Keeps an action line for the trail, and hashes or prints it.
    fn note(&mut self, line: String) {
        self.observed(&line);
        if self.recent.len() == TRAIL {
            self.recent.pop_front();
        }
        self.recent.push_back((self.mesh.journal().len(), line));
    }

    fn observed(&mut self, line: &str) {
        if self.observe.hash {
            line.hash(&mut self.hasher);
        }
        if self.observe.print {
            println!("{line}");
        }
    }

    /// Hashes or prints the journal entries added since the last call.
    fn journal_lines(&mut self) {
        if !(self.observe.hash || self.observe.print) {
            return;
        }
        let journal = self.mesh.journal();
        let lines: Vec<String> = journal
            .iter()
            .enumerate()
            .skip(self.printed)
            .map(|(position, entry)| format!("  [{position}] {}", describe(entry)))
            .collect();
        self.printed = journal.len();
        for line in lines {
            self.observed(&line);
        }
    }

    /// The invariants checked after every step.
    fn check(&mut self) -> Option<Violation> {
        self.journal_lines();
        self.checker.borrow_mut().scan(self.mesh.journal());
        self.check_state();
        self.checker.borrow().violation().cloned()
    }

    /// The state invariants: one current binding per Actor among the
    /// incarnations that are not sealed for a move (§4, §8.1) and bounded
    /// relocation tables (§8.2).
    fn check_state(&mut self) {
        let mut checker = self.checker.borrow_mut();
        for actor in &self.actors {
            let holders: Vec<NodeRid> = self
                .nodes
                .iter()
                .copied()
                .filter(|&n| {
                    // A source that is moving the Actor away keeps its
                    // registration, sealed, until it learns the outcome.
                    // A lifecycle whose lease lapsed is dead to the mesh
                    // (§5, X21): it fenced, or fences the moment it goes on.
                    // An ending one (its destroy's row removal with the
                    // store) admits no bind and no relay: it is no longer
                    // served, and the row may be gone already.
                    let core = self.mesh.node(n).core();
                    core.actor_owner().current_binding(actor).is_some()
                        && !core.relocation().is_relocating(actor)
                        && !core.actor_owner().is_ending(actor)
                        && !self.mesh.is_lapsed(n)
                })
                .collect();
            if holders.len() > 1 {
                let detail = format!("{actor:?} has a current binding at {holders:?}");
                checker.fail("one_current_binding_per_actor", "§4, §6", detail);
            }
        }
        for &node in &self.nodes {
            let relocation = self.mesh.node(node).core().relocation();
            if relocation.proxy_count() > self.relocation.proxy_max
                || relocation.follow_count() > self.relocation.follow_max
            {
                let detail = format!(
                    "{node:?}: {} proxies, {} follow entries",
                    relocation.proxy_count(),
                    relocation.follow_count()
                );
                checker.fail("bounded_tables", "§8.2", detail);
            }
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        if items.is_empty() {
            return None;
        }
        let index = self.below(items.len() as u64) as usize;
        items.get(index).cloned()
    }

    fn node_generation(&self, node: NodeRid) -> u64 {
        self.mesh.node(node).peer().generation.0
    }

    /// The player's session, if it is still there (its node did not die).
    fn session_of(&mut self, player: usize) -> Option<(NodeRid, SessionRid)> {
        let (node, generation, session) = self.players.get(player)?.session?;
        if self.node_generation(node) != generation {
            if let Some(p) = self.players.get_mut(player) {
                p.session = None;
            }
            return None;
        }
        Some((node, session))
    }

    fn hosted(&self, actor: &ActorId) -> Option<NodeRid> {
        self.nodes.iter().copied().find(|&n| {
            let core = self.mesh.node(n).core();
            core.actor_owner().actor_ref(actor).is_some() && !core.relocation().is_relocating(actor)
        })
    }

    /// Draws the next action; when the drawn kind has nothing to act on, draws
    /// again, and after a few misses lets a little time pass.
    fn choose(&mut self) -> Action {
        for _ in 0..4 {
            if let Some(action) = self.choose_once() {
                return action;
            }
        }
        Action::Advance(Duration::from_micros(100))
    }

    fn choose_once(&mut self) -> Option<Action> {
        let roll = self.below(1_000);
        match roll {
            0..=79 => self.choose_connect(),
            80..=259 => self.choose_login(),
            260..=479 => self.choose_send(true),
            480..=499 => self.choose_end_turn(),
            500..=559 => self.choose_send(false),
            560..=599 => self.choose_disconnect(),
            600..=619 => self.choose_notify(),
            620..=659 => self.choose_callback(),
            660..=719 => self.choose_push(),
            720..=727 => self.choose_destroy(),
            728..=729 => self.choose_timer(),
            730..=734 => self.choose_call(),
            735..=804 => self.choose_relocate(),
            805..=889 => self.choose_lane(),
            890..=897 => self.choose_suspend(),
            898..=904 => self.choose_resume(),
            905..=964 => Some(self.choose_advance()),
            965..=972 => self.choose_break(),
            973..=975 => self.pick(&self.up()).map(Action::Restart),
            976..=977 => self.choose_pause(),
            978..=987 => Some(self.choose_store()),
            988..=993 => (self.mesh.held_store() > 0).then_some(Action::ReleaseStore),
            _ => self.choose_restore(),
        }
    }

    fn choose_connect(&mut self) -> Option<Action> {
        let player = self.below(self.players.len() as u64) as usize;
        if self.session_of(player).is_some() {
            return None;
        }
        let node = self.pick(&self.up())?;
        Some(Action::Connect { player, node })
    }

    fn connected_player(&mut self) -> Option<(usize, NodeRid, SessionRid)> {
        let connected: Vec<(usize, NodeRid, SessionRid)> = (0..self.players.len())
            .filter_map(|p| self.session_of(p).map(|(node, session)| (p, node, session)))
            .collect();
        self.pick(&connected)
    }

    /// A connected player with at least one binding, and one of its Actors.
    fn bound_player(&mut self) -> Option<(usize, ActorId)> {
        let mut bound = Vec::new();
        for player in 0..self.players.len() {
            if let Some((node, session)) = self.session_of(player) {
                let owner = self.mesh.node(node).core().session_owner();
                bound.extend(owner.bound(session).into_iter().map(|r| (player, r.id)));
            }
        }
        self.pick(&bound)
    }

    fn choose_login(&mut self) -> Option<Action> {
        let (player, _, _) = self.connected_player()?;
        let actor = self.pick(&self.actors.clone())?;
        let kept = self.players[player].kept.contains_key(&actor) && self.below(4) == 0;
        Some(Action::Login {
            player,
            actor,
            kept,
        })
    }

    fn choose_send(&mut self, request: bool) -> Option<Action> {
        let (player, actor) = self.bound_player()?;
        self.next_id += 1;
        let id = self.next_id;
        Some(if request {
            Action::Request { player, actor, id }
        } else {
            Action::OneWay { player, actor, id }
        })
    }

    fn choose_disconnect(&mut self) -> Option<Action> {
        let (player, _, _) = self.connected_player()?;
        Some(Action::Disconnect { player })
    }

    fn choose_notify(&mut self) -> Option<Action> {
        let (player, actor) = self.bound_player()?;
        Some(Action::Notify { player, actor })
    }

    fn choose_callback(&mut self) -> Option<Action> {
        let pending = self.checker.borrow().pending_callbacks().to_vec();
        let callback = self.pick(&pending)?;
        let node = callback.session.owner;
        if self.node_generation(node) != callback.session.lifecycle.0 {
            self.checker.borrow_mut().session_gone(callback.session);
            return None;
        }
        let ok = self.below(5) != 0;
        Some(Action::CallbackDone {
            node,
            session: callback.session.session,
            ok,
        })
    }

    fn choose_end_turn(&mut self) -> Option<Action> {
        let node = self.pick(&self.up())?;
        let open = self.mesh.open_session_turns(node).to_vec();
        let (session, turn) = self.pick(&open)?;
        Some(Action::EndSessionTurn {
            node,
            session,
            turn,
        })
    }

    fn choose_push(&mut self) -> Option<Action> {
        let actor = self.pick(&self.actors.clone())?;
        self.hosted(&actor)?;
        self.next_id += 1;
        Some(Action::Push {
            actor,
            id: self.next_id,
        })
    }

    fn choose_destroy(&mut self) -> Option<Action> {
        let actor = self.pick(&self.actors.clone())?;
        let node = self.hosted(&actor)?;
        let arriving = self
            .nodes
            .iter()
            .any(|&n| self.mesh.node(n).core().relocation().is_arriving(&actor));
        (!arriving).then_some(Action::Destroy { actor, node })
    }

    fn choose_call(&mut self) -> Option<Action> {
        // One call in four comes from node code outside any Actor (A4).
        let (from, node) = if self.below(4) == 0 {
            (None, self.pick(&self.nodes.clone())?)
        } else {
            let from = self.pick(&self.actors.clone())?;
            let node = self.hosted(&from)?;
            (Some(from), node)
        };
        let to = self.pick(&self.actors.clone())?;
        self.next_id += 1;
        Some(Action::Call {
            from,
            node,
            to,
            request: self.below(3) != 0,
            id: self.next_id,
        })
    }

    fn choose_timer(&mut self) -> Option<Action> {
        let actor = self.pick(&self.actors.clone())?;
        let node = self.hosted(&actor)?;
        let after = Duration::from_micros(self.below(50_000));
        let period = match self.below(3) {
            0 => None,
            _ => Some(Duration::from_micros(1_000 + self.below(30_000))),
        };
        Some(Action::SetTimer {
            actor,
            node,
            after,
            period,
        })
    }

    fn choose_relocate(&mut self) -> Option<Action> {
        let actor = self.pick(&self.actors.clone())?;
        let from = self.hosted(&actor)?;
        let others: Vec<NodeRid> = self.up().into_iter().filter(|&n| n != from).collect();
        let to = self.pick(&others)?;
        Some(Action::Relocate { actor, from, to })
    }

    fn choose_lane(&mut self) -> Option<Action> {
        let node = self.pick(&self.nodes.clone())?;
        let busy = self.mesh.busy_lanes(node);
        let actor = self.pick(&busy)?;
        Some(Action::RunLane { node, actor })
    }

    fn choose_suspend(&mut self) -> Option<Action> {
        let node = self.pick(&self.nodes.clone())?;
        let busy = self.mesh.busy_lanes(node);
        let actor = self.pick(&busy)?;
        Some(Action::SuspendTurn { node, actor })
    }

    fn choose_resume(&mut self) -> Option<Action> {
        let node = self.pick(&self.nodes.clone())?;
        let awaiting = self.mesh.suspended(node);
        let actor = self.pick(&awaiting)?;
        Some(Action::ResumeTurn { node, actor })
    }

    fn choose_advance(&mut self) -> Action {
        let micros = match self.below(100) {
            0..=59 => self.below(500),
            60..=89 => 500 + self.below(20_000),
            90..=97 => 20_000 + self.below(400_000),
            _ => 400_000 + self.below(4_000_000),
        };
        Action::Advance(Duration::from_micros(micros))
    }

    fn choose_break(&mut self) -> Option<Action> {
        let a = self.pick(&self.nodes.clone())?;
        let others: Vec<NodeRid> = self.nodes.iter().copied().filter(|&n| n != a).collect();
        let b = self.pick(&others)?;
        Some(Action::BreakLink(a, b))
    }

    fn choose_store(&mut self) -> Action {
        Action::Store(match self.below(15) {
            0..=5 => StoreBehavior::Immediate,
            6..=8 => StoreBehavior::Hold,
            9 => StoreBehavior::Down,
            10 => StoreBehavior::LoseReply,
            // Up to 700 ms each way: some answers outlast the call timeout.
            11..=12 => {
                let bound = [1_000, 20_000, 150_000, 400_000, 700_000];
                let micros = self.pick(&bound).unwrap_or(1_000);
                StoreBehavior::Latency(Duration::from_micros(micros))
            }
            _ => StoreBehavior::Hang,
        })
    }

    /// One node at a time is stopped: half the time within its lease term,
    /// half past it (the others' time jumps may carry a short pause past it
    /// too).
    fn choose_pause(&mut self) -> Option<Action> {
        if !self.paused.is_empty() || !self.stopping.is_empty() {
            return None;
        }
        let node = self.pick(&self.up())?;
        let time = if self.below(2) == 0 {
            Duration::from_micros(200_000 + self.below(7_500_000))
        } else {
            LEASE_TERM + Duration::from_micros(300_000 + self.below(5_000_000))
        };
        Some(Action::Pause { node, time })
    }

    fn choose_restore(&mut self) -> Option<Action> {
        let node = self.pick(&self.nodes.clone())?;
        let fail = self.below(3) == 0;
        Some(Action::RestoreFails { node, fail })
    }

    /// Whether the action needs a node whose process is stopped: it does
    /// not happen (no input reaches a stopped process; a client of it
    /// waits).
    fn blocked(&mut self, action: &Action) -> bool {
        let paused = |world: &Self, node: &NodeRid| world.paused.contains_key(node);
        let nodes: Vec<NodeRid> = match action {
            Action::Connect { node, .. }
            | Action::CallbackDone { node, .. }
            | Action::EndSessionTurn { node, .. }
            | Action::Destroy { node, .. }
            | Action::SetTimer { node, .. }
            | Action::RunLane { node, .. }
            | Action::SuspendTurn { node, .. }
            | Action::ResumeTurn { node, .. }
            | Action::Call { node, .. } => vec![*node],
            Action::Login { player, .. }
            | Action::Request { player, .. }
            | Action::OneWay { player, .. }
            | Action::Disconnect { player }
            | Action::Notify { player, .. } => self
                .session_of(*player)
                .map(|(n, _)| n)
                .into_iter()
                .collect(),
            Action::Push { actor, .. } => self.hosted(actor).into_iter().collect(),
            Action::Relocate { from, .. } => vec![*from],
            Action::Advance(_)
            | Action::BreakLink(..)
            | Action::Restart(_)
            | Action::Pause { .. }
            | Action::Store(_)
            | Action::ReleaseStore
            | Action::RestoreFails { .. } => Vec::new(),
        };
        let mut nodes = nodes;
        if let Action::Call {
            from: Some(from), ..
        } = action
        {
            nodes.extend(self.hosted(from));
        }
        nodes.iter().any(|n| paused(self, n))
    }

    fn apply(&mut self, action: &Action) {
        if self.blocked(action) {
            return;
        }
        match action {
            Action::Connect { player, node } => {
                let session = self.mesh.connect(*node);
                let generation = self.node_generation(*node);
                if let Some(p) = self.players.get_mut(*player) {
                    p.session = Some((*node, generation, session));
                }
            }
            Action::Login {
                player,
                actor,
                kept,
            } => self.login(*player, actor, *kept),
            Action::Request { player, actor, id } => self.send(*player, actor, *id, true),
            Action::OneWay { player, actor, id } => self.send(*player, actor, *id, false),
            Action::Disconnect { player } => {
                if let Some((node, session)) = self.session_of(*player) {
                    let session_ref = self
                        .mesh
                        .node(node)
                        .core()
                        .session_owner()
                        .session_ref(session);
                    self.mesh.sessions(node).connection_lost(session);
                    self.checker.borrow_mut().session_gone(session_ref);
                    self.players[*player].session = None;
                }
            }
            Action::Notify { player, actor } => {
                if let Some((node, session)) = self.session_of(*player) {
                    let _ = self.mesh.sessions(node).notify_disconnected(session, actor);
                }
            }
            Action::EndSessionTurn {
                node,
                session,
                turn,
            } => {
                let session_ref = self
                    .mesh
                    .node(*node)
                    .core()
                    .session_owner()
                    .session_ref(*session);
                self.checker
                    .borrow_mut()
                    .session_turn_ended(session_ref, *turn);
                self.mesh.end_session_turn(*node, *session, *turn);
            }
            Action::CallbackDone { node, session, ok } => {
                let pending = self.checker.borrow().pending_callbacks().to_vec();
                let Some(callback) = pending
                    .iter()
                    .find(|p| p.session.owner == *node && p.session.session == *session)
                else {
                    return;
                };
                let now = self.mesh.now();
                self.checker
                    .borrow_mut()
                    .callback_done(callback.session, now);
                let ticket = callback.callback;
                self.mesh
                    .sessions(*node)
                    .replacement_callback_done(*session, ticket, *ok);
            }
            Action::Push { actor, id } => {
                let Some(node) = self.hosted(actor) else {
                    return;
                };
                let binding = self
                    .mesh
                    .node(node)
                    .core()
                    .actor_owner()
                    .current_binding(actor);
                let pushed = self
                    .mesh
                    .actors(node)
                    .push(actor, PacketKey(2), push_payload(*id));
                if let (Ok(()), Some(binding)) = (pushed, binding) {
                    self.checker
                        .borrow_mut()
                        .pushed(*id, actor.clone(), binding);
                }
            }
            Action::Destroy { actor, node } => {
                // Its outcome comes later; nobody waits on it here.
                let _ = self.mesh.start_destroy(*node, actor);
            }
            Action::Call {
                from,
                node,
                to,
                request,
                id,
            } => {
                let caller = match from {
                    // The Actor calls from where it is hosted now.
                    Some(from) => {
                        let Some(node) = self.hosted(from) else {
                            return;
                        };
                        let core = self.mesh.node(node).core();
                        let Some(me) = core.actor_owner().actor_ref(from) else {
                            return;
                        };
                        Caller::Actor(me)
                    }
                    None => Caller::Node(*node, self.node_generation(*node)),
                };
                let Ok(Some(row)) = self.mesh.store().lookup(to) else {
                    return;
                };
                let route = row.actor_ref();
                let at = match &caller {
                    Caller::Actor(me) => me.location.owner,
                    Caller::Node(node, _) => *node,
                };
                let mut actors = self.mesh.actors(at);
                let payload = call_payload(*id);
                let key = PacketKey(3);
                if !*request {
                    actors.send(from.as_ref(), &route, key, payload);
                    return;
                }
                let deadline = Duration::from_secs(2);
                // An Actor's request is numbered by its ledger; node code's
                // by the schedule.
                let made = match from {
                    Some(from) => actors.open_call(from, deadline).and_then(|call| {
                        actors
                            .request(from, &route, key, payload, call, deadline)
                            .map(|()| call)
                    }),
                    None => {
                        actors.node_request(None, &route, key, payload, CallId(*id), deadline);
                        Ok(CallId(*id))
                    }
                };
                if let Ok(call) = made {
                    self.checker.borrow_mut().call_made(*id, caller, call);
                }
            }
            Action::SetTimer {
                actor,
                node,
                after,
                period,
            } => {
                // Refused for an Actor not hosted there any more, or one
                // with its most timers: the schedule goes on.
                let _ = self.mesh.actors(*node).set_timer(actor, *after, *period);
            }
            Action::Relocate { actor, from, to } => {
                if self.mesh.relocate(*from, actor, *to) {
                    self.relocations += 1;
                }
            }
            Action::SuspendTurn { node, actor } => {
                let generation = self
                    .mesh
                    .node(*node)
                    .core()
                    .actor_owner()
                    .actor_ref(actor)
                    .map(|r| r.generation);
                if let Some(work) = self.mesh.suspend_turn(*node, actor) {
                    // The handler ran up to its await: processed once.
                    self.checker.borrow_mut().ran(&work, generation);
                }
            }
            Action::ResumeTurn { node, actor } => self.mesh.resume_turn(*node, actor),
            Action::RunLane { node, actor } => {
                // A lane holds work for the incarnation its node hosts (a
                // destroy or a restart empties it).
                let generation = self
                    .mesh
                    .node(*node)
                    .core()
                    .actor_owner()
                    .actor_ref(actor)
                    .map(|r| r.generation);
                let ran = self.mesh.run_lane(*node, actor);
                let mut checker = self.checker.borrow_mut();
                for work in &ran {
                    checker.ran(work, generation);
                }
            }
            Action::Advance(by) => self.mesh.advance(*by),
            Action::BreakLink(a, b) => self.mesh.break_link(*a, *b),
            Action::Restart(node) => self.restart(*node),
            Action::Pause { node, time } => {
                self.mesh.pause(*node);
                self.paused.insert(*node, self.mesh.now() + *time);
            }
            Action::Store(behavior) => {
                self.mesh.set_store(*behavior);
                if *behavior != StoreBehavior::Hold {
                    while self.mesh.held_store() > 0 {
                        self.mesh.release_store();
                    }
                }
            }
            Action::ReleaseStore => {
                if self.mesh.held_store() > 0 {
                    self.mesh.release_store();
                }
            }
            Action::RestoreFails { node, fail } => {
                let behavior = if *fail {
                    RestoreBehavior::Fail(Error::new(Reason::NoActorFactory))
                } else {
                    RestoreBehavior::Succeed
                };
                self.mesh.set_restore(*node, behavior);
            }
        }
    }

    fn login(&mut self, player: usize, actor: &ActorId, kept: bool) {
        let Some((node, session)) = self.session_of(player) else {
            return;
        };
        match self.players[player].kept.get(actor) {
            Some(kept_ref) if kept => {
                let kept_ref = kept_ref.clone();
                self.bind(player, node, session, kept_ref);
            }
            _ => {
                // §1 step 2 BindOrGet, run on the player's node as the
                // runtime runs it ([`Mesh::bind_or_get`]): the login's
                // session turn waits for its outcome, which comes later.
                let ticket = self.mesh.bind_or_get(node, actor);
                let generation = self.node_generation(node);
                let login = (player, (node, generation, session));
                self.logins.insert(ticket, login);
            }
        }
    }

    /// The player binds `actor_ref` on its session.
    fn bind(&mut self, player: usize, node: NodeRid, session: SessionRid, actor_ref: ActorRef) {
        self.players[player]
            .kept
            .insert(actor_ref.id.clone(), actor_ref.clone());
        match self.mesh.sessions(node).bind(session, actor_ref) {
            Ok(BindStart::Pending(_) | BindStart::Existing(_)) | Err(_) => {}
        }
    }

    /// The BindOrGets answered since the last call: each login whose
    /// session is still there (its player on it, its node's lifecycle the
    /// same) binds what it got; one that failed ends there.
    fn logged_in(&mut self) {
        for (ticket, answer) in self.mesh.take_answers() {
            let Some((player, at)) = self.logins.remove(&ticket) else {
                continue;
            };
            let Answer::Host(node, Ok(actor_ref)) = answer else {
                continue;
            };
            if self.players[player].session != Some(at) || self.paused.contains_key(&node) {
                continue;
            }
            self.bind(player, node, at.2, actor_ref);
        }
    }

    fn send(&mut self, player: usize, actor: &ActorId, id: u64, request: bool) {
        let Some((node, session)) = self.session_of(player) else {
            return;
        };
        let owner = self.mesh.node(node).core().session_owner();
        let (Some(binding), Some(bound)) = (
            owner.binding_identity(session, actor),
            owner.find(session, actor),
        ) else {
            return;
        };
        let session_ref = owner.session_ref(session);
        let correlation = request.then(|| {
            self.next_correlation += 1;
            Correlation(self.next_correlation)
        });
        let sent = SentMessage {
            session: session_ref,
            actor: actor.clone(),
            binding,
            object: bound.generation,
            correlation,
        };
        let budget = Duration::from_secs(5);
        let relayed = self.mesh.sessions(node).relay(
            session,
            actor,
            PacketKey(1),
            message_payload(id),
            correlation.map(|c| (c, budget)),
        );
        if relayed.is_ok() {
            self.checker.borrow_mut().sent(id, sent);
        }
    }

    /// A node's process dies and starts again: until its dead lifecycle's
    /// lease lapses it has no links (peers see it unreachable) and takes no
    /// clients; then it serves with its new NodeGeneration.
    fn restart(&mut self, node: NodeRid) {
        let gone: Vec<_> = {
            let owner = self.mesh.node(node).core().session_owner();
            self.players
                .iter()
                .filter_map(|p| p.session)
                .filter(|&(n, _, _)| n == node)
                .map(|(_, _, s)| owner.session_ref(s))
                .collect()
        };
        let mut checker = self.checker.borrow_mut();
        // What the dead lifecycle sent is scanned before its RelocationIds
        // are forgotten: a node going on after a pause sends in the same
        // step, before any check (seed 70278: its 63 was scanned after the
        // restart and counted against the next lifecycle's relocation of
        // the same number).
        checker.scan(self.mesh.journal());
        for session in gone {
            checker.session_gone(session);
        }
        checker.node_restarted(node);
        drop(checker);
        let lapses = match self.mesh.store().lease(node) {
            Ok(Some(lease)) => lease.expires_at,
            _ => self.mesh.now(),
        };
        // Killed while stopped, or exiting after its lease lapsed.
        self.paused.remove(&node);
        self.stopping.remove(&node);
        self.mesh.restart(node);
        for &peer in &self.nodes {
            if peer != node {
                self.mesh.set_linked(node, peer, false);
            }
        }
        self.down.insert(node, lapses);
    }

    /// Lets stopped nodes go on when their time comes. One whose lease
    /// lapsed meanwhile (or whose renewal found it lapsed) does what
    /// `zlink-node` does then (docs/store.md "A lapsed lease"): it has
    /// fenced its Actors (X21), closes its sessions with a reason
    /// (`Shutdown`, as a clean stop's drain does), and exits so that a new
    /// lifecycle starts — here, a restart once [`STOP_TIME`] has passed.
    fn resume(&mut self) {
        self.logged_in();
        let now = self.mesh.now();
        let due: Vec<NodeRid> = self
            .paused
            .iter()
            .filter(|(_, &until)| until <= now)
            .map(|(&node, _)| node)
            .collect();
        for node in due {
            self.paused.remove(&node);
            self.note(format!("resume {node:?} @{now:?}"));
            self.mesh.resume(node);
        }
        for node in self.mesh.lapsed() {
            if self.paused.contains_key(&node) || self.stopping.contains_key(&node) {
                continue;
            }
            self.note(format!("stop {node:?} (lease lapsed) @{now:?}"));
            self.mesh.sessions(node).close_all();
            self.mesh.drain_outputs();
            self.stopping.insert(node, now + STOP_TIME);
        }
        let exiting: Vec<NodeRid> = self
            .stopping
            .iter()
            .filter(|(_, &at)| at <= now)
            .map(|(&node, _)| node)
            .collect();
        for node in exiting {
            self.note(format!(
                "exit {node:?} (lease lapsed): a new lifecycle starts"
            ));
            self.restart(node);
        }
    }

    /// Brings back the restarted nodes whose old lease has lapsed.
    fn revive(&mut self) {
        self.resume();
        let now = self.mesh.now();
        let back: Vec<NodeRid> = self
            .down
            .iter()
            .filter(|(_, &until)| until <= now)
            .map(|(&node, _)| node)
            .collect();
        for node in back {
            self.down.remove(&node);
            for &peer in &self.nodes {
                if peer != node {
                    self.mesh.set_linked(node, peer, true);
                }
            }
        }
    }

    /// The nodes serving now.
    fn up(&self) -> Vec<NodeRid> {
        let nodes = self.nodes.iter().copied();
        nodes
            .filter(|n| {
                !self.down.contains_key(n)
                    && !self.paused.contains_key(n)
                    && !self.stopping.contains_key(n)
            })
            .collect()
    }

    /// Ends the run: faults stop, every lane and callback is answered until
    /// every request's deadline has passed (§12: each ended once), then every
    /// client leaves and every Actor is destroyed, and no table may hold
    /// anything once the follow lifetime has passed.
    fn settle(&mut self) -> Option<Violation> {
        let line = format!("settle @{:?}", self.mesh.now());
        self.note(line);
        self.apply(&Action::Store(StoreBehavior::Immediate));
        for node in self.nodes.clone() {
            self.mesh.set_restore(node, RestoreBehavior::Succeed);
        }
        // Stopped processes go on now.
        let now = self.mesh.now();
        for until in self.paused.values_mut() {
            *until = now;
        }
        self.drain(Duration::from_secs(12));
        if let Some(violation) = self.check() {
            return Some(violation);
        }
        self.checker.borrow_mut().check_every_request_ended();
        self.check_every_call_ended();
        self.check_rows_hosted();
        self.check_acknowledged();
        if let Some(violation) = self.checker.borrow().violation().cloned() {
            return Some(violation);
        }
        for player in 0..self.players.len() {
            self.apply(&Action::Disconnect { player });
        }
        self.drain(Duration::from_secs(12));
        for actor in self.actors.clone() {
            if let Some(node) = self.hosted(&actor) {
                self.apply(&Action::Destroy { actor, node });
            }
        }
        let lifetime = self.relocation.follow_lifetime + Duration::from_secs(5);
        self.drain(lifetime);
        if let Some(violation) = self.check() {
            return Some(violation);
        }
        self.check_empty();
        self.checker.borrow().violation().cloned()
    }

    /// Lets `time` pass in half-second steps, running every lane and
    /// answering every replacement callback on the way.
    fn drain(&mut self, time: Duration) {
        let step = Duration::from_millis(500);
        let mut passed = Duration::ZERO;
        while passed < time {
            self.revive();
            for node in self.nodes.clone() {
                for actor in self.mesh.suspended(node) {
                    self.apply(&Action::ResumeTurn { node, actor });
                }
                for actor in self.mesh.busy_lanes(node) {
                    self.apply(&Action::RunLane { node, actor });
                }
            }
            for node in self.up() {
                for (session, turn) in self.mesh.open_session_turns(node).to_vec() {
                    self.apply(&Action::EndSessionTurn {
                        node,
                        session,
                        turn,
                    });
                }
            }
            let pending = self.checker.borrow().pending_callbacks().to_vec();
            for callback in pending {
                let node = callback.session.owner;
                if self.node_generation(node) == callback.session.lifecycle.0 {
                    let session = callback.session.session;
                    self.apply(&Action::CallbackDone {
                        node,
                        session,
                        ok: true,
                    });
                } else {
                    self.checker.borrow_mut().session_gone(callback.session);
                }
            }
            self.mesh.advance(step);
            passed += step;
        }
    }

    /// Every request between Actors, and from node code, whose caller is
    /// still alive ended once its deadline passed (docs/actors.md: each
    /// request ends exactly once). A caller that is gone — its incarnation
    /// destroyed, its node's lifecycle ended — has nobody to tell.
    fn check_every_call_ended(&mut self) {
        let alive = |caller: &Caller| match caller {
            Caller::Actor(me) => self.hosted(&me.id).is_some_and(|node| {
                let core = self.mesh.node(node).core();
                core.actor_owner()
                    .actor_ref(&me.id)
                    .is_some_and(|now| now.generation == me.generation)
            }),
            Caller::Node(node, generation) => self.node_generation(*node) == *generation,
        };
        let open = self.checker.borrow().open_calls(alive);
        if let Some(id) = open {
            let detail = format!("request {id} of a live caller never ended");
            self.checker
                .borrow_mut()
                .fail("call_ends_once", "docs/actors.md, §12", detail);
        }
    }

    /// `no_actor_hosted_nowhere` (§5, §8.1; issue 19 item 3), checked at
    /// the settle point only: the store answers at once and its held or
    /// hung operations were released, links are whole, every stopped node
    /// went on and every restarted one serves, and 12 s of virtual time
    /// passed (more than the lease term, the seal and prepare timeouts and
    /// every request deadline), with every lane, turn and callback run. Then
    /// every live row of the store that names a node's current lifecycle is
    /// hosted there — the row's incarnation and authority — or is in motion
    /// (a move's source or target still has it); anything else sends a
    /// login to an owner that serves nothing (the wedge issue 19 measured).
    /// Not checked mid-run: a row legitimately runs ahead of its host during
    /// a move (the CAS before the commit reaches the source), and a store
    /// operation in flight or timed out leaves the row unknown to its node
    /// for a while (§8.1: asked again, never guessed).
    fn check_rows_hosted(&mut self) {
        for actor in self.actors.clone() {
            let Ok(Some(row)) = self.mesh.store().lookup(&actor) else {
                continue;
            };
            let owner = row.location.owner;
            if !self.nodes.contains(&owner)
                || self.node_generation(owner) != row.location.node_generation.0
            {
                continue;
            }
            self.rows_checked += 1;
            let core = self.mesh.node(owner).core();
            let hosted = core.actor_owner().actor_ref(&actor).is_some_and(|here| {
                here.generation == row.object && here.location.authority == row.location.authority
            });
            let moving = core.relocation().is_relocating(&actor)
                || self
                    .nodes
                    .iter()
                    .any(|&n| self.mesh.node(n).core().relocation().is_arriving(&actor));
            // L6: the row's node gave this incarnation up at relay-ready
            // and the target's lifecycle died (or its lease lapsed) before
            // its CAS swapped the row: a loss the move recorded; the next
            // login at the row's node replaces it (`own_row`, Lost).
            let lost = self.checker.borrow().relayed_away(
                &actor,
                row.object,
                owner,
                row.location.authority,
            );
            if lost && !hosted && !moving {
                self.rows_lost += 1;
                continue;
            }
            if !hosted && !moving {
                let here = core.actor_owner().actor_ref(&actor);
                let detail = format!(
                    "the row of {actor:?} names {owner:?} ({:?}, {:?}, {:?}), which hosts {here:?}",
                    row.location.node_generation, row.object, row.location.authority
                );
                self.checker
                    .borrow_mut()
                    .fail("no_actor_hosted_nowhere", "§5, §8.1", detail);
                return;
            }
        }
    }

    /// `no_acknowledged_relay_lost` (§12, §10, L2), at the same settle
    /// point as [`Self::check_rows_hosted`], every lane run.
    fn check_acknowledged(&mut self) {
        let hosted: BTreeMap<ActorId, ObjectGeneration> = self
            .actors
            .iter()
            .filter_map(|actor| {
                let node = self.hosted(actor)?;
                let core = self.mesh.node(node).core();
                Some((
                    actor.clone(),
                    core.actor_owner().actor_ref(actor)?.generation,
                ))
            })
            .collect();
        let checked = self
            .checker
            .borrow_mut()
            .check_acknowledged(|actor, generation| hosted.get(actor) == Some(&generation));
        self.acked_checked += checked;
    }

    /// No state leaks: every table of every core is empty once every session
    /// and Actor is gone.
    fn check_empty(&mut self) {
        for &node in &self.nodes {
            let core = self.mesh.node(node).core();
            let sessions = core.session_owner();
            let actors = core.actor_owner();
            let left = [
                ("sessions", sessions.session_count()),
                ("pending requests", sessions.pending_count()),
                ("session lanes", sessions.lane_count()),
                ("actors", actors.actor_count()),
                ("owed replies", actors.owed_count()),
                ("armed timers", core.armed_timers()),
                (
                    "relocation state",
                    usize::from(!core.relocation().is_idle()),
                ),
            ];
            if let Some((what, count)) = left.iter().find(|(_, count)| *count > 0) {
                let actors: Vec<&ActorId> = self
                    .actors
                    .iter()
                    .filter(|actor| actors.actor_ref(actor).is_some())
                    .collect();
                let detail =
                    format!("{node:?} still holds {count} {what} at the end (Actors {actors:?})");
                self.checker
                    .borrow_mut()
                    .fail("nothing_left_at_the_end", "§7, §9", detail);
                return;
            }
        }
    }
}

/// One journal entry, short enough for a trail.
fn describe(entry: &Journal) -> String {
    match entry {
        Journal::Sent(tapped) => format!(
            "@{:?} {:?}->{:?} {:?}",
            tapped.at, tapped.from, tapped.to, tapped.record
        ),
        Journal::Event { at, node, event } => format!("@{at:?} {node:?} {event:?}"),
        Journal::Store {
            node,
            relocation,
            op,
            done,
        } => format!("{node:?} store {relocation:?} {op:?} -> {done:?}"),
        Journal::StoreApplied {
            node,
            relocation,
            done,
        } => format!("{node:?} store applied {relocation:?} -> {done:?}"),
        Journal::NodeStore { node, op, done } => format!("{node:?} store {op:?} -> {done:?}"),
        Journal::NodeStoreApplied { node, op, done } => {
            format!("{node:?} store applied {op:?} -> {done:?}")
        }
        Journal::StoreWaited { node, call, at } => {
            format!("@{at:?} {node:?} waited on the store at {call}")
        }
        Journal::PeerBuried {
            node,
            peer,
            generation,
            at,
        } => format!(
            "@{at:?} {node:?} buried {peer:?} {generation:?} (not listed: its lease lapsed)"
        ),
        Journal::Paused { node, paused, at } => {
            let what = if *paused { "stopped" } else { "goes on" };
            format!("@{at:?} {node:?} {what}")
        }
        Journal::AnswerDropped(tapped) => format!(
            "@{:?} {:?}->{:?} dropped (a past lifecycle) {:?}",
            tapped.at, tapped.from, tapped.to, tapped.record
        ),
    }
}

/// Runs one seed.
pub fn run_seed(seed: u64, config: &SimConfig, observe: Observe) -> Outcome {
    World::new(seed, config, observe).run(config.steps)
}
