//! [`LedgerRead`] on a PostgreSQL ledger, for the read verbs: the embedded
//! store's own queries (placeholders `?N` written `$N`), listing rules and row
//! mappers, each row read as the values of its columns. Synchronous, as the
//! CLI is: a runtime of its own drives the one connection. Never migrates: a
//! ledger of another schema is refused.

use super::session::{dollar_placeholders, values};
use super::{PG_SCHEMA_VERSION, PgError, config};
use crate::store::read::LedgerRead;
use crate::store::sql::Cols;
use crate::store::sql::{
    attempt_from_cols, event_from_cols, posted_from_cols, run_from_cols, step_from_cols,
};
use crate::store::types::*;
use crate::store::{Result, StoreError};
use chrono::{DateTime, Utc};
use rusqlite::types::Value;
use std::path::Path;
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

pub struct PgReader {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
    shown: String,
}

impl std::fmt::Debug for PgReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgReader").field("db", &self.shown).finish()
    }
}

impl PgReader {
    /// Connects to the ledger at `url` for reading; refuses a database that
    /// is not an agentcron ledger of this build's schema (changing nothing).
    pub fn open(url: &str, password_file: Option<&Path>) -> std::result::Result<PgReader, PgError> {
        let (cfg, shown, tls) = config(url, password_file)?;
        let connect_error = |e: &dyn std::error::Error| PgError::Connect {
            shown: shown.clone(),
            message: super::with_causes(e),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| connect_error(&e))?;
        let client = match tls {
            super::Tls::None => {
                let (client, conn) = rt.block_on(cfg.connect(NoTls)).map_err(|e| connect_error(&e))?;
                rt.spawn(conn);
                client
            }
            super::Tls::Rustls(tls) => {
                let (client, conn) = rt.block_on(cfg.connect(tls)).map_err(|e| connect_error(&e))?;
                rt.spawn(conn);
                client
            }
        };
        let version = match rt.block_on(client.query_opt(
            "SELECT value FROM agentcron_meta WHERE key = 'schema_version'",
            &[],
        )) {
            Ok(row) => row.map(|r| r.get::<_, i64>(0)),
            // No such table: not a ledger (said below). Anything else (no
            // permission, …) is said as PostgreSQL says it.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => None,
            Err(e) => return Err(PgError::Sql(e)),
        };
        match version {
            Some(v) if v == PG_SCHEMA_VERSION => Ok(PgReader { rt, client, shown }),
            Some(found) if found > PG_SCHEMA_VERSION => Err(PgError::TooNew {
                shown,
                found,
                known: PG_SCHEMA_VERSION,
            }),
            Some(found) => Err(PgError::Connect {
                shown,
                message: format!(
                    "its schema is {found}, this build reads {PG_SCHEMA_VERSION}; start a scheduler of this build on it first"
                ),
            }),
            None => Err(PgError::Connect {
                shown,
                message: "no agentcron ledger there (no agentcron_meta): `agentcron db copy` fills one"
                    .into(),
            }),
        }
    }

    /// The database as shown to operators (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `sql` (the embedded store's, `?N` placeholders) with `params`:
    /// each row as its columns' values.
    fn rows(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Vec<Value>>> {
        let sql = dollar_placeholders(sql);
        let boxed: Vec<Box<dyn ToSql + Sync + Send>> = params.into_iter().map(param).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref() as _).collect();
        let rows = self
            .rt
            .block_on(self.client.query(sql.as_str(), &refs))
            .map_err(|e| StoreError::Pg(format!("{}: {}", self.shown, super::with_causes(&e))))?;
        rows.iter().map(values).collect()
    }

    fn mapped<T>(
        &self,
        sql: &str,
        params: Vec<Value>,
        map: impl Fn(&[Value]) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql, params)?
            .iter()
            .map(|r| map(r.as_slice()).map_err(StoreError::from))
            .collect()
    }
}

fn param(v: Value) -> Box<dyn ToSql + Sync + Send> {
    match v {
        Value::Null => Box::new(None::<String>),
        Value::Integer(i) => Box::new(i),
        Value::Real(f) => Box::new(f),
        Value::Text(t) => Box::new(t),
        Value::Blob(b) => Box::new(b),
    }
}

fn first<T>(mut v: Vec<T>) -> Option<T> {
    if v.is_empty() {
        None
    } else {
        Some(v.swap_remove(0))
    }
}

