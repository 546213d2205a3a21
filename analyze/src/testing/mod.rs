//! Test support shared by this crate's tests and benches and the `p5` binary's tests
//! (feature `testing`): capture files forged by hand ([`forge`]).

pub mod forge;
