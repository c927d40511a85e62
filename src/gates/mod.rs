//! Layer 2 — readiness gates (DESIGN.md "Trigger rules: three layers").
//!
//! One file per gate kind; each answers `pass`, `wait` or `fail` with a short reason an
//! operator reads in the console and in `explain`. Two rules hold for every kind:
//! gates take "now" from [`GateContext::now`] (the engine's Clock), never from the
//! system clock, and a gate error or timeout is a `wait` carrying the error — never a
//! panic, never a crash. [`evaluate`] enforces the second rule even for a gate that
//! breaks it.

pub mod calendar;
pub mod command;
pub mod credential_valid;
pub mod file_exists;
pub mod http;
pub mod previous_run_finished;
pub mod sqlite_query;

use crate::config::model::{CompareOp, Expect, ExpectValue, GateConfig, GateKind, OnFail, ScheduleConfig};
pub use crate::core::layers::gates::{GateOutcome, GateResult, GateVerdict};
use crate::store::types::Run;
use crate::time::calendar::Calendar;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything a gate may look at. The engine builds one per gate check.
#[derive(Clone, Copy, Debug)]
pub struct GateContext<'a> {
    pub tenant: &'a str,
    pub schedule: &'a ScheduleConfig,
    pub window_key: &'a str,
    pub window_start: DateTime<Utc>,
    pub window_end: DateTime<Utc>,
    /// From the engine's Clock; gates never read the system clock.
    pub now: DateTime<Utc>,
    /// Prefetched by the engine: the same schedule's run with the greatest
    /// window_start before this window.
    pub previous_run: Option<&'a Run>,
    pub calendars: &'a BTreeMap<String, Arc<Calendar>>,
    /// The gate's configured timeout; gates that do IO stop at it and `wait`.
    pub timeout: Duration,
}

/// One readiness check. Implementations must not panic and must not block past
/// `ctx.timeout` (local checks that cannot block need no timer).
pub trait Gate: Send + Sync {
    /// The configured name (unique within the schedule).
    fn name(&self) -> &str;
    /// The kind as written in config (`file_exists`, `http`, …).
    fn kind(&self) -> &'static str;
    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome;
}

/// Builds the gate a config entry describes; processes it starts run in
/// `config_dir`.
pub fn build_in(cfg: &GateConfig, config_dir: &std::path::Path) -> Box<dyn Gate> {
    match &cfg.kind {
        GateKind::Command { command } => {
            Box::new(command::CommandGate::new(cfg.name.clone(), command.clone()).in_dir(config_dir))
        }
        GateKind::CredentialValid {
            source,
            min_remaining,
        } => Box::new(
            credential_valid::CredentialValid::new(cfg.name.clone(), source.clone(), *min_remaining)
                .in_dir(config_dir),
        ),
        GateKind::Http {
            url,
            status,
            json_pointer,
            expect,
            headers,
        } => Box::new(
            http::HttpGate::new(
                cfg.name.clone(),
                url.clone(),
                *status,
                json_pointer.clone(),
                expect.clone(),
            )
            .with_headers(headers.clone(), config_dir),
        ),
        _ => build(cfg),
    }
}

/// Builds the gate a config entry describes (processes run in the current folder).
pub fn build(cfg: &GateConfig) -> Box<dyn Gate> {
    let name = cfg.name.clone();
    match &cfg.kind {
        GateKind::PreviousRunFinished => Box::new(previous_run_finished::PreviousRunFinished::new(name)),
        GateKind::FileExists {
            path,
            min_size,
            newer_than_window,
        } => Box::new(file_exists::FileExists::new(
            name,
            path.clone(),
            *min_size,
            *newer_than_window,
        )),
        GateKind::SqliteQuery {
            database,
            query,
            expect,
        } => Box::new(sqlite_query::SqliteQuery::new(
            name,
            database.clone(),
            query.clone(),
            expect.clone(),
        )),
        GateKind::Command { command } => Box::new(command::CommandGate::new(name, command.clone())),
        GateKind::Http {
            url,
            status,
            json_pointer,
            expect,
            headers,
        } => Box::new(
            http::HttpGate::new(name, url.clone(), *status, json_pointer.clone(), expect.clone())
                .with_headers(headers.clone(), std::path::Path::new(".")),
        ),
        GateKind::CredentialValid {
            source,
            min_remaining,
        } => Box::new(credential_valid::CredentialValid::new(
            name,
            source.clone(),
            *min_remaining,
        )),
        GateKind::Calendar { calendar } => Box::new(calendar::CalendarGate::new(name, calendar.clone())),
    }
}

