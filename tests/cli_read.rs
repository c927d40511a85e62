//! The read verbs on the real binary (`runs`, `show`, `events`, `explain`),
//! over databases written by the real engine on a virtual clock, so every
//! event they read is genuine.

mod support;

use agentcron::rehearsal::driver::Driver;
use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::rehearsal::sim_gate::SimGateRule;
use assert_cmd::cargo::cargo_bin_cmd;
use serde_json::Value;
use std::path::PathBuf;
use support::{config, driver, run_by_key, sim_agent, t};
use tempfile::TempDir;

/// support's Shanghai base with the database named (the driver's `test.db`
/// beside the config) and a calendar.
fn base() -> String {
    let base = support::BASE.replace("[scheduler]\n", "[scheduler]\ndatabase = \"test.db\"\n");
    assert!(
        base.contains("database"),
        "support::BASE has no [scheduler] table"
    );
    format!("{base}\n[calendars.cn]\nweekend = [\"SAT\", \"SUN\"]\nholidays = [\"2026-10-01\"]\n")
}

/// A daily 09:00 schedule with a one-hour window checked every 5 minutes,
/// behind a gate `upstream`, not caught up when missed.
fn gated(id: &str) -> String {
    format!(
        r#"
[[schedule]]
id = "{id}"
agent = "sim"
cron = "0 9 * * *"
check_every = "5m"
close_after = "1h"
catchup = "none"

[[schedule.gate]]
kind = "command"
name = "upstream"
command = ["true"]
"#
    )
}

/// `report` waits on its upstream until 09:12 and succeeds; `stuck` waits past
/// its window; `flaky` fails once (exit 75) then succeeds; `payroll` is on a
/// calendar on which 2026-06-06 (a Saturday) is not a business day.
fn scenario_config() -> String {
    format!(
        r#"{}{}{}
[[schedule]]
id = "flaky"
agent = "sim"
cron = "30 9 * * *"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "2m", jitter = 0.0 }}

[[schedule]]
id = "payroll"
agent = "sim"
cron = "0 9 * * *"
calendar = "cn"
"#,
        base(),
        gated("report"),
        gated("stuck")
    )
}

struct Db {
    dir: TempDir,
}

impl Db {
    fn path(&self) -> PathBuf {
        self.dir.path().join("test.db")
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("agentcron.toml")
    }

