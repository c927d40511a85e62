//! Overlap policies, the kill switch, quotas and budgets (DESIGN.md "Overlap",
//! "Layer 3 — switches", "Budgets"), on a virtual clock with simulated agents.

mod support;

use agentcron::operator;
use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::types::*;
use chrono::TimeDelta;
use support::*;

/// A schedule every 5 minutes whose agent takes 12 minutes: window 2 (and 3)
/// come due while window 1 still runs.
fn overlap_config(policy: &str) -> String {
    format!(
        r#"{BASE}
[[schedule]]
id = "slow"
agent = "sim"
every = "5m"
close_after = "5m"
check_every = "1m"
overlap = "{policy}"
max_concurrency = 2
catchup = "none"
"#
    )
}

fn slow_agent() -> agentcron::rehearsal::sim::SimAgent {
    sim_agent(vec![SimAttempt {
        latency: TimeDelta::minutes(12),
        ..Default::default()
    }])
}

/// Runs 2026-06-01 00:05–00:40Z; windows at 00:05, 00:10, 00:15, …
fn run_overlap(policy: &str) -> agentcron::store::Store {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &overlap_config(policy));
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:05:00Z",
        vec![("slow", slow_agent())],
        vec![],
    );
    d.run_until(t("2026-06-01T00:40:00Z")).unwrap();
    let s = d.store().unwrap();
    std::mem::forget(dir); // keep the files for the returned store
    s
}

fn state_of(store: &agentcron::store::Store, key: &str) -> (RunState, Option<String>, u32) {
    let r = run_by_key(store, "slow", key);
    (r.state, r.state_reason, r.attempts)
}

const W1: &str = "2026-06-01T08:05+08:00";
const W2: &str = "2026-06-01T08:10+08:00";
const W3: &str = "2026-06-01T08:15+08:00";

#[test]
fn overlap_skip_skips_the_second_window() {
    let s = run_overlap("skip");
    assert_eq!(state_of(&s, W1).0, RunState::Succeeded);
    let (st, why, attempts) = state_of(&s, W2);
    assert_eq!((st, attempts), (RunState::Skipped, 0));
    assert!(why.unwrap().contains("still running (overlap = skip)"));
}

