//! The trace as types (DESIGN.md "Trace"): every event kind agentcron writes,
//! with one payload schema each. Stored as the `events` table's `kind` and
//! `detail` columns (adjacently tagged: `{"kind": …, "detail": {…}}`), so the
//! JSON on disk and in `agentcron events --json` keeps its shape.
//!
//! Writers build an [`Event`]; readers get one back from [`Event::from_row`],
//! which also reads rows written before this type existed (older field names)
//! and keeps anything it does not know as [`Event::Other`] rather than failing.

use super::decision::{Decision, SwitchCheck, SwitchName, Verdict};
use super::layers::gates::{GateResult, GateVerdict};
use super::records::{Pool, RunReason, StepStatus};
use super::recovery::catchup::PlanSummary;
use crate::config::model::ErrorClass;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Instants in event details: RFC 3339 UTC with milliseconds, as ever.
mod instant {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::time::rfc3339(*t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }

    pub mod opt {
        use chrono::{DateTime, Utc};
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&crate::time::rfc3339(*t)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
            match Option::<String>::deserialize(d)? {
                None => Ok(None),
                Some(text) => DateTime::parse_from_rfc3339(&text)
                    .map(|t| Some(t.with_timezone(&Utc)))
                    .map_err(serde::de::Error::custom),
            }
        }
    }
}

/// Where a window sits in time, as the events that open or settle it say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowFacts {
    pub window_key: String,
    #[serde(with = "instant")]
    pub start: DateTime<Utc>,
    #[serde(with = "instant")]
    pub end: DateTime<Utc>,
    #[serde(with = "instant")]
    pub due: DateTime<Utc>,
    /// A DST or calendar note of the fire (`dst_shifted`, `calendar_skipped` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub pool: Pool,
}

/// What opened a window besides time: a posted event, an operator, a backfill.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Opener {
    /// The posted event's name and id (`on_event` / `after_event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The operator who asked for it (trigger, backfill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// `last_start` for an `every` schedule anchored at the previous start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<bool>,
}

/// One gate's check as the trace keeps it: the same shape in `gate` events
/// and inside `decision` events. (Rows written before one shape existed used
/// `verdict` / `elapsed_ms` inside decisions; both read.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateCheck {
    pub name: String,
    #[serde(default)]
    pub kind: String,
    #[serde(alias = "verdict")]
    pub result: GateVerdict,
    #[serde(default)]
    pub reason: String,
    #[serde(default, alias = "elapsed_ms")]
    pub ms: u64,
    /// `skip`, `fail` or `human`: what a `fail` result leads to.
    #[serde(default = "default_on_fail")]
    pub on_fail: String,
}

fn default_on_fail() -> String {
    "fail".into()
}

impl From<&GateResult> for GateCheck {
    fn from(g: &GateResult) -> Self {
        Self {
            name: g.name.clone(),
            kind: g.kind.clone(),
            result: g.verdict,
            reason: g.reason.clone(),
            ms: g.elapsed_ms,
            on_fail: g.on_fail.clone(),
        }
    }
}

/// A `decision` event: the three layers evaluated for a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    #[serde(default)]
    pub time: String,
    /// Every switch checked, in order; a clear one is stored as its name alone
    /// ([`compact_switches`]).
    #[serde(default, with = "compact_switches")]
    pub switches: Vec<SwitchCheck>,
    #[serde(default)]
    pub gates: Vec<GateCheck>,
    pub verdict: Verdict,
    #[serde(default)]
    pub reason: String,
}

impl From<&Decision> for DecisionRecord {
    fn from(d: &Decision) -> Self {
        Self {
            time: d.time.clone(),
            switches: d.switches.clone(),
            gates: d.gates.iter().map(GateCheck::from).collect(),
            verdict: d.verdict,
            reason: d.reason.clone(),
        }
    }
}

