//! Starting one attempt of an agent and reporting what it says and how it ended.
//!
//! A runner only observes: it streams protocol lines and the final [`Ending`] to
//! the engine over a channel and decides nothing (classification lives in
//! `recovery::classify`). Every report carries the run id and fencing token so the
//! engine can drop reports of an attempt it no longer owns.
//!
//! Process agents: non-protocol output ([`AgentLine::Log`]) is *not* reported as a
//! line; it goes, with stderr, into the bounded log delivered in
//! [`AttemptSignal::Ended`]. Malformed protocol lines are reported *and* kept in
//! the log, so the operator sees them next to the output around them.

use crate::agent::log::ReportedLog;
use crate::agent::protocol::{self, AgentLine, MAX_LINE, PROTOCOL_VERSION, Reply};
use crate::config::model::{AgentConfig, AgentKind};
use crate::process::{self, Exit, Limits, ProcessError, Program};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

/// How long past its timeout an HTTP agent call may take before we stop waiting
/// for ureq to enforce the timeout itself.
const HTTP_GRACE: Duration = Duration::from_secs(2);

/// Largest HTTP response body read from an HTTP agent.
const MAX_HTTP_BODY: u64 = 16 * 1024 * 1024;

/// Everything needed to start one attempt.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    pub run_id: i64,
    /// Fencing token of the attempt, echoed in every report.
    pub token: i64,
    /// 1-based.
    pub attempt: u32,
    pub agent: std::sync::Arc<AgentConfig>,
    /// Its text is in the attempt's row already (written in the claim's
    /// transaction).
    pub envelope: std::sync::Arc<crate::agent::envelope::Envelope>,
    /// Max runtime of the attempt; the agent is killed after it.
    pub timeout: Duration,
    /// The config file's folder: working directory, and base of relative program paths.
    pub config_dir: PathBuf,
    /// Max bytes of non-protocol output kept.
    pub log_limit: usize,
    /// The attempt's lease as the agent's supervisor enforces it: the agent's
    /// tree is ended when it passes without [`AttemptHandle::renew`]. `None`:
    /// only the timeout.
    pub lease: Option<AttemptLease>,
}

/// See [`AttemptSpec::lease`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttemptLease {
    /// How long the lease is still valid when the attempt starts.
    pub valid_for: Duration,
    /// TERM → KILL grace when it lapses: the tree must be gone before another
    /// scheduler may take the attempt over (within the takeover grace).
    pub kill_grace: Duration,
}

pub use crate::core::records::Ending;

/// One thing that happened to an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptSignal {
    /// The agent runs: its process's exec succeeded (an HTTP agent: its call
    /// is being made) at `at`. The first report of an attempt that started,
    /// at most once; an attempt that could not start ends without it.
    /// `at` is on the monotonic clock of this process; the engine places it
    /// on its own clock when the report arrives.
    Started { at: std::time::Instant },
    /// A protocol line, in the order the agent wrote it.
    Line(AgentLine),
    /// Always the last report of an attempt, exactly once. `log` is the bounded
    /// non-protocol output (stdout and stderr, or an HTTP body).
    Ended { ending: Ending, log: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AttemptReport {
    pub run_id: i64,
    pub token: i64,
    pub signal: AttemptSignal,
}

/// Starts attempts. Implementations must be called inside a tokio runtime, spawn
/// their work and return at once; they send lines, then exactly one `Ended`.
pub trait AgentRunner: Send + Sync {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle;
}

/// Lets the engine cancel a running attempt (overlap `cancel_previous`, kill
/// switch), renew the lease its supervisor enforces, and answer its
/// side-effect steps. Dropping the handle does not cancel (but closes a
/// handshake agent's stdin).
#[derive(Clone)]
pub struct AttemptHandle {
    cancel: Option<Arc<watch::Sender<bool>>>,
    control: Option<mpsc::UnboundedSender<Control>>,
    /// Simulated runners cancel by callback.
    on_cancel: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// What the engine tells a running attempt besides cancel.
#[derive(Debug, Clone, PartialEq)]
enum Control {
    Renew(Duration),
    Reply(Reply),
}

impl std::fmt::Debug for AttemptHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptHandle")
            .field(
                "cancellable",
                &(self.cancel.is_some() || self.on_cancel.is_some()),
            )
            .finish()
    }
}

