//! Issue 19: the command line refuses typos and says what it may have meant,
//! repeating an action already in effect is not an error (exit 0, "already …",
//! the first reason kept — the same for every verb), `dlq requeue --schedule S
//! --all`, `explain --at`, `--tenant`, and who acts (`--by`, `$USER`, the OS
//! account). Runs are prepared by the engine on a virtual clock (in 2027, after
//! the real clock the verbs read).

mod support;

use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::Store;
use agentcron::store::types::*;
use assert_cmd::Command;
use chrono::TimeDelta;
use support::*;

fn cli_env(dir: &tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::cargo_bin("agentcron").unwrap();
    c.arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(dir.path().join("test.db"))
        .args(args)
        .env("USER", "tester");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn cli(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    cli_env(dir, args, &[])
}

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Exit code and the whole output.
fn run(dir: &tempfile::TempDir, args: &[&str]) -> (Option<i32>, String) {
    let o = cli(dir, args);
    (o.status.code(), out(&o))
}

const SCHEDULES: &str = r#"
[tenants.acme]
[tenants.globex]

[agents.stepper]
kind = "command"
command = ["true"]
steps = [{ name = "fetch" }, { name = "summarize" }, { name = "deliver", side_effect = true }]

[[schedule]]
id = "hourly-sync"
tenant = "acme"
agent = "sim"
cron = "0 * * * *"
close_after = "30m"
retry = { max_attempts = 1, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }

[[schedule]]
id = "refund-review"
tenant = "acme"
agent = "stepper"
on_event = "refund.requested"
close_after = "1h"

[[schedule]]
id = "daily-report"
tenant = "globex"
agent = "sim"
cron = "0 9 * * *"
"#;

/// hourly-sync: two dead runs (02:00 and 03:00); refund-review: one run
/// waiting for a human (R-1).
fn prepared(dir: &tempfile::TempDir) -> Store {
    let cfg = config(dir, &format!("{BASE}{SCHEDULES}"));
    let dead = || SimAttempt {
        end: SimEnd::Exit(75),
        latency: TimeDelta::seconds(5),
        ..Default::default()
    };
    let human = sim_agent(vec![SimAttempt {
        end: SimEnd::Exit(77),
        latency: TimeDelta::seconds(5),
        ..Default::default()
    }]);
    let mut d = driver(
        dir,
        cfg,
        "2027-06-01T01:59:00Z",
        vec![
            ("hourly-sync", sim_agent(vec![dead(), dead()])),
            ("refund-review", human),
        ],
        vec![],
    );
    let store = d.store().unwrap();
    agentcron::operator::post_event(
        &store,
        "refund.requested",
        Some("R-1"),
        &serde_json::json!({}),
        d.now(),
    )
    .unwrap();
    d.run_until(t("2027-06-01T03:10:00Z")).unwrap();
    let dead: Vec<Run> = runs(&store, "hourly-sync")
        .into_iter()
        .filter(|r| r.state == RunState::Dead)
        .collect();
    assert_eq!(dead.len(), 2, "{:?}", runs(&store, "hourly-sync"));
    assert_eq!(
        runs(&store, "refund-review").pop().map(|r| r.state),
        Some(RunState::NeedsHuman)
    );
    store
}

#[test]
fn unknown_schedule_ids_are_refused_with_did_you_mean_in_every_verb() {
    let dir = tempfile::tempdir().unwrap();
    let _store = prepared(&dir);
    let typo = "hourly-snyc";
    let cases: Vec<Vec<&str>> = vec![
        vec!["runs", "--schedule", typo],
        vec!["events", "--schedule", typo],
        vec!["explain", typo],
        vec!["explain", typo, "--at", "2027-06-01T02:20:00Z"],
        vec!["next", typo],
        vec!["trigger", typo],
        vec!["pause", typo, "--reason", "x"],
        vec!["resume", typo, "--yes"],
        vec!["circuit", "close", typo, "--reason", "x"],
        vec![
            "backfill",
            typo,
            "--from",
            "2027-06-01T00:00:00Z",
            "--to",
            "2027-06-01T01:00:00Z",
        ],
        vec!["dlq", "requeue", "--schedule", typo, "--all", "--reason", "x"],
    ];
    for args in cases {
        let (code, text) = run(&dir, &args);
        assert_eq!(code, Some(1), "{args:?}: {text}");
        assert!(
            text.contains("no schedule `hourly-snyc`") || text.contains("hourly-snyc is not in"),
            "{args:?}: {text}"
        );
        assert!(text.contains("did you mean `hourly-sync`?"), "{args:?}: {text}");
    }
    // Far from every id: the ids are listed instead.
    let (code, text) = run(&dir, &["runs", "--schedule", "nope"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("schedules: hourly-sync, refund-review, daily-report"),
        "{text}"
    );
    // A known schedule with no runs is not a typo.
    let (code, text) = run(&dir, &["runs", "--schedule", "daily-report"]);
    assert_eq!((code, text.trim()), (Some(0), "no runs (schedule daily-report)"));
}

#[test]
fn unknown_event_kinds_and_tenants_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _store = prepared(&dir);
    let (code, text) = run(&dir, &["events", "--kind", "nonsense"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("unknown event kind `nonsense`; kinds: "), "{text}");
    assert!(text.contains("dead_lettered"), "{text}");
    let (code, text) = run(&dir, &["events", "--kind", "claimed,dead_letered"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("did you mean `dead_lettered`?"), "{text}");
    let (code, _) = run(&dir, &["events", "--kind", "claimed,dead_lettered"]);
    assert_eq!(code, Some(0));

    let (code, text) = run(&dir, &["runs", "--tenant", "acmee"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("did you mean `acme`?"), "{text}");
    let (code, text) = run(&dir, &["runs", "--tenant", "globex"]);
    assert_eq!((code, text.trim()), (Some(0), "no runs (tenant globex)"));
    let o = cli(&dir, &["runs", "--tenant", "acme", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(3), "{rows}");
    assert!(rows.as_array().unwrap().iter().all(|r| r["tenant"] == "acme"));
}

#[test]
fn approve_resume_after_accepts_only_declared_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = prepared(&dir);
    let human = runs(&store, "refund-review").pop().unwrap();
    let id = human.id.to_string();
    let (code, text) = run(
        &dir,
        &["approve", &id, "--reason", "ok", "--resume-after", "nosuchstep"],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("`nosuchstep` is not a step of refund-review's agent `stepper`; its steps: fetch, summarize, deliver"),
        "{text}"
    );
    let (code, text) = run(
        &dir,
        &["approve", &id, "--reason", "ok", "--resume-after", "sumarize"],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("did you mean `summarize`?"), "{text}");
    assert_eq!(
        store.read(|tx| tx.run(human.id)).unwrap().state,
        RunState::NeedsHuman
    );
    let (code, text) = run(
        &dir,
        &["approve", &id, "--reason", "ok", "--resume-after", "summarize"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        store.read(|tx| tx.run(human.id)).unwrap().resume_after.as_deref(),
        Some("summarize")
    );
}

/// Every verb alike: the second time exits 0, says "already", and the first
/// reason stays recorded (one change in the trace, not two).
#[test]
fn repeating_an_action_already_in_effect_exits_0_and_keeps_the_first_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = prepared(&dir);
    let changes = |kind: &str| {
        store
            .read(|tx| {
                tx.events(&EventFilter {
                    kinds: vec![kind.into()],
                    ..EventFilter::default()
                })
            })
            .unwrap()
    };

    let (code, text) = run(&dir, &["kill", "--reason", "incident 7"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(&dir, &["kill", "--reason", "second thoughts"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("the kill switch is already on"), "{text}");
    assert!(
        text.contains("incident 7") && text.contains("the first reason is kept"),
        "{text}"
    );
    assert_eq!(
        store.read(|tx| tx.switch("kill")).unwrap().unwrap().reason,
        "incident 7"
    );
    let (code, _) = run(&dir, &["unkill", "--reason", "over"]);
    assert_eq!(code, Some(0));
    let (code, text) = run(&dir, &["unkill", "--reason", "over again"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("the kill switch is already off"), "{text}");
    assert_eq!(changes("switch_changed").len(), 2, "one on, one off");

    let (code, _) = run(&dir, &["pause", "daily-report", "--reason", "db move"]);
    assert_eq!(code, Some(0));
    let (code, text) = run(&dir, &["pause", "daily-report", "--reason", "other"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("daily-report is already paused (by tester: db move)"),
        "{text}"
    );
    let st = store.read(|tx| tx.schedule_state("daily-report")).unwrap();
    assert_eq!(st.paused_reason.as_deref(), Some("by tester: db move"));
    let (code, _) = run(&dir, &["resume", "daily-report", "--yes"]);
    assert_eq!(code, Some(0));
    let (code, text) = run(&dir, &["resume", "daily-report", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("already resumed"), "{text}");

    let (code, text) = run(&dir, &["circuit", "close", "daily-report", "--reason", "x"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("the circuit of daily-report is already closed"),
        "{text}"
    );

    let human = runs(&store, "refund-review").pop().unwrap().id.to_string();
    let (code, _) = run(&dir, &["approve", &human, "--reason", "called the customer"]);
    assert_eq!(code, Some(0));
    let (code, text) = run(&dir, &["approve", &human, "--reason", "again"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("was already approved by tester"), "{text}");
    assert!(text.contains("called the customer"), "{text}");
    assert_eq!(changes("approved").len(), 1);
    // Rejecting an approved run is not a repeat: refused.
    let (code, _) = run(&dir, &["reject", &human, "--reason", "no"]);
    assert_eq!(code, Some(1));

    let dead = runs(&store, "hourly-sync")[0].id.to_string();
    let (code, _) = run(&dir, &["dlq", "requeue", &dead, "--reason", "fixed"]);
    assert_eq!(code, Some(0));
    let (code, text) = run(&dir, &["dlq", "requeue", &dead, "--reason", "fixed again"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("was already requeued by tester"), "{text}");
    assert_eq!(changes("requeued").len(), 1);
}

#[test]
fn dlq_requeue_all_of_a_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let store = prepared(&dir);
    let (code, text) = run(&dir, &["dlq", "requeue", "--all", "--reason", "x"]);
    assert_eq!(code, Some(2), "--all needs --schedule: {text}");
    let (code, text) = run(
        &dir,
        &[
            "dlq",
            "requeue",
            "--schedule",
            "hourly-sync",
            "--all",
            "--reason",
            "upstream fixed",
            "--by",
            "dana",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("2 dead run(s) of hourly-sync requeued by dana"),
        "{text}"
    );
    let states: Vec<RunState> = runs(&store, "hourly-sync").iter().map(|r| r.state).collect();
    assert!(states.iter().all(|s| *s == RunState::RetryWait), "{states:?}");
    let (code, text) = run(
        &dir,
        &[
            "dlq",
            "requeue",
            "--schedule",
            "hourly-sync",
            "--all",
            "--reason",
            "again",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("hourly-sync has no dead runs"), "{text}");
}

#[test]
fn explain_at_finds_the_window_covering_that_time() {
    let dir = tempfile::tempdir().unwrap();
    let _store = prepared(&dir);
    // 03:20 UTC is 11:20 in Shanghai, inside the 11:00 window (02:00..03:00 UTC ran).
    let (code, text) = run(&dir, &["explain", "hourly-sync", "--at", "2027-06-01T02:20:00Z"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("hourly-sync 2027-06-01T10:00+08:00"), "{text}");
    // The same instant in the schedule's zone.
    let (code, text) = run(&dir, &["explain", "hourly-sync", "--at", "2027-06-01 10:20"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("hourly-sync 2027-06-01T10:00+08:00"), "{text}");
    let (code, text) = run(&dir, &["explain", "hourly-sync", "--at", "soon"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is not a time"), "{text}");
    let (code, text) = run(&dir, &["explain", "hourly-sync", "--at", "1990-01-01T00:00:00Z"]);
    assert_eq!(code, Some(1), "{text}");
}

#[test]
fn tenant_wide_pause_and_kill() {
    let dir = tempfile::tempdir().unwrap();
    let store = prepared(&dir);
    let (code, text) = run(&dir, &["pause", "--tenant", "acme", "--reason", "acme migration"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("hourly-sync, refund-review paused by tester"),
        "{text}"
    );
    let paused = |id: &str| store.read(|tx| tx.schedule_state(id)).unwrap().paused;
    assert!(paused("hourly-sync") && paused("refund-review") && !paused("daily-report"));
    let (code, text) = run(&dir, &["pause", "--tenant", "acme", "--reason", "again"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("already paused"), "{text}");
    let (code, text) = run(&dir, &["kill", "--tenant", "globex", "--reason", "runaway spend"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("tenant globex killed by tester: daily-report paused"),
        "{text}"
    );
    assert!(paused("daily-report"));
    assert!(
        store.read(|tx| tx.switch("kill")).unwrap().is_none_or(|k| !k.on),
        "the global switch is untouched"
    );
    let (code, text) = run(&dir, &["kill", "--tenant", "globx", "--reason", "x"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("did you mean `globex`?"), "{text}");
    let (code, _) = run(
        &dir,
        &["kill", "--tenant", "globex", "--cancel-running", "--reason", "x"],
    );
    assert_eq!(code, Some(2), "--cancel-running is global only");
    let (code, text) = run(&dir, &["resume", "--tenant", "acme", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!paused("hourly-sync") && !paused("refund-review"));
}

#[test]
fn who_acts_is_by_then_user_then_the_os_account() {
    let dir = tempfile::tempdir().unwrap();
    let store = prepared(&dir);
    let actor = |id: &str| {
        store
            .read(|tx| tx.schedule_state(id))
            .unwrap()
            .paused_reason
            .unwrap_or_default()
    };
    let o = cli_env(
        &dir,
        &["pause", "hourly-sync", "--reason", "a", "--by", "dana"],
        &[],
    );
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(actor("hourly-sync"), "by dana: a");
    // An empty $USER (cron, containers) falls back to the OS account, never "operator".
    let o = cli_env(
        &dir,
        &["pause", "daily-report", "--reason", "b"],
        &[("USER", ""), ("LOGNAME", "")],
    );
    assert!(o.status.success(), "{}", out(&o));
    // SAFETY: getuid cannot fail; getpwuid's result is read at once.
    let account = unsafe {
        let pw = libc::getpwuid(libc::getuid());
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(actor("daily-report"), format!("by {account}: b"));
}

/// A window key or event id is one printable line (issue 44, item 11): a
/// newline is a usage error (exit 2) on the command line, nothing is queued,
/// and the operator function refuses it too (the API and console call it).
#[test]
fn a_window_key_or_event_id_with_a_newline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        r#"
[agents.a]
kind = "command"
command = ["true"]

[[schedule]]
id = "hourly"
agent = "a"
cron = "0 * * * *"

[[schedule]]
id = "on-go"
agent = "a"
on_event = "go"
"#,
    )
    .unwrap();
    let store = Store::open(&dir.path().join("test.db")).unwrap();
    let (code, text) = run(&dir, &["trigger", "hourly", "--window", "2026-01-01\nevil"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("control character"), "{text}");
    let (code, text) = run(&dir, &["event", "post", "go", "--id", "a\nb"]);
    assert_eq!(code, Some(2), "{text}");
    let (code, text) = run(&dir, &["event", "post", "go", "--id", "ok-1"]);
    assert_eq!(code, Some(0), "{text}");
    let runs = store.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    assert!(runs.iter().all(|r| !r.window_key.contains('\n')), "{runs:?}");
    let cfg = agentcron::config::load_str(
        &std::fs::read_to_string(dir.path().join("agentcron.toml")).unwrap(),
        &dir.path().join("agentcron.toml"),
    )
    .unwrap();
    let now = chrono::Utc::now();
    let refused = agentcron::operator::trigger(&store, &cfg, "hourly", Some("x\ny"), "t", now);
    assert!(matches!(
        refused,
        Err(agentcron::operator::ActionError::Refused(_))
    ));
    let refused = agentcron::operator::post_event(&store, "go", Some("x\r"), &serde_json::json!({}), now);
    assert!(matches!(
        refused,
        Err(agentcron::operator::ActionError::Refused(_))
    ));
}
