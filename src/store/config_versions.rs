//! Config versions (schema 8): every loaded configuration, each schedule's
//! version, the version the database runs and the reload counter. What a
//! change means (added, removed, changed, which runs it touches) is
//! `crate::control`'s to say; this module only reads and writes rows.

use super::exec::Row;
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

const CONFIG_COLS: &str = "version, hash, path, text, loaded_at, loaded_by, status, note, \
     approved_by, approved_at, approval_reason";
const SCHEDULE_COLS: &str = "schedule, version, hash, settings, config_version, created_at";
/// The configuration the database runs.
pub(crate) const CURRENT_CONFIG: &str = "SELECT version, hash, path, text, loaded_at, loaded_by, status, note, \
     approved_by, approved_at, approval_reason FROM config_versions \
     WHERE version = (SELECT version FROM config_current WHERE id = 1)";
/// Every configuration loaded, oldest first.
pub(crate) const CONFIG_VERSIONS: &str = "SELECT version, hash, path, text, loaded_at, loaded_by, status, note, \
     approved_by, approved_at, approval_reason FROM config_versions ORDER BY version";
/// One version of a schedule.
pub(crate) const SCHEDULE_VERSION: &str = "SELECT schedule, version, hash, settings, config_version, created_at \
     FROM schedule_versions WHERE schedule = ?1 AND version = ?2";
