//! `agentcron events`: the trace, oldest first — of one run, one schedule, or
//! everything — optionally only some kinds.

use super::db::{self, open_for_cli};
use super::exit;
use crate::config::Config;
use crate::store::types::{Event, EventFilter};
use serde_json::{Value, json};
use std::path::Path;

/// Width of the DETAIL column in tables.
const DETAIL_WIDTH: usize = 110;

pub struct Options<'a> {
    /// A run id, as typed.
    pub run: Option<&'a str>,
    pub schedule: Option<&'a str>,
    /// Kinds, each possibly comma-separated.
    pub kinds: &'a [String],
    pub json: bool,
    /// The most recent N events (still printed oldest first); 0 = all.
    pub limit: usize,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let run_id = match opts.run.map(parse_run_id).transpose() {
        Ok(id) => id,
        Err(msg) => {
            eprintln!("agentcron events: {msg}");
            return exit::USAGE;
        }
    };
    let (store, cfg) = match open_for_cli(config, db, false) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let filter = EventFilter {
        run_id,
        schedule: opts.schedule.map(str::to_string),
        kinds: opts
            .kinds
            .iter()
            .flat_map(|k| k.split(','))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect(),
        // Newest first so the limit keeps the latest; reversed below.
        newest_first: true,
        limit: (opts.limit > 0).then_some(opts.limit),
        ..EventFilter::default()
    };
    let got = store.read(|tx| {
        let exists = match run_id {
            Some(id) => tx.try_run(id)?.is_some(),
            None => true,
        };
        Ok((exists, tx.events(&filter)?))
    });
    let mut events = match got {
        Ok((false, _)) => {
            eprintln!(
                "agentcron events: run {} not found",
                run_id.map(|i| i.to_string()).unwrap_or_default()
            );
            return exit::DOES_NOT_HOLD;
        }
        Ok((true, ev)) => ev,
        Err(e) => {
            eprintln!("agentcron events: {e}");
            return exit::USAGE;
        }
    };
    events.reverse();
    if opts.json {
        let rows: Vec<Value> = events.iter().map(event_json).collect();
        return db::print_json("events", &Value::Array(rows));
    }
    if events.is_empty() {
        println!("no events");
        return exit::OK;
    }
    print!("{}", table(&events, cfg.as_ref(), true));
    exit::OK
}

/// A run id as typed on the command line.
pub fn parse_run_id(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| format!("`{text}` is not a run id; run ids are numbers (see `agentcron runs`)"))
}

/// The binding JSON shape of an event (DESIGN.md "Command line").
pub fn event_json(e: &Event) -> Value {
    json!({
        "at": db::rfc3339(e.at),
        "kind": e.kind,
        "run": e.run_id,
        "schedule": e.schedule,
        "detail": e.detail,
    })
}

/// Events as an aligned table (AT, KIND, [RUN, SCHEDULE,] DETAIL); times in
/// each event's schedule zone.
pub fn table(events: &[Event], cfg: Option<&Config>, with_owner: bool) -> String {
    let mut head = vec!["AT", "KIND"];
    if with_owner {
        head.extend(["RUN", "SCHEDULE"]);
    }
    head.push("DETAIL");
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for e in events {
        let tz = db::zone(cfg, e.schedule.as_deref());
        let mut row = vec![db::local(e.at, tz), e.kind.clone()];
        if with_owner {
            row.push(e.run_id.map_or("-".into(), |r| r.to_string()));
            row.push(e.schedule.clone().unwrap_or_else(|| "-".into()));
        }
        row.push(db::cell(&short_detail(&e.kind, &e.detail), DETAIL_WIDTH));
        rows.push(row);
    }
    db::table(&rows)
}

fn s<'a>(d: &'a Value, key: &str) -> &'a str {
    d.get(key).and_then(Value::as_str).unwrap_or("")
}