#[test]
fn overlap_buffer_one_runs_the_second_after_the_first_and_skips_the_third() {
    let s = run_overlap("buffer_one");
    let w1 = run_by_key(&s, "slow", W1);
    let w2 = run_by_key(&s, "slow", W2);
    assert_eq!(w2.state, RunState::Succeeded);
    let ended_1 = events(&s, w1.id)
        .into_iter()
        .find(|e| e.kind == "succeeded")
        .unwrap()
        .at;
    let claimed_2 = events(&s, w2.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .unwrap()
        .at;
    assert_eq!(
        claimed_2, ended_1,
        "the buffered window starts as soon as the first finishes"
    );
    let (st, why, _) = state_of(&s, W3);
    assert_eq!(st, RunState::Skipped);
    assert!(why.unwrap().contains("already buffered"));
}

#[test]
fn overlap_buffer_all_runs_every_window_in_order() {
    let s = run_overlap("buffer_all");
    let claims: Vec<_> = [W1, W2, W3]
        .iter()
        .map(|k| {
            let r = run_by_key(&s, "slow", k);
            assert_ne!(r.state, RunState::Skipped, "{k}");
            events(&s, r.id)
                .into_iter()
                .find(|e| e.kind == "claimed")
                .map(|e| e.at)
                .unwrap()
        })
        .collect();
    assert!(claims[0] < claims[1] && claims[1] < claims[2]);
    assert_eq!(
        claims[1] - claims[0],
        TimeDelta::minutes(12),
        "one after the other"
    );
}

#[test]
fn overlap_cancel_previous_cancels_the_running_window() {
    let s = run_overlap("cancel_previous");
    let (st, why, _) = state_of(&s, W1);
    assert_eq!(st, RunState::Failed);
    assert!(
        why.unwrap().contains("superseded by window"),
        "cancelled with a reason"
    );
    let w1 = run_by_key(&s, "slow", W1);
    assert_eq!(
        s.read(|tx| tx.attempts(w1.id)).unwrap()[0].status,
        AttemptStatus::Cancelled
    );
    let w2 = run_by_key(&s, "slow", W2);
    assert!(events(&s, w2.id).iter().any(|e| e.kind == "claimed"));
    // A superseded run is not a failure of the schedule: the circuit stays closed.
    assert_eq!(
        s.read(|tx| tx.schedule_state("slow"))
            .unwrap()
            .consecutive_failures,
        0
    );
}

#[test]
fn overlap_allow_runs_concurrently_up_to_max_concurrency() {
    let s = run_overlap("allow");
    let w1 = run_by_key(&s, "slow", W1);
    let w2 = run_by_key(&s, "slow", W2);
    let c1 = events(&s, w1.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .unwrap()
        .at;
    let c2 = events(&s, w2.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .unwrap()
        .at;
    assert_eq!(
        (c1, c2),
        (t("2026-06-01T00:05:00Z"), t("2026-06-01T00:10:00Z")),
        "both on time, concurrently"
    );
    // Window 3 comes while two run (max_concurrency = 2): held by quota, then missed.
    let w3 = run_by_key(&s, "slow", W3);
    let held = events(&s, w3.id);
    assert!(
        held.iter()
            .any(|e| e.kind == "switch_held" && e.detail["switch"] == "quota"),
        "{held:?}"
    );
}

fn simple_config(extra: &str) -> String {
    format!(
        r#"{BASE}
[[schedule]]
id = "job"
agent = "sim"
cron = "*/10 * * * *"
close_after = "10m"
check_every = "1m"
catchup = "none"
{extra}
"#
    )
}

#[test]
fn kill_switch_holds_runs_with_a_reason_and_unkill_lets_them_go() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &simple_config(""));
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:00:30Z",
        vec![(
            "job",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::seconds(20),
                ..Default::default()
            }]),
        )],
        vec![],
    );
    let store = d.store().unwrap();
    operator::kill(&store, "alice", "incident 42", false, t("2026-06-01T00:00:40Z")).unwrap();
    d.run_until(t("2026-06-01T00:13:00Z")).unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(r.state, RunState::Pending);
    assert!(
        r.state_reason
            .as_deref()
            .unwrap()
            .contains("global kill switch on (by alice: incident 42)")
    );
    let held = events(&store, r.id);
    assert!(
        held.iter()
            .any(|e| e.kind == "switch_held" && e.detail["switch"] == "kill")
    );
    operator::unkill(&store, "alice", "resolved", t("2026-06-01T00:13:00Z")).unwrap();
    d.run_until(t("2026-06-01T00:15:00Z")).unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(r.state, RunState::Succeeded);
    let claimed = events(&store, r.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .unwrap();
    assert!(
        claimed.at <= t("2026-06-01T00:14:00Z"),
        "claimed at the next check after unkill"
    );
    let changes = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["switch_changed".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[0].detail["actor"], "alice");
}

