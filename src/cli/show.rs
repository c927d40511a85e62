//! `agentcron show RUN`: one run in full — its fields, every attempt (with the
//! end of its log), the step journal and the events.

use super::db::{self, open_ledger_for_cli};
use super::events::{event_json, parse_run_id};
use super::exit;
use super::runs::run_json;
use crate::store::StoreError;
use crate::store::types::{Attempt, Event, EventFilter, Run, Step};
use crate::time::in_zone;
use chrono_tz::Tz;
use serde_json::{Value, json};
use std::path::Path;

/// Lines of each attempt's log shown in text mode (JSON carries the whole,
/// already bounded, log).
const LOG_TAIL_LINES: usize = 12;
/// Events shown in text mode; the rest are one `agentcron events --run` away.
const TEXT_EVENTS: usize = 200;

pub struct Options<'a> {
    pub run: &'a str,
    pub json: bool,
    /// Times in UTC instead of the schedule's zone.
    pub utc: bool,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let id = match parse_run_id(opts.run) {
        Ok(id) => id,
        Err(msg) => {
            eprintln!("agentcron show: {msg}");
            return exit::USAGE;
        }
    };
    let (ledger, cfg) = match open_ledger_for_cli(config, db) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let got = ledger.read(|tx| read_with_versions(tx, id));
    let ((run, attempts, steps, events), versions) = match got {
        Ok(x) => x,
        Err(StoreError::RunNotFound(_)) => {
            eprintln!("agentcron show: run {id} not found (see `agentcron runs`)");
            return exit::DOES_NOT_HOLD;
        }
        Err(e) => {
            eprintln!("agentcron show: {e}");
            return exit::USAGE;
        }
    };
    if opts.json {
        let mut v = show_json(&run, &attempts, &steps, &events);
        add_versions(&mut v, versions.as_ref());
        return db::print_json("show", &v);
    }
    let tz = db::block_zone(cfg.as_ref(), Some(&run.schedule), opts.utc);
    let shown = text(&run, &attempts, &steps, &events, tz);
    match versions {
        // After the fields, before the attempts.
        Some(v) => print!(
            "{}",
            shown.replacen(
                "\nATTEMPTS\n",
                &format!("versions  {}\n\nATTEMPTS\n", v.summary),
                1
            )
        ),
        None => print!("{shown}"),
    }
    exit::OK
}

/// A run, its attempts, its step journal and its events.
pub type Shown = (Run, Vec<Attempt>, Vec<Step>, Vec<Event>);

/// A run with its attempts, steps and events, as `show` (and `GET
/// /api/v1/runs/{id}`) shows it; [`StoreError::RunNotFound`] when there is none.
pub fn read(tx: &dyn crate::store::read::LedgerRead, id: i64) -> crate::store::Result<Shown> {
    let run = tx.run(id)?;
    let events = tx.events(&EventFilter {
        run_id: Some(id),
        ..EventFilter::default()
    })?;
    Ok((run, tx.attempts(id)?, tx.steps(id)?, events))
}

/// [`read`], and which schedule version opened the run and which each
/// attempt ran under (`None` if that cannot be read).
pub fn read_with_versions(
    tx: &dyn crate::store::read::LedgerRead,
    id: i64,
) -> crate::store::Result<(Shown, Option<crate::control::versions::RunVersions>)> {
    let shown = read(tx, id)?;
    let versions = crate::control::versions::of_run(tx, id, &shown.0.schedule).ok();
    Ok((shown, versions))
}

/// `"schedule_version"` and `"versions"` of a `show` object.
pub fn add_versions(v: &mut Value, versions: Option<&crate::control::versions::RunVersions>) {
    if let (Value::Object(map), Some(versions)) = (v, versions) {
        map.insert("schedule_version".into(), json!(versions.opened_under));
        map.insert(
            "versions".into(),
            serde_json::to_value(versions).unwrap_or_default(),
        );
    }
}

/// The `runs` object plus the run's other fields, `attempt_list`, `steps`, `events`.
pub fn show_json(run: &Run, attempts: &[Attempt], steps: &[Step], events: &[Event]) -> Value {
    let mut v = run_json(run);
    let extra = json!({
        "window_start": db::rfc3339(run.window_start),
        "window_end": db::rfc3339(run.window_end),
        "due_at": db::rfc3339(run.due_at),
        "run_reason": run.reason.as_str(),
        "pool": run.pool.as_str(),
        "not_before": run.not_before.map(db::rfc3339),
        "next_check_at": run.next_check_at.map(db::rfc3339),
        "lease_owner": run.lease_owner,
        "lease_expires": run.lease_expires.map(db::rfc3339),
        "fencing_token": run.fencing_token,
        "error_class": run.error_class.map(|c| c.as_str()),
        "last_error": run.last_error,
        "resume_after": run.resume_after,
        "created_at": db::rfc3339(run.created_at),
        "attempt_list": attempts.iter().map(attempt_json).collect::<Vec<_>>(),
        "steps": steps.iter().map(step_json).collect::<Vec<_>>(),
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
    });
    if let (Value::Object(map), Value::Object(more)) = (&mut v, extra) {
        map.extend(more);
    }
    v
}

