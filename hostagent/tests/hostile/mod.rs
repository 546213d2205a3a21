//! Hostile peers against a real host agent's listener (the one its child agents and
//! processes connect to), with a real good child beside them: the p5 runtime relayed by the
//! agent to a real log server. The attackers and the good client are the log server tests'
//! own (these files are shared).

#[path = "../../../logserver/tests/hostile/attack.rs"]
pub mod attack;
#[path = "../../../logserver/tests/hostile/good.rs"]
pub mod good;

mod relay;
