//! The PostgreSQL text of the statements of `store::runs`.

use crate::store::sql::run_cols;

pub(crate) const INSERT_RUN: &str = "INSERT INTO runs (tenant, schedule, window_key, window_start, \
     window_end, due_at, state, reason, pool, state_reason, next_check_at, created_at, \
     updated_at, schedule_version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
     $12, (SELECT version FROM schedule_current WHERE schedule = $2)) ON CONFLICT \
     (window_key, schedule, tenant) DO NOTHING RETURNING id";

pub(crate) const RUN_BY_ID: &str = concat!("SELECT ", run_cols!(), " FROM runs WHERE id = $1");

pub(crate) const RUN_BY_WINDOW: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE tenant = $1 AND schedule = $2 AND window_key = $3"
);

pub(crate) const DUE_ON_TIME: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE state IN ('pending', 'retry_wait') AND pool = 'on_time' AND \
     next_check_at <= $1 ORDER BY next_check_at, id LIMIT $2"
);

pub(crate) const DUE_BACKFILL: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' AND \
     next_check_at <= $1 ORDER BY window_start, id LIMIT $2"
);

pub(crate) const DUE_BACKFILL_BY_CHECK: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill' AND \
     next_check_at <= $1 ORDER BY next_check_at, id LIMIT $2"
);

pub(crate) const DUE_BACKFILL_COUNT: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM runs WHERE state \
     IN ('pending', 'retry_wait') AND pool = 'backfill' AND next_check_at <= $1 AND (hold IS \
     NULL OR hold IN ('quota', 'on_time', 'overlap')) LIMIT $2) AS due";

pub(crate) const NEXT_DUE_ON_TIME: &str = "SELECT next_check_at FROM runs WHERE state IN \
     ('pending', 'retry_wait') AND pool = 'on_time' AND next_check_at IS NOT NULL ORDER BY \
     next_check_at LIMIT 1";

pub(crate) const NEXT_DUE_BACKFILL: &str = "SELECT next_check_at FROM runs WHERE state IN \
     ('pending', 'retry_wait') AND pool = 'backfill' AND next_check_at IS NOT NULL ORDER BY \
     next_check_at LIMIT 1";

pub(crate) const PREVIOUS_RUN: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE tenant = $1 AND schedule = $2 AND window_start < $3 AND state <> \
     'running' ORDER BY window_start DESC, id DESC LIMIT 1"
);

pub(crate) const PREVIOUS_RUNNING: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE tenant = $1 AND schedule = $2 AND window_start < $3 AND state = \
     'running' ORDER BY window_start DESC, id DESC LIMIT 1"
);

pub(crate) const COUNT_RUNNING: &str = "SELECT COUNT(*) FROM runs WHERE state = 'running' AND \
     (schedule = $1 OR $1 IS NULL) AND (tenant = $2 OR $2 IS NULL) AND (pool = $3 OR $3 IS \
     NULL)";

pub(crate) const RUNNING_PAIRS: &str = "SELECT tenant, schedule FROM runs WHERE state = 'running'";

pub(crate) const RUNNING_RUNS: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE state = 'running' AND (schedule = $1 OR $1 IS NULL) ORDER BY \
     lease_expires, id"
);

pub(crate) const EXPIRED_LEASES: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE state = 'running' AND lease_expires < $1 ORDER BY lease_expires, id"
);

pub(crate) const RECENT_RUNS: &str = concat!(
    "SELECT ",
    run_cols!(),
    " FROM runs WHERE tenant = $1 AND schedule = $2 AND state <> 'running' AND state IN \
     ('succeeded', 'failed', 'dead', 'skipped', 'expired') ORDER BY window_start DESC, id \
     DESC LIMIT $3"
);

pub(crate) const EXECUTION_MEMORY: &str = "SELECT r.id, r.window_key, r.state, COALESCE( (SELECT \
     COALESCE(a.summary, a.message) FROM attempts a WHERE a.run_id = r.id ORDER BY a.n DESC \
     LIMIT 1), r.state_reason), r.window_start FROM runs r WHERE r.tenant = $1 AND r.schedule \
     = $2 AND r.state <> 'running' AND r.state IN ('succeeded', 'failed', 'dead', 'skipped', \
     'expired') ORDER BY r.window_start DESC, r.id DESC LIMIT $3";

pub(crate) const COUNT_BY_STATE: &str = "SELECT state, n FROM run_counts";

pub(crate) const COUNT_BY_STATE_SINCE: &str = "SELECT state, count(*) FROM runs WHERE updated_at \
     >= $1 GROUP BY state";

pub(crate) const TRANSITION: &str = "UPDATE runs SET state = $3, state_reason = COALESCE($4, \
     state_reason), not_before = CASE WHEN $12 THEN NULL ELSE COALESCE($5, not_before) END, \
     next_check_at = CASE WHEN $12 THEN NULL ELSE COALESCE($6, next_check_at) END, \
     error_class = COALESCE($7, error_class), last_error = COALESCE($8, last_error), \
     resume_after = COALESCE($9, resume_after), reason = COALESCE($10, reason), pool = \
     COALESCE($11, pool), lease_owner = CASE WHEN $13 THEN NULL ELSE lease_owner END, \
     lease_expires = CASE WHEN $13 THEN NULL ELSE lease_expires END, hold = CASE WHEN $3 IN \
     ('pending', 'retry_wait', 'running') THEN NULL ELSE hold END, updated_at = $14 WHERE id \
     = $1 AND state = $2 AND (fencing_token = $15 OR $15 IS NULL)";

pub(crate) const END_RUN: &str = "UPDATE runs SET state = $3, state_reason = COALESCE($4, \
     state_reason), error_class = COALESCE($5, error_class), last_error = COALESCE($6, \
     last_error), resume_after = COALESCE($7, resume_after), not_before = NULL, next_check_at \
     = NULL, lease_owner = NULL, lease_expires = NULL, updated_at = $8 WHERE id = $1 AND \
     state = 'running' AND (fencing_token = $2 OR $2 IS NULL)";

pub(crate) const RUN_STATE: &str = "SELECT state FROM runs WHERE id = $1";

pub(crate) const SET_NEXT_CHECK: &str = "UPDATE runs SET next_check_at = $2, state_reason = \
     COALESCE($3, state_reason) WHERE id = $1 AND state IN ('pending', 'retry_wait')";

pub(crate) const HOLD: &str = "UPDATE runs SET next_check_at = $2, state_reason = $3, hold = $4 \
     WHERE id = $1 AND state IN ('pending', 'retry_wait')";

pub(crate) const RECHECK: &str = "UPDATE runs SET next_check_at = $3, state_reason = CASE WHEN $4 \
     THEN $5 ELSE state_reason END, hold = CASE WHEN $4 THEN $6 ELSE hold END WHERE id = $1 \
     AND state = $2 AND state IN ('pending', 'retry_wait')";
