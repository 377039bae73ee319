//! The node builder and the running node (§3 startup conditions).

use foldhash::{HashMap, HashMapExt};
use smallbox::smallbox;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::core::trace::FlowCounters;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, MeshName, NodeGeneration, NodeRid, PacketKey, SpotId};
use crate::net::handshake::ClusterSecret;
use crate::net::IoBackend;
use crate::runtime::app::actor::Actor;
use crate::runtime::app::session::{about_lookup, Packet, Session};
use crate::runtime::app::spot::{ExecutionMode, Spot, SpotHandle};
use crate::runtime::app::{NodeSettings, RelocationUnit, StartCancel, StartError};
use crate::runtime::metrics::NodeMetrics;
use crate::runtime::{
    self, ActorType, DisconnectHandler, Handlers, PacketHandler, ReplacedHandler, RunningNode,
    SpotKind,
};
use crate::store::LocationStore;
use crate::typed::{self, Message};

/// §3: what a process does with global Actors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectRole {
    /// No Actor dispatch: a STREAM-only node.
    None,
    /// Binds and relays to Actors hosted elsewhere; hosts none.
    Client,
    /// Hosts Actors (and may also bind to Actors elsewhere).
    Server,
}

/// A further mesh a node joins (§3), beside its home mesh
/// ([`NodeBuilder::mesh`]): its name, the cluster secret its links
/// authenticate with, and its peers. The node's Actors stay reached through
/// the home mesh; through this one its sessions bind and relay to the Actors
/// of its peers (docs/threading.md "Several meshes").
#[derive(Clone, Debug)]
pub struct Mesh {
    name: String,
    secret: ClusterSecret,
    peers: Vec<(NodeRid, Option<SocketAddr>)>,
}

impl Mesh {
    /// The mesh `name`, whose links authenticate with `secret`.
    pub fn new(name: &str, secret: ClusterSecret) -> Self {
        Self {
            name: name.to_owned(),
            secret,
            peers: Vec::new(),
        }
    }

    /// A peer node of this mesh and its link address; as with
    /// [`NodeBuilder::peer`], the lower RID of a pair dials. A NodeRid names
    /// one process in every mesh, so a peer is listed in one mesh of a node.
    pub fn peer(mut self, rid: u64, addr: SocketAddr) -> Self {
        self.peers.push((NodeRid(rid), Some(addr)));
        self
    }

    /// A peer of this mesh that dials this node, as
    /// [`NodeBuilder::accept_peer`].
    pub fn accept_peer(mut self, rid: u64) -> Self {
        self.peers.push((NodeRid(rid), None));
        self
    }
}

/// Builds a node. Every check of §3 runs in [`NodeBuilder::start`].
pub struct NodeBuilder {
    rid: NodeRid,
    generation: Option<NodeGeneration>,
    mesh: String,
    listen: Option<SocketAddr>,
    websocket_listen: Option<SocketAddr>,
    websocket_origins: Vec<String>,
    peer_listen: Option<SocketAddr>,
    peers: Vec<(NodeRid, Option<SocketAddr>)>,
    discover: bool,
    secret: Option<ClusterSecret>,
    joined: Vec<Mesh>,
    role: ObjectRole,
    store: Option<Arc<dyn LocationStore>>,
    dispatch: bool,
    settings: NodeSettings,
    handlers: Handlers,
    actor_types: HashMap<String, ActorType>,
    spot_kinds: HashMap<String, SpotKind>,
    duplicate_key: Option<PacketKey>,
    cancel: StartCancel,
}

impl NodeBuilder {
    /// A node with RID `rid`.
    pub fn new(rid: u64) -> Self {
        Self {
            rid: NodeRid(rid),
            generation: None,
            mesh: "default".to_owned(),
            listen: None,
            websocket_listen: None,
            websocket_origins: Vec::new(),
            peer_listen: None,
            peers: Vec::new(),
            discover: false,
            secret: None,
            joined: Vec::new(),
            role: ObjectRole::None,
            store: None,
            dispatch: false,
            settings: NodeSettings::default(),
            handlers: Handlers::default(),
            actor_types: HashMap::new(),
            spot_kinds: HashMap::new(),
            duplicate_key: None,
            cancel: StartCancel::new(),
        }
    }

