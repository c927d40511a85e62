//! Engine rules of DESIGN.md ("Trigger rules", "Run state machine", "Recovery
//! rules", "Trace") seen from outside: run state in the store, event kinds and
//! their key fields, and what the agent was asked to do. Virtual clock,
//! simulated agents; gates simulated, or real `command` gates where a test must
//! count evaluations or change the answer between checks.

mod support;

use agentcron::config::model::ErrorClass;
use agentcron::operator;
use agentcron::rehearsal::driver::Driver;
use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::rehearsal::sim_gate::SimGateRule;
use agentcron::store::Store;
use agentcron::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;
use support::real::{of_kind, trail};
use support::*;
use tempfile::TempDir;

/// Event details carry instants as RFC 3339 UTC with milliseconds.
fn ms(s: &str) -> String {
    t(s).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Instants of a run's events of one kind, in order.
fn at_of(store: &Store, run_id: i64, kind: &str) -> Vec<DateTime<Utc>> {
    of_kind(store, run_id, kind).into_iter().map(|e| e.at).collect()
}

/// `result` of each of a run's `gate` events, in order.
fn gate_results(store: &Store, run_id: i64) -> Vec<String> {
    of_kind(store, run_id, "gate")
        .into_iter()
        .map(|e| e.detail["result"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn quick_agent() -> agentcron::rehearsal::sim::SimAgent {
    sim_agent(vec![SimAttempt {
        latency: TimeDelta::seconds(20),
        ..Default::default()
    }])
}

/// [`BASE`] with alerts going to `alerts.jsonl` in the config folder.
fn base_with_alerts() -> String {
    BASE.replace(
        "[scheduler]\n",
        "[scheduler]\nalert = { kind = \"file\", path = \"alerts.jsonl\" }\n",
    )
}

/// A `command` gate whose exit code is whatever `file` holds (0 pass, 75 wait):
/// the test changes its answer between checks.
fn exit_code_gate(file: &std::path::Path) -> String {
    format!(
        "[[schedule.gate]]\nkind = \"command\"\nname = \"upstream\"\ncommand = [\"sh\", \"-c\", \"exit $(cat '{}')\"]\n",
        file.display()
    )
}

// ---------------------------------------------------------------------------
// 1. every + anchor = "last_start"

#[test]
fn last_start_anchor_opens_each_window_n_after_the_previous_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "poll"
agent = "sim"
every = "10m"
anchor = "last_start"
check_every = "1m"
close_after = "10m"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]
"#
        ),
    );
    // The first window's gate waits until 00:03:30 (checked every minute: it
    // starts at 00:04); the agent takes 3 minutes, so starts, ends and the
    // clock's 10-minute marks all differ.
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:00:00Z",
        vec![(
            "poll",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::minutes(3),
                ..Default::default()
            }]),
        )],
        vec![(
            "poll",
            "upstream",
            SimGateRule::PassFrom(t("2026-06-01T00:03:30Z")),
        )],
    );
    d.run_until(t("2026-06-01T00:40:00Z")).unwrap();
    let store = d.store().unwrap();
    let runs = runs(&store, "poll");
    let keys: Vec<&str> = runs.iter().map(|r| r.window_key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "2026-06-01T08:00+08:00",
            "2026-06-01T08:14+08:00",
            "2026-06-01T08:24+08:00",
            "2026-06-01T08:34+08:00",
        ],
        "the delayed first start shifts every later window (clock-aligned would be :10, :20, :30)"
    );
    let starts: Vec<DateTime<Utc>> = runs
        .iter()
        .map(|r| {
            let s = at_of(&store, r.id, "started");
            assert_eq!(s.len(), 1, "{}: one attempt", r.window_key);
            s[0]
        })
        .collect();
    assert_eq!(
        starts,
        [
            t("2026-06-01T00:04:00Z"),
            t("2026-06-01T00:14:00Z"),
            t("2026-06-01T00:24:00Z"),
            t("2026-06-01T00:34:00Z"),
        ]
    );
    for (prev, (next, r)) in starts.iter().zip(starts.iter().skip(1).zip(&runs[1..])) {
        assert_eq!(r.window_start, *prev + TimeDelta::minutes(10), "{}", r.window_key);
        assert_eq!(*next, r.window_start, "{} passes at once", r.window_key);
    }
    assert!(runs.iter().all(|r| r.state == RunState::Succeeded));
}

