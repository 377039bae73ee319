//! ROUTER links between nodes (docs/threading.md "Node links"): one TCP link
//! per pair of nodes, opened by the node with the lower NodeRid, authenticated
//! by the cluster-secret handshake, redialled with backoff when it breaks.
//!
//! The transport-ingress validation of §2 happens here and only here: a
//! record is attributed to the authenticated peer (RID and NodeGeneration) of
//! the link it arrived on, its frame shape is checked by the wire decoder,
//! and a link from an older NodeGeneration of a peer is refused — so nothing
//! from a previous process lifecycle is ever handed to the core.
//!
//! With peer discovery, the peers to dial come from the Location Store's
//! membership ([`Links::follow_members`], docs/store.md "Membership"), and a
//! peer whose lease lapsed is dead to the mesh: its links are dropped and no
//! link from that lifecycle, or an older one, is accepted again.
//!
//! A node may be in several meshes (§3, docs/threading.md "Several meshes"):
//! each link is authenticated in exactly one of them (the acceptor takes the
//! secret of the mesh the Hello names) and remembers it; a peer is in one
//! mesh of this node for the node's whole lifecycle. Records for this node's
//! Actors (its Actor owner role) arrive only on links of its home mesh, the
//! mesh its Location Store rows name (§4): on a link of another mesh they are
//! refused, a request with `Unavailable` (MeshUnreachable).

use foldhash::{HashMap, HashMapExt};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant as StdInstant};

use super::deadlines::FifoDeadlines;
use crate::core::shard::{record_role, RecordRole, ShardCore};
use crate::core::trace::FlowTrace;
use crate::core::warn_budget::WarnBudget;
use crate::error::{Error, Reason};
use crate::ids::RequestId;
use crate::ids::{MeshName, NodeGeneration, NodeRid, Peer};
use crate::net::handshake::{
    fresh_nonce, refusal_frame, Answer, ClusterSecret, HandshakeError, LinkHandshake, Progress,
};
use crate::net::{ConnId, Reactor};
use crate::store::Member;
use crate::wire::link::LinkIdentity;
use crate::wire::node::{
    ActorHost, ActorReply, ActorSend, BindTerminal, BoundSessionBind, Command, HostAnswer,
    NodeRecord, RelocationReady, SessionRelocationSealed,
};
use crate::wire::DecodeLimits;

const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// A link that stayed up this long was healthy: its next dial after it
/// breaks starts again from `BACKOFF_MIN`. One that broke sooner (a peer
/// that accepts the handshake and then drops the link, a lifecycle it
/// refuses) keeps backing off, so no pair of nodes cycles at the minimum.
const STABLE_UP: Duration = Duration::from_secs(1);

/// How a node joins its meshes.
#[derive(Clone, Debug)]
pub(crate) struct LinkConfig {
    pub(crate) rid: NodeRid,
    pub(crate) generation: NodeGeneration,
    /// Each mesh with the secret its links authenticate with; the home mesh
    /// (the one the Actor owner's rows name) first.
    pub(crate) meshes: Vec<(MeshName, ClusterSecret)>,
    /// Every configured peer, its address and the index of its mesh (a peer
    /// is in one mesh of this node; the builder checked). Those with a
    /// higher NodeRid are dialled (the builder checked they have an
    /// address); a Hello is taken only from these and the listed members.
    pub(crate) peers: Vec<(NodeRid, Option<SocketAddr>, usize)>,
}

impl LinkConfig {
    /// This node's identity in mesh `mesh`.
    fn identity(&self, mesh: usize) -> Option<(ClusterSecret, LinkIdentity)> {
        let (name, secret) = self.meshes.get(mesh)?;
        let identity = LinkIdentity {
            mesh: name.clone(),
            rid: self.rid,
            generation: self.generation,
        };
        Some((secret.clone(), identity))
    }

    /// The index of the mesh called `name`, if this node is in it.
    fn mesh_index(&self, name: &MeshName) -> Option<usize> {
        self.meshes.iter().position(|(mesh, _)| mesh == name)
    }
}

/// Which peers are linked now, for `Node::wait_linked`, and whether in the
/// home mesh, for the placement policy; and whether the link round after
/// start is over, for readiness.
#[derive(Default)]
pub(crate) struct LinkStatus {
    up: Mutex<HashMap<NodeRid, bool>>,
    changed: Condvar,
    /// The link round after start is over ([`StartupLinks`]): set once, by
    /// the link shard, or by the start when there is nothing to wait for.
    linked_in: AtomicBool,
}

impl LinkStatus {
    /// Whether the link round after start is over: until then the node is
    /// not ready (`Readiness::Linking`).
    pub(crate) fn linked_in(&self) -> bool {
        self.linked_in.load(Ordering::Acquire)
    }

    /// The link round after start is over, or there is none.
    pub(crate) fn mark_linked_in(&self) {
        self.linked_in.store(true, Ordering::Release);
    }

    /// `rid` is linked in the home mesh (`Some(true)`), in another mesh
    /// (`Some(false)`), or not (`None`).
    fn set(&self, rid: NodeRid, home: Option<bool>) {
        let mut peers = self
            .up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match home {
            Some(home) => peers.insert(rid, home),
            None => peers.remove(&rid),
        };
        self.changed.notify_all();
    }

    /// The peers linked now in the home mesh, in RID order: the only ones an
    /// Actor of this node may move to and still be reached through the mesh
    /// its rows name (docs/threading.md "Several meshes").
    pub(crate) fn up(&self) -> Vec<NodeRid> {
        let peers = self
            .up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut up: Vec<NodeRid> = peers
            .iter()
            .filter(|&(_, &home)| home)
            .map(|(&rid, _)| rid)
            .collect();
        up.sort_unstable_by_key(|rid| rid.0);
        up
    }

