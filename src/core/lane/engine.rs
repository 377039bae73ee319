//! The one serial execution engine (§11): lanes, their queues and gates, and
//! the ready set. See the module documentation of [`crate::core::lane`].

use std::collections::VecDeque;

use super::detach::Detach;
use super::policy::{LanePolicy, PolicyRefusal};

/// Identifies one lane of one engine. Once the lane is removed its id is
/// stale forever: the generation is never issued again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneId {
    index: u32,
    generation: u64,
}

/// Why [`LaneEngine::submit`] did not take an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum LaneRefusal {
    /// The lane's queue holds `capacity` items already; the caller applies
    /// its backpressure rule (wait for admission up to its deadline, §6).
    #[error("lane queue is full ({capacity} items)")]
    Full {
        /// The lane's capacity.
        capacity: usize,
    },
    /// The lane's policy refused the item's class in its current state.
    #[error("lane refused the item: {0:?}")]
    Policy(PolicyRefusal),
    /// The lane was removed: its session or Actor is gone.
    #[error("lane was removed")]
    Removed,
}

/// An item [`LaneEngine::submit`] refused, handed back so that the caller can
/// answer it with a typed error: nothing accepted vanishes unrecorded.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused<T> {
    /// Why it was refused.
    pub reason: LaneRefusal,
    /// The item, untouched.
    pub item: T,
}

/// The execution gate of one lane, and its membership of the ready set: a
/// lane with a turn in progress is never in the ready set, so the two facts
/// are one three-state value rather than two booleans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// No turn in progress, not in the ready set.
    Open,
    /// No turn in progress, in the ready set (exactly once).
    Listed,
    /// A turn is in progress; nothing else of this lane runs.
    Closed,
}

/// One lane: a bounded FIFO queue, an execution gate and policy state.
///
/// This is the runtime's only type that pairs a queue with an execution gate
/// (CONTRACT W2, checked by `core_w2_one_serial_execution_primitive`; through the runtime by tests/rt_contract.rs `w2_…`).
#[derive(Debug)]
struct Lane<P: LanePolicy, T> {
    generation: u64,
    queue: VecDeque<T>,
    capacity: usize,
    gate: Gate,
    state: P::State,
}

impl<P: LanePolicy, T> Lane<P, T> {
    /// Whether the lane should be in the ready set and is not yet.
    fn wants_listing(&self) -> bool {
        self.gate == Gate::Open && !self.queue.is_empty() && P::dispatches(self.state)
    }
}

/// Many lanes and one ready set: the single serial-execution primitive that
/// Spot, session and Actor-delivery lanes share, told apart by `P` (§11).
///
/// A turn is one item: [`LaneEngine::next_turn`] hands out the head of the
/// first ready lane and closes its gate; [`LaneEngine::finish_turn`] reopens
/// it and puts the lane at the back of the ready set if it has more work.
/// That gives FIFO order within a lane, at most one turn per lane, and
/// round-robin fairness across lanes.
#[derive(Debug)]
pub struct LaneEngine<P: LanePolicy, T> {
    lanes: Vec<Option<Lane<P, T>>>,
    free: Vec<u32>,
    /// Lanes with an open gate, queued work and a dispatching state, in the
    /// order they became so. It may also hold ids of removed lanes and of
    /// lanes whose state stopped dispatching or whose queue `take_where`
    /// emptied; `next_turn` skips those.
    ready: VecDeque<LaneId>,
    generation_next: u64,
    lanes_len: usize,
}

impl<P: LanePolicy, T> Default for LaneEngine<P, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: LanePolicy, T> LaneEngine<P, T> {
    /// The largest queue capacity a lane may have: a bound on the memory one
    /// lane can hold, whatever its caller configures.
    pub const CAPACITY_MAX: usize = 1 << 20;

    /// An engine with no lanes.
    pub fn new() -> Self {
        Self {
            lanes: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            generation_next: 0,
            lanes_len: 0,
        }
    }

    /// How many lanes exist.
    #[cfg(feature = "testing")]
    pub fn lanes_len(&self) -> usize {
        self.lanes_len
    }

