//! Reads for `agentcron status`, `/api/v1/status` and `/metrics` that no other
//! module needs: the oldest run waiting in a state, the catch-up queue's size,
//! and one attempt's usage.

use super::exec::stmt;
use super::sql::ts;
use super::{Result, Tx};
use crate::core::records::RunState;
use chrono::{DateTime, Utc};
use rusqlite::params;

/// The oldest run in a state: (run id, schedule, since).
pub type Oldest = (i64, String, DateTime<Utc>);

impl Tx<'_> {
    /// The run that has been in `state` longest, if any.
    pub fn oldest_in_state(&self, state: RunState) -> Result<Option<Oldest>> {
        self.opt(stmt!(status::OLDEST_IN_STATE), params![state.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, ts(r, 2)?))
        })
    }

    /// Catch-up runs queued and not yet finished (pending or retry-waiting in
    /// the backfill pool).
    pub fn backfill_pending(&self) -> Result<u64> {
        let n: i64 = self.one(stmt!(status::BACKFILL_PENDING), params![], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// (tokens, cost in USD) one attempt reported.
    pub fn attempt_usage(&self, run_id: i64, n: u32) -> Result<Option<(i64, f64)>> {
        self.opt(stmt!(status::ATTEMPT_USAGE), params![run_id, n], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
    }

    /// The database's size in bytes (its pages), in memory or on disk.
    pub fn database_bytes(&self) -> Result<i64> {
        self.one(stmt!(status::DATABASE_BYTES), params![], |r| r.get(0))
    }

    /// The schema version the ledger is at.
    pub fn schema_version(&self) -> Result<i64> {
        self.one(stmt!(status::SCHEMA_VERSION), params![], |r| r.get(0))
    }

    /// The schema version this build writes for this ledger's database.
    pub fn build_schema_version(&self) -> i64 {
        match self.dialect() {
            super::exec::Dialect::Sqlite => super::SCHEMA_VERSION,
            super::exec::Dialect::Postgres => super::pg::PG_SCHEMA_VERSION,
        }
    }
}
