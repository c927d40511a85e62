//! The PostgreSQL ledger's protocol against a real PostgreSQL: migrations
//! (concurrent starts, a newer schema, another program's database), the
//! fire's identity across schedulers, single-winner claims, and the
//! stale-writer case of every guarded write (claim, renewal, completion,
//! lost-lease takeover): a writer with an old fence or owner changes nothing
//! and is told why.
//!
//! Each test gets a database of its own on the server named by
//! `AGENTCRON_TEST_PG_URL` (`.ci/with-postgres cargo test` starts one; `.ci/run`
//! does). Without it every test here prints that it was skipped — to the
//! terminal, past the test harness's capture — and passes nothing else.

#[path = "store_support.rs"]
mod store_support;

use agentcron::store::pg::{LapsedLease, NewWindow, PG_SCHEMA_VERSION, PgError, PgStore, Refused};
use agentcron::store::{Pool, RunState};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::time::Duration;
use tokio_postgres::NoTls;

const LEASE: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_secs(5);

/// A fresh database for test `name`, or `None` (said loudly) without a server.
async fn fresh_db(name: &str) -> Option<String> {
    let test = format!("store_pg::{name}");
    tokio::task::spawn_blocking(move || store_support::pg_database(&test))
        .await
        .expect("join")
}

/// A fresh database for test `name` with a migrated store on it and a plain
/// connection beside it, or `None` (said loudly) without a server.
async fn ledger(name: &str) -> Option<(String, PgStore, tokio_postgres::Client)> {
    let url = fresh_db(name).await?;
    let store = PgStore::connect(&url, None).await.expect("store");
    let c = raw(&url).await;
    Some((url, store, c))
}

async fn raw(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(conn);
    client
}

fn window(schedule: &str, k: i64) -> NewWindow {
    let start = 1_780_000_000_000 + k * 1000;
    NewWindow {
        tenant: "default".into(),
        schedule: schedule.into(),
        window_key: format!("2026-05-28T00:00:{k:02}"),
        window_start: start,
        window_end: start + 1000,
        due_at: start,
        reason: "scheduled".into(),
        pool: Pool::OnTime,
        next_check_at: Some(start),
    }
}

const CLAIMABLE: &[RunState] = &[RunState::Pending, RunState::RetryWait];

/// Opens window `k` of schedule `s`, which no one opened before: its run.
async fn opened(store: &PgStore, k: i64) -> i64 {
    store
        .open_window(&window("s", k))
        .await
        .expect("open")
        .expect("new")
}

/// Claims `run` for `owner`, a claim that must win.
async fn claimed(store: &PgStore, run: i64, owner: &str) -> agentcron::store::pg::Lease {
    store
        .claim(run, CLAIMABLE, owner, LEASE)
        .await
        .expect("claim")
        .expect("won")
}

/// Window `k` opened and claimed by `owner`, its lease then lapsed `ms` ago.
async fn lapsed_claim(
    store: &PgStore,
    c: &tokio_postgres::Client,
    k: i64,
    owner: &str,
    ms: i64,
) -> (i64, agentcron::store::pg::Lease) {
    let id = opened(store, k).await;
    let lease = claimed(store, id, owner).await;
    lapse(c, id, ms).await;
    (id, lease)
}

/// Takes `lapsed` over (back to retry_wait), a takeover that must win.
async fn taken_over(store: &PgStore, lapsed: &LapsedLease) {
    store
        .take_over(lapsed, GRACE, RunState::RetryWait, "lease lost")
        .await
        .expect("take over")
        .expect("taken over");
}

