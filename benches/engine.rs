//! Engine benchmarks (issue 3): claim lateness in the live loop, durable run
//! lifecycles per second, and what an idle scheduler with 100,000 schedules costs.
//!
//! `cargo bench --bench engine` runs all three, each in a fresh child process so
//! one's memory does not show up in another's RSS. One of them:
//!
//! ```text
//! cargo bench --bench engine -- lateness [--schedules N --seconds S]
//! cargo bench --bench engine -- lifecycles [--runs N] [--schedules N] [--engine-only]
//! cargo bench --bench engine -- idle [--schedules N --seconds S]
//! cargo bench --bench engine -- spawn [--agents N]
//! ```
//!
//! `spawn` is the exception: real `bash` agents under the real supervisor
//! path (the fork server of the built `agentcron`), all due at one instant.
//!
//! A plain `main` (`harness = false`): it prints numbers and asserts nothing
//! about speed. The agent is an in-process no-op runner (it reports exit 0 at
//! once), so what is measured is the engine and its store, not process spawning.

/// The binary's allocator (see Cargo.toml), so the benches measure what runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use agentcron::agent::runner::{
    AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec, Ending,
};
use agentcron::config::{Config, load_str};
use agentcron::engine::{Engine, EngineOptions};
use agentcron::store::Store;
use agentcron::store::types::{
    AttemptEnd, AttemptStatus, Change, Claim, EventFilter, NewEvent, NewRun, Pool, RunReason, RunState,
};
use agentcron::time::{Clock, SystemClock, VirtualClock};
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const WHICH: [&str; 4] = ["lateness", "lifecycles", "claim-floor", "idle"];

fn main() {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "{e}\nusage: engine [lateness|lifecycles|claim-floor|idle|pg-protocol|spawn] [--agents N] [--schedules N] [--seconds S] [--runs N] [--history S] [--engine-only] [--db postgres://…] [--chunk C]"
            );
            std::process::exit(2);
        }
    };
    match args.which.as_deref() {
        None => {
            println!(
                "agentcron engine benchmarks ({} build, {} CPUs)",
                profile(),
                cpus()
            );
            // Each in its own process: RSS and CPU time are per process.
            for which in WHICH {
                let status = std::env::current_exe()
                    .and_then(|exe| std::process::Command::new(exe).arg(which).status());
                if !status.is_ok_and(|s| s.success()) {
                    eprintln!("benchmark `{which}` failed");
                    std::process::exit(1);
                }
            }
        }
        Some("lateness") => lateness_bench(&args),
        Some("lifecycles") => lifecycles_bench(&args),
        Some("claim-floor") => claim_floor_bench(&args),
        Some("idle") => idle_bench(&args),
        Some("pg-protocol") => pg_protocol_bench(&args),
        Some("spawn") => spawn_bench(&args),
        Some(other) => {
            eprintln!("unknown benchmark `{other}`; one of {}", WHICH.join(", "));
            std::process::exit(2);
        }
    }
}

/// `[which] [--schedules N] [--seconds S] [--runs N]`; cargo's own `--bench` is ignored.
#[derive(Default)]
struct Args {
    which: Option<String>,
    schedules: Option<usize>,
    seconds: Option<u64>,
    runs: Option<usize>,
    history: Option<u64>,
    engine_only: bool,
    /// `pg-protocol`, `lifecycles`, `lateness`: the PostgreSQL ledger to
    /// write (an empty database of its own).
    db: Option<String>,
    /// `pg-protocol`: windows per statement.
    chunk: Option<usize>,
    /// `spawn`: agents due at one instant.
    agents: Option<usize>,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut a = Args::default();
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut value = |name: &str| -> Result<u64, String> {
                it.next()
                    .and_then(|v| v.replace('_', "").parse().ok())
                    .ok_or_else(|| format!("{name} needs a number"))
            };
            match arg.as_str() {
                "--bench" => {}
                "--engine-only" => a.engine_only = true,
                "--schedules" => a.schedules = Some(value("--schedules")? as usize),
                "--seconds" => a.seconds = Some(value("--seconds")?),
                "--runs" => a.runs = Some(value("--runs")? as usize),
                "--history" => a.history = Some(value("--history")?),
                "--db" => a.db = Some(it.next().ok_or("--db needs a postgres:// URL")?),
                "--chunk" => a.chunk = Some(value("--chunk")? as usize),
                "--agents" => a.agents = Some(value("--agents")? as usize),
                w if !w.starts_with('-') && a.which.is_none() => a.which = Some(w.to_string()),
                other => return Err(format!("unexpected argument `{other}`")),
            }
        }
        Ok(a)
    }
}

// ---------------------------------------------------------------------------
// The no-op agent and the configs

/// Reports `Exited { code: 0 }` as soon as it is started, without spawning
/// anything. Optionally records the wall-clock instant of each start.
#[derive(Clone, Default)]
struct NoopRunner {
    starts: Option<Arc<Mutex<Starts>>>,
}

/// (run id, wall-clock instant the attempt was started).
type Starts = Vec<(i64, DateTime<Utc>)>;

impl NoopRunner {
    fn recording() -> Self {
        Self {
            starts: Some(Arc::default()),
        }
    }

    fn starts(&self) -> Starts {
        self.starts
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .unwrap_or_default()
    }
}

impl AgentRunner for NoopRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        if let Some(starts) = &self.starts {
            let now = SystemClock.now();
            starts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((spec.run_id, now));
        }
        let _ = reports.send(AttemptReport {
            run_id: spec.run_id,
            token: spec.token,
            signal: AttemptSignal::Started {
                at: std::time::Instant::now(),
            },
        });
        let _ = reports.send(AttemptReport {
            run_id: spec.run_id,
            token: spec.token,
            signal: AttemptSignal::Ended {
                ending: Ending::Exited {
                    code: Some(0),
                    signal: None,
                },
                log: String::new(),
            },
        });
        AttemptHandle::detached()
    }
}

/// `[scheduler]` and the one (never spawned) agent every schedule names.
fn config_head(workers: usize) -> String {
    format!(
        r#"[scheduler]
timezone = "UTC"
database = "bench.db"
workers = {workers}
lease = "60s"

[agents.noop]
kind = "command"
command = ["true"]
timeout = "1m"
"#
    )
}

/// `n` schedules firing every second, each window open for one second.
fn every_second_config(n: usize) -> String {
    let mut toml = config_head(n.max(8) * 2);
    for i in 0..n {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"s{i:06}\"\nagent = \"noop\"\nevery = \"1s\"\nanchor = \"fixed\"\n\
             check_every = \"1s\"\nclose_after = \"1s\"\noverlap = \"allow\"\nmax_concurrency = 1000\n"
        );
    }
    toml
}

fn load(toml: &str, dir: &Path) -> Config {
    match load_str(toml, &dir.join("agentcron.toml")) {
        Ok(c) => c,
        Err(e) => fail(&format!("generated config does not load: {e}")),
    }
}

/// The bench's ledger: a file in `dir`, or the PostgreSQL database `db`
/// names (`--db postgres://…`, an empty database of its own: the windows'
/// keys repeat from run to run).
fn open_store(dir: &Path, db: Option<&str>) -> Arc<Store> {
    let opened = match db {
        Some(url) => Store::open_postgres(url, None),
        None => Store::open(&dir.join("bench.db")),
    };
    match opened {
        Ok(s) => Arc::new(s),
        Err(e) => fail(&format!("cannot open the bench database: {e}")),
    }
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| fail(&format!("cannot create a temp dir: {e}")))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("cannot build the tokio runtime: {e}")))
}

/// The live loop for `seconds` of real time, then a graceful stop.
async fn live(engine: &mut Engine, seconds: u64) -> agentcron::engine::Result<()> {
    let stop = tokio::time::sleep(Duration::from_secs(seconds));
    engine.run_live(stop, Duration::from_secs(5)).await
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(1)
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(&format!("{what}: {e}")))
}

// ---------------------------------------------------------------------------
// (a) lateness

struct LatenessResult {
    schedules: usize,
    seconds: u64,
    loop_secs: f64,
    claimed: usize,
    recorded: Option<Stats>,
    observed: Option<Stats>,
    on_time_observed: Option<Stats>,
}

