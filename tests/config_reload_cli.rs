//! Live reload through the real binary (issue 18): `run --headless` running;
//! change a trigger, add a schedule, remove one, break the file — `plan`
//! first, SIGHUP after each; what `plan` said is what happens. A broken file
//! leaves the old version running with `config_rejected`; `agentcron reload`
//! reaches the scheduler through the database. Everything polls the database
//! with a deadline.

mod support;

use agentcron::store::Store;
use agentcron::store::types::{EventFilter, Run, RunFilter, RunState};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

const DEADLINE: Duration = Duration::from_secs(60);

const HEAD: &str = r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "2s"
heartbeat = "1s"

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{\"event\":\"result\",\"status\":\"success\"}'"]
timeout = "30s"
"#;

const TICK: &str = "\n[[schedule]]\nid = \"tick\"\nagent = \"quick\"\nevery = \"1s\"\n";
const WAITER: &str = "\n[[schedule]]\nid = \"waiter\"\nagent = \"quick\"\nevery = \"1s\"\nclose_after = \"1h\"\n\
    check_every = \"1h\"\n\n[[schedule.gate]]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"exit 75\"]\n";
const ADDED: &str = "\n[[schedule]]\nid = \"added\"\nagent = \"quick\"\nevery = \"1s\"\n";

fn wait_for<T>(what: &str, f: impl FnMut() -> Option<T>) -> T {
    wait_within(DEADLINE, what, f)
}

fn store(dir: &Path) -> Option<Store> {
    Store::open_read_only(&dir.join("test.db")).ok()
}

fn runs(dir: &Path, schedule: &str) -> Vec<Run> {
    store(dir)
        .and_then(|s| {
            s.read(|tx| {
                tx.runs(&RunFilter {
                    schedule: Some(schedule.into()),
                    ..RunFilter::default()
                })
            })
            .ok()
        })
        .unwrap_or_default()
}

fn version_of(dir: &Path, run: &Run) -> Option<i64> {
    store(dir)?.read(|tx| tx.run_versions(run.id)).ok()?.0
}

fn current_version(dir: &Path) -> Option<i64> {
    store(dir)?.read(|tx| tx.config_watch()).ok()?.0
}

fn events(dir: &Path, kind: &str) -> Vec<agentcron::store::types::Event> {
    store(dir)
        .and_then(|s| {
            s.read(|tx| {
                tx.events(&EventFilter {
                    kinds: vec![kind.into()],
                    ..EventFilter::default()
                })
            })
            .ok()
        })
        .unwrap_or_default()
}

/// `plan --json`: (exit code, the preview).
fn plan(dir: &Path) -> (i32, Value) {
    let out = cli(dir, &["plan", "--json"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), v)
}

fn entry<'a>(plan: &'a Value, id: &str) -> &'a Value {
    plan["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {plan}"))
}

fn hup(s: &Scheduler) {
    // SAFETY: signalling a child process this test started and still owns.
    let rc = unsafe { libc::kill(s.0.id() as i32, libc::SIGHUP) };
    assert_eq!(rc, 0);
}

/// When version `v` was applied (its `config_applied` event).
fn applied(dir: &Path, v: i64) -> agentcron::store::types::Event {
    wait_for(&format!("config v{v} applied"), || {
        events(dir, "config_applied")
            .into_iter()
            .find(|e| e.detail["version"] == v)
    })
}

