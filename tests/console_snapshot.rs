//! The snapshot loader against a real store filled through the store API:
//! every pane's data, the latest decision of the selected run, the bounded
//! lanes, the reuse of the slow tier, the run detail, and the screen it makes.

/// The engine tests' helpers: a config from TOML, a virtual-clock driver.
#[path = "support/mod.rs"]
mod engine;
#[path = "console_support.rs"]
mod support;

use agentcron::config::model::ErrorClass;
use agentcron::console::app::{Msg, update};
use agentcron::console::snapshot::*;
use agentcron::console::theme::Theme;
use agentcron::store::*;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use support::*;

fn new_run(tenant: &str, schedule: &str, key: &str, start: DateTime<Utc>) -> NewRun {
    NewRun {
        tenant: tenant.into(),
        schedule: schedule.into(),
        window_key: key.into(),
        window_start: start,
        window_end: start + Duration::hours(1),
        due_at: start,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        next_check_at: Some(start),
    }
}

fn insert(tx: &Tx, tenant: &str, schedule: &str, key: &str, start: DateTime<Utc>) -> Run {
    tx.insert_run(&new_run(tenant, schedule, key, start), start)
        .expect("insert")
        .expect("new window")
}

fn claim(tx: &Tx, run: &Run, at: DateTime<Utc>) -> Claim {
    tx.claim(
        run.id,
        run.state,
        "worker-1",
        at + Duration::minutes(1),
        RunReason::Scheduled,
        run.due_at,
        at,
    )
    .expect("claim")
    .expect("won")
}

/// Ids of the interesting runs.
struct Ids {
    waiting: i64,
    retry: i64,
    human: i64,
    running: i64,
    backfill_old: i64,
    backfill_new: i64,
}

