//! Config versions (schema 8): every loaded configuration, each schedule's
//! version, the version the database runs and the reload counter. What a
//! change means (added, removed, changed, which runs it touches) is
//! `crate::control`'s to say; this module only reads and writes rows.

use super::exec::Row;
use super::exec::stmt;
use super::sql::{Ms, ts, ts_opt};
use super::{Result, Tx};
use chrono::{DateTime, Utc};
use rusqlite::params;
use std::collections::BTreeMap;

/// What became of a stored configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigStatus {
    /// It is (or was) the version the database runs.
    Applied,
    /// It changes a gated stage and waits for `approve-config`.
    Waiting,
    /// It waited and a newer one came first, or was rolled back past.
    Superseded,
}

impl ConfigStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigStatus::Applied => "applied",
            ConfigStatus::Waiting => "waiting",
            ConfigStatus::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Applied, Self::Waiting, Self::Superseded]
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// One stored configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigVersion {
    pub version: i64,
    /// FNV-1a of the text (see `engine::registry::config_hash`).
    pub hash: String,
    pub path: String,
    pub text: String,
    pub loaded_at: DateTime<Utc>,
    /// Which process or operator stored it (`host:pid`, `rollback by NAME` …).
    pub loaded_by: String,
    pub status: ConfigStatus,
    /// Why (a rollback's reason), if anyone said.
    pub note: Option<String>,
    pub approved_by: Option<String>,
    pub approved_at: Option<DateTime<Utc>>,
    pub approval_reason: Option<String>,
}

/// A schedule's stored version: its normalised settings (field → TOML value).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleVersion {
    pub schedule: String,
    pub version: i64,
    pub hash: String,
    pub settings: BTreeMap<String, String>,
    pub config_version: i64,
    pub created_at: DateTime<Utc>,
}

/// A run's schedule version and its attempts' (attempt number, version).
pub type RunVersionRows = (Option<i64>, Vec<(u32, Option<i64>)>);

fn config_from_row(r: &Row<'_>) -> rusqlite::Result<ConfigVersion> {
    config_from_row_cols(r)
}

pub(crate) fn config_from_row_cols<R: super::sql::Cols + ?Sized>(r: &R) -> rusqlite::Result<ConfigVersion> {
    let status: String = r.col(6)?;
    Ok(ConfigVersion {
        version: r.col(0)?,
        hash: r.col(1)?,
        path: r.col(2)?,
        text: r.col(3)?,
        loaded_at: ts(r, 4)?,
        loaded_by: r.col(5)?,
        status: ConfigStatus::parse(&status).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                6,
                rusqlite::types::Type::Text,
                format!("unknown config status {status:?}").into(),
            )
        })?,
        note: r.col(7)?,
        approved_by: r.col(8)?,
        approved_at: ts_opt(r, 9)?,
        approval_reason: r.col(10)?,
    })
}

fn schedule_from_row(r: &Row<'_>) -> rusqlite::Result<ScheduleVersion> {
    schedule_from_cols(r)
}

pub(crate) fn schedule_from_cols<R: super::sql::Cols + ?Sized>(r: &R) -> rusqlite::Result<ScheduleVersion> {
    let settings: String = r.col(3)?;
    Ok(ScheduleVersion {
        schedule: r.col(0)?,
        version: r.col(1)?,
        hash: r.col(2)?,
        // Written by this module as a JSON object of strings; anything else
        // (edited by hand) reads as no settings rather than failing a listing.
        settings: serde_json::from_str(&settings).unwrap_or_default(),
        config_version: r.col(4)?,
        created_at: ts(r, 5)?,
    })
}