#[test]
fn kill_with_cancel_running_stops_the_attempt_and_it_retries_after_unkill() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &simple_config(""));
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:10:00Z",
        vec![(
            "job",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::minutes(5),
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-01T00:11:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(r.state, RunState::Running);
    operator::kill(&store, "bob", "runaway costs", true, t("2026-06-01T00:11:00Z")).unwrap();
    d.run_until(t("2026-06-01T00:12:00Z")).unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(r.state, RunState::RetryWait, "{:?}", r.state_reason);
    assert_eq!(
        store.read(|tx| tx.attempts(r.id)).unwrap()[0].status,
        AttemptStatus::Cancelled
    );
    operator::unkill(&store, "bob", "ok", t("2026-06-01T00:12:00Z")).unwrap();
    d.run_until(t("2026-06-01T00:20:00Z")).unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!((r.state, r.attempts), (RunState::Succeeded, 2));
}

#[test]
fn tenant_quota_holds_the_third_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = format!("{BASE}\n[tenants.acme]\nmax_concurrent = 2\n");
    for i in 0..3 {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"q{i}\"\ntenant = \"acme\"\nagent = \"sim\"\ncron = \"0 * * * *\"\nclose_after = \"1h\"\ncheck_every = \"1m\"\n"
        ));
    }
    let cfg = config(&dir, &toml);
    let slow = || {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::minutes(10),
            ..Default::default()
        }])
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T01:00:00Z",
        vec![("q0", slow()), ("q1", slow()), ("q2", slow())],
        vec![],
    );
    d.run_until(t("2026-06-01T01:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let key = "2026-06-01T09:00+08:00";
    let third = run_by_key(&store, "q2", key);
    let held = events(&store, third.id);
    let quota = held.iter().find(|e| e.kind == "switch_held").expect("held");
    assert_eq!(quota.detail["switch"], "quota");
    assert!(
        quota.detail["reason"]
            .as_str()
            .unwrap()
            .contains("tenant acme at 2/2")
    );
    let claimed = held.iter().find(|e| e.kind == "claimed").unwrap();
    assert_eq!(claimed.at, t("2026-06-01T01:10:00Z"), "claimed when a slot freed");
    assert_eq!(third.state, RunState::Succeeded);
}

#[test]
fn pool_quota_holds_runs_beyond_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = BASE.replace("workers = 4", "workers = 1");
    for i in 0..2 {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"p{i}\"\nagent = \"sim\"\ncron = \"0 * * * *\"\nclose_after = \"1h\"\ncheck_every = \"1m\"\n"
        ));
    }
    let cfg = config(&dir, &toml);
    let slow = || {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::minutes(10),
            ..Default::default()
        }])
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T01:00:00Z",
        vec![("p0", slow()), ("p1", slow())],
        vec![],
    );
    d.run_until(t("2026-06-01T01:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let second = run_by_key(&store, "p1", "2026-06-01T09:00+08:00");
    let ev = events(&store, second.id);
    assert!(ev.iter().any(|e| {
        e.kind == "switch_held"
            && e.detail["reason"]
                .as_str()
                .unwrap()
                .contains("on_time pool full (1/1)")
    }));
    assert_eq!(second.state, RunState::Succeeded);
}

#[test]
fn runtime_budget_kills_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &simple_config("budget = { max_runtime = \"1m\" }\nretry = { max_attempts = 1 }"),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:10:00Z",
        vec![(
            "job",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::minutes(5),
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-01T00:15:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    let a = store.read(|tx| tx.attempts(r.id)).unwrap();
    assert_eq!(a[0].status, AttemptStatus::TimedOut);
    assert_eq!(
        a[0].ended_at,
        Some(t("2026-06-01T00:11:00Z")),
        "killed at max_runtime"
    );
    assert_eq!(r.state, RunState::Dead);
    assert!(r.last_error.unwrap().contains("timed out after 1m"));
}

#[test]
fn token_cap_fails_the_attempt_pauses_the_schedule_and_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &simple_config("budget = { max_tokens = 200 }"));
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:10:00Z",
        vec![(
            "job",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::minutes(2),
                tokens: 300,
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-01T00:25:00Z")).unwrap();
    let store = d.store().unwrap();
    let r = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(r.state, RunState::Failed);
    assert!(
        r.last_error
            .as_deref()
            .unwrap()
            .contains("token budget exceeded: 300 > 200")
    );
    let st = store.read(|tx| tx.schedule_state("job")).unwrap();
    assert!(st.paused);
    assert!(st.paused_reason.unwrap().starts_with("budget"));
    assert!(
        schedule_events(&store, "job", "alert")
            .iter()
            .any(|a| a.detail["what"] == "budget")
    );
    // Paused: the next window is held, not run.
    let next = run_by_key(&store, "job", "2026-06-01T08:20+08:00");
    assert_eq!(next.attempts, 0);
    assert!(
        events(&store, next.id)
            .iter()
            .any(|e| e.kind == "switch_held" && e.detail["switch"] == "paused")
    );
}

#[test]
fn daily_cost_cap_pauses_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &simple_config("budget = { max_cost_per_day = 5.0 }"));
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T00:10:00Z",
        vec![(
            "job",
            sim_agent(vec![SimAttempt {
                latency: TimeDelta::minutes(1),
                cost_usd: 3.0,
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-01T00:45:00Z")).unwrap();
    let store = d.store().unwrap();
    let first = run_by_key(&store, "job", "2026-06-01T08:10+08:00");
    assert_eq!(first.state, RunState::Succeeded);
    let second = run_by_key(&store, "job", "2026-06-01T08:20+08:00");
    assert_eq!(
        second.state,
        RunState::Failed,
        "the attempt that crossed the cap fails"
    );
    assert!(second.last_error.unwrap().contains("daily cost cap exceeded"));
    let st = store.read(|tx| tx.schedule_state("job")).unwrap();
    assert!(st.paused, "paused with reason budget");
    assert!(
        st.paused_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("budget")),
        "{:?}",
        st.paused_reason
    );
    let alerts = schedule_events(&store, "job", "alert");
    assert!(
        alerts.iter().any(|e| e.detail["what"] == "budget"
            && e.detail["message"].as_str().is_some_and(|m| m.contains("cost"))),
        "{alerts:?}"
    );
    let third = run_by_key(&store, "job", "2026-06-01T08:30+08:00");
    assert_eq!(third.attempts, 0);
    let _ = SimEnd::Success;
}

#[test]
fn maintenance_windows_hold_runs_configured_and_ad_hoc() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{BASE}
[[schedule]]
id = "job"
agent = "sim"
cron = "30 * * * *"
close_after = "1h"
check_every = "5m"

[[maintenance]]
name = "nightly-vacuum"
cron = "0 2 * * *"
duration = "1h"
reason = "warehouse vacuum"
"#
    );
    let cfg = config(&dir, &toml);
    // 02:00–03:00 Shanghai is 18:00–19:00 UTC.
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T17:59:00Z",
        vec![("job", sim_agent(vec![]))],
        vec![],
    );
    d.run_until(t("2026-06-01T19:20:00Z")).unwrap();
    let store = d.store().unwrap();
    let held = run_by_key(&store, "job", "2026-06-02T02:30+08:00");
    let ev = events(&store, held.id);
    let hold = ev
        .iter()
        .find(|e| e.kind == "switch_held")
        .expect("held by maintenance");
    assert_eq!(hold.detail["switch"], "maintenance");
    assert!(
        hold.detail["reason"]
            .as_str()
            .unwrap()
            .contains("warehouse vacuum")
    );
    let claimed = ev.iter().find(|e| e.kind == "claimed").unwrap();
    assert_eq!(
        claimed.at,
        t("2026-06-01T19:00:00Z"),
        "claimed at the first check after the window"
    );
    // An ad-hoc window for this schedule only.
    operator::add_maintenance(
        &store,
        t("2026-06-01T19:25:00Z"),
        t("2026-06-01T19:45:00Z"),
        "disk swap",
        "carol",
        &["job".to_string()],
        t("2026-06-01T19:20:00Z"),
    )
    .unwrap();
    d.run_until(t("2026-06-01T20:00:00Z")).unwrap();
    let next = run_by_key(&store, "job", "2026-06-02T03:30+08:00");
    let ev = events(&store, next.id);
    assert!(
        ev.iter()
            .any(|e| e.kind == "switch_held" && e.detail["reason"].as_str().unwrap().contains("disk swap"))
    );
    assert_eq!(
        ev.iter().find(|e| e.kind == "claimed").unwrap().at,
        t("2026-06-01T19:45:00Z")
    );
}

/// Catch-up runs waiting for a slot are not re-checked every `check_every`:
/// they wait to be woken. Closing a circuit by hand wakes the oldest of them.
#[test]
fn operator_actions_wake_held_catch_up_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &simple_config("max_concurrency = 1"));
    let store = agentcron::store::Store::open(&dir.path().join("wake.db")).unwrap();
    let now = t("2026-06-01T12:00:00Z");
    let later = t("2026-06-03T00:00:00Z");
    let queued = |key: &str, start: &str, why: &str| NewRun {
        tenant: "default".into(),
        schedule: "job".into(),
        window_key: key.into(),
        window_start: t(start),
        window_end: t(start) + TimeDelta::minutes(10),
        due_at: t(start),
        state: RunState::Pending,
        reason: RunReason::Catchup,
        pool: Pool::Backfill,
        state_reason: Some(why.into()),
        next_check_at: Some(later),
    };
    let (older, newer) = store
        .write(|tx| {
            let a = tx
                .insert_run(
                    &queued(
                        "a",
                        "2026-06-01T08:00:00Z",
                        "circuit: half-open, waiting for the probe run",
                    ),
                    now,
                )?
                .unwrap();
            let b = tx
                .insert_run(
                    &queued(
                        "b",
                        "2026-06-01T08:10:00Z",
                        "circuit: half-open, waiting for the probe run",
                    ),
                    now,
                )?
                .unwrap();
            // Held by the circuit as the engine holds them: the hold kind
            // beside the reason (wake-ups read the kind, never the prose).
            for id in [a.id, b.id] {
                tx.hold_until(
                    id,
                    later,
                    "circuit: half-open, waiting for the probe run",
                    Some(agentcron::core::decision::HoldKind::Circuit),
                )?;
            }
            let mut st = tx.schedule_state("job")?;
            st.circuit = CircuitState::HalfOpen;
            tx.put_schedule_state(&st)?;
            Ok((a.id, b.id))
        })
        .unwrap();
    operator::close_circuit(&store, &cfg, "job", "alice", "upstream fixed", now).unwrap();
    let next = |id: i64| store.read(|tx| tx.run(id)).unwrap().next_check_at;
    assert_eq!(next(older), Some(now), "the oldest held catch-up run goes now");
    assert_eq!(next(newer), Some(later), "max_concurrency = 1: one at a time");
}

