//! Hostile peers against a real log server, with a real good client beside them ([`good`]).
//! The attackers ([`attack`]) come and go for as long as the good client runs: whenever the
//! server closes one, it reconnects and starts over.

pub mod attack;
pub mod good;

mod allow;
mod budget;
mod cap;
