//! One line per event: what an event says, in the words of the place that
//! shows it. The fields are read once, here, from the typed event; the three
//! [`Style`]s only word them differently (each wording is pinned by the tests
//! of its place: the `events` table, the console's lists, rehearsal timelines).

use crate::core::event::Event;
use crate::time::rfc3339;
use serde_json::Value;

/// Where the line is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `agentcron events` / `show`: the DETAIL column — the fields that matter
    /// with their numbers (tokens, lateness, ms), `key=value` for the rest.
    Table,
    /// The console's timeline and run-detail event lists: short, the kind is
    /// in the column beside it.
    Pane,
    /// Rehearsal timelines (headless and in the console player): a sentence.
    Timeline,
}

/// The one-line reading of `e` in `style`. URL userinfo is masked (`***`)
/// here too, for rows written before the writers masked it.
pub fn describe(e: &Event, style: Style) -> String {
    let text = match reading(e, style) {
        Some(text) => text,
        None => fallback(e, style),
    };
    if text.contains("://") {
        crate::secrets::redact_urls(&text)
    } else {
        text
    }
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// The reading of a kind that has one in `style`; `None`: the generic one.
fn reading(e: &Event, style: Style) -> Option<String> {
    use Style::{Pane, Table, Timeline};
    let text = match e {
        Event::WindowOpened { window, reason, .. } => match style {
            Table => format!(
                "window {} due {} ({}, {} pool)",
                window.window_key,
                rfc3339(window.due),
                reason.as_str(),
                window.pool.as_str()
            ),
            Timeline => format!(
                "window {} opened ({}, {} pool{})",
                window.window_key,
                reason.as_str(),
                window.pool.as_str(),
                window.note.as_ref().map(|n| format!(", {n}")).unwrap_or_default()
            ),
            Pane => return None,
        },
        Event::Gate(g) => match style {
            Timeline => format!("gate {} {}: {}", g.name, g.result, g.reason),
            Table | Pane => format!("{} {}: {} ({} ms)", g.name, g.result, g.reason, g.ms),
        },
        Event::Decision(d) => match style {
            Pane if d.reason.is_empty() => d.verdict.as_str().to_string(),
            Table | Pane => format!("{}: {}", d.verdict.as_str(), d.reason),
            Timeline => return None,
        },
        Event::SwitchHeld {
            switch,
            reason,
            verdict,
        } => match style {
            Table => format!("{switch} ({}): {reason}", verdict.as_str()),
            Pane => format!("{switch}: {reason}"),
            Timeline => format!("held by {switch}: {reason}"),
        },
        Event::Skipped { reason, window, .. } | Event::Expired { reason, window, .. } => {
            match (style, window) {
                (Table, Some(w)) => format!("window {}: {reason}", w.window_key),
                (Table | Timeline, _) => reason.clone(),
                (Pane, _) => return None,
            }
        }
        Event::ParkedForHuman { reason } | Event::Missed { reason, .. } => match style {
            Table | Timeline => reason.clone(),
            Pane => return None,
        },
        Event::Claimed {
            owner,
            attempt,
            token,
            lateness_ms,
            ..
        } => match style {
            Table => format!("attempt {attempt} by {owner} (token {token}, {lateness_ms} ms after due)"),
            Pane => format!("attempt {attempt} by {owner}"),
            Timeline => format!("claimed by {owner} (attempt {attempt})"),
        },
        Event::Started {
            attempt,
            reason,
            agent,
            ..
        } => match style {
            Table => format!("attempt {attempt} ({}), agent {agent}", reason.as_str()),
            Timeline => format!("attempt {attempt} started ({})", reason.as_str()),
            Pane => return None,
        },
        Event::Step {
            name,
            status,
            attempt,
            side_effect,
            ..
        } => match style {
            Table => format!(
                "attempt {attempt}: {name} {}{}",
                status.as_str(),
                if *side_effect { " (side effect)" } else { "" }
            ),
            Pane => format!("{name} {}", status.as_str()),
            Timeline => format!("step {name} {}", status.as_str()),
        },
        Event::Succeeded { attempt, summary, .. } => {
            let summary = summary.as_deref().unwrap_or("");
            match style {
                Table => format!("attempt {attempt}: {summary}"),
                Timeline => format!("succeeded: {summary}"),
                Pane => return None,
            }
        }
        Event::Failed {
            attempt,
            class,
            reason,
            ..
        } => match style {
            Table => format!(
                "attempt {} {}: {reason}",
                attempt.map(|a| a.to_string()).unwrap_or_default(),
                class.as_str()
            ),
            Pane => format!("{}: {}", class.as_str(), reason.lines().next().unwrap_or("")),
            Timeline => format!(
                "attempt {} failed ({}): {reason}",
                attempt.map_or("null".to_string(), |a| a.to_string()),
                class.as_str()
            ),
        },
        Event::RetryScheduled {
            not_before,
            next_attempt,
            ..
        } => match style {
            Table => format!("not before {} (attempt {next_attempt})", rfc3339(*not_before)),
            Pane => format!("not before {}", rfc3339(*not_before)),
            Timeline => format!("retry not before {}", rfc3339(*not_before)),
        },
        Event::DeadLettered { attempts, reason, .. } => match style {
            Table => format!("after {attempts} attempts: {reason}"),
            Timeline => format!("dead-lettered after {attempts} attempts: {reason}"),
            Pane => return None,
        },
        Event::Lost { attempt, reason, .. } => match style {
            Table => format!("attempt {attempt}: {reason}"),
            Timeline => format!("attempt {attempt} lost: {reason}"),
            Pane => return None,
        },
        Event::Alert(a) => match style {
            Table => format!("{}: {}", a.what, a.message),
            Timeline => format!("ALERT {}", a.message),
            Pane => return None,
        },
        Event::SwitchChanged {
            name,
            on,
            actor,
            reason,
            ..
        } => format!("{name} {} by {actor}: {reason}", on_off(*on)),
        Event::Approved { by, reason, .. } | Event::Rejected { by, reason, .. } => match style {
            Pane => format!("by {by}: {reason}"),
            Timeline => format!("{} by {by}: {reason}", e.kind()),
            Table => return None,
        },
        Event::Requeued { by, reason, .. } => match style {
            Pane => format!("by {by}: {reason}"),
            Table | Timeline => return None,
        },
        Event::CatchupPlanned { windows, summary, .. } if style == Timeline => format!(
            "catch-up planned after a gap: {windows} window(s), {}",
            serde_json::to_string(summary).unwrap_or_default()
        ),
        Event::CatchupQueued { expires, .. } if style == Timeline => {
            format!("missed window queued for catch-up until {}", rfc3339(*expires))
        }
        Event::CircuitOpened {
            consecutive_failures, ..
        } if style == Timeline => format!(
            "circuit opened after {} consecutive failed runs",
            consecutive_failures.map_or("null".to_string(), |n| n.to_string())
        ),
        Event::CircuitClosed { reason, .. } | Event::CircuitHalfOpen { reason } if style == Timeline => {
            format!("{}: {reason}", e.kind())
        }
        Event::ConcurrencyHalved { effective, .. } if style == Timeline => {
            format!("concurrency halved: effective {effective}")
        }
        Event::ClockJump { from, to, .. } if style == Timeline => {
            format!("clock jumped from {} to {}", rfc3339(*from), rfc3339(*to))
        }
        Event::SchedulerLost {
            owner, last_seen, by, ..
        } => format!(
            "scheduler {owner} lost: silent since {} (seen by {by})",
            rfc3339(*last_seen)
        ),
        Event::ConfigApplied {
            version,
            by,
            added,
            removed,
            changed,
            renamed,
            rollback_of,
            ..
        } => {
            let mut parts = vec![];
            for (what, ids) in [("added", added), ("removed", removed), ("changed", changed)] {
                if !ids.is_empty() {
                    parts.push(format!("{what} {}", ids.join(", ")));
                }
            }
            if !renamed.is_empty() {
                let pairs: Vec<String> = renamed.iter().map(|(a, b)| format!("{a} → {b}")).collect();
                parts.push(format!("renamed {}", pairs.join(", ")));
            }
            let what = if parts.is_empty() {
                "no schedule changed".to_string()
            } else {
                parts.join("; ")
            };
            match rollback_of {
                Some(of) => format!("config v{version} applied by {by} (rollback to v{of}): {what}"),
                None => format!("config v{version} applied by {by}: {what}"),
            }
        }
        Event::ReloadRequested { seq, by, allow_empty } => format!(
            "reload #{seq} requested by {by}{}",
            if *allow_empty {
                " (a file without schedules allowed)"
            } else {
                ""
            }
        ),
        Event::ConfigRejected {
            path,
            errors,
            kept_version,
            ..
        } => format!(
            "config {path} rejected ({} error(s)), {}: {}",
            errors.len(),
            kept_version.map_or("nothing applied".to_string(), |v| format!("v{v} keeps running")),
            errors.first().map_or("", String::as_str)
        ),
        Event::ConfigWaiting {
            version, schedules, ..
        } => format!(
            "config v{version} waits for approve-config (changes {})",
            schedules.join(", ")
        ),
        Event::ScheduleVersioned {
            version,
            config_version,
            fields,
        } => format!(
            "schedule v{version} (config v{config_version}): {}",
            if fields.is_empty() {
                "new".to_string()
            } else {
                fields.join(", ")
            }
        ),
        Event::StaleResult { token, .. } if style == Timeline => {
            format!("late result of token {token} ignored")
        }
        _ => return None,
    };
    // A reading whose fields were all empty says less than the fields themselves.
    if style == Table && !text.chars().any(char::is_alphanumeric) {
        return None;
    }
    Some(text)
}

/// Kinds without a reading of their own (and rows of no known shape): their
/// fields as stored.
fn fallback(e: &Event, style: Style) -> String {
    let detail = match e {
        Event::Other { detail, .. } => detail.clone(),
        typed => typed.to_row().1,
    };
    match style {
        Style::Table => key_values(&detail),
        Style::Pane => match &detail {
            Value::Object(map) if map.len() == 1 && map.contains_key("reason") => text(&map["reason"]),
            _ => detail_pairs(&detail),
        },
        Style::Timeline => {
            let t = detail.to_string();
            match t.char_indices().nth(160) {
                Some((cut, _)) => format!("{}…", &t[..cut]),
                None => t,
            }
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// `k=v k=v` of the non-null fields, nested values as JSON.
fn key_values(d: &Value) -> String {
    match d {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `k=v k=v` of the top-level scalar fields, arrays and objects by size.
fn detail_pairs(d: &Value) -> String {
    match d {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::Array(a) => format!("{k}=[{}]", a.len()),
                Value::Object(o) => format!("{k}={{{}}}", o.len()),
                other => format!("{k}={}", text(other)),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(kind: &str, d: Value) -> String {
        describe(&Event::from_row(kind, &d), Style::Table)
    }

    #[test]
    fn details_read_as_one_line() {
        let gate = json!({"name": "upstream", "kind": "command", "result": "wait",
                          "reason": "count = 0", "ms": 3, "on_fail": "fail"});
        assert_eq!(table("gate", gate.clone()), "upstream wait: count = 0 (3 ms)");
        let sk = json!({"reason": "calendar: 2026-10-01 is not a business day"});
        assert_eq!(table("skipped", sk), "calendar: 2026-10-01 is not a business day");
        // A window created already settled, as rows before the typed trace said it.
        let opened = json!({"window_key": "2026-10-01", "start": "2026-10-01T01:00:00.000Z",
            "end": "2026-10-01T02:00:00.000Z", "due": "2026-10-01T01:00:00.000Z",
            "pool": "on_time", "reason": "scheduled", "why": "calendar: holiday"});
        assert_eq!(table("skipped", opened), "window 2026-10-01: calendar: holiday");
        assert_eq!(
            table("tick", json!({"owner": "h:1", "running": 0})),
            "owner=h:1 running=0"
        );
        assert_eq!(
            describe(&Event::from_row("gate", &gate), Style::Timeline),
            "gate upstream wait: count = 0"
        );
    }

    #[test]
    fn rows_of_no_known_shape_read_by_their_fields() {
        let odd = Event::from_row("heartbeat", &json!({"attempt": "one", "x": [1, 2]}));
        assert_eq!(describe(&odd, Style::Table), "attempt=one x=[1,2]");
        assert_eq!(describe(&odd, Style::Pane), "attempt=one x=[2]");
        assert_eq!(describe(&odd, Style::Timeline), r#"{"attempt":"one","x":[1,2]}"#);
        let long = Event::from_row("test", &json!({"t": "é".repeat(200)}));
        let line = describe(&long, Style::Timeline);
        assert_eq!(line.chars().count(), 161);
        assert!(line.ends_with('…'));
    }

    #[test]
    fn the_console_says_a_lone_reason_as_it_is() {
        let parked = Event::from_row("parked_for_human", &json!({"reason": "uncertain step deliver"}));
        assert_eq!(describe(&parked, Style::Pane), "uncertain step deliver");
        let failed = Event::from_row(
            "failed",
            &json!({"attempt": 1, "class": "retryable", "reason": "upstream 503\nbody: …"}),
        );
        assert_eq!(describe(&failed, Style::Pane), "retryable: upstream 503");
        assert_eq!(
            describe(&failed, Style::Timeline),
            "attempt 1 failed (retryable): upstream 503\nbody: …"
        );
    }

    /// Each place's wording, as its readers said it before the typed trace,
    /// on rows dumped from databases of that build.
    #[test]
    fn each_place_keeps_its_wording() {
        let rows: Vec<Value> = serde_json::from_str(include_str!(
            "../../tests/fixtures/events-before-typed-trace.json"
        ))
        .unwrap();
        let first = |kind: &str| {
            let r = rows.iter().find(|r| r["kind"] == kind).unwrap();
            Event::from_row(kind, &r["detail"])
        };
        let all = |kind: &str| {
            let e = first(kind);
            [Style::Table, Style::Pane, Style::Timeline].map(|s| describe(&e, s))
        };
        assert_eq!(
            all("claimed"),
            [
                "attempt 1 by main (token 1, 0 ms after due)",
                "attempt 1 by main",
                "claimed by main (attempt 1)"
            ]
        );
        assert_eq!(
            all("step"),
            [
                "attempt 1: sync started (side effect)",
                "sync started",
                "step sync started"
            ]
        );
        assert_eq!(
            all("retry_scheduled"),
            [
                "not before 2026-06-08T01:15:24.756Z (attempt 2)",
                "not before 2026-06-08T01:15:24.756Z",
                "retry not before 2026-06-08T01:15:24.756Z"
            ]
        );
        assert_eq!(
            all("started"),
            [
                "attempt 1 (scheduled), agent sync",
                "attempt=1 token=1 reason=scheduled agent=sync timeout_ms=600000",
                "attempt 1 started (scheduled)"
            ]
        );
        assert_eq!(
            all("approved"),
            [
                "by=alice reason=checked the refund list with finance at=2026-06-08T01:30:00.000Z",
                "by alice: checked the refund list with finance",
                "approved by alice: checked the refund list with finance"
            ]
        );
        assert_eq!(
            all("circuit_opened"),
            [
                "consecutive_failures=3 probe_after=2026-06-08T05:01:00.000Z",
                "consecutive_failures=3 probe_after=2026-06-08T05:01:00.000Z",
                "circuit opened after 3 consecutive failed runs"
            ]
        );
        assert_eq!(all("circuit_closed")[1], "probe run succeeded");
        assert_eq!(all("catchup_planned")[1].split(' ').nth(3), Some("summary={6}"));
    }
}
