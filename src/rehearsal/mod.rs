//! Failure rehearsals: the real engine and store driven on a virtual clock with
//! simulated agents and gates (DESIGN.md "Rehearsals").

pub mod driver;
pub mod sim;
pub mod sim_gate;