impl AttemptHandle {
    fn new() -> (Self, watch::Receiver<bool>, mpsc::UnboundedReceiver<Control>) {
        let (tx, rx) = watch::channel(false);
        let (control, control_rx) = mpsc::unbounded_channel();
        (
            Self {
                cancel: Some(Arc::new(tx)),
                control: Some(control),
                on_cancel: None,
            },
            rx,
            control_rx,
        )
    }

    /// A handle whose cancel does nothing, for simulated runners that end attempts
    /// on their own terms.
    pub fn detached() -> Self {
        Self {
            cancel: None,
            control: None,
            on_cancel: None,
        }
    }

    /// A handle whose cancel runs `f` (simulated runners).
    pub fn from_fn(f: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            cancel: None,
            control: None,
            on_cancel: Some(Arc::new(f)),
        }
    }

    /// The lease is valid for `valid_for` from now: the supervisor ends the
    /// agent's tree if that passes without another renewal.
    pub fn renew(&self, valid_for: Duration) {
        if let Some(tx) = &self.control {
            let _ = tx.send(Control::Renew(valid_for));
        }
    }

    /// Answers a side-effect step of a handshake agent (a line on its stdin).
    pub fn reply(&self, reply: Reply) {
        if let Some(tx) = &self.control {
            let _ = tx.send(Control::Reply(reply));
        }
    }

    /// Asks the attempt to stop; it ends with [`Ending::Cancelled`] unless it already
    /// ended. Idempotent.
    pub fn cancel(&self) {
        if let Some(tx) = &self.cancel {
            tx.send_replace(true);
        }
        if let Some(f) = &self.on_cancel {
            f();
        }
    }
}

/// Resolves when cancel is requested; never, if the handle is dropped uncancelled.
async fn cancelled(mut rx: watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Sends reports of one attempt; a closed channel (engine gone) is not our problem.
#[derive(Clone)]
struct Reporter {
    run_id: i64,
    token: i64,
    tx: mpsc::UnboundedSender<AttemptReport>,
}

impl Reporter {
    fn new(spec: &AttemptSpec, tx: mpsc::UnboundedSender<AttemptReport>) -> Self {
        Self {
            run_id: spec.run_id,
            token: spec.token,
            tx,
        }
    }

    fn send(&self, signal: AttemptSignal) {
        let _ = self.tx.send(AttemptReport {
            run_id: self.run_id,
            token: self.token,
            signal,
        });
    }

    fn ended(&self, ending: Ending, log: String) {
        self.send(AttemptSignal::Ended { ending, log });
    }
}

/// Dispatches on the agent's kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRunner;

impl AgentRunner for DefaultRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        match spec.agent.kind {
            AgentKind::Command { .. } => ProcessRunner.start(spec, reports),
            AgentKind::Http { .. } => HttpRunner.start(spec, reports),
        }
    }
}

// ---------------------------------------------------------------------------
// Process agents

/// Runs a command agent: argv (never a shell), in its own process group so that a
/// timeout or cancel kills everything it started.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessRunner;

impl AgentRunner for ProcessRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        let (handle, cancel, control) = AttemptHandle::new();
        let reporter = Reporter::new(&spec, reports);
        tokio::spawn(async move {
            let (ending, log) = run_process(spec, &reporter, cancel, control).await;
            reporter.ended(ending, log);
        });
        handle
    }
}

/// The envelope as sent: one line of JSON. A handshake agent's also says the
/// protocol version and that side-effect steps are answered on stdin
/// (`"protocol": 2, "acks": true`) — facts of the transport, so the runner adds
/// them. Other agents get the version-1 envelope unchanged: without `acks`
/// nobody answers, and an agent that parses envelopes strictly keeps working.
pub fn envelope_line(envelope: &crate::agent::envelope::Envelope, acks: bool) -> Vec<u8> {
    let line = crate::agent::envelope::EnvelopeLine {
        envelope,
        handshake: acks.then_some(crate::agent::envelope::Handshake {
            protocol: PROTOCOL_VERSION,
            acks: true,
        }),
    };
    // Serializing plain structs and a serde_json::Value cannot fail.
    let mut body = serde_json::to_vec(&line).unwrap_or_default();
    body.push(b'\n');
    body
}