    /// Whether `id` names a lane that exists (was added and not removed).
    #[cfg(feature = "testing")]
    pub fn contains(&self, id: LaneId) -> bool {
        self.lane(id).is_some()
    }

    /// Adds a lane in state [`LanePolicy::OPEN`] whose queue holds at most
    /// `capacity` items (`1..=CAPACITY_MAX`).
    pub fn add_lane(&mut self, capacity: usize) -> LaneId {
        assert!(capacity >= 1, "a lane holds at least one item");
        assert!(
            capacity <= Self::CAPACITY_MAX,
            "lane capacity above CAPACITY_MAX"
        );
        let generation = self.generation_next;
        self.generation_next += 1;
        let lane = Lane {
            generation,
            queue: VecDeque::new(),
            capacity,
            gate: Gate::Open,
            state: P::OPEN,
        };
        let index = match self.free.pop() {
            Some(index) => {
                debug_assert!(self.lanes[index as usize].is_none());
                self.lanes[index as usize] = Some(lane);
                index
            }
            None => {
                let index = u32::try_from(self.lanes.len()).unwrap_or(u32::MAX);
                assert!(index < u32::MAX, "lane engine: u32::MAX lanes");
                self.lanes.push(Some(lane));
                index
            }
        };
        self.lanes_len += 1;
        LaneId { index, generation }
    }

    /// Removes a lane between turns and returns the items it still held, in
    /// order, for the caller to answer (nothing vanishes unrecorded).
    ///
    /// Removing a lane whose turn is in progress is a bug: the runtime
    /// closes the lane through its policy state, lets the turn finish, then
    /// removes it.
    pub fn remove_lane(&mut self, id: LaneId) -> VecDeque<T> {
        assert!(!self.in_turn(id), "removing a lane during its turn");
        let lane = self.lanes[id.index as usize].take();
        let Some(lane) = lane else {
            unreachable!("in_turn asserted that the lane exists");
        };
        debug_assert_eq!(lane.generation, id.generation);
        self.free.push(id.index);
        self.lanes_len -= 1;
        // A ready-set entry for this id, if any, is skipped by `next_turn`.
        lane.queue
    }

    /// Takes the items of lane `id` that `pick` selects, in their order, and
    /// leaves the others in theirs: a relocation's capture of one Actor's
    /// work off the Spot lane it shares with the rest of its Spot (§5,
    /// §8.1). The lane and its gate stay as they are.
    pub fn take_where(&mut self, id: LaneId, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
        let lane = self.expect_lane_mut(id);
        let mut taken = Vec::new();
        let mut kept = VecDeque::with_capacity(lane.queue.len());
        for item in lane.queue.drain(..) {
            if pick(&item) {
                taken.push(item);
            } else {
                kept.push_back(item);
            }
        }
        lane.queue = kept;
        taken
    }

    /// Queues `item` of `class` on lane `id`, or hands it back refused: the
    /// policy judges the class in the lane's state first (the more precise
    /// answer), then the capacity.
    ///
    /// An item queued behind others is detached first ([`Detach`]): it may
    /// wait for long, and must not keep its receive buffer alive meanwhile.
    pub fn submit(&mut self, id: LaneId, class: P::Class, mut item: T) -> Result<(), Refused<T>>
    where
        T: Detach,
    {
        let Some(lane) = self.lane_mut(id) else {
            return Err(Refused {
                reason: LaneRefusal::Removed,
                item,
            });
        };
        if let Err(refusal) = P::admit(lane.state, class) {
            return Err(Refused {
                reason: LaneRefusal::Policy(refusal),
                item,
            });
        }
        if lane.queue.len() >= lane.capacity {
            let reason = LaneRefusal::Full {
                capacity: lane.capacity,
            };
            return Err(Refused { reason, item });
        }
        if !lane.queue.is_empty() {
            item.detach();
        }
        lane.queue.push_back(item);
        debug_assert!(lane.queue.len() <= lane.capacity);
        self.list_if_ready(id);
        Ok(())
    }