fn fill(store: &Store) -> Ids {
    let now = now();
    store
        .write(|tx| {
            // Three finished daily reports with cost, then today's, waiting on a gate.
            for d in [5, 4, 3] {
                let start = t("2026-06-08T01:00:00Z") - Duration::days(d);
                let r = insert(tx, "acme", "daily-sales-report", &start.format("%Y-%m-%d").to_string(), start);
                let c = claim(tx, &r, start);
                tx.add_usage(r.id, c.fencing_token, 1000, 0.5)?;
                tx.end_attempt(r.id, c.fencing_token, &AttemptEnd::default(), start + Duration::minutes(3))?;
                tx.transition(
                    r.id,
                    RunState::Running,
                    RunState::Succeeded,
                    &Change::default(),
                    start + Duration::minutes(3),
                    &[NewEvent::new(start + Duration::minutes(3), "succeeded", json!({"attempt": 1}))],
                )?;
            }
            let today = t("2026-06-08T01:00:00Z");
            let waiting = insert(tx, "acme", "daily-sales-report", "2026-06-08", today);
            // A cost today: the budget row counts it.
            let at = today + Duration::minutes(1);
            for (kind, detail) in [
                ("window_opened", json!({"window_key": "2026-06-08"})),
                ("gate", json!({"name": "previous_run_finished", "kind": "previous_run_finished", "result": "pass", "reason": "previous window succeeded", "ms": 1, "on_fail": "fail"})),
                ("gate", json!({"name": "upstream_ready", "kind": "command", "result": "wait", "reason": "exit 75", "ms": 30, "on_fail": "fail"})),
                ("switch_held", json!({"switch": "maintenance", "reason": "ad-hoc window", "verdict": "wait"})),
                ("decision", json!({"time": "window 09:00–10:00 open", "verdict": "wait", "reason": "gate upstream_ready waits: exit 75",
                    "switches": [{"name": "kill", "held": false, "reason": "off"}],
                    "gates": [{"name": "previous_run_finished", "kind": "previous_run_finished", "verdict": "pass", "reason": "previous window succeeded", "elapsed_ms": 1, "on_fail": "fail"},
                              {"name": "upstream_ready", "kind": "command", "verdict": "wait", "reason": "exit 75", "elapsed_ms": 30, "on_fail": "fail"}]})),
            ] {
                tx.append_event(&NewEvent::new(at, kind, detail).for_run(&waiting))?;
            }

            // hourly-sync: a retry, a run that needs a human, one running.
            let h = |n: i64| t("2026-06-08T01:00:00Z") - Duration::hours(n);
            let r = insert(tx, "acme", "hourly-sync", "h-3", h(3));
            let c = claim(tx, &r, h(3));
            tx.end_attempt(
                r.id,
                c.fencing_token,
                &AttemptEnd {
                    error_class: Some(ErrorClass::Retryable),
                    exit_code: Some(75),
                    message: Some("upstream 503".into()),
                    ..AttemptEnd::default()
                },
                h(3) + Duration::minutes(2),
            )?;
            let retry = tx.transition(
                r.id,
                RunState::Running,
                RunState::RetryWait,
                &Change {
                    not_before: Some(now + Duration::minutes(4)),
                    next_check_at: Some(now + Duration::minutes(4)),
                    error_class: Some(ErrorClass::Retryable),
                    last_error: Some("upstream 503".into()),
                    ..Change::default()
                },
                h(3) + Duration::minutes(2),
                &[NewEvent::new(h(3), "retry_scheduled", json!({"not_before": "2026-06-08T01:34:00Z"}))],
            )?;
            let r = insert(tx, "acme", "hourly-sync", "h-2", h(2));
            let c = claim(tx, &r, h(2));
            tx.set_attempt_envelope(r.id, 1, r#"{"run_id":1,"attempt":1}"#)?;
            tx.append_attempt_log(r.id, c.fencing_token, "fetching\ndelivering\n", 4096)?;
            for (name, status, side) in [
                ("fetch", StepStatus::Started, false),
                ("fetch", StepStatus::Done, false),
                ("deliver", StepStatus::Started, true),
            ] {
                tx.record_step(r.id, c.fencing_token, 1, name, status, side, h(2) + Duration::minutes(1))?;
            }
            tx.end_attempt(
                r.id,
                c.fencing_token,
                &AttemptEnd {
                    status: Some(AttemptStatus::Lost),
                    ..AttemptEnd::default()
                },
                h(2) + Duration::minutes(5),
            )?;
            let human = tx.transition(
                r.id,
                RunState::Running,
                RunState::NeedsHuman,
                &Change {
                    error_class: Some(ErrorClass::NeedsHuman),
                    last_error: Some("deliver outcome unknown".into()),
                    ..Change::default()
                },
                h(2) + Duration::minutes(5),
                &[NewEvent::new(h(2) + Duration::minutes(5), "parked_for_human", json!({"reason": "uncertain side-effect step deliver"}))],
            )?;
            let r = insert(tx, "acme", "hourly-sync", "h-0", h(0));
            let running = claim(tx, &r, now - Duration::minutes(1)).run;

            // inbox-triage: two catch-up windows in the backfill pool.
            let mut ids = vec![];
            for start in [t("2026-06-07T15:45:00Z"), t("2026-06-06T02:00:00Z")] {
                let mut n = new_run("default", "inbox-triage", &start.to_rfc3339(), start);
                n.pool = Pool::Backfill;
                n.reason = RunReason::Catchup;
                ids.push(tx.insert_run(&n, now)?.expect("new").id);
            }

            tx.set_switch("kill", true, "alice", "incident 4711", now - Duration::minutes(12))?;
            let mut paused = ScheduleState::new("inbox-triage");
            paused.paused = true;
            paused.paused_reason = Some("mailbox migration".into());
            tx.put_schedule_state(&paused)?;
            let mut open = ScheduleState::new("hourly-sync");
            open.circuit = CircuitState::Open;
            open.consecutive_failures = 3;
            open.circuit_changed_at = Some(now - Duration::hours(1));
            tx.put_schedule_state(&open)?;
            tx.add_maintenance(now + Duration::hours(1), now + Duration::hours(2), "db upgrade", "bob", &[], now)?;
            Ok(Ids {
                waiting: waiting.id,
                retry: retry.id,
                human: human.id,
                running: running.id,
                backfill_old: ids[1],
                backfill_new: ids[0],
            })
        })
        .expect("fill the store")
}

fn temp_store() -> (tempfile::TempDir, std::path::PathBuf, Ids) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agentcron.db");
    let store = Store::open(&path).expect("open");
    let ids = fill(&store);
    (dir, path, ids)
}