/// (state, fencing token, owner, lease expiry) as stored.
async fn row(c: &tokio_postgres::Client, run: i64) -> (String, i64, Option<String>, Option<i64>) {
    let r = c
        .query_one(
            "SELECT state, fencing_token, lease_owner, lease_expires FROM runs WHERE id = $1",
            &[&run],
        )
        .await
        .expect("row");
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

/// The one number `sql` answers.
async fn scalar(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.expect(sql).get(0)
}

/// Moves run `run`'s lease `ms` into the past, as if that much time went by
/// (the database clock is real time; tests do not wait for it).
async fn lapse(c: &tokio_postgres::Client, run: i64, ms: i64) {
    c.execute(
        "UPDATE runs SET lease_expires = agentcron_now_ms() - $2 WHERE id = $1",
        &[&run, &ms],
    )
    .await
    .expect("lapse");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_fresh_database_is_migrated_once_and_reopened_as_is() {
    let Some(url) = fresh_db("migrate").await else {
        return;
    };
    let a = PgStore::connect(&url, None).await.expect("first start");
    assert_eq!(a.schema_version().await.expect("version"), PG_SCHEMA_VERSION);
    let b = PgStore::connect(&url, None).await.expect("second start");
    assert_eq!(b.schema_version().await.expect("version"), PG_SCHEMA_VERSION);
    assert!(
        b.shown().starts_with("postgres://postgres@127.0.0.1:"),
        "{}",
        b.shown()
    );
    let db = url.rsplit('/').next().expect("database");
    assert!(b.shown().ends_with(&format!("/{db}")), "{}", b.shown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn schedulers_starting_at_once_on_an_empty_database_do_not_race_the_migration() {
    let Some(url) = fresh_db("migrate_race").await else {
        return;
    };
    let starts: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgStore::connect(&url, None).await })
        })
        .collect();
    for s in starts {
        s.await.expect("join").expect("every start succeeds");
    }
    let c = raw(&url).await;
    let n: i64 = scalar(
        &c,
        "SELECT count(*) FROM agentcron_meta WHERE key = 'schema_version'",
    )
    .await;
    assert_eq!(n, 1);
    let counts: i64 = scalar(&c, "SELECT count(*) FROM run_counts").await;
    assert_eq!(counts, 10, "the migration's rows were inserted once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_newer_schema_is_refused_and_left_as_it_is() {
    let Some(url) = fresh_db("too_new").await else {
        return;
    };
    PgStore::connect(&url, None).await.expect("migrate");
    let c = raw(&url).await;
    c.execute(
        "UPDATE agentcron_meta SET value = 99 WHERE key = 'schema_version'",
        &[],
    )
    .await
    .expect("bump");
    let e = PgStore::connect(&url, None).await.expect_err("newer schema");
    assert!(matches!(e, PgError::TooNew { found: 99, .. }), "{e}");
    assert!(e.to_string().contains("upgrade agentcron"), "{e}");
    let v: i64 = scalar(
        &c,
        "SELECT value FROM agentcron_meta WHERE key = 'schema_version'",
    )
    .await;
    assert_eq!(v, 99, "untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn another_programs_database_is_refused_and_left_untouched() {
    let Some(url) = fresh_db("foreign").await else {
        return;
    };
    let c = raw(&url).await;
    c.batch_execute("CREATE TABLE orders (id int); INSERT INTO orders VALUES (7);")
        .await
        .expect("foreign table");
    let e = PgStore::connect(&url, None).await.expect_err("foreign");
    assert!(matches!(e, PgError::Foreign { .. }), "{e}");
    assert!(e.to_string().contains("orders"), "{e}");
    let tables: Vec<String> = c
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .await
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tables, vec!["orders".to_string()], "nothing created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_error_names_the_database_without_its_password() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let url = format!("postgres://ops:hunter2@127.0.0.1:{port}/ledger?connect_timeout=2");
    let e = PgStore::connect(&url, None).await.expect_err("nothing listens");
    let text = e.to_string();
    assert!(
        text.contains(&format!("postgres://ops@127.0.0.1:{port}/ledger")),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn each_window_is_opened_by_exactly_one_of_several_schedulers() {
    let Some(url) = fresh_db("open_once").await else {
        return;
    };
    let mut stores = vec![];
    for _ in 0..4 {
        stores.push(PgStore::connect(&url, None).await.expect("store"));
    }
    let tasks: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(i, store)| {
            tokio::spawn(async move {
                let mut opened = vec![];
                // Each scheduler walks the windows from a different place.
                for j in 0..120 {
                    let k = (j + i * 30) % 120;
                    if let Some(id) = store.open_window(&window("s", k as i64)).await.expect("open") {
                        opened.push((k, id));
                    }
                }
                opened
            })
        })
        .collect();
    let mut by_window: HashMap<usize, Vec<i64>> = HashMap::new();
    for t in tasks {
        for (k, id) in t.await.expect("join") {
            by_window.entry(k).or_default().push(id);
        }
    }
    assert_eq!(by_window.len(), 120, "every window opened");
    assert!(
        by_window.values().all(|ids| ids.len() == 1),
        "a window opened twice: {:?}",
        by_window.iter().filter(|(_, v)| v.len() > 1).collect::<Vec<_>>()
    );
    let c = raw(&url).await;
    let n: i64 = scalar(&c, "SELECT count(*) FROM runs").await;
    assert_eq!(n, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn each_run_is_claimed_by_exactly_one_of_several_schedulers() {
    let Some(url) = fresh_db("claim_once").await else {
        return;
    };
    let setup = PgStore::connect(&url, None).await.expect("store");
    let mut ids = vec![];
    for k in 0..80 {
        ids.push(opened(&setup, k).await);
    }
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let (url, ids) = (url.clone(), ids.clone());
            tokio::spawn(async move {
                let store = PgStore::connect(&url, None).await.expect("store");
                let owner = format!("host{i}:1");
                let mut won = vec![];
                for id in ids {
                    match store.claim(id, CLAIMABLE, &owner, LEASE).await.expect("claim") {
                        Ok(lease) => won.push(lease),
                        Err(Refused::State { actual, .. }) => assert_eq!(actual, RunState::Running),
                        Err(other) => panic!("unexpected refusal {other}"),
                    }
                }
                won
            })
        })
        .collect();
    let mut winners: HashMap<i64, usize> = HashMap::new();
    let mut fences = HashSet::new();
    for t in tasks {
        for lease in t.await.expect("join") {
            *winners.entry(lease.run_id).or_default() += 1;
            assert!(fences.insert(lease.fence), "fence {} given twice", lease.fence);
        }
    }
    assert_eq!(winners.len(), 80, "every run claimed");
    assert!(winners.values().all(|&n| n == 1), "a run claimed twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_claim_of_a_run_not_claimable_changes_nothing_and_says_why() {
    let Some(url) = fresh_db("claim_refused").await else {
        return;
    };
    let store = PgStore::connect(&url, None).await.expect("store");
    let id = opened(&store, 1).await;
    let lease = claimed(&store, id, "a:1").await;
    let c = raw(&url).await;
    let before = row(&c, id).await;
    let again = store.claim(id, CLAIMABLE, "b:2", LEASE).await.expect("claim");
    assert_eq!(
        again,
        Err(Refused::State {
            run: id,
            expected: "pending or retry_wait".into(),
            actual: RunState::Running
        })
    );
    assert_eq!(row(&c, id).await, before, "unchanged");
    assert_eq!(before.1, lease.fence);
    let missing = store
        .claim(id + 1000, CLAIMABLE, "b:2", LEASE)
        .await
        .expect("claim");
    assert_eq!(missing, Err(Refused::NoRun(id + 1000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn leases_are_measured_on_the_database_clock_and_trusted_for_less() {
    let Some(url) = fresh_db("lease_clock").await else {
        return;
    };
    let store = PgStore::connect(&url, None).await.expect("store");
    let id = opened(&store, 1).await;
    let before = store.now_ms().await.expect("now");
    let asked = std::time::Instant::now();
    let lease = claimed(&store, id, "a:1").await;
    let after = store.now_ms().await.expect("now");
    let ms = LEASE.as_millis() as i64;
    assert!(
        (before + ms..=after + ms).contains(&lease.expires_ms),
        "expiry {} not within [{}, {}]",
        lease.expires_ms,
        before + ms,
        after + ms
    );
    assert!(lease.trust_until < asked + LEASE, "trusted past the lease");
    assert!(lease.trusted());
    let renewed = store.renew(&lease, LEASE).await.expect("renew").expect("renewed");
    assert!(renewed.expires_ms >= lease.expires_ms);
    assert_eq!((renewed.fence, renewed.owner.as_str()), (lease.fence, "a:1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_renewal_with_an_old_fence_a_wrong_owner_or_a_lapsed_lease_changes_nothing() {
    let Some((_, store, c)) = ledger("renew_stale").await else {
        return;
    };
    let id = opened(&store, 1).await;
    let a = claimed(&store, id, "a:1").await;

    // Wrong owner, right fence.
    let mut impostor = a.clone();
    impostor.owner = "b:2".into();
    let before = row(&c, id).await;
    assert_eq!(
        store.renew(&impostor, LEASE).await.expect("renew"),
        Err(Refused::Owner {
            run: id,
            expected: "b:2".into(),
            actual: "a:1".into()
        })
    );
    assert_eq!(row(&c, id).await, before);

    // Lapsed, not yet taken over: never revived.
    lapse(&c, id, 1).await;
    let lapsed = row(&c, id).await;
    let refused = store.renew(&a, LEASE).await.expect("renew");
    assert!(
        matches!(refused, Err(Refused::Expired { run, .. }) if run == id),
        "{refused:?}"
    );
    assert_eq!(row(&c, id).await, lapsed, "a lapsed lease is not extended");

    // Taken over and claimed again by b: a's fence is old.
    lapse(&c, id, 10_000).await;
    let seen = store.lapsed_leases(GRACE, 10).await.expect("lapsed");
    assert_eq!(seen.len(), 1);
    taken_over(&store, &seen[0]).await;
    let b = claimed(&store, id, "b:2").await;
    assert!(b.fence > a.fence);
    let held_by_b = row(&c, id).await;
    assert_eq!(
        store.renew(&a, LEASE).await.expect("renew"),
        Err(Refused::Fence {
            run: id,
            expected: a.fence,
            actual: b.fence
        })
    );
    assert_eq!(row(&c, id).await, held_by_b, "b's lease untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_completion_under_an_old_fence_changes_nothing() {
    let Some((_, store, c)) = ledger("complete_stale").await else {
        return;
    };
    let (id, a) = lapsed_claim(&store, &c, 1, "a:1", 10_000).await;
    let seen = store.lapsed_leases(GRACE, 10).await.expect("lapsed");
    taken_over(&store, &seen[0]).await;
    // Between the takeover and a new claim: a's result finds the run waiting.
    assert_eq!(
        store
            .complete(&a, RunState::Succeeded, "done")
            .await
            .expect("complete"),
        Err(Refused::State {
            run: id,
            expected: "running".into(),
            actual: RunState::RetryWait
        })
    );
    let b = claimed(&store, id, "b:2").await;
    let held_by_b = row(&c, id).await;
    assert_eq!(
        store
            .complete(&a, RunState::Succeeded, "done")
            .await
            .expect("complete"),
        Err(Refused::Fence {
            run: id,
            expected: a.fence,
            actual: b.fence
        })
    );
    assert_eq!(row(&c, id).await, held_by_b, "still b's");
    store
        .complete(&b, RunState::Succeeded, "done")
        .await
        .expect("complete")
        .expect("b's completion lands");
    assert_eq!(row(&c, id).await.0, "succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_takeover_loses_to_a_completion_or_a_newer_claim_that_came_first() {
    let Some((_, store, c)) = ledger("takeover_stale").await else {
        return;
    };

    // Completed between the sweep's read and its write.
    let (id, a) = lapsed_claim(&store, &c, 1, "a:1", 10_000).await;
    let seen = store.lapsed_leases(GRACE, 10).await.expect("lapsed");
    assert_eq!(seen.len(), 1);
    store
        .complete(&a, RunState::Succeeded, "done")
        .await
        .expect("complete")
        .expect("a late result lands while no one took the run over");
    assert_eq!(
        store
            .take_over(&seen[0], GRACE, RunState::RetryWait, "lease lost")
            .await
            .expect("take over"),
        Err(Refused::State {
            run: id,
            expected: "running".into(),
            actual: RunState::Succeeded
        })
    );
    assert_eq!(row(&c, id).await.0, "succeeded", "River #1302: never overwritten");

    // Taken over and claimed again between read and write — by the same
    // scheduler, so only the fence tells the claims apart.
    let (id, _) = lapsed_claim(&store, &c, 2, "a:1", 10_000).await;
    let stale: LapsedLease = store.lapsed_leases(GRACE, 10).await.expect("lapsed").remove(0);
    taken_over(&store, &stale).await;
    let b = claimed(&store, id, "a:1").await;
    // Its new lease lapsed too, as far as the old read can tell.
    lapse(&c, id, 10_000).await;
    let held_by_b = row(&c, id).await;
    assert_eq!(
        store
            .take_over(&stale, GRACE, RunState::RetryWait, "lease lost")
            .await
            .expect("take over"),
        Err(Refused::Fence {
            run: id,
            expected: stale.fence,
            actual: b.fence
        })
    );
    assert_eq!(row(&c, id).await, held_by_b);

    // Within the grace: not lapsed enough to take over.
    let (id, _) = lapsed_claim(&store, &c, 3, "a:1", 1_000).await;
    assert!(
        store
            .lapsed_leases(GRACE, 10)
            .await
            .expect("lapsed")
            .iter()
            .all(|l| l.run_id != id),
        "a lease 1 s past expiry is within the 5 s grace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn concurrent_sweepers_take_each_lapsed_run_over_once() {
    let Some((url, store, c)) = ledger("sweepers").await else {
        return;
    };
    let mut ids = vec![];
    for k in 0..40 {
        let id = opened(&store, k).await;
        claimed(&store, id, "gone:1").await;
        lapse(&c, id, 60_000).await;
        ids.push(id);
    }
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let store = PgStore::connect(&url, None).await.expect("store");
                let seen = store.lapsed_leases(GRACE, 100).await.expect("lapsed");
                let mut took = vec![];
                for l in seen {
                    if store
                        .take_over(&l, GRACE, RunState::RetryWait, "lease lost")
                        .await
                        .expect("take over")
                        .is_ok()
                    {
                        took.push(l.run_id);
                    }
                }
                took
            })
        })
        .collect();
    let mut taken: HashMap<i64, usize> = HashMap::new();
    for t in tasks {
        for id in t.await.expect("join") {
            *taken.entry(id).or_default() += 1;
        }
    }
    assert_eq!(taken.len(), 40, "every lapsed run taken over");
    assert!(taken.values().all(|&n| n == 1), "a run taken over twice");
    for id in ids {
        assert_eq!(row(&c, id).await.0, "retry_wait");
    }
}

/// A `postgres://` ledger nothing answers at is said plainly by every verb,
/// the scheduler's, the writing ones and the reading ones alike: exit 2,
/// where it points without its password, no file named like the URL made.
#[test]
fn an_unreachable_postgres_ledger_is_said_plainly() {
    let dir = tempfile::tempdir().expect("dir");
    let url = "postgres://ops:hunter2@127.0.0.1:9/ledger";
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-config/agentcron.toml");
    for args in [
        vec!["run", "--headless"],
        vec!["pause", "daily-sales-report", "--reason", "x"],
        vec!["runs"],
        vec!["events"],
        vec!["show", "1"],
        vec!["explain", "daily-sales-report"],
        vec!["status"],
    ] {
        let o = assert_cmd::Command::cargo_bin("agentcron")
            .expect("binary")
            .current_dir(dir.path())
            .args(["--config", sample, "--db", url])
            .args(&args)
            .timeout(Duration::from_secs(30))
            .output()
            .expect("run");
        let text = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
        assert!(
            text.contains("cannot connect to postgres://ops@127.0.0.1:9/ledger"),
            "{args:?}: {text}"
        );
        assert!(!text.contains("hunter2"), "{args:?}: {text}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "nothing created"
    );
}

/// Every row of `table` as text, in key order: (SQLite, PostgreSQL).
fn sqlite_rows(db: &std::path::Path, table: &str) -> Vec<Vec<String>> {
    use rusqlite::types::Value;
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))
        .expect("select");
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| {
                Ok(match r.get::<_, Value>(i)? {
                    Value::Null => "NULL".to_string(),
                    Value::Integer(v) => v.to_string(),
                    Value::Real(v) => v.to_string(),
                    Value::Text(v) => v,
                    Value::Blob(v) => format!("{v:?}"),
                })
            })
            .collect()
    })
    .expect("rows")
    .collect::<Result<_, _>>()
    .expect("rows")
}

async fn pg_rows(c: &tokio_postgres::Client, table: &str, columns: &[String]) -> Vec<Vec<String>> {
    let cols: Vec<String> = columns
        .iter()
        .map(|c| format!("COALESCE(\"{c}\"::text, 'NULL')"))
        .collect();
    c.query(
        &format!("SELECT {} FROM {table} ORDER BY 1, 2", cols.join(", ")),
        &[],
    )
    .await
    .expect("pg rows")
    .iter()
    .map(|r| (0..columns.len()).map(|i| r.get::<_, String>(i)).collect())
    .collect()
}

fn sqlite_columns(db: &std::path::Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    let mut stmt = conn
        .prepare(&format!(
            "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
        ))
        .expect("columns");
    stmt.query_map([], |r| r.get(0))
        .expect("columns")
        .collect::<Result<_, _>>()
        .expect("columns")
}

fn agentcron(args: &[&str]) -> (Option<i32>, String) {
    let o = assert_cmd::Command::cargo_bin("agentcron")
        .expect("binary")
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

/// A ledger a rehearsal wrote (runs of every end, attempts, steps, an
/// approval, events) is copied row for row; a second copy is refused and
/// changes nothing; `--dry-run` prints the counts and contacts no server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn db_copy_moves_a_ledger_row_for_row_into_an_empty_database_only() {
    let Some(url) = fresh_db("copy").await else { return };
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("ledger.db");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sample-config/rehearsals/needs-human.toml"
    );
    let (code, text) = agentcron(&[
        "rehearse",
        "--quiet",
        scenario,
        "--db",
        db.to_str().expect("path"),
    ]);
    assert_eq!(code, Some(0), "{text}");

    // A source that cannot be copied is refused before the target is
    // touched: not even migrated (the table count below stays 0).
    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .and_then(|c| c.execute_batch("CREATE TABLE orders (id INTEGER);"))
        .expect("foreign");
    let (code, text) = agentcron(&[
        "db",
        "copy",
        "--from",
        foreign.to_str().expect("path"),
        "--to",
        &url,
    ]);
    assert_eq!(code, Some(2), "{text}");
    let (code, text) = agentcron(&[
        "db",
        "copy",
        "--from",
        db.to_str().expect("path"),
        "--to",
        &url,
        "--dry-run",
    ]);
    assert_eq!(code, Some(0), "{text}");
    let runs = sqlite_rows(&db, "runs").len();
    assert!(runs > 0);
    assert!(text.contains(&format!("would copy {runs:>9} runs")), "{text}");
    assert!(text.contains("dry run: nothing written"), "{text}");
    let c = raw(&url).await;
    let tables: i64 = scalar(
        &c,
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .await;
    assert_eq!(tables, 0, "a dry run writes nothing");

    let (code, text) = agentcron(&["db", "copy", "--from", db.to_str().expect("path"), "--to", &url]);
    assert_eq!(code, Some(0), "{text}");
    let mut copied = 0;
    for table in agentcron::store::pg::copy::TABLES {
        let columns = sqlite_columns(&db, table);
        // Compared as sorted text rows (PostgreSQL orders the text casts).
        let mut want = sqlite_rows(&db, table);
        want.sort();
        let mut got = pg_rows(&c, table, &columns).await;
        got.sort();
        assert_eq!(got, want, "table {table}");
        copied += want.len();
    }
    assert!(copied > runs, "more than the runs were compared ({copied})");
    let approvals: i64 = scalar(&c, "SELECT count(*) FROM approvals").await;
    assert!(approvals > 0, "the rehearsal's approval was copied");

    // The read verbs print the same from both ledgers (none of them needs
    // the config with --db).
    let file = db.to_str().expect("path");
    let run_id = sqlite_rows(&db, "runs")[0][0].clone();
    for args in [
        vec!["runs", "--json"],
        vec!["runs", "--schedule", "refund-review", "--json"],
        vec!["events", "--json"],
        vec![
            "events",
            "--schedule",
            "refund-review",
            "--kind",
            "decision,claimed",
            "--json",
        ],
        vec!["events", "--run", &run_id, "--json"],
        vec!["show", &run_id, "--json"],
        vec!["explain", "refund-review", "--json"],
        vec!["explain", "refund-review", "--window", "2026-06-08"],
        vec!["runs"],
    ] {
        let on = |target: &str| {
            let mut all = vec!["--config", "/nonexistent/agentcron.toml", "--db", target];
            all.extend(args.iter().copied());
            agentcron(&all)
        };
        let (code_file, from_file) = on(file);
        let (code_pg, from_pg) = on(&url);
        assert_eq!(code_file, Some(0), "{args:?} on the file: {from_file}");
        assert_eq!(code_pg, Some(0), "{args:?} on PostgreSQL: {from_pg}");
        assert_eq!(from_pg, from_file, "{args:?}");
        assert!(from_file.len() > 20, "{args:?} printed {from_file}");
    }

    // `status` too, but for its own instant ("at"); it exits 1 (no
    // scheduler alive) on both.
    let status = |target: &str| {
        let (code, text) = agentcron(&[
            "--config",
            "/nonexistent/agentcron.toml",
            "--db",
            target,
            "status",
            "--json",
        ]);
        let text: Vec<String> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("\"at\":"))
            .map(str::to_string)
            .collect();
        (code, text)
    };
    let (from_file, from_pg) = (status(file), status(&url));
    assert_eq!(from_pg, from_file, "status");
    assert!(
        from_file.1.iter().any(|l| l.contains("\"succeeded\": 1")),
        "{from_file:?}"
    );

    // The copy continues the ledger's sequences: the next fence is new.
    let store = PgStore::connect(&url, None).await.expect("store");
    let max_fence: i64 = scalar(&c, "SELECT COALESCE(MAX(fencing_token), 0) FROM runs").await;
    let id = store
        .open_window(&window("after-copy", 1))
        .await
        .expect("open")
        .expect("new");
    let lease = claimed(&store, id, "a:1").await;
    assert!(lease.fence > max_fence);

    let before: i64 = scalar(&c, "SELECT count(*) FROM events").await;
    let (code, text) = agentcron(&["db", "copy", "--from", db.to_str().expect("path"), "--to", &url]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("already holds a ledger"), "{text}");
    let after: i64 = scalar(&c, "SELECT count(*) FROM events").await;
    assert_eq!(before, after, "nothing copied twice");
}

/// `sslmode=require`: TLS, the server's certificate verified against
/// `sslrootcert` (the test server's throwaway CA), or against the Mozilla
/// roots without it — which do not know that CA, so the connection is
/// refused, plainly. Plain connections stay plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn sslmode_require_is_tls_verified_against_sslrootcert() {
    let Some(url) = fresh_db("tls").await else { return };
    let Ok(ca) = std::env::var("AGENTCRON_TEST_PG_CA") else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED store_pg::tls: the test server has no TLS (openssl missing where .ci/with-postgres ran)"
        );
        return;
    };
    let plain = PgStore::connect(&url, None).await.expect("plain");
    assert!(!plain.encrypted().await.expect("ssl"), "no TLS unless asked");
    let tls_url = format!("{url}?sslmode=require&sslrootcert={ca}");
    let store = PgStore::connect(&tls_url, None).await.expect("TLS with the CA");
    assert!(store.encrypted().await.expect("ssl"), "sslmode=require is TLS");
    let id = opened(&store, 1).await;
    claimed(&store, id, "a:1").await;

    let e = PgStore::connect(&format!("{url}?sslmode=require&connect_timeout=5"), None)
        .await
        .expect_err("an unknown CA");
    let text = e.to_string();
    assert!(
        text.starts_with("cannot connect to postgres://postgres@127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("invalid peer certificate"),
        "the why is said: {text}"
    );

    // The read verbs over TLS.
    let (code, text) = agentcron(&[
        "--config",
        "/nonexistent/agentcron.toml",
        "--db",
        &tls_url,
        "runs",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("\"schedule\": \"s\""), "{text}");
}

/// The chunk forms: four schedulers open the same 400 windows already
/// claimed, 50 per statement, each walking them from a different place —
/// every window opened and claimed by exactly one, every fence new; then
/// each completes its own in one statement, and a completion under an old
/// fence inside such a chunk is refused alone, with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn chunks_of_windows_are_opened_claimed_once_and_completed_under_their_fences() {
    let Some(url) = fresh_db("chunks").await else {
        return;
    };
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let store = PgStore::connect(&url, None).await.expect("store");
                let mut all: Vec<NewWindow> = (0..400).map(|k| window("s", k)).collect();
                all.rotate_left(i * 100);
                let mut won = vec![];
                for chunk in all.chunks(50) {
                    won.extend(
                        store
                            .open_claimed(chunk, &format!("host{i}:1"), LEASE)
                            .await
                            .expect("open claimed"),
                    );
                }
                let ended: Vec<_> = won.iter().map(|o| (&o.lease, RunState::Succeeded)).collect();
                let refused = store.complete_all(&ended, "done").await.expect("complete");
                assert!(refused.is_empty(), "{refused:?}");
                won
            })
        })
        .collect();
    let mut windows = HashSet::new();
    let mut fences = HashSet::new();
    for t in tasks {
        for o in t.await.expect("join") {
            assert!(
                windows.insert(o.window_key.clone()),
                "{} opened twice",
                o.window_key
            );
            assert!(fences.insert(o.lease.fence), "fence {} twice", o.lease.fence);
            assert_eq!((o.tenant.as_str(), o.schedule.as_str()), ("default", "s"));
        }
    }
    assert_eq!(windows.len(), 400);
    let c = raw(&url).await;
    let left: i64 = scalar(&c, "SELECT count(*) FROM runs WHERE state <> 'succeeded'").await;
    assert_eq!(left, 0, "every run completed");

    // A stale completion inside a chunk.
    let store = PgStore::connect(&url, None).await.expect("store");
    let won = store
        .open_claimed(&[window("t", 1), window("t", 2)], "a:1", LEASE)
        .await
        .expect("open claimed");
    assert_eq!(won.len(), 2);
    let mut stale = won[1].lease.clone();
    stale.fence -= 1;
    let before = row(&c, stale.run_id).await;
    let refused = store
        .complete_all(
            &[
                (&won[0].lease, RunState::Succeeded),
                (&stale, RunState::Succeeded),
            ],
            "done",
        )
        .await
        .expect("complete");
    assert_eq!(
        refused,
        vec![(
            stale.run_id,
            Refused::Fence {
                run: stale.run_id,
                expected: stale.fence,
                actual: won[1].lease.fence
            }
        )]
    );
    assert_eq!(row(&c, won[0].lease.run_id).await.0, "succeeded");
    assert_eq!(row(&c, stale.run_id).await, before, "the stale one untouched");
    // Opening them again opens nothing.
    let again = store
        .open_claimed(&[window("t", 1), window("t", 2)], "b:2", LEASE)
        .await
        .expect("open claimed");
    assert!(again.is_empty());
}

