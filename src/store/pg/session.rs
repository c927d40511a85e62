//! A PostgreSQL connection the embedded store's code can drive as it drives
//! SQLite: synchronously, statement by statement, inside one transaction at
//! a time. The connection lives on a thread of its own with a runtime of its
//! own, so a caller may block on it from anywhere, a tokio worker included
//! (where `block_on` would panic). Statements are the store's PostgreSQL text
//! (`store::pg::sql`), prepared once per connection; parameters and rows
//! travel as SQLite values, converted to and from the types PostgreSQL
//! inferred.

use super::{PgError, Tls, config};
use crate::store::{Result, StoreError};
use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;
use tokio_postgres::types::{ToSql, Type};

/// How a writing transaction begins: it takes the advisory lock every
/// writing transaction holds (`0x6167656e74637277`, "agentcrw"). Writers on
/// one ledger take turns, as SQLite's `BEGIN IMMEDIATE` makes them on one
/// file, so the store's read-then-write steps see what they change. Claims,
/// renewals, completions and takeovers repeat their expected state in their
/// `WHERE` besides, so a writer acting on something it read before its turn
/// changes nothing.
pub(crate) const BEGIN_WRITE: &str = "BEGIN; SELECT pg_advisory_xact_lock(7018690069353689719)";
/// The ledger's write sequence: moved on by every transaction that changed
/// rows, so a connection can tell whether anyone else wrote since its own
/// last commit (SQLite's `PRAGMA data_version`).
pub(crate) const WRITE_SEQ: &str = "SELECT value FROM agentcron_meta WHERE key = 'write_seq'";
pub(crate) const BUMP_WRITE_SEQ: &str =
    "UPDATE agentcron_meta SET value = value + 1 WHERE key = 'write_seq' RETURNING value";

/// The database's clock, in ms since the epoch.
pub(crate) const NOW_MS: &str = "SELECT agentcron_now_ms()";

/// How a reading transaction begins: one snapshot for all its statements.
pub(crate) const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

type Job = Box<dyn FnOnce(&mut Worker) + Send>;

/// The thread that owns the connection.
struct Worker {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
    prepared: HashMap<String, tokio_postgres::Statement>,
    shown: String,
    /// How to connect again when the connection is lost.
    cfg: tokio_postgres::Config,
    tls: Tls,
    /// Inside a transaction (`BEGIN` sent, no `COMMIT` / `ROLLBACK` yet): a
    /// connection lost now loses the transaction, and nothing may run on a
    /// new connection until it is ended (the statements after would run
    /// outside it, and outside the write lock).
    in_tx: bool,
}

/// Whether `e` says the connection is gone: closed, broken under it (an
/// I/O error: reset, broken pipe), or ended by the server (SQLSTATE class
/// 08, connection exception, or 57P, operator intervention: an
/// administrator's termination, a shutdown, a server not yet accepting
/// connections).
fn lost(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code()
            .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"))
        || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// Whether `e` leaves the work to be tried again: the connection lost, a
/// lock not had in time (55P03), the session ended for idling in a
/// transaction (25P03), a serialization failure or deadlock (40001, 40P01).
fn transient(e: &tokio_postgres::Error) -> bool {
    lost(e)
        || e.code()
            .is_some_and(|c| matches!(c.code(), "55P03" | "25P03" | "40001" | "40P01"))
}

/// A new connection to `cfg`, its driver spawned on the current runtime.
async fn open_client(
    cfg: &tokio_postgres::Config,
    tls: &Tls,
    shown: &str,
) -> std::result::Result<tokio_postgres::Client, PgError> {
    let connect_error = |e: &dyn std::error::Error| PgError::Connect {
        shown: shown.to_string(),
        message: super::with_causes(e),
    };
    let client = match tls {
        Tls::None => {
            let (client, conn) = cfg
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| connect_error(&e))?;
            tokio::spawn(conn);
            client
        }
        Tls::Rustls(tls) => {
            let (client, conn) = cfg.connect(tls.clone()).await.map_err(|e| connect_error(&e))?;
            tokio::spawn(conn);
            client
        }
    };
    client
        .batch_execute(SESSION_LIMITS)
        .await
        .map_err(|e| connect_error(&e))?;
    Ok(client)
}

