//! A latency histogram that one thread records into and any thread reads,
//! with no lock (issue 24: the relay and push latency, the relocation
//! pause and the Actor turn duration a metrics scrape shows,
//! src/runtime/metrics.rs).
//!
//! Why not `prometheus_client`'s `Histogram`: it takes a mutex on every
//! observation, and these are observed on a shard thread, once per relayed
//! message, where no lock is taken (docs/threading.md "Never block a
//! shard"). Here one thread owns the writes: an observation is a bucket
//! found with one `leading_zeros` and two relaxed load-and-store pairs,
//! which on x86-64 and AArch64 are plain loads and stores (no locked
//! instruction, no fence). A scrape reads the atomics as they are; a
//! bucket and the sum read a moment apart may differ by the observations
//! made in between, which a rate over a scrape interval does not notice.
//!
//! Buckets are powers of two in microseconds, from 16 µs to 2^23 µs (about
//! 8.4 s), then one for everything longer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket count: `BUCKETS - 1` bounded buckets and the overflow.
pub const BUCKETS: usize = 21;

/// The smallest bucket's bound is 2^`FIRST_BITS` µs (16 µs).
const FIRST_BITS: u32 = 4;

/// A single-writer histogram (module doc).
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    /// Observations per bucket (not cumulative).
    buckets: [AtomicU64; BUCKETS],
    /// The sum of every observation, in microseconds.
    sum_micros: AtomicU64,
}

/// What a histogram held when it was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    /// Observations per bucket (not cumulative), the overflow last.
    pub buckets: [u64; BUCKETS],
    /// The sum of every observation, in microseconds.
    pub sum_micros: u64,
}

impl LatencySnapshot {
    /// How many observations it holds.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds `other`'s observations (a node sums its shards).
    pub fn merge(&mut self, other: &LatencySnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.sum_micros += other.sum_micros;
    }
}

/// Bucket `index`'s upper bound in seconds (`f64::INFINITY` for the
/// overflow).
pub fn upper_bound_seconds(index: usize) -> f64 {
    if index + 1 >= BUCKETS {
        return f64::INFINITY;
    }
    // index < BUCKETS, so the shift stays far below 64.
    let micros = 1u64 << (FIRST_BITS as usize + index);
    micros as f64 / 1e6
}

/// The bucket an observation of `micros` falls in.
fn bucket(micros: u64) -> usize {
    // The bits of micros - 1: ceil(log2(micros)) for micros >= 2.
    let bits = 64 - micros.max(1).saturating_sub(1).leading_zeros();
    let index = bits.saturating_sub(FIRST_BITS) as usize;
    index.min(BUCKETS - 1)
}

/// Adds one to a counter only this thread writes (module doc).
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

impl LatencyHistogram {
    /// Records one observation. Only one thread may record into a given
    /// histogram (its owner: one shard); a second writer would lose counts
    /// (never memory safety). Readers may be any number of threads.
    pub fn record(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        bump(&self.buckets[bucket(micros)], 1);
        bump(&self.sum_micros, micros);
    }

    /// Reads every bucket and the sum (module doc: not one instant).
    pub fn snapshot(&self) -> LatencySnapshot {
        let mut snapshot = LatencySnapshot {
            sum_micros: self.sum_micros.load(Ordering::Relaxed),
            ..LatencySnapshot::default()
        };
        for (into, from) in snapshot.buckets.iter_mut().zip(self.buckets.iter()) {
            *into = from.load(Ordering::Relaxed);
        }
        snapshot
    }
}

/// Where a push handed to a client came from, as the session owner sees
/// it: the two spans differ (see [`CoreLatency::push`]), so they are kept
/// apart rather than mixed in one histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOrigin {
    /// From an Actor on this node: its push to the frame handed to the
    /// client's connection, the whole push.
    Local,
    /// A 36 from a peer: from the node reading it off the link to the frame
    /// handed to the client's connection (the Actor's node and the link are
    /// not in it: no clock is shared across nodes).
    Link,
}

impl PushOrigin {
    /// Every origin, in index order.
    pub const ALL: [PushOrigin; 2] = [PushOrigin::Local, PushOrigin::Link];

    /// The `origin` label.
    pub fn name(self) -> &'static str {
        match self {
            PushOrigin::Local => "local",
            PushOrigin::Link => "link",
        }
    }
}

/// How a relocation seal on a binding ended (§8.1, §8.2), for the pause
/// histogram's `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealEnd {
    /// 44 commit: the held messages went to the target, which serves the
    /// Actor.
    Committed,
    /// 44 abort: the held messages went back to the source.
    Aborted,
    /// SessionRelocationSealTimeout: no 44 in time, the session was closed.
    TimedOut,
}

impl SealEnd {
    /// Every end, in index order.
    pub const ALL: [SealEnd; 3] = [SealEnd::Committed, SealEnd::Aborted, SealEnd::TimedOut];

    /// The `outcome` label.
    pub fn name(self) -> &'static str {
        match self {
            SealEnd::Committed => "committed",
            SealEnd::Aborted => "aborted",
            SealEnd::TimedOut => "timed_out",
        }
    }
}

