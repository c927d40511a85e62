//! The recovery flows through the command line against a real headless
//! scheduler: events and triggers start runs, the operator verbs (approve, reject, dlq,
//! kill, unkill, circuit close) act on them, and the database shows what
//! happened. Schedulers are also killed (kill -9) and stalled (SIGSTOP) mid-attempt
//! to show leases, verify mode and fencing at work. Waits poll the database with a
//! deadline, never a fixed time.

mod support;

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

impl Scheduler {
    /// Starts `run --headless` on the test folder's config, logging to `log`.
    fn start(dir: &Path, log: &str) -> Scheduler {
        let log = std::fs::File::create(dir.join(log)).unwrap();
        let child = Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(dir.join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_for("the database", || dir.join("test.db").exists().then_some(()));
        Scheduler(child)
    }

    fn signal(&self, sig: i32) {
        // SAFETY: signals our own child process, which has not been reaped
        // (a reaped pid could belong to someone else).
        unsafe {
            libc::kill(self.0.id() as i32, sig);
        }
    }

    /// kill -9: no shutdown, leases left to expire.
    fn crash(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.0.wait();
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.signal(libc::SIGTERM);
            // A stopped scheduler (hang test) must wake up to see SIGTERM.
            self.signal(libc::SIGCONT);
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
    post_to(dir, "go", id);
}

fn post_to(dir: &Path, name: &str, id: &str) {
    ok(dir, &["event", "post", name, "--id", id]);
}

/// Waits for the first event of `kind` of `schedule`.
fn wait_event(dir: &Path, schedule: &str, kind: &str) -> Event {
    wait_for(&format!("{kind} of {schedule}"), || {
        support::schedule_events(&store(dir), schedule, kind)
            .into_iter()
            .next()
    })
}

/// The alert sink's lines.
fn alerts(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("alerts.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Ledger lines (`KEY STEP attempt=N`) of one idempotency key.
fn ledger_of(dir: &Path, key: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join("ledger.txt"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(key))
        .map(str::to_string)
        .collect()
}

/// Writes a config with a scheduler of this `lease`, the fixture agent as
/// `bot` (`verify = false`) and `checker` (`verify = true`), then `schedules`;
/// and the fixture's script.
fn setup(dir: &Path, lease: &str, schedules: &str, script: serde_json::Value) {
    let agent = |name: &str, verify: bool| {
        format!(
            r#"
[agents.{name}]
kind = "command"
command = ["python3", "{path}"]
timeout = "30s"
verify = {verify}
env = {{ LEDGER = "ledger.txt", SCRIPT = "script.json" }}
steps = [{{ name = "fetch" }}, {{ name = "deliver", side_effect = true }}]
"#,
            path = agent().display()
        )
    };
    std::fs::write(
        dir.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "{lease}"
shutdown_grace = "1s"
alert = {{ kind = "file", path = "alerts.jsonl" }}
{bot}{checker}{schedules}"#,
            bot = agent("bot", false),
            checker = agent("checker", true),
        ),
    )
    .unwrap();
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
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
    let _scheduler = Scheduler::start(d, "scheduler.log");

    // Kill switch: a window opened under it waits, with the switch as the reason.
    ok(d, &["kill", "--reason", "incident 42"]);
    post(d, "held");
    let held = wait_for("the held run to explain itself", || {
        let id = run_of(d, "jobs", "held")?.id;
        // The run is read again after its hold's event: read before it, it
        // can be the run just opened, not yet decided (no reason yet).
        kinds(d, id)
            .contains(&"switch_held".to_string())
            .then(|| run_of(d, "jobs", "held"))?
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
    // Approving again is a repeat (issue 19): exit 0, "already", the first reason kept.
    let again = cli(d, &["approve", &id, "--reason", "twice", "--by", "alice"]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("already approved by alice"));
    assert!(String::from_utf8_lossy(&again.stdout).contains("looked fine"));
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
    // A repeat (issue 19): exit 0, already rejected by bob.
    let again = cli(d, &["reject", &id, "--reason", "twice"]);
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("already rejected by bob"));

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

#[test]
fn the_circuit_breaker_of_a_live_scheduler_opens_skips_probes_and_closes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // `brittle` fails non-retryably and stays open (long cool-down) until an
    // operator closes it; `flaky` dead-letters (exit 75, one attempt) and
    // cools down quickly, so its probe goes through the half-open state.
    setup(
        d,
        "10s",
        r#"
[[schedule]]
id = "brittle"
agent = "bot"
on_event = "brittle"
close_after = "10m"
overlap = "allow"
max_concurrency = 8
circuit = { open_after = 3, cool_down = "1h" }

[[schedule]]
id = "flaky"
agent = "bot"
on_event = "flaky"
close_after = "10m"
overlap = "allow"
max_concurrency = 8
retry = { max_attempts = 1 }
circuit = { open_after = 3, cool_down = "1s" }
"#,
        json!({
            "b1": {"do": ["fetch"], "exit": 65},
            "b2": {"do": ["fetch"], "exit": 65},
            "b3": {"do": ["fetch"], "exit": 65},
            "f1": {"do": ["fetch"], "exit": 75},
            "f2": {"do": ["fetch"], "exit": 75},
            "f3": {"do": ["fetch"], "exit": 75},
            // The probe holds until the test has seen the circuit half-open.
            "f4": {"wait_for": "release-probe"},
        }),
    );
    let _scheduler = Scheduler::start(d, "scheduler.log");
    for id in ["b1", "b2", "b3"] {
        post_to(d, "brittle", id);
    }
    for id in ["f1", "f2", "f3"] {
        post_to(d, "flaky", id);
    }

    // Three failed runs open the circuit, with an alert to the sink.
    let opened = wait_event(d, "brittle", "circuit_opened");
    for id in ["b1", "b2", "b3"] {
        assert_eq!(run_of(d, "brittle", id).unwrap().state, RunState::Failed);
    }
    // A new window is skipped, saying why; the agent never starts.
    post_to(d, "brittle", "b4");
    let skipped = wait_state(d, "brittle", "b4", RunState::Skipped);
    assert!(
        skipped.state_reason.as_deref().unwrap().contains("circuit_open"),
        "{skipped:?}"
    );
    assert_eq!(skipped.attempts, 0);
    let ev = events(d, skipped.id);
    let why = ev.iter().find(|e| e.kind == "skipped").unwrap();
    assert!(why.detail["reason"].as_str().unwrap().contains("circuit_open"));
    assert!(opened.id < why.id);

    // Closed by hand: who and why recorded; closing it again is refused.
    let close = |reason: &str| {
        Command::new(bin())
            .args(["circuit", "close", "brittle", "--reason", reason, "--config"])
            .arg(d.join("agentcron.toml"))
            .env("USER", "dana")
            .output()
            .unwrap()
    };
    let out = close("upstream fixed");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let closed = support::schedule_events(&store(d), "brittle", "circuit_closed");
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].detail["by"], "dana");
    assert_eq!(closed[0].detail["reason"], "upstream fixed");
    // A repeat (issue 19): exit 0 and "already closed" on stdout.
    let again = close("twice");
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("already closed"));
    // Closed: the next window runs.
    post_to(d, "brittle", "b5");
    wait_state(d, "brittle", "b5", RunState::Succeeded);

    // Dead runs count too.
    let opened = wait_event(d, "flaky", "circuit_opened");
    for id in ["f1", "f2", "f3"] {
        assert_eq!(run_of(d, "flaky", id).unwrap().state, RunState::Dead);
    }
    // After the cool-down the next window is the one probe (half-open); a
    // window opened while the probe runs is skipped.
    let probe_after = chrono::DateTime::parse_from_rfc3339(opened.detail["probe_after"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    wait_for("the cool-down", || {
        (chrono::Utc::now() > probe_after).then_some(())
    });
    post_to(d, "flaky", "f4");
    let half_open = wait_event(d, "flaky", "circuit_half_open");
    post_to(d, "flaky", "f5");
    let held = wait_state(d, "flaky", "f5", RunState::Skipped);
    assert!(
        held.state_reason.as_deref().unwrap().contains("circuit_open"),
        "{held:?}"
    );
    std::fs::write(d.join("release-probe"), "").unwrap();
    let probe = wait_state(d, "flaky", "f4", RunState::Succeeded);
    assert_eq!(probe.attempts, 1);
    let closed = wait_event(d, "flaky", "circuit_closed");
    assert!(opened.id < half_open.id && half_open.id < closed.id);
    assert_eq!(ledger_of(d, "default/flaky/f4").len(), 1);

    let mut opened_alerts: Vec<_> = alerts(d)
        .into_iter()
        .filter(|a| a["what"] == "circuit_opened")
        .map(|a| a["schedule"].as_str().unwrap().to_string())
        .collect();
    opened_alerts.sort();
    assert_eq!(opened_alerts, ["brittle", "flaky"]);
}

#[test]
fn a_scheduler_killed_during_a_side_effect_step_leaves_it_to_a_human_or_to_verify() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let schedule = |id: &str, agent: &str| {
        format!(
            r#"
[[schedule]]
id = "{id}"
agent = "{agent}"
on_event = "{id}"
close_after = "10m"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "200ms", max = "200ms", jitter = 0.0 }}
"#
        )
    };
    setup(
        d,
        "2s",
        &(schedule("careful", "bot") + &schedule("checked", "checker")),
        json!({
            "c1/1": {"hang_in": "deliver"},
            "v1/1": {"hang_in": "deliver", "landed": true},
        }),
    );
    let first = Scheduler::start(d, "first.log");
    post_to(d, "careful", "c1");
    post_to(d, "checked", "v1");
    let in_flight = |schedule: &str, key: &str| {
        wait_for(&format!("{schedule}'s deliver to be in flight"), || {
            let r = run_of(d, schedule, key)?;
            let uncertain = store(d).read(|tx| tx.uncertain_steps(r.id)).ok()?;
            uncertain.contains(&"deliver".to_string()).then_some(r)
        })
    };
    let careful = in_flight("careful", "c1");
    let checked = in_flight("checked", "v1");
    wait_for("v1's delivery to land", || {
        (!ledger_of(d, "default/checked/v1").is_empty()).then_some(())
    });
    first.crash();
    let _second = Scheduler::start(d, "second.log");