    /// Waits until `rid` is linked (`up`) or not (`!up`); `false` at the
    /// timeout.
    pub(crate) fn wait(&self, rid: NodeRid, up: bool, timeout: Duration) -> bool {
        let peers = self
            .up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let waited = self
            .changed
            .wait_timeout_while(peers, timeout, |peers| peers.contains_key(&rid) != up);
        match waited {
            Ok((peers, _)) => peers.contains_key(&rid) == up,
            Err(poisoned) => poisoned.into_inner().0.contains_key(&rid) == up,
        }
    }
}

enum Phase {
    /// Dialed; waiting for the TCP connect.
    Connecting,
    /// Handshaking (either side): no record flows yet.
    Handshake(LinkHandshake),
    /// Authenticated in the mesh of this index: records flow, attributed to
    /// this peer.
    Up(Peer, usize),
}

struct Dial {
    rid: NodeRid,
    addr: SocketAddr,
    /// The index of the mesh the link is authenticated in.
    mesh: usize,
    conn: Option<ConnId>,
    next_at: StdInstant,
    backoff: Duration,
    /// When the dialled link came up, while it is up.
    up_since: Option<StdInstant>,
}

impl Dial {
    /// Schedules the next dial: after the current backoff with jitter (a
    /// uniform draw between its half and all of it, so that nodes that lost
    /// one another together do not redial in step), then doubles the
    /// backoff, up to `BACKOFF_MAX`.
    fn back_off(&mut self, now: StdInstant) {
        let mut draw = [0u8; 4];
        // Without randomness the full backoff is used: still bounded.
        let fraction = match getrandom::fill(&mut draw) {
            Ok(()) => f64::from(u32::from_le_bytes(draw)) / f64::from(u32::MAX),
            Err(_) => 1.0,
        };
        self.next_at = now + self.backoff.mul_f64(0.5 + fraction / 2.0);
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }
}

/// The link round after start (docs/operations.md "Probes"). A node
/// that says it is ready before its links are up sends the logins it gets
/// meanwhile to `PeerUnreachable` wherever a player lives on a peer: a
/// rolling restart would turn that into errors on every step. So the node
/// is not ready until every peer it knew at its start is linked, or until
/// `NodeSettings::ready_link_wait` has passed, whichever comes first: a
/// peer that is down must not keep the node out of service. Once over, the
/// round is over for the lifecycle: a link that goes down later leaves
/// readiness alone, as a store outage does.
struct StartupLinks {
    /// Peers known at start (configured, or in the membership's first
    /// listing) whose link has not come up yet.
    waiting: Vec<NodeRid>,
    /// Peers known at start whose lease lapsed before they linked: dead to
    /// the mesh, so not waited for, and named as such, not as linked.
    lapsed: Vec<NodeRid>,
    /// A discovering node knows its peers only from the membership's first
    /// listing: until it arrives the round cannot be complete.
    listing_due: bool,
    /// When the node turns ready with links still missing.
    until: StdInstant,
}

impl StartupLinks {
    /// `rid`'s link came up: not waited for.
    fn linked(&mut self, rid: NodeRid) {
        self.waiting.retain(|&waited| waited != rid);
    }

    /// `rid`'s lease lapsed: dead to the mesh, not waited for.
    fn lapsed(&mut self, rid: NodeRid) {
        if self.waiting.contains(&rid) {
            self.linked(rid);
            self.lapsed.push(rid);
        }
    }

    /// The membership's first listing, of the peers not linked yet, makes
    /// the set complete; later listings change nothing (the round waits
    /// for the peers known at start, not for every join after it).
    fn listed(&mut self, unlinked: impl Iterator<Item = NodeRid>) {
        if !std::mem::take(&mut self.listing_due) {
            return;
        }
        for rid in unlinked {
            if !self.waiting.contains(&rid) {
                self.waiting.push(rid);
            }
        }
    }

    /// Whether the round is over at `now`: `Some(true)` with every peer
    /// linked, `Some(false)` at the deadline with some missing.
    fn over(&self, now: StdInstant) -> Option<bool> {
        let complete = !self.listing_due && self.waiting.is_empty();
        (complete || now >= self.until).then_some(complete)
    }
}

/// At most this many handshake warnings a second (see `Links::fail`).
const WARN_BURST: u32 = 10;

/// The links of one shard.
pub(crate) struct Links {
    /// The shard's clock, as of its loop turn ([`Links::tick`]): links read
    /// no clock of their own (docs/threading.md "One clock per turn").
    now: StdInstant,
    /// The handshake warnings' budget.
    warnings: WarnBudget<StdInstant>,
    /// Link connections whose handshake has not finished, each with the
    /// link handshake deadline (docs/threading.md "Timeouts on the edges").
    handshakes: FifoDeadlines<ConnId>,
    config: Option<LinkConfig>,
    limits: DecodeLimits,
    links: HashMap<ConnId, Phase>,
    up: HashMap<NodeRid, (ConnId, Peer)>,
    dials: Vec<Dial>,
    /// The mesh (index) each peer is in, as configured, listed or first
    /// linked: a link from it in another mesh is refused.
    meshes: HashMap<NodeRid, usize>,
    status: Arc<LinkStatus>,
    /// The lifecycle of each peer the membership last listed.
    listed: HashMap<NodeRid, NodeGeneration>,
    /// Per peer, the newest lifecycle whose lease lapsed: links from it or
    /// an older one are refused (§5, docs/store.md "Membership").
    dead: HashMap<NodeRid, NodeGeneration>,
    /// Peers whose link a newer one replaced in the last read: each is a
    /// link down for the shard (`take_replaced`), before the new link's
    /// records are delivered.
    replaced: Vec<NodeRid>,
    /// The link round after start, while it lasts (link shard only).
    linking: Option<StartupLinks>,
}

