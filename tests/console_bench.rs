//! A benchmark, not a test: the console over a big database — 10,000 schedules
//! and 1,000,000 runs (2,000,000 events) — reporting the time to load a
//! snapshot (what the poller thread does), the time of one `update` and one
//! frame (`view` into a test terminal) per pane and size, and the process's
//! memory. It asserts nothing about speed. Run it by hand, optimised:
//!
//! ```text
//! cargo test --release --test console_bench -- --ignored --nocapture
//! ```
//!
//! The database is built once under `target/console-bench/` (about a minute)
//! and reused by later runs.

#[path = "console_support.rs"]
mod support;

use agentcron::config::{Config, load_str};
use agentcron::console::app::{Init, Model, Msg, update};
use agentcron::console::panes::{Pane, schedules, timeline};
use agentcron::console::snapshot::{self, SnapshotRequest};
use agentcron::console::theme::Theme;
use agentcron::console::view::view;
use agentcron::store::Store;
use chrono::{DateTime, Duration, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::{Path, PathBuf};
use std::time::Instant;
use support::{ch, t};

const SCHEDULES: usize = 10_000;
const RUNS_PER_SCHEDULE: usize = 100;
/// Bump when the generated data changes.
const DATA_VERSION: &str = "v2";

fn base() -> DateTime<Utc> {
    t("2026-06-01T00:00:00Z")
}

/// "Now": just after every schedule's newest window.
fn now() -> DateTime<Utc> {
    base() + Duration::hours(RUNS_PER_SCHEDULE as i64) + Duration::minutes(5)
}

fn config_text() -> String {
    let mut s = String::from(
        "[scheduler]\ntimezone = \"Asia/Shanghai\"\nworkers = 8\n\n\
         [agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for i in 0..SCHEDULES {
        let trigger = match i % 4 {
            0 => format!("cron = \"{} * * * *\"", i % 60),
            1 => "every = \"1h\"".to_string(),
            2 => format!("cron = \"0 {} * * MON-FRI\"", i % 24),
            _ => "on_event = \"ticket.created\"".to_string(),
        };
        s.push_str(&format!(
            "\n[[schedule]]\nid = \"job-{i:05}\"\nagent = \"a\"\n{trigger}\n"
        ));
    }
    s
}

fn config(dir: &Path) -> Config {
    load_str(&config_text(), &dir.join("agentcron.toml")).expect("bench config")
}

/// The state of run `k` (0 = oldest) of schedule `i`.
fn state(i: usize, k: usize) -> &'static str {
    let newest = k == RUNS_PER_SCHEDULE - 1;
    match (i % 1000, k) {
        (0..=49, _) if newest => "pending",
        (50..=69, _) if newest => "retry_wait",
        (70..=89, _) if newest => "running",
        (_, 10) if i.is_multiple_of(5) => "dead",
        (_, 20) if i.is_multiple_of(50) => "needs_human",
        (_, 30) if i.is_multiple_of(10) => "failed",
        (_, 40) if i.is_multiple_of(20) => "skipped",
        _ => "succeeded",
    }
}