/// Whether the attempt's stdin stays open for step replies.
fn handshake(spec: &AttemptSpec) -> bool {
    spec.agent.handshake && matches!(spec.agent.kind, AgentKind::Command { .. })
}

async fn run_process(
    spec: AttemptSpec,
    reporter: &Reporter,
    cancel: watch::Receiver<bool>,
    mut control: mpsc::UnboundedReceiver<Control>,
) -> (Ending, String) {
    let log = Arc::new(Mutex::new(ReportedLog::new(spec.log_limit)));
    let (pipes, running) = match spawn(&spec).await {
        Ok(started) => started,
        Err(ending) => return (ending, String::new()),
    };
    reporter.send(AttemptSignal::Started {
        at: running.started(),
    });

    let acks = handshake(&spec);
    let (replies, mut replies_rx) = mpsc::unbounded_channel::<Reply>();
    let stdin_task = pipes.stdin.map(|mut stdin| {
        let body = envelope_line(&spec.envelope, acks);
        // An agent that never reads stdin (or exits early) must not break the
        // attempt: write errors such as EPIPE are ignored, and the writer runs on
        // its own task so a full pipe cannot block us. A handshake agent's
        // stdin stays open for the replies to its side-effect steps, in order.
        tokio::spawn(async move {
            let _ = stdin.write_all(&body).await;
            if acks {
                let _ = stdin.flush().await;
                while let Some(reply) = replies_rx.recv().await {
                    if stdin.write_all(reply.line().as_bytes()).await.is_err() {
                        break;
                    }
                    let _ = stdin.flush().await;
                }
            }
            let _ = stdin.shutdown().await;
        })
    });
    // Renewals go straight to the supervisor (never behind a blocked stdin).
    let renewer = running.renewer();
    let control_task = tokio::spawn(async move {
        while let Some(order) = control.recv().await {
            match order {
                Control::Renew(valid_for) => renewer.renew(valid_for),
                Control::Reply(reply) => {
                    let _ = replies.send(reply);
                }
            }
        }
    });
    // Both pipes are read on one task, so one abort stops all reading; the task
    // holds `output_open` until EOF of both, i.e. until every process holding
    // them is gone, and the keeper waits (bounded) for that before the end.
    let (stdout, stderr, output_open) = (pipes.stdout, pipes.stderr, pipes.output);
    let output = {
        let log = Arc::clone(&log);
        let reporter = reporter.clone();
        tokio::spawn(async move {
            let _output_open = output_open;
            let stdout = async {
                if let Some(stdout) = stdout {
                    read_lines(BufReader::new(stdout), |line| match protocol::parse_line(line) {
                        AgentLine::Log(text) => push_log(&log, &text),
                        parsed => {
                            if matches!(parsed, AgentLine::Malformed { .. }) {
                                push_log(&log, line);
                            }
                            reporter.send(AttemptSignal::Line(parsed));
                        }
                    })
                    .await;
                }
            };
            let stderr = async {
                if let Some(stderr) = stderr {
                    read_lines(BufReader::new(stderr), |line| push_log(&log, line)).await;
                }
            };
            tokio::join!(stdout, stderr);
        })
    };

    // The keeper ends the attempt's whole process group at the timeout, on
    // cancel, and also after a normal exit: leftovers of an ended attempt could
    // repeat side effects alongside the next attempt, and would hold our pipes.
    let stopper = running.stopper();
    let cancel_task = tokio::spawn(async move {
        cancelled(cancel).await;
        stopper.stop();
    });
    let exit = running.ended().await;
    cancel_task.abort();
    control_task.abort();

    let ending = match exit {
        Exit::Exited(status) => {
            use std::os::unix::process::ExitStatusExt as _;
            Ending::Exited {
                code: status.code(),
                signal: status.signal(),
            }
        }
        Exit::Lost(e) => {
            push_log(&log, &format!("agentcron: lost track of the agent process: {e}"));
            Ending::Exited {
                code: None,
                signal: None,
            }
        }
        Exit::TimedOut => Ending::TimedOut,
        Exit::Stopped => Ending::Cancelled,
        Exit::LeaseExpired => Ending::LeaseExpired,
    };

    // A process that escaped the group (setsid) could hold the pipes forever, so
    // the keeper's wait for them was bounded. Awaiting the aborted task
    // guarantees no line is reported after we report `Ended`.
    output.abort();
    let _ = output.await;
    if let Some(task) = stdin_task {
        task.abort();
        let _ = task.await;
    }
    let text = log.lock().map(|l| l.render()).unwrap_or_default();
    (ending, text)
}

