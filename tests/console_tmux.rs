//! The real binary's console end to end, in tmux: a private server socket per
//! test, a fixed 120×40 pane, keys sent like an operator types them, and the
//! screen read with `capture-pane` — polled until the expected text appears
//! (with a deadline), never after a fixed sleep. The server is killed when a
//! test ends, passed or failed.
//!
//! tmux is required (CI installs it): without it these tests fail and say so.

#[path = "store_support.rs"]
mod store_support;
mod support;

use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::Store;
use agentcron::store::types::*;
use chrono::TimeDelta;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::*;

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;
/// How long to wait for text on screen (a debug binary on a slow CI machine).
const DEADLINE: Duration = Duration::from_secs(30);
/// How often the screen is read while waiting.
const POLL: Duration = Duration::from_millis(50);
/// The actor operator actions are recorded with (`USER` in the pane).
const ACTOR: &str = "tmux-tester";

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentcron"))
}

/// `'text'` for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn shell_words(args: &[&str]) -> String {
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// A tmux server of our own with one session `t` running a command; killed
/// (and its socket file removed) on drop.
struct Tmux {
    socket: String,
    socket_path: Option<PathBuf>,
}

impl Tmux {
    /// Runs `command` (a shell command line) in a 120×40 pane in `dir`. When the
    /// command ends the pane prints `[exited CODE]` and stays, so the end of a
    /// run is on screen too.
    fn start(dir: &Path, command: &str) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "agentcron-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let check = Command::new("tmux").arg("-V").output();
        if let Err(e) = check {
            panic!(
                "the console end-to-end tests need tmux, which could not be run ({e}); \
                 install it (apt-get install tmux, brew install tmux)"
            );
        }
        let mut tm = Tmux {
            socket,
            socket_path: None,
        };
        let wrapped = format!("{command}; echo \"[exited $?]\"; exec sleep 600");
        let out = tm.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &WIDTH.to_string(),
            "-y",
            &HEIGHT.to_string(),
            "-c",
            &dir.display().to_string(),
            "-e",
            &format!("USER={ACTOR}"),
            "-e",
            "NO_COLOR=",
            &wrapped,
        ]);
        assert!(out.status.success(), "tmux new-session: {}", text(&out));
        tm.socket_path = Some(PathBuf::from(tm.pane("socket_path")));
        tm
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Presses keys by tmux name (`Enter`, `Tab`, `Escape`, `q`, …).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        let out = self.tmux(&args);
        assert!(out.status.success(), "send-keys: {}", text(&out));
    }

    /// Types `s` literally.
    fn type_text(&self, s: &str) {
        let out = self.tmux(&["send-keys", "-t", "t", "-l", s]);
        assert!(out.status.success(), "send-keys -l: {}", text(&out));
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// A pane variable (`alternate_on`, `cursor_flag`, …).
    fn pane(&self, var: &str) -> String {
        let out = self.tmux(&["display-message", "-p", "-t", "t", &format!("#{{{var}}}")]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Polls the screen until it contains `want`; panics with the screen at the deadline.
    fn wait_for(&self, want: &str) -> String {
        self.wait_until(want, |s| s.contains(want))
    }

    fn wait_until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `{what}`; the screen was:\n{screen}"
            );
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        if let Some(p) = self.socket_path.take().filter(|p| p.is_absolute()) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A headless scheduler started by a test; stopped (SIGTERM) on drop.
struct Headless(Child);

impl Drop for Headless {
    fn drop(&mut self) {
        // SAFETY: signalling our own child process by its pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `agentcron --config DIR/agentcron.toml --db DIR/test.db ARGS…` as a shell command line.
fn console_command(dir: &Path, args: &[&str]) -> String {
    let cfg = dir.join("agentcron.toml").display().to_string();
    let db = dir.join("test.db").display().to_string();
    let bin = bin().display().to_string();
    let mut all = vec![bin.as_str(), "--config", &cfg, "--db", &db];
    all.extend_from_slice(args);
    shell_words(&all)
}

/// The CLI on the same config and database.
fn cli(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .arg("--db")
        .arg(dir.join("test.db"))
        .args(args)
        .output()
        .expect("agentcron runs")
}

const REFUNDS: &str = r#"
[[schedule]]
id = "refund-review"
agent = "sim"
on_event = "refund.requested"
close_after = "1h"
"#;

#[test]
fn approve_a_needs_human_run_by_keys_with_a_typed_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{REFUNDS}"));
    // The engine parks a run for a human: the agent exits 77.
    let agent = sim_agent(vec![SimAttempt {
        end: SimEnd::Exit(77),
        latency: TimeDelta::seconds(10),
        ..Default::default()
    }]);
    let mut d = driver(
        &dir,
        cfg,
        "2026-01-05T01:00:00Z",
        vec![("refund-review", agent)],
        vec![],
    );
    let store = d.store().unwrap();
    agentcron::operator::post_event(
        &store,
        "refund.requested",
        Some("R-1"),
        &serde_json::json!({}),
        d.now(),
    )
    .unwrap();
    d.run_until(t("2026-01-05T01:10:00Z")).unwrap();
    let run = runs(&store, "refund-review").pop().expect("a run");
    assert_eq!(run.state, RunState::NeedsHuman);
    drop(d);

    // The console with its embedded scheduler, acting (not --read-only).
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &[]));
    tm.wait_for(" LIVE ");
    tm.keys(&["5"]);
    tm.wait_for("R-1");
    tm.keys(&["a"]);
    tm.wait_for(&format!("Approve run #{}", run.id));
    tm.type_text("refund list checked by phone");
    // Enter in the box never confirms: S-Tab goes from the reason round to
    // the action button (whatever fields lie between), Enter presses it.
    tm.keys(&["BTab"]);
    tm.keys(&["Enter"]);
    tm.wait_for(&format!("approved by {ACTOR}"));
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");

    let out = cli(dir.path(), &["show", &run.id.to_string(), "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("show --json");
    let approved = shown["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["kind"] == "approved")
        .unwrap_or_else(|| panic!("no approved event: {shown}"));
    assert!(
        approved["detail"]
            .to_string()
            .contains("refund list checked by phone"),
        "{approved}"
    );
    assert_ne!(shown["state"], "needs_human", "{shown}");
    let approvals = store.read(|tx| tx.approvals(run.id)).unwrap();
    assert_eq!(approvals.len(), 1);
    assert!(approvals[0].approved);
    assert_eq!(approvals[0].actor, ACTOR);
    assert_eq!(approvals[0].reason, "refund list checked by phone");
}

#[test]
fn the_kill_switch_is_pulled_by_typing_its_name() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &[]));
    tm.wait_for("kill switch off");
    tm.keys(&["K"]);
    tm.wait_for("Turn the global kill switch ON");
    tm.type_text("incident 4711 from tmux");
    tm.keys(&["Enter"]);
    tm.type_text("kill");
    // Enter on the typed name lands on Cancel, never straight on Kill.
    tm.keys(&["Enter", "Tab", "Enter"]);
    tm.wait_for("KILL SWITCH ON");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");

    let out = cli(dir.path(), &["events", "--json", "--kind", "switch_changed"]);
    assert!(out.status.success(), "{}", text(&out));
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).expect("events --json");
    let change = events
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["kind"] == "switch_changed" && e["detail"]["name"] == "kill")
        .unwrap_or_else(|| panic!("no switch_changed: {events}"));
    assert_eq!(change["detail"]["on"], true);
    assert_eq!(change["detail"]["actor"], ACTOR);
    assert_eq!(change["detail"]["reason"], "incident 4711 from tmux");
}

