//! The systems under test (issue 5 item 2). Each starts on loopback in this
//! process, on its own threads, and hands back the address the load client
//! connects to; all of them answer the client's LOGIN, RELAY and (where the
//! system has a protocol) PUSH in the same framing.

mod forward;
mod game_server;
mod ractor_game;
mod raw_epoll;
mod raw_uring;
mod tokio_game;
pub(crate) mod zlink;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Instant;

use ::zlink::api::IoBackend;

use crate::args::{Options, Workload};
use crate::client::LoadSpec;

/// A system the bench can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SystemKind {
    /// zlink with its shards on io_uring (issue 8: the default backend).
    Zlink,
    /// zlink with its shards on epoll (issue 8: where io_uring is denied),
    /// everything above the IO seam the same.
    ZlinkEpoll,
    /// The local path (issue 24 item 3): `zlink` on one node, each session
    /// and its player on it, so no record crosses a link; what a game that
    /// hosts a player's Actor with its session runs, and what a studio
    /// compares with plain tokio first. `--nodes 1` makes `zlink` this.
    ZlinkLocal,
    /// The local path with the shards on epoll.
    ZlinkEpollLocal,
    /// The limit of the cross-node path on io_uring: a two-hop forwarder.
    RawUring,
    /// The limit of the cross-node path on epoll (tokio current-thread).
    RawEpoll,
    /// The limit of the local path on io_uring (issue 24 item 3): one hop,
    /// the client's frame answered by the thread that read it.
    RawUringOneHop,
    /// The limit of the local path on epoll (tokio current-thread).
    RawEpollOneHop,
    Tokio,
    Ractor,
    /// `actor-rtt`'s in-process baseline: tokio's channel round trip, two
    /// tasks per pair on a multi-thread runtime, an mpsc request and a
    /// oneshot reply ([`crate::actor_rtt`]).
    TokioChan,
    /// `actor-rtt`'s cross-node baseline: two tokio runtimes, one thread
    /// each (a "node" each, as each zlink node runs one shard), their tasks
    /// talking over one loopback TCP connection ([`crate::actor_rtt`]).
    TokioTcp,
    /// `--target`: an already running zlink mesh given by address (issue 5
    /// item 1), playing the lobby game; not started here, so not in
    /// [`SystemKind::ALL`].
    ZlinkTarget,
}

