//! Catch-up after downtime and clock jumps (DESIGN.md "Catch-up"), on a virtual
//! clock with simulated agents.

mod support;

use agentcron::rehearsal::sim::SimAttempt;
use agentcron::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::HashSet;
use support::*;

fn config_for(policy: &str) -> String {
    format!(
        r#"{BASE}
[[schedule]]
id = "five"
agent = "sim"
every = "5m"
close_after = "5m"
check_every = "1m"
catchup = "{policy}"
catchup_window = "24h"
overlap = "allow"
max_concurrency = 4

[[schedule]]
id = "hourly"
agent = "sim"
cron = "0 * * * *"
close_after = "10m"
catchup = "{policy}"
catchup_window = "24h"

[[schedule]]
id = "daily"
agent = "sim"
cron = "0 9 * * *"
close_after = "1h"
catchup = "{policy}"
catchup_window = "24h"
"#
    )
}

fn agents() -> Vec<(&'static str, agentcron::rehearsal::sim::SimAgent)> {
    let quick = || {
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::seconds(30),
            ..Default::default()
        }])
    };
    vec![("five", quick()), ("hourly", quick()), ("daily", quick())]
}

struct Outage {
    down: DateTime<Utc>,
    up: DateTime<Utc>,
    store: agentcron::store::Store,
}

/// Up from 2026-06-01 00:00Z for 1h, down 70h, up again for 8h.
fn outage(policy: &str) -> (tempfile::TempDir, Outage) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &config_for(policy));
    let mut d = driver(&dir, cfg, "2026-06-01T00:00:00Z", agents(), vec![]);
    let down = t("2026-06-01T01:00:00Z");
    d.run_until(down).unwrap();
    d.crash("main");
    let up = down + TimeDelta::hours(70);
    d.jump_clock(up).unwrap();
    d.restart("main").unwrap();
    d.run_until(up + TimeDelta::hours(8)).unwrap();
    let store = d.store().unwrap();
    (dir, Outage { down, up, store })
}

fn claimed_at(store: &agentcron::store::Store, run: &Run) -> Option<DateTime<Utc>> {
    events(store, run.id)
        .into_iter()
        .find(|e| e.kind == "claimed")
        .map(|e| e.at)
}

#[test]
fn policy_all_catches_up_oldest_first_in_the_backfill_pool_and_expires_the_rest() {
    let (_dir, o) = outage("all");
    for sched in ["five", "hourly", "daily"] {
        let runs = runs(&o.store, sched);
        let keys: HashSet<&str> = runs.iter().map(|r| r.window_key.as_str()).collect();
        assert_eq!(keys.len(), runs.len(), "{sched}: a window key twice");
        for r in &runs {
            let closed_in_gap = r.window_start > o.down && r.window_end <= o.up;
            if closed_in_gap && r.window_start + TimeDelta::hours(24) <= o.up {
                assert_eq!(r.state, RunState::Expired, "{sched} {}", r.window_key);
                assert_eq!(r.attempts, 0);
            } else if closed_in_gap {
                assert_eq!(
                    (r.reason, r.pool),
                    (RunReason::Catchup, Pool::Backfill),
                    "{sched} {}",
                    r.window_key
                );
                assert_eq!(r.state, RunState::Succeeded, "{sched} {}", r.window_key);
            } else if r.window_start < o.up + TimeDelta::hours(7) {
                assert_eq!(r.state, RunState::Succeeded, "{sched} {}", r.window_key);
            }
        }
    }
    // Exactly the planned windows: every 5 minutes through the outage, none missing.
    let five = runs(&o.store, "five");
    let starts: Vec<DateTime<Utc>> = five.iter().map(|r| r.window_start).collect();
    for w in starts.windows(2) {
        assert_eq!(w[1] - w[0], TimeDelta::minutes(5));
    }
    let caught_up: Vec<&Run> = five
        .iter()
        .filter(|r| r.reason == RunReason::Catchup && r.attempts > 0)
        .collect();
    assert_eq!(
        caught_up.len(),
        24 * 12 - 1,
        "24h of 5-minute windows minus the one still open at restart"
    );
    // Oldest first: claim instants follow window order.
    let claims: Vec<DateTime<Utc>> = caught_up
        .iter()
        .map(|r| claimed_at(&o.store, r).unwrap())
        .collect();
    assert!(
        claims.windows(2).all(|w| w[0] <= w[1]),
        "catch-up must drain oldest first"
    );
    // Back up at 06-03 23:00Z: yesterday's daily window (09:00 Shanghai = 01:00Z)
    // is caught up before today's, the one before is past the catch-up window.
    let daily = runs(&o.store, "daily");
    let by_key = |k: &str| daily.iter().find(|r| r.window_key == k).unwrap();
    assert_eq!(
        by_key("2026-06-01").state,
        RunState::Succeeded,
        "ran on time before the outage"
    );
    assert_eq!(by_key("2026-06-02").state, RunState::Expired);
    assert_eq!(by_key("2026-06-03").state, RunState::Succeeded);
    assert_eq!(by_key("2026-06-03").reason, RunReason::Catchup);
    assert_eq!(by_key("2026-06-04").reason, RunReason::Scheduled);
    assert!(claimed_at(&o.store, by_key("2026-06-03")) < claimed_at(&o.store, by_key("2026-06-04")));
    // An alert says windows expired.
    let alerts = schedule_events(&o.store, "five", "alert");
    assert!(alerts.iter().any(|a| a.detail["what"] == "catchup"), "{alerts:?}");
}