#[test]
fn attach_shows_the_runs_of_a_headless_scheduler() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("test.db").display().to_string();
    attach_to_a_headless_scheduler(&dir, &db);
}

/// `console --attach` on a PostgreSQL ledger a headless scheduler runs on:
/// the same screen as on a file.
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn attach_shows_the_runs_of_a_headless_scheduler_on_postgresql() {
    let Some(url) = store_support::pg_database(
        "console_tmux::attach_shows_the_runs_of_a_headless_scheduler_on_postgresql",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    attach_to_a_headless_scheduler(&dir, &url);
    assert!(!dir.path().join("test.db").exists(), "no file made of the URL");
}

/// A headless scheduler on `db` (a file or a URL) running a schedule every
/// 2 s; a console attached to it shows its newest run succeeded.
fn attach_to_a_headless_scheduler(dir: &tempfile::TempDir, db: &str) {
    config(
        dir,
        &format!(
            "{BASE}{}",
            r#"
[[schedule]]
id = "heartbeat"
agent = "sim"
every = "2s"
"#
        ),
    );
    let log = std::fs::File::create(dir.path().join("headless.log")).unwrap();
    let child = Command::new(bin())
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .args(["--db", db, "run", "--headless"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("headless scheduler starts");
    let _headless = Headless(child);
    let is_file = !db.starts_with("postgres");
    let deadline = Instant::now() + DEADLINE;
    while is_file && !Path::new(db).exists() {
        assert!(
            Instant::now() < deadline,
            "the headless scheduler made no database"
        );
        std::thread::sleep(POLL);
    }
    let cfg = dir.path().join("agentcron.toml").display().to_string();
    let bin = bin().display().to_string();
    let console = shell_words(&[&bin, "--config", &cfg, "--db", db, "console", "--attach"]);
    let tm = Tmux::start(dir.path(), &console);
    tm.wait_for(" LIVE ");
    // The schedule's newest run, as soon as the scheduler finished one.
    let screen = tm.wait_for("✓ succeeded");
    assert!(screen.contains("heartbeat"), "{screen}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
    let store = Store::open(Path::new(db)).unwrap();
    assert!(
        runs(&store, "heartbeat")
            .iter()
            .any(|r| r.state == RunState::Succeeded)
    );
}

#[test]
fn a_console_that_cannot_start_starts_no_scheduler() {
    // A bad theme (in a terminal) and a missing terminal: refused with exit 2
    // before the embedded scheduler exists, so no run is claimed and no agent
    // starts (the database is never even created).
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let tm = Tmux::start(
        dir.path(),
        &console_command(dir.path(), &["--theme", "no-such-theme"]),
    );
    let screen = tm.wait_for("[exited 2]");
    assert!(screen.contains("unknown theme `no-such-theme`"), "{screen}");
    assert!(!dir.path().join("test.db").exists(), "a scheduler ran");

    let out = Command::new(bin())
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(dir.path().join("test.db"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("needs a terminal"), "{}", text(&out));
    assert!(!dir.path().join("test.db").exists(), "a scheduler ran");
}

#[test]
fn a_read_only_console_runs_the_scheduler_but_refuses_actions() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &["--read-only"]));
    let screen = tm.wait_for("READ-ONLY");
    assert!(screen.contains("LIVE"), "{screen}");
    // The embedded scheduler runs: it created the database and takes events.
    assert!(dir.path().join("test.db").exists());
    let out = cli(dir.path(), &["event", "post", "refund.requested", "--id", "r1"]);
    assert!(out.status.success(), "{}", text(&out));
    tm.wait_for("refund-review");
    // An action key is refused, and nothing is written.
    tm.keys(&["K"]);
    tm.wait_for("read-only");
    let switches = cli(dir.path(), &["events", "--json"]);
    assert!(!text(&switches).contains("switch_changed"), "{}", text(&switches));
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}

#[test]
fn quitting_with_q_restores_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let command = format!(
        "echo BEFORE-CONSOLE; {}; echo AFTER-CONSOLE rc=$?; \
         if stty -a | grep -q -- -icanon; then echo TTY-RAW; else echo TTY-COOKED; fi",
        console_command(dir.path(), &[])
    );
    let tm = Tmux::start(dir.path(), &command);
    let running = tm.wait_for(" LIVE ");
    assert!(
        !running.contains("BEFORE-CONSOLE"),
        "the console draws on its own screen"
    );
    assert_eq!(tm.pane("alternate_on"), "1");
    tm.keys(&["q"]);
    let after = tm.wait_for("[exited 0]");
    assert!(after.contains("AFTER-CONSOLE rc=0"), "{after}");
    assert!(after.contains("TTY-COOKED"), "raw mode left on:\n{after}");
    assert!(
        after.contains("BEFORE-CONSOLE"),
        "the shell's screen is back:\n{after}"
    );
    assert!(!after.contains(" LIVE "), "console left on screen:\n{after}");
    assert_eq!(tm.pane("alternate_on"), "0", "still in the alternate screen");
    assert_eq!(tm.pane("cursor_flag"), "1", "the cursor is hidden");
}

#[test]
fn a_console_whose_terminal_goes_away_exits() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let pidfile = dir.path().join("console.pid");
    let command = format!(
        "echo $$ > {}; exec {}",
        quote(&pidfile.display().to_string()),
        console_command(dir.path(), &[])
    );
    let tm = Tmux::start(dir.path(), &command);
    tm.wait_for(" LIVE ");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .expect("pid");
    // The terminal disappears under it (the tmux server dies).
    drop(tm);
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let deadline = Instant::now() + DEADLINE;
    while proc_dir.exists() {
        let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break; // exited, not yet reaped by its new parent
        }
        if Instant::now() >= deadline {
            // SAFETY: killing the console this test started, by its pid.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            panic!("the console kept running after its terminal went away");
        }
        std::thread::sleep(POLL);
    }
}

