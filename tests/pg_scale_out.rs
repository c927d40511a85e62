//! Real processes on one PostgreSQL ledger: four `agentcron run --headless`
//! schedulers, 56 schedules firing every 1–2 s for a minute, and an agent
//! that writes one line to a side-effects file per act. Afterwards, read from
//! the ledger and that file: no window opened twice, no run claimed twice (no
//! two attempts of a run alive at once, every fence unique), no side effect
//! twice, every window due before the stop in a terminal state, with its
//! reason when it did not succeed. Then the same with one scheduler
//! `kill -9`-ed mid side effect and restarted, and another `SIGSTOP`-ped mid
//! side effect (inside a write transaction of its own, see
//! [`FREEZE_HOLDING_THE_WRITE_LOCK`]) past its lease, and resumed.
//!
//! Each test gets a database of its own on the server named by
//! `AGENTCRON_TEST_PG_URL` (`.ci/with-postgres cargo test` starts one);
//! without it each test says it was skipped, loudly, and checks nothing.
//! `AGENTCRON_SCALE_OUT_SECS` shortens (or lengthens) the minute when
//! iterating; `AGENTCRON_SCALE_OUT_KEEP=1` keeps the temp folder (config,
//! logs, side-effects file) and prints where it is. The two tests take turns
//! (a lock): four schedulers and their agents are load enough for a small
//! machine, and their leases are short.
//!
//! Every wait polls (100 ms) with a deadline; a guard stops every scheduler
//! it started (SIGCONT, then SIGKILL) however the test ends.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentcron::store::RunState;
use tokio_postgres::NoTls;

/// Schedules firing every second, and every two seconds: 50 windows a second.
const EVERY_1S: usize = 44;
const EVERY_2S: usize = 12;
/// Short, so a `SIGSTOP` outlasts it within the test: renewed every 2 s, taken
/// over `takeover_grace` (`lease / 3`, 2 s) after it lapses.
const LEASE_SECS: u64 = 6;
/// How long a scheduler stays stopped at least: well past its lease and the
/// takeover grace.
const STOP_AT_LEAST: Duration = Duration::from_secs(2 * LEASE_SECS);
/// Windows due this long before the stop must be terminal by then.
const SETTLE_MS: i64 = 5_000;
/// Every wait on the processes polls this often.
const POLL: Duration = Duration::from_millis(100);

/// Where the stopped scheduler freezes: inside one of its write
/// transactions, its session holding the ledger's write lock (`true`: the
/// worst moment a freeze can come, and one a freeze at random often hits), or
/// idle between transactions (`false`).
const FREEZE_HOLDING_THE_WRITE_LOCK: bool = true;
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The agent: a shell script honouring the step handshake (`handshake =
/// true`, one side-effect step `deliver`, `verify = true`), the way DESIGN.md
/// ("Steps and compensation", "Side-effect handshake") has an agent act at
/// most once. It works a little, says `deliver` started and waits for the
/// ack, then appends its line to the side-effects file in one write
/// (`O_APPEND`): `TENANT/SCHEDULE/WINDOW RUN FENCE ATTEMPT PID`, works a
/// little more and says `deliver` done. A deny, or stdin closed, means its
/// attempt no longer holds the lease: it does not act. A verify attempt (the
/// step left started, never confirmed: the agent or its scheduler died
/// mid-step) only checks whether the window's line landed (check-then-act);
/// a later attempt that finds `deliver` in `completed_steps` skips it.
///
/// Without the handshake an agent acts before anything durable says so, and a
/// scheduler killed or frozen after the act but before the result leaves a
/// lost attempt whose retry acts again: docs/PROTOCOL.md, "The step handshake
/// (at most once)". (Measured with such an agent, which appended
/// its line and exited: a scheduler frozen past its lease left 7 windows
/// acted twice, once by the lost attempt and once by its retry.)
const AGENT: &str = r#"#!/bin/sh
IFS= read -r envelope
case $envelope in
*'"verify_step":"deliver"'*)
    if grep -q -F -e "$AGENTCRON_IDEMPOTENCY_KEY " "$LEDGER"; then landed=true; else landed=false; fi
    printf '{"event":"result","status":"success","verified":%s}\n' "$landed"
    exit 0 ;;
*'"completed_steps":["deliver"'*)
    printf '{"event":"result","status":"success","summary":"already delivered"}\n'
    exit 0 ;;
esac
sleep "$WORK"
printf '{"event":"step","name":"deliver","status":"started"}\n'
IFS= read -r answer || exit 75
case $answer in
*'"event":"ack"'*) ;;
*)  printf '{"event":"result","status":"failure","error_class":"retryable","message":"deliver denied"}\n'
    exit 0 ;;
