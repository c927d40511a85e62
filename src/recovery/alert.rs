//! Alerts: every alert is an `alert` event in the store, and is also sent to the
//! configured sink (file, webhook or command). A sink failure is itself recorded
//! as an `alert_failed` event, never fatal, and no send takes longer than
//! [`SEND_TIMEOUT`].
//!
//! File sinks are written at once: they are local and fast, and readers expect
//! the line right after the tick that raised it. Webhooks and commands from the
//! scheduler go through the [`AlertDispatcher`], a bounded queue with one worker
//! thread, so a slow sink never stalls the engine loop and a burst of alerts never
//! becomes a burst of threads. Short-lived processes either send synchronously
//! ([`send_or_record`], as operator actions do) or [`drain`] before they exit.

use crate::config::model::{AlertSink, Config};
use crate::process::{self, ProcessError, Program};
use crate::store::Store;
use crate::store::types::NewEvent;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// Longest one alert may take to send: the webhook request, or the command's
/// whole run (its process group is stopped at it).
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Alerts the process-wide dispatcher holds, waiting or being sent. At one
/// [`SEND_TIMEOUT`] each this is minutes of backlog: past it, a sink is clearly
/// not keeping up and new alerts are recorded as failed instead.
const QUEUE_CAPACITY: usize = 64;

/// One alert: its detail (what the sink receives) and its `alert` event.
pub fn alert_event(
    cfg: &Config,
    tenant: &str,
    schedule: &str,
    run_id: Option<i64>,
    what: &str,
    message: &str,
    now: DateTime<Utc>,
) -> (crate::core::event::Alert, NewEvent) {
    let alert = crate::core::event::Alert {
        what: what.to_string(),
        message: message.to_string(),
        owner: cfg.schedule(schedule).and_then(|s| s.owner.clone()),
        at: now,
        tenant: tenant.to_string(),
        schedule: schedule.to_string(),
        run: run_id,
    };
    let ev = NewEvent::of(now, crate::core::event::Event::Alert(alert.clone()));
    let mut ev = ev.for_schedule(tenant, schedule);
    ev.run_id = run_id;
    (alert, ev)
}

/// Sends an alert the scheduler raised (its `alert` event already written):
/// a file sink at once, a webhook or command through the process-wide
/// [`AlertDispatcher`]. A failure becomes an `alert_failed` event either way.
pub fn dispatch(store: &Arc<Store>, sink: &AlertSink, detail: Value, config_dir: &Path, now: DateTime<Utc>) {
    match sink {
        AlertSink::File { .. } => send_or_record(store, sink, &detail, config_dir, now),
        AlertSink::Webhook { .. } | AlertSink::Command { .. } => {
            AlertDispatcher::global().enqueue(store, sink, detail, config_dir, now);
        }
    }
}

/// Waits up to `within` for the process-wide dispatcher to send (or fail) every
/// alert it holds; `true` when none is left. For a process about to exit, which
/// would otherwise take its queued alerts with it. Nothing queued ever: `true` at once.
pub fn drain(within: Duration) -> bool {
    GLOBAL.get().is_none_or(|d| d.drain(within))
}

/// Sends an alert to the sink now, waiting at most [`SEND_TIMEOUT`]; a failure
/// is recorded as an `alert_failed` event.
pub fn send_or_record(
    store: &Store,
    sink: &AlertSink,
    detail: &Value,
    config_dir: &Path,
    now: DateTime<Utc>,
) {
    send_or_record_within(store, sink, detail, config_dir, now, SEND_TIMEOUT);
}

fn send_or_record_within(
    store: &Store,
    sink: &AlertSink,
    detail: &Value,
    config_dir: &Path,
    now: DateTime<Utc>,
    timeout: Duration,
) {
    if let Err(e) = send_within(sink, detail, config_dir, timeout) {
        record_failed(store, &e, detail, now);
    }
}

fn record_failed(store: &Store, error: &str, detail: &Value, now: DateTime<Utc>) {
    let failed = match serde_json::from_value(detail.clone()) {
        Ok(alert) => NewEvent::of(
            now,
            crate::core::event::Event::AlertFailed {
                error: error.to_string(),
                alert,
            },
        ),
        // Not an alert_event detail (a caller's own): kept as given.
        Err(_) => {
            let mut kept = serde_json::Map::new();
            kept.insert("error".into(), Value::from(error));
            kept.insert("alert".into(), detail.clone());
            NewEvent::of(
                now,
                crate::core::event::Event::Other {
                    kind: "alert_failed".into(),
                    detail: Value::Object(kept),
                },
            )
        }
    };
    let _ = store.write(|tx| tx.append_event(&failed).map(|_| ()));
}

/// Sends one alert to the sink, waiting at most [`SEND_TIMEOUT`]. Errors are
/// returned as text for the trace.
pub fn send(sink: &AlertSink, alert: &Value, config_dir: &Path) -> Result<(), String> {
    send_within(sink, alert, config_dir, SEND_TIMEOUT)
}