#[test]
fn on_time_runs_are_not_delayed_while_the_backfill_drains() {
    let (_dir, o) = outage("all");
    // The backfill of ~288 five-minute windows takes over an hour with 2 workers;
    // every on-time window after the restart is claimed the instant it is due.
    let mut checked = 0;
    for sched in ["five", "hourly"] {
        for r in runs(&o.store, sched) {
            if r.reason == RunReason::Scheduled && r.window_start >= o.up {
                let claimed = events(&o.store, r.id)
                    .into_iter()
                    .find(|e| e.kind == "claimed")
                    .unwrap();
                assert_eq!(
                    claimed.detail["lateness_ms"], 0,
                    "{sched} {} was late",
                    r.window_key
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 90, "{checked}");
    let last_catchup = runs(&o.store, "five")
        .into_iter()
        .filter(|r| r.reason == RunReason::Catchup && r.attempts > 0)
        .filter_map(|r| claimed_at(&o.store, &r))
        .max()
        .unwrap();
    assert!(
        last_catchup > o.up + TimeDelta::hours(1),
        "the drain overlapped on-time windows"
    );
}

#[test]
fn policy_latest_runs_only_the_newest_and_coalesces_the_rest() {
    let (_dir, o) = outage("latest");
    let hourly = runs(&o.store, "hourly");
    let gap: Vec<&Run> = hourly
        .iter()
        .filter(|r| r.window_start > o.down && r.window_start <= o.up)
        .collect();
    let ran: Vec<&Run> = gap.iter().copied().filter(|r| r.attempts > 0).collect();
    assert_eq!(ran.len(), 1, "only the newest window of the gap runs");
    assert_eq!(
        ran[0].window_start,
        gap.iter().map(|r| r.window_start).max().unwrap()
    );
    for r in gap.iter().filter(|r| r.attempts == 0) {
        assert!(
            matches!(r.state, RunState::Skipped | RunState::Expired),
            "{}",
            r.window_key
        );
        if r.state == RunState::Skipped {
            assert!(r.state_reason.as_deref().unwrap().starts_with("coalesced"));
        }
    }
}

#[test]
fn policy_none_skips_missed_windows_and_alerts() {
    let (_dir, o) = outage("none");
    let hourly = runs(&o.store, "hourly");
    let gap: Vec<&Run> = hourly
        .iter()
        .filter(|r| r.window_start > o.down && r.window_end <= o.up)
        .collect();
    assert!(gap.iter().all(|r| r.attempts == 0));
    assert!(gap.iter().filter(|r| r.state == RunState::Skipped).count() >= 23);
    let alerts = schedule_events(&o.store, "hourly", "alert");
    assert!(alerts.iter().any(|a| {
        a.detail["message"]
            .as_str()
            .unwrap()
            .contains("catchup = \"none\"")
    }));
}

#[test]
fn forward_clock_jump_plans_the_skipped_windows_and_backward_fires_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &config_for("all"));
    let mut d = driver(&dir, cfg, "2026-06-01T00:00:00Z", agents(), vec![]);
    d.run_until(t("2026-06-01T02:00:00Z")).unwrap();
    d.jump_clock(t("2026-06-01T05:00:00Z")).unwrap();
    d.run_until(t("2026-06-01T06:00:00Z")).unwrap();
    let store = d.store().unwrap();
    assert!(
        !store
            .read(|tx| tx.events(&EventFilter {
                kinds: vec!["clock_jump".into()],
                ..EventFilter::default()
            }))
            .unwrap()
            .is_empty()
    );
    let planned = schedule_events(&store, "hourly", "catchup_planned");
    assert!(!planned.is_empty(), "a forward jump plans the windows it skipped");
    let hourly = runs(&store, "hourly");
    for h in ["2026-06-01T11:00+08:00", "2026-06-01T12:00+08:00"] {
        let r = hourly.iter().find(|r| r.window_key == h).unwrap();
        assert_eq!(
            (r.reason, r.state),
            (RunReason::Catchup, RunState::Succeeded),
            "{h}"
        );
    }
    // Back one hour: the same windows come round again on the wall clock.
    let before = runs(&store, "five").len();
    d.jump_clock(t("2026-06-01T05:00:00Z")).unwrap();
    d.run_until(t("2026-06-01T07:00:00Z")).unwrap();
    let store = d.store().unwrap();
    for sched in ["five", "hourly"] {
        for r in runs(&store, sched) {
            let claims = events(&store, r.id)
                .iter()
                .filter(|e| e.kind == "claimed")
                .count();
            assert!(claims <= 1, "{sched} {} claimed {claims} times", r.window_key);
        }
    }
    let after = runs(&store, "five").len();
    // 06:00 → 07:00 adds only the windows after the newest one already opened.
    assert_eq!(
        after - before,
        12,
        "one hour of new 5-minute windows, nothing repeated"
    );
}