    // verify = false: the lost attempt's uncertain delivery goes to a human.
    let parked = wait_state(d, "careful", "c1", RunState::NeedsHuman);
    let why = parked.state_reason.clone().unwrap();
    assert!(why.contains("lease") && why.contains("deliver"), "{why}");
    assert_eq!(parked.attempts, 1);
    assert_eq!(attempts(d, careful.id)[0].status, AttemptStatus::Lost);
    let k = kinds(d, careful.id);
    for kind in ["lost", "parked_for_human"] {
        assert!(k.contains(&kind.to_string()), "{kind} missing from {k:?}");
    }
    assert!(
        alerts(d)
            .iter()
            .any(|a| a["what"] == "needs_human" && a["run"] == careful.id),
        "{:?}",
        alerts(d)
    );

    // verify = true: a verify attempt finds the delivery landed, and the next
    // attempt skips it as done.
    let done = wait_state(d, "checked", "v1", RunState::Succeeded);
    let tries = attempts(d, checked.id);
    assert_eq!(tries.len(), 3, "{tries:?}");
    assert_eq!(tries[0].status, AttemptStatus::Lost);
    assert_eq!(tries[1].reason, RunReason::Verify);
    let envelope =
        |a: &Attempt| -> serde_json::Value { serde_json::from_str(a.envelope.as_deref().unwrap()).unwrap() };
    let verify = envelope(&tries[1]);
    assert_eq!(verify["reason"], "verify");
    assert_eq!(verify["verify_step"], "deliver");
    assert_eq!(verify["uncertain_steps"], json!(["deliver"]));
    let last = envelope(&tries[2]);
    assert_eq!(last["reason"], "retry");
    assert_eq!(last["verify_step"], json!(null));
    assert_eq!(last["completed_steps"], json!(["fetch", "deliver"]));
    assert_eq!(done.attempts, 3);
    assert!(
        events(d, checked.id)
            .iter()
            .any(|e| e.kind == "step" && e.detail["verified"] == true)
    );
    assert_eq!(
        ledger_of(d, "default/checked/v1"),
        ["default/checked/v1 deliver attempt=1"]
    );
    assert!(ledger_of(d, "default/careful/c1").is_empty());
}