/// 10,000 schedules firing every second (and 1,000 for comparison), run by the
/// real live loop for real seconds.
fn lateness_bench(args: &Args) {
    let runs: Vec<(usize, u64)> = match (args.schedules, args.seconds) {
        (None, None) => vec![(1_000, 20), (10_000, 60)],
        (n, s) => vec![(n.unwrap_or(10_000), s.unwrap_or(60))],
    };
    println!();
    println!("== lateness: claim vs due instant, real live loop (run_live) ==");
    println!(
        "   every = \"1s\" (anchor fixed), close_after 1s, overlap allow; SystemClock, file database \
         (WAL), multi-thread runtime ({} CPUs), no-op in-process agent",
        cpus()
    );
    let db = args.db.as_deref();
    let results: Vec<LatenessResult> = runs.iter().map(|(n, s)| lateness_run(*n, *s, db)).collect();
    if results.len() > 1 {
        println!();
        println!("-- lateness summary (agent start vs due, wall clock, ms) --");
        let mut rows = vec![];
        for r in &results {
            let o = r.observed.as_ref();
            rows.push(vec![
                format!("{} × {} s", thousands(r.schedules as u64), r.seconds),
                thousands(r.claimed as u64),
                format!("{:.0}", r.claimed as f64 / r.loop_secs),
                format!("{}", r.schedules),
                o.map_or("-".into(), |s| ms(s.p50)),
                o.map_or("-".into(), |s| ms(s.p99)),
                o.map_or("-".into(), |s| ms(s.max)),
                r.recorded.as_ref().map_or("-".into(), |s| ms(s.p99)),
                r.on_time_observed.as_ref().map_or("-".into(), |s| ms(s.p99)),
            ]);
        }
        table(
            &[
                "run",
                "claims",
                "claims/s",
                "due/s",
                "p50",
                "p99",
                "max",
                "p99 (lateness_ms)",
                "p99 on-time only",
            ],
            &rows,
        );
    }
}

fn lateness_run(schedules: usize, seconds: u64, db: Option<&str>) -> LatenessResult {
    println!();
    println!(
        "-- {} schedules × every 1s for {seconds} s of real time --",
        thousands(schedules as u64)
    );
    let dir = temp_dir();
    let load_started = Instant::now();
    let cfg = load(&every_second_config(schedules), dir.path());
    let store = open_store(dir.path(), db);
    let runner = NoopRunner::recording();
    let mut engine = Engine::new(
        Arc::new(cfg),
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(runner.clone()),
        EngineOptions {
            record_claim_commits: true,
            ..EngineOptions::default()
        },
    );
    let setup = load_started.elapsed();
    let rt = runtime();
    let cpu0 = cpu_seconds();
    let load_before = load_average();
    let wall_start = SystemClock.now();
    let started = Instant::now();
    let run = rt.block_on(live(&mut engine, seconds));
    ok(run, "live loop failed");
    let loop_secs = started.elapsed().as_secs_f64();
    let wall_end = SystemClock.now();
    let cpu = cpu_seconds() - cpu0;
    drop(rt);
    let commits: Vec<f64> = engine
        .claim_commits()
        .into_iter()
        .filter(|(due, _)| *due >= wall_start)
        .map(|(due, at)| (at - due).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0)
        .collect();
    // The last claim of each due instant, committed how long after it: where
    // a high p99 comes from (the first instant after the start, or all).
    let mut last_of: std::collections::BTreeMap<DateTime<Utc>, f64> = Default::default();
    let mut first_of: std::collections::BTreeMap<DateTime<Utc>, f64> = Default::default();
    for (due, at) in engine.claim_commits() {
        if due >= wall_start {
            let late = (at - due).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0;
            let e = last_of.entry(due).or_insert(late);
            *e = e.max(late);
            let e = first_of.entry(due).or_insert(late);
            *e = e.min(late);
        }
    }
    let line = |which: &str, of: &std::collections::BTreeMap<DateTime<Utc>, f64>, digits: usize| {
        let values: Vec<String> = of.values().map(|v| format!("{v:.digits$}")).collect();
        println!(
            "   {which} claim of each instant committed (ms after due): {}",
            values.join(" ")
        );
    };
    // Before the first commit: the loop's wake-up and the tick's work ahead
    // of the claims, plus one chunk.
    line("first", &first_of, 1);
    line("last", &last_of, 0);

    // Everything below reads the trace the engine wrote.
    let claimed = ok(
        store.read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["claimed".into()],
                ..EventFilter::default()
            })
        }),
        "reading claimed events",
    );
    let started_ev = ok(
        store.read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["started".into()],
                ..EventFilter::default()
            })
        }),
        "reading started events",
    );
    let catchup: std::collections::HashSet<i64> = started_ev
        .iter()
        .filter(|e| e.detail["reason"] == "catchup")
        .filter_map(|e| e.run_id)
        .collect();
    let counts = ok(store.read(|tx| tx.count_by_state()), "counting runs");
    let opened = counts.iter().map(|(_, n)| *n).sum::<u64>();

    // Windows due before the loop started are the startup window the first tick
    // opens (its cursor starts one close_after back): counted apart.
    let mut recorded = vec![];
    let mut recomputed = vec![];
    let mut due_of: HashMap<i64, DateTime<Utc>> = HashMap::new();
    let mut mismatches = 0usize;
    let mut in_loop = 0usize;
    // The headline counts the windows due at least one second (the windows'
    // close_after) before the loop stopped: a window due 10 ms before the stop
    // cannot be claimed by then, however fast the claims are.
    let settle_by = wall_end - TimeDelta::seconds(1);
    let mut settled = 0usize;
    for e in &claimed {
        let (Some(due), Some(at), Some(lateness)) = (
            parse_ts(&e.detail["due"]),
            parse_ts(&e.detail["claimed"]),
            e.detail["lateness_ms"].as_i64(),
        ) else {
            continue;
        };
        let d = (at - due).num_milliseconds();
        if d != lateness {
            mismatches += 1;
        }
        if let Some(run) = e.run_id {
            due_of.insert(run, due);
        }
        if due >= wall_start {
            in_loop += 1;
            if due <= settle_by {
                settled += 1;
            }
            recorded.push(lateness as f64);
            recomputed.push(d as f64);
        }
    }
    let mut observed = vec![];
    let mut on_time = vec![];
    let mut startup = vec![];
    for (run, at) in runner.starts() {
        let Some(due) = due_of.get(&run) else {
            continue;
        };
        let late = (at - *due).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0;
        if *due < wall_start {
            startup.push(late);
            continue;
        }
        observed.push(late);
        if !catchup.contains(&run) {
            on_time.push(late);
        }
    }
    let state = |s: RunState| counts.iter().find(|(x, _)| *x == s).map_or(0, |(_, n)| *n);
    // Fire instants inside the loop: the whole seconds from its start to its stop.
    let first_fire = wall_start.timestamp() + 1;
    let last_fire = wall_end.timestamp();
    let instants = (last_fire - first_fire + 1).max(0) as u64;
    let due_windows = schedules as u64 * instants;
    let settled_due = schedules as u64 * (settle_by.timestamp() - first_fire + 1).max(0) as u64;
    println!(
        "   setup (generate + load config, open store): {:.2} s; loop ran {loop_secs:.2} s \
         ({} .. {} UTC); CPU {:.0}% of one core; 1-min load average {} before, {} after",
        setup.as_secs_f64(),
        hms(wall_start),
        hms(wall_end),
        100.0 * cpu / loop_secs,
        load_before,
        load_average()
    );
    let startup_stats = stats(startup);
    let rows = vec![
        vec![
            format!("windows due during the loop ({instants} instants)"),
            thousands(due_windows),
        ],
        vec![
            "  of them claimed".into(),
            format!(
                "{} ({:.1}%)",
                thousands(in_loop as u64),
                100.0 * in_loop as f64 / due_windows.max(1) as f64
            ),
        ],
        vec!["runs created (with the startup window)".into(), thousands(opened)],
        vec![
            "claims (all)".into(),
            format!(
                "{} ({} on time, {} catch-up)",
                thousands(claimed.len() as u64),
                thousands((claimed.len() - catchup.len().min(claimed.len())) as u64),
                thousands(catchup.len() as u64)
            ),
        ],
        vec![
            "claims per second".into(),
            format!("{:.0} (due: {schedules}/s)", claimed.len() as f64 / loop_secs),
        ],
        vec!["succeeded".into(), thousands(state(RunState::Succeeded))],
        vec![
            "missed (window closed before the claim)".into(),
            thousands(state(RunState::Missed)),
        ],
        vec![
            "pending / retry_wait left at stop".into(),
            thousands(state(RunState::Pending) + state(RunState::RetryWait)),
        ],
        vec![
            "skipped / expired / failed".into(),
            format!(
                "{} / {} / {}",
                state(RunState::Skipped),
                state(RunState::Expired),
                state(RunState::Failed)
            ),
        ],
        vec![
            "startup window (due before the loop): runs, max agent-start lateness".into(),
            startup_stats.as_ref().map_or("-".into(), |s| {
                format!("{}, {} ms", thousands(s.n as u64), ms(s.max))
            }),
        ],
    ];
    table(&["", ""], &rows);
    println!("   events by kind: {}", event_kinds(&dir.path().join("bench.db")));
    println!();
    let recorded = stats(recorded);
    let observed = stats(observed);
    let on_time_observed = stats(on_time);
    let committed = stats(commits);
    let mut rows = vec![];
    for (label, s) in [
        ("claim committed (wall clock) - due", &committed),
        ("claimed event: detail.lateness_ms", &recorded),
        ("claimed event: detail.claimed - detail.due", &stats(recomputed)),
        ("agent started (wall clock) - due", &observed),
        ("  on-time runs only", &on_time_observed),
    ] {
        rows.push(stat_row(label, s.as_ref()));
    }
    table(
        &[
            "lateness of windows due during the loop (ms)",
            "count",
            "p50",
            "p90",
            "p99",
            "max",
        ],
        &rows,
    );
    if mismatches > 0 {
        println!("   note: {mismatches} claimed events where lateness_ms != claimed - due");
    }
    println!(
        "   target p99 <= 5 ms: {}",
        match &observed {
            Some(s) if s.p99 <= 5.0 => "met".to_string(),
            Some(s) => format!("missed by {:.0} ms (p99 {})", s.p99 - 5.0, ms(s.p99)),
            None => "no claims".to_string(),
        }
    );
    let p =
        |s: &Option<Stats>, f: fn(&Stats) -> f64| s.as_ref().map_or("-".into(), |s| format!("{:.0}", f(s)));
    println!(
        "bench lateness {schedules} schedules: commit-due p50 {} ms p99 {} ms; start-due p50 {} ms p99 {} ms; claimed {} of {}",
        p(&committed, |s| s.p50),
        p(&committed, |s| s.p99),
        p(&observed, |s| s.p50),
        p(&observed, |s| s.p99),
        settled,
        settled_due
    );
    println!(
        "   (the headline counts windows due up to 1 s before the stop; with the last second: claimed {in_loop} of {due_windows})"
    );
    if (in_loop as f64) < 0.99 * due_windows as f64 {
        println!(
            "   the engine kept up with {:.0}% of the windows due ({:.0} of {schedules} claims/s)",
            100.0 * in_loop as f64 / due_windows.max(1) as f64,
            claimed.len() as f64 / loop_secs
        );
    }
    LatenessResult {
        schedules,
        seconds,
        loop_secs,
        claimed: claimed.len(),
        recorded,
        observed,
        on_time_observed,
    }
}