/// What one scheduler may hold up the others for. A session idle inside a
/// transaction for 5 s (a process stopped, a host frozen, a partition) is
/// ended by the server, which rolls its transaction back and frees the
/// write lock; a transaction that waits 10 s for a lock gives up (the
/// store says so, and the engine tries again at its next tick), as SQLite's
/// busy timeout does. The engine does no slow work inside a transaction.
const SESSION_LIMITS: &str = "SET idle_in_transaction_session_timeout = '5s'; SET lock_timeout = '10s'";

/// One connection to a ledger, driven synchronously.
pub(crate) struct PgSession {
    jobs: mpsc::Sender<Job>,
    shown: String,
    /// Rows changed by this session's statements (SQLite's `total_changes`).
    changes: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for PgSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSession").field("db", &self.shown).finish()
    }
}

/// A result: the rows (each its columns' values) and how many rows changed.
pub(crate) type Rows = (Vec<Vec<Value>>, u64);

impl PgSession {
    /// Connects to `url` and brings its schema to this build's (or refuses a
    /// newer or foreign one, changing nothing).
    /// Only reading (`migrate` false: read verbs, `--read-only` consoles), a
    /// database that is not a ledger of this build's schema is refused, and
    /// nothing is written to it.
    pub(crate) fn connect(
        url: &str,
        password_file: Option<&Path>,
        migrate: bool,
    ) -> std::result::Result<PgSession, PgError> {
        let (cfg, shown, tls) = config(url, password_file)?;
        let (ready_tx, ready_rx) = mpsc::sync_channel::<std::result::Result<(), PgError>>(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let name = shown.clone();
        std::thread::Builder::new()
            .name("agentcron-pg".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(PgError::Connect {
                            shown: name.clone(),
                            message: super::with_causes(&e),
                        }));
                        return;
                    }
                };
                let client = rt.block_on(async {
                    let mut client = open_client(&cfg, &tls, &name).await?;
                    if migrate {
                        super::schema::migrate(&mut client, &name).await?;
                    } else {
                        super::schema::check_current(&client, &name).await?;
                    }
                    Ok::<_, PgError>(client)
                });
                let client = match client {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                let mut worker = Worker {
                    rt,
                    client,
                    prepared: HashMap::new(),
                    shown: name,
                    cfg,
                    tls,
                    in_tx: false,
                };
                while let Ok(job) = queue.recv() {
                    job(&mut worker);
                }
            })
            .map_err(|e| PgError::Connect {
                shown: shown.clone(),
                message: e.to_string(),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(PgSession {
                jobs,
                shown,
                changes: Default::default(),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(PgError::Connect {
                shown,
                message: "the connection's thread ended".into(),
            }),
        }
    }

    fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Worker) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = self.jobs.send(Box::new(move |w: &mut Worker| {
            let _ = reply.send(job(w));
        }));
        if sent.is_err() {
            return Err(StoreError::Pg(format!(
                "{}: the connection's thread ended",
                self.shown
            )));
        }
        answer
            .recv()
            .map_err(|_| StoreError::Pg(format!("{}: the connection's thread ended", self.shown)))?
    }

    /// Runs the transaction-control statements (`BEGIN …`, `COMMIT`,
    /// `ROLLBACK`).
    pub(crate) fn batch(&self, sql: &'static str) -> Result<()> {
        self.run(move |w| w.control(sql))
    }

    /// Runs one statement with `params`: its rows and how many it changed.
    pub(crate) fn query(&self, sql: std::borrow::Cow<'static, str>, params: Vec<Value>) -> Result<Rows> {
        let out = self.run(move |w| w.query(&sql, params))?;
        self.changes
            .fetch_add(out.1, std::sync::atomic::Ordering::Relaxed);
        Ok(out)
    }

    /// Rows changed by this session's statements so far.
    pub(crate) fn total_changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `f` on the session's thread with its connection (connected
    /// again first if it was lost), for PostgreSQL code written against the
    /// client itself: the set-based claim protocol of [`super::PgStore`] and
    /// `db copy`'s `COPY`. Awaited without blocking the caller's runtime.
    /// Not for a session a [`crate::store::Store`] runs transactions on.
    pub(crate) async fn with_client<T, E>(
        &self,
        f: impl for<'c> FnOnce(PgConn<'c>) -> LocalFuture<'c, std::result::Result<T, E>> + Send + 'static,
    ) -> std::result::Result<T, E>
    where
        T: Send + 'static,
        E: From<PgError> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let shown = self.shown.clone();
        let sent = self.jobs.send(Box::new(move |w: &mut Worker| {
            let out = match w.ready() {
                Ok(()) => {
                    let Worker {
                        rt, client, prepared, ..
                    } = w;
                    rt.block_on(f(PgConn { client, prepared }))
                }
                Err(e) => Err(E::from(PgError::Connect {
                    shown: w.shown.clone(),
                    message: e.to_string(),
                })),
            };
            let _ = reply.send(out);
        }));
        let ended = || {
            E::from(PgError::Connect {
                shown: shown.clone(),
                message: "the connection's thread ended".into(),
            })
        };
        if sent.is_err() {
            return Err(ended());
        }
        answer.await.unwrap_or_else(|_| Err(ended()))
    }
}

