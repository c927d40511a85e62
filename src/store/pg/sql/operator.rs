//! The PostgreSQL text of the statements of `store::operator`.

pub(crate) const SCHEDULE_STATE: &str = "SELECT schedule, last_evaluated, circuit, \
     circuit_changed_at, consecutive_failures, paused, paused_reason, concurrency_divisor, \
     last_start, last_success FROM schedule_state WHERE schedule = $1";

pub(crate) const ALL_SCHEDULE_STATES: &str = "SELECT schedule, last_evaluated, circuit, \
     circuit_changed_at, consecutive_failures, paused, paused_reason, concurrency_divisor, \
     last_start, last_success FROM schedule_state ORDER BY schedule";

pub(crate) const PUT_SCHEDULE_STATE: &str = "INSERT INTO schedule_state (schedule, last_evaluated, \
     circuit, circuit_changed_at, consecutive_failures, paused, paused_reason, \
     concurrency_divisor, last_start, last_success) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
     $9, $10) ON CONFLICT (schedule) DO UPDATE SET last_evaluated = excluded.last_evaluated, \
     circuit = excluded.circuit, circuit_changed_at = excluded.circuit_changed_at, \
     consecutive_failures = excluded.consecutive_failures, paused = excluded.paused, \
     paused_reason = excluded.paused_reason, concurrency_divisor = \
     excluded.concurrency_divisor, last_start = excluded.last_start, last_success = \
     excluded.last_success";

pub(crate) const UPDATE_SCHEDULE_STATE: &str = "UPDATE schedule_state SET last_evaluated = $2, \
     circuit = $3, circuit_changed_at = $4, consecutive_failures = $5, paused = $6, \
     paused_reason = $7, concurrency_divisor = $8, last_start = $9, last_success = $10 WHERE \
     schedule = $1";

pub(crate) const UPDATE_LAST_EVALUATED: &str = "UPDATE schedule_state SET last_evaluated = $2 \
     WHERE schedule = $1";

pub(crate) const UPDATE_LAST_SUCCESS: &str = "UPDATE schedule_state SET last_success = $2 WHERE \
     schedule = $1";

pub(crate) const SET_LAST_EVALUATED: &str = "INSERT INTO schedule_state (schedule, last_evaluated) \
     VALUES ($1, $2) ON CONFLICT (schedule) DO UPDATE SET last_evaluated = \
     excluded.last_evaluated";

pub(crate) const SET_BORN: &str = "INSERT INTO schedule_state (schedule, last_evaluated, born_at) \
     VALUES ($1, $2, $3) ON CONFLICT (schedule) DO UPDATE SET last_evaluated = \
     excluded.last_evaluated, born_at = COALESCE(schedule_state.born_at, excluded.born_at)";

pub(crate) const BORN_AT: &str = "SELECT born_at FROM schedule_state WHERE schedule = $1";

pub(crate) const SWITCH: &str = r#"SELECT name, "on", actor, reason, at FROM switches WHERE name = $1"#;

pub(crate) const SWITCHES: &str = r#"SELECT name, "on", actor, reason, at FROM switches ORDER BY name"#;

pub(crate) const SET_SWITCH: &str = r#"INSERT INTO switches (name, "on", actor, reason, at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (name) DO UPDATE SET "on" = excluded."on", actor = excluded.actor,
     reason = excluded.reason, at = excluded.at"#;

pub(crate) const RUN_EXISTS: &str = "SELECT 1 FROM runs WHERE id = $1";

pub(crate) const INSERT_APPROVAL: &str = "INSERT INTO approvals (run_id, approved, actor, reason, \
     resume_after, at) VALUES ($1, $2, $3, $4, $5, $6)";

pub(crate) const APPROVALS_OF_RUN: &str = "SELECT run_id, approved, actor, reason, resume_after, \
     at FROM approvals WHERE run_id = $1 ORDER BY id";

pub(crate) const MAINTENANCE_AT: &str = "SELECT id, from_at, to_at, reason, actor, schedules FROM \
     maintenance WHERE to_at > $1 AND from_at <= $1 ORDER BY from_at, id";

pub(crate) const MAINTENANCE_LIST: &str = "SELECT id, from_at, to_at, reason, actor, schedules \
     FROM maintenance ORDER BY from_at, id";

pub(crate) const INSERT_MAINTENANCE: &str = "INSERT INTO maintenance (from_at, to_at, reason, \
     actor, schedules, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id";

pub(crate) const SET_LAST_START: &str = "INSERT INTO schedule_state (schedule, last_start) VALUES \
     ($1, $2) ON CONFLICT (schedule) DO UPDATE SET last_start = excluded.last_start";