impl LedgerRead for PgReader {
    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        crate::store::runs::list_runs(filter, |sql, params| self.mapped(sql, params, run_from_cols))
    }
    fn try_run(&self, id: i64) -> Result<Option<Run>> {
        let rows = self.mapped(
            crate::store::runs::RUN_BY_ID,
            vec![Value::Integer(id)],
            run_from_cols,
        )?;
        Ok(first(rows))
    }
    fn find_run(&self, tenant: &str, schedule: &str, window_key: &str) -> Result<Option<Run>> {
        let params = [tenant, schedule, window_key]
            .map(|s| Value::Text(s.to_string()))
            .to_vec();
        Ok(first(self.mapped(
            crate::store::runs::RUN_BY_WINDOW,
            params,
            run_from_cols,
        )?))
    }
    fn events(&self, filter: &EventFilter) -> Result<Vec<Event>> {
        crate::store::events::list_events(filter, |sql, params| self.mapped(sql, params, event_from_cols))
    }
    fn attempts(&self, run_id: i64) -> Result<Vec<Attempt>> {
        self.mapped(
            crate::store::attempts::ATTEMPTS_OF_RUN,
            vec![Value::Integer(run_id)],
            attempt_from_cols,
        )
    }
    fn steps(&self, run_id: i64) -> Result<Vec<Step>> {
        self.mapped(
            crate::store::attempts::STEPS_OF_RUN,
            vec![Value::Integer(run_id)],
            step_from_cols,
        )
    }
    fn born_at(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        let rows = self.mapped(
            crate::store::operator::BORN_AT,
            vec![Value::Text(schedule.to_string())],
            |r| crate::store::sql::ts_opt(r, 0),
        )?;
        Ok(first(rows).flatten())
    }
    fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>> {
        let params = vec![Value::Text(name.to_string()), Value::Text(event_id.to_string())];
        Ok(first(self.mapped(
            crate::store::engine_queries::POSTED_EVENT,
            params,
            posted_from_cols,
        )?))
    }
    fn max_event_id(&self) -> Result<i64> {
        let rows = self.mapped(crate::store::events::MAX_EVENT_ID, vec![], |r| r.col(0))?;
        Ok(first(rows).unwrap_or(0))
    }
    fn backlog(&self, schedule: &str) -> Result<Option<crate::store::Backlog>> {
        Ok(first(self.mapped(
            crate::store::backlog::ONE,
            vec![Value::Text(schedule.to_string())],
            crate::store::backlog::backlog_from_cols,
        )?))
    }
    fn run_versions(&self, run_id: i64) -> Result<crate::store::config_versions::RunVersionRows> {
        use crate::store::config_versions::{ATTEMPT_VERSIONS, RUN_OPENED_VERSION};
        let opened = self.mapped(RUN_OPENED_VERSION, vec![Value::Integer(run_id)], |r| {
            r.col::<Option<i64>>(0)
        })?;
        let attempts = self.mapped(ATTEMPT_VERSIONS, vec![Value::Integer(run_id)], |r| {
            Ok((r.col(0)?, r.col(1)?))
        })?;
        Ok((first(opened).flatten(), attempts))
    }
    fn all_schedule_states(&self) -> Result<Vec<ScheduleState>> {
        self.mapped(
            crate::store::operator::ALL_SCHEDULE_STATES,
            vec![],
            crate::store::operator::schedule_state_from_row_cols,
        )
    }
    fn current_config(&self) -> Result<Option<crate::store::ConfigVersion>> {
        Ok(first(self.mapped(
            crate::store::config_versions::CURRENT_CONFIG,
            vec![],
            crate::store::config_versions::config_from_row_cols,
        )?))
    }
    fn config_versions(&self) -> Result<Vec<crate::store::ConfigVersion>> {
        self.mapped(
            crate::store::config_versions::CONFIG_VERSIONS,
            vec![],
            crate::store::config_versions::config_from_row_cols,
        )
    }
    fn switch(&self, name: &str) -> Result<Option<Switch>> {
        Ok(first(self.mapped(
            crate::store::operator::SWITCH,
            vec![Value::Text(name.to_string())],
            crate::store::operator::switch_from_row_cols,
        )?))
    }
    /// Counted from the runs: the embedded ledger's `run_counts` is kept by
    /// its one writer per transaction, which PostgreSQL's writers do not do
    /// (yet), so its rows are not trusted here.
    fn count_by_state(&self) -> Result<Vec<(RunState, u64)>> {
        let rows = self.mapped("SELECT state, count(*) FROM runs GROUP BY state", vec![], |r| {
            Ok((r.col::<RunState>(0)?, r.col::<i64>(1)?))
        })?;
        Ok(RunState::ALL
            .iter()
            .map(|s| {
                let n = rows.iter().find(|(x, _)| x == s).map_or(0, |(_, n)| *n);
                (*s, u64::try_from(n).unwrap_or(0))
            })
            .collect())
    }
    fn oldest_in_state(&self, state: RunState) -> Result<Option<crate::store::Oldest>> {
        Ok(first(self.mapped(
            crate::store::status::OLDEST_IN_STATE,
            vec![Value::Text(state.as_str().to_string())],
            |r| Ok((r.col(0)?, r.col(1)?, crate::store::sql::ts(r, 2)?)),
        )?))
    }
    fn backfill_pending(&self) -> Result<u64> {
        let rows = self.mapped(crate::store::status::BACKFILL_PENDING, vec![], |r| {
            r.col::<i64>(0)
        })?;
        Ok(first(rows).map_or(0, |n| u64::try_from(n).unwrap_or(0)))
    }
    fn schedulers(&self) -> Result<Vec<crate::core::registry::SchedulerRecord>> {
        self.mapped(
            crate::store::registry::ALL,
            vec![],
            crate::store::registry::from_row_cols,
        )
    }
    fn schedule_version(
        &self,
        schedule: &str,
        version: i64,
    ) -> Result<Option<crate::store::ScheduleVersion>> {
        Ok(first(self.mapped(
            crate::store::config_versions::SCHEDULE_VERSION,
            vec![Value::Text(schedule.to_string()), Value::Integer(version)],
            crate::store::config_versions::schedule_from_cols,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_and_nothing_else_changes() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE x = ?1 AND y IN (?2, ?13) AND z = '?'"),
            "SELECT a FROM t WHERE x = $1 AND y IN ($2, $13) AND z = '?'"
        );
    }

    #[test]
    fn rows_map_through_the_shared_mappers() {
        let row = [
            Value::Integer(7),
            Value::Integer(2),
            Value::Text("review".into()),
            Value::Text("done".into()),
            Value::Integer(1),
            Value::Integer(1_780_000_000_000),
        ];
        let step = step_from_cols(&row[..]).expect("step");
        assert_eq!((step.run_id, step.attempt, step.side_effect), (7, 2, true));
        assert_eq!(step.at.timestamp_millis(), 1_780_000_000_000);
        let bad = [Value::Text("x".into())];
        assert!(step_from_cols(&bad[..]).is_err());
        let _ = Cols::col::<i64>(&row[..], 0).expect("col");
    }
}