esac
fence=${answer##*'"fence":'}
fence=${fence%%[!0-9]*}
printf '%s %s %s %s %s\n' "$AGENTCRON_IDEMPOTENCY_KEY" "$AGENTCRON_RUN_ID" "$fence" "$AGENTCRON_ATTEMPT" "$$" >> "$LEDGER"
sleep "$WORK"
printf '{"event":"step","name":"deliver","status":"done"}\n'
printf '{"event":"result","status":"success"}\n'
"#;

/// The test's run time: a minute, or `AGENTCRON_SCALE_OUT_SECS`.
fn run_time() -> Duration {
    let secs = std::env::var("AGENTCRON_SCALE_OUT_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(60);
    Duration::from_secs(secs.max(5))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A new, empty database on the test server, as a URL; `None` (said on the
/// terminal, past the harness's capture) without a server.
fn fresh_database(test: &str, tag: &str) -> Option<String> {
    let Ok(admin) = std::env::var("AGENTCRON_TEST_PG_URL") else {
        panic!(
            "pg_scale_out::{test} needs a PostgreSQL server: run `.ci/with-postgres cargo test -- --include-ignored`, \
             or set AGENTCRON_TEST_PG_URL"
        );
    };
    let db = format!("agentcron_scale_{tag}_{}", std::process::id());
    let pg = Pg::connect(&admin);
    pg.exec(&format!("DROP DATABASE IF EXISTS {db}"));
    pg.exec(&format!("CREATE DATABASE {db}"));
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    Some(format!("{base}/{db}"))
}

/// A plain connection to the ledger, on a runtime of its own.
struct Pg {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Pg {
    fn connect(url: &str) -> Pg {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, NoTls)
                .await
                .expect("connect to the test server");
            tokio::spawn(conn);
            client
        });
        Pg { rt, client }
    }

    fn exec(&self, sql: &str) {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    fn try_rows(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        self.rt.block_on(self.client.query(sql, params))
    }

    fn rows(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        self.try_rows(sql, params)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn count(&self, sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> i64 {
        self.rows(sql, params)[0].get(0)
    }

    /// Where the sessions of the process whose TCP ports are `ports` are:
    /// (one holds the ledger's write lock, an advisory lock every writing
    /// transaction takes, or waits for it; all idle outside a transaction).
    fn write_lock_of(&self, ports: &[i32]) -> (bool, bool) {
        let rows = self.rows(
            "SELECT a.state = 'idle',
                    coalesce(a.wait_event_type = 'Lock' AND a.wait_event = 'advisory', false)
                    OR EXISTS (SELECT 1 FROM pg_locks l
                                WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)
               FROM pg_stat_activity a WHERE a.client_port = ANY($1)",
            &[&ports],
        );
        (
            rows.iter().any(|r| r.get::<_, bool>(1)),
            rows.iter().all(|r| r.get::<_, bool>(0)),
        )
    }

    /// Every session on this database but ours: what it waits on and for how long.
    fn sessions(&self) -> String {
        self.rows(
            "SELECT a.pid, a.client_port, a.state, coalesce(a.wait_event_type || '/' || a.wait_event, '-'),
                    round(extract(epoch FROM now() - a.xact_start)::numeric, 1)::text,
                    EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted),
                    left(a.query, 70)
               FROM pg_stat_activity a
              WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
              ORDER BY a.xact_start",
            &[],
        )
        .iter()
        .map(|r| {
            format!(
                "backend {} (client port {}): {}, waiting on {}, transaction open {} s, holds the write lock: {}, last statement {:?}",
                r.get::<_, i32>(0),
                r.get::<_, Option<i32>>(1).unwrap_or(0),
                r.get::<_, Option<String>>(2).unwrap_or_default(),
                r.get::<_, String>(3),
                r.get::<_, Option<String>>(4).unwrap_or_else(|| "-".into()),
                r.get::<_, bool>(5),
                r.get::<_, String>(6),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
    }

    /// Runs of `owner` whose agent is mid side effect: its `deliver` step
    /// journaled started (so acked: the agent acts now, or has), not yet done.
    fn mid_act_of(&self, owner: &str) -> i64 {
        self.try_rows(
            "SELECT count(*) FROM runs r
               JOIN steps s ON s.run_id = r.id AND s.attempt = r.attempts AND s.name = 'deliver'
              WHERE r.state = 'running' AND r.lease_owner = $1 AND s.status = 'started'
                AND NOT EXISTS (SELECT 1 FROM steps d WHERE d.run_id = r.id AND d.attempt = r.attempts
                                   AND d.name = 'deliver' AND d.status <> 'started')",
            &[&owner],
        )
        .map_or(0, |r| r[0].get(0))
    }

    /// Running runs leased to `owner` (0 before the schema exists).
    fn running_of(&self, owner: &str) -> i64 {
        self.try_rows(
            "SELECT count(*) FROM runs WHERE state = 'running' AND lease_owner = $1",
            &[&owner],
        )
        .map_or(0, |r| r[0].get(0))
    }
}

/// The local ports of process `pid`'s TCP sockets (its ledger connections),
/// from `/proc`: the `client_port`s PostgreSQL sees.
fn tcp_ports(pid: u32) -> Vec<i32> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|t| {
                    let t = t.to_str()?;
                    Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 && inodes.iter().any(|i| i == cols[9]) {
                let port = cols[1].rsplit(':').next().unwrap_or_default();
                ports.extend(i32::from_str_radix(port, 16).ok());
            }
        }
    }
    ports
}

/// The config: 56 schedules on one `command` agent (the script above).
fn write_config(dir: &Path) {
    let agent = dir.join("agent.sh");
    std::fs::write(&agent, AGENT).unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut toml = format!(
        r#"
[scheduler]
timezone = "UTC"
workers = 64
lease = "{LEASE_SECS}s"
shutdown_grace = "15s"
heartbeat = "2s"

[agents.ledger]
kind = "command"
command = ["{agent}"]
timeout = "30s"
handshake = true
verify = true
steps = [{{ name = "deliver", side_effect = true }}]
env = {{ LEDGER = "{ledger}", WORK = "0.1" }}
"#,
        agent = agent.display(),
        ledger = dir.join("side-effects.txt").display(),
    );
    for i in 0..EVERY_1S + EVERY_2S {
        let every = if i < EVERY_1S { "1s" } else { "2s" };
        toml.push_str(&format!(
            r#"
[[schedule]]
id = "s{i:02}"
agent = "ledger"
every = "{every}"
retry = {{ max_attempts = 5, backoff = "fixed", initial = "1s", max = "1s", jitter = 0.0 }}
"#
        ));
    }
    std::fs::write(dir.join("agentcron.toml"), toml).unwrap();
}

/// One `agentcron run --headless` process.
struct Scheduler {
    name: String,
    child: Child,
    /// `host:pid`, as its attempts and leases name it (read from its log).
    owner: String,
    /// Set once it has exited (killed on purpose, or stopped).
    exit: Option<ExitStatus>,
}

/// The schedulers of one test, stopped (SIGCONT, SIGKILL, reaped) when it
/// lets go of them, however it ends.
struct Fleet {
    dir: PathBuf,
    url: String,
    procs: Vec<Scheduler>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for p in &mut self.procs {
            if p.exit.is_none() {
                // SAFETY: kill(2) on the pid of our own unreaped child.
                unsafe {
                    libc::kill(p.child.id() as i32, libc::SIGCONT);
                }
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
        }
    }
}

impl Fleet {
    fn new(dir: &Path, url: &str) -> Fleet {
        Fleet {
            dir: dir.to_path_buf(),
            url: url.to_string(),
            procs: Vec::new(),
        }
    }

    /// Starts one more scheduler on the config and the ledger: its index.
    fn start(&mut self) -> usize {
        let name = format!("p{}", self.procs.len());
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_agentcron"))
            .args(["run", "--headless", "--config"])
            .arg(self.dir.join("agentcron.toml"))
            .arg("--db")
            .arg(&self.url)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.procs.push(Scheduler {
            name,
            child,
            owner: String::new(),
            exit: None,
        });
        self.procs.len() - 1
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("{}.log", self.procs[i].name))).unwrap_or_default()
    }

    /// What each thread of scheduler `i` is doing, from `/proc`: its name,
    /// state and kernel wait channel (for a scheduler that went quiet).
    fn threads(&self, i: usize) -> String {
        let pid = self.procs[i].child.id();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return format!("(no /proc/{pid}/task)");
        };
        let mut out: Vec<String> = tasks
            .flatten()
            .map(|t| {
                let read = |f: &str| {
                    std::fs::read_to_string(t.path().join(f))
                        .unwrap_or_default()
                        .trim()
                        .to_string()
                };
                let stat = read("stat");
                let state = stat
                    .rsplit_once(") ")
                    .map_or("?", |(_, rest)| &rest[..1])
                    .to_string();
                format!(
                    "{} {} {} wchan={}",
                    t.file_name().to_string_lossy(),
                    read("comm"),
                    state,
                    read("wchan")
                )
            })
            .collect();
        out.sort();
        let mut out = out.join("\n");
        // Where each thread is in our own code, when gdb is on the machine.
        if let Ok(bt) = Command::new("timeout")
            .args([
                "30",
                "gdb",
                "-p",
                &pid.to_string(),
                "-batch",
                "-ex",
                "thread apply all bt",
            ])
            .stdin(Stdio::null())
            .output()
        {
            let text = String::from_utf8_lossy(&bt.stdout);
            let frames: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("Thread ") || l.starts_with('#'))
                .collect();
            out.push_str("\nits stacks (gdb):\n");
            out.push_str(&frames.join("\n"));
        }
        out
    }

    /// Waits until scheduler `i` says it started, and learns its owner.
    fn wait_started(&mut self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.check_alive();
            let log = self.log(i);
            if let Some(line) = log.lines().find(|l| l.contains("agentcron scheduler started")) {
                let owner = line
                    .split("owner=\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap_or_else(|| panic!("no owner in {line}"));
                self.procs[i].owner = owner.to_string();
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not start within 60 s:\n{log}",
                self.procs[i].name
            );
            std::thread::sleep(POLL);
        }
    }

    /// Panics (with its log's tail) if a scheduler not stopped on purpose exited.
    fn check_alive(&mut self) {
        for i in 0..self.procs.len() {
            if self.procs[i].exit.is_some() {
                continue;
            }
            if let Some(status) = self.procs[i].child.try_wait().unwrap() {
                self.procs[i].exit = Some(status);
                let log = self.log(i);
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "scheduler {} ({}) exited on its own: {status}\n{}",
                    self.procs[i].name,
                    self.procs[i].owner,
                    tail.join("\n")
                );
            }
        }
    }

    /// Keeps the schedulers running until `until`, checking them every 100 ms.
    fn run_until(&mut self, until: Instant) {
        while Instant::now() < until {
            self.check_alive();
            std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        }
    }

    /// Waits until an agent of scheduler `i` is mid side effect (acked, not
    /// done), so a signal sent next leaves that side effect uncertain.
    fn wait_mid_run(&mut self, i: usize, pg: &Pg) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while pg.mid_act_of(&self.procs[i].owner) == 0 {
            self.check_alive();
            if Instant::now() >= deadline {
                let log = self.log(i);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "no agent of {} acted for 60 s; its sessions:\n{}\nits threads:\n{}\nits log's tail:\n{}",
                    self.procs[i].name,
                    pg.sessions(),
                    self.threads(i),
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, i: usize, signal: i32) {
        // SAFETY: kill(2) on the pid of our own unreaped child.
        let rc = unsafe { libc::kill(self.procs[i].child.id() as i32, signal) };
        assert_eq!(rc, 0, "kill({}, {signal})", self.procs[i].name);
    }

    /// `SIGSTOP`s scheduler `i` with an agent of it mid side effect, and
    /// (see [`FREEZE_HOLDING_THE_WRITE_LOCK`]) inside one of its write
    /// transactions, its session holding (or about to hold) the ledger's
    /// write lock — or idle between transactions. Tries (stop, look at its
    /// sessions, resume) until a stop lands there; after 60 s of misses it
    /// leaves it frozen wherever it is. Returns the tries and whether it froze
    /// holding the lock.
    fn freeze_at_the_worst_moment(&mut self, i: usize, pg: &Pg) -> (usize, bool) {
        let ports = tcp_ports(self.procs[i].child.id());
        assert!(!ports.is_empty(), "{} has no TCP connection", self.procs[i].name);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut tries = 0;
        loop {
            self.wait_mid_run(i, pg);
            self.signal(i, libc::SIGSTOP);
            tries += 1;
            // A statement under way ends; its session then idles in the transaction.
            std::thread::sleep(Duration::from_millis(50));
            let (holding, idle) = pg.write_lock_of(&ports);
            if (if FREEZE_HOLDING_THE_WRITE_LOCK {
                holding
            } else {
                idle
            }) || Instant::now() >= deadline
            {
                return (tries, holding);
            }
            self.signal(i, libc::SIGCONT);
            std::thread::sleep(Duration::from_millis(7 * (tries as u64 % 13)));
        }
    }

    /// `kill -9`, reaped.
    fn kill9(&mut self, i: usize) {
        self.signal(i, libc::SIGKILL);
        self.procs[i].exit = Some(self.procs[i].child.wait().unwrap());
    }

    /// SIGTERM to every scheduler still running, then waits (with a deadline)
    /// for each to exit; each must exit 0.
    fn stop_all(&mut self) {
        for i in 0..self.procs.len() {
            if self.procs[i].exit.is_none() {
                self.signal(i, libc::SIGTERM);
            }
        }
        // shutdown_grace is 15 s; an agent is then stopped within 2 s.
        let deadline = Instant::now() + Duration::from_secs(45);
        for i in 0..self.procs.len() {
            while self.procs[i].exit.is_none() {
                if let Some(status) = self.procs[i].child.try_wait().unwrap() {
                    self.procs[i].exit = Some(status);
                    assert!(
                        status.success(),
                        "{} stopped with {status}:\n{}",
                        self.procs[i].name,
                        self.log(i)
                    );
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} did not stop within 45 s of SIGTERM",
                    self.procs[i].name
                );
                std::thread::sleep(POLL);
            }
        }
    }

    /// The log lines at WARN or ERROR level of every scheduler, by kind.
    fn warnings(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for i in 0..self.procs.len() {
            for line in self.log(i).lines() {
                let level = if line.contains(" ERROR ") {
                    "ERROR"
                } else if line.contains(" WARN ") {
                    "WARN"
                } else {
                    continue;
                };
                let what = line
                    .split("kind=")
                    .nth(1)
                    .and_then(|k| k.split(' ').next())
                    .map_or_else(
                        || {
                            line.split_once(&format!(" {level} "))
                                .map_or(line, |(_, rest)| rest)
                                .chars()
                                .take(160)
                                .collect::<String>()
                        },
                        |k| format!("event {k}"),
                    );
                *out.entry(format!("{level} {what}")).or_insert(0) += 1;
            }
        }
        out
    }
}