// ---------------------------------------------------------------------------
// 2. after_event + delay

#[test]
fn after_event_opens_one_window_per_event_id_claimed_at_arrival_plus_delay() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "follow-up"
agent = "sim"
after_event = "ticket.created"
delay = "30m"
check_every = "1m"
close_after = "10m"
"#
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:00:00Z",
        vec![("follow-up", quick_agent())],
        vec![],
    );
    d.settle().unwrap();
    let store = d.store().unwrap();
    let post = |id: &str, now| {
        operator::post_event(&store, "ticket.created", Some(id), &json!({"ticket": id}), now)
            .unwrap()
            .1
    };
    assert!(post("T-1", d.now()), "first post of T-1 is new");
    d.run_until(t("2026-06-01T00:05:00Z")).unwrap();
    assert!(post("T-2", d.now()));
    d.run_until(t("2026-06-01T00:10:00Z")).unwrap();
    assert!(!post("T-1", d.now()), "T-1 again: deduped by id");

    d.run_until(t("2026-06-01T00:29:59Z")).unwrap();
    let r1 = run_by_key(&store, "follow-up", "T-1");
    assert_eq!(
        (r1.state, r1.attempts),
        (RunState::Pending, 0),
        "not before arrival + delay"
    );
    assert_eq!(r1.window_start, t("2026-06-01T00:30:00Z"), "T-1 arrived at 00:00");
    assert!(at_of(&store, r1.id, "claimed").is_empty());
    let opened = &of_kind(&store, r1.id, "window_opened")[0];
    assert_eq!(opened.detail["window_key"], "T-1");
    assert_eq!(opened.detail["event_id"], "T-1");

    d.run_until(t("2026-06-01T00:50:00Z")).unwrap();
    assert!(!post("T-1", d.now()), "T-1 after its run: still deduped");
    d.run_until(t("2026-06-01T02:00:00Z")).unwrap();

    let runs = runs(&store, "follow-up");
    let keys: Vec<&str> = runs.iter().map(|r| r.window_key.as_str()).collect();
    assert_eq!(keys, ["T-1", "T-2"], "one run per event id");
    for (r, due) in runs.iter().zip(["2026-06-01T00:30:00Z", "2026-06-01T00:35:00Z"]) {
        assert_eq!(
            (r.state, r.attempts),
            (RunState::Succeeded, 1),
            "{}",
            r.window_key
        );
        assert_eq!(at_of(&store, r.id, "claimed"), [t(due)], "{}", r.window_key);
    }
    let delivered: Vec<String> = d.sim.ledger().into_iter().map(|(_, e)| e).collect();
    assert_eq!(
        delivered,
        ["default/follow-up/T-1 deliver", "default/follow-up/T-2 deliver"],
        "the agent ran once per event"
    );
}

// ---------------------------------------------------------------------------
// 3. a gate that fails: on_fail = "fail" | "human"

/// Schedule `pay` (09:00 Shanghai = 01:00Z) whose gate `token` always fails
/// with `on_fail`; driven to 03:00Z (past the window's close at 02:00Z).
fn failing_gate(on_fail: &str) -> (TempDir, Driver, Run) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{}
[[schedule]]
id = "pay"
agent = "sim"
cron = "0 9 * * *"
check_every = "5m"
close_after = "1h"

[[schedule.gate]]
kind = "command"
name = "token"
command = ["true"]
on_fail = "{on_fail}"
"#,
            base_with_alerts()
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:00Z",
        vec![("pay", quick_agent())],
        vec![("pay", "token", SimGateRule::Fail("token revoked".into()))],
    );
    d.run_until(t("2026-06-06T03:00:00Z")).unwrap();
    let run = run_by_key(&d.store().unwrap(), "pay", "2026-06-06");
    (dir, d, run)
}

