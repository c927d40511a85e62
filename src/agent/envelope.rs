//! The JSON envelope an agent receives on stdin (or as the HTTP request body).
//! Field names are binding (DESIGN.md "The agent protocol"); agents parse them.

use crate::store::types::{RunReason, RunState};
use crate::time::duration::format_duration;
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

/// Everything an agent is told about the attempt it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub run_id: i64,
    pub tenant: String,
    pub schedule: String,
    pub window: EnvelopeWindow,
    /// `tenant/schedule/window_key`: the same for every attempt of a run, so an agent
    /// can dedupe its side effects (see [`idempotency_key`]).
    pub idempotency_key: String,
    /// 1-based.
    pub attempt: u32,
    pub reason: RunReason,
    /// The scheduler's "now" in the schedule's time zone, RFC 3339.
    pub now: String,
    pub context: TimeContext,
    /// Summaries of the schedule's last runs, newest first.
    pub memory: Vec<MemoryEntry>,
    pub completed_steps: Vec<String>,
    /// Side-effect steps that started but were never confirmed: check before acting.
    pub uncertain_steps: Vec<String>,
    /// The uncertain step to check; `None` unless `reason` is `verify`.
    pub verify_step: Option<String>,
    /// An operator approved with "resume after step X".
    pub resume_after: Option<String>,
    pub payload: serde_json::Value,
}

/// The window the run belongs to; instants are RFC 3339 in the schedule's local offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeWindow {
    pub key: String,
    pub start: String,
    pub end: String,
    /// IANA name, e.g. `Asia/Shanghai`.
    pub timezone: String,
}

impl EnvelopeWindow {
    pub fn new(key: &str, start: DateTime<Utc>, end: DateTime<Utc>, tz: Tz) -> Self {
        Self {
            key: key.to_string(),
            start: local_rfc3339(start, tz),
            end: local_rfc3339(end, tz),
            timezone: tz.name().to_string(),
        }
    }
}

/// The time context of DESIGN.md: local business day, time since the last success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeContext {
    pub business_day: bool,
    /// e.g. `1d2h` (whole minutes); `None` if the schedule never succeeded.
    pub since_last_success: Option<String>,
    /// RFC 3339, local.
    pub last_success_at: Option<String>,
    pub timezone: String,
}

impl TimeContext {
    pub fn new(now: DateTime<Utc>, tz: Tz, business_day: bool, last_success: Option<DateTime<Utc>>) -> Self {
        Self {
            business_day,
            since_last_success: last_success.map(|at| since(now, at)),
            last_success_at: last_success.map(|at| local_rfc3339(at, tz)),
            timezone: tz.name().to_string(),
        }
    }
}

/// One past run in the execution memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// The window key.
    pub window: String,
    pub state: RunState,
    pub summary: Option<String>,
}

/// `tenant/schedule/window_key`, the key agents and webhooks dedupe on.
pub fn idempotency_key(tenant: &str, schedule: &str, window_key: &str) -> String {
    format!("{tenant}/{schedule}/{window_key}")
}

/// An instant as RFC 3339 in `tz`'s offset at that instant, whole seconds.
pub fn local_rfc3339(at: DateTime<Utc>, tz: Tz) -> String {
    tz.from_utc_datetime(&at.naive_utc())
        .to_rfc3339_opts(SecondsFormat::Secs, false)
}

/// Elapsed time rounded down to whole minutes (`1d2h`, `45m`); seconds are noise to
/// an agent deciding how far back to look. Under a minute is `0m`; a future instant
/// (clock skew) counts as zero.
fn since(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds().max(0) as u64;
    let minutes = secs / 60;
    if minutes == 0 {
        return "0m".to_string();
    }
    format_duration(std::time::Duration::from_secs(minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn local_times_carry_the_schedule_offset() {
        let at = Utc.with_ymd_and_hms(2026, 6, 6, 1, 0, 0).unwrap();
        assert_eq!(
            local_rfc3339(at, chrono_tz::Asia::Shanghai),
            "2026-06-06T09:00:00+08:00"
        );
        assert_eq!(local_rfc3339(at, Tz::UTC), "2026-06-06T01:00:00+00:00");
    }

    #[test]
    fn since_last_success_is_whole_minutes() {
        let now = Utc.with_ymd_and_hms(2026, 6, 6, 12, 0, 0).unwrap();
        let ctx = TimeContext::new(now, Tz::UTC, true, Some(now - chrono::TimeDelta::seconds(93_630)));
        assert_eq!(ctx.since_last_success.as_deref(), Some("1d2h"));
        let ctx = TimeContext::new(now, Tz::UTC, true, Some(now + chrono::TimeDelta::hours(1)));
        assert_eq!(ctx.since_last_success.as_deref(), Some("0m"));
        let ctx = TimeContext::new(now, Tz::UTC, false, None);
        assert_eq!(ctx.since_last_success, None);
        assert_eq!(ctx.last_success_at, None);
    }

    #[test]
    fn idempotency_key_joins_with_slashes() {
        assert_eq!(
            idempotency_key("acme", "daily", "2026-06-06"),
            "acme/daily/2026-06-06"
        );
    }
}