/// What the ledger and the side-effects file say once every scheduler stopped.
#[derive(Debug, Default)]
struct Tally {
    windows: i64,
    runs_by_state: BTreeMap<String, i64>,
    attempts: i64,
    attempts_by_status: BTreeMap<String, i64>,
    attempts_by_reason: BTreeMap<String, i64>,
    claims_by_owner: BTreeMap<String, i64>,
    lost_by_owner: BTreeMap<String, i64>,
    /// Lost attempts whose `deliver` was journaled started and never ended:
    /// side effects left uncertain, which a verify attempt then checked.
    uncertain_lost_by_owner: BTreeMap<String, i64>,
    side_effect_lines: usize,
    verified_steps: i64,
    stale_results: i64,
    scheduler_lost: i64,
    due_before_cutoff: i64,
    not_yet_due_or_late: BTreeMap<String, i64>,
    max_lateness_ms: i64,
}

/// Checks the four invariants (below) on the ledger and the side-effects file;
/// panics with every violation found, and returns what it counted.
fn check(pg: &Pg, dir: &Path, stopped_at_ms: i64) -> Tally {
    let mut bad: Vec<String> = Vec::new();
    let mut t = Tally::default();

    // 1. Every window opened once: the fire's identity is unique.
    let r = &pg.rows(
        "SELECT count(*), count(DISTINCT (tenant, schedule, window_key)) FROM runs",
        &[],
    )[0];
    let (runs, distinct): (i64, i64) = (r.get(0), r.get(1));
    t.windows = distinct;
    if runs != distinct {
        bad.push(format!(
            "{runs} runs for {distinct} windows: a window opened twice"
        ));
    }
    for r in pg.rows(
        "SELECT state, count(*) FROM runs GROUP BY state ORDER BY state",
        &[],
    ) {
        t.runs_by_state.insert(r.get(0), r.get(1));
    }

    // 2. No run claimed twice: every fence unique, a run's attempts one after
    //    the other (each ended before the next started), each claimed once by
    //    the owner its attempt names, and a run's fence its last attempt's.
    let r = &pg.rows(
        "SELECT count(*), count(DISTINCT fencing_token) FROM attempts",
        &[],
    )[0];
    let (attempts, fences): (i64, i64) = (r.get(0), r.get(1));
    t.attempts = attempts;
    if attempts != fences {
        bad.push(format!("{attempts} attempts but {fences} distinct fences"));
    }
    struct Att {
        n: i64,
        fence: i64,
        owner: String,
        started: i64,
        ended: Option<i64>,
        status: String,
        message: String,
    }
    let mut by_run: BTreeMap<i64, Vec<Att>> = BTreeMap::new();
    for r in pg.rows(
        "SELECT run_id, n, fencing_token, owner, started_at, ended_at, status, reason, coalesce(message, '') FROM attempts ORDER BY run_id, n",
        &[],
    ) {
        let owner: String = r.get(3);
        let status: String = r.get(6);
        *t.claims_by_owner.entry(owner.clone()).or_insert(0) += 1;
        *t.attempts_by_status.entry(status.clone()).or_insert(0) += 1;
        *t.attempts_by_reason.entry(r.get(7)).or_insert(0) += 1;
        if status == "lost" {
            *t.lost_by_owner.entry(owner.clone()).or_insert(0) += 1;
        }
        by_run.entry(r.get(0)).or_default().push(Att {
            n: r.get(1),
            fence: r.get(2),
            owner,
            started: r.get(4),
            ended: r.get(5),
            status,
            message: r.get(8),
        });
    }
    for (run, atts) in &by_run {
        for (i, pair) in atts.windows(2).enumerate() {
            let (a, b) = (&pair[0], &pair[1]);
            let overlap = match a.ended {
                Some(end) => end > b.started,
                None => true,
            };
            if overlap || b.fence <= a.fence || a.n != i as i64 + 1 {
                bad.push(format!(
                    "run {run}: attempt {} ({}, fence {}, {}..{:?}, {}) and attempt {} ({}, fence {}, from {}, {}) overlap or are out of order",
                    a.n, a.owner, a.fence, a.started, a.ended, a.status, b.n, b.owner, b.fence, b.started, b.status
                ));
            }
        }
    }
    for r in pg.rows(
        "SELECT fencing_token, string_agg(id || ' (' || state || ', ' || coalesce(lease_owner, '-') || ')', ', ')
           FROM runs WHERE fencing_token > 0 GROUP BY fencing_token HAVING count(*) > 1 ORDER BY fencing_token",
        &[],
    ) {
        bad.push(format!(
            "fence {} given to several runs: {}",
            r.get::<_, i64>(0),
            r.get::<_, String>(1)
        ));
    }
    for r in pg.rows(
        "SELECT r.id, r.state, r.attempts, r.fencing_token, coalesce(r.lease_owner, '-'),
                (SELECT count(*) FROM attempts a WHERE a.run_id = r.id)
           FROM runs r
          WHERE r.attempts <> (SELECT count(*) FROM attempts a WHERE a.run_id = r.id)
          ORDER BY r.id",
        &[],
    ) {
        bad.push(format!(
            "run {} ({}, fence {}, {}) counts {} attempts but has {} attempt rows",
            r.get::<_, i64>(0),
            r.get::<_, String>(1),
            r.get::<_, i64>(3),
            r.get::<_, String>(4),
            r.get::<_, i64>(2),
            r.get::<_, i64>(5)
        ));
    }
    // A claim's `claimed` event is a row of its own, or folded into the
    // attempt's `started` row (`detail.folded`): read both.
    let mut claimed: HashMap<(i64, i64), Vec<String>> = HashMap::new();
    for r in pg.rows(
        "SELECT run_id, kind, detail FROM events WHERE run_id IS NOT NULL AND (kind = 'claimed' OR detail LIKE '%\"folded\"%')",
        &[],
    ) {
        let (run, kind): (i64, String) = (r.get(0), r.get(1));
        let detail: serde_json::Value = serde_json::from_str(&r.get::<_, String>(2)).unwrap();
        let mut claims: Vec<&serde_json::Value> = Vec::new();
        if kind == "claimed" {
            claims.push(&detail);
        }
        if let Some(folded) = detail["folded"].as_array() {
            claims.extend(folded.iter().filter(|e| e["kind"] == "claimed").map(|e| &e["detail"]));
        }
        for c in claims {
            let token = c["token"].as_i64().unwrap_or(-1);
            let owner = c["owner"].as_str().unwrap_or("?").to_string();
            if c["attempt"] == 1 {
                t.max_lateness_ms = t.max_lateness_ms.max(c["lateness_ms"].as_i64().unwrap_or(0));
            }
            claimed.entry((run, token)).or_default().push(owner);
        }
    }
    for ((run, token), owners) in &claimed {
        if owners.len() != 1 {
            bad.push(format!(
                "run {run} fence {token} claimed {} times: {owners:?}",
                owners.len()
            ));
        }
        let att = by_run.get(run).and_then(|a| a.iter().find(|a| a.fence == *token));
        match att {
            Some(a) if a.owner == owners[0] => {}
            Some(a) => bad.push(format!(
                "run {run} fence {token}: claimed by {owners:?}, its attempt names {}",
                a.owner
            )),
            None => bad.push(format!(
                "run {run} fence {token}: claimed by {owners:?}, no attempt row"
            )),
        }
    }
    for (run, atts) in &by_run {
        for a in atts {
            // A scheduler killed between its claim's commit and its attempt
            // and trace rows leaves no `claimed` event: the sweep writes the
            // attempt `lost` and says so (docs/GUIDE.md, "What a claim commits first").
            let unwritten = a.status == "lost"
                && a.message
                    .contains("were not written before its scheduler stopped");
            if !claimed.contains_key(&(*run, a.fence)) && !unwritten {
                bad.push(format!(
                    "run {run} attempt {} (fence {}, {}): no claimed event",
                    a.n, a.fence, a.owner
                ));
            }
        }
    }

    // 3. No side effect twice: each window's line at most once, written under
    //    a fence its run's attempts had; a succeeded run's line exactly once.
    let text = std::fs::read_to_string(dir.join("side-effects.txt")).unwrap_or_default();
    let mut lines_of: HashMap<String, Vec<&str>> = HashMap::new();
    for line in text.lines() {
        let key = line.split(' ').next().unwrap_or_default().to_string();
        lines_of.entry(key).or_default().push(line);
        t.side_effect_lines += 1;
    }
    for (key, lines) in &lines_of {
        if lines.len() > 1 {
            bad.push(format!("window {key} acted {} times: {lines:?}", lines.len()));
        }
        for line in lines {
            let f: Vec<&str> = line.split(' ').collect();
            let (run, fence) = (
                f.get(1).and_then(|s| s.parse::<i64>().ok()),
                f.get(2).and_then(|s| s.parse::<i64>().ok()),
            );
            let known = run.zip(fence).is_some_and(|(run, fence)| {
                by_run
                    .get(&run)
                    .is_some_and(|a| a.iter().any(|a| a.fence == fence))
            });
            if !known {
                bad.push(format!(
                    "side effect {line:?}: no attempt of that run had that fence"
                ));
            }
        }
    }

    // 4. Every window due well before the stop ended, and a run that did not
    //    succeed says why. After it, runs may have been left pending (the
    //    stop claims nothing new) or running (none expected: agents are quick).
    let cutoff = stopped_at_ms - SETTLE_MS;
    for r in pg.rows(
        "SELECT id, tenant || '/' || schedule || '/' || window_key, due_at, state, state_reason, attempts FROM runs ORDER BY id",
        &[],
    ) {
        let (id, key, due, state, why, n): (i64, String, i64, String, Option<String>, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
        let st = RunState::parse(&state).unwrap_or_else(|| panic!("run {id}: unknown state {state}"));
        let lines = lines_of.get(&key).map_or(0, Vec::len);
        if st == RunState::Succeeded && lines != 1 {
            bad.push(format!("run {id} ({key}) succeeded with {lines} side-effect lines"));
        }
        if due >= cutoff {
            *t.not_yet_due_or_late.entry(state.clone()).or_insert(0) += 1;
            continue;
        }
        t.due_before_cutoff += 1;
        if !st.is_terminal() {
            bad.push(format!(
                "run {id} ({key}, due {} ms before the stop) left {state} ({why:?}, {n} attempts); \
                 next check {:?} ms before the stop; its trace:\n{}",
                stopped_at_ms - due,
                pg.rows("SELECT next_check_at FROM runs WHERE id = $1", &[&id])[0]
                    .get::<_, Option<i64>>(0)
                    .map(|at| stopped_at_ms - at),
                trace_of(pg, id)
            ));
        } else if st != RunState::Succeeded && why.as_deref().is_none_or(str::is_empty) {
            bad.push(format!("run {id} ({key}) {state} without a reason"));
        }
        for a in by_run.get(&id).into_iter().flatten() {
            if st.is_terminal() && (a.ended.is_none() || a.status == "running") {
                bad.push(format!(
                    "run {id} ({key}) {state}, its attempt {} ({}) still {} (ended {:?})",
                    a.n, a.owner, a.status, a.ended
                ));
            }
        }
    }

    for r in pg.rows(
        "SELECT a.owner, count(*) FROM attempts a
          WHERE a.status = 'lost'
            AND EXISTS (SELECT 1 FROM steps s WHERE s.run_id = a.run_id AND s.attempt = a.n
                           AND s.name = 'deliver' AND s.status = 'started')
            AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = a.run_id AND s.attempt = a.n
                               AND s.name = 'deliver' AND s.status <> 'started')
          GROUP BY a.owner",
        &[],
    ) {
        t.uncertain_lost_by_owner.insert(r.get(0), r.get(1));
    }
    let events = |kind: &str| pg.count("SELECT count(*) FROM events WHERE kind = $1", &[&kind]);
    t.stale_results = events("stale_result");
    t.scheduler_lost = events("scheduler_lost");
    t.verified_steps = pg.count(
        "SELECT count(*) FROM events WHERE kind = 'step' AND detail LIKE '%\"verified\":%'",
        &[],
    );
    assert!(
        bad.is_empty(),
        "{} violations (first 40):\n{}\n\ncounted: {t:#?}",
        bad.len(),
        bad.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
    );
    t
}

