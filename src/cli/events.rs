//! `agentcron events`: the trace, oldest first — of one run, one schedule, or
//! everything — optionally only some kinds.

use super::db::{self, Ledger, open_ledger_for_cli};
use super::exit;
use crate::store::types::{Event, EventFilter};
use crate::trace::{Style, describe};
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
    /// Times in UTC instead of the schedule's (or the scheduler's) zone.
    pub utc: bool,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let run_id = match opts.run.map(parse_run_id).transpose() {
        Ok(id) => id,
        Err(msg) => {
            eprintln!("agentcron events: {msg}");
            return exit::USAGE;
        }
    };
    let (store, cfg) = match open_ledger_for_cli(config, db) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Some(s) = opts.schedule
        && let Err(msg) = db::check_schedule_in(&store, cfg.as_ref(), s)
    {
        eprintln!("agentcron events: {msg}");
        return exit::DOES_NOT_HOLD;
    }
    let kinds: Vec<String> = opts
        .kinds
        .iter()
        .flat_map(|k| k.split(','))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    for k in &kinds {
        if let Err(msg) = check_kind(&store, k) {
            eprintln!("agentcron events: {msg}");
            return exit::USAGE;
        }
    }
    let filter = EventFilter {
        run_id,
        schedule: opts.schedule.map(str::to_string),
        kinds,
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
    // One zone for the whole table: a run's and a schedule's events are told
    // in its zone, everything else in the scheduler's.
    let owner = opts
        .schedule
        .or_else(|| run_id.and(events.iter().find_map(|e| e.schedule.as_deref())));
    let tz = db::block_zone(cfg.as_ref(), owner, opts.utc);
    print!("{}", table(&events, tz, true));
    exit::OK
}

/// An event kind given to `--kind` must be one the trace writes (or one the
/// database holds, written by a newer or older agentcron); else a usage error
/// naming the closest kind or listing them.
fn check_kind(store: &Ledger, kind: &str) -> Result<(), String> {
    let known = crate::core::event::KINDS;
    if known.contains(&kind) {
        return Ok(());
    }
    let stored = store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec![kind.to_string()],
                limit: Some(1),
                ..EventFilter::default()
            })
        })
        .map(|e| !e.is_empty())
        .unwrap_or(false);
    if stored {
        return Ok(());
    }
    Err(match crate::operator::did_you_mean(kind, known.iter().copied()) {
        Some(close) => format!("unknown event kind `{kind}`; did you mean `{close}`?"),
        None => format!("unknown event kind `{kind}`; kinds: {}", known.join(", ")),
    })
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

/// Events as an aligned table (AT, KIND, [RUN, SCHEDULE,] DETAIL); every
/// time in it, the details' too, in `tz`.
pub fn table(events: &[Event], tz: chrono_tz::Tz, with_owner: bool) -> String {
    let mut head = vec!["AT", "KIND"];
    if with_owner {
        head.extend(["RUN", "SCHEDULE"]);
    }
    head.push("DETAIL");
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for e in events {
        let mut row = vec![db::local(e.at, tz), e.kind.clone()];
        if with_owner {
            row.push(e.run_id.map_or("-".into(), |r| r.to_string()));
            row.push(e.schedule.clone().unwrap_or_else(|| "-".into()));
        }
        let detail = crate::time::in_zone(&describe(&e.event(), Style::Table), tz);
        row.push(db::cell(&detail, DETAIL_WIDTH));
        rows.push(row);
    }
    db::table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_numbers() {
        assert_eq!(parse_run_id(" 12 ").unwrap(), 12);
        assert!(parse_run_id("abc").unwrap_err().contains("not a run id"));
    }
}
