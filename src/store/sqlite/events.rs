//! The SQLite text of the statements of `store::events`.

pub(crate) const INSERT_EVENT: &str = "INSERT INTO events (at, kind, tenant, schedule, run_id, detail) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

pub(crate) const MAX_EVENT_ID: &str = "SELECT COALESCE(MAX(id), 0) FROM events";

pub(crate) const POST_EVENT: &str = "INSERT INTO posted_events (name, event_id, payload, arrived_at) \
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name, event_id) DO NOTHING RETURNING seq";

pub(crate) const POSTED_AFTER: &str = "SELECT seq, name, event_id, payload, arrived_at FROM posted_events \
     WHERE seq > ?1 ORDER BY seq LIMIT ?2";
