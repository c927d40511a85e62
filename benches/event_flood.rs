//! The event flood of issue 44: POSTs to `/api/v1/events/{name}` of a real
//! `agentcron run --headless --listen` (the bench profile's binary) from
//! concurrent clients on loopback, each id posted several times, every event
//! run by a trivial command agent.
//!
//! ```text
//! cargo bench --bench event_flood [-- --ids 2000 --repeat 5 --clients 16 --max-concurrency 1]
//! ```
//!
//! It prints the runs made, the trace rows per run, the ledger's and the
//! log's size, and the scheduler's tick durations during the flood (the
//! `agentcron_tick_duration_seconds` histogram of `/metrics`, read before
//! the first POST and after the last run ended: p99 as the bucket it falls
//! in), then one headline line. A plain `main` (`harness = false`): it
//! reports numbers and asserts nothing about speed; it exits 1 only when the
//! flood lost or doubled an event (runs ≠ ids).

/// The binary's allocator (see Cargo.toml), as in the other benches.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const READ: &str = "flood-read-token-000000000001";
const OPERATE: &str = "flood-operate-token-0000000001";
/// How long the runs may take to end after the last POST.
const DRAIN_LIMIT: Duration = Duration::from_secs(1800);

struct Args {
    ids: usize,
    repeat: usize,
    clients: usize,
    max_concurrency: u32,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut a = Args {
            ids: 2000,
            repeat: 5,
            clients: 16,
            max_concurrency: 1,
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut num = |name: &str| -> Result<usize, String> {
                it.next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or(format!("{name} takes a positive number"))
            };
            match arg.as_str() {
                "--ids" => a.ids = num("--ids")?,
                "--repeat" => a.repeat = num("--repeat")?,
                "--clients" => a.clients = num("--clients")?,
                "--max-concurrency" => {
                    a.max_concurrency = u32::try_from(num("--max-concurrency")?).map_err(|e| e.to_string())?
                }
                // `cargo bench` passes `--bench`.
                "--bench" => {}
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(a)
    }
}

/// Kills (and reaps) the scheduler if the bench stops early.
struct Scheduler(Child);

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\nusage: event_flood [--ids N] [--repeat N] [--clients N] [--max-concurrency N]");
            std::process::exit(2);
        }
    };
    let dir = tempfile::tempdir().expect("temp dir");
    write_config(dir.path(), args.max_concurrency);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log_path = dir.path().join("flood.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut scheduler = Scheduler(
        Command::new(env!("CARGO_BIN_EXE_agentcron"))
            .args(["run", "--headless", "--config"])
            .arg(dir.path().join("agentcron.toml"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the scheduler"),
    );
    let http = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    wait_for(Duration::from_secs(60), "the scheduler's /readyz", || {
        http.get(format!("{base}/readyz"))
            .call()
            .ok()
            .filter(|r| r.status() == 200)
    });
    let ticks_before = tick_buckets(&http, &base);

    // Request i posts id (i mod ids), so each id's posts are spread over the
    // whole flood and over every client.
    let total = args.ids * args.repeat;
    let next = AtomicUsize::new(0);
    let statuses = std::sync::Mutex::new(BTreeMap::<u16, usize>::new());
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..args.clients {
            s.spawn(|| {
                let http = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(60)))
                    .build()
                    .new_agent();
                let mut seen = BTreeMap::<u16, usize>::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let id = format!("flood-{:05}", i % args.ids);
                    let status = http
                        .post(format!("{base}/api/v1/events/flood"))
                        .header("Authorization", &format!("Bearer {OPERATE}"))
                        .header("Idempotency-Key", &id)
                        .content_type("application/json")
                        .send("{}")
                        .map_or(0, |r| r.status().as_u16());
                    *seen.entry(status).or_default() += 1;
                }
                let mut all = statuses.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for (k, v) in seen {
                    *all.entry(k).or_default() += v;
                }
            });
        }
    });
    let posted_in = started.elapsed();

    let finished = |http: &ureq::Agent| {
        let m = metrics(http, &base);
        let state = |s: &str| {
            m.get(&format!("agentcron_runs{{state=\"{s}\"}}"))
                .copied()
                .unwrap_or(0.0)
        };
        let waiting = state("pending") + state("running") + state("retry_wait");
        let done = state("succeeded") + state("failed") + state("dead") + state("skipped") + state("expired");
        (waiting == 0.0 && done >= args.ids as f64).then_some(done)
    };
    wait_for(DRAIN_LIMIT, "every run to end", || finished(&http));
    let drained_in = started.elapsed();
    let ticks_after = tick_buckets(&http, &base);
    // SIGTERM: a clean stop, as an operator's.
    // SAFETY: kill(2) on the pid of a child this process spawned and has not reaped.
    unsafe { libc::kill(scheduler.0.id() as i32, libc::SIGTERM) };
    let _ = scheduler.0.wait();

    // The database file and its WAL as the scheduler left them (a WAL not
    // yet checkpointed is ledger too, on disk).
    let ledger = dir_bytes(dir.path(), "flood.db");
    let wal = std::fs::metadata(dir.path().join("flood.db-wal")).map_or(0, |m| m.len());
    let log_bytes = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let db = rusqlite::Connection::open(dir.path().join("flood.db")).expect("open the ledger");
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).expect(sql) };
    let runs = count("SELECT COUNT(*) FROM runs WHERE schedule = 'flood'");
    let succeeded = count("SELECT COUNT(*) FROM runs WHERE schedule = 'flood' AND state = 'succeeded'");
    let attempts = count("SELECT COUNT(*) FROM attempts");
    let rows = count("SELECT COUNT(*) FROM events");
    let run_rows = count("SELECT COUNT(*) FROM events WHERE run_id IS NOT NULL");
    let max_rows = count(
        "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM events WHERE run_id IS NOT NULL GROUP BY run_id)",
    );
    let statuses = statuses.into_inner().unwrap_or_default();
    let (p50, p99, max, ticks) = tick_summary(&ticks_before, &ticks_after);

    let mb = |b: u64| b as f64 / 1_048_576.0;
    let per_run = run_rows as f64 / runs.max(1) as f64;
    println!(
        "agentcron event flood (release build, {} CPUs): {total} POSTs ({} ids x {}, {} clients), max_concurrency {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        args.ids,
        args.repeat,
        args.clients,
        args.max_concurrency
    );
    println!(
        "  posted in {:.1} s ({:.0} req/s), statuses {statuses:?}; every run ended {:.1} s after the first POST",
        posted_in.as_secs_f64(),
        total as f64 / posted_in.as_secs_f64().max(1e-9),
        drained_in.as_secs_f64()
    );
    println!("  runs {runs} (succeeded {succeeded}), attempts {attempts}");
    println!("  trace rows {rows}: {per_run:.1} per run (max {max_rows})");
    println!(
        "  ledger {:.1} MB (of it WAL {:.1} MB), log {:.1} MB",
        mb(ledger),
        mb(wal),
        mb(log_bytes)
    );
    println!("  ticks during the flood: {ticks}, p50 <= {p50}, p99 <= {p99}, max <= {max}");
    println!("  load: {}", load());
    println!(
        "HEADLINE event flood: {total} POSTs -> {runs} runs ({succeeded} succeeded), {per_run:.1} trace rows/run (max {max_rows}), ledger {:.1} MB, log {:.1} MB, tick p99 <= {p99}",
        mb(ledger),
        mb(log_bytes)
    );
    if runs != args.ids as i64 {
        std::process::exit(1);
    }
}

