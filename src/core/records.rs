//! The durable records the rules reason about: runs, attempts, steps,
//! schedule state, switches, approvals, maintenance windows, posted events.
//! Plain data (the store maps them to rows); names follow DESIGN.md "Words".

pub use super::machine::RunState;
use crate::config::model::ErrorClass;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Why a run (or attempt) runs; goes into the envelope's `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunReason {
    Scheduled,
    Retry,
    Catchup,
    Manual,
    Rehearsal,
    Verify,
}

impl RunReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RunReason::Scheduled => "scheduled",
            RunReason::Retry => "retry",
            RunReason::Catchup => "catchup",
            RunReason::Manual => "manual",
            RunReason::Rehearsal => "rehearsal",
            RunReason::Verify => "verify",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Scheduled,
            Self::Retry,
            Self::Catchup,
            Self::Manual,
            Self::Rehearsal,
            Self::Verify,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// Which worker pool a run is dispatched to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    OnTime,
    Backfill,
}

impl Pool {
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::OnTime => "on_time",
            Pool::Backfill => "backfill",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "on_time" => Some(Pool::OnTime),
            "backfill" => Some(Pool::Backfill),
            _ => None,
        }
    }
}

/// The one durable record of one window of one schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    pub id: i64,
    pub tenant: String,
    pub schedule: String,
    pub window_key: String,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    /// The instant the window was due to open (for lateness).
    pub due_at: DateTime<Utc>,
    pub state: RunState,
    pub reason: RunReason,
    pub pool: Pool,
    /// Why it is in its state: skip reason, failure reason, hold reason.
    pub state_reason: Option<String>,
    /// Attempts started so far.
    pub attempts: u32,
    /// Pending / retry_wait: not evaluated before this instant.
    pub not_before: Option<DateTime<Utc>>,
    /// Pending / retry_wait: next time the engine should evaluate this run.
    pub next_check_at: Option<DateTime<Utc>>,
    pub lease_owner: Option<String>,
    pub lease_expires: Option<DateTime<Utc>>,
    /// Fencing token of the current (or last) attempt; strictly increasing store-wide.
    pub fencing_token: i64,
    pub error_class: Option<ErrorClass>,
    pub last_error: Option<String>,
    /// Approved with "resume after step X".
    pub resume_after: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What holds it while it waits (pending / retry_wait); kept as the last
    /// hold once it is missed or expired.
    pub hold: Option<crate::core::decision::HoldKind>,
}

/// A run to create when a window opens (or is planned by catch-up / backfill / trigger).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub tenant: String,
    pub schedule: String,
    pub window_key: String,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    pub due_at: DateTime<Utc>,
    /// Pending for a live window; Skipped / Expired when created already decided.
    pub state: RunState,
    pub reason: RunReason,
    pub pool: Pool,
    pub state_reason: Option<String>,
    pub next_check_at: Option<DateTime<Utc>>,
}

/// How an attempt ended, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptStatus {
    Running,
    Succeeded,
    Failed,
    /// Lease expired without a result (crash, hang): a zombie.
    Lost,
    TimedOut,
    Cancelled,
}

impl AttemptStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptStatus::Running => "running",
            AttemptStatus::Succeeded => "succeeded",
            AttemptStatus::Failed => "failed",
            AttemptStatus::Lost => "lost",
            AttemptStatus::TimedOut => "timed_out",
            AttemptStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Running,
            Self::Succeeded,
            Self::Failed,
            Self::Lost,
            Self::TimedOut,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }
}

/// One execution try inside a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub run_id: i64,
    /// 1-based.
    pub n: u32,
    pub fencing_token: i64,
    pub owner: String,
    pub reason: RunReason,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub status: AttemptStatus,
    pub error_class: Option<ErrorClass>,
    pub exit_code: Option<i32>,
    pub summary: Option<String>,
    pub processed: Option<i64>,
    pub message: Option<String>,
    pub tokens: i64,
    pub cost_usd: f64,
    /// Bounded stdout/stderr that was not protocol.
    pub log: String,
    /// The JSON envelope the agent received.
    pub envelope: Option<String>,
}

/// What the store records when an attempt finishes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AttemptEnd {
    pub status: Option<AttemptStatus>,
    pub error_class: Option<ErrorClass>,
    pub exit_code: Option<i32>,
    pub summary: Option<String>,
    pub processed: Option<i64>,
    pub message: Option<String>,
    pub log: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Started,
    Done,
    Failed,
}

impl StepStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Started => "started",
            StepStatus::Done => "done",
            StepStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "started" => Some(StepStatus::Started),
            "done" => Some(StepStatus::Done),
            "failed" => Some(StepStatus::Failed),
            _ => None,
        }
    }
}

