//! The sqlite_query gate against a real temporary database.

#[path = "fixtures/gates/support.rs"]
#[allow(dead_code)]
mod support;

use agentcron::config::model::{CompareOp, Expect, GateKind, OnFail};
use agentcron::gates::{self, GateResult, GateVerdict};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::*;

fn warehouse(dir: &Path) -> PathBuf {
    let path = dir.join("warehouse.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE orders (day TEXT, amount INTEGER);
         INSERT INTO orders VALUES ('2026-06-05', 10), ('2026-06-05', 20), ('2026-06-04', 5);",
    )
    .unwrap();
    path
}

fn query(env: &Env, database: &Path, sql: &str, expect: Expect) -> GateResult {
    let kind = GateKind::SqliteQuery {
        database: database.to_path_buf(),
        query: sql.into(),
        expect,
    };
    let gate = gates::build(&gate("upstream_partition_ready", kind));
    gates::evaluate(gate.as_ref(), OnFail::Fail, &env.ctx())
}

const PARTITION: &str = "SELECT count(*) FROM orders WHERE day = date(:window_start, '-1 day')";

#[test]
fn passes_when_yesterdays_partition_has_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let r = query(&Env::new(), &db, PARTITION, num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    assert_eq!(r.reason, "count(*) = 2 (expected > 0)");
    assert_eq!(r.kind, "sqlite_query");
}

#[test]
fn waits_with_the_measured_value_when_unmet() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let mut env = Env::new();
    env.window_start = utc("2026-06-08T01:00:00Z");
    let r = query(&env, &db, PARTITION, num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "count(*) = 0 (expected > 0)");
}

#[test]
fn binds_window_key_start_and_end_in_a_format_date_functions_parse() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let sql = "SELECT :window_key || '|' || date(:window_start) || '|' || :window_start || '|' \
               || datetime(:window_end, '+1 minute')";
    let want = "2026-06-06|2026-06-06|2026-06-06 01:00:00|2026-06-06 02:01:00";
    let r = query(&Env::new(), &db, sql, text(CompareOp::Eq, want));
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
}

#[test]
fn binds_only_the_parameters_present_and_accepts_at_and_dollar_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let env = Env::new();
    let r = query(&env, &db, "SELECT count(*) FROM orders", num(CompareOp::Eq, 3.0));
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    let r = query(
        &env,
        &db,
        "SELECT @window_key = $window_key",
        boolean(CompareOp::Eq, true),
    );
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
}

#[test]
fn unknown_or_positional_parameters_wait_with_an_explanation() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let env = Env::new();
    let r = query(&env, &db, "SELECT :day", num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.starts_with("unknown parameter :day"), "{}", r.reason);
    let r = query(&env, &db, "SELECT ?", num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("positional"), "{}", r.reason);
}

#[test]
fn sql_errors_missing_databases_and_no_rows_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let env = Env::new();

    let r = query(&env, &db, "SELECT count(*) FROM nope", num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("no such table: nope"), "{}", r.reason);

    let missing = dir.path().join("missing.db");
    let r = query(&env, &missing, "SELECT 1", num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(
        r.reason
            .starts_with(&format!("cannot open {}", missing.display())),
        "{}",
        r.reason
    );
    assert!(!missing.exists(), "a read-only gate must not create the database");

    let r = query(
        &env,
        &db,
        "SELECT day FROM orders WHERE 0",
        text(CompareOp::Eq, "x"),
    );
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "the query returned no rows (expected == 'x')");

    let r = query(&env, &db, "SELECT 'many'", num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "'many': type mismatch: got text 'many', expected > 0");
}

#[test]
fn the_database_is_opened_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let r = query(
        &Env::new(),
        &db,
        "DELETE FROM orders RETURNING 1",
        num(CompareOp::Gt, 0.0),
    );
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("readonly"), "{}", r.reason);
    let conn = Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
}

#[test]
fn a_query_running_past_the_timeout_is_interrupted_and_waits() {
    let dir = tempfile::tempdir().unwrap();
    let db = warehouse(dir.path());
    let mut env = Env::new();
    env.timeout = Duration::from_millis(300);
    // Never ends on its own.
    let endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
    let r = query(&env, &db, endless, num(CompareOp::Gt, 0.0));
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "timed out after 300ms");
}
