//! The session object and its Actor bindings (§13 in Rust form).
//!
//! A [`Session`] is handed to every session callback. Through
//! [`Session::actors`] the callback binds ActorRefs and relays payloads; the
//! application never sees a NodeRid, a transport handle, a raw envelope, a
//! request sequence or an AuthorityOwnerGeneration (§1). Every handle here is
//! shard-local (`!Send`): a session lives on the shard that accepted it.
//!
//! Per-session state: the connect callback authenticates the client (§1
//! step 1) and keeps what later callbacks need — the player's id, say — as a
//! typed attribute ([`Session::set_attribute`], [`Session::attribute`]).
//! Attributes live as long as the session's lane: every callback of the
//! session sees them, the disconnect callback included, and a reconnect is a
//! new session with none (§9: nothing of a previous connection is carried
//! over).

use foldhash::HashMap;
use std::any::{Any, TypeId};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::Bytes;

use super::spot::SpotHandle;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, ActorRef, Correlation, PacketKey, SessionRid};
use crate::runtime::ShardHandle;

/// One client connection's session.
#[derive(Clone)]
pub struct Session {
    pub(crate) shard: Rc<ShardHandle>,
    pub(crate) rid: SessionRid,
    pub(crate) attributes: Attributes,
}

/// The typed attributes of one session, shared by all its callbacks.
#[derive(Clone, Default)]
pub(crate) struct Attributes(Rc<RefCell<HashMap<TypeId, Rc<dyn Any>>>>);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("rid", &self.rid).finish()
    }
}

impl Session {
    /// Sends to and requests from Actors by ActorId from this session's
    /// callbacks (docs/actors.md "From node code"): `.await` its requests
    /// here, never `wait` on them (a session callback runs on a shard).
    pub fn caller(&self) -> crate::runtime::caller::ActorCaller {
        self.shard.caller()
    }

    /// This session's bindings (§13 `IZLinkSessionActors`).
    pub fn actors(&self) -> SessionActors {
        SessionActors {
            session: self.clone(),
        }
    }

    /// Looks up the Ready Actor `id` in the Location Store, or creates it
    /// with the factory of `actor_type` on this node (§1 steps 2), in its
    /// type's Entry Spot. This is not a bind: bind the returned ActorRef to
    /// start relaying.
    pub async fn actor(&self, actor_type: &str, id: &ActorId) -> Result<ActorRef, Error> {
        let found = self.shard.actor(actor_type, id, None).await;
        let found = found.unwrap_or_else(|| Err(Reason::SessionClosing.into()));
        found.map_err(|e| about_lookup(e, actor_type, id))
    }

    /// Like [`Session::actor`], but a new Actor is created into the User
    /// Spot `spot` (§1), with the rules of `Node::create_actor_in`: under a
    /// SpotWide Spot its id must be `<spot>/<name>`, and an Actor that
    /// already belongs to another Spot is not moved (`InvalidOperation`).
    pub async fn actor_in(
        &self,
        spot: &SpotHandle,
        actor_type: &str,
        id: &ActorId,
    ) -> Result<ActorRef, Error> {
        let found = self.shard.actor(actor_type, id, Some(spot)).await;
        let found = found.unwrap_or_else(|| Err(Reason::SessionClosing.into()));
        found.map_err(|e| about_lookup(e, actor_type, id))
    }

    /// Sends a frame to this session's client directly (for example the
    /// duplicate-connection notice from the replacement callback, §6).
    pub fn send_to_client(&self, key: PacketKey, payload: Bytes) -> Result<(), Error> {
        self.shard.send_to_client(self.rid, key, payload)
    }

    /// Answers a request packet from the session callback itself.
    pub fn reply(&self, packet: Packet, outcome: Result<Bytes, Error>) -> Result<(), Error> {
        if let Some(correlation) = packet.dispatch.correlation {
            self.shard.answer(self.rid, correlation, outcome)?;
        }
        packet.dispatch.answered.set(true);
        Ok(())
    }

    /// Closes the connection.
    pub fn close(&self) {
        self.shard.close_session(self.rid);
    }

