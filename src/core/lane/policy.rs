//! Lane policy types (§11): what differs between a Spot lane, a session lane
//! and an Actor-delivery lane, as types the one [`LaneEngine`] is generic over.
//!
//! §11 forbids expressing the difference as booleans, because most of their
//! combinations are meaningless. Each policy's `State` is an enum holding
//! only the states the §11 table gives that site, plus `Open`, the ordinary
//! state every lane starts in:
//!
//! | Site | States it has | States it doesn't have |
//! | --- | --- | --- |
//! | Spot lane ([`SpotLane`]) | Return-wait, move sealing | Connection closed |
//! | Session lane ([`SessionLane`]) | Connection closed | Return-wait, move sealing |
//! | Actor-delivery lane ([`ActorDeliveryLane`]) | None | Return-wait, move sealing, connection closed |
//!
//! A policy decides two things and nothing else: whether an item of a class
//! is *admitted* in a state ([`LanePolicy::admit`]) and whether a state
//! *dispatches* queued items ([`LanePolicy::dispatches`]). Order, capacity,
//! the execution gate and the ready set belong to the engine alone, so that
//! they are written once (§11, first bullet).
//!
//! The W3 proof (CONTRACT W3) is on [`LanePolicy`].
//!
//! [`LaneEngine`]: super::LaneEngine

use std::fmt::Debug;

/// Why a policy refused an item in the lane's current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PolicyRefusal {
    /// §6: the session is closing or closed; new inbound application
    /// dispatch is refused (lifecycle items are still admitted).
    ConnectionClosed,
}

/// What differs between lane sites (§11): the states a lane can be in, the
/// classes of item it takes, and the admission and dispatch rule.
///
/// # W3: the policy types cannot express a state missing from the §11 table
///
/// CONTRACT W3 asks for static proof. Each block below but the last fails
/// to compile; the last, written the same way with the states that do
/// exist, compiles, so the only reason for each failure is the missing state.
///
/// Move sealing on the session lane does not exist:
///
/// ```compile_fail,E0599
/// use zlink::core::lane::SessionState;
/// let _ = SessionState::MoveSealing;
/// ```
///
/// Return-wait on the session lane does not exist:
///
/// ```compile_fail,E0599
/// use zlink::core::lane::SessionState;
/// let _ = SessionState::ReturnWait;
/// ```
///
/// Connection closed on the Spot lane does not exist:
///
/// ```compile_fail,E0599
/// use zlink::core::lane::SpotState;
/// let _ = SpotState::Closed;
/// ```
///
/// Return-wait, move sealing and connection closed on the Actor-delivery lane
/// do not exist:
///
/// ```compile_fail,E0599
/// use zlink::core::lane::ActorDeliveryState;
/// let _ = ActorDeliveryState::ReturnWait;
/// ```
///
/// ```compile_fail,E0599
/// use zlink::core::lane::ActorDeliveryState;
/// let _ = ActorDeliveryState::MoveSealing;
/// ```
///
/// ```compile_fail,E0599
/// use zlink::core::lane::ActorDeliveryState;
/// let _ = ActorDeliveryState::Closed;
/// ```
///
/// Nor can one lane's state be given to another lane's engine, which is what
/// "move sealing on a session" would take:
///
/// ```compile_fail,E0308
/// use zlink::core::lane::{LaneEngine, SessionLane, SpotState};
/// let mut lanes: LaneEngine<SessionLane, u32> = LaneEngine::new();
/// let id = lanes.add_lane(8);
/// lanes.set_state(id, SpotState::MoveSealing);
/// ```
///
/// The states that do exist compile, through the same paths:
///
/// ```
/// use zlink::core::lane::{
///     ActorDeliveryState, LaneEngine, SessionLane, SessionState, SpotLane, SpotState,
/// };
/// let _ = (SessionState::Open, SessionState::Closed);
/// let _ = (SpotState::Open, SpotState::ReturnWait, SpotState::MoveSealing);
/// let _ = ActorDeliveryState::Open;
/// let mut spots: LaneEngine<SpotLane, u32> = LaneEngine::new();
/// let id = spots.add_lane(8);
/// spots.set_state(id, SpotState::MoveSealing);
/// let mut sessions: LaneEngine<SessionLane, u32> = LaneEngine::new();
/// let id = sessions.add_lane(8);
/// sessions.set_state(id, SessionState::Closed);
/// ```
///
/// The unit test `core_w3_lane_policy_cannot_express_missing_states` checks the
/// other half: each policy's [`LanePolicy::TABLE_STATES`] equals the table's
/// "states it has" column, with exhaustive matches that stop compiling if a
/// variant is added without updating the table.
///
/// [`LaneEngine`]: super::LaneEngine
pub trait LanePolicy {
    /// The lane's states: only those the §11 table gives this site, and `Open`.
    type State: Copy + Eq + Debug + 'static;
    /// The kind of item submitted, as far as admission cares.
    type Class: Copy + Eq + Debug;

    /// The state a new lane starts in: open, dispatching, admitting all.
    const OPEN: Self::State;
    /// The states of this site in the §11 table ("states it has"), in order.
    /// Read only by the W3 tests, which check it against the table.
    #[cfg(feature = "testing")]
    const TABLE_STATES: &'static [Self::State];

    /// Whether an item of `class` enters the queue of a lane in `state`.
    fn admit(state: Self::State, class: Self::Class) -> Result<(), PolicyRefusal>;

    /// Whether a lane in `state` hands out queued items for turns.
    fn dispatches(state: Self::State) -> bool;