/// Run `id`'s events, one a line (for a violation's message).
fn trace_of(pg: &Pg, id: i64) -> String {
    pg.rows(
        "SELECT id, at, kind, left(detail, 240) FROM events WHERE run_id = $1 ORDER BY id",
        &[&id],
    )
    .iter()
    .map(|r| {
        format!(
            "  #{} {} {} {}",
            r.get::<_, i64>(0),
            r.get::<_, i64>(1),
            r.get::<_, String>(2),
            r.get::<_, String>(3)
        )
    })
    .collect::<Vec<_>>()
    .join("\n")
}

/// Real work happened: most windows succeeded, and every scheduler in
/// `owners` claimed some.
fn assert_worked(t: &Tally, ran_for: Duration, owners: &[&str]) {
    let per_second = EVERY_1S as f64 + EVERY_2S as f64 / 2.0;
    let expected = per_second * ran_for.as_secs_f64();
    let succeeded = t.runs_by_state.get("succeeded").copied().unwrap_or(0);
    assert!(
        succeeded as f64 >= expected * 0.5,
        "only {succeeded} runs succeeded of about {expected:.0} windows: {t:#?}"
    );
    for owner in owners {
        assert!(
            t.claims_by_owner.get(*owner).copied().unwrap_or(0) > 0,
            "{owner} claimed nothing: {t:#?}"
        );
    }
}

