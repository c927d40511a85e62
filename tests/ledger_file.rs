//! The ledger file itself (issue 44, item 10): CLI verbs never create a
//! ledger (only the scheduler, the console and the `db` verbs do), and a
//! headless scheduler whose file is deleted or replaced under it says so and
//! stops (exit 2) instead of writing where nobody reads. Real processes,
//! polled with a deadline.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

const DEADLINE: Duration = Duration::from_secs(60);

const CONFIG: &str = r#"
[scheduler]
database = "test.db"
lease = "10s"
shutdown_grace = "1s"
alert = { kind = "file", path = "alerts.jsonl" }

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{\"event\":\"result\",\"status\":\"success\"}'"]
timeout = "30s"

[[schedule]]
id = "tick"
agent = "quick"
every = "1s"
"#;

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn verbs_on_a_missing_ledger_exit_2_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("agentcron.toml"), CONFIG).unwrap();
    let db = dir.join("test.db");
    let verbs: &[&[&str]] = &[
        &["trigger", "tick"],
        &["event", "post", "go"],
        &["approve", "1", "--reason", "x"],
        &["reject", "1", "--reason", "x"],
        &["kill", "--reason", "x"],
        &["unkill", "--reason", "x"],
        &["pause", "tick", "--reason", "x"],
        &["resume", "tick", "--yes"],
        &[
            "backfill",
            "tick",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-01T00:00:05Z",
        ],
        &["dlq", "list"],
        &["dlq", "requeue", "1", "--reason", "x"],
        &[
            "maintenance",
            "add",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-02T00:00:00Z",
            "--reason",
            "x",
        ],
        &["circuit", "close", "tick", "--reason", "x"],
        &["reload"],
        &["approve-config", "1", "--reason", "x"],
        &["rollback", "1", "--reason", "x"],
        &["runs"],
        &["show", "1"],
        &["events"],
        &["explain", "tick"],
        &["status"],
    ];
    for verb in verbs {
        let out = cli(dir, verb);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{verb:?}: {said}");
        assert!(
            said.contains(&format!("no ledger at {}", db.display())) && said.contains("agentcron run"),
            "{verb:?}: {said}"
        );
        assert!(!db.exists(), "{verb:?} created the ledger");
    }
    // The same with --db naming the missing file.
    let out = Command::new(bin())
        .args(["--db", db.to_str().unwrap(), "trigger", "tick"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!db.exists(), "trigger --db created the ledger");
}

/// The scheduler's first run has succeeded (so it ticks on the file).
fn running(dir: &Path) {
    wait_within(DEADLINE, "a succeeded run", || {
        let out = cli(dir, &["runs", "--state", "succeeded", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (!v.as_array()?.is_empty()).then_some(())
    });
}

/// Waits for the scheduler to exit; its code, its log.
fn exited(dir: &Path, s: &mut Scheduler) -> (Option<i32>, String) {
    let status = wait_within(DEADLINE, "the scheduler to exit", || s.0.try_wait().unwrap());
    let log = std::fs::read_to_string(dir.join("scheduler.log")).unwrap();
    (status.code(), log)
}

fn alerts(dir: &Path) -> Vec<serde_json::Value> {
    support::alert_lines(dir)
}

#[test]
fn a_scheduler_whose_ledger_is_deleted_says_so_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("agentcron.toml"), CONFIG).unwrap();
    let mut s = Scheduler::headless(dir, "scheduler.log");
    running(dir);
    std::fs::remove_file(dir.join("test.db")).unwrap();
    let (code, log) = exited(dir, &mut s);
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("was deleted or moved away"), "{log}");
    let alert = alerts(dir)
        .into_iter()
        .find(|a| a["what"] == "ledger_missing")
        .unwrap_or_else(|| panic!("a ledger_missing alert; log:\n{log}"));
    assert!(alert["message"].as_str().unwrap().contains("test.db"), "{alert}");
    assert!(!dir.join("test.db").exists(), "nothing made a new ledger");
}

#[test]
fn a_scheduler_whose_ledger_is_replaced_says_so_and_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("agentcron.toml"), CONFIG).unwrap();
    let mut s = Scheduler::headless(dir, "scheduler.log");
    running(dir);
    // A restored copy put in its place: the same bytes, another file.
    let db = dir.join("test.db");
    std::fs::copy(&db, dir.join("copy.db")).unwrap();
    std::fs::rename(dir.join("copy.db"), &db).unwrap();
    let (code, log) = exited(dir, &mut s);
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("was replaced by another file"), "{log}");
    assert!(
        alerts(dir).iter().any(|a| a["what"] == "ledger_replaced"),
        "a ledger_replaced alert; log:\n{log}"
    );
}
