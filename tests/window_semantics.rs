//! Window semantics (DESIGN.md "Catch-up", "Overlap"): missed windows are
//! caught up window by window, never skipped by overlap; catch-up never costs
//! an on-time run; a freed slot goes to a run that can take it;
//! `cancel_previous` works across schedulers. Virtual clock, simulated agents.

mod support;

use agentcron::engine::{Engine, EngineOptions};
use agentcron::gates::Gate;
use agentcron::rehearsal::sim::{SimAgent, SimAttempt, SimRunner};
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use support::real::of_kind;
use support::*;

fn agent(latency: TimeDelta) -> SimAgent {
    sim_agent(vec![SimAttempt {
        latency,
        ..Default::default()
    }])
}

/// An hourly schedule (catch-up all) whose agent takes `latency`, up from
/// 23:30Z, down 00:50 → 05:50Z, restarted: (dir, driver, the restart).
fn hourly_down_00_50_to_05_50(
    latency: TimeDelta,
) -> (
    tempfile::TempDir,
    agentcron::rehearsal::driver::Driver,
    DateTime<Utc>,
) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{BASE}\n[[schedule]]\nid = \"hourly\"\nagent = \"sim\"\ncron = \"0 * * * *\"\ncatchup = \"all\"\n"
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-05T23:30:00Z",
        vec![("hourly", agent(latency))],
        vec![],
    );
    d.run_until(t("2026-06-06T00:50:00Z")).unwrap();
    d.crash("main");
    let up = t("2026-06-06T05:50:00Z");
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    (dir, d, up)
}

fn claimed_at(store: &Store, r: &Run) -> Option<DateTime<Utc>> {
    of_kind(store, r.id, "claimed").first().map(|e| e.at)
}

/// Reproduction 1: every minute, close_after 10m, crashed 09:05:30 and back
/// at 09:10:30. Every window of the downtime was due while nobody evaluated
/// the schedule: each is caught up once, oldest first, none skipped by
/// overlap — though their close_after had not passed at the restart.
#[test]
fn a_short_downtime_catches_up_every_window_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{BASE}\n[[schedule]]\nid = \"tick\"\nagent = \"sim\"\nevery = \"1m\"\nclose_after = \"10m\"\n\
             check_every = \"1m\"\ncatchup = \"all\"\n"
        ),
    );
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T01:00:00Z",
        vec![("tick", agent(TimeDelta::seconds(20)))],
        vec![],
    );
    let down = t("2026-06-06T01:05:30Z");
    let up = t("2026-06-06T01:10:30Z");
    d.run_until(down).unwrap();
    d.crash("main");
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    d.run_until(t("2026-06-06T01:20:00Z")).unwrap();
    let store = d.store().unwrap();
    let all = runs(&store, "tick");
    let missed: Vec<&Run> = all
        .iter()
        .filter(|r| r.window_start > down && r.window_start < up)
        .collect();
    let starts: Vec<DateTime<Utc>> = missed.iter().map(|r| r.window_start).collect();
    let want: Vec<DateTime<Utc>> = (6..=10)
        .map(|m| t("2026-06-06T01:00:00Z") + TimeDelta::minutes(m))
        .collect();
    assert_eq!(starts, want, "one run per window of the downtime");
    for r in &missed {
        assert_eq!(
            r.state,
            RunState::Succeeded,
            "{} {:?}",
            r.window_key,
            r.state_reason
        );
        assert_eq!(r.reason, RunReason::Catchup, "{}", r.window_key);
        assert_eq!(r.pool, Pool::Backfill);
    }
    let claims: Vec<DateTime<Utc>> = missed.iter().map(|r| claimed_at(&store, r).unwrap()).collect();
    assert!(
        claims.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {claims:?}"
    );
    // Nothing in the whole period was skipped, on time or caught up.
    let skipped: Vec<_> = all.iter().filter(|r| r.state == RunState::Skipped).collect();
    assert!(skipped.is_empty(), "{skipped:?}");
    let planned = schedule_events(&store, "tick", "catchup_planned");
    let last = planned.last().unwrap();
    assert_eq!(last.detail["summary"]["catch_up"], 5, "{}", last.detail);
}