/// Builds the database with plain SQL (the engine would take hours).
fn build(db: &Path) {
    let store = Store::open(db).expect("schema");
    drop(store);
    let mut conn = rusqlite::Connection::open(db).expect("open");
    let tx = conn.transaction().expect("tx");
    {
        let mut run = tx
            .prepare(
                "INSERT INTO runs (id, tenant, schedule, window_key, window_start, window_end, due_at, \
                 state, reason, pool, state_reason, attempts, not_before, next_check_at, lease_owner, \
                 lease_expires, fencing_token, error_class, last_error, created_at, updated_at) \
                 VALUES (?1, 'default', ?2, ?3, ?4, ?5, ?4, ?6, 'scheduled', 'on_time', ?7, ?8, ?9, ?9, \
                 ?10, ?11, ?1, ?12, ?13, ?4, ?5)",
            )
            .expect("insert run");
        let mut event = tx
            .prepare(
                "INSERT INTO events (at, kind, tenant, schedule, run_id, detail) \
                 VALUES (?1, ?2, 'default', ?3, ?4, ?5)",
            )
            .expect("insert event");
        let mut id: i64 = 0;
        for i in 0..SCHEDULES {
            let schedule = format!("job-{i:05}");
            for k in 0..RUNS_PER_SCHEDULE {
                id += 1;
                let start = base() + Duration::hours(k as i64);
                let ms = start.timestamp_millis();
                let end = ms + 3_600_000;
                let st = state(i, k);
                let key = start.format("%Y-%m-%dT%H:%M+00:00").to_string();
                let waiting = matches!(st, "pending" | "retry_wait").then_some(now().timestamp_millis());
                let (owner, lease) = if st == "running" {
                    (Some("main"), Some(now().timestamp_millis() + 60_000))
                } else {
                    (None, None)
                };
                let failed = matches!(st, "dead" | "failed" | "needs_human" | "retry_wait");
                run.execute(rusqlite::params![
                    id,
                    schedule,
                    key,
                    ms,
                    end,
                    st,
                    (st == "skipped").then_some("calendar"),
                    i64::from(st != "pending" && st != "skipped"),
                    waiting,
                    owner,
                    lease,
                    failed.then_some("retryable"),
                    failed.then_some("upstream 503"),
                ])
                .expect("run row");
                let opened = format!(r#"{{"window_key":"{key}"}}"#);
                event
                    .execute(rusqlite::params![ms, "window_opened", schedule, id, opened])
                    .expect("event");
                event
                    .execute(rusqlite::params![ms + 60_000, st, schedule, id, "{}"])
                    .expect("event");
            }
        }
    }
    // Plain SQL bypasses the store, which keeps the counts by state.
    tx.execute_batch(
        "UPDATE run_counts SET n = (SELECT COUNT(*) FROM runs WHERE runs.state = run_counts.state)",
    )
    .expect("run counts");
    tx.commit().expect("commit");
    conn.execute_batch("ANALYZE").expect("analyze");
}

fn database() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let db = dir.join(format!("bench-{DATA_VERSION}.db"));
    if !db.exists() {
        let started = Instant::now();
        let partial = dir.join("building.db");
        let _ = std::fs::remove_file(&partial);
        build(&partial);
        std::fs::rename(&partial, &db).expect("rename");
        println!("built {} in {:.1?}", db.display(), started.elapsed());
    }
    db
}

