//! The pure core: every rule of DESIGN.md that decides what happens to a run,
//! as plain functions of facts and `now`. Nothing here touches SQLite, a
//! process, the network, a thread or a clock (`tests/core_purity.rs` holds it
//! to that); the engine gathers the facts, the store applies the result.
//!
//! - [`records`]: the durable records the rules reason about (runs, attempts,
//!   schedule state, …), stored by `crate::store`.
//! - [`machine`]: the run state machine.
//! - [`planner`]: what each input does to a run, as a [`plan::Plan`].
//! - [`decision`]: one evaluation of the three layers for a run.
//! - [`event`]: the trace, typed.
//! - [`layers`]: the layers as values and functions.
//! - [`recovery`]: classification, retries, circuit breaker, catch-up.
//! - [`registry`]: the scheduler registry's rows and who is alive.
//! - [`money`]: costs as they are shown (rounded).

pub mod decision;
pub mod event;
pub mod layers;
pub mod machine;
pub mod money;
pub mod plan;
pub mod planner;
pub mod records;
pub mod recovery;
pub mod registry;
pub(crate) mod row_text;
