//! The console's embedded scheduler logs to a file beside the database
//! (issue 51): the terminal is the console's, and before this its warnings
//! went nowhere. End to end in tmux (a private server, polled with a deadline,
//! never a fixed sleep): a headless scheduler dies (`kill -9`) holding a
//! running attempt; the console started next takes the lapsed lease over, and
//! its `lost` warning is in `agentcron.log` and on screen through `:log`.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

const DEADLINE: Duration = Duration::from_secs(60);

/// A tmux server of our own running one command in an 120×40 pane; killed on drop.
struct Tmux(String);

impl Tmux {
    fn start(dir: &Path, command: &str) -> Tmux {
        let socket = format!("agentcron-log-test-{}", std::process::id());
        let tm = Tmux(socket);
        let out = tm.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            &dir.display().to_string(),
            "-e",
            "NO_COLOR=",
            &format!("{command}; echo \"[exited $?]\"; exec sleep 600"),
        ]);
        assert!(
            out.status.success(),
            "tmux new-session (tmux is required: apt-get install tmux): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tm
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }

    fn wait_for(&self, want: &str) -> String {
        wait_within(DEADLINE, &format!("`{want}` on screen"), || {
            let s = self.screen();
            s.contains(want).then_some(s)
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

#[test]
fn the_consoles_scheduler_writes_its_lost_warning_to_its_log_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
lease = "3s"
takeover_grace = "1s"
shutdown_grace = "1s"
heartbeat = "1s"

[agents.slow]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; sleep 30"]
timeout = "60s"

[[schedule]]
id = "slow"
agent = "slow"
every = "2s"
"#,
    )
    .unwrap();

    // A headless scheduler claims the first window and dies holding its lease.
    let mut headless = Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(d.join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let run = wait_within(DEADLINE, "a running attempt", || {
        let out = cli(d, &["runs", "--state", "running", "--json"]);
        let runs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).ok()?;
        runs.first().and_then(|r| r["id"].as_i64())
    });
    headless.0.kill().unwrap();
    headless.0.wait().unwrap();
    assert!(
        !d.join("agentcron.log").exists(),
        "a headless scheduler logs to stderr only"
    );

    // The console's embedded scheduler sweeps the lapsed lease: `lost`.
    let console = format!(
        "'{}' --config '{}'",
        bin().display(),
        d.join("agentcron.toml").display()
    );
    let tm = Tmux::start(d, &console);
    tm.wait_for("Schedules");
    let log = d.join("agentcron.log");
    let line = wait_within(DEADLINE, "the lost warning in agentcron.log", || {
        std::fs::read_to_string(&log)
            .ok()?
            .lines()
            .find(|l| l.contains("WARN") && l.contains("kind=lost") && l.contains(&format!("run={run}")))
            .map(str::to_string)
    });
    assert!(line.contains("slow"), "{line}");
    // Nothing of the log reached the terminal: the console's screen is whole.
    assert!(!tm.screen().contains("kind=lost"), "{}", tm.screen());

    // `:log` shows the tail, the warning among it.
    tm.keys(&[":"]);
    tm.keys(&["-l", "log"]);
    tm.keys(&["Enter"]);
    let screen = tm.wait_for("kind=lost");
    assert!(screen.contains("agentcron.log"), "{screen}");
    tm.keys(&["Escape"]);
    wait_within(DEADLINE, "the log overlay closed", || {
        (!tm.screen().contains("kind=lost")).then_some(())
    });
}
