//! The simulator's invariants (issue 7): each a named check tied to the spec
//! rule it guards, checked as the run goes — the event-time ones from the
//! mesh's observer, with the emitting core as it was when it decided, the
//! record-time ones from the journal after every step.
//!
//! Every message the schedule sends carries a unique id in its payload, so a
//! delivery, a processing and a reply can each be traced to the one send
//! that caused it.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::core::actor::{ActorEvent, AwaitEvent};
use crate::core::relocation::RelocationEvent;
use crate::core::session::{
    SessionEvent, SessionTurn, SessionWork, Ticket, TurnId, REPLACEMENT_CLOSE_DELAY,
};
use crate::core::shard::ShardCore;
use crate::core::time::Instant;
use crate::core::CoreEvent;
use crate::error::Error;
use crate::ids::{
    ActorId, ActorRef, AuthorityOwnerGeneration, BindingIdentity, CallId, Correlation,
    NodeGeneration, NodeRid, ObjectGeneration, RelocationId, SessionRef, SessionRid,
    SessionSequence, TimerId,
};
use crate::wire::client::{ClientFrame, CloseReason};
use crate::wire::node::{ActorSend, ActorSendBody, NodeRecord, SessionRelocationRoute};

use super::Journal;

/// A broken invariant: its name, the rule it guards, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: &'static str,
    /// The spec section or CONTRACT ID it guards.
    pub rule: &'static str,
    /// What broke it.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.invariant, self.rule, self.detail)
    }
}

/// The payload of the schedule's client message `id`.
pub fn message_payload(id: u64) -> Bytes {
    tagged(b'm', id)
}

/// The payload of the schedule's push `id`.
pub fn push_payload(id: u64) -> Bytes {
    tagged(b'p', id)
}

/// Who waits for a request the schedule made of an Actor.
#[derive(Clone, Debug)]
pub enum Caller {
    /// An Actor, as it was when it called.
    Actor(ActorRef),
    /// Node code on a node, in that lifecycle (its generation).
    Node(NodeRid, u64),
}

/// The payload of the schedule's message `id` from one Actor to another.
pub fn call_payload(id: u64) -> Bytes {
    tagged(b'c', id)
}

fn tagged(tag: u8, id: u64) -> Bytes {
    let mut bytes = Vec::with_capacity(9);
    bytes.push(tag);
    bytes.extend_from_slice(&id.to_be_bytes());
    Bytes::from(bytes)
}

fn untag(tag: u8, payload: &[u8]) -> Option<u64> {
    let (&first, rest) = payload.split_first()?;
    let id: [u8; 8] = rest.try_into().ok()?;
    (first == tag).then_some(u64::from_be_bytes(id))
}

/// A client message as the schedule sent it: the binding and incarnation
/// the session owner sent it under.
#[derive(Clone, Debug)]
pub struct SentMessage {
    /// The session.
    pub session: SessionRef,
    /// The Actor.
    pub actor: ActorId,
    /// The binding it was sent on (§4).
    pub binding: BindingIdentity,
    /// The incarnation the binding names.
    pub object: ObjectGeneration,
    /// The request's correlation; `None` for a one-way message.
    pub correlation: Option<Correlation>,
}

#[derive(Debug)]
struct Message {
    sent: SentMessage,
    accepted: bool,
    processed: bool,
    /// The incarnation whose lane ran it (`None` inside: a lane of no
    /// hosted incarnation).
    processed_by: Option<Option<ObjectGeneration>>,
    /// The client got a success reply to it.
    replied: bool,
    answers: u32,
}

#[derive(Debug)]
struct Push {
    actor: ActorId,
    binding: BindingIdentity,
}

#[derive(Debug)]
struct Callback {
    started: Instant,
    terminal: Option<Instant>,
}

/// A replacement callback the schedule has not answered yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PendingCallback {
    /// The replaced session.
    pub session: SessionRef,
    /// Names the callback.
    pub callback: Ticket,
}

