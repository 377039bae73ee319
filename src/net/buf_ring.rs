//! The provided buffer ring that every multishot receive of a reactor
//! draws from (io_uring buffer rings, Linux 5.19).
//!
//! Ground rules: the kernel picks a buffer when data arrives and names it in
//! the completion; the reactor copies the bytes out and hands the buffer
//! back at once with [`BufRing::recycle`], so `count` buffers serve any
//! number of messages. The ring's memory is owned here and outlives the
//! registration; if the reactor cannot prove the kernel is done with it, it
//! is leaked rather than freed ([`BufRing::leak`]).

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

use super::probe::{buf_ring_error, ReactorError};

/// The alignment io_uring requires of a buffer ring: one page.
const PAGE: usize = 4096;

/// The largest ring the kernel accepts.
const COUNT_MAX: u16 = 1 << 15;

/// A registered ring of `count` buffers of `buffer_size` bytes each.
pub(super) struct BufRing {
    entries: NonNull<BufRingEntry>,
    entries_layout: Layout,
    buffers: NonNull<u8>,
    buffers_layout: Layout,
    count: u16,
    buffer_size: u32,
    /// The next tail to publish; the kernel owns the head.
    tail: u16,
}

// SAFETY: the ring memory is owned by this value alone; moving it to another
// thread moves that ownership with it, and the kernel's access does not
// depend on which thread owns the value.
unsafe impl Send for BufRing {}

impl BufRing {
    /// Allocates the ring with every buffer available to the kernel.
    pub(super) fn new(count: u16, buffer_size: u32) -> Result<Self, ReactorError> {
        if count == 0 || !count.is_power_of_two() || count > COUNT_MAX {
            return Err(ReactorError::InvalidConfig(
                "buffer_count must be a power of two between 1 and 32768",
            ));
        }
        if buffer_size == 0 {
            return Err(ReactorError::InvalidConfig("buffer_size must be positive"));
        }
        let entries_bytes = (usize::from(count) * std::mem::size_of::<BufRingEntry>()).max(PAGE);
        let buffers_bytes = usize::from(count).checked_mul(buffer_size as usize).ok_or(
            ReactorError::InvalidConfig("buffer_count * buffer_size overflows"),
        )?;
        let entries_layout = Layout::from_size_align(entries_bytes, PAGE)
            .map_err(|_| ReactorError::InvalidConfig("buffer ring too large"))?;
        let buffers_layout = Layout::from_size_align(buffers_bytes, PAGE)
            .map_err(|_| ReactorError::InvalidConfig("buffer memory too large"))?;
        let entries = zeroed(entries_layout)?.cast::<BufRingEntry>();
        let buffers = match zeroed(buffers_layout) {
            Ok(buffers) => buffers,
            Err(err) => {
                // SAFETY: `entries` was allocated just above with this layout
                // and nothing else refers to it yet.
                unsafe { alloc::dealloc(entries.as_ptr().cast(), entries_layout) };
                return Err(err);
            }
        };
        let mut ring = Self {
            entries,
            entries_layout,
            buffers,
            buffers_layout,
            count,
            buffer_size,
            tail: 0,
        };
        for bid in 0..count {
            ring.recycle(bid);
        }
        Ok(ring)
    }

    /// Registers the ring with `ring` as buffer group `group`.
    pub(super) fn register(&self, ring: &IoUring, group: u16) -> Result<(), ReactorError> {
        // SAFETY: the entries are page-aligned, `count` long and initialised;
        // they stay allocated for as long as the registration can be used,
        // because the reactor drops (or leaks) this value only after its
        // ring's operations have ended.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.entries.as_ptr() as u64,
                self.count,
                group,
                0,
            )
        }
        .map_err(buf_ring_error)
    }

    /// The bytes the kernel wrote into buffer `bid`, or `None` if the
    /// completion named a buffer or a length this ring does not have.
    pub(super) fn filled(&self, bid: u16, len: usize) -> Option<&[u8]> {
        if bid >= self.count || len > self.buffer_size as usize {
            return None;
        }
        let offset = usize::from(bid) * self.buffer_size as usize;
        // SAFETY: `bid < count` and `len <= buffer_size`, so the range lies
        // inside the buffer allocation; the kernel finished writing it
        // before posting the completion and does not touch it again until
        // `recycle(bid)` republishes it.
        Some(unsafe { std::slice::from_raw_parts(self.buffers.as_ptr().add(offset), len) })
    }

    /// Hands buffer `bid` back to the kernel.
    pub(super) fn recycle(&mut self, bid: u16) {
        if bid >= self.count {
            return;
        }
        let index = usize::from(self.tail & (self.count - 1));
        let offset = usize::from(bid) * self.buffer_size as usize;
        // SAFETY: `index < count`, inside the entries allocation; the entry at
        // the tail is not visible to the kernel until the tail store below,
        // and the kernel never writes the ring.
        unsafe {
            let entry = &mut *self.entries.as_ptr().add(index);
            entry.set_addr(self.buffers.as_ptr().add(offset) as u64);
            entry.set_len(self.buffer_size);
            entry.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field is the `resv` of entry 0, inside the
        // allocation and aligned for u16; the kernel only reads it, with
        // acquire ordering, which pairs with this release store so that it
        // sees the entry written above.
        unsafe {
            let tail = BufRingEntry::tail(self.entries.as_ptr()).cast_mut();
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }

    /// Gives up the memory without freeing it: used when the kernel may
    /// still write into a buffer.
    pub(super) fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: both regions were allocated in `new` with these layouts;
        // the reactor drops this value only once no operation can use them.
        unsafe {
            alloc::dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            alloc::dealloc(self.buffers.as_ptr(), self.buffers_layout);
        }
    }
}

/// Allocates zeroed memory for `layout` (whose size is never zero here).
fn zeroed(layout: Layout) -> Result<NonNull<u8>, ReactorError> {
    // SAFETY: every layout built in `new` has a non-zero size.
    let ptr = unsafe { alloc::alloc_zeroed(layout) };
    NonNull::new(ptr).ok_or_else(|| ReactorError::Setup(io::ErrorKind::OutOfMemory.into()))
}
