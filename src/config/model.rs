//! The typed configuration: what an operator wrote in `agentcron.toml`, validated
//! and with defaults filled in. Field names follow DESIGN.md "Config shape".

use crate::time::calendar::Calendar;
use crate::time::cron::CronSpec;
use crate::time::duration::to_delta;
use crate::time::fire::{FireRule, FireSource};
use chrono_tz::Tz;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The fire policies belong to time (the fire rule decides with them); a config
/// names them in its schedules.
pub use crate::time::policy::{Anchor, DstFold, DstGap, NonBusinessDay};

/// A whole, valid config file.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (absolute when possible).
    pub path: PathBuf,
    /// The folder relative paths resolve against.
    pub dir: PathBuf,
    pub scheduler: SchedulerConfig,
    pub api: ApiConfig,
    pub calendars: BTreeMap<String, Arc<Calendar>>,
    pub tenants: BTreeMap<String, TenantConfig>,
    /// Shared with each attempt that runs one (not copied per dispatch).
    pub agents: BTreeMap<String, Arc<AgentConfig>>,
    pub schedules: Vec<ScheduleConfig>,
    /// Configured recurring maintenance windows (`[[maintenance]]`).
    pub maintenance: Vec<MaintenanceConfig>,
}

impl Config {
    pub fn schedule(&self, id: &str) -> Option<&ScheduleConfig> {
        self.schedules.iter().find(|s| s.id == id)
    }
}

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Default time zone for schedules.
    pub timezone: Tz,
    /// SQLite file, resolved against the config folder; or a PostgreSQL
    /// URL (`postgres://…`), kept as written.
    pub database: PathBuf,
    /// The PostgreSQL password's file, when neither the URL nor
    /// `PGPASSWORD` has it (resolved against the config folder).
    pub password_file: Option<PathBuf>,
    /// On-time pool size.
    pub workers: usize,
    /// Catch-up pool size (default `workers / 2`, at least 1).
    pub backfill_workers: usize,
    /// Lease length of a running attempt; renewed every `lease / 3`.
    pub lease: Duration,
    /// How long past a lease's expiry another scheduler waits before it takes
    /// the attempt over (marks it lost): time for the lost attempt's
    /// supervisor to end the agent's tree first. `None`: `lease / 3`.
    pub takeover_grace: Option<Duration>,
    pub alert: Option<AlertSink>,
    /// How many past runs go into an envelope's execution memory.
    pub memory_runs: usize,
    /// How long a stopping scheduler waits for running attempts.
    pub shutdown_grace: Duration,
    /// How often the scheduler refreshes its registry row; it counts as
    /// alive while seen within three heartbeats.
    pub heartbeat: Duration,
    /// Where the HTTP API, probes and metrics listen (`--listen` overrides).
    pub listen: Option<std::net::SocketAddr>,
    /// Where the console's embedded scheduler writes its log (resolved
    /// against the config folder). `None`: `agentcron.log` beside the
    /// database ([`SchedulerConfig::log_path`]).
    pub log_file: Option<PathBuf>,
    /// The release stages this scheduler runs (default `["prod"]`).
    pub stages: Vec<Stage>,
    /// Stages whose trigger, agent or budget changes wait for `approve-config`.
    pub require_approval_for: Vec<Stage>,
    /// `[alert.routes]`: a schedule's alerts go to its `owner`'s sink when
    /// there is one, else to `alert`.
    pub alert_routes: BTreeMap<String, AlertSink>,
}

/// A schedule's release stage (`stage = "…"`, default `prod`): a scheduler
/// runs only the schedules of its `[scheduler] stages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Stage {
    Dev,
    Staging,
    Canary,
    #[default]
    Prod,
}