impl Tx<'_> {
    /// The version the database runs (none before the first config is stored).
    pub fn current_config(&self) -> Result<Option<ConfigVersion>> {
        self.opt(stmt!(config_versions::CURRENT_CONFIG), params![], config_from_row)
    }

    /// The applied version's number and the reload counter: what every
    /// scheduler watches (one row, read every loop).
    pub fn config_watch(&self) -> Result<(Option<i64>, i64)> {
        Ok(self
            .opt(stmt!(config_versions::CONFIG_WATCH), params![], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?
            .unwrap_or((None, 0)))
    }

    /// What the console's header needs of the configs, without their texts:
    /// the hash of the version the database runs, and the newest version
    /// waiting for `approve-config`.
    pub fn config_glance(&self) -> Result<(Option<String>, Option<i64>)> {
        let hash = self.opt(stmt!(config_versions::CONFIG_GLANCE), params![], |r| r.get(0))?;
        let waiting = self.one(
            stmt!(config_versions::CONFIG_GLANCE_2),
            params![ConfigStatus::Waiting.as_str()],
            |r| r.get(0),
        )?;
        Ok((hash, waiting))
    }

    pub fn config_version(&self, version: i64) -> Result<Option<ConfigVersion>> {
        self.opt(
            stmt!(config_versions::CONFIG_VERSION),
            params![version],
            config_from_row,
        )
    }

    /// Every stored configuration, oldest first.
    pub fn config_versions(&self) -> Result<Vec<ConfigVersion>> {
        self.all(
            stmt!(config_versions::CONFIG_VERSIONS),
            params![],
            config_from_row,
        )
    }

    /// Stores a configuration as the next version; returns its number.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_config_version(
        &self,
        hash: &str,
        path: &str,
        text: &str,
        at: DateTime<Utc>,
        by: &str,
        status: ConfigStatus,
        note: Option<&str>,
    ) -> Result<i64> {
        let (_, version) = self.insert(
            stmt!(config_versions::INSERT_CONFIG_VERSION),
            params![hash, path, text, Ms(at), by, status.as_str(), note],
        )?;
        Ok(version)
    }

    pub fn set_config_status(&self, version: i64, status: ConfigStatus) -> Result<()> {
        self.exec(
            stmt!(config_versions::SET_CONFIG_STATUS),
            params![version, status.as_str()],
        )?;
        Ok(())
    }

    /// Records who approved a waiting version, and why.
    pub fn approve_config_version(
        &self,
        version: i64,
        by: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        self.exec(
            stmt!(config_versions::APPROVE_CONFIG_VERSION),
            params![version, by, reason, Ms(at)],
        )?;
        Ok(())
    }

    /// Makes `version` the one the database runs.
    pub fn set_current_config(&self, version: i64) -> Result<()> {
        self.exec(stmt!(config_versions::SET_CURRENT_CONFIG), params![version])?;
        Ok(())
    }

    /// `agentcron reload`: every scheduler on the database re-reads its file.
    pub fn request_reload(&self) -> Result<i64> {
        self.exec(stmt!(config_versions::REQUEST_RELOAD), params![])?;
        Ok(self.config_watch()?.1)
    }

    /// Each current schedule's version with its settings, by schedule id.
    pub fn current_schedule_versions(&self) -> Result<BTreeMap<String, ScheduleVersion>> {
        let mut out = BTreeMap::new();
        for v in self.all(
            stmt!(config_versions::CURRENT_SCHEDULE_VERSIONS),
            params![],
            schedule_from_row,
        )? {
            out.insert(v.schedule.clone(), v);
        }
        Ok(out)
    }

    pub fn schedule_version(&self, schedule: &str, version: i64) -> Result<Option<ScheduleVersion>> {
        self.opt(
            stmt!(config_versions::SCHEDULE_VERSION),
            params![schedule, version],
            schedule_from_row,
        )
    }

    /// The newest version number a schedule id ever had (0 if none).
    pub fn last_schedule_version(&self, schedule: &str) -> Result<i64> {
        self.one(
            stmt!(config_versions::LAST_SCHEDULE_VERSION),
            params![schedule],
            |r| r.get(0),
        )
    }

    /// Stores a schedule version and makes it the schedule's current one.
    pub fn put_schedule_version(&self, v: &ScheduleVersion) -> Result<()> {
        let settings = serde_json::to_string(&v.settings).unwrap_or_else(|_| "{}".into());
        self.exec(
            stmt!(config_versions::PUT_SCHEDULE_VERSION),
            params![
                v.schedule,
                v.version,
                v.hash,
                settings,
                v.config_version,
                Ms(v.created_at)
            ],
        )?;
        self.set_schedule_current(&v.schedule, v.version)
    }

    pub fn set_schedule_current(&self, schedule: &str, version: i64) -> Result<()> {
        self.exec(
            stmt!(config_versions::SET_SCHEDULE_CURRENT),
            params![schedule, version],
        )?;
        Ok(())
    }

    /// A removed schedule has no current version (its history stays).
    pub fn drop_schedule_current(&self, schedule: &str) -> Result<()> {
        self.exec(stmt!(config_versions::DROP_SCHEDULE_CURRENT), params![schedule])?;
        Ok(())
    }

    /// `previous_id = "old"`: the schedule keeps its runs, windows, state and
    /// version history under its new id. Events are the append-only trace and
    /// keep the name they were written with.
    pub fn rename_schedule(&self, old: &str, new: &str) -> Result<()> {
        // Moves runs and schedule_state rows behind the kept states' back.
        // What this transaction kept unwritten (the
        // fencing counter) is written before the kept reads are forgotten.
        super::db::flush_fencing(self.conn(), self.model)?;
        self.model.clear();
        // (statement, whether it takes both ids or only the new one)
        for (sql, both) in [
            // Each half of the schedule's runs through its index (schema 16).
            (stmt!(config_versions::RENAME_IDLE_RUNS), true),
            (stmt!(config_versions::RENAME_RUNNING_RUNS), true),
            (stmt!(config_versions::RENAME_ATTEMPTS), true),
            (stmt!(config_versions::DROP_STATE), false),
            (stmt!(config_versions::RENAME_STATE), true),
            (stmt!(config_versions::DROP_BACKLOG), false),
            (stmt!(config_versions::RENAME_BACKLOG), true),
            (stmt!(config_versions::COPY_SCHEDULE_VERSIONS), true),
        ] {
            if both {
                self.exec(sql, params![old, new])?;
            } else {
                self.exec(sql, params![new])?;
            }
        }
        self.exec(stmt!(config_versions::DROP_OLD_SCHEDULE_CURRENT), params![old])?;
        Ok(())
    }

    /// A changed trigger (or a schedule added at `u`): the next evaluation
    /// starts at `cursor`, and windows planned under the old trigger but
    /// not yet queued are dropped.
    pub fn restart_schedule_at(&self, schedule: &str, cursor: DateTime<Utc>, u: DateTime<Utc>) -> Result<()> {
        self.set_born(schedule, cursor, u)?;
        self.drop_schedule_backlog(schedule)
    }

    /// A scheduler that reloaded runs another config: its registry row says so.
    pub fn set_scheduler_config_hash(&self, owner: &str, hash: &str) -> Result<()> {
        self.exec(
            stmt!(config_versions::SET_SCHEDULER_CONFIG_HASH),
            params![owner, hash],
        )?;
        Ok(())
    }

    /// Catch-up windows of `schedule` not yet queued are dropped.
    pub fn drop_schedule_backlog(&self, schedule: &str) -> Result<()> {
        self.exec(stmt!(config_versions::DROP_SCHEDULE_BACKLOG), params![schedule])?;
        self.model.keep_backlog(schedule, None);
        Ok(())
    }

    /// The schedule version a run was opened under, and each attempt's (by
    /// attempt number).
    pub fn run_versions(&self, run_id: i64) -> Result<RunVersionRows> {
        let opened = self
            .opt(stmt!(config_versions::RUN_OPENED_VERSION), params![run_id], |r| {
                r.get::<Option<i64>>(0)
            })?
            .flatten();
        let attempts = self.all(stmt!(config_versions::ATTEMPT_VERSIONS), params![run_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok((opened, attempts))
    }
}