    /// Keeps `value` as this session's attribute of type `T`, for every
    /// later callback of the session (§1 step 1: the connect callback
    /// decides the domain identity; the packet handlers act on it). Returns
    /// the attribute of that type it replaces, if any.
    pub fn set_attribute<T: 'static>(&self, value: T) -> Option<Rc<T>> {
        let previous = self
            .attributes
            .0
            .borrow_mut()
            .insert(TypeId::of::<T>(), Rc::new(value));
        previous.and_then(|any| any.downcast::<T>().ok())
    }

    /// This session's attribute of type `T`, if a callback set one. It is a
    /// shared handle: hold it across awaits freely (put a `Cell` or
    /// `RefCell` inside for state that changes).
    pub fn attribute<T: 'static>(&self) -> Option<Rc<T>> {
        let any = self.attributes.0.borrow().get(&TypeId::of::<T>()).cloned();
        any.and_then(|any| any.downcast::<T>().ok())
    }

    /// The index of the shard (thread) that owns this session, for
    /// diagnostics and logs: a session stays on the shard that accepted it,
    /// where its callbacks run one at a time (§10; docs/threading.md).
    pub fn shard(&self) -> u16 {
        self.shard.index()
    }
}

/// The Actor bindings of one session.
#[derive(Clone, Debug)]
pub struct SessionActors {
    session: Session,
}

impl SessionActors {
    /// Every Actor currently bound to this session.
    pub fn bound(&self) -> Vec<SessionActor> {
        self.session
            .shard
            .bound(self.session.rid)
            .into_iter()
            .map(|actor| self.binding(actor))
            .collect()
    }

    /// §5, §13: binds `actor` (ActorId + ObjectGeneration) to this session:
    /// one control request at the ActorRef's location; completes once the
    /// route is stored. Unavailable if the location is stale, InvalidOperation
    /// if the generation differs (§12).
    pub async fn bind(&self, actor: ActorRef) -> Result<SessionActor, Error> {
        let id = actor.id.clone();
        let about = |e: Error| e.about_actor(&id);
        let bound = self
            .session
            .shard
            .bind(self.session.rid, actor)
            .map_err(about)?;
        let bound = bound
            .await
            .unwrap_or_else(|| Err(Reason::SessionClosing.into()));
        Ok(self.binding(bound.map_err(about)?))
    }

    /// §13: the same binding if this session already holds it for this
    /// ActorId and ObjectGeneration, otherwise the same as [`Self::bind`].
    pub async fn bind_or_get(&self, actor: ActorRef) -> Result<SessionActor, Error> {
        self.bind(actor).await
    }

    /// §13: this session's binding for `id` — not the global directory.
    pub fn find(&self, id: &ActorId) -> Option<SessionActor> {
        self.session
            .shard
            .find(self.session.rid, id)
            .map(|actor| self.binding(actor))
    }

    fn binding(&self, actor: ActorRef) -> SessionActor {
        SessionActor {
            session: self.session.clone(),
            actor,
        }
    }
}

/// A failed look-up or creation names the Actor type when the type is what
/// failed (`NoActorFactory`), else the Actor (issue 21 item 4).
pub(crate) fn about_lookup(error: Error, actor_type: &str, id: &ActorId) -> Error {
    match error.reason() {
        Reason::NoActorFactory => error.about_type(actor_type),
        _ => error.about_actor(id),
    }
}

/// An opaque, comparable snapshot of where a binding's Actor is now (L1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LocationSnapshot(crate::ids::ActorLocation);

/// One binding of a session to an Actor.
#[derive(Clone, Debug)]
pub struct SessionActor {
    session: Session,
    actor: ActorRef,
}

impl SessionActor {
    /// §13 SessionActor.ActorRef: the bound Actor's ActorId and
    /// ObjectGeneration, unchanged by relocation, with its location as of
    /// this handle (opaque, §1: compare [`SessionActor::location`]s to see a
    /// move). Another session may bind it.
    pub fn actor_ref(&self) -> ActorRef {
        self.actor.clone()
    }

    /// The binding's current location snapshot, as it was when this handle
    /// was taken (L1); compare two snapshots to see a move.
    pub fn location(&self) -> LocationSnapshot {
        LocationSnapshot(self.actor.location.clone())
    }

    /// §5, §13 Relay: submits the packet to the Actor's current route as 24,
    /// keeping the original request correlation: the Actor's reply goes to the
    /// client directly, exactly once (§12). Consumes the packet's dispatch.
    pub fn relay(&self, packet: Packet) -> Result<(), Error> {
        let correlation = packet.dispatch.correlation;
        self.session
            .shard
            .relay(
                self.session.rid,
                &self.actor.id,
                packet.key,
                packet.payload,
                correlation,
            )
            .map_err(|e| e.about_actor(&self.actor.id))?;
        packet.dispatch.answered.set(true);
        Ok(())
    }

