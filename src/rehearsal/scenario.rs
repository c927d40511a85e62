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

use crate::config::diagnostic::Source;
use crate::config::model::ErrorClass;
use crate::config::{Config, Diagnostic, LoadError, load_file, load_str_with};
use crate::time::duration::parse_duration;
use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// Top-level tables of a scenario that are not config.
pub const SCENARIO_KEYS: &[&str] = &["rehearsal", "sim", "fault", "action", "expect"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub start: Instant,
    pub end: Instant,
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
    pub from: Instant,
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
    pub pass_from: Option<Instant>,
    /// Always `fail` with this reason.
    #[serde(default)]
    pub fail: Option<String>,
    /// `pass` before, `fail` from this instant (with `fail` as the reason).
    #[serde(default)]
    pub fail_from: Option<Instant>,
}

/// Something that happens to the schedulers at an instant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// `crash`, `restart`, `clock_jump`, `second_scheduler`.
    pub kind: String,
    pub at: Instant,
    /// crash: start again at this instant (downtime).
    #[serde(default)]
    pub restart_at: Option<Instant>,
    /// clock_jump: the wall clock jumps to this instant.
    #[serde(default)]
    pub to: Option<Instant>,
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
    pub at: Instant,
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
    pub finished_before: Option<Instant>,
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
    /// Run on this database file and keep it (`rehearse --db FILE`); by
    /// default a rehearsal's database is in memory and gone when it ends.
    pub keep_db: Option<PathBuf>,
}

/// An instant as a scenario writes it (RFC 3339). Parsed while the file is read,
/// so a bad one is an error at its own line and column, never a silent epoch; the
/// text is kept because verdicts quote it as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instant {
    at: DateTime<Utc>,
    written: String,
}

impl Instant {
    pub fn utc(&self) -> DateTime<Utc> {
        self.at
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let written = String::deserialize(d)?;
        match DateTime::parse_from_rfc3339(&written) {
            Ok(t) => Ok(Self {
                at: t.with_timezone(&Utc),
                written,
            }),
            Err(e) => Err(serde::de::Error::custom(format!(
                "`{written}` is not an RFC 3339 instant ({e})"
            ))),
        }
    }
}

/// Reads a scenario; errors are located like `check`'s (FILE:LINE:COL), at the
/// key or value that is wrong.
pub fn load(path: &Path) -> Result<Scenario, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let src = Source::new(&text);
    let diag = |at: usize, message: String| {
        let (line, col) = src.locate(at);
        LoadError::Invalid(vec![Diagnostic {
            file: path.to_path_buf(),
            line,
            col,
            message,
            help: None,
        }])
    };
    let tree = DeTable::parse(&text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        diag(at, format!("rehearsal: {}", e.message()))
    })?;
    let spans = Spans(tree.get_ref());
    // Scenario sections (serde, strict below the top level) from the same spanned
    // tree; config sections are left to the config loader.
    let doc = Doc::deserialize(toml::de::Deserializer::from(tree.clone())).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let what = spans.path_at(at).unwrap_or_else(|| "rehearsal".into());
        diag(at, format!("{what}: {}", e.message()))
    })?;
    // Every path below comes from `doc`, which was read from this tree.
    let value_at = |path: &[Seg]| spans.lookup(path).map_or(0, |(_, value)| value);
    let mut config = match &doc.rehearsal.config {
        Some(rel) => {
            let base = path.parent().unwrap_or(Path::new("."));
            load_file(&base.join(rel))?
        }
        None => load_str_with(&text, path, SCENARIO_KEYS)?,
    };
    if let Some(only) = &doc.rehearsal.only {
        for (i, id) in only.iter().enumerate() {
            if config.schedule(id).is_none() {
                return Err(diag(
                    value_at(&[Key("rehearsal"), Key("only"), Item(i)]),
                    format!("rehearsal.only: no schedule `{id}` in the config"),
                ));
            }
        }
        config.schedules.retain(|s| only.contains(&s.id));
        for m in &mut config.maintenance {
            m.schedules.retain(|s| only.contains(s));
        }
    }
    let (start, end) = (doc.rehearsal.start.utc(), doc.rehearsal.end.utc());
    if end <= start {
        return Err(diag(
            value_at(&[Key("rehearsal"), Key("end")]),
            "rehearsal.end must be after rehearsal.start".into(),
        ));
    }
    for (id, a) in &doc.sim.agents {
        let agent = [Key("sim"), Key("agents"), Key(id)];
        if config.schedule(id).is_none() {
            let key = spans.lookup(&agent).map_or(0, |(key, _)| key);
            return Err(diag(
                key,
                format!("sim.agents.{id}: no schedule `{id}` in the config"),
            ));
        }
        let scripts = a.attempts.iter().enumerate().map(|(j, at)| {
            let mut path = agent.to_vec();
            path.extend([Key("attempts"), Item(j)]);
            (path, at)
        });
        let phased = a.phases.iter().enumerate().flat_map(|(p, phase)| {
            phase.attempts.iter().enumerate().map(move |(j, at)| {
                let mut path = agent.to_vec();
                path.extend([Key("phases"), Item(p), Key("attempts"), Item(j)]);
                (path, at)
            })
        });
        for (script, at) in scripts.chain(phased) {
            let at_key = |key| value_at(&[script.as_slice(), &[Key(key)]].concat());
            if let Some(l) = &at.latency {
                parse_duration(l)
                    .map_err(|e| diag(at_key("latency"), format!("sim.agents.{id}: latency: {e}")))?;
            }
            if let Some(c) = &at.class
                && ErrorClass::parse(c).is_none()
            {
                return Err(diag(
                    at_key("class"),
                    format!("sim.agents.{id}: unknown class `{c}` (retryable, non_retryable, needs_human)"),
                ));
            }
            if let Some(r) = &at.result
                && !matches!(r.as_str(), "success" | "failure")
            {
                return Err(diag(
                    at_key("result"),
                    format!("sim.agents.{id}: result must be `success` or `failure`, not `{r}`"),
                ));
            }
        }
    }
    for (i, g) in doc.sim.gate.iter().enumerate() {
        let at_key = |key| value_at(&[Key("sim"), Key("gate"), Item(i), Key(key)]);
        let Some(s) = config.schedule(&g.schedule) else {
            return Err(diag(
                at_key("schedule"),
                format!("sim.gate: no schedule `{}`", g.schedule),
            ));
        };
        if !s.gates.iter().any(|x| x.name == g.name) {
            return Err(diag(
                at_key("name"),
                format!("sim.gate: schedule {} has no gate `{}`", g.schedule, g.name),
            ));
        }
    }
    for (i, f) in doc.fault.iter().enumerate() {
        match f.kind.as_str() {
            "crash" | "restart" | "second_scheduler" => {}
            "clock_jump" if f.to.is_none() => {
                // A missing key is reported where its table starts, as in `check`.
                return Err(diag(
                    value_at(&[Key("fault"), Item(i)]),
                    "fault clock_jump needs `to`".into(),
                ));
            }
            "clock_jump" => {}
            other => {
                return Err(diag(
                    value_at(&[Key("fault"), Item(i), Key("kind")]),
                    format!("unknown fault kind `{other}` (crash, restart, clock_jump, second_scheduler)"),
                ));
            }
        }
    }
    for (i, a) in doc.action.iter().enumerate() {
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
                value_at(&[Key("action"), Item(i), Key("kind")]),
                format!("unknown action kind `{}` ({})", a.kind, known.join(", ")),
            ));
        }
    }
    for (i, e) in doc.expect.iter().enumerate() {
        if let Some(s) = &e.state
            && crate::store::types::RunState::parse(s).is_none()
        {
            return Err(diag(
                value_at(&[Key("expect"), Item(i), Key("state")]),
                format!("expect: unknown state `{s}`"),
            ));
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
        keep_db: None,
    })
}

