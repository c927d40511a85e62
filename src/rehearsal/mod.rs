//! Failure rehearsals: the real engine and store driven on a virtual clock with
//! simulated agents and gates (DESIGN.md "Rehearsals").

pub mod driver;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod sim_gate;

pub use run::{Rehearsal, Report, Verdict};
