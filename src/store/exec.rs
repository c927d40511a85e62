//! How the store's code runs a statement: [`Tx::exec`], [`Tx::one`],
//! [`Tx::opt`], [`Tx::all`] and [`Tx::insert`], each given the SQL, its
//! parameters and (for a query) a row mapper over [`Row`]. Nothing above this
//! file touches a connection's statement API, so the statements can be
//! carried out by another database than SQLite with the same text and
//! mappers.

// Used piece by piece as the store's files move onto it.
#![allow(dead_code)]

use super::sql::Cols;
use super::{Result, Tx};
use rusqlite::OptionalExtension;
use rusqlite::types::{FromSql, ToSql, Value, ValueRef};

/// A statement's text: one of the store's fixed statements (prepared once
/// and kept by its address, see [`super::db::Statements`]) or text made at
/// run time (kept in the connection's own cache by its text).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sql<'s> {
    Fixed(&'static str),
    Text(&'s str),
}

impl Sql<'_> {
    pub(crate) fn text(&self) -> &str {
        match self {
            Sql::Fixed(s) => s,
            Sql::Text(s) => s,
        }
    }
}

impl From<&'static str> for Sql<'static> {
    fn from(s: &'static str) -> Self {
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

    /// Column `idx` as the value it holds, whatever its type.
    pub(crate) fn value(&self, idx: usize) -> rusqlite::Result<ValueRef<'_>> {
        match self {
            Row::Lite(r) => r.get_ref(idx),
            Row::Values(v) => v
                .get(idx)
                .map(ValueRef::from)
                .ok_or(rusqlite::Error::InvalidColumnIndex(idx)),
        }
    }
}

impl<'a> Tx<'a> {
    /// Runs a statement that returns no rows: how many rows it changed.
    pub(crate) fn exec<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<usize> {
        Ok(match sql.into() {
            Sql::Fixed(s) => self.cached(s)?.execute(params)?,
            Sql::Text(s) => self.prepared(s)?.execute(params)?,
        })
    }

    /// Runs an `INSERT`: how many rows it inserted and the id of the last
    /// one (SQLite's rowid; meaningful only when it inserted one).
    pub(crate) fn insert<'s>(&self, sql: impl Into<Sql<'s>>, params: Params<'_>) -> Result<(usize, i64)> {
        let changed = self.exec(sql, params)?;
        Ok((changed, self.conn.last_insert_rowid()))
    }

    /// The first row of a query, mapped; none is an error
    /// (`QueryReturnedNoRows`), as `rusqlite::Statement::query_row`.
    pub(crate) fn one<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        Ok(match sql.into() {
            Sql::Fixed(s) => self.cached(s)?.query_row(params, |r| map(&Row::Lite(r)))?,
            Sql::Text(s) => self.prepared(s)?.query_row(params, |r| map(&Row::Lite(r)))?,
        })
    }

    /// The first row of a query, mapped, if there is one.
    pub(crate) fn opt<'s, T>(
        &self,
        sql: impl Into<Sql<'s>>,
        params: Params<'_>,
        map: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Option<T>> {
        Ok(match sql.into() {
            Sql::Fixed(s) => self
                .cached(s)?
                .query_row(params, |r| map(&Row::Lite(r)))
                .optional()?,
            Sql::Text(s) => self
                .prepared(s)?
                .query_row(params, |r| map(&Row::Lite(r)))
                .optional()?,
        })
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
        mut f: impl FnMut(&Row<'_>) -> rusqlite::Result<bool>,
    ) -> Result<()> {
        let mut walk = |stmt: &mut rusqlite::Statement<'_>| -> rusqlite::Result<()> {
            let mut rows = stmt.query(params)?;
            while let Some(r) = rows.next()? {
                if !f(&Row::Lite(r))? {
                    break;
                }
            }
            Ok(())
        };
        match sql.into() {
            Sql::Fixed(s) => walk(&mut *self.cached(s)?)?,
            Sql::Text(s) => walk(&mut *self.prepared(s)?)?,
        }
        Ok(())
    }
}