/// What the snapshot itself holds on the heap, roughly (structs and strings).
fn snapshot_bytes(snap: &snapshot::Snapshot) -> usize {
    use std::mem::size_of;
    let run = |r: &agentcron::store::Run| {
        size_of::<agentcron::store::Run>()
            + r.window_key.len()
            + r.schedule.len()
            + r.tenant.len()
            + r.state_reason.as_ref().map_or(0, String::len)
            + r.last_error.as_ref().map_or(0, String::len)
    };
    let rows: usize = snap
        .schedules
        .iter()
        .map(|s| size_of::<snapshot::ScheduleRow>() + s.id.len() + s.tenant.len() + s.trigger.len())
        .sum();
    let lanes: usize = snap
        .lanes
        .iter()
        .map(|l| size_of::<snapshot::Lane>() + l.schedule.len() + l.runs.iter().map(run).sum::<usize>())
        .sum();
    let lists: usize = snap
        .retries
        .iter()
        .chain(&snap.dead)
        .map(|r| run(&r.run))
        .chain(snap.approvals.iter().map(|a| run(&a.run)))
        .chain(snap.backfill.iter().map(|b| run(&b.run)))
        .sum();
    rows + lanes + lists
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// (resident, peak resident) in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Median and 95th percentile of `n` runs of `f` (after one warm-up), in
/// milliseconds: the median is what a frame costs, the 95th what a busy
/// machine adds.
fn time(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    f();
    let mut all: Vec<f64> = (0..n)
        .map(|_| {
            let at = Instant::now();
            f();
            at.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    all.sort_by(f64::total_cmp);
    (all[n / 2], all[(n * 95 / 100).min(n - 1)])
}

#[test]
#[ignore = "benchmark: cargo test --release --test console_bench -- --ignored --nocapture"]
fn frame_time_and_memory_with_a_million_runs() {
    let db = database();
    let dir = db.parent().expect("dir").to_path_buf();
    let (rss0, _) = memory();
    let cfg = config(&dir);
    let store = Store::open_read_only(&db).expect("open");
    println!(
        "10,000 schedules, 1,000,000 runs, 2,000,000 events ({})",
        db.display()
    );
    println!(
        "load average {} on {} CPUs",
        load_average(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("memory at start (config loaded): {rss0:.0} MiB resident");

    // The poller's side: a full load (slow tier read) and a fast one.
    let mut req = SnapshotRequest::default();
    let full = Instant::now();
    let (snap, slow) = snapshot::load_snapshot_with(&store, &cfg, now(), &req).expect("snapshot");
    let full = full.elapsed();
    req.reuse_slow = Some(slow);
    let (fast_mean, fast_worst) = time(5, || {
        snapshot::load_snapshot_with(&store, &cfg, now(), &req).expect("snapshot");
    });
    let (rss1, _) = memory();
    println!(
        "snapshot load (poller thread): full {:.1} ms, reusing the slow tier {fast_mean:.1} ms (p50; p95 {fast_worst:.1})",
        full.as_secs_f64() * 1000.0
    );
    println!(
        "snapshot: ~{:.1} MiB on the heap; {} schedules, {} lanes, {} lane runs, {} retries, {} dead, {} approvals, {} backfill",
        snapshot_bytes(&snap) as f64 / (1024.0 * 1024.0),
        snap.schedules.len(),
        snap.lanes.len(),
        snap.lanes.iter().map(|l| l.runs.len()).sum::<usize>(),
        snap.retries.len(),
        snap.dead.len(),
        snap.approvals.len(),
        snap.backfill.len()
    );

    let theme = Theme::builtin("dark").expect("theme");
    println!(
        "\n{:<10} {:>8} {:>12} {:>12} {:>12}",
        "pane", "size", "frame p50", "frame p95", "update(j) p50"
    );
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let mut m = Model::new(Init {
            now: now(),
            tz: chrono_tz::Asia::Shanghai,
            mode_label: "LIVE".into(),
            read_only: false,
            theme_name: "dark".into(),
            width: w,
            height: h,
            rehearsal: None,
            embedded: None,
        });
        update(&mut m, Msg::Snapshot(Box::new(snap.clone())));
        let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        for p in Pane::ALL {
            update(&mut m, ch(char::from(b'1' + p.index() as u8)));
            let (mean, worst) = time(100, || {
                term.draw(|f| view(&m, &theme, f)).expect("draw");
            });
            let (key, _) = time(50, || {
                update(&mut m, ch('j'));
            });
            println!(
                "{:<10} {:>8} {:>9.2} ms {:>9.2} ms {:>9.3} ms",
                p.title(),
                format!("{w}x{h}"),
                mean,
                worst,
                key
            );
        }
    }
    // What a frame and an update are made of, over the ten thousand rows.
    let mut m = Model::new(Init {
        now: now(),
        tz: chrono_tz::Asia::Shanghai,
        mode_label: "LIVE".into(),
        read_only: false,
        theme_name: "dark".into(),
        width: 160,
        height: 48,
        rehearsal: None,
        embedded: None,
    });
    update(&mut m, Msg::Snapshot(Box::new(snap.clone())));
    update(&mut m, ch('2'));
    type Part<'a> = (&'a str, &'a dyn Fn(&Model) -> usize);
    let parts: [Part; 5] = [
        ("schedules::keys", &|m| schedules::keys(m).len()),
        ("timeline::lane_keys", &|m| timeline::lane_keys(m).len()),
        ("selected_run", &|m| m.selected_run().map_or(0, |r| r as usize)),
        ("focus_run", &|m| m.focus_run().map_or(0, |r| r as usize)),
        ("schedules_in_view", &|m| m.schedules_in_view().len()),
    ];
    println!();
    for (name, f) in parts {
        let (mean, _) = time(50, || {
            std::hint::black_box(f(&m));
        });
        println!("{name:<22} {mean:>8.3} ms");
    }
    let mut blank = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
    let (mean, _) = time(50, || {
        blank
            .draw(|f| f.render_widget(ratatui::widgets::Block::default(), f.area()))
            .expect("draw");
    });
    println!("{:<22} {mean:>8.3} ms", "empty frame 160x48");

    let (rss2, peak) = memory();
    println!(
        "\nmemory: {rss1:.0} MiB resident after loading the snapshot (+{:.0} MiB), {rss2:.0} MiB after the frames (SQLite's page cache, 16 MiB a connection, holds most of it), peak {peak:.0} MiB",
        rss1 - rss0
    );
}