    /// Whether a lane may go from `from` to a different state `to`; the engine
    /// asserts it, since a forbidden transition is a bug of the caller, not an
    /// input. (Setting the state a lane is already in is always a no-op.)
    fn may_transition(from: Self::State, to: Self::State) -> bool;
}

/// The class of every item on a lane whose admission ignores classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ordinary;

/// The Spot lane: the turns of the Actors of one Spot (SpotWide mode).
#[derive(Clone, Copy, Debug)]
pub enum SpotLane {}

/// The states of a Spot lane (§11 row "Spot lane").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpotState {
    /// Ordinary: items are admitted and dispatched.
    Open,
    /// A handler waits for a return: items are admitted and held. The return
    /// itself resumes the waiting handler without queueing; the runtime then
    /// sets `Open`.
    // A state of the §11 table: the policy handles it and the W3 tests
    // drive it, but no runtime path sets it (the runtime sets only Open and
    // MoveSealing on a Spot lane), so nothing constructs it in a build
    // without the `testing` feature.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    ReturnWait,
    /// §8: the relocation seal; items are admitted and held, in order, until
    /// the move commits or aborts and the runtime sets `Open`.
    MoveSealing,
}

#[cfg(feature = "testing")]
impl SpotState {
    /// Every Spot lane state.
    pub const ALL: &'static [SpotState] = &[Self::Open, Self::ReturnWait, Self::MoveSealing];
}

impl LanePolicy for SpotLane {
    type State = SpotState;
    type Class = Ordinary;

    const OPEN: SpotState = SpotState::Open;
    #[cfg(feature = "testing")]
    const TABLE_STATES: &'static [SpotState] = &[SpotState::ReturnWait, SpotState::MoveSealing];

    fn admit(_: SpotState, _: Ordinary) -> Result<(), PolicyRefusal> {
        // §8.1: held messages get no relocation-specific cap; only the
        // lane's ordinary capacity applies, which the engine checks.
        Ok(())
    }

    fn dispatches(state: SpotState) -> bool {
        match state {
            SpotState::Open => true,
            SpotState::ReturnWait | SpotState::MoveSealing => false,
        }
    }

    fn may_transition(from: SpotState, to: SpotState) -> bool {
        // A wait or a seal is entered from Open and left to Open; the two
        // never stack, since each is released before the other can begin.
        matches!((from, to), (SpotState::Open, _) | (_, SpotState::Open))
    }
}

/// The session lane: a session's handler turns, binding mutations, close
/// and relocation barrier, serialized by the session owner (§10).
#[derive(Clone, Copy, Debug)]
pub enum SessionLane {}

/// The states of a session lane (§11 row "session lane").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// Ordinary: every class is admitted and dispatched.
    Open,
    /// §6: the connection is closing or closed. New application items are
    /// refused; lifecycle items (the replacement and disconnect callbacks)
    /// are admitted; everything admitted still runs, in order. Terminal.
    Closed,
}

#[cfg(feature = "testing")]
impl SessionState {
    /// Every session lane state.
    pub const ALL: &'static [SessionState] = &[Self::Open, Self::Closed];
}

/// What a session lane item is, as far as admission cares (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionClass {
    /// Inbound application dispatch: a client packet for a session handler.
    Application,
    /// A lifecycle turn: the replacement callback, the disconnect callback.
    Lifecycle,
}

impl LanePolicy for SessionLane {
    type State = SessionState;
    type Class = SessionClass;

    const OPEN: SessionState = SessionState::Open;
    #[cfg(feature = "testing")]
    const TABLE_STATES: &'static [SessionState] = &[SessionState::Closed];

    fn admit(state: SessionState, class: SessionClass) -> Result<(), PolicyRefusal> {
        match (state, class) {
            (SessionState::Open, _) | (SessionState::Closed, SessionClass::Lifecycle) => Ok(()),
            (SessionState::Closed, SessionClass::Application) => {
                Err(PolicyRefusal::ConnectionClosed)
            }
        }
    }

    fn dispatches(state: SessionState) -> bool {
        // Closing refuses new work at admission; what was admitted (and the
        // lifecycle callbacks) still runs, so the lane keeps dispatching.
        match state {
            SessionState::Open | SessionState::Closed => true,
        }
    }

    fn may_transition(from: SessionState, to: SessionState) -> bool {
        // A closing connection never reopens (§6, §9: a reconnect is a new
        // session with a new lane).
        (from, to) == (SessionState::Open, SessionState::Closed)
    }
}

/// The Actor-delivery lane: delivery into one Actor's queue (PerActor mode).
#[derive(Clone, Copy, Debug)]
pub enum ActorDeliveryLane {}

/// The only state of an Actor-delivery lane: the §11 table gives it none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActorDeliveryState {
    /// Ordinary: items are admitted and dispatched.
    Open,
}

#[cfg(feature = "testing")]
impl ActorDeliveryState {
    /// Every Actor-delivery lane state.
    pub const ALL: &'static [ActorDeliveryState] = &[Self::Open];
}

impl LanePolicy for ActorDeliveryLane {
    type State = ActorDeliveryState;
    type Class = Ordinary;

    const OPEN: ActorDeliveryState = ActorDeliveryState::Open;
    #[cfg(feature = "testing")]
    const TABLE_STATES: &'static [ActorDeliveryState] = &[];

    fn admit(_: ActorDeliveryState, _: Ordinary) -> Result<(), PolicyRefusal> {
        Ok(())
    }

    fn dispatches(state: ActorDeliveryState) -> bool {
        match state {
            ActorDeliveryState::Open => true,
        }
    }

    fn may_transition(_: ActorDeliveryState, _: ActorDeliveryState) -> bool {
        // With one state there is no different state to go to.
        false
    }
}
