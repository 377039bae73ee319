//! Scripts of hostile input for a small mesh in a known state: the ground the
//! `core_records` fuzz target (fuzz/, docs/TESTING.md) and its seed corpus
//! stand on, and what its regression tests replay on stable.
//!
//! A script is bytes, read as [`Step`]s until they run out: a record body
//! from any of [`Ground::peers`] (current, stale, later or unknown
//! generations, a node outside the mesh) to any node, or an advance of
//! virtual time. Bodies go through [`NodeRecord::decode`] as the transport's
//! would; one that does not decode never reaches a core and is only counted
//! here (answering a malformed request is the runtime's part, through
//! `NodeRecord::request_of`, and the `node_record` target checks it). The
//! point is the rule that no record from a peer, however stale, forged or
//! out of order, panics, hangs or grows a core without bound.
//!
//! Layout of a step: `[u8 tag]` then, for tag % 4 = 0 (record),
//! `[u8 from][u8 to][u16 len][len bytes]` (a short body takes what is
//! left); for 1, 2, 3 (advance) a `u16` count of microseconds,
//! milliseconds or seconds. All integers big-endian.

use std::time::Duration;

use bytes::Bytes;

use super::Mesh;
use crate::core::time::Instant;
use crate::ids::{NodeGeneration, NodeRid, Peer};
use crate::wire::node::NodeRecord;
use crate::wire::DecodeLimits;

/// One step of a script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A record body (the bytes after the length prefix) sent by
    /// `Ground::peers()[from % len]` to `Ground::NODES[to % len]`.
    Record {
        /// Index of the sending peer.
        from: u8,
        /// Index of the receiving node.
        to: u8,
        /// The undecoded body.
        body: Bytes,
    },
    /// Virtual time moves forward, firing every timer that falls due.
    Advance(Duration),
}

const TAG_RECORD: u8 = 0;
const TAG_MICROS: u8 = 1;
const TAG_MILLIS: u8 = 2;
const TAG_SECONDS: u8 = 3;

impl Step {
    /// Appends the step's bytes to `dst`. An advance is written in the
    /// coarsest unit that holds it exactly, saturating at `u16::MAX` of it;
    /// a body longer than `u16::MAX` is cut there.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        match self {
            Step::Record { from, to, body } => {
                let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
                dst.extend_from_slice(&[TAG_RECORD, *from, *to]);
                dst.extend_from_slice(&len.to_be_bytes());
                dst.extend_from_slice(&body[..usize::from(len)]);
            }
            Step::Advance(by) => {
                let (tag, count) = if by.subsec_nanos() == 0 {
                    (TAG_SECONDS, by.as_secs())
                } else if by.subsec_nanos() % 1_000_000 == 0 {
                    (
                        TAG_MILLIS,
                        u64::try_from(by.as_millis()).unwrap_or(u64::MAX),
                    )
                } else {
                    (
                        TAG_MICROS,
                        u64::try_from(by.as_micros()).unwrap_or(u64::MAX),
                    )
                };
                let count = u16::try_from(count).unwrap_or(u16::MAX);
                dst.push(tag);
                dst.extend_from_slice(&count.to_be_bytes());
            }
        }
    }

    /// The steps of `script`, in order; a step cut short by the end of the
    /// bytes ends the script (a record's body excepted: it takes what is left).
    pub fn parse(script: &[u8]) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut rest = script;
        while let Some((&tag, after)) = rest.split_first() {
            rest = after;
            let step = match tag % 4 {
                TAG_RECORD => {
                    let Some((&[from, to, hi, lo], after)) = rest.split_first_chunk::<4>() else {
                        break;
                    };
                    let len = usize::from(u16::from_be_bytes([hi, lo])).min(after.len());
                    let (body, after) = after.split_at(len);
                    rest = after;
                    Step::Record {
                        from,
                        to,
                        body: Bytes::copy_from_slice(body),
                    }
                }
                unit => {
                    let Some((&count, after)) = rest.split_first_chunk::<2>() else {
                        break;
                    };
                    rest = after;
                    let count = u64::from(u16::from_be_bytes(count));
                    Step::Advance(match unit {
                        TAG_MICROS => Duration::from_micros(count),
                        TAG_MILLIS => Duration::from_millis(count),
                        _ => Duration::from_secs(count),
                    })
                }
            };
            steps.push(step);
        }
        steps
    }
}

/// Three nodes with Actors created in the Location Store and sessions bound
/// to them, local and remote: node 1 hosts "c" and holds session 1 (bound to
/// "a" and "c"), node 2 hosts "a" and holds session 2 (bound to "b"), node 3
/// hosts "b".
#[derive(Debug)]
pub struct Ground {
    mesh: Mesh,
    malformed: u64,
}

impl Ground {
    /// The nodes of the mesh, by RID; a step's `to` indexes this.
    pub const NODES: [u64; 3] = [1, 2, 3];

