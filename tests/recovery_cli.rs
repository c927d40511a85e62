//! The recovery flows through the command line against a real headless
//! scheduler: events and triggers start runs, the operator verbs (approve, reject, dlq,
//! kill, unkill) act on them, and the database shows what happened. Waits poll
//! the database with a deadline, never a fixed time.

use agentcron::store::Store;
use agentcron::store::types::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentcron"))
}

fn agent() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recovery/agent.py")
}

fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = cli(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `f` until it returns Some, or panics after `LIMIT`.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Scheduler(Child);

impl Drop for Scheduler {
    fn drop(&mut self) {
        // SAFETY: signals our own child process.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn store(dir: &Path) -> Store {
    Store::open(&dir.join("test.db")).unwrap()
}

fn run_of(dir: &Path, schedule: &str, key: &str) -> Option<Run> {
    store(dir)
        .read(|tx| tx.find_run("default", schedule, key))
        .ok()
        .flatten()
}

/// Waits until the run of window `key` is in `state`.
fn wait_state(dir: &Path, schedule: &str, key: &str, state: RunState) -> Run {
    wait_for(&format!("{schedule}/{key} to be {state}"), || {
        run_of(dir, schedule, key).filter(|r| r.state == state)
    })
}

fn kinds(dir: &Path, run: i64) -> Vec<String> {
    events(dir, run).into_iter().map(|e| e.kind).collect()
}

fn events(dir: &Path, run: i64) -> Vec<Event> {
    store(dir)
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run),
                ..EventFilter::default()
            })
        })
        .unwrap()
}

fn attempts(dir: &Path, run: i64) -> Vec<Attempt> {
    store(dir).read(|tx| tx.attempts(run)).unwrap()
}

fn post(dir: &Path, id: &str) {
    ok(dir, &["event", "post", "go", "--id", id]);
}

#[test]
fn operator_verbs_drive_the_recovery_rules_of_a_live_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "1s"
alert = {{ kind = "file", path = "alerts.jsonl" }}

[agents.bot]
kind = "command"
command = ["python3", "{agent}"]
timeout = "8s"
env = {{ LEDGER = "ledger.txt", SCRIPT = "script.json" }}
steps = [{{ name = "fetch" }}, {{ name = "deliver", side_effect = true }}]

[agents.patient]
kind = "command"
command = ["python3", "{agent}"]
timeout = "60s"
env = {{ LEDGER = "ledger.txt", SCRIPT = "script.json" }}
steps = [{{ name = "fetch" }}, {{ name = "deliver", side_effect = true }}]

[[schedule]]
id = "jobs"
agent = "bot"
on_event = "go"
close_after = "10m"
overlap = "allow"
max_concurrency = 8
retry = {{ max_attempts = 2, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }}

