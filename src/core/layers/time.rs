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
            cause: None,
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

/// What layer 1 says about a waiting run at `now`.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeLayer {
    /// A retry before its `not_before` (durable backoff): look again then.
    NotYetDue(DateTime<Utc>),
    /// The window closed (or the catch-up window ended) first: decided.
    Closed(crate::core::decision::Decision),
    /// Open: the time verdict in words, for the decision.
    Open(String),
}

/// Layer 1 for `run` of schedule `s`: is the window still open, or the retry due?
pub fn check(run: &Run, s: &ScheduleConfig, now: DateTime<Utc>) -> TimeLayer {
    use crate::config::model::Overlap;
    use crate::core::decision::{Decision, HoldKind, Verdict};
    // A retry is durable backoff: it is not due before `not_before`, even if
    // something brought its check forward (resume, unkill and slot wake-ups
    // move `next_check_at` only).
    if run.state == RunState::RetryWait
        && let Some(not_before) = run.not_before
        && now < not_before
    {
        return TimeLayer::NotYetDue(not_before);
    }
    // Instants in reasons are written as the machine writes them (UTC, whole
    // seconds); every reader tells them in its block's zone (time::in_zone).
    let local = crate::time::rfc3339_secs;
    let (time, deadline) = match (run.state, run.reason) {
        (RunState::RetryWait, _) => (
            format!(
                "retry after attempt {}: not before {} reached",
                run.attempts,
                run.not_before.map(local).unwrap_or_default()
            ),
            None,
        ),
        (_, RunReason::Manual) => {
            // An operator asked for it: it may wait on its gates for a catch-up
            // window counted from the request, whatever its window's age.
            let exp = run.created_at + to_delta(s.catchup_window);
            (
                format!("manual run of window {}; gives up {}", run.window_key, local(exp)),
                Some((exp, Verdict::Expired)),
            )
        }
        (_, RunReason::Catchup) => {
            let exp = run.window_start + to_delta(s.catchup_window);
            (
                format!("catch-up of window {}; expires {}", run.window_key, local(exp)),
                Some((exp, Verdict::Expired)),
            )
        }
        _ => (
            // `window KEY open START – END (ZONE)`, written in place: every
            // decision of a window makes it.
            {
                let zone = s.timezone.name();
                let mut t = String::with_capacity(run.window_key.len() + zone.len() + 64);
                t.push_str("window ");
                t.push_str(&run.window_key);
                t.push_str(" open ");
                crate::time::push_rfc3339_secs(&mut t, run.window_start);
                t.push_str(" – ");
                crate::time::push_rfc3339_secs(&mut t, run.window_end);
                t.push_str(" (");
                t.push_str(zone);
                t.push(')');
                t
            },
            Some((run.window_end, Verdict::Missed)),
        ),
    };
    // A window buffered behind its schedule's running one, or waiting for the
    // catch-up run already going (it goes right after), waits its turn past
    // its own close.
    let buffered = (run.hold == Some(HoldKind::Overlap)
        && matches!(s.overlap, Overlap::BufferOne | Overlap::BufferAll))
        || (run.hold == Some(HoldKind::OnTime) && run.pool == Pool::OnTime);
    if let Some((end, verdict)) = deadline
        && now >= end
        && !buffered
    {
        let reason = match verdict {
            Verdict::Expired => format!("catch-up window of {} ended at {}", run.window_key, local(end)),
            _ => format!(
                "window closed at {} before the run could start{}",
                local(end),
                run.state_reason
                    .as_ref()
                    .map(|r| format!(" (last hold: {r})"))
                    .unwrap_or_default()
            ),
        };
        return TimeLayer::Closed(Decision::by_time(time, verdict, reason));
    }
    TimeLayer::Open(time)
}