/// A database error is said with PostgreSQL's own words (tokio-postgres keeps
/// them in the error's source), not as a bare "db error".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_database_error_says_what_postgresql_said() {
    let Some((_, store, c)) = ledger("db_error").await else {
        return;
    };
    c.batch_execute("DROP TABLE steps, approvals, attempts, runs")
        .await
        .expect("drop");
    let e = store
        .open_window(&window("s", 1))
        .await
        .expect_err("no runs table");
    let text = e.to_string();
    assert!(
        text.contains("relation \"runs\" does not exist"),
        "{text} / {e:?}"
    );
}

/// `[scheduler] database = "postgres://…"` is kept as written (not made a
/// file next to the config) and used by the verbs, with the password from
/// `[scheduler] password_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn the_configs_database_may_name_a_postgresql_ledger() {
    let Some((url, store, _)) = ledger("config_url").await else {
        return;
    };
    let id = opened(&store, 1).await;
    claimed(&store, id, "a:1").await;
    let dir = tempfile::tempdir().expect("dir");
    let config = |password_file: &str| {
        format!(
            "[scheduler]\ndatabase = \"{url}\"\npassword_file = \"{password_file}\"\n\n\
             [agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n\n\
             [[schedule]]\nid = \"s\"\nagent = \"a\"\ncron = \"0 9 * * *\"\n"
        )
    };
    let file = dir.path().join("agentcron.toml");
    std::fs::write(dir.path().join("pg-password"), "secret\n").expect("password");
    std::fs::write(&file, config("pg-password")).expect("config");
    let path = file.to_str().expect("path");
    let (code, text) = agentcron(&["--config", path, "runs", "--json"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("\"schedule\": \"s\""), "{text}");
    let (code, text) = agentcron(&["--config", path, "status", "--json"]);
    assert!(text.contains("\"running\": 1"), "{code:?} {text}");

    let (code, text) = agentcron(&["--config", path, "pause", "s", "--reason", "maintenance"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = agentcron(&["--config", path, "status", "--json"]);
    assert!(text.contains("maintenance"), "{code:?} {text}");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["agentcron.toml", "pg-password"],
        "no file made of the URL"
    );

    // A password file that cannot be read is said, naming it (the URL has
    // no password; PGPASSWORD would be used first, and is not set here).
    if std::env::var_os("PGPASSWORD").is_none() {
        std::fs::write(&file, config("missing-password")).expect("config");
        let (code, text) = agentcron(&["--config", path, "runs"]);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("cannot read password_file"), "{text}");
        assert!(text.contains("missing-password"), "{text}");
    }
}

