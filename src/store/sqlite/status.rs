//! The SQLite text of the statements of `store::status`.

/// No index on `state` (the console reads the same lists by full scan); these
/// run at a status request, not per tick.
pub(crate) const OLDEST_IN_STATE: &str = "SELECT id, schedule, updated_at FROM runs WHERE state = ?1 \
     ORDER BY updated_at, id LIMIT 1";

/// Through the `runs_due_backfill` partial index.
pub(crate) const BACKFILL_PENDING: &str = "SELECT COUNT(*) FROM runs \
     WHERE state IN ('pending', 'retry_wait') AND pool = 'backfill'";

pub(crate) const ATTEMPT_USAGE: &str = "SELECT tokens, cost_usd FROM attempts WHERE run_id = ?1 AND n = ?2";

/// The schema version of the file.
pub(crate) const SCHEMA_VERSION: &str = "PRAGMA user_version";

/// The database's size in bytes (its pages), in memory or on disk.
pub(crate) const DATABASE_BYTES: &str =
    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()";
