//! Operator actions, shared by the command line and the console: each takes the
//! store, the config, `now`, who acts and why, and records all of it as events.
//! The running scheduler sees the result within a tick; actions never reach into
//! engine memory.

use crate::config::Config;
use crate::engine::open::{new_run_for, rfc3339};
use crate::recovery::catchup::Disposition;
use crate::store::types::*;
use crate::store::{Store, StoreError};
use crate::time::fire::Fire;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

/// Why an action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// What was checked does not hold (exit 1): refused by the state machine,
    /// not found, not waiting.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub type Result<T> = std::result::Result<T, ActionError>;

/// The OS user, the default actor.
pub fn default_actor() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "operator".to_string())
}

/// `trigger SCHEDULE [--window KEY]`: a manual run that goes through the same
/// gates and switches as any other. Without a key the window is `manual-<now>`.
pub fn trigger(
    store: &Store,
    cfg: &Config,
    schedule: &str,
    window: Option<&str>,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Run> {
    let s = cfg
        .schedule(schedule)
        .ok_or_else(|| ActionError::Refused(format!("no schedule `{schedule}` in the config")))?;
    let key = window
        .map(str::to_string)
        .unwrap_or_else(|| format!("manual-{}", now.to_rfc3339_opts(SecondsFormat::Secs, true)));
    let fire = Fire {
        at: now,
        local: now.with_timezone(&s.timezone).fixed_offset(),
        window_key: key.clone(),
        note: None,
    };
    let mut new = new_run_for(s, &fire, Disposition::OnTime, now);
    new.reason = RunReason::Manual;
    new.next_check_at = Some(now);
    store
        .write(|tx| match tx.insert_run(&new, now)? {
            Some(run) => {
                tx.append_event(
                    &NewEvent::new(
                        now,
                        "window_opened",
                        json!({"window_key": run.window_key, "start": rfc3339(run.window_start),
                               "end": rfc3339(run.window_end), "due": rfc3339(run.due_at),
                               "pool": "on_time", "reason": "manual", "by": actor}),
                    )
                    .for_run(&run),
                )?;
                Ok(Ok(run))
            }
            None => {
                let existing = tx.find_run(&s.tenant, &s.id, &key)?;
                Ok(Err(match existing {
                    Some(r) => format!(
                        "{schedule} already has run {} for window {key} ({}); {}",
                        r.id,
                        r.state,
                        if matches!(r.state, RunState::Failed | RunState::Dead) {
                            "requeue it with `agentcron dlq requeue RUN --reason T`"
                        } else {
                            "a window runs at most once"
                        }
                    ),
                    None => format!("could not create a run for window {key}"),
                }))
            }
        })?
        .map_err(ActionError::Refused)
}

/// `event post NAME [--id ID] [--payload JSON]`: deduped by id. Returns the id
/// and whether it was new.
pub fn post_event(
    store: &Store,
    name: &str,
    id: Option<&str>,
    payload: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<(String, bool)> {
    let id = id
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-{}", now.format("%Y%m%dT%H%M%S%3fZ"), std::process::id()));
    let seq = store.write(|tx| {
        let seq = tx.post_event(name, &id, payload, now)?;
        if let Some(seq) = seq {
            tx.append_event(&NewEvent::new(
                now,
                "event_posted",
                json!({"name": name, "id": id, "seq": seq}),
            ))?;
        }
        Ok(seq)
    })?;
    Ok((id, seq.is_some()))
}
