//! The real scheduler killed (`kill -9`) at 30 instants while it starts
//! agents, and started again each time: whatever instant it dies at, the
//! ledger keeps every claim with its trace. Every attempt has its `claimed`
//! event, every attempt whose agent the scheduler heard run has its `started`
//! event, every run has the event that opened its window, and no window has
//! two runs. A claim whose trace is written after its agent starts (in a later
//! transaction) leaves, when the scheduler dies in between, a started agent
//! whose run has no trace. To land in that gap the test kills a few
//! milliseconds after a scheduler's first windows appear in the ledger (their
//! claims committed; agents are being started) or after its first agent has
//! started; a kill timed by agents alone mostly came after the late write. The
//! instants come from a seeded generator (`CRASH_SEED=N` repeats a run); a
//! failure prints the seed.

mod support;

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{bin, wait_within};

const SCHEDULES: usize = 200;
const KILLS: usize = 30;
/// The longest pause before a kill once its instant's condition holds, in ms.
const JITTER_MS: u64 = 10;
/// How many offending rows of each sort a failure prints.
const SHOWN: usize = 10;

#[test]
fn a_scheduler_killed_while_it_starts_agents_keeps_every_claim_with_its_trace() {
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    let mut rng = XorShift(seed);
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path());
    let marker = dir.path().join("started.txt");
    let began = Instant::now();

    let mut instants = Vec::with_capacity(KILLS);
    let mut sched = Proc::start(dir.path(), 0, seed);
    let db = sched.poll(
        Duration::from_secs(20),
        Duration::from_millis(10),
        "the ledger",
        || {
            let db = ledger(dir.path())?;
            last_run(&db).map(|_| db)
        },
    );
    for k in 0..KILLS {
        // The instant: a random pause after this scheduler has committed its
        // first windows (and their claims), or after its first agent has
        // started (its line in the marker file).
        let (runs, agents) = (last_run(&db).unwrap_or(0), file_len(&marker));
        let after_claims = rng.below(3) > 0;
        if after_claims {
            sched.poll(
                Duration::from_secs(20),
                Duration::from_millis(1),
                "a window opened",
                || (last_run(&db)? > runs).then_some(()),
            );
        } else {
            sched.poll(
                Duration::from_secs(20),
                Duration::from_millis(1),
                "an agent to start",
                || (file_len(&marker) > agents).then_some(()),
            );
        }
        let pause = rng.below(JITTER_MS + 1);
        instants.push(format!(
            "{pause} ms after {}",
            if after_claims { "claims" } else { "an agent" }
        ));
        std::thread::sleep(Duration::from_millis(pause));
        sched.kill();
        sched = Proc::start(dir.path(), k + 1, seed);
    }
    drop(db);
    // The last one runs its own windows for two seconds, then stops cleanly.
    let restarted = now_ms();
    sched.poll(
        Duration::from_secs(20),
        Duration::from_millis(50),
        "two seconds of windows run",
        || {
            let db = ledger(dir.path())?;
            let n: i64 = db
                .query_row(
                    "SELECT COUNT(*) FROM runs WHERE state = 'succeeded' AND window_start >= ?1",
                    [restarted + 2_000],
                    |r| r.get(0),
                )
                .ok()?;
            (n > 0).then_some(())
        },
    );
    sched.stop();
    let elapsed = began.elapsed();

    let db = ledger(dir.path()).expect("the ledger");
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    let report = check(&db, &ran);
    if !report.problems.is_empty() {
        // `CRASH_KEEP=1` keeps the ledger and the logs (tens of MB) to look into.
        let kept = if std::env::var_os("CRASH_KEEP").is_some() {
            format!("kept in {}", dir.keep().display())
        } else {
            "CRASH_KEEP=1 keeps the ledger and logs".to_string()
        };
        let mut text = String::new();
        for (sort, rows) in &report.problems {
            text.push_str(&format!("{} × {sort}:\n", rows.len()));
            for row in rows.iter().take(SHOWN) {
                text.push_str(&format!("  {row}\n"));
            }
        }
        panic!(
            "seed {seed} (CRASH_SEED={seed} repeats it), {KILLS} kills in {elapsed:?} \
             ({}), {} ({kept}):\n{text}",
            instants.join(", "),
            report.summary,
        );
    }
    eprintln!("seed {seed}: {} in {elapsed:?}", report.summary);
    assert!(
        report.attempts >= KILLS,
        "seed {seed}: too few attempts to have tested anything: {}",
        report.summary
    );
}