    /// The binary with `--config` and `--db` pointing here.
    fn cmd(&self, args: &[&str]) -> Output {
        let mut all: Vec<String> = vec![
            "--config".into(),
            self.config().display().to_string(),
            "--db".into(),
            self.path().display().to_string(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        run(&all)
    }

    fn store(&self) -> agentcron::store::Store {
        agentcron::store::Store::open_read_only(&self.path()).unwrap()
    }
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Output {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

fn run<S: AsRef<str>>(args: &[S]) -> Output {
    let out = cargo_bin_cmd!("agentcron")
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn assert_has(text: &str, phrases: &[&str]) {
    for p in phrases {
        assert!(text.contains(p), "missing {p:?} in:\n{text}");
    }
}

/// 08:30 to 11:00 Shanghai on Saturday 2026-06-06.
fn scenario() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &scenario_config());
    let ok = || sim_agent(vec![SimAttempt::default()]);
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:30:00Z",
        vec![
            ("report", ok()),
            ("stuck", ok()),
            (
                "flaky",
                sim_agent(vec![
                    SimAttempt {
                        end: SimEnd::Exit(75),
                        ..Default::default()
                    },
                    SimAttempt::default(),
                ]),
            ),
            ("payroll", ok()),
        ],
        vec![
            (
                "report",
                "upstream",
                SimGateRule::PassFrom(t("2026-06-06T01:12:00Z")),
            ),
            (
                "stuck",
                "upstream",
                SimGateRule::PassFrom(t("2026-06-09T00:00:00Z")),
            ),
        ],
    );
    d.run_until(t("2026-06-06T03:00:00Z")).unwrap();
    Db { dir }
}

fn run_id(db: &Db, schedule: &str, key: &str) -> i64 {
    run_by_key(&db.store(), schedule, key).id
}

#[test]
fn runs_lists_newest_first_as_a_table_and_as_json() {
    let db = scenario();
    let out = db.cmd(&["runs"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let header = out.stdout.lines().next().unwrap();
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "ID", "SCHEDULE", "WINDOW", "STATE", "ATTEMPTS", "REASON", "UPDATED"
        ]
    );
    assert_has(
        &out.stdout,
        &["report", "succeeded", "calendar: 2026-06-06", "+08:00"],
    );
    assert_eq!(out.stdout.lines().count(), 5, "{}", out.stdout);

    let out = db.cmd(&["runs", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let rows = out.json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "id",
                "tenant",
                "schedule",
                "window_key",
                "state",
                "attempts",
                "reason",
                "updated_at"
            ]
        );
    }
    let flaky = rows.iter().find(|r| r["schedule"] == "flaky").unwrap();
    assert_eq!(flaky["tenant"], "default");
    assert_eq!(flaky["window_key"], "2026-06-06");
    assert_eq!(flaky["state"], "succeeded");
    assert_eq!(flaky["attempts"], 2);
    assert!(flaky["id"].is_i64());
    assert!(flaky["updated_at"].as_str().unwrap().ends_with('Z'), "{flaky}");
    let stuck = rows.iter().find(|r| r["schedule"] == "stuck").unwrap();
    assert_eq!(stuck["state"], "skipped");
    assert!(
        stuck["reason"].as_str().unwrap().contains("catchup = \"none\""),
        "{stuck}"
    );
}

#[test]
fn runs_filters_by_schedule_state_and_limit() {
    let db = scenario();
    let ids = |out: &Output| -> Vec<String> {
        out.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["schedule"].as_str().unwrap().to_string())
            .collect()
    };
    let out = db.cmd(&["runs", "--schedule", "report", "--json"]);
    assert_eq!(ids(&out), ["report"]);
    let out = db.cmd(&["runs", "--state", "skipped", "--json"]);
    let mut got = ids(&out);
    got.sort();
    assert_eq!(got, ["payroll", "stuck"]);
    let out = db.cmd(&["runs", "--state", "failed,dead", "--json"]);
    assert_eq!(out.json(), serde_json::json!([]));
    let out = db.cmd(&["runs", "--state", "failed"]);
    assert_eq!(out.code, 0);
    assert_has(&out.stdout, &["no runs (state failed)"]);
    let out = db.cmd(&["runs", "--limit", "1", "--json"]);
    assert_eq!(out.json().as_array().unwrap().len(), 1);
}

#[test]
fn runs_rejects_an_unknown_state_listing_the_valid_ones() {
    let db = scenario();
    let out = db.cmd(&["runs", "--state", "done"]);
    assert_eq!(out.code, 2);
    assert!(out.stdout.is_empty());
    assert_has(
        &out.stderr,
        &[
            "unknown state `done`",
            "pending, running, retry_wait, needs_human",
            "expired",
        ],
    );
}