impl Stage {
    pub const ALL: [(&'static str, Stage); 4] = [
        ("dev", Stage::Dev),
        ("staging", Stage::Staging),
        ("canary", Stage::Canary),
        ("prod", Stage::Prod),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Dev => "dev",
            Stage::Staging => "staging",
            Stage::Canary => "canary",
            Stage::Prod => "prod",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A listen address as `--listen` and `[scheduler] listen` take it: `IP:PORT`,
/// or `:PORT` or a bare `PORT` for loopback (127.0.0.1): the server binds
/// beyond this machine only when an address says so.
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    let text = text.trim();
    let port = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        format!(
            "a listen address is IP:PORT like 127.0.0.1:9464 (or :9464 or 9464 for loopback), not {text:?}"
        )
    })
}

/// The `[api]` section: who may call the HTTP API, and how many may hold it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiConfig {
    /// The bearer tokens file (see docs/OPERATIONS.md); none: only the probes and
    /// `/metrics` answer.
    pub tokens_file: Option<PathBuf>,
    /// Open connections at most; one more is closed as soon as it is
    /// accepted. Every connection is a file descriptor the scheduler also
    /// needs for its agents' pipes and its database.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, and how
    /// long it may stay idle between requests, before it is closed.
    pub header_timeout: Duration,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            tokens_file: None,
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
        }
    }
}

impl SchedulerConfig {
    /// Where an alert for `owner` goes: the owner's route, else the default
    /// sink (an unknown owner, or none, falls back to it).
    pub fn sink_for(&self, owner: Option<&str>) -> Option<&AlertSink> {
        owner
            .and_then(|o| self.alert_routes.get(o))
            .or(self.alert.as_ref())
    }

    /// The console's scheduler log: `log_file`, else `agentcron.log` beside
    /// the database file (beside the config file `config_path` for a
    /// PostgreSQL ledger, which has no folder of its own).
    pub fn log_path(&self, config_path: &std::path::Path) -> PathBuf {
        if let Some(p) = &self.log_file {
            return p.clone();
        }
        let beside = if self.database.to_str().is_some_and(crate::store::pg::is_url) {
            config_path.parent()
        } else {
            self.database.parent()
        };
        beside.unwrap_or(std::path::Path::new("")).join("agentcron.log")
    }

    /// `takeover_grace`, or `lease / 3` when not set.
    pub fn takeover_grace(&self) -> Duration {
        self.takeover_grace.unwrap_or(self.lease / 3)
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            timezone: Tz::UTC,
            database: PathBuf::from("agentcron.db"),
            workers: 8,
            backfill_workers: 4,
            lease: Duration::from_secs(60),
            takeover_grace: None,
            password_file: None,
            alert: None,
            memory_runs: 5,
            shutdown_grace: Duration::from_secs(30),
            heartbeat: Duration::from_secs(5),
            listen: None,
            log_file: None,
            stages: vec![Stage::Prod],
            require_approval_for: vec![],
            alert_routes: BTreeMap::new(),
        }
    }
}