/// The run's event kinds without `decision` rows.
fn kinds_without_decisions(store: &Store, run_id: i64) -> Vec<String> {
    kinds(store, run_id)
        .into_iter()
        .filter(|k| k != "decision")
        .collect()
}

#[test]
fn gate_failing_with_on_fail_fail_fails_the_run_non_retryable_and_alerts() {
    let (dir, d, run) = failing_gate("fail");
    let store = d.store().unwrap();
    assert_eq!(run.state, RunState::Failed, "{:?}", run.state_reason);
    assert_eq!(run.error_class, Some(ErrorClass::NonRetryable));
    assert_eq!(run.attempts, 0);
    assert!(store.read(|tx| tx.attempts(run.id)).unwrap().is_empty());
    assert!(d.sim.ledger().is_empty(), "the agent never ran");
    assert_eq!(
        kinds_without_decisions(&store, run.id),
        ["window_opened", "gate", "failed", "alert"],
        "failed at the first check, never re-checked or reopened"
    );
    let gate = &of_kind(&store, run.id, "gate")[0];
    assert_eq!(
        (
            &gate.detail["name"],
            &gate.detail["result"],
            &gate.detail["on_fail"]
        ),
        (&json!("token"), &json!("fail"), &json!("fail"))
    );
    let failed = &of_kind(&store, run.id, "failed")[0];
    assert_eq!(failed.at, t("2026-06-06T01:00:00Z"));
    assert_eq!(failed.detail["class"], "non_retryable");
    let alert = &of_kind(&store, run.id, "alert")[0];
    assert_eq!(alert.detail["what"], "failed");
    let lines = alert_lines(dir.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["what"], "failed");
    assert_eq!(lines[0]["run"], run.id);
    assert_eq!(lines[0]["schedule"], "pay");
}

#[test]
fn gate_failing_with_on_fail_human_parks_the_run_for_a_human_and_alerts() {
    let (dir, d, run) = failing_gate("human");
    let store = d.store().unwrap();
    assert_eq!(run.state, RunState::NeedsHuman, "{:?}", run.state_reason);
    assert_eq!(run.error_class, Some(ErrorClass::NeedsHuman));
    assert_eq!(run.attempts, 0);
    assert!(d.sim.ledger().is_empty(), "the agent never ran");
    assert_eq!(
        kinds_without_decisions(&store, run.id),
        ["window_opened", "gate", "parked_for_human", "alert"],
        "parked at the first check and left waiting past the window's close"
    );
    assert_eq!(gate_results(&store, run.id), ["fail"]);
    assert_eq!(
        at_of(&store, run.id, "parked_for_human"),
        [t("2026-06-06T01:00:00Z")]
    );
    let alert = &of_kind(&store, run.id, "alert")[0];
    assert_eq!(alert.detail["what"], "needs_human");
    let lines = alert_lines(dir.path());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["what"], "needs_human");
    assert_eq!(lines[0]["run"], run.id);
}

// ---------------------------------------------------------------------------
// 4. a window missed behind a gate is caught up

/// Daily 09:00 Shanghai (01:00Z), window until 10:00 (02:00Z), catch-up window
/// 3 h (until 04:00Z); gate `upstream` passes from `ready`.
fn missed_behind_gate(ready: &str, until: &str) -> (TempDir, Driver) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "late"
agent = "sim"
cron = "0 9 * * *"
check_every = "5m"
close_after = "1h"
catchup = "all"
catchup_window = "3h"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]
"#
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:00Z",
        vec![("late", quick_agent())],
        vec![("late", "upstream", SimGateRule::PassFrom(t(ready)))],
    );
    d.run_until(t(until)).unwrap();
    (dir, d)
}

