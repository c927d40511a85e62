//! The PostgreSQL text of the statements of `store::registry`.

pub(crate) const REGISTER: &str = "INSERT INTO schedulers (owner, host, pid, version, config_hash, \
     heartbeat_ms, started_at, last_seen, stopped_at, lost_at, lost_by) VALUES ($1, $2, $3, \
     $4, $5, $6, $7, $8, NULL, NULL, NULL) ON CONFLICT (owner) DO UPDATE SET host = \
     excluded.host, pid = excluded.pid, version = excluded.version, config_hash = \
     excluded.config_hash, heartbeat_ms = excluded.heartbeat_ms, started_at = \
     excluded.started_at, last_seen = excluded.last_seen, stopped_at = NULL, lost_at = NULL, \
     lost_by = NULL";

pub(crate) const SEEN: &str = "UPDATE schedulers SET last_seen = $2, lost_at = NULL, lost_by = \
     NULL WHERE owner = $1 AND stopped_at IS NULL";

pub(crate) const STOPPED: &str = "UPDATE schedulers SET last_seen = $2, stopped_at = $2 WHERE \
     owner = $1";

pub(crate) const MARK_LOST: &str = "UPDATE schedulers SET lost_at = $3, lost_by = $4 WHERE owner = \
     $1 AND last_seen = $2 AND lost_at IS NULL AND stopped_at IS NULL";

pub(crate) const ALL: &str = "SELECT owner, host, pid, version, config_hash, heartbeat_ms, \
     started_at, last_seen, stopped_at, lost_at, lost_by FROM schedulers ORDER BY started_at, \
     owner";

pub(crate) const FORGET: &str = "DELETE FROM schedulers WHERE last_seen < $1 AND (stopped_at IS \
     NOT NULL OR lost_at IS NOT NULL)";
