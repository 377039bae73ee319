//! The sans-IO protocol core: deterministic state machines that take
//! `(now, input)` and return what to send, what to deliver and which timers to
//! arm. Nothing here reads a clock, touches a socket, spawns or locks.

pub mod lane;
pub mod time;
pub mod timer;
pub mod trace;