impl Links {
    /// `discover`: the peers come from the membership too; `ready_link_wait`
    /// bounds the link round after start ([`StartupLinks`]).
    pub(crate) fn new(
        config: Option<LinkConfig>,
        limits: DecodeLimits,
        status: Arc<LinkStatus>,
        handshake_deadline: Duration,
        (discover, ready_link_wait): (bool, Duration),
        now: StdInstant,
    ) -> Self {
        let peers = config.iter().flat_map(|c| {
            c.peers
                .iter()
                .map(move |&(rid, addr, mesh)| (c.rid, rid, addr, mesh))
        });
        let meshes = peers.clone().map(|(_, rid, _, mesh)| (rid, mesh)).collect();
        // One link per pair: the lower NodeRid dials (docs/threading.md).
        let dials = peers
            .filter(|&(me, rid, _, _)| rid > me)
            .filter_map(|(_, rid, addr, mesh)| Some((rid, addr?, mesh)))
            .map(|(rid, addr, mesh)| Dial {
                rid,
                addr,
                mesh,
                conn: None,
                next_at: now,
                backoff: BACKOFF_MIN,
                up_since: None,
            })
            .collect();
        let linking = config
            .as_ref()
            .filter(|_| !status.linked_in())
            .map(|c| StartupLinks {
                waiting: c.peers.iter().map(|&(rid, _, _)| rid).collect(),
                lapsed: Vec::new(),
                listing_due: discover,
                until: now + ready_link_wait,
            });
        Self {
            now,
            warnings: WarnBudget::new(now, WARN_BURST, Duration::from_secs(1)),
            handshakes: FifoDeadlines::new(handshake_deadline),
            config,
            limits,
            links: HashMap::new(),
            up: HashMap::new(),
            dials,
            meshes,
            status,
            listed: HashMap::new(),
            dead: HashMap::new(),
            replaced: Vec::new(),
            linking,
        }
    }

    /// Ends the link round after start ([`StartupLinks`]) once every peer
    /// it waits for is linked, or at its deadline with some still missing:
    /// the node is ready from then on. Run every loop turn.
    pub(crate) fn watch_linking(&mut self) {
        let Some(linking) = &self.linking else {
            return;
        };
        let Some(complete) = linking.over(self.now) else {
            return;
        };
        // Over before the line says so: a probe that read the line sees it.
        // The lines say the round is over, not that the node is ready: a
        // node draining or past its lease is not (`Readiness`).
        self.status.mark_linked_in();
        let rids = |rids: &[NodeRid]| {
            let mut rids: Vec<u64> = rids.iter().map(|rid| rid.0).collect();
            rids.sort_unstable();
            rids
        };
        let lapsed = rids(&linking.lapsed);
        if complete && lapsed.is_empty() {
            tracing::info!(
                peers = self.up.len(),
                "linked in: every peer known at start is linked"
            );
        } else if complete {
            tracing::info!(
                peers = self.up.len(),
                ?lapsed,
                "linked in: the peers known at start are linked but for those whose lease lapsed"
            );
        } else {
            tracing::warn!(
                missing = ?rids(&linking.waiting),
                ?lapsed,
                listing_due = linking.listing_due,
                "linked in without every peer known at start (timeouts.ready_link_wait_ms passed)"
            );
        }
        self.linking = None;
    }

    /// Time until the link round after start ends at its deadline, while
    /// it lasts.
    pub(crate) fn next_linking_in(&self) -> Option<Duration> {
        let linking = self.linking.as_ref()?;
        Some(linking.until.saturating_duration_since(self.now))
    }

    /// The shard's loop turn read the clock: the links' time until the next.
    pub(crate) fn tick(&mut self, now: StdInstant) {
        self.now = now;
    }

    /// Every peer this node knows (configured, listed in the membership or
    /// once linked), in NodeRid order, with its mesh and whether its link
    /// is up: a metrics scrape's `zlink_link_up` (src/runtime/metrics.rs).
    pub(crate) fn peer_states(&self) -> Vec<super::metrics::PeerLink> {
        let Some(config) = &self.config else {
            return Vec::new();
        };
        let mut peers: Vec<super::metrics::PeerLink> = self
            .meshes
            .iter()
            .filter_map(|(&rid, &mesh)| {
                let (name, _) = config.meshes.get(mesh)?;
                Some(super::metrics::PeerLink {
                    peer: rid,
                    mesh: name.clone(),
                    up: self.up.contains_key(&rid),
                })
            })
            .collect();
        peers.sort_unstable_by_key(|p| p.peer.0);
        peers
    }