/// A decision's switches on disk: one that was clear (not held, reason
/// `clear`, as nearly every check is) is written as its name, `"kill"`;
/// any other as the whole `{"name", "held", "reason"}`. Reading takes both,
/// so events written before the short form read the same.
mod compact_switches {
    use super::{SwitchCheck, SwitchName};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    const CLEAR: &str = "clear";

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Stored<'a> {
        Clear(SwitchName),
        Checked(std::borrow::Cow<'a, SwitchCheck>),
    }

    pub fn serialize<S: Serializer>(checks: &[SwitchCheck], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(checks.iter().map(|c| {
            if !c.held && c.reason == CLEAR {
                Stored::Clear(c.name)
            } else {
                Stored::Checked(std::borrow::Cow::Borrowed(c))
            }
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SwitchCheck>, D::Error> {
        let stored = Vec::<Stored<'static>>::deserialize(d)?;
        Ok(stored
            .into_iter()
            .map(|s| match s {
                Stored::Clear(name) => SwitchCheck {
                    name,
                    held: false,
                    reason: CLEAR.into(),
                },
                Stored::Checked(c) => c.into_owned(),
            })
            .collect())
    }
}

/// What an alert says: the `alert` event's detail and what the sink receives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// `failed`, `dead_lettered`, `needs_human`, `circuit_opened`, `expired` …
    pub what: String,
    pub message: String,
    pub owner: Option<String>,
    #[serde(with = "instant")]
    pub at: DateTime<Utc>,
    pub tenant: String,
    pub schedule: String,
    pub run: Option<i64>,
}

impl Alert {
    /// An alert about the scheduler itself (no tenant, schedule or run):
    /// `scheduler_lost`, `disk_full`, `ledger_missing` …
    pub fn scheduler_wide(what: &str, message: String, at: DateTime<Utc>) -> Self {
        Self {
            what: what.to_string(),
            message,
            owner: None,
            at,
            tenant: String::new(),
            schedule: String::new(),
            run: None,
        }
    }
}

/// Who stopped an attempt that did not fail by itself (a `failed` event's
/// `stopped`), so the trace tells it as what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// The operator quit the console embedding the scheduler and chose "stop now".
    OperatorQuit,
    /// The global kill switch with `--cancel-running`.
    KillSwitch,
    /// `overlap = "cancel_previous"`: a newer window superseded it.
    Superseded,
    /// A budget was exceeded.
    Budget,
    /// The scheduler was stopped and its grace period ran out.
    Shutdown,
}

/// Why a window was skipped, for machines (metrics labels): the switch that
/// skipped it, a gate with `on_fail = "skip"`, or the catch-up policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum SkipCause {
    Switch(SwitchName),
    Gate,
    /// `catchup = "latest"`: a newer window runs instead.
    Coalesced,
    /// `catchup = "none"`.
    NotCaughtUp,
    /// A reload removed the schedule (issue 18).
    ScheduleRemoved,
}

impl SkipCause {
    /// The cause of a decision that skips: its holding switch, else its gate.
    pub fn of(d: &Decision) -> SkipCause {
        match d.switches.iter().find(|c| c.held) {
            Some(c) => SkipCause::Switch(c.name),
            None => SkipCause::Gate,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SkipCause::Switch(n) => n.as_str(),
            SkipCause::Gate => "gate",
            SkipCause::Coalesced => "coalesced",
            SkipCause::NotCaughtUp => "not_caught_up",
            SkipCause::ScheduleRemoved => "schedule_removed",
        }
    }
}

impl From<SkipCause> for String {
    fn from(c: SkipCause) -> String {
        c.as_str().to_string()
    }
}

impl TryFrom<String> for SkipCause {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SwitchName::ALL
            .into_iter()
            .map(SkipCause::Switch)
            .chain([
                SkipCause::Gate,
                SkipCause::Coalesced,
                SkipCause::NotCaughtUp,
                SkipCause::ScheduleRemoved,
            ])
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown skip cause {s:?}"))
    }
}

