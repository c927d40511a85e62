//! The SQLite text of the statements of `store::status`.

/// No index on `state` (the console reads the same lists by full scan); these
/// run at a status request, not per tick.
pub(crate) const OLDEST_IN_STATE: &str = "SELECT id, schedule, updated_at FROM runs WHERE state = ?1 \
     ORDER BY updated_at, id LIMIT 1";

/// Through the `runs_due_backfill` partial index.
pub(crate) const BACKFILL_PENDING: &str = "SELECT COUNT(*) FROM runs \
     WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill'";

pub(crate) const ATTEMPT_USAGE: &str = "SELECT tokens, cost_usd FROM attempts WHERE run_id = ?1 AND n = ?2";
