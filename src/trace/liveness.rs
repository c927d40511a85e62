//! Was a scheduler alive around an instant? Told from the `tick` and
//! `scheduler_started` events, found by id (ids grow with time) so any size of
//! trail costs a few primary-key lookups.

use super::story::{Story, human};
use crate::core::event::Event;
use crate::store::types::{Event as Row, EventFilter};
use chrono::{DateTime, TimeDelta, Utc};

/// Signs that a scheduler was alive.
pub(super) const ALIVE_KINDS: [&str; 2] = ["tick", "scheduler_started"];
/// No sign of life for longer than this is a gap worth naming.
const QUIET: TimeDelta = TimeDelta::minutes(5);

type StoreResult<T> = crate::store::Result<T>;

/// `main started` / `main ticked`.
fn who(e: &Row) -> String {
    match e.event() {
        Event::SchedulerStarted { owner, .. } => format!("{owner} started"),
        Event::Tick { owner, .. } => format!("{owner} ticked"),
        _ => "a scheduler ticked".to_string(),
    }
}

/// The last sign of life before `due`, the first after, a quiet gap between
/// them and a restart ending it — as one clause.
pub(super) fn liveness(
    tx: &dyn crate::store::read::LedgerRead,
    due: DateTime<Utc>,
    story: &Story,
) -> StoreResult<String> {
    let before = last_alive_before(tx, due)?;
    let after = first_alive_from(tx, due, &ALIVE_KINDS)?;
    let restart = first_alive_from(tx, due, &["scheduler_started"])?;
    let text = match (before, after) {
        (None, None) => "no scheduler has recorded any activity in this database".to_string(),
        (None, Some(a)) => format!(
            "no scheduler had run on this database before then; the first sign of life is {} at {}",
            who(&a),
            story.full(a.at)
        ),
        (Some(b), None) => format!("no scheduler activity since {} at {}", who(&b), story.full(b.at)),
        (Some(b), Some(a)) if a.at - b.at > QUIET => {
            let mut t = format!(
                "no scheduler activity recorded between {} ({}) and {} ({})",
                story.full(b.at),
                who(&b),
                story.full(a.at),
                who(&a),
            );
            t.push_str(&format!(" — a gap of {}", human(a.at - b.at)));
            if let Some(r) = restart.filter(|r| r.id != a.id && r.at - a.at < QUIET) {
                t.push_str(&format!("; {} at {}", who(&r), story.full(r.at)));
            }
            t
        }
        (Some(b), Some(a)) => format!(
            "a scheduler was running then ({} at {}, {} at {})",
            who(&b),
            story.full(b.at),
            who(&a),
            story.full(a.at)
        ),
    };
    Ok(text)
}

/// The smallest event id from which events are at or after `t`, by binary search.
fn first_id_from(tx: &dyn crate::store::read::LedgerRead, t: DateTime<Utc>) -> StoreResult<i64> {
    let (mut lo, mut hi) = (1, tx.max_event_id()? + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let next = tx
            .events(&EventFilter {
                after_id: Some(mid - 1),
                limit: Some(1),
                ..EventFilter::default()
            })?
            .pop();
        match next {
            Some(e) if e.at < t => lo = mid + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

fn alive_filter(kinds: &[&str], after_id: i64, limit: usize) -> EventFilter {
    EventFilter {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        after_id: Some(after_id),
        limit: Some(limit),
        ..EventFilter::default()
    }
}

/// The last sign of life at or before `t`, looking back further and further.
fn last_alive_before(tx: &dyn crate::store::read::LedgerRead, t: DateTime<Utc>) -> StoreResult<Option<Row>> {
    let bound = first_id_from(tx, t + TimeDelta::milliseconds(1))?;
    for back in [
        TimeDelta::hours(1),
        TimeDelta::days(1),
        TimeDelta::days(30),
        TimeDelta::days(3650),
    ] {
        let mut after = first_id_from(tx, t - back)? - 1;
        let mut found = None;
        loop {
            let page = tx.events(&alive_filter(&ALIVE_KINDS, after, 1000))?;
            let Some(tail) = page.last() else { break };
            after = tail.id;
            let done = page.len() < 1000 || tail.id >= bound;
            for e in page {
                if e.id < bound && e.at <= t {
                    found = Some(e);
                }
            }
            if done {
                break;
            }
        }
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The first event of `kinds` at or after `t`.
fn first_alive_from(
    tx: &dyn crate::store::read::LedgerRead,
    t: DateTime<Utc>,
    kinds: &[&str],
) -> StoreResult<Option<Row>> {
    let from = first_id_from(tx, t)?;
    Ok(tx.events(&alive_filter(kinds, from - 1, 1))?.pop())
}
