//! The real binary as a headless scheduler: a crash mid-run (kill -9) and four
//! schedulers on one database. These wait on the database (polling with a
//! deadline), never for a fixed time.

mod support;

use agentcron::store::types::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::process::{bin, store, wait_within};

fn start(dir: &Path, log: &str) -> Child {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Command::new(bin())
        .args(["run", "--headless", "--config"])
        .arg(dir.join("agentcron.toml"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn wait_for<T>(what: &str, limit: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_within(limit, what, f)
}

fn sigterm(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
}

#[test]
fn crash_mid_run_then_restart_retries_without_repeating_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let agent = std::fs::canonicalize("tests/fixtures/headless/ledger_agent.py").unwrap();
    let ledger = dir.path().join("ledger.txt");
    std::fs::write(
        dir.path().join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "2s"
shutdown_grace = "1s"

[agents.slow]
kind = "command"
command = ["python3", "{agent}"]
timeout = "60s"
env = {{ LEDGER = "{ledger}", STEP_SLEEP = "1" }}
steps = [{{ name = "fetch" }}, {{ name = "summarize" }}, {{ name = "deliver", side_effect = true }}]

[[schedule]]
id = "report"
agent = "slow"
on_event = "go"
close_after = "10m"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }}
"#,
            agent = agent.display(),
            ledger = ledger.display()
        ),
    )
    .unwrap();
    let mut a = start(dir.path(), "a.log");
    wait_for("the database", Duration::from_secs(20), || store(dir.path()));
    let out = Command::new(bin())
        .args(["event", "post", "go", "--id", "w1", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Kill the scheduler once `fetch` is journaled as done (and summarize under way).
    let run_id = wait_for("fetch journaled", Duration::from_secs(30), || {
        let s = store(dir.path())?;
        let run = s.read(|tx| tx.find_run("default", "report", "w1")).ok()??;
        let done = s.read(|tx| tx.completed_steps(run.id)).ok()?;
        done.contains(&"fetch".to_string()).then_some(run.id)
    });
    unsafe {
        libc::kill(a.id() as i32, libc::SIGKILL);
    }
    let _ = a.wait();
    // The agent died with its scheduler (parent-death signal): give it no chance to finish.
    let mut b = start(dir.path(), "b.log");
    let final_run = wait_for("the retry to succeed", Duration::from_secs(60), || {
        let s = store(dir.path())?;
        let run = s.read(|tx| tx.run(run_id)).ok()?;
        (run.state == RunState::Succeeded).then_some(run)
    });
    sigterm(&mut b);
    let s = store(dir.path()).unwrap();
    let attempts = s.read(|tx| tx.attempts(run_id)).unwrap();
    assert_eq!(final_run.attempts, 2);
    assert_eq!(attempts[0].status, AttemptStatus::Lost, "{attempts:?}");
    assert_eq!(attempts[1].status, AttemptStatus::Succeeded);
    let kinds: Vec<String> = s
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run_id),
                ..EventFilter::default()
            })
        })
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    for k in ["lost", "retry_scheduled", "succeeded"] {
        assert!(kinds.contains(&k.to_string()), "{k} missing from {kinds:?}");
    }
    let lines = std::fs::read_to_string(&ledger).unwrap();
    let steps: Vec<&str> = lines.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(steps, ["fetch", "summarize", "deliver"], "ledger:\n{lines}");
    assert!(lines.lines().next().unwrap().ends_with("attempt=1"));
    assert!(
        lines.lines().nth(1).unwrap().ends_with("attempt=2"),
        "summarize redone by attempt 2 only"
    );
}