fn push_log(log: &Mutex<ReportedLog>, line: &str) {
    // A poisoned lock means a panic elsewhere already; losing log text is fine.
    if let Ok(mut log) = log.lock() {
        log.push_line(line);
    }
}

async fn spawn(spec: &AttemptSpec) -> Result<(process::Pipes, process::Running), Ending> {
    let AgentKind::Command { command } = &spec.agent.kind else {
        return Err(Ending::SpawnFailed(format!(
            "agent `{}` is not a command agent",
            spec.agent.id
        )));
    };
    let Some((program, args)) = command.split_first() else {
        return Err(Ending::SpawnFailed(format!(
            "agent `{}` has an empty command",
            spec.agent.id
        )));
    };
    let program_path = resolve_program(program, &spec.config_dir);
    if !spec.config_dir.is_dir() {
        return Err(Ending::SpawnFailed(format!(
            "agent `{}`: config folder `{}` does not exist",
            spec.agent.id,
            spec.config_dir.display()
        )));
    }
    let agent = Program::new(program_path, args)
        .current_dir(&spec.config_dir)
        .envs(&spec.agent.env)
        .env("AGENTCRON_RUN_ID", spec.run_id.to_string())
        .env("AGENTCRON_IDEMPOTENCY_KEY", &spec.envelope.idempotency_key)
        .env("AGENTCRON_ATTEMPT", spec.attempt.to_string());
    let limits = Limits {
        timeout: spec.timeout,
        lease: spec.lease.map(|l| l.valid_for),
        lease_kill_grace: spec.lease.map_or(process::KILL_GRACE, |l| l.kill_grace),
    };
    process::start_with(&agent, limits)
        .await
        .map_err(|e| spawn_failure(program, &e))
}

/// How an agent that could not be started ended. This machine out of open
/// files, processes or memory (EMFILE, ENFILE, EAGAIN, ENOMEM: an HTTP flood,
/// a fork bomb beside us) is [`Ending::OutOfResources`], which is retried:
/// the agent is fine and the shortage passes. Anything else (not found, not
/// executable) is [`Ending::SpawnFailed`]: it does not fix itself.
pub fn spawn_failure(program: &str, error: &ProcessError) -> Ending {
    let ProcessError::Spawn { source, .. } = error else {
        return Ending::SpawnFailed(format!("agent command `{program}` could not be started: {error}"));
    };
    if let Some(libc::EMFILE | libc::ENFILE | libc::EAGAIN | libc::ENOMEM) = source.raw_os_error() {
        return Ending::OutOfResources(format!(
            "agent command `{program}` could not be started, this machine is out of resources: {source}"
        ));
    }
    Ending::SpawnFailed(match source.kind() {
        io::ErrorKind::NotFound => format!("agent command `{program}` not found: {source}"),
        io::ErrorKind::PermissionDenied => {
            format!("agent command `{program}` is not executable: {source}")
        }
        _ => format!("agent command `{program}` could not be started: {source}"),
    })
}

/// Relative paths with a `/` are relative to the config folder; bare names go
/// through `PATH`.
fn resolve_program(program: &str, config_dir: &Path) -> PathBuf {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        config_dir.join(path)
    } else {
        path.to_path_buf()
    }
}

/// Calls `each` for every line (newline and a trailing `\r` stripped), lossily
/// decoded. A line is cut after `MAX_LINE + 1` bytes, so an agent that never
/// writes a newline cannot grow our memory; the cut line is still longer than
/// `MAX_LINE`, which `parse_line` turns into truncated log.
async fn read_lines<R: AsyncBufRead + Unpin>(mut reader: R, mut each: impl FnMut(&str)) {
    let mut buf = Vec::new();
    loop {
        match read_capped_line(&mut reader, &mut buf, MAX_LINE + 1).await {
            Ok(true) => each(&String::from_utf8_lossy(&buf)),
            Ok(false) | Err(_) => return,
        }
    }
}