#[test]
fn a_window_missed_behind_a_gate_is_queued_for_catch_up_and_runs_when_the_gate_passes() {
    // Upstream lands at 10:30 local, half an hour after the window closed.
    let (_dir, mut d) = missed_behind_gate("2026-06-06T02:30:00Z", "2026-06-06T02:00:00Z");
    let store = d.store().unwrap();
    let run = run_by_key(&store, "late", "2026-06-06");
    assert_eq!(
        (run.state, run.reason, run.pool, run.attempts),
        (RunState::Pending, RunReason::Catchup, Pool::Backfill, 0),
        "at window close: missed, then pending in the backfill pool"
    );
    assert_eq!(
        trail(&store, run.id),
        ["window_opened", "missed", "catchup_queued"]
    );
    let missed = &of_kind(&store, run.id, "missed")[0];
    assert_eq!(missed.at, t("2026-06-06T02:00:00Z"));
    let queued = &of_kind(&store, run.id, "catchup_queued")[0];
    assert_eq!(queued.at, t("2026-06-06T02:00:00Z"));
    assert_eq!(queued.detail["window_key"], "2026-06-06");
    assert_eq!(queued.detail["pool"], "backfill");
    assert_eq!(queued.detail["expires"], ms("2026-06-06T04:00:00Z"));

    d.run_until(t("2026-06-06T05:00:00Z")).unwrap();
    let run = run_by_key(&store, "late", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::Succeeded, 1));
    assert_eq!(
        trail(&store, run.id),
        [
            "window_opened",
            "missed",
            "catchup_queued",
            "claimed",
            "started",
            "step fetch started",
            "step fetch done",
            "step deliver started",
            "step deliver done",
            "succeeded",
        ]
    );
    // Re-gated in the backfill pool: waits until the gate passes, then claimed at once.
    let after_queue: Vec<_> = of_kind(&store, run.id, "gate")
        .into_iter()
        .filter(|e| e.at >= queued.at)
        .map(|e| e.detail["result"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after_queue.last().map(String::as_str), Some("pass"));
    assert!(after_queue[..after_queue.len() - 1].iter().all(|r| r == "wait"));
    let claimed = at_of(&store, run.id, "claimed");
    assert_eq!(
        claimed,
        [t("2026-06-06T02:30:00Z")],
        "claimed once the gate passes"
    );
    assert!(
        claimed[0] < run.window_start + TimeDelta::hours(3),
        "within catchup_window"
    );
    let started = &of_kind(&store, run.id, "started")[0];
    assert_eq!(started.detail["reason"], "catchup");
    let attempts = store.read(|tx| tx.attempts(run.id)).unwrap();
    assert_eq!(attempts[0].reason, RunReason::Catchup);
    assert_eq!(d.sim.ledger().len(), 1, "one delivery");
}

#[test]
fn a_missed_window_whose_gate_passes_after_the_catch_up_window_expires_unrun() {
    // Upstream lands at 14:00 local; the catch-up window ends at 12:00 (04:00Z).
    let (_dir, d) = missed_behind_gate("2026-06-06T06:00:00Z", "2026-06-06T07:00:00Z");
    let store = d.store().unwrap();
    let run = run_by_key(&store, "late", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::Expired, 0));
    assert_eq!(
        trail(&store, run.id),
        ["window_opened", "missed", "catchup_queued", "expired", "alert"]
    );
    assert_eq!(at_of(&store, run.id, "expired"), [t("2026-06-06T04:00:00Z")]);
    assert_eq!(of_kind(&store, run.id, "alert")[0].detail["what"], "expired");
    assert!(d.sim.ledger().is_empty());
}

// ---------------------------------------------------------------------------
// 5. the kill switch comes before every gate

