//! The `relocate` workload's figure (issue 5 item 1, §8): the pause a
//! client sees while its player moves. A move's pause is the longest
//! latency of the moved player's requests that were in flight at any time
//! during the move (sent before it ended, answered after it began): the
//! time that player's client waited at worst because of it. Moves begun in
//! the measured window count; a move that did not commit is counted and
//! noted with its typed error.

use std::collections::HashMap;
use std::time::Duration;

use crate::client::Tally;
use crate::systems::Move;

/// Adds to `tally` the pause (`pause`) and the duration of the
/// `Node::relocate` call (`move`) of each move begun in the measured window.
pub fn record(tally: &mut Tally, moves: &[Move]) {
    let Some(phases) = tally.phases else {
        return;
    };
    let timelines: HashMap<usize, Vec<(std::time::Instant, u64)>> =
        std::mem::take(&mut tally.timelines).into_iter().collect();
    for m in moves {
        if m.start < phases.warm_end || m.start >= phases.measure_end {
            continue;
        }
        if let Some(why) = &m.failed {
            tally.move_failures += 1;
            tally.note(format!("a move did not commit: {why}"));
            continue;
        }
        let overlapping = timelines.get(&m.player).into_iter().flatten();
        let pause = overlapping
            .filter(|(sent, ns)| *sent < m.end && *sent + Duration::from_nanos(*ns) > m.start)
            .map(|(_, ns)| *ns)
            .max();
        if let Some(ns) = pause {
            tally.record_kind("pause", ns);
        }
        let took = u64::try_from((m.end - m.start).as_nanos()).unwrap_or(u64::MAX);
        tally.record_kind("move", took);
    }
}
