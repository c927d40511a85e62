//! `agentcron db copy`: an embedded ledger moved into an empty PostgreSQL
//! one, table for table and row for row (runs, attempts, steps, events,
//! switches, approvals, maintenance, posted events, schedule state, backlog,
//! the scheduler registry, config and schedule versions), ids kept, in one
//! transaction (each table streamed with `COPY … FROM STDIN BINARY`): a copy
//! that fails leaves the target as it was.

use super::{PgError, PgStore};
use crate::store::{Store, StoreError};
use rusqlite::types::Value;
use std::path::Path;
use tokio_postgres::types::{ToSql, Type};

/// The ledger's tables in an order that satisfies their references. Both
/// schemas have each with the same columns (`run_counts` is the target's
/// own: written from the copied runs; the embedded `fencing` row becomes the
/// target's).
pub const TABLES: &[&str] = &[
    "runs",
    "attempts",
    "steps",
    "events",
    "approvals",
    "schedule_state",
    "switches",
    "maintenance",
    "posted_events",
    "catchup_backlog",
    "schedulers",
    "config_versions",
    "schedule_versions",
    "config_current",
    "schedule_current",
];

/// Identity columns whose sequences continue after the copied ids.
const IDENTITIES: &[(&str, &str)] = &[
    ("runs", "id"),
    ("steps", "id"),
    ("events", "id"),
    ("approvals", "id"),
    ("maintenance", "id"),
    ("posted_events", "seq"),
    ("config_versions", "version"),
];