    /// §7, §13 NotifyDisconnected: the logical disconnect notification to this
    /// Actor while the connection stays open; completes when the Spot callback
    /// reached a terminal, after which the binding is gone.
    pub async fn notify_disconnected(&self) -> Result<(), Error> {
        let about = |e: Error| e.about_actor(&self.actor.id);
        let done = self
            .session
            .shard
            .notify_disconnected(self.session.rid, &self.actor.id)
            .map_err(about)?
            .await;
        done.unwrap_or_else(|| Err(Reason::SessionClosing.into()))
            .map_err(about)
    }
}

/// A packet from the client, as a packet handler receives it. A request's
/// correlation travels with it: relay it to an Actor, or answer it with
/// [`Session::reply`]. A request the handler leaves unanswered ends with a
/// typed error for the client — the handler's own error, or `NotAnswered` —
/// never with silence (§12).
#[derive(Debug)]
pub struct Packet {
    /// The packet key that selected the handler.
    pub key: PacketKey,
    /// The payload.
    pub payload: Bytes,
    pub(crate) dispatch: Rc<Dispatch>,
}

impl Packet {
    /// Whether the client waits for a reply.
    pub fn is_request(&self) -> bool {
        self.dispatch.correlation.is_some()
    }

    /// The payload decoded as a `T` (docs/wire.md "Typed payloads"); bytes
    /// that are not one give `MalformedPayload` naming `T`. The packet is
    /// left whole, so a handler may read it and still relay it.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        crate::typed::decode(&self.payload)
    }
}

/// The original request information of a packet (§5): its correlation, and
/// whether a terminal is on its way.
#[derive(Debug)]
pub(crate) struct Dispatch {
    pub(crate) correlation: Option<Correlation>,
    pub(crate) answered: Cell<bool>,
}

/// A shard's [`Dispatch`]es kept for reuse, so that dispatching a packet
/// allocates none once warm (issue 24 item 4). One is kept only when
/// nothing else holds it: a handler that kept its [`Packet`] past its turn
/// keeps that dispatch to itself.
#[derive(Debug, Default)]
pub(crate) struct Dispatches {
    spare: RefCell<Vec<Rc<Dispatch>>>,
}

impl Dispatches {
    /// At most this many are kept: the packet turns running at once on a
    /// shard, beyond which a dispatch is simply freed.
    const KEPT: usize = 64;

    /// A dispatch for a packet with `correlation` (none for a one-way
    /// message), not answered yet.
    #[inline]
    pub(crate) fn take(&self, correlation: Option<Correlation>) -> Rc<Dispatch> {
        let spare = self.spare.borrow_mut().pop();
        if let Some(mut dispatch) = spare {
            if let Some(fresh) = Rc::get_mut(&mut dispatch) {
                fresh.correlation = correlation;
                fresh.answered.set(false);
                return dispatch;
            }
        }
        Rc::new(Dispatch {
            correlation,
            answered: Cell::new(false),
        })
    }

    /// Keeps `dispatch`, whose packet's turn is over, for the next packet,
    /// unless its packet is still held somewhere.
    #[inline]
    pub(crate) fn give_back(&self, dispatch: Rc<Dispatch>) {
        let mut spare = self.spare.borrow_mut();
        if Rc::strong_count(&dispatch) == 1
            && Rc::weak_count(&dispatch) == 0
            && spare.len() < Self::KEPT
        {
            spare.push(dispatch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dispatch_given_back_is_reused_fresh_unless_its_packet_is_still_held() {
        let dispatches = Dispatches::default();
        let first = dispatches.take(Some(Correlation(1)));
        first.answered.set(true);
        let at = Rc::as_ptr(&first);
        dispatches.give_back(first);
        let second = dispatches.take(None);
        assert_eq!(Rc::as_ptr(&second), at, "the kept dispatch is reused");
        assert_eq!(second.correlation, None);
        assert!(
            !second.answered.get(),
            "a reused dispatch starts unanswered"
        );
        let held = Rc::clone(&second);
        dispatches.give_back(second);
        let third = dispatches.take(Some(Correlation(3)));
        assert_ne!(Rc::as_ptr(&third), at, "a dispatch still held was reused");
        assert_eq!(held.correlation, None, "the held dispatch was changed");
    }
}