#[test]
fn step_through_a_rehearsal_until_every_expectation_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("sample-config/rehearsals/data-delay.toml");
    let command = shell_words(&[
        &bin().display().to_string(),
        "rehearse",
        &scenario.display().to_string(),
        "--console",
    ]);
    let tm = Tmux::start(root, &command);
    let first = tm.wait_for("step 0 ·");
    assert!(first.contains(" REHEARSAL "), "{first}");
    assert!(
        first.contains("virtual"),
        "the header clock is the virtual one:\n{first}"
    );
    assert!(first.contains("… pending"), "{first}");
    let mut step = 0;
    let done = loop {
        step += 1;
        assert!(step <= 100, "the rehearsal did not finish in 100 steps");
        tm.keys(&["n"]);
        let screen = tm.wait_until(&format!("step {step}"), |s| {
            s.contains(&format!("step {step} ·")) || s.contains("finished ·")
        });
        if screen.contains("finished ·") {
            break screen;
        }
    };
    // Every expectation of the scenario resolved, and held.
    assert!(done.contains(" ✗0 …0"), "{done}");
    assert!(done.contains("PASSED"), "{done}");
    assert!(done.matches("✓ pass").count() >= 5, "{done}");
    assert!(!done.contains("… pending") && !done.contains("✗ FAIL"), "{done}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}

/// Issue 52: quitting a rehearsal with its expectations still pending exits 1,
/// as `rehearse FILE` does for any expectation that does not hold.
#[test]
fn quitting_a_rehearsal_with_expectations_pending_exits_1() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = root.join("sample-config/rehearsals/data-delay.toml");
    let command = shell_words(&[
        &bin().display().to_string(),
        "rehearse",
        &scenario.display().to_string(),
        "--console",
    ]);
    let tm = Tmux::start(root, &command);
    let first = tm.wait_for("step 0 ·");
    assert!(first.contains("… pending"), "{first}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 1]");
}

