//! Text the panes share: relative and absolute times, durations, and the
//! one-line reading of trace events (worded by [`crate::trace::describe`]).
//! Pure functions of their arguments (`now` is always passed in).

use crate::store::Event;
use crate::trace::{Style, describe};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// A compact duration: `42s`, `4m12s`, `3h05m`, `2d04h`.
pub fn duration_short(secs: i64) -> String {
    let s = secs.unsigned_abs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// `at` relative to `now`: `in 4m12s`, `3h05m ago`, `now`.
pub fn relative(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    if secs == 0 {
        "now".to_string()
    } else if secs > 0 {
        format!("in {}", duration_short(secs))
    } else {
        format!("{} ago", duration_short(secs))
    }
}

/// A countdown to `at`: `4m12s`, or `due` once it passed.
pub fn countdown(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    if secs <= 0 {
        "due".to_string()
    } else {
        duration_short(secs)
    }
}

/// `2026-06-06 09:00` in `tz`.
pub fn local_minute(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).format("%Y-%m-%d %H:%M").to_string()
}

/// `06-06 09:00:05` in `tz`: short enough for event lists.
pub fn local_short(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).format("%m-%d %H:%M:%S").to_string()
}

/// `09:00:05` when `at` is on today's local date, else `06-05 09:00`: event
/// times, right-aligned to 11 columns so lists line up.
pub fn event_time(at: DateTime<Utc>, now: DateTime<Utc>, tz: Tz) -> String {
    let local = at.with_timezone(&tz);
    if local.date_naive() == now.with_timezone(&tz).date_naive() {
        format!("{:>11}", local.format("%H:%M:%S").to_string())
    } else {
        local.format("%m-%d %H:%M").to_string()
    }
}

/// `2026-06-06 09:00:05 CST` in `tz`: the header clock.
pub fn clock(at: DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z").to_string()
}

/// At most `width` characters, with `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// The first line of `s` (agent errors can be long and multi-line).
pub fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// One line saying what an event means, for event lists (the trace's
/// [`Style::Pane`] reading), its stored instants told in `tz` like the
/// list's times.
pub fn event_summary(ev: &Event, tz: Tz) -> String {
    crate::time::in_zone(&describe(&ev.event(), Style::Pane), tz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lists_tell_stored_instants_in_the_console_zone() {
        let ev = Event {
            id: 1,
            at: DateTime::<Utc>::from_timestamp(0, 0).unwrap(),
            kind: "switch_held".into(),
            tenant: None,
            schedule: Some("s".into()),
            run_id: Some(1),
            detail: serde_json::json!({"switch": "circuit", "verdict": "skip",
                "reason": "circuit_open: open after 2 consecutive failed runs; probe after 2026-12-01T08:56:27.504Z"}),
        };
        assert_eq!(
            event_summary(&ev, chrono_tz::Asia::Shanghai),
            "circuit: circuit_open: open after 2 consecutive failed runs; probe after 2026-12-01 16:56:27 +08:00"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(duration_short(42), "42s");
        assert_eq!(duration_short(252), "4m12s");
        assert_eq!(duration_short(3 * 3600 + 300), "3h05m");
        assert_eq!(duration_short(2 * 86_400 + 4 * 3600), "2d04h");
        let now = DateTime::from_timestamp(1_000_000, 0).expect("valid");
        assert_eq!(relative(now, now + chrono::Duration::seconds(90)), "in 1m30s");
        assert_eq!(relative(now, now - chrono::Duration::seconds(90)), "1m30s ago");
        assert_eq!(countdown(now, now - chrono::Duration::seconds(1)), "due");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }
}