impl SystemKind {
    /// Every system, in the order `--compare` interleaves them.
    pub const ALL: [SystemKind; 12] = [
        SystemKind::Zlink,
        SystemKind::ZlinkEpoll,
        SystemKind::ZlinkLocal,
        SystemKind::ZlinkEpollLocal,
        SystemKind::RawUring,
        SystemKind::RawEpoll,
        SystemKind::RawUringOneHop,
        SystemKind::RawEpollOneHop,
        SystemKind::Tokio,
        SystemKind::Ractor,
        SystemKind::TokioChan,
        SystemKind::TokioTcp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Zlink => "zlink",
            SystemKind::ZlinkEpoll => "zlink-epoll",
            SystemKind::ZlinkLocal => "zlink-local",
            SystemKind::ZlinkEpollLocal => "zlink-epoll-local",
            SystemKind::RawUring => "raw-uring",
            SystemKind::RawEpoll => "raw-epoll",
            SystemKind::RawUringOneHop => "raw-uring-1hop",
            SystemKind::RawEpollOneHop => "raw-epoll-1hop",
            SystemKind::Tokio => "tokio",
            SystemKind::Ractor => "ractor",
            SystemKind::TokioChan => "tokio-chan",
            SystemKind::TokioTcp => "tokio-tcp",
            SystemKind::ZlinkTarget => "zlink@target",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == text)
    }

    /// The raw forwarders have no protocol, so they run `relay` only; only
    /// zlink can move a live actor, so `relocate` is its alone (and needs a
    /// second node to move to: not the local path); the game servers have
    /// no actor calling another across nodes, and the `actor-rtt`
    /// baselines nothing but that.
    pub fn runs(self, workload: Workload) -> bool {
        match self {
            SystemKind::RawUring
            | SystemKind::RawEpoll
            | SystemKind::RawUringOneHop
            | SystemKind::RawEpollOneHop
            | SystemKind::ZlinkTarget => workload == Workload::Relay,
            SystemKind::Tokio | SystemKind::Ractor => {
                !matches!(workload, Workload::Relocate | Workload::ActorRtt)
            }
            SystemKind::TokioChan | SystemKind::TokioTcp => workload == Workload::ActorRtt,
            SystemKind::ZlinkLocal | SystemKind::ZlinkEpollLocal => workload != Workload::Relocate,
            SystemKind::Zlink | SystemKind::ZlinkEpoll => true,
        }
    }

    /// `--nodes 1`: the system that runs the local path in place of this
    /// one (zlink's on one node); every other system is itself.
    pub fn local(self) -> Self {
        match self {
            SystemKind::Zlink => SystemKind::ZlinkLocal,
            SystemKind::ZlinkEpoll => SystemKind::ZlinkEpollLocal,
            other => other,
        }
    }

    /// Whether the system measures the cross-node path or is its limit
    /// (a message crosses from one node, or hop, to another): what
    /// `--compare --nodes 1` leaves out, as it measures the local path.
    pub fn crosses_nodes(self) -> bool {
        matches!(
            self,
            SystemKind::Zlink
                | SystemKind::ZlinkEpoll
                | SystemKind::RawUring
                | SystemKind::RawEpoll
                | SystemKind::TokioTcp
        )
    }

    /// How many zlink nodes the system starts (`nodes`: `--nodes`), or
    /// `None` for a system that is not a zlink mesh started here.
    pub fn zlink_nodes(self, nodes: u64) -> Option<u64> {
        match self {
            SystemKind::Zlink | SystemKind::ZlinkEpoll => Some(nodes),
            SystemKind::ZlinkLocal | SystemKind::ZlinkEpollLocal => Some(1),
            _ => None,
        }
    }

    /// The io backend a zlink system's shards run on; `None` for the others.
    pub fn zlink_backend(self) -> Option<IoBackend> {
        match self {
            SystemKind::Zlink | SystemKind::ZlinkLocal => Some(IoBackend::IoUring),
            SystemKind::ZlinkEpoll | SystemKind::ZlinkEpollLocal => Some(IoBackend::Epoll),
            _ => None,
        }
    }

    /// What the system is, in the report's words: its io stack and shape
    /// (zlink's from `--nodes` and `--shards`; a target's addresses), for
    /// `workload`.
    pub fn describes(self, options: &Options, workload: Workload) -> String {
        let (nodes, shards) = (options.nodes, options.shards);
        let fixed = match self {
            SystemKind::ZlinkTarget => {
                let addresses: Vec<String> =
                    options.target.iter().map(ToString::to_string).collect();
                return format!(
                    "a running zlink mesh at {} (the lobby game: LOGIN, then MOVE relayed to the player), sessions round-robin over the addresses, each player created on the address after its session's (with two or more, every MOVE crosses a link); its CPU is another process's: not measured",
                    addresses.join(", ")
                );
            }
            SystemKind::ZlinkLocal | SystemKind::ZlinkEpollLocal => {
                let backend = match self {
                    SystemKind::ZlinkLocal => "io_uring",
                    _ => "epoll",
                };
                let shards_apart = if shards > 1 {
                    " (a session is on the shard that accepted it, a player on its id's shard: the two may differ, one shard hop inside the node)"
                } else {
                    ""
                };
                if workload == Workload::ActorRtt {
                    return format!(
                        "1 zlink node, {shards} shard(s), shards on {backend} (io_backend); caller and callee Actors both on node 1 (ActorContext::request, Actor::on_reply), timed in the caller; no peer, no link{shards_apart}"
                    );
                }
                return format!(
                    "the local path: 1 zlink node, {shards} shard(s), shards on {backend} (io_backend); sessions and players on node 1, no peer, no link: no record leaves the node{shards_apart}"
                );
            }
            SystemKind::Zlink | SystemKind::ZlinkEpoll => {
                let backend = match self {
                    SystemKind::Zlink => "io_uring",
                    _ => "epoll",
                };
                if workload == Workload::ActorRtt {
                    return format!(
                        "{nodes} zlink nodes, {shards} shard(s) each, shards on {backend} (io_backend); caller Actors on node 1, each requesting its callee Actor on nodes 2..={nodes} over the link (ActorContext::request, Actor::on_reply), timed in the caller"
                    );
                }
                return format!(
                    "{nodes} zlink nodes, {shards} shard(s) each, shards on {backend} (io_backend); sessions on node 1, players on nodes 2..={nodes}"
                );
            }
            SystemKind::RawUring => "two-hop forwarder on io_uring (zlink's net::Reactor: multishot recv, provided buffers, one submit per turn), every client multiplexed on one A-B link",
            SystemKind::RawEpoll => "two-hop forwarder on tokio current-thread (epoll), one thread per hop, every client multiplexed on one A-B link",
            SystemKind::RawUringOneHop => "one-hop echo on io_uring (zlink's net::Reactor, as raw-uring), one thread: each client's request frames answered on its own connection in the turn that read them; the local path's limit",
            SystemKind::RawEpollOneHop => "one-hop echo on tokio current-thread (epoll), one thread, a task per client answering its request frames on its own connection; the local path's limit",
            SystemKind::Tokio => "one server on tokio multi-thread (2 workers): a task per session and per player, mpsc channels, HashMap of players",
            SystemKind::Ractor => "one server on tokio multi-thread (2 workers): a ractor actor per player, a task per session",
            SystemKind::TokioChan => "tokio multi-thread (2 workers), one process, no network: per pair a caller task and a callee task, an mpsc request carrying a oneshot for the reply, timed in the caller",
            SystemKind::TokioTcp => "two tokio current-thread runtimes, one thread each (node A: caller tasks, node B: callee tasks), one loopback TCP connection between them carrying every pair's requests and replies (length-prefixed frames, a pending-reply map of oneshots on A), timed in the caller",
        };
        fixed.to_owned()
    }
}