    /// Sets lane `id`'s policy state. Setting the state it is in is a no-op;
    /// a transition the policy forbids is a bug and asserted. A lane whose
    /// state starts dispatching again re-enters the ready set at the back,
    /// and its held items come out in the order they were submitted.
    pub fn set_state(&mut self, id: LaneId, state: P::State) {
        let lane = self.expect_lane_mut(id);
        if lane.state == state {
            return;
        }
        assert!(
            P::may_transition(lane.state, state),
            "lane state {:?} -> {state:?} is not a transition of this policy",
            lane.state,
        );
        lane.state = state;
        self.list_if_ready(id);
    }

    /// Lane `id`'s policy state.
    pub fn state(&self, id: LaneId) -> P::State {
        self.expect_lane(id).state
    }

    /// How many items lane `id` holds (not counting one in its turn).
    #[cfg(feature = "testing")]
    pub fn queue_len(&self, id: LaneId) -> usize {
        self.expect_lane(id).queue.len()
    }

    /// Items queued over every lane, and the most one lane holds (not
    /// counting turns in progress): a metrics scrape's mailbox depth,
    /// O(lanes), so asked once per scrape and never per turn.
    pub fn queue_depths(&self) -> (usize, usize) {
        self.lanes
            .iter()
            .flatten()
            .fold((0, 0), |(total, deepest), lane| {
                (total + lane.queue.len(), deepest.max(lane.queue.len()))
            })
    }

    /// Whether lane `id` has a turn in progress (its gate is closed).
    pub fn in_turn(&self, id: LaneId) -> bool {
        self.expect_lane(id).gate == Gate::Closed
    }

    /// Whether a lane may be listed as ready: `false` means
    /// [`LaneEngine::next_turn`] has nothing to hand out. `true` may still
    /// find nothing (the ready set keeps the ids of lanes removed or
    /// emptied while listed).
    pub fn may_have_turn(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Starts the next turn: the head item of the first lane in the ready
    /// set, whose gate closes until [`LaneEngine::finish_turn`]. `None` when
    /// no lane has work that may run now.
    #[must_use]
    pub fn next_turn(&mut self) -> Option<(LaneId, T)> {
        while let Some(id) = self.ready.pop_front() {
            let Some(lane) = self.lane_mut(id) else {
                continue; // Removed while listed.
            };
            debug_assert_eq!(lane.gate, Gate::Listed, "ready set holds an unlisted lane");
            if !P::dispatches(lane.state) {
                lane.gate = Gate::Open; // Holding; set_state lists it again.
                continue;
            }
            let Some(item) = lane.queue.pop_front() else {
                // `take_where` emptied it while listed.
                lane.gate = Gate::Open;
                continue;
            };
            lane.gate = Gate::Closed;
            return Some((id, item));
        }
        None
    }

    /// Ends lane `id`'s turn: its gate opens, and it goes to the back of the
    /// ready set if it has more work. Ending a turn that is not in progress
    /// is a bug and asserted.
    pub fn finish_turn(&mut self, id: LaneId) {
        let lane = self.expect_lane_mut(id);
        assert_eq!(
            lane.gate,
            Gate::Closed,
            "finish_turn without a turn in progress"
        );
        lane.gate = Gate::Open;
        self.list_if_ready(id);
    }

    fn list_if_ready(&mut self, id: LaneId) {
        let lane = self.expect_lane_mut(id);
        if lane.wants_listing() {
            lane.gate = Gate::Listed;
            self.ready.push_back(id);
        }
    }

    fn lane(&self, id: LaneId) -> Option<&Lane<P, T>> {
        let lane = self.lanes.get(id.index as usize)?.as_ref()?;
        (lane.generation == id.generation).then_some(lane)
    }

    fn lane_mut(&mut self, id: LaneId) -> Option<&mut Lane<P, T>> {
        let lane = self.lanes.get_mut(id.index as usize)?.as_mut()?;
        (lane.generation == id.generation).then_some(lane)
    }

    fn expect_lane(&self, id: LaneId) -> &Lane<P, T> {
        match self.lane(id) {
            Some(lane) => lane,
            None => panic!("{id:?} names no lane: it was removed"),
        }
    }

    fn expect_lane_mut(&mut self, id: LaneId) -> &mut Lane<P, T> {
        match self.lane_mut(id) {
            Some(lane) => lane,
            None => panic!("{id:?} names no lane: it was removed"),
        }
    }
}
