//! The `p5` umbrella command's library: each subcommand is a module with a `run` function so
//! that `main.rs` stays a thin argument parser and tests can call the same code.

pub mod agent;
pub mod analyze;
pub mod demo;
pub mod export;
pub mod gate;
pub mod merge;
pub mod preload;
pub mod record;
pub mod web;
