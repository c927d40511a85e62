//! Virtual-time benchmarks on the real engine, store and policies with
//! simulated agents (the rehearsal machinery):
//!
//! - `month`: N schedules every 5 minutes for D simulated days (issue 7 target:
//!   30 days × 1,000 schedules in < 30 s) — wall time, windows/s, peak RSS.
//! - `outage`: 1,000 five-minute schedules after a 72 h outage (issue 5):
//!   planning time at restart, drain time with `backfill_workers = 4` and a
//!   no-op agent, and the lateness of on-time runs during the drain.
//!
//! `cargo bench --bench rehearsal -- month [SCHEDULES DAYS]`
//! `cargo bench --bench rehearsal -- outage [SCHEDULES] [plan]` (`plan`: stop
//! after measuring the planning; `AGENTCRON_BENCH_CRON=1`: `cron = "*/5 * * * *"`
//! instead of `every = "5m"`)
//! Prints numbers; asserts nothing about speed.

/// The binary's allocator (see Cargo.toml), so the benches measure what runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use agentcron::config::load_str;
use agentcron::rehearsal::driver::Driver;
use agentcron::rehearsal::sim::{SimAgent, SimAttempt};
use agentcron::store::types::*;
use chrono::{DateTime, TimeDelta, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

fn config(
    schedules: usize,
    backfill_workers: usize,
    catchup_window: &str,
) -> (tempfile::TempDir, Arc<agentcron::config::Config>) {
    let dir = tempfile::tempdir().unwrap();
    // `AGENTCRON_BENCH_CRON=1`: the same five minutes as a cron expression.
    let trigger = if std::env::var("AGENTCRON_BENCH_CRON").is_ok_and(|v| v == "1") {
        "cron = \"*/5 * * * *\""
    } else {
        "every = \"5m\""
    };
    let mut toml = format!(
        "[scheduler]\ntimezone = \"UTC\"\nworkers = {schedules}\nbackfill_workers = {backfill_workers}\nlease = \"60s\"\n\n\
         [agents.noop]\nkind = \"command\"\ncommand = [\"true\"]\n"
    );
    for i in 0..schedules {
        toml.push_str(&format!(
            "\n[[schedule]]\nid = \"s{i:04}\"\nagent = \"noop\"\n{trigger}\nclose_after = \"5m\"\ncheck_every = \"1m\"\ncatchup_window = \"{catchup_window}\"\nmax_concurrency = 2\n"
        ));
    }
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, &toml).unwrap();
    let cfg = load_str(&toml, &path).unwrap();
    (dir, Arc::new(cfg))
}

fn agents(cfg: &agentcron::config::Config, latency: TimeDelta) -> BTreeMap<String, SimAgent> {
    cfg.schedules
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                SimAgent {
                    steps: vec![],
                    attempts: vec![SimAttempt {
                        latency,
                        ..Default::default()
                    }],
                    phases: vec![],
                },
            )
        })
        .collect()
}

fn rss_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Where a rehearsal bench keeps its database: in memory, as `rehearse`
/// does, unless `AGENTCRON_BENCH_FILE=1` asks for the file (to compare).
fn bench_db(dir: &std::path::Path) -> std::path::PathBuf {
    if std::env::var("AGENTCRON_BENCH_FILE").is_ok_and(|v| v == "1") {
        dir.join("bench.db")
    } else {
        agentcron::rehearsal::driver::memory_database(&format!("bench-{}", std::process::id()))
    }
}

/// The database's size: its pages.
fn db_mb(store: &agentcron::store::Store) -> f64 {
    store
        .read(|tx| tx.database_bytes())
        .map(|b| b as f64 / 1e6)
        .unwrap_or(0.0)
}

