//! The p5 wire format: the bytes every producer (runtime, host agent, OS monitor) sends to the
//! log server, and the records the log server keeps in its append-only session store.
//!
//! Everything here is a pure codec: no I/O, no async, no allocation beyond what the input's own
//! length bounds. Every decoder is total: bad bytes give a [`DecodeError`], never a panic.
//! The format is specified in `docs/wire.md`; `test_vectors/` holds byte-exact vectors that every
//! runtime implementation must reproduce.
//!
//! Layers, from the outside in:
//! - [`frame`]: the envelope `len | crc32c | type | body` used on connections, in spool files
//!   and in store segments alike;
//! - [`hello`]: the handshake (magic, version, capability flags, process identity);
//! - [`data`]: sequenced per-stream data frames (stream open/close, event batches) and the
//!   control frames (ping, ack, goodbye, error);
//! - [`datagram`]: clock pings over UDP beside the connection;
//! - [`event`]: the compact event encoding inside an event batch (≈ 2–4 bytes per event);
//! - [`store`]: segment header and record types of the log server's session store;
//! - [`manifest`] and [`sensors`]: what the instrumenter says about its sensors, beside the
//!   tree (the manifest) and inside each instrumented file (its sensor table);
//! - [`selection`]: the instrumentation selection file `p5 web` writes and the instrumenter
//!   reads (`p5.select.toml`).

pub mod codec;
pub mod data;
pub mod datagram;
pub mod endpoint;
pub mod error;
pub mod event;
pub mod frame;
pub mod hello;
pub mod manifest;
pub mod selection;
pub mod sensors;
pub mod store;

pub use data::{DataHeader, EventsFrame, StreamKind, StreamOpen};
pub use endpoint::Endpoint;
pub use error::DecodeError;
pub use event::{
    CommOp, Event, EventDecoder, EventEncoder, RUNTIME_SENSORS, SensorId, SocketProto,
};
pub use frame::{FrameType, RawFrame};
pub use hello::{Caps, Hello, HelloAck, Identity, RuntimeKind};

/// Protocol version spoken by this implementation. Peers agree on capability flags, not on an
/// exact version: a newer peer keeps accepting everything an older one sends.
pub const PROTOCOL_VERSION: u16 = 1;