    /// Follows the mesh's membership, `live` as the store last listed it
    /// (docs/store.md "Membership"). A peer that was listed and no longer
    /// is, or is listed in a newer lifecycle, had its lease lapse: it is
    /// dead to the mesh — its dial stops, its link is dropped, and links from
    /// that lifecycle are refused from now on. Every listed peer with a
    /// higher NodeRid is dialled at its listed address (the lower NodeRid
    /// dials, as with configured peers). The membership is the home mesh's
    /// (the owner lease's): a listed peer this node has in another mesh is
    /// left to that mesh.
    pub(crate) fn follow_members(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        live: &[Member],
    ) {
        let Some(me) = self.config.as_ref().map(|c| c.rid) else {
            return;
        };
        let lapsed: Vec<(NodeRid, NodeGeneration)> = self
            .listed
            .iter()
            .filter(|&(rid, generation)| {
                !live
                    .iter()
                    .any(|m| m.node == *rid && m.node_generation == *generation)
            })
            .map(|(&rid, &generation)| (rid, generation))
            .collect();
        for (rid, generation) in lapsed {
            self.bury(reactor, core, rid, generation);
        }
        let now = self.now;
        for member in live.iter().filter(|m| m.node != me) {
            if self.is_dead(member.node, member.node_generation) {
                continue;
            }
            if self.meshes.get(&member.node).is_some_and(|&mesh| mesh != 0) {
                continue;
            }
            self.meshes.insert(member.node, 0);
            self.listed.insert(member.node, member.node_generation);
            if member.node < me {
                continue;
            }
            match self.dials.iter_mut().find(|d| d.rid == member.node) {
                Some(dial) => dial.addr = member.address,
                None => self.dials.push(Dial {
                    rid: member.node,
                    addr: member.address,
                    mesh: 0,
                    conn: None,
                    next_at: now,
                    backoff: BACKOFF_MIN,
                    up_since: None,
                }),
            }
        }
    }

    /// The store answered a listing of the membership, `live` (after
    /// [`Links::follow_members`] followed it): the first completes the set
    /// of peers the link round after start waits for ([`StartupLinks`]).
    /// A listing that could not be read is not one: the round waits on,
    /// bounded by its deadline, rather than count a node that knows no
    /// peer yet as linked in.
    pub(crate) fn listing_read(&mut self, live: &[Member]) {
        let (Some(linking), Some(config)) = (&mut self.linking, &self.config) else {
            return;
        };
        let (me, meshes, up) = (config.rid, &self.meshes, &self.up);
        linking.listed(
            live.iter()
                .map(|m| m.node)
                .filter(|rid| *rid != me && !up.contains_key(rid))
                .filter(|rid| meshes.get(rid).map_or(true, |&mesh| mesh == 0)),
        );
    }

    /// Whether `generation` of `rid` is a lifecycle whose lease lapsed.
    fn is_dead(&self, rid: NodeRid, generation: NodeGeneration) -> bool {
        self.dead.get(&rid).is_some_and(|&dead| generation <= dead)
    }

    /// `generation` of `rid` is dead to the mesh: fence it, stop dialling
    /// it, and drop its link.
    fn bury(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        rid: NodeRid,
        generation: NodeGeneration,
    ) {
        tracing::warn!(peer = %rid, %generation, "peer lease lapsed: dropping its links");
        core.trace(FlowTrace::PeerLeaseLapsed);
        self.listed.remove(&rid);
        if let Some(linking) = &mut self.linking {
            // Dead to the mesh: no link from it is taken any more.
            linking.lapsed(rid);
        }
        let fence = self.dead.entry(rid).or_insert(generation);
        *fence = (*fence).max(generation);
        let mut dropped: Vec<ConnId> = Vec::new();
        // A link up to a later lifecycle of `rid` (the dial reached its
        // restart before this listing) is not the dead one's: keep it.
        let newer = self
            .up
            .get(&rid)
            .filter(|(_, peer)| peer.generation > generation)
            .map(|&(conn, _)| conn);
        self.dials.retain(|dial| {
            if dial.rid != rid || newer.is_some_and(|conn| dial.conn == Some(conn)) {
                return true;
            }
            dropped.extend(dial.conn);
            false
        });
        if let Some(&(conn, peer)) = self.up.get(&rid) {
            if peer.generation <= generation {
                self.up.remove(&rid);
                self.status.set(rid, None);
                dropped.push(conn);
            }
        }
        for conn in dropped {
            self.links.remove(&conn);
            reactor.abort(conn);
        }
    }

    /// Whether `conn` is a node link.
    pub(crate) fn owns(&self, conn: ConnId) -> bool {
        self.links.contains_key(&conn)
    }

    /// A peer connected to our node listener.
    pub(crate) fn accepted(&mut self, conn: ConnId) {
        self.links
            .insert(conn, Phase::Handshake(LinkHandshake::accept()));
        self.handshakes.arm(conn, self.now);
    }

    /// Closes every link connection whose handshake did not finish within
    /// the link handshake deadline (a slow or silent peer, on either side).
    pub(crate) fn expire_handshakes(&mut self, reactor: &mut Reactor, core: &mut ShardCore) {
        for conn in self.handshakes.expire(self.now) {
            let Some(phase) = self.links.remove(&conn) else {
                continue;
            };
            if matches!(phase, Phase::Up(..)) {
                self.links.insert(conn, phase);
                continue;
            }
            let peer = self.phase_peer(conn, &phase);
            self.fail(reactor, core, conn, peer, "the handshake deadline passed");
        }
    }

    /// Time until the next handshake deadline, if one is armed.
    pub(crate) fn next_handshake_in(&self) -> Option<Duration> {
        self.handshakes.next_in(self.now)
    }

    /// Starts every dial that is due.
    pub(crate) fn redial(&mut self, reactor: &mut Reactor) {
        let now = self.now;
        for dial in &mut self.dials {
            if dial.conn.is_some() || dial.next_at > now {
                continue;
            }
            match reactor.connect(dial.addr) {
                Ok(conn) => {
                    dial.conn = Some(conn);
                    self.links.insert(conn, Phase::Connecting);
                    self.handshakes.arm(conn, now);
                }
                Err(error) => {
                    tracing::debug!(peer = %dial.rid, %error, "dial failed");
                    dial.back_off(now);
                }
            }
        }
    }