/// A wake-up reads the hold kind, never the reason's words: rewording a
/// reason cannot break it, and a reason that merely reads like a hold does
/// not fake one.
#[test]
fn wake_ups_follow_the_hold_kind_not_the_reason_text() {
    use agentcron::core::decision::HoldKind;
    let store = agentcron::store::Store::open_in_memory().unwrap();
    let now = t("2026-06-01T12:00:00Z");
    let later = t("2026-06-01T13:00:00Z");
    let new = |key: &str| NewRun {
        tenant: "default".into(),
        schedule: "job".into(),
        window_key: key.into(),
        window_start: now,
        window_end: now + TimeDelta::minutes(10),
        due_at: now,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        next_check_at: Some(later),
    };
    let (reworded, lookalike) = store
        .write(|tx| {
            let a = tx.insert_run(&new("a"), now)?.unwrap();
            let b = tx.insert_run(&new("b"), now)?.unwrap();
            tx.hold_until(
                a.id,
                later,
                "waiting for a free slot (any words)",
                Some(HoldKind::Quota),
            )?;
            tx.hold_until(
                b.id,
                later,
                "quota: reads like one, held by a gate",
                Some(HoldKind::Gate),
            )?;
            Ok((a.id, b.id))
        })
        .unwrap();
    let run = |id: i64| store.read(|tx| tx.run(id)).unwrap();
    // The engine, choosing among quota-held runs itself, leaves them be.
    let (woken, _) = store
        .write(|tx| tx.recheck_held("job", 1, false, false, now))
        .unwrap();
    assert_eq!(woken, 0, "a quota hold is left to the caller");
    assert_eq!(run(reworded).next_check_at, Some(later));
    let held = store.read(|tx| tx.quota_held_of("job", Pool::OnTime, 5)).unwrap();
    assert_eq!(held.iter().map(|h| h.id).collect::<Vec<_>>(), vec![reworded]);
    let (woken, _) = store
        .write(|tx| tx.recheck_held("job", 1, true, true, now))
        .unwrap();
    assert_eq!(woken, 1, "only the run a slot holds");
    assert_eq!(run(reworded).next_check_at, Some(now));
    assert_eq!(run(reworded).hold, Some(HoldKind::Quota));
    assert_eq!(run(lookalike).next_check_at, Some(later));
}