/// A schedule whose agent takes a few seconds (a real process), run once per
/// posted `go` event.
const SLOW: &str = r#"
[agents.slow]
kind = "command"
command = ["sh", "-c", "head -n 1 > /dev/null; sleep 3; echo '{\"event\":\"result\",\"status\":\"success\",\"summary\":\"slow done\"}'"]
timeout = "1m"

[[schedule]]
id = "slow-report"
agent = "slow"
on_event = "go"
close_after = "1h"
"#;

/// BASE with a 20 s grace period and SLOW, its agent sleeping as `sleep` says.
fn slow_config(sleep: &str) -> String {
    let base = BASE.replace("[scheduler]\n", "[scheduler]\nshutdown_grace = \"20s\"\n");
    format!("{base}{}", SLOW.replace("sleep 3", sleep))
}

/// Starts the console on SLOW with one attempt running; returns at the moment
/// the schedules pane shows it running.
fn console_with_a_running_attempt(dir: &Path) -> Tmux {
    let tm = Tmux::start(dir, &console_command(dir, &[]));
    tm.wait_for(" LIVE ");
    let out = cli(dir, &["event", "post", "go", "--id", "g1"]);
    assert!(out.status.success(), "{}", text(&out));
    tm.wait_for("► running");
    tm
}

fn run_json(dir: &Path) -> serde_json::Value {
    let out = cli(dir, &["runs", "--json", "--schedule", "slow-report"]);
    assert!(out.status.success(), "{}", text(&out));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("runs --json");
    runs[0].clone()
}