/// What a run exercised, counted from the cores' events: a schedule that
/// never reaches a branch cannot find its races.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Binds that succeeded.
    pub binds: u64,
    /// Binds that ended with a typed error.
    pub binds_refused: u64,
    /// Requests answered with a reply.
    pub replies: u64,
    /// Requests ended with a typed error.
    pub errors: u64,
    /// Pushes written to a client.
    pub pushes: u64,
    /// Replaced sessions (§6 callbacks started).
    pub replacements: u64,
    /// Sessions closed by a seal timeout (§8.1).
    pub seal_timeouts: u64,
    /// Relocations that committed.
    pub moved: u64,
    /// Relocations that ended with an error.
    pub moves_failed: u64,
    /// Timer ticks an Actor's lane ran.
    pub ticks: u64,
    /// Messages between Actors their targets ran.
    pub calls: u64,
    /// Awaiting Actor turns over at their deadline.
    pub turns_expired: u64,
    /// Moves parked behind an awaiting turn that then went on.
    pub moves_unparked: u64,
    /// Session callback turns over at their lifecycle deadline.
    pub session_turns_expired: u64,
    /// Store operations ended `StoreUnavailable` at the call timeout (a
    /// hung store, an answer slower than the timeout).
    pub store_timeouts: u64,
    /// Store operations applied though their caller got a timeout.
    pub store_applied_unanswered: u64,
    /// Store operations answered after a latency.
    pub store_answered_late: u64,
    /// Stopped nodes that went on within their lease term.
    pub resumed_within_lease: u64,
    /// Stopped nodes that went on past it, fenced, and started again.
    pub resumed_past_lease: u64,
    /// Links dropped because a lease round no longer listed the peer's
    /// lifecycle (its lease lapsed while it was stopped, or its store hung).
    pub peers_buried: u64,
    /// Store rows `no_actor_hosted_nowhere` checked at the settle.
    pub rows_checked: u64,
    /// Acknowledged messages `no_acknowledged_relay_lost` checked.
    pub acked_checked: u64,
    /// Rows found at the settle naming an incarnation its source gave up
    /// at relay-ready and whose target died before its CAS (L6).
    pub rows_lost_after_relay_ready: u64,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Self) {
        self.binds += other.binds;
        self.binds_refused += other.binds_refused;
        self.ticks += other.ticks;
        self.calls += other.calls;
        self.replies += other.replies;
        self.errors += other.errors;
        self.pushes += other.pushes;
        self.replacements += other.replacements;
        self.seal_timeouts += other.seal_timeouts;
        self.moved += other.moved;
        self.moves_failed += other.moves_failed;
        self.turns_expired += other.turns_expired;
        self.moves_unparked += other.moves_unparked;
        self.session_turns_expired += other.session_turns_expired;
        self.store_timeouts += other.store_timeouts;
        self.store_applied_unanswered += other.store_applied_unanswered;
        self.store_answered_late += other.store_answered_late;
        self.resumed_within_lease += other.resumed_within_lease;
        self.resumed_past_lease += other.resumed_past_lease;
        self.peers_buried += other.peers_buried;
        self.rows_checked += other.rows_checked;
        self.acked_checked += other.acked_checked;
        self.rows_lost_after_relay_ready += other.rows_lost_after_relay_ready;
    }
}

/// The invariants' state over one run.
#[derive(Debug)]
pub struct Checker {
    replacement_timeout: Duration,
    violation: Option<Violation>,
    messages: HashMap<u64, Message>,
    pushes: HashMap<u64, Push>,
    correlations: HashMap<Correlation, u64>,
    callbacks: HashMap<SessionRef, Callback>,
    pending_callbacks: Vec<PendingCallback>,
    /// Join callbacks run minus disconnect callbacks run, per Actor and
    /// session.
    bindings: HashMap<(ActorId, SessionRef), i64>,
    /// The last tick each timer ran: ticks run 1, 2, 3 … wherever the Actor
    /// is (docs/actors.md "Timers").
    timer_ticks: HashMap<(ActorId, Option<ObjectGeneration>, TimerId), u64>,
    /// The Actors each node lifecycle has captured for a move.
    captured: HashSet<((NodeRid, NodeGeneration), ActorId)>,
    /// How many times each message between Actors ran at its target.
    calls_ran: HashMap<u64, u32>,
    /// How many outcomes each request between Actors got at its caller.
    call_outcomes: HashMap<u64, u32>,
    /// The requests between Actors (and from node code) the schedule made,
    /// with who waits for each.
    calls_made: HashMap<u64, Caller>,
    /// The schedule's number of each Actor's request, by the caller's
    /// incarnation and the number its ledger gave it.
    call_numbers: HashMap<(ActorId, ObjectGeneration, CallId), u64>,
    /// Sessions closed by a seal timeout, with the journal position.
    seal_timed_out: HashMap<SessionRef, usize>,
    /// Relocations whose source sent the cutover (63): relay-ready was
    /// accepted.
    cut_over: HashSet<RelocationId>,
    /// Each move's Actor, incarnation and the authority it expected to
    /// take over (from its 60), by relocation.
    prepared: HashMap<RelocationId, (ActorId, ObjectGeneration, AuthorityOwnerGeneration)>,
    /// Incarnations whose source sent relay-ready's cutover (63) at an
    /// authority: from then on only the target's CAS can host them (L6).
    relayed_away: HashSet<(ActorId, ObjectGeneration, NodeRid, AuthorityOwnerGeneration)>,
    closed: HashSet<SessionRef>,
    /// The session callback turn running on each session's lane.
    session_turns: HashMap<SessionRef, TurnId>,
    /// Sessions whose disconnect turn was handed out: their lane's last.
    disconnect_turns: HashSet<SessionRef>,
    /// Every client message put on a link, by its session and sequence: a
    /// second sending is a forward.
    submitted: HashSet<(SessionRef, SessionSequence)>,
    cursor: usize,
    tally: Tally,
}