/// A freed place is offered to the ending schedule's own held runs too,
/// however many older runs of other schedules are held (the engine reads
/// only the oldest few of those): here eight runs of `c`, held by its own
/// limit, are older than `a`'s, and `a`'s still starts at once.
#[test]
fn a_freed_place_reaches_its_own_schedules_held_run_behind_older_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = BASE.replace("workers = 4", "workers = 2");
    toml.push_str(
        "\n[[schedule]]\nid = \"c\"\nagent = \"sim\"\ncron = \"* * * * *\"\noverlap = \"allow\"\n\
         max_concurrency = 1\nclose_after = \"1h\"\ncheck_every = \"1h\"\n\
         \n[[schedule]]\nid = \"a\"\nagent = \"sim\"\ncron = \"0,9 * * * *\"\noverlap = \"allow\"\n\
         max_concurrency = 3\nclose_after = \"1h\"\ncheck_every = \"1h\"\n",
    );
    let cfg = config(&dir, &toml);
    let agent = |minutes: i64| {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::minutes(minutes),
            ..Default::default()
        }])
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-01T01:00:00Z",
        vec![("c", agent(60)), ("a", agent(10))],
        vec![],
    );
    d.run_until(t("2026-06-01T01:09:30Z")).unwrap();
    let store = d.store().unwrap();
    let held_c = runs(&store, "c")
        .iter()
        .filter(|r| {
            r.state == RunState::Pending && r.hold == Some(agentcron::core::decision::HoldKind::Quota)
        })
        .count();
    assert_eq!(held_c, 9, "c's runs of 01:01 to 01:09 wait for c's own limit");
    let own = run_by_key(&store, "a", "2026-06-01T09:09+08:00");
    assert_eq!(
        own.hold,
        Some(agentcron::core::decision::HoldKind::Quota),
        "held: both places are taken"
    );
    // 01:10: a's first run ends. c's held runs are older but cannot start.
    d.run_until(t("2026-06-01T01:10:30Z")).unwrap();
    let claimed = events(&store, own.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .map(|e| e.at);
    assert_eq!(claimed, Some(t("2026-06-01T01:10:00Z")));
}
