//! Alerts: every alert is an `alert` event in the store, and is also sent to the
//! configured sink (file, webhook or command). A sink failure is itself recorded,
//! never fatal, and no send takes longer than [`SEND_TIMEOUT`].

use crate::config::model::{AlertSink, Config};
use crate::process::{self, ProcessError, Program};
use crate::store::Store;
use crate::store::types::NewEvent;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// Longest one alert may take to send: the webhook request, or the command's
/// whole run (its process group is stopped at it).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// One alert: its detail (what the sink receives) and its `alert` event.
pub fn alert_event(
    cfg: &Config,
    tenant: &str,
    schedule: &str,
    run_id: Option<i64>,
    what: &str,
    message: &str,
    now: DateTime<Utc>,
) -> (Value, NewEvent) {
    let owner = cfg.schedule(schedule).and_then(|s| s.owner.clone());
    let detail = json!({"what": what, "message": message, "owner": owner,
                        "at": crate::time::rfc3339(now),
                        "tenant": tenant, "schedule": schedule, "run": run_id});
    let mut ev = NewEvent::new(now, "alert", detail.clone()).for_schedule(tenant, schedule);
    ev.run_id = run_id;
    (detail, ev)
}

/// Sends an alert to the sink; a failure is recorded as an `alert_failed` event.
pub fn send_or_record(
    store: &Store,
    sink: &AlertSink,
    detail: &Value,
    config_dir: &Path,
    now: DateTime<Utc>,
) {
    if let Err(e) = send(sink, detail, config_dir) {
        let failed = NewEvent::new(now, "alert_failed", json!({"error": e, "alert": detail}));
        let _ = store.write(|tx| tx.append_event(&failed).map(|_| ()));
    }
}

/// Sends one alert to the sink, waiting at most [`SEND_TIMEOUT`]. Errors are
/// returned as text for the trace.
pub fn send(sink: &AlertSink, alert: &Value, config_dir: &Path) -> Result<(), String> {
    let line = alert.to_string();
    match sink {
        AlertSink::File { path } => {
            let path = config_dir.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            writeln!(f, "{line}").map_err(|e| format!("{}: {e}", path.display()))
        }
        AlertSink::Webhook { url } => {
            let resp = crate::http::post(url, SEND_TIMEOUT)
                .header("Content-Type", "application/json")
                .send(line.as_bytes())
                .map_err(|e| format!("POST {url}: {e}"))?;
            let status = resp.status().as_u16();
            if (200..300).contains(&status) {
                Ok(())
            } else {
                Err(format!("POST {url} → {status}"))
            }
        }
        AlertSink::Command { command } => {
            let program = Program::from_argv(command)
                .map_err(|_| "alert command is empty".to_string())?
                .current_dir(config_dir);
            let prog = program.name();
            let mut input = line.into_bytes();
            input.push(b'\n');
            match process::run(&program, Some(input), SEND_TIMEOUT) {
                Ok(done) if done.status.success() => Ok(()),
                Ok(done) => Err(format!("{prog} exited with {}", done.status)),
                Err(e @ ProcessError::TimedOut(_)) => Err(format!("{prog}: {e}")),
                Err(e) => Err(e.to_string()),
            }
        }
    }
}