/// A future run on the session's own thread (it need not be `Send`).
pub(crate) type LocalFuture<'c, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'c>>;

/// The session's connection, lent to [`PgSession::with_client`]: the client,
/// and the statements prepared on it (shared with the store's).
pub(crate) struct PgConn<'c> {
    pub(crate) client: &'c mut tokio_postgres::Client,
    prepared: &'c mut HashMap<String, tokio_postgres::Statement>,
}

impl PgConn<'_> {
    /// `sql` prepared on this connection, once.
    pub(crate) async fn prepare_cached(
        &mut self,
        sql: &str,
    ) -> std::result::Result<tokio_postgres::Statement, tokio_postgres::Error> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await?;
        self.prepared.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

impl Worker {
    /// The store's error for `e`: [`StoreError::Unavailable`] when the work
    /// may be tried again (see [`transient`]), whichever step of a statement
    /// met it — preparing it included, where a server restarting ends the
    /// connection as often as anywhere.
    fn error(&self, e: &tokio_postgres::Error) -> StoreError {
        let text = format!("{}: {}", self.shown, super::with_causes(e));
        // The server's disk is full (53100): held and retried, as SQLite's.
        if e.code().is_some_and(|c| c.code() == "53100") {
            return StoreError::DiskFull {
                path: self.shown.clone(),
                message: super::with_causes(e),
            };
        }
        if transient(e) || self.client.is_closed() {
            StoreError::Unavailable(text)
        } else {
            StoreError::Pg(text)
        }
    }

    /// The connection, connected again if it was lost outside a
    /// transaction; lost inside one, the transaction is lost: an error
    /// until it is ended.
    fn ready(&mut self) -> Result<()> {
        if !self.client.is_closed() {
            return Ok(());
        }
        if self.in_tx {
            return Err(StoreError::Unavailable(format!(
                "{}: the connection was lost inside a transaction",
                self.shown
            )));
        }
        self.reconnect()
    }

    /// A new connection in place of this one (its prepared statements go).
    fn reconnect(&mut self) -> Result<()> {
        let client = self
            .rt
            .block_on(open_client(&self.cfg, &self.tls, &self.shown))
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        self.client = client;
        self.prepared.clear();
        Ok(())
    }