/// `kind count, …` over the whole trace, most frequent first.
fn event_kinds(db: &Path) -> String {
    let counts = rusqlite::Connection::open(db).and_then(|c| {
        let mut stmt = c.prepare("SELECT kind, COUNT(*) FROM events GROUP BY kind ORDER BY 2 DESC")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    });
    match counts {
        Ok(counts) => counts
            .iter()
            .map(|(k, n)| format!("{k} {}", thousands(*n as u64)))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("unreadable: {e}"),
    }
}

fn parse_ts(v: &serde_json::Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn hms(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}

// ---------------------------------------------------------------------------
// (b) lifecycles

/// Wall time and this thread's CPU time spent in something.
#[derive(Debug, Clone, Copy, Default)]
struct Spent {
    wall: f64,
    cpu: f64,
}

impl Spent {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let wall = Instant::now();
        let cpu = thread_cpu();
        let out = f();
        self.wall += wall.elapsed().as_secs_f64();
        self.cpu += thread_cpu() - cpu;
        out
    }

    fn plus(self, o: Spent) -> Spent {
        Spent {
            wall: self.wall + o.wall,
            cpu: self.cpu + o.cpu,
        }
    }

    /// µs of wall and CPU time per item.
    fn per(self, n: usize) -> (String, String) {
        let n = n.max(1) as f64;
        (
            format!("{:.0}", self.wall * 1e6 / n),
            format!("{:.0}", self.cpu * 1e6 / n),
        )
    }
}

/// Durable lifecycles (open → claim → start → succeed, with events) per second:
/// the real engine on a virtual clock, then the store alone.
fn lifecycles_bench(args: &Args) {
    let runs = args.runs.unwrap_or(20_000).max(1);
    println!();
    println!("== lifecycles: durable run lifecycles per second on SQLite (file, WAL, synchronous=NORMAL) ==");
    println!(
        "   single thread; wall time and that thread's CPU time (CPU time is what other load on the \
         machine cannot inflate; 1-min load average now {})",
        load_average()
    );
    let (done, engine) = engine_lifecycles(runs, args.schedules.unwrap_or(1_000), args.db.as_deref());
    // The rows below are SQLite's own (its store replayed, its floor).
    if args.engine_only || args.db.is_some() {
        return;
    }
    let replay = store_replay(runs);
    let two_tx = store_two_tx(runs, 1);
    let batched = store_two_tx(runs, 100);
    let empty = empty_transactions(runs);
    let floor = sqlite_floor(runs, 1_000);
    println!();
    println!("-- lifecycles summary (target >= 20,000 per wall second) --");
    let row = |label: &str, n: usize, s: Spent| {
        let (w, c) = s.per(n);
        vec![
            label.to_string(),
            thousands(n as u64),
            format!("{:.0}", n as f64 / s.wall),
            format!("{:.0}", n as f64 / s.cpu.max(1e-9)),
            w,
            c,
        ]
    };
    let rows = vec![
        row("engine: tick + drain_reports, VirtualClock", done, engine),
        row("store: the engine's transactions, replayed", runs, replay),
        row("store: 2 write transactions per run", runs, two_tx),
        row("store: 2 write transactions per 100 runs", runs, batched),
        row("store: empty write transaction (per tx)", runs, empty),
        row("floor: raw SQLite, lean schema, 2 tx per 1,000 runs", runs, floor),
    ];
    table(
        &[
            "path",
            "lifecycles",
            "per wall s",
            "per CPU s",
            "wall µs",
            "CPU µs",
        ],
        &rows,
    );
}

/// The real engine: `schedules` (1,000) every-1s schedules stepped one virtual second at a
/// time until `runs` windows have been due; each second is ticked and drained
/// until nothing is left due at that instant.
fn engine_lifecycles(runs: usize, schedules: usize, db: Option<&str>) -> (usize, Spent) {
    let seconds = runs.div_ceil(schedules);
    println!();
    println!(
        "-- engine: {} every-1s schedules × {seconds} virtual seconds = {} runs, no-op agent --",
        thousands(schedules as u64),
        thousands((schedules * seconds) as u64)
    );
    let dir = temp_dir();
    let cfg = load(&every_second_config(schedules), dir.path());
    let store = open_store(dir.path(), db);
    let t0 = ok(
        DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z"),
        "start instant",
    )
    .with_timezone(&Utc);
    let clock = VirtualClock::new(t0);
    let mut engine = Engine::new(
        Arc::new(cfg),
        store.clone(),
        Arc::new(clock.clone()),
        Arc::new(NoopRunner::default()),
        EngineOptions::default(),
    );
    ok(engine.start(), "engine start");
    let mut tick = Spent::default();
    let mut drain = Spent::default();
    let mut ticks = 0usize;
    for i in 0..seconds {
        let now = t0 + TimeDelta::seconds(i as i64);
        clock.set(now);
        for _ in 0..100 {
            ok(tick.time(|| engine.tick()), "tick");
            ticks += 1;
            let handled = ok(drain.time(|| engine.drain_reports()), "drain_reports");
            let more = ok(engine.next_wakeup(), "next_wakeup").is_some_and(|w| w <= now);
            if handled == 0 && !more {
                break;
            }
        }
    }
    let counts = ok(store.read(|tx| tx.count_by_state()), "counting runs");
    let succeeded = counts
        .iter()
        .find(|(s, _)| *s == RunState::Succeeded)
        .map_or(0, |(_, n)| *n) as usize;
    let events = ok(store.read(|tx| tx.max_event_id()), "counting events");
    let total = tick.plus(drain);
    let row = |label: &str, s: Spent| {
        let (w, c) = s.per(succeeded);
        vec![
            label.to_string(),
            format!("{:.2}", s.wall),
            format!("{:.2}", s.cpu),
            w,
            c,
        ]
    };
    let rows = vec![
        row("tick (open windows, decide, claim, dispatch)", tick),
        row("drain_reports (end attempt, succeed, circuit)", drain),
        row("total", total),
    ];
    table(&["phase", "wall s", "CPU s", "wall µs/run", "CPU µs/run"], &rows);
    println!(
        "   {} runs succeeded of {} due, {ticks} ticks, {} events ({:.1} per run); \
         {:.0} lifecycles per wall second, {:.0} per CPU second",
        thousands(succeeded as u64),
        thousands((schedules * seconds) as u64),
        thousands(events as u64),
        events as f64 / succeeded.max(1) as f64,
        succeeded as f64 / total.wall,
        succeeded as f64 / total.cpu.max(1e-9)
    );
    println!(
        "bench lifecycles: {:.0} per wall second",
        succeeded as f64 / total.wall
    );
    (succeeded, total)
}

