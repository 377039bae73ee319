//! Helpers shared by the core contract tests (`core_*.rs`): a mesh with a
//! known link latency, and short names for what the tests look at.
//!
//! Each test file uses a different subset of these helpers.
#![allow(dead_code)]

use std::time::Duration;

use bytes::Bytes;
use zlink::core::actor::ActorEvent;
use zlink::core::session::{BindStart, SessionEvent, SessionTurn, SessionWork, Ticket};
use zlink::core::time::Instant;
use zlink::core::trace::FlowTrace;
use zlink::error::Error;
use zlink::ids::{
    ActorId, ActorRef, BindingGeneration, BindingIdentity, NodeRid, PacketKey, SessionRid,
};
use zlink::sim::{actor_id, Mesh, Tapped};
use zlink::wire::client::{ClientFrame, CloseReason};
use zlink::wire::node::{Command, NodeRecord};

/// One-way latency of every link in these tests.
pub const LATENCY: Duration = Duration::from_micros(50);

/// One microsecond: the resolution of virtual time.
pub const MICRO: Duration = Duration::from_micros(1);

/// The packet key the tests push with.
pub const PUSH_KEY: PacketKey = PacketKey(9);

/// An empty mesh whose links take [`LATENCY`].
pub fn mesh() -> Mesh {
    Mesh::new(LATENCY)
}

/// Binds and expects success.
pub fn bind_ok(mesh: &mut Mesh, node: NodeRid, session: SessionRid, actor: &ActorRef) -> ActorRef {
    mesh.bind(node, session, actor)
        .unwrap_or_else(|e| panic!("bind of {:?} on {session:?} failed: {e}", actor.id))
}

/// Starts a bind that must send a 38; returns its ticket.
pub fn bind_pending(
    mesh: &mut Mesh,
    node: NodeRid,
    session: SessionRid,
    actor: &ActorRef,
) -> Ticket {
    match mesh.sessions(node).bind(session, actor.clone()) {
        Ok(BindStart::Pending(ticket)) => ticket,
        other => panic!("expected a pending bind, got {other:?}"),
    }
}

/// A push from the Actor owner, with [`PUSH_KEY`].
pub fn push(
    mesh: &mut Mesh,
    node: NodeRid,
    actor: &str,
    payload: &'static [u8],
) -> Result<(), Error> {
    mesh.actors(node)
        .push(&actor_id(actor), PUSH_KEY, Bytes::from_static(payload))
}

/// A bound-session close from the Actor owner.
pub fn actor_close(mesh: &mut Mesh, node: NodeRid, actor: &str) -> Result<(), Error> {
    mesh.actors(node)
        .close_session(&actor_id(actor), CloseReason::ActorRequested)
}

/// A one-way relay from a session.
pub fn send(
    mesh: &mut Mesh,
    node: NodeRid,
    session: SessionRid,
    actor: &str,
    payload: &'static [u8],
) -> Result<(), Error> {
    mesh.sessions(node).relay(
        session,
        &actor_id(actor),
        PacketKey(1),
        Bytes::from_static(payload),
        None,
    )
}

/// The payloads of every push frame a session's client received.
pub fn pushes(mesh: &Mesh, node: NodeRid, session: SessionRid) -> Vec<Bytes> {
    mesh.frames(node, session)
        .into_iter()
        .filter_map(|f| match f {
            ClientFrame::Push { payload, .. } => Some(payload),
            _ => None,
        })
        .collect()
}

/// The payloads delivered to an Actor's handler at a node.
pub fn delivered(mesh: &Mesh, node: NodeRid, actor: &str) -> Vec<Bytes> {
    mesh.delivered(node, &actor_id(actor))
}

/// `bytes` as the payload type the mesh reports.
pub fn b(bytes: &'static [u8]) -> Bytes {
    Bytes::from_static(bytes)
}

/// A flow-trace counter of a node.
pub fn count(mesh: &Mesh, node: NodeRid, event: FlowTrace) -> u64 {
    mesh.node(node).core().counters().get(event)
}

/// The binding identity the Actor owner has registered for an Actor.
pub fn registered(mesh: &Mesh, node: NodeRid, actor: &str) -> Option<BindingIdentity> {
    mesh.node(node)
        .core()
        .actor_owner()
        .current_binding(&actor_id(actor))
}

/// The duplicate-connection callbacks a node was asked to run for a session.
pub fn replacement_callbacks(
    mesh: &Mesh,
    node: NodeRid,
    session: SessionRid,
) -> Vec<(Ticket, ActorId)> {
    mesh.node(node)
        .session_events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Turn(SessionTurn {
                session: s,
                work: SessionWork::Replaced { callback, actor },
                ..
            }) if *s == session => Some((*callback, actor.clone())),
            _ => None,
        })
        .collect()
}

/// The one duplicate-connection callback of a session.
pub fn the_replacement_callback(mesh: &Mesh, node: NodeRid, session: SessionRid) -> Ticket {
    let callbacks = replacement_callbacks(mesh, node, session);
    assert_eq!(
        callbacks.len(),
        1,
        "callbacks of {session:?}: {callbacks:?}"
    );
    callbacks[0].0
}

/// The close events of a session, with their reasons.
pub fn closes(mesh: &Mesh, node: NodeRid, session: SessionRid) -> Vec<CloseReason> {
    mesh.node(node)
        .session_events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Close { session: s, reason } if *s == session => Some(*reason),
            _ => None,
        })
        .collect()
}

