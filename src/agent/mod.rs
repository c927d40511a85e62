//! Talking to agents (DESIGN.md "The agent protocol"): the JSON envelope an agent
//! receives, the JSON-lines protocol it answers with, and the runners that start
//! it as a process or call it over HTTP.

pub mod delivery;
pub mod envelope;
pub(crate) mod log;
pub mod protocol;
pub mod runner;
pub mod schema;

pub use envelope::{Envelope, EnvelopeWindow, MemoryEntry, TimeContext, idempotency_key};
pub use protocol::{AgentLine, AgentResult, ResultStatus, parse_line};
pub use runner::{
    AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec, DefaultRunner, Ending, HttpRunner,
    ProcessRunner,
};
