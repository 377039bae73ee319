//! Process and store layouts for the contract tests that involve several
//! nodes (issue 6): a test is written once against [`Mesh`] and runs on
//! every [`Layout`] through [`layout_matrix!`]. Each layout is three nodes
//! of the lobby game (src/bin/lobby/game.rs, the sample game zlink-demo and
//! zlink-node run), linked pairwise over loopback, the lower RID dialing.
//!
//! A test sees only what works across processes: the client protocol, the
//! node's diagnostics counters ([`Mesh::counters`]: the node's Actor count,
//! its store's row operations, the game's counts and the flow-trace
//! counters) and a tapped link ([`Mesh::start_tapped`]). It moves an Actor
//! with [`Mesh::relocate`]: `Node::relocate` in one process, the
//! `relocate` console command of zlink-node across processes.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use zlink::api::{Node, NodeBuilder, NodeSettings, ObjectRole, RelocateTo};
use zlink::client::Client;
use zlink::ids::ActorId;
use zlink::store::{
    CountingStore, EmbeddedStore, LocationStore, MonotonicClock, RedisStore, RedisStoreConfig,
};

use crate::bound;
use crate::node_support::{self, NodeProcess, Peers};
use crate::redis_support::{Mode, RedisServer};
use crate::runtime_support::{
    actor_on, io_backend, link_tap, secret, session_shard, LinkTap, WAIT,
};

#[path = "../../src/bin/lobby/game.rs"]
pub mod lobby;

/// Where the three nodes run and which Location Store they share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Three nodes in the test process on one embedded store.
    Embedded,
    /// The same with two shards per node, and the test's players on shard
    /// 1 ([`Mesh::player`]), away from the links on shard 0: every record
    /// between a link and a player crosses shards.
    EmbeddedTwoShards,
    /// Three nodes in the test process, each with its own connection to one
    /// real Redis.
    Redis,
    /// Three `zlink-node` processes on one real Redis.
    Processes,
}

