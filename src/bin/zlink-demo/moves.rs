//! Live relocation under load (§8): while the clients play, mover threads
//! move their players between the nodes — each mover owns its own players,
//! so it always knows where each one is — chosen from a seeded sequence that
//! the report prints, so a failing run can be repeated move for move.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use zlink::api::RelocateTo;
use zlink::ids::{ActorId, SpotId};

use crate::game::GameNode;
use crate::load::{host_node, player_name, room_name, room_of};

/// What the movers did.
pub struct MoveTally {
    /// Relocations asked for.
    pub asked: u64,
    pub committed: u64,
    /// Moves that ended with a typed error, by kind/reason (the player stays
    /// where it was).
    pub refused: BTreeMap<String, u64>,
    /// Moves of a player back to a node it had been relocated away from.
    pub returns: u64,
    /// Moves of a whole room (a SpotWide Spot with its players).
    pub rooms: u64,
    /// Time from `relocate` to its commit, µs.
    pub latency: Histogram<u64>,
    /// A mover thread panicked.
    pub panicked: bool,
}

impl MoveTally {
    pub fn new() -> Self {
        Self {
            asked: 0,
            committed: 0,
            refused: BTreeMap::new(),
            returns: 0,
            rooms: 0,
            // Constant bounds: 1 µs to 60 s, 3 significant digits.
            latency: Histogram::new_with_bounds(1, 60_000_000, 3)
                .expect("valid constant histogram bounds"),
            panicked: false,
        }
    }

    pub fn merge(&mut self, other: MoveTally) {
        self.asked += other.asked;
        self.committed += other.committed;
        for (k, n) in other.refused {
            *self.refused.entry(k).or_default() += n;
        }
        self.returns += other.returns;
        self.rooms += other.rooms;
        self.panicked |= other.panicked;
        let _ = self.latency.add(&other.latency);
    }

    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }
}

/// SplitMix64: a tiny, well-known generator; enough to pick players and
/// targets reproducibly from a seed without a dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One mover: relocations of the players `indices`, each to a node other
/// than its current one, chosen from `seed` — at least `budget` of them, and
/// on until `stop` is set, so the moves overlap every phase of play.
pub fn run_mover(
    mesh: &[GameNode],
    indices: &[usize],
    budget: usize,
    seed: u64,
    stop: &AtomicBool,
) -> MoveTally {
    let mut tally = MoveTally::new();
    let mut rng = SplitMix(seed);
    let nodes = mesh.len();
    let mut hosts: BTreeMap<usize, (usize, Option<usize>)> = indices
        .iter()
        .map(|&i| (i, (host_node(i, nodes), None)))
        .collect();
    if indices.is_empty() || nodes < 2 || budget == 0 {
        return tally;
    }
    let mut asked = 0;
    while asked < budget || !stop.load(Ordering::Relaxed) {
        asked += 1;
        let index = indices[rng.below(indices.len())];
        let Some(&(from, previous)) = hosts.get(&index) else {
            continue;
        };
        let to = (from + 1 + rng.below(nodes - 1)) % nodes;
        let hint = RelocateTo::Node(mesh[to].rid);
        tally.asked += 1;
        let started = Instant::now();
        // A room's player moves with its room: the whole Spot, one unit.
        let (moved, members) = match room_of(index) {
            Some(room) => {
                let Ok(spot) = SpotId::new(&room_name(room)) else {
                    continue;
                };
                let members: Vec<usize> = indices
                    .iter()
                    .copied()
                    .filter(|&i| room_of(i) == Some(room))
                    .collect();
                (mesh[from].node.relocate_spot(&spot, hint), members)
            }
            None => {
                let Ok(id) = ActorId::new(&player_name(index)) else {
                    continue;
                };
                (mesh[from].node.relocate(&id, hint), vec![index])
            }
        };
        match moved {
            Ok(()) => {
                let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.latency.saturating_record(micros.max(1));
                tally.committed += 1;
                if previous == Some(to) {
                    tally.returns += 1;
                }
                if room_of(index).is_some() {
                    tally.rooms += 1;
                }
                for member in members {
                    hosts.insert(member, (to, Some(from)));
                }
            }
            Err(error) => {
                let key = format!("{:?}/{:?}", error.kind(), error.reason());
                *tally.refused.entry(key).or_default() += 1;
                // An abort leaves the player at the source (the clients'
                // final WHERE shows every player is still served).
            }
        }
    }
    tally
}
