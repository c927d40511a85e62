//! Secrets never shown (issue 14): an http gate, an http agent, a webhook
//! delivery and an alert webhook whose URLs carry a password and whose
//! `headers` name secrets in the environment and in a file. The real binary
//! runs them against a server on 127.0.0.1 that checks the headers arrived;
//! then the events table, the scheduler's stderr, `show --json`,
//! `events --json` and `explain` are searched for the secrets: none is there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const URL_PASSWORD: &str = "URLPASS-99x";
const ENV_SECRET: &str = "HDR-SECRET-42x";
const FILE_SECRET: &str = "FILE-SECRET-77x";

/// What the server saw: (path, headers lower-cased "name: value").
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// Answers: /ready 503 the first time, then 200 if the bearer token came;
/// /agent a success result if the API key came (else 401); /hook 200;
/// /alert 500 (so its failure is recorded). Bounded: it stops after 200 requests.
fn server() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut ready_calls = 0;
        for stream in listener.incoming().take(200) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let mut headers = vec![];
            let mut length = 0;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                // Names lower-cased (HTTP names are case-insensitive), values as sent.
                let Some((name, value)) = h.trim().split_once(':') else {
                    continue;
                };
                let h = format!("{}: {}", name.to_ascii_lowercase(), value.trim());
                if let Some(v) = h.strip_prefix("content-length: ") {
                    length = v.parse().unwrap_or(0);
                }
                headers.push(h);
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let has = |want: &str| headers.iter().any(|h| h == want);
            let (status, reply) = match path.as_str() {
                "/ready" => {
                    ready_calls += 1;
                    if ready_calls > 1 && has(&format!("authorization: Bearer {ENV_SECRET}")) {
                        (200, "{}".to_string())
                    } else {
                        (503, "{}".to_string())
                    }
                }
                "/agent" if has(&format!("x-api-key: {FILE_SECRET}")) => (
                    200,
                    r#"{"event":"result","status":"success","summary":"ok"}"#.to_string(),
                ),
                "/agent" => (401, "{}".to_string()),
                "/hook" => (200, "{}".to_string()),
                _ => (500, "{}".to_string()),
            };
            log.lock().unwrap().push((path, headers));
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (base, seen)
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cli(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(args)
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn url_passwords_and_header_secrets_appear_nowhere() {
    let (base, seen) = server();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("api-key"), format!("{FILE_SECRET}\n")).unwrap();
    std::fs::write(
        d.join("agentcron.toml"),
        format!(
            r#"
[scheduler]
database = "test.db"
alert = {{ kind = "webhook", url = "http://ops:{URL_PASSWORD}@{base}/alert", headers = {{ Authorization = "Bearer ${{ENV:TEST_TOKEN}}" }} }}

[agents.remote]
kind = "http"
url = "http://agent:{URL_PASSWORD}@{base}/agent"
timeout = "10s"
headers = {{ X-Api-Key = "${{FILE:api-key}}" }}

[agents.failing]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; exit 65"]

[[schedule]]
id = "guarded"
agent = "remote"
on_event = "go"
check_every = "1s"
close_after = "10m"

[[schedule.gate]]
kind = "http"
name = "upstream"
url = "http://reader:{URL_PASSWORD}@{base}/ready"
headers = {{ Authorization = "Bearer ${{ENV:TEST_TOKEN}}" }}

[[schedule.delivery]]
kind = "webhook"
url = "http://pub:{URL_PASSWORD}@{base}/hook"
headers = {{ Authorization = "Token ${{ENV:TEST_TOKEN}}" }}

[[schedule]]
id = "broken"
agent = "failing"
on_event = "go"
close_after = "10m"
"#
        ),
    )
    .unwrap();
    let stderr = d.join("stderr.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["run", "--headless", "--config"])
        .arg(d.join("agentcron.toml"))
        .env("RUST_LOG", "info")
        .env("TEST_TOKEN", ENV_SECRET)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    wait_for("the database", || d.join("test.db").exists().then_some(()));
    cli(d, &["event", "post", "go", "--id", "e1"]);
    let store = || agentcron::store::Store::open(&d.join("test.db")).unwrap();
    wait_for("both runs to end and the alert to fail", || {
        let s = store();
        let done = ["guarded", "broken"].iter().all(|sched| {
            s.read(|tx| tx.find_run("default", sched, "e1"))
                .unwrap()
                .is_some_and(|r| r.state.is_terminal())
        });
        let alert_failed = s
            .read(|tx| {
                tx.events(&agentcron::store::types::EventFilter {
                    kinds: vec!["alert_failed".into()],
                    ..Default::default()
                })
            })
            .unwrap();
        (done && !alert_failed.is_empty()).then_some(())
    });
    // SAFETY: kill(2) on our child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();

    // The secrets were sent where they belong…
    let seen = seen.lock().unwrap().clone();
    let sent = |path: &str, header: &str| {
        seen.iter()
            .any(|(p, hs)| p == path && hs.iter().any(|h| h == header))
    };
    assert!(
        sent("/ready", &format!("authorization: Bearer {ENV_SECRET}")),
        "{seen:?}"
    );
    assert!(sent("/agent", &format!("x-api-key: {FILE_SECRET}")), "{seen:?}");
    assert!(
        sent("/hook", &format!("authorization: Token {ENV_SECRET}")),
        "{seen:?}"
    );
    assert!(
        sent("/alert", &format!("authorization: Bearer {ENV_SECRET}")),
        "{seen:?}"
    );
    let s = store();
    let guarded = s
        .read(|tx| tx.find_run("default", "guarded", "e1"))
        .unwrap()
        .unwrap();
    assert_eq!(
        guarded.state,
        agentcron::store::types::RunState::Succeeded,
        "{guarded:?}"
    );

    // …and are shown nowhere.
    let conn = rusqlite::Connection::open(d.join("test.db")).unwrap();
    let mut everything = String::new();
    for (table, cols) in [
        ("events", "kind || ' ' || detail"),
        ("runs", "COALESCE(state_reason, '') || COALESCE(last_error, '')"),
        (
            "attempts",
            "COALESCE(message, '') || COALESCE(log_head, '') || COALESCE(log_tail, '') || COALESCE(envelope, '')",
        ),
    ] {
        let mut stmt = conn.prepare(&format!("SELECT {cols} FROM {table}")).unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        for row in rows {
            everything.push_str(&row.unwrap());
            everything.push('\n');
        }
    }
    let shown = [
        ("the database", everything),
        ("stderr", std::fs::read_to_string(&stderr).unwrap()),
        (
            "show --json",
            cli(d, &["show", &guarded.id.to_string(), "--json"]),
        ),
        ("events --json", cli(d, &["events", "--json"])),
        ("events", cli(d, &["events"])),
        ("explain", cli(d, &["explain", "guarded", "--window", "e1"])),
    ];
    for (what, text) in &shown {
        for secret in [URL_PASSWORD, ENV_SECRET, FILE_SECRET] {
            assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
        }
    }
    // The URLs are still named, without their userinfo.
    assert!(shown[0].1.contains("http://***@"), "{}", shown[0].1);
}

#[test]
fn a_header_value_that_names_no_known_secret_source_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        r#"
[agents.remote]
kind = "http"
url = "http://127.0.0.1:9/agent"
headers = { Authorization = "Bearer ${VAULT:token}" }

[[schedule]]
id = "s"
agent = "remote"
on_event = "go"
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["check", "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("headers.Authorization") && said.contains("${ENV:NAME}"),
        "{said}"
    );
}

