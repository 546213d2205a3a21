//! p5-hostagent: the host agent (`hostagent`). It samples the host (CPU, load, memory, paging,
//! network, disk, interrupts, monitored processes), optionally records kernel scheduling,
//! interrupt and network softirq events (the OS monitor), and delivers everything as host-metric and OS-monitor
//! streams to `p5-logserver`, directly or through a tree of agents steered from the top.
//!
//! Map: [`start`] starts an agent (the binary's command line becomes its [`AgentOptions`]); [`agent`] holds the shared state and the sampling loop;
//! [`sample`] (sysinfo) and [`proc_stat`] (/proc) take samples named per [`metric`] and
//! selected per [`settings`]; [`stream`] numbers and encodes frames; [`outbox`] and
//! [`spool`] keep them until acknowledged; [`uplink`] talks to the parent or log server;
//! [`tree`] accepts children and relays them; [`ctl`] is the steering protocol and client;
//! [`osmon`], [`kernel_trace`], [`kernel_event`], [`tracefs`] and [`ringbuf`] are the OS
//! monitor; [`link`] frames sockets within the memory [`budget`], which also governs the
//! listener's connection cap;
//! [`clock`] and [`identity`] say when and who; [`signal`] turns SIGINT/SIGTERM into a clean
//! stop (flush, close streams, drain, else leave an importable spool).
//!
//! Time: every stamp is CLOCK_MONOTONIC relative to the agent's start (`start_mono_ns` in its
//! Hello), so kernel `mono` trace times map exactly and the log server's `t_s − t_p` pairs
//! apply to the agent as to any producer.

pub mod agent;
pub mod budget;
pub mod clock;
pub mod ctl;
pub mod identity;
pub mod kernel_event;
pub mod kernel_trace;
pub mod link;
pub mod metric;
pub mod osmon;
pub mod outbox;
pub mod proc_stat;
pub mod ringbuf;
pub mod sample;
pub mod settings;
pub mod signal;
pub mod spool;
pub mod start;
pub mod stream;
pub mod tracefs;
pub mod tree;
pub mod uplink;

pub use start::{AgentOptions, Announce, RunError};
