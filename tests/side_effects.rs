//! Side effects happen at most once (issue 14), proved on the real binary as
//! headless schedulers on a temp database, with agents that write a ledger:
//! a frozen scheduler (SIGSTOP past its lease), grandchildren of an agent
//! after kill -9 of its scheduler, kill -9 at random instants around the step
//! handshake, and results that are not what they claim. Every wait polls the
//! database or a file with a deadline; none sleeps for a fixed time.

mod support;

use agentcron::store::Store;
use agentcron::store::types::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::process::{bin, store, wait_within};

fn agentkit_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sample-config/agents")
}

fn start(dir: &Path, log: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(log))
        .unwrap();
    Command::new(bin())
        .args(["run", "--headless", "--config"])
        .arg(dir.join("agentcron.toml"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn cli(dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agentcron {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn post(dir: &Path, id: &str) {
    cli(dir, &["event", "post", "go", "--id", id]);
}

fn wait_for<T>(what: &str, limit: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_within(limit, what, f)
}

fn run_of(dir: &Path, key: &str) -> Option<Run> {
    store(dir)?.read(|tx| tx.find_run("default", "job", key)).ok()?
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a child we started; no memory is touched.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

fn kill9(child: &mut Child) {
    signal(child, libc::SIGKILL);
    let _ = child.wait();
}

fn stop(child: &mut Child) {
    signal(child, libc::SIGCONT);
    signal(child, libc::SIGTERM);
    let _ = child.wait();
}

fn ledger_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn run_events(s: &Store, run_id: i64) -> Vec<Event> {
    s.read(|tx| {
        tx.events(&EventFilter {
            run_id: Some(run_id),
            ..EventFilter::default()
        })
    })
    .unwrap()
}

/// A small deterministic generator (splitmix64): "random" instants that are
/// the same in every run of the test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------
// (d) honest results

#[test]
fn a_misspelt_failure_or_an_unknown_status_fails_with_the_line_in_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // The window key picks the line; every agent exits 0.
    std::fs::write(
        dir.path().join("agent.py"),
        r#"import json, sys
key = json.loads(sys.stdin.readline())["window"]["key"]
line = {
    "misspelt": {"event": "result", "status": "failure", "error_class": "retriable"},
    "maybe": {"event": "result", "status": "maybe"},
    "open": {"event": "step", "name": "deliver", "status": "started"},
}[key]
print(json.dumps(line, separators=(",", ":")), flush=True)
"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
lease = "10s"

[agents.liar]
kind = "command"
command = ["python3", "agent.py"]
timeout = "30s"
steps = [{ name = "deliver", side_effect = true }]

[[schedule]]
id = "job"
agent = "liar"
on_event = "go"
close_after = "10m"
overlap = "allow"
max_concurrency = 3
retry = { max_attempts = 1, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }
"#,
    )
    .unwrap();
    let mut a = start(dir.path(), "a.log");
    wait_for("the database", Duration::from_secs(20), || store(dir.path()));
    for id in ["misspelt", "maybe", "open"] {
        post(dir.path(), id);
    }
    let ended = |key: &str| {
        wait_for(key, Duration::from_secs(30), || {
            run_of(dir.path(), key).filter(|r| !matches!(r.state, RunState::Pending | RunState::Running))
        })
    };
    let misspelt = ended("misspelt");
    let maybe = ended("maybe");
    let open = ended("open");
    stop(&mut a);

    assert_eq!(misspelt.state, RunState::Failed, "{misspelt:?}");
    assert_eq!(
        misspelt.error_class,
        Some(agentcron::config::model::ErrorClass::NonRetryable)
    );
    let reason = misspelt.last_error.clone().unwrap_or_default();
    assert!(reason.contains("protocol error"), "{reason}");
    assert!(
        reason.contains(r#""error_class":"retriable""#),
        "the line is in the reason: {reason}"
    );

    assert_eq!(maybe.state, RunState::Failed, "{maybe:?}");
    let reason = maybe.last_error.clone().unwrap_or_default();
    assert!(reason.contains(r#""status":"maybe""#), "{reason}");

    // Exit 0 without a result while `deliver` is started: the step is
    // uncertain and the agent cannot verify it, so a human decides.
    assert_eq!(open.state, RunState::NeedsHuman, "{open:?}");
    let reason = open.last_error.clone().unwrap_or_default();
    assert!(reason.contains("deliver"), "{reason}");
    let uncertain = store(dir.path())
        .unwrap()
        .read(|tx| tx.uncertain_steps(open.id))
        .unwrap();
    assert_eq!(uncertain, ["deliver"]);
}

// ---------------------------------------------------------------------------
// The ledger agent under two schedulers

fn deliver_agent() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/side_effects/deliver_agent.py")
}

/// A config of one `on_event = "go"` schedule `job` whose handshake agent
/// delivers once per window into `ledger.txt`, verifying with the ledger.
fn ledger_config(dir: &Path, lease: &str, before: &str, work: &str, extra: &str) -> PathBuf {
    let ledger = dir.join("ledger.txt");
    std::fs::write(
        dir.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "{lease}"
shutdown_grace = "1s"

[agents.deliverer]
kind = "command"
command = ["python3", "{agent}"]
timeout = "60s"
verify = true
handshake = true
env = {{ AGENTKIT = "{kit}", LEDGER = "{ledger}", STARTED = "{started}", BEFORE = "{before}", WORK = "{work}", NO_WAIT = "{no_wait}" }}
steps = [{{ name = "deliver", side_effect = true }}]

[[schedule]]
id = "job"
agent = "deliverer"
on_event = "go"
close_after = "1h"
{extra}
"#,
            agent = deliver_agent().display(),
            kit = agentkit_dir().display(),
            ledger = ledger.display(),
            started = dir.join("started.txt").display(),
            no_wait = std::env::var("SIDE_EFFECTS_NO_WAIT").unwrap_or_default(),
        ),
    )
    .unwrap();
    ledger
}

/// Ledger lines per window key (the line starts with the idempotency key).
fn deliveries(ledger: &Path, key: &str) -> usize {
    let prefix = format!("default/job/{key} deliver");
    ledger_lines(ledger)
        .iter()
        .filter(|l| l.starts_with(&prefix))
        .count()
}

/// SIGSTOPs `child` while it holds no database write lock (a frozen writer
/// would stall every other process on the lock, which is not the point here).
fn freeze_outside_a_write(dir: &Path, child: &Child) {
    let conn = rusqlite::Connection::open(dir.join("test.db")).unwrap();
    conn.busy_timeout(Duration::ZERO).unwrap();
    let tasks = PathBuf::from(format!("/proc/{}/task", child.id()));
    let all_stopped = || {
        std::fs::read_dir(&tasks).unwrap().all(|t| {
            let stat = std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default();
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
        })
    };
    wait_for(
        "the scheduler to freeze between writes",
        Duration::from_secs(20),
        || {
            signal(child, libc::SIGSTOP);
            wait_for("its threads to stop", Duration::from_secs(5), || {
                all_stopped().then_some(())
            });
            if conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok() {
                return Some(());
            }
            signal(child, libc::SIGCONT);
            None
        },
    );
}

/// When the test fails, prints the end of each scheduler's log before the
/// temporary folder (and the logs with it) goes: a failure that does not
/// repeat can still be read afterwards.
struct LogsOnFailure<'a>(&'a Path, &'static [&'static str]);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for name in self.1 {
            let text = std::fs::read_to_string(self.0.join(name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!("--- last {} lines of {name} ---\n{}", tail.len(), tail.join("\n"));
        }
    }
}

// (a) a frozen scheduler
#[test]
fn a_scheduler_frozen_past_its_lease_leaves_each_side_effect_done_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let _logs = LogsOnFailure(d, &["a.log", "b.log"]);
    // `deliver started` after 1 s; the ledger written 5 s after the ack:
    // later than the lease (3 s) and the takeover grace (1 s) together.
    let ledger = ledger_config(
        d,
        "3s",
        "1",
        "5",
        r#"retry = { max_attempts = 5, backoff = "fixed", initial = "200ms", max = "200ms", jitter = 0.0 }"#,
    );
    let mut schedulers = [start(d, "a.log"), start(d, "b.log")];
    wait_for("the database", Duration::from_secs(20), || store(d));
    // Frozen before the step is asked for, and frozen after its ack while
    // the agent works: both must end in exactly one delivery.
    let windows = [("w1", false), ("w2", true), ("w3", false), ("w4", true)];
    for (key, after_ack) in windows {
        post(d, key);
        let run = wait_for("a claim", Duration::from_secs(30), || {
            run_of(d, key).filter(|r| r.state == RunState::Running)
        });
        if after_ack {
            wait_for("deliver journaled (acked)", Duration::from_secs(30), || {
                let s = store(d)?;
                let steps = s.read(|tx| tx.steps(run.id)).ok()?;
                steps.iter().any(|st| st.name == "deliver").then_some(())
            });
        }
        let owner_pid: u32 = run
            .lease_owner
            .as_deref()
            .and_then(|o| o.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap();
        let frozen = schedulers.iter().position(|c| c.id() == owner_pid).unwrap();
        freeze_outside_a_write(d, &schedulers[frozen]);
        let done = wait_for(
            "the other scheduler to finish the window",
            Duration::from_secs(60),
            || run_of(d, key).filter(|r| r.state.is_terminal()),
        );
        assert_eq!(done.state, RunState::Succeeded, "{key}: {done:?}");
        signal(&schedulers[frozen], libc::SIGCONT);
        // The woken scheduler records its lost attempt's end as stale, nothing more.
        let s = store(d).unwrap();
        wait_for(
            "the late end to be recorded as stale",
            Duration::from_secs(30),
            || {
                run_events(&s, run.id)
                    .into_iter()
                    .find(|e| e.kind == "stale_result" && e.detail["token"] == run.fencing_token)
            },
        );
        assert_eq!(deliveries(&ledger, key), 1, "{key}: {:?}", ledger_lines(&ledger));
    }
    for c in &mut schedulers {
        stop(c);
    }
    let s = store(d).unwrap();
    for (key, _) in windows {
        assert_eq!(deliveries(&ledger, key), 1, "{key}: {:?}", ledger_lines(&ledger));
        let run = run_of(d, key).unwrap();
        assert_eq!(run.state, RunState::Succeeded);
        let kinds: Vec<String> = run_events(&s, run.id).into_iter().map(|e| e.kind).collect();
        let succeeded = kinds.iter().filter(|k| *k == "succeeded").count();
        assert_eq!(succeeded, 1, "{key}: {kinds:?}");
        for k in ["lost", "retry_scheduled", "stale_result"] {
            assert!(
                kinds.contains(&k.to_string()),
                "{key}: {k} missing from {kinds:?}"
            );
        }
        // The trail explains itself.
        let out = cli(d, &["explain", "job", "--window", key]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("lost"), "{key}: {text}");
    }
}

// (b) the agent's own children
#[test]
fn the_grandchildren_of_an_agent_never_act_after_kill_9_of_its_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One grandchild in the agent's process group, one that escaped it
    // (setsid); each would write its file after 3 s.
    std::fs::write(
        d.join("agent.sh"),
        "#!/bin/sh\ncat >/dev/null\n\
         (sleep 3; echo late >> grandchild.txt) &\necho $! > pids\n\
         setsid sh -c 'sleep 3; echo late >> escaped.txt' &\necho $! >> pids\n\
         echo $$ >> pids\ntouch started\nsleep 20\n",
    )
    .unwrap();
    std::fs::write(
        d.join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
lease = "10s"

[agents.forker]
kind = "command"
command = ["sh", "agent.sh"]
timeout = "60s"

[[schedule]]
id = "job"
agent = "forker"
on_event = "go"
close_after = "1h"
"#,
    )
    .unwrap();
    let mut a = start(d, "a.log");
    wait_for("the database", Duration::from_secs(20), || store(d));
    post(d, "w1");
    let pids: Vec<i32> = wait_for("the agent and its grandchildren", Duration::from_secs(30), || {
        d.join("started").exists().then_some(())?;
        let text = std::fs::read_to_string(d.join("pids")).ok()?;
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        (pids.len() == 3).then_some(pids)
    });
    kill9(&mut a);
    // Every process of the tree is gone (polled, bounded well inside the 3 s)…
    let alive = |pid: i32| {
        // A zombie is gone for our purpose: it can no longer act.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
    };
    wait_for("the agent's tree to be gone", Duration::from_secs(10), || {
        pids.iter().all(|&p| !alive(p)).then_some(())
    });
    // …and nothing it started acted.
    assert!(!d.join("grandchild.txt").exists(), "the grandchild acted");
    assert!(!d.join("escaped.txt").exists(), "the setsid grandchild acted");
}

// (c) kill -9 at random instants around the handshake
#[test]
fn kill_9_at_random_instants_never_duplicates_a_side_effect() {
    const WINDOWS: usize = 20;
    const KILLS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The agent acts the instant it is acked.
    let ledger = ledger_config(
        d,
        "1s",
        "0",
        "0",
        r#"overlap = "allow"
max_concurrency = 4
retry = { max_attempts = 12, backoff = "fixed", initial = "50ms", max = "50ms", jitter = 0.0 }"#,
    );
    let mut rng = Rng(0x5eed_0014);
    let mut a = start(d, "run.log");
    wait_for("the database", Duration::from_secs(20), || store(d));
    for i in 0..WINDOWS {
        post(d, &format!("w{i:02}"));
    }
    let max_event = |d: &Path| store(d).and_then(|s| s.read(|tx| tx.max_event_id()).ok());
    let started = |d: &Path| ledger_lines(&d.join("started.txt")).len();
    for _ in 0..KILLS {
        // A random instant: half the kills strike the moment an agent has
        // printed `deliver started` (the race the handshake closes), the
        // others after 1 to 12 more events of the trail (claims, starts,
        // steps, results, sweeps); or when everything is done.
        let (from_events, from_started) = (max_event(d).unwrap_or(0), started(d));
        let at_start = rng.below(2) == 0;
        let more = 1 + rng.below(12) as i64;
        wait_for("some progress", Duration::from_secs(30), || {
            let done =
                (0..WINDOWS).all(|i| run_of(d, &format!("w{i:02}")).is_some_and(|r| r.state.is_terminal()));
            let due = if at_start {
                started(d) > from_started
            } else {
                max_event(d)? >= from_events + more
            };
            (done || due).then_some(())
        });
        kill9(&mut a);
        a = start(d, "run.log");
    }
    let runs: Vec<Run> = (0..WINDOWS)
        .map(|i| {
            let key = format!("w{i:02}");
            wait_for("every window to end", Duration::from_secs(120), || {
                run_of(d, &key).filter(|r| r.state.is_terminal())
            })
        })
        .collect();
    stop(&mut a);
    let lines = ledger_lines(&ledger);
    for run in &runs {
        let n = deliveries(&ledger, &run.window_key);
        assert!(n <= 1, "{}: delivered {n} times: {lines:?}", run.window_key);
        if run.state == RunState::Succeeded {
            assert_eq!(n, 1, "{}: succeeded without its delivery", run.window_key);
        } else {
            assert!(run.state_reason.is_some(), "{run:?} ended without a reason");
        }
    }
}