/// A journaled step of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub run_id: i64,
    pub attempt: u32,
    pub name: String,
    pub status: StepStatus,
    pub side_effect: bool,
    pub at: DateTime<Utc>,
}

/// Fields a transition may set besides the state. `None` leaves a field as it is
/// unless the field list says it is cleared by the target state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    pub state_reason: Option<String>,
    pub not_before: Option<DateTime<Utc>>,
    pub next_check_at: Option<DateTime<Utc>>,
    pub error_class: Option<ErrorClass>,
    pub last_error: Option<String>,
    pub resume_after: Option<String>,
    pub reason: Option<RunReason>,
    pub pool: Option<Pool>,
    /// Set only for an operator's action (requeue, approve, reject): who.
    pub operator: Option<String>,
}

/// A finished run as an agent's execution memory shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMemory {
    pub run_id: i64,
    /// Shared, not copied, by every envelope that shows it (as is the
    /// summary): the memory is handed to each dispatch of its schedule.
    pub window_key: std::sync::Arc<str>,
    /// Where the memory orders it: newest window first.
    pub window_start: DateTime<Utc>,
    pub state: RunState,
    /// The last attempt's summary or message, else the run's state reason.
    pub summary: Option<std::sync::Arc<str>>,
}

/// The result of a successful claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub run: Run,
    /// The new attempt's number (1-based).
    pub attempt: u32,
    pub fencing_token: i64,
}

/// Per-schedule durable state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleState {
    pub schedule: String,
    /// The last instant the engine evaluated this schedule's time layer up to.
    pub last_evaluated: Option<DateTime<Utc>>,
    pub circuit: CircuitState,
    pub circuit_changed_at: Option<DateTime<Utc>>,
    pub consecutive_failures: u32,
    pub paused: bool,
    pub paused_reason: Option<String>,
    /// Effective concurrency is max_concurrency / divisor (halved per rate limit).
    pub concurrency_divisor: u32,
    pub last_start: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
}

impl Default for ScheduleState {
    /// A schedule never seen before: closed circuit, not paused, full concurrency
    /// (divisor 1; the divisor is never 0).
    fn default() -> Self {
        Self {
            schedule: String::new(),
            last_evaluated: None,
            circuit: CircuitState::Closed,
            circuit_changed_at: None,
            consecutive_failures: 0,
            paused: false,
            paused_reason: None,
            concurrency_divisor: 1,
            last_start: None,
            last_success: None,
        }
    }
}

impl ScheduleState {
    /// The default state of `schedule`.
    pub fn new(schedule: &str) -> Self {
        Self {
            schedule: schedule.to_string(),
            ..Self::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    #[default]
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    pub fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "closed" => Some(CircuitState::Closed),
            "open" => Some(CircuitState::Open),
            "half_open" => Some(CircuitState::HalfOpen),
            _ => None,
        }
    }
}

/// An operator-set switch (the global kill switch is `kill`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Switch {
    pub name: String,
    pub on: bool,
    pub actor: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

/// An approve / reject decision on a `needs_human` run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Approval {
    pub run_id: i64,
    pub approved: bool,
    pub actor: String,
    pub reason: String,
    pub resume_after: Option<String>,
    pub at: DateTime<Utc>,
}

/// An ad-hoc maintenance window (configured ones live in the config).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Maintenance {
    pub id: i64,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub reason: String,
    pub actor: String,
    /// Empty = all schedules.
    pub schedules: Vec<String>,
}

/// A posted named event (`on_event` / `after_event` triggers), deduped by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostedEvent {
    pub seq: i64,
    pub name: String,
    pub event_id: String,
    pub payload: serde_json::Value,
    pub arrived_at: DateTime<Utc>,
}

/// How an attempt ended, as observed from outside (no judgement yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The process exited by itself: an exit code, or the signal that killed it.
    Exited { code: Option<i32>, signal: Option<i32> },
    /// Ran past `timeout` and was killed.
    TimedOut,
    /// `AttemptHandle::cancel` was called; the agent was killed.
    Cancelled,
    /// Its lease passed without a renewal from the scheduler (frozen, or
    /// unable to write the database): the supervisor ended the agent's tree
    /// before another scheduler could take the attempt over.
    LeaseExpired,
    /// The agent could not be started at all (missing binary, permission, bad config).
    SpawnFailed(String),
    /// The agent could not be started because this machine ran out of open
    /// files, processes or memory (EMFILE, ENFILE, EAGAIN, ENOMEM): not the
    /// agent's fault, and it passes.
    OutOfResources(String),
    /// An HTTP agent answered with `status`, or the request failed with `error`.
    Http {
        status: Option<u16>,
        error: Option<String>,
    },
}
