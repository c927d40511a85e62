//! The agent runners against real processes (fixtures in tests/fixtures/agents)
//! and a local HTTP server, and their endings through `classify`.

use agentcron::agent::{
    AgentLine, AgentRunner, AttemptHandle, AttemptReport, AttemptSignal, AttemptSpec, DefaultRunner, Ending,
    Envelope, EnvelopeWindow, HttpRunner, MemoryEntry, ProcessRunner, ResultStatus, TimeContext,
    idempotency_key,
};
use agentcron::config::model::{AgentConfig, AgentKind, ErrorClass};
use agentcron::recovery::classify::{Outcome, classify};
use agentcron::store::types::{RunReason, RunState, StepStatus};
use chrono::TimeZone;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

/// Safety net only: tests wait on reports, never on the clock.
const PATIENCE: Duration = Duration::from_secs(60);

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn agents_dir() -> PathBuf {
    fixtures().join("agents")
}

fn envelope() -> Envelope {
    let tz = chrono_tz::Asia::Shanghai;
    let start = chrono::Utc.with_ymd_and_hms(2026, 6, 6, 1, 0, 0).unwrap();
    let now = start + chrono::TimeDelta::minutes(5);
    Envelope {
        run_id: 42,
        tenant: "acme".into(),
        schedule: "daily-sales-report".into(),
        window: EnvelopeWindow::new("2026-06-06", start, start + chrono::TimeDelta::hours(1), tz),
        idempotency_key: idempotency_key("acme", "daily-sales-report", "2026-06-06"),
        attempt: 2,
        reason: RunReason::Retry,
        now: agentcron::agent::envelope::local_rfc3339(now, tz),
        context: TimeContext::new(now, tz, true, Some(now - chrono::TimeDelta::hours(26))),
        memory: vec![MemoryEntry {
            window: "2026-06-05".into(),
            state: RunState::Succeeded,
            summary: Some("sent 12 rows".into()),
        }],
        completed_steps: vec!["fetch".into()],
        uncertain_steps: vec!["deliver".into()],
        verify_step: None,
        resume_after: None,
        payload: serde_json::json!({"report": "sales"}),
    }
}

fn spec(kind: AgentKind, config_dir: PathBuf, timeout: Duration) -> AttemptSpec {
    AttemptSpec {
        run_id: 42,
        token: 7,
        attempt: 2,
        agent: std::sync::Arc::new(AgentConfig {
            id: "test-agent".into(),
            kind,
            timeout,
            env: BTreeMap::from([("CHANNEL".to_string(), "ops".to_string())]),
            verify: false,
            steps: vec![],
            handshake: false,
            headers: BTreeMap::new(),
        }),
        envelope: std::sync::Arc::new(envelope()),
        timeout,
        config_dir,
        log_limit: 64 * 1024,
        lease: None,
    }
}

fn command(argv: &[&str]) -> AgentKind {
    AgentKind::Command {
        command: argv.iter().map(|s| s.to_string()).collect(),
    }
}

/// A fixture run with `sh` from the fixtures folder.
fn sh_spec(script: &str, args: &[&str], timeout: Duration) -> AttemptSpec {
    let mut argv = vec!["sh", script];
    argv.extend_from_slice(args);
    spec(command(&argv), agents_dir(), timeout)
}

struct Finished {
    lines: Vec<AgentLine>,
    ending: Ending,
    log: String,
    /// The runner reported the agent running (first, once).
    started: bool,
}

impl Finished {
    fn result(&self) -> Option<&agentcron::agent::AgentResult> {
        self.lines.iter().rev().find_map(|l| match l {
            AgentLine::Result(r) => Some(r),
            _ => None,
        })
    }

    fn outcome(&self) -> Outcome {
        classify(
            self.result(),
            &self.ending,
            ErrorClass::Retryable,
            ErrorClass::Retryable,
        )
    }
}