    /// Time until the next dial is due, if one is waiting.
    pub(crate) fn next_dial_in(&self) -> Option<Duration> {
        let now = self.now;
        self.dials
            .iter()
            .filter(|d| d.conn.is_none())
            .map(|d| d.next_at.saturating_duration_since(now))
            .min()
    }

    /// Our dial connected: send the Hello, in the dialled peer's mesh.
    pub(crate) fn connected(&mut self, reactor: &mut Reactor, conn: ConnId) {
        let dial = self.dials.iter().find(|d| d.conn == Some(conn));
        let Some((secret, me)) = dial.and_then(|d| self.config.as_ref()?.identity(d.mesh)) else {
            return;
        };
        let (dialer, hello) = LinkHandshake::dial(secret, me, fresh_nonce());
        if let Some(outbound) = reactor.outbound(conn) {
            hello.encode(outbound);
        }
        self.links.insert(conn, Phase::Handshake(dialer));
    }

    /// A link's connection ended (or never started): forget it, and redial
    /// with backoff if we are the dialing side.
    /// Returns the peer whose link went down, if one did.
    pub(crate) fn closed(&mut self, conn: ConnId) -> Option<NodeRid> {
        let mut down = None;
        self.handshakes.disarm(conn);
        if let Some(Phase::Up(peer, _)) = self.links.remove(&conn) {
            if self.up.get(&peer.rid).is_some_and(|(c, _)| *c == conn) {
                self.up.remove(&peer.rid);
                self.status.set(peer.rid, None);
                tracing::info!(peer = %peer.rid, "link down");
                down = Some(peer.rid);
            }
        }
        let now = self.now;
        for dial in &mut self.dials {
            if dial.conn == Some(conn) {
                dial.conn = None;
                if dial.up_since.take().is_some_and(|up| now - up >= STABLE_UP) {
                    dial.backoff = BACKOFF_MIN;
                }
                dial.back_off(now);
            }
        }
        down
    }

    /// A peer whose link was replaced by a newer one since the last call:
    /// its old link went down (the shard runs its link down).
    pub(crate) fn take_replaced(&mut self) -> Option<NodeRid> {
        self.replaced.pop()
    }

    /// Bytes arrived on a link: advance the handshake, or collect every
    /// record, attributed to the link's authenticated peer, into `records`.
    /// The handshake reads the same buffer in any split of the stream
    /// (`LinkHandshake`, fuzzed so by the `link_handshake` target), and
    /// records that arrive in one read with its last frame are read next.
    pub(crate) fn received(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        records: &mut Vec<(Peer, NodeRecord)>,
    ) {
        loop {
            // A link that is up (every read but a handshake's) is only
            // looked at: taking its phase out and back would hash twice and
            // move a handshake-sized value each way, per read.
            let handshake = match self.links.get(&conn) {
                None => return,
                Some(&Phase::Up(peer, mesh)) => {
                    self.records(reactor, core, conn, peer, mesh != 0, records);
                    return;
                }
                Some(Phase::Connecting) => {
                    self.links.remove(&conn);
                    self.fail(reactor, core, conn, None, "bytes before the connect");
                    return;
                }
                Some(Phase::Handshake(_)) => match self.links.remove(&conn) {
                    Some(Phase::Handshake(handshake)) => handshake,
                    _ => return,
                },
            };
            if !self.handshake(reactor, core, conn, handshake) {
                return;
            }
        }
    }

    /// One handshake step; `false` when the link failed or is waiting for
    /// bytes.
    fn handshake(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        handshake: LinkHandshake,
    ) -> bool {
        let Some(config) = self.config.clone() else {
            reactor.abort(conn);
            return false;
        };
        let known = handshake
            .claimed()
            .map(|id| id.rid)
            .or_else(|| self.dialled(conn));
        let Some(inbound) = reactor.inbound(conn) else {
            self.links.insert(conn, Phase::Handshake(handshake));
            return false;
        };
        let mut claimed = None;
        let mut refused = None;
        let progress = handshake.advance(inbound, &self.limits, &mut |hello| {
            claimed = Some(hello.rid);
            self.admit(&config, hello).map_err(|refusal| {
                refused = Some(refusal);
                HandshakeError::Refused(refusal.to_string())
            })
        });
        match progress {
            Ok(Progress::Pending(handshake)) => {
                self.links.insert(conn, Phase::Handshake(handshake));
                false
            }
            Ok(Progress::Welcome(handshake, welcome)) => {
                if let Some(outbound) = reactor.outbound(conn) {
                    welcome.encode(outbound);
                }
                self.links.insert(conn, Phase::Handshake(handshake));
                true
            }
            Ok(Progress::Up { send, peer }) => {
                if let (Some(proof), Some(outbound)) = (send, reactor.outbound(conn)) {
                    proof.encode(outbound);
                }
                self.link_up(reactor, core, conn, peer)
            }
            Err(error) => {
                match refused {
                    Some(Refusal::Stale) => core.trace(FlowTrace::StaleLinkGeneration),
                    Some(Refusal::Unexpected) => core.trace(FlowTrace::UnexpectedLinkPeer),
                    Some(Refusal::Mesh) | None => {}
                }
                let peer = claimed.or(known).or(match &error {
                    HandshakeError::Version { peer, .. } => *peer,
                    _ => None,
                });
                if let Some(answer) = refusal_frame(&error) {
                    // Told why before the close, so that the dialer's log
                    // names both versions too (docs/operations.md).
                    core.trace(FlowTrace::LinkVersionRefused);
                    if let Some(outbound) = reactor.outbound(conn) {
                        answer.encode(outbound);
                    }
                    self.fail_then(reactor, core, conn, peer, &error.to_string(), Ending::Flush);
                    return false;
                }
                if matches!(error, HandshakeError::PeerRefusedVersion { .. }) {
                    core.trace(FlowTrace::LinkVersionRefused);
                }
                self.fail(reactor, core, conn, peer, &error.to_string());
                false
            }
        }
    }

