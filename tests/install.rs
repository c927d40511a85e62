//! Installing and running it for months (issue 51): shell completions that a
//! shell really loads and completes with, a man page, a version that names its
//! commit (in `--version` and in `status`), and a systemd unit that
//! `systemd-analyze verify` accepts where systemd exists.

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::process::{Scheduler, bin, cli, wait_within};

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin()).args(args).output().expect("run agentcron");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The commit `build.rs` should have stamped: git's short HEAD, or "unknown".
fn expected_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string())
}

#[test]
fn bash_sources_the_completions_and_completes_ru_to_runs_and_run() {
    let (code, script, err) = run(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agentcron.bash");
    std::fs::write(&file, &script).unwrap();
    // Source it (failing on any error), find the function `complete` registered
    // for agentcron, and call it as bash's completion would for `agentcron ru<TAB>`.
    let probe = format!(
        r#"set -e
source '{}'
spec=$(complete -p agentcron)
fn=$(printf '%s\n' "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
test -n "$fn"
COMP_WORDS=(agentcron ru)
COMP_CWORD=1
COMP_LINE='agentcron ru'
COMP_POINT=${{#COMP_LINE}}
COMPREPLY=()
set +e
"$fn" agentcron ru agentcron
printf '%s\n' "${{COMPREPLY[@]}}"
"#,
        file.display()
    );
    let out = Command::new("bash")
        .arg("--norc")
        .arg("--noprofile")
        .arg("-c")
        .arg(&probe)
        .output()
        .expect("bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bash could not source the completions: {stderr}"
    );
    assert!(stderr.trim().is_empty(), "sourcing printed errors: {stderr}");
    let mut offered: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    offered.sort();
    assert_eq!(offered, ["run", "runs"], "completing `agentcron ru`");
}

#[test]
fn zsh_and_fish_completions_and_the_man_page_are_generated() {
    for shell in ["zsh", "fish"] {
        let (code, script, err) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            script.contains("agentcron") && script.contains("runs"),
            "{shell}: {script}"
        );
        // Syntax-checked by the shell itself where it is installed.
        if has(shell) {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("completions");
            std::fs::write(&file, &script).unwrap();
            let flag = if shell == "zsh" { "-n" } else { "--no-execute" };
            let st = Command::new(shell).arg(flag).arg(&file).status().unwrap();
            assert!(st.success(), "{shell} {flag} refuses the script");
        } else {
            println!("SKIPPED: {shell} is not installed; its script's syntax is not checked");
        }
    }
    let (code, man, err) = run(&["completions", "powershell"]);
    assert_eq!(code, 2, "an unknown shell is a usage error: {man}{err}");

    let (code, man, err) = run(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(man.starts_with(".ie") || man.contains(".TH agentcron"), "{man}");
    assert!(man.contains("completions") && man.contains("rehearse"), "{man}");
}

#[test]
fn version_names_the_commit() {
    let (code, out, err) = run(&["--version"]);
    assert_eq!(code, 0, "{err}");
    let commit = expected_commit();
    assert_eq!(
        out.trim(),
        format!("agentcron {} (commit {commit})", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(agentcron::COMMIT, commit);
}

#[test]
fn status_names_the_commit_of_each_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"
shutdown_grace = "2s"
heartbeat = "1s"

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{\"event\":\"result\",\"status\":\"success\"}'"]

[[schedule]]
id = "daily"
agent = "quick"
cron = "0 9 * * *"
"#,
    )
    .unwrap();
    let _scheduler = Scheduler(
        Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(dir.path().join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let commit = expected_commit();
    let version = wait_within(Duration::from_secs(60), "the scheduler in status", || {
        let out = cli(dir.path(), &["status", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["schedulers"]["list"][0]["version"].as_str().map(str::to_string)
    });
    assert_eq!(version, agentcron::VERSION);
    assert!(version.contains(&format!("(commit {commit})")), "{version}");
    let text = cli(dir.path(), &["status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("agentcron {}", agentcron::VERSION)),
        "{text}"
    );
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/agentcron.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    // What the unit must say whatever systemd says about it.
    for line in [
        "ExecStart=/usr/local/bin/agentcron --config /etc/agentcron/agentcron.toml run --headless",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=on-failure",
        "User=agentcron",
        "StateDirectory=agentcron",
    ] {
        assert!(text.lines().any(|l| l == line), "the unit lacks `{line}`");
    }
    // Stopping waits shutdown_grace (default 30 s) plus the agents' 2 s TERM → KILL.
    let stop: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec="))
        .and_then(|v| v.trim().parse().ok())
        .expect("TimeoutStopSec= in seconds");
    assert!(
        stop > 32,
        "TimeoutStopSec={stop} is not above shutdown_grace's 30 s + 2 s"
    );

    if !has("systemd-analyze") {
        println!("SKIPPED: systemd-analyze is not installed; the unit was not verified");
        return;
    }
    // Verified as shipped but for ExecStart's binary, which must exist for
    // systemd to accept the unit: this build's binary stands in for
    // /usr/local/bin/agentcron. `--man=no`: the man page is not installed here.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("agentcron.service");
    std::fs::write(
        &copy,
        text.replace("/usr/local/bin/agentcron", &bin().display().to_string()),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .unwrap();
    // It exits 0 on an unknown key or a bad value, only saying so ("…,
    // ignoring"): anything it says about the unit fails the test.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}
