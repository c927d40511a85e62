//! `agentcron runs`: the runs in the database, newest window first, with the
//! reason each is in its state.

use super::db::{self, open_ledger_for_cli};
use super::exit;
use crate::store::types::{Run, RunFilter, RunState};
use serde_json::{Value, json};
use std::path::Path;

/// Width of the REASON column; `show` and `--json` carry the whole text.
const REASON_WIDTH: usize = 64;

pub struct Options<'a> {
    pub schedule: Option<&'a str>,
    pub tenant: Option<&'a str>,
    /// Comma-separated run states.
    pub state: Option<&'a str>,
    pub json: bool,
    /// At most this many runs; 0 = all.
    pub limit: usize,
    /// Times in UTC instead of the schedule's (or the scheduler's) zone.
    pub utc: bool,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let states = match opts.state.map(parse_states).transpose() {
        Ok(s) => s.unwrap_or_default(),
        Err(msg) => {
            eprintln!("agentcron runs: {msg}");
            return exit::USAGE;
        }
    };
    let (store, cfg) = match open_ledger_for_cli(config, db) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let checked = opts
        .schedule
        .map(|s| db::check_schedule_in(&store, cfg.as_ref(), s))
        .transpose()
        .and_then(|_| opts.tenant.map(|t| db::check_tenant(cfg.as_ref(), t)).transpose());
    if let Err(msg) = checked {
        eprintln!("agentcron runs: {msg}");
        return exit::DOES_NOT_HOLD;
    }
    let filter = RunFilter {
        schedule: opts.schedule.map(str::to_string),
        tenant: opts.tenant.map(str::to_string),
        states,
        newest_first: true,
        limit: (opts.limit > 0).then_some(opts.limit),
    };
    let runs = match store.read(|tx| tx.runs(&filter)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentcron runs: {e}");
            return exit::USAGE;
        }
    };
    if opts.json {
        let rows: Vec<Value> = runs.iter().map(run_json).collect();
        return db::print_json("runs", &Value::Array(rows));
    }
    if runs.is_empty() {
        println!("no runs{}", describe_filter(opts));
        return exit::OK;
    }
    let tz = db::block_zone(cfg.as_ref(), opts.schedule, opts.utc);
    print!("{}", table(&runs, tz));
    exit::OK
}

/// `pending,retry_wait` → states; an unknown name lists the valid ones.
pub fn parse_states(text: &str) -> Result<Vec<RunState>, String> {
    let mut out = vec![];
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match RunState::parse(name) {
            Some(st) => out.push(st),
            None => {
                let valid: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
                return Err(format!(
                    "unknown state `{name}`; valid states: {}",
                    valid.join(", ")
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("--state needs a state name, e.g. --state failed,dead".into());
    }
    Ok(out)
}

/// The binding JSON shape of a run (DESIGN.md "Command line"); `reason` is why
/// the run is in its state.
pub fn run_json(r: &Run) -> Value {
    json!({
        "id": r.id,
        "tenant": r.tenant,
        "schedule": r.schedule,
        "window_key": r.window_key,
        "state": r.state.as_str(),
        "attempts": r.attempts,
        "reason": r.state_reason,
        "updated_at": db::rfc3339(r.updated_at),
    })
}

fn describe_filter(opts: &Options<'_>) -> String {
    let mut parts = vec![];
    if let Some(s) = opts.schedule {
        parts.push(format!("schedule {s}"));
    }
    if let Some(t) = opts.tenant {
        parts.push(format!("tenant {t}"));
    }
    if let Some(s) = opts.state {
        parts.push(format!("state {s}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// Runs as an aligned table; every time in it in `tz`.
fn table(runs: &[Run], tz: chrono_tz::Tz) -> String {
    let mut rows = vec![
        [
            "ID", "SCHEDULE", "WINDOW", "STATE", "ATTEMPTS", "REASON", "UPDATED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in runs {
        rows.push(vec![
            r.id.to_string(),
            r.schedule.clone(),
            crate::time::key_text(&r.window_key, tz),
            r.state.as_str().to_string(),
            r.attempts.to_string(),
            db::cell(
                &crate::time::in_zone(r.state_reason.as_deref().unwrap_or("-"), tz),
                REASON_WIDTH,
            ),
            db::local(r.updated_at, tz),
        ]);
    }
    db::table(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_with_commas_and_unknown_names_list_the_valid_ones() {
        assert_eq!(
            parse_states("failed, dead").unwrap(),
            [RunState::Failed, RunState::Dead]
        );
        let err = parse_states("done").unwrap_err();
        assert!(err.contains("unknown state `done`"), "{err}");
        assert!(err.contains("pending, running, retry_wait"), "{err}");
        assert!(parse_states(",").is_err());
    }
}