    /// Whether this node takes a Hello from `hello`, and with which mesh's
    /// secret: the mesh it names must be one of this node's, the node must
    /// be a peer this node expects in that mesh (configured, or listed by
    /// the membership: issue 20 item 2, docs/threading.md "Node links"),
    /// and the lifecycle must not be one this node knows to be over (its
    /// lease lapsed, or a newer one of the same node is linked). Such a
    /// Hello gets no Welcome: no proof is computed for it and no handshake
    /// state is held beyond this read.
    fn admit(&self, config: &LinkConfig, hello: &LinkIdentity) -> Result<Answer, Refusal> {
        let Some(mesh) = config.mesh_index(&hello.mesh) else {
            return Err(Refusal::Mesh);
        };
        let Some((secret, me)) = config.identity(mesh) else {
            return Err(Refusal::Mesh);
        };
        // Any lifecycle of an expected node: a restart (a new
        // NodeGeneration) is taken like the first.
        if self.meshes.get(&hello.rid) != Some(&mesh) {
            return Err(Refusal::Unexpected);
        }
        let superseded = self
            .up
            .get(&hello.rid)
            .is_some_and(|(_, linked)| linked.generation > hello.generation);
        if self.is_dead(hello.rid, hello.generation) || superseded {
            return Err(Refusal::Stale);
        }
        Ok(Answer {
            secret,
            me,
            nonce: fresh_nonce(),
        })
    }

    /// The peer this node dialled on `conn`, if it did.
    fn dialled(&self, conn: ConnId) -> Option<NodeRid> {
        self.dials
            .iter()
            .find(|d| d.conn == Some(conn))
            .map(|d| d.rid)
    }

    /// A handshake failed: the connection is aborted and counted, and a
    /// warning names the peer (as far as it is known: the dialled one, or
    /// the one a Hello claimed) — at most `WARN_BURST` a second, since any
    /// process that reaches the peer port can trigger it; the rest are
    /// counted (`link_handshake_failed`) and summed in the next line.
    fn fail(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        peer: Option<NodeRid>,
        why: &str,
    ) {
        self.fail_then(reactor, core, conn, peer, why, Ending::Abort);
    }

    /// [`fail`](Self::fail), ending the connection as `ending` says.
    fn fail_then(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        peer: Option<NodeRid>,
        why: &str,
        ending: Ending,
    ) {
        core.trace(FlowTrace::LinkHandshakeFailed);
        self.end(reactor, conn, ending);
        if let Some(suppressed) = self.warnings.admit(self.now) {
            let peer = peer.map_or_else(|| "unknown".to_owned(), |rid| rid.to_string());
            tracing::warn!(%peer, ?conn, why, suppressed, "link handshake failed");
        }
    }

    /// Ends a link connection that never came up. Its `Closed` event will
    /// not find it among the links (its phase is gone), so what `closed`
    /// does is done here: a dial of ours backs off and is made again —
    /// without that a refused dial (another version during a rolling
    /// upgrade, a peer that restarts) would never be retried.
    fn end(&mut self, reactor: &mut Reactor, conn: ConnId, ending: Ending) {
        match ending {
            Ending::Abort => reactor.abort(conn),
            Ending::Flush => reactor.close(conn),
        }
        self.links.remove(&conn);
        let _ = self.closed(conn);
    }

    /// The peer a connection in `phase` is with, as far as it is known.
    fn phase_peer(&self, conn: ConnId, phase: &Phase) -> Option<NodeRid> {
        match phase {
            Phase::Up(peer, _) => Some(peer.rid),
            Phase::Handshake(handshake) => handshake
                .claimed()
                .map(|id| id.rid)
                .or_else(|| self.dialled(conn)),
            Phase::Connecting => self.dialled(conn),
        }
    }

    /// The handshake succeeded. A link from an older NodeGeneration of the
    /// same peer than the one already up is refused; a newer one replaces
    /// it: the old lifecycle is fenced off (§5).
    fn link_up(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        identity: LinkIdentity,
    ) -> bool {
        let peer = Peer {
            rid: identity.rid,
            generation: identity.generation,
        };
        let mesh = self
            .config
            .as_ref()
            .and_then(|c| c.mesh_index(&identity.mesh))
            .unwrap_or(0);
        if self.meshes.get(&peer.rid).is_some_and(|&m| m != mesh) {
            // A NodeRid names one process in every mesh (docs/threading.md
            // "Several meshes"): a peer is linked in one mesh of this node.
            let why = format!(
                "peer already in another mesh of this node than {}",
                identity.mesh
            );
            self.fail(reactor, core, conn, Some(peer.rid), &why);
            return false;
        }
        if self.is_dead(peer.rid, peer.generation) {
            core.trace(FlowTrace::StaleLinkGeneration);
            self.end(reactor, conn, Ending::Abort);
            return false;
        }
        if let Some(&(old_conn, old_peer)) = self.up.get(&peer.rid) {
            if old_peer.generation > peer.generation {
                core.trace(FlowTrace::StaleLinkGeneration);
                self.end(reactor, conn, Ending::Abort);
                return false;
            }
            if old_peer.generation < peer.generation {
                core.trace(FlowTrace::StaleLinkGeneration);
            }
            // The old link is down, whatever lifecycle the new one is of:
            // what was in flight on it may be lost, as on any link down.
            self.links.remove(&old_conn);
            reactor.abort(old_conn);
            tracing::info!(peer = %peer.rid, generation = %old_peer.generation, "link down: replaced by a newer link");
            self.replaced.push(peer.rid);
        }
        self.handshakes.disarm(conn);
        self.meshes.insert(peer.rid, mesh);
        self.links.insert(conn, Phase::Up(peer, mesh));
        self.up.insert(peer.rid, (conn, peer));
        for dial in &mut self.dials {
            if dial.conn == Some(conn) {
                dial.up_since = Some(self.now);
            }
        }
        self.status.set(peer.rid, Some(mesh == 0));
        if let Some(linking) = &mut self.linking {
            linking.linked(peer.rid);
        }
        tracing::info!(peer = %peer.rid, generation = %peer.generation, mesh = %identity.mesh, "link up");
        true
    }