#[test]
fn a_hung_schedulers_late_result_does_not_change_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(
        d,
        "2s",
        r#"
[[schedule]]
id = "late"
agent = "bot"
on_event = "late"
close_after = "10m"
retry = { max_attempts = 3, backoff = "fixed", initial = "200ms", max = "200ms", jitter = 0.0 }
"#,
        json!({
            // Attempt 1 reports success, but only once released, long after
            // its scheduler stalled and its lease was taken over.
            "l1/1": {"do": ["fetch"], "wait_for": "release", "done_file": "printed"},
            "l1/2": {"do": ["fetch"], "exit": 65},
        }),
    );
    // A hang, not a crash: a crashed scheduler takes its agent with it
    // (parent-death signal), so only a stalled one can deliver a late result.
    let stalled = Scheduler::start(d, "stalled.log");
    post_to(d, "late", "l1");
    let run = wait_for("l1's fetch to be journaled", || {
        let r = run_of(d, "late", "l1")?;
        let done = store(d).read(|tx| tx.completed_steps(r.id)).ok()?;
        done.contains(&"fetch".to_string()).then_some(r)
    });
    stop_outside_a_write(d, &stalled);
    let _rescuer = Scheduler::start(d, "rescuer.log");

    // The rescuer finds the lease expired: attempt 1 lost, attempt 2 fails for good.
    let failed = wait_state(d, "late", "l1", RunState::Failed);
    assert_eq!(failed.attempts, 2);
    std::fs::write(d.join("release"), "").unwrap();
    // Issue 14: the stalled scheduler's agent no longer gets to print its
    // result: its supervisor ended it when the lease passed without renewal.
    // Its late word is that end, and it must still change nothing.
    stalled.signal(libc::SIGCONT);

    let stale = wait_for("the late result to be recorded", || {
        events(d, run.id).into_iter().find(|e| e.kind == "stale_result")
    });
    let tries = attempts(d, run.id);
    assert_eq!(stale.detail["token"], tries[0].fencing_token);
    assert_eq!(tries[0].status, AttemptStatus::Lost);
    assert_eq!(tries[0].summary, None);
    assert_eq!(tries[1].status, AttemptStatus::Failed);
    let after = run_of(d, "late", "l1").unwrap();
    assert_eq!((after.state, after.attempts), (RunState::Failed, 2));
    assert!(!kinds(d, run.id).contains(&"succeeded".to_string()));
    assert!(
        !d.join("printed").exists(),
        "the agent of the stalled scheduler was stopped at its lease's end"
    );
}

/// SIGSTOPs `scheduler`, making sure it is not holding the database's write
/// lock (which would stall every other process, not what the test is about).
fn stop_outside_a_write(dir: &Path, scheduler: &Scheduler) {
    let conn = rusqlite::Connection::open(dir.join("test.db")).unwrap();
    conn.busy_timeout(Duration::ZERO).unwrap();
    let tasks = PathBuf::from(format!("/proc/{}/task", scheduler.0.id()));
    // SIGSTOP takes effect asynchronously: wait until every thread is stopped.
    let all_stopped = || {
        std::fs::read_dir(&tasks).unwrap().all(|t| {
            let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
            // The state follows the parenthesised command name.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
        })
    };
    wait_for("the scheduler to stop between writes", || {
        scheduler.signal(libc::SIGSTOP);
        wait_for("the scheduler's threads to stop", || all_stopped().then_some(()));
        if conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok() {
            return Some(());
        }
        scheduler.signal(libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(20));
        None
    });
}
