//! Reads for `agentcron status`, `/api/v1/status` and `/metrics` that no other
//! module needs: the oldest run waiting in a state, the catch-up queue's size,
//! and one attempt's usage.

use super::sql::ts;
use super::{Result, Tx};
use crate::core::records::RunState;
use chrono::{DateTime, Utc};
use rusqlite::params;

/// No index on `state` (the console reads the same lists by full scan); these
/// run at a status request, not per tick.
pub(crate) const OLDEST_IN_STATE: &str = "SELECT id, schedule, updated_at FROM runs WHERE state = ?1 \
     ORDER BY updated_at, id LIMIT 1";
/// Through the `runs_due_backfill` partial index.
pub(crate) const BACKFILL_PENDING: &str = "SELECT COUNT(*) FROM runs \
     WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill'";
const ATTEMPT_USAGE: &str = "SELECT tokens, cost_usd FROM attempts WHERE run_id = ?1 AND n = ?2";
const SCHEMA_VERSION: &str = "PRAGMA user_version";

/// The oldest run in a state: (run id, schedule, since).
pub type Oldest = (i64, String, DateTime<Utc>);

impl Tx<'_> {
    /// The run that has been in `state` longest, if any.
    pub fn oldest_in_state(&self, state: RunState) -> Result<Option<Oldest>> {
        self.opt(OLDEST_IN_STATE, params![state.as_str()], |r| {
            Ok((r.get(0)?, r.get(1)?, ts(r, 2)?))
        })
    }

    /// Catch-up runs queued and not yet finished (pending or retry-waiting in
    /// the backfill pool).
    pub fn backfill_pending(&self) -> Result<u64> {
        let n: i64 = self.one(BACKFILL_PENDING, params![], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// (tokens, cost in USD) one attempt reported.
    pub fn attempt_usage(&self, run_id: i64, n: u32) -> Result<Option<(i64, f64)>> {
        self.opt(ATTEMPT_USAGE, params![run_id, n], |r| Ok((r.get(0)?, r.get(1)?)))
    }

    /// The schema version of the file (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.query_row(SCHEMA_VERSION, [], |r| r.get(0))?)
    }
}