[[schedule]]
id = "long"
agent = "patient"
on_event = "long"
close_after = "10m"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }}
"#,
            agent = agent().display()
        ),
    )
    .unwrap();
    let fetch_then = |code: i32| json!({"do": ["fetch"], "exit": code});
    std::fs::write(
        d.join("script.json"),
        json!({
            "slow/1": {"sleep_before": {"deliver": 30}},
            "temp/1": fetch_then(75),
            "temp/2": fetch_then(75),
            "human1/1": fetch_then(77),
            "human2/1": fetch_then(77),
            "bad": fetch_then(65),
            "long/1": {"sleep_before": {"deliver": 30}},
        })
        .to_string(),
    )
    .unwrap();
    let log = std::fs::File::create(d.join("scheduler.log")).unwrap();
    let _scheduler = Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(d.join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for("the database", || d.join("test.db").exists().then_some(()));

    // Kill switch: a window opened under it waits, with the switch as the reason.
    ok(d, &["kill", "--reason", "incident 42"]);
    post(d, "held");
    let held = wait_for("the held run to explain itself", || {
        let r = run_of(d, "jobs", "held")?;
        kinds(d, r.id).contains(&"switch_held".to_string()).then_some(r)
    });
    assert_eq!(held.state, RunState::Pending);
    assert!(held.state_reason.as_deref().unwrap().contains("kill switch"));
    ok(d, &["unkill", "--reason", "incident over"]);
    wait_state(d, "jobs", "held", RunState::Succeeded);

    // kill --cancel-running stops a running attempt; after unkill it is retried.
    ok(d, &["event", "post", "long", "--id", "long"]);
    wait_for("long's fetch to be journaled", || {
        let r = run_of(d, "long", "long")?;
        let done = store(d).read(|tx| tx.completed_steps(r.id)).ok()?;
        done.contains(&"fetch".to_string()).then_some(r)
    });
    ok(d, &["kill", "--reason", "stop everything", "--cancel-running"]);
    let cancelled = wait_state(d, "long", "long", RunState::RetryWait);
    assert_eq!(attempts(d, cancelled.id)[0].status, AttemptStatus::Cancelled);
    ok(d, &["unkill", "--reason", "resume"]);
    let long = wait_state(d, "long", "long", RunState::Succeeded);
    assert_eq!(long.attempts, 2);
    let failed: Vec<_> = events(d, long.id)
        .into_iter()
        .filter(|e| e.kind == "failed")
        .collect();
    assert!(
        failed[0].detail["reason"]
            .as_str()
            .unwrap()
            .contains("kill switch")
    );

    // The rest at once: timeout, dead letter, human gate, non-retryable.
    for id in ["slow", "temp", "human1", "human2", "bad"] {
        post(d, id);
    }
    ok(d, &["trigger", "jobs", "--window", "by-hand"]);

    let dead = wait_state(d, "jobs", "temp", RunState::Dead);
    assert_eq!(dead.attempts, 2);
    let list: serde_json::Value = serde_json::from_str(&ok(d, &["dlq", "list", "--json"])).unwrap();
    assert!(
        list.as_array().unwrap().iter().any(|r| r["id"] == dead.id),
        "{list}"
    );
    let id = dead.id.to_string();
    ok(
        d,
        &[
            "dlq",
            "requeue",
            &id,
            "--reason",
            "upstream fixed",
            "--by",
            "carol",
        ],
    );
    let requeued = wait_state(d, "jobs", "temp", RunState::Succeeded);
    assert_eq!(requeued.attempts, 3);
    let k = kinds(d, requeued.id);
    for kind in ["dead_lettered", "alert", "requeued", "succeeded"] {
        assert!(k.contains(&kind.to_string()), "{kind} missing from {k:?}");
    }
    let list: serde_json::Value = serde_json::from_str(&ok(d, &["dlq", "list", "--json"])).unwrap();
    assert!(!list.as_array().unwrap().iter().any(|r| r["id"] == dead.id));

    let h1 = wait_state(d, "jobs", "human1", RunState::NeedsHuman);
    let id = h1.id.to_string();
    ok(d, &["approve", &id, "--reason", "looked fine", "--by", "alice"]);
    let h1 = wait_state(d, "jobs", "human1", RunState::Succeeded);
    assert_eq!(h1.attempts, 2);
    // Not waiting any more: refused, exit 1.
    let again = cli(d, &["approve", &id, "--reason", "twice", "--by", "alice"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("not waiting"));
    let approvals = store(d).read(|tx| tx.approvals(h1.id)).unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(
        (approvals[0].actor.as_str(), approvals[0].reason.as_str()),
        ("alice", "looked fine")
    );

    let h2 = wait_state(d, "jobs", "human2", RunState::NeedsHuman);
    let id = h2.id.to_string();
    ok(d, &["reject", &id, "--reason", "too risky", "--by", "bob"]);
    let h2 = wait_state(d, "jobs", "human2", RunState::Failed);
    assert_eq!(h2.attempts, 1);
    let rejected = events(d, h2.id)
        .into_iter()
        .find(|e| e.kind == "rejected")
        .unwrap();
    assert_eq!(rejected.detail["by"], "bob");
    assert_eq!(rejected.detail["reason"], "too risky");
    let again = cli(d, &["reject", &id, "--reason", "twice"]);
    assert_eq!(again.status.code(), Some(1));

    let bad = wait_state(d, "jobs", "bad", RunState::Failed);
    assert_eq!(bad.attempts, 1);
    assert!(kinds(d, bad.id).contains(&"alert".to_string()));

    let slow = wait_state(d, "jobs", "slow", RunState::Succeeded);
    assert_eq!(slow.attempts, 2);
    assert_eq!(attempts(d, slow.id)[0].status, AttemptStatus::TimedOut);

    let manual = wait_state(d, "jobs", "by-hand", RunState::Succeeded);
    assert_eq!(manual.reason, RunReason::Manual);

    // Bad input: an unknown run is "does not hold" (1); a missing reason is usage (2).
    assert_eq!(
        cli(d, &["approve", "999999", "--reason", "x"]).status.code(),
        Some(1)
    );
    assert_eq!(cli(d, &["approve", &id]).status.code(), Some(2));

    // Side effects: every window that succeeded delivered exactly once.
    let ledger = std::fs::read_to_string(d.join("ledger.txt")).unwrap();
    let mut delivered: Vec<&str> = ledger.lines().map(|l| l.split(' ').next().unwrap()).collect();
    delivered.sort();
    assert_eq!(
        delivered,
        [
            "default/jobs/by-hand",
            "default/jobs/held",
            "default/jobs/human1",
            "default/jobs/slow",
            "default/jobs/temp",
            "default/long/long",
        ],
        "ledger:\n{ledger}"
    );
    // Alerts reached the sink: dead letter, two needs_human, the failure.
    let alerts = std::fs::read_to_string(d.join("alerts.jsonl")).unwrap();
    let whats: Vec<String> = alerts
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["what"].to_string())
        .collect();
    for what in ["\"dead_lettered\"", "\"needs_human\"", "\"failed\""] {
        assert!(whats.iter().any(|w| w == what), "{what} not in {whats:?}");
    }
}
