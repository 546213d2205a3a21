//! Stable sensor ids.
//!
//! An id is the 64-bit FNV-1a hash of (relative path, enclosing function, kind, ordinal of the
//! sensor of that kind within that function), each field followed by a 0xff separator byte
//! that cannot occur in UTF-8 text. No line numbers go in, so editing one function does not
//! renumber the sensors of any other, and re-instrumenting unchanged code yields the same ids.
//! FNV-1a is fixed forever (no per-process key), which is what stability needs; collisions
//! among the few thousand sensors of a program are negligible at 64 bits. Zero means "no
//! sensor" on the wire, so a zero hash is mapped to 1.

use crate::sensor::Kind;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

fn feed(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    h ^= 0xff;
    h.wrapping_mul(PRIME)
}

/// The id of the `ordinal`-th (0-based) sensor of `kind` in `function` of file `path`.
pub fn derive(path: &str, function: &str, kind: Kind, ordinal: u32) -> u64 {
    let mut h = OFFSET;
    h = feed(h, path.as_bytes());
    h = feed(h, function.as_bytes());
    h = feed(h, kind.name().as_bytes());
    h = feed(h, &ordinal.to_le_bytes());
    if h == 0 { 1 } else { h }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_distinct() {
        let a = derive("src/a.c", "main", Kind::Function, 0);
        // Pinned: changing the derivation would silently re-key every stored trace.
        assert_eq!(a, derive("src/a.c", "main", Kind::Function, 0));
        assert_eq!(
            format!("{a:#x}"),
            format!("{:#x}", 0x706f_a4dd_1446_42f9_u64)
        );
        assert_ne!(a, derive("src/a.c", "main", Kind::Function, 1));
        assert_ne!(a, derive("src/a.c", "main", Kind::Comm, 0));
        assert_ne!(a, derive("src/b.c", "main", Kind::Function, 0));
        // Field boundaries matter: ("ab", "c") is not ("a", "bc").
        assert_ne!(
            derive("ab", "c", Kind::Call, 0),
            derive("a", "bc", Kind::Call, 0)
        );
    }
}