impl Checker {
    /// A checker for nodes whose replaced sessions are force-closed after
    /// `replacement_timeout` without a callback terminal (§6).
    pub fn new(replacement_timeout: Duration) -> Self {
        Self {
            replacement_timeout,
            violation: None,
            messages: HashMap::new(),
            pushes: HashMap::new(),
            correlations: HashMap::new(),
            callbacks: HashMap::new(),
            pending_callbacks: Vec::new(),
            bindings: HashMap::new(),
            timer_ticks: HashMap::new(),
            captured: HashSet::new(),
            session_turns: HashMap::new(),
            disconnect_turns: HashSet::new(),
            submitted: HashSet::new(),
            calls_ran: HashMap::new(),
            call_outcomes: HashMap::new(),
            calls_made: HashMap::new(),
            call_numbers: HashMap::new(),
            seal_timed_out: HashMap::new(),
            cut_over: HashSet::new(),
            prepared: HashMap::new(),
            relayed_away: HashSet::new(),
            closed: HashSet::new(),
            cursor: 0,
            tally: Tally::default(),
        }
    }

    /// The first violation seen, if any.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// What the run exercised so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Records a violation (the first one is kept).
    pub fn fail(&mut self, invariant: &'static str, rule: &'static str, detail: String) {
        if self.violation.is_none() {
            self.violation = Some(Violation {
                invariant,
                rule,
                detail,
            });
        }
    }

    /// The schedule sent client message `id`.
    pub fn sent(&mut self, id: u64, message: SentMessage) {
        if let Some(correlation) = message.correlation {
            self.correlations.insert(correlation, id);
        }
        let message = Message {
            sent: message,
            accepted: false,
            processed: false,
            processed_by: None,
            replied: false,
            answers: 0,
        };
        self.messages.insert(id, message);
    }

    /// The Actor pushed `id` while its owner had `binding` as current.
    pub fn pushed(&mut self, id: u64, actor: ActorId, binding: BindingIdentity) {
        self.pushes.insert(id, Push { actor, binding });
    }

    /// §10, W1: a session's lane runs one callback turn at a time, and its
    /// disconnect turn once, last (§7; src/core/session/lanes.rs).
    fn session_turn(&mut self, session: SessionRef, turn: &SessionTurn) {
        if self.disconnect_turns.contains(&session) {
            let detail = format!("{session:?} got {:?} after its disconnect turn", turn.work);
            return self.fail("disconnect_turn_once_and_last", "§7, §10", detail);
        }
        if let Some(running) = self.session_turns.get(&session) {
            let detail = format!(
                "{session:?} got {:?} while its turn {running:?} runs",
                turn.work
            );
            return self.fail("session_turns_one_at_a_time", "§10, W1", detail);
        }
        self.session_turns.insert(session, turn.turn);
        if turn.work == SessionWork::Disconnected {
            self.disconnect_turns.insert(session);
        }
    }

    /// The application's session callback `turn` ended (or was over at its
    /// lifecycle deadline).
    pub fn session_turn_ended(&mut self, session: SessionRef, turn: TurnId) {
        if self.session_turns.get(&session) == Some(&turn) {
            self.session_turns.remove(&session);
        }
    }

