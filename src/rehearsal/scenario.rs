//! Scenario files: a rehearsal is one TOML file. It holds the config to rehearse
//! (inline, in the same sections as `agentcron.toml`, or `rehearsal.config =
//! "path"`), simulated agents and gates, faults and operator actions on the
//! timeline, and expectations.
//!
//! ```toml
//! [rehearsal]
//! name = "data delay"
//! start = "2026-06-08T08:30:00+08:00"
//! end = "2026-06-08T11:00:00+08:00"
//!
//! [sim.agents.daily-sales-report]
//! attempts = [{ latency = "2m" }]
//!
//! [[sim.gate]]
//! schedule = "daily-sales-report"
//! name = "upstream_partition_ready"
//! pass_from = "2026-06-08T09:40:00+08:00"
//!
//! [[fault]]
//! kind = "crash"
//! at = "2026-06-08T09:45:00+08:00"
//! restart_at = "2026-06-08T09:50:00+08:00"
//!
//! [[expect]]
//! schedule = "daily-sales-report"
//! window = "2026-06-08"
//! state = "succeeded"
//! ```

use crate::config::model::ErrorClass;
use crate::config::{Config, Diagnostic, LoadError, load_file, load_str_with};
use crate::time::duration::parse_duration;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top-level tables of a scenario that are not config.
pub const SCENARIO_KEYS: &[&str] = &["rehearsal", "sim", "fault", "action", "expect"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub start: String,
    pub end: String,
    /// A config file to rehearse instead of the inline sections.
    #[serde(default)]
    pub config: Option<String>,
    /// Rehearse only these schedules of the config.
    #[serde(default)]
    pub only: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SimSection {
    /// By schedule id.
    #[serde(default)]
    pub agents: BTreeMap<String, SimAgentSpec>,
    #[serde(default)]
    pub gate: Vec<SimGateSpec>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SimAgentSpec {
    /// Default: the config agent's steps.
    #[serde(default)]
    pub steps: Option<Vec<StepSpec>>,
    /// One per attempt; the last one repeats.
    #[serde(default)]
    pub attempts: Vec<AttemptSpecToml>,
    /// From `from` on, attempts follow these scripts instead.
    #[serde(default)]
    pub phases: Vec<PhaseSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    pub from: String,
    pub attempts: Vec<AttemptSpecToml>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepSpec {
    pub name: String,
    #[serde(default)]
    pub side_effect: bool,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AttemptSpecToml {
    /// How long the attempt takes (default 30s).
    #[serde(default)]
    pub latency: Option<String>,
    /// `success` (default) or `failure` (with `class`).
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub class: Option<String>,
    /// Exit with this code and no result line (75, 77, 65, …).
    #[serde(default)]
    pub exit: Option<i32>,
    /// Never finishes (killed at the agent's timeout).
    #[serde(default)]
    pub hang: bool,
    /// Dies right after this step started.
    #[serde(default)]
    pub crash_after_starting: Option<String>,
    /// The upstream rate-limited it.
    #[serde(default)]
    pub rate_limited: bool,
    #[serde(default)]
    pub tokens: i64,
    #[serde(default)]
    pub cost_usd: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimGateSpec {
    pub schedule: String,
    pub name: String,
    #[serde(default)]
    pub pass: bool,
    /// `wait` before, `pass` from this instant.
    #[serde(default)]
    pub pass_from: Option<String>,
    /// Always `fail` with this reason.
    #[serde(default)]
    pub fail: Option<String>,
    /// `pass` before, `fail` from this instant (with `fail` as the reason).
    #[serde(default)]
    pub fail_from: Option<String>,
}

/// Something that happens to the schedulers at an instant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `crash`, `restart`, `clock_jump`, `second_scheduler`.
    pub kind: String,
    pub at: String,
    /// crash: start again at this instant (downtime).
    #[serde(default)]
    pub restart_at: Option<String>,
    /// clock_jump: the wall clock jumps to this instant.
    #[serde(default)]
    pub to: Option<String>,
    /// Which scheduler (default `main`; second_scheduler: its name).
    #[serde(default)]
    pub scheduler: Option<String>,
}

/// An operator action at an instant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// approve | reject | kill | unkill | pause | resume | trigger | post_event | requeue
    pub kind: String,
    pub at: String,
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub window: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub by: Option<String>,
    #[serde(default)]
    pub cancel_running: bool,
    #[serde(default)]
    pub resume_after: Option<String>,
    /// post_event
    #[serde(default)]
    pub event: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
}

/// One expectation; which fields are set decides what is checked.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    /// Shown in the verdict (default: generated from the fields).
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub schedule: Option<String>,
    #[serde(default)]
    pub window: Option<String>,
    /// The run ends in this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Exactly this many attempts.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// Side effect (step name) landed exactly `count` times (default 1).
    #[serde(default)]
    pub side_effect: Option<String>,
    /// Step (by name) of the run started exactly `count` times over all its
    /// attempts (default 1), counted from the step events.
    #[serde(default)]
    pub step: Option<String>,
    #[serde(default)]
    pub count: Option<usize>,
    /// The run reached its end state before this instant.
    #[serde(default)]
    pub finished_before: Option<String>,
    /// Every skipped, missed or expired run has a reason.
    #[serde(default)]
    pub no_unexplained_skips: bool,
    /// No run was claimed more times than it has attempts, and no attempt twice.
    #[serde(default)]
    pub no_double_claim: bool,
    /// An event of this kind exists (for the run, else the schedule, else anywhere).
    #[serde(default)]
    pub event: Option<String>,
    /// ... whose detail JSON contains this text.
    #[serde(default)]
    pub detail_contains: Option<String>,
    /// These windows of `schedule` were claimed in this order.
    #[serde(default)]
    pub claimed_in_order: Option<Vec<String>>,
    /// `schedule` opened exactly this many windows (runs).
    #[serde(default)]
    pub run_count: Option<usize>,
    /// ... with exactly these window keys (in window order).
    #[serde(default)]
    pub windows: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
struct Doc {
    rehearsal: Meta,
    #[serde(default)]
    sim: SimSection,
    #[serde(default)]
    fault: Vec<FaultSpec>,
    #[serde(default)]
    action: Vec<ActionSpec>,
    #[serde(default)]
    expect: Vec<ExpectSpec>,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub path: PathBuf,
    pub name: String,
    pub description: Option<String>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub config: Config,
    pub sim: SimSection,
    pub faults: Vec<FaultSpec>,
    pub actions: Vec<ActionSpec>,
    pub expect: Vec<ExpectSpec>,
}

/// Reads a scenario; errors are located like `check`'s (FILE:LINE:COL).
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let diag = |at: usize, message: String| {
        let (line, col) = locate(&text, at);
        LoadError::Invalid(vec![Diagnostic {
            file: path.to_path_buf(),
            line,
            col,
            message,
            help: None,
        }])
    };
    // Scenario sections (serde, strict below the top level); config sections are
    // left to the config loader.
    let doc: Doc = match toml::from_str::<Doc>(&text) {
        Ok(d) => d,
        Err(e) => {
            let at = e.span().map_or(0, |s| s.start);
            return Err(diag(at, format!("rehearsal: {}", e.message())));
        }
    };
    let key_at = |key: &str| text.find(key).unwrap_or(0);
    let config = match &doc.rehearsal.config {
        Some(rel) => {
            let base = path.parent().unwrap_or(Path::new("."));
            load_file(&base.join(rel))?
        }
        None => load_str_with(&text, path, SCENARIO_KEYS)?,
    };
    let mut config = config;
    if let Some(only) = &doc.rehearsal.only {
        for id in only {
            if config.schedule(id).is_none() {
                return Err(diag(
                    key_at(id),
                    format!("rehearsal.only: no schedule `{id}` in the config"),
                ));
            }
        }
        config.schedules.retain(|s| only.contains(&s.id));
        for m in &mut config.maintenance {
            m.schedules.retain(|s| only.contains(s));
        }
    }
    let instant = |s: &str, what: &str| {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                diag(
                    key_at(s),
                    format!("{what}: `{s}` is not an RFC 3339 instant ({e})"),
                )
            })
    };
    let start = instant(&doc.rehearsal.start, "rehearsal.start")?;
    let end = instant(&doc.rehearsal.end, "rehearsal.end")?;
    if end <= start {
        return Err(diag(
            key_at(&doc.rehearsal.end),
            "rehearsal.end must be after rehearsal.start".into(),
        ));
    }
    for (id, a) in &doc.sim.agents {
        if config.schedule(id).is_none() {
            return Err(diag(
                key_at(id),
                format!("sim.agents.{id}: no schedule `{id}` in the config"),
            ));
        }
        for p in &a.phases {
            instant(&p.from, "sim phase from")?;
        }
        for at in a
            .attempts
            .iter()
            .chain(a.phases.iter().flat_map(|p| p.attempts.iter()))
        {
            if let Some(l) = &at.latency {
                parse_duration(l).map_err(|e| diag(key_at(l), format!("sim.agents.{id}: latency: {e}")))?;
            }
            if let Some(c) = &at.class
                && ErrorClass::parse(c).is_none()
            {
                return Err(diag(
                    key_at(c),
                    format!("sim.agents.{id}: unknown class `{c}` (retryable, non_retryable, needs_human)"),
                ));
            }
            if let Some(r) = &at.result
                && !matches!(r.as_str(), "success" | "failure")
            {
                return Err(diag(
                    key_at(r),
                    format!("sim.agents.{id}: result must be `success` or `failure`, not `{r}`"),
                ));
            }
        }
    }
    for g in &doc.sim.gate {
        let Some(s) = config.schedule(&g.schedule) else {
            return Err(diag(
                key_at(&g.schedule),
                format!("sim.gate: no schedule `{}`", g.schedule),
            ));
        };
        if !s.gates.iter().any(|x| x.name == g.name) {
            return Err(diag(
                key_at(&g.name),
                format!("sim.gate: schedule {} has no gate `{}`", g.schedule, g.name),
            ));
        }
        for t in [&g.pass_from, &g.fail_from].into_iter().flatten() {
            instant(t, "sim.gate")?;
        }
    }
    for f in &doc.fault {
        instant(&f.at, "fault.at")?;
        match f.kind.as_str() {
            "crash" | "restart" | "second_scheduler" => {}
            "clock_jump" => {
                let to =
                    f.to.as_deref()
                        .ok_or_else(|| diag(key_at(&f.at), "fault clock_jump needs `to`".into()))?;
                instant(to, "fault.to")?;
            }
            other => {
                return Err(diag(
                    key_at(other),
                    format!("unknown fault kind `{other}` (crash, restart, clock_jump, second_scheduler)"),
                ));
            }
        }
        if let Some(r) = &f.restart_at {
            instant(r, "fault.restart_at")?;
        }
    }
    for a in &doc.action {
        instant(&a.at, "action.at")?;
        let known = [
            "approve",
            "reject",
            "kill",
            "unkill",
            "pause",
            "resume",
            "trigger",
            "post_event",
            "requeue",
        ];
        if !known.contains(&a.kind.as_str()) {
            return Err(diag(
                key_at(&a.kind),
                format!("unknown action kind `{}` ({})", a.kind, known.join(", ")),
            ));
        }
    }
    for e in &doc.expect {
        if let Some(t) = &e.finished_before {
            instant(t, "expect.finished_before")?;
        }
        if let Some(s) = &e.state
            && crate::store::types::RunState::parse(s).is_none()
        {
            return Err(diag(key_at(s), format!("expect: unknown state `{s}`")));
        }
    }
    Ok(Scenario {
        path: path.to_path_buf(),
        name: doc.rehearsal.name,
        description: doc.rehearsal.description,
        start,
        end,
        config,
        sim: doc.sim,
        faults: doc.fault,
        actions: doc.action,
        expect: doc.expect,
    })
}

fn locate(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// A duration from a scenario (validated at load).
pub fn delta(s: &Option<String>, default: TimeDelta) -> TimeDelta {
    s.as_deref()
        .and_then(|l| parse_duration(l).ok())
        .map(crate::time::duration::to_delta)
        .unwrap_or(default)
}

/// An instant from a scenario (validated at load).
pub fn instant(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}