#[test]
fn sighup_reloads_what_plan_showed_and_a_broken_file_keeps_the_old_version() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("agentcron.toml");
    std::fs::write(&file, format!("{HEAD}{TICK}{WAITER}")).unwrap();
    let log = std::fs::File::create(dir.join("scheduler.log")).unwrap();
    let s = Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for("tick runs under v1 and waiting runs", || {
        let ticks = runs(dir, "tick");
        let waiting = runs(dir, "waiter")
            .iter()
            .filter(|r| r.state == RunState::Pending)
            .count();
        (ticks.iter().any(|r| version_of(dir, r) == Some(1)) && waiting >= 2).then_some(())
    });
    let (code, p) = plan(dir);
    assert_eq!((code, p["changes"].as_i64()), (0, Some(0)), "{p}");
    assert_eq!(p["current_version"], 1);

    // 1. A changed trigger: every 1s → 2s.
    std::fs::write(
        &file,
        format!("{HEAD}{}{WAITER}", TICK.replace("\"1s\"", "\"2s\"")),
    )
    .unwrap();
    let (code, p) = plan(dir);
    assert_eq!(code, 3, "{p}");
    let tick = entry(&p, "tick");
    assert_eq!(tick["change"], "changed");
    assert_eq!(tick["fields"][0]["field"], "every");
    assert_eq!(
        (tick["version_before"].as_i64(), tick["version_after"].as_i64()),
        (Some(1), Some(2))
    );
    assert_eq!(tick["fires_after"].as_array().unwrap().len(), 3);
    assert_eq!(entry(&p, "waiter")["change"], "unchanged");
    hup(&s);
    let u = applied(dir, 2).at;
    let after: Vec<Run> = wait_for("tick runs under v2", || {
        let after: Vec<Run> = runs(dir, "tick")
            .into_iter()
            .filter(|r| r.created_at >= u)
            .collect();
        (after.len() >= 2).then_some(after)
    });
    for r in &after {
        assert_eq!(version_of(dir, r), Some(2), "{}", r.window_key);
        assert!(
            r.window_start >= u - chrono::TimeDelta::milliseconds(1),
            "no window before U: {}",
            r.window_key
        );
        assert_eq!(r.window_start.timestamp() % 2, 0, "every 2s: {}", r.window_key);
    }

    // 2. An added schedule: born at U.
    std::fs::write(
        &file,
        format!("{HEAD}{}{WAITER}{ADDED}", TICK.replace("\"1s\"", "\"2s\"")),
    )
    .unwrap();
    let (code, p) = plan(dir);
    assert_eq!(code, 3);
    assert_eq!(entry(&p, "added")["change"], "added");
    assert_eq!(p["changes"], 1);
    hup(&s);
    let u = applied(dir, 3).at;
    let added = wait_for("a run of the added schedule", || {
        let r = runs(dir, "added");
        (!r.is_empty()).then_some(r)
    });
    assert!(
        added
            .iter()
            .all(|r| r.window_start >= u - chrono::TimeDelta::milliseconds(1)),
        "born at U"
    );
    assert_eq!(version_of(dir, &added[0]), Some(1));

    // 3. A removed schedule: its waiting runs end skipped with the version.
    std::fs::write(
        &file,
        format!("{HEAD}{}{ADDED}", TICK.replace("\"1s\"", "\"2s\"")),
    )
    .unwrap();
    let (code, p) = plan(dir);
    assert_eq!(code, 3);
    let waiter = entry(&p, "waiter");
    assert_eq!(waiter["change"], "removed");
    let fate = waiter["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["state"] == "pending")
        .unwrap()
        .clone();
    assert_eq!(fate["fate"], "skipped: schedule removed in v4");
    hup(&s);
    applied(dir, 4);
    let gone = runs(dir, "waiter");
    assert!(gone.len() as i64 >= fate["count"].as_i64().unwrap());
    for r in &gone {
        assert_eq!(
            (r.state, r.state_reason.as_deref()),
            (RunState::Skipped, Some("schedule removed in v4")),
            "{}",
            r.window_key
        );
    }

    // 4. A broken file: plan says so (exit 1, FILE:LINE:COL); the reload is
    // rejected and v4 keeps running.
    std::fs::write(
        &file,
        format!(
            "{HEAD}{}{ADDED}",
            TICK.replace("every = \"1s\"", "every = \"2s\"\nretyr = 3")
        ),
    )
    .unwrap();
    let out = cli(dir, &["plan"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:", file.display())) && stderr.contains("retyr"),
        "{stderr}"
    );
    hup(&s);
    let rejected = wait_for("config_rejected", || {
        events(dir, "config_rejected").into_iter().next()
    });
    assert_eq!(rejected.detail["kept_version"], 4);
    assert!(rejected.detail["errors"][0].as_str().unwrap().contains("retyr"));
    assert_eq!(current_version(dir), Some(4));
    let later = rejected.at;
    wait_for("tick keeps running under v2 after the rejection", || {
        runs(dir, "tick")
            .into_iter()
            .find(|r| r.created_at > later && version_of(dir, r) == Some(2))
    });

    // 5. `agentcron reload` reaches it through the database.
    std::fs::write(&file, format!("{HEAD}{}", TICK.replace("\"1s\"", "\"2s\""))).unwrap();
    let out = cli(dir, &["reload"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v5 = applied(dir, 5);
    assert_eq!(v5.detail["removed"], serde_json::json!(["added"]));
    let (code, _) = plan(dir);
    assert_eq!(code, 0, "the file is what runs");
    // `status` names the version, and the scheduler is on it (its registry
    // row was updated by the reload).
    let st = wait_for("status on v5", || {
        let out = cli(dir, &["status", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["config"]["version"] == 5 && v["config"]["schedulers_on_older"] == serde_json::json!([]))
            .then_some(v)
    });
    assert!(st["config"]["waiting_approval"].is_null());
    let text = String::from_utf8_lossy(&cli(dir, &["status"]).stdout).to_string();
    assert!(text.contains("config: v5 (hash "), "{text}");

    // Rollback: an unknown version or the running one is refused; v4 comes
    // back as v6 through the same path (the added schedule with it).
    assert_eq!(
        cli(dir, &["rollback", "99", "--reason", "x"]).status.code(),
        Some(1)
    );
    assert_eq!(
        cli(dir, &["rollback", "5", "--reason", "x"]).status.code(),
        Some(1)
    );
    let out = cli(dir, &["rollback", "4", "--reason", "bring added back"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v6 = applied(dir, 6);
    assert_eq!(
        (v6.detail["rollback_of"].clone(), v6.detail["added"].clone()),
        (4.into(), serde_json::json!(["added"]))
    );
    let u = v6.at;
    wait_for("the added schedule runs again after the rollback", || {
        runs(dir, "added").into_iter().find(|r| r.created_at > u)
    });
    let (code, p) = plan(dir);
    assert_eq!(
        (code, entry(&p, "added")["change"].clone()),
        (3, "removed".into()),
        "the file differs from v6"
    );

    // SIGHUP never ended it; SIGTERM does, cleanly.
    let mut s = s;
    // SAFETY: signalling a child process this test started and still owns.
    unsafe { libc::kill(s.0.id() as i32, libc::SIGTERM) };
    let status = wait_for("the scheduler to stop", || s.0.try_wait().unwrap());
    assert_eq!(status.code(), Some(0));
}

/// `plan` exit codes and the `--json` shape (docs/CLI.md, `plan`).
#[test]
fn plan_exit_codes_and_json_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("agentcron.toml");
    std::fs::write(&file, format!("{HEAD}{TICK}")).unwrap();
    // No database yet: everything is added.
    let (code, p) = plan(dir);
    assert_eq!(code, 3, "{p}");
    let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "config",
            "current_version",
            "next_version",
            "same_text",
            "changes",
            "approval_required",
            "schedules"
        ]
    );
    let tick = entry(&p, "tick");
    let keys: Vec<&str> = tick.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "change",
            "from",
            "stage",
            "version_before",
            "version_after",
            "fields",
            "fires_before",
            "fires_after",
            "runs",
            "needs_approval"
        ]
    );
    assert_eq!(
        (p["current_version"].clone(), p["next_version"].clone()),
        (Value::Null, 1.into())
    );
    assert_eq!(tick["stage"], "prod");
    assert!(!dir.join("test.db").exists(), "plan writes nothing");
    // A schedule of a stage this scheduler does not run.
    std::fs::write(&file, format!("{HEAD}{TICK}stage = \"staging\"\n")).unwrap();
    let out = cli(dir, &["plan"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("+ tick (added, stage staging, new v1)")
            && text.contains("not run here (stage staging)"),
        "{text}"
    );
    // Invalid: 1. Misuse: 2.
    std::fs::write(&file, format!("{HEAD}{TICK}stag = \"prod\"\n")).unwrap();
    assert_eq!(plan(dir).0, 1);
    let out = cli(dir, &["plan", "--jsn"]);
    assert_eq!(out.status.code(), Some(2));
    let out = cli(dir, &["rollback", "1"]);
    assert_eq!(out.status.code(), Some(2), "--reason is required");
    let out = cli(dir, &["approve-config", "x", "--reason", "r"]);
    assert_eq!(out.status.code(), Some(2));
}

fn status_json(dir: &Path) -> Option<Value> {
    serde_json::from_slice(&cli(dir, &["status", "--json"]).stdout).ok()
}

/// `require_approval_for = ["prod"]`: a trigger change waits for
/// `approve-config` — across a restart of the scheduler, which keeps running
/// the approved version (and says so in the registry) — then applies.
#[test]
fn a_gated_change_waits_for_approve_config_even_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("agentcron.toml");
    let head = HEAD.replace(
        "heartbeat = \"1s\"\n",
        "heartbeat = \"1s\"\nrequire_approval_for = [\"prod\"]\n",
    );
    std::fs::write(&file, format!("{head}{TICK}")).unwrap();
    let s = Scheduler::headless(dir, "a.log");
    wait_for("tick runs under v1", || {
        runs(dir, "tick")
            .iter()
            .any(|r| version_of(dir, r) == Some(1))
            .then_some(())
    });
    std::fs::write(&file, format!("{head}{}", TICK.replace("\"1s\"", "\"2s\""))).unwrap();
    let (code, p) = plan(dir);
    assert_eq!((code, p["approval_required"].as_bool()), (3, Some(true)), "{p}");
    hup(&s);
    let waiting = wait_for("config v2 waiting", || {
        events(dir, "config_waiting")
            .into_iter()
            .find(|e| e.detail["version"] == 2)
    });
    assert_eq!(waiting.detail["schedules"], serde_json::json!(["tick"]));
    // Restarted on the changed file: it still runs v1, and says so.
    drop(s);
    let s = Scheduler::headless(dir, "b.log");
    let st = wait_for("status: v1 runs, v2 waits, nobody on an older config", || {
        let v = status_json(dir)?;
        (v["schedulers"]["alive"] == 1
            && v["config"]["version"] == 1
            && v["config"]["waiting_approval"] == 2
            && v["config"]["schedulers_on_older"] == serde_json::json!([]))
        .then_some(v)
    });
    assert_eq!(st["ok"], true);
    let restarted = wait_for("a tick run after the restart", || {
        runs(dir, "tick").into_iter().find(|r| r.created_at > waiting.at)
    });
    assert_eq!(
        version_of(dir, &restarted),
        Some(1),
        "the old trigger runs until approved"
    );
    let out = cli(
        dir,
        &["approve-config", "2", "--reason", "reviewed", "--by", "ops"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let u = applied(dir, 2).at;
    let after: Vec<Run> = wait_for("tick runs under v2", || {
        let after: Vec<Run> = runs(dir, "tick")
            .into_iter()
            .filter(|r| r.created_at >= u)
            .collect();
        (after.len() >= 2).then_some(after)
    });
    for r in &after {
        assert_eq!(version_of(dir, r), Some(2), "{}", r.window_key);
        assert_eq!(r.window_start.timestamp() % 2, 0, "every 2s: {}", r.window_key);
    }
    let out = cli(dir, &["approve-config", "2", "--reason", "again"]);
    assert_eq!(out.status.code(), Some(1), "not waiting any more");
    drop(s);
}

/// `agentcron reload ARGS --db DIR/test.db`: the file may not name the ledger
/// (an empty one names none).
fn reload(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .arg("reload")
        .args(args)
        .arg("--db")
        .arg(dir.join("test.db"))
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Issue 44, item 9: an emptied file removes every schedule only through
/// `agentcron reload --allow-empty`; SIGHUP and a plain `reload` reject it
/// (`config_rejected` saying how), and the schedules keep running.
#[test]
fn a_reload_that_would_remove_every_schedule_needs_allow_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("agentcron.toml");
    std::fs::write(&file, format!("{HEAD}{TICK}{ADDED}")).unwrap();
    let s = Scheduler::headless(dir, "scheduler.log");
    wait_for("tick runs under v1", || {
        runs(dir, "tick")
            .iter()
            .any(|r| version_of(dir, r) == Some(1))
            .then_some(())
    });
    std::fs::write(&file, "").unwrap();
    hup(&s);
    let rejected = wait_for("config_rejected after SIGHUP", || {
        events(dir, "config_rejected").into_iter().next()
    });
    assert_eq!(rejected.detail["kept_version"], 1);
    let why = rejected.detail["errors"][0].as_str().unwrap().to_string();
    assert!(
        why.contains("remove all 2 schedule(s)") && why.contains("agentcron reload --allow-empty"),
        "{why}"
    );
    let out = reload(dir, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("a second config_rejected after a plain reload", || {
        (events(dir, "config_rejected").len() >= 2).then_some(())
    });
    assert_eq!(current_version(dir), Some(1));
    let later = events(dir, "config_rejected")[1].at;
    wait_for("tick keeps running after the rejections", || {
        runs(dir, "tick").into_iter().find(|r| r.created_at > later)
    });

    let out = reload(dir, &["--allow-empty"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v2 = applied(dir, 2);
    let mut removed: Vec<String> = serde_json::from_value(v2.detail["removed"].clone()).unwrap();
    removed.sort();
    assert_eq!(removed, ["added", "tick"]);
    let requested = events(dir, "reload_requested");
    assert_eq!(
        requested
            .iter()
            .map(|e| e.detail["allow_empty"].as_bool())
            .collect::<Vec<_>>(),
        [Some(false), Some(true)]
    );
    drop(s);
}
