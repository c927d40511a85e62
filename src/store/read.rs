//! What the read verbs (`runs`, `events`, `show`, `explain`, `status`) ask of a
//! ledger: a transaction of either store ([`Tx`], on SQLite or PostgreSQL).
//! The queries, the listing rules (a schedule's runs read in two halves,
//! folded trace rows unfolded and paged) and the row mappers live in the
//! store; this is the narrow view the explainers and the verbs take.

use super::types::*;
use super::{Result, StoreError, Tx};
use crate::core::registry::SchedulerRecord;
use chrono::{DateTime, Utc};

pub trait LedgerRead {
    /// Runs matching the filter, by window start (oldest first unless
    /// `newest_first`), ties by id.
    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>>;
    /// The run, or `None` if there is no such id.
    fn try_run(&self, id: i64) -> Result<Option<Run>>;
    /// The run, or `RunNotFound`.
    fn run(&self, id: i64) -> Result<Run> {
        self.try_run(id)?.ok_or(StoreError::RunNotFound(id))
    }
    /// The run of a window.
    fn find_run(&self, tenant: &str, schedule: &str, window_key: &str) -> Result<Option<Run>>;
    /// The trace, as [`Tx::events`] lists it.
    fn events(&self, filter: &EventFilter) -> Result<Vec<Event>>;
    /// A run's attempts, first first.
    fn attempts(&self, run_id: i64) -> Result<Vec<Attempt>>;
    /// A run's journaled steps, in the order written.
    fn steps(&self, run_id: i64) -> Result<Vec<Step>>;
    /// When a schedule was first evaluated.
    fn born_at(&self, schedule: &str) -> Result<Option<DateTime<Utc>>>;
    /// A posted named event by its id.
    fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>>;
    /// The schedules the ledger has a state row for (every schedule ever
    /// evaluated), by name.
    fn schedule_names(&self) -> Result<Vec<String>> {
        Ok(self
            .all_schedule_states()?
            .into_iter()
            .map(|s| s.schedule)
            .collect())
    }
    /// The id of the newest event, 0 when there is none.
    fn max_event_id(&self) -> Result<i64>;
    /// A schedule's catch-up windows not queued yet, if any.
    fn backlog(&self, schedule: &str) -> Result<Option<super::Backlog>>;
    /// The version a run was opened under, and each attempt's.
    fn run_versions(&self, run_id: i64) -> Result<super::config_versions::RunVersionRows>;
    /// One version of a schedule.
    fn schedule_version(&self, schedule: &str, version: i64) -> Result<Option<super::ScheduleVersion>>;
    /// Every schedule's state row, by schedule.
    fn all_schedule_states(&self) -> Result<Vec<ScheduleState>>;
    /// The configuration the database runs.
    fn current_config(&self) -> Result<Option<super::ConfigVersion>>;
    /// Every configuration loaded, oldest first.
    fn config_versions(&self) -> Result<Vec<super::ConfigVersion>>;
    /// A switch, if it was ever set.
    fn switch(&self, name: &str) -> Result<Option<Switch>>;
    /// Runs per state, every state listed.
    fn count_by_state(&self) -> Result<Vec<(RunState, u64)>>;
    /// The run longest in `state`.
    fn oldest_in_state(&self, state: RunState) -> Result<Option<super::Oldest>>;
    /// Catch-up runs queued and not finished.
    fn backfill_pending(&self) -> Result<u64>;
    /// The scheduler registry.
    fn schedulers(&self) -> Result<Vec<SchedulerRecord>>;
}

impl LedgerRead for Tx<'_> {
    fn runs(&self, filter: &RunFilter) -> Result<Vec<Run>> {
        Tx::runs(self, filter)
    }
    fn try_run(&self, id: i64) -> Result<Option<Run>> {
        Tx::try_run(self, id)
    }
    fn find_run(&self, tenant: &str, schedule: &str, window_key: &str) -> Result<Option<Run>> {
        Tx::find_run(self, tenant, schedule, window_key)
    }
    fn events(&self, filter: &EventFilter) -> Result<Vec<Event>> {
        Tx::events(self, filter)
    }
    fn attempts(&self, run_id: i64) -> Result<Vec<Attempt>> {
        Tx::attempts(self, run_id)
    }
    fn steps(&self, run_id: i64) -> Result<Vec<Step>> {
        Tx::steps(self, run_id)
    }
    fn born_at(&self, schedule: &str) -> Result<Option<DateTime<Utc>>> {
        Tx::born_at(self, schedule)
    }
    fn posted_event(&self, name: &str, event_id: &str) -> Result<Option<PostedEvent>> {
        Tx::posted_event(self, name, event_id)
    }
    fn max_event_id(&self) -> Result<i64> {
        Tx::max_event_id(self)
    }
    fn backlog(&self, schedule: &str) -> Result<Option<super::Backlog>> {
        Tx::backlog(self, schedule)
    }
    fn run_versions(&self, run_id: i64) -> Result<super::config_versions::RunVersionRows> {
        Tx::run_versions(self, run_id)
    }
    fn schedule_version(&self, schedule: &str, version: i64) -> Result<Option<super::ScheduleVersion>> {
        Tx::schedule_version(self, schedule, version)
    }
    fn all_schedule_states(&self) -> Result<Vec<ScheduleState>> {
        Tx::all_schedule_states(self)
    }
    fn current_config(&self) -> Result<Option<super::ConfigVersion>> {
        Tx::current_config(self)
    }
    fn config_versions(&self) -> Result<Vec<super::ConfigVersion>> {
        Tx::config_versions(self)
    }
    fn switch(&self, name: &str) -> Result<Option<Switch>> {
        Tx::switch(self, name)
    }
    fn count_by_state(&self) -> Result<Vec<(RunState, u64)>> {
        Tx::count_by_state(self)
    }
    fn oldest_in_state(&self, state: RunState) -> Result<Option<super::Oldest>> {
        Tx::oldest_in_state(self, state)
    }
    fn backfill_pending(&self) -> Result<u64> {
        Tx::backfill_pending(self)
    }
    fn schedulers(&self) -> Result<Vec<SchedulerRecord>> {
        Tx::schedulers(self)
    }
}