#[test]
fn every_pane_is_loaded_from_the_store() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open_read_only(&path).expect("read-only");
    let cfg = config();
    let req = SnapshotRequest {
        focus: Some(ids.waiting),
        reuse_slow: None,
        view: None,
    };
    let (snap, slow) = load_snapshot_with(&store, &cfg, now(), &req).expect("snapshot");

    assert!(snap.kill_on());
    assert_eq!(
        snap.switches.kill.as_ref().map(|k| k.actor.as_str()),
        Some("alice")
    );
    let count = |s: RunState| snap.counts.iter().find(|(x, _)| *x == s).map(|(_, n)| *n);
    assert_eq!(count(RunState::Succeeded), Some(3));
    assert_eq!(count(RunState::Pending), Some(3));
    assert_eq!(count(RunState::NeedsHuman), Some(1));
    let _ = &slow;

    // Schedules in config order, next fires in their zones.
    let ids_of: Vec<&str> = snap.schedules.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids_of,
        [
            "daily-sales-report",
            "hourly-sync",
            "ticket-followup",
            "inbox-triage"
        ]
    );
    let daily = snap.schedule("daily-sales-report").expect("daily");
    assert_eq!(
        daily.next_fire.as_ref().map(|f| f.at),
        Some(t("2026-06-09T01:00:00Z"))
    );
    assert_eq!(
        daily.last.as_ref().map(|l| (l.id, l.state)),
        Some((ids.waiting, RunState::Pending))
    );
    assert!(
        snap.schedule("ticket-followup")
            .expect("followup")
            .next_fire
            .is_none()
    );
    let hourly = snap.schedule("hourly-sync").expect("hourly");
    assert_eq!(hourly.circuit, CircuitState::Open);
    assert!(snap.schedule("inbox-triage").expect("triage").paused);

    // Lanes oldest first.
    let lane = snap.lane("daily-sales-report").expect("lane");
    assert_eq!(lane.runs.len(), 4);
    assert_eq!(lane.runs.last().map(|r| r.id), Some(ids.waiting));

    assert_eq!(snap.retries.len(), 1);
    assert_eq!(snap.retries[0].run.id, ids.retry);
    assert_eq!(snap.retries[0].max_attempts, 5);
    assert_eq!(snap.approvals.len(), 1);
    assert_eq!(snap.approvals[0].run.id, ids.human);
    assert_eq!(snap.approvals[0].steps.len(), 3);
    let backfill: Vec<i64> = snap.backfill.iter().map(|b| b.run.id).collect();
    assert_eq!(
        backfill,
        [ids.backfill_old, ids.backfill_new],
        "oldest window first"
    );
    assert_eq!(
        snap.backfill[0].expires_at,
        Some(t("2026-06-06T02:00:00Z") + Duration::hours(72)),
        "window start + catchup_window"
    );

    // Switches: paused, open circuit, configured and ad-hoc maintenance, quotas.
    assert_eq!(snap.switches.paused.len(), 1);
    assert_eq!(snap.switches.circuits.len(), 1);
    let maint: Vec<&str> = snap
        .switches
        .maintenance
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert!(
        maint.contains(&"nightly-db") && maint.iter().any(|n| n.starts_with('#')),
        "{maint:?}"
    );
    let quota = |scope: &str| snap.switches.quotas.iter().find(|q| q.scope == scope).cloned();
    assert_eq!(quota("pool on_time").map(|q| q.used), Some("1".into()));
    assert_eq!(quota("tenant acme").map(|q| q.used), Some("1".into()));
    assert!(quota("budget daily-sales-report").is_some());
    assert!(snap.find_run(ids.running).is_some());

    // The selected run's trace and its latest decision.
    let focus = snap.focus.as_ref().expect("focus");
    assert_eq!(focus.run.id, ids.waiting);
    assert_eq!(focus.events.len(), 5);
    let d = focus.decision.as_ref().expect("decision");
    assert_eq!(d.verdict.as_deref(), Some("wait"));
    let gates: Vec<(&str, &str, Option<u64>)> = d
        .gates
        .iter()
        .map(|g| (g.name.as_str(), g.result.as_str(), g.ms))
        .collect();
    assert_eq!(
        gates,
        [
            ("previous_run_finished", "pass", Some(1)),
            ("upstream_ready", "wait", Some(30))
        ]
    );
    let held: Vec<&str> = d
        .switches
        .iter()
        .filter(|s| s.held)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(held, ["maintenance"]);
}

