//! Alerts through the bounded dispatcher: a sink that hangs is stopped at the
//! send timeout and recorded as `alert_failed`; a full queue records the alert
//! as failed instead of blocking the caller.

use agentcron::config::model::AlertSink;
use agentcron::recovery::alert::{AlertDispatcher, dispatch, send};
use agentcron::store::Store;
use agentcron::store::types::{Event, EventFilter};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-06-06T09:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn failures(store: &Store) -> Vec<Event> {
    let filter = EventFilter {
        kinds: vec!["alert_failed".into()],
        ..EventFilter::default()
    };
    store.read(|tx| tx.events(&filter)).unwrap()
}

/// A command that ignores SIGTERM and never ends.
fn hanging() -> AlertSink {
    AlertSink::Command {
        command: vec!["sh".into(), "-c".into(), "trap '' TERM; sleep 1000".into()],
    }
}

#[test]
fn a_hanging_alert_command_no_longer_hangs_the_sender() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let alerts = AlertDispatcher::new(4, Duration::from_millis(300));
    alerts.enqueue(&store, &hanging(), json!({"what": "failed"}), dir.path(), now());
    assert!(
        alerts.drain(Duration::from_secs(60)),
        "the alert is still being sent"
    );
    let failed = failures(&store);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].detail["alert"]["what"], "failed");
    let error = failed[0].detail["error"].as_str().unwrap();
    assert_eq!(error, "sh: timed out after 300ms");
}

#[test]
fn a_full_queue_records_the_alert_as_failed_without_blocking() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let dir = tempfile::tempdir().unwrap();
    // Room for one alert (waiting or being sent): the second finds it taken.
    let alerts = AlertDispatcher::new(1, Duration::from_millis(300));
    alerts.enqueue(&store, &hanging(), json!({"what": "first"}), dir.path(), now());
    alerts.enqueue(&store, &hanging(), json!({"what": "second"}), dir.path(), now());
    let failed = failures(&store);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].detail["alert"]["what"], "second");
    let error = failed[0].detail["error"].as_str().unwrap();
    assert!(error.contains("alert queue is full"), "{error}");
    // The first is still sent (and times out) in order.
    assert!(alerts.drain(Duration::from_secs(60)));
    let failed = failures(&store);
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[1].detail["alert"]["what"], "first");
}

#[test]
fn file_sinks_are_written_before_dispatch_returns() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let sink = AlertSink::File {
        path: "out/alerts.jsonl".into(),
    };
    dispatch(&store, &sink, json!({"what": "missed"}), dir.path(), now());
    let text = std::fs::read_to_string(dir.path().join("out/alerts.jsonl")).unwrap();
    assert_eq!(text, "{\"what\":\"missed\"}\n");
    assert!(failures(&store).is_empty());
}

#[test]
fn an_alert_command_reads_the_alert_on_stdin_in_the_config_folder() {
    let dir = tempfile::tempdir().unwrap();
    let sink = AlertSink::Command {
        command: vec!["sh".into(), "-c".into(), "cat > got.json".into()],
    };
    send(&sink, &json!({"what": "expired"}), dir.path()).unwrap();
    let got = std::fs::read_to_string(dir.path().join("got.json")).unwrap();
    assert_eq!(got, "{\"what\":\"expired\"}\n");
    let failing = AlertSink::Command {
        command: vec!["sh".into(), "-c".into(), "exit 3".into()],
    };
    let err = send(&failing, &json!({}), dir.path()).unwrap_err();
    assert!(err.starts_with("sh exited with"), "{err}");
}
