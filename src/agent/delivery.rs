//! Deliveries: the configured side effects that publish a successful attempt's
//! result (`file` JSONL append, `webhook` POST with an `Idempotency-Key`,
//! `command`). Each is a side-effect step journaled like an agent's own step,
//! and follows check-then-act: a delivery already done is skipped; an uncertain
//! one (started, never confirmed) is checked first where the kind allows it (the
//! file is searched; a webhook is resent under the same key, which the receiver
//! dedupes) and only re-done if it did not land. An uncertain `command` delivery
//! cannot be checked: the engine parks the run for a human.
//!
//! [`DeliveringRunner`] wraps any runner: it forwards the agent's reports, and
//! when the agent ends successfully it performs the deliveries before reporting
//! the end, so the attempt's lease covers them.

use super::protocol::{AgentLine, AgentResult, ResultStatus};
use super::runner::{AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec, Ending};
use crate::config::model::{DeliveryConfig, DeliveryKind, ErrorClass};
use crate::process::{self, ProcessError, Program};
use crate::store::types::StepStatus;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How one delivery went.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivered {
    Ok,
    /// Found already delivered by the check (check-then-act).
    AlreadyThere,
    Failed {
        class: ErrorClass,
        reason: String,
    },
}

/// The `Idempotency-Key` of a delivery: the run's key and the step.
pub fn delivery_key(idempotency_key: &str, step: &str) -> String {
    format!("{idempotency_key}:{step}")
}

/// The JSON a delivery publishes.
pub fn delivery_body(spec: &AttemptSpec, step: &str, result: Option<&AgentResult>) -> Value {
    let env = &spec.envelope;
    json!({
        "idempotency_key": env.idempotency_key,
        "delivery_key": delivery_key(&env.idempotency_key, step),
        "step": step,
        "run_id": env.run_id,
        "tenant": env.tenant,
        "schedule": env.schedule,
        "window": env.window,
        "attempt": env.attempt,
        "summary": result.and_then(|r| r.summary.clone()),
        "processed": result.and_then(|r| r.processed),
        "message": result.and_then(|r| r.message.clone()),
    })
}

/// Whether a file delivery with this key already landed in `path`.
pub fn file_has(path: &Path, key: &str) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .any(|line| {
            serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("delivery_key").and_then(|k| k.as_str()).map(|k| k == key))
                .unwrap_or(false)
        })
}

/// Performs one delivery (blocking IO; call from a blocking thread). `timeout`
/// bounds a webhook request and a command's whole run (its process group is
/// stopped at it).
pub fn deliver(
    d: &DeliveryConfig,
    body: &Value,
    config_dir: &Path,
    uncertain: bool,
    timeout: Duration,
) -> Delivered {
    let key = body["delivery_key"].as_str().unwrap_or_default().to_string();
    match &d.kind {
        DeliveryKind::File { path } => {
            let path = config_dir.join(path);
            if uncertain && file_has(&path, &key) {
                return Delivered::AlreadyThere;
            }
            let write = || -> std::io::Result<()> {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)?;
                let mut line = body.to_string();
                line.push('\n');
                f.write_all(line.as_bytes())?;
                f.sync_data()
            };
            match write() {
                Ok(()) => Delivered::Ok,
                Err(e) => Delivered::Failed {
                    class: ErrorClass::Retryable,
                    reason: format!("delivery {}: cannot append to {}: {e}", d.name, path.display()),
                },
            }
        }
        DeliveryKind::Webhook { url, headers } => {
            // Shown without its userinfo; header values never shown.
            let shown = crate::secrets::redact_url(url);
            let (headers, redactor) = match crate::secrets::resolve_headers(headers, config_dir) {
                Ok(resolved) => resolved,
                Err(e) => {
                    return Delivered::Failed {
                        class: ErrorClass::NonRetryable,
                        reason: format!("delivery {}: POST {shown}: {e}", d.name),
                    };
                }
            };
            // Resending under the same Idempotency-Key is the check: the receiver dedupes.
            let mut req = crate::http::post(url, timeout)
                .header("Content-Type", "application/json")
                .header("Idempotency-Key", &key);
            for (k, v) in &headers {
                req = req.header(k, v);
            }
            let url = &shown;
            match req.send(body.to_string().as_bytes()) {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    match status {
                        200..=299 => Delivered::Ok,
                        429 => Delivered::Failed {
                            class: ErrorClass::Retryable,
                            reason: format!("delivery {}: POST {url} → 429 (rate limited)", d.name),
                        },
                        500..=599 => Delivered::Failed {
                            class: ErrorClass::Retryable,
                            reason: format!("delivery {}: POST {url} → {status}", d.name),
                        },
                        _ => Delivered::Failed {
                            class: ErrorClass::NonRetryable,
                            reason: format!("delivery {}: POST {url} → {status}", d.name),
                        },
                    }
                }
                Err(e) => Delivered::Failed {
                    class: ErrorClass::Retryable,
                    reason: redactor.redact(&format!("delivery {}: POST {url}: {e}", d.name)),
                },
            }
        }
        DeliveryKind::Command { command } => {
            let Ok(program) = Program::from_argv(command) else {
                return Delivered::Failed {
                    class: ErrorClass::NonRetryable,
                    reason: format!("delivery {}: empty command", d.name),
                };
            };
            let prog = program.name();
            let program = program
                .current_dir(config_dir)
                .env("AGENTCRON_DELIVERY_KEY", &key);
            let mut input = body.to_string().into_bytes();
            input.push(b'\n');
            match process::run(&program, Some(input), timeout) {
                Ok(done) if done.status.success() => Delivered::Ok,
                Ok(done) => Delivered::Failed {
                    class: if done.status.code() == Some(75) {
                        ErrorClass::Retryable
                    } else {
                        ErrorClass::NonRetryable
                    },
                    reason: match &done.stderr_line {
                        Some(line) => format!(
                            "delivery {}: `{prog}` exited with {}: {line}",
                            d.name, done.status
                        ),
                        None => format!("delivery {}: `{prog}` exited with {}", d.name, done.status),
                    },
                },
                Err(ProcessError::Spawn { source, .. }) => Delivered::Failed {
                    class: ErrorClass::NonRetryable,
                    reason: format!("delivery {}: cannot start `{prog}`: {source}", d.name),
                },
                // Like a webhook timeout: it may or may not have landed, and the
                // step is journaled failed, so the next attempt does it again.
                Err(e) => Delivered::Failed {
                    class: ErrorClass::Retryable,
                    reason: format!("delivery {}: `{prog}`: {e}", d.name),
                },
            }
        }
    }
}

