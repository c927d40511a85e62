//! The SQLite text of the statements of `store::engine_queries`.

/// Holds an attempt's end may lift; see `HoldKind::woken_by_an_end`.
macro_rules! slot_holds {
    () => {
        "'quota', 'overlap', 'circuit', 'on_time'"
    };
}
macro_rules! slot_holds_but_quota {
    () => {
        "'overlap', 'circuit', 'on_time'"
    };
}

/// Whether a schedule has runs [`Tx::recheck_held`] would wake.
macro_rules! waiting_probe_sql {
    ($holds:expr) => {
        concat!(
            "SELECT 1 FROM runs INDEXED BY runs_waiting \
             WHERE schedule = ?2 AND state IN ('pending', 'retry_wait') AND next_check_at > ?1 \
               AND hold IN (",
            $holds,
            ") LIMIT 1"
        )
    };
}

/// The quota-held runs of one pool (with `schedule = ?1`, of one schedule),
/// the pool and the limit written into the text: with the limit bound
/// (`LIMIT ?1`), SQLite prepared the statement again at every execution
/// (`sqlite3Reprepare`, an eighth of the outage drain's time).
macro_rules! quota_held_sql {
    ($index:literal, $schedule:literal, $pool:literal, $limit:literal) => {
        concat!(
            "SELECT id, schedule, due_at FROM runs INDEXED BY ",
            $index,
            " WHERE ",
            $schedule,
            "pool = '",
            $pool,
            "' AND state IN ('pending', 'retry_wait') \
             AND next_check_at IS NOT NULL AND hold = 'quota' ORDER BY due_at, id LIMIT ",
            $limit
        )
    };
}

pub(crate) const WAITING_PROBE: &str = waiting_probe_sql!(slot_holds!());

pub(crate) const WAITING_PROBE_BUT_QUOTA: &str = waiting_probe_sql!(slot_holds_but_quota!());

pub(crate) const QUOTA_HELD_ON_TIME: &str = quota_held_sql!("runs_quota_held", "", "on_time", "?1");

pub(crate) const QUOTA_HELD_BACKFILL: &str = quota_held_sql!("runs_quota_held", "", "backfill", "?1");

pub(crate) const QUOTA_HELD_OF_ON_TIME: &str = quota_held_sql!(
    "runs_quota_held_by_schedule",
    "schedule = ?1 AND ",
    "on_time",
    "?2"
);

pub(crate) const QUOTA_HELD_OF_BACKFILL: &str = quota_held_sql!(
    "runs_quota_held_by_schedule",
    "schedule = ?1 AND ",
    "backfill",
    "?2"
);

/// Pending runs of a schedule held by an overlap buffer, oldest first
/// (`runs_window`, whose half of the runs they are: schema 16).
pub(crate) const BUFFERED_RUNS: &str = "SELECT id FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND state = 'pending' AND state <> 'running' AND hold = 'overlap' ORDER BY window_start, id";

/// A run of the schedule with a newer window, in either half of its runs.
pub(crate) const HAS_NEWER_RUN: &str = "SELECT 1 FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND window_start > ?3 AND state <> 'running' \
     UNION ALL SELECT 1 FROM runs WHERE tenant = ?1 AND schedule = ?2 \
     AND window_start > ?3 AND state = 'running' LIMIT 1";

/// One posted event by its name and id.
pub(crate) const POSTED_EVENT: &str = "SELECT seq, name, event_id, payload, arrived_at FROM posted_events \
     WHERE name = ?1 AND event_id = ?2";

pub(crate) const NEXT_LEASE_EXPIRY: &str = "SELECT lease_expires FROM runs WHERE state = 'running' AND lease_expires IS NOT NULL \
             ORDER BY lease_expires LIMIT 1";

pub(crate) const PENDING_ON_TIME: &str = "SELECT window_key FROM runs INDEXED BY runs_waiting \
             WHERE schedule = ?1 AND state IN ('pending', 'retry_wait') AND state = 'pending' \
             AND pool = 'on_time' ORDER BY next_check_at LIMIT 1";

pub(crate) const RUNNING_BY_SCHEDULE: &str =
    "SELECT tenant, schedule, pool FROM runs WHERE state = 'running'";

pub(crate) const RECHECK_ALL: &str = "UPDATE runs SET next_check_at = ?1 WHERE state IN ('pending', 'retry_wait') \
             AND (schedule = ?2 OR ?2 IS NULL) AND next_check_at > ?1";

/// The head of a schedule's on-time queue held by `$holds` (a retry only
/// once its backoff is over), by id, through its waiting runs.
macro_rules! wake_head {
    ($holds:expr) => {
        concat!(
            "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
               SELECT id FROM runs INDEXED BY runs_waiting \
               WHERE schedule = ?2 AND state IN ('pending', 'retry_wait') AND pool = 'on_time' \
                 AND hold IN (",
            $holds,
            ") AND (state = 'pending' OR not_before IS NULL OR not_before <= ?1) \
               ORDER BY id LIMIT ?3)"
        )
    };
}
pub(crate) const WAKE_HEAD: &str = wake_head!(slot_holds!());
pub(crate) const WAKE_HEAD_BUT_QUOTA: &str = wake_head!(slot_holds_but_quota!());

/// The oldest catch-up runs of a schedule held by `$holds`, in window
/// order, through its waiting runs.
macro_rules! wake_catchup {
    ($holds:expr) => {
        concat!(
            "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
               SELECT id FROM runs INDEXED BY runs_waiting \
               WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' \
                 AND schedule = ?2 AND hold IN (",
            $holds,
            ") ORDER BY window_start, id LIMIT ?3)"
        )
    };
}
pub(crate) const WAKE_CATCHUP: &str = wake_catchup!(slot_holds!());
pub(crate) const WAKE_CATCHUP_BUT_QUOTA: &str = wake_catchup!(slot_holds_but_quota!());

/// The on-time runs of any schedule held by a quota longest, by next check.
pub(crate) const WAKE_QUOTA_ON_TIME: &str = "UPDATE runs SET next_check_at = ?1 WHERE id IN ( \
       SELECT id FROM runs INDEXED BY runs_due_on_time \
       WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time' \
         AND next_check_at > ?1 AND hold = 'quota' \
       ORDER BY next_check_at, id LIMIT ?3)";

/// The oldest catch-up runs of any schedule held by a quota, in window order.
pub(crate) const WAKE_QUOTA_CATCHUP: &str = "UPDATE runs SET next_check_at = ?1 WHERE next_check_at > ?1 AND id IN ( \
       SELECT id FROM runs INDEXED BY runs_due_backfill \
       WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' AND hold = 'quota' \
       ORDER BY window_start, id LIMIT ?3)";

pub(crate) const WAKE_RUN: &str = "UPDATE runs SET next_check_at = ?1 WHERE id = ?2 \
     AND state IN ('pending', 'retry_wait') AND next_check_at > ?1";
