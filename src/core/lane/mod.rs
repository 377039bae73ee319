//! The one serial execution engine and its lane policy types (§10, §11).
//!
//! # What it owns
//!
//! Order, admission and the ready set for every serial lane of a shard:
//! Spot lanes, session lanes and Actor-delivery lanes. §11 asks for exactly
//! one engine, so that the limit handling and ready-set management of the
//! execution gate are written (and fixed) in one place; what differs per site
//! is a [`LanePolicy`] type, whose `State` holds only that site's states of
//! the §11 table ([`SpotLane`], [`SessionLane`], [`ActorDeliveryLane`]).
//!
//! A [`LaneEngine<P, T>`] holds many lanes of one policy. Each lane has a
//! bounded FIFO queue of `T`, an execution gate (at most one turn in progress)
//! and a `P::State`. The engine has one ready set: a FIFO of the lanes that
//! have queued work, an open gate and a state that dispatches.
//!
//! # Ground rules
//!
//! - Separation of queue and gate (§11, last paragraph): [`LaneEngine::submit`]
//!   only queues; a turn starts only through [`LaneEngine::next_turn`] and
//!   ends only through [`LaneEngine::finish_turn`]. The turn may span awaits
//!   of the application callback (§10): the gate stays closed meanwhile and
//!   no other item of that lane runs, which is what keeps two session
//!   callbacks of one connection from running at once (W1). Infrastructure
//!   work (bind terminals, seals, cleanup, §10) does not run as lane turns,
//!   so it proceeds while a turn awaits.
//! - One item per turn, FIFO within a lane, round-robin across lanes: a lane
//!   whose turn ends goes to the back of the ready set.
//! - A held state ([`SpotState::ReturnWait`], [`SpotState::MoveSealing`])
//!   admits and keeps items in order; leaving it dispatches them in the order
//!   they were submitted, before anything submitted later (§8.2: held
//!   messages go before messages arriving after the seal is released).
//! - Admission is judged once, at submit: [`SessionState::Closed`] refuses
//!   new application items and admits lifecycle items (§6); what was
//!   admitted runs.
//! - A refusal hands the item back ([`Refused`]), so the caller answers it
//!   with a typed error; a drained lane ([`LaneEngine::remove_lane`]) hands
//!   back what it held. Nothing accepted vanishes unrecorded.
//! - The engine never reads a clock, spawns or locks. It is per shard and
//!   single-threaded; cross-shard submission arrives through the runtime's
//!   queues and is submitted here by the owning shard.
//! - Misuse that only a bug can cause is asserted: finishing a turn that is
//!   not in progress, removing a lane during its turn, a transition the
//!   policy forbids, a query with a removed [`LaneId`]. Input that load or a
//!   race can cause is a [`LaneRefusal`]: a full queue, a closed session, a
//!   submission to a lane already removed.
//!
//! # Limits
//!
//! - A lane's capacity is `1..=LaneEngine::CAPACITY_MAX` items; at capacity,
//!   [`LaneEngine::submit`] refuses with [`LaneRefusal::Full`] and the caller
//!   applies its backpressure rule. Held items (a relocation seal) count
//!   against the same ordinary capacity and get no special cap (§8.1).
//! - At most `u32::MAX - 1` lanes per engine (the slot index; asserted). The
//!   shard bounds lanes by bounding sessions and Actors.
//! - The ready set holds each lane at most once, plus one stale entry per
//!   lane removed while listed; `next_turn` drops those as it reaches them
//!   (and unlists a lane whose state stopped dispatching while listed).
//! - Queues grow on demand and keep their allocation, so an idle lane costs
//!   no item storage and a warm lane allocates nothing per item.
//!
//! # Example
//!
//! ```
//! use zlink::core::lane::{LaneEngine, SessionClass, SessionLane, SessionState};
//!
//! let mut lanes: LaneEngine<SessionLane, &str> = LaneEngine::new();
//! let session = lanes.add_lane(64);
//! assert_eq!(lanes.submit(session, SessionClass::Application, "packet"), Ok(()));
//! assert_eq!(lanes.next_turn(), Some((session, "packet")));
//! // §6: closing refuses new application dispatch, admits the callback.
//! lanes.set_state(session, SessionState::Closed);
//! assert!(lanes.submit(session, SessionClass::Application, "late").is_err());
//! assert_eq!(lanes.submit(session, SessionClass::Lifecycle, "replaced"), Ok(()));
//! assert!(lanes.next_turn().is_none(), "one turn per lane at a time");
//! lanes.finish_turn(session);
//! assert_eq!(lanes.next_turn(), Some((session, "replaced")));
//! ```

mod detach;
mod engine;
mod policy;

pub use detach::{detached, Detach};

pub use engine::{LaneEngine, LaneId, LaneRefusal};
pub use policy::{
    ActorDeliveryLane, Ordinary, SessionClass, SessionLane, SessionState, SpotLane, SpotState,
};
// Named by the W3 tests (tests/lanes.rs) and the unit tests; the runtime
// needs no name for them.
#[cfg(feature = "testing")]
pub use engine::Refused;
#[cfg(feature = "testing")]
pub use policy::{ActorDeliveryState, LanePolicy, PolicyRefusal};

#[cfg(test)]
mod tests;
