//! Operator verbs on the command line against a real database: approve/reject
//! (Virtual dates are in 2027, after the real clock the CLI verbs read, so work
//! they queue "now" is already due on the virtual clock.)
//! refusals, kill/unkill, pause and the resume preview, backfill --dry-run, the
//! dead-letter queue. Runs are prepared by the engine on a virtual clock.

mod support;

use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::types::*;
use assert_cmd::Command;
use chrono::TimeDelta;
use support::*;

fn cli(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("agentcron")
        .unwrap()
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(dir.path().join("test.db"))
        .args(args)
        .output()
        .unwrap()
}

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const HOURLY: &str = r#"
[[schedule]]
id = "hourly"
agent = "sim"
cron = "0 * * * *"
close_after = "30m"
catchup = "all"
"#;

#[test]
fn backfill_dry_run_shows_the_plan_and_changes_nothing_then_queues() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg,
        "2027-06-01T02:00:00Z",
        vec![("hourly", sim_agent(vec![]))],
        vec![],
    );
    d.run_until(t("2027-06-01T03:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let before = runs(&store, "hourly").len();
    let o = cli(
        &dir,
        &[
            "backfill",
            "hourly",
            "--from",
            "2027-05-31T22:00:00Z",
            "--to",
            "2027-06-01T03:00:00Z",
            "--dry-run",
        ],
    );
    assert!(o.status.success(), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("would queue"), "{text}");
    assert!(
        text.contains("left alone: run"),
        "windows that already ran are left alone: {text}"
    );
    assert!(text.contains("nothing changed"));
    assert_eq!(runs(&store, "hourly").len(), before, "a dry run creates nothing");
    let o = cli(
        &dir,
        &[
            "backfill",
            "hourly",
            "--from",
            "2027-05-31T22:00:00Z",
            "--to",
            "2027-06-01T03:00:00Z",
        ],
    );
    assert!(o.status.success(), "{}", out(&o));
    let after = runs(&store, "hourly");
    let queued: Vec<&Run> = after
        .iter()
        .filter(|r| r.reason == RunReason::Manual && r.pool == Pool::Backfill)
        .collect();
    assert_eq!(
        queued.len(),
        4,
        "22:00, 23:00, 00:00, 01:00 UTC were never opened: {after:?}"
    );
    // (The engine draining them is tested with the virtual clock in
    // backfilled_windows_run_oldest_first: the CLI stamps real time.)
    let bad = cli(
        &dir,
        &[
            "backfill",
            "hourly",
            "--from",
            "yesterday",
            "--to",
            "2027-06-01T03:00:00Z",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn resume_previews_the_plan_and_needs_yes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg,
        "2027-06-01T01:59:00Z",
        vec![("hourly", sim_agent(vec![]))],
        vec![],
    );
    let o = cli(&dir, &["pause", "hourly", "--reason", "upstream migration"]);
    assert!(o.status.success(), "{}", out(&o));
    d.run_until(t("2027-06-01T03:10:00Z")).unwrap();
    let store = d.store().unwrap();
    let held = runs(&store, "hourly");
    assert!(held.iter().all(|r| r.attempts == 0), "nothing runs while paused");
    let o = cli(&dir, &["resume", "hourly"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(text.contains("paused (by"), "{text}");
    assert!(text.contains("re-evaluates"), "{text}");
    assert!(text.contains("--yes"), "{text}");
    assert!(
        store.read(|tx| tx.schedule_state("hourly")).unwrap().paused,
        "still paused without --yes"
    );
    let o = cli(&dir, &["resume", "hourly", "--yes"]);
    assert!(o.status.success(), "{}", out(&o));
    d.run_until(t("2027-06-01T03:20:00Z")).unwrap();
    let after = runs(&store, "hourly");
    assert!(after.iter().any(|r| r.state == RunState::Succeeded), "{after:?}");
    // Issue 19: a repeat is not an error (exit 0, "already …"), as for every verb.
    let o = cli(&dir, &["resume", "hourly", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "not paused any more");
    assert!(out(&o).contains("hourly is already resumed"), "{}", out(&o));
}

#[test]
fn approve_and_reject_refuse_runs_that_are_not_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let agent = sim_agent(vec![SimAttempt {
        end: SimEnd::Exit(77),
        latency: TimeDelta::seconds(10),
        ..Default::default()
    }]);
    let mut d = driver(&dir, cfg, "2027-06-01T01:59:00Z", vec![("hourly", agent)], vec![]);
    d.run_until(t("2027-06-01T02:05:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = runs(&store, "hourly").pop().unwrap();
    assert_eq!(r.state, RunState::NeedsHuman);
    let id = r.id.to_string();
    let o = cli(&dir, &["approve", &id]);
    assert_eq!(o.status.code(), Some(2), "a reason is mandatory (usage)");
    let o = cli(
        &dir,
        &[
            "approve",
            &id,
            "--reason",
            "checked with finance",
            "--by",
            "alice",
        ],
    );
    assert!(o.status.success(), "{}", out(&o));
    let approvals = store.read(|tx| tx.approvals(r.id)).unwrap();
    assert_eq!(
        (approvals[0].actor.as_str(), approvals[0].reason.as_str()),
        ("alice", "checked with finance")
    );
    // Issue 19: approving again is a repeat (exit 0, the first reason kept);
    // rejecting the approved run is refused.
    let o = cli(&dir, &["approve", &id, "--reason", "again"]);
    assert_eq!(o.status.code(), Some(0), "already approved: {}", out(&o));
    assert!(out(&o).contains("already approved by alice"), "{}", out(&o));
    let o = cli(&dir, &["reject", &id, "--reason", "again"]);
    assert_eq!(o.status.code(), Some(1), "no longer waiting: {}", out(&o));
    assert!(out(&o).contains("not waiting for approval"));
    let o = cli(&dir, &["reject", "999999", "--reason", "x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(out(&o).contains("not found"));
}

#[test]
fn kill_from_the_cli_is_honoured_by_the_scheduler_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg,
        "2027-06-01T01:59:00Z",
        vec![("hourly", sim_agent(vec![]))],
        vec![],
    );
    d.run_until(t("2027-06-01T01:59:30Z")).unwrap();
    let o = cli(&dir, &["kill", "--reason", "incident 7"]);
    assert!(o.status.success(), "{}", out(&o));
    d.run_until(t("2027-06-01T02:10:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = runs(&store, "hourly").pop().unwrap();
    assert_eq!(r.state, RunState::Pending);
    assert!(r.state_reason.unwrap().contains("incident 7"));
    let o = cli(&dir, &["unkill", "--reason", "resolved"]);
    assert!(o.status.success());
    d.run_until(t("2027-06-01T02:20:00Z")).unwrap();
    assert_eq!(runs(&store, "hourly").pop().unwrap().state, RunState::Succeeded);
    let changes = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["switch_changed".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].detail["reason"], "incident 7");
}

#[test]
fn dead_letter_queue_lists_and_requeues() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "{BASE}{HOURLY}retry = {{ max_attempts = 2, backoff = \"fixed\", initial = \"1m\", max = \"1m\", jitter = 0.0 }}\n"
    );
    let cfg = config(&dir, &toml);
    let agent = sim_agent(vec![
        SimAttempt {
            end: SimEnd::Exit(75),
            latency: TimeDelta::seconds(10),
            ..Default::default()
        },
        SimAttempt {
            end: SimEnd::Exit(75),
            latency: TimeDelta::seconds(10),
            ..Default::default()
        },
        SimAttempt {
            latency: TimeDelta::seconds(10),
            ..Default::default()
        },
    ]);
    let mut d = driver(&dir, cfg, "2027-06-01T01:59:00Z", vec![("hourly", agent)], vec![]);
    d.run_until(t("2027-06-01T02:10:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = runs(&store, "hourly").pop().unwrap();
    assert_eq!(r.state, RunState::Dead);
    let o = cli(&dir, &["dlq", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(list[0]["id"], r.id);
    let o = cli(
        &dir,
        &["dlq", "requeue", &r.id.to_string(), "--reason", "upstream fixed"],
    );
    assert!(o.status.success(), "{}", out(&o));
    d.run_until(t("2027-06-01T02:20:00Z")).unwrap();
    let r = store.read(|tx| tx.run(r.id)).unwrap();
    assert_eq!((r.state, r.attempts), (RunState::Succeeded, 3));
    let requeued = events(&store, r.id)
        .into_iter()
        .find(|e| e.kind == "requeued")
        .unwrap();
    assert_eq!(requeued.detail["reason"], "upstream fixed");
    let o = cli(&dir, &["dlq", "requeue", &r.id.to_string(), "--reason", "again"]);
    assert_eq!(o.status.code(), Some(1), "a succeeded run cannot be requeued");
}

#[test]
fn backfilled_windows_run_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2027-06-01T02:00:00Z",
        vec![("hourly", sim_agent(vec![]))],
        vec![],
    );
    d.run_until(t("2027-06-01T02:10:00Z")).unwrap();
    let store = d.store().unwrap();
    let plan = agentcron::operator::backfill(
        &store,
        &cfg,
        "hourly",
        t("2027-05-31T20:00:00Z"),
        t("2027-06-01T02:00:00Z"),
        false,
        "alice",
        d.now(),
    )
    .unwrap();
    assert_eq!(plan.iter().filter(|w| w.action == "queue").count(), 6);
    assert_eq!(
        plan.last().unwrap().action,
        "succeeded",
        "the window that ran is left alone"
    );
    d.run_until(t("2027-06-01T02:30:00Z")).unwrap();
    let mut claimed: Vec<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> =
        runs(&store, "hourly")
            .iter()
            .filter(|r| r.reason == RunReason::Manual)
            .map(|r| {
                assert_eq!(r.state, RunState::Succeeded, "{}", r.window_key);
                (
                    events(&store, r.id)
                        .into_iter()
                        .find(|e| e.kind == "claimed")
                        .unwrap()
                        .at,
                    r.window_start,
                )
            })
            .collect();
    claimed.sort();
    assert!(
        claimed.windows(2).all(|w| w[0].1 < w[1].1),
        "oldest first: {claimed:?}"
    );
}
