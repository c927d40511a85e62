//! The pure recovery policies (DESIGN.md "Recovery rules"): classification,
//! retry planning, the circuit breaker and the catch-up planner.

pub mod catchup;
pub mod circuit;
pub mod classify;
pub mod retry;