fn attempt_json(a: &Attempt) -> Value {
    json!({
        "n": a.n,
        "status": a.status.as_str(),
        "class": a.error_class.map(|c| c.as_str()),
        "exit_code": a.exit_code,
        "started_at": db::rfc3339(a.started_at),
        "ended_at": a.ended_at.map(db::rfc3339),
        "reason": a.reason.as_str(),
        "owner": a.owner,
        "fencing_token": a.fencing_token,
        "summary": a.summary,
        "processed": a.processed,
        "message": a.message,
        "tokens": a.tokens,
        "cost_usd": crate::core::money::usd(a.cost_usd),
        "log": a.log,
    })
}

fn step_json(s: &Step) -> Value {
    json!({
        "attempt": s.attempt,
        "name": s.name,
        "status": s.status.as_str(),
        "side_effect": s.side_effect,
        "at": db::rfc3339(s.at),
    })
}

fn text(run: &Run, attempts: &[Attempt], steps: &[Step], events: &[Event], tz: Tz) -> String {
    let t = |x| db::local(x, tz);
    let mut fields: Vec<(&str, String)> = vec![
        ("run", run.id.to_string()),
        ("schedule", format!("{} (tenant {})", run.schedule, run.tenant)),
        ("window", crate::time::key_text(&run.window_key, tz)),
        (
            "state",
            match &run.state_reason {
                Some(r) => format!("{} — {r}", run.state),
                None => run.state.to_string(),
            },
        ),
        (
            "opened for",
            format!("{} ({} pool)", run.reason.as_str(), run.pool.as_str()),
        ),
        (
            "window open",
            format!("{} – {} ({})", t(run.window_start), t(run.window_end), tz.name()),
        ),
        ("due", t(run.due_at)),
        ("attempts", run.attempts.to_string()),
    ];
    if let Some(err) = &run.last_error {
        let class = run.error_class.map(|c| c.as_str()).unwrap_or("unclassified");
        fields.push(("last error", format!("{class}: {err}")));
    }
    if let Some(nb) = run.not_before {
        fields.push(("not before", t(nb)));
    }
    if let Some(nc) = run.next_check_at {
        fields.push(("next check", t(nc)));
    }
    if let Some(owner) = &run.lease_owner {
        let until = run.lease_expires.map(t).unwrap_or_default();
        fields.push(("lease", format!("{owner} until {until}")));
    }
    if let Some(step) = &run.resume_after {
        fields.push(("resume after", step.clone()));
    }
    fields.push(("created", t(run.created_at)));
    fields.push(("updated", t(run.updated_at)));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in &fields {
        // Reasons and errors were stored with UTC instants in them.
        out.push_str(&format!("{k:width$}  {}\n", db::cell(&in_zone(v, tz), 400)));
    }

    out.push_str("\nATTEMPTS\n");
    if attempts.is_empty() {
        out.push_str("  none\n");
    }
    for a in attempts {
        let ended = a.ended_at.map_or("-".to_string(), t);
        out.push_str(&format!(
            "  #{} {}{}{}  started {}  ended {}  by {} ({})\n",
            a.n,
            a.status.as_str(),
            a.error_class
                .map(|c| format!(" ({})", c.as_str()))
                .unwrap_or_default(),
            a.exit_code.map(|c| format!(", exit {c}")).unwrap_or_default(),
            t(a.started_at),
            ended,
            a.owner,
            a.reason.as_str(),
        ));
        if let Some(s) = &a.summary {
            out.push_str(&format!("     summary: {}\n", db::cell(s, 400)));
        }
        if let Some(m) = &a.message {
            out.push_str(&format!("     message: {}\n", db::cell(&in_zone(m, tz), 400)));
        }
        if let Some(p) = a.processed {
            out.push_str(&format!("     processed: {p}\n"));
        }
        if a.tokens > 0 || a.cost_usd > 0.0 {
            out.push_str(&format!(
                "     usage: {} tokens, {}\n",
                a.tokens,
                crate::core::money::usd_text(a.cost_usd)
            ));
        }
        let lines: Vec<&str> = a.log.lines().collect();
        if !lines.is_empty() {
            let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
            if skip > 0 {
                out.push_str(&format!(
                    "     log (last {LOG_TAIL_LINES} of {} lines):\n",
                    lines.len()
                ));
            } else {
                out.push_str("     log:\n");
            }
            for l in &lines[skip..] {
                out.push_str(&format!("       | {}\n", db::cell(l, 200)));
            }
        }
    }

    out.push_str("\nSTEPS\n");
    if steps.is_empty() {
        out.push_str("  none\n");
    } else {
        let mut rows = vec![
            ["AT", "ATTEMPT", "STEP", "STATUS", "SIDE EFFECT"]
                .map(String::from)
                .to_vec(),
        ];
        for s in steps {
            rows.push(vec![
                t(s.at),
                s.attempt.to_string(),
                s.name.clone(),
                s.status.as_str().to_string(),
                if s.side_effect { "yes" } else { "no" }.to_string(),
            ]);
        }
        out.push_str(&indent(&db::table(&rows)));
    }

    out.push_str("\nEVENTS\n");
    if events.is_empty() {
        out.push_str("  none\n");
    } else {
        let skip = events.len().saturating_sub(TEXT_EVENTS);
        if skip > 0 {
            out.push_str(&format!(
                "  … {skip} earlier events (agentcron events --run {} --limit 0)\n",
                run.id
            ));
        }
        out.push_str(&indent(&super::events::table(&events[skip..], tz, false)));
    }
    out
}

fn indent(block: &str) -> String {
    block.lines().map(|l| format!("  {l}\n")).collect()
}
