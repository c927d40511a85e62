//! The PostgreSQL text of the statements of `store::config_versions`.

pub(crate) const CURRENT_CONFIG: &str = "SELECT version, hash, path, text, loaded_at, loaded_by, \
     status, note, approved_by, approved_at, approval_reason FROM config_versions WHERE \
     version = (SELECT version FROM config_current WHERE id = 1)";

pub(crate) const CONFIG_VERSIONS: &str = "SELECT version, hash, path, text, loaded_at, loaded_by, \
     status, note, approved_by, approved_at, approval_reason FROM config_versions ORDER BY \
     version";

pub(crate) const SCHEDULE_VERSION: &str = "SELECT schedule, version, hash, settings, \
     config_version, created_at FROM schedule_versions WHERE schedule = $1 AND version = $2";

pub(crate) const RUN_OPENED_VERSION: &str = "SELECT schedule_version FROM runs WHERE id = $1";

pub(crate) const ATTEMPT_VERSIONS: &str = "SELECT n, schedule_version FROM attempts WHERE run_id = \
     $1 ORDER BY n";

pub(crate) const CONFIG_WATCH: &str = "SELECT version, reload_seq FROM config_current WHERE id = 1";

pub(crate) const CONFIG_GLANCE: &str = "SELECT hash FROM config_versions WHERE version = (SELECT \
     version FROM config_current WHERE id = 1)";

pub(crate) const CONFIG_GLANCE_2: &str = "SELECT MAX(version) FROM config_versions WHERE status = \
     $1";

pub(crate) const INSERT_CONFIG_VERSION: &str = "INSERT INTO config_versions (hash, path, text, \
     loaded_at, loaded_by, status, note) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING \
     version";

pub(crate) const SET_CONFIG_STATUS: &str = "UPDATE config_versions SET status = $2 WHERE version = \
     $1";

pub(crate) const APPROVE_CONFIG_VERSION: &str = "UPDATE config_versions SET approved_by = $2, \
     approval_reason = $3, approved_at = $4 WHERE version = $1";

/// The ledger's schema makes no `config_current` row (SQLite's does): the
/// first write makes it.
pub(crate) const SET_CURRENT_CONFIG: &str = "INSERT INTO config_current (id, version) VALUES (1, $1) \
     ON CONFLICT (id) DO UPDATE SET version = excluded.version";

pub(crate) const REQUEST_RELOAD: &str = "INSERT INTO config_current (id, reload_seq) VALUES (1, 1) \
     ON CONFLICT (id) DO UPDATE SET reload_seq = config_current.reload_seq + 1";

pub(crate) const LAST_SCHEDULE_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM \
     schedule_versions WHERE schedule = $1";

pub(crate) const PUT_SCHEDULE_VERSION: &str = "INSERT INTO schedule_versions (schedule, version, \
     hash, settings, config_version, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT \
     (schedule, version) DO UPDATE SET hash = excluded.hash, settings = excluded.settings, \
     config_version = excluded.config_version, created_at = excluded.created_at";

pub(crate) const SET_SCHEDULE_CURRENT: &str = "INSERT INTO schedule_current (schedule, version) \
     VALUES ($1, $2) ON CONFLICT (schedule) DO UPDATE SET version = excluded.version";

pub(crate) const DROP_SCHEDULE_CURRENT: &str = "DELETE FROM schedule_current WHERE schedule = $1";

pub(crate) const SET_SCHEDULER_CONFIG_HASH: &str = "UPDATE schedulers SET config_hash = $2 WHERE \
     owner = $1";

pub(crate) const DROP_SCHEDULE_BACKLOG: &str = "DELETE FROM catchup_backlog WHERE schedule = $1";

pub(crate) const RENAME_IDLE_RUNS: &str = "UPDATE runs SET schedule = $2 WHERE schedule = $1 AND \
     state <> 'running'";

pub(crate) const RENAME_RUNNING_RUNS: &str = "UPDATE runs SET schedule = $2 WHERE schedule = $1 \
     AND state = 'running'";

pub(crate) const RENAME_ATTEMPTS: &str = "UPDATE attempts SET schedule = $2 WHERE schedule = $1";

pub(crate) const DROP_STATE: &str = "DELETE FROM schedule_state WHERE schedule = $1";

pub(crate) const RENAME_STATE: &str = "UPDATE schedule_state SET schedule = $2 WHERE schedule = $1";

pub(crate) const DROP_BACKLOG: &str = "DELETE FROM catchup_backlog WHERE schedule = $1";

pub(crate) const RENAME_BACKLOG: &str = "UPDATE catchup_backlog SET schedule = $2 WHERE schedule = \
     $1";

pub(crate) const COPY_SCHEDULE_VERSIONS: &str = "INSERT INTO schedule_versions (schedule, version, \
     hash, settings, config_version, created_at) SELECT $2, version, hash, settings, \
     config_version, created_at FROM schedule_versions WHERE schedule = $1 ON CONFLICT \
     (schedule, version) DO UPDATE SET hash = excluded.hash, settings = excluded.settings, \
     config_version = excluded.config_version, created_at = excluded.created_at";

pub(crate) const DROP_OLD_SCHEDULE_CURRENT: &str = "DELETE FROM schedule_current WHERE schedule = \
     $1";

/// One stored configuration by version.
pub(crate) const CONFIG_VERSION: &str = "SELECT version, hash, path, text, loaded_at, loaded_by, \
     status, note, approved_by, approved_at, approval_reason FROM config_versions WHERE version = $1";

/// Each current schedule's version with its settings.
pub(crate) const CURRENT_SCHEDULE_VERSIONS: &str = "SELECT v.schedule, v.version, v.hash, \
     v.settings, v.config_version, v.created_at \
     FROM schedule_current c JOIN schedule_versions v \
     ON v.schedule = c.schedule AND v.version = c.version";