    /// Decodes every complete record. A malformed one is dropped and counted
    /// and the link stays usable (§6, X4); an oversized length prefix cannot
    /// be skipped, so it closes the link. On a link of another mesh than the
    /// home mesh (`foreign`), a record for this node's Actor owner is refused
    /// (docs/threading.md "Several meshes"): its route names the home mesh.
    fn records(
        &mut self,
        reactor: &mut Reactor,
        core: &mut ShardCore,
        conn: ConnId,
        peer: Peer,
        foreign: bool,
        records: &mut Vec<(Peer, NodeRecord)>,
    ) {
        loop {
            let Some(inbound) = reactor.inbound(conn) else {
                return;
            };
            // Every record this read completed, split off at once.
            let frames = match NodeRecord::split_frames(inbound, &self.limits) {
                Ok(frames) if frames.is_empty() => return,
                Ok(frames) => frames,
                Err(error) => {
                    // An oversized length prefix cannot be skipped.
                    tracing::warn!(peer = %peer.rid, %error, "closing link");
                    core.trace(FlowTrace::LinkFrameTooLong);
                    reactor.abort(conn);
                    return;
                }
            };
            for frame in frames {
                // The frame is not kept for the refusal of a record that is
                // malformed or from another mesh: the few bytes that name
                // its request are.
                let head = crate::wire::node::RequestHead::of(&frame);
                let (request, refused) = match NodeRecord::decode_framed(frame, &self.limits) {
                    // An ask to host (71) is for the Actor owner too.
                    Ok(record)
                        if foreign
                            && (record_role(&record) == RecordRole::ActorOwner
                                || matches!(record, NodeRecord::ActorHost(ActorHost::Ask(_)))) =>
                    {
                        tracing::debug!(peer = %peer.rid, "record for the Actor owner from another mesh");
                        core.trace(FlowTrace::RecordFromOtherMesh);
                        (head.request(), Reason::MeshUnreachable)
                    }
                    Ok(record) => {
                        records.push((peer, record));
                        continue;
                    }
                    Err(error) => {
                        tracing::debug!(peer = %peer.rid, %error, "malformed record");
                        core.trace(FlowTrace::MalformedRecordDropped);
                        (head.request(), Reason::MalformedRecord)
                    }
                };
                if let Some(refusal) = request.map(|r| refusal(r, refused)) {
                    if let Some(outbound) = reactor.outbound(conn) {
                        refusal.encode(outbound);
                    }
                }
            }
        }
    }

    /// The peer (its lifecycle) of the link up to `rid`, if one is.
    pub(crate) fn peer(&self, rid: NodeRid) -> Option<Peer> {
        self.up.get(&rid).map(|&(_, peer)| peer)
    }

    /// Whether the link up to `to` has room below the outbound bound (§6:
    /// a 51 waits for admission to a full link); `None` when there is none.
    pub(crate) fn has_room(&self, reactor: &Reactor, to: NodeRid) -> Option<bool> {
        let &(conn, _) = self.up.get(&to)?;
        Some(reactor.outbound_room(conn) > 0)
    }

    /// Encodes a record onto the link to `to`; `false` when there is none.
    pub(crate) fn send(&mut self, reactor: &mut Reactor, to: NodeRid, record: &NodeRecord) -> Sent {
        let Some(&(conn, _)) = self.up.get(&to) else {
            return Sent::NoLink;
        };
        let Some(outbound) = reactor.outbound(conn) else {
            return Sent::NoLink;
        };
        let before = outbound.len();
        record.encode(outbound);
        // A record the peer's decoder would refuse would make it drop the
        // whole link: it is taken back instead (docs/wire.md "Limits").
        // Client frames always fit (DecodeLimits::for_links); this guards
        // what the node itself produces.
        if outbound.len() - before - 4 > self.limits.frame_len_max as usize {
            outbound.truncate(before);
            return Sent::TooLarge;
        }
        Sent::Written
    }
}

/// How a failed handshake's connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// At once, dropping what is queued.
    Abort,
    /// After what is queued (a `VersionRefused`) has gone out.
    Flush,
}

/// Why a node takes no Hello from a peer (no Welcome is computed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
enum Refusal {
    /// The Hello names a mesh this node is not in.
    #[error("the Hello names a mesh this node is not in")]
    Mesh,
    /// A lifecycle this node knows to be over.
    #[error("a Hello from a past lifecycle")]
    Stale,
    /// A node that is not a peer of this node in the Hello's mesh.
    #[error("a Hello from a node that is not a peer of this node in that mesh")]
    Unexpected,
}

