//! p5-instrument: the instrumentation engine of the CoSMoS application monitor (seed 004
//! §2.1), for C, C++, Rust, Python and Java. It parses each file with tree-sitter, inserts
//! sensor calls of the p5 runtime, and writes the instrumented tree, a sensor manifest
//! (`p5-manifest.json`, `docs/manifest.md`) and content-addressed copies of the sources.
//!
//! Guarantees, enforced at the point of use: every inserted token goes on an existing line
//! ([`edit`]: insertions containing a line break are refused), so compiler errors and
//! click-back point at the user's lines; sensor ids are stable ([`sensor_id`]: path,
//! function, kind, ordinal — no line numbers); re-instrumenting output changes nothing (each
//! engine recognises its own sensors); a region tree-sitter cannot parse is left untouched
//! and reported, never a panic. The one exception to "existing lines": the sensor-table
//! registration [`describe`] appends after the last line of a C, C++ or Rust file.
//!
//! Module map: [`lang`] (extensions, grammars), [`walk`] (inputs), [`mod@unit`] (one file:
//! parsing, large C/C++ files in parallel chunks, each walked as soon as it is parsed), the
//! engines [`c`] (C and C++, with [`mod@include`]), [`rust`], [`python`], [`java`], with
//! [`region`] and [`tree`] helpers; [`sensor`] and [`sensor_id`], [`edit`], [`select`]
//! (`p5.select.toml`), [`manifest`], [`describe`] (the sensor table each instrumented file
//! carries and registers at start-up), [`runtime`] (`--cflags`, `--libs`, the header), and
//! [`mod@run`] tying them up.

pub mod c;
pub mod describe;
pub mod edit;
pub mod include;
pub mod java;
pub mod lang;
pub mod manifest;
pub mod python;
pub mod region;
pub mod run;
pub mod runtime;
pub mod rust;
pub mod select;
pub mod sensor;
pub mod sensor_id;
pub mod tree;
pub mod unit;
pub mod walk;

pub use lang::Lang;
pub use run::{Options, Report, RunError, run};
pub use select::Selection;
pub use unit::{Modes, Outcome, instrument};