/// Reproduction 3: hourly, a 20-minute agent, down 00:50 → 05:50. The 06:00
/// window finds the catch-up run of 01:00 running: it waits for it (the hold
/// names it), runs right after, and is never skipped; no new catch-up run
/// starts while it is due.
#[test]
fn catch_up_never_costs_an_on_time_run() {
    let (_dir, mut d, _up) = hourly_down_00_50_to_05_50(TimeDelta::minutes(20));
    d.run_until(t("2026-06-06T09:00:00Z")).unwrap();
    let store = d.store().unwrap();
    let all = runs(&store, "hourly");
    let by_key = |hour: &str| {
        all.iter()
            .find(|r| r.window_key == format!("2026-06-06T{hour}+08:00"))
            .unwrap_or_else(|| panic!("{hour}: {all:?}"))
    };
    // Down from 08:50 to 13:50 Shanghai: 09:00 … 13:00 caught up.
    for h in ["09:00", "10:00", "11:00", "12:00", "13:00"] {
        let r = by_key(h);
        assert_eq!(
            (r.state, r.reason),
            (RunState::Succeeded, RunReason::Catchup),
            "{h} {:?}",
            r.state_reason
        );
    }
    // 14:00 (06:00Z) is on time: it waited for the catch-up run of 09:00.
    let on_time = by_key("14:00");
    assert_eq!(on_time.state, RunState::Succeeded, "{:?}", on_time.state_reason);
    assert_eq!(on_time.reason, RunReason::Scheduled);
    let held = of_kind(&store, on_time.id, "switch_held");
    assert!(
        held.iter().any(|e| e.detail["reason"]
            .as_str()
            .unwrap()
            .contains("catch-up run of window 2026-06-06T09:00+08:00")),
        "{held:?}"
    );
    let first_catchup = by_key("09:00");
    let on_time_claim = claimed_at(&store, on_time).unwrap();
    assert_eq!(
        Some(on_time_claim),
        first_catchup_end(&store, first_catchup),
        "the on-time window goes the moment the catch-up run ends"
    );
    // No catch-up run was claimed between 06:00Z and the on-time claim.
    for r in all.iter().filter(|r| r.reason == RunReason::Catchup) {
        let c = claimed_at(&store, r).unwrap();
        assert!(
            !(c > t("2026-06-06T06:00:00Z") && c < on_time_claim),
            "{} claimed at {c}",
            r.window_key
        );
    }
    assert!(
        all.iter().all(|r| r.state != RunState::Skipped),
        "nothing skipped"
    );
}

fn first_catchup_end(store: &Store, r: &Run) -> Option<DateTime<Utc>> {
    of_kind(store, r.id, "succeeded").first().map(|e| e.at)
}

/// Reproduction 6: workers = 2, tenant t1 at most 1, held runs re-checked
/// every 5 minutes. When t2a ends, the slot goes to t2b at once (it can
/// start), not to t1b, which has waited as long but cannot start while t1a
/// runs — so the slot is not left unused until the next check.
#[test]
fn a_freed_slot_goes_to_a_run_that_can_take_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = BASE.replace("workers = 4", "workers = 2").to_string();
    toml.push_str("\n[tenants.t1]\nmax_concurrent = 1\n[tenants.t2]\n");
    for (id, tenant) in [("t1a", "t1"), ("t1b", "t1"), ("t2a", "t2"), ("t2b", "t2")] {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"{id}\"\ntenant = \"{tenant}\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\nclose_after = \"1h\"\ncheck_every = \"5m\"\n"
        ));
    }
    let cfg = config(&dir, &toml);
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:00Z",
        vec![
            ("t1a", agent(TimeDelta::minutes(4))),
            ("t1b", agent(TimeDelta::minutes(1))),
            ("t2a", agent(TimeDelta::minutes(2))),
            ("t2b", agent(TimeDelta::minutes(1))),
        ],
        vec![],
    );
    d.run_until(t("2026-06-06T01:10:00Z")).unwrap();
    let store = d.store().unwrap();
    let claim = |s: &str| claimed_at(&store, &run_by_key(&store, s, "2026-06-06")).unwrap();
    assert_eq!(claim("t1a"), t("2026-06-06T01:00:00Z"));
    assert_eq!(claim("t2a"), t("2026-06-06T01:00:00Z"));
    assert_eq!(
        claim("t2b"),
        t("2026-06-06T01:02:00Z"),
        "the moment t2a's slot freed"
    );
    assert_eq!(claim("t1b"), t("2026-06-06T01:04:00Z"), "the moment t1a ended");
}

