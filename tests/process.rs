//! The one way agentcron runs external programs, through its blocking entry and
//! the users of it (alert and delivery commands): argv, cwd and environment
//! arrive, and at the deadline the whole process group goes, also when it
//! ignores SIGTERM and has children of its own.

use agentcron::agent::delivery::{Delivered, deliver};
use agentcron::config::model::{DeliveryConfig, DeliveryKind, ErrorClass};
use agentcron::process::{self, ProcessError, Program};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn stubborn() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/process/stubborn.sh")
}

/// Dead, a zombie, or inside the kernel's exit path (see tests/agent_runner.rs).
fn process_gone(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let exiting = fields
        .get(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_EXITING != 0);
    fields.first() == Some(&"Z") || exiting
}

/// Polls until `pid` is gone, up to a generous deadline (a killed process can
/// take a moment to finish exiting on a busy machine).
fn gone_soon(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        std::thread::yield_now();
    }
    process_gone(pid)
}

/// The leader's and the grandchild's pid, as the stubborn fixture wrote them.
fn pids(pid_file: &Path) -> (i32, i32) {
    let text = std::fs::read_to_string(pid_file).unwrap();
    let mut pids = text.split_whitespace().map(|p| p.parse().unwrap());
    (pids.next().unwrap(), pids.next().unwrap())
}

#[test]
fn a_group_ignoring_sigterm_is_killed_whole_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pids");
    let program = Program::new(stubborn(), &[]).env("PID_FILE", pid_file.display().to_string());
    let err = process::run(&program, None, Duration::from_secs(2)).unwrap_err();
    assert!(matches!(err, ProcessError::TimedOut(_)), "{err}");
    assert_eq!(err.to_string(), "timed out after 2s");
    let (leader, grandchild) = pids(&pid_file);
    assert!(gone_soon(leader), "leader {leader} survived its deadline");
    assert!(
        gone_soon(grandchild),
        "grandchild {grandchild} survived its deadline"
    );
}

#[test]
fn leftovers_of_a_program_that_exited_are_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let script = "sleep 1000 & echo $! > \"$PID_FILE\"; echo done";
    let program =
        Program::new("sh", &["-c".into(), script.into()]).env("PID_FILE", pid_file.display().to_string());
    let done = process::run(&program, None, Duration::from_secs(600)).unwrap();
    assert!(done.status.success());
    assert_eq!(done.stdout_line.as_deref(), Some("done"));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone_soon(pid), "background child {pid} outlived the program");
}

fn delivery(command: &[&str]) -> DeliveryConfig {
    DeliveryConfig {
        name: "deliver".into(),
        kind: DeliveryKind::Command {
            command: command.iter().map(|s| s.to_string()).collect(),
        },
    }
}

#[test]
fn a_command_delivery_gets_the_body_the_key_and_the_config_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let d = delivery(&[
        "sh",
        "-c",
        "cat > got.json; echo \"$AGENTCRON_DELIVERY_KEY\" > key",
    ]);
    let body = serde_json::json!({"delivery_key": "t/s/w:deliver", "summary": "ok"});
    let outcome = deliver(&d, &body, tmp.path(), false, Duration::from_secs(30));
    assert_eq!(outcome, Delivered::Ok);
    let got = std::fs::read_to_string(tmp.path().join("got.json")).unwrap();
    assert_eq!(got, format!("{body}\n"));
    let key = std::fs::read_to_string(tmp.path().join("key")).unwrap();
    assert_eq!(key.trim(), "t/s/w:deliver");
}

#[test]
fn a_failing_command_delivery_names_its_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let d = delivery(&["sh", "-c", "echo 'upstream refused' >&2; exit 75"]);
    let body = serde_json::json!({"delivery_key": "k"});
    let Delivered::Failed { class, reason } = deliver(&d, &body, tmp.path(), false, Duration::from_secs(30))
    else {
        panic!("delivery did not fail");
    };
    assert_eq!(class, ErrorClass::Retryable);
    assert!(reason.ends_with(": upstream refused"), "{reason}");
}

#[test]
fn a_hanging_command_delivery_is_stopped_at_its_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pids");
    let stubborn = stubborn().display().to_string();
    let d = delivery(&["env", &format!("PID_FILE={}", pid_file.display()), &stubborn]);
    let body = serde_json::json!({"delivery_key": "k"});
    let outcome = deliver(&d, &body, tmp.path(), false, Duration::from_secs(2));
    let Delivered::Failed { class, reason } = outcome else {
        panic!("{outcome:?}");
    };
    // It may have landed: failed and retryable, like a webhook that timed out.
    assert_eq!(class, ErrorClass::Retryable);
    assert!(reason.contains("timed out after 2s"), "{reason}");
    let (leader, grandchild) = pids(&pid_file);
    assert!(gone_soon(leader) && gone_soon(grandchild));
}
