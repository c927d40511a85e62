//! The http gate against a tiny HTTP server started in the test on 127.0.0.1:0.

#[path = "fixtures/gates/support.rs"]
#[allow(dead_code)]
mod support;

use agentcron::config::model::{CompareOp, Expect, GateKind, OnFail};
use agentcron::gates::{self, GateResult, GateVerdict};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;
use support::*;

/// Serves fixed answers by path until the test process ends.
fn server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || answer(stream));
        }
    });
    format!("http://{addr}")
}

fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (status, body) = match path.as_str() {
        "/ready" => ("200 OK", r#"{"status":"ready","partitions":{"count":3}}"#),
        "/starting" => ("200 OK", r#"{"status":"starting","partitions":{"count":0}}"#),
        "/down" => ("503 Service Unavailable", "maintenance"),
        "/text" => ("200 OK", "ok"),
        "/hang" => {
            // Never answer; hold the connection until the client gives up.
            let _ = reader.read(&mut [0u8; 1]);
            return;
        }
        _ => ("404 Not Found", ""),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn get(
    env: &Env,
    url: String,
    status: u16,
    json_pointer: Option<&str>,
    expect: Option<Expect>,
) -> GateResult {
    let kind = GateKind::Http {
        url,
        status,
        json_pointer: json_pointer.map(str::to_string),
        expect,
        headers: Default::default(),
    };
    let gate = gates::build(&gate("api", kind));
    gates::evaluate(gate.as_ref(), OnFail::Fail, &env.ctx())
}

#[test]
fn status_200_passes_and_503_waits() {
    let base = server();
    let env = Env::new();
    let r = get(&env, format!("{base}/ready"), 200, None, None);
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    assert_eq!(r.reason, format!("GET {base}/ready → 200"));

    let r = get(&env, format!("{base}/down"), 200, None, None);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, format!("GET {base}/down → 503 (expected 200)"));

    // An endpoint configured to answer something else than 200.
    let r = get(&env, format!("{base}/down"), 503, None, None);
    assert_eq!(r.verdict, GateVerdict::Pass);
}

#[test]
fn json_pointer_and_expect_decide_on_the_body() {
    let base = server();
    let env = Env::new();
    let ready = Some(text(CompareOp::Eq, "ready"));
    let r = get(&env, format!("{base}/ready"), 200, Some("/status"), ready.clone());
    assert_eq!(r.verdict, GateVerdict::Pass, "{}", r.reason);
    assert_eq!(r.reason, "/status = 'ready' (expected == 'ready')");

    let r = get(&env, format!("{base}/starting"), 200, Some("/status"), ready);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "/status = 'starting' (expected == 'ready')");

    let r = get(
        &env,
        format!("{base}/starting"),
        200,
        Some("/partitions/count"),
        Some(num(CompareOp::Gt, 0.0)),
    );
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, "/partitions/count = 0 (expected > 0)");

    let r = get(&env, format!("{base}/ready"), 200, Some("/missing"), None);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.ends_with("no /missing in the body"), "{}", r.reason);

    let r = get(&env, format!("{base}/text"), 200, Some("/status"), None);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("body is not JSON"), "{}", r.reason);

    let r = get(
        &env,
        format!("{base}/ready"),
        200,
        Some("/status"),
        Some(num(CompareOp::Gt, 0.0)),
    );
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(r.reason.contains("type mismatch"), "{}", r.reason);
}

#[test]
fn connection_errors_and_timeouts_wait_never_fail() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::new();
    let r = get(&env, format!("http://127.0.0.1:{port}/ready"), 200, None, None);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert!(
        r.reason
            .starts_with(&format!("GET http://127.0.0.1:{port}/ready: ")),
        "{}",
        r.reason
    );

    let base = server();
    let mut env = Env::new();
    env.timeout = Duration::from_millis(300);
    let r = get(&env, format!("{base}/hang"), 200, None, None);
    assert_eq!(r.verdict, GateVerdict::Wait);
    assert_eq!(r.reason, format!("GET {base}/hang: timed out after 300ms"));
}
