//! Shared helpers for engine tests: a config from TOML text, a virtual-clock
//! driver with simulated agents and gates, and event-trail accessors; `real`
//! drives real agent processes on a virtual clock.
#![allow(dead_code)]

pub mod process;
pub mod real;

use agentcron::config::{Config, load_str};
use agentcron::rehearsal::driver::Driver;
use agentcron::rehearsal::sim::SimAgent;
use agentcron::rehearsal::sim_gate::{SimGate, SimGateRule};
use agentcron::store::Store;
use agentcron::store::types::*;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tempfile::TempDir;

pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Loads `toml` as if it were `DIR/agentcron.toml`.
pub fn config(dir: &TempDir, toml: &str) -> Arc<Config> {
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, toml).unwrap();
    match load_str(toml, &path) {
        Ok(c) => Arc::new(c),
        Err(e) => panic!("test config invalid:\n{e}"),
    }
}

/// A driver whose gates named in `sim_gates` (schedule → gate name → rule) are
/// simulated and all others are the real gates from the config.
pub fn driver(
    dir: &TempDir,
    cfg: Arc<Config>,
    start: &str,
    agents: Vec<(&str, SimAgent)>,
    sim_gates: Vec<(&str, &str, SimGateRule)>,
) -> Driver {
    let agents: BTreeMap<String, SimAgent> = agents.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    let rules: HashMap<(String, String), SimGateRule> = sim_gates
        .into_iter()
        .map(|(s, g, r)| ((s.to_string(), g.to_string()), r))
        .collect();
    let factory = Box::new(move |cfg: &Config| {
        cfg.schedules
            .iter()
            .map(|s| {
                s.gates
                    .iter()
                    .map(|g| match rules.get(&(s.id.clone(), g.name.clone())) {
                        Some(rule) => Box::new(SimGate {
                            name: g.name.clone(),
                            kind: "simulated",
                            rule: rule.clone(),
                        }) as Box<dyn agentcron::gates::Gate>,
                        None => agentcron::gates::build(g),
                    })
                    .collect()
            })
            .collect()
    });
    Driver::new(cfg, &dir.path().join("test.db"), t(start), agents, factory).unwrap()
}

pub fn runs(store: &Store, schedule: &str) -> Vec<Run> {
    let mut r = store
        .read(|tx| {
            tx.runs(&RunFilter {
                schedule: Some(schedule.into()),
                ..RunFilter::default()
            })
        })
        .unwrap();
    r.sort_by_key(|r| r.window_start);
    r
}

pub fn run_by_key(store: &Store, schedule: &str, key: &str) -> Run {
    runs(store, schedule)
        .into_iter()
        .find(|r| r.window_key == key)
        .unwrap_or_else(|| panic!("no run for {schedule} {key}"))
}

pub fn events(store: &Store, run_id: i64) -> Vec<Event> {
    store
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run_id),
                ..EventFilter::default()
            })
        })
        .unwrap()
}

/// Lines of the alert sink file `alerts.jsonl` in `dir`, parsed (none if absent).
pub fn alert_lines(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("alerts.jsonl"))
        .map(|s| s.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
        .unwrap_or_default()
}

/// Event kinds of a run, in order.
pub fn kinds(store: &Store, run_id: i64) -> Vec<String> {
    events(store, run_id).into_iter().map(|e| e.kind).collect()
}

pub fn schedule_events(store: &Store, schedule: &str, kind: &str) -> Vec<Event> {
    store
        .read(|tx| {
            tx.events(&EventFilter {
                schedule: Some(schedule.into()),
                kinds: vec![kind.into()],
                ..EventFilter::default()
            })
        })
        .unwrap()
}

pub const BASE: &str = r#"
[scheduler]
timezone = "Asia/Shanghai"
lease = "60s"
workers = 4
backfill_workers = 2

[agents.sim]
kind = "command"
command = ["true"]
timeout = "1h"
steps = [{ name = "fetch" }, { name = "deliver", side_effect = true }]
"#;

pub fn sim_agent(attempts: Vec<agentcron::rehearsal::sim::SimAttempt>) -> SimAgent {
    SimAgent {
        steps: vec![("fetch".into(), false), ("deliver".into(), true)],
        attempts,
        phases: vec![],
    }
}