// Issue 44 item 4 (and item 11's `?token=`): secrets never leak through
// config versions — neither in what the ledger stores nor in any rendering of
// a version, a diff or a trace — while a changed secret is still a new
// version, a reload and a rollback still run the right secrets.

#[path = "store_support.rs"]
mod store_support;

const GATE_PW: &str = "s3cretPW";
const GATE_TOKEN: &str = "tok3n";
const ENV_VALUE: &str = "envs3cret";
const HEADER_VALUE: &str = "hdrS3cretVal";
const ALERT_KEY: &str = "alertk3yQ";
/// The second version's secrets (a reload changes them).
const GATE_PW2: &str = "s3cretPW2nd";
const GATE_TOKEN2: &str = "tok3n2nd";
const ENV_VALUE2: &str = "envs3cret2nd";

const ALL_SECRETS: &[&str] = &[
    GATE_PW,
    GATE_TOKEN,
    ENV_VALUE,
    HEADER_VALUE,
    ALERT_KEY,
    GATE_PW2,
    GATE_TOKEN2,
    ENV_VALUE2,
];

const READ_TOKEN: &str = "read-token-for-secret-tests-01";

/// Answers 200 to everything and records the request lines.
fn open_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(500) {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
            }
            log.lock().unwrap().push(line.trim().to_string());
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            );
        }
    });
    (base, seen)
}