#[test]
fn q_with_an_attempt_running_asks_and_waiting_lets_it_succeed() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &slow_config("sleep 3"));
    let tm = console_with_a_running_attempt(dir.path());
    tm.keys(&["q"]);
    // The dialog's last line: a capture can catch it half drawn.
    let asked = tm.wait_for("Stop them now");
    assert!(
        asked.contains("slow-report"),
        "the dialog lists the attempt:\n{asked}"
    );
    assert!(
        asked.contains("Wait for them") && asked.contains("Stop them now"),
        "{asked}"
    );
    // The focus starts on Cancel, as in every dialog; Right is waiting.
    tm.keys(&["Right", "Enter"]);
    let waiting = tm.wait_for("Quitting: waiting for running attempts");
    assert!(waiting.contains("left of shutdown_grace"), "{waiting}");
    assert!(
        waiting.contains(" LIVE "),
        "the screen stays up while it waits:\n{waiting}"
    );
    tm.wait_for("[exited 0]");
    let run = run_json(dir.path());
    assert_eq!(run["state"], "succeeded", "{run}");
}

#[test]
fn ctrl_c_twice_stops_the_attempt_now_and_it_retries() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &slow_config("sleep 60"));
    let tm = console_with_a_running_attempt(dir.path());
    tm.keys(&["C-c"]);
    tm.wait_for("Quit agentcron?");
    tm.keys(&["C-c"]);
    tm.wait_for("[exited 0]");
    let run = run_json(dir.path());
    assert_eq!(run["state"], "retry_wait", "{run}");
    let out = cli(dir.path(), &["explain", "slow-report"]);
    assert!(
        text(&out).contains("stopped when the operator quit at"),
        "{}",
        text(&out)
    );
}

/// Issue 52: SIGTERM to the console (no quit dialog) is a shutdown: the
/// attempt still running when the grace period runs out ends then, as
/// "stopped by scheduler shutdown", and retries — never left to be found lost.
#[test]
fn sigterm_to_the_console_ends_the_running_attempt_as_a_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let slow = slow_config("sleep 60").replace("shutdown_grace = \"20s\"", "shutdown_grace = \"1s\"");
    config(&dir, &slow);
    let pidfile = dir.path().join("console.pid");
    let inner = format!(
        "echo $$ > {}; exec {}",
        quote(&pidfile.display().to_string()),
        console_command(dir.path(), &[])
    );
    let tm = Tmux::start(dir.path(), &format!("sh -c {}", quote(&inner)));
    tm.wait_for(" LIVE ");
    let out = cli(dir.path(), &["event", "post", "go", "--id", "g1"]);
    assert!(out.status.success(), "{}", text(&out));
    tm.wait_for("► running");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .expect("pid");
    // SAFETY: signalling the console this test started, by its pid.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    tm.wait_for("[exited");
    let run = run_json(dir.path());
    assert_eq!(run["state"], "retry_wait", "{run}");
    let out = cli(dir.path(), &["explain", "slow-report"]);
    assert!(
        text(&out).contains("stopped by scheduler shutdown at"),
        "{}",
        text(&out)
    );
}

