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