#[test]
fn show_has_the_run_its_attempts_steps_and_events() {
    let db = scenario();
    let id = run_id(&db, "flaky", "2026-06-06");
    let out = db.cmd(&["show", &id.to_string(), "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    for key in [
        "id",
        "tenant",
        "schedule",
        "window_key",
        "state",
        "attempts",
        "reason",
        "updated_at",
        "attempt_list",
        "steps",
        "events",
    ] {
        assert!(v.get(key).is_some(), "show --json lacks {key}: {v}");
    }
    assert_eq!(v["id"], id);
    assert_eq!(v["state"], "succeeded");
    let attempts = v["attempt_list"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["n"], 1);
    assert_eq!(attempts[0]["status"], "failed");
    assert_eq!(attempts[0]["class"], "retryable");
    assert_eq!(attempts[0]["exit_code"], 75);
    assert_eq!(attempts[1]["status"], "succeeded");
    assert_eq!(attempts[1]["summary"], "simulated attempt 2");
    let steps = v["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| s["name"] == "deliver" && s["side_effect"] == true)
    );
    let events = v["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"window_opened"));
    assert!(kinds.contains(&"retry_scheduled"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"succeeded"));
    for e in events {
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["at", "kind", "run", "schedule", "detail"]);
        assert_eq!(e["run"], id);
        assert_eq!(e["schedule"], "flaky");
    }

    let out = db.cmd(&["show", &id.to_string()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "ATTEMPTS",
            "#1 failed (retryable), exit 75",
            "summary: simulated attempt 2",
            "STEPS",
            "EVENTS",
            "retry_scheduled",
            "Asia/Shanghai",
        ],
    );
}

#[test]
fn show_an_unknown_run_is_exit_1_and_a_bad_id_exit_2() {
    let db = scenario();
    let out = db.cmd(&["show", "9999"]);
    assert_eq!(out.code, 1);
    assert_has(&out.stderr, &["run 9999 not found"]);
    let out = db.cmd(&["show", "report"]);
    assert_eq!(out.code, 2);
    assert_has(&out.stderr, &["not a run id"]);
}

#[test]
fn events_filter_by_run_schedule_kind_and_limit() {
    let db = scenario();
    let id = run_id(&db, "report", "2026-06-06");
    let out = db.cmd(&["events", "--run", &id.to_string(), "--json", "--limit", "0"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let all = out.json();
    let all = all.as_array().unwrap();
    assert!(all.iter().all(|e| e["run"] == id));
    let ats: Vec<&str> = all.iter().map(|e| e["at"].as_str().unwrap()).collect();
    let mut sorted = ats.clone();
    sorted.sort();
    assert_eq!(ats, sorted, "chronological");
    assert_eq!(all[0]["kind"], "window_opened");
    assert_eq!(all[0]["detail"]["window_key"], "2026-06-06");

    let out = db.cmd(&["events", "--schedule", "report", "--kind", "gate", "--json"]);
    let gates = out.json();
    let gates = gates.as_array().unwrap();
    assert_eq!(gates.len(), 4, "3 waits and a pass");
    assert!(
        gates
            .iter()
            .all(|e| e["kind"] == "gate" && e["schedule"] == "report")
    );
    assert_eq!(gates[3]["detail"]["result"], "pass");

    let out = db.cmd(&[
        "events",
        "--schedule",
        "report",
        "--kind",
        "gate,claimed",
        "--json",
    ]);
    assert_eq!(out.json().as_array().unwrap().len(), 5);

    let out = db.cmd(&["events", "--run", &id.to_string(), "--limit", "2", "--json"]);
    let last2: Vec<String> = out
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(last2, ["step", "succeeded"], "the latest two, oldest first");

    let out = db.cmd(&["events", "--schedule", "report"]);
    assert_eq!(out.code, 0);
    assert_has(
        &out.stdout,
        &[
            "AT",
            "KIND",
            "DETAIL",
            "upstream wait: not ready until",
            "window_opened",
        ],
    );

    let out = db.cmd(&["events", "--run", "9999"]);
    assert_eq!(out.code, 1);
    assert_has(&out.stderr, &["run 9999 not found"]);
    let out = db.cmd(&["events", "--run", "1", "--schedule", "report"]);
    assert_eq!(out.code, 2, "--run and --schedule exclude each other");
}

#[test]
fn explain_a_run_that_waited_on_a_gate_then_ran() {
    let db = scenario();
    let out = db.cmd(&["explain", "report", "--window", "2026-06-06"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "report 2026-06-06 (Asia/Shanghai)",
            "ran — attempt 1 succeeded at 09:15:30",
            "window opened 09:00 (closes 10:00)",
            "gate upstream waited 3 times (not ready until",
            "passed 09:15",
            "claimed 09:15:00 by main (15m after due)",
            "attempt 1 succeeded 09:15:30 — \"simulated attempt 1\"",
        ],
    );
    // The default window is the most recent one: the same run here.
    let out = db.cmd(&["explain", "report"]);
    assert_eq!(out.code, 0);
    assert_has(
        &out.stdout,
        &[
            "report 2026-06-06 (Asia/Shanghai)",
            "gate upstream waited 3 times",
        ],
    );
}

#[test]
fn explain_a_retried_run() {
    let db = scenario();
    let out = db.cmd(&["explain", "flaky"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "ran — attempt 2 succeeded",
            "after 1 failed attempt",
            "claimed 09:30:00 by main (on time)",
            "attempt 1 failed 09:30:30 (retryable): exit code 75",
            "retry scheduled: attempt 2 of 3 not before 09:32:30",
            "attempt 2 claimed 09:32:30 by main",
            "attempt 2 succeeded",
        ],
    );
}

#[test]
fn explain_a_missed_window() {
    let db = scenario();
    let out = db.cmd(&["explain", "stuck", "--window", "2026-06-06"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "did not run — missed: window closed at 2026-06-06 10:00:00 +08:00 before the run could start",
            "last hold: gate upstream waits: not ready until",
            "missed and not caught up (catchup = \"none\")",
            "gate upstream waited 12 times",
            "missed 10:00",
        ],
    );
    assert!(!out.stdout.contains("claimed"), "{}", out.stdout);
}

#[test]
fn explain_a_window_skipped_by_the_calendar() {
    let db = scenario();
    let out = db.cmd(&["explain", "payroll", "--window", "2026-06-06"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "did not run — skipped by the calendar: 2026-06-06 is not a business day in cn",
            "window due 09:00 skipped: calendar:",
        ],
    );
    assert!(!out.stdout.contains("catch-up"), "{}", out.stdout);
}

#[test]
fn explain_a_window_held_by_the_kill_switch() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &scenario_config());
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:30:00Z",
        vec![("report", sim_agent(vec![SimAttempt::default()]))],
        vec![("report", "upstream", SimGateRule::Pass)],
    );
    d.run_until(t("2026-06-06T00:50:00Z")).unwrap();
    let now = d.now();
    d.store()
        .unwrap()
        .write(|tx| tx.set_switch("kill", true, "alice", "incident 42", now))
        .unwrap();
    d.run_until(t("2026-06-06T03:00:00Z")).unwrap();
    let db = Db { dir };
    let out = db.cmd(&["explain", "report"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "did not run — missed: window closed at 2026-06-06 10:00:00 +08:00 before the run could start",
            "kill switch turned on 08:50 by alice: \"incident 42\"",
            "held by the kill switch from 09:00: global kill switch on (by alice: incident 42)",
            "missed 10:00",
        ],
    );
    assert!(!out.stdout.contains("claimed"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("released"),
        "held until the window closed:\n{}",
        out.stdout
    );
}

/// The scheduler is down across the 2026-06-07 window, then comes back.
fn downtime(dir: &TempDir) -> Driver {
    let toml = format!(
        r#"{}
[[schedule]]
id = "report"
agent = "sim"
cron = "0 9 * * *"
close_after = "1h"
catchup = "all"
"#,
        base()
    );
    let cfg = config(dir, &toml);
    let mut d = driver(
        dir,
        cfg,
        "2026-06-06T00:30:00Z",
        vec![("report", sim_agent(vec![SimAttempt::default()]))],
        vec![],
    );
    d.run_until(t("2026-06-06T03:00:00Z")).unwrap();
    d.crash("main");
    d.run_until(t("2026-06-07T02:30:00Z")).unwrap();
    d
}

#[test]
fn explain_a_window_that_never_opened_then_was_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = downtime(&dir);
    let cfg_path = dir.path().join("agentcron.toml");
    let db_path = dir.path().join("test.db");
    let explain = |window: &str| {
        run(&[
            "--config",
            cfg_path.to_str().unwrap(),
            "--db",
            db_path.to_str().unwrap(),
            "explain",
            "report",
            "--window",
            window,
        ])
    };
    let out = explain("2026-06-07");
    assert_eq!(out.code, 1, "no run for that window");
    assert_has(
        &out.stdout,
        &[
            "report 2026-06-07 (Asia/Shanghai): no run: this window never opened",
            "the window was due 2026-06-07 09:00",
            "no scheduler activity since",
            "its most recent windows: 2026-06-06 (succeeded)",
        ],
    );
    let out = explain("2026-13-45");
    assert_eq!(out.code, 1);
    assert_has(&out.stdout, &["is not a window of report"]);

    d.restart("main").unwrap();
    d.run_until(t("2026-06-07T03:00:00Z")).unwrap();
    let out = explain("2026-06-07");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "ran — attempt 1 succeeded",
            "window due 09:00 opened 10:30 as a catch-up run (backfill pool)",
            "no scheduler activity recorded between 2026-06-06",
            "main started",
            "catch-up planned 10:30 for 1 window due",
            "1 caught up",
        ],
    );
}