/// Whether the session's cleanup ended.
pub fn ended(mesh: &Mesh, node: NodeRid, session: SessionRid) -> bool {
    mesh.node(node)
        .session_events
        .iter()
        .any(|e| matches!(e, SessionEvent::SessionEnded { session: s } if *s == session))
}

/// The Bound events an Actor owner raised for an Actor.
pub fn bound_events(mesh: &Mesh, node: NodeRid, actor: &str) -> usize {
    let id = actor_id(actor);
    mesh.node(node)
        .actor_events
        .iter()
        .filter(|e| matches!(e, ActorEvent::Bound { actor: a, .. } if *a == id))
        .count()
}

/// Every tapped record with a command.
pub fn tapped(mesh: &Mesh, command: Command) -> Vec<Tapped> {
    mesh.tap()
        .iter()
        .filter(|t| t.command() == command)
        .cloned()
        .collect()
}

/// The last tapped 51.
pub fn last_replaced(mesh: &Mesh) -> zlink::wire::node::BoundSessionReplaced {
    mesh.tap()
        .iter()
        .rev()
        .find_map(|t| match &t.record {
            NodeRecord::BoundSessionReplaced(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a 51 was sent")
}

/// The binding generation a session holds for an Actor, read from the 24
/// records it sent (the tail carries it).
pub fn relayed_generations(
    mesh: &Mesh,
    session: SessionRid,
    actor: &str,
) -> Vec<BindingGeneration> {
    let id = actor_id(actor);
    mesh.tap()
        .iter()
        .filter_map(|t| match &t.record {
            NodeRecord::ActorSend(zlink::wire::node::ActorSend::Message(m))
                if m.actor == id && m.tail.session.session == session =>
            {
                Some(m.tail.binding)
            }
            _ => None,
        })
        .collect()
}

/// Moves the mesh to exactly `at`, delivering and firing what falls due.
pub fn advance_to(mesh: &mut Mesh, at: Instant) {
    let now = mesh.now();
    assert!(at >= now, "cannot go back from {now:?} to {at:?}");
    mesh.advance(at - now);
}

/// A 51 for "a" from its owner (node 2) to the previous session owner
/// `to`, retiring binding generation `retired`.
pub fn replaced_notice(to: u64, retired: u64) -> zlink::core::Transmit {
    use zlink::ids::{
        AuthorityOwnerGeneration, BindingGeneration, NodeGeneration, ObjectGeneration,
        OwnerLeaseGeneration, SessionOwnerId, SessionRef, SessionRid,
    };
    use zlink::wire::node::{AuthorityFence, BoundSessionReplaced};
    zlink::core::Transmit {
        to: NodeRid(to),
        lifecycle: None,
        record: NodeRecord::BoundSessionReplaced(BoundSessionReplaced {
            fence: AuthorityFence {
                actor: actor_id("a"),
                object_generation: ObjectGeneration(1),
                owner: NodeRid(2),
                node_generation: NodeGeneration(1),
                authority: AuthorityOwnerGeneration(1),
            },
            previous: SessionRef {
                owner: NodeRid(to),
                lifecycle: NodeGeneration(1),
                owner_id: SessionOwnerId(0),
                session: SessionRid(1),
            },
            previous_lease: OwnerLeaseGeneration(1),
            retired: BindingGeneration(retired),
        }),
    }
}

/// The actor turn deadline of [`one_shard`].
pub const TURN_DEADLINE: Duration = Duration::from_millis(1_400);

/// One shard core of node 1 (lifecycle 1), with default relocation
/// settings (a 1,500 ms prepare bound) and [`TURN_DEADLINE`], at time zero:
/// a core test drives it directly, looping its records back to itself.
pub fn one_shard(
    sessions: zlink::core::session::SessionOwnerConfig,
) -> zlink::core::shard::ShardCore {
    one_shard_with(
        sessions,
        zlink::core::relocation::RelocationConfig::default(),
    )
}

/// [`one_shard`] with its relocation settings.
pub fn one_shard_with(
    sessions: zlink::core::session::SessionOwnerConfig,
    relocation: zlink::core::relocation::RelocationConfig,
) -> zlink::core::shard::ShardCore {
    use zlink::core::actor::ActorOwnerIdentity;
    use zlink::core::session::SessionOwnerIdentity;
    use zlink::core::shard::{ShardConfig, ShardCore};
    use zlink::ids::{MeshName, NodeGeneration, OwnerLeaseGeneration, SessionOwnerId};
    let config = ShardConfig {
        session_owner: SessionOwnerIdentity {
            node: NodeRid(1),
            lifecycle: NodeGeneration(1),
            owner_id: SessionOwnerId(0),
            lease: OwnerLeaseGeneration(1),
        },
        actor_owner: ActorOwnerIdentity {
            mesh: MeshName::new("sim").unwrap(),
            node: NodeRid(1),
            node_generation: NodeGeneration(1),
            lease: OwnerLeaseGeneration(1),
        },
        sessions,
        relocation,
        send_timeout: Duration::from_millis(3_000),
        actor_turn_deadline: TURN_DEADLINE,
    };
    ShardCore::new(config, Instant::ZERO)
}
