//! Opening files: WAL, migrations, refusing newer / foreign / garbage files,
//! read-only access, and the hot queries' use of indexes.

#[path = "store_support.rs"]
mod support;

use agentcron::store::*;
use support::*;

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn store_is_send_and_sync() {
    assert_send_sync::<Store>();
}

#[test]
fn reopening_keeps_everything() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.path(), Some(path.as_path()));
    let id = store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            tx.set_switch("kill", true, "ops", "incident 42", t0())?;
            tx.set_last_evaluated("s", t0())?;
            Ok(run.id)
        })
        .unwrap();
    drop(store);

    let store = Store::open(&path).unwrap();
    store
        .read(|tx| {
            assert_eq!(tx.run(id)?.window_key, "w");
            assert!(tx.switch("kill")?.unwrap().on);
            assert_eq!(tx.schedule_state("s")?.last_evaluated, Some(t0()));
            Ok(())
        })
        .unwrap();

    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = raw.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused() {
    let (_dir, path) = temp_db();
    drop(Store::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    drop(raw);
    for got in [Store::open(&path), Store::open_read_only(&path)] {
        match got {
            Err(StoreError::TooNew {
                path: p,
                found,
                known,
            }) => {
                assert_eq!(p, path.display().to_string());
                assert_eq!((found, known), (SCHEMA_VERSION + 1, SCHEMA_VERSION));
            }
            other => panic!("expected TooNew, got {other:?}"),
        }
    }
}

#[test]
fn a_garbage_file_is_corrupt_and_named() {
    let (_dir, path) = temp_db();
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&path, garbage).unwrap();
    for got in [Store::open(&path), Store::open_read_only(&path)] {
        let err = got.expect_err("garbage must not open");
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    }
    let text_path = path.with_file_name("notes.txt");
    std::fs::write(&text_path, "just some notes\n").unwrap();
    let err = Store::open(&text_path).expect_err("text must not open");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

#[test]
fn another_programs_database_is_not_touched() {
    let (_dir, path) = temp_db();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("CREATE TABLE contacts (name TEXT);").unwrap();
    drop(raw);
    let err = Store::open(&path).expect_err("foreign database");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let raw = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = raw
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1, "no agentcron tables were added");
}

#[test]
fn an_unopenable_path_is_an_open_error() {
    let (dir, _) = temp_db();
    let path = dir.path().join("no-such-dir").join("agentcron.db");
    let err = Store::open(&path).expect_err("missing directory");
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    let err = Store::open_read_only(&dir.path().join("missing.db")).expect_err("missing file");
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
}

fn check_read_only(path: &std::path::Path, id: i64) {
    let ro = Store::open_read_only(path).unwrap();
    assert_eq!(ro.read(|tx| tx.run(id)).unwrap().window_key, "w");
    let got = ro.write(|tx| tx.set_switch("kill", true, "x", "y", t0()));
    assert!(got.is_err(), "read-only store wrote");
    let got = ro.read(|tx| tx.set_switch("kill", true, "x", "y", t0()));
    assert!(got.is_err(), "read-only store wrote inside read()");
    assert_eq!(ro.read(|tx| tx.switch("kill")).unwrap(), None);
}

#[test]
fn read_only_reads_but_never_writes() {
    let (_dir, path) = temp_db();
    let writer = Store::open(&path).unwrap();
    let id = writer.write(|tx| Ok(insert(tx, "s", "w", t0()).id)).unwrap();
    // Alongside a live writer, and after it closed.
    check_read_only(&path, id);
    drop(writer);
    check_read_only(&path, id);
}

#[test]
fn read_only_refuses_a_file_without_the_schema() {
    let (_dir, path) = temp_db();
    std::fs::write(&path, b"").unwrap();
    let err = Store::open_read_only(&path).expect_err("empty file");
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("read-only"), "{err}");
}

#[test]
fn in_memory_stores_are_independent() {
    let a = Store::open_in_memory().unwrap();
    let b = Store::open_in_memory().unwrap();
    assert_eq!(a.path(), None);
    a.write(|tx| Ok(insert(tx, "s", "w", t0()))).unwrap();
    assert!(b.read(|tx| tx.runs(&RunFilter::default())).unwrap().is_empty());
}

/// due_runs, expired_leases, previous_run, count_running, … must use an index
/// rather than scan whole tables: the engine runs them every tick.
#[test]
fn hot_queries_never_scan_whole_tables() {
    let store = Store::open_in_memory().unwrap();
    let plans = store.read(|tx| tx.hot_query_plans()).unwrap();
    assert!(plans.len() >= 15, "{plans:?}");
    for (name, plan) in plans {
        assert!(!plan.is_empty(), "{name}: no plan");
        for line in &plan {
            let full_scan =
                line.starts_with("SCAN ") && !line.contains(" INDEX ") && line != "SCAN CONSTANT ROW";
            assert!(!full_scan, "{name} scans a table: {plan:?}");
            assert!(!line.contains("TEMP B-TREE"), "{name} sorts: {plan:?}");
        }
    }
}