/// Issue 52: a schedule the config names that has simply not run yet is an
/// answer (exit 0: when it first fires), not a failure.
#[test]
fn explain_a_schedule_that_has_not_run_yet_says_when_it_will() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "{}\n[[schedule]]\nid = \"fresh\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\n",
        base()
    );
    let cfg = config(&dir, &toml);
    let mut d = driver(&dir, cfg, "2026-06-06T02:00:00Z", vec![], vec![]);
    d.run_until(t("2026-06-06T02:10:00Z")).unwrap();
    let db = Db { dir };
    let out = db.cmd(&["explain", "fresh"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_has(
        &out.stdout,
        &[
            "fresh: no runs in this database",
            "per the config its next window, ",
            " opens ",
        ],
    );
    let out = db.cmd(&["explain", "fresh", "--json"]);
    assert_eq!(out.code, 0);
    assert_eq!(out.json()["verdict"], "no_runs");
}

#[test]
fn explain_a_schedule_without_runs_is_exit_1() {
    let db = scenario();
    let out = db.cmd(&["explain", "nosuch"]);
    assert_eq!(out.code, 1);
    assert_has(
        &out.stdout,
        &["nosuch: no runs in this database", "nosuch is not in"],
    );
}

#[test]
fn the_database_comes_from_the_config_or_from_db_alone() {
    let db = scenario();
    // No --db: the config's [scheduler] database.
    let out = run(&["--config", db.config().to_str().unwrap(), "runs", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json().as_array().unwrap().len(), 4);
    // --db without any config: still works, times in UTC.
    let missing = db.dir.path().join("nowhere.toml");
    let out = run(&[
        "--config",
        missing.to_str().unwrap(),
        "--db",
        db.path().to_str().unwrap(),
        "explain",
        "report",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(&out.stdout, &["report 2026-06-06 (UTC)", "window opened 01:00"]);
}

#[test]
fn a_missing_database_is_exit_2_with_a_plain_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    for verb in [
        vec!["runs"],
        vec!["show", "1"],
        vec!["events"],
        vec!["explain", "report"],
    ] {
        let mut args = vec!["--db", missing.to_str().unwrap()];
        args.extend(verb.iter().copied());
        let out = run(&args);
        assert_eq!(out.code, 2, "{verb:?}");
        assert_has(
            &out.stderr,
            &[&format!(
                "no ledger at {} (start the scheduler with `agentcron run --headless` or the console first, or pass --db)",
                missing.display()
            )],
        );
        assert!(!missing.exists(), "a read never creates the database");
    }
    // No --db and no config to find one in.
    let out = run(&["--config", dir.path().join("x.toml").to_str().unwrap(), "runs"]);
    assert_eq!(out.code, 2);
    assert_has(&out.stderr, &["no config at"]);
    // Not a database.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, "not sqlite at all, just text\n".repeat(200)).unwrap();
    let out = run(&["--db", junk.to_str().unwrap(), "runs"]);
    assert_eq!(out.code, 2);
    assert_has(&out.stderr, &["is not an agentcron database or is corrupt"]);
}

#[test]
fn explain_overlap_the_human_gate_and_the_dead_letter_queue() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{}
[[schedule]]
id = "busy"
agent = "sim"
every = "1m"

[[schedule]]
id = "money"
agent = "sim"
cron = "0 9 * * *"

[[schedule]]
id = "doomed"
agent = "sim"
cron = "0 9 * * *"
retry = {{ max_attempts = 2, backoff = "fixed", initial = "1m", jitter = 0.0 }}
"#,
        base()
    );
    let cfg = config(&dir, &toml);
    let exit = |code| SimAttempt {
        end: SimEnd::Exit(code),
        ..Default::default()
    };
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:30Z",
        vec![
            (
                "busy",
                sim_agent(vec![SimAttempt {
                    latency: chrono::TimeDelta::seconds(150),
                    ..Default::default()
                }]),
            ),
            ("money", sim_agent(vec![exit(77)])),
            ("doomed", sim_agent(vec![exit(75)])),
        ],
        vec![],
    );
    d.run_until(t("2026-06-06T01:10:00Z")).unwrap();
    let db = Db { dir };

    let out = db.cmd(&["explain", "busy", "--window", "2026-06-06T09:01+08:00"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            // The scheduler was born at 08:59:30: the 08:59 window was due before
            // it and never opens (DESIGN.md "Birth"); 09:00's run is the one running.
            "did not run — skipped because of overlap: window 2026-06-06T09:00+08:00 still running (overlap = skip)",
            "skipped 09:01: overlap:",
        ],
    );

    let out = db.cmd(&["explain", "money"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let id = run_id(&db, "money", "2026-06-06");
    assert_has(
        &out.stdout,
        &[
            "stopped — needs a human: exit code 77",
            &format!("agentcron approve {id} --reason"),
            "attempt 1 failed 09:00:30 (needs_human)",
            "parked for a human 09:00:30",
        ],
    );

    let out = db.cmd(&["explain", "doomed"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "failed — dead-lettered after 2 attempts: exit code 75",
            "retry scheduled: attempt 2 of 2 not before 09:01:30",
            "attempt 2 failed 09:02 (retryable)",
            "dead-lettered 09:02 after 2 of 2 attempts",
            "agentcron dlq requeue",
        ],
    );
}

/// `report2` has two gates: `upstream` waits until 09:12, `token` passes at once.
fn two_gates() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        r#"{}{}
[[schedule.gate]]
kind = "command"
name = "token"
command = ["true"]
"#,
        base(),
        gated("report2")
    );
    let cfg = config(&dir, &toml);
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:30:00Z",
        vec![("report2", sim_agent(vec![SimAttempt::default()]))],
        vec![
            (
                "report2",
                "upstream",
                SimGateRule::PassFrom(t("2026-06-06T01:12:00Z")),
            ),
            ("report2", "token", SimGateRule::Pass),
        ],
    );
    d.run_until(t("2026-06-06T03:00:00Z")).unwrap();
    Db { dir }
}