/// Reads one line into `out` (at most `cap` bytes kept, the rest discarded).
/// Returns false at EOF with nothing read.
async fn read_capped_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
) -> io::Result<bool> {
    out.clear();
    let mut any = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(any);
        }
        any = true;
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        if done {
            if out.last() == Some(&b'\n') {
                out.pop();
            }
            if out.last() == Some(&b'\r') {
                out.pop();
            }
            return Ok(true);
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP agents

/// Calls an HTTP agent: POST of the envelope; the response body is JSON lines of
/// the protocol or one JSON object taken as the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpRunner;

impl AgentRunner for HttpRunner {
    fn start(&self, spec: AttemptSpec, reports: mpsc::UnboundedSender<AttemptReport>) -> AttemptHandle {
        // An HTTP call has no channel for renewals or replies: they are dropped.
        let (handle, cancel, _control) = AttemptHandle::new();
        let reporter = Reporter::new(&spec, reports);
        tokio::spawn(async move {
            let AgentKind::Http { url } = &spec.agent.kind else {
                let message = format!("agent `{}` is not an http agent", spec.agent.id);
                reporter.ended(Ending::SpawnFailed(message), String::new());
                return;
            };
            let url = url.clone();
            let (headers, redactor) =
                match crate::secrets::resolve_headers(&spec.agent.headers, &spec.config_dir) {
                    Ok(resolved) => resolved,
                    Err(e) => {
                        let message = format!("http agent `{}`: {e}", spec.agent.id);
                        reporter.ended(Ending::SpawnFailed(message), String::new());
                        return;
                    }
                };
            let timeout = spec.timeout;
            let log_limit = spec.log_limit;
            let key = spec.envelope.idempotency_key.clone();
            let attempt = spec.attempt;
            let body = serde_json::to_vec(&*spec.envelope).unwrap_or_default();
            reporter.send(AttemptSignal::Started {
                at: std::time::Instant::now(),
            });
            let call =
                tokio::task::spawn_blocking(move || post(&url, &headers, &key, attempt, body, timeout));
            // ureq enforces `timeout`; the outer bound only guards against it not doing so.
            let outcome = tokio::select! {
                biased;
                joined = tokio::time::timeout(timeout.saturating_add(HTTP_GRACE), call) => match joined {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(e)) => HttpAnswer::Failed(format!("http agent call panicked: {e}")),
                    Err(_) => HttpAnswer::TimedOut,
                },
                // The blocking call finishes on its own (bounded by `timeout`); its
                // answer is dropped.
                () = cancelled(cancel) => HttpAnswer::Cancelled,
            };
            let mut log = ReportedLog::new(log_limit);
            let ending = match outcome {
                HttpAnswer::Response { status, body } => {
                    for line in parse_body(&body) {
                        match line {
                            AgentLine::Log(text) => log.push_line(&text),
                            parsed => {
                                if let AgentLine::Malformed { line, .. } = &parsed {
                                    log.push_line(line);
                                }
                                reporter.send(AttemptSignal::Line(parsed));
                            }
                        }
                    }
                    let error = (!(200..300).contains(&status)).then(|| format!("HTTP {status}"));
                    Ending::Http {
                        status: Some(status),
                        error,
                    }
                }
                HttpAnswer::Failed(error) => Ending::Http {
                    status: None,
                    error: Some(redactor.redact(&error)),
                },
                HttpAnswer::TimedOut => Ending::TimedOut,
                HttpAnswer::Cancelled => Ending::Cancelled,
            };
            reporter.ended(ending, log.render());
        });
        handle
    }
}

enum HttpAnswer {
    Response { status: u16, body: String },
    Failed(String),
    TimedOut,
    Cancelled,
}