/// The config: `gate` is the http gate's `user:password@host:port` and
/// token; the agent appends the `API_KEY` it was given to `seen`.
fn secret_config(gate: &str, token: &str, env: &str, seen: &Path, listen: u16) -> String {
    format!(
        r#"
[scheduler]
database = "test.db"
listen = "127.0.0.1:{listen}"
alert = {{ kind = "webhook", url = "http://127.0.0.1:9/alert?key={ALERT_KEY}&channel=ops", headers = {{ X-Alert-Auth = "{HEADER_VALUE}" }} }}

[api]
tokens_file = "tokens.toml"

[agents.worker]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; printf '%s\n' \"$API_KEY\" >> '{seen}'; echo '{{\"event\":\"result\",\"status\":\"success\",\"summary\":\"ok\"}}'"]
timeout = "30s"
env = {{ API_KEY = "{env}" }}

[agents.failing]
kind = "command"
command = ["sh", "-c", "cat >/dev/null; exit 65"]

[[schedule]]
id = "guarded"
agent = "worker"
on_event = "go"
check_every = "1s"
close_after = "10m"

[[schedule.gate]]
kind = "http"
name = "upstream"
url = "http://user:{gate}/x?token={token}"
headers = {{ X-Api-Key = "{HEADER_VALUE}" }}

[[schedule]]
id = "plain"
agent = "worker"
on_event = "go"
close_after = "10m"

[[schedule]]
id = "broken"
agent = "failing"
on_event = "go"
close_after = "10m"
"#,
        seen = seen.display()
    )
}

/// `agentcron ARGS --config …`: (exit code, stdout + stderr).
fn cli_any(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(args)
        .arg("--config")
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn api_get(port: u16, path: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let mut resp = agent
        .get(&format!("http://127.0.0.1:{port}{path}"))
        .header("Authorization", &format!("Bearer {READ_TOKEN}"))
        .call()
        .unwrap();
    let status = resp.status().as_u16();
    let body = resp.body_mut().read_to_string().unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

fn run_of(d: &Path, schedule: &str, window: &str) -> Option<agentcron::store::types::Run> {
    let s = agentcron::store::Store::open_read_only(&d.join("test.db")).ok()?;
    s.read(|tx| tx.find_run("default", schedule, window)).ok()?
}

fn succeeded(d: &Path, schedule: &str, window: &str) -> Option<()> {
    run_of(d, schedule, window)
        .is_some_and(|r| r.state == agentcron::store::types::RunState::Succeeded)
        .then_some(())
}

/// Every secret absent from `text`.
fn assert_no_secret(what: &str, text: &str) {
    for secret in ALL_SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}:\n{text}");
    }
}

