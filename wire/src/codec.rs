//! Primitive codecs: little-endian fixed-width integers, LEB128 varints, zigzag, and
//! length-prefixed strings, read by a bounds-checked [`Reader`] and appended to a `Vec<u8>` by
//! the `put_*` functions.

use crate::error::{DecodeError, Result};

/// Longest string any field may carry (argv entries, names, paths).
pub const MAX_STRING: usize = 64 * 1024;

/// Zigzag-maps a signed integer so that small magnitudes become small unsigned numbers.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes a LEB128 varint.
#[inline]
pub fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Writes a zigzag varint.
#[inline]
pub fn put_ivarint(buf: &mut Vec<u8>, v: i64) {
    put_varint(buf, zigzag(v));
}

/// Writes a length-prefixed UTF-8 string, cut at [`MAX_STRING`] bytes on a char boundary.
pub fn put_str(buf: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_varint(buf, end as u64);
    buf.extend_from_slice(&s.as_bytes()[..end]);
}

/// Writes a length-prefixed byte string, cut at [`MAX_STRING`].
pub fn put_bytes(buf: &mut Vec<u8>, b: &[u8]) {
    let b = &b[..b.len().min(MAX_STRING)];
    put_varint(buf, b.len() as u64);
    buf.extend_from_slice(b);
}

/// A bounds-checked cursor over input bytes. Every read either succeeds or returns
/// [`DecodeError::Truncated`]; nothing here can panic or allocate more than the input holds.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Current offset from the start.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The unread rest of the input.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Fails with [`DecodeError::Trailing`] unless all input was consumed.
    pub fn finish(&self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    /// Takes the next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                need: n - self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(DecodeError::Truncated { need: 1 }),
        }
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// Reads a big-endian u16 (network order, used for ports).
    pub fn u16_be(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads a little-endian i64.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads a LEB128 varint of at most 10 bytes that fits in 64 bits.
    #[inline]
    pub fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let low = (b & 0x7f) as u64;
            if i == 9 && b > 1 {
                return Err(DecodeError::Varint);
            }
            v |= low << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Varint)
    }

    /// Reads a zigzag varint.
    #[inline]
    pub fn ivarint(&mut self) -> Result<i64> {
        self.varint().map(unzigzag)
    }

    /// Reads a varint that must fit in `u32`.
    pub fn varint_u32(&mut self, field: &'static str) -> Result<u32> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| DecodeError::Invalid { field, value: v })
    }

    /// Reads a length-prefixed byte string of at most [`MAX_STRING`] bytes.
    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8]> {
        let len = self.varint()?;
        if len > MAX_STRING as u64 {
            return Err(DecodeError::Invalid { field, value: len });
        }
        self.take(len as usize)
    }

    /// Reads a length-prefixed UTF-8 string.
    pub fn str(&mut self, field: &'static str) -> Result<String> {
        let b = self.bytes(field)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| DecodeError::Utf8 { field })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_edges() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v);
            r.finish().unwrap();
        }
    }

    #[test]
    fn varint_overlong_is_error() {
        let b = [0xffu8; 11];
        assert_eq!(Reader::new(&b).varint(), Err(DecodeError::Varint));
        // 10th byte may only carry one bit.
        let mut b = vec![0xffu8; 9];
        b.push(0x02);
        assert_eq!(Reader::new(&b).varint(), Err(DecodeError::Varint));
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -64, 63] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn string_limits() {
        let mut b = Vec::new();
        put_varint(&mut b, (MAX_STRING + 1) as u64);
        assert!(matches!(
            Reader::new(&b).str("x"),
            Err(DecodeError::Invalid { .. })
        ));
        let mut b = Vec::new();
        put_str(&mut b, "héllo");
        assert_eq!(Reader::new(&b).str("x").unwrap(), "héllo");
    }
}
