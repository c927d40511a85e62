//! The three-layer trigger flow on a virtual clock (DESIGN.md "Trigger rules").

mod support;

use agentcron::rehearsal::sim::SimAttempt;
use agentcron::rehearsal::sim_gate::SimGateRule;
use agentcron::store::types::RunState;
use chrono::TimeDelta;
use support::*;

fn report_config() -> String {
    format!(
        r#"{BASE}
[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
check_every = "5m"
close_after = "1h"
catchup = "none"

[[schedule.gate]]
kind = "previous_run_finished"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]
"#
    )
}

#[test]
fn gate_waits_three_checks_then_passes_then_the_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &report_config());
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:30:00Z", // 08:30 Shanghai
        vec![(
            "report",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::seconds(40),
                ..Default::default()
            }]),
        )],
        vec![(
            "report",
            "upstream",
            SimGateRule::PassFrom(t("2026-06-06T01:12:00Z")),
        )],
    );
    d.run_until(t("2026-06-06T02:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.attempts, 1);
    let ev = events(&store, run.id);
    let trail: Vec<String> = ev
        .iter()
        .filter(|e| e.kind != "decision")
        .map(|e| match e.kind.as_str() {
            "gate" => format!(
                "gate {} {}",
                e.detail["name"].as_str().unwrap(),
                e.detail["result"].as_str().unwrap()
            ),
            "step" => format!(
                "step {} {}",
                e.detail["name"].as_str().unwrap(),
                e.detail["status"].as_str().unwrap()
            ),
            k => k.to_string(),
        })
        .collect();
    assert_eq!(
        trail,
        [
            "window_opened",
            "gate previous_run_finished pass",
            "gate upstream wait",
            "gate previous_run_finished pass",
            "gate upstream wait",
            "gate previous_run_finished pass",
            "gate upstream wait",
            "gate previous_run_finished pass",
            "gate upstream pass",
            "claimed",
            "started",
            "step fetch started",
            "step fetch done",
            "step deliver started",
            "step deliver done",
            "succeeded",
        ]
    );
    // Checks at 09:00, 09:05, 09:10 waited; 09:15 passed and claimed at once.
    let claimed = ev.iter().find(|e| e.kind == "claimed").unwrap();
    assert_eq!(claimed.at, t("2026-06-06T01:15:00Z"));
    assert_eq!(claimed.detail["due"], "2026-06-06T01:00:00.000Z");
    assert_eq!(claimed.detail["claimed"], "2026-06-06T01:15:00.000Z");
    assert_eq!(claimed.detail["owner"], "main");
    let succeeded = ev.iter().find(|e| e.kind == "succeeded").unwrap();
    assert_eq!(succeeded.at, t("2026-06-06T01:15:40Z"));
    assert_eq!(d.sim.ledger().len(), 1, "one delivery");
}

#[test]
fn gate_that_never_passes_makes_the_run_missed_at_window_close() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &report_config());
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:30:00Z",
        vec![("report", sim_agent(vec![]))],
        vec![(
            "report",
            "upstream",
            SimGateRule::PassFrom(t("2026-06-07T00:00:00Z")),
        )],
    );
    d.run_until(t("2026-06-06T02:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    let k = kinds(&store, run.id);
    let missed = events(&store, run.id)
        .into_iter()
        .find(|e| e.kind == "missed")
        .expect("missed event");
    assert_eq!(
        missed.at,
        t("2026-06-06T02:00:00Z"),
        "missed exactly at window close (10:00 local)"
    );
    // 09:00 … 09:55 every 5 minutes: 12 checks, all waited.
    assert_eq!(k.iter().filter(|k| *k == "gate").count(), 24);
    assert!(!k.contains(&"claimed".to_string()));
    // catchup = "none": the missed window is then skipped with a reason.
    assert_eq!(run.state, RunState::Skipped);
    assert!(run.state_reason.unwrap().contains("catchup = \"none\""));
}

#[test]
fn non_business_day_is_skipped_with_reason_calendar() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{BASE}
[calendars.cn]
weekend = ["SAT", "SUN"]
holidays = ["2026-10-01"]

[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
calendar = "cn"
"#
    );
    let cfg = config(&dir, &toml);
    let mut d = driver(
        &dir,
        cfg,
        "2026-09-30T00:00:00Z",
        vec![("report", sim_agent(vec![]))],
        vec![],
    );
    d.run_until(t("2026-10-01T12:00:00Z")).unwrap();
    let store = d.store().unwrap();
    let ok = run_by_key(&store, "report", "2026-09-30");
    assert_eq!(ok.state, RunState::Succeeded);
    let holiday = run_by_key(&store, "report", "2026-10-01");
    assert_eq!(holiday.state, RunState::Skipped);
    assert!(holiday.state_reason.as_deref().unwrap().starts_with("calendar:"));
    assert_eq!(kinds(&store, holiday.id), ["skipped"]);
    assert_eq!(holiday.attempts, 0);
}

/// `non_business_day = "next_business_day"`: the weekend's windows open on
/// Monday at the Monday window's instant, each with its own key, and all
/// three run (fires that share an instant are all opened).
#[test]
fn weekend_windows_moved_to_monday_all_open_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{BASE}
[calendars.cn]
weekend = ["SAT", "SUN"]

[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
calendar = "cn"
non_business_day = "next_business_day"
overlap = "allow"
max_concurrency = 3
"#
    );
    let cfg = config(&dir, &toml);
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-04T00:00:00Z",
        vec![("report", sim_agent(vec![]))],
        vec![],
    );
    // Friday 2026-06-05 .. Tuesday 2026-06-09, 09:00 in Asia/Shanghai = 01:00Z.
    d.run_until(t("2026-06-09T12:00:00Z")).unwrap();
    let store = d.store().unwrap();
    for key in [
        "2026-06-05",
        "2026-06-06",
        "2026-06-07",
        "2026-06-08",
        "2026-06-09",
    ] {
        let run = run_by_key(&store, "report", key);
        assert_eq!(run.state, RunState::Succeeded, "{key}: {run:?}");
    }
    let monday = t("2026-06-08T01:00:00Z");
    for key in ["2026-06-06", "2026-06-07", "2026-06-08"] {
        assert_eq!(run_by_key(&store, "report", key).window_start, monday, "{key}");
    }
}