/// A read verb on a database that is not a ledger says so, and on one it
/// may not read says what PostgreSQL said — not "no ledger there".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_read_verb_tells_an_empty_database_from_a_forbidden_one() {
    let Some(url) = fresh_db("not_ledger").await else {
        return;
    };
    let (code, text) = agentcron(&["--config", "/nonexistent/agentcron.toml", "--db", &url, "runs"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("no agentcron ledger there"), "{text}");

    PgStore::connect(&url, None).await.expect("migrate");
    let c = raw(&url).await;
    let role = format!("reader_{}", std::process::id());
    c.batch_execute(&format!("DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"))
        .await
        .expect("role");
    c.batch_execute(&format!("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}"))
        .await
        .expect("revoke");
    let base = url.split_once("://").map(|(_, rest)| rest).expect("url");
    let host_db = base.split_once('@').map_or(base, |(_, h)| h);
    let as_role = format!("postgres://{role}@{host_db}");
    let (code, text) = agentcron(&[
        "--config",
        "/nonexistent/agentcron.toml",
        "--db",
        &as_role,
        "runs",
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("permission denied"), "{text}");
    drop(c);
}

/// `db copy` misuse is said plainly and writes nothing: a `--to` that is no
/// PostgreSQL URL, a source that does not exist, and another program's
/// SQLite file (refused before anything is read from it). None of these
/// needs a server.
#[test]
fn db_copy_refuses_bad_input_plainly() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("ledger.db");
    let missing = file.to_str().expect("path");
    let to = "postgres://ops:hunter2@127.0.0.1:9/ledger";

    let (code, text) = agentcron(&["db", "copy", "--from", missing, "--to", "/tmp/other.db"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--to must be a PostgreSQL URL"), "{text}");

    let (code, text) = agentcron(&["db", "copy", "--from", missing, "--to", to]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("no database at"), "{text}");

    let conn = rusqlite::Connection::open(&file).expect("sqlite");
    conn.execute_batch("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (7);")
        .expect("foreign");
    drop(conn);
    let before = std::fs::read(&file).expect("bytes");
    for extra in [vec!["--dry-run"], vec![]] {
        let mut args = vec!["db", "copy", "--from", missing, "--to", to];
        args.extend(extra.iter().copied());
        let (code, text) = agentcron(&args);
        assert_eq!(code, Some(2), "{extra:?}: {text}");
        assert!(text.contains("not an agentcron database"), "{extra:?}: {text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
    assert_eq!(std::fs::read(&file).expect("bytes"), before, "left untouched");

    // Misuse of the command line itself: exit 2 from the parser.
    let (code, _) = agentcron(&["db", "copy", "--from", missing]);
    assert_eq!(code, Some(2));
}

/// A scheduler's connection that PostgreSQL drops (a restart, a failover, an
/// idle timeout) is made again at the next transaction; a transaction it was
/// inside is lost whole (an error, nothing of it committed), never finished
/// on the new connection outside its lock.
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_lost_connection_is_made_again_and_a_transaction_it_held_is_lost_whole() {
    use agentcron::store::Store;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let Some(url) = rt.block_on(fresh_db("reconnect")) else {
        return;
    };
    let store = Store::open(std::path::Path::new(&url)).expect("store");
    let drop_others = || {
        rt.block_on(async {
            let c = raw(&url).await;
            c.batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
            .expect("terminate");
        })
    };
    let pause = |on: bool| {
        store.write(|tx| {
            tx.set_switch("pause:s", on, "test", "reconnect", chrono::Utc::now())
                .map(drop)
        })
    };
    pause(true).expect("first write");
    drop_others();
    pause(false).expect("a write after the connection was dropped");
    let on = store.read(|tx| tx.switch("pause:s")).expect("read");
    assert!(!on.expect("switch").on);

    // Dropped inside a transaction: that transaction fails, nothing of it
    // lands, and the next one runs on a new connection.
    let failed = store.write(|tx| {
        tx.set_switch("pause:s", true, "test", "lost", chrono::Utc::now())?;
        drop_others();
        tx.set_switch("pause:t", true, "test", "lost", chrono::Utc::now())
    });
    assert!(failed.is_err(), "{failed:?}");
    let (s, t) = store
        .read(|tx| Ok((tx.switch("pause:s")?, tx.switch("pause:t")?)))
        .expect("read after");
    assert!(
        !s.expect("switch").on,
        "the lost transaction's first write did not land"
    );
    assert!(t.is_none(), "nor its second");
}

/// A connection ended while a statement is first prepared on it (a server
/// restarting, an administrator's termination) is a transient error, as it
/// is at any other step of a statement: the transaction is lost, the
/// scheduler logs it and goes on (issue 44, 6), and the next transaction
/// runs on a new connection.
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_connection_lost_while_a_statement_is_prepared_is_transient() {
    use agentcron::store::Store;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let Some(url) = rt.block_on(fresh_db("lost_in_prepare")) else {
        return;
    };
    let store = Store::open(std::path::Path::new(&url)).expect("store");
    let terminate_others = || {
        rt.block_on(async {
            let c = raw(&url).await;
            c.batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
            .expect("terminate");
        })
    };
    let lost = store.write(|tx| {
        tx.set_switch("pause:s", true, "test", "prepare", chrono::Utc::now())?;
        terminate_others();
        // Asked of this connection for the first time: prepared now.
        tx.backlogs().map(drop)
    });
    let e = lost.expect_err("the connection was ended");
    assert!(e.is_transient(), "{e} / {e:?}");
    let on = store
        .read(|tx| tx.switch("pause:s"))
        .expect("read on a new connection");
    assert!(on.is_none(), "nothing of the lost transaction landed");
}

/// A scheduler on a PostgreSQL ledger schedules on the database's clock: the
/// offset it measures to this machine's is the round trip's error (here,
/// both clocks are this machine's); an embedded ledger has none.
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn the_database_clock_is_measured_against_this_machines() {
    use agentcron::store::Store;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let Some(url) = rt.block_on(fresh_db("db_clock")) else {
        return;
    };
    let store = Store::open(std::path::Path::new(&url)).expect("store");
    let reading = store
        .database_offset_ms()
        .expect("measured")
        .expect("PostgreSQL has one");
    // The same machine's clock: the offset is within the reading's error.
    assert!(
        reading.offset_ms.abs() <= reading.round_trip_ms / 2 + 1,
        "{reading:?}"
    );
    assert!(reading.round_trip_ms < 1_000, "{reading:?}");
    let file = tempfile::tempdir().expect("dir");
    let embedded = Store::open(&file.path().join("ledger.db")).expect("file");
    assert_eq!(embedded.database_offset_ms().expect("none"), None);
}