fn month(schedules: usize, days: i64) {
    let (dir, cfg) = config(schedules, 2, "72h");
    let start = t("2026-06-01T00:00:00Z");
    let mut d = Driver::new(
        cfg.clone(),
        &bench_db(dir.path()),
        start,
        agents(&cfg, TimeDelta::seconds(20)),
        Box::new(|c| c.schedules.iter().map(|_| vec![]).collect()),
    )
    .unwrap();
    let began = Instant::now();
    let mut last_report = Instant::now();
    for day in 1..=days {
        d.run_until(start + TimeDelta::days(day)).unwrap();
        if last_report.elapsed().as_secs() >= 10 {
            eprintln!(
                "  … day {day}/{days} after {:.1} s",
                began.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    let wall = began.elapsed().as_secs_f64();
    let store = d.store().unwrap();
    let counts = store.read(|tx| tx.count_by_state()).unwrap();
    let total: u64 = counts.iter().map(|(_, n)| n).sum();
    let ok = counts
        .iter()
        .find(|(s, _)| *s == RunState::Succeeded)
        .map_or(0, |(_, n)| *n);
    let (rss, peak) = rss_mb();
    let db_mb = db_mb(&store);
    println!(
        "month: {schedules} schedules × every 5 min × {days} days: {total} windows ({ok} succeeded) in {wall:.1} s wall \
         = {:.0} windows/s; RSS {rss:.0} MB, peak {peak:.0} MB; database {db_mb:.0} MB",
        total as f64 / wall
    );
    println!("bench rehearsal-month {schedules} schedules {days} days: {total} windows in {wall:.1} s");
}

fn outage(schedules: usize, plan_only: bool) {
    let (dir, cfg) = config(schedules, 4, "72h");
    let start = t("2026-06-01T00:00:00Z");
    let mut d = Driver::new(
        cfg.clone(),
        &bench_db(dir.path()),
        start,
        agents(&cfg, TimeDelta::seconds(1)),
        Box::new(|c| c.schedules.iter().map(|_| vec![]).collect()),
    )
    .unwrap();
    d.run_until(start + TimeDelta::minutes(30)).unwrap();
    d.crash("main");
    let up = start + TimeDelta::minutes(30) + TimeDelta::hours(72);
    d.jump_clock(up).unwrap();
    let plan_began = Instant::now();
    d.restart("main").unwrap();
    d.settle().unwrap();
    let plan = plan_began.elapsed().as_secs_f64();
    let store = d.store().unwrap();
    let queued = store
        .read(|tx| {
            Ok(tx
                .due_runs(up + TimeDelta::days(365), 10_000_000)?
                .iter()
                .filter(|r| r.pool == Pool::Backfill)
                .count())
        })
        .unwrap();
    // The rest of each schedule's backlog is one row, queued as runs finish.
    let (planned, later) = store
        .read(|tx| {
            let events = tx.events(&EventFilter {
                kinds: vec!["catchup_planned".into()],
                ..EventFilter::default()
            })?;
            let sum = |k: &str| {
                events
                    .iter()
                    .map(|e| e.detail[k].as_u64().unwrap_or(0))
                    .sum::<u64>()
            };
            Ok((sum("windows"), sum("queued_later")))
        })
        .unwrap();
    let backlogs = store.read(|tx| tx.backlogs()).unwrap().len();
    if plan_only {
        println!(
            "outage: {schedules} five-minute schedules, 72 h down: planning {plan:.2} s wall \
             ({planned} windows planned: {queued} catch-up runs queued, {later} more in the backlogs \
             of {backlogs} schedules); drain not measured (plan)"
        );
        return;
    }
    let drain_began = Instant::now();
    let mut last_report = Instant::now();
    let mut virtual_end = up;
    // For profiling: stop after this many virtual hours (callgrind counts
    // the hours after the restart's first: `--toggle-collect='*drain_hour*'`).
    let stop_after: Option<i64> = std::env::var("AGENTCRON_BENCH_DRAIN_HOURS")
        .ok()
        .and_then(|v| v.parse().ok());
    // Step an hour at a time until the backfill pool is empty.
    loop {
        virtual_end += TimeDelta::hours(1);
        if virtual_end - up == TimeDelta::hours(1) {
            drain_warmup(&mut d, virtual_end);
        } else {
            drain_hour(&mut d, virtual_end);
        }
        if stop_after.is_some_and(|h| (virtual_end - up).num_hours() >= h) {
            println!(
                "outage: stopped after {} virtual h (AGENTCRON_BENCH_DRAIN_HOURS) in {:.1} s wall",
                (virtual_end - up).num_hours(),
                drain_began.elapsed().as_secs_f64()
            );
            return;
        }
        let left = store
            .read(|tx| {
                Ok(tx
                    .due_runs(virtual_end + TimeDelta::days(365), 10_000_000)?
                    .iter()
                    .filter(|r| r.pool == Pool::Backfill)
                    .count())
            })
            .unwrap();
        let backlog = store.read(|tx| tx.backlogs()).unwrap().len();
        if (left == 0 && backlog == 0) || virtual_end > up + TimeDelta::days(30) {
            break;
        }
        if last_report.elapsed().as_secs() >= 30 {
            let done = store
                .read(|tx| tx.count_by_state())
                .unwrap()
                .iter()
                .filter(|(s, _)| !matches!(s, RunState::Pending | RunState::Running | RunState::RetryWait))
                .map(|(_, n)| n)
                .sum::<u64>();
            eprintln!(
                "  … {} virtual h drained after {:.0} s wall; {done} runs ended, {left} catch-up runs queued, {backlog} backlogs",
                (virtual_end - up).num_hours(),
                drain_began.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    let drain_wall = drain_began.elapsed().as_secs_f64();
    let drain_virtual = (virtual_end - up).num_minutes();
    // Lateness of on-time windows opened after the restart.
    let mut lateness: Vec<i64> = vec![];
    let events = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["claimed".into()],
                ..EventFilter::default()
            })
        })
        .unwrap();
    let runs = store.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    let on_time: std::collections::HashSet<i64> = runs
        .iter()
        .filter(|r| r.pool == Pool::OnTime && r.window_start >= up)
        .map(|r| r.id)
        .collect();
    for e in &events {
        if e.run_id.is_some_and(|id| on_time.contains(&id)) {
            lateness.push(e.detail["lateness_ms"].as_i64().unwrap_or(0));
        }
    }
    lateness.sort();
    let pct = |p: f64| {
        lateness
            .get(((lateness.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let expired = runs.iter().filter(|r| r.state == RunState::Expired).count();
    println!(
        "outage: {schedules} five-minute schedules, 72 h down: planning {plan:.2} s wall ({planned} windows planned: {queued} catch-up runs queued, {later} more in the \
         backlogs of {backlogs} schedules, \
         {expired} expired); drain with backfill_workers = 4: {drain_virtual} virtual min in {drain_wall:.1} s wall; \
         on-time lateness during the drain over {} claims: p50 {} ms, p99 {} ms, max {} ms (virtual clock)",
        lateness.len(),
        pct(0.5),
        pct(0.99),
        lateness.last().copied().unwrap_or(0)
    );
    println!("bench outage {schedules} schedules: plan {plan:.2} s, drain {drain_wall:.1} s");
}

/// One hour of the drain: its own function so a profiler can count it alone.
#[inline(never)]
fn drain_hour(d: &mut Driver, until: DateTime<Utc>) {
    d.run_until(until).unwrap();
}

/// The restart's first hour of the drain (the queued runs' burst).
#[inline(never)]
fn drain_warmup(d: &mut Driver, until: DateTime<Utc>) {
    d.run_until(until).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let which = args.first().map(String::as_str).unwrap_or("all");
    let n = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    if which == "month" || which == "all" {
        month(n(1, 1000), n(2, 30) as i64);
    }
    if which == "outage" || which == "all" {
        outage(n(1, 1000), args.get(2).is_some_and(|a| a == "plan"));
    }
}
