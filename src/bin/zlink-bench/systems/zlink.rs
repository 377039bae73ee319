//! zlink as a game server would start it: two nodes on loopback through the
//! public API (NodeBuilder, as in zlink-demo), one embedded Location Store,
//! one shard per node, no pinning (the baselines float too). Every player
//! is an Actor on node 2; every session connects to node 1, so a RELAY
//! crosses the link both ways (request → actor on another node → reply).

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
    store: Arc<EmbeddedStore<MonotonicClock>>,
    secret: ClusterSecret,
    peer: Option<(u64, SocketAddr)>,
) -> Result<Node, String> {
    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let settings = NodeSettings {
        shards: 1,
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
    if let Some((rid, addr)) = peer {
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

/// Starts node 2 (the players' host), then node 1, which dials it (the
/// lower RID dials), and creates one player per session on node 2.
pub fn start(spec: &LoadSpec) -> Result<Box<dyn Running>, String> {
    let store = Arc::new(EmbeddedStore::new(MonotonicClock::new(), LEASE_TERM));
    let secret = ClusterSecret::new(b"zlink-bench-cluster-secret".to_vec())
        .map_err(|e| format!("cluster secret: {e}"))?;
    let host = start_node(2, Arc::clone(&store), secret.clone(), None)?;
    let host_addr = host.peer_addr().ok_or("node 2 has no link address")?;
    let front = start_node(1, store, secret, Some((2, host_addr)))?;
    if !front.wait_linked(2, LINK_WAIT) || !host.wait_linked(1, LINK_WAIT) {
        return Err("the link between the zlink nodes did not come up".to_owned());
    }
    for index in 0..spec.sessions {
        let id = ActorId::new(&player_name(index)).map_err(|e| format!("player id: {e}"))?;
        host.create_actor(PLAYER, &id)
            .map_err(|e| format!("creating {id}: {e}"))?;
    }
    let entry = front.stream_addr().ok_or("node 1 does not listen")?;
    Ok(Box::new(Mesh {
        entry,
        nodes: vec![front, host],
    }))
}
