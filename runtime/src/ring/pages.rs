//! Where a ring's slots live: an anonymous private mapping of their own, made with `mmap`
//! and returned with `munmap` when the flusher frees the ring.
//!
//! Why not the allocator: a ring is large (16 MiB by default) and must cost only what it
//! holds, because a thread-per-connection server creates one for every short thread.
//! `alloc_zeroed` gives that only while glibc serves such a request with a fresh mapping.
//! Once a ring has been freed glibc raises its mmap threshold past the ring's size (its
//! dynamic threshold), after which rings come from an arena and `calloc` clears all 16 MiB
//! by hand: 1,000 short threads of 4 events each reached 5.3–6.5 GB peak and a thread's
//! first event took 1.43 ms. A mapping of our own is zero-filled by the kernel page by page
//! as the producer reaches it, so a ring that held four events costs one page, its first
//! event a page fault, and its end one `munmap` (on the flusher thread). `MAP_NORESERVE`
//! keeps untouched pages from counting against the commit limit where the kernel allows it.
//!
//! The hot path does not change: it writes through the same slot pointer.

use crate::record::Slot;
use std::ptr::NonNull;

/// Bytes of `cap` slots, or `None` if that overflows.
fn bytes(cap: usize) -> Option<usize> {
    cap.checked_mul(std::mem::size_of::<Slot>())
}

/// Maps `cap` zeroed slots; `None` if the kernel refuses.
pub(super) fn map(cap: usize) -> Option<NonNull<Slot>> {
    let len = bytes(cap)?;
    // SAFETY: a fresh anonymous mapping touches no existing memory; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // Page-aligned, so aligned for `Slot` (16 bytes).
    NonNull::new(p.cast::<Slot>())
}

/// Unmaps slots mapped by [`map`] with the same `cap`.
///
/// # Safety
/// `p` came from `map(cap)` and nothing uses it any more.
pub(super) unsafe fn unmap(p: NonNull<Slot>, cap: usize) {
    if let Some(len) = bytes(cap) {
        // SAFETY: per the contract, the whole mapping is ours and unused.
        unsafe { libc::munmap(p.as_ptr().cast(), len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident pages of this process, from `/proc/self/statm`.
    fn resident_pages() -> usize {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        s.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// A 16 MiB ring costs what is written to it: mapping it and writing one slot leaves
    /// the process's resident size within a few pages of where it was.
    #[test]
    fn a_mapped_ring_is_resident_only_where_written() {
        let cap = 1 << 20;
        let before = resident_pages();
        let p = map(cap).unwrap();
        // SAFETY: slot 0 of a fresh mapping.
        unsafe {
            assert_eq!(p.as_ptr().read(), Slot::default(), "zero-filled");
            p.as_ptr().write(Slot([1, 2]));
        }
        let after = resident_pages();
        assert!(
            after < before + 64,
            "{} pages resident after one write to a 16 MiB ring",
            after.saturating_sub(before)
        );
        // SAFETY: mapped just above, no longer used.
        unsafe { unmap(p, cap) };
    }
}