#[test]
fn four_schedulers_on_one_database_claim_every_window_exactly_once() {
    // 220 schedules on one event: each posted event opens 220 windows at the
    // same instant, and four schedulers race for every one of them.
    const SCHEDULES: usize = 220;
    const EVENTS: [&str; 2] = ["e1", "e2"];
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from(
        r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "5s"
workers = 64

[agents.fast]
kind = "command"
command = ["sh", "-c", "cat > /dev/null; echo \"$AGENTCRON_IDEMPOTENCY_KEY $AGENTCRON_RUN_ID\" >> ledger.txt"]
timeout = "60s"
"#,
    );
    for i in 0..SCHEDULES {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"s{i:03}\"\nagent = \"fast\"\non_event = \"go\"\nclose_after = \"10m\"\noverlap = \"allow\"\nmax_concurrency = 2\n"
        ));
    }
    std::fs::write(dir.path().join("agentcron.toml"), toml).unwrap();
    let mut procs: Vec<Child> = (0..4).map(|i| start(dir.path(), &format!("p{i}.log"))).collect();
    wait_for("the database", Duration::from_secs(30), || store(dir.path()));
    for id in EVENTS {
        let out = Command::new(bin())
            .args(["event", "post", "go", "--id", id, "--config"])
            .arg(dir.path().join("agentcron.toml"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let total = (SCHEDULES * EVENTS.len()) as u64;
    wait_for("every window to end", Duration::from_secs(120), || {
        let s = store(dir.path())?;
        let counts = s.read(|tx| tx.count_by_state()).ok()?;
        let ended: u64 = counts
            .iter()
            .filter(|(state, _)| state.is_terminal())
            .map(|(_, n)| n)
            .sum();
        (ended >= total).then_some(())
    });
    for p in &mut procs {
        sigterm(p);
    }
    let s = store(dir.path()).unwrap();
    let runs = s.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    assert_eq!(runs.len() as u64, total);
    let mut owners = std::collections::HashSet::new();
    for r in &runs {
        assert_eq!(r.state, RunState::Succeeded, "run {} ({})", r.id, r.window_key);
        let attempts = s.read(|tx| tx.attempts(r.id)).unwrap();
        assert_eq!(attempts.len(), 1, "run {} ({}) attempts", r.id, r.window_key);
        let claims = s
            .read(|tx| {
                tx.events(&EventFilter {
                    run_id: Some(r.id),
                    kinds: vec!["claimed".into()],
                    ..EventFilter::default()
                })
            })
            .unwrap();
        assert_eq!(claims.len(), 1, "run {}: claimed events", r.id);
        owners.insert(attempts[0].owner.clone());
    }
    // The ledger: every agent execution wrote one line; no window twice.
    let ledger = std::fs::read_to_string(dir.path().join("ledger.txt")).unwrap();
    let mut seen = std::collections::HashSet::new();
    for line in ledger.lines() {
        let key = line.split(' ').next().unwrap();
        assert!(seen.insert(key.to_string()), "window {key} executed twice");
    }
    assert_eq!(seen.len() as u64, total, "ledger lines vs windows");
    assert!(
        owners.len() >= 2,
        "claims should be spread over several schedulers: {owners:?}"
    );
}

#[test]
fn headless_logs_json_lines_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
shutdown_grace = "1s"

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat > /dev/null; echo '{\"event\":\"result\",\"status\":\"success\"}'"]

[[schedule]]
id = "tick"
agent = "quick"
every = "1s"
check_every = "1s"
close_after = "1s"
"#,
    )
    .unwrap();
    let log_path = dir.path().join("json.log");
    let mut child = Command::new(bin())
        .args(["run", "--headless", "--log-format", "json", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    wait_for("a succeeded run", Duration::from_secs(30), || {
        let s = store(dir.path())?;
        let n = s.read(|tx| tx.count_by_state()).ok()?;
        n.iter()
            .any(|(st, c)| *st == RunState::Succeeded && *c > 0)
            .then_some(())
    });
    sigterm(&mut child);
    let status = child.wait().unwrap();
    assert!(status.success() || status.code().is_none(), "{status:?}");
    let text = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    assert!(lines.iter().any(|l| l["fields"]["kind"] == "succeeded"), "{text}");
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "stopped"),
        "stopped cleanly:\n{text}"
    );
    let s = store(dir.path()).unwrap();
    let stopped = s
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["scheduler_stopped".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    assert_eq!(stopped.len(), 1);
}

#[test]
fn a_stop_lets_short_attempts_finish_and_stops_long_ones_with_their_children() {
    let dir = tempfile::tempdir().unwrap();
    // The agent starts a grandchild (a shell's `sleep`), records its pid, and
    // finishes after AGENT_SECONDS unless stopped first.
    let agent = dir.path().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\ncat >/dev/null\nsleep \"$AGENT_SECONDS\" &\necho $! > \"$PIDS/$RUN.pid\"\nwait\n\
         echo '{\"event\":\"result\",\"status\":\"success\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pids = dir.path().join("pids");
    std::fs::create_dir(&pids).unwrap();
    let schedule = |id: &str, seconds: u32| {
        format!(
            r#"
[agents.{id}]
kind = "command"
command = ["{agent}"]
timeout = "60s"
env = {{ AGENT_SECONDS = "{seconds}", PIDS = "{pids}", RUN = "{id}" }}

[[schedule]]
id = "{id}"
agent = "{id}"
on_event = "go"
close_after = "10m"
"#,
            agent = agent.display(),
            pids = pids.display()
        )
    };
    std::fs::write(
        dir.path().join("agentcron.toml"),
        format!(
            "[scheduler]\ndatabase = \"test.db\"\nlease = \"30s\"\nshutdown_grace = \"3s\"\n{}{}",
            schedule("short", 1),
            schedule("long", 120)
        ),
    )
    .unwrap();
    let mut a = start(dir.path(), "a.log");
    wait_for("the database", Duration::from_secs(20), || store(dir.path()));
    let out = Command::new(bin())
        .args(["event", "post", "go", "--id", "e1", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pid_of = |name: &str| -> Option<i32> {
        std::fs::read_to_string(pids.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let long_child = wait_for("both agents running", Duration::from_secs(20), || {
        pid_of("short")?;
        pid_of("long")
    });
    sigterm(&mut a);
    let s = store(dir.path()).unwrap();
    let state = |id: &str| {
        s.read(|tx| tx.find_run("default", id, "e1"))
            .unwrap()
            .unwrap()
            .state
    };
    assert_eq!(
        state("short"),
        RunState::Succeeded,
        "finished within the grace period"
    );
    // The long one is stopped at the end of the grace period and its end
    // recorded then (issue 52: it used to be left to lease expiry).
    assert_eq!(state("long"), RunState::RetryWait);
    // Gone, or a zombie waiting for init to reap it (it was reparented there).
    let alive = std::fs::read_to_string(format!("/proc/{long_child}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit(')').next().map(|rest| rest.trim_start().to_string()))
        .is_some_and(|rest| !rest.starts_with('Z'));
    assert!(
        !alive,
        "the long agent's grandchild {long_child} outlived the scheduler"
    );
    let log = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
    assert!(log.contains("grace period over"), "{log}");
}

/// Issue 52: `systemctl stop` (SIGTERM) of a headless scheduler with an agent
/// running ends that attempt when the grace period runs out, at that instant,
/// as "stopped by scheduler shutdown" — not left `running` for the next start
/// to record as lost (lease expired) twenty minutes later.
#[test]
fn a_sigterm_ends_the_running_attempt_as_a_shutdown_and_a_restart_never_finds_it_lost() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    std::fs::write(&agent, "#!/bin/sh\ncat >/dev/null\nsleep 300\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A short lease: were the run left `running`, the restart would find its
    // lease expired (and record it lost) within seconds.
    std::fs::write(
        dir.path().join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
lease = "2s"
shutdown_grace = "1s"

[agents.slow]
kind = "command"
command = ["{agent}"]
timeout = "10m"

[[schedule]]
id = "slow"
agent = "slow"
on_event = "go"
close_after = "10m"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }}
"#,
            agent = agent.display()
        ),
    )
    .unwrap();
    let mut a = start(dir.path(), "a.log");
    wait_for("the database", Duration::from_secs(20), || store(dir.path()));
    let out = Command::new(bin())
        .args(["event", "post", "go", "--id", "e1", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run_id = wait_for("the run to be running", Duration::from_secs(20), || {
        let s = store(dir.path())?;
        let run = s.read(|tx| tx.find_run("default", "slow", "e1")).ok()??;
        let started = s.read(|tx| tx.attempts(run.id)).ok()?.len() == 1;
        (run.state == RunState::Running && started).then_some(run.id)
    });
    let signalled = chrono::Utc::now();
    sigterm(&mut a);
    let exited = chrono::Utc::now();
    let s = store(dir.path()).unwrap();
    let run = s.read(|tx| tx.run(run_id)).unwrap();
    assert_ne!(
        run.state,
        RunState::Running,
        "left running for lease expiry: {run:?}"
    );
    assert_eq!(run.state, RunState::RetryWait, "{run:?}");
    let attempts = s.read(|tx| tx.attempts(run_id)).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let first = &attempts[0];
    assert_eq!(first.status, AttemptStatus::Cancelled, "{first:?}");
    assert_eq!(
        first.error_class,
        Some(agentcron::config::model::ErrorClass::Retryable),
        "{first:?}"
    );
    let message = first.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("stopped by scheduler shutdown at "),
        "{first:?}"
    );
    // Ended at the real instant: after the grace period, before the process exited.
    let ended = first.ended_at.expect("the attempt has ended");
    assert!(
        ended >= signalled + chrono::TimeDelta::milliseconds(900) && ended <= exited,
        "ended {ended}, signalled {signalled}, exited {exited}"
    );
    let events_of = |s: &agentcron::store::Store| {
        s.read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run_id),
                ..EventFilter::default()
            })
        })
        .unwrap()
    };
    let failed: Vec<_> = events_of(&s).into_iter().filter(|e| e.kind == "failed").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].detail["stopped"], "shutdown", "{failed:?}");
    assert_eq!(failed[0].at, ended);
    drop(s);
    // The next start takes the retry; nothing is ever told as lost.
    let mut b = start(dir.path(), "b.log");
    wait_for("the retry to start", Duration::from_secs(30), || {
        let s = store(dir.path())?;
        (s.read(|tx| tx.attempts(run_id)).ok()?.len() == 2).then_some(())
    });
    sigterm(&mut b);
    let s = store(dir.path()).unwrap();
    let events = events_of(&s);
    assert!(
        !events.iter().any(|e| e.kind == "lost"),
        "a clean stop was later recorded as lost: {events:?}"
    );
    let attempts = s.read(|tx| tx.attempts(run_id)).unwrap();
    assert!(
        attempts.iter().all(|a| a.status != AttemptStatus::Lost),
        "{attempts:?}"
    );
    // The trace tells the stop as what it was.
    let out = Command::new(bin())
        .args(["show", &run_id.to_string(), "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("stopped by scheduler shutdown at"), "{text}");
}

fn cli_out(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = support::process::cli(dir, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 52: with a typo saved in the file (the scheduler still running the
/// last good version, the reload rejected), `status` exits by the schedulers'
/// health — 0 while one is alive, 1 once none is — with a warning about the
/// file, and the rejection is there to read with `events`, no `--db` needed.
#[test]
fn a_typo_in_the_file_leaves_status_to_the_schedulers_health() {
    let dir = tempfile::tempdir().unwrap();
    let good = "[scheduler]\ndatabase = \"test.db\"\nshutdown_grace = \"1s\"\n\n\
                [agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n\n\
                [[schedule]]\nid = \"s\"\nagent = \"a\"\nevery = \"5m\"\n";
    std::fs::write(dir.path().join("agentcron.toml"), good).unwrap();
    let mut a = start(dir.path(), "a.log");
    wait_for("a live scheduler", Duration::from_secs(20), || {
        (cli_out(dir.path(), &["status"]).0 == 0).then_some(())
    });
    std::fs::write(
        dir.path().join("agentcron.toml"),
        good.replace("every = \"5m\"", "evrey = \"5m\""),
    )
    .unwrap();
    unsafe {
        libc::kill(a.id() as i32, libc::SIGHUP);
    }
    let (code, stdout, stderr) = wait_for("config_rejected", Duration::from_secs(20), || {
        let out = cli_out(dir.path(), &["events", "--kind", "config_rejected", "--json"]);
        out.1.contains("config_rejected").then_some(out)
    });
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("evrey"), "{stdout}");
    assert!(stderr.starts_with("warning: config "), "{stderr}");
    let (code, stdout, stderr) = cli_out(dir.path(), &["status"]);
    assert_eq!(code, 0, "a scheduler is alive:\n{stdout}{stderr}");
    assert!(stdout.contains("schedulers: 1 alive"), "{stdout}");
    assert!(
        stderr.contains("does not load (") && stderr.contains("showing the ledger's version 1"),
        "{stderr}"
    );
    let (code, stdout, _) = cli_out(dir.path(), &["status", "--json"]);
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["config_file_invalid"], true, "{json}");
    let (code, stdout, stderr) = cli_out(dir.path(), &["runs"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: config "), "{stderr}");
    assert!(!stdout.is_empty());
    let (code, stdout, _) = cli_out(dir.path(), &["next", "s", "--count", "1"]);
    assert_eq!(code, 0, "next reads the ledger's version: {stdout}");
    sigterm(&mut a);
    let (code, stdout, stderr) = cli_out(dir.path(), &["status"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("NO SCHEDULER ALIVE"), "{stdout}");
    assert!(stderr.contains("warning: config "), "{stderr}");
}