    /// The mesh in its starting state.
    pub fn new() -> Self {
        let mut mesh = Mesh::default();
        let [n1, n2, n3] = Self::NODES.map(|rid| mesh.add_node(rid));
        let a = mesh.create(n2, "a");
        let b = mesh.create(n3, "b");
        let c = mesh.create(n1, "c");
        for (node, actors) in [(n1, vec![a, c]), (n2, vec![b])] {
            let session = mesh.connect(node);
            for actor in actors {
                let bound = mesh.bind(node, session, &actor);
                assert!(bound.is_ok(), "the ground's bind failed: {bound:?}");
            }
        }
        Self { mesh, malformed: 0 }
    }

    /// Every identity a step may send as, in index order: per node of
    /// [`Ground::NODES`] its current generation (1), an older one (0) and a
    /// later one (2); then a node outside the mesh.
    pub fn peers() -> Vec<Peer> {
        let mut peers = Vec::new();
        for rid in Self::NODES {
            for generation in [1, 0, 2] {
                peers.push(Peer {
                    rid: NodeRid(rid),
                    generation: NodeGeneration(generation),
                });
            }
        }
        peers.push(Peer {
            rid: NodeRid(9),
            generation: NodeGeneration(1),
        });
        peers
    }

    /// The index of `peer` in [`Ground::peers`], if it is there.
    pub fn peer_index(peer: Peer) -> Option<u8> {
        let at = Self::peers().iter().position(|p| *p == peer)?;
        u8::try_from(at).ok()
    }

    /// The index of `node` in [`Ground::NODES`], if it is there.
    pub fn node_index(node: NodeRid) -> Option<u8> {
        let at = Self::NODES.iter().position(|&rid| rid == node.0)?;
        u8::try_from(at).ok()
    }

    /// Carries out one step, and everything it sets off, until no record is
    /// in flight (a record) or the new time (an advance).
    pub fn apply(&mut self, step: Step) {
        match step {
            Step::Record { from, to, body } => {
                let peers = Self::peers();
                let from = peers[usize::from(from) % peers.len()];
                let to = NodeRid(Self::NODES[usize::from(to) % Self::NODES.len()]);
                match NodeRecord::decode(body, &DecodeLimits::default()) {
                    Ok(record) => {
                        self.mesh.inject_as(from, to, record);
                        self.mesh.run();
                    }
                    Err(_) => self.malformed += 1,
                }
            }
            Step::Advance(by) => self.mesh.advance(by),
        }
    }

    /// Carries out every step of `script`.
    pub fn run_script(&mut self, script: &[u8]) {
        for step in Step::parse(script) {
            self.apply(step);
        }
    }

    /// A timer deadline at or before the mesh's time that is still armed on
    /// some node. After an advance there is none: every timer due by the new
    /// time has fired (a timer fires at its deadline, never sooner, and the
    /// mesh calls `handle_timeout` then).
    pub fn overdue_timer(&self) -> Option<Instant> {
        self.mesh.next_timer().filter(|&at| at <= self.mesh.now())
    }

    /// The mesh, for queries.
    pub fn mesh(&self) -> &Mesh {
        &self.mesh
    }

    /// The mesh, for commands (the corpus generator drives scenarios on it).
    pub fn mesh_mut(&mut self) -> &mut Mesh {
        &mut self.mesh
    }

    /// Bodies that did not decode and were dropped.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

impl Default for Ground {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_read_back_as_written_and_a_cut_step_ends_the_script() {
        let steps = vec![
            Step::Record {
                from: 3,
                to: 1,
                body: Bytes::from_static(&[24, 1, 0]),
            },
            Step::Advance(Duration::from_micros(250)),
            Step::Advance(Duration::from_millis(1_500)),
            Step::Advance(Duration::from_secs(3_601)),
            Step::Record {
                from: 0,
                to: 2,
                body: Bytes::new(),
            },
        ];
        let mut script = Vec::new();
        for step in &steps {
            step.encode(&mut script);
        }
        assert_eq!(Step::parse(&script), steps);
        // An advance cut after its tag, and a body shorter than its length.
        assert_eq!(Step::parse(&[TAG_MILLIS, 0]), vec![]);
        assert_eq!(
            Step::parse(&[TAG_RECORD, 1, 2, 0, 9, 42]),
            vec![Step::Record {
                from: 1,
                to: 2,
                body: Bytes::from_static(&[42]),
            }]
        );
    }

    #[test]
    fn a_body_that_does_not_decode_is_a_counted_drop() {
        let mut ground = Ground::new();
        let sent = ground.mesh().tap().len();
        ground.run_script(&[TAG_RECORD, 0, 1, 0, 2, 45, 1]);
        assert_eq!(ground.malformed(), 1);
        assert_eq!(ground.mesh().tap().len(), sent, "nothing was sent");
    }
}