fn report(test: &str, t: &Tally, fleet: &Fleet, ran_for: Duration, total: Duration) {
    let _ = writeln!(
        std::io::stderr(),
        "pg_scale_out::{test}: ran {:.1} s ({:.1} s in all); {t:#?}\nscheduler log warnings: {:#?}",
        ran_for.as_secs_f64(),
        total.as_secs_f64(),
        fleet.warnings()
    );
}

/// The temp folder, kept (and said where) with `AGENTCRON_SCALE_OUT_KEEP=1`.
fn temp_dir(test: &str) -> tempfile::TempDir {
    let keep = std::env::var("AGENTCRON_SCALE_OUT_KEEP").is_ok_and(|v| v == "1");
    let dir = tempfile::Builder::new()
        .prefix(&format!("pg-scale-out-{test}-"))
        .disable_cleanup(keep)
        .tempdir()
        .unwrap();
    if keep {
        let _ = writeln!(
            std::io::stderr(),
            "pg_scale_out::{test}: keeping {}",
            dir.path().display()
        );
    }
    dir
}

/// A fresh database (`None` without a server, said loudly), the config in a
/// temp folder, and four schedulers started on them; when it began.
fn four_started(test: &str, db: &str) -> Option<(String, tempfile::TempDir, Instant, Fleet)> {
    let url = fresh_database(test, db)?;
    let dir = temp_dir(test);
    write_config(dir.path());
    let began = Instant::now();
    let mut fleet = Fleet::new(dir.path(), &url);
    for _ in 0..4 {
        fleet.start();
    }
    for i in 0..4 {
        fleet.wait_started(i);
    }
    Some((url, dir, began, fleet))
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn four_schedulers_share_one_ledger_without_double_fires() {
    const TEST: &str = "four_schedulers_share_one_ledger_without_double_fires";
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((url, dir, began, mut fleet)) = four_started(TEST, "four") else {
        return;
    };
    let running_since = Instant::now();
    fleet.run_until(running_since + run_time());
    let stopped_at = now_ms();
    let ran_for = running_since.elapsed();
    fleet.stop_all();

    let pg = Pg::connect(&url);
    let t = check(&pg, dir.path(), stopped_at);
    report(TEST, &t, &fleet, ran_for, began.elapsed());
    // Most windows ran, none twice (`check`). Which scheduler claims them is
    // not asked: on today's design whichever takes the write lock first
    // opens an instant's windows, and one of four may claim none in a short
    // run (seen under load). Spreading the work is the partition issue's.
    assert_worked(&t, ran_for, &[]);
    assert!(
        !fleet.warnings().keys().any(|k| k.starts_with("ERROR")),
        "errors in the schedulers' logs: {:#?}",
        fleet.warnings()
    );
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_killed_and_a_stopped_scheduler_lose_nothing_and_fire_nothing_twice() {
    const TEST: &str = "a_killed_and_a_stopped_scheduler_lose_nothing_and_fire_nothing_twice";
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((url, dir, began, mut fleet)) = four_started(TEST, "chaos") else {
        return;
    };
    let pg = Pg::connect(&url);
    let running_since = Instant::now();
    let d = run_time();
    fleet.run_until(running_since + d / 3);

    // p0 dies (`kill -9`) with an agent mid side effect; a new process
    // takes its place. Its agents die with it; their runs' leases lapse and
    // another scheduler sweeps them: a verify attempt for the uncertain step.
    fleet.wait_mid_run(0, &pg);
    let killed = fleet.procs[0].owner.clone();
    let killed_running = pg.running_of(&killed);
    fleet.kill9(0);
    let restarted = fleet.start();
    fleet.wait_started(restarted);

    // p1 freezes (`SIGSTOP`) with an agent mid side effect, past its lease
    // and the takeover grace, and is resumed once the others took its runs
    // over (none leased to it any more). Its agents' supervisors stop them
    // when the lease passes unrenewed; its late results are stale.
    let stopped = fleet.procs[1].owner.clone();
    let (tries, holding) = fleet.freeze_at_the_worst_moment(1, &pg);
    let stopped_running = pg.running_of(&stopped);
    let frozen_at = Instant::now();
    let deadline = frozen_at + Duration::from_secs(40);
    while frozen_at.elapsed() < STOP_AT_LEAST || pg.running_of(&stopped) > 0 {
        fleet.check_alive();
        assert!(
            Instant::now() < deadline,
            "{stopped}, frozen {} the ledger's write lock (stop {tries}), still holds {} running runs 40 s later \
             (lease {LEASE_SECS} s): no other scheduler took them over. The schedulers' sessions:\n{}",
            if holding { "holding" } else { "not holding" },
            pg.running_of(&stopped),
            pg.sessions()
        );
        std::thread::sleep(POLL);
    }
    let frozen_for = frozen_at.elapsed();
    fleet.signal(1, libc::SIGCONT);
    fleet.run_until((running_since + d).max(Instant::now() + Duration::from_secs(10)));
    let stopped_at = now_ms();
    let ran_for = running_since.elapsed();
    fleet.stop_all();

    let t = check(&pg, dir.path(), stopped_at);
    report(TEST, &t, &fleet, ran_for, began.elapsed());
    let _ = writeln!(
        std::io::stderr(),
        "pg_scale_out::{TEST}: killed {killed} holding {killed_running} running runs; stopped {stopped} holding {stopped_running} for {:.1} s (stop {tries}, holding the write lock: {holding})",
        frozen_for.as_secs_f64()
    );
    // Which scheduler claims an instant's windows is a race (the first to
    // take the write lock opens them all): the process started in the middle
    // may lose every one of them (seen), which is no fault of safety. The
    // killed and the stopped ones must have claimed (they were caught mid
    // side effect), and the work must have been spread.
    assert_worked(&t, ran_for, &[killed.as_str(), stopped.as_str()]);
    assert!(t.claims_by_owner.len() >= 3, "the work was spread: {t:#?}");
    for who in [&killed, &stopped] {
        assert!(
            t.uncertain_lost_by_owner.get(who).copied().unwrap_or(0) > 0,
            "no attempt of {who} was lost mid side effect, so the test did not catch it acting: {t:#?}"
        );
    }
    assert!(
        !fleet.warnings().keys().any(|k| k.starts_with("ERROR")),
        "errors in the schedulers' logs: {:#?}",
        fleet.warnings()
    );
}
