//! Deduplication of resent data frames.
//!
//! A client keeps every data frame until it is acknowledged and resends the unacknowledged
//! ones after a reconnect, so the server sees some frames twice. Within one process
//! (`process_uid`) and stream, frames are sent in sequence order, and a connection's frames
//! reach the session writer in the order they were read; so a frame whose `seq` is not above
//! the highest `seq` already stored for its (process, stream) is a duplicate. The map holds one
//! entry per stream ever seen in the session and is rebuilt at start-up from the record
//! headers of all segments ([`crate::recover`]).
//!
//! A duplicate is still acknowledged (the client needs to hear it is safe) and its timing is
//! still a valid clock sample, stored as a `StoreSample` with source `Duplicate`.

use std::collections::HashMap;

/// Highest stored sequence number per (process, stream).
#[derive(Debug, Default, Clone)]
pub struct Dedup {
    highest: HashMap<(u64, u32), u64>,
}

impl Dedup {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides whether a frame is new. Returns `true` (and remembers it) if `seq` is above
    /// everything stored for the stream, `false` for a duplicate.
    #[inline]
    pub fn admit(&mut self, process_uid: u64, stream: u32, seq: u64) -> bool {
        match self.highest.entry((process_uid, stream)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if seq <= *e.get() {
                    false
                } else {
                    e.insert(seq);
                    true
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(seq);
                true
            }
        }
    }

    /// Records a frame found in the store (recovery): keeps the maximum.
    pub fn observe(&mut self, process_uid: u64, stream: u32, seq: u64) {
        let e = self.highest.entry((process_uid, stream)).or_insert(seq);
        *e = (*e).max(seq);
    }

    /// Highest stored seq of a stream, if any frame of it is stored.
    pub fn highest(&self, process_uid: u64, stream: u32) -> Option<u64> {
        self.highest.get(&(process_uid, stream)).copied()
    }

    /// Number of streams known.
    pub fn len(&self) -> usize {
        self.highest.len()
    }

    /// True if no stream is known.
    pub fn is_empty(&self) -> bool {
        self.highest.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admit_and_observe() {
        let mut d = Dedup::new();
        assert!(d.admit(1, 0, 0));
        assert!(d.admit(1, 0, 1));
        assert!(!d.admit(1, 0, 1));
        assert!(!d.admit(1, 0, 0));
        assert!(d.admit(1, 1, 0), "other stream");
        assert!(d.admit(2, 0, 0), "other process");
        assert!(d.admit(1, 0, 5), "gaps are stored");
        d.observe(1, 0, 3);
        assert_eq!(d.highest(1, 0), Some(5));
        d.observe(3, 7, 9);
        assert!(!d.admit(3, 7, 9));
        assert_eq!(d.len(), 4);
    }
}
