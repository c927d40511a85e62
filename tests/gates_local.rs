//! Gates that only look at local state: previous_run_finished, file_exists,
//! calendar; plus compare(), build() and evaluate()'s panic guard.

#[path = "fixtures/gates/support.rs"]
#[allow(dead_code)]
mod support;

use agentcron::config::model::{CompareOp, GateKind, OnFail};
use agentcron::gates::{self, Gate, GateContext, GateOutcome, GateVerdict, compare};
use agentcron::store::types::RunState;
use agentcron::time::calendar::Calendar;
use chrono::{NaiveDate, Weekday};
use chrono_tz::Tz;
use serde_json::json;
use std::sync::Arc;
use std::time::SystemTime;
use support::*;

fn check(kind: GateKind, env: &Env) -> gates::GateResult {
    let gate = gates::build(&gate("g", kind));
    gates::evaluate(gate.as_ref(), OnFail::Skip, &env.ctx())
}

#[test]
fn previous_run_finished_passes_without_a_previous_run() {
    let r = check(GateKind::PreviousRunFinished, &Env::new());
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(r.reason, "no previous run");
    assert_eq!(
        (r.kind.as_str(), r.on_fail.as_str()),
        ("previous_run_finished", "skip")
    );
}

#[test]
fn previous_run_finished_passes_on_every_terminal_state() {
    for state in [
        RunState::Succeeded,
        RunState::Failed,
        RunState::Dead,
        RunState::Skipped,
        RunState::Expired,
    ] {
        let mut env = Env::new();
        env.previous = Some(run_in("2026-06-05", state));
        let r = check(GateKind::PreviousRunFinished, &env);
        assert_eq!(r.verdict, GateVerdict::Pass, "{state}");
        assert_eq!(r.reason, format!("previous window 2026-06-05 is {state}"));
    }
}

#[test]
fn previous_run_finished_waits_while_the_previous_window_is_open() {
    for state in [
        RunState::Pending,
        RunState::Running,
        RunState::RetryWait,
        RunState::NeedsHuman,
        RunState::Missed,
    ] {
        let mut env = Env::new();
        env.previous = Some(run_in("2026-06-05", state));
        let r = check(GateKind::PreviousRunFinished, &env);
        assert_eq!(r.verdict, GateVerdict::Wait, "{state}");
        assert_eq!(r.reason, format!("previous window 2026-06-05 is still {state}"));
    }
}

fn file_gate(path: &std::path::Path, min_size: Option<u64>, newer_than_window: bool) -> GateKind {
    GateKind::FileExists {
        path: path.to_path_buf(),
        min_size,
        newer_than_window,
    }
}

#[test]
fn file_exists_waits_for_a_missing_file_then_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.csv");
    let env = Env::new();
    let r = check(file_gate(&path, None, false), &env);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, format!("{} not found", path.display()));

    std::fs::write(&path, "a,b\n1,2\n").unwrap();
    let r = check(file_gate(&path, None, false), &env);
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert!(r.reason.contains("(8 bytes)"), "{}", r.reason);
}

#[test]
fn file_exists_waits_while_the_file_is_too_small() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.csv");
    std::fs::write(&path, "a,b\n").unwrap();
    let env = Env::new();
    let r = check(file_gate(&path, Some(100), false), &env);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(
        r.reason,
        format!("{} is 4 bytes (< 100 required)", path.display())
    );
    assert_eq!(
        check(file_gate(&path, Some(4), false), &env).verdict,
        GateVerdict::Pass
    );
}

#[test]
fn file_exists_newer_than_window_compares_mtime_with_the_window_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.csv");
    std::fs::write(&path, "x").unwrap();
    let env = Env::new();
    let set_mtime = |rfc: &str| {
        let t: SystemTime = utc(rfc).into();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    };

    set_mtime("2026-06-05T23:00:00Z"); // yesterday's file
    let r = check(file_gate(&path, None, true), &env);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(
        r.reason
            .contains("modified 2026-06-05T23:00:00Z (before the window start 2026-06-06T01:00:00Z)"),
        "{}",
        r.reason
    );

    set_mtime("2026-06-06T01:00:00Z"); // exactly at the start counts
    assert_eq!(
        check(file_gate(&path, None, true), &env).verdict,
        GateVerdict::Pass
    );
    set_mtime("2026-06-06T01:20:00Z");
    let r = check(file_gate(&path, None, true), &env);
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert!(r.reason.contains("modified 2026-06-06T01:20:00Z"), "{}", r.reason);
}

fn cn_calendar() -> Calendar {
    let mut c = Calendar::new("cn-workdays", &[Weekday::Sat, Weekday::Sun]);
    c.holidays.insert(NaiveDate::from_ymd_opt(2026, 10, 1).unwrap());
    c
}

fn calendar_env(window_start: &str, calendar: Option<&str>) -> Env {
    let mut env = Env::new();
    env.schedule = schedule(Tz::Asia__Shanghai, calendar);
    env.calendars
        .insert("cn-workdays".into(), Arc::new(cn_calendar()));
    env.window_start = utc(window_start);
    env.window_end = env.window_start + chrono::TimeDelta::hours(1);
    env
}

#[test]
fn calendar_fails_on_a_holiday_of_the_local_date() {
    // 2026-09-30T16:30Z is 2026-10-01 00:30 in Shanghai: a holiday there, while the
    // UTC date (a Wednesday) is a business day — the local date is what counts.
    let env = calendar_env("2026-09-30T16:30:00Z", Some("cn-workdays"));
    let r = check(GateKind::Calendar { calendar: None }, &env);
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(r.reason, "2026-10-01 is a holiday in calendar cn-workdays");
}