/// Issue 19's first minute: the real binary on a copy of `sample-config/`, no
/// other step. Within 60 s the screen shows a succeeded run, a gate waiting
/// and then passing, a retry, a run waiting for approval and a backfill entry
/// (and the demo's open circuit); everything it writes stays in the copy, so
/// the repository's `git status` does not change.
#[test]
fn the_sample_shows_every_pane_alive_within_a_minute() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = || {
        Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=all"])
            .current_dir(root)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let before = status();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("sample-config");
    copy_dir(&root.join("sample-config"), &copy);
    let command = shell_words(&[
        &bin().display().to_string(),
        "--config",
        &copy.join("agentcron.toml").display().to_string(),
    ]);
    let tm = Tmux::start(&copy, &command);
    tm.wait_for(" LIVE ");
    // Each thing to see, and when it was first seen.
    let wanted = [
        "a succeeded run",
        "a gate waiting",
        "the gate passed",
        "a retry",
        "an approval",
        "a backfill entry",
        "an open circuit",
    ];
    let mut seen: Vec<Option<Instant>> = vec![None; wanted.len()];
    let started = Instant::now();
    let mut last = String::new();
    while seen.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(60) {
        let screen = tm.screen();
        let row = |id: &str| {
            screen
                .lines()
                .find(|l| l.contains(&format!(" {id} ")))
                .unwrap_or("")
                .to_string()
        };
        let late = row("demo-late-upstream");
        let now = [
            screen.contains("✓ succeeded"),
            late.contains("◷ gate demo_upstream"),
            // After a wait: its health back to ok (claimed, ran) and a run ended well.
            seen[1].is_some() && !late.contains('◷') && late.contains("✓ succeeded"),
            screen.contains(" 4 Retries·"),
            screen.contains(" 5 Approvals ?"),
            screen.contains(" 6 Backfill·"),
            row("demo-broken-export").contains("⊘ circuit open"),
        ];
        for (i, hit) in now.into_iter().enumerate() {
            if hit && seen[i].is_none() {
                seen[i] = Some(Instant::now());
            }
        }
        last = screen;
        std::thread::sleep(POLL);
    }
    let missing: Vec<&str> = wanted
        .iter()
        .zip(&seen)
        .filter(|(_, s)| s.is_none())
        .map(|(w, _)| *w)
        .collect();
    assert!(
        missing.is_empty(),
        "not seen within 60 s: {missing:?}; the screen was:\n{last}"
    );
    tm.keys(&["q"]);
    // Quitting may ask about running demo attempts: stop them.
    let end = tm.wait_until("the console to quit", |s| {
        s.contains("[exited") || s.contains("Quit agentcron?")
    });
    if end.contains("Quit agentcron?") {
        tm.keys(&["C-c"]);
    }
    tm.wait_for("[exited 0]");
    assert!(
        copy.join("agentcron.db").exists(),
        "the database is next to the copied config"
    );
    assert_eq!(status(), before, "the sample wrote into the repository");
}

/// `cp -r src dst` of plain files and folders, leaving out what running the
/// sample there made (git-ignored: databases, out/, data/, caches, alerts).
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let made = [".db", ".db-wal", ".db-shm", ".db-journal"]
            .iter()
            .any(|ext| name.ends_with(ext))
            || ["out", "data", "__pycache__", "alerts.jsonl"].contains(&name.as_str());
        if made {
            continue;
        }
        let to = dst.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_dir(&entry.path(), &to);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