fn write_config(dir: &Path, max_concurrency: u32) {
    std::fs::write(
        dir.join("tokens.toml"),
        format!(
            "[[token]]\nname = \"reader\"\nrole = \"read\"\ntoken = \"{READ}\"\n\n\
             [[token]]\nname = \"flood\"\nrole = \"operate\"\ntoken = \"{OPERATE}\"\n"
        ),
    )
    .expect("tokens file");
    std::fs::write(
        dir.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "flood.db"

[api]
tokens_file = "tokens.toml"

[agents.quick]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; echo '{{\"event\":\"result\",\"status\":\"success\"}}'"]
timeout = "30s"

[[schedule]]
id = "flood"
agent = "quick"
on_event = "flood"
close_after = "1h"
max_concurrency = {max_concurrency}
"#
        ),
    )
    .expect("config file");
}

/// A port nobody listens on now (the OS picks it; the server binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Polls `f` every 100 ms until it answers; exits after `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            eprintln!("timed out waiting for {what}");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `/metrics` as (series → value), the series as the text writes it.
fn metrics(http: &ureq::Agent, base: &str) -> BTreeMap<String, f64> {
    let body = http
        .get(format!("{base}/metrics"))
        .header("Authorization", &format!("Bearer {READ}"))
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .unwrap_or_default();
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(series, v)| Some((series.to_string(), v.parse().ok()?)))
        .collect()
}

/// The tick histogram's cumulative buckets: (upper bound, count).
fn tick_buckets(http: &ureq::Agent, base: &str) -> Vec<(f64, f64)> {
    let mut b: Vec<(f64, f64)> = metrics(http, base)
        .into_iter()
        .filter_map(|(series, n)| {
            let le = series
                .strip_prefix("agentcron_tick_duration_seconds_bucket{le=\"")?
                .strip_suffix("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, n))
        })
        .collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    b
}

/// (p50, p99, max, count) of the ticks between two readings, each as the
/// bucket bound it falls under.
fn tick_summary(before: &[(f64, f64)], after: &[(f64, f64)]) -> (String, String, String, u64) {
    let diff: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, n)| {
            let was = before.iter().find(|(b, _)| b == le).map_or(0.0, |(_, m)| *m);
            (*le, n - was)
        })
        .collect();
    let total = diff.last().map_or(0.0, |(_, n)| *n);
    let bound = |q: f64| {
        diff.iter()
            .find(|(_, n)| *n >= q * total)
            .map_or("?".to_string(), |(le, _)| {
                if le.is_infinite() {
                    "+Inf".to_string()
                } else {
                    format!("{:.1} ms", le * 1000.0)
                }
            })
    };
    (bound(0.5), bound(0.99), bound(1.0), total as u64)
}

/// Bytes of the files whose names start with `prefix` (the ledger, its WAL).
fn dir_bytes(dir: &Path, prefix: &str) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The load averages (`/proc/loadavg`), for the report.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