/// Wraps a runner so that a successful attempt is followed by its schedule's
/// deliveries, each reported as a journaled side-effect step.
pub struct DeliveringRunner {
    pub inner: Arc<dyn AgentRunner>,
    /// Deliveries by schedule id.
    pub deliveries: HashMap<String, Vec<DeliveryConfig>>,
}

impl AgentRunner for DeliveringRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        let deliveries = self
            .deliveries
            .get(&spec.envelope.schedule)
            .cloned()
            .unwrap_or_default();
        if deliveries.is_empty() || spec.envelope.verify_step.is_some() {
            return self.inner.start(spec, reports);
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<AttemptReport>();
        let handle = self.inner.start(spec.clone(), tx);
        tokio::spawn(async move {
            let mut result: Option<AgentResult> = None;
            while let Some(report) = rx.recv().await {
                match report.signal {
                    AttemptSignal::Line(AgentLine::Result(r)) => {
                        result = Some(r.clone());
                        let _ = reports.send(AttemptReport {
                            signal: AttemptSignal::Line(AgentLine::Result(r)),
                            ..report
                        });
                    }
                    AttemptSignal::Ended { ending, log } => {
                        let succeeded =
                            matches!(
                                ending,
                                Ending::Exited { code: Some(0), .. }
                                    | Ending::Http {
                                        status: Some(200..=299),
                                        ..
                                    }
                            ) && result.as_ref().is_none_or(|r| r.status == ResultStatus::Success);
                        if succeeded {
                            run_deliveries(&spec, &deliveries, result.as_ref(), &reports).await;
                        }
                        let _ = reports.send(AttemptReport {
                            run_id: spec.run_id,
                            token: spec.token,
                            signal: AttemptSignal::Ended { ending, log },
                        });
                        return;
                    }
                    other => {
                        let _ = reports.send(AttemptReport {
                            signal: other,
                            ..report
                        });
                    }
                }
            }
        });
        handle
    }
}

async fn run_deliveries(
    spec: &AttemptSpec,
    deliveries: &[DeliveryConfig],
    result: Option<&AgentResult>,
    reports: &mpsc::UnboundedSender<AttemptReport>,
) {
    let send = |signal: AttemptSignal| {
        let _ = reports.send(AttemptReport {
            run_id: spec.run_id,
            token: spec.token,
            signal,
        });
    };
    let step = |name: &str, status: StepStatus| {
        AttemptSignal::Line(AgentLine::Step {
            name: name.to_string(),
            status,
        })
    };
    for d in deliveries {
        if spec.envelope.completed_steps.contains(&d.name) {
            continue; // delivered by an earlier attempt: never again
        }
        let uncertain = spec.envelope.uncertain_steps.contains(&d.name);
        let body = delivery_body(spec, &d.name, result);
        send(step(&d.name, StepStatus::Started));
        let (dc, dir) = (d.clone(), spec.config_dir.clone());
        let timeout = spec.timeout.min(Duration::from_secs(60));
        let outcome = tokio::task::spawn_blocking(move || deliver(&dc, &body, &dir, uncertain, timeout))
            .await
            .unwrap_or_else(|e| Delivered::Failed {
                class: ErrorClass::Retryable,
                reason: format!("delivery {} panicked: {e}", d.name),
            });
        match outcome {
            Delivered::Ok | Delivered::AlreadyThere => send(step(&d.name, StepStatus::Done)),
            Delivered::Failed { class, reason } => {
                // The request may or may not have landed for a timeout; a refused
                // one did not: journal it failed so it is not "uncertain".
                send(step(&d.name, StepStatus::Failed));
                send(AttemptSignal::Line(AgentLine::Result(AgentResult {
                    status: ResultStatus::Failure,
                    error_class: Some(class),
                    summary: result.and_then(|r| r.summary.clone()),
                    processed: result.and_then(|r| r.processed),
                    message: Some(reason),
                    verified: None,
                    rate_limited: None,
                })));
                return;
            }
        }
    }
}
