//! One zone per output (issue 52, DESIGN.md "Command line"): `plan`,
//! `explain` of an unknown schedule and manual window keys tell their times
//! in the scheduler's zone (the console header's), with the zone shown, or
//! UTC with `--utc`; `--json` stays RFC 3339 UTC and window keys never
//! change. And one circuit threshold per explanation.

mod support;

use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::Store;
use agentcron::store::types::*;
use assert_cmd::Command;
use chrono::TimeDelta;
use support::*;

const SHANGHAI: chrono_tz::Tz = chrono_tz::Asia::Shanghai;

const HEAD: &str = r#"
[scheduler]
timezone = "Asia/Shanghai"
database = "test.db"

[agents.sim]
kind = "command"
command = ["true"]
timeout = "1h"

[[schedule]]
id = "daily"
agent = "sim"
cron = "0 9 * * *"
"#;

/// `agentcron ARGS --config DIR/agentcron.toml`: (exit code, stdout, stderr).
fn cli(dir: &tempfile::TempDir, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::cargo_bin("agentcron")
        .unwrap()
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .args(args)
        .env("USER", "tester")
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An RFC 3339 UTC instant as `rfc3339` writes them into stored text.
fn has_utc_instant(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .any(|w| w.len() >= 20 && w.ends_with('Z') && w.as_bytes().get(10) == Some(&b'T'))
}

#[test]
fn plan_tells_its_fires_in_the_scheduler_zone_or_utc() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, HEAD);
    let (code, text, err) = cli(&dir, &["plan"]);
    assert_eq!(code, Some(3), "{text}{err}");
    assert!(text.contains("(times in Asia/Shanghai)"), "{text}");
    // 09:00 in the schedule's (the scheduler's) zone: 01:00 UTC.
    assert!(text.contains(" 09:00:00 +08:00"), "{text}");
    assert!(!has_utc_instant(&text), "no UTC instant in the text: {text}");

    let (code, text, _) = cli(&dir, &["plan", "--utc"]);
    assert_eq!(code, Some(3));
    assert!(text.contains("(times in UTC)"), "{text}");
    assert!(text.contains(" 01:00:00 +00:00"), "{text}");

    let (_, json, _) = cli(&dir, &["plan", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fire = v["schedules"][0]["fires_after"][0].as_str().unwrap();
    assert!(fire.ends_with("T01:00:00.000Z"), "JSON stays UTC: {fire}");
}

#[test]
fn explain_of_an_unknown_schedule_tells_its_times_in_the_scheduler_zone() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, HEAD);
    let mut d = driver(&dir, cfg, "2027-06-01T01:00:00Z", vec![], vec![]);
    d.run_until(t("2027-06-01T01:30:00Z")).unwrap();
    let store = Store::open(&dir.path().join("test.db")).unwrap();
    let last_tick = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["tick".into(), "scheduler_started".into()],
                newest_first: true,
                limit: Some(1),
                ..EventFilter::default()
            })
        })
        .unwrap()
        .pop()
        .expect("the driver ticked")
        .at;
    drop(d);
    let (code, text, err) = cli(&dir, &["explain", "nope"]);
    assert_eq!(code, Some(1), "{text}{err}");
    assert!(text.contains("(times in Asia/Shanghai)"), "{text}");
    let local = last_tick
        .with_timezone(&SHANGHAI)
        .format("%Y-%m-%d %H:%M")
        .to_string();
    let utc = last_tick.format("%Y-%m-%d %H:%M").to_string();
    assert!(text.contains(&format!("at {local}")), "{local} in {text}");
    assert!(!text.contains(&utc), "no bare UTC time ({utc}): {text}");
    assert!(!text.contains(&dir.path().display().to_string()), "{text}");
}

#[test]
fn a_manual_window_key_stays_as_it_is_with_its_local_time_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, HEAD);
    let mut d = driver(&dir, cfg, "2027-06-01T01:00:00Z", vec![], vec![]);
    d.settle().unwrap();
    drop(d);
    let (code, text, err) = cli(&dir, &["trigger", "daily"]);
    assert_eq!(code, Some(0), "{text}{err}");
    let (_, json, _) = cli(&dir, &["runs", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let manual = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["reason"] == "manual" || r["window_key"].as_str().is_some_and(|k| k.starts_with("manual-"))
        })
        .unwrap_or_else(|| panic!("a manual run: {v}"));
    let key = manual["window_key"].as_str().unwrap().to_string();
    assert!(
        key.starts_with("manual-") && key.ends_with('Z'),
        "the key keeps its format: {key}"
    );
    let stamp = chrono::DateTime::parse_from_rfc3339(key.trim_start_matches("manual-")).unwrap();
    let local = stamp
        .with_timezone(&SHANGHAI)
        .format("%Y-%m-%d %H:%M:%S +08:00")
        .to_string();
    let beside = format!("{key} ({local})");
    assert!(text.contains(&beside), "trigger says {beside}: {text}");
    let (_, table, _) = cli(&dir, &["runs"]);
    assert!(table.contains(&beside), "{table}");
    let id = manual["id"].to_string();
    let (_, shown, _) = cli(&dir, &["show", &id]);
    assert!(shown.contains(&beside), "{shown}");
    let (_, utc, _) = cli(&dir, &["runs", "--utc"]);
    assert!(
        utc.contains(&key) && !utc.contains(&beside),
        "in UTC the key says it: {utc}"
    );
}

#[test]
fn an_open_circuit_is_explained_with_one_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{HEAD}\n[[schedule]]\nid = \"poller\"\nagent = \"sim\"\nevery = \"10m\"\nclose_after = \"5m\"\n\
             circuit = {{ open_after = 3, cool_down = \"2h\" }}\n\
             retry = {{ max_attempts = 1, backoff = \"fixed\", initial = \"1m\", max = \"1m\", jitter = 0.0 }}\n"
        ),
    );
    let failing = sim_agent(vec![SimAttempt {
        end: SimEnd::Exit(65),
        latency: TimeDelta::seconds(5),
        ..Default::default()
    }]);
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2027-06-01T00:00:00Z",
        vec![("poller", failing)],
        vec![],
    );
    // 00:00, 00:10, 00:20 fail: the circuit opens at the third.
    d.run_until(t("2027-06-01T00:25:00Z")).unwrap();
    let store = d.store().unwrap();
    assert_eq!(
        store.read(|tx| tx.schedule_state("poller")).unwrap().circuit,
        CircuitState::Open
    );
    // Two manual runs go through the open circuit and fail too: five in a row.
    for _ in 0..2 {
        agentcron::operator::trigger(&store, &cfg, "poller", None, "tester", d.now()).unwrap();
        d.run_until(d.now() + TimeDelta::seconds(30)).unwrap();
    }
    assert_eq!(
        store
            .read(|tx| tx.schedule_state("poller"))
            .unwrap()
            .consecutive_failures,
        5
    );
    d.run_until(t("2027-06-01T00:45:00Z")).unwrap();
    let skipped = runs(&store, "poller")
        .into_iter()
        .find(|r| r.window_start == t("2027-06-01T00:40:00Z"))
        .unwrap();
    assert_eq!(skipped.state, RunState::Skipped);
    drop(d);
    let (_, text, err) = cli(&dir, &["explain", "poller", "--window", &skipped.window_key]);
    assert!(text.contains("circuit"), "{text}{err}");
    assert!(
        text.contains("after 3 consecutive failed runs") && text.contains("open_after = 3"),
        "the count at opening and the threshold: {text}"
    );
    assert!(!text.contains("after 5"), "one threshold: {text}");
}
