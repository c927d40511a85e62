//! The PostgreSQL text of the statements of `store::engine_queries`.

pub(crate) const WAITING_PROBE: &str = "SELECT 1 FROM runs WHERE schedule = $2 AND state IN \
     ('pending', 'retry_wait') AND next_check_at > $1 AND hold IN ('quota', 'overlap', \
     'circuit', 'on_time') LIMIT 1";

pub(crate) const WAITING_PROBE_BUT_QUOTA: &str = "SELECT 1 FROM runs WHERE schedule = $2 AND state \
     IN ('pending', 'retry_wait') AND next_check_at > $1 AND hold IN ('overlap', 'circuit', \
     'on_time') LIMIT 1";

pub(crate) const QUOTA_HELD_ON_TIME: &str = "SELECT id, schedule, due_at FROM runs WHERE pool = \
     'on_time' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL AND hold \
     = 'quota' ORDER BY due_at, id LIMIT $1";

pub(crate) const QUOTA_HELD_BACKFILL: &str = "SELECT id, schedule, due_at FROM runs WHERE pool = \
     'backfill' AND state IN ('pending', 'retry_wait') AND next_check_at IS NOT NULL AND hold \
     = 'quota' ORDER BY due_at, id LIMIT $1";

pub(crate) const QUOTA_HELD_OF_ON_TIME: &str = "SELECT id, schedule, due_at FROM runs WHERE \
     schedule = $1 AND pool = 'on_time' AND state IN ('pending', 'retry_wait') AND \
     next_check_at IS NOT NULL AND hold = 'quota' ORDER BY due_at, id LIMIT $2";

pub(crate) const QUOTA_HELD_OF_BACKFILL: &str = "SELECT id, schedule, due_at FROM runs WHERE \
     schedule = $1 AND pool = 'backfill' AND state IN ('pending', 'retry_wait') AND \
     next_check_at IS NOT NULL AND hold = 'quota' ORDER BY due_at, id LIMIT $2";

pub(crate) const BUFFERED_RUNS: &str = "SELECT id FROM runs WHERE tenant = $1 AND schedule = $2 \
     AND state = 'pending' AND state <> 'running' AND hold = 'overlap' ORDER BY window_start, \
     id";

pub(crate) const HAS_NEWER_RUN: &str = "SELECT 1 FROM runs WHERE tenant = $1 AND schedule = $2 AND \
     window_start > $3 AND state <> 'running' UNION ALL SELECT 1 FROM runs WHERE tenant = $1 \
     AND schedule = $2 AND window_start > $3 AND state = 'running' LIMIT 1";

pub(crate) const POSTED_EVENT: &str = "SELECT seq, name, event_id, payload, arrived_at FROM \
     posted_events WHERE name = $1 AND event_id = $2";

pub(crate) const NEXT_LEASE_EXPIRY: &str = "SELECT lease_expires FROM runs WHERE state = 'running' \
     AND lease_expires IS NOT NULL ORDER BY lease_expires LIMIT 1";

pub(crate) const PENDING_ON_TIME: &str = "SELECT window_key FROM runs WHERE schedule = $1 AND \
     state IN ('pending', 'retry_wait') AND state = 'pending' AND pool = 'on_time' ORDER BY \
     next_check_at LIMIT 1";

pub(crate) const RUNNING_BY_SCHEDULE: &str = "SELECT tenant, schedule, pool FROM runs WHERE state \
     = 'running'";

pub(crate) const RECHECK_ALL: &str = "UPDATE runs SET next_check_at = $1 WHERE state IN \
     ('pending', 'retry_wait') AND (schedule = $2 OR $2 IS NULL) AND next_check_at > $1";

pub(crate) const WAKE_HEAD: &str = "UPDATE runs SET next_check_at = $1 WHERE next_check_at > $1 \
     AND id IN ( SELECT id FROM runs WHERE schedule = $2 AND state IN ('pending', \
     'retry_wait') AND pool = 'on_time' AND hold IN ('quota', 'overlap', 'circuit', \
     'on_time') AND (state = 'pending' OR not_before IS NULL OR not_before <= $1) ORDER BY id \
     LIMIT $3)";

pub(crate) const WAKE_HEAD_BUT_QUOTA: &str = "UPDATE runs SET next_check_at = $1 WHERE \
     next_check_at > $1 AND id IN ( SELECT id FROM runs WHERE schedule = $2 AND state IN \
     ('pending', 'retry_wait') AND pool = 'on_time' AND hold IN ('overlap', 'circuit', \
     'on_time') AND (state = 'pending' OR not_before IS NULL OR not_before <= $1) ORDER BY id \
     LIMIT $3)";

pub(crate) const WAKE_CATCHUP: &str = "UPDATE runs SET next_check_at = $1 WHERE next_check_at > $1 \
     AND id IN ( SELECT id FROM runs WHERE state IN ('pending', 'retry_wait') AND pool = \
     'backfill' AND schedule = $2 AND hold IN ('quota', 'overlap', 'circuit', 'on_time') \
     ORDER BY window_start, id LIMIT $3)";

pub(crate) const WAKE_CATCHUP_BUT_QUOTA: &str = "UPDATE runs SET next_check_at = $1 WHERE \
     next_check_at > $1 AND id IN ( SELECT id FROM runs WHERE state IN ('pending', \
     'retry_wait') AND pool = 'backfill' AND schedule = $2 AND hold IN ('overlap', 'circuit', \
     'on_time') ORDER BY window_start, id LIMIT $3)";

pub(crate) const WAKE_QUOTA_ON_TIME: &str = "UPDATE runs SET next_check_at = $1 WHERE id IN ( \
     SELECT id FROM runs WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time' AND \
     next_check_at > $1 AND hold = 'quota' ORDER BY next_check_at, id LIMIT $3)";

pub(crate) const WAKE_QUOTA_CATCHUP: &str = "UPDATE runs SET next_check_at = $1 WHERE \
     next_check_at > $1 AND id IN ( SELECT id FROM runs WHERE state IN ('pending', \
     'retry_wait') AND pool = 'backfill' AND hold = 'quota' ORDER BY window_start, id LIMIT \
     $3)";

pub(crate) const WAKE_RUN: &str = "UPDATE runs SET next_check_at = $1 WHERE id = $2 AND state IN \
     ('pending', 'retry_wait') AND next_check_at > $1";