    /// The schedule's Actor lane ran `work`: a handler, a join or a
    /// disconnect callback, a timer tick. Work a relocation captured runs
    /// once, wherever it lands, so it is counted here and not when it is
    /// emitted. `generation` is the incarnation the lane's node hosts.
    pub fn ran(&mut self, work: &ActorEvent, generation: Option<ObjectGeneration>) {
        match work {
            ActorEvent::Deliver { payload, .. } => self.processed(payload, generation),
            ActorEvent::Bound { actor, session } => {
                *self.bindings.entry((actor.clone(), *session)).or_default() += 1;
            }
            ActorEvent::Disconnect { actor, session, .. } => {
                let count = self.bindings.entry((actor.clone(), *session)).or_default();
                *count -= 1;
                if *count < 0 {
                    let detail =
                        format!("a second disconnect callback of {actor:?} for {session:?}");
                    self.fail("disconnect_callback_at_most_once", "§7", detail);
                }
            }
            ActorEvent::Call { payload, .. } => {
                let Some(id) = untag(b'c', payload) else {
                    let detail = format!("an Actor was given a call no Actor made: {payload:?}");
                    return self.fail("nothing_invented", "§12", detail);
                };
                self.tally.calls += 1;
                let ran = self.calls_ran.entry(id).or_default();
                *ran += 1;
                if *ran > 1 {
                    let detail = format!("message {id} between Actors ran {ran} times");
                    self.fail("call_processed_at_most_once", "docs/actors.md", detail);
                }
            }
            ActorEvent::CallOutcome {
                actor,
                call,
                outcome,
            } => {
                let id = generation
                    .and_then(|g| self.call_numbers.get(&(actor.clone(), g, *call)))
                    .copied();
                let Some(id) = id else {
                    let detail = format!("{actor} got an outcome of a request it never made");
                    return self.fail("nothing_invented", "§12", detail);
                };
                self.call_outcome(id, outcome);
            }
            ActorEvent::Timer { actor, timer, tick } => {
                self.tally.ticks += 1;
                // Each incarnation numbers its own timers.
                let key = (actor.clone(), generation, *timer);
                let last = self.timer_ticks.entry(key).or_default();
                let expected = *last + 1;
                *last = *tick;
                if *tick != expected {
                    let detail = format!(
                        "{actor:?}'s timer {timer:?} ran tick {tick} after tick {}",
                        expected - 1
                    );
                    self.fail(
                        "timer_ticks_neither_lost_nor_doubled",
                        "docs/actors.md",
                        detail,
                    );
                }
            }
        }
    }

    fn processed(&mut self, payload: &[u8], generation: Option<ObjectGeneration>) {
        let Some(id) = untag(b'm', payload) else {
            return self.fail(
                "nothing_invented",
                "§12",
                format!("a handler ran a payload no client sent: {payload:?}"),
            );
        };
        match self.messages.get_mut(&id) {
            Some(message) if message.processed => self.fail(
                "processed_at_most_once",
                "§12, L2",
                format!("message {id} ran a second time"),
            ),
            Some(message) => {
                message.processed = true;
                message.processed_by = Some(generation);
            }
            None => self.fail(
                "nothing_invented",
                "§12",
                format!("a handler ran message {id}, which no client sent"),
            ),
        }
    }

    /// The schedule answered a replacement callback at `at`.
    pub fn callback_done(&mut self, session: SessionRef, at: Instant) {
        if let Some(callback) = self.callbacks.get_mut(&session) {
            callback.terminal.get_or_insert(at);
        }
        self.pending_callbacks.retain(|p| p.session != session);
    }

    /// Replacement callbacks waiting for the schedule's answer.
    pub fn pending_callbacks(&self) -> &[PendingCallback] {
        &self.pending_callbacks
    }

    /// The session is gone without a close event (its client left, or its
    /// node died): its requests need no answer any more.
    pub fn session_gone(&mut self, session: SessionRef) {
        self.closed.insert(session);
        self.pending_callbacks.retain(|p| p.session != session);
    }

    /// A node restarted: its RelocationIds start again (they are unique
    /// within one NodeGeneration), so the cutovers its dead life sent no
    /// longer name anything.
    pub fn node_restarted(&mut self, node: NodeRid) {
        self.cut_over
            .retain(|relocation| relocation.coordinator != node);
    }