/// Where alerts go besides the event log.
#[derive(Debug, Clone, PartialEq)]
pub enum AlertSink {
    /// One JSON object per line appended to `path`.
    File { path: PathBuf },
    /// POST of the alert JSON, with extra headers (secret values as for agents).
    Webhook {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// argv; the alert JSON arrives on stdin.
    Command { command: Vec<String> },
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantConfig {
    pub max_concurrent: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub id: String,
    pub kind: AgentKind,
    pub timeout: Duration,
    pub env: BTreeMap<String, String>,
    /// Can the agent check whether an uncertain side effect landed?
    pub verify: bool,
    pub steps: Vec<StepConfig>,
    /// Command agents: the agent waits for an ack on stdin before acting on a
    /// side-effect step (the step handshake); stdin stays open for it.
    pub handshake: bool,
    /// HTTP agents: extra request headers; values may name secrets
    /// (`${ENV:NAME}`, `${FILE:path}`), read at each call and never shown.
    pub headers: BTreeMap<String, String>,
}

impl AgentConfig {
    pub fn is_side_effect(&self, step: &str) -> bool {
        self.steps.iter().any(|s| s.name == step && s.side_effect)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum AgentKind {
    /// argv, never a shell string; program paths resolve against the config folder
    /// when they contain a `/`.
    Command {
        command: Vec<String>,
    },
    Http {
        url: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepConfig {
    pub name: String,
    pub side_effect: bool,
}

/// One configured task.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub id: String,
    /// `previous_id = "old"`: this schedule is `old` renamed (it keeps its
    /// history and windows) rather than a removal and an addition.
    pub previous_id: Option<String>,
    pub stage: Stage,
    pub tenant: String,
    pub owner: Option<String>,
    pub agent: String,
    pub payload: serde_json::Value,
    pub trigger: TriggerConfig,
    pub timezone: Tz,
    pub calendar: Option<String>,
    pub non_business_day: NonBusinessDay,
    pub dst_gap: DstGap,
    pub dst_fold: DstFold,
    pub check_every: Duration,
    pub close_after: Duration,
    pub overlap: Overlap,
    pub max_concurrency: u32,
    pub catchup: Catchup,
    pub catchup_window: Duration,
    pub default_error_class: ErrorClass,
    /// Class of an attempt whose result line is not a valid result (unknown
    /// `status` or `error_class`): a protocol error, `non_retryable` by default.
    pub protocol_error_class: ErrorClass,
    pub retry: RetryPolicy,
    pub circuit: CircuitPolicy,
    pub budget: BudgetPolicy,
    /// After this long in `needs_human` the run fails with reason `approval_ttl`.
    pub approval_ttl: Option<Duration>,
    pub gates: Vec<GateConfig>,
    pub deliveries: Vec<DeliveryConfig>,
}

impl ScheduleConfig {
    /// The rule that enumerates this schedule's fires, with its calendar (looked
    /// up by the caller in [`Config::calendars`]); `None` for event triggers.
    pub fn fire_rule(&self, calendar: Option<Arc<Calendar>>) -> Option<FireRule> {
        let source = match &self.trigger {
            TriggerConfig::Cron(spec) => FireSource::Cron(spec.clone()),
            TriggerConfig::Every { interval, anchor } => FireSource::Every {
                interval: to_delta(*interval),
                anchor: *anchor,
            },
            TriggerConfig::AfterEvent { .. } | TriggerConfig::OnEvent { .. } => return None,
        };
        Some(FireRule {
            source,
            tz: self.timezone,
            dst_gap: self.dst_gap,
            dst_fold: self.dst_fold,
            calendar,
            non_business_day: self.non_business_day,
        })
    }
}

/// Layer 1: when to look. Exactly one per schedule.
#[derive(Debug, Clone)]
pub enum TriggerConfig {
    Cron(CronSpec),
    Every { interval: Duration, anchor: Anchor },
    AfterEvent { event: String, delay: Duration },
    OnEvent { event: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    #[default]
    Skip,
    BufferOne,
    BufferAll,
    CancelPrevious,
    Allow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Catchup {
    #[default]
    All,
    Latest,
    None,
}

/// How a failed attempt is treated (DESIGN.md "Error classes").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    #[default]
    Retryable,
    NonRetryable,
    NeedsHuman,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Retryable => "retryable",
            ErrorClass::NonRetryable => "non_retryable",
            ErrorClass::NeedsHuman => "needs_human",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "retryable" => Some(ErrorClass::Retryable),
            "non_retryable" => Some(ErrorClass::NonRetryable),
            "needs_human" => Some(ErrorClass::NeedsHuman),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backoff {
    Fixed,
    #[default]
    Exponential,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total attempts including the first.
    pub max_attempts: u32,
    pub backoff: Backoff,
    pub initial: Duration,
    pub max: Duration,
    /// Fraction (0.0–1.0) of the delay added or removed at random.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff: Backoff::Exponential,
            initial: Duration::from_secs(60),
            max: Duration::from_secs(3600),
            jitter: 0.1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CircuitPolicy {
    pub open_after: u32,
    pub cool_down: Duration,
}

impl Default for CircuitPolicy {
    fn default() -> Self {
        Self {
            open_after: 3,
            cool_down: Duration::from_secs(30 * 60),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetPolicy {
    pub max_runtime: Option<Duration>,
    pub max_tokens: Option<u64>,
    pub max_cost_per_day: Option<f64>,
    /// Class of an attempt killed for exceeding `max_runtime` (default retryable).
    pub runtime_error_class: ErrorClass,
}

/// Layer 2: one readiness check.
#[derive(Debug, Clone, PartialEq)]
pub struct GateConfig {
    /// Unique within the schedule; defaults to the kind.
    pub name: String,
    pub on_fail: OnFail,
    /// A gate that takes longer is a `wait` with reason "timed out".
    pub timeout: Duration,
    pub kind: GateKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFail {
    Skip,
    #[default]
    Fail,
    Human,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateKind {
    PreviousRunFinished,
    FileExists {
        path: PathBuf,
        min_size: Option<u64>,
        newer_than_window: bool,
    },
    SqliteQuery {
        database: PathBuf,
        query: String,
        expect: Expect,
    },
    Command {
        command: Vec<String>,
    },
    Http {
        url: String,
        status: u16,
        json_pointer: Option<String>,
        expect: Option<Expect>,
        /// Request headers; values may name secrets (`${ENV:NAME}`, `${FILE:path}`).
        headers: BTreeMap<String, String>,
    },
    CredentialValid {
        source: CredentialSource,
        min_remaining: Duration,
    },
    Calendar {
        /// Defaults to the schedule's calendar.
        calendar: Option<String>,
    },
}

impl GateKind {
    pub fn kind_name(&self) -> &'static str {
        match self {
            GateKind::PreviousRunFinished => "previous_run_finished",
            GateKind::FileExists { .. } => "file_exists",
            GateKind::SqliteQuery { .. } => "sqlite_query",
            GateKind::Command { .. } => "command",
            GateKind::Http { .. } => "http",
            GateKind::CredentialValid { .. } => "credential_valid",
            GateKind::Calendar { .. } => "calendar",
        }
    }
}

/// Where a credential's expiry (RFC 3339 or unix seconds, first line) is read.
#[derive(Debug, Clone, PartialEq)]
pub enum CredentialSource {
    File(PathBuf),
    Command(Vec<String>),
}

/// A comparison such as `"> 0"`, `">= 10"`, `"== 'ready'"`, `"!= 0"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expect {
    pub op: CompareOp,
    pub value: ExpectValue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExpectValue {
    Number(f64),
    Text(String),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryConfig {
    /// Step name in the journal (default `deliver`, then `deliver-2`, …).
    pub name: String,
    pub kind: DeliveryKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DeliveryKind {
    /// Appends one JSON line per delivery.
    File { path: PathBuf },
    /// POST JSON with an `Idempotency-Key` header.
    Webhook {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// argv; the result JSON arrives on stdin.
    Command { command: Vec<String> },
}

/// A recurring maintenance window: switches hold runs while it is open.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    pub name: String,
    pub cron: CronSpec,
    pub duration: Duration,
    pub timezone: Tz,
    /// Schedules it applies to; empty = all.
    pub schedules: Vec<String>,
    pub reason: String,
}

#[cfg(test)]
mod listen_tests {
    #[test]
    fn listen_addresses_default_to_loopback() {
        for short in ["9464", ":9464", " 9464 "] {
            assert_eq!(super::parse_listen(short).unwrap().to_string(), "127.0.0.1:9464");
        }
        assert_eq!(
            super::parse_listen("0.0.0.0:80").unwrap().to_string(),
            "0.0.0.0:80"
        );
        assert_eq!(
            super::parse_listen("[::1]:9464").unwrap().to_string(),
            "[::1]:9464"
        );
        for bad in ["localhost:9464", "", "99999", "127.0.0.1"] {
            assert!(super::parse_listen(bad).unwrap_err().contains("IP:PORT"), "{bad}");
        }
    }
}
