//! The command and credential_valid gates with real processes and files.

#[path = "fixtures/gates/support.rs"]
#[allow(dead_code)]
mod support;

use agentcron::config::model::{CredentialSource, GateKind, OnFail};
use agentcron::gates::{self, GateResult, GateVerdict};
use std::time::Duration;
use support::*;

fn script(name: &str) -> Vec<String> {
    vec!["sh".into(), fixture(name).display().to_string()]
}

fn run(env: &Env, command: Vec<String>) -> GateResult {
    let gate = gates::build(&gate("check", GateKind::Command { command }));
    gates::evaluate(gate.as_ref(), OnFail::Skip, &env.ctx())
}

#[test]
fn exit_0_passes_with_the_first_stdout_line() {
    let r = run(&Env::new(), script("pass.sh"));
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(r.reason, "partition for 2026-06-06 is ready");
}

#[test]
fn exit_75_waits() {
    let r = run(&Env::new(), script("wait.sh"));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "upstream still loading");
}

#[test]
fn other_exit_codes_fail_and_fall_back_to_the_code() {
    let r = run(&Env::new(), script("fail.sh"));
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(r.reason, "exit code 1");
}

#[test]
fn the_window_arrives_in_the_environment() {
    let r = run(&Env::new(), script("env.sh"));
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(
        r.reason,
        "acme daily-report 2026-06-06 2026-06-06T01:00:00Z 2026-06-06T02:00:00Z 2026-06-06T01:30:00Z"
    );
}

#[test]
fn a_command_past_its_timeout_is_killed_and_waits() {
    let mut env = Env::new();
    env.timeout = Duration::from_millis(300);
    let r = run(&env, script("slow.sh"));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "timed out after 300ms");
    // evaluate returned long before the script's own 30 s sleep would have ended.
    assert!(r.elapsed_ms < 20_000, "took {} ms", r.elapsed_ms);
}

#[test]
fn a_command_that_cannot_start_waits_with_the_error() {
    let r = run(&Env::new(), vec!["/nonexistent/agentcron-gate".into()]);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(
        r.reason.starts_with("cannot start /nonexistent/agentcron-gate:"),
        "{}",
        r.reason
    );
    let r = run(&Env::new(), vec![]);
    assert_eq!(
        (r.verdict, r.reason.as_str()),
        (GateVerdict::Wait, "empty command")
    );
}

fn credential(env: &Env, source: CredentialSource) -> GateResult {
    let kind = GateKind::CredentialValid {
        source,
        min_remaining: Duration::from_secs(600),
    };
    let gate = gates::build(&gate("token", kind));
    gates::evaluate(gate.as_ref(), OnFail::Skip, &env.ctx())
}

fn expiry_file(dir: &tempfile::TempDir, text: &str) -> CredentialSource {
    let path = dir.path().join("token.expiry");
    std::fs::write(&path, text).unwrap();
    CredentialSource::File(path)
}

#[test]
fn credential_expiring_soon_fails_with_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    // now is 01:30; 4 minutes left, 10 required.
    let r = credential(&Env::new(), expiry_file(&dir, "\n2026-06-06T01:34:00Z\n"));
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(
        r.reason,
        "credential expires at 2026-06-06T01:34:00Z, in 4m (< 10m required)"
    );
}

#[test]
fn credential_already_expired_fails() {
    let dir = tempfile::tempdir().unwrap();
    let r = credential(&Env::new(), expiry_file(&dir, "2026-06-06T01:00:00Z"));
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert_eq!(
        r.reason,
        "credential expired at 2026-06-06T01:00:00Z, 30m ago (10m required)"
    );
}

#[test]
fn credential_valid_long_enough_passes_in_both_formats() {
    let dir = tempfile::tempdir().unwrap();
    let r = credential(&Env::new(), expiry_file(&dir, "2026-06-06T11:45:00+08:00"));
    assert_eq!(r.verdict, GateVerdict::Pass);
    assert_eq!(
        r.reason,
        "credential valid until 2026-06-06T03:45:00Z, in 2h15m (≥ 10m required)"
    );

    // Unix seconds from a command: 1780747200 = 2026-06-06T12:00:00Z.
    let r = credential(&Env::new(), CredentialSource::Command(script("expiry.sh")));
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    assert!(
        r.reason
            .starts_with("credential valid until 2026-06-06T12:00:00Z, in 10h30m"),
        "{}",
        r.reason
    );
}

#[test]
fn credential_uses_the_engine_clock_not_the_system_clock() {
    // The same expiry is valid at one virtual now and expiring at another.
    let dir = tempfile::tempdir().unwrap();
    let source = expiry_file(&dir, "1780747200");
    let mut env = Env::new();
    env.now = utc("2026-06-06T11:55:00Z");
    let r = credential(&env, source.clone());
    assert_eq!(r.verdict, GateVerdict::Fail);
    assert!(r.reason.contains("in 5m (< 10m required)"), "{}", r.reason);
    env.now = utc("2026-06-06T11:00:00Z");
    assert_eq!(credential(&env, source).verdict, GateVerdict::Pass);
}

#[test]
fn unreadable_or_unparseable_credentials_wait() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new();

    let r = credential(&env, expiry_file(&dir, "ghp_secret-token-value\n"));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("is not an expiry"), "{}", r.reason);
    assert!(
        !r.reason.contains("secret"),
        "the line read is never echoed: {}",
        r.reason
    );

    let r = credential(&env, expiry_file(&dir, "\n  \n"));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.ends_with("is empty"), "{}", r.reason);

    let r = credential(&env, CredentialSource::File(dir.path().join("missing")));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.starts_with("cannot read"), "{}", r.reason);

    let r = credential(&env, CredentialSource::Command(script("fail.sh")));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "expiry command: exit code 1");
}