    /// §12: every request of a session that is still open has ended with
    /// exactly one reply or typed error. For the end of a run, after every
    /// deadline has passed.
    pub fn check_every_request_ended(&mut self) {
        let mut open: Vec<(u64, u32)> = self
            .messages
            .iter()
            .filter(|(_, m)| m.sent.correlation.is_some() && !self.closed.contains(&m.sent.session))
            .filter(|(_, m)| m.answers != 1)
            .map(|(&id, m)| (id, m.answers))
            .collect();
        open.sort_unstable();
        if let Some((id, answers)) = open.first() {
            self.fail(
                "every_request_ends",
                "§12",
                format!("request {id} of an open session ended {answers} times after its deadline"),
            );
        }
    }

    /// `no_acknowledged_relay_lost` (§12, §10, L2), for the settle point
    /// (faults over, every lane run; docs/TESTING.md). A client message is
    /// acknowledged when the client, or the Actor side, has been told it got
    /// through: a request whose client got a success reply; a one-way
    /// message (the client is told nothing) once its incarnation's owner
    /// accepted it onto the Actor's queue (the core gave it to the lane:
    /// from there §10 makes the Actor queue its owner, and a move carries it
    /// as saved work, L2). Then: an acknowledged request was processed
    /// exactly once, by the incarnation it was sent to; an accepted one-way
    /// message whose incarnation is still hosted (`alive`: the same
    /// ObjectGeneration, wherever it moved) was processed. One whose
    /// incarnation ended (destroyed, its node died or its lease lapsed) may
    /// be lost with it (§12: no durability past the incarnation). Returns
    /// how many messages it checked.
    pub fn check_acknowledged(
        &mut self,
        alive: impl Fn(&ActorId, ObjectGeneration) -> bool,
    ) -> u64 {
        let mut checked = 0;
        let mut lost: Vec<(u64, String)> = Vec::new();
        for (&id, message) in &self.messages {
            let sent = &message.sent;
            if message.replied {
                checked += 1;
                if message.processed_by != Some(Some(sent.object)) {
                    let detail = format!(
                        "request {id} was answered with success but processed by {:?}, sent to {:?}",
                        message.processed_by, sent.object
                    );
                    lost.push((id, detail));
                }
            } else if sent.correlation.is_none()
                && message.accepted
                && alive(&sent.actor, sent.object)
            {
                checked += 1;
                if !message.processed {
                    let detail = format!(
                        "one-way message {id} to {:?} {:?} was accepted by its owner and never ran, \
                         though the incarnation lives",
                        sent.actor, sent.object
                    );
                    lost.push((id, detail));
                }
            }
        }
        lost.sort_unstable();
        if let Some((_, detail)) = lost.into_iter().next() {
            self.fail("no_acknowledged_relay_lost", "§12, §10, L2", detail);
        }
        checked
    }

    /// Whether `node`, as the source of a move of this incarnation at
    /// `authority`, sent relay-ready's cutover (63): it gave the Actor up
    /// for good (L6), and only the target's CAS could host it again.
    pub fn relayed_away(
        &self,
        actor: &ActorId,
        object: ObjectGeneration,
        node: NodeRid,
        authority: AuthorityOwnerGeneration,
    ) -> bool {
        self.relayed_away
            .contains(&(actor.clone(), object, node, authority))
    }

    /// An event as it was drained from `node`'s core (`position`: its place
    /// in the journal).
    pub fn observe(&mut self, position: usize, at: Instant, event: &CoreEvent, core: &ShardCore) {
        self.captures(event, core);
        match event {
            CoreEvent::Await(AwaitEvent::TurnExpired { .. }) => self.tally.turns_expired += 1,
            CoreEvent::Relocation(RelocationEvent::Unparked { .. }) => {
                self.tally.moves_unparked += 1;
            }
            CoreEvent::Session(SessionEvent::TurnExpired { .. }) => {
                self.tally.session_turns_expired += 1;
            }
            _ => {}
        }
        if let CoreEvent::Relocation(RelocationEvent::Capture { actor, .. }) = event {
            if core.actor_owner().awaiting(actor).is_some() {
                let detail = format!("{actor:?} was captured while its turn awaits");
                self.fail(
                    "no_capture_while_a_turn_awaits",
                    "§8.1; docs/actors.md",
                    detail,
                );
            }
        }
        match event {
            CoreEvent::Actor(ActorEvent::Deliver { actor, payload, .. }) => {
                self.delivered(actor, payload, core);
            }
            CoreEvent::Session(event) => self.session_event(position, at, event, core),
            CoreEvent::Relocation(RelocationEvent::Finished { outcome, .. }) => match outcome {
                Ok(_) => self.tally.moved += 1,
                Err(_) => self.tally.moves_failed += 1,
            },
            CoreEvent::Actor(
                ActorEvent::Bound { .. }
                | ActorEvent::Disconnect { .. }
                | ActorEvent::Timer { .. }
                | ActorEvent::Call { .. }
                | ActorEvent::CallOutcome { .. },
            )
            | CoreEvent::Relocation(_)
            | CoreEvent::Await(_)
            | CoreEvent::Host(_) => {}
            CoreEvent::NodeCallOutcome { call, outcome } => self.call_outcome(call.0, outcome),
        }
    }