#[test]
fn no_gate_is_evaluated_while_the_kill_switch_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let checks = dir.path().join("checks.log");
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "job"
agent = "sim"
cron = "*/10 * * * *"
close_after = "10m"
check_every = "1m"
catchup = "none"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["sh", "-c", "echo checked >> '{}'"]
"#,
            checks.display()
        ),
    );
    let evaluations = || {
        std::fs::read_to_string(&checks)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:10:00Z",
        vec![("job", quick_agent())],
        vec![],
    );
    let store = d.store().unwrap();
    operator::kill(&store, "alice", "incident 7", false, d.now()).unwrap();
    // The 00:10 window is checked every minute while killed: six checks.
    d.run_until(t("2026-06-01T00:15:00Z")).unwrap();
    let run = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!((run.state, run.attempts), (RunState::Pending, 0));
    let held = of_kind(&store, run.id, "switch_held");
    assert!(
        !held.is_empty() && held.iter().all(|e| e.detail["switch"] == "kill"),
        "{held:?}"
    );
    assert_eq!(evaluations(), 0, "the gate command never ran while killed");
    assert!(schedule_events(&store, "job", "gate").is_empty());

    operator::unkill(&store, "alice", "resolved", d.now()).unwrap();
    d.run_until(t("2026-06-01T00:19:00Z")).unwrap();
    let run = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!((run.state, run.attempts), (RunState::Succeeded, 1));
    assert_eq!(evaluations(), 1, "evaluated once after unkill, and it passed");
    assert_eq!(gate_results(&store, run.id), ["pass"]);
    let gate_at = at_of(&store, run.id, "gate");
    let claimed = at_of(&store, run.id, "claimed");
    assert_eq!(claimed, gate_at, "claimed on the check that evaluated the gate");
    assert!(claimed[0] >= t("2026-06-01T00:15:00Z") && claimed[0] <= t("2026-06-01T00:16:00Z"));
}

// ---------------------------------------------------------------------------
// 6. a retry is re-gated

#[test]
fn a_retry_is_re_gated_and_waits_in_retry_wait_while_its_gate_waits() {
    let dir = tempfile::tempdir().unwrap();
    let answer = dir.path().join("gate-exit");
    let set_gate = |code: &str| std::fs::write(&answer, code).unwrap();
    set_gate("0");
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
check_every = "1m"
close_after = "1h"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "5m", max = "5m", jitter = 0.0 }}

{}"#,
            exit_code_gate(&answer)
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:00Z",
        vec![(
            "report",
            sim_agent(vec![
                SimAttempt {
                    latency: TimeDelta::seconds(20),
                    end: SimEnd::Fail(ErrorClass::Retryable),
                    ..Default::default()
                },
                SimAttempt {
                    latency: TimeDelta::seconds(20),
                    ..Default::default()
                },
            ]),
        )],
        vec![],
    );
    // Attempt 1 at 01:00:00 fails retryable at 01:00:20: retry not before 01:05:20.
    d.run_until(t("2026-06-06T01:01:00Z")).unwrap();
    let store = d.store().unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::RetryWait, 1));
    let scheduled = &of_kind(&store, run.id, "retry_scheduled")[0];
    assert_eq!(scheduled.detail["not_before"], ms("2026-06-06T01:05:20Z"));
    assert_eq!(gate_results(&store, run.id), ["pass"], "attempt 1 was gated");

    // The upstream data vanished before the retry is due.
    set_gate("75");
    d.run_until(t("2026-06-06T01:08:00Z")).unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    assert_eq!(
        (run.state, run.attempts),
        (RunState::RetryWait, 1),
        "no second attempt while the gate waits"
    );
    let retry_gates: Vec<_> = of_kind(&store, run.id, "gate")
        .into_iter()
        .filter(|e| e.at > scheduled.at)
        .collect();
    assert!(!retry_gates.is_empty(), "the retry was re-gated");
    assert_eq!(
        retry_gates[0].at,
        t("2026-06-06T01:05:20Z"),
        "first checked at not_before"
    );
    assert!(
        retry_gates.iter().all(|e| e.detail["result"] == "wait"),
        "{retry_gates:?}"
    );
    assert_eq!(at_of(&store, run.id, "claimed").len(), 1);

    set_gate("0");
    d.run_until(t("2026-06-06T01:15:00Z")).unwrap();
    let run = run_by_key(&store, "report", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::Succeeded, 2));
    let claimed = at_of(&store, run.id, "claimed");
    assert_eq!(claimed.len(), 2);
    assert_eq!(
        claimed[1],
        t("2026-06-06T01:08:20Z"),
        "the first check after the gate passes"
    );
    assert_eq!(
        gate_results(&store, run.id).last().map(String::as_str),
        Some("pass")
    );
    let attempts = store.read(|tx| tx.attempts(run.id)).unwrap();
    assert_eq!(attempts[1].reason, RunReason::Retry);
    assert_eq!(attempts[1].started_at, t("2026-06-06T01:08:20Z"));
}