/// Reproduction 7: `cancel_previous` when the previous window's attempt
/// belongs to another scheduler: the owner cancels it (asked through the
/// store), and the new window runs once it has ended.
#[test]
fn cancel_previous_reaches_another_schedulers_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{BASE}\n[[schedule]]\nid = \"sync\"\nagent = \"sim\"\ncron = \"* * * * *\"\nclose_after = \"1h\"\noverlap = \"cancel_previous\"\n"
        ),
    );
    let db = dir.path().join("two.db");
    let clock = VirtualClock::new(t("2026-06-06T00:59:30Z"));
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let mut agents = BTreeMap::new();
    agents.insert("sync".to_string(), agent(TimeDelta::minutes(30)));
    // One simulated runner for both: its reports are released by the test.
    let runner = SimRunner::new(shared.clone(), agents);
    let engine = |owner: &str| {
        Engine::with_gates(
            cfg.clone(),
            Arc::new(Store::open(&db).unwrap()),
            shared.clone(),
            Arc::new(runner.clone()),
            EngineOptions {
                owner: owner.into(),
                ..EngineOptions::default()
            },
            vec![Vec::<Box<dyn Gate>>::new()],
        )
    };
    let (mut a, mut b) = (engine("a"), engine("b"));
    a.tick().unwrap();
    b.tick().unwrap();
    // 09:00: scheduler a claims the window (b sleeps through it).
    clock.set(t("2026-06-06T01:00:00Z"));
    a.tick().unwrap();
    let store = Store::open(&db).unwrap();
    let first = run_by_key(&store, "sync", "2026-06-06T09:00+08:00");
    assert_eq!(
        (first.state, first.lease_owner.as_deref()),
        (RunState::Running, Some("a"))
    );
    // 09:01: only b evaluates the next window: it supersedes a's attempt.
    clock.set(t("2026-06-06T01:01:00Z"));
    b.tick().unwrap();
    let second = run_by_key(&store, "sync", "2026-06-06T09:01+08:00");
    assert_eq!(second.state, RunState::Pending);
    // a sees the request on its next tick and stops its attempt.
    a.tick().unwrap();
    runner.release_due(clock.now());
    while a.drain_reports().unwrap() > 0 {}
    let first = store.read(|tx| tx.run(first.id)).unwrap();
    assert_eq!(first.state, RunState::Failed, "{:?}", first.state_reason);
    assert!(
        first
            .last_error
            .as_deref()
            .unwrap()
            .contains("superseded by window 2026-06-06T09:01+08:00"),
        "{:?}",
        first.last_error
    );
    // The new window goes now that the previous one has ended.
    b.tick().unwrap();
    let second = store.read(|tx| tx.run(second.id)).unwrap();
    assert_eq!(second.state, RunState::Running, "{:?}", second.state_reason);
    assert!(of_kind(&store, second.id, "skipped").is_empty());
}