#[test]
fn the_slow_tier_is_reused_and_corrected_by_fresh_lanes() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open(&path).expect("open");
    let cfg = config();
    let (_, slow) = load_snapshot_with(&store, &cfg, now(), &SnapshotRequest::default()).expect("first");
    // The human approves: the run leaves needs_human.
    store
        .write(|tx| {
            tx.transition(
                ids.human,
                RunState::NeedsHuman,
                RunState::RetryWait,
                &Change {
                    operator: Some("carol".into()),
                    next_check_at: Some(now()),
                    ..Change::default()
                },
                now(),
                &[],
            )
        })
        .expect("approve");
    let req = SnapshotRequest {
        focus: None,
        reuse_slow: Some(slow.clone()),
        view: None,
    };
    let (snap, _) = load_snapshot_with(&store, &cfg, now(), &req).expect("second");
    // Counts are read on every load (the store keeps them): never stale.
    let count = |s: RunState| snap.counts.iter().find(|(x, _)| *x == s).map(|(_, n)| *n);
    assert_eq!(count(RunState::NeedsHuman), Some(0), "{:?}", snap.counts);
    assert_eq!(
        count(RunState::RetryWait),
        Some(2),
        "one before, plus the approved run: {:?}",
        snap.counts
    );
    assert!(
        snap.approvals.is_empty(),
        "the lane shows the run left needs_human"
    );
    assert!(snap.retries.iter().any(|r| r.run.id == ids.human));
}

#[test]
fn approvals_follow_the_trace_for_schedules_out_of_view() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open(&path).expect("open");
    let cfg = config();
    let (_, slow) = load_snapshot_with(&store, &cfg, now(), &SnapshotRequest::default()).expect("first");
    // After the slow tier was read: one run is approved, another parked for a human.
    agentcron::operator::approve(&store, ids.human, "carol", "checked", None, now()).expect("approve");
    store
        .write(|tx| {
            tx.transition(
                ids.running,
                RunState::Running,
                RunState::NeedsHuman,
                &Change::default(),
                now(),
                &[
                    NewEvent::new(now(), "parked_for_human", json!({"reason": "refund"}))
                        .with_run_id(ids.running),
                ],
            )
        })
        .expect("park");
    // hourly-sync is out of view: no lane tells; the trace does.
    let req = SnapshotRequest {
        reuse_slow: Some(slow),
        view: Some(vec!["daily-sales-report".into()]),
        ..SnapshotRequest::default()
    };
    let (snap, _) = load_snapshot_with(&store, &cfg, now(), &req).expect("second");
    assert!(!snap.lane("hourly-sync").is_some_and(|l| l.loaded));
    let waiting: Vec<i64> = snap.approvals.iter().map(|a| a.run.id).collect();
    assert_eq!(waiting, vec![ids.running]);
}

#[test]
fn lanes_are_bounded() {
    let store = Store::open_in_memory().expect("memory");
    store
        .write(|tx| {
            for i in 0..(LANE_WINDOWS as i64 + 40) {
                let start = t("2026-01-01T00:00:00Z") + Duration::hours(i);
                insert(tx, "acme", "hourly-sync", &format!("k{i:04}"), start);
            }
            Ok(())
        })
        .expect("fill");
    let snap = load_snapshot(&store, &config(), now()).expect("snapshot");
    let lane = snap.lane("hourly-sync").expect("lane");
    assert_eq!(lane.runs.len(), LANE_WINDOWS);
    assert_eq!(lane.runs.last().map(|r| r.window_key.as_str()), Some("k0103"));
    assert!(
        lane.runs
            .windows(2)
            .all(|w| w[0].window_start < w[1].window_start)
    );
}

