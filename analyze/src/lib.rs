//! `p5 analyze`: causal paths inferred from message traces alone.
//!
//! The papers behind it (`../shared/seeds`): Project 5's nesting and convolution algorithms,
//! WAP5's message linking, and the flows of self-propelled instrumentation. Every analysis
//! reads the same input — a [`trace::Trace`], a list of [`trace::Message`]s between named
//! nodes — whichever source it came from (a merged p5 session, a Project 5 text trace, pcap
//! captures), and every analysis writes the same pattern output.
//!
//! Layout: the algorithms are pure (no I/O, no clocks); readers and writers sit at the edge
//! (files in `text` and `pcap`, the trace database in [`db`], whose rows [`session`] and
//! [`store`] map without I/O).

pub mod cli;
pub mod clients;
pub mod convolution;
pub mod db;
pub mod error;
pub mod fat;
pub mod flows;
pub mod hash;
pub mod import;
pub mod input;
pub mod linking;
pub mod maketrace;
pub mod nesting;
pub mod node;
pub mod output;
pub mod pattern;
pub mod pcap;
pub mod report;
pub mod score;
pub mod session;
pub mod skew;
pub mod store;
pub mod text;
pub mod trace;

pub use error::{Error, Result};
pub use report::{Problem, ReadReport};
pub use trace::{CallId, Conn, ConnId, Kind, Message, NodeId, Nodes, Proto, Time, Trace};