/// The version a run was opened under.
pub(crate) const RUN_OPENED_VERSION: &str = "SELECT schedule_version FROM runs WHERE id = ?1";
/// The version each attempt of a run ran under.
pub(crate) const ATTEMPT_VERSIONS: &str =
    "SELECT n, schedule_version FROM attempts WHERE run_id = ?1 ORDER BY n";

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
        self.opt(CURRENT_CONFIG, params![], config_from_row)
    }

    /// The applied version's number and the reload counter: what every
    /// scheduler watches (one row, read every loop).
    pub fn config_watch(&self) -> Result<(Option<i64>, i64)> {
        Ok(self
            .opt(
                "SELECT version, reload_seq FROM config_current WHERE id = 1",
                params![],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .unwrap_or((None, 0)))
    }

    /// What the console's header needs of the configs, without their texts:
    /// the hash of the version the database runs, and the newest version
    /// waiting for `approve-config`.
    pub fn config_glance(&self) -> Result<(Option<String>, Option<i64>)> {
        let hash = self.opt(
            "SELECT hash FROM config_versions \
                 WHERE version = (SELECT version FROM config_current WHERE id = 1)",
            params![],
            |r| r.get(0),
        )?;
        let waiting = self.one(
            "SELECT MAX(version) FROM config_versions WHERE status = ?1",
            params![ConfigStatus::Waiting.as_str()],
            |r| r.get(0),
        )?;
        Ok((hash, waiting))
    }

    pub fn config_version(&self, version: i64) -> Result<Option<ConfigVersion>> {
        let sql = format!("SELECT {CONFIG_COLS} FROM config_versions WHERE version = ?1");
        self.opt(&sql, params![version], config_from_row)
    }

    /// Every stored configuration, oldest first.
    pub fn config_versions(&self) -> Result<Vec<ConfigVersion>> {
        self.all(CONFIG_VERSIONS, params![], config_from_row)
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
            "INSERT INTO config_versions (hash, path, text, loaded_at, loaded_by, status, note) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![hash, path, text, Ms(at), by, status.as_str(), note],
        )?;
        Ok(version)
    }

    pub fn set_config_status(&self, version: i64, status: ConfigStatus) -> Result<()> {
        self.exec(
            "UPDATE config_versions SET status = ?2 WHERE version = ?1",
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
            "UPDATE config_versions SET approved_by = ?2, approval_reason = ?3, approved_at = ?4 \
                 WHERE version = ?1",
            params![version, by, reason, Ms(at)],
        )?;
        Ok(())
    }

    /// Makes `version` the one the database runs.
    pub fn set_current_config(&self, version: i64) -> Result<()> {
        self.exec(
            "UPDATE config_current SET version = ?1 WHERE id = 1",
            params![version],
        )?;
        Ok(())
    }

    /// `agentcron reload`: every scheduler on the database re-reads its file.
    pub fn request_reload(&self) -> Result<i64> {
        self.exec(
            "UPDATE config_current SET reload_seq = reload_seq + 1 WHERE id = 1",
            params![],
        )?;
        Ok(self.config_watch()?.1)
    }

    /// Each current schedule's version with its settings, by schedule id.
    pub fn current_schedule_versions(&self) -> Result<BTreeMap<String, ScheduleVersion>> {
        let sql = format!(
            "SELECT {} FROM schedule_current c JOIN schedule_versions v \
             ON v.schedule = c.schedule AND v.version = c.version",
            SCHEDULE_COLS
                .split(", ")
                .map(|c| format!("v.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut out = BTreeMap::new();
        for v in self.all(&sql, params![], schedule_from_row)? {
            out.insert(v.schedule.clone(), v);
        }
        Ok(out)
    }

    pub fn schedule_version(&self, schedule: &str, version: i64) -> Result<Option<ScheduleVersion>> {
        self.opt(SCHEDULE_VERSION, params![schedule, version], schedule_from_row)
    }

    /// The newest version number a schedule id ever had (0 if none).
    pub fn last_schedule_version(&self, schedule: &str) -> Result<i64> {
        self.one(
            "SELECT COALESCE(MAX(version), 0) FROM schedule_versions WHERE schedule = ?1",
            params![schedule],
            |r| r.get(0),
        )
    }

    /// Stores a schedule version and makes it the schedule's current one.
    pub fn put_schedule_version(&self, v: &ScheduleVersion) -> Result<()> {
        let settings = serde_json::to_string(&v.settings).unwrap_or_else(|_| "{}".into());
        self.exec(
            "INSERT INTO schedule_versions \
                 (schedule, version, hash, settings, config_version, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (schedule, version) DO UPDATE SET hash = excluded.hash, \
                 settings = excluded.settings, config_version = excluded.config_version, \
                 created_at = excluded.created_at",
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
            "INSERT INTO schedule_current (schedule, version) VALUES (?1, ?2) \
             ON CONFLICT (schedule) DO UPDATE SET version = excluded.version",
            params![schedule, version],
        )?;
        Ok(())
    }

    /// A removed schedule has no current version (its history stays).
    pub fn drop_schedule_current(&self, schedule: &str) -> Result<()> {
        self.exec(
            "DELETE FROM schedule_current WHERE schedule = ?1",
            params![schedule],
        )?;
        Ok(())
    }

    /// `previous_id = "old"`: the schedule keeps its runs, windows, state and
    /// version history under its new id. Events are the append-only trace and
    /// keep the name they were written with.
    pub fn rename_schedule(&self, old: &str, new: &str) -> Result<()> {
        // Moves runs and schedule_state rows behind the kept states' back.
        // What this transaction kept unwritten (the
        // fencing counter) is written before the kept reads are forgotten.
        self.states.flush(self.conn())?;
        self.states.clear();
        // (statement, whether it takes both ids or only the new one)
        for (sql, both) in [
            // Each half of the schedule's runs through its index (schema 16).
            (
                "UPDATE runs SET schedule = ?2 WHERE schedule = ?1 AND state <> 'running'",
                true,
            ),
            (
                "UPDATE runs SET schedule = ?2 WHERE schedule = ?1 AND state = 'running'",
                true,
            ),
            ("UPDATE attempts SET schedule = ?2 WHERE schedule = ?1", true),
            ("DELETE FROM schedule_state WHERE schedule = ?1", false),
            (
                "UPDATE schedule_state SET schedule = ?2 WHERE schedule = ?1",
                true,
            ),
            ("DELETE FROM catchup_backlog WHERE schedule = ?1", false),
            (
                "UPDATE catchup_backlog SET schedule = ?2 WHERE schedule = ?1",
                true,
            ),
            (
                "INSERT INTO schedule_versions \
                 (schedule, version, hash, settings, config_version, created_at) \
                 SELECT ?2, version, hash, settings, config_version, created_at \
                 FROM schedule_versions WHERE schedule = ?1 ON CONFLICT (schedule, version) DO UPDATE SET hash = excluded.hash, \
                 settings = excluded.settings, config_version = excluded.config_version, \
                 created_at = excluded.created_at",
                true,
            ),
            ("DELETE FROM schedule_current WHERE schedule = ?1", false),
        ] {
            if both {
                self.exec(sql, params![old, new])?;
            } else if sql.starts_with("DELETE FROM schedule_current") {
                self.exec(sql, params![old])?;
            } else {
                self.exec(sql, params![new])?;
            }
        }
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
            "UPDATE schedulers SET config_hash = ?2 WHERE owner = ?1",
            params![owner, hash],
        )?;
        Ok(())
    }

    /// Catch-up windows of `schedule` not yet queued are dropped.
    pub fn drop_schedule_backlog(&self, schedule: &str) -> Result<()> {
        self.exec(
            "DELETE FROM catchup_backlog WHERE schedule = ?1",
            params![schedule],
        )?;
        self.states.keep_backlog(schedule, None);
        Ok(())
    }

    /// The schedule version a run was opened under, and each attempt's (by
    /// attempt number).
    pub fn run_versions(&self, run_id: i64) -> Result<RunVersionRows> {
        let opened = self
            .opt(RUN_OPENED_VERSION, params![run_id], |r| r.get::<Option<i64>>(0))?
            .flatten();
        let attempts = self.all(ATTEMPT_VERSIONS, params![run_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok((opened, attempts))
    }
}
