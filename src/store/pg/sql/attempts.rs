//! The PostgreSQL text of the statements of `store::attempts`.

use crate::store::sql::attempt_cols;

pub(crate) const CLAIM: &str = "UPDATE runs SET state = 'running', lease_owner = $3, lease_expires \
     = $4, attempts = attempts + 1, fencing_token = (SELECT token + 1 FROM fencing WHERE id = \
     1), reason = $5, state_reason = NULL, hold = NULL, cancel_requested = NULL, not_before = \
     NULL, next_check_at = NULL, updated_at = $6 WHERE id = $1 AND state = $2";

pub(crate) const INSERT_CLAIMED_RUN: &str = "INSERT INTO runs (tenant, schedule, window_key, \
     window_start, window_end, due_at, state, reason, pool, attempts, lease_owner, \
     lease_expires, fencing_token, created_at, updated_at, schedule_version) VALUES ($1, $2, \
     $3, $4, $5, $6, 'running', $7, $8, 1, $9, $10, $11, $12, $13, (SELECT version FROM \
     schedule_current WHERE schedule = $2)) ON CONFLICT (window_key, schedule, tenant) DO \
     NOTHING RETURNING id";

pub(crate) const FENCING_TOKEN: &str = "SELECT token FROM fencing WHERE id = 1";

pub(crate) const INSERT_ATTEMPT: &str = "INSERT INTO attempts (run_id, n, fencing_token, tenant, \
     schedule, owner, reason, started_at, status, schedule_version) VALUES ($1, $2, $3, $4, \
     $5, $6, $7, $8, 'running', (SELECT version FROM schedule_current WHERE schedule = $5))";

pub(crate) const INSERT_UNWRITTEN_ATTEMPT: &str = "INSERT INTO attempts (run_id, n, fencing_token, \
     tenant, schedule, owner, reason, started_at, status, schedule_version) VALUES ($1, $2, \
     $3, $4, $5, $6, $7, $8, 'running', (SELECT version FROM schedule_current WHERE schedule \
     = $5)) ON CONFLICT DO NOTHING";

pub(crate) const RENEW_LEASE: &str = "UPDATE runs SET lease_expires = $3 WHERE id = $1 AND \
     fencing_token = $2 AND state = 'running'";

pub(crate) const SET_ENVELOPE: &str = "UPDATE attempts SET envelope = $3 WHERE run_id = $1 AND n = \
     $2";

pub(crate) const SET_STARTED_AT: &str = "UPDATE attempts SET started_at = $3 WHERE run_id = $1 AND \
     fencing_token = $2 AND ended_at IS NULL";

pub(crate) const END_ATTEMPT: &str = "UPDATE attempts SET ended_at = $3, status = $4, error_class \
     = $5, exit_code = $6, summary = $7, processed = $8, message = $9 WHERE run_id = $1 AND \
     fencing_token = $2 AND ended_at IS NULL";

pub(crate) const ATTEMPTS_OF_RUN: &str = concat!(
    "SELECT ",
    attempt_cols!(),
    " FROM attempts WHERE run_id = $1 ORDER BY n"
);

pub(crate) const ADD_USAGE: &str = "UPDATE attempts SET tokens = tokens + $3, cost_usd = cost_usd \
     + $4 WHERE run_id = $1 AND fencing_token = $2";

pub(crate) const RUN_USAGE: &str = "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0.0) \
     FROM attempts WHERE run_id = $1";

pub(crate) const SCHEDULE_COST: &str = "SELECT COALESCE(SUM(cost_usd), 0.0) FROM attempts WHERE \
     tenant = $1 AND schedule = $2 AND started_at >= $3 AND started_at < $4 AND cost_usd <> 0";

pub(crate) const LOG_OF_ATTEMPT: &str = "SELECT log_head, log_tail, log_dropped FROM attempts \
     WHERE run_id = $1 AND fencing_token = $2";

pub(crate) const SET_LOG: &str = "UPDATE attempts SET log_head = $2, log_tail = $3, log_dropped = \
     $4 WHERE fencing_token = $1";

pub(crate) const RECORD_STEP: &str = "INSERT INTO steps (run_id, attempt, name, status, \
     side_effect, at) SELECT $1, $3, $4, $5, $6, $7 WHERE EXISTS ( SELECT 1 FROM runs r JOIN \
     attempts a ON a.run_id = r.id WHERE r.id = $1 AND r.state = 'running' AND \
     r.fencing_token = $2 AND a.fencing_token = $2 AND a.n = $3 AND a.ended_at IS NULL)";

pub(crate) const RECORD_STEP_FENCED: &str = "INSERT INTO steps (run_id, attempt, name, status, \
     side_effect, at) SELECT $1, $3, $4, $5, $6, $7 WHERE EXISTS ( SELECT 1 FROM runs r JOIN \
     attempts a ON a.run_id = r.id WHERE r.id = $1 AND r.state = 'running' AND \
     r.fencing_token = $2 AND r.lease_expires > $8 AND a.fencing_token = $2 AND a.n = $3 AND \
     a.ended_at IS NULL)";

pub(crate) const STEPS_OF_RUN: &str = "SELECT run_id, attempt, name, status, side_effect, at FROM \
     steps WHERE run_id = $1 ORDER BY id";

pub(crate) const REQUEST_CANCEL: &str = "UPDATE runs SET cancel_requested = $3 WHERE id = $1 AND \
     fencing_token = $2 AND state = 'running' AND cancel_requested IS NULL";

pub(crate) const CANCEL_REQUESTS: &str = "SELECT id, fencing_token, cancel_requested FROM runs \
     WHERE state = 'running' AND lease_owner = $1 AND cancel_requested IS NOT NULL";