/// Collects reports until `Ended`, then checks that nothing follows it.
async fn finish(rx: &mut mpsc::UnboundedReceiver<AttemptReport>) -> Finished {
    let mut lines = Vec::new();
    let mut started = false;
    loop {
        let report = next(rx).await.expect("runner dropped its channel without Ended");
        assert_eq!((report.run_id, report.token), (42, 7));
        match report.signal {
            AttemptSignal::Started { .. } => {
                assert!(!started && lines.is_empty(), "`Started` after other reports");
                started = true;
            }
            AttemptSignal::Line(line) => lines.push(line),
            AttemptSignal::Ended { ending, log } => {
                assert!(next(rx).await.is_none(), "a report after Ended");
                return Finished {
                    lines,
                    ending,
                    log,
                    started,
                };
            }
        }
    }
}

/// The first report after `Started`.
async fn next_after_start(rx: &mut mpsc::UnboundedReceiver<AttemptReport>) -> Option<AttemptReport> {
    let first = next(rx).await?;
    if matches!(first.signal, AttemptSignal::Started { .. }) {
        return next(rx).await;
    }
    Some(first)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<AttemptReport>) -> Option<AttemptReport> {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("the runner hung")
}

async fn run(runner: &dyn AgentRunner, spec: AttemptSpec) -> Finished {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _handle = runner.start(spec, tx);
    finish(&mut rx).await
}

fn failure_class(outcome: &Outcome) -> Option<ErrorClass> {
    match outcome {
        Outcome::Failure { class, .. } => Some(*class),
        Outcome::Success { .. } => None,
    }
}

/// Gone, a zombie waiting for a PID 1 that may never reap it, or already inside
/// the kernel's exit path (PF_EXITING: a killed process can take a moment to
/// finish exiting): dead either way.
fn process_gone(pid: i32) -> bool {
    const PF_EXITING: u64 = 0x4;
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // Fields after the parenthesised command name: state is the first, flags the seventh.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let zombie = fields.first() == Some(&"Z");
    let exiting = fields
        .get(6)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_EXITING != 0);
    zombie || exiting
}

