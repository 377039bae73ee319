//! The demo's mesh: three nodes on loopback sharing one embedded Location
//! Store, each running the lobby game (src/bin/lobby/game.rs, shared with
//! zlink-node).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use zlink::api::{ClusterSecret, Node, NodeBuilder, ObjectRole};
use zlink::store::{CountingStore, EmbeddedStore};

#[path = "../lobby/game.rs"]
mod lobby;
pub use lobby::*;

/// How long the demo's owner leases last; the runtime renews them every
/// second (NodeSettings::lease_renew_interval), well inside this term.
pub const LEASE_TERM: Duration = Duration::from_secs(10);

/// The store every node of the demo shares, wrapped so that the report can
/// show it is not read on the relay and push paths.
pub type Store = CountingStore<EmbeddedStore>;

/// One started node and what its game code counts.
pub struct GameNode {
    pub rid: u64,
    pub node: Node,
    pub stats: Arc<NodeStats>,
}

/// Starts node `rid` of the demo mesh, linked to the already started
/// `peers` (which have higher RIDs: the lower RID dials).
pub fn start_node(
    rid: u64,
    store: Arc<Store>,
    secret: ClusterSecret,
    peers: &[(u64, SocketAddr)],
) -> Result<GameNode, String> {
    let stats = Arc::new(NodeStats::default());
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let builder = NodeBuilder::new(rid)
        .listen(loopback)
        .peer_listen(loopback)
        .cluster_secret(secret)
        .object_role(ObjectRole::Server)
        .location_store(store)
        .enable_actor_dispatch();
    let mut builder = register(builder, &stats);
    for &(peer, addr) in peers {
        builder = builder.peer(peer, addr);
    }
    // The nodes with lower RIDs dial this one: a node takes links only
    // from its peers (docs/threading.md "Node links").
    for lower in 1..rid {
        builder = builder.accept_peer(lower);
    }
    let node = builder
        .start()
        .map_err(|e| format!("node {rid} did not start: {e}"))?;
    Ok(GameNode { rid, node, stats })
}

/// Starts nodes `1..=count` sharing `store`, highest RID first so that each
/// new node can dial the ones already up, and waits until every link is up.
pub fn start_mesh(count: u64, store: &Arc<Store>) -> Result<Vec<GameNode>, String> {
    let secret = ClusterSecret::new(b"zlink-demo-cluster-secret".to_vec())
        .map_err(|e| format!("cluster secret: {e}"))?;
    let mut started: Vec<GameNode> = Vec::new();
    for rid in (1..=count).rev() {
        let peers = started
            .iter()
            .map(|g| {
                g.node
                    .peer_addr()
                    .map(|addr| (g.rid, addr))
                    .ok_or_else(|| format!("node {} has no link address", g.rid))
            })
            .collect::<Result<Vec<_>, _>>()?;
        started.push(start_node(rid, Arc::clone(store), secret.clone(), &peers)?);
    }
    started.reverse();
    for a in &started {
        for b in &started {
            if a.rid != b.rid && !a.node.wait_linked(b.rid, Duration::from_secs(10)) {
                return Err(format!("the link {} -> {} did not come up", a.rid, b.rid));
            }
        }
    }
    Ok(started)
}
