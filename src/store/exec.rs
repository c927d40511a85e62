//! How the store's code runs a statement: [`Tx::exec`], [`Tx::one`],
//! [`Tx::opt`], [`Tx::all`] and [`Tx::insert`], each given the SQL, its
//! parameters and (for a query) a row mapper over [`Row`]. Nothing above this
//! file touches a connection's statement API. A fixed statement is a
//! [`Stmt`]: its SQLite text and its PostgreSQL text, each written for that
//! database in its own module; the connection runs the one in its words.

use super::sql::Cols;
use super::{Result, Tx};
use rusqlite::OptionalExtension;
use rusqlite::types::{FromSql, ToSql, Value};

/// One of the store's fixed statements in each database's own words: its
/// SQLite text (`store::sqlite::AREA::NAME`) and its PostgreSQL text
/// (`store::pg::sql::AREA::NAME`), paired by [`stmt!`]. A statement
/// missing from either database's module does not compile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stmt {
    pub(crate) lite: &'static str,
    pub(crate) pg: &'static str,
}

/// The [`Stmt`] named `AREA::NAME`: `stmt!(runs::RUN_BY_ID)`.
macro_rules! stmt {
    ($area:ident :: $name:ident) => {
        $crate::store::exec::Stmt {
            lite: $crate::store::sqlite::$area::$name,
            pg: $crate::store::pg::sql::$area::$name,
        }
    };
}
pub(crate) use stmt;

/// The database a connection speaks, for the few statements made at run
/// time (listings with optional filters): each builds its text in that
/// database's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The `k`th parameter's placeholder: `?k` (SQLite), `$k` (PostgreSQL).
    pub(crate) fn mark(self, k: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{k}"),
            Dialect::Postgres => format!("${k}"),
        }
    }
}

/// A statement's text: one of the store's fixed statements (prepared once
/// and kept, see [`super::db::Statements`]), or text made at run time in the
/// connection's own dialect (kept in the connection's cache by its text).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sql<'s> {
    Fixed(Stmt),
    Text(&'s str),
}

impl From<Stmt> for Sql<'static> {
    fn from(s: Stmt) -> Self {
        Sql::Fixed(s)
    }
}

impl<'s> From<&'s String> for Sql<'s> {
    fn from(s: &'s String) -> Self {
        Sql::Text(s)
    }
}

/// The parameters of a statement, bound `?1`, `?2`, … in order
/// (`rusqlite::params![…]`).
pub(crate) type Params<'p> = &'p [&'p dyn ToSql];

/// One row of a result, read by position: SQLite's own row, or the values of
/// a row another database returned (in the same column order).
pub(crate) enum Row<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Values(&'r [Value]),
}

impl Cols for Row<'_> {
    fn col<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T> {
        match self {
            Row::Lite(r) => r.get(idx),
            Row::Values(v) => v.col(idx),
        }
    }
}

impl Row<'_> {
    /// Column `idx` (as `rusqlite::Row::get`).
    pub(crate) fn get<T: FromSql>(&self, idx: usize) -> rusqlite::Result<T> {
        self.col(idx)
    }
}

/// A connection as the store's code writes through it: SQLite's (with the
/// store's kept statements) or a PostgreSQL session's. What [`Tx`]'s
/// methods run on.
#[derive(Clone, Copy)]
pub(crate) enum Conn<'a> {
    Lite {
        conn: &'a rusqlite::Connection,
        stmts: &'a super::db::Statements,
    },
    Pg(&'a super::pg::session::PgSession),
}

/// A PostgreSQL answer: its rows as values, and how many rows it changed.
fn on_pg(
    pg: &super::pg::session::PgSession,
    sql: Sql<'_>,
    params: Params<'_>,
) -> Result<super::pg::session::Rows> {
    let text: std::borrow::Cow<'static, str> = match sql {
        Sql::Fixed(s) => s.pg.into(),
        Sql::Text(s) => s.to_string().into(),
    };
    let values = params
        .iter()
        .map(|p| super::pg::session::value_of(*p))
        .collect::<Result<Vec<_>>>()?;
    pg.query(text, values)
}