/// 200 schedules every second, each agent a shell that records its run and
/// attempt as it starts. Overlap is allowed so that the runs a killed
/// scheduler left running (until their short lease is swept) do not keep
/// their schedules from starting new windows.
fn write_config(dir: &Path) {
    let mut toml = String::from(
        r#"
[scheduler]
database = "test.db"
lease = "2s"
shutdown_grace = "1s"
workers = 1000
backfill_workers = 1000

[agents.mark]
kind = "command"
command = ["sh", "-c", "echo \"$AGENTCRON_RUN_ID $AGENTCRON_ATTEMPT\" >> started.txt; cat > /dev/null"]
timeout = "30s"
"#,
    );
    for i in 0..SCHEDULES {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"s{i:03}\"\nagent = \"mark\"\nevery = \"1s\"\ncheck_every = \"1s\"\n\
             close_after = \"1s\"\ncatchup = \"latest\"\noverlap = \"allow\"\nmax_concurrency = 10\n"
        ));
    }
    std::fs::write(dir.join("agentcron.toml"), toml).unwrap();
}

/// One scheduler process (`run --headless`, its log in `DIR/schedN.log`).
struct Proc {
    child: Child,
    n: usize,
    seed: u64,
    log: std::path::PathBuf,
}

impl Proc {
    fn start(dir: &Path, n: usize, seed: u64) -> Proc {
        let log = dir.join(format!("sched{n}.log"));
        let child = Command::new(bin())
            .args(["run", "--headless", "--config"])
            .arg(dir.join("agentcron.toml"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Proc { child, n, seed, log }
    }

    /// Polls `f` every `every` until it answers; panics after `limit` or if
    /// the scheduler exits meanwhile.
    fn poll<T>(
        &mut self,
        limit: Duration,
        every: Duration,
        what: &str,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(v) = f() {
                return v;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "seed {}: scheduler {} exited ({status}) while waiting for {what}:\n{}",
                    self.seed,
                    self.n,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "seed {}: scheduler {}: timed out waiting for {what}",
                self.seed,
                self.n
            );
            std::thread::sleep(every);
        }
    }

    fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.child.wait().unwrap();
    }

