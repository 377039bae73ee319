//! zlink as a game server would start it: `--nodes` nodes on loopback
//! through the public API (NodeBuilder, as in zlink-demo), one embedded
//! Location Store, `--shards` shards per node, no core pinning by the
//! runtime (`--pin` places the whole system instead). Every session
//! connects to node 1 and every player is an Actor on one of the other
//! nodes, so a RELAY crosses a link both ways (request → actor on another
//! node → reply).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zlink::api::{
    Actor, ActorContext, ActorMessage, Node, NodeBuilder, NodeSettings, ObjectRole, Packet,
    Session, SessionActor, Spot,
};
use zlink::error::{Error, Reason};
use zlink::ids::ActorId;
use zlink::net::handshake::ClusterSecret;
use zlink::store::{EmbeddedStore, MonotonicClock};

use super::Running;
use crate::client::{player_name, LoadSpec, LOGIN, PUSH, RELAY};

/// The Actor type of every player.
const PLAYER: &str = "player";
/// Owner leases outlive any run's stalls; the runtime renews them every
/// second (NodeSettings::lease_renew_interval).
const LEASE_TERM: Duration = Duration::from_secs(10);
/// How long the link between the two nodes may take to come up.
const LINK_WAIT: Duration = Duration::from_secs(10);

/// A player answers a RELAY with its payload and pushes a PUSH back (§5).
struct Player;

impl Actor for Player {
    fn handle(
        &mut self,
        ctx: &mut dyn ActorContext,
        message: ActorMessage,
    ) -> Option<Result<Bytes, Error>> {
        if message.is_request() {
            return Some(Ok(message.payload));
        }
        // A refused push (the session went away) is the client's lost
        // message: the bench counts it there.
        let _ = ctx.push(PUSH, message.payload);
        None
    }
}

/// The players' Spot: a disconnect needs no game action in the bench (§7).
struct Lobby;

impl Spot for Lobby {
    fn on_disconnect_actor(&self, _actor: &ActorId) -> Result<(), Error> {
        Ok(())
    }
}

/// LOGIN binds the named player and keeps the binding on the session, so
/// that RELAY and PUSH reach it without parsing their payloads.
async fn login(session: Session, packet: Packet) -> Result<(), Error> {
    let name =
        std::str::from_utf8(&packet.payload).map_err(|_| Error::new(Reason::NotSupported))?;
    let id = ActorId::new(name).map_err(|_| Error::new(Reason::NotSupported))?;
    let player = session.actor(PLAYER, &id).await?;
    let bound = session.actors().bind(player).await?;
    session.set_attribute(bound);
    session.reply(packet, Ok(Bytes::from_static(b"welcome")))
}

/// RELAY and PUSH go to the bound player, which answers the client itself.
async fn relay(session: Session, packet: Packet) -> Result<(), Error> {
    let bound = session
        .attribute::<SessionActor>()
        .ok_or(Error::new(Reason::SessionNotBound))?;
    bound.relay(packet)
}

fn start_node(
    rid: u64,
    shards: usize,
    store: Arc<EmbeddedStore<MonotonicClock>>,
    secret: ClusterSecret,
    peers: &[(u64, SocketAddr)],
) -> Result<Node, String> {
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let settings = NodeSettings {
        shards,
        pin_cores: false,
        ..NodeSettings::default()
    };
    let mut builder = NodeBuilder::new(rid)
        .listen(loopback)
        .peer_listen(loopback)
        .cluster_secret(secret)
        .object_role(ObjectRole::Server)
        .location_store(store)
        .settings(settings)
        .enable_actor_dispatch()
        .actor_type(PLAYER, Arc::new(Lobby), |_| Box::new(Player))
        .on_packet(LOGIN, login)
        .on_packet(RELAY, relay)
        .on_packet(PUSH, relay);
    for &(rid, addr) in peers {
        builder = builder.peer(rid, addr);
    }
    builder
        .start()
        .map_err(|e| format!("zlink node {rid} did not start: {e}"))
}

struct Mesh {
    entry: SocketAddr,
    nodes: Vec<Node>,
}

impl Running for Mesh {
    fn entry(&self) -> SocketAddr {
        self.entry
    }

    fn stop(self: Box<Self>) {
        for node in self.nodes {
            node.shutdown();
        }
    }
}

/// Starts nodes `nodes..=1`, highest RID first so that each new node dials
/// the ones already up (the lower RID dials), waits for every link, and
/// creates player `i` on node `2 + i % (nodes - 1)`.
pub fn start(spec: &LoadSpec) -> Result<Box<dyn Running>, String> {
    let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM));
    let secret = ClusterSecret::new(b"zlink-bench-cluster-secret".to_vec())
        .map_err(|e| format!("cluster secret: {e}"))?;
    let mut started: Vec<(u64, Node)> = Vec::new();
    for rid in (1..=spec.nodes).rev() {
        let peers = started
            .iter()
            .map(|(peer, node)| {
                node.peer_addr()
                    .map(|addr| (*peer, addr))
                    .ok_or_else(|| format!("node {peer} has no link address"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let node = start_node(rid, spec.shards, Arc::clone(&store), secret.clone(), &peers)?;
        started.push((rid, node));
    }
    started.reverse();
    for (a, node) in &started {
        for (b, _) in &started {
            if a != b && !node.wait_linked(*b, LINK_WAIT) {
                return Err(format!("the link {a} -> {b} did not come up"));
            }
        }
    }
    let hosts = &started[1..];
    for index in 0..spec.sessions {
        let id = ActorId::new(&player_name(index)).map_err(|e| format!("player id: {e}"))?;
        let (rid, host) = &hosts[index % hosts.len()];
        host.create_actor(PLAYER, &id)
            .map_err(|e| format!("creating {id} on node {rid}: {e}"))?;
    }
    let entry = started[0].1.stream_addr().ok_or("node 1 does not listen")?;
    Ok(Box::new(Mesh {
        entry,
        nodes: started.into_iter().map(|(_, node)| node).collect(),
    }))
}