/// The size of `path`'s main file (pages a checkpoint has copied out of the WAL).
fn main_file_bytes(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn write_mebibytes(store: &Store, n: usize) {
    let big = serde_json::json!({ "blob": "x".repeat(1 << 20) });
    for _ in 0..n {
        store
            .write(|tx| {
                tx.append_event(&types::NewEvent::new(t0(), "test", big.clone()))
                    .map(|_| ())
            })
            .unwrap();
    }
}

/// Polls (doing `between` each time) until the database file holds the 16
/// MiB the WAL had, for at most 20 s.
fn wait_until_checkpointed(path: &std::path::Path, mut between: impl FnMut()) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while main_file_bytes(path) < 16 << 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "not checkpointed: {} bytes",
            main_file_bytes(path)
        );
        between();
        std::thread::yield_now();
    }
}

#[test]
fn the_background_checkpointer_copies_a_grown_wal_into_the_database() {
    // Without it, 24 MiB of commits stay in the WAL: the writer's own
    // checkpoint waits for 10,000 pages (40 MiB).
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    write_mebibytes(&store, 24);
    assert!(
        main_file_bytes(&path) < 8 << 20,
        "{} bytes",
        main_file_bytes(&path)
    );
    drop(store);

    // With it, a commit past 16 MiB of WAL has the pages copied by its thread.
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store.checkpoint_in_background().unwrap();
    store.checkpoint_in_background().unwrap(); // a second call changes nothing
    assert!(store.checkpoints_in_background());
    write_mebibytes(&store, 24);
    // Each commit nudges the thread again.
    wait_until_checkpointed(&path, || {
        store.write(|tx| tx.set_last_evaluated("s", t0())).unwrap();
    });
    // Everything is still there to read.
    let n = store
        .read(|tx| {
            Ok(tx
                .events(&types::EventFilter {
                    kinds: vec!["test".into()],
                    ..types::EventFilter::default()
                })?
                .len())
        })
        .unwrap();
    assert_eq!(n, 24);
}

/// Once the commits stop (a tick's claims are in), the grown WAL is copied
/// without any further commit to nudge the thread: the checkpoint waits for
/// the pause, it is not forgotten.
#[test]
fn the_background_checkpointer_copies_a_grown_wal_once_the_commits_pause() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store.checkpoint_in_background().unwrap();
    write_mebibytes(&store, 24);
    wait_until_checkpointed(&path, || {});
}

#[test]
fn an_in_memory_store_has_no_checkpointer() {
    let store = Store::open_in_memory().unwrap();
    store.checkpoint_in_background().unwrap();
    assert!(!store.checkpoints_in_background());
    write_mebibytes(&store, 1);
    // A rehearsal's shared in-memory database has a path (its URI) but no
    // WAL either: no thread woken after every commit to look for one.
    let shared = Store::open(&agentcron::rehearsal::driver::memory_database("no-checkpointer")).unwrap();
    shared.checkpoint_in_background().unwrap();
    assert!(!shared.checkpoints_in_background());
    write_mebibytes(&shared, 1);
}

/// A database in memory (rehearsals) is made with 16 KiB pages, a file with
/// SQLite's 4 KiB (see `db::MEMORY_PAGE_SIZE`); both work the same.
#[test]
fn a_database_in_memory_has_bigger_pages_than_a_file() {
    let page_size =
        |c: &rusqlite::Connection| -> i64 { c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap() };
    let uri = agentcron::rehearsal::driver::memory_database("page-size-check");
    let store = Store::open(&uri).unwrap();
    let run = store.write(|tx| Ok(insert(tx, "s", "1", t0()))).unwrap();
    let raw = rusqlite::Connection::open_with_flags(
        &uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap();
    assert_eq!(page_size(&raw), 16384);
    let count: i64 = raw
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 1, "the same shared database");
    assert_eq!(store.read(|tx| tx.run(run.id)).unwrap().window_key, "1");
    let (_dir, path) = temp_db();
    let _file = Store::open(&path).unwrap();
    assert_eq!(page_size(&rusqlite::Connection::open(&path).unwrap()), 4096);
}

/// Several schedulers started at once on a new file: each one's open sees
/// either no schema yet or the whole migrated one, never the tables of the
/// other's migration without its version (which it once refused as "not an
/// agentcron database", and exited).
#[test]
fn stores_opened_at_once_on_a_new_file_all_open_it() {
    for round in 0..30 {
        let (_dir, path) = temp_db();
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let opens: Vec<_> = (0..4)
            .map(|_| {
                let (path, start) = (path.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    Store::open(&path).map(|_| ())
                })
            })
            .collect();
        for open in opens {
            let opened = open.join().unwrap();
            assert!(opened.is_ok(), "round {round}: {opened:?}");
        }
    }
}

/// Every row of `table` as text, by id.
fn rows(conn: &rusqlite::Connection, table: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY 1"))
        .unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}")))
            .collect::<rusqlite::Result<Vec<_>>>()
            .map(|v| v.join("|"))
    })
    .unwrap()
    .collect::<rusqlite::Result<_>>()
    .unwrap()
}