#[test]
fn explain_names_every_gate_that_let_a_run_through() {
    let db = two_gates();
    let out = db.cmd(&["explain", "report2", "--window", "2026-06-06"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(
        &out.stdout,
        &[
            "gate upstream waited 3 times (not ready until",
            "  gates passed: upstream (after 3 waits), token;\n  claimed 09:15:00 by main (15m after due);",
        ],
    );
    // A run without gates names none.
    let db = scenario();
    let out = db.cmd(&["explain", "flaky"]);
    assert!(
        !out.stdout.contains("gates passed"),
        "flaky has no gates:\n{}",
        out.stdout
    );
}

#[test]
fn explain_json_is_the_story_as_data() {
    let db = scenario();
    let out = db.cmd(&["explain", "report", "--window", "2026-06-06", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["schedule", "window_key", "run", "verdict", "steps", "next"]
    );
    assert_eq!(v["schedule"], "report");
    assert_eq!(v["window_key"], "2026-06-06");
    assert_eq!(v["run"], run_id(&db, "report", "2026-06-06"));
    assert_eq!(v["verdict"], "succeeded");
    assert!(v["next"].is_null(), "{v}");
    let steps = v["steps"].as_array().unwrap();
    for s in steps {
        let keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["at", "what", "detail"]);
    }
    let whats: Vec<&str> = steps.iter().map(|s| s["what"].as_str().unwrap()).collect();
    assert_eq!(
        whats,
        [
            "window_opened",
            "gate_waited",
            "gate_passed",
            "gates_passed",
            "claimed",
            "succeeded"
        ]
    );
    assert_eq!(steps[0]["at"], "2026-06-06T01:00:00.000Z");
    assert_eq!(steps[0]["detail"], "window opened 09:00 (closes 10:00)");
    assert_eq!(steps[4]["detail"], "claimed 09:15:00 by main (15m after due)");
    // The text form tells the same steps.
    let text = db.cmd(&["explain", "report", "--window", "2026-06-06"]).stdout;
    for s in steps {
        assert!(text.contains(s["detail"].as_str().unwrap()), "{s} in\n{text}");
    }

    // No run: the verdict says why, with the same exit code as the text form.
    let out = db.cmd(&["explain", "report", "--window", "2026-06-07", "--json"]);
    assert_eq!(out.code, 1);
    let v = out.json();
    assert!(v["run"].is_null());
    assert_eq!(v["window_key"], "2026-06-07");
    assert_eq!(v["verdict"], "never_opened");
    assert_eq!(v["steps"][0]["what"], "due");
    assert_eq!(v["steps"][0]["at"], "2026-06-07T01:00:00.000Z");
    let out = db.cmd(&["explain", "report", "--window", "2026-13-45", "--json"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.json()["verdict"], "not_a_window");
    let out = db.cmd(&["explain", "nosuch", "--json"]);
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["verdict"], "no_runs");
    assert!(v["window_key"].is_null());
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

#[test]
fn explain_json_says_what_moves_a_stuck_run_on() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "{}\n[[schedule]]\nid = \"money\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\n",
        base()
    );
    let cfg = config(&dir, &toml);
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:30Z",
        vec![(
            "money",
            sim_agent(vec![SimAttempt {
                end: SimEnd::Exit(77),
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-06T01:10:00Z")).unwrap();
    let db = Db { dir };
    let id = run_id(&db, "money", "2026-06-06");
    let out = db.cmd(&["explain", "money", "--window", "2026-06-06", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["verdict"], "needs_human");
    assert_eq!(
        v["next"],
        format!("agentcron approve {id} --reason … or agentcron reject {id} --reason …")
    );
    // A not-yet window says when it opens.
    let out = db.cmd(&["explain", "money", "--window", "2099-06-06", "--json"]);
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["verdict"], "not_yet");
    assert_eq!(v["next"], "it opens 2099-06-06 09:00");
}

/// Issue 52: a typo saved in the file (the schedulers still run the last good
/// version) does not stop the read verbs: each warns once on stderr and reads
/// the ledger; `status` exits by the schedulers' health (none here: 1) and
/// says `config_file_invalid`; `check` is what fails on the file.
#[test]
fn the_read_verbs_read_the_ledger_when_the_file_does_not_load() {
    let db = scenario();
    let good = std::fs::read_to_string(db.config()).unwrap();
    let broken = good.replacen("cron = \"30 9 * * *\"", "evrey = \"5m\"", 1);
    assert_ne!(good, broken);
    std::fs::write(db.config(), &broken).unwrap();
    let config = db.config().display().to_string();
    let flaky = run_id(&db, "flaky", "2026-06-06").to_string();
    for verb in [
        vec!["runs"],
        vec!["runs", "--json"],
        vec!["events"],
        vec!["events", "--schedule", "report"],
        vec!["show", flaky.as_str()],
        vec!["explain", "report", "--window", "2026-06-06"],
        vec!["dlq", "list"],
    ] {
        // No --db: the file names the ledger even though it does not load.
        let mut args = vec!["--config", config.as_str()];
        args.extend(verb.iter().copied());
        let out = run(&args);
        assert_eq!(out.code, 0, "{verb:?}: {}", out.stderr);
        assert_has(
            &out.stderr,
            &[
                &format!("warning: config {config} does not load ("),
                "evrey",
                "run `agentcron check`",
            ],
        );
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{verb:?} printed nothing");
    }
    let out = run(&["--config", config.as_str(), "runs", "--json"]);
    assert_eq!(out.json().as_array().unwrap().len(), 4);
    // No scheduler alive here: 1, whatever the file.
    let out = run(&["--config", config.as_str(), "status", "--json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let status = out.json();
    assert_eq!(status["config_file_invalid"], true, "{status}");
    assert!(
        status["config_file_error"].as_str().unwrap().contains("evrey"),
        "{status}"
    );
    // `check` is where the file fails.
    let out = run(&["--config", config.as_str(), "check"]);
    assert_eq!(out.code, 1);
    assert_has(&out.stderr, &["unknown key `evrey`"]);
    // Mended: no warning, and the JSON says so.
    std::fs::write(db.config(), &good).unwrap();
    let out = run(&["--config", config.as_str(), "status", "--json"]);
    assert_eq!(out.json()["config_file_invalid"], false);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

/// Issue 52: `--kind` takes every kind the ledger can hold (the list comes
/// from the event type itself), not only those of runs.
#[test]
fn events_kind_accepts_every_kind_the_ledger_can_hold() {
    let db = scenario();
    for kind in agentcron::core::event::KINDS {
        let out = db.cmd(&["events", "--kind", kind]);
        assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
    }
    let out = db.cmd(&[
        "events",
        "--kind",
        "config_rejected,config_waiting,scheduler_lost",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_has(&out.stdout, &["no events"]);
    let out = db.cmd(&["events", "--kind", "config_rejectd"]);
    assert_eq!(out.code, 2);
    assert_has(&out.stderr, &["did you mean `config_rejected`?"]);
}

/// Issue 52: a cost summed from floating-point reports is shown rounded —
/// `$0.0051` in text and `0.0051` in JSON, never `0.0050999999999999999`.
#[test]
fn show_rounds_the_cost_of_an_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "{}\n[[schedule]]\nid = \"spend\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\n",
        base()
    );
    let cfg = config(&dir, &toml);
    let noisy = 0.0017 + 0.0017 + 0.0017;
    assert_ne!(noisy, 0.0051, "the sum is not exactly 0.0051");
    let mut d = driver(
        &dir,
        cfg,
        "2026-06-06T00:59:30Z",
        vec![(
            "spend",
            sim_agent(vec![SimAttempt {
                tokens: 300,
                cost_usd: noisy,
                ..Default::default()
            }]),
        )],
        vec![],
    );
    d.run_until(t("2026-06-06T01:10:00Z")).unwrap();
    let db = Db { dir };
    let id = run_id(&db, "spend", "2026-06-06").to_string();
    let out = db.cmd(&["show", &id, "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cost = &out.json()["attempt_list"][0]["cost_usd"];
    assert_eq!(cost.to_string(), "0.0051", "{}", out.stdout);
    let out = db.cmd(&["show", &id]);
    assert_has(&out.stdout, &["usage: 300 tokens, $0.0051"]);
}
