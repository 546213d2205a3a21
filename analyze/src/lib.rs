//! `p5 analyze`: causal paths inferred from message traces alone.
//!
//! The papers behind it (`../shared/seeds`): Project 5's nesting and convolution algorithms,
//! WAP5's message linking, and the flows of self-propelled instrumentation. Every analysis
//! reads the same input — a [`trace::Trace`], a list of [`trace::Message`]s between named
//! nodes — whichever source it came from (a merged p5 session, a Project 5 text trace, pcap
//! captures), and every analysis writes the same pattern output.
//!
//! Three floors; imports only go down:
//!
//! - **Edge** — the trace database behind one [`db::Database`] handle (opened once by the
//!   caller, its connections kept), and the one driver [`job`] that reads a [`source`], runs
//!   an analysis and stores the run. [`import`] writes a trace or capture as a session.
//! - **Algorithms** — [`nesting`], [`convolution`], [`linking`], [`flows`], [`score`],
//!   [`maketrace`], and [`causality`] (what a recorded session's threads say): pure functions of a trace and their parameters (no files, sockets, SQL,
//!   clocks or printing); each reports progress through a callback ([`progress`]).
//! - **Formats and transforms** — the Project 5 text format ([`text`]), captures ([`pcap`]),
//!   the pattern output ([`pattern`], [`output`]), the mapping of database rows
//!   ([`session`], [`store`]), fat messages ([`fat`]), client aggregation ([`clients`]),
//!   clock skew ([`skew`]).
//! - **Model** — [`trace`], [`node`], [`report`], [`error`], and the shared parsers of
//!   option values ([`parse`], [`choice`]).
//!
//! No command-line parser and no printing here: the `p5` binary holds the front (options,
//! progress bars, what is printed) and passes plain option structs down.

pub mod causality;
pub mod choice;
pub mod clients;
pub mod convolution;
pub mod db;
pub mod error;
pub mod fat;
pub mod flows;
pub mod hash;
pub mod import;
pub mod job;
pub mod linking;
pub mod maketrace;
pub mod nesting;
pub mod node;
pub mod output;
pub mod parse;
pub mod pattern;
pub mod pcap;
pub mod progress;
pub mod report;
pub mod score;
pub mod session;
pub mod skew;
pub mod source;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod text;
pub mod trace;

pub use error::{Error, Result};
pub use progress::Progress;
pub use report::{Problem, ReadReport};
pub use trace::{CallId, Conn, ConnId, Kind, Message, NodeId, Nodes, Proto, Time, Trace};
