//! A latency histogram that one thread records into and any thread reads,
//! with no lock (issue 24: the relay latency and the Actor turn duration a
//! metrics scrape shows, src/runtime/metrics.rs).
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
}