/// `explain` names the rule in each case: a window caught up after a
/// downtime, an on-time window that waited for a catch-up run, a window due
/// before the schedule's first evaluation.
#[test]
fn explain_names_the_window_rules() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{BASE}\n[[schedule]]\nid = \"tick\"\nagent = \"sim\"\nevery = \"1m\"\nclose_after = \"10m\"\n\
             check_every = \"1m\"\ncatchup = \"all\"\n"
        ),
    );
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2026-06-06T01:00:00Z",
        vec![("tick", agent(TimeDelta::seconds(150)))],
        vec![],
    );
    d.run_until(t("2026-06-06T01:05:30Z")).unwrap();
    d.crash("main");
    d.jump_clock(t("2026-06-06T01:10:30Z")).unwrap();
    d.restart("main").unwrap();
    let now = t("2026-06-06T01:40:00Z");
    d.run_until(now).unwrap();
    let store = d.store().unwrap();
    let explain = |key: &str| {
        store
            .read(|tx| agentcron::trace::explain(tx, Some(&cfg), "tick", Some(key), now))
            .unwrap()
    };
    let caught_up = explain("2026-06-06T09:07+08:00").text();
    assert!(caught_up.contains("as a catch-up run"), "{caught_up}");
    assert!(
        caught_up.contains("caught up after downtime 09:05:00–09:10:30"),
        "{caught_up}"
    );
    let on_time = explain("2026-06-06T09:11+08:00").text();
    assert!(
        on_time.contains("held by the on-time-first rule")
            && on_time.contains("waits for catch-up run of window"),
        "{on_time}"
    );
    let before = explain("2026-06-06T08:30+08:00");
    assert_eq!(before.verdict.as_str(), "before_first_evaluation");
    let text = before.text();
    assert!(
        text.contains("before this schedule's first evaluation (2026-06-06 09:00)"),
        "{text}"
    );
    assert!(
        before
            .next
            .unwrap()
            .contains("agentcron trigger tick --window 2026-06-06T08:30+08:00")
    );
}

/// Issue 44, item 11: a catch-up run must not cost an on-time window its run
/// even one step removed. Hourly, 40-minute agent, down 00:50 → 05:50Z: the
/// catch-up run of 01:00Z runs 05:50–06:30, the on-time 06:00 waits for it
/// and runs 06:30–07:10, so 07:00 finds 06:00 still running. Overlap `skip`
/// would skip it (as it did); it waits instead, the hold says why, and every
/// on-time window after the restart runs. The catch-up windows still run.
#[test]
fn an_on_time_window_is_never_skipped_behind_one_that_waited_for_catch_up() {
    let (_dir, mut d, up) = hourly_down_00_50_to_05_50(TimeDelta::minutes(40));
    d.run_until(t("2026-06-06T20:00:00Z")).unwrap();
    let store = d.store().unwrap();
    let all = runs(&store, "hourly");
    let shown = |rs: &[&Run]| -> Vec<(String, RunState, RunReason)> {
        rs.iter()
            .map(|r| (r.window_key.clone(), r.state, r.reason))
            .collect()
    };
    // Every window from the restart on has one run, and it ran: a window
    // held past its close runs as a catch-up run, never skipped.
    let after: Vec<&Run> = all
        .iter()
        .filter(|r| r.window_start >= up && r.window_start < t("2026-06-06T19:00:00Z"))
        .collect();
    assert_eq!(after.len(), 13, "06:00 … 18:00Z: {:?}", shown(&after));
    for r in &after {
        assert_eq!(
            r.state,
            RunState::Succeeded,
            "{} {:?}",
            r.window_key,
            r.state_reason
        );
    }
    let seven = after
        .iter()
        .find(|r| r.window_start == t("2026-06-06T07:00:00Z"))
        .unwrap();
    let held = of_kind(&store, seven.id, "switch_held");
    assert!(
        held.iter().any(|e| e
            .detail
            .to_string()
            .contains("started late behind a catch-up run")),
        "{held:?}"
    );
    // The downtime's windows are caught up too, none skipped.
    let caught_up: Vec<&Run> = all
        .iter()
        .filter(|r| r.window_start > t("2026-06-06T00:50:00Z") && r.window_start < up)
        .collect();
    assert_eq!(caught_up.len(), 5, "01:00 … 05:00Z: {:?}", shown(&caught_up));
    assert!(
        caught_up.iter().all(|r| r.state == RunState::Succeeded),
        "{:?}",
        shown(&caught_up)
    );
}