/// The columns of the runs' unique index, in order.
fn unique_key(conn: &rusqlite::Connection) -> Vec<String> {
    let index: String = conn
        .query_row(
            "SELECT name FROM pragma_index_list('runs') WHERE \"unique\" = 1 AND origin = 'u'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
        .unwrap();
    stmt.query_map([index], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn approval(run_id: i64) -> Approval {
    Approval {
        run_id,
        approved: false,
        actor: "ops".into(),
        reason: "no".into(),
        resume_after: None,
        at: t0(),
    }
}

#[test]
fn schema_14_keys_runs_by_window_first_and_keeps_every_row() {
    use RunState::*;
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).unwrap();
        store
            .write(|tx| {
                run_in(tx, RunState::Succeeded, "a");
                run_in(tx, RunState::Running, "b");
                let c = run_in(tx, Failed, "c");
                tx.record_approval(&approval(c.id))?;
                insert(tx, "t", "a", t0());
                Ok(())
            })
            .unwrap();
    }
    let raw = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(unique_key(&raw), ["window_key", "schedule", "tenant"]);
    // Back to schema 13: the same table keyed by tenant and schedule first.
    let old_table = |sql: &str| {
        sql.replace(
            "UNIQUE (window_key, schedule, tenant)",
            "UNIQUE (tenant, schedule, window_key)",
        )
    };
    let create: String = raw
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'runs'", [], |r| {
            r.get(0)
        })
        .unwrap();
    raw.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF; BEGIN; {}; INSERT INTO runs_v13 SELECT * FROM runs; DROP TABLE runs; \
         ALTER TABLE runs_v13 RENAME TO runs; \
         CREATE INDEX runs_window ON runs (schedule, window_start); PRAGMA user_version = 13; COMMIT;",
        old_table(&create.replacen("CREATE TABLE \"runs\"", "CREATE TABLE runs_v13", 1))
    ))
    .unwrap();
    assert_eq!(unique_key(&raw), ["tenant", "schedule", "window_key"]);
    let before: Vec<Vec<String>> = ["runs", "attempts", "approvals", "events"]
        .iter()
        .map(|t| rows(&raw, t))
        .collect();
    drop(raw);

    let store = Store::open(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(unique_key(&raw), ["window_key", "schedule", "tenant"]);
    let after: Vec<Vec<String>> = ["runs", "attempts", "approvals", "events"]
        .iter()
        .map(|t| rows(&raw, t))
        .collect();
    assert_eq!(before, after);
    let version: i64 = raw.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let broken: i64 = raw
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(broken, 0);
    // The key still refuses a second run for a window, and the store's
    // foreign keys are on again after the migration.
    store
        .write(|tx| {
            assert!(tx.insert_run(&new_run("s", "a", t0()), t0())?.is_none());
            Ok(())
        })
        .unwrap();
    let orphan = store.write(|tx| tx.record_approval(&approval(999_999)));
    assert!(orphan.is_err(), "an approval of no run is refused");
}

/// Schema 16: the schedule-first history index holds the runs not running,
/// the running ones have their own; a schema 15 file is moved over with its
/// rows as they were, and a schedule's listing still holds both kinds.
#[test]
fn schema_16_indexes_running_runs_apart_and_keeps_every_row() {
    let (_dir, path) = temp_db();
    let (running, done) = {
        let store = Store::open(&path).unwrap();
        store
            .write(|tx| {
                let done = run_in(tx, RunState::Succeeded, "a");
                let running = run_in(tx, RunState::Running, "b");
                Ok((running.id, done.id))
            })
            .unwrap()
    };
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch(
        "BEGIN; DROP INDEX runs_window; DROP INDEX runs_running; \
         CREATE INDEX runs_window ON runs (schedule, window_start); PRAGMA user_version = 15; COMMIT;",
    )
    .unwrap();
    let before = rows(&raw, "runs");
    drop(raw);

    let store = Store::open(&path).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(rows(&raw, "runs"), before);
    let index = |name: &str| -> String {
        raw.query_row("SELECT sql FROM sqlite_master WHERE name = ?1", [name], |r| {
            r.get(0)
        })
        .unwrap()
    };
    assert!(
        index("runs_window").ends_with("WHERE state <> 'running'"),
        "{}",
        index("runs_window")
    );
    assert!(
        index("runs_running").ends_with("WHERE state = 'running'"),
        "{}",
        index("runs_running")
    );
    let listed: Vec<i64> = store
        .read(|tx| {
            tx.runs(&RunFilter {
                schedule: Some("s".into()),
                ..RunFilter::default()
            })
        })
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [done, running]);
    let previous = store
        .read(|tx| tx.previous_run("acme", "s", t0() + mins(1)))
        .unwrap()
        .map(|r| r.id);
    assert_eq!(previous, Some(running), "same window start: the newer id");
}
