//! Shared helpers for the `store_*` tests: fixed instants, new runs, and a way
//! to bring a run into any state through legal paths only; and the store
//! conformance suite's harness: a test written as `fn(&Store)` and named in
//! `conformance!` runs on every kind of store ([`Kind`]). Included with
//! `#[path]` by the other files; compiled alone it is an empty test crate.
#![allow(dead_code, unused_macros)]

use agentcron::store::*;
use chrono::{DateTime, Duration, Utc};
use std::path::PathBuf;

pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test instant")
        .with_timezone(&Utc)
}

/// 2026-06-06T09:00:00Z, the instant every test starts from.
pub fn t0() -> DateTime<Utc> {
    t("2026-06-06T09:00:00Z")
}

pub fn mins(n: i64) -> Duration {
    Duration::minutes(n)
}

pub fn new_run(schedule: &str, key: &str, start: DateTime<Utc>) -> NewRun {
    NewRun {
        tenant: "acme".into(),
        schedule: schedule.into(),
        window_key: key.into(),
        window_start: start,
        window_end: start + mins(60),
        due_at: start,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        next_check_at: Some(start),
    }
}

pub fn insert(tx: &Tx, schedule: &str, key: &str, start: DateTime<Utc>) -> Run {
    tx.insert_run(&new_run(schedule, key, start), t0())
        .expect("insert")
        .expect("new window")
}

pub fn claim_as(tx: &Tx, run: &Run, owner: &str, now: DateTime<Utc>) -> Claim {
    tx.claim(
        run.id,
        run.state,
        owner,
        now + mins(1),
        RunReason::Scheduled,
        run.due_at,
        now,
    )
    .expect("claim")
    .expect("claim won")
}

pub fn claim(tx: &Tx, run: &Run) -> Claim {
    claim_as(tx, run, "worker-1", t0())
}

pub fn go(tx: &Tx, run: &Run, to: RunState) -> Run {
    tx.transition(run.id, run.state, to, &Change::default(), t0(), &[])
        .expect("legal transition")
}

/// A fresh run (window `key` of schedule `s`) brought into `state` through
/// claims and legal transitions only.
pub fn run_in(tx: &Tx, state: RunState, key: &str) -> Run {
    use RunState::*;
    let run = insert(tx, "s", key, t0());
    match state {
        Pending => run,
        Running => claim(tx, &run).run,
        RetryWait | Succeeded | Dead => {
            let running = claim(tx, &run).run;
            go(tx, &running, state)
        }
        NeedsHuman | Failed | Skipped | Missed | Expired => go(tx, &run, state),
    }
}

pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agentcron.db");
    (dir, path)
}

/// The kinds of store every conformance test runs on: the same SQLite store
/// opened three ways, because each is configured differently (page size,
/// journal, caching across connections). A store implementation added later
/// (PostgreSQL) is one more kind here.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// `Store::open_in_memory`: one private in-memory database.
    Memory,
    /// A database file (WAL, 4 KiB pages), as a scheduler runs it.
    File,
    /// A rehearsal's shared in-memory database (`file:…?mode=memory&cache=shared`,
    /// 16 KiB pages).
    Shared,
    /// A PostgreSQL ledger: a database of its own on the server named by
    /// `AGENTCRON_TEST_PG_URL` (`.ci/with-postgres cargo test`).
    Postgres,
}

/// A new, empty PostgreSQL database on the test server, as a URL. The
/// tests that need one are `#[ignore]`d (`cargo test` without a server
/// lists them as ignored, never as passed); run with `--include-ignored`
/// and no server, they fail here.
pub fn pg_database(test: &str) -> Option<String> {
    Some(pg_database_optional(test).unwrap_or_else(|| {
        panic!(
            "{test} needs a PostgreSQL server: run `.ci/with-postgres cargo test -- --include-ignored`, \
             or set AGENTCRON_TEST_PG_URL"
        )
    }))
}

/// [`pg_database`] for a test whose PostgreSQL part is an addition to what
/// it checks without one: `None` (said on the terminal) without a server.
pub fn pg_database_optional(test: &str) -> Option<String> {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let Ok(admin) = std::env::var("AGENTCRON_TEST_PG_URL") else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the PostgreSQL part of {test}: no PostgreSQL server (run `.ci/with-postgres cargo test -- --include-ignored`, or set AGENTCRON_TEST_PG_URL)"
        );
        return None;
    };
    let db = format!(
        "agentcron_c_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
            .await
            .expect("connect to the test server");
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
            .await
            .expect("drop old test database");
        client
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .expect("create test database");
    });
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    Some(format!("{base}/{db}"))
}

/// A new, empty store of `kind`; the folder (if any) lives as long as it.
/// `None` only for PostgreSQL without a test server (said loudly).
pub fn open_kind(kind: Kind, test: &str) -> Option<(Option<tempfile::TempDir>, Store)> {
    match kind {
        Kind::Postgres => {
            let url = pg_database(test)?;
            Some((None, Store::open_postgres(&url, None).expect("PostgreSQL store")))
        }
        other => Some(open(other)),
    }
}

/// A new, empty SQLite store of `kind`; the folder (if any) lives as long as it.
pub fn open(kind: Kind) -> (Option<tempfile::TempDir>, Store) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SHARED: AtomicUsize = AtomicUsize::new(0);
    match kind {
        Kind::Memory => (None, Store::open_in_memory().expect("in-memory store")),
        Kind::File => {
            let (dir, path) = temp_db();
            (Some(dir), Store::open(&path).expect("file store"))
        }
        Kind::Shared => {
            let name = format!(
                "conformance-{}-{}",
                std::process::id(),
                SHARED.fetch_add(1, Ordering::Relaxed)
            );
            let uri = agentcron::rehearsal::driver::memory_database(&name);
            (None, Store::open(&uri).expect("shared in-memory store"))
        }
        Kind::Postgres => panic!("a PostgreSQL store is opened with open_kind"),
    }
}

/// Runs each named `fn(&Store)` as a test on every [`Kind`] of store:
/// `conformance!(a, b)` makes the tests `a::memory`, `a::file`,
/// `a::shared`, `a::postgres`, and so on.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::support::{Kind, open};
                #[test]
                fn memory() {
                    let (_dir, store) = open(Kind::Memory);
                    super::$name(&store);
                }
                #[test]
                fn file() {
                    let (_dir, store) = open(Kind::File);
                    super::$name(&store);
                }
                #[test]
                fn shared() {
                    let (_dir, store) = open(Kind::Shared);
                    super::$name(&store);
                }
                #[test]
                #[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
                fn postgres() {
                    if let Some((_dir, store)) =
                        super::support::open_kind(Kind::Postgres, concat!(module_path!(), "::", stringify!($name)))
                    {
                        super::$name(&store);
                    }
                }
            }
        )*
    };
}
