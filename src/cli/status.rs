//! `agentcron status [--json]`: is it working? Exit 0 when at least one
//! scheduler is alive and the kill switch is off, 1 otherwise (for cron jobs
//! and monitoring checks), 2 when nothing could be opened. A config file that
//! does not load is a warning (and `config_file_invalid` in the JSON), not the
//! exit code: the schedulers run the ledger's version.

use super::db::{self, open_ledger_for_cli};
use super::exit;
use crate::core::registry::Liveness;
use crate::status::Status;
use crate::time::{Clock, SystemClock};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::path::Path;

/// `utc`: the text tells its times in UTC instead of the scheduler's zone.
pub fn run(config: &Path, db: Option<&Path>, json: bool, utc: bool) -> i32 {
    let (store, cfg) = match open_ledger_for_cli(config, db) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let now = SystemClock.now();
    let status = match store.read(|tx| crate::status::status(tx, cfg.as_ref(), now)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentcron status: {e}");
            return exit::USAGE;
        }
    };
    if json {
        // The file on disk, not what runs: the ledger's version runs either way.
        let value = status.to_json_with_file(store.file_invalid.clone());
        let code = db::print_json("status", &value);
        if code != exit::OK {
            return code;
        }
    } else {
        // One zone for the whole output: the scheduler's, or UTC with --utc.
        let tz = db::block_zone(cfg.as_ref(), None, utc);
        print!("{}", text(&status, tz));
    }
    if status.ok() {
        exit::OK
    } else {
        exit::DOES_NOT_HOLD
    }
}

fn ago(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let secs = (now - t).num_seconds().max(0).unsigned_abs();
    crate::time::duration::format_duration(std::time::Duration::from_secs(secs))
}

/// The text form: one line per fact, then the schedules.
pub fn text(s: &Status, tz: Tz) -> String {
    let t = |x: DateTime<Utc>| db::local(x, tz);
    let mut out = String::new();
    let alive: Vec<_> = s
        .schedulers
        .iter()
        .filter(|r| r.liveness(s.at) == Liveness::Alive)
        .collect();
    if alive.is_empty() {
        match s.summary.last_seen {
            Some(seen) => out.push_str(&format!(
                "NO SCHEDULER ALIVE: last seen {} ({} ago); {} windows due since\n",
                t(seen),
                ago(s.at, seen),
                s.windows_due_since()
            )),
            None => out.push_str("NO SCHEDULER ALIVE: no scheduler has registered in this database\n"),
        }
    } else {
        out.push_str(&format!(
            "schedulers: {} alive{}\n",
            alive.len(),
            match (s.summary.stopped, s.summary.lost) {
                (0, 0) => String::new(),
                (st, lo) => format!(", {st} stopped, {lo} lost"),
            }
        ));
    }
    let older = s.on_older_config();
    for r in &s.schedulers {
        let state = r.liveness(s.at);
        out.push_str(&format!(
            "  {} {}  pid {} on {}, agentcron {}, config {}{}, started {}, last seen {}{}\n",
            state.as_str(),
            r.owner,
            r.pid,
            r.host,
            r.version,
            r.config_hash,
            if older.contains(&r.owner) {
                " (an older config version)"
            } else {
                ""
            },
            t(r.started_at),
            t(r.last_seen),
            match (&r.lost_by, state) {
                (Some(by), Liveness::Lost) => format!(" (recorded lost by {by})"),
                _ => String::new(),
            }
        ));
    }
    if let Some((v, hash)) = &s.config {
        out.push_str(&format!(
            "config: v{v} (hash {hash}){}\n",
            s.config_waiting
                .map(|w| format!("; v{w} waits for approve-config"))
                .unwrap_or_default()
        ));
    }
    match s.kill.as_ref().filter(|k| k.on) {
        Some(k) => out.push_str(&format!(
            "kill switch: ON since {} by {}: {}\n",
            t(k.at),
            k.actor,
            k.reason
        )),
        None => out.push_str("kill switch: off\n"),
    }
    if !s.paused.is_empty() {
        let list: Vec<String> = s
            .paused
            .iter()
            .map(|(id, r)| format!("{id} ({})", r.as_deref().unwrap_or("no reason")))
            .collect();
        out.push_str(&format!("paused: {}\n", list.join(", ")));
    }
    if !s.circuits.is_empty() {
        let list: Vec<String> = s
            .circuits
            .iter()
            .map(|(id, st, since, n)| {
                format!(
                    "{id} ({}{}, {n} failures)",
                    st.as_str(),
                    since.map(|x| format!(" since {}", t(x))).unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!("open circuits: {}\n", list.join(", ")));
    }
    let counts: Vec<String> = s
        .counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(st, n)| format!("{n} {}", st.as_str()))
        .collect();
    out.push_str(&format!(
        "runs: {}\n",
        if counts.is_empty() {
            "none".to_string()
        } else {
            counts.join(", ")
        }
    ));
    out.push_str(&format!(
        "approvals waiting: {}{}\n",
        s.count(crate::store::RunState::NeedsHuman),
        s.oldest_approval
            .as_ref()
            .map(|(id, sch, since)| format!(" (oldest: run {id} of {sch}, since {})", t(*since)))
            .unwrap_or_default()
    ));
    out.push_str(&format!(
        "dead letters: {}\n",
        s.count(crate::store::RunState::Dead)
    ));
    out.push_str(&format!("backfill pending: {}\n", s.backfill_pending));
    if !s.schedules.is_empty() {
        let mut rows = vec![vec!["SCHEDULE".to_string(), "NEXT FIRE".into(), "WINDOW".into()]];
        for sch in &s.schedules {
            let (when, key) = match (&sch.overdue, &sch.next_fire) {
                (Some(o), _) => (
                    format!("OVERDUE since {} ({} windows)", t(o.due), o.windows),
                    o.window_key.clone(),
                ),
                (None, Some(f)) => (t(f.at), f.window_key.clone()),
                (None, None) => ("on event".into(), "-".into()),
            };
            rows.push(vec![sch.id.clone(), when, key]);
        }
        out.push('\n');
        out.push_str(&db::table(&rows));
    }
    out
}