fn n(d: &Value, key: &str) -> String {
    match d.get(key) {
        Some(Value::Null) | None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// A one-line reading of an event's detail: the fields that matter for its kind,
/// `key=value` pairs for kinds this build does not know.
pub fn short_detail(kind: &str, d: &Value) -> String {
    let text = match kind {
        "window_opened" => format!(
            "window {} due {} ({}, {} pool)",
            s(d, "window_key"),
            s(d, "due"),
            s(d, "reason"),
            s(d, "pool")
        ),
        "gate" => format!(
            "{} {}: {} ({} ms)",
            s(d, "name"),
            s(d, "result"),
            s(d, "reason"),
            n(d, "ms")
        ),
        "decision" => format!("{}: {}", s(d, "verdict"), s(d, "reason")),
        "switch_held" => format!("{} ({}): {}", s(d, "switch"), s(d, "verdict"), s(d, "reason")),
        "skipped" | "expired" | "parked_for_human" | "missed" => {
            // Created already decided (calendar, catch-up) the detail says `why`,
            // and `reason` is why the run exists; decided later, `reason` is why.
            let typed = crate::core::event::Event::from_row(kind, d);
            let why = match &typed {
                crate::core::event::Event::Skipped { reason, .. }
                | crate::core::event::Event::Expired { reason, .. } => reason.as_str(),
                _ => s(d, "reason"),
            };
            match d.get("window_key").and_then(Value::as_str) {
                Some(key) => format!("window {key}: {why}"),
                None => why.to_string(),
            }
        }
        "claimed" => format!(
            "attempt {} by {} (token {}, {} ms after due)",
            n(d, "attempt"),
            s(d, "owner"),
            n(d, "token"),
            n(d, "lateness_ms")
        ),
        "started" => format!(
            "attempt {} ({}), agent {}",
            n(d, "attempt"),
            s(d, "reason"),
            s(d, "agent")
        ),
        "step" => format!(
            "attempt {}: {} {}{}",
            n(d, "attempt"),
            s(d, "name"),
            s(d, "status"),
            if d.get("side_effect") == Some(&Value::Bool(true)) {
                " (side effect)"
            } else {
                ""
            }
        ),
        "succeeded" => format!("attempt {}: {}", n(d, "attempt"), s(d, "summary")),
        "failed" => format!(
            "attempt {} {}: {}",
            n(d, "attempt"),
            s(d, "class"),
            s(d, "reason")
        ),
        "retry_scheduled" => format!(
            "not before {} (attempt {})",
            s(d, "not_before"),
            n(d, "next_attempt")
        ),
        "dead_lettered" => format!("after {} attempts: {}", n(d, "attempts"), s(d, "reason")),
        "lost" => format!("attempt {}: {}", n(d, "attempt"), s(d, "reason")),
        "alert" => format!("{}: {}", s(d, "what"), s(d, "message")),
        "switch_changed" => format!(
            "{} {} by {}: {}",
            s(d, "name"),
            if d.get("on") == Some(&Value::Bool(true)) {
                "on"
            } else {
                "off"
            },
            s(d, "actor"),
            s(d, "reason")
        ),
        _ => key_values(d),
    };
    // Kinds whose fields were all absent read better as key=value.
    if text.chars().all(|c| !c.is_alphanumeric()) {
        key_values(d)
    } else {
        text
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_read_as_one_line() {
        let gate = json!({"name": "upstream", "kind": "command", "result": "wait",
                          "reason": "count = 0", "ms": 3, "on_fail": "fail"});
        assert_eq!(short_detail("gate", &gate), "upstream wait: count = 0 (3 ms)");
        let sk = json!({"reason": "calendar: 2026-10-01 is not a business day"});
        assert_eq!(
            short_detail("skipped", &sk),
            "calendar: 2026-10-01 is not a business day"
        );
        let opened = json!({"window_key": "2026-10-01", "why": "calendar: holiday"});
        assert_eq!(
            short_detail("skipped", &opened),
            "window 2026-10-01: calendar: holiday"
        );
        assert_eq!(
            short_detail("tick", &json!({"owner": "h:1", "running": 0})),
            "owner=h:1 running=0"
        );
        assert_eq!(parse_run_id(" 12 ").unwrap(), 12);
        assert!(parse_run_id("abc").unwrap_err().contains("not a run id"));
    }
}