fn post(
    url: &str,
    headers: &[(String, String)],
    key: &str,
    attempt: u32,
    body: Vec<u8>,
    timeout: Duration,
) -> HttpAnswer {
    let mut request = crate::http::post(url, timeout)
        .header("Content-Type", "application/json")
        .header("Idempotency-Key", key)
        .header("X-Agentcron-Attempt", attempt.to_string());
    for (k, v) in headers {
        request = request.header(k, v);
    }
    let response = request.send(&body[..]);
    // Errors name the URL without its userinfo.
    let url = &crate::secrets::redact_url(url);
    match response {
        Ok(mut response) => {
            let status = response.status().as_u16();
            match response
                .body_mut()
                .with_config()
                .limit(MAX_HTTP_BODY)
                .read_to_vec()
            {
                Ok(bytes) => HttpAnswer::Response {
                    status,
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                },
                Err(ureq::Error::Timeout(_)) => HttpAnswer::TimedOut,
                Err(e) => HttpAnswer::Failed(format!("reading the response of {url} failed: {e}")),
            }
        }
        Err(ureq::Error::Timeout(_)) => HttpAnswer::TimedOut,
        Err(e) => HttpAnswer::Failed(format!("{url}: {e}")),
    }
}

/// A body that is one JSON object is one message: an event if it names one, else
/// the result itself. Anything else is read as protocol lines.
fn parse_body(body: &str) -> Vec<AgentLine> {
    if let Ok(serde_json::Value::Object(object)) = serde_json::from_str::<serde_json::Value>(body.trim()) {
        if object.contains_key("event") {
            return vec![protocol::parse_line(body.trim())];
        }
        return vec![match protocol::parse_result_object(object) {
            Ok(result) => AgentLine::Result(result),
            Err(error) => AgentLine::Malformed {
                line: body.trim().to_string(),
                error,
                event: Some("result".into()),
            },
        }];
    }
    body.lines().map(protocol::parse_line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::protocol::ResultStatus;

    #[test]
    fn relative_programs_with_a_slash_resolve_against_the_config_folder() {
        let dir = Path::new("/etc/agentcron");
        assert_eq!(resolve_program("agents/a.sh", dir), dir.join("agents/a.sh"));
        assert_eq!(resolve_program("./a.sh", dir), dir.join("./a.sh"));
        assert_eq!(resolve_program("python3", dir), PathBuf::from("python3"));
        assert_eq!(
            resolve_program("/usr/bin/env", dir),
            PathBuf::from("/usr/bin/env")
        );
    }

    #[test]
    fn http_bodies_are_lines_or_one_result_object() {
        let lines =
            parse_body("{\"event\":\"heartbeat\"}\nhello\n{\"event\":\"result\",\"status\":\"success\"}\n");
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], AgentLine::Heartbeat);
        assert_eq!(lines[1], AgentLine::Log("hello".into()));
        assert!(matches!(&lines[2], AgentLine::Result(r) if r.status == ResultStatus::Success));

        let bare = parse_body("{\n  \"status\": \"failure\",\n  \"error_class\": \"non_retryable\"\n}");
        assert!(matches!(&bare[..], [AgentLine::Result(r)] if r.status == ResultStatus::Failure));

        let tagged = parse_body(" {\"event\":\"result\",\"status\":\"success\",\"summary\":\"ok\"} ");
        assert!(matches!(&tagged[..], [AgentLine::Result(r)] if r.summary.as_deref() == Some("ok")));

        let bad = parse_body("{\"hello\":1}");
        assert!(matches!(&bad[..], [AgentLine::Malformed { .. }]));
        // A bare object with an unknown status is a broken result, not noise.
        let maybe = parse_body("{\"status\":\"maybe\"}");
        assert!(maybe[0].is_broken_result(), "{maybe:?}");
        assert!(parse_body("").is_empty());
    }

    #[tokio::test]
    async fn capped_lines_do_not_grow_without_bound() {
        let data = format!("{}\nshort\r\ntail", "x".repeat(100));
        let mut reader = BufReader::with_capacity(7, data.as_bytes());
        let mut buf = Vec::new();
        assert!(read_capped_line(&mut reader, &mut buf, 10).await.unwrap());
        assert_eq!(buf, b"xxxxxxxxxx");
        assert!(read_capped_line(&mut reader, &mut buf, 10).await.unwrap());
        assert_eq!(buf, b"short");
        assert!(read_capped_line(&mut reader, &mut buf, 10).await.unwrap());
        assert_eq!(buf, b"tail");
        assert!(!read_capped_line(&mut reader, &mut buf, 10).await.unwrap());
    }
}
