//! `agentcron explain SCHEDULE [--window KEY | --at TIME] [--json]`: "why did
//! it (not) run?", told by [`crate::trace::explain`]; this verb only opens the
//! store, finds the window (`--at`: the one covering that time) and prints the
//! answer as text or JSON.

use super::db::{self, open_ledger_for_cli};
use super::exit;
use crate::time::{Clock, SystemClock};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use chrono_tz::Tz;
use std::path::Path;

pub struct Options<'a> {
    pub schedule: &'a str,
    pub window: Option<&'a str>,
    /// `--at TIME`: the window covering this instant.
    pub at: Option<&'a str>,
    pub json: bool,
    /// Times in UTC instead of the schedule's zone.
    pub utc: bool,
}

/// `--at`: RFC 3339, or a local `YYYY-MM-DD HH:MM[:SS]` (also with `T`) in
/// `tz`, or a date (its last second: the day's windows have all started).
pub fn parse_at(text: &str, tz: Tz) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(i) = DateTime::parse_from_rfc3339(t) {
        return Ok(i.with_timezone(&Utc));
    }
    let local = [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(t, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(23, 59, 59))
    });
    match local {
        Some(n) => Ok(crate::time::fire::resolve_local(tz, n).earliest()),
        None => Err(format!(
            "`{text}` is not a time; expected RFC 3339 (2026-06-08T09:30:00+08:00) or \
             `YYYY-MM-DD [HH:MM[:SS]]` in the schedule's zone ({})",
            tz.name()
        )),
    }
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let (store, cfg) = match open_ledger_for_cli(config, db) {
        Ok(x) => x,
        Err(code) => return code,
    };
    // Without --at an unknown schedule is told by the explanation itself (as
    // text or JSON, exit 1, with the closest id); --at needs its zone first.
    if opts.at.is_some()
        && let Err(msg) = db::check_schedule_in(&store, cfg.as_ref(), opts.schedule)
    {
        eprintln!("agentcron explain: {msg}");
        return exit::DOES_NOT_HOLD;
    }
    let now = SystemClock.now();
    let mut window = opts.window.map(str::to_string);
    if let Some(text) = opts.at {
        let tz = db::zone(cfg.as_ref(), Some(opts.schedule));
        let at = match parse_at(text, tz) {
            Ok(t) => t,
            Err(msg) => {
                eprintln!("agentcron explain: {msg}");
                return exit::USAGE;
            }
        };
        match store.read(|tx| crate::trace::window_at(tx, cfg.as_ref(), opts.schedule, at)) {
            Ok(Some(key)) => window = Some(key),
            Ok(None) => {
                eprintln!(
                    "agentcron explain: {} has no window at or before {} ({})",
                    opts.schedule,
                    db::local(at, tz),
                    tz.name()
                );
                return exit::DOES_NOT_HOLD;
            }
            Err(e) => {
                eprintln!("agentcron explain: {e}");
                return exit::USAGE;
            }
        }
    }
    let answer = store.read(|tx| {
        crate::trace::explain_with(tx, cfg.as_ref(), opts.schedule, window.as_deref(), now, opts.utc)
    });
    let x = match answer {
        Ok(x) => x,
        Err(e) => {
            eprintln!("agentcron explain: {e}");
            return exit::USAGE;
        }
    };
    if opts.json {
        let code = db::print_json("explain", &x.to_json());
        if code != exit::OK {
            return code;
        }
    } else {
        print!("{}", x.text());
    }
    if x.answered() {
        exit::OK
    } else {
        exit::DOES_NOT_HOLD
    }
}
