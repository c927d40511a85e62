//! The PostgreSQL text of the statements of `store::backlog`.

pub(crate) const ALL: &str = "SELECT schedule, next_at, until_at, planned_at FROM catchup_backlog \
     ORDER BY schedule";

pub(crate) const ONE: &str = "SELECT schedule, next_at, until_at, planned_at FROM catchup_backlog \
     WHERE schedule = $1";

pub(crate) const PUT_BACKLOG: &str = "INSERT INTO catchup_backlog (schedule, next_at, until_at, \
     planned_at) VALUES ($1, $2, $3, $4) ON CONFLICT (schedule) DO UPDATE SET next_at = \
     excluded.next_at, until_at = excluded.until_at, planned_at = excluded.planned_at";

pub(crate) const ADVANCE_BACKLOG: &str = "UPDATE catchup_backlog SET next_at = $2 WHERE schedule = \
     $1";

pub(crate) const CLEAR_BACKLOG: &str = "DELETE FROM catchup_backlog WHERE schedule = $1";

pub(crate) const UNFINISHED_CATCHUP: &str = "SELECT COUNT(*) FROM runs WHERE schedule = $1 AND \
     state IN ('pending', 'retry_wait') AND pool = 'backfill' AND window_start < $2";
