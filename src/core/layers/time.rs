//! Layer 1 as values: the run a fire becomes, and the trace event that says
//! so. Shared by the engine (time and event triggers, catch-up) and the
//! operator (manual triggers, backfills), so a window opens the same way
//! whoever opens it.

use crate::config::model::ScheduleConfig;
use crate::core::event::{Event, Opener, WindowFacts};
use crate::core::records::{NewRun, Pool, Run, RunReason, RunState};
use crate::core::recovery::catchup::Disposition;
use crate::time::duration::to_delta;
use crate::time::fire::{Fire, FireNote};
use chrono::{DateTime, Utc};

/// Where `run`'s window sits, for its trace events.
pub fn window_facts(run: &Run, note: Option<FireNote>) -> WindowFacts {
    WindowFacts {
        window_key: run.window_key.clone(),
        start: run.window_start,
        end: run.window_end,
        due: run.due_at,
        note: note.map(|n| n.as_str().to_string()),
        pool: run.pool,
    }
}

/// The trace event of a window that became `run`: opened, or created already
/// skipped or expired (calendar, catch-up policy, too old).
pub fn opened_event(run: &Run, note: Option<FireNote>, opener: Opener) -> Event {
    let window = window_facts(run, note);
    let settled = |reason: &Option<String>| reason.clone().unwrap_or_default();
    match run.state {
        RunState::Expired => Event::Expired {
            reason: settled(&run.state_reason),
            run_reason: Some(run.reason),
            window: Some(window),
        },
        RunState::Pending => Event::WindowOpened {
            window,
            reason: run.reason,
            opener,
        },
        _ => Event::Skipped {
            reason: settled(&run.state_reason),
            run_reason: Some(run.reason),
            window: Some(window),
        },
    }
}

/// The run a planned window becomes.
pub(crate) fn new_run_for(s: &ScheduleConfig, fire: &Fire, d: Disposition, now: DateTime<Utc>) -> NewRun {
    let end = fire.at + to_delta(s.close_after);
    let (state, reason, pool, why) = match d {
        Disposition::OnTime => (RunState::Pending, RunReason::Scheduled, Pool::OnTime, None),
        Disposition::CatchUp => (RunState::Pending, RunReason::Catchup, Pool::Backfill, None),
        Disposition::Coalesced => (
            RunState::Skipped,
            RunReason::Catchup,
            Pool::Backfill,
            Some("coalesced: a newer window runs instead (catchup = \"latest\")".to_string()),
        ),
        Disposition::NotCaughtUp => (
            RunState::Skipped,
            RunReason::Catchup,
            Pool::Backfill,
            Some("catchup: missed while the scheduler was not running (catchup = \"none\")".to_string()),
        ),
        Disposition::Expired => (
            RunState::Expired,
            RunReason::Catchup,
            Pool::Backfill,
            Some(format!(
                "expired: older than the catch-up window ({})",
                crate::time::duration::format_duration(s.catchup_window)
            )),
        ),
        Disposition::Calendar => (
            RunState::Skipped,
            RunReason::Scheduled,
            Pool::OnTime,
            Some(format!(
                "calendar: {} is not a business day{}",
                fire.local.date_naive(),
                s.calendar
                    .as_ref()
                    .map(|c| format!(" in {c}"))
                    .unwrap_or_default()
            )),
        ),
    };
    let _ = FireNote::CalendarSkipped;
    NewRun {
        tenant: s.tenant.clone(),
        schedule: s.id.clone(),
        window_key: fire.window_key.clone(),
        window_start: fire.at,
        window_end: end,
        due_at: fire.at,
        state,
        reason,
        pool,
        state_reason: why,
        next_check_at: (state == RunState::Pending).then_some(if d == Disposition::CatchUp {
            now
        } else {
            fire.at
        }),
    }
}
