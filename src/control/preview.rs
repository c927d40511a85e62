//! `agentcron plan` (and the console's `:reload` dialog): what applying a
//! configuration would do, without doing it — per schedule the change and
//! its fields, the next fires before and after, and the fate of every open
//! and waiting run. Built by reading only; the same [`super::diff`] the
//! apply path uses decides, so the preview and what happens agree.

use super::diff::{self, ChangeKind, FieldChange, ScheduleChange};
use super::settings;
use crate::config::Config;
use crate::core::planner::retire::removed_reason;
use crate::store::types::{Pool, RunFilter, RunState};
use crate::store::{Result, Tx};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// How many fires `plan` shows before and after.
pub const FIRES: usize = 3;

/// The whole preview (`plan --json` prints it as is).
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub config: String,
    /// The version the database runs (`null`: none yet).
    pub current_version: Option<i64>,
    /// The number the file would get if stored now.
    pub next_version: i64,
    /// Whether the file is exactly the running version's text.
    pub same_text: bool,
    /// Schedules added, removed, changed or renamed.
    pub changes: usize,
    /// Whether applying it waits for `approve-config`.
    pub approval_required: bool,
    pub schedules: Vec<SchedulePreview>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SchedulePreview {
    pub id: String,
    pub change: ChangeKind,
    pub from: Option<String>,
    pub stage: String,
    pub version_before: Option<i64>,
    pub version_after: Option<i64>,
    pub fields: Vec<FieldChange>,
    pub fires_before: Vec<String>,
    pub fires_after: Vec<String>,
    pub runs: Vec<RunFate>,
    pub needs_approval: bool,
}

/// What becomes of a schedule's runs in one state.
#[derive(Debug, Clone, Serialize)]
pub struct RunFate {
    /// `pending`, `running`, `retry_wait`, `needs_human`, `backfill` (queued
    /// catch-up runs) or `backlog` (catch-up windows not yet queued).
    pub state: String,
    pub count: usize,
    pub fate: String,
}

/// Previews `cfg` (loaded from `text`) against what the database runs, at `now`.
pub fn preview(tx: &Tx, cfg: &Config, text: &str, now: DateTime<Utc>) -> Result<Preview> {
    // Compared as it would be stored: with its secrets sealed.
    let sealed = crate::secrets::seal(text);
    let text = sealed.text.as_str();
    let current = tx.current_config()?;
    let old_cfg = current
        .as_ref()
        .and_then(|c| crate::config::load_str(&c.text, std::path::Path::new(&c.path)).ok());
    let changes = diff::diff(&tx.current_schedule_versions()?, &settings::of_config(cfg, text));
    let next_version = tx.config_versions()?.last().map_or(1, |v| v.version + 1);
    let mut gated = cfg.scheduler.require_approval_for.clone();
    if let Some(old) = &old_cfg {
        gated.extend(old.scheduler.require_approval_for.iter().copied());
    }
    let mut schedules = vec![];
    for c in &changes {
        let needs_approval = current.is_some() && gated.contains(&c.stage) && c.needs_approval();
        let old_id = c.from.as_deref().unwrap_or(&c.id);
        let fires_before = old_cfg.as_ref().map_or(vec![], |o| fires(o, old_id, now));
        let fires_after = if c.kind == ChangeKind::Removed {
            vec![]
        } else {
            fires(cfg, &c.id, now)
        };
        schedules.push(SchedulePreview {
            id: c.id.clone(),
            change: c.kind,
            from: c.from.clone(),
            stage: c.stage.to_string(),
            version_before: c.version_before,
            version_after: match (c.kind, c.version_after) {
                (ChangeKind::Added, None) => Some(tx.last_schedule_version(&c.id)? + 1),
                (_, v) => v,
            },
            fields: c.fields.clone(),
            fires_before,
            fires_after,
            runs: fates(tx, c, old_id, next_version)?,
            needs_approval,
        });
    }
    let hash = crate::engine::registry::config_hash(text.as_bytes());
    Ok(Preview {
        config: cfg.path.display().to_string(),
        current_version: current.as_ref().map(|c| c.version),
        next_version,
        same_text: current.as_ref().is_some_and(|c| c.hash == hash),
        changes: changes.iter().filter(|c| c.kind != ChangeKind::Unchanged).count(),
        approval_required: schedules.iter().any(|s| s.needs_approval),
        schedules,
    })
}

/// The next [`FIRES`] fires of schedule `id` of `cfg` after `now` (none for
/// event triggers).
fn fires(cfg: &Config, id: &str, now: DateTime<Utc>) -> Vec<String> {
    let Some(s) = cfg.schedule(id) else { return vec![] };
    let cal = s.calendar.as_ref().and_then(|c| cfg.calendars.get(c).cloned());
    let Some(rule) = s.fire_rule(cal) else {
        return vec![];
    };
    rule.fires_after(now - chrono::TimeDelta::milliseconds(1))
        .take(FIRES)
        .map(|f| crate::time::rfc3339(f.at))
        .collect()
}

/// The fate of each open or waiting run of the schedule (under `old_id`
/// before a rename), as the apply path would decide it.
fn fates(tx: &Tx, c: &ScheduleChange, old_id: &str, next_version: i64) -> Result<Vec<RunFate>> {
    let runs = tx.runs(&RunFilter {
        schedule: Some(old_id.to_string()),
        states: vec![
            RunState::Pending,
            RunState::Running,
            RunState::RetryWait,
            RunState::NeedsHuman,
        ],
        ..RunFilter::default()
    })?;
    let mut counts: Vec<(String, usize)> = vec![];
    let mut bump = |state: &str| match counts.iter_mut().find(|(s, _)| s == state) {
        Some((_, n)) => *n += 1,
        None => counts.push((state.to_string(), 1)),
    };
    for r in &runs {
        if r.state == RunState::Pending && r.pool == Pool::Backfill {
            bump("backfill");
        } else {
            bump(r.state.as_str());
        }
    }
    let backlog = tx.backlog(old_id)?;
    let removed = removed_reason(next_version);
    let kept = match c.version_after {
        Some(v) if c.kind != ChangeKind::Unchanged => format!("kept; runs under v{v}"),
        _ => "kept".to_string(),
    };
    let mut out: Vec<RunFate> = counts
        .into_iter()
        .map(|(state, count)| {
            let fate = match (c.kind, state.as_str()) {
                (ChangeKind::Removed, "pending" | "retry_wait" | "backfill") => format!("skipped: {removed}"),
                (ChangeKind::Removed, "running") => "finishes".to_string(),
                (ChangeKind::Removed, _) => "keeps waiting for a human".to_string(),
                (ChangeKind::Renamed, _) => format!("kept under {}", c.id),
                _ => kept.clone(),
            };
            RunFate { state, count, fate }
        })
        .collect();
    if let Some(b) = backlog {
        let fate = match c.kind {
            ChangeKind::Removed => "dropped (never queued)".to_string(),
            _ if c.trigger_changed() => "dropped: the new trigger starts at the reload".to_string(),
            _ => "kept".to_string(),
        };
        out.push(RunFate {
            state: "backlog".into(),
            count: 1,
            fate: format!(
                "{fate} (catch-up windows {} … {})",
                crate::time::rfc3339(b.next),
                crate::time::rfc3339(b.until)
            ),
        });
    }
    Ok(out)
}
