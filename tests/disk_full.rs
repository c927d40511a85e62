//! A full disk is held, never fatal (issue 44, item 8): while the ledger
//! cannot grow (SQLite's `max_page_count` on the scheduler's connection,
//! which fails writes with SQLITE_FULL as a full disk does) every pass of the
//! live loop succeeds, one `disk_full` alert goes out, and once there is room
//! the windows due meanwhile run, each once, and the alert is recorded.
//! Virtual clock, simulated agents.

mod support;

use agentcron::engine::{Engine, EngineOptions};
use agentcron::rehearsal::sim::{SimAttempt, SimRunner};
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::TimeDelta;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::*;

const CONFIG: &str = r#"
[scheduler]
timezone = "UTC"
lease = "60s"
workers = 4
alert = { kind = "file", path = "alerts.jsonl" }

[agents.sim]
kind = "command"
command = ["true"]
timeout = "1h"
steps = [{ name = "fetch" }, { name = "deliver", side_effect = true }]

[[schedule]]
id = "tick"
agent = "sim"
every = "1m"
catchup = "all"
"#;

/// One pass of the live loop at the clock's now, with the simulated agents'
/// reports due by then delivered.
fn pass(engine: &mut Engine, runner: &SimRunner, clock: &VirtualClock) {
    runner.release_due(clock.now());
    engine.pass().expect("a pass never fails on a full disk");
}

#[test]
fn a_full_disk_is_held_alerted_once_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, CONFIG);
    let db = dir.path().join("test.db");
    let start = t("2026-06-01T09:00:00Z");
    let clock = VirtualClock::new(start);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let agents = BTreeMap::from([(
        "tick".to_string(),
        sim_agent(vec![SimAttempt {
            latency: TimeDelta::seconds(5),
            ..Default::default()
        }]),
    )]);
    let runner = SimRunner::new(shared.clone(), agents);
    let store = Arc::new(Store::open(&db).unwrap());
    let mut engine = Engine::with_gates(
        cfg.clone(),
        store.clone(),
        shared,
        Arc::new(runner.clone()),
        EngineOptions {
            owner: "a".into(),
            ..EngineOptions::default()
        },
        vec![vec![]],
    );
    let step = TimeDelta::seconds(5);
    let advance = |engine: &mut Engine, until: chrono::DateTime<chrono::Utc>| {
        while clock.now() < until {
            clock.set(clock.now() + step);
            pass(engine, &runner, &clock);
        }
    };
    pass(&mut engine, &runner, &clock);
    advance(&mut engine, t("2026-06-01T09:05:00Z"));
    assert!(engine.disk_full_since().is_none());

    // The disk fills: no write that needs another page succeeds.
    store.cap_at_present_size(true).unwrap();
    advance(&mut engine, t("2026-06-01T09:20:00Z"));
    let since = engine
        .disk_full_since()
        .expect("a quarter of an hour of windows filled the ledger's last page");
    let full: Vec<serde_json::Value> = alert_lines(dir.path())
        .into_iter()
        .filter(|a| a["what"] == "disk_full")
        .collect();
    assert_eq!(
        full.len(),
        1,
        "one alert for the episode, not one per pass: {full:?}"
    );
    assert!(
        full[0]["message"].as_str().unwrap().contains("disk is full"),
        "{}",
        full[0]
    );

    // Room again: the held work is done, and the alert is recorded.
    store.cap_at_present_size(false).unwrap();
    advance(&mut engine, t("2026-06-01T09:30:30Z"));
    assert!(engine.disk_full_since().is_none(), "the episode is over");
    let recorded = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["alert".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    let recorded: Vec<&Event> = recorded
        .iter()
        .filter(|e| e.detail["what"] == "disk_full")
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].at, since);

    // Every window from the start to 09:30, once each, all succeeded.
    let all = runs(&store, "tick");
    let starts: Vec<_> = all.iter().map(|r| r.window_start).collect();
    let want: Vec<_> = (0..=30).map(|m| start + TimeDelta::minutes(m)).collect();
    assert_eq!(starts, want, "one run per window, none lost, none twice");
    for r in &all {
        assert_eq!(
            r.state,
            RunState::Succeeded,
            "{} {:?}",
            r.window_key,
            r.state_reason
        );
    }
    assert_eq!(
        alert_lines(dir.path())
            .iter()
            .filter(|a| a["what"] == "disk_full")
            .count(),
        1
    );
}