/// Every event kind agentcron writes. See DESIGN.md "Trace" for what each means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Event {
    SchedulerStarted {
        owner: String,
        schedules: usize,
    },
    SchedulerStopped {
        owner: String,
        left_running: usize,
    },
    /// This scheduler is alive (at most once a minute).
    Tick {
        owner: String,
        running: usize,
    },
    /// A peer scheduler went silent without a clean stop (seen by `by`).
    SchedulerLost {
        owner: String,
        #[serde(with = "instant")]
        last_seen: DateTime<Utc>,
        by: String,
        #[serde(default)]
        host: String,
        #[serde(default)]
        pid: u32,
    },
    ClockJump {
        #[serde(with = "instant")]
        from: DateTime<Utc>,
        #[serde(with = "instant")]
        to: DateTime<Utc>,
        delta_s: i64,
        owner: String,
    },
    /// What the catch-up planner decided after a gap.
    CatchupPlanned {
        #[serde(with = "instant::opt")]
        since: Option<DateTime<Utc>>,
        policy: String,
        windows: usize,
        summary: PlanSummary,
        #[serde(default)]
        queued_later: usize,
        #[serde(default)]
        truncated: bool,
    },
    WindowOpened {
        #[serde(flatten)]
        window: WindowFacts,
        /// Why the run exists (`scheduled`, `catchup`, `manual` …).
        reason: RunReason,
        #[serde(flatten)]
        opener: Opener,
    },
    /// A window that will not run: decided by a layer, or created already
    /// settled (calendar, coalesced, not caught up) with its window facts.
    Skipped {
        reason: String,
        /// What decided it, as a word (`overlap`, `circuit`, `gate`,
        /// `coalesced`, `not_caught_up` …; see [`SkipCause`]); absent in rows
        /// written before it existed and for windows created already settled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<SkipCause>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_reason: Option<RunReason>,
        #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
        window: Option<WindowFacts>,
    },
    Expired {
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_reason: Option<RunReason>,
        #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
        window: Option<WindowFacts>,
    },
    EventPosted {
        name: String,
        id: String,
        seq: i64,
    },
    Gate(GateCheck),
    SwitchHeld {
        switch: SwitchName,
        reason: String,
        verdict: Verdict,
    },
    Decision(DecisionRecord),
    Claimed {
        #[serde(with = "instant")]
        due: DateTime<Utc>,
        #[serde(with = "instant")]
        claimed: DateTime<Utc>,
        owner: String,
        attempt: u32,
        token: i64,
        lateness_ms: i64,
    },
    Started {
        attempt: u32,
        token: i64,
        reason: RunReason,
        agent: String,
        verify_step: Option<String>,
        timeout_ms: u64,
        /// The agent's start − the window's due instant (what
        /// `start_lateness` measures); absent in rows written before it was
        /// recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lateness_ms: Option<i64>,
    },
    Heartbeat {
        attempt: u32,
    },
    Step {
        name: String,
        status: StepStatus,
        attempt: u32,
        side_effect: bool,
        /// A verify attempt's answer: did the uncertain step land?
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verified: Option<bool>,
    },
    /// A line on the agent's stdout that is not the protocol.
    AgentOutput {
        malformed: String,
        error: String,
        attempt: u32,
    },
    Succeeded {
        attempt: u32,
        summary: Option<String>,
        processed: Option<i64>,
    },
    Failed {
        /// Absent when no attempt ran (a gate's `on_fail = "fail"`, `approval_ttl`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        class: ErrorClass,
        reason: String,
        /// The run failed for good (no retry follows).
        #[serde(rename = "final", default, skip_serializing_if = "Option::is_none")]
        is_final: Option<bool>,
        /// Who stopped the attempt when it did not fail by itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped: Option<Stopped>,
    },
    RetryScheduled {
        #[serde(with = "instant")]
        not_before: DateTime<Utc>,
        /// `verify` when a verify attempt answered and a normal one follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
        attempt: u32,
        next_attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_attempts: Option<u32>,
    },
    ParkedForHuman {
        reason: String,
    },
    Approved {
        by: String,
        reason: String,
        resume_after: Option<String>,
        #[serde(with = "instant")]
        at: DateTime<Utc>,
    },
    Rejected {
        by: String,
        reason: String,
        #[serde(with = "instant")]
        at: DateTime<Utc>,
    },
    Requeued {
        by: String,
        reason: String,
        from: String,
        #[serde(with = "instant")]
        at: DateTime<Utc>,
    },
    DeadLettered {
        attempts: u32,
        max_attempts: u32,
        reason: String,
    },
    Missed {
        reason: String,
        #[serde(with = "instant")]
        window_end: DateTime<Utc>,
    },
    CatchupQueued {
        window_key: String,
        pool: Pool,
        #[serde(with = "instant")]
        expires: DateTime<Utc>,
    },
    ConcurrencyHalved {
        max_concurrency: u32,
        divisor: u32,
        effective: u32,
    },
    /// An attempt whose lease expired (scheduler crash or hang).
    Lost {
        attempt: u32,
        token: i64,
        reason: String,
    },
    /// A late result of an attempt that is no longer current; ignored.
    StaleResult {
        token: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ending: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    CircuitOpened {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        consecutive_failures: Option<u32>,
        #[serde(with = "instant::opt", default, skip_serializing_if = "Option::is_none")]
        probe_after: Option<DateTime<Utc>>,
        /// What tipped it when it was not an attempt (`run 7 rejected`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    CircuitHalfOpen {
        reason: String,
    },
    CircuitClosed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        reason: String,
    },
    /// An operator (or a budget) turned a switch: kill, paused, maintenance.
    SwitchChanged {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schedule: Option<String>,
        on: bool,
        actor: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maintenance_id: Option<i64>,
        #[serde(with = "instant::opt", default, skip_serializing_if = "Option::is_none")]
        from: Option<DateTime<Utc>>,
        #[serde(with = "instant::opt", default, skip_serializing_if = "Option::is_none")]
        to: Option<DateTime<Utc>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schedules: Option<Vec<String>>,
    },
    Alert(Alert),
    AlertFailed {
        error: String,
        alert: Alert,
    },
    /// A configuration version became the one the database runs (a start,
    /// a reload, an approval or a rollback), and what it changed.
    ConfigApplied {
        version: i64,
        hash: String,
        by: String,
        #[serde(default)]
        added: Vec<String>,
        #[serde(default)]
        removed: Vec<String>,
        #[serde(default)]
        changed: Vec<String>,
        /// `[old, new]` pairs (`previous_id`).
        #[serde(default)]
        renamed: Vec<(String, String)>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rollback_of: Option<i64>,
    },
    /// `agentcron reload` or the console's `:reload` asked every scheduler
    /// to re-read its file (request `seq`); `allow_empty` (`--allow-empty`):
    /// a file without schedules may remove every schedule.
    ReloadRequested {
        seq: i64,
        by: String,
        #[serde(default)]
        allow_empty: bool,
    },
    /// A reload found the file invalid, or one that would remove every
    /// schedule without `--allow-empty`: the old version keeps running.
    ConfigRejected {
        path: String,
        by: String,
        errors: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kept_version: Option<i64>,
    },
    /// A version changes gated stages and waits for `approve-config`.
    ConfigWaiting {
        version: i64,
        by: String,
        schedules: Vec<String>,
    },
    /// A schedule's own settings changed: its new version and which fields.
    ScheduleVersioned {
        version: i64,
        config_version: i64,
        fields: Vec<String>,
    },
    /// A kind this build does not know (a newer agentcron, a test fixture):
    /// kept as it was written. Never written by this build.
    #[serde(skip)]
    Other {
        kind: String,
        detail: Value,
    },
}