#[test]
fn only_the_schedules_in_view_read_their_runs() {
    let (_dir, path, _ids) = temp_store();
    let store = Store::open_read_only(&path).expect("open");
    let req = SnapshotRequest {
        view: Some(vec!["hourly-sync".into()]),
        ..SnapshotRequest::default()
    };
    let (snap, _) = load_snapshot_with(&store, &config(), now(), &req).expect("snapshot");
    // Every schedule is listed, with its switches; runs and next fires only in view.
    assert_eq!(snap.schedules.len(), 4);
    assert_eq!(snap.lanes.len(), 4);
    let daily = snap.schedule("daily-sales-report").expect("daily");
    assert!(!daily.loaded && daily.last.is_none() && daily.next_fire.is_none());
    let lane = snap.lane("daily-sales-report").expect("lane");
    assert!(!lane.loaded && lane.runs.is_empty());
    let hourly = snap.schedule("hourly-sync").expect("hourly");
    assert!(hourly.loaded && hourly.next_fire.is_some());
    assert!(snap.lane("hourly-sync").is_some_and(|l| l.loaded));
    // The queues do not depend on the view.
    let all = load_snapshot(&store, &config(), now()).expect("all");
    assert_eq!(snap.retries.len(), all.retries.len());
    assert_eq!(snap.approvals.len(), all.approvals.len());
    assert!(
        all.schedules.iter().all(|s| s.loaded),
        "the first ones by default"
    );
}

#[test]
fn run_detail_holds_attempts_steps_events_log_and_envelope() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open_read_only(&path).expect("open");
    let d = load_run_detail(&store, ids.human).expect("detail");
    assert_eq!(d.run.state, RunState::NeedsHuman);
    assert_eq!(d.attempts.len(), 1);
    assert_eq!(d.attempts[0].status, AttemptStatus::Lost);
    assert!(d.attempts[0].log.contains("delivering"));
    assert!(d.attempts[0].envelope.is_some());
    assert_eq!(d.steps.len(), 3);
    assert!(d.events.iter().any(|e| e.kind == "parked_for_human"));
    assert!(matches!(
        load_run_detail(&store, 999_999),
        Err(StoreError::RunNotFound(999_999))
    ));
}

#[test]
fn the_screen_of_a_real_store() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open_read_only(&path).expect("open");
    let cfg = config();
    let mut m = model_sized(100, 30, false);
    // The console asks for the selected run's trace after the first snapshot.
    let first = load_snapshot(&store, &cfg, now()).expect("snapshot");
    let cmds = update(&mut m, Msg::Snapshot(Box::new(first)));
    let focus = cmds
        .iter()
        .find_map(|c| match c {
            agentcron::console::app::Cmd::Focus(f) => Some(*f),
            _ => None,
        })
        .flatten();
    assert_eq!(focus, Some(ids.waiting));
    let req = SnapshotRequest {
        focus,
        reuse_slow: None,
        view: None,
    };
    let (snap, _) = load_snapshot_with(&store, &cfg, now(), &req).expect("focused");
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let theme = Theme::builtin("dark").expect("dark");
    insta::assert_snapshot!("store_schedules_100x30", render(&m, &theme, 100, 30));
    update(&mut m, ch('3'));
    insta::assert_snapshot!("store_gates_100x30", render(&m, &theme, 100, 30));
}