    fn control(&mut self, sql: &'static str) -> Result<()> {
        let begins = sql.starts_with("BEGIN");
        if !begins && self.client.is_closed() {
            // The transaction went with the connection: a rollback is done,
            // a commit failed.
            let was = std::mem::replace(&mut self.in_tx, false);
            return if sql == "ROLLBACK" || !was {
                Ok(())
            } else {
                Err(StoreError::Unavailable(format!(
                    "{}: the connection was lost inside a transaction",
                    self.shown
                )))
            };
        }
        if begins {
            self.in_tx = false;
            self.ready()?;
        }
        let mut out = self.rt.block_on(self.client.batch_execute(sql));
        if begins && out.as_ref().is_err_and(|e| self.client.is_closed() || lost(e)) {
            // Lost since the last statement (noticed only now): nothing
            // had begun, so begin on a new connection.
            self.reconnect()?;
            out = self.rt.block_on(self.client.batch_execute(sql));
        }
        let out = out.map_err(|e| self.error(&e));
        self.in_tx = begins && out.is_ok();
        out
    }

    fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Rows> {
        self.ready()?;
        let stmt = match self.prepared.get(sql) {
            Some(s) => s.clone(),
            None => {
                let s = self
                    .rt
                    .block_on(self.client.prepare(sql))
                    .map_err(|e| match self.error(&e) {
                        // A statement PostgreSQL refuses is said with its text.
                        StoreError::Pg(text) => StoreError::Pg(format!("{text} in: {sql}")),
                        transient => transient,
                    })?;
                self.prepared.insert(sql.to_string(), s.clone());
                s
            }
        };
        let boxed = params
            .into_iter()
            .zip(stmt.params())
            .map(|(v, ty)| param(v, ty))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref() as _).collect();
        if stmt.columns().is_empty() {
            let n = self
                .rt
                .block_on(self.client.execute(&stmt, &refs))
                .map_err(|e| self.error(&e))?;
            return Ok((Vec::new(), n));
        }
        let rows = self
            .rt
            .block_on(self.client.query(&stmt, &refs))
            .map_err(|e| self.error(&e))?;
        // A query's rows are rows changed only when it writes (`… RETURNING`).
        let reads = sql
            .trim_start()
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case("SELECT"));
        let n = if reads { 0 } else { rows.len() as u64 };
        let rows = rows.iter().map(values).collect::<Result<Vec<_>>>()?;
        Ok((rows, n))
    }
}

/// A parameter as SQLite would bind it, as a value of the type PostgreSQL
/// inferred for its place.
pub(crate) fn value_of(p: &dyn rusqlite::ToSql) -> Result<Value> {
    Ok(match p.to_sql()? {
        ToSqlOutput::Borrowed(v) => Value::from(v),
        ToSqlOutput::Owned(v) => v,
        other => {
            return Err(StoreError::Invariant(format!(
                "a parameter PostgreSQL cannot take: {other:?}"
            )));
        }
    })
}

