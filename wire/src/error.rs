//! Decode errors. Every decoder in this crate returns one of these instead of panicking.

/// Why a byte sequence is not a valid p5 frame, record or event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// More bytes are needed to finish the item (a half frame, a truncated record).
    #[error("truncated input: need {need} more bytes")]
    Truncated {
        /// How many more bytes the decoder needed at least.
        need: usize,
    },
    /// The length prefix is outside the allowed range.
    #[error("frame length {len} out of range (max {max})")]
    BadLength {
        /// The announced length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The crc32c does not match the bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// Checksum in the frame.
        stored: u32,
        /// Checksum of the bytes.
        computed: u32,
    },
    /// A magic number did not match.
    #[error("bad magic {found:?}")]
    BadMagic {
        /// The bytes found instead.
        found: Vec<u8>,
    },
    /// A varint ran past 10 bytes or overflowed 64 bits.
    #[error("malformed varint")]
    Varint,
    /// A string was not UTF-8.
    #[error("invalid utf-8 in {field}")]
    Utf8 {
        /// Which field.
        field: &'static str,
    },
    /// A field has a value the format does not allow.
    #[error("invalid {field}: {value}")]
    Invalid {
        /// Which field.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// The item decoded but bytes were left over where none may be.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Shorthand for results of decoders.
pub type Result<T> = std::result::Result<T, DecodeError>;