/// A run of schedule `i % 1000` for window `n`, pending and due at `at`.
fn new_run(i: usize, n: usize, at: DateTime<Utc>) -> NewRun {
    NewRun {
        tenant: "default".into(),
        schedule: format!("s{:06}", i % 1_000),
        window_key: format!("w{n:08}"),
        window_start: at,
        window_end: at + TimeDelta::seconds(1),
        due_at: at,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        next_check_at: None,
    }
}

/// An envelope of the size the engine stores for a no-op run (about 700 bytes).
fn envelope_text(run: i64) -> String {
    json!({"run_id": run, "tenant": "default", "schedule": "s000001",
           "window": {"key": "2026-06-01T00:00:01+00:00", "start": "2026-06-01T00:00:01.000Z",
                      "end": "2026-06-01T00:00:02.000Z", "timezone": "UTC"},
           "idempotency_key": "default/s000001/2026-06-01T00:00:01+00:00", "attempt": 1,
           "reason": "scheduled", "now": "2026-06-01T00:00:01.000+00:00",
           "context": {"business_day": true, "since_last_success": "1s"},
           "memory": [{"window": "2026-06-01T00:00:00+00:00", "state": "succeeded", "summary": null}],
           "completed_steps": [], "uncertain_steps": [], "verify_step": null, "payload": {}})
    .to_string()
}

/// What the engine's `decision` event for a claim looks like.
fn claim_decision() -> serde_json::Value {
    let switches = [
        "kill",
        "paused",
        "circuit",
        "maintenance",
        "budget",
        "overlap",
        "quota",
    ]
    .map(|name| json!({"name": name, "held": false, "reason": "clear"}));
    json!({"verdict": "claim", "reason": "all layers pass",
           "time": {"reason": "window open", "held": false}, "switches": switches, "gates": []})
}

/// The store calls one engine lifecycle makes (no-op agent, no gates), in the
/// engine's transactions, timed per transaction: where a lifecycle's time goes
/// without the engine around it.
fn store_replay(runs: usize) -> Spent {
    println!();
    println!(
        "-- store: the engine's transactions per lifecycle, replayed directly ({} runs over 1,000 \
         schedules) --",
        thousands(runs as u64)
    );
    let dir = temp_dir();
    let store = open_store(dir.path(), None);
    let t0 = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
    let names = [
        "open: insert_run + window_opened + set_last_evaluated",
        "claim: decision event + claim (+ attempt, claimed event)",
        "dispatch read: steps, execution memory, schedule state",
        "dispatch write: envelope + started + schedule_state",
        "end_attempt",
        "read run",
        "wake_held (recheck_held)",
        "transition → succeeded (+ event)",
        "schedule_state: last_success",
        "circuit_after_run: schedule_state",
    ];
    let mut spent = [Spent::default(); 10];
    let end = AttemptEnd {
        status: Some(AttemptStatus::Succeeded),
        exit_code: Some(0),
        ..AttemptEnd::default()
    };
    for n in 0..runs {
        let now = t0 + TimeDelta::milliseconds(n as i64);
        let new = new_run(n, n, now);
        let run = spent[0].time(|| {
            store.write(|tx| {
                let run = tx.insert_run(&new, now)?;
                if let Some(run) = &run {
                    let detail = json!({"window_key": run.window_key, "start": "2026-06-01T00:00:01.000Z",
                        "end": "2026-06-01T00:00:02.000Z", "due": "2026-06-01T00:00:01.000Z",
                        "note": null, "pool": "on_time", "reason": "scheduled"});
                    tx.append_event(&NewEvent::new(now, "window_opened", detail).for_run(run))?;
                }
                tx.set_last_evaluated(&new.schedule, now)?;
                Ok(run)
            })
        });
        let Some(run) = ok(run, "open") else { continue };
        let claim = spent[1].time(|| {
            store.write(|tx| {
                tx.append_event(&NewEvent::new(now, "decision", claim_decision()).for_run(&run))?;
                let lease = now + TimeDelta::seconds(60);
                tx.claim(
                    run.id,
                    RunState::Pending,
                    "bench",
                    lease,
                    RunReason::Scheduled,
                    run.due_at,
                    now,
                )
            })
        });
        let Some(claim) = ok(claim, "claim") else { continue };
        let read = spent[2].time(|| {
            store.read(|tx| {
                tx.completed_steps(run.id)?;
                tx.uncertain_steps(run.id)?;
                tx.execution_memory(&run.tenant, &run.schedule, 5)?;
                tx.schedule_state(&run.schedule)
            })
        });
        ok(read, "dispatch read");
        let envelope = envelope_text(run.id);
        let write = spent[3].time(|| {
            store.write(|tx| {
                tx.set_attempt_envelope(run.id, claim.attempt, &envelope)?;
                let detail = json!({"attempt": 1, "token": claim.fencing_token, "reason": "scheduled",
                    "agent": "noop", "verify_step": null, "timeout_ms": 60000});
                tx.append_event(&NewEvent::new(now, "started", detail).for_run(&run))?;
                let mut st = tx.schedule_state(&run.schedule)?;
                st.last_start = Some(now);
                tx.put_schedule_state(&st)
            })
        });
        ok(write, "dispatch write");
        let ended =
            spent[4].time(|| store.write(|tx| tx.end_attempt(run.id, claim.fencing_token, &end, now)));
        ok(ended, "end_attempt");
        let running = ok(spent[5].time(|| store.read(|tx| tx.run(run.id))), "read run");
        ok(
            spent[6].time(|| store.write(|tx| tx.recheck_held(&run.schedule, 1, true, true, now))),
            "recheck_held",
        );
        let ev = NewEvent::new(
            now,
            "succeeded",
            json!({"attempt": 1, "summary": null, "processed": null}),
        )
        .for_run(&running);
        let done = spent[7].time(|| {
            store.write(|tx| {
                let change = Change::default();
                tx.transition(
                    running.id,
                    RunState::Running,
                    RunState::Succeeded,
                    &change,
                    now,
                    &[ev],
                )
            })
        });
        ok(done, "transition");
        for slot in &mut spent[8..] {
            let st = slot.time(|| {
                store.write(|tx| {
                    let mut st = tx.schedule_state(&run.schedule)?;
                    st.last_success = Some(now);
                    tx.put_schedule_state(&st)
                })
            });
            ok(st, "schedule state");
        }
    }
    let total = spent.iter().fold(Spent::default(), |a, s| a.plus(*s));
    let mut rows: Vec<Vec<String>> = names
        .iter()
        .zip(spent)
        .map(|(name, s)| {
            let (w, c) = s.per(runs);
            vec![
                (*name).to_string(),
                w,
                c,
                format!("{:.0}%", 100.0 * s.cpu / total.cpu.max(1e-9)),
            ]
        })
        .collect();
    let (w, c) = total.per(runs);
    rows.push(vec!["total".into(), w, c, "100%".into()]);
    table(&["transaction", "wall µs/run", "CPU µs/run", "CPU share"], &rows);
    total
}

/// The store's ceiling for durable lifecycles: open + claim + start of `batch`
/// runs in one write transaction, end + succeed of the same runs in a second
/// (`batch` = 1: two write transactions per run).
fn store_two_tx(runs: usize, batch: usize) -> Spent {
    let dir = temp_dir();
    let store = open_store(dir.path(), None);
    let t0 = Utc::now().with_nanosecond(0).unwrap_or_else(Utc::now);
    let mut spent = Spent::default();
    let mut n = 0;
    while n < runs {
        let chunk: Vec<usize> = (n..(n + batch).min(runs)).collect();
        n += chunk.len();
        let now = t0 + TimeDelta::milliseconds(n as i64);
        let claims = spent.time(|| {
            store.write(|tx| {
                let mut claims = vec![];
                for i in &chunk {
                    claims.extend(open_claim_start(tx, *i, now)?);
                }
                Ok(claims)
            })
        });
        let claims = ok(claims, "open + claim + start");
        let done = spent.time(|| {
            store.write(|tx| {
                for claim in &claims {
                    end_succeed(tx, claim, now)?;
                }
                Ok(())
            })
        });
        ok(done, "end + succeed");
    }
    spent
}