    /// The schedule made request `id` of an Actor, for `caller`, which
    /// numbered it `call`.
    pub fn call_made(&mut self, id: u64, caller: Caller, call: CallId) {
        if let Caller::Actor(me) = &caller {
            self.call_numbers
                .insert((me.id.clone(), me.generation, call), id);
        }
        self.calls_made.insert(id, caller);
    }

    /// The first request (by number) that has no outcome though its caller
    /// is `alive`.
    pub fn open_calls(&self, alive: impl Fn(&Caller) -> bool) -> Option<u64> {
        let mut open: Vec<u64> = self
            .calls_made
            .iter()
            .filter(|(id, caller)| !self.call_outcomes.contains_key(id) && alive(caller))
            .map(|(&id, _)| id)
            .collect();
        open.sort_unstable();
        open.first().copied()
    }

    /// A request between Actors, or from node code, ended at its caller
    /// (the schedule's number `id`).
    fn call_outcome(&mut self, id: u64, outcome: &Result<Bytes, Error>) {
        if !self.calls_made.contains_key(&id) {
            let detail = format!("an outcome of a request no Actor made: {id}");
            return self.fail("nothing_invented", "§12", detail);
        }
        let ended = self.call_outcomes.entry(id).or_default();
        *ended += 1;
        if *ended > 1 {
            let detail = format!("request {id} between Actors ended {ended} times");
            return self.fail("call_ends_once", "docs/actors.md, §12", detail);
        }
        // A reply is the callee's answer to its one processing.
        if let Ok(reply) = outcome {
            let processed = self.calls_ran.get(&id).copied().unwrap_or(0);
            if untag(b'c', reply) != Some(id) || processed != 1 {
                let detail =
                    format!("request {id} replied {reply:?} after {processed} processings");
                self.fail("call_success_means_processed_once", "§12", detail);
            }
        }
    }

    /// §8.1: from its capture until the move aborts (Reopen) or it leaves
    /// (DropInstance), the core gives a captured Actor no work — no
    /// message, no callback, no timer tick.
    fn captures(&mut self, event: &CoreEvent, core: &ShardCore) {
        let owner = core.actor_owner().identity();
        let at = (owner.node, owner.node_generation);
        match event {
            CoreEvent::Relocation(RelocationEvent::Capture { actor, .. }) => {
                self.captured.insert((at, actor.clone()));
            }
            CoreEvent::Relocation(
                RelocationEvent::Reopen { actor, .. } | RelocationEvent::DropInstance { actor, .. },
            ) => {
                self.captured.remove(&(at, actor.clone()));
            }
            CoreEvent::Actor(work) if self.captured.contains(&(at, work.actor().clone())) => {
                let detail = format!("{:?} was given {work:?} while captured", at.0);
                self.fail("no_work_for_a_captured_actor", "§8.1", detail);
            }
            _ => {}
        }
    }

