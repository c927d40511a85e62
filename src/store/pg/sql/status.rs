//! The PostgreSQL text of the statements of `store::status`.

pub(crate) const OLDEST_IN_STATE: &str = "SELECT id, schedule, updated_at FROM runs WHERE state = \
     $1 ORDER BY updated_at, id LIMIT 1";

pub(crate) const BACKFILL_PENDING: &str = "SELECT COUNT(*) FROM runs WHERE state IN ('pending', \
     'retry_wait') AND pool = 'backfill'";

pub(crate) const ATTEMPT_USAGE: &str = "SELECT tokens, cost_usd FROM attempts WHERE run_id = $1 \
     AND n = $2";

pub(crate) const SCHEMA_VERSION: &str = "SELECT value FROM agentcron_meta WHERE key = 'schema_version'";

/// The database's size in bytes (all of it: a ledger's database is its own).
pub(crate) const DATABASE_BYTES: &str = "SELECT pg_database_size(current_database())";