impl<'a> Conn<'a> {
    /// The database this connection speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Lite { .. } => Dialect::Sqlite,
            Conn::Pg(_) => Dialect::Postgres,
        }
    }

    /// The PostgreSQL session, if that is what this is.
    pub(crate) fn pg(&self) -> Option<&'a super::pg::session::PgSession> {
        match *self {
            Conn::Lite { .. } => None,
            Conn::Pg(pg) => Some(pg),
        }
    }

    /// `s` in this connection's database's words.
    pub(crate) fn text(&self, s: Stmt) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => s.lite,
            Dialect::Postgres => s.pg,
        }
    }

    /// Runs a statement that returns no rows: how many rows it changed.
    pub(crate) fn exec<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<usize> {
        let (lite, stmts) = match *self {
            Conn::Pg(pg) => {
                return Ok(usize::try_from(on_pg(pg, sql.into(), params)?.1).unwrap_or(usize::MAX));
            }
            Conn::Lite { conn, stmts } => (conn, stmts),
        };
        Ok(match sql.into() {
            Sql::Fixed(s) => stmts.get(lite, s.lite)?.execute(params)?,
            Sql::Text(s) => lite.prepare_cached(s)?.execute(params)?,
        })
    }

    /// Runs an `INSERT` into a table with an `id`: how many rows it inserted
    /// and the id of the last one (meaningful only when it inserted one).
    pub(crate) fn insert<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<(usize, i64)> {
        let sql = sql.into();
        if let Conn::Pg(pg) = *self {
            let (rows, n) = on_pg(pg, sql, params)?;
            let id = match rows.last().and_then(|r| r.first()) {
                Some(Value::Integer(id)) => *id,
                _ => 0,
            };
            return Ok((usize::try_from(n).unwrap_or(usize::MAX), id));
        }
        let changed = self.exec(sql, params)?;
        let id = match self {
            Conn::Lite { conn, .. } => conn.last_insert_rowid(),
            Conn::Pg(_) => 0,
        };
        Ok((changed, id))
    }

    /// Calls `f` on each row of a query in order until it answers `false`.
    pub(crate) fn each<'s>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        mut f: impl FnMut(&Row<'_>) -> rusqlite::Result<bool>,
    ) -> Result<()> {
        let sql = sql.into();
        let (lite, stmts) = match *self {
            Conn::Lite { conn, stmts } => (conn, stmts),
            Conn::Pg(pg) => {
                for r in on_pg(pg, sql, params)?.0 {
                    if !f(&Row::Values(&r))? {
                        break;
                    }
                }
                return Ok(());
            }
        };
        let mut walk = |stmt: &mut rusqlite::Statement<'_>| -> rusqlite::Result<()> {
            let mut rows = stmt.query(params)?;
            while let Some(r) = rows.next()? {
                if !f(&Row::Lite(r))? {
                    break;
                }
            }
            Ok(())
        };
        match sql {
            Sql::Fixed(s) => walk(&mut *stmts.get(lite, s.lite)?)?,
            Sql::Text(s) => walk(&mut *lite.prepare_cached(s)?)?,
        }
        Ok(())
    }

    /// The first row of a query, mapped, if there is one.
    pub(crate) fn opt<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        let sql = sql.into();
        let (lite, stmts) = match *self {
            Conn::Lite { conn, stmts } => (conn, stmts),
            Conn::Pg(pg) => {
                let rows = on_pg(pg, sql, params)?.0;
                return Ok(match rows.first() {
                    Some(r) => Some(map(&Row::Values(r))?),
                    None => None,
                });
            }
        };
        Ok(match sql {
            Sql::Fixed(s) => stmts
                .get(lite, s.lite)?
                .query_row(params, |r| map(&Row::Lite(r)))
                .optional()?,
            Sql::Text(s) => lite
                .prepare_cached(s)?
                .query_row(params, |r| map(&Row::Lite(r)))
                .optional()?,
        })
    }

    /// How many rows this connection's statements have changed since it
    /// opened (SQLite's `total_changes`): unmoved, nothing was written.
    pub(crate) fn total_changes(&self) -> u64 {
        match self {
            Conn::Pg(pg) => pg.total_changes(),
            Conn::Lite { conn, .. } => conn.total_changes(),
        }
    }
}

impl<'a> Tx<'a> {
    /// The database this transaction speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        self.conn().dialect()
    }

    /// `s` with its `LIMIT` placeholder number `k` written as `n`
    /// ([`super::sql::with_limit`]), in this transaction's database's words.
    pub(crate) fn limited(&self, s: Stmt, k: usize, n: usize) -> String {
        super::sql::with_limit(self.conn().text(s), &self.dialect().mark(k), n)
    }

    /// Runs a statement that returns no rows: how many rows it changed.
    pub(crate) fn exec<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<usize> {
        self.conn().exec(sql, params)
    }

    /// Runs an `INSERT` into a table with an `id`: how many rows it
    /// inserted and the id of the last one (meaningful only when it
    /// inserted one).
    pub(crate) fn insert<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<(usize, i64)> {
        self.conn().insert(sql, params)
    }

    /// The first row of a query, mapped; none is an error
    /// (`QueryReturnedNoRows`), as `rusqlite::Statement::query_row`.
    pub(crate) fn one<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.opt(sql, params, map)?
            .ok_or(super::StoreError::Sqlite(rusqlite::Error::QueryReturnedNoRows))
    }

    /// The first row of a query, mapped, if there is one.
    pub(crate) fn opt<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        self.conn().opt(sql, params, map)
    }

    /// Every row of a query, mapped, in order.
    pub(crate) fn all<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        mut map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, params, |r| {
            out.push(map(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Calls `f` on each row of a query in order until it answers `false`.
    pub(crate) fn each<'s>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        f: impl FnMut(&Row<'_>) -> rusqlite::Result<bool>,
    ) -> Result<()> {
        self.conn().each(sql, params, f)
    }
}