/// The histograms one shard core records into, from its inputs' own times
/// (no clock read; the core is their only writer) and a scrape reads.
#[derive(Debug, Default)]
pub struct CoreLatency {
    /// A relayed request, from the session's relay to the reply reaching
    /// its session owner (one clock: the round trip ends where it began).
    pub relay: LatencyHistogram,
    /// A push, by [`PushOrigin`]: from when it entered this node's path
    /// (the Actor's push, or the 36 read off a link) to the session owner
    /// handing its frame to the client's connection — the shard hops and
    /// queues a push waits in on this node, at the resolution of the
    /// shards' loop turns (each reads its clock once per turn).
    pub push: [LatencyHistogram; PushOrigin::ALL.len()],
    /// The relocation pause a client sees, by [`SealEnd`]: how long a
    /// binding was sealed, from the 42 installing the seal (its messages
    /// held from then on, the Actor captured at its source) to the 44 that
    /// released it (the target serving the Actor, which sent the 44 after
    /// opening it) or the seal timeout.
    pub pause: [LatencyHistogram; SealEnd::ALL.len()],
}

impl CoreLatency {
    /// The push histogram of `origin`.
    pub fn push(&self, origin: PushOrigin) -> &LatencyHistogram {
        &self.push[origin as usize]
    }

    /// The pause histogram of `end`.
    pub fn pause(&self, end: SealEnd) -> &LatencyHistogram {
        &self.pause[end as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_bucket_whose_bound_covers_them() {
        let histogram = LatencyHistogram::default();
        for micros in [0, 1, 16, 17, 32, 33, 1_000, 8_388_608, 8_388_609, u64::MAX] {
            histogram.record(Duration::from_micros(micros));
        }
        let seen = histogram.snapshot();
        assert_eq!(seen.count(), 10);
        assert_eq!(seen.buckets[0], 3, "0, 1 and 16 µs are at most 16 µs");
        assert_eq!(seen.buckets[1], 2, "17 and 32 µs");
        assert_eq!(seen.buckets[2], 1, "33 µs");
        assert_eq!(seen.buckets[6], 1, "1 ms is at most 1,024 µs");
        assert_eq!(seen.buckets[BUCKETS - 2], 1, "2^23 µs, the last bound");
        assert_eq!(seen.buckets[BUCKETS - 1], 2, "past it: the overflow");
        assert_eq!(upper_bound_seconds(0), 0.000_016);
        assert_eq!(upper_bound_seconds(BUCKETS - 2), 8.388_608);
        assert_eq!(upper_bound_seconds(BUCKETS - 1), f64::INFINITY);
    }

    /// The label values are the ones docs/operations.md documents (and
    /// dashboards and alerts query): `origin` of
    /// `zlink_push_duration_seconds`, `outcome` of
    /// `zlink_relocation_pause_seconds`.
    #[test]
    fn the_label_values_are_the_documented_ones() {
        let origins: Vec<_> = PushOrigin::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(origins, ["local", "link"]);
        let ends: Vec<_> = SealEnd::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(ends, ["committed", "aborted", "timed_out"]);
    }

    /// A node's histogram is the sum of its shards' (src/runtime/metrics.rs
    /// merges their snapshots): each bucket and the sum add up.
    #[test]
    fn a_merged_snapshot_adds_each_bucket_and_the_sum() {
        // Given two shards' histograms with observations in shared and in
        // separate buckets.
        let (one, two) = (LatencyHistogram::default(), LatencyHistogram::default());
        for micros in [10, 40] {
            one.record(Duration::from_micros(micros));
        }
        for micros in [40, 1_000] {
            two.record(Duration::from_micros(micros));
        }

        // When the node merges the second into the first.
        let mut node = one.snapshot();
        node.merge(&two.snapshot());

        // Then each bucket holds both shards' counts, and the sum both sums.
        let mut expected = [0; BUCKETS];
        expected[0] = 1; // 10 µs
        expected[2] = 2; // 40 µs, twice
        expected[6] = 1; // 1 ms
        assert_eq!(
            node,
            LatencySnapshot {
                buckets: expected,
                sum_micros: 1_090,
            }
        );
        assert_eq!(node.count(), 4);
    }

    #[test]
    fn each_label_has_its_own_histogram() {
        let latency = CoreLatency::default();
        latency
            .push(PushOrigin::Link)
            .record(Duration::from_micros(40));
        latency
            .pause(SealEnd::Aborted)
            .record(Duration::from_millis(3));
        assert_eq!(latency.push(PushOrigin::Local).snapshot().count(), 0);
        assert_eq!(latency.push(PushOrigin::Link).snapshot().sum_micros, 40);
        assert_eq!(latency.pause(SealEnd::Committed).snapshot().count(), 0);
        assert_eq!(latency.pause(SealEnd::Aborted).snapshot().sum_micros, 3_000);
        for (i, origin) in PushOrigin::ALL.iter().enumerate() {
            assert_eq!(*origin as usize, i);
        }
        for (i, end) in SealEnd::ALL.iter().enumerate() {
            assert_eq!(*end as usize, i);
        }
    }
}