/// One step of a path into the scenario's tree: a key of a table or an entry of
/// an array (`[[fault]]` number `i`).
#[derive(Debug, Clone, Copy)]
enum Seg<'k> {
    Key(&'k str),
    Item(usize),
}
use Seg::{Item, Key};

/// The spanned tree of a scenario file: where a given key and its value are
/// written, found by path rather than by searching the text for the value.
struct Spans<'a, 'i>(&'a DeTable<'i>);

impl Spans<'_, '_> {
    /// Byte offsets of the last key of `path` (an array entry's own start, for
    /// an [`Item`]) and of its value.
    fn lookup(&self, path: &[Seg]) -> Option<(usize, usize)> {
        let (Key(first), rest) = path.split_first()? else {
            return None;
        };
        let (key, mut value) = self.0.get_key_value(*first)?;
        let mut key_at = key.span().start;
        for seg in rest {
            (key_at, value) = match (*seg, value.get_ref()) {
                (Key(k), DeValue::Table(t)) => {
                    let (key, v) = t.get_key_value(k)?;
                    (key.span().start, v)
                }
                (Item(i), DeValue::Array(items)) => {
                    let item = items.get(i)?;
                    (item.span().start, item)
                }
                _ => return None,
            };
        }
        Some((key_at, value.span().start))
    }

    /// The dotted key path (`fault.at`) of the innermost key or value written at
    /// `offset`, to name what a serde error is about.
    fn path_at(&self, offset: usize) -> Option<String> {
        fn in_table(t: &DeTable, offset: usize, path: &mut Vec<String>) -> bool {
            t.iter().any(|(key, value)| {
                path.push(key.get_ref().to_string());
                if key.span().contains(&offset) || in_value(value, offset, path) {
                    return true;
                }
                path.pop();
                false
            })
        }
        fn in_value(v: &toml::Spanned<DeValue>, offset: usize, path: &mut Vec<String>) -> bool {
            let inner = match v.get_ref() {
                DeValue::Table(t) => in_table(t, offset, path),
                DeValue::Array(items) => items.iter().any(|item| in_value(item, offset, path)),
                _ => false,
            };
            inner || v.span().contains(&offset)
        }
        let mut path = vec![];
        in_table(self.0, offset, &mut path).then(|| path.join("."))
    }
}

/// A duration from a scenario (validated at load).
pub fn delta(s: &Option<String>, default: TimeDelta) -> TimeDelta {
    s.as_deref()
        .and_then(|l| parse_duration(l).ok())
        .map(crate::time::duration::to_delta)
        .unwrap_or(default)
}