#[test]
fn attach_read_only_works_on_a_database_nobody_may_write() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    config(
        &dir,
        &format!(
            "{BASE}{}",
            r#"
[[schedule]]
id = "frozen-report"
agent = "sim"
on_event = "go"
"#
        ),
    );
    // Only a scheduler (or the console) makes a ledger; the verbs act on one.
    drop(agentcron::store::Store::open(&dir.path().join("test.db")).unwrap());
    let out = cli(dir.path(), &["trigger", "frozen-report", "--window", "w1"]);
    assert!(out.status.success(), "{}", text(&out));
    // A 0444 file in a 0555 folder; as root (whom mode bits do not stop) the
    // console runs as `nobody`.
    let db = dir.path().join("test.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    struct Unlock(PathBuf);
    impl Drop for Unlock {
        fn drop(&mut self) {
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
    let _unlock = Unlock(dir.path().to_path_buf());
    let console = console_command(dir.path(), &["console", "--attach", "--read-only"]);
    // SAFETY: geteuid(2) only reads our id.
    let command = if unsafe { libc::geteuid() } == 0 {
        format!("setpriv --reuid=65534 --regid=65534 --clear-groups -- {console}")
    } else {
        console
    };
    let tm = Tmux::start(dir.path(), &command);
    let screen = tm.wait_for("frozen-report");
    assert!(!screen.contains("cannot open"), "{screen}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}

/// Issue 52: `console --attach` opens on the ledger's version when a typo is
/// saved in the file (the scheduler still runs the last good version).
#[test]
fn attach_opens_on_the_ledgers_version_when_the_file_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let good = format!("{BASE}\n[[schedule]]\nid = \"heartbeat\"\nagent = \"sim\"\nevery = \"2s\"\n");
    config(&dir, &good);
    let log = std::fs::File::create(dir.path().join("headless.log")).unwrap();
    let child = Command::new(bin())
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(dir.path().join("test.db"))
        .args(["run", "--headless"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("headless scheduler starts");
    let _headless = Headless(child);
    let deadline = Instant::now() + DEADLINE;
    while !cli(dir.path(), &["status"]).status.success() {
        assert!(Instant::now() < deadline, "the headless scheduler never came up");
        std::thread::sleep(POLL);
    }
    std::fs::write(
        dir.path().join("agentcron.toml"),
        good.replace("every = ", "evrey = "),
    )
    .unwrap();
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &["console", "--attach"]));
    let screen = tm.wait_for(" LIVE ");
    assert!(!screen.contains("is not valid"), "{screen}");
    tm.wait_for("heartbeat");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}

#[test]
fn the_header_says_when_no_scheduler_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    config(
        &dir,
        &format!(
            "{}{}",
            BASE.replace("[scheduler]\n", "[scheduler]\nheartbeat = \"500ms\"\n"),
            r#"
[[schedule]]
id = "every-second"
agent = "sim"
every = "1s"
"#
        ),
    );
    let log = std::fs::File::create(dir.path().join("headless.log")).unwrap();
    let child = Command::new(bin())
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(dir.path().join("test.db"))
        .args(["run", "--headless"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("headless scheduler starts");
    let mut headless = Headless(child);
    let deadline = Instant::now() + DEADLINE;
    while !dir.path().join("test.db").exists() {
        assert!(
            Instant::now() < deadline,
            "the headless scheduler made no database"
        );
        std::thread::sleep(POLL);
    }
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &["console", "--attach"]));
    tm.wait_for(" LIVE · 1 scheduler ");
    // The scheduler dies without a word: after three heartbeats the header
    // says so in the error style, and the schedule's missed fire is overdue.
    headless.0.kill().expect("kill -9");
    let _ = headless.0.wait();
    // 120 columns: the short form of the header.
    let screen = tm.wait_for("NO SCHEDULER ALIVE (seen ");
    assert!(screen.contains(" due) "), "{screen}");
    tm.wait_for("⚠ overdue");
    let out = cli(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("NO SCHEDULER ALIVE"), "{}", text(&out));
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}

#[test]
fn the_console_s_embedded_scheduler_serves_with_listen_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &["--listen", &listen]));
    tm.wait_for(" LIVE · 1 scheduler ");
    let http: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    for path in ["/livez", "/readyz", "/metrics"] {
        let resp = http.get(&format!("http://{listen}{path}")).call().expect(path);
        assert_eq!(resp.status(), 200, "{path}");
    }
    assert_eq!(cli(dir.path(), &["status"]).status.code(), Some(0));
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
    // Quitting stopped the scheduler cleanly: nobody is alive, and nothing listens.
    let out = cli(dir.path(), &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("stopped"), "{}", text(&out));
    assert!(
        http.get(&format!("http://{listen}/livez")).call().is_err(),
        "the server stopped with it"
    );
}