/// What the claims of one due instant cost SQLite alone on today's schema:
/// `--schedules` claims (default 10,000) written by raw SQLite into a store
/// the engine created (its migrations, its indexes), 256 per transaction as
/// the engine commits them, with the store's own statements. Three
/// variants, each in a fresh database: the three rows a claim writes (the
/// run inserted already claimed, its attempt with a real-sized envelope, the
/// one trace row of opened + decision + claimed + started), the run row
/// alone, and the run row alone with every secondary index of `runs`
/// dropped. No engine: the floor under the lateness bench's commit − due.
fn claim_floor_bench(args: &Args) {
    let n = args.schedules.unwrap_or(10_000);
    let history = args.history.unwrap_or(30);
    println!();
    println!(
        "== claim floor: {} claims of one instant after {history} s of history, raw SQLite on today's schema ==",
        thousands(n as u64)
    );
    println!(
        "   file database (WAL, synchronous=NORMAL), {CLAIM_TX} claims per transaction, cached statements; \
         the store holds {history} earlier instants' runs of the same schedules (ended); best of 3"
    );
    let variants = [
        ("run + attempt (envelope) + trace row", ClaimRows::All),
        ("the run row alone", ClaimRows::Run),
        ("the run row, no secondary index on runs", ClaimRows::BareRun),
        (
            "the run row, schema 15's runs_window (schedule first, every run)",
            ClaimRows::OldWindow,
        ),
    ];
    let mut rows = vec![];
    let mut best = vec![];
    for (name, what) in variants {
        let secs = (0..3)
            .map(|_| claim_floor(n, history, what))
            .fold(f64::INFINITY, f64::min);
        best.push(secs);
        rows.push(vec![
            name.to_string(),
            format!("{:.1}", secs * 1e3),
            format!("{:.2}", secs * 1e6 / n as f64),
        ]);
    }
    table(&["writes per claim", "all claims (ms)", "per claim (µs)"], &rows);
    println!(
        "bench claim-floor {n} claims: schema rows {:.0} ms; run row alone {:.0} ms; bare run row {:.0} ms; \
         run row with schema 15's index {:.0} ms",
        best[0] * 1e3,
        best[1] * 1e3,
        best[2] * 1e3,
        best[3] * 1e3
    );
}

/// Claims per transaction in [`claim_floor`]: the engine's claim chunk.
const CLAIM_TX: usize = 256;

#[derive(Clone, Copy, PartialEq)]
enum ClaimRows {
    All,
    Run,
    BareRun,
    /// The run row with `runs_window` as schema 15 had it (every run, led by
    /// the schedule): what schema 16's partial index saves a claim.
    OldWindow,
}

/// Seconds to write `n` claims' rows (see [`claim_floor_bench`]) once the
/// store holds `history` earlier instants' (ended) runs of the same
/// schedules, as a scheduler's store does after as many seconds.
fn claim_floor(n: usize, history: u64, what: ClaimRows) -> f64 {
    let dir = temp_dir();
    let path = dir.path().join("claims.db");
    drop(ok(Store::open(&path), "create the store"));
    let conn = ok(rusqlite::Connection::open(&path), "open claims.db");
    ok(
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;",
        ),
        "pragmas",
    );
    if what == ClaimRows::BareRun {
        let indexes: Vec<String> = ok(
            conn.prepare(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL",
            )
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect()),
            "list indexes",
        );
        for i in indexes {
            ok(conn.execute_batch(&format!("DROP INDEX {i}")), "drop index");
        }
    }
    if what == ClaimRows::OldWindow {
        ok(
            conn.execute_batch(
                "DROP INDEX runs_window; DROP INDEX runs_running; \
                 CREATE INDEX runs_window ON runs (schedule, window_start);",
            ),
            "schema 15's runs_window",
        );
    }
    let envelope = envelope_text(1);
    // The size of a claim's trace row as the engine writes it (about 640
    // bytes: the started event with opened, decision and claimed folded in).
    let detail = format!(r#"{{"attempt":1,"token":1,"folded":"{}"}}"#, "x".repeat(600));
    let history = history as i64;
    let mut started = Instant::now();
    // The earlier instants' runs first (ended: they are in the schedules'
    // history), then the timed instant's claims (running).
    for k in 0..=history {
        if k == history {
            // The history checkpointed, and no checkpoint on the timed
            // commits: a scheduler's store checkpoints from a thread of its
            // own (see `Store::open`), never in a claim's commit.
            ok(
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 0;"),
                "checkpoint",
            );
            started = Instant::now();
        }
        let now = 1_780_272_000_000_i64 + k * 1000;
        let key = format!(
            "2026-06-01T{:02}:{:02}:{:02}+00:00",
            k / 3600,
            k / 60 % 60,
            k % 60
        );
        let state = if k == history { "running" } else { "succeeded" };
        let mut done = 0;
        while done < n {
            let result = (|| -> rusqlite::Result<()> {
                conn.execute_batch("BEGIN IMMEDIATE")?;
                let mut run = conn.prepare_cached(
                    "INSERT INTO runs (tenant, schedule, window_key, window_start, window_end, due_at, state, reason, \
                     pool, attempts, lease_owner, lease_expires, fencing_token, created_at, updated_at, schedule_version) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?4, ?8, 'scheduled', 'on_time', 1, 'bench', ?6, ?7, ?4, ?4, \
                     (SELECT version FROM schedule_current WHERE schedule = ?2)) \
                     ON CONFLICT (window_key, schedule, tenant) DO NOTHING",
                )?;
                let mut attempt = conn.prepare_cached(
                    "INSERT INTO attempts (run_id, n, fencing_token, tenant, schedule, owner, reason, started_at, \
                     status, schedule_version, envelope) VALUES (?1, 1, ?2, ?3, ?4, 'bench', 'scheduled', ?5, 'running', \
                     (SELECT version FROM schedule_current WHERE schedule = ?4), ?6)",
                )?;
                let mut event = conn.prepare_cached(
                    "INSERT INTO events (at, kind, tenant, schedule, run_id, detail) VALUES (?1, 'started', ?2, ?3, ?4, ?5)",
                )?;
                for i in done..(done + CLAIM_TX).min(n) {
                    let schedule = format!("s{i:06}");
                    let token = k * n as i64 + i as i64 + 1;
                    run.execute(rusqlite::params![
                        "default",
                        schedule,
                        key,
                        now,
                        now + 1000,
                        now + 60_000,
                        token,
                        state
                    ])?;
                    if what == ClaimRows::All {
                        let id = conn.last_insert_rowid();
                        attempt.execute(rusqlite::params![id, token, "default", schedule, now, envelope])?;
                        event.execute(rusqlite::params![now, "default", schedule, id, detail])?;
                    }
                }
                conn.execute_batch("COMMIT")
            })();
            ok(result, "claim rows");
            done = (done + CLAIM_TX).min(n);
        }
    }
    started.elapsed().as_secs_f64()
}

