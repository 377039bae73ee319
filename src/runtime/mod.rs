//! The node runtime: shards on threads, each running a [`ShardCore`] on an
//! io_uring reactor, with the application's Actors and session callbacks
//! (docs/threading.md).
//!
//! This slice runs one shard per node; records for another node wait for the
//! ROUTER links (their requests end at their deadlines with typed errors).

mod executor;
mod links;
mod shard;

pub(crate) use shard::ShardHandle;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::api::actor::{Actor, Spot};
use crate::api::session::{Packet, Session};
use crate::api::{NodeSettings, StartError};
use crate::core::actor::ActorOwnerIdentity;
use crate::core::session::{SessionOwnerConfig, SessionOwnerIdentity};
use crate::core::shard::{ShardConfig, ShardCore};
use crate::core::time::Instant;
use crate::core::trace::{FlowCounters, FlowTrace};
use crate::error::Error;
use crate::ids::{ActorId, MeshName, NodeGeneration, NodeRid, PacketKey, Peer, SessionOwnerId};
use crate::net::{Reactor, ReactorConfig, ReactorError, ReactorWaker};
use crate::store::{LocationStore, OwnerLease};

use self::executor::{Executor, Unpark};
use self::links::{LinkConfig, LinkStatus, Links};
use self::shard::ShardState;
use crate::net::handshake::ClusterSecret;
use crate::net::ListenerId;
use crate::wire::link::LinkIdentity;

type LocalResult = Pin<Box<dyn Future<Output = Result<(), Error>>>>;

/// A packet handler: builds the callback's future on the shard.
pub(crate) type PacketHandler = Arc<dyn Fn(Session, Packet) -> LocalResult + Send + Sync>;
/// The duplicate-Actor-connection callback (§6).
pub(crate) type ReplacedHandler = Arc<dyn Fn(Session, ActorId) -> LocalResult + Send + Sync>;

/// The application's session callbacks.
#[derive(Default)]
pub(crate) struct Handlers {
    pub(crate) packets: HashMap<PacketKey, PacketHandler>,
    pub(crate) on_replaced: Option<ReplacedHandler>,
}

/// Builds an Actor instance for a new incarnation.
pub(crate) type ActorFactory = Arc<dyn Fn(&ActorId) -> Box<dyn Actor> + Send + Sync>;

/// A registered Actor type.
pub(crate) struct ActorType {
    pub(crate) spot: Arc<dyn Spot>,
    pub(crate) factory: ActorFactory,
}

/// Everything a node is started with.
pub(crate) struct NodeConfig {
    pub(crate) rid: NodeRid,
    pub(crate) generation: NodeGeneration,
    pub(crate) mesh: MeshName,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) peer_listen: Option<SocketAddr>,
    pub(crate) peers: Vec<(NodeRid, SocketAddr)>,
    pub(crate) secret: Option<ClusterSecret>,
    pub(crate) hosts_actors: bool,
    pub(crate) store: Option<Arc<dyn LocationStore>>,
    pub(crate) settings: NodeSettings,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) actor_types: HashMap<String, ActorType>,
}

/// What every shard of a node shares (read-only after start).
pub(crate) struct NodeShared {
    pub(crate) settings: NodeSettings,
    pub(crate) handlers: Arc<Handlers>,
    pub(crate) actor_types: HashMap<String, ActorType>,
    pub(crate) store: Option<Arc<dyn LocationStore>>,
    /// The owner lease, renewed by the shard loop; read when an Actor is
    /// created (never on the bind, relay, push or disconnect paths).
    pub(crate) lease: Option<std::sync::Mutex<OwnerLease>>,
    pub(crate) hosts_actors: bool,
    origin: std::time::Instant,
}

