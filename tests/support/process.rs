//! Real processes for the CLI and headless tests: the binary, one CLI call,
//! polling with a deadline, and a scheduler process that dies with its test.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentcron"))
}

/// `agentcron ARGS --config DIR/agentcron.toml`, waited for.
pub fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap()
}

/// Polls `f` every 50 ms until it returns `Some`; panics after `limit`.
pub fn wait_within<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A scheduler process, killed (and reaped) when the test lets go of it.
pub struct Scheduler(pub Child);

impl Scheduler {
    /// `agentcron run --headless --config DIR/agentcron.toml`, its stderr
    /// (the log) in `DIR/LOG`.
    pub fn headless(dir: &Path, log: &str) -> Scheduler {
        let log = std::fs::File::create(dir.join(log)).unwrap();
        Scheduler(
            Command::new(bin())
                .args(["run", "--headless", "--config"])
                .arg(dir.join("agentcron.toml"))
                .stdout(std::process::Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test database `DIR/test.db`, once the scheduler has created it.
pub fn store(dir: &Path) -> Option<agentcron::store::Store> {
    let p = dir.join("test.db");
    if p.exists() {
        agentcron::store::Store::open(&p).ok()
    } else {
        None
    }
}