/// Enter on a run asks for its detail; loaded on the poller side, it carries
/// the story `agentcron explain` tells, and its Explain tab shows it.
#[test]
fn the_run_detail_explains_the_run() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open_read_only(&path).expect("open");
    let cfg = config();
    let mut m = model_sized(100, 30, false);
    let req = SnapshotRequest {
        focus: Some(ids.waiting),
        reuse_slow: None,
        view: None,
    };
    let (snap, _) = load_snapshot_with(&store, &cfg, now(), &req).expect("focused");
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let cmds = update(&mut m, key(crossterm::event::KeyCode::Enter));
    let run = cmds
        .iter()
        .find_map(|c| match c {
            agentcron::console::app::Cmd::LoadRunDetail(id) => Some(*id),
            _ => None,
        })
        .expect("Enter asks for the run's detail");
    assert_eq!(run, ids.waiting);
    let d = load_run_detail_with(&store, Some(&cfg), now(), run).expect("detail");
    let told = store
        .read(|tx| agentcron::trace::explain(tx, Some(&cfg), "daily-sales-report", Some("2026-06-08"), now()))
        .expect("explain");
    assert_eq!(d.explanation.as_ref(), Some(&told), "the CLI's story");
    update(&mut m, Msg::RunDetail(Box::new(d)));
    for _ in 0..5 {
        update(&mut m, key(crossterm::event::KeyCode::Tab));
    }
    let theme = Theme::builtin("dark").expect("dark");
    let screen = render(&m, &theme, 100, 30);
    for line in told.lines() {
        assert!(screen.contains(&line), "{line:?} in\n{screen}");
    }
}

/// The Explain tab of a run the real engine waited on, retried and finished.
#[test]
fn the_explain_tab_of_a_run_the_engine_ran() {
    use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
    use agentcron::rehearsal::sim_gate::SimGateRule;
    let dir = tempfile::tempdir().expect("tempdir");
    let toml = format!(
        r#"{}
[[schedule]]
id = "daily-report"
agent = "sim"
cron = "0 9 * * *"
check_every = "5m"
close_after = "1h"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "2m", jitter = 0.0 }}

[[schedule.gate]]
kind = "command"
name = "upstream_ready"
command = ["true"]

[[schedule.gate]]
kind = "command"
name = "token_valid"
command = ["true"]
"#,
        engine::BASE
    );
    let cfg = engine::config(&dir, &toml);
    let agent = engine::sim_agent(vec![
        SimAttempt {
            end: SimEnd::Exit(75),
            ..Default::default()
        },
        SimAttempt::default(),
    ]);
    let mut d = engine::driver(
        &dir,
        cfg.clone(),
        "2026-06-06T00:30:00Z",
        vec![("daily-report", agent)],
        vec![
            (
                "daily-report",
                "upstream_ready",
                SimGateRule::PassFrom(t("2026-06-06T01:12:00Z")),
            ),
            ("daily-report", "token_valid", SimGateRule::Pass),
        ],
    );
    let at = t("2026-06-06T02:00:00Z");
    d.run_until(at).unwrap();
    let store = d.store().unwrap();
    let run = engine::run_by_key(&store, "daily-report", "2026-06-06");
    let mut m = model_sized(100, 30, false);
    let req = SnapshotRequest {
        focus: Some(run.id),
        reuse_slow: None,
        view: None,
    };
    let (snap, _) = load_snapshot_with(&store, &cfg, at, &req).expect("snapshot");
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    update(&mut m, key(crossterm::event::KeyCode::Enter));
    let detail = load_run_detail_with(&store, Some(&cfg), at, run.id).expect("detail");
    update(&mut m, Msg::RunDetail(Box::new(detail)));
    for _ in 0..5 {
        update(&mut m, key(crossterm::event::KeyCode::Tab));
    }
    let theme = Theme::builtin("dark").expect("dark");
    insta::assert_snapshot!("store_detail_explain_100x30", render(&m, &theme, 100, 30));
}

/// Issue 52 (item 6): one zone per screen. The run detail's explanation is
/// told in the console's zone (its config's `[scheduler] timezone`), not in
/// the zone the schedule fires in.
#[test]
fn the_run_detail_explains_in_the_console_zone() {
    let (_dir, path, ids) = temp_store();
    let store = Store::open_read_only(&path).expect("open");
    let mut cfg = config();
    assert!(
        cfg.schedules
            .iter()
            .all(|s| s.timezone == chrono_tz::Asia::Shanghai)
    );
    cfg.scheduler.timezone = chrono_tz::Europe::Berlin;
    let d = load_run_detail_with(&store, Some(&cfg), now(), ids.waiting).expect("detail");
    let told = d.explanation.expect("explained").lines().join("\n");
    assert!(told.contains("Europe/Berlin"), "{told}");
    assert!(!told.contains("Asia/Shanghai"), "{told}");
}