impl NodeShared {
    /// The core's time: microseconds since the node started.
    pub(crate) fn now(&self) -> Instant {
        let micros = self.origin.elapsed().as_micros();
        Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

struct WakeReactor(ReactorWaker);

impl Unpark for WakeReactor {
    fn unpark(&self) {
        self.0.wake();
    }
}

/// The flow-trace counters a shard publishes after every loop turn.
pub(crate) struct PublishedCounters {
    counts: Vec<AtomicU64>,
}

impl PublishedCounters {
    fn new() -> Self {
        Self {
            counts: FlowTrace::ALL.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn publish(&self, counters: &FlowCounters) {
        for (slot, &event) in self.counts.iter().zip(FlowTrace::ALL) {
            slot.store(counters.get(event), Ordering::Relaxed);
        }
    }

    fn add_into(&self, total: &mut FlowCounters) {
        for (slot, &event) in self.counts.iter().zip(FlowTrace::ALL) {
            total.add(event, slot.load(Ordering::Relaxed));
        }
    }
}

/// A request from outside the shard threads (the embedding application).
pub(crate) enum NodeCommand {
    /// Look up or create an Actor on this node (§1 step 2).
    CreateActor {
        actor_type: String,
        id: ActorId,
        reply: mpsc::Sender<Result<crate::ids::ActorRef, Error>>,
    },
}

/// The shard's inbox for [`NodeCommand`]s: lock-free, with a wake-up.
pub(crate) type Commands = crossbeam_queue::SegQueue<NodeCommand>;

/// A started node: its shard threads.
pub(crate) struct RunningNode {
    stop: Arc<AtomicBool>,
    wakers: Vec<ReactorWaker>,
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<PublishedCounters>>,
    stream_addr: Option<SocketAddr>,
    peer_addr: Option<SocketAddr>,
    link_status: Arc<LinkStatus>,
    commands: Arc<Commands>,
}

impl RunningNode {
    pub(crate) fn stream_addr(&self) -> Option<SocketAddr> {
        self.stream_addr
    }

    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer_addr
    }

    /// Runs a command on the shard and waits for its answer.
    pub(crate) fn create_actor(
        &self,
        actor_type: &str,
        id: ActorId,
    ) -> Result<crate::ids::ActorRef, Error> {
        let (reply, answer) = mpsc::channel();
        self.commands.push(NodeCommand::CreateActor {
            actor_type: actor_type.to_owned(),
            id,
            reply,
        });
        for waker in &self.wakers {
            waker.wake();
        }
        answer
            .recv()
            .unwrap_or_else(|_| Err(crate::error::Reason::SessionClosing.into()))
    }

    pub(crate) fn wait_linked(&self, rid: NodeRid, timeout: std::time::Duration) -> bool {
        self.link_status.wait_up(rid, timeout)
    }

    pub(crate) fn flow_counters(&self) -> FlowCounters {
        let mut total = FlowCounters::default();
        for counters in &self.counters {
            counters.add_into(&mut total);
        }
        total
    }

    pub(crate) fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Release);
        for waker in &self.wakers {
            waker.wake();
        }
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

/// Starts the node: takes the owner lease, then the shard thread, whose
/// reactor is built on the thread itself; an io_uring that is not permitted
/// fails the start at once with a configuration error (docs/threading.md).
pub(crate) fn start(config: NodeConfig) -> Result<RunningNode, StartError> {
    let lease = match (&config.store, config.hosts_actors) {
        (Some(store), true) => Some(
            store
                .acquire_lease(config.rid, config.generation, &config.mesh)
                .map_err(|e| StartError::Lease(e.to_string()))?,
        ),
        _ => None,
    };
    let lease_generation = lease.as_ref().map(|l| l.generation).unwrap_or_default();
    let shared = Arc::new(NodeShared {
        settings: config.settings,
        handlers: config.handlers,
        actor_types: config.actor_types,
        store: config.store,
        lease: lease.map(std::sync::Mutex::new),
        hosts_actors: config.hosts_actors,
        origin: std::time::Instant::now(),
    });
    let me = Peer {
        rid: config.rid,
        generation: config.generation,
    };
    let shard_config = ShardConfig {
        session_owner: SessionOwnerIdentity {
            node: config.rid,
            lifecycle: config.generation,
            owner_id: SessionOwnerId(0),
            lease: lease_generation,
        },
        actor_owner: ActorOwnerIdentity {
            mesh: config.mesh,
            node: config.rid,
            node_generation: config.generation,
            lease: lease_generation,
        },
        sessions: SessionOwnerConfig {
            replacement_callback_timeout: shared.settings.replacement_callback_timeout,
            bind_timeout: shared.settings.bind_timeout,
            disconnect_deadline: shared.settings.disconnect_deadline,
        },
    };
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(PublishedCounters::new());
    let (ready_tx, ready_rx) = mpsc::channel();
    let listen = config.listen;
    let peer_listen = config.peer_listen;
    let link_config = config.secret.clone().map(|secret| LinkConfig {
        me: LinkIdentity {
            mesh: shard_config.actor_owner.mesh.clone(),
            rid: config.rid,
            generation: config.generation,
        },
        secret,
        // One link per pair: the lower NodeRid dials (docs/threading.md).
        dial: config
            .peers
            .iter()
            .copied()
            .filter(|(rid, _)| *rid > config.rid)
            .collect(),
    });
    let link_status = Arc::new(LinkStatus::default());
    let commands = Arc::new(Commands::new());
    let thread = {
        let stop = Arc::clone(&stop);
        let counters = Arc::clone(&counters);
        let link_status = Arc::clone(&link_status);
        let commands = Arc::clone(&commands);
        std::thread::Builder::new()
            .name(format!("zlink-shard-{}-0", me.rid))
            .spawn(move || {
                let (reactor, addrs) = match setup_shard(listen, peer_listen) {
                    Ok(ok) => ok,
                    Err(error) => {
                        let _ = ready_tx.send(Err(error));
                        return;
                    }
                };
                let waker = reactor.waker();
                let _ = ready_tx.send(Ok((waker.clone(), addrs.stream, addrs.peer)));
                let now = shared.now();
                let core = ShardCore::new(shard_config, now);
                let executor = Executor::new(WakeReactor(waker));
                let spawner = executor.spawner();
                let links = Links::new(link_config, shared.settings.decode_limits, link_status);
                let state = ShardState::new(
                    Arc::clone(&shared),
                    reactor,
                    links,
                    addrs.peer_listener,
                    core,
                    me,
                );
                let handle = ShardHandle::new(state, spawner);
                shard::run(handle, executor, stop, &counters, &commands);
            })
            .map_err(|e| StartError::Io(e.to_string()))?
    };
    let (waker, stream_addr, peer_addr) = match ready_rx.recv() {
        Ok(Ok(ready)) => ready,
        Ok(Err(error)) => {
            let _ = thread.join();
            return Err(error);
        }
        Err(_) => {
            let _ = thread.join();
            return Err(StartError::Io(
                "the shard thread ended during start".to_owned(),
            ));
        }
    };
    Ok(RunningNode {
        stop,
        wakers: vec![waker],
        threads: vec![thread],
        counters: vec![counters],
        stream_addr,
        peer_addr,
        link_status,
        commands,
    })
}

/// What a shard's reactor listens on.
struct ShardAddrs {
    stream: Option<SocketAddr>,
    peer: Option<SocketAddr>,
    peer_listener: Option<ListenerId>,
}

fn setup_shard(
    listen: Option<SocketAddr>,
    peer_listen: Option<SocketAddr>,
) -> Result<(Reactor, ShardAddrs), StartError> {
    let mut reactor = Reactor::new(ReactorConfig::default()).map_err(|e| match e {
        ReactorError::IoUringUnavailable { .. } => StartError::IoUring(e.to_string()),
        other => StartError::Io(other.to_string()),
    })?;
    let mut bind = |addr: SocketAddr| {
        reactor
            .listen(addr)
            .map_err(|e| StartError::Io(format!("listen on {addr}: {e}")))
    };
    let stream = listen.map(&mut bind).transpose()?.map(|(_, addr)| addr);
    let peer = peer_listen.map(&mut bind).transpose()?;
    let addrs = ShardAddrs {
        stream,
        peer: peer.map(|(_, addr)| addr),
        peer_listener: peer.map(|(listener, _)| listener),
    };
    Ok((reactor, addrs))
}
