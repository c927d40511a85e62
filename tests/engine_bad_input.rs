//! Bad input never crashes the engine: malformed agent output is kept and the
//! result classified, silence with exit 0 is a success, a missing binary is a
//! non-retryable failure with a clear reason, a locked database is retried and
//! then reported plainly.

mod support;

use agentcron::store::types::*;
use std::time::Duration;
use support::real::*;
use support::run_by_key;

fn config(command: &str) -> String {
    format!(
        r#"
[scheduler]
timezone = "UTC"

[agents.a]
kind = "command"
command = ["{command}"]
timeout = "20s"
steps = [{{ name = "fetch" }}]

[[schedule]]
id = "job"
agent = "a"
cron = "0 9 * * *"
close_after = "1h"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }}
"#
    )
}

fn fixture(name: &str) -> String {
    std::fs::canonicalize(format!("tests/fixtures/bad/{name}"))
        .unwrap()
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_output_lines_are_kept_and_the_result_still_classified() {
    let mut h = Real::new(&config(&fixture("noisy.sh")), "2026-06-06T08:59:00Z");
    h.run_until("2026-06-06T09:30:00Z").await;
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded);
    let a = &h.attempts(run.id)[0];
    assert_eq!(a.summary.as_deref(), Some("done despite the noise"));
    for kept in [
        "starting up…",
        "not json at all",
        "warning: something odd",
        "{\"event\":\"step\"}",
        "bogus",
    ] {
        assert!(a.log.contains(kept), "`{kept}` missing from the log:\n{}", a.log);
    }
    let malformed = of_kind(&h.store, run.id, "agent_output");
    assert_eq!(
        malformed.len(),
        2,
        "two lines claim to be events but are not: {malformed:?}"
    );
    assert!(
        h.steps(run.id)
            .iter()
            .any(|s| s.name == "fetch" && s.status == StepStatus::Done)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_prints_nothing_and_exits_0_succeeds_without_summary() {
    let mut h = Real::new(&config(&fixture("silent.sh")), "2026-06-06T08:59:00Z");
    h.run_until("2026-06-06T09:30:00Z").await;
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded);
    let a = &h.attempts(run.id)[0];
    assert_eq!(
        (a.status, a.summary.clone(), a.exit_code),
        (AttemptStatus::Succeeded, None, Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_agent_binary_fails_the_run_at_once_with_a_clear_reason() {
    let mut h = Real::new(&config("/nonexistent/agent-binary"), "2026-06-06T08:59:00Z");
    h.run_until("2026-06-06T12:00:00Z").await;
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert_eq!(run.state, RunState::Failed, "non-retryable: no retry");
    assert_eq!(run.attempts, 1);
    let why = run.last_error.unwrap();
    assert!(
        why.contains("/nonexistent/agent-binary") && why.contains("not found"),
        "{why}"
    );
    assert_eq!(
        run.error_class,
        Some(agentcron::config::model::ErrorClass::NonRetryable)
    );
    assert!(
        of_kind(&h.store, run.id, "alert")
            .iter()
            .any(|a| a.detail["what"] == "failed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_database_is_retried_then_reported_plainly() {
    let mut h = Real::new(&config(&fixture("silent.sh")), "2026-06-06T08:59:00Z");
    h.settle().await;
    // Another process holds the write lock.
    let holder = rusqlite::Connection::open(h.dir.path().join("test.db")).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    h.store.set_busy_timeout(Duration::from_millis(100)).unwrap();
    h.clock.set(support::t("2026-06-06T09:00:00Z"));
    let err = h.engine.tick().unwrap_err().to_string();
    assert!(err.contains("database is locked by another process"), "{err}");
    // The CLI says the same, with exit code 2.
    let out = assert_cmd::Command::cargo_bin("agentcron")
        .unwrap()
        .args(["--db"])
        .arg(h.dir.path().join("test.db"))
        .args(["kill", "--reason", "x"])
        .env("AGENTCRON_BUSY_TIMEOUT_MS", "100")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("locked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Once released, the same engine carries on: nothing was lost.
    holder.execute_batch("ROLLBACK").unwrap();
    h.run_until("2026-06-06T09:30:00Z").await;
    assert_eq!(
        run_by_key(&h.store, "job", "2026-06-06").state,
        RunState::Succeeded
    );
}