#[test]
fn calendar_passes_on_a_business_day_and_fails_on_a_weekend() {
    let env = calendar_env("2026-09-30T01:00:00Z", Some("cn-workdays"));
    let r = check(GateKind::Calendar { calendar: None }, &env);
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(r.reason, "2026-09-30 is a business day in calendar cn-workdays");

    let env = calendar_env("2026-10-03T01:00:00Z", Some("cn-workdays"));
    let r = check(GateKind::Calendar { calendar: None }, &env);
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert!(r.reason.contains("weekend"), "{}", r.reason);
}

#[test]
fn calendar_named_on_the_gate_overrides_and_unknown_waits() {
    let env = calendar_env("2026-09-30T16:30:00Z", None);
    let r = check(
        GateKind::Calendar {
            calendar: Some("cn-workdays".into()),
        },
        &env,
    );
    assert_eq!(r.verdict, GateVerdict::Fail);

    let r = check(
        GateKind::Calendar {
            calendar: Some("us-holidays".into()),
        },
        &env,
    );
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "unknown calendar us-holidays");

    let r = check(GateKind::Calendar { calendar: None }, &env);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("no calendar"), "{}", r.reason);
}

#[test]
fn compare_numbers_with_every_operator() {
    use CompareOp::*;
    let cases = [
        (Eq, 3.0, true),
        (Eq, 4.0, false),
        (Ne, 4.0, true),
        (Ne, 3.0, false),
        (Gt, 2.0, true),
        (Gt, 3.0, false),
        (Ge, 3.0, true),
        (Ge, 3.5, false),
        (Lt, 3.5, true),
        (Lt, 3.0, false),
        (Le, 3.0, true),
        (Le, 2.0, false),
    ];
    for (op, n, want) in cases {
        assert_eq!(compare(&num(op, n), &json!(3)), Ok(want), "3 {op:?} {n}");
        assert_eq!(compare(&num(op, n), &json!(3.0)), Ok(want), "3.0 {op:?} {n}");
    }
}

#[test]
fn compare_text_and_booleans() {
    use CompareOp::*;
    assert_eq!(compare(&text(Eq, "ready"), &json!("ready")), Ok(true));
    assert_eq!(compare(&text(Eq, "ready"), &json!("starting")), Ok(false));
    assert_eq!(compare(&text(Ne, "ready"), &json!("starting")), Ok(true));
    assert_eq!(compare(&boolean(Eq, true), &json!(true)), Ok(true));
    assert_eq!(compare(&boolean(Ne, true), &json!(true)), Ok(false));
    // SQLite has no booleans: 1/0 stand for true/false.
    assert_eq!(compare(&boolean(Eq, true), &json!(1)), Ok(true));
    assert_eq!(compare(&boolean(Eq, true), &json!(0)), Ok(false));
}

#[test]
fn compare_refuses_type_mismatches_and_null() {
    use CompareOp::*;
    let e = compare(&num(Gt, 0.0), &json!("12")).unwrap_err();
    assert_eq!(e, "type mismatch: got text '12', expected > 0");
    let e = compare(&text(Eq, "ready"), &json!(1)).unwrap_err();
    assert_eq!(e, "type mismatch: got number 1, expected == 'ready'");
    assert!(
        compare(&num(Eq, 0.0), &json!(null))
            .unwrap_err()
            .contains("got null")
    );
    assert!(compare(&boolean(Eq, true), &json!(2)).is_err());
    assert!(compare(&num(Eq, 1.0), &json!([1])).is_err());
    // Ordering on text makes no sense even if a config slipped it through.
    assert!(
        compare(&text(Gt, "a"), &json!("b"))
            .unwrap_err()
            .contains("numbers only")
    );
}

struct Panicky;

impl Gate for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn kind(&self) -> &'static str {
        "command"
    }
    fn check(&self, _ctx: &GateContext<'_>) -> GateOutcome {
        panic!("index out of range in upstream parser");
    }
}

#[test]
fn a_gate_that_panics_is_a_wait_with_the_message() {
    let env = Env::new();
    let r = gates::evaluate(&Panicky, OnFail::Human, &env.ctx());
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "gate panicked: index out of range in upstream parser");
    assert_eq!((r.name.as_str(), r.on_fail.as_str()), ("panicky", "human"));
}

#[test]
fn build_makes_one_gate_per_kind_with_its_name() {
    let kinds = [
        GateKind::PreviousRunFinished,
        file_gate(std::path::Path::new("x"), None, false),
        GateKind::SqliteQuery {
            database: "w.db".into(),
            query: "SELECT 1".into(),
            expect: num(CompareOp::Gt, 0.0),
        },
        GateKind::Command {
            command: vec!["true".into()],
        },
        GateKind::Http {
            url: "http://127.0.0.1:9/".into(),
            status: 200,
            json_pointer: None,
            expect: None,
            headers: Default::default(),
        },
        GateKind::CredentialValid {
            source: agentcron::config::model::CredentialSource::File("t".into()),
            min_remaining: std::time::Duration::from_secs(600),
        },
        GateKind::Calendar { calendar: None },
    ];
    for kind in kinds {
        let g = gates::build(&gate("upstream", kind.clone()));
        assert_eq!(g.kind(), kind.kind_name());
        assert_eq!(g.name(), "upstream");
    }
}

#[test]
fn results_serialize_with_snake_case_verdicts() {
    let env = Env::new();
    let r = check(GateKind::PreviousRunFinished, &env);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["verdict"], "pass");
    assert_eq!(v["on_fail"], "skip");
    assert!(v["elapsed_ms"].is_u64());
    assert_eq!(GateVerdict::Wait.as_str(), "wait");
    assert_eq!(
        serde_json::from_value::<GateVerdict>(json!("fail")).unwrap(),
        GateVerdict::Fail
    );
}