    fn delivered(&mut self, actor: &ActorId, payload: &[u8], core: &ShardCore) {
        let Some(message) = untag(b'm', payload).and_then(|id| self.messages.get_mut(&id)) else {
            let detail = format!("{actor:?} was given a payload no client sent: {payload:?}");
            return self.fail("nothing_invented", "§12", detail);
        };
        if message.processed {
            let detail = format!("{:?} was delivered again after it ran", message.sent);
            return self.fail("processed_at_most_once", "§12, L2", detail);
        }
        if message.accepted {
            // Saved work a relocation carried to the target (L2): accepted
            // once at the source, delivered again there, run once.
            return;
        }
        message.accepted = true;
        let sent = message.sent.clone();
        if core.relocation().is_relocating(actor) {
            let detail = format!("{sent:?} was delivered at a source sealed for a move");
            return self.fail("sealed_source_runs_nothing", "§8.1, X5", detail);
        }
        let owner = core.actor_owner();
        let current = owner.current_binding(actor);
        if current != Some(sent.binding) {
            let detail = format!("{sent:?} accepted while the current binding is {current:?}");
            return self.fail("retired_binding_refused", "§4, §6, P2", detail);
        }
        let hosted = owner.actor_ref(actor).map(|r| r.generation);
        if hosted != Some(sent.object) {
            let detail = format!("{sent:?} accepted by incarnation {hosted:?}");
            self.fail("incarnation_fenced", "§4, S1", detail);
        }
    }

    fn session_event(
        &mut self,
        position: usize,
        at: Instant,
        event: &SessionEvent,
        core: &ShardCore,
    ) {
        let owner = core.session_owner();
        match event {
            SessionEvent::Frame { session, frame } => match frame {
                ClientFrame::Push { payload, .. } => {
                    self.tally.pushes += 1;
                    self.push_arrived(owner.session_ref(*session), payload, core, *session);
                }
                ClientFrame::Reply {
                    correlation,
                    payload,
                    ..
                } => {
                    self.tally.replies += 1;
                    self.answered(*correlation, Some(payload));
                }
                ClientFrame::Error { correlation, .. } => {
                    self.tally.errors += 1;
                    self.answered(*correlation, None);
                }
                _ => {}
            },
            SessionEvent::Close { session, reason } => {
                let session = owner.session_ref(*session);
                self.closed.insert(session);
                match reason {
                    CloseReason::Replaced => self.replaced_close(session, at),
                    CloseReason::SealTimeout => {
                        self.tally.seal_timeouts += 1;
                        self.seal_timed_out.insert(session, position);
                    }
                    _ => {}
                }
            }
            SessionEvent::Turn(turn) => {
                let session = owner.session_ref(turn.session);
                self.session_turn(session, turn);
                if let SessionWork::Replaced { callback, .. } = turn.work {
                    self.tally.replacements += 1;
                    let started = Callback {
                        started: at,
                        terminal: None,
                    };
                    self.callbacks.insert(session, started);
                    self.pending_callbacks
                        .push(PendingCallback { session, callback });
                }
            }
            SessionEvent::SessionEnded { session } => {
                let session = owner.session_ref(*session);
                self.closed.insert(session);
                self.pending_callbacks.retain(|p| p.session != session);
            }
            SessionEvent::BindCompleted { outcome, .. } => match outcome {
                Ok(_) => self.tally.binds += 1,
                Err(_) => self.tally.binds_refused += 1,
            },
            SessionEvent::TurnExpired { session, turn } => {
                self.session_turn_ended(owner.session_ref(*session), *turn);
            }
            SessionEvent::NotifyCompleted { .. } => {}
        }
    }

    fn push_arrived(
        &mut self,
        session: SessionRef,
        payload: &[u8],
        core: &ShardCore,
        rid: SessionRid,
    ) {
        let Some(push) = untag(b'p', payload).and_then(|id| self.pushes.get(&id)) else {
            let detail = format!("{session:?} was pushed a payload no Actor sent: {payload:?}");
            return self.fail("nothing_invented", "§5", detail);
        };
        let now = core.session_owner().binding_identity(rid, &push.actor);
        if now != Some(push.binding) {
            let detail = format!(
                "a push of {:?} sent to binding {:?} reached {session:?} whose binding is {now:?}",
                push.actor, push.binding
            );
            self.fail("push_reaches_only_its_binding", "§5", detail);
        }
    }

    fn answered(&mut self, correlation: Correlation, reply: Option<&Bytes>) {
        let Some(message) = self
            .correlations
            .get(&correlation)
            .and_then(|id| self.messages.get_mut(id))
        else {
            let detail = format!("an answer to {correlation:?}, which no client asked");
            return self.fail("nothing_invented", "§12", detail);
        };
        message.answers += 1;
        if message.answers > 1 {
            let detail = format!("{:?} answered {} times", message.sent, message.answers);
            return self.fail("one_terminal_per_request", "§12", detail);
        }
        if let Some(payload) = reply {
            message.replied = true;
            let id = self.correlations.get(&correlation).copied();
            let echoed = untag(b'm', payload);
            if echoed != id || !message.processed {
                let detail = format!(
                    "{:?} succeeded with {payload:?} but processed={}",
                    message.sent, message.processed
                );
                self.fail("success_means_processed_once", "§12", detail);
            }
        }
    }