/// The physical floor of a lifecycle on this machine: raw SQLite (WAL,
/// synchronous=NORMAL, a file), a lean schema (a run row inserted already
/// claimed, its attempt with a 700-byte envelope, three events of about 100
/// bytes: claimed, started, succeeded), written per tick of `batch` runs in two
/// transactions — claim and start, then end and succeed — with one cached
/// statement per row. No engine: what the writes alone cost.
fn sqlite_floor(runs: usize, batch: usize) -> Spent {
    let dir = temp_dir();
    let conn = ok(
        rusqlite::Connection::open(dir.path().join("floor.db")),
        "open floor.db",
    );
    ok(
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;
             CREATE TABLE runs (id INTEGER PRIMARY KEY, schedule TEXT NOT NULL, window_start INTEGER NOT NULL,
                 state TEXT NOT NULL, lease_owner TEXT, lease_expires INTEGER, token INTEGER NOT NULL,
                 attempts INTEGER NOT NULL, updated_at INTEGER NOT NULL, UNIQUE (window_start, schedule));
             CREATE INDEX runs_lease ON runs (lease_expires) WHERE state = 'running';
             CREATE TABLE attempts (token INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, n INTEGER NOT NULL,
                 started_at INTEGER NOT NULL, ended_at INTEGER, status TEXT NOT NULL, envelope TEXT);
             CREATE TABLE events (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, kind TEXT NOT NULL,
                 run_id INTEGER, detail TEXT NOT NULL);
             CREATE INDEX events_run ON events (run_id);",
        ),
        "floor schema",
    );
    let envelope = envelope_text(1);
    let t0 = 1_780_272_000_000_i64;
    let mut spent = Spent::default();
    let mut n = 0usize;
    let mut token = 0i64;
    while n < runs {
        let ids: Vec<usize> = (n..(n + batch).min(runs)).collect();
        n += ids.len();
        let now = t0 + (n / batch) as i64 * 1000;
        let result = spent.time(|| -> rusqlite::Result<()> {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            let mut claimed = Vec::with_capacity(ids.len());
            {
                let mut run = conn.prepare_cached(
                    "INSERT INTO runs (schedule, window_start, state, lease_owner, lease_expires, token, attempts, updated_at)
                     VALUES (?1, ?2, 'running', 'bench', ?3, ?4, 1, ?2) RETURNING id",
                )?;
                let mut attempt = conn.prepare_cached(
                    "INSERT INTO attempts (token, run_id, n, started_at, status, envelope) VALUES (?1, ?2, 1, ?3, 'running', ?4)",
                )?;
                let mut event = conn.prepare_cached(
                    "INSERT INTO events (at, kind, run_id, detail) VALUES (?1, ?2, ?3, ?4)",
                )?;
                for i in &ids {
                    token += 1;
                    let schedule = format!("s{:06}", i % 1_000);
                    let id: i64 = run.query_row(rusqlite::params![schedule, now, now + 60_000, token], |r| r.get(0))?;
                    attempt.execute(rusqlite::params![token, id, now, envelope])?;
                    let claim = format!(r#"{{"verdict":"claim","owner":"bench","attempt":1,"token":{token},"lateness_ms":0}}"#);
                    event.execute(rusqlite::params![now, "claimed", id, claim])?;
                    let start = format!(r#"{{"attempt":1,"token":{token},"agent":"noop","timeout_ms":60000}}"#);
                    event.execute(rusqlite::params![now, "started", id, start])?;
                    claimed.push((id, token));
                }
            }
            conn.execute_batch("COMMIT; BEGIN IMMEDIATE")?;
            {
                let mut end = conn.prepare_cached(
                    "UPDATE attempts SET ended_at = ?2, status = 'succeeded' WHERE token = ?1 AND ended_at IS NULL",
                )?;
                let mut run = conn.prepare_cached(
                    "UPDATE runs SET state = 'succeeded', lease_owner = NULL, lease_expires = NULL, updated_at = ?3
                     WHERE id = ?1 AND token = ?2 AND state = 'running'",
                )?;
                let mut event = conn.prepare_cached(
                    "INSERT INTO events (at, kind, run_id, detail) VALUES (?1, 'succeeded', ?2, ?3)",
                )?;
                for (id, token) in &claimed {
                    end.execute(rusqlite::params![token, now])?;
                    run.execute(rusqlite::params![id, token, now])?;
                    let done = format!(r#"{{"attempt":1,"token":{token},"exit_code":0}}"#);
                    event.execute(rusqlite::params![now, id, done])?;
                }
            }
            conn.execute_batch("COMMIT")
        });
        ok(result, "floor lifecycle");
    }
    spent
}

/// A new window of run `n`, claimed and started.
fn open_claim_start(
    tx: &agentcron::store::Tx,
    n: usize,
    now: DateTime<Utc>,
) -> agentcron::store::Result<Option<Claim>> {
    let Some(run) = tx.insert_run(&new_run(n, n, now), now)? else {
        return Ok(None);
    };
    let opened = json!({"window_key": run.window_key});
    tx.append_event(&NewEvent::new(now, "window_opened", opened).for_run(&run))?;
    let lease = now + TimeDelta::seconds(60);
    let claim = tx.claim(
        run.id,
        RunState::Pending,
        "bench",
        lease,
        RunReason::Scheduled,
        run.due_at,
        now,
    )?;
    if let Some(c) = &claim {
        tx.set_attempt_envelope(run.id, c.attempt, &envelope_text(run.id))?;
        let started = json!({"attempt": c.attempt, "token": c.fencing_token});
        tx.append_event(&NewEvent::new(now, "started", started).for_run(&c.run))?;
    }
    Ok(claim)
}

/// The attempt ends with exit 0 and the run succeeds.
fn end_succeed(tx: &agentcron::store::Tx, claim: &Claim, now: DateTime<Utc>) -> agentcron::store::Result<()> {
    let end = AttemptEnd {
        status: Some(AttemptStatus::Succeeded),
        exit_code: Some(0),
        ..AttemptEnd::default()
    };
    tx.end_attempt(claim.run.id, claim.fencing_token, &end, now)?;
    let ev = NewEvent::new(now, "succeeded", json!({"attempt": claim.attempt}));
    let change = Change::default();
    tx.transition(
        claim.run.id,
        RunState::Running,
        RunState::Succeeded,
        &change,
        now,
        &[ev],
    )?;
    Ok(())
}

/// The fixed cost of one write transaction on this file (lock, WAL commit).
fn empty_transactions(n: usize) -> Spent {
    let dir = temp_dir();
    let store = open_store(dir.path(), None);
    let mut spent = Spent::default();
    for _ in 0..n {
        ok(spent.time(|| store.write(|_| Ok(()))), "empty transaction");
    }
    spent
}

// ---------------------------------------------------------------------------
// (c) idle

/// 100,000 daily cron schedules loaded and idle in the live loop: CPU and RSS.
fn idle_bench(args: &Args) {
    let n = args.schedules.unwrap_or(100_000);
    let seconds = args.seconds.unwrap_or(30);
    println!();
    println!(
        "== idle: {} cron schedules (\"M H * * *\", spread over the day), live loop for {seconds} s ==",
        thousands(n as u64)
    );
    let rss_start = status_kb("VmRSS");
    let dir = temp_dir();
    // Minute slots that fire from a little before the loop starts until a little
    // after it ends are left out, so the measurement sees the scheduler idle.
    let now = SystemClock.now();
    let quiet_from = now - TimeDelta::minutes(2);
    let quiet_to = now + TimeDelta::seconds(seconds as i64) + TimeDelta::minutes(3);
    let busy = |slot: i64| {
        let day = now
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc();
        [day - TimeDelta::days(1), day, day + TimeDelta::days(1)]
            .iter()
            .any(|d| {
                let at = *d + TimeDelta::minutes(slot);
                at >= quiet_from && at <= quiet_to
            })
    };
    let slots: Vec<i64> = (0..1440).filter(|s| !busy(*s)).collect();
    let generated = Instant::now();
    let mut toml = config_head(8);
    for i in 0..n {
        let slot = slots[i % slots.len()];
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"daily-{i:06}\"\nagent = \"noop\"\ncron = \"{} {} * * *\"\n",
            slot % 60,
            slot / 60
        );
    }
    let toml_bytes = toml.len();
    let gen_secs = generated.elapsed().as_secs_f64();
    let loaded = Instant::now();
    let cfg = load(&toml, dir.path());
    let load_secs = loaded.elapsed().as_secs_f64();
    drop(toml);
    let rss_loaded = status_kb("VmRSS");
    let store = open_store(dir.path(), None);
    let mut engine = Engine::new(
        Arc::new(cfg),
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(NoopRunner::default()),
        EngineOptions::default(),
    );
    let rt = runtime();
    let first = Instant::now();
    ok(rt.block_on(async { engine.tick() }), "first tick");
    let first_secs = first.elapsed().as_secs_f64();
    let rss_started = status_kb("VmRSS");
    let cpu0 = cpu_seconds();
    let precise0 = rusage_cpu();
    let wall = Instant::now();
    let run = rt.block_on(live(&mut engine, seconds));
    ok(run, "live loop failed");
    let wall = wall.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let precise = rusage_cpu() - precise0;
    let rss_end = status_kb("VmRSS");
    let hwm = status_kb("VmHWM");
    let runs = ok(store.read(|tx| tx.count_by_state()), "counting runs")
        .iter()
        .map(|(_, n)| *n)
        .sum::<u64>();
    let ticks = ok(
        store.read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["tick".into()],
                ..EventFilter::default()
            })
        }),
        "reading tick events",
    )
    .len();
    let mb = |kb: Option<u64>| kb.map_or("-".into(), |k| format!("{:.1} MB", k as f64 / 1024.0));
    let rows = vec![
        vec![
            "generate TOML".into(),
            format!("{gen_secs:.2} s ({:.1} MB of text)", toml_bytes as f64 / 1e6),
        ],
        vec!["load_str (parse + validate)".into(), format!("{load_secs:.2} s")],
        vec![
            "first tick (start: cursors, due heap)".into(),
            format!("{first_secs:.2} s"),
        ],
        vec!["RSS at start of the bench".into(), mb(rss_start)],
        vec!["RSS after load (config in memory)".into(), mb(rss_loaded)],
        vec!["RSS after engine start".into(), mb(rss_started)],
        vec![format!("RSS after {seconds} s idle"), mb(rss_end)],
        vec!["peak RSS (VmHWM)".into(), mb(hwm)],
        vec![
            format!("CPU over {wall:.1} s (/proc/self/stat utime+stime)"),
            format!("{:.2} s = {:.2}% of one core", cpu, 100.0 * cpu / wall),
        ],
        vec![
            "CPU (getrusage, µs resolution)".into(),
            format!("{:.3} s = {:.2}% of one core", precise, 100.0 * precise / wall),
        ],
        vec!["runs opened during the bench".into(), runs.to_string()],
        vec!["tick events written".into(), ticks.to_string()],
    ];
    table(&["", ""], &rows);
    println!(
        "   targets: < 1% of a core ({}), < 150 MB ({})",
        if 100.0 * precise / wall < 1.0 {
            "met"
        } else {
            "missed"
        },
        match rss_end {
            Some(k) if (k as f64) / 1024.0 < 150.0 => "met",
            Some(_) => "missed",
            None => "unknown",
        }
    );
    println!(
        "bench idle {n} schedules: CPU {:.2}% of a core, RSS {}",
        100.0 * precise / wall,
        mb(rss_end)
    );
}