fn param(v: Value, ty: &Type) -> Result<Box<dyn ToSql + Sync + Send>> {
    let mismatch = |v: &Value| {
        StoreError::Invariant(format!(
            "a {:?} parameter where PostgreSQL expects {ty}",
            ValueRef::from(v).data_type()
        ))
    };
    Ok(match (v, ty) {
        (Value::Null, t) if *t == Type::INT8 => Box::new(None::<i64>),
        (Value::Null, t) if *t == Type::INT4 => Box::new(None::<i32>),
        (Value::Null, t) if *t == Type::FLOAT8 => Box::new(None::<f64>),
        (Value::Null, t) if *t == Type::BOOL => Box::new(None::<bool>),
        (Value::Null, t) if *t == Type::BYTEA => Box::new(None::<Vec<u8>>),
        (Value::Null, _) => Box::new(None::<String>),
        (Value::Integer(i), t) if *t == Type::INT8 => Box::new(i),
        (Value::Integer(i), t) if *t == Type::INT4 => {
            Box::new(i32::try_from(i).map_err(|_| mismatch(&Value::Integer(i)))?)
        }
        (Value::Integer(i), t) if *t == Type::FLOAT8 => Box::new(i as f64),
        (Value::Integer(i), t) if *t == Type::BOOL => Box::new(i != 0),
        (Value::Integer(i), t) if *t == Type::TEXT || *t == Type::VARCHAR => Box::new(i.to_string()),
        (Value::Real(f), t) if *t == Type::FLOAT8 => Box::new(f),
        (Value::Real(f), t) if *t == Type::TEXT => Box::new(f.to_string()),
        (Value::Text(s), t) if *t == Type::TEXT || *t == Type::VARCHAR || *t == Type::UNKNOWN => Box::new(s),
        (Value::Blob(b), t) if *t == Type::BYTEA => Box::new(b),
        (v, _) => return Err(mismatch(&v)),
    })
}

/// A PostgreSQL row as SQLite values, column by column.
fn values(row: &tokio_postgres::Row) -> Result<Vec<Value>> {
    let bad = |e: tokio_postgres::Error| StoreError::Pg(e.to_string());
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_();
            Ok(if *ty == Type::INT8 {
                row.try_get::<_, Option<i64>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, Value::Integer)
            } else if *ty == Type::INT4 {
                row.try_get::<_, Option<i32>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, |v| Value::Integer(v.into()))
            } else if *ty == Type::INT2 {
                row.try_get::<_, Option<i16>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, |v| Value::Integer(v.into()))
            } else if *ty == Type::FLOAT8 {
                row.try_get::<_, Option<f64>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, Value::Real)
            } else if *ty == Type::BOOL {
                row.try_get::<_, Option<bool>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, |v| Value::Integer(v.into()))
            } else if *ty == Type::BYTEA {
                row.try_get::<_, Option<Vec<u8>>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, Value::Blob)
            } else if *ty == Type::NUMERIC {
                row.try_get::<_, Option<Numeric>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, |n| n.0)
            } else {
                row.try_get::<_, Option<String>>(i)
                    .map_err(bad)?
                    .map_or(Value::Null, Value::Text)
            })
        })
        .collect()
}

/// A `numeric` (what `SUM` of integers gives): an integer when it is whole
/// and fits, else a real.
struct Numeric(Value);

impl<'a> tokio_postgres::types::FromSql<'a> for Numeric {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let word = |i: usize| -> std::result::Result<i16, Box<dyn std::error::Error + Sync + Send>> {
            raw.get(i..i + 2)
                .map(|b| i16::from_be_bytes([b[0], b[1]]))
                .ok_or_else(|| "short numeric".into())
        };
        let (ndigits, weight, sign, dscale) = (word(0)?, word(2)?, word(4)? as u16, word(6)?);
        if sign == 0xC000 {
            return Ok(Numeric(Value::Real(f64::NAN)));
        }
        let mut whole: i128 = 0;
        let mut real = 0f64;
        let mut fits = dscale == 0;
        for d in 0..ndigits.max(0) as usize {
            let digit = word(8 + 2 * d)? as i128;
            let power = weight as i32 - d as i32;
            real += digit as f64 * 10000f64.powi(power);
            if power < 0 {
                fits = fits && digit == 0;
            } else {
                whole = whole.saturating_add(digit.saturating_mul(10000i128.saturating_pow(power as u32)));
            }
        }
        let negative = sign == 0x4000;
        if fits && let Ok(i) = i64::try_from(if negative { -whole } else { whole }) {
            return Ok(Numeric(Value::Integer(i)));
        }
        Ok(Numeric(Value::Real(if negative { -real } else { real })))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_lock_is_the_one_named() {
        assert!(BEGIN_WRITE.contains(&0x6167_656e_7463_7277_i64.to_string()));
    }
}