#[test]
fn secrets_never_leak_through_config_versions_and_still_run() {
    let (base, requests) = open_server();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let seen = d.join("seen-api-keys.txt");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        d.join("tokens.toml"),
        format!("[[token]]\nname = \"grafana\"\nrole = \"read\"\ntoken = \"{READ_TOKEN}\"\n"),
    )
    .unwrap();
    // v1: the gate asks a port nobody answers (it waits, its reason names the URL).
    let v1 = secret_config(
        &format!("{GATE_PW}@127.0.0.1:9"),
        GATE_TOKEN,
        ENV_VALUE,
        &seen,
        port,
    );
    std::fs::write(d.join("agentcron.toml"), &v1).unwrap();
    let log = d.join("scheduler.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["run", "--headless", "--config"])
        .arg(d.join("agentcron.toml"))
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for("the database", || d.join("test.db").exists().then_some(()));
    cli(d, &["event", "post", "go", "--id", "e1"]);
    wait_for(
        "plain e1 to succeed, broken e1 to fail and its alert to fail",
        || {
            succeeded(d, "plain", "e1")?;
            run_of(d, "broken", "e1").filter(|r| r.state.is_terminal())?;
            run_of(d, "guarded", "e1")?
                .state_reason
                .filter(|r| r.contains("upstream"))?;
            cli(d, &["events", "--json"])
                .contains("alert_failed")
                .then_some(())
        },
    );

    // v2 changes secrets only (and where the gate asks): every change is a
    // schedule change, shown masked.
    let v2 = secret_config(
        &format!("{GATE_PW2}@{base}"),
        GATE_TOKEN2,
        ENV_VALUE2,
        &seen,
        port,
    );
    std::fs::write(d.join("agentcron.toml"), &v2).unwrap();
    let (code, plan) = cli_any(d, &["plan"]);
    assert_eq!(code, Some(3), "{plan}");
    assert!(
        plan.contains("agent.env.API_KEY"),
        "a changed secret is a change:\n{plan}"
    );
    assert!(plan.contains("gate.0.url"), "{plan}");
    let (_, plan_json) = cli_any(d, &["plan", "--json"]);
    cli(d, &["reload"]);
    wait_for("guarded e1 to run under v2", || succeeded(d, "guarded", "e1"));
    // The reloaded version ran with the file's secrets, not their fingerprints.
    assert!(
        requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains(&format!("/x?token={GATE_TOKEN2}"))),
        "{:?}",
        requests.lock().unwrap()
    );
    let given = || std::fs::read_to_string(&seen).unwrap_or_default();
    assert_eq!(given().lines().collect::<Vec<_>>(), [ENV_VALUE, ENV_VALUE2]);

    let guarded = run_of(d, "guarded", "e1").unwrap();
    let id = guarded.id.to_string();
    let (_, explain) = cli_any(d, &["explain", "guarded", "--window", "e1"]);
    assert!(
        explain.contains("opened under v1")
            && explain.contains("under v2")
            && explain.contains("agent.env.API_KEY"),
        "the versions are explained, their secrets masked:\n{explain}"
    );
    let mut shown = vec![
        ("plan", plan),
        ("plan --json", plan_json),
        ("explain", explain),
        (
            "explain --json",
            cli(d, &["explain", "guarded", "--window", "e1", "--json"]),
        ),
        ("show", cli(d, &["show", &id])),
        ("show --json", cli(d, &["show", &id, "--json"])),
        ("events", cli(d, &["events"])),
        ("events --json", cli(d, &["events", "--json"])),
        ("runs --json", cli(d, &["runs", "--json"])),
        ("status", cli(d, &["status"])),
        ("status --json", cli(d, &["status", "--json"])),
        (
            "GET /api/v1/runs/{id}",
            api_get(port, &format!("/api/v1/runs/{id}")),
        ),
        (
            "GET /api/v1/explain",
            api_get(port, "/api/v1/explain/guarded?window=e1"),
        ),
        ("GET /api/v1/runs", api_get(port, "/api/v1/runs")),
        (
            "GET /api/v1/schedules/guarded",
            api_get(port, "/api/v1/schedules/guarded"),
        ),
        ("GET /api/v1/status", api_get(port, "/api/v1/status")),
    ];
    for (what, text) in &shown {
        assert_no_secret(what, text);
    }
    // A rollback runs exactly the old version's secrets, or nothing: the
    // file holds v2's, so v1 is refused…
    let (code, refused) = cli_any(d, &["rollback", "1", "--reason", "try"]);
    assert_eq!(code, Some(1), "{refused}");
    assert!(refused.contains("agents.worker.env.API_KEY"), "{refused}");
    shown.push(("rollback refused", refused));
    // …and with v1's secrets back in the file it runs them.
    std::fs::write(d.join("agentcron.toml"), &v1).unwrap();
    let (code, rolled) = cli_any(d, &["rollback", "1", "--reason", "v2 broke it"]);
    assert_eq!(code, Some(0), "{rolled}");
    wait_for("the scheduler to run v3", || {
        let status: serde_json::Value = serde_json::from_str(&cli(d, &["status", "--json"])).ok()?;
        let c = &status["config"];
        (c["version"] == 3 && c["schedulers_on_older"].as_array().is_some_and(Vec::is_empty)).then_some(())
    });
    cli(d, &["event", "post", "go", "--id", "e3"]);
    wait_for("plain e3", || succeeded(d, "plain", "e3"));
    assert_eq!(given().lines().last(), Some(ENV_VALUE));

    let ledger = |shown: &mut Vec<(&str, String)>, when: &'static str| {
        for file in ["test.db", "test.db-wal"] {
            if let Ok(bytes) = std::fs::read(d.join(file)) {
                shown.push((when, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    };
    ledger(&mut shown, "the ledger's bytes (running)");
    // SAFETY: kill(2) on our child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
    ledger(&mut shown, "the ledger's bytes (stopped)");
    shown.push(("the scheduler's log", std::fs::read_to_string(&log).unwrap()));
    for (what, text) in &shown {
        assert_no_secret(what, text);
    }
    // The ledger still says where the gate asked, without the secrets.
    let ledger: String = shown
        .iter()
        .filter(|(w, _)| w.starts_with("the ledger"))
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(
        ledger.contains("@127.0.0.1:9/x?token=***"),
        "the gate's URL is still stored"
    );
}

#[test]
fn a_postgres_password_is_never_printed() {
    const PG_PASSWORD: &str = "pgS3cretPW";
    // Nobody listens on port 1: the scheduler cannot connect and says so.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentcron.toml"),
        "[[schedule]]\nid = \"s\"\nagent = \"a\"\nevery = \"1h\"\n\n[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let url = format!("postgres://u:{PG_PASSWORD}@127.0.0.1:1/x");
    let (_, said) = cli_any(dir.path(), &["run", "--headless", "--db", &url]);
    assert!(!said.contains(PG_PASSWORD), "{said}");
    // A scheduler that connects names its ledger in its first lines: with
    // a PostgreSQL server (trust authentication: any password is accepted).
    let Some(url) = store_support::pg_database_optional("a_postgres_password_is_never_printed") else {
        return;
    };
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    let user = user.split(':').next().unwrap();
    let url = format!("{scheme}://{user}:{PG_PASSWORD}@{host}");
    let log = dir.path().join("scheduler.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentcron"))
        .args(["run", "--headless", "--db", &url, "--config"])
        .arg(dir.path().join("agentcron.toml"))
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let text = wait_for("the scheduler to start", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.contains("scheduler started").then_some(text)
    });
    // SAFETY: kill(2) on our child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
    let text = format!("{text}{}", std::fs::read_to_string(&log).unwrap_or_default());
    assert!(!text.contains(PG_PASSWORD), "{text}");
    assert!(text.contains("postgres://"), "the ledger is still named:\n{text}");
}