// ---------------------------------------------------------------------------
// Process measurements

/// User + system CPU seconds of this process from `/proc/self/stat` (fields 14
/// and 15, in clock ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may contain spaces; fields after it are plain.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (field(14) + field(15)) / hz
}

/// User + system CPU seconds from getrusage (microsecond resolution).
fn rusage_cpu() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU seconds of the calling thread (CLOCK_THREAD_CPUTIME_ID): unlike wall
/// time, it does not grow when other processes compete for the CPUs.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// The 1-minute load average: other work on the machine shows up in wall times.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// A `kB` line of `/proc/self/status` (VmRSS, VmHWM).
fn status_kb(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "optimised"
    }
}

// ---------------------------------------------------------------------------
// Numbers and tables

struct Stats {
    n: usize,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

/// Nearest-rank percentiles.
fn stats(mut v: Vec<f64>) -> Option<Stats> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(Stats {
        n: v.len(),
        p50: at(50.0),
        p90: at(90.0),
        p99: at(99.0),
        max: v[v.len() - 1],
    })
}

fn stat_row(label: &str, s: Option<&Stats>) -> Vec<String> {
    match s {
        Some(s) => vec![
            label.to_string(),
            thousands(s.n as u64),
            ms(s.p50),
            ms(s.p90),
            ms(s.p99),
            ms(s.max),
        ],
        None => vec![label.to_string(), "0".into()],
    }
}

fn ms(v: f64) -> String {
    if v.abs() < 100.0 {
        format!("{v:.1}")
    } else {
        thousands(v.round() as u64)
    }
}

