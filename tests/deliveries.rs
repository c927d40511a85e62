//! Deliveries as side-effect steps: a webhook with an `Idempotency-Key` derived
//! from the run's key and the step, retried after a 500 and accepted once; a
//! file delivery that landed before a crash is found and not written again.

mod support;

use agentcron::store::types::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use support::real::*;
use support::run_by_key;

/// A tiny HTTP server on 127.0.0.1 answering with `statuses` in turn (the last
/// one repeats) and recording (Idempotency-Key, body) of every request.
struct Hook {
    url: String,
    seen: Arc<Mutex<Vec<(String, u16, String)>>>,
}

fn hook(statuses: Vec<u16>) -> Hook {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<(String, u16, String)>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut key = String::new();
            let mut len = 0usize;
            let mut line = String::new();
            let _ = reader.read_line(&mut line); // request line
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let (name, value) = line.split_once(':').unwrap_or(("", ""));
                match name.to_ascii_lowercase().as_str() {
                    "idempotency-key" => key = value.trim().to_string(),
                    "content-length" => len = value.trim().parse().unwrap_or(0),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let status = *statuses.get(i).or(statuses.last()).unwrap();
            log.lock()
                .unwrap()
                .push((key, status, String::from_utf8_lossy(&body).into_owned()));
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    Hook { url, seen }
}

fn config(delivery: &str) -> String {
    format!(
        r#"
[scheduler]
timezone = "UTC"

[agents.a]
kind = "command"
command = ["sh", "-c", "cat > /dev/null; echo '{{\"event\":\"result\",\"status\":\"success\",\"summary\":\"report ready\"}}'"]
timeout = "20s"

[[schedule]]
id = "report"
agent = "a"
cron = "0 9 * * *"
close_after = "1h"
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }}

{delivery}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_500_then_200_is_accepted_exactly_once_under_one_stable_key() {
    let server = hook(vec![500, 200]);
    let mut h = Real::new(
        &config(&format!(
            "[[schedule.delivery]]\nkind = \"webhook\"\nurl = \"{}\"\n",
            server.url
        )),
        "2026-06-06T08:59:00Z",
    );
    h.run_until("2026-06-06T09:30:00Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::Succeeded, 2));
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let key = "default/report/2026-06-06:deliver";
    assert!(
        seen.iter().all(|(k, _, _)| k == key),
        "the key is stable across retries: {seen:?}"
    );
    assert_eq!(
        seen.iter().filter(|(_, s, _)| *s == 200).count(),
        1,
        "exactly one accepted delivery"
    );
    let body: serde_json::Value = serde_json::from_str(&seen[1].2).unwrap();
    assert_eq!(body["idempotency_key"], "default/report/2026-06-06");
    assert_eq!(body["summary"], "report ready");
    // The trail: the first delivery failed (retryable), the second landed.
    let failed = of_kind(&h.store, run.id, "failed");
    assert!(
        failed[0].detail["reason"].as_str().unwrap().contains("→ 500"),
        "{failed:?}"
    );
    assert_eq!(failed[0].detail["class"], "retryable");
    let steps = h.steps(run.id);
    assert!(
        steps
            .iter()
            .any(|s| s.name == "deliver" && s.status == StepStatus::Done && s.side_effect)
    );
    // Another window gets another key.
    h.run_until("2026-06-07T09:30:00Z").await;
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.last().unwrap().0, "default/report/2026-06-07:deliver");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_4xx_is_not_retried() {
    let server = hook(vec![422]);
    let mut h = Real::new(
        &config(&format!(
            "[[schedule.delivery]]\nkind = \"webhook\"\nurl = \"{}\"\n",
            server.url
        )),
        "2026-06-06T08:59:00Z",
    );
    h.run_until("2026-06-06T09:30:00Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!((run.state, run.attempts), (RunState::Failed, 1));
    assert_eq!(server.seen.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_delivery_appends_one_line_per_window_and_checks_before_redoing() {
    let mut h = Real::new(
        &config("[[schedule.delivery]]\nkind = \"file\"\npath = \"out/reports.jsonl\"\n"),
        "2026-06-06T08:59:00Z",
    );
    h.run_until("2026-06-06T09:30:00Z").await;
    let path = h.dir.path().join("out/reports.jsonl");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["delivery_key"], "default/report/2026-06-06:deliver");
    // Check-then-act: a delivery found in the file is not written again.
    let d = agentcron::config::model::DeliveryConfig {
        name: "deliver".into(),
        kind: agentcron::config::model::DeliveryKind::File { path: path.clone() },
    };
    let again = agentcron::agent::delivery::deliver(
        &d,
        &lines[0],
        h.dir.path(),
        true,
        std::time::Duration::from_secs(5),
    );
    assert_eq!(again, agentcron::agent::delivery::Delivered::AlreadyThere);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
}