/// What became of a record offered to a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// It is in the link's outbound buffer.
    Written,
    /// There is no link to its node.
    NoLink,
    /// It is larger than a link frame may be; nothing was written.
    TooLarge,
}

/// The typed error that answers a refused request (§6: malformed, or from
/// another mesh): the terminal of its command, naming its RequestId.
fn refusal((command, request): (Command, RequestId), reason: Reason) -> NodeRecord {
    let error = Error::new(reason);
    match command {
        Command::BoundSessionBind => {
            let terminal = BindTerminal {
                request,
                outcome: Err(error),
            };
            NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(terminal))
        }
        Command::SessionRelocationSeal => {
            let sealed = SessionRelocationSealed {
                request,
                outcome: Err(error),
            };
            NodeRecord::SessionRelocationSealed(sealed)
        }
        Command::RelocationPrepare => NodeRecord::RelocationReady(RelocationReady {
            request,
            outcome: Err(error),
        }),
        Command::ActorHost => NodeRecord::ActorHost(ActorHost::Answer(HostAnswer {
            request,
            outcome: Err(error),
        })),
        _ => NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            request,
            outcome: Err(error),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dial() -> Dial {
        Dial {
            rid: NodeRid(2),
            addr: "127.0.0.1:1".parse().unwrap(),
            mesh: 0,
            conn: None,
            next_at: StdInstant::now(),
            backoff: BACKOFF_MIN,
            up_since: None,
        }
    }

    #[test]
    fn redials_back_off_with_jitter_doubling_up_to_the_cap() {
        let mut dial = dial();
        let now = StdInstant::now();
        let mut expected = BACKOFF_MIN;
        for _ in 0..10 {
            dial.back_off(now);
            let wait = dial.next_at - now;
            assert!(
                wait >= expected / 2 && wait <= expected,
                "{wait:?} for {expected:?}"
            );
            expected = (expected * 2).min(BACKOFF_MAX);
            assert_eq!(dial.backoff, expected);
        }
        assert_eq!(dial.backoff, BACKOFF_MAX);
    }

    #[test]
    fn only_a_link_that_stayed_up_resets_the_backoff() {
        let mut links = Links::new(
            None,
            DecodeLimits::default(),
            Arc::default(),
            Duration::from_secs(5),
            (false, Duration::ZERO),
            StdInstant::now(),
        );
        let conn = ConnId::for_tests(7);
        let mut short = dial();
        short.backoff = BACKOFF_MAX;
        short.conn = Some(conn);
        short.up_since = Some(StdInstant::now());
        links.dials.push(short);
        links.tick(StdInstant::now());
        let _ = links.closed(conn);
        assert_eq!(
            links.dials[0].backoff, BACKOFF_MAX,
            "a link up for a moment"
        );
        let stable = StdInstant::now().checked_sub(STABLE_UP).unwrap();
        links.dials[0].conn = Some(conn);
        links.dials[0].up_since = Some(stable);
        links.tick(StdInstant::now());
        let _ = links.closed(conn);
        assert_eq!(
            links.dials[0].backoff,
            BACKOFF_MIN * 2,
            "a link up past STABLE_UP"
        );
    }

    fn startup(peers: &[u64], listing_due: bool, at: StdInstant) -> StartupLinks {
        StartupLinks {
            waiting: peers.iter().map(|&rid| NodeRid(rid)).collect(),
            lapsed: Vec::new(),
            listing_due,
            until: at + Duration::from_secs(5),
        }
    }

    #[test]
    fn the_link_round_after_start_ends_when_every_configured_peer_is_linked() {
        let start = StdInstant::now();
        let mut round = startup(&[2, 3], false, start);
        assert_eq!(round.over(start), None);
        round.linked(NodeRid(3));
        assert_eq!(round.over(start), None, "peer 2 is not linked yet");
        round.linked(NodeRid(2));
        assert_eq!(round.over(start), Some(true));
    }

    #[test]
    fn the_link_round_after_start_ends_at_its_deadline_never_sooner() {
        let start = StdInstant::now();
        let round = startup(&[2], false, start);
        let deadline = start + Duration::from_secs(5);
        assert_eq!(round.over(deadline - Duration::from_millis(1)), None);
        assert_eq!(round.over(deadline), Some(false));
    }

    #[test]
    fn a_discovering_node_waits_for_the_first_listing_and_the_peers_it_names() {
        let start = StdInstant::now();
        let mut round = startup(&[], true, start);
        assert_eq!(round.over(start), None, "no listing yet");
        round.listed([NodeRid(4), NodeRid(5)].into_iter());
        assert_eq!(round.over(start), None);
        round.listed([NodeRid(6)].into_iter());
        round.linked(NodeRid(4));
        round.linked(NodeRid(5));
        assert_eq!(
            round.over(start),
            Some(true),
            "a peer listed after the first listing is not waited for"
        );
        let mut alone = startup(&[], true, start);
        alone.listed(std::iter::empty());
        assert_eq!(alone.over(start), Some(true), "a node alone in its mesh");
    }

    #[test]
    fn a_peer_whose_lease_lapsed_is_not_waited_for_nor_named_as_linked() {
        let start = StdInstant::now();
        let mut round = startup(&[2, 3], false, start);
        round.linked(NodeRid(2));
        round.lapsed(NodeRid(3));
        round.lapsed(NodeRid(4));
        assert_eq!(round.over(start), Some(true));
        assert_eq!(round.lapsed, vec![NodeRid(3)], "4 was never waited for");
    }
}
