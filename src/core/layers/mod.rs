//! The three layers of DESIGN.md "Trigger rules" as pure functions and values:
//! time (is the window open?), switches (may anything run?), gates (is the
//! world ready?). The engine gathers the facts; these decide.

pub mod gates;
pub mod switches;
pub mod time;
