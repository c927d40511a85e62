//! The trace, read (DESIGN.md "Trace"). The events are written typed
//! ([`crate::core::event::Event`]); this module is the one place that reads
//! them to say what they mean:
//! - [`describe`]: one line per event, for the `events` table, the console's
//!   event lists and rehearsal timelines;
//! - [`latest_decision`]: a run's latest decision, gate by gate (the console's
//!   gates pane);
//! - [`explain`] / [`explain_run`]: "why did it (not) run?" as an
//!   [`Explanation`] (`agentcron explain`, text and JSON, and the console's
//!   run detail).
//!
//! - [`tally`]: what each event adds to the counters of `/metrics`.
//!
//! Nothing else interprets an event's kind or detail (tests/trace_reader.rs
//! holds the rest of `src/` to that); other modules may still filter queries
//! by kind.

mod decision;
mod describe;
mod explain;
mod liveness;
mod read;
mod story;
pub mod tally;

pub use decision::{DecisionView, GateRow, SwitchHold, latest_decision};
pub use describe::{Style, describe};
pub use explain::{Explanation, Outcome, explain, explain_run, explain_with, window_at};
pub use story::Step;