fn send_within(sink: &AlertSink, alert: &Value, config_dir: &Path, timeout: Duration) -> Result<(), String> {
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
        AlertSink::Webhook { url, headers } => {
            let shown = crate::secrets::redact_url(url);
            let (headers, redactor) = crate::secrets::resolve_headers(headers, config_dir)
                .map_err(|e| format!("POST {shown}: {e}"))?;
            let mut request = crate::http::post(url, timeout).header("Content-Type", "application/json");
            for (k, v) in &headers {
                request = request.header(k, v);
            }
            let resp = request
                .send(line.as_bytes())
                .map_err(|e| redactor.redact(&format!("POST {shown}: {e}")))?;
            let status = resp.status().as_u16();
            if (200..300).contains(&status) {
                Ok(())
            } else {
                Err(format!("POST {shown} → {status}"))
            }
        }
        AlertSink::Command { command } => {
            let program = Program::from_argv(command)
                .map_err(|_| "alert command is empty".to_string())?
                .current_dir(config_dir);
            let prog = program.name();
            let mut input = line.into_bytes();
            input.push(b'\n');
            match process::run(&program, Some(input), timeout) {
                Ok(done) if done.status.success() => Ok(()),
                Ok(done) => Err(format!("{prog} exited with {}", done.status)),
                Err(e @ ProcessError::TimedOut(_)) => Err(format!("{prog}: {e}")),
                Err(e) => Err(e.to_string()),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The dispatcher

static GLOBAL: OnceLock<AlertDispatcher> = OnceLock::new();

/// A bounded queue of alerts and one worker thread sending them in order, each
/// within the dispatcher's send timeout. [`AlertDispatcher::enqueue`] never
/// blocks on a sink: when the queue is full the alert is recorded as
/// `alert_failed` instead.
pub struct AlertDispatcher {
    shared: Arc<Shared>,
    /// Alerts waiting or being sent at most.
    capacity: usize,
    /// Why there is no worker, if its thread could not start.
    no_worker: Option<String>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a job arrives or the dispatcher closes.
    work: Condvar,
    /// Signalled when the queue becomes empty with nothing being sent.
    idle: Condvar,
    timeout: Duration,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// The worker is sending one (it counts against the capacity).
    sending: bool,
    /// The dispatcher was dropped: the worker ends once the queue is empty.
    closed: bool,
}

struct Job {
    store: Arc<Store>,
    sink: AlertSink,
    detail: Value,
    config_dir: PathBuf,
    now: DateTime<Utc>,
}

impl AlertDispatcher {
    /// The process's dispatcher ([`QUEUE_CAPACITY`], [`SEND_TIMEOUT`]), started on first use.
    pub fn global() -> &'static Self {
        GLOBAL.get_or_init(|| Self::new(QUEUE_CAPACITY, SEND_TIMEOUT))
    }

    /// A dispatcher holding at most `capacity` alerts (waiting or being sent),
    /// each send bounded by `timeout`.
    pub fn new(capacity: usize, timeout: Duration) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            idle: Condvar::new(),
            timeout,
        });
        let worker = Arc::clone(&shared);
        let no_worker = std::thread::Builder::new()
            .name("alert-sender".into())
            .spawn(move || worker.work())
            .err()
            .map(|e| format!("alert not sent: no sender thread: {e}"));
        Self {
            shared,
            capacity,
            no_worker,
        }
    }

    /// Queues an alert (its `alert` event already written) for sending. A full
    /// queue, or no worker, records `alert_failed` saying so instead.
    pub fn enqueue(
        &self,
        store: &Arc<Store>,
        sink: &AlertSink,
        detail: Value,
        config_dir: &Path,
        now: DateTime<Utc>,
    ) {
        if let Some(why) = &self.no_worker {
            record_failed(store, why, &detail, now);
            return;
        }
        let mut queue = self.shared.lock();
        let held = queue.jobs.len() + usize::from(queue.sending);
        if held >= self.capacity {
            drop(queue);
            let why =
                format!("alert not sent: the alert queue is full ({held} alerts waiting or being sent)");
            record_failed(store, &why, &detail, now);
            return;
        }
        queue.jobs.push_back(Job {
            store: Arc::clone(store),
            sink: sink.clone(),
            detail,
            config_dir: config_dir.to_path_buf(),
            now,
        });
        drop(queue);
        self.shared.work.notify_one();
    }

    /// Waits up to `within` until every queued alert was sent or recorded as
    /// failed; `true` when none is left.
    pub fn drain(&self, within: Duration) -> bool {
        if self.no_worker.is_some() {
            return true; // nothing was ever queued
        }
        let queue = self.shared.lock();
        let (queue, _) = self
            .shared
            .idle
            .wait_timeout_while(queue, within, |q| !q.jobs.is_empty() || q.sending)
            .unwrap_or_else(PoisonError::into_inner);
        queue.jobs.is_empty() && !queue.sending
    }
}

impl Drop for AlertDispatcher {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
    }
}

impl Shared {
    /// The queue stays consistent even if a holder panicked: every critical
    /// section is a single push, pop or flag change.
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The worker: sends jobs in order until the dispatcher is dropped and the
    /// queue is empty.
    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.lock();
                loop {
                    if let Some(job) = queue.jobs.pop_front() {
                        queue.sending = true;
                        break job;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self.work.wait(queue).unwrap_or_else(PoisonError::into_inner);
                }
            };
            send_or_record_within(
                &job.store,
                &job.sink,
                &job.detail,
                &job.config_dir,
                job.now,
                self.timeout,
            );
            let mut queue = self.lock();
            queue.sending = false;
            if queue.jobs.is_empty() {
                self.idle.notify_all();
            }
        }
    }
}
