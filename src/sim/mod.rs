//! An in-memory mesh of shard cores with virtual time: the real sans-IO cores
//! of several nodes, joined by an ordered record network (TCP's ordering per
//! link, a fixed one-way latency), driven by one event loop.
//!
//! It is the ground the core's scenario tests stand on, and the seed of the
//! seeded simulator (a later issue adds a PRNG-chosen schedule, faults and
//! invariant checks on top of the same [`Mesh`]). Everything is
//! deterministic: the same calls give the same run.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::core::actor::{ActorEvent, ActorOwnerIdentity, Actors, ReplyTicket};
use crate::core::session::{
    BindStart, SessionEvent, SessionOwnerConfig, SessionOwnerIdentity, Sessions, Ticket,
};
use crate::core::shard::{ShardConfig, ShardCore};
use crate::core::time::Instant;
use crate::core::CoreEvent;
use crate::error::{Error, Reason};
use crate::ids::{
    ActorId, ActorRef, AuthorityOwnerGeneration, Correlation, MeshName, NodeGeneration, NodeRid,
    ObjectGeneration, OwnerLeaseGeneration, PacketKey, Peer, SessionOwnerId, SessionRid,
};
use crate::wire::client::ClientFrame;
use crate::wire::node::{Command, NodeRecord};
use crate::wire::DecodeLimits;

/// How a simulated node's application answers Actor work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorBehavior {
    /// Requests are answered with their own payload and disconnect callbacks
    /// succeed, at once.
    Echo,
    /// Nothing is answered; the test answers through [`Mesh::actors`].
    Manual,
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
}

impl SimNode {
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

/// A mesh of simulated nodes.
#[derive(Debug)]
pub struct Mesh {
    now: Instant,
    latency: Duration,
    nodes: BTreeMap<NodeRid, SimNode>,
    in_flight: BTreeMap<(Instant, u64), InFlight>,
    sent: u64,
    cut: HashSet<(NodeRid, NodeRid)>,
    tap: Vec<Tapped>,
    lost: u64,
    next_correlation: u32,
}

impl Default for Mesh {
    fn default() -> Self {
        Self::new(Duration::from_micros(50))
    }
}

impl Mesh {
    /// An empty mesh whose links deliver after `latency`.
    pub fn new(latency: Duration) -> Self {
        Self {
            now: Instant::ZERO,
            latency,
            nodes: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            sent: 0,
            cut: HashSet::new(),
            tap: Vec::new(),
            lost: 0,
            next_correlation: 0,
        }
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
        let rid = NodeRid(rid);
        let node_generation = NodeGeneration(generation);
        let lease = OwnerLeaseGeneration(generation);
        let mesh = MeshName::new("sim").unwrap_or_else(|_| unreachable!("a valid literal"));
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

    /// Every record sent on any link so far, in order.
    pub fn tap(&self) -> &[Tapped] {
        &self.tap
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

    /// Sends a hand-made record from `from` to `to` as the link would: it is
    /// tapped, lost if the link is cut, and delivered after the latency with
    /// `from`'s current peer identity (the transport's authenticated peer).
    /// Call [`Mesh::run`] afterwards. For tests of late, duplicate and forged
    /// records.
    pub fn inject(&mut self, from: NodeRid, to: NodeRid, record: NodeRecord) {
        let peer = self.node(from).peer;
        self.transmit(peer, to, record);
    }

    /// Puts one record on the link from `from` to `to`: tapped, lost if the
    /// link is cut, and carried as bytes — encoded and decoded by the wire
    /// layer, so every scenario also exercises the codec.
    fn transmit(&mut self, from: Peer, to: NodeRid, record: NodeRecord) {
        let now = self.now;
        self.tap.push(Tapped {
            at: now,
            from: from.rid,
            to,
            record: record.clone(),
        });
        if self.cut.contains(&(from.rid, to)) {
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
    }

    /// The earliest timer deadline of any node, without firing it (for "not
    /// sooner" checks).
    pub fn next_timer(&self) -> Option<Instant> {
        self.nodes
            .values()
            .filter_map(|n| n.core.poll_timeout())
            .min()
    }

    fn next_moment(&self) -> Option<Instant> {
        let delivery = self.in_flight.keys().next().map(|&(at, _)| at);
        [delivery, self.next_timer()].into_iter().flatten().min()
    }

    /// Fires the timers due before `at`, then delivers the records due at `at`.
    fn step_until(&mut self, at: Instant) {
        while let Some(deadline) = self.next_timer().filter(|&d| d <= at) {
            self.now = self.now.max(deadline);
            let now = self.now;
            for node in self.nodes.values_mut() {
                if node.core.poll_timeout().is_some_and(|d| d <= now) {
                    node.core.handle_timeout(now);
                }
            }
            self.pump();
        }
        self.now = self.now.max(at);
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let flight = entry.remove();
            let now = self.now;
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

    fn pump_node(&mut self, rid: NodeRid, now: Instant) -> bool {
        let mut progress = false;
        let Some(node) = self.nodes.get_mut(&rid) else {
            return false;
        };
        let from = node.peer;
        let mut transmits = Vec::new();
        while let Some(transmit) = node.core.poll_transmit() {
            transmits.push(transmit);
        }
        while let Some(event) = node.core.poll_event() {
            progress = true;
            match event {
                CoreEvent::Session(event) => node.session_events.push(event),
                CoreEvent::Actor(event) => {
                    if node.behavior == ActorBehavior::Echo {
                        echo(&mut node.core.actors(now), &event);
                    }
                    node.actor_events.push(event);
                }
            }
        }
        progress |= !transmits.is_empty();
        for (to, record) in transmits {
            self.transmit(from, to, record);
        }
        progress
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

/// The Echo behavior's answer to one Actor event.
fn echo(actors: &mut Actors<'_>, event: &ActorEvent) {
    match event {
        ActorEvent::Deliver {
            payload,
            reply: Some(ticket),
            ..
        } => actors.reply(*ticket, Ok(payload.clone())),
        ActorEvent::Disconnect { ticket, .. } => actors.disconnect_done(*ticket, Ok(())),
        ActorEvent::Deliver { reply: None, .. } | ActorEvent::Bound { .. } => {}
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
