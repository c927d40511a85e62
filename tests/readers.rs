//! Issue 44, item 12: can a reader block the engine? A connection holding a
//! read transaction open for the whole run, and a busy loop of `explain`
//! through a read-only store (as the CLI's read verbs open it), run beside a
//! scheduler on the same file ledger: in WAL mode a reader never takes the
//! write lock and the background checkpoint is PASSIVE, so every window is
//! still claimed and run on time and no write of the engine waits for them.
//! The step times are printed (tests never assert wall-clock speed).

mod support;

use agentcron::rehearsal::sim::{SimAgent, SimAttempt};
use agentcron::store::Store;
use agentcron::store::types::*;
use chrono::TimeDelta;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::*;

fn schedules(n: usize) -> String {
    let mut text = String::from(
        "[scheduler]\nworkers = 64\n\n[agents.quick]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for i in 0..n {
        text.push_str(&format!(
            "\n[[schedule]]\nid = \"s{i}\"\nagent = \"quick\"\nevery = \"1m\"\n"
        ));
    }
    text
}

#[test]
fn a_long_reader_and_an_explain_loop_never_hold_the_engine_back() {
    const SCHEDULES: usize = 20;
    const MINUTES: i64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &schedules(SCHEDULES));
    let quick = SimAgent {
        attempts: vec![SimAttempt {
            latency: TimeDelta::seconds(5),
            ..Default::default()
        }],
        ..Default::default()
    };
    let start = t("2027-03-01T00:00:00Z");
    let names: Vec<String> = (0..SCHEDULES).map(|i| format!("s{i}")).collect();
    let agents = names.iter().map(|n| (n.as_str(), quick.clone())).collect();
    let mut d = driver(&dir, cfg.clone(), "2027-03-01T00:00:00Z", agents, vec![]);
    d.run_until(start + TimeDelta::seconds(30)).unwrap();
    let db = dir.path().join("test.db");

    // A read transaction held open from here to the end, on its own connection.
    let reader =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let seen: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();

    // `explain` in a busy loop through a read-only store, as the CLI reads.
    let stop = Arc::new(AtomicBool::new(false));
    let explainer = {
        let stop = stop.clone();
        let db = db.clone();
        let cfg = cfg.clone();
        std::thread::spawn(move || {
            let store = Store::open_read_only(&db).unwrap();
            let mut answered = 0u32;
            let mut slowest = Duration::ZERO;
            while !stop.load(Ordering::Relaxed) {
                let began = Instant::now();
                store
                    .read(|tx| agentcron::trace::explain(tx, Some(&cfg), "s0", None, start))
                    .unwrap();
                slowest = slowest.max(began.elapsed());
                answered += 1;
            }
            (answered, slowest)
        })
    };

    // Windows 00:00 … 00:59, each done 5 s after it opened.
    let end = start + TimeDelta::minutes(MINUTES) - TimeDelta::seconds(30);
    let mut steps = Vec::new();
    loop {
        let began = Instant::now();
        let stepped = d.step(end).unwrap();
        steps.push(began.elapsed());
        if stepped.is_none() {
            break;
        }
    }
    d.settle().unwrap();
    stop.store(true, Ordering::Relaxed);
    let (answered, slowest) = explainer.join().unwrap();

    // The reader still sees the snapshot it began with: it was never cut off.
    let still: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(still, seen);
    reader.execute_batch("COMMIT").unwrap();

    let store = Store::open(&db).unwrap();
    for i in 0..SCHEDULES {
        let runs = runs(&store, &format!("s{i}"));
        assert_eq!(runs.len(), MINUTES as usize, "s{i}: one run per minute");
        assert!(
            runs.iter().all(|r| r.state == RunState::Succeeded),
            "s{i}: {:?}",
            runs.iter()
                .filter(|r| r.state != RunState::Succeeded)
                .collect::<Vec<_>>()
        );
        for run in &runs {
            let attempts = store.read(|tx| tx.attempts(run.id)).unwrap();
            assert!(
                attempts.len() == 1 && attempts[0].started_at == run.due_at,
                "s{i} {}: started on time, once: {attempts:?}",
                run.window_key
            );
        }
    }
    assert!(answered > 0, "the explain loop ran");
    steps.sort();
    let p = |q: f64| steps[((steps.len() as f64 - 1.0) * q) as usize];
    eprintln!(
        "readers: {} engine steps beside a held read transaction and {answered} explains \
         (slowest {slowest:?}): step p50 {:?}, p99 {:?}, max {:?}",
        steps.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
}