/// Why a copy did not happen (or failed and was rolled back).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{0}")]
    Source(#[from] StoreError),
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    #[error("{0}")]
    Target(#[from] PgError),
    #[error("{shown} already holds a ledger ({what}); db copy only fills an empty one")]
    NotEmpty { shown: String, what: String },
}

/// Rows per table, in [`TABLES`] order.
pub type Counts = Vec<(&'static str, i64)>;

/// The rows of each table of the embedded ledger at `from` (checked to be
/// agentcron's and of this build's schema first).
pub fn source_counts(from: &Path) -> Result<Counts, CopyError> {
    let conn = open_source(from)?;
    TABLES
        .iter()
        .map(|t| {
            conn.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .map(|n| (*t, n))
                .map_err(|e| read_error(from, e))
        })
        .collect()
}

fn read_error(from: &Path, e: rusqlite::Error) -> CopyError {
    CopyError::Read {
        path: from.display().to_string(),
        message: e.to_string(),
    }
}

/// The source read-only, after the store's own checks (another program's
/// file, a newer schema: refused, untouched). An older schema is refused
/// too: open it with this build once (any verb that writes) to migrate it.
fn open_source(from: &Path) -> Result<rusqlite::Connection, CopyError> {
    drop(Store::open_read_only(from)?);
    let conn = rusqlite::Connection::open_with_flags(from, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| read_error(from, e))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| read_error(from, e))?;
    if version != crate::store::SCHEMA_VERSION {
        return Err(CopyError::Read {
            path: from.display().to_string(),
            message: format!(
                "its schema is {version}, this build copies schema {}; open it once with this build \
                 (e.g. `agentcron --db FILE status`) to migrate it first",
                crate::store::SCHEMA_VERSION
            ),
        });
    }
    Ok(conn)
}

/// Copies the ledger at `from` into `to`, which must hold no ledger rows
/// yet. Returns the rows copied per table.
pub async fn copy(from: &Path, to: &PgStore) -> Result<Counts, CopyError> {
    let src = open_source(from)?;
    let from = from.to_path_buf();
    let shown = to.shown().to_string();
    to.session()
        .with_client(move |c| Box::pin(async move { copy_into(&src, &from, c.client, &shown).await }))
        .await
}

/// [`copy`] on the target's connection.
async fn copy_into(
    src: &rusqlite::Connection,
    from: &Path,
    client: &mut tokio_postgres::Client,
    shown: &str,
) -> Result<Counts, CopyError> {
    let tx = client.transaction().await.map_err(PgError::from)?;
    // Nobody else writes while the copy checks and fills the tables.
    tx.batch_execute(&format!("LOCK TABLE {} IN EXCLUSIVE MODE", TABLES.join(", ")))
        .await
        .map_err(PgError::from)?;
    for t in TABLES {
        let n: i64 = tx
            .query_one(&format!("SELECT count(*) FROM {t}"), &[])
            .await
            .map_err(PgError::from)?
            .get(0);
        if n > 0 {
            return Err(CopyError::NotEmpty {
                shown: shown.to_string(),
                what: format!("{n} row(s) in {t}"),
            });
        }
    }
    let mut counts = Counts::new();
    for t in TABLES {
        let columns: Vec<String> = {
            let mut stmt = src
                .prepare(&format!("SELECT name FROM pragma_table_info('{t}') ORDER BY cid"))
                .map_err(|e| read_error(from, e))?;
            stmt.query_map([], |r| r.get(0))
                .and_then(|rows| rows.collect())
                .map_err(|e| read_error(from, e))?
        };
        let quoted: Vec<String> = columns.iter().map(|c| format!("\"{c}\"")).collect();
        // COPY … FROM STDIN BINARY: a stream of rows, not a statement each.
        let types: Vec<Type> = tx
            .prepare(&format!("SELECT {} FROM {t} LIMIT 0", quoted.join(", ")))
            .await
            .map_err(PgError::from)?
            .columns()
            .iter()
            .map(|c| c.type_().clone())
            .collect();
        let sink = tx
            .copy_in(&format!("COPY {t} ({}) FROM STDIN BINARY", quoted.join(", ")))
            .await
            .map_err(PgError::from)?;
        let writer = tokio_postgres::binary_copy::BinaryCopyInWriter::new(sink, &types);
        tokio::pin!(writer);
        let mut select = src
            .prepare(&format!("SELECT {} FROM {t}", quoted.join(", ")))
            .map_err(|e| read_error(from, e))?;
        let mut rows = select.query([]).map_err(|e| read_error(from, e))?;
        let mut n = 0i64;
        while let Some(row) = rows.next().map_err(|e| read_error(from, e))? {
            let mut values: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(types.len());
            for (i, ty) in types.iter().enumerate() {
                let v: Value = row.get(i).map_err(|e| read_error(from, e))?;
                values.push(to_pg(v, ty).map_err(|message| CopyError::Read {
                    path: from.display().to_string(),
                    message: format!("{t}.{}: {message}", columns[i]),
                })?);
            }
            let params: Vec<&(dyn ToSql + Sync)> = values.iter().map(|b| b.as_ref() as _).collect();
            writer.as_mut().write(&params).await.map_err(PgError::from)?;
            n += 1;
        }
        writer.finish().await.map_err(PgError::from)?;
        counts.push((*t, n));
    }
    // The target's run counts from its runs; the fencing counter and every
    // identity continue after the copied values.
    tx.batch_execute(
        "UPDATE run_counts SET n = (SELECT count(*) FROM runs WHERE runs.state = run_counts.state)",
    )
    .await
    .map_err(PgError::from)?;
    let fence: i64 = src
        .query_row("SELECT COALESCE(MAX(token), 0) FROM fencing", [], |r| r.get(0))
        .map_err(|e| read_error(from, e))?;
    let used: i64 = tx
        .query_one("SELECT COALESCE(MAX(fencing_token), 0) FROM runs", &[])
        .await
        .map_err(PgError::from)?
        .get(0);
    let fence = fence.max(used);
    tx.execute("UPDATE fencing SET token = $1 WHERE id = 1", &[&fence])
        .await
        .map_err(PgError::from)?;
    for (t, c) in IDENTITIES {
        tx.batch_execute(&format!(
            "SELECT setval(pg_get_serial_sequence('{t}', '{c}'), COALESCE((SELECT MAX({c}) FROM {t}), 0) + 1, false)"
        ))
        .await
        .map_err(PgError::from)?;
    }
    tx.commit().await.map_err(PgError::from)?;
    Ok(counts)
}

/// An embedded value as the target column's type wants it (SQLite keeps a
/// value's own type; PostgreSQL's columns have one). A value that does not
/// fit is an error, never a silent NULL.
fn to_pg(v: Value, ty: &Type) -> Result<Box<dyn ToSql + Sync + Send>, String> {
    let misfit = |v: &Value| Err(format!("{v:?} does not fit a {ty} column"));
    Ok(if *ty == Type::INT8 {
        Box::new(match v {
            Value::Null => None,
            Value::Integer(i) => Some(i),
            Value::Real(f) if f.fract() == 0.0 => Some(f as i64),
            other => return misfit(&other),
        })
    } else if *ty == Type::FLOAT8 {
        Box::new(match v {
            Value::Null => None,
            Value::Integer(i) => Some(i as f64),
            Value::Real(f) => Some(f),
            other => return misfit(&other),
        })
    } else if *ty == Type::TEXT {
        Box::new(match v {
            Value::Null => None,
            Value::Integer(i) => Some(i.to_string()),
            Value::Real(f) => Some(f.to_string()),
            Value::Text(t) => Some(t),
            other => return misfit(&other),
        })
    } else {
        return misfit(&v);
    })
}