    /// P3, §6: the old connection closes no sooner than 100 ms after its
    /// callback terminal, or at the callback timeout when it has none.
    fn replaced_close(&mut self, session: SessionRef, at: Instant) {
        let Some(callback) = self.callbacks.get(&session) else {
            let detail = format!("{session:?} closed as replaced without its callback");
            return self.fail("replaced_close_after_callback", "§6, P3", detail);
        };
        let earliest = match callback.terminal {
            Some(terminal) => terminal + REPLACEMENT_CLOSE_DELAY,
            None => callback.started + self.replacement_timeout,
        };
        if at < earliest {
            let detail = format!(
                "{session:?} closed at {at:?}, before {earliest:?} (callback {callback:?})"
            );
            self.fail("replaced_close_not_sooner", "§6, P3", detail);
        }
    }

    /// The journal's new entries, in order: the record-time invariants.
    pub fn scan(&mut self, journal: &[Journal]) {
        let start = self.cursor.min(journal.len());
        for (position, entry) in journal.iter().enumerate().skip(start) {
            match entry {
                Journal::Sent(tapped) => self.record_sent(position, tapped.from, &tapped.record),
                Journal::Event {
                    event: CoreEvent::Relocation(RelocationEvent::Reopen { relocation, .. }),
                    ..
                } if self.cut_over.contains(relocation) => {
                    let detail = format!("{relocation:?} reopened its source after 63");
                    self.fail("no_reopen_after_relay_ready", "§8.2, L6", detail);
                }
                Journal::StoreWaited { node, call, at } => {
                    let detail = format!(
                        "{node:?} called the store at {call} while handling an input (@{at:?}), \
                         not through the store path"
                    );
                    self.fail(
                        "no_shard_input_waits_on_the_store",
                        "§5, docs/threading.md \"Never block a shard\"",
                        detail,
                    );
                }
                _ => {}
            }
        }
        self.cursor = journal.len();
    }

    fn record_sent(&mut self, position: usize, from: NodeRid, record: &NodeRecord) {
        match record {
            NodeRecord::ActorSend(ActorSend::Message(message))
                if matches!(message.body, ActorSendBody::Payload { .. }) =>
            {
                // The disconnect notice that cleans the binding up does go.
                // Held messages are the session owner's to release, so only
                // its own sends count: a record it submitted before the
                // seal, which an Actor owner holds and then forwards by
                // Message Follow, is the Actor's queue's to deliver (§10:
                // once submitted, the Actor queue owns the order). Its
                // node may be the session owner's too, so a forward is told
                // by its tail: the session sequence it was first sent with
                // (seed 4642, once session callbacks took their time).
                let session = message.tail.session;
                let forwarded = !self.submitted.insert((session, message.tail.sequence));
                if from == session.owner
                    && !forwarded
                    && self
                        .seal_timed_out
                        .get(&session)
                        .is_some_and(|&closed| closed < position)
                {
                    let detail = format!("{from:?} sent {message:?} after its seal timed out");
                    self.fail("nothing_delivered_after_seal_timeout", "§8.1, L3", detail);
                }
            }
            NodeRecord::RelocationPrepare(prepare) => {
                let expected = (
                    prepare.actor.clone(),
                    prepare.object_generation,
                    prepare.expected_authority,
                );
                self.prepared.insert(prepare.relocation, expected);
            }
            NodeRecord::RelocationCutover(cutover) => {
                self.cut_over.insert(cutover.relocation);
                if let Some((actor, object, authority)) = self.prepared.get(&cutover.relocation) {
                    let away = (actor.clone(), *object, from, *authority);
                    self.relayed_away.insert(away);
                }
            }
            NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Abort(seal))
                if self.cut_over.contains(&seal.relocation) =>
            {
                let detail = format!("{from:?} sent 44 abort for {seal:?} after 63");
                self.fail("no_reopen_after_relay_ready", "§8.2, L6", detail);
            }
            _ => {}
        }
    }
}
