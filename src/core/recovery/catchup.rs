//! The catch-up planner: what to do with windows that should have opened while
//! nobody was looking (downtime, a suspended laptop, a clock jump), and with
//! windows that closed before their gates passed (`missed`).
//!
//! Pure: given the fires due since the last evaluated instant and `now`, it
//! returns one [`Disposition`] per window. The engine turns them into runs.

use crate::config::model::Catchup;
use crate::time::fire::{Fire, FireNote};
use chrono::{DateTime, TimeDelta, Utc};

/// What happens to one window found by the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Its window is still open: an ordinary on-time run.
    OnTime,
    /// Closed while we were away: a catch-up run in the backfill pool.
    CatchUp,
    /// `catchup = "latest"`: a newer window runs instead (`skipped: coalesced`).
    Coalesced,
    /// `catchup = "none"`: skipped, with an alert.
    NotCaughtUp,
    /// Older than `catchup_window`: never run automatically.
    Expired,
    /// Not a business day: skipped with reason calendar.
    Calendar,
}

/// One planned window.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedWindow {
    pub fire: Fire,
    pub disposition: Disposition,
}

/// Classifies `fires` (oldest first, all at or before `now`). A fire due
/// before `missed_before` — the instant this scheduler began evaluating the
/// schedule again (its start, or the end of a clock jump) — was missed: no
/// scheduler evaluated it when it was due, so it is a catch-up window whether
/// or not its `close_after` has passed (DESIGN.md "Missed means missed").
/// Fires from `missed_before` on are on time.
pub fn plan(
    fires: Vec<Fire>,
    now: DateTime<Utc>,
    missed_before: DateTime<Utc>,
    policy: Catchup,
    catchup_window: TimeDelta,
) -> Vec<PlannedWindow> {
    // The newest window that would run at all: `latest` keeps only this one
    // (an on-time window, if there is one, coalesces every missed one).
    let newest_runnable = fires
        .iter()
        .rposition(|f| f.note != Some(FireNote::CalendarSkipped) && f.at + catchup_window > now);
    fires
        .into_iter()
        .enumerate()
        .map(|(i, fire)| {
            let disposition = if fire.note == Some(FireNote::CalendarSkipped) {
                Disposition::Calendar
            } else if fire.at >= missed_before {
                Disposition::OnTime
            } else if fire.at + catchup_window <= now {
                Disposition::Expired
            } else {
                match policy {
                    Catchup::All => Disposition::CatchUp,
                    Catchup::Latest if newest_runnable == Some(i) => Disposition::CatchUp,
                    Catchup::Latest => Disposition::Coalesced,
                    Catchup::None => Disposition::NotCaughtUp,
                }
            };
            PlannedWindow { fire, disposition }
        })
        .collect()
}

/// Counts of a plan, for the `catchup_planned` event and the CLI preview.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PlanSummary {
    pub on_time: usize,
    pub catch_up: usize,
    pub coalesced: usize,
    pub not_caught_up: usize,
    pub expired: usize,
    pub calendar: usize,
}

pub fn summarize(plan: &[PlannedWindow]) -> PlanSummary {
    let mut s = PlanSummary::default();
    for p in plan {
        match p.disposition {
            Disposition::OnTime => s.on_time += 1,
            Disposition::CatchUp => s.catch_up += 1,
            Disposition::Coalesced => s.coalesced += 1,
            Disposition::NotCaughtUp => s.not_caught_up += 1,
            Disposition::Expired => s.expired += 1,
            Disposition::Calendar => s.calendar += 1,
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn fires(hours: &[i64]) -> Vec<Fire> {
        let base = Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap();
        hours
            .iter()
            .map(|h| {
                let at = base + TimeDelta::hours(*h);
                Fire {
                    at,
                    local: at.fixed_offset(),
                    window_key: format!("k{h}"),
                    note: None,
                }
            })
            .collect()
    }

    fn dispositions(policy: Catchup) -> Vec<Disposition> {
        // 72.5h after base: the window at 0h is past the 72h catch-up window, 1h is not.
        let now = Utc.with_ymd_and_hms(2026, 6, 4, 0, 30, 0).unwrap();
        // The scheduler came back at 72h: the window due then is on time.
        plan(
            fires(&[0, 1, 60, 71, 72]),
            now,
            Utc.with_ymd_and_hms(2026, 6, 4, 0, 0, 0).unwrap(),
            policy,
            TimeDelta::hours(72),
        )
        .into_iter()
        .map(|p| p.disposition)
        .collect()
    }

    #[test]
    fn all_latest_none() {
        use Disposition::*;
        assert_eq!(
            dispositions(Catchup::All),
            [Expired, CatchUp, CatchUp, CatchUp, OnTime]
        );
        assert_eq!(
            dispositions(Catchup::Latest),
            [Expired, Coalesced, Coalesced, Coalesced, OnTime]
        );
        assert_eq!(
            dispositions(Catchup::None),
            [Expired, NotCaughtUp, NotCaughtUp, NotCaughtUp, OnTime]
        );
    }

    #[test]
    fn a_window_missed_while_down_is_caught_up_even_if_still_open() {
        // Hourly, close_after 10m; down 09:05:30 → 09:10:30 with every=2s-like
        // density: here, fires at 09:06 and 09:08 were due while down, though
        // their windows have not closed; 09:10:30's fire is on time.
        let base = Utc.with_ymd_and_hms(2026, 6, 1, 9, 0, 0).unwrap();
        let at = |m: i64, s: i64| base + TimeDelta::minutes(m) + TimeDelta::seconds(s);
        let f = |t: DateTime<Utc>| Fire {
            at: t,
            local: t.fixed_offset(),
            window_key: t.to_rfc3339(),
            note: None,
        };
        let back = at(10, 30);
        let p = plan(
            vec![f(at(6, 0)), f(at(8, 0)), f(back)],
            back,
            back,
            Catchup::All,
            TimeDelta::hours(72),
        );
        let d: Vec<_> = p.iter().map(|p| p.disposition).collect();
        assert_eq!(
            d,
            [Disposition::CatchUp, Disposition::CatchUp, Disposition::OnTime]
        );
    }

    #[test]
    fn latest_runs_the_newest_missed_when_nothing_is_open() {
        let now = Utc.with_ymd_and_hms(2026, 6, 3, 12, 0, 0).unwrap();
        let p = plan(
            fires(&[0, 10, 20]),
            now,
            now,
            Catchup::Latest,
            TimeDelta::hours(72),
        );
        let d: Vec<_> = p.iter().map(|p| p.disposition).collect();
        assert_eq!(
            d,
            [
                Disposition::Coalesced,
                Disposition::Coalesced,
                Disposition::CatchUp
            ]
        );
    }
}