    /// SIGTERM, and waits (with a deadline) for a clean exit.
    fn stop(&mut self) {
        self.signal(libc::SIGTERM);
        let child = &mut self.child;
        let status = wait_within(Duration::from_secs(20), "the scheduler to stop", || {
            child.try_wait().unwrap()
        });
        assert!(
            status.success(),
            "seed {}: scheduler {} stopped with {status}:\n{}",
            self.seed,
            self.n,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid, not yet reaped.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the ledger breaks of the claim's promises, one line each.
struct Report {
    /// Offending rows by what they lack.
    problems: BTreeMap<&'static str, Vec<String>>,
    attempts: usize,
    summary: String,
}

/// The ledger's breaches; `ran` is the marker file: `RUN ATTEMPT` of each
/// agent that started.
fn check(db: &Connection, ran: &str) -> Report {
    let ran: HashSet<(i64, i64)> = ran
        .lines()
        .filter_map(|l| {
            let (run, attempt) = l.split_once(' ')?;
            Some((run.parse().ok()?, attempt.parse().ok()?))
        })
        .collect();
    let mut problems: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut problem = |sort: &'static str, row: String| problems.entry(sort).or_default().push(row);
    // Runs: id → (schedule, window key, attempts claimed).
    let mut runs: BTreeMap<i64, (String, String, i64)> = BTreeMap::new();
    let mut stmt = db
        .prepare("SELECT id, schedule, window_key, attempts FROM runs")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .unwrap();
    for row in rows {
        let (id, run) = row.unwrap();
        runs.insert(id, run);
    }
    // Attempts: (run, n, token, status, started_at).
    let mut stmt = db
        .prepare("SELECT run_id, n, fencing_token, status, started_at FROM attempts ORDER BY run_id, n")
        .unwrap();
    let attempts: Vec<(i64, i64, i64, String, Option<i64>)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    // Whether `started_at` can be absent (recorded only once the agent runs).
    let started_at_optional = db
        .query_row(
            "SELECT \"notnull\" FROM pragma_table_info('attempts') WHERE name = 'started_at'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .optional()
        .unwrap()
        == Some(0);
    // The trace of runs, with the events folded into a row read out of it.
    let mut claimed = HashSet::new();
    let mut started = HashSet::new();
    let mut opened = HashSet::new();
    let mut stmt = db
        .prepare("SELECT run_id, kind, detail FROM events WHERE run_id IS NOT NULL")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .unwrap();
    let mut events = 0usize;
    for row in rows {
        let (run_id, kind, detail) = row.unwrap();
        let detail: Value = serde_json::from_str(&detail).unwrap_or(Value::Null);
        for (kind, detail) in unfold(kind, detail) {
            events += 1;
            let attempt = (run_id, detail["attempt"].as_i64(), detail["token"].as_i64());
            match kind.as_str() {
                "claimed" => {
                    claimed.insert(attempt);
                }
                "started" => {
                    started.insert(attempt);
                }
                "window_opened" => {
                    opened.insert(run_id);
                }
                // A window created already settled (catch-up policy, too old)
                // is opened by its `skipped` / `expired` event with its facts.
                "skipped" | "expired" if detail.get("window_key").is_some() => {
                    opened.insert(run_id);
                }
                _ => {}
            }
        }
    }

    let mut rows_of: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut heard_run = 0usize;
    for (run, n, token, status, started_at) in &attempts {
        rows_of.entry(*run).or_default().push(*n);
        let key = (*run, Some(*n), Some(*token));
        if !claimed.contains(&key) {
            problem(
                "attempts without a `claimed` event",
                format!("run {run} attempt {n} (token {token}, {status})"),
            );
        }
        // The scheduler heard the agent run when the agent started (its
        // line in the marker) and its own report ended the attempt (the
        // supervisor reports the exec before the exit), or, where the
        // ledger records an attempt's start only once it is heard, when
        // that start is recorded.
        let heard = (ran.contains(&(*run, *n)) && matches!(status.as_str(), "succeeded" | "failed"))
            || (started_at_optional && started_at.is_some());
        heard_run += usize::from(heard);
        if heard && !started.contains(&key) {
            problem(
                "attempts whose agent ran without a `started` event",
                format!("run {run} attempt {n} (token {token}, {status})"),
            );
        }
    }
    for (id, (schedule, key, claims)) in &runs {
        let have = rows_of.get(id).map(Vec::as_slice).unwrap_or_default();
        if have.len() as i64 != *claims || have.iter().zip(1..).any(|(n, want)| *n != want) {
            problem(
                "runs whose claimed attempts lack their rows",
                format!("run {id} ({schedule} {key}): {claims} attempts claimed, rows of attempts {have:?}"),
            );
        }
        if !opened.contains(id) {
            problem(
                "runs without a `window_opened` event",
                format!("run {id} ({schedule} {key}, {claims} attempts)"),
            );
        }
    }
    let mut stmt = db
        .prepare(
            "SELECT tenant, schedule, window_key, group_concat(id) FROM runs \
             GROUP BY tenant, schedule, window_key HAVING COUNT(*) > 1",
        )
        .unwrap();
    let twice = stmt
        .query_map([], |r| {
            Ok(format!(
                "window {}/{} {}: runs {}",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?
            ))
        })
        .unwrap();
    for row in twice {
        problem("windows with two runs", row.unwrap());
    }
    Report {
        problems,
        attempts: attempts.len(),
        summary: format!(
            "{} runs, {} attempts ({heard_run} heard running), {events} run events",
            runs.len(),
            attempts.len()
        ),
    }
}

/// A stored row as the events it holds: those folded into it (a claim's
/// row carries its window's and decision's events, a `started` row its
/// claim's), then its own.
fn unfold(kind: String, mut detail: Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    if let Some(Value::Array(items)) = detail.as_object_mut().and_then(|d| d.remove("folded")) {
        for mut item in items {
            let k = item["kind"].as_str().unwrap_or_default().to_string();
            out.push((k, item["detail"].take()));
        }
    }
    out.push((kind, detail));
    out
}

/// The ledger, read-only, once the scheduler has made it.
fn ledger(dir: &Path) -> Option<Connection> {
    let path = dir.join("test.db");
    if !path.exists() {
        return None;
    }
    let db = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    db.busy_timeout(Duration::from_secs(5)).ok()?;
    Some(db)
}

/// The newest run's id, once the ledger has its tables.
fn last_run(db: &Connection) -> Option<i64> {
    db.query_row("SELECT COALESCE(MAX(id), 0) FROM runs", [], |r| r.get(0))
        .ok()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// xorshift64: the kill instants of one seed.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