#[test]
fn a_stored_version_runs_only_with_its_secrets() {
    use agentcron::control;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    let text = format!(
        "[agents.a]\nkind = \"command\"\ncommand = [\"true\"]\nenv = {{ API_KEY = \"{ENV_VALUE}\" }}\n\n\
         [[schedule]]\nid = \"s\"\nagent = \"a\"\nevery = \"1h\"\n"
    );
    std::fs::write(&path, &text).unwrap();
    let cfg = agentcron::config::load_str(&text, &path).unwrap();
    let store = agentcron::store::Store::open_in_memory().unwrap();
    let now = chrono::Utc::now();
    control::propose(&store, &cfg, &text, "test", now).unwrap();
    let stored = store.read(|tx| tx.current_config()).unwrap().unwrap();
    assert!(!stored.text.contains(ENV_VALUE), "{}", stored.text);
    // Without the file's secrets the version does not run (its fingerprints
    // would be sent as the secrets)…
    let err = control::load_current(&store, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("agents.a.env.API_KEY"), "{err}");
    assert!(!err.to_string().contains(ENV_VALUE), "{err}");
    // …with them it runs them.
    let secrets = agentcron::secrets::seal(&text).keyring;
    let (_, running) = control::load_current(&store, &secrets).unwrap().unwrap();
    assert_eq!(running.agents["a"].env["API_KEY"], ENV_VALUE);
    // The same file again is no new version; a changed secret is.
    let again = control::propose(&store, &cfg, &text, "test", now).unwrap();
    assert!(
        matches!(again, control::Outcome::Unchanged { version: 1 }),
        "{again:?}"
    );
    let changed_text = text.replace(ENV_VALUE, ENV_VALUE2);
    let changed = agentcron::config::load_str(&changed_text, &path).unwrap();
    match control::propose(&store, &changed, &changed_text, "test", now).unwrap() {
        control::Outcome::Applied { version: 2, changes } => {
            assert_eq!(
                changes[0].fields[0].to_string(),
                "agent.env.API_KEY \"***\" → \"***\""
            );
        }
        other => panic!("{other:?}"),
    }
}
