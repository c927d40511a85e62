//! The console's operator actions: one [`Cmd`] becomes one call into
//! [`crate::operator`] — the same functions the command line uses — with who
//! acts and when; the answer is the status line. [`preview`] reads the plan a
//! dialog shows before resume and backfill can be confirmed.
//!
//! The shell calls these on the live store with the wall clock; rehearsal mode
//! calls them on the rehearsal's store at its virtual time.

use super::app::Cmd;
use super::dialogs::{Intent, Preview};
use crate::config::Config;
use crate::operator::{self, ActionError};
use crate::store::Store;
use chrono::{DateTime, Utc};

/// What resuming from the console records as the reason (the CLI's is optional too).
pub const RESUME_REASON: &str = "resumed from the console";

fn text(e: ActionError) -> String {
    e.to_string()
}

/// Performs an operator action; `Ok` is the status line, `Err` why not. An
/// action already in effect is `Ok` with the "already …" line, as on the
/// command line.
pub fn perform(
    store: &Store,
    cfg: &Config,
    cmd: &Cmd,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<String, String> {
    match act(store, cfg, cmd, actor, now) {
        Ok(text) => Ok(text),
        Err(ActionError::Already(text)) => Ok(text),
        Err(e) => Err(e.to_string()),
    }
}

fn act(
    store: &Store,
    cfg: &Config,
    cmd: &Cmd,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<String, ActionError> {
    match cmd {
        Cmd::Approve {
            run,
            reason,
            resume_after,
        } => operator::approve_checked(
            store,
            Some(cfg),
            *run,
            actor,
            reason,
            resume_after.as_deref(),
            now,
        )
        .map(|r| {
            let after = resume_after
                .as_ref()
                .map(|s| format!(", resuming after step {s}"))
                .unwrap_or_default();
            format!("run #{run} approved by {actor}{after}: now {}", r.state)
        }),
        Cmd::Reject { run, reason } => operator::reject(store, Some(cfg), *run, actor, reason, now)
            .map(|_| format!("run #{run} rejected by {actor}: failed for good")),
        Cmd::Requeue { run, reason } => operator::requeue(store, *run, actor, reason, now)
            .map(|_| format!("run #{run} requeued by {actor}: retry_wait, next attempt now")),
        Cmd::SetKill {
            on: true,
            reason,
            cancel_running,
        } => operator::kill(store, actor, reason, *cancel_running, now).map(|()| {
            let running = if *cancel_running {
                "; running attempts are being cancelled"
            } else {
                ""
            };
            format!("kill switch ON by {actor}: nothing new is claimed{running}")
        }),
        Cmd::SetKill {
            on: false, reason, ..
        } => operator::unkill(store, actor, reason, now)
            .map(|()| format!("kill switch off by {actor}: runs are claimed again")),
        Cmd::Pause { schedule, reason } => operator::pause(store, cfg, schedule, actor, reason, now)
            .map(|()| format!("{schedule} paused by {actor}")),
        Cmd::Resume { schedule } => operator::resume(store, cfg, schedule, actor, RESUME_REASON, now)
            .map(|()| format!("{schedule} resumed by {actor}; held windows are evaluated now")),
        Cmd::Trigger { schedule } => operator::trigger(store, cfg, schedule, None, actor, now).map(|r| {
            format!(
                "{schedule}: manual run #{} for window {} queued",
                r.id, r.window_key
            )
        }),
        Cmd::CloseCircuit { schedule, reason } => {
            operator::close_circuit(store, cfg, schedule, actor, reason, now)
                .map(|()| format!("circuit of {schedule} closed by {actor}"))
        }
        Cmd::Backfill { schedule, from, to } => {
            operator::backfill(store, cfg, schedule, *from, *to, false, actor, now).map(|plan| {
                let queued = plan.iter().filter(|w| w.action == "queue").count();
                format!(
                    "{schedule}: {queued} window(s) queued for backfill by {actor}, {} left alone",
                    plan.len() - queued
                )
            })
        }
        Cmd::ApproveConfig { version, reason } => {
            crate::control::approve(store, *version, actor, reason, now)
                .map(|_| format!("config v{version} approved by {actor} and applied"))
                .map_err(|e| ActionError::Refused(e.to_string()))
        }
        Cmd::Reload => crate::control::request_reload(store, actor, false, now)
            .map(|n| format!("reload #{n} requested by {actor}: every scheduler re-reads its config"))
            .map_err(ActionError::from),
        other => Err(ActionError::Refused(format!("not an operator action: {other:?}"))),
    }
}

/// The plan shown in the dialog of `intent` before it can be confirmed.
pub fn preview(
    store: &Store,
    cfg: &Config,
    intent: &Intent,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<Preview, String> {
    match intent {
        Intent::Resume { schedule } => {
            let plan = operator::resume_plan(store, cfg, schedule).map_err(text)?;
            if !plan.paused {
                return Err(format!("{schedule} is not paused"));
            }
            let mut lines = vec![format!("paused {}", plan.paused_reason.unwrap_or_default())];
            if plan.held.is_empty() {
                lines.push("nothing is held: the next window opens on schedule".into());
            } else {
                lines.push(format!(
                    "{} held window(s) are evaluated at once, oldest first:",
                    plan.held.len()
                ));
                for (id, key, state, why) in &plan.held {
                    lines.push(format!("  #{id} {key}  {state}  {why}"));
                }
            }
            if plan.lost_while_paused > 0 {
                lines.push(format!(
                    "{} window(s) missed or expired while paused will not run",
                    plan.lost_while_paused
                ));
            }
            Ok(Preview {
                lines,
                actionable: true,
            })
        }
        Intent::Backfill {
            schedule,
            from,
            to,
            range,
        } => {
            // A dry run changes nothing.
            let plan =
                operator::backfill(store, cfg, schedule, *from, *to, true, actor, now).map_err(text)?;
            if plan.is_empty() {
                return Ok(Preview {
                    lines: vec![
                        format!("range {range}"),
                        format!("no window of {schedule} falls in this range"),
                    ],
                    actionable: false,
                });
            }
            let queued = plan.iter().filter(|w| w.action == "queue").count();
            let mut lines = vec![
                format!("range {range}"),
                format!(
                    "{queued} window(s) will be queued, {} left alone:",
                    plan.len() - queued
                ),
            ];
            for w in &plan {
                let what = match (w.action.as_str(), w.existing_run) {
                    ("queue", _) => "queue".to_string(),
                    (state, Some(id)) => format!("left alone: run #{id} is {state}"),
                    (other, None) => format!("left alone: {other}"),
                };
                lines.push(format!("  {}  {what}", w.window_key));
            }
            Ok(Preview {
                lines,
                actionable: queued > 0,
            })
        }
        Intent::Reload => Ok(reload_preview(store, cfg, now)),
        Intent::ApproveConfig { version } => Ok(approval_preview(store, *version, now)),
        _ => Ok(Preview {
            lines: vec![],
            actionable: true,
        }),
    }
}

/// `:reload`'s dialog: what `agentcron plan` prints for the config file, or
/// its errors (then nothing can be confirmed).
fn reload_preview(store: &Store, cfg: &Config, now: DateTime<Utc>) -> Preview {
    let loaded = std::fs::read_to_string(&cfg.path)
        .map_err(|e| vec![format!("cannot read config {}: {e}", cfg.path.display())])
        .and_then(|text| match crate::config::load_str(&text, &cfg.path) {
            Ok(c) => Ok((c, text)),
            Err(crate::config::LoadError::Invalid(d)) => Err(d.iter().map(ToString::to_string).collect()),
            Err(e) => Err(vec![e.to_string()]),
        });
    let (file, text) = match loaded {
        Ok(x) => x,
        Err(mut lines) => {
            lines.insert(
                0,
                "the file is not valid; a reload would keep the running version:".into(),
            );
            return Preview {
                lines,
                actionable: false,
            };
        }
    };
    match store.read(|tx| crate::control::preview::preview(tx, &file, &text, now)) {
        Ok(p) => Preview {
            lines: crate::cli::config_cmd::plan_text(&p, &file)
                .lines()
                .map(str::to_string)
                .collect(),
            actionable: p.changes > 0 || !p.same_text,
        },
        Err(e) => Preview {
            lines: vec![e.to_string()],
            actionable: false,
        },
    }
}

/// `:approve-config`'s dialog: what applying the waiting version changes.
fn approval_preview(store: &Store, version: i64, now: DateTime<Utc>) -> Preview {
    let refused = |line: String| Preview {
        lines: vec![line],
        actionable: false,
    };
    let v = match store.read(|tx| tx.config_version(version)) {
        Ok(Some(v)) => v,
        Ok(None) => return refused(format!("config v{version} not found")),
        Err(e) => return refused(e.to_string()),
    };
    if v.status != crate::store::ConfigStatus::Waiting {
        return refused(format!(
            "config v{version} is {}, not waiting for approval",
            v.status.as_str()
        ));
    }
    let cfg = match crate::config::load_str(&v.text, std::path::Path::new(&v.path)) {
        Ok(c) => c,
        Err(e) => return refused(format!("the stored config no longer loads: {e}")),
    };
    match store.read(|tx| crate::control::preview::preview(tx, &cfg, &v.text, now)) {
        Ok(p) => {
            let mut lines: Vec<String> = crate::cli::config_cmd::plan_text(&p, &cfg)
                .lines()
                .map(str::to_string)
                .collect();
            // The plan's last line says what a reload would store; this applies v{version}.
            lines.pop();
            lines.push(format!(
                "approving applies v{version} (stored {})",
                crate::time::rfc3339(v.loaded_at)
            ));
            Preview {
                lines,
                actionable: true,
            }
        }
        Err(e) => refused(e.to_string()),
    }
}