/// Runs one gate. Its duration is measured with `Instant` (real elapsed time — a
/// measurement, not scheduling); a panic inside the gate becomes `wait` with the
/// panic message, so one broken gate cannot take the engine down.
pub fn evaluate(gate: &dyn Gate, on_fail: OnFail, ctx: &GateContext<'_>) -> GateResult {
    let started = Instant::now();
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| gate.check(ctx)))
        .unwrap_or_else(|payload| GateOutcome::wait(format!("gate panicked: {}", panic_message(&*payload))));
    GateResult {
        name: gate.name().to_string(),
        kind: gate.kind().to_string(),
        verdict: outcome.verdict,
        reason: outcome.reason,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        on_fail: on_fail_str(on_fail).to_string(),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// `on_fail` as written in config.
pub fn on_fail_str(on_fail: OnFail) -> &'static str {
    match on_fail {
        OnFail::Skip => "skip",
        OnFail::Fail => "fail",
        OnFail::Human => "human",
    }
}

/// Compares a measured value with an `expect`; shared by `sqlite_query` and `http`.
///
/// `Ok(false)` means "not met"; `Err` means the comparison makes no sense (null,
/// type mismatch, ordering on text) and says why. Numbers compare as f64. SQLite has
/// no booleans, so an expected `true`/`false` also accepts the integers 1/0.
pub fn compare(expect: &Expect, actual: &serde_json::Value) -> Result<bool, String> {
    use serde_json::Value;
    let op = expect.op;
    let equality = |eq: bool| match op {
        CompareOp::Eq => Ok(eq),
        CompareOp::Ne => Ok(!eq),
        _ => Err(format!(
            "`{}` compares numbers only, got {}",
            expect_text(expect),
            value_text(actual)
        )),
    };
    match (&expect.value, actual) {
        (ExpectValue::Number(want), Value::Number(n)) => {
            let got = n
                .as_f64()
                .ok_or_else(|| format!("{n} is not representable as a number"))?;
            Ok(match op {
                CompareOp::Eq => got == *want,
                CompareOp::Ne => got != *want,
                CompareOp::Gt => got > *want,
                CompareOp::Ge => got >= *want,
                CompareOp::Lt => got < *want,
                CompareOp::Le => got <= *want,
            })
        }
        (ExpectValue::Text(want), Value::String(got)) => equality(got == want),
        (ExpectValue::Bool(want), Value::Bool(got)) => equality(got == want),
        (ExpectValue::Bool(want), Value::Number(n)) if n.as_i64() == Some(0) || n.as_i64() == Some(1) => {
            equality((n.as_i64() == Some(1)) == *want)
        }
        _ => Err(format!(
            "type mismatch: got {} {}, expected {}",
            type_name(actual),
            value_text(actual),
            expect_text(expect)
        )),
    }
}

/// An `expect` as an operator reads it: `> 0`, `== 'ready'`, `!= true`.
pub fn expect_text(expect: &Expect) -> String {
    let op = match expect.op {
        CompareOp::Eq => "==",
        CompareOp::Ne => "!=",
        CompareOp::Gt => ">",
        CompareOp::Ge => ">=",
        CompareOp::Lt => "<",
        CompareOp::Le => "<=",
    };
    match &expect.value {
        ExpectValue::Number(n) => format!("{op} {n}"),
        ExpectValue::Text(t) => format!("{op} '{t}'"),
        ExpectValue::Bool(b) => format!("{op} {b}"),
    }
}

/// A measured value for a reason: text quoted, long values cut.
pub(crate) fn value_text(v: &serde_json::Value) -> String {
    let full = match v {
        serde_json::Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    };
    const MAX: usize = 80;
    if full.chars().count() <= MAX {
        full
    } else {
        let cut: String = full.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

fn type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "text",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}