impl Event {
    /// [`Event::kind`], owned without a copy for every kind but `Other`'s.
    pub fn kind_text(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Event::Other { kind, .. } => kind.clone().into(),
            known => known_kind(known).into(),
        }
    }

    /// The kind as stored (`window_opened`, `gate` …).
    pub fn kind(&self) -> &str {
        match self {
            Event::Other { kind, .. } => kind,
            known => known_kind(known),
        }
    }

    /// [`Event::to_row`] as it is stored: the kind and the detail's JSON
    /// text, written straight from the type with no [`Value`] in between (the
    /// same text: the detail map keeps its fields' order either way).
    pub fn to_row_text(&self) -> (String, String) {
        if let Event::Other { kind, detail } = self {
            return (kind.clone(), detail.to_string());
        }
        let kind = known_kind(self);
        if let Some(detail) = super::row_text::detail(self) {
            return (kind.to_string(), detail);
        }
        self.serde_row_text(kind)
    }

    /// [`Event::to_row_text`] through serde (every event can be written so).
    #[doc(hidden)]
    pub fn serde_row_text(&self, kind: &str) -> (String, String) {
        if let Event::Other { kind, detail } = self {
            return (kind.clone(), detail.to_string());
        }
        // Adjacently tagged: `{"kind":"<kind>","detail":<detail>}`.
        let head = format!("{{\"kind\":\"{kind}\",\"detail\":");
        if let Ok(mut text) = serde_json::to_string(self)
            && text.starts_with(&head)
            && text.ends_with('}')
        {
            text.truncate(text.len() - 1);
            text.drain(..head.len());
            return (kind.to_string(), text);
        }
        let (kind, detail) = self.to_row();
        (kind, detail.to_string())
    }

    /// (kind, detail) as the `events` table stores them.
    pub fn to_row(&self) -> (String, Value) {
        if let Event::Other { kind, detail } = self {
            return (kind.clone(), detail.clone());
        }
        match serde_json::to_value(self) {
            Ok(Value::Object(mut map)) => {
                let kind = match map.remove("kind") {
                    Some(Value::String(k)) => k,
                    _ => known_kind(self).to_string(),
                };
                let detail = map.remove("detail").unwrap_or(Value::Object(Default::default()));
                (kind, detail)
            }
            // Every variant but Other is a struct or newtype of one: always an object.
            _ => (known_kind(self).to_string(), Value::Null),
        }
    }

    /// The typed event of a stored row. Rows from before the typed trace are
    /// read too: skipped and expired windows created already settled said
    /// `why` (and `reason` was the run's reason). What still does not fit is
    /// [`Event::Other`], never an error.
    pub fn from_row(kind: &str, detail: &Value) -> Event {
        let mut detail_in = detail.clone();
        if matches!(kind, "skipped" | "expired")
            && let Value::Object(map) = &mut detail_in
            && let Some(why) = map.remove("why")
        {
            if let Some(run_reason) = map.remove("reason") {
                map.insert("run_reason".into(), run_reason);
            }
            map.insert("reason".into(), why);
        }
        let tagged = serde_json::json!({"kind": kind, "detail": detail_in});
        serde_json::from_value::<Event>(tagged).unwrap_or_else(|_| Event::Other {
            kind: kind.to_string(),
            detail: detail.clone(),
        })
    }
}

