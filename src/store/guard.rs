//! The debug-build check of "never block a shard" (docs/threading.md): a
//! shard thread marks itself at start, and every Location Store round trip
//! asserts that it is not made on such a thread. A store call that slips
//! back onto a shard panics there in a debug build, so the node's tests
//! fail; release builds pay nothing.

use std::cell::Cell;

thread_local! {
    static SHARD_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a shard thread for the rest of its life.
pub(crate) fn mark_shard_thread() {
    SHARD_THREAD.with(|shard| shard.set(true));
}

/// Asserts, in debug builds, that the calling thread is no shard thread:
/// called by each store's round trip.
pub(crate) fn assert_off_shard(operation: &str) {
    if cfg!(debug_assertions) && SHARD_THREAD.with(Cell::get) {
        panic!("Location Store call `{operation}` on a shard thread (docs/threading.md \"Never block a shard\")");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(debug_assertions)]
    fn a_store_call_on_a_marked_thread_panics_and_elsewhere_passes() {
        assert_off_shard("lookup");
        let on_shard = std::thread::spawn(|| {
            mark_shard_thread();
            assert_off_shard("lookup");
        });
        assert!(
            on_shard.join().is_err(),
            "the guard let a shard thread call the store"
        );
        assert_off_shard("lookup");
    }
}