/// Prints rows under headers: first column left-aligned, the others right.
fn table(headers: &[&str], rows: &[Vec<String>]) {
    let cols = headers.len();
    let mut width = vec![0usize; cols];
    for row in std::iter::once(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>()).chain(rows) {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::from("  ");
        for (i, w) in width.iter().enumerate() {
            let cell = cells.get(i).map_or("", String::as_str);
            let pad = w.saturating_sub(cell.chars().count());
            if i == 0 {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        println!("{}", out.trim_end());
    };
    if headers.iter().any(|h| !h.is_empty()) {
        line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    }
    for row in rows {
        line(row);
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// PostgreSQL: the ledger's protocol alone

/// `pg-protocol --db postgres://… [--schedules S] [--runs N]`: S schedulers
/// (a connection pool each) walk the same N windows; each window is opened by
/// the one whose `INSERT … ON CONFLICT DO NOTHING` returned its id, which then
/// claims it (the conditional `UPDATE`, a new fence) and completes it (the
/// guarded `UPDATE`). No engine: what the protocol's statements cost on this
/// machine's PostgreSQL, one round trip each. The database should be empty
/// (a fresh one per run: the windows' keys repeat).
fn pg_protocol_bench(args: &Args) {
    use agentcron::store::pg::{NewWindow, PgStore};
    let Some(url) = args.db.clone() else {
        eprintln!("pg-protocol needs --db postgres://USER@HOST:PORT/DB (an empty database)");
        std::process::exit(2);
    };
    let schedulers = args.schedules.unwrap_or(4);
    let n = args.runs.unwrap_or(5_000);
    // `--chunk C`: windows opened claimed C per statement (`open_claimed`)
    // and completed C per statement (`complete_all`); 1: one by one.
    let chunk = args.chunk.unwrap_or(1).max(1);
    let rt = runtime();
    println!();
    println!(
        "== pg-protocol: {schedulers} scheduler(s) over the same {} windows: open (ON CONFLICT), claim, complete, {chunk} per statement ==",
        thousands(n as u64)
    );
    let (elapsed, opened, lost) = rt.block_on(async move {
        let mut stores = vec![];
        for _ in 0..schedulers {
            stores.push(ok(PgStore::connect(&url, None).await, "connect"));
        }
        let started = Instant::now();
        let tasks: Vec<_> = stores
            .into_iter()
            .enumerate()
            .map(|(i, store)| {
                tokio::spawn(async move {
                    let (mut opened, mut lost) = (0usize, 0usize);
                    let owner = format!("bench:{i}");
                    let mut batch = Vec::with_capacity(chunk);
                    for k in 0..n as i64 {
                        let start = 1_780_000_000_000 + k * 1000;
                        let w = NewWindow {
                            tenant: "default".into(),
                            schedule: format!("s{}", k % 100),
                            window_key: format!("k{k}"),
                            window_start: start,
                            window_end: start + 1000,
                            due_at: start,
                            reason: "scheduled".into(),
                            pool: Pool::OnTime,
                            next_check_at: Some(start),
                        };
                        if chunk > 1 {
                            batch.push(w);
                            if batch.len() == chunk || k == n as i64 - 1 {
                                let won = ok(
                                    store.open_claimed(&batch, &owner, Duration::from_secs(60)).await,
                                    "open claimed",
                                );
                                lost += batch.len() - won.len();
                                opened += won.len();
                                let ended: Vec<_> =
                                    won.iter().map(|o| (&o.lease, RunState::Succeeded)).collect();
                                let refused = ok(store.complete_all(&ended, "done").await, "complete");
                                assert!(refused.is_empty(), "{refused:?}");
                                batch.clear();
                            }
                            continue;
                        }
                        let Some(id) = ok(store.open_window(&w).await, "open") else {
                            lost += 1;
                            continue;
                        };
                        opened += 1;
                        let lease = ok(
                            store
                                .claim(id, &[RunState::Pending], &owner, Duration::from_secs(60))
                                .await,
                            "claim",
                        );
                        let lease = ok(lease.map_err(|r| r.to_string()), "claim refused");
                        let done = ok(
                            store.complete(&lease, RunState::Succeeded, "done").await,
                            "complete",
                        );
                        ok(done.map_err(|r| r.to_string()), "completion refused");
                    }
                    (opened, lost)
                })
            })
            .collect();
        let (mut opened, mut lost) = (0, 0);
        for t in tasks {
            let (o, l) = ok(t.await, "join");
            opened += o;
            lost += l;
        }
        (started.elapsed(), opened, lost)
    });
    assert_eq!(opened, n, "every window opened exactly once");
    let rate = opened as f64 / elapsed.as_secs_f64();
    println!(
        "   {} windows opened, claimed and completed in {:.2} s; {} inserts lost the race (the other schedulers')",
        thousands(opened as u64),
        elapsed.as_secs_f64(),
        thousands(lost as u64)
    );
    println!("bench pg-protocol {schedulers} schedulers chunk {chunk}: {rate:.0} lifecycles per wall second");
}

// ---------------------------------------------------------------------------
// spawn: N real agents due at one instant (issue 47)

/// The agent: its first instruction writes its own clock (bash's
/// `$EPOCHREALTIME`, no fork) to `started/$AGENTCRON_RUN_ID`, then it sleeps,
/// so that all of them run together for the memory reading.
const SPAWN_AGENT: &str = "printf '%s\n' \"$EPOCHREALTIME\" > started/$AGENTCRON_RUN_ID; exec sleep 5";

/// The agents' own start instants, µs since the epoch, by file name.
fn agent_starts(dir: &Path) -> HashMap<String, i64> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let Some((secs, frac)) = text.trim().split_once(['.', ',']) else {
            continue;
        };
        if let (Ok(s), Ok(f)) = (secs.parse::<i64>(), format!("{frac:0<6}")[..6].parse::<i64>()) {
            out.insert(
                entry.file_name().to_string_lossy().into_owned(),
                s * 1_000_000 + f,
            );
        }
    }
    out
}

fn epoch_micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// Waits (polling) until `n` agents wrote their start, up to `limit`. The
/// starts are the agents' own clocks, so polling seldom loses nothing, and
/// each poll reads every file: every 5 ms it took ~15 ms of CPU from the
/// agents it watched (the engine's phase; the floor's loop spawned unwatched).
fn wait_for_starts(dir: &Path, n: usize, limit: Duration) -> HashMap<String, i64> {
    let until = Instant::now() + limit;
    loop {
        let starts = agent_starts(dir);
        if starts.len() >= n || Instant::now() >= until {
            return starts;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The p-th percentile (0–100) of `v` (sorted here).
fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)]
}

/// (pid, parent pid, command name) of every process.
fn processes() -> Vec<(i32, i32, String)> {
    let mut out = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        out.push((pid, ppid, comm));
    }
    out
}

fn pss_kb(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What agentcron adds beside the agents: the fork server (our child named
/// agentcron) and every supervisor (its children); (processes, Pss kB).
fn supervision_pss() -> (usize, u64) {
    let me = std::process::id() as i32;
    let all = processes();
    let servers: Vec<i32> = all
        .iter()
        .filter(|(_, ppid, comm)| *ppid == me && comm == "agentcron")
        .map(|(pid, ..)| *pid)
        .collect();
    let supervisors: Vec<i32> = all
        .iter()
        .filter(|(_, ppid, _)| servers.contains(ppid))
        .map(|(pid, ..)| *pid)
        .collect();
    let pids: Vec<i32> = servers.iter().chain(&supervisors).copied().collect();
    (pids.len(), pids.iter().map(|p| pss_kb(*p)).sum())
}

/// The 1, 5 and 15-minute load averages.
fn load_averages() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `agentcron` binary the supervisors are forked from.
fn agentcron_binary() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_agentcron"))
}

fn spawn_bench(args: &Args) {
    let n = args.agents.unwrap_or(146).max(1);
    println!();
    println!("== spawn: {n} bash agents due at one instant, real supervisor path ==");
    if let Err(e) = agentcron::process::raise_open_files() {
        eprintln!("cannot raise the open files limit: {e}");
    }
    let dir = temp_dir();
    let floor_dir = dir.path().join("floor");
    let started_dir = dir.path().join("started");
    for d in [&floor_dir, &floor_dir.join("started"), &started_dir] {
        ok(std::fs::create_dir_all(d), "creating the bench folders");
    }

    // The floor: a plain std spawn loop (posix_spawn: no pre_exec) of the same agents.
    let t0 = epoch_micros(SystemClock.now());
    let mut children = vec![];
    let mut spawned_at = vec![];
    for i in 0..n {
        let child = std::process::Command::new("bash")
            .args(["-c", SPAWN_AGENT])
            .current_dir(&floor_dir)
            .env("AGENTCRON_RUN_ID", i.to_string())
            .stdin(std::process::Stdio::null())
            .spawn();
        // The instant the spawn returned (after the exec succeeded): the
        // floor of what a ledger's honest `started` stamp can be.
        spawned_at.push(epoch_micros(SystemClock.now()));
        children.push(ok(child, "spawning a floor agent"));
    }
    let floor = wait_for_starts(&floor_dir.join("started"), n, Duration::from_secs(60));
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    let floor_last = floor.values().map(|t| t - t0).max().unwrap_or(0) as f64 / 1000.0;
    // Exec-to-first-instruction of the floor's agents: how long bash itself
    // takes to reach its first line when N start together on this machine.
    let mut floor_gaps: Vec<f64> = spawned_at
        .iter()
        .enumerate()
        .filter_map(|(i, at)| {
            floor
                .get(&i.to_string())
                .map(|agent| (agent - at).abs() as f64 / 1000.0)
        })
        .collect();
    let floor_gap99 = percentile(&mut floor_gaps, 99.0);
    if floor.len() < n {
        fail(&format!("only {} of {n} floor agents started", floor.len()));
    }

    // The engine: N schedules every 10 s (aligned): all due at the next
    // multiple of 10 s.
    agentcron::process::set_supervisor(agentcron_binary());
    let mut toml = format!(
        r#"[scheduler]
timezone = "UTC"
database = "bench.db"
workers = {workers}
lease = "60s"

[agents.sh]
kind = "command"
command = ["bash", "-c", {script}]
timeout = "1m"
"#,
        workers = n * 2,
        script = serde_json::to_string(SPAWN_AGENT).unwrap_or_default()
    );
    for i in 0..n {
        let _ = write!(
            toml,
            "\n[[schedule]]\nid = \"s{i:04}\"\nagent = \"sh\"\nevery = \"10s\"\nanchor = \"fixed\"\n"
        );
    }
    let cfg = load(&toml, dir.path());
    let store = open_store(dir.path(), None);
    let mut engine = Engine::new(
        Arc::new(cfg),
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(agentcron::agent::runner::DefaultRunner),
        EngineOptions::default(),
    );
    let rt = runtime();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // Watches the agents start, reads the memory while all run, and stops
    // the engine once they have ended.
    let watch_dir = started_dir.clone();
    let watcher = std::thread::spawn(move || {
        let starts = wait_for_starts(&watch_dir, n, Duration::from_secs(40));
        std::thread::sleep(Duration::from_millis(1500));
        let memory = supervision_pss();
        let load = load_averages();
        // The agents sleep 5 s: stop after they ended, before the next window.
        std::thread::sleep(Duration::from_millis(4000));
        let _ = stop_tx.send(());
        (starts.len(), memory, load)
    });
    ok(
        rt.block_on(engine.run_live(
            async {
                let _ = stop_rx.await;
            },
            Duration::from_secs(10),
        )),
        "live loop failed",
    );
    let (seen, (processes, pss_kb), load) = watcher.join().unwrap_or_else(|_| fail("the watcher panicked"));
    if seen < n {
        fail(&format!("only {seen} of {n} agents started"));
    }

    // Due, ledger start (attempts.started_at) and the agent's own start.
    let agents = agent_starts(&started_dir);
    let runs = ok(store.read(|tx| tx.runs(&Default::default())), "reading runs");
    let mut late = vec![];
    let mut gaps = vec![];
    let mut signed = vec![];
    let mut claim_gaps = vec![];
    let mut first_due = None;
    for run in &runs {
        let Some(agent) = agents.get(&run.id.to_string()) else {
            continue;
        };
        let attempts = ok(store.read(|tx| tx.attempts(run.id)), "reading attempts");
        let Some(a) = attempts.first() else { continue };
        let due = *first_due.get_or_insert(run.due_at);
        if run.due_at != due {
            continue;
        }
        late.push((agent - epoch_micros(run.due_at)) as f64 / 1000.0);
        gaps.push((agent - epoch_micros(a.started_at)).abs() as f64 / 1000.0);
        signed.push((agent - epoch_micros(a.started_at)) as f64 / 1000.0);
        claim_gaps.push((epoch_micros(a.started_at) - epoch_micros(run.due_at)) as f64 / 1000.0);
    }
    let started_events = ok(
        store.read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["started".into()],
                ..EventFilter::default()
            })
        }),
        "reading started events",
    )
    .len();
    let last = late.iter().copied().fold(f64::NAN, f64::max);
    let p99 = percentile(&mut late, 99.0);
    let gap99 = percentile(&mut gaps, 99.0);
    println!(
        "agent − ledger start: p1 {:.1} ms, p50 {:.1} ms, p99 {:.1} ms; ledger start − due: p1 {:.1}, p50 {:.1}, p99 {:.1} ms",
        percentile(&mut signed, 1.0),
        percentile(&mut signed, 50.0),
        percentile(&mut signed, 99.0),
        percentile(&mut claim_gaps, 1.0),
        percentile(&mut claim_gaps, 50.0),
        percentile(&mut claim_gaps, 99.0),
    );
    println!(
        "{} agents of the first instant, {started_events} `started` events; ledger-vs-agent max {:.1} ms",
        late.len(),
        gaps.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "HEADLINE bench spawn {n} agents: last start {last:.0} ms, p99 {p99:.0} ms; floor {floor_last:.0} ms; ledger-vs-agent p99 {gap99:.1} ms (floor: spawn-return-vs-agent p99 {floor_gap99:.1} ms)"
    );
    println!(
        "HEADLINE bench spawn {n} agents: memory {:.2} MiB per running agent (Pss of {processes} fork server + supervisor processes: {:.1} MiB); load average {load}",
        pss_kb as f64 / 1024.0 / n as f64,
        pss_kb as f64 / 1024.0
    );
}