/// [`KINDS`] and [`Event::kind`] of every variant but `Other`, from one list:
/// a variant added to [`Event`] must be named here (the match is exhaustive),
/// so `events --kind` accepts every kind the ledger can hold.
macro_rules! event_kinds {
    ($($pat:pat => $name:literal,)*) => {
        /// Every kind the trace writes ([`Event::kind`] of each variant but
        /// `Other`), for checking what a person typed (`events --kind`).
        pub const KINDS: &[&str] = &[$($name),*];

        /// The stored kind of every variant but `Other`.
        fn known_kind(e: &Event) -> &'static str {
            match e {
                $($pat => $name,)*
                Event::Other { .. } => "other",
            }
        }
    };
}

event_kinds! {
    Event::SchedulerStarted { .. } => "scheduler_started",
    Event::SchedulerStopped { .. } => "scheduler_stopped",
    Event::Tick { .. } => "tick",
    Event::SchedulerLost { .. } => "scheduler_lost",
    Event::ClockJump { .. } => "clock_jump",
    Event::CatchupPlanned { .. } => "catchup_planned",
    Event::WindowOpened { .. } => "window_opened",
    Event::Skipped { .. } => "skipped",
    Event::Expired { .. } => "expired",
    Event::EventPosted { .. } => "event_posted",
    Event::Gate(_) => "gate",
    Event::SwitchHeld { .. } => "switch_held",
    Event::Decision(_) => "decision",
    Event::Claimed { .. } => "claimed",
    Event::Started { .. } => "started",
    Event::Heartbeat { .. } => "heartbeat",
    Event::Step { .. } => "step",
    Event::AgentOutput { .. } => "agent_output",
    Event::Succeeded { .. } => "succeeded",
    Event::Failed { .. } => "failed",
    Event::RetryScheduled { .. } => "retry_scheduled",
    Event::ParkedForHuman { .. } => "parked_for_human",
    Event::Approved { .. } => "approved",
    Event::Rejected { .. } => "rejected",
    Event::Requeued { .. } => "requeued",
    Event::DeadLettered { .. } => "dead_lettered",
    Event::Missed { .. } => "missed",
    Event::CatchupQueued { .. } => "catchup_queued",
    Event::ConcurrencyHalved { .. } => "concurrency_halved",
    Event::Lost { .. } => "lost",
    Event::StaleResult { .. } => "stale_result",
    Event::CircuitOpened { .. } => "circuit_opened",
    Event::CircuitHalfOpen { .. } => "circuit_half_open",
    Event::CircuitClosed { .. } => "circuit_closed",
    Event::SwitchChanged { .. } => "switch_changed",
    Event::Alert(_) => "alert",
    Event::AlertFailed { .. } => "alert_failed",
    Event::ConfigApplied { .. } => "config_applied",
    Event::ReloadRequested { .. } => "reload_requested",
    Event::ConfigRejected { .. } => "config_rejected",
    Event::ConfigWaiting { .. } => "config_waiting",
    Event::ScheduleVersioned { .. } => "schedule_versioned",
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn rows_keep_their_kind_and_instant_format() {
        let e = Event::RetryScheduled {
            not_before: t("2026-06-08T01:07:15Z"),
            after: None,
            attempt: 1,
            next_attempt: 2,
            max_attempts: Some(3),
        };
        let (kind, detail) = e.to_row();
        assert_eq!(kind, "retry_scheduled");
        assert_eq!(
            detail,
            json!({"not_before": "2026-06-08T01:07:15.000Z", "attempt": 1, "next_attempt": 2, "max_attempts": 3})
        );
        assert_eq!(Event::from_row(&kind, &detail), e);
    }

    #[test]
    fn a_decisions_clear_switches_are_stored_by_name_and_read_back_whole() {
        let check = |name, held, reason: &'static str| SwitchCheck {
            name,
            held,
            reason: reason.into(),
        };
        let e = Event::Decision(DecisionRecord {
            time: "window 09:00".into(),
            switches: vec![
                check(SwitchName::Kill, false, "clear"),
                check(SwitchName::Paused, true, "paused by ops"),
                check(SwitchName::Circuit, false, "half-open: one trial run"),
                check(SwitchName::Quota, false, "clear"),
            ],
            gates: vec![],
            verdict: Verdict::Wait,
            reason: "paused".into(),
        });
        let (kind, detail) = e.to_row();
        assert_eq!(
            detail["switches"],
            json!(["kill", {"name": "paused", "held": true, "reason": "paused by ops"},
                   {"name": "circuit", "held": false, "reason": "half-open: one trial run"}, "quota"])
        );
        assert_eq!(Event::from_row(&kind, &detail), e);
        // Written whole, as before the short form: read the same.
        let mut long = detail.clone();
        long["switches"][0] = json!({"name": "kill", "held": false, "reason": "clear"});
        long["switches"][3] = json!({"name": "quota", "held": false, "reason": "clear"});
        assert_eq!(Event::from_row(&kind, &long), e);
        // An unknown switch name is not silently a clear one.
        long["switches"][0] = json!("warp_drive");
        assert!(matches!(Event::from_row(&kind, &long), Event::Other { .. }));
    }

    #[test]
    fn the_stored_text_of_an_event_is_its_detail_as_json() {
        let events = [
            Event::RetryScheduled {
                not_before: t("2026-06-08T01:07:15Z"),
                after: None,
                attempt: 1,
                next_attempt: 2,
                max_attempts: Some(3),
            },
            Event::Claimed {
                due: t("2026-06-08T01:00:00Z"),
                claimed: t("2026-06-08T01:00:00.020Z"),
                owner: "main \"α\"".into(),
                attempt: 1,
                token: 7,
                lateness_ms: 20,
            },
            Event::Other {
                kind: "test".into(),
                detail: json!({"b": 1, "a": [true, null]}),
            },
        ];
        for e in events {
            let (kind, detail) = e.to_row();
            let (text_kind, text) = e.to_row_text();
            assert_eq!((text_kind, text), (kind, detail.to_string()), "{e:?}");
        }
    }

    #[test]
    fn unknown_kinds_and_shapes_are_kept_not_lost() {
        let d = json!({"x": 1});
        assert_eq!(
            Event::from_row("test", &d),
            Event::Other {
                kind: "test".into(),
                detail: d.clone()
            }
        );
        // A known kind with a shape it cannot read is kept as written.
        let odd = json!({"attempt": "one"});
        assert!(matches!(Event::from_row("heartbeat", &odd), Event::Other { .. }));
        assert_eq!(
            Event::from_row("heartbeat", &odd).to_row(),
            ("heartbeat".into(), odd)
        );
    }

    #[test]
    fn old_settled_windows_read_their_why_as_the_reason() {
        let old = json!({"window_key": "2026-06-06", "start": "2026-06-06T01:00:00.000Z",
            "end": "2026-06-06T02:00:00.000Z", "due": "2026-06-06T01:00:00.000Z", "note": null,
            "pool": "backfill", "reason": "catchup", "why": "coalesced: a newer window runs instead"});
        let Event::Skipped {
            reason,
            run_reason,
            window,
            ..
        } = Event::from_row("skipped", &old)
        else {
            panic!("typed")
        };
        assert_eq!(reason, "coalesced: a newer window runs instead");
        assert_eq!(run_reason, Some(RunReason::Catchup));
        assert_eq!(window.unwrap().window_key, "2026-06-06");
        // A decision's skip has just a reason.
        assert!(matches!(
            Event::from_row("skipped", &json!({"reason": "overlap: x"})),
            Event::Skipped { window: None, .. }
        ));
    }

    #[test]
    fn both_gate_shapes_read_as_one() {
        let old = json!({"name": "up", "kind": "command", "verdict": "wait", "reason": "r", "elapsed_ms": 41, "on_fail": "fail"});
        let new = json!({"name": "up", "kind": "command", "result": "wait", "reason": "r", "ms": 41, "on_fail": "fail"});
        let a: GateCheck = serde_json::from_value(old).unwrap();
        let b: GateCheck = serde_json::from_value(new.clone()).unwrap();
        assert_eq!(a, b);
        assert_eq!(serde_json::to_value(&b).unwrap(), new);
    }
}