    /// The STREAM listen address (port 0 picks one; see [`Node::stream_addr`]).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = Some(addr);
        self
    }

    /// Also listens for WebSocket clients (RFC 6455) on `addr` (port 0
    /// picks one; see [`Node::websocket_addr`]): each binary message carries
    /// one client frame, and the session behind the connection is a STREAM
    /// session like any other — the same callbacks, binding, limits, rate
    /// limit and keepalive (docs/wire.md "WebSocket"). Plain `ws://` only:
    /// put TLS (`wss://`) on a reverse proxy in front of it.
    pub fn websocket_listen(mut self, addr: SocketAddr) -> Self {
        self.websocket_listen = Some(addr);
        self
    }

    /// The `Origin`s a browser may open a WebSocket from (for example
    /// `https://game.example.com`); empty, the default, allows any. An
    /// upgrade whose `Origin` is not listed, or that has two, is refused
    /// with 403 Forbidden and counted (`websocket_origin_refused`). A request without
    /// `Origin` is not a browser's and is let through: the list stops other
    /// sites' pages from using a player's browser, it authenticates nobody.
    pub fn websocket_origins<I, S>(mut self, origins: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.websocket_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// The address other nodes link to (port 0 picks one; see
    /// [`Node::peer_addr`]).
    pub fn peer_listen(mut self, addr: SocketAddr) -> Self {
        self.peer_listen = Some(addr);
        self
    }

    /// A peer node of the home mesh and its link address. Of each pair, the
    /// node with the lower RID dials; the other waits for it. A node takes
    /// links only from the peers it is given (here, with
    /// [`accept_peer`](Self::accept_peer), or found by
    /// [`discover_peers`](Self::discover_peers)): a Hello from any other
    /// NodeRid gets no Welcome (docs/threading.md "Node links"), so list
    /// every peer on every node, both ways.
    pub fn peer(mut self, rid: u64, addr: SocketAddr) -> Self {
        self.peers.push((NodeRid(rid), Some(addr)));
        self
    }

    /// A peer node of the home mesh that dials this node (its RID is the
    /// lower of the pair): its links are taken, and this node, which never
    /// dials it, needs no address. A peer with a higher RID than this node's
    /// is dialled by this node, so it needs [`peer`](Self::peer); given
    /// here, it fails startup, naming it.
    pub fn accept_peer(mut self, rid: u64) -> Self {
        self.peers.push((NodeRid(rid), None));
        self
    }

    /// Finds the home mesh's peers in the Location Store instead of (or
    /// besides) [`peer`](Self::peer): the node registers its lifecycle at its
    /// peer address and follows the store's membership, dialling listed peers
    /// and dropping, for good, those whose lease lapsed (docs/store.md
    /// "Membership"). Needs a Location Store, a cluster secret and a
    /// [`peer_listen`](Self::peer_listen) address peers can reach. The
    /// membership is the owner lease's, which is the home mesh's: peers of a
    /// [`join_mesh`](Self::join_mesh) mesh are configured.
    pub fn discover_peers(mut self) -> Self {
        self.discover = true;
        self
    }

    /// The cluster secret that authenticates the home mesh's links (required
    /// with links).
    pub fn cluster_secret(mut self, secret: ClusterSecret) -> Self {
        self.secret = Some(secret);
        self
    }

    /// The home mesh: the one this node's Actors are reached through (its
    /// Location Store rows name it, §4) and its [`peer`](Self::peer)s link
    /// in (the default is "default").
    pub fn mesh(mut self, mesh: &str) -> Self {
        mesh.clone_into(&mut self.mesh);
        self
    }

    /// Joins a further mesh (§3: several meshes may be configured), with its
    /// own secret and peers; needs the home mesh's
    /// [`cluster_secret`](Self::cluster_secret). Two meshes of one name, or
    /// a peer listed in two meshes, fail startup.
    pub fn join_mesh(mut self, mesh: Mesh) -> Self {
        self.joined.push(mesh);
        self
    }

    /// The object role (§3).
    pub fn object_role(mut self, role: ObjectRole) -> Self {
        self.role = role;
        self
    }

    /// The Location Store (§3): always explicit, never a hidden authority.
    pub fn location_store(mut self, store: Arc<dyn LocationStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// §3: enables global Actor dispatch. It takes no mesh name.
    ///
    /// It stays a call of its own (issue 21 item 5) because it is what
    /// makes [`start`](Self::start) run §3's startup checks (S1, docs/contract.md):
    /// with dispatch enabled, a node without an object role
    /// ([`object_role`](Self::object_role) `Client` or `Server`) or without
    /// a [`location_store`](Self::location_store) fails to start with a
    /// configuration error, instead of running with no authority to find
    /// its Actors by. Registering an Actor type does not turn it on: a
    /// node that only relays to Actors elsewhere says so with this call
    /// too.
    pub fn enable_actor_dispatch(mut self) -> Self {
        self.dispatch = true;
        self
    }

    /// Overrides the NodeGeneration (tests of restarts); by default a new one
    /// is taken from the wall clock at every start.
    pub fn node_generation(mut self, generation: u64) -> Self {
        self.generation = Some(NodeGeneration(generation));
        self
    }

    /// Replaces the settings.
    pub fn settings(mut self, settings: NodeSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Registers an Actor type: its Entry Spot (§1, §7: the Spot of every
    /// Actor of the type not created into a User Spot; its Actors run
    /// [`ExecutionMode::PerActor`]) and its factory.
    pub fn actor_type(
        mut self,
        name: &str,
        spot: Arc<dyn Spot>,
        factory: impl Fn(&ActorId) -> Box<dyn Actor> + Send + Sync + 'static,
    ) -> Self {
        self.actor_types.insert(
            name.to_owned(),
            ActorType {
                spot,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// Registers a kind of User Spot (§1, §5): [`Node::create_spot`] makes
    /// Spots of it at run time (a room, a match), each with its own Spot
    /// object from `factory`, and every Spot of the kind orders its Actors'
    /// turns by `mode`.
    pub fn spot_kind(
        mut self,
        name: &str,
        mode: ExecutionMode,
        factory: impl Fn(&SpotId) -> Arc<dyn Spot> + Send + Sync + 'static,
    ) -> Self {
        self.spot_kinds.insert(
            name.to_owned(),
            SpotKind {
                mode,
                factory: Arc::new(factory),
            },
        );
        self
    }

    /// Registers the typed handler of a packet key. Registering one key twice
    /// fails startup (§3).
    pub fn on_packet<F, Fut>(mut self, key: PacketKey, handler: F) -> Self
    where
        F: Fn(Session, Packet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + 'static,
    {
        let handler: PacketHandler = Arc::new(move |session, packet, mut out| {
            out.set(Some(smallbox!(handler(session, packet))));
        });
        if self.handlers.packets.insert(key, handler).is_some() {
            self.duplicate_key.get_or_insert(key);
        }
        self
    }

    /// Registers the typed handler of `M` under `M::KEY` (issue 21 item 4:
    /// request type in, reply type out). The payload is decoded as an `M`
    /// — one that is not gets `MalformedPayload` naming `M`, and the
    /// handler does not run — and the handler's `Ok` is encoded as the
    /// client's reply, its `Err` (an [`Error::app`] among them) is the
    /// client's typed error. A one-way message of the key runs the handler
    /// too; its reply goes nowhere. For a handler that relays the packet to
    /// an Actor, use [`on_packet`](Self::on_packet) and
    /// [`Packet::decode`]. One key, one handler, typed or not (§3).
    pub fn on_message<M, F, Fut>(self, handler: F) -> Self
    where
        M: Message,
        F: Fn(Session, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Reply, Error>> + 'static,
    {
        let handler = Arc::new(handler);
        self.on_packet(M::KEY, move |session, packet| {
            let handler = Arc::clone(&handler);
            async move {
                let message = packet.decode::<M>()?;
                let outcome = handler(session.clone(), message).await;
                session.reply(packet, typed::encode_outcome(outcome))
            }
        })
    }

    /// §1 step 1: the connect callback, which authenticates the client. It
    /// runs on the session's lane with the client's first packet (its hello,
    /// whatever its key: a token, credentials), before any packet handler;
    /// packets that arrive meanwhile wait on the lane. `Ok`: the session is
    /// authenticated — keep what later callbacks need with
    /// [`Session::set_attribute`] (the player's id), bind its Actors if you
    /// like, answer a hello request with [`Session::reply`]. `Err`: a hello
    /// request gets that error, the connection closes with
    /// `CloseReason::AuthenticationFailed`, and no packet handler runs for
    /// the packets that waited. Without it every session is accepted and
    /// its first packet goes to its packet handler.
    pub fn on_connect<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Session, Packet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + 'static,
    {
        let handler: PacketHandler = Arc::new(move |session, hello, mut out| {
            out.set(Some(smallbox!(handler(session, hello))));
        });
        self.handlers.on_connect = Some(handler);
        self
    }

    /// §7, §10: the session's disconnect callback. It runs once per session
    /// after its connection ended (whatever ended it), on the session's
    /// lane after the callback running then (never overlapping it, W1); the
    /// session's attributes are still there. It does not notify the bound
    /// Actors — the framework already did (§7), without waiting for this
    /// callback, which may await. Like every session callback that runs
    /// after the connection ended, it is dropped if it is still running at
    /// the lifecycle deadline (`NodeSettings::disconnect_deadline`); an
    /// error is logged.
    pub fn on_disconnect<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Session) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + 'static,
    {
        let handler: DisconnectHandler = Arc::new(move |session, mut out| {
            out.set(Some(smallbox!(handler(session))));
        });
        self.handlers.on_disconnect = Some(handler);
        self
    }

    /// §6: the duplicate-Actor-connection callback, run on a session whose
    /// binding of `actor` was replaced by another session. Its terminal
    /// starts the 100 ms close.
    pub fn on_replaced<F, Fut>(mut self, handler: F) -> Self
    where
        F: Fn(Session, ActorId) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), Error>> + 'static,
    {
        let handler: ReplacedHandler = Arc::new(move |session, actor, mut out| {
            out.set(Some(smallbox!(handler(session, actor))));
        });
        self.handlers.on_replaced = Some(handler);
        self
    }

    /// Lets another thread end this node's start with `cancel`, such as a
    /// supervisor's SIGTERM while the start waits for the store or for a
    /// predecessor's lease: [`start`](Self::start) then returns
    /// [`StartError::Cancelled`] and gives back what it took
    /// (docs/operations.md "Stopping a start").
    pub fn cancel_with(mut self, cancel: StartCancel) -> Self {
        self.cancel = cancel;
        self
    }

    /// Checks §3 and starts the node's shards. With a Location Store, the
    /// start first takes the node's owner lease (§5), on the calling
    /// thread: it waits out a lease a crashed predecessor left (up to one
    /// lease term), and it waits for a store that does not answer, trying
    /// again every 250 ms to 4 s until it does (docs/operations.md
    /// "Probes"). A store that refuses (another live process holds the
    /// lease, a wrong password) fails the start. A start that fails after
    /// taking the lease, or is cancelled ([`cancel_with`](Self::cancel_with)),
    /// gives it back.
    pub fn start(self) -> Result<Node, StartError> {
        if let Some(key) = self.duplicate_key {
            return Err(StartError::DuplicatePacketHandler(key));
        }
        let mesh = MeshName::new(&self.mesh)
            .map_err(|e| StartError::Invalid(format!("mesh name: {e}")))?;
        self.settings.check_lane_bounds()?;
        self.settings.check_turn_deadline()?;
        self.settings.check_frame_limit()?;
        // A BindOrGet names the type to the node owning the Actor's row
        // (command 71), so a type's name must travel (1 to 255 bytes).
        if let Some(name) = self
            .actor_types
            .keys()
            .find(|name| crate::ids::ActorTypeName::new(name).is_err())
        {
            return Err(StartError::Invalid(format!(
                "actor type name {name:?}: 1 to {} bytes of UTF-8",
                crate::ids::ActorTypeName::LEN_MAX
            )));
        }
        if self.settings.max_sessions == 0 {
            return Err(StartError::Invalid(
                "max_sessions = 0: a node holds at least 1 session".to_owned(),
            ));
        }
        if self.dispatch && self.role == ObjectRole::None {
            return Err(StartError::NoObjectRole);
        }
        let store = match (self.dispatch, self.store) {
            (true, None) => return Err(StartError::NoLocationStore),
            (_, store) => store,
        };
        if self.discover {
            let reachable = self.peer_listen.is_some_and(|a| !a.ip().is_unspecified());
            if store.is_none() || self.secret.is_none() || !reachable {
                return Err(StartError::Invalid(
                    "discover_peers needs a Location Store, a cluster secret and a peer_listen                      address peers can reach (not 0.0.0.0)"
                        .to_owned(),
                ));
            }
        }
        let (meshes, peers) = link_meshes(self.rid, &mesh, self.secret, self.peers, self.joined)?;
        // A peer at this node's own peer address would be a link to itself
        // (issue 20 item 6): a dead end, refused here rather than retried.
        if let Some(&(rid, Some(addr), _)) = peers
            .iter()
            .find(|(_, addr, _)| addr.is_some_and(|a| Some(a) == self.peer_listen && a.port() != 0))
        {
            return Err(StartError::Invalid(format!(
                "peer {rid} is at {addr}, this node's own peer_listen address"
            )));
        }
        let generation = self
            .generation
            .unwrap_or_else(NodeGeneration::from_wall_clock);
        let config = runtime::NodeConfig {
            rid: self.rid,
            generation,
            mesh,
            listen: self.listen,
            websocket_listen: self.websocket_listen,
            websocket_origins: self.websocket_origins,
            peer_listen: self.peer_listen,
            peers,
            discover: self.discover,
            meshes,
            hosts_actors: self.role == ObjectRole::Server,
            store,
            settings: self.settings,
            handlers: Arc::new(self.handlers),
            actor_types: self.actor_types,
            spot_kinds: self.spot_kinds,
            cancel: self.cancel,
        };
        let settings = config.settings.clone();
        runtime::start(config).map(|running| Node { running, settings })
    }
}

/// The meshes a node links in (its home mesh first) and every peer with the
/// index of its mesh. A NodeRid names one process in every mesh
/// (docs/threading.md "Several meshes"), so a peer listed in two meshes is a
/// configuration error, as are two meshes of one name.
type LinkMeshes = (
    Vec<(MeshName, ClusterSecret)>,
    Vec<(NodeRid, Option<SocketAddr>, usize)>,
);

fn link_meshes(
    me: NodeRid,
    home: &MeshName,
    secret: Option<ClusterSecret>,
    peers: Vec<(NodeRid, Option<SocketAddr>)>,
    joined: Vec<Mesh>,
) -> Result<LinkMeshes, StartError> {
    let Some(secret) = secret else {
        // A peer with no secret to authenticate the link would be a node
        // that starts and then never links, silently (issue 20 item 6).
        if let Some((rid, _)) = peers.first() {
            return Err(StartError::Invalid(format!(
                "peer {rid} needs the home mesh's cluster_secret: without it no link can be \
                 authenticated"
            )));
        }
        if joined.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        return Err(StartError::Invalid(
            "join_mesh needs the home mesh's cluster_secret".to_owned(),
        ));
    };
    let mut meshes = vec![(home.clone(), secret)];
    let mut all: Vec<(NodeRid, Option<SocketAddr>, usize)> = peers
        .into_iter()
        .map(|(rid, addr)| (rid, addr, 0))
        .collect();
    for mesh in joined {
        let name = MeshName::new(&mesh.name)
            .map_err(|e| StartError::Invalid(format!("mesh name: {e}")))?;
        if meshes.iter().any(|(m, _)| *m == name) {
            return Err(StartError::Invalid(format!("mesh {name} is joined twice")));
        }
        let index = meshes.len();
        all.extend(mesh.peers.into_iter().map(|(rid, addr)| (rid, addr, index)));
        meshes.push((name, mesh.secret));
    }
    for (i, &(rid, addr, mesh)) in all.iter().enumerate() {
        // The lower RID dials: a peer this node must dial needs an address
        // (issue 20 item 6: a link that would never come up, silently).
        if addr.is_none() && rid > me {
            return Err(StartError::Invalid(format!(
                "peer {rid} is given without an address (accept_peer), but this node ({me}) \
                 has the lower RID and dials it: give it with peer({rid}, address)"
            )));
        }
        if let Some(&(_, _, other)) = all[..i].iter().find(|p| p.0 == rid && p.2 != mesh) {
            return Err(StartError::Invalid(format!(
                "peer {rid} is listed in meshes {} and {}: a NodeRid names one process, \
                 linked in one mesh of this node",
                meshes[other].0, meshes[mesh].0
            )));
        }
    }
    Ok((meshes, all))
}

/// Where [`Node::relocate`] moves an Actor (§2: the relocation runtime
/// chooses; an operator or a test may hint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocateTo {
    /// The placement policy's choice: the peers linked in the home mesh in
    /// turn (an Actor stays reached through the mesh its row names).
    Any,
    /// The node with this RID, if it is a peer linked in the home mesh.
    Node(u64),
}

impl RelocateTo {
    /// The hint the relocation runtime is given, if any.
    fn hint(self) -> Option<NodeRid> {
        match self {
            RelocateTo::Any => None,
            RelocateTo::Node(rid) => Some(NodeRid(rid)),
        }
    }
}

/// Waits for a node's owner lease to lapse ([`Node::lease_watch`]).
#[derive(Clone)]
pub struct LeaseWatch(Arc<crate::runtime::lease::LeaseLapse>);

impl LeaseWatch {
    /// Blocks until the lease lapsed (at once if it already did).
    pub fn wait(&self) {
        self.0.wait();
    }
}

impl std::fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseWatch")
            .field("lapsed", &self.0.is_set())
            .finish()
    }
}

/// A running node.
pub struct Node {
    running: RunningNode,
    settings: NodeSettings,
}

impl Node {
    /// The bound STREAM address, when the node listens.
    pub fn stream_addr(&self) -> Option<SocketAddr> {
        self.running.stream_addr()
    }

    /// The bound WebSocket address, when the node listens for WebSocket
    /// clients ([`NodeBuilder::websocket_listen`]).
    pub fn websocket_addr(&self) -> Option<SocketAddr> {
        self.running.websocket_addr()
    }

    /// The bound node-link address, when the node accepts links.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.running.peer_addr()
    }

    /// Looks up or creates the Actor `id` of `actor_type` on this node (§1
    /// step 2), before any session binds it. A new Actor belongs to its
    /// type's Entry Spot; an existing one is returned whatever its Spot.
    pub fn create_actor(&self, actor_type: &str, id: &ActorId) -> Result<ActorRef, Error> {
        self.running
            .create_actor(actor_type, id.clone(), None)
            .map_err(|e| about_lookup(e, actor_type, id))
    }

    /// §1: creates the User Spot `id` of the registered `kind` on this node
    /// (a room, say), at its home shard. Creating it again with the same
    /// kind returns the same Spot; `NotFound` (NoSpotKind) for a kind not
    /// registered, `InvalidOperation` (SpotIdInUse) when a Spot of another
    /// kind has the id.
    pub fn create_spot(&self, kind: &str, id: &SpotId) -> Result<SpotHandle, Error> {
        self.running
            .create_spot(kind, id.clone())
            .map_err(|e| match e.reason() {
                Reason::NoSpotKind => e.about_type(kind),
                _ => e.about_spot(id),
            })
    }

    /// §1: looks up or creates the Actor `id` of `actor_type` on this node,
    /// as a member of the User Spot `spot`: that Spot receives its
    /// `on_disconnect_actor` (§7), and its kind's execution mode orders its
    /// turns (§5). An Actor of a SpotWide Spot must be named under it
    /// ([`SpotId::actor_id`]: `<spot>/<name>`), or the call ends with
    /// `InvalidOperation` (NotPlacedWithSpot). An Actor that already exists
    /// in another Spot, or on another node, is not moved: `InvalidOperation`
    /// (ActorInOtherSpot).
    pub fn create_actor_in(
        &self,
        spot: &SpotHandle,
        actor_type: &str,
        id: &ActorId,
    ) -> Result<ActorRef, Error> {
        self.running
            .create_actor(actor_type, id.clone(), Some(spot.clone()))
            .map_err(|e| about_lookup(e, actor_type, id))
    }

    /// How many Actors this node hosts, as of its shards' last loop turns
    /// (diagnostics): creating one adds one, destroying one removes it, and
    /// a disconnect notification changes nothing (§7).
    pub fn actor_count(&self) -> usize {
        self.running.actor_and_spot_counts().0
    }

    /// How many User Spots this node has created, as of its shards' last
    /// loop turns (diagnostics).
    pub fn spot_count(&self) -> usize {
        self.running.actor_and_spot_counts().1
    }

    /// Destroys the Actor `id` that this node hosts (§1, §4): its Location
    /// Store row is removed and its incarnation ends, with its binding. A
    /// later `create_actor` under the same id makes a new incarnation with a
    /// greater ObjectGeneration, and the old binding never becomes valid
    /// again (X6). `Unavailable` when this node does not host it, and
    /// (RelocationSealed) while it is being relocated. A removal whose
    /// answer the store did not give is made again until it answers
    /// (docs/store.md): this call returns then, or `Unavailable`
    /// (StoreUnavailable) once the node's lease lapsed first; the Actor
    /// serves nothing meanwhile.
    pub fn destroy_actor(&self, id: &ActorId) -> Result<(), Error> {
        self.running
            .destroy_actor(id.clone())
            .map_err(|e| e.about_actor(id))
    }

    /// §8 live relocation: moves the Actor `id` that this node hosts to
    /// another node of the mesh while its bound session stays connected
    /// wherever it is (docs/relocation.md). The relocation runtime chooses
    /// the target (§2): with [`RelocateTo::Any`] the next peer linked in
    /// the home mesh in turn; with [`RelocateTo::Node`] the operator's hint,
    /// refused with `InvalidOperation` (RelocationTargetInvalid) when it is
    /// not a peer linked in the home mesh. Returns when the move committed (`Ok`), or with the typed error
    /// of an abort (the Actor stays here, with nothing lost) or of a failure
    /// after relay-ready (no path reopens the source: the Actor is gone
    /// until it is created again, §8.1 L6). `DeadlineExceeded` when no
    /// outcome came within the flow's bounded waits (docs/relocation.md).
    /// `InvalidOperation` (NotRelocatable) when its type gives no snapshot
    /// ([`Actor::snapshot`]) or it belongs to a User Spot.
    pub fn relocate(&self, id: &ActorId, to: RelocateTo) -> Result<(), Error> {
        self.running
            .relocate(id.clone(), to.hint(), self.relocation_wait())
            .map_err(|e| e.about_actor(id))
    }

    /// How long `relocate` waits for a move's outcome: every bounded wait of
    /// the flow (docs/relocation.md "Settings") plus the seal timeout as a
    /// margin. Past it the caller gets `DeadlineExceeded`; the move itself
    /// still ends as the core decides.
    fn relocation_wait(&self) -> Duration {
        let r = &self.settings.relocation;
        r.seal_request_timeout
            + r.prepare_timeout
            + r.finish_timeout
            + self.settings.relocation_seal_timeout
    }

    /// §8: moves the SpotWide User Spot `id`, which this node created, with
    /// all its Actors to another node, as one unit: the Spot's gate holds
    /// its Actors' work for the whole move, the Actors move one after the
    /// other, and only one node's gate ever runs their turns. The target is
    /// chosen as for [`Node::relocate`]. Returns when the last Actor
    /// committed, or with the first failure's typed error: the Actors still
    /// here then keep the Spot here, and those already moved stay in the
    /// Spot at the target (calling it again moves the rest). A PerActor
    /// User Spot cannot move (`InvalidOperation`, NotRelocatable).
    pub fn relocate_spot(&self, id: &SpotId, to: RelocateTo) -> Result<(), Error> {
        self.running
            .relocate_spot(id.clone(), to.hint(), self.relocation_wait())
            .map_err(|e| e.about_spot(id))
    }

    /// §10 Relocate of this Actor owner host (a drain before a deploy):
    /// moves every Actor it hosts by the same path as [`Node::relocate`],
    /// and every SpotWide Spot it created with its Actors
    /// ([`Node::relocate_spot`]), all at once, and returns what could not
    /// move, each with its typed error (a move that aborted leaves it here,
    /// served as before; `DeadlineExceeded` for one still moving after the
    /// flow's bounded waits). Without a hint, a peer that cannot host a type
    /// (NoActorFactory: a client-role node, say) refuses before anything
    /// moved, and the next peer is asked.
    /// [`Node::shutdown`] does this too when the node has linked peers.
    pub fn relocate_all(&self, to: RelocateTo) -> Vec<(RelocationUnit, Error)> {
        let until = std::time::Instant::now() + self.relocation_wait();
        self.running.relocate_all(to.hint(), until)
    }

    /// Sends to and requests from Actors by ActorId from node code outside
    /// any Actor — a service thread, an admin endpoint, a session callback
    /// (docs/actors.md "From node code"): the same routes and rules as an
    /// Actor's [`ActorContext::send`](super::ActorContext::send) and
    /// [`ActorContext::request`](super::ActorContext::request). The handle
    /// is cheap to clone and to move to another thread.
    pub fn caller(&self) -> super::ActorCaller {
        self.running.caller()
    }

    /// Waits until the link to node `rid` is up; `false` at the timeout.
    pub fn wait_linked(&self, rid: u64, timeout: Duration) -> bool {
        self.running.wait_linked(NodeRid(rid), true, timeout)
    }

    /// Waits until the link to node `rid` is down; `false` at the timeout.
    pub fn wait_unlinked(&self, rid: u64, timeout: Duration) -> bool {
        self.running.wait_linked(NodeRid(rid), false, timeout)
    }

    /// Which backend runs the socket loops (diagnostics): `IoUring` or
    /// `Epoll`, never `Auto`.
    pub fn io_backend(&self) -> IoBackend {
        self.running.io_backend()
    }

    /// The node's metrics (every flow-trace counter, sessions, bound
    /// sessions, Actors and Spots per node and per shard, link states,
    /// lease time left, store latency and errors) and its readiness, with
    /// no endpoint: [`NodeMetrics::encode`] gives the Prometheus text, and
    /// a `NodeMetrics` is a `prometheus_client` collector an embedder can
    /// register in a registry of its own. The handle outlives
    /// [`Node::shutdown`], so a probe sees the drain through to its end
    /// (docs/operations.md "Metrics", "Probes").
    pub fn metrics(&self) -> NodeMetrics {
        self.running.metrics()
    }

    /// The flow-trace counters of every shard, summed (diagnostics).
    pub fn flow_counters(&self) -> FlowCounters {
        self.running.flow_counters()
    }

    /// §5: whether this node's owner lease lapsed (it could not be renewed
    /// in time, e.g. the process was paused past it): the node then fenced
    /// its Actors and this process lifecycle is dead to the mesh for good.
    /// It should stop ([`Node::shutdown`] closes its sessions with a
    /// reason) and start again as a new lifecycle (docs/store.md "A lapsed
    /// lease").
    pub fn lease_lapsed(&self) -> bool {
        self.running.lease_lapsed()
    }

    /// A handle another thread can block on until the owner lease lapses
    /// ([`Node::lease_lapsed`]), e.g. to stop the node then.
    pub fn lease_watch(&self) -> LeaseWatch {
        LeaseWatch(self.running.lease_lapse())
    }

    /// §10 Shutdown (X7): first refuses new sessions and bindings, then
    /// moves the Actors this node hosts to its linked peers, all at once
    /// ([`Node::relocate_all`]; those that cannot move by the deadline end
    /// with the node), finishes accepted callbacks, replies and cleanup
    /// until `NodeSettings::shutdown_deadline` (the moves get at least the
    /// flow's bounded waits, so none is stopped mid-move), then closes every
    /// connection (with `CloseReason::Shutdown`) and
    /// stops. Dropping a `Node` stops it at once.
    pub fn shutdown(self) {
        let deadline = self.settings.shutdown_deadline;
        let cleanup = self.settings.disconnect_deadline + Duration::from_secs(1);
        let relocation_wait = self.relocation_wait();
        self.running.shutdown(deadline, cleanup, relocation_wait);
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("stream_addr", &self.stream_addr())
            .field("io_backend", &self.io_backend())
            .finish()
    }
}
