//! Flows, anomalies and root causes on p5's own sessions (self-propelled instrumentation,
//! seed 002 §3–§4; analysis.md §1.4, §6 WP4): `p5 analyze flows` and `p5 analyze diff`.
//!
//! * [`model`]: what is read of a session (threads, sensors, intervals, messages, marks,
//!   counter samples) and the user's rules (start events, join directives);
//! * [`rules`]: flow construction — communication-pair and per-thread message-switch rules,
//!   start events, directives; segments and call-path statistics per flow;
//! * [`paths`]: interned call paths (a path's prefixes are its ancestors);
//! * [`profiles`]: coverage and composite profiles, L1 distance;
//! * [`anomaly`]: suspect scores (k-th nearest flow, or nearest known-normal flow);
//! * [`rootcause`]: Δa/Δn, prefix pruning, leaf merging, two rankings;
//! * [`load`] (the database edge, read through [`crate::db::Database`]), [`store`] (rows),
//!   [`report`] (terminal and JSON), [`job`] (the two commands, reading and storing).
//!
//! Algorithms are pure; only `load` does I/O.

pub mod anomaly;
pub mod job;
pub mod load;
pub mod model;
pub mod paths;
pub mod profiles;
pub mod report;
pub mod rootcause;
pub mod rules;
pub mod store;