/// Runs a multi-node contract test on every layout: `fn name(layout:
/// Layout) { .. }` becomes the tests `name::embedded`,
/// `name::embedded_two_shards`, `name::redis` and `name::processes`, so
/// `cargo test name` runs them all.
#[allow(unused_macros)]
macro_rules! layout_matrix {
    ($(#[$meta:meta])* fn $name:ident($layout:ident: Layout $(,)?) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($layout: Layout) $body

            #[test]
            fn embedded() {
                run(Layout::Embedded);
            }

            #[test]
            fn embedded_two_shards() {
                run(Layout::EmbeddedTwoShards);
            }

            #[test]
            fn redis() {
                run(Layout::Redis);
            }

            #[test]
            fn processes() {
                run(Layout::Processes);
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use layout_matrix;

impl Layout {
    /// Shards per node.
    pub fn shards(self) -> usize {
        if self == Layout::EmbeddedTwoShards {
            2
        } else {
            1
        }
    }
}

/// A node of the game in this process, with what its counters read.
struct InProcess {
    node: Node,
    stats: Arc<lobby::NodeStats>,
    store: Arc<dyn Fn() -> u64 + Send + Sync>,
}

enum Started {
    InProcess(Box<InProcess>),
    Process(NodeProcess),
}

/// Three linked nodes of the lobby game, RIDs 1 to 3, on one layout.
pub struct Mesh {
    pub layout: Layout,
    nodes: Vec<Started>,
    /// The Redis of the Redis layouts; dropped (killed) after the nodes.
    redis: Option<RedisServer>,
}

/// One node's diagnostics: `name=value` counts, 0 for a name not listed
/// (the flow-trace counters list only those that are not zero).
#[derive(Debug)]
pub struct Counters(HashMap<String, u64>);

impl Counters {
    /// The count `name`; 0 when it is not listed.
    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Parses `name=value` words; other words are left out.
    fn parse(line: &str) -> Self {
        Counters(
            line.split_whitespace()
                .filter_map(|word| {
                    let (name, value) = word.split_once('=')?;
                    Some((name.to_owned(), value.parse().ok()?))
                })
                .collect(),
        )
    }
}

impl Mesh {
    /// Starts the three nodes and waits until every link is up.
    pub fn start(layout: Layout, name: &str) -> Mesh {
        Self::start_with(layout, name, None).0
    }

    /// As [`Mesh::start`], with the link from `dialer` to `acceptor` (the
    /// lower RID first) through a [`LinkTap`] that reads its records.
    pub fn start_tapped(layout: Layout, name: &str, dialer: u64, acceptor: u64) -> (Mesh, LinkTap) {
        assert!(dialer < acceptor, "the lower RID dials");
        let (mesh, tap) = Self::start_with(layout, name, Some((dialer, acceptor)));
        (mesh, tap.expect("the tap"))
    }

    fn start_with(
        layout: Layout,
        name: &str,
        tapped: Option<(u64, u64)>,
    ) -> (Mesh, Option<LinkTap>) {
        // Every layout test is under the bound from here.
        bound::arm();
        let on_redis = matches!(layout, Layout::Redis | Layout::Processes);
        let redis = on_redis.then(|| RedisServer::start(Mode::Volatile));
        let embedded = Arc::new(CountingStore::new(EmbeddedStore::new(
            MonotonicClock::new(),
            Duration::from_secs(60),
        )));
        let dir = (layout == Layout::Processes).then(|| node_support::temp_dir(name));
        let mut tap = None;
        // Highest RID first, so each node can be given the link addresses
        // of the nodes it dials.
        let mut started: Vec<(u64, SocketAddr, Started)> = Vec::new();
        for rid in (1..=3).rev() {
            let peers: Vec<(u64, SocketAddr)> = started
                .iter()
                .map(|&(peer, addr, _)| {
                    if tapped == Some((rid, peer)) {
                        let link = link_tap(addr);
                        let through = link.addr;
                        tap = Some(link);
                        (peer, through)
                    } else {
                        (peer, addr)
                    }
                })
                .collect();
            let url = redis.as_ref().map(RedisServer::url);
            let url = || url.as_deref().expect("the Redis layouts start a Redis");
            let node = match layout {
                Layout::Embedded | Layout::EmbeddedTwoShards => {
                    let counts = Arc::clone(&embedded);
                    in_process(
                        layout,
                        rid,
                        Arc::clone(&embedded) as Arc<dyn LocationStore>,
                        Arc::new(move || counts.counts().row_operations()),
                        &peers,
                    )
                }
                Layout::Redis => {
                    let config = RedisStoreConfig::new(url(), name);
                    let store = Arc::new(CountingStore::new(
                        RedisStore::open(config, MonotonicClock::new()).expect("a Redis store"),
                    ));
                    let counts = Arc::clone(&store);
                    in_process(
                        layout,
                        rid,
                        store,
                        Arc::new(move || counts.counts().row_operations()),
                        &peers,
                    )
                }
                Layout::Processes => {
                    let text = node_support::config(rid, url(), name, &Peers::Static(peers));
                    let dir = dir
                        .as_deref()
                        .expect("the processes layout has a config folder");
                    let path = node_support::write_config(dir, &format!("node-{rid}.toml"), &text);
                    Started::Process(NodeProcess::start(rid, &path))
                }
            };
            let peer_addr = match &node {
                Started::InProcess(n) => n.node.peer_addr().expect("the node accepts links"),
                Started::Process(p) => p.peer.expect("the node accepts links"),
            };
            started.push((rid, peer_addr, node));
        }
        started.reverse();
        let mut mesh = Mesh {
            layout,
            nodes: started.into_iter().map(|(_, _, node)| node).collect(),
            redis,
        };
        for rid in 1..=3 {
            for peer in (1..=3).filter(|&peer| peer != rid) {
                mesh.wait_linked(rid, peer);
            }
        }
        (mesh, tap)
    }

    fn node(&mut self, rid: u64) -> &mut Started {
        &mut self.nodes[usize::try_from(rid - 1).expect("a rid from 1 to 3")]
    }

    fn wait_linked(&mut self, rid: u64, peer: u64) {
        let _wait = bound::waiting(format_args!("the link {rid} -> {peer}"));
        match self.node(rid) {
            Started::InProcess(n) => assert!(
                n.node.wait_linked(peer, WAIT),
                "the link {rid} -> {peer} did not come up"
            ),
            Started::Process(p) => p.wait_linked(peer),
        }
    }

    /// The name of a test player: `prefix`, or with two shards the first
    /// `prefix-k` whose ActorId places it on the last shard.
    pub fn player(&self, prefix: &str) -> String {
        let shards = self.layout.shards();
        actor_on(prefix, session_shard(shards), shards)
    }

    /// A new client of node `rid`.
    pub fn client(&mut self, rid: u64) -> Client {
        let addr = match self.node(rid) {
            Started::InProcess(n) => n.node.stream_addr().expect("the node listens"),
            Started::Process(p) => p.stream,
        };
        Client::connect(addr).expect("the node accepts clients")
    }

    /// Moves `actor`, which node `host` hosts, to node `to`; `Ok` once the
    /// move committed, else the error's text.
    pub fn relocate(&mut self, host: u64, actor: &str, to: u64) -> Result<(), String> {
        let _wait = bound::waiting(format_args!(
            "the move of {actor:?} from node {host} to {to}"
        ));
        match self.node(host) {
            Started::InProcess(n) => {
                let id = ActorId::new(actor).expect("an ActorId");
                n.node
                    .relocate(&id, RelocateTo::Node(to))
                    .map_err(|e| e.to_string())
            }
            Started::Process(p) => {
                let answer = p.control(&format!("relocate {actor} {to}"));
                if answer == "ok" {
                    Ok(())
                } else {
                    Err(answer)
                }
            }
        }
    }

    /// Node `rid`'s diagnostics now: `actors`, `store_row_operations` (on
    /// the embedded layout, of the one store all three share), the game's
    /// counts (`moves`, `pushes`, `push_refused`, `disconnects`,
    /// `replaced`) and the flow-trace counters by name.
    pub fn counters(&mut self, rid: u64) -> Counters {
        match self.node(rid) {
            Started::InProcess(n) => {
                let stat = |counter: &std::sync::atomic::AtomicU64| {
                    counter.load(std::sync::atomic::Ordering::Relaxed)
                };
                let s = &n.stats;
                let mut counts: HashMap<String, u64> = [
                    ("actors", n.node.actor_count() as u64),
                    ("store_row_operations", (n.store)()),
                    ("moves", stat(&s.moves)),
                    ("pushes", stat(&s.pushes)),
                    ("push_refused", stat(&s.push_refused)),
                    ("disconnects", stat(&s.disconnects)),
                    ("replaced", stat(&s.replaced_callbacks)),
                ]
                .into_iter()
                .map(|(name, n)| (name.to_owned(), n))
                .collect();
                for (event, count) in n.node.flow_counters().nonzero() {
                    counts.insert(event.name().to_owned(), count);
                }
                Counters(counts)
            }
            Started::Process(p) => Counters::parse(&p.control("counters")),
        }
    }
}

/// Starts node `rid` of the game in this process on `store`, dialing `peers`.
fn in_process(
    layout: Layout,
    rid: u64,
    store: Arc<dyn LocationStore>,
    row_operations: Arc<dyn Fn() -> u64 + Send + Sync>,
    peers: &[(u64, SocketAddr)],
) -> Started {
    let stats = Arc::new(lobby::NodeStats::default());
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let builder = NodeBuilder::new(rid)
        .listen(loopback)
        .peer_listen(loopback)
        .cluster_secret(secret())
        .object_role(ObjectRole::Server)
        .location_store(store)
        .enable_actor_dispatch()
        .settings(NodeSettings {
            shards: layout.shards(),
            pin_cores: false,
            io_backend: io_backend(),
            ..NodeSettings::default()
        });
    let mut builder = lobby::register(builder, &stats);
    for &(peer, addr) in peers {
        builder = builder.peer(peer, addr);
    }
    // Its dialers, the nodes with lower RIDs: a node takes links only from
    // its peers (docs/threading.md "Node links").
    for lower in 1..rid {
        builder = builder.accept_peer(lower);
    }
    Started::InProcess(Box::new(InProcess {
        node: builder.start().expect("the game node starts"),
        stats,
        store: row_operations,
    }))
}
