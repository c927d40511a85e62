//! The per-attempt supervisor (`agentcron __supervise`) on its own: the real
//! binary with a control socket on fd 3, as the scheduler starts it. It ends
//! the agent's whole tree — setsid'd grandchildren included — when its
//! scheduler is gone, when the lease passes without a renewal, on stop; and
//! renewals keep the agent alive. Waits poll with a deadline.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::process::wait_within;

/// An agent that starts a grandchild in its group and one that escaped it
/// (setsid), records the three pids, and would write `late-*` after 2 s.
const TREE: &str = "(sleep 2; echo late > late-group) & echo $! > pids; \
     setsid sh -c 'sleep 2; echo late > late-setsid' & echo $! >> pids; echo $$ >> pids; \
     touch ready; sleep 30";

fn supervise(dir: &Path, limits: &[&str], script: &str) -> (Child, UnixStream) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentcron"));
    cmd.arg("__supervise")
        .args(limits)
        .args(["--", "sh", "-c", script])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: dup2 between fork and exec only.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(theirs);
    (child, ours)
}

fn pids(dir: &Path) -> Vec<i32> {
    wait_within(Duration::from_secs(10), "the tree to start", || {
        dir.join("ready").exists().then_some(())?;
        let text = std::fs::read_to_string(dir.join("pids")).ok()?;
        let pids: Vec<i32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        (pids.len() == 3).then_some(pids)
    })
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')))
}

fn assert_tree_gone(dir: &Path, pids: &[i32]) {
    wait_within(Duration::from_secs(10), "the tree to be gone", || {
        pids.iter().all(|&p| !alive(p)).then_some(())
    });
    assert!(!dir.join("late-group").exists(), "a grandchild acted");
    assert!(!dir.join("late-setsid").exists(), "an escaped grandchild acted");
}

fn reports(control: &UnixStream) -> Vec<serde_json::Value> {
    let mut out = vec![];
    for line in BufReader::new(control.try_clone().unwrap()).lines() {
        let Ok(line) = line else { break };
        out.push(serde_json::from_str(&line).unwrap());
    }
    out
}

fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}

#[test]
fn when_the_scheduler_is_gone_the_whole_tree_is_ended() {
    let (_keep, dir) = tempdir();
    let (mut child, control) = supervise(&dir, &["--timeout-ms", "60000"], TREE);
    let pids = pids(&dir);
    // The scheduler dies: its end of the socket closes.
    drop(control);
    assert_tree_gone(&dir, &pids);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_lease_without_renewal_ends_the_tree_and_says_so() {
    let (_keep, dir) = tempdir();
    let (mut child, control) = supervise(
        &dir,
        &[
            "--timeout-ms",
            "60000",
            "--lease-ms",
            "400",
            "--lease-grace-ms",
            "200",
        ],
        TREE,
    );
    let pids = pids(&dir);
    let said = reports(&control);
    assert_tree_gone(&dir, &pids);
    assert!(said[0]["started"].is_u64(), "{said:?}");
    assert_eq!(said.last().unwrap()["ended"], "lease", "{said:?}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn renewals_keep_the_agent_and_its_exit_status_is_reported() {
    let (_keep, dir) = tempdir();
    let (mut child, mut control) = supervise(
        &dir,
        &["--timeout-ms", "60000", "--lease-ms", "300"],
        "while [ ! -e finish ]; do sleep 0.05; done; exit 3",
    );
    // Renew for well past three leases' worth of time, then let it finish.
    let until = Instant::now() + Duration::from_millis(1200);
    wait_within(Duration::from_secs(10), "renewed long enough", || {
        control.write_all(b"renew 300\n").unwrap();
        (Instant::now() >= until).then_some(())
    });
    std::fs::write(dir.join("finish"), "").unwrap();
    let said = reports(&control);
    let end = said.last().unwrap();
    assert_eq!(end["ended"], "exited", "{said:?}");
    // A raw wait status: exit code 3.
    assert_eq!(
        end["status"].as_i64().map(|s| (s >> 8) & 0xff),
        Some(3),
        "{said:?}"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn stop_and_timeout_end_the_tree() {
    let (_keep, dir) = tempdir();
    let (mut child, mut control) = supervise(&dir, &["--timeout-ms", "60000"], TREE);
    let pids1 = pids(&dir);
    control.write_all(b"stop\n").unwrap();
    let said = reports(&control);
    assert_eq!(said.last().unwrap()["ended"], "stopped");
    assert_tree_gone(&dir, &pids1);
    child.wait().unwrap();

    let (_keep2, dir2) = tempdir();
    let (mut child, control) = supervise(&dir2, &["--timeout-ms", "700"], TREE);
    let pids2 = pids(&dir2);
    let said = reports(&control);
    assert_eq!(said.last().unwrap()["ended"], "timeout");
    assert_tree_gone(&dir2, &pids2);
    child.wait().unwrap();
}

#[test]
fn a_program_that_cannot_start_is_reported_with_its_errno() {
    let (_keep, dir) = tempdir();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let fd = theirs.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentcron"));
    cmd.args(["__supervise", "--timeout-ms", "1000", "--", "/nonexistent/agent"])
        .current_dir(&dir);
    // SAFETY: dup2 between fork and exec only.
    unsafe {
        cmd.pre_exec(move || {
            libc::dup2(fd, 3);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(theirs);
    let said = reports(&ours);
    assert_eq!(said[0]["errno"], libc::ENOENT, "{said:?}");
    assert!(!child.wait().unwrap().success());
    // Bad arguments are a usage error, said on stderr.
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["__supervise", "--lease-ms", "soon", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a number"));
}