/// One relocation the `relocate` workload made (§8): player `player`
/// moved, or tried to, between `start` and `end`.
#[derive(Clone, Debug)]
pub struct Move {
    pub player: usize,
    pub start: Instant,
    pub end: Instant,
    /// The typed error of a move that did not commit.
    pub failed: Option<String>,
}

/// A started system; dropping it without [`Running::stop`] leaks its threads.
pub trait Running {
    /// Where the load client connects.
    fn entry(&self) -> SocketAddr;
    /// The io stack the system's sockets run on, as it runs (zlink's: what
    /// its nodes report, issue 8 item 2), for the report.
    fn io_stack(&self) -> &'static str;
    /// The player actors the system hosts, as it counts them itself (so a
    /// report shows that `--actors` took effect), sampled when the load has
    /// ended; `None` for a system with no actors (the raw forwarders) or
    /// whose count is not this process's (a target).
    fn actors(&self) -> Option<usize> {
        None
    }
    /// The same count per zlink node, in RID order (node 1, the sessions'
    /// node, first): shows where the players are, all on node 1 on the
    /// local path, none there on the cross-node one. `None` but for zlink.
    fn actors_by_node(&self) -> Option<Vec<usize>> {
        None
    }
    /// A sender the load client signals on once every session is bound,
    /// before the warm-up; `None` for a system that does not wait for it.
    /// zlink's `relocate` mover starts moving only then: a LOGIN that meets
    /// its player's move is refused (`Unavailable`, §8), which is right of
    /// the engine but would make the bench's login fail, not measure it.
    fn bound_signal(&self) -> Option<mpsc::Sender<()>> {
        None
    }
    /// Stops the system, joins its threads and hands back the relocations
    /// it made (none but zlink's under `relocate`).
    fn stop(self: Box<Self>) -> Vec<Move>;
}

/// zlink's listen backlog (net::conn's LISTEN_BACKLOG): the tokio
/// baselines listen with the same, not std's 128, which overflows when a
/// run logs a thousand sessions in at once (each refused SYN costs its
/// client a 1 s retransmit).
const LISTEN_BACKLOG: u32 = 1024;

/// A loopback listener on a free port for the tokio-based systems, with
/// zlink's backlog; call it inside their runtime.
pub fn listen_loopback() -> std::io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(([127, 0, 0, 1], 0).into())?;
    socket.listen(LISTEN_BACKLOG)
}

/// `--target`: the mesh runs elsewhere; there is nothing to start or stop,
/// and the load client connects to the addresses its [`LoadSpec`] carries.
/// Its entry is the first address.
struct Remote(SocketAddr);

impl Running for Remote {
    fn entry(&self) -> SocketAddr {
        self.0
    }

    fn io_stack(&self) -> &'static str {
        "remote"
    }

    fn stop(self: Box<Self>) -> Vec<Move> {
        Vec::new()
    }
}

/// A zlink system's load with its own node count (the local path's one
/// node, `--nodes` for the others) and its shards' backend; an error for a
/// system that is not a zlink mesh started here.
pub fn zlink_shape(kind: SystemKind, spec: &LoadSpec) -> Result<(LoadSpec, IoBackend), String> {
    match (kind.zlink_nodes(spec.nodes), kind.zlink_backend()) {
        (Some(nodes), Some(backend)) => Ok((
            LoadSpec {
                nodes,
                ..spec.clone()
            },
            backend,
        )),
        _ => Err(format!("{} is not a zlink mesh started here", kind.name())),
    }
}

/// Starts `kind` ready for `spec`'s load.
pub fn start(kind: SystemKind, spec: &LoadSpec) -> Result<Box<dyn Running>, String> {
    match kind {
        SystemKind::Zlink
        | SystemKind::ZlinkEpoll
        | SystemKind::ZlinkLocal
        | SystemKind::ZlinkEpollLocal => {
            let (spec, backend) = zlink_shape(kind, spec)?;
            zlink::start(&spec, backend)
        }
        SystemKind::RawUring => raw_uring::start(),
        SystemKind::RawEpoll => raw_epoll::start(),
        SystemKind::RawUringOneHop => raw_uring::start_one_hop(),
        SystemKind::RawEpollOneHop => raw_epoll::start_one_hop(),
        SystemKind::Tokio => tokio_game::start(spec),
        SystemKind::Ractor => ractor_game::start(spec),
        SystemKind::TokioChan | SystemKind::TokioTcp => Err(format!(
            "{} runs the actor-rtt workload only, which starts it itself",
            kind.name()
        )),
        SystemKind::ZlinkTarget => spec
            .target
            .as_ref()
            .and_then(|t| t.addresses.first())
            .map(|&address| Box::new(Remote(address)) as Box<dyn Running>)
            .ok_or_else(|| "zlink@target runs only with --target".to_owned()),
    }
}