/// Issue 52: after `:reload` applied a new schedule the schedules pane kept
/// its old rows and `t` on the new one said "no schedule in the config". The
/// console follows the version the scheduler applied: the schedule added to
/// the file is listed and triggered in the same console.
#[test]
fn a_schedule_added_by_reload_is_listed_and_triggered_in_the_same_console() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &[]));
    tm.wait_for("refund-review");
    let path = dir.path().join("agentcron.toml");
    let added = "\n[[schedule]]\nid = \"added-by-reload\"\nagent = \"sim\"\non_event = \"never.posted\"\n";
    std::fs::write(&path, format!("{BASE}{REFUNDS}{added}")).unwrap();
    tm.keys(&[":"]);
    tm.type_text("reload");
    tm.keys(&["Enter"]);
    // The plan names it; the buttons start on Cancel: Right, Enter reloads.
    tm.wait_for("+ added-by-reload");
    tm.keys(&["Right", "Enter"]);
    tm.wait_for("config v2 applied");
    let listed = tm.wait_for("added-by-reload");
    assert!(listed.contains("Schedules (2)"), "{listed}");
    // Select it (the second row) and trigger it.
    tm.keys(&["1", "G", "t"]);
    tm.wait_for("Trigger schedule added-by-reload now");
    tm.keys(&["Right", "Enter"]);
    let done = tm.wait_until("the trigger's result", |s| {
        s.contains("added-by-reload: manual run") || s.contains("no schedule")
    });
    assert!(done.contains("added-by-reload: manual run"), "{done}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
    let out = cli(dir.path(), &["runs", "--json", "--schedule", "added-by-reload"]);
    assert!(out.status.success(), "{}", text(&out));
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("runs --json");
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
}

/// Issue 52: a console attached to a headless scheduler follows a reload
/// another process asked for (`agentcron reload`, applied by that scheduler):
/// the new schedule is listed without restarting the console.
#[test]
fn an_attached_console_follows_a_reload_done_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    config(&dir, &format!("{BASE}{REFUNDS}"));
    let db = dir.path().join("test.db");
    let log = std::fs::File::create(dir.path().join("headless.log")).unwrap();
    let child = Command::new(bin())
        .arg("--config")
        .arg(dir.path().join("agentcron.toml"))
        .arg("--db")
        .arg(&db)
        .args(["run", "--headless"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("headless scheduler starts");
    let _headless = Headless(child);
    let deadline = Instant::now() + DEADLINE;
    while !db.exists() {
        assert!(
            Instant::now() < deadline,
            "the headless scheduler made no database"
        );
        std::thread::sleep(POLL);
    }
    let tm = Tmux::start(dir.path(), &console_command(dir.path(), &["console", "--attach"]));
    let before = tm.wait_for("refund-review");
    assert!(before.contains("Schedules (1)"), "{before}");
    let added = "\n[[schedule]]\nid = \"added-elsewhere\"\nagent = \"sim\"\non_event = \"never.posted\"\n";
    std::fs::write(
        dir.path().join("agentcron.toml"),
        format!("{BASE}{REFUNDS}{added}"),
    )
    .unwrap();
    let out = cli(dir.path(), &["reload"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = tm.wait_for("added-elsewhere");
    assert!(after.contains("Schedules (2)"), "{after}");
    tm.keys(&["q"]);
    tm.wait_for("[exited 0]");
}
