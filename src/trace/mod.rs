//! The trace, read (DESIGN.md "Trace"). The events are written typed
//! ([`crate::core::event::Event`]); this module is the one place that reads
//! them to say what they mean:
//! - [`describe`]: one line per event, for the `events` table, the console's
//!   event lists and rehearsal timelines;
//! - [`latest_decision`]: a run's latest decision, gate by gate (the console's
//!   gates pane).

mod decision;
mod describe;

pub use decision::{DecisionView, GateRow, SwitchHold, latest_decision};
pub use describe::{Style, describe};
