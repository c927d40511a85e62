//! A run's detail view (Enter on a run): its attempts, steps, events, bounded
//! log, the envelope, and its explanation — read in one transaction on the
//! poller thread, never in `view`.

use super::{DETAIL_EVENTS, DETAIL_LOG_BYTES};
use crate::config::model::Config;
use crate::store::{Approval, Attempt, Event, EventFilter, Run, Step, Store, StoreError, Tx};
use crate::trace::Explanation;
use chrono::{DateTime, Utc};

/// A run's detail view: attempts, steps, events, bounded log, envelope.
#[derive(Debug, Clone)]
pub struct RunDetail {
    pub run: Run,
    pub attempts: Vec<Attempt>,
    pub steps: Vec<Step>,
    /// Newest [`DETAIL_EVENTS`], oldest first.
    pub events: Vec<Event>,
    pub approvals: Vec<Approval>,
    /// Why it ran (or not), as `agentcron explain` tells it; `None` if not told.
    pub explanation: Option<Explanation>,
}

/// A run's detail view, bounded: the newest [`DETAIL_EVENTS`] events and the
/// last [`DETAIL_LOG_BYTES`] of each attempt's log. Without a config or a
/// clock its explanation is told in UTC as of the run's last update; the
/// console uses [`load_run_detail_with`].
pub fn load_run_detail(store: &Store, run_id: i64) -> Result<RunDetail, StoreError> {
    store.read(|tx| read_run_detail(tx, None, None, run_id))
}

/// A run's detail view with its explanation told in the schedule's zone as of `now`.
pub fn load_run_detail_with(
    store: &Store,
    cfg: Option<&Config>,
    now: DateTime<Utc>,
    run_id: i64,
) -> Result<RunDetail, StoreError> {
    store.read(|tx| read_run_detail(tx, cfg, Some(now), run_id))
}

fn read_run_detail(
    tx: &Tx,
    cfg: Option<&Config>,
    now: Option<DateTime<Utc>>,
    run_id: i64,
) -> Result<RunDetail, StoreError> {
    let run = tx.run(run_id)?;
    let mut attempts = tx.attempts(run_id)?;
    for a in &mut attempts {
        if a.log.len() > DETAIL_LOG_BYTES {
            let cut = a.log.ceil_char_boundary(a.log.len() - DETAIL_LOG_BYTES);
            a.log = format!("…[{cut} earlier bytes not shown]…\n{}", &a.log[cut..]);
        }
    }
    let steps = tx.steps(run_id)?;
    let mut events = tx.events(&EventFilter {
        run_id: Some(run_id),
        newest_first: true,
        limit: Some(DETAIL_EVENTS),
        ..EventFilter::default()
    })?;
    events.reverse();
    let approvals = tx.approvals(run_id)?;
    // Told in the console's zone (its config's), as everything on its screens.
    let tz = cfg.map_or(chrono_tz::Tz::UTC, |c| c.scheduler.timezone);
    let explanation = crate::trace::explain_run(tx, cfg, &run, now.unwrap_or(run.updated_at), tz)?;
    Ok(RunDetail {
        run,
        attempts,
        steps,
        events,
        approvals,
        explanation: Some(explanation),
    })
}