fn read_pid(path: &std::path::Path) -> i32 {
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

// ---------------------------------------------------------------------------
// Envelope

#[test]
fn envelope_json_has_exactly_the_binding_field_names() {
    let value = serde_json::to_value(envelope()).unwrap();
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let mut expected = vec![
        "run_id",
        "tenant",
        "schedule",
        "window",
        "idempotency_key",
        "attempt",
        "reason",
        "now",
        "context",
        "memory",
        "completed_steps",
        "uncertain_steps",
        "verify_step",
        "resume_after",
        "payload",
    ];
    expected.sort();
    assert_eq!(keys(&value), expected);
    assert_eq!(keys(&value["window"]), ["end", "key", "start", "timezone"]);
    assert_eq!(
        keys(&value["context"]),
        [
            "business_day",
            "last_success_at",
            "since_last_success",
            "timezone"
        ]
    );
    assert_eq!(keys(&value["memory"][0]), ["state", "summary", "window"]);
    assert_eq!(value["reason"], "retry");
    assert_eq!(value["memory"][0]["state"], "succeeded");
    assert_eq!(value["verify_step"], serde_json::Value::Null);
    assert_eq!(value["window"]["start"], "2026-06-06T09:00:00+08:00");
    assert_eq!(value["window"]["end"], "2026-06-06T10:00:00+08:00");
    assert_eq!(value["window"]["timezone"], "Asia/Shanghai");
    assert_eq!(value["now"], "2026-06-06T09:05:00+08:00");
    assert_eq!(value["context"]["since_last_success"], "1d2h");
    assert_eq!(value["idempotency_key"], "acme/daily-sales-report/2026-06-06");
    let back: Envelope = serde_json::from_value(value).unwrap();
    assert_eq!(back, envelope());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_reads_the_envelope_from_stdin() {
    // A program path with a `/` resolves against the config folder, which is also the cwd.
    let spec = spec(
        command(&["agents/echo_envelope.py"]),
        fixtures(),
        Duration::from_secs(60),
    );
    let done = run(&ProcessRunner, spec).await;
    assert_eq!(
        done.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
    let Outcome::Success { summary, processed } = done.outcome() else {
        panic!("not a success: {:?}\nlog: {}", done.outcome(), done.log)
    };
    assert_eq!(processed, Some(1));
    let seen: serde_json::Value = serde_json::from_str(&summary.unwrap()).unwrap();
    assert_eq!(seen["envelope"], serde_json::to_value(envelope()).unwrap());
    assert_eq!(seen["keys"].as_array().unwrap().len(), 15);
    assert_eq!(seen["env"]["AGENTCRON_RUN_ID"], "42");
    assert_eq!(
        seen["env"]["AGENTCRON_IDEMPOTENCY_KEY"],
        "acme/daily-sales-report/2026-06-06"
    );
    assert_eq!(seen["env"]["AGENTCRON_ATTEMPT"], "2");
    assert_eq!(seen["env"]["CHANNEL"], "ops");
    let cwd = std::fs::canonicalize(seen["cwd"].as_str().unwrap()).unwrap();
    assert_eq!(cwd, std::fs::canonicalize(fixtures()).unwrap());
}

// ---------------------------------------------------------------------------
// Protocol and exit codes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_lines_are_reported_in_order() {
    let done = run(
        &ProcessRunner,
        sh_spec("protocol.sh", &[], Duration::from_secs(60)),
    )
    .await;
    assert_eq!(
        done.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
    let lines = &done.lines;
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_eq!(lines[0], AgentLine::Heartbeat);
    assert_eq!(
        lines[1],
        AgentLine::Step {
            name: "fetch".into(),
            status: StepStatus::Started
        }
    );
    // The malformed line is reported and parsing goes on.
    assert!(matches!(&lines[2], AgentLine::Malformed { line, .. } if line.contains("sometimes")));
    assert_eq!(
        lines[3],
        AgentLine::Step {
            name: "fetch".into(),
            status: StepStatus::Done
        }
    );
    assert_eq!(
        lines[4],
        AgentLine::Usage {
            tokens: Some(1500),
            cost_usd: Some(0.25)
        }
    );
    assert!(matches!(&lines[5], AgentLine::Result(r) if r.status == ResultStatus::Success));
    // Non-protocol output (and the malformed line) lands in the log, protocol does not.
    assert!(done.log.contains("plain text on stdout\n"), "{}", done.log);
    assert!(done.log.contains("plain text on stderr\n"));
    assert!(done.log.contains("json without event is log"));
    assert!(done.log.contains("sometimes"));
    assert!(!done.log.contains("heartbeat"));
    assert_eq!(
        done.outcome(),
        Outcome::Success {
            summary: Some("3 rows".into()),
            processed: Some(3)
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_exit_zero_is_success_without_summary() {
    let done = run(
        &ProcessRunner,
        sh_spec("exit_code.sh", &["0"], Duration::from_secs(60)),
    )
    .await;
    assert!(done.lines.is_empty());
    assert_eq!(
        done.outcome(),
        Outcome::Success {
            summary: None,
            processed: None
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_map_to_error_classes() {
    let cases = [
        ("75", ErrorClass::Retryable),
        ("65", ErrorClass::NonRetryable),
        ("78", ErrorClass::NonRetryable),
        ("77", ErrorClass::NeedsHuman),
        ("3", ErrorClass::NeedsHuman), // the schedule's default below
    ];
    for (code, class) in cases {
        let mut spec = sh_spec("exit_code.sh", &[code], Duration::from_secs(60));
        // A large envelope the agent never reads must not break the runner.
        let mut envelope = (*spec.envelope).clone();
        envelope.payload = serde_json::json!({ "blob": "x".repeat(512 * 1024) });
        spec.envelope = std::sync::Arc::new(envelope);
        let done = run(&ProcessRunner, spec).await;
        assert_eq!(
            done.ending,
            Ending::Exited {
                code: Some(code.parse().unwrap()),
                signal: None
            }
        );
        let outcome = classify(None, &done.ending, ErrorClass::NeedsHuman, ErrorClass::Retryable);
        assert_eq!(failure_class(&outcome), Some(class), "exit {code}");
    }
}

// ---------------------------------------------------------------------------
// Timeouts, cancel, process groups

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("grandchild.pid");
    let mut spec = sh_spec("grandchild.sh", &[], Duration::from_millis(500));
    std::sync::Arc::make_mut(&mut spec.agent)
        .env
        .insert("PID_FILE".into(), pid_file.display().to_string());
    let done = run(&ProcessRunner, spec).await;
    assert_eq!(done.ending, Ending::TimedOut);
    // The heartbeat is printed after the pid file is written.
    assert_eq!(done.lines, [AgentLine::Heartbeat]);
    let pid = read_pid(&pid_file);
    assert!(process_gone(pid), "grandchild {pid} survived the timeout");
    let outcome = classify(None, &done.ending, ErrorClass::NeedsHuman, ErrorClass::Retryable);
    assert_eq!(failure_class(&outcome), Some(ErrorClass::Retryable));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_ignoring_sigterm_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("agent.pid");
    let mut spec = sh_spec("ignore_term.sh", &[], Duration::from_millis(300));
    std::sync::Arc::make_mut(&mut spec.agent)
        .env
        .insert("PID_FILE".into(), pid_file.display().to_string());
    let done = run(&ProcessRunner, spec).await;
    assert_eq!(done.ending, Ending::TimedOut);
    assert_eq!(done.lines, [AgentLine::Heartbeat]);
    assert!(process_gone(read_pid(&pid_file)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_an_exited_agent_are_killed_and_do_not_hold_us() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("grandchild.pid");
    let mut spec = sh_spec("leave_grandchild.sh", &[], Duration::from_secs(600));
    std::sync::Arc::make_mut(&mut spec.agent)
        .env
        .insert("PID_FILE".into(), pid_file.display().to_string());
    let done = run(&ProcessRunner, spec).await;
    assert_eq!(
        done.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
    assert!(matches!(
        done.outcome(),
        Outcome::Success { summary: Some(_), .. }
    ));
    let pid = read_pid(&pid_file);
    assert!(process_gone(pid), "grandchild {pid} outlived its attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("grandchild.pid");
    let mut spec = sh_spec("grandchild.sh", &[], Duration::from_secs(600));
    std::sync::Arc::make_mut(&mut spec.agent)
        .env
        .insert("PID_FILE".into(), pid_file.display().to_string());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle: AttemptHandle = ProcessRunner.start(spec, tx);
    let first = next_after_start(&mut rx).await.unwrap();
    assert_eq!(first.signal, AttemptSignal::Line(AgentLine::Heartbeat));
    handle.cancel();
    handle.cancel(); // idempotent
    let done = finish(&mut rx).await;
    assert_eq!(done.ending, Ending::Cancelled);
    assert!(process_gone(read_pid(&pid_file)));
    assert_eq!(
        done.outcome(),
        Outcome::Failure {
            class: ErrorClass::Retryable,
            reason: "cancelled".into()
        }
    );
    // Cancelling a finished attempt is harmless.
    handle.cancel();
    AttemptHandle::detached().cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grandchildren_get_the_grace_period_after_sigterm() {
    let spec = sh_spec("graceful.sh", &[], Duration::from_secs(600));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = ProcessRunner.start(spec, tx);
    let first = next_after_start(&mut rx).await.unwrap();
    assert_eq!(first.signal, AttemptSignal::Line(AgentLine::Heartbeat));
    handle.cancel();
    let done = finish(&mut rx).await;
    assert_eq!(done.ending, Ending::Cancelled);
    assert!(done.log.contains("cleaned-up"), "{:?}", done.log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_handle_does_not_cancel() {
    let done = run(
        &ProcessRunner,
        sh_spec("protocol.sh", &[], Duration::from_secs(60)),
    )
    .await;
    assert_eq!(
        done.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
}

// ---------------------------------------------------------------------------
// Spawn failures and logs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_binary_is_a_non_retryable_spawn_failure() {
    for argv in [
        &["agents/no-such-agent"][..],
        &["no-such-agentcron-binary", "--flag"][..],
    ] {
        let done = run(
            &ProcessRunner,
            spec(command(argv), fixtures(), Duration::from_secs(60)),
        )
        .await;
        let Ending::SpawnFailed(message) = &done.ending else {
            panic!("{:?}", done.ending)
        };
        assert!(
            message.contains(&format!("agent command `{}` not found", argv[0])),
            "{message}"
        );
        assert_eq!(failure_class(&done.outcome()), Some(ErrorClass::NonRetryable));
        assert!(!done.started, "a program that never ran was reported started");
    }
}

#[test]
fn a_machine_out_of_descriptors_processes_or_memory_is_a_retryable_spawn_failure() {
    use agentcron::agent::runner::spawn_failure;
    use agentcron::process::ProcessError;
    let failed = |errno: i32| {
        let error = ProcessError::Spawn {
            program: "agent.sh".into(),
            source: std::io::Error::from_raw_os_error(errno),
        };
        let ending = spawn_failure("agent.sh", &error);
        // The schedule's classes do not matter: a spawn failure is judged alone.
        let judged = classify(None, &ending, ErrorClass::NeedsHuman, ErrorClass::NeedsHuman);
        (ending, judged)
    };
    for errno in [libc::EMFILE, libc::ENFILE, libc::EAGAIN, libc::ENOMEM] {
        let (ending, judged) = failed(errno);
        assert!(
            matches!(ending, Ending::OutOfResources(_)),
            "errno {errno}: {ending:?}"
        );
        assert_eq!(
            failure_class(&judged),
            Some(ErrorClass::Retryable),
            "errno {errno}"
        );
        let Outcome::Failure { reason, .. } = judged else {
            unreachable!()
        };
        assert!(
            reason.contains("agent.sh") && reason.contains("out of resources"),
            "{reason}"
        );
    }
    for errno in [libc::ENOENT, libc::EACCES, libc::ENOEXEC] {
        let (ending, judged) = failed(errno);
        assert!(
            matches!(ending, Ending::SpawnFailed(_)),
            "errno {errno}: {ending:?}"
        );
        assert_eq!(
            failure_class(&judged),
            Some(ErrorClass::NonRetryable),
            "errno {errno}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_executable_program_is_a_spawn_failure() {
    let spec = spec(
        command(&["agents/not_executable.sh"]),
        fixtures(),
        Duration::from_secs(60),
    );
    let done = run(&ProcessRunner, spec).await;
    let Ending::SpawnFailed(message) = &done.ending else {
        panic!("{:?}", done.ending)
    };
    assert!(message.contains("not executable"), "{message}");
    assert_eq!(failure_class(&done.outcome()), Some(ErrorClass::NonRetryable));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_bounded() {
    let mut spec = sh_spec("chatty.sh", &[], Duration::from_secs(60));
    spec.log_limit = 2000;
    let done = run(&ProcessRunner, spec).await;
    assert_eq!(
        done.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
    assert!(done.log.len() <= 2000, "{} bytes", done.log.len());
    assert!(done.log.contains("bytes truncated"), "{}", done.log);
    assert!(done.log.starts_with("stdout line 0\n") || done.log.starts_with("stderr line 0\n"));
    // Whichever stream was read last, its last line is the log's last line.
    assert!(done.log.ends_with("last words\n") || done.log.ends_with("stderr line 2999\n"));
}

// ---------------------------------------------------------------------------
// HTTP agents

/// What the test server saw.
struct Request {
    head: String,
    body: Vec<u8>,
}

/// Serves one request on 127.0.0.1 with `status` and `body`; returns the url and
/// the request it received.
fn serve_once(status: u16, body: &'static str) -> (String, std::thread::JoinHandle<Request>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/agent", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream);
        let request = read_request(&mut reader);
        let mut stream = reader.into_inner();
        write!(
            stream,
            "HTTP/1.1 {status} Test\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        stream.flush().unwrap();
        request
    });
    (url, server)
}

fn read_request(reader: &mut impl BufRead) -> Request {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("no content-length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Request { head, body }
}

fn http_spec(url: String, timeout: Duration) -> AttemptSpec {
    spec(AgentKind::Http { url }, agents_dir(), timeout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_agent_success() {
    let (url, server) = serve_once(
        200,
        "{\"event\":\"heartbeat\"}\nnot json\n{\"event\":\"result\",\"status\":\"success\",\"summary\":\"posted\",\"processed\":2}\n",
    );
    let done = run(&HttpRunner, http_spec(url, Duration::from_secs(30))).await;
    let request = server.join().unwrap();
    assert!(
        request.head.starts_with("POST /agent HTTP/1.1\r\n"),
        "{}",
        request.head
    );
    assert!(
        request
            .head
            .to_ascii_lowercase()
            .contains("idempotency-key: acme/daily-sales-report/2026-06-06\r\n")
    );
    let sent: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(sent, serde_json::to_value(envelope()).unwrap());
    assert_eq!(
        done.ending,
        Ending::Http {
            status: Some(200),
            error: None
        }
    );
    assert_eq!(done.lines.len(), 2);
    assert_eq!(done.lines[0], AgentLine::Heartbeat);
    assert_eq!(done.log, "not json\n");
    assert_eq!(
        done.outcome(),
        Outcome::Success {
            summary: Some("posted".into()),
            processed: Some(2)
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_agent_bare_result_object() {
    let (url, server) = serve_once(
        200,
        "{\"status\":\"failure\",\"error_class\":\"needs_human\",\"message\":\"refund?\"}",
    );
    let done = run(&DefaultRunner, http_spec(url, Duration::from_secs(30))).await;
    server.join().unwrap();
    assert_eq!(
        done.outcome(),
        Outcome::Failure {
            class: ErrorClass::NeedsHuman,
            reason: "agent reported failure: refund?".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_500_is_retryable_and_400_non_retryable() {
    for (status, class) in [(500, ErrorClass::Retryable), (400, ErrorClass::NonRetryable)] {
        let (url, server) = serve_once(status, "oops");
        let done = run(&HttpRunner, http_spec(url, Duration::from_secs(30))).await;
        server.join().unwrap();
        assert!(matches!(done.ending, Ending::Http { status: Some(s), .. } if s == status));
        assert_eq!(done.log, "oops\n");
        let outcome = classify(None, &done.ending, ErrorClass::NeedsHuman, ErrorClass::NeedsHuman);
        assert_eq!(failure_class(&outcome), Some(class), "HTTP {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_connection_refused_is_retryable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let done = run(
        &HttpRunner,
        http_spec(format!("http://127.0.0.1:{port}/agent"), Duration::from_secs(30)),
    )
    .await;
    assert!(
        matches!(
            &done.ending,
            Ending::Http {
                status: None,
                error: Some(_)
            }
        ),
        "{:?}",
        done.ending
    );
    let outcome = classify(None, &done.ending, ErrorClass::NeedsHuman, ErrorClass::NeedsHuman);
    assert_eq!(failure_class(&outcome), Some(ErrorClass::Retryable));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_agent_that_never_answers_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/agent", listener.local_addr().unwrap());
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let _ = hold.recv(); // keep the connection open, silent, until the test ends
        drop(stream);
    });
    let done = run(&HttpRunner, http_spec(url, Duration::from_millis(300))).await;
    assert_eq!(done.ending, Ending::TimedOut);
    drop(release);
    server.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_runner_dispatches_on_kind() {
    let done = run(
        &DefaultRunner,
        sh_spec("exit_code.sh", &["77"], Duration::from_secs(60)),
    )
    .await;
    assert_eq!(failure_class(&done.outcome()), Some(ErrorClass::NeedsHuman));
    // Mismatched runner and kind is a spawn failure, not a panic.
    let done = run(
        &HttpRunner,
        sh_spec("exit_code.sh", &["0"], Duration::from_secs(60)),
    )
    .await;
    assert!(matches!(done.ending, Ending::SpawnFailed(_)));
    let done = run(
        &ProcessRunner,
        http_spec("http://127.0.0.1:9/".into(), Duration::from_secs(1)),
    )
    .await;
    assert!(matches!(done.ending, Ending::SpawnFailed(_)));
}
