//! The typed trace reads every event an agentcron before it wrote.
//!
//! `tests/fixtures/events-before-typed-trace.json` holds one event of every
//! (kind, field set) found in databases made by the last build with untyped
//! events: the 13 shipped rehearsals, a headless scheduler with a failing
//! agent, and the operator verbs (trigger, event post, maintenance, kill,
//! pause, resume, backfill, requeue), dumped with `agentcron events --json`.
//! A few shapes those runs did not produce are written out below from that
//! build's code.

use agentcron::core::event::Event;
use agentcron::store::{EventFilter, NewEvent, Store};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

fn old_events() -> Vec<(String, Value)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/events-before-typed-trace.json"
    );
    let rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out: Vec<(String, Value)> = rows
        .into_iter()
        .map(|r| (r["kind"].as_str().unwrap().to_string(), r["detail"].clone()))
        .collect();
    let w = json!({"window_key": "2026-06-06", "start": "2026-06-06T01:00:00.000Z",
                   "end": "2026-06-06T02:00:00.000Z", "due": "2026-06-06T01:00:00.000Z"});
    let with = |extra: Value| {
        let mut d = w.clone();
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    out.extend([
        (
            "expired".into(),
            with(json!({"note": null, "pool": "backfill", "reason": "catchup", "why": "expired: older than the catch-up window (72h)"})),
        ),
        (
            "window_opened".into(),
            with(json!({"event": "deploy", "event_id": "d1", "pool": "on_time", "reason": "scheduled"})),
        ),
        (
            "window_opened".into(),
            with(json!({"pool": "on_time", "reason": "scheduled", "anchor": "last_start"})),
        ),
        ("expired".into(), json!({"reason": "catch-up window of 2026-06-06 ended at 2026-06-09 09:00"})),
        ("missed".into(), json!({"reason": "window closed", "window_end": "2026-06-06T02:00:00.000Z"})),
        (
            "catchup_queued".into(),
            json!({"window_key": "2026-06-06", "pool": "backfill", "expires": "2026-06-09T01:00:00.000Z"}),
        ),
        ("heartbeat".into(), json!({"attempt": 1})),
        (
            "agent_output".into(),
            json!({"malformed": "{oops", "error": "expected value", "attempt": 1}),
        ),
        (
            "step".into(),
            json!({"name": "deliver", "status": "done", "attempt": 2, "side_effect": true, "verified": true}),
        ),
        (
            "retry_scheduled".into(),
            json!({"not_before": "2026-06-06T01:00:00.000Z", "after": "verify", "attempt": 1, "next_attempt": 2}),
        ),
        ("stale_result".into(), json!({"token": 4, "attempt": 1})),
        (
            "stale_result".into(),
            json!({"token": 4, "ending": "Cancelled", "note": "late result of an attempt that is no longer current; ignored"}),
        ),
        (
            "failed".into(),
            json!({"class": "needs_human", "reason": "approval_ttl: no approval within 1h", "final": true}),
        ),
        (
            "circuit_opened".into(),
            json!({"consecutive_failures": 3, "probe_after": "2026-06-06T01:30:00.000Z", "after": "run 7 rejected"}),
        ),
        ("circuit_closed".into(), json!({"by": "ops", "reason": "upstream fixed"})),
        (
            "alert_failed".into(),
            json!({"error": "POST http://x → 500", "alert": {"what": "failed", "message": "m", "owner": null,
                   "at": "2026-06-06T01:00:00.000Z", "tenant": "default", "schedule": "s", "run": 3}}),
        ),
    ]);
    out
}

fn at() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-06-06T01:00:00Z")
        .unwrap()
        .to_utc()
}

/// Removes nulls (the typed trace omits absent optional fields) and applies the
/// one documented rename: a settled window's `why` is its `reason`, and the
/// run's reason is `run_reason`.
fn normalised(kind: &str, detail: &Value) -> Value {
    let mut d = detail.clone();
    if let Value::Object(map) = &mut d {
        if matches!(kind, "skipped" | "expired")
            && let Some(why) = map.remove("why")
        {
            if let Some(r) = map.remove("reason") {
                map.insert("run_reason".into(), r);
            }
            map.insert("reason".into(), why);
        }
        map.retain(|_, v| !v.is_null());
    }
    d
}

#[test]
fn every_old_event_reads_typed_and_keeps_its_values() {
    let events = old_events();
    assert!(
        events.len() >= 45,
        "fixture holds the old shapes: {}",
        events.len()
    );
    for (kind, detail) in &events {
        let typed = Event::from_row(kind, detail);
        assert!(
            !matches!(typed, Event::Other { .. }),
            "{kind} {detail} did not read as a typed event"
        );
        assert_eq!(typed.kind(), kind);
        let (k2, d2) = typed.to_row();
        assert_eq!(&k2, kind);
        // Written again, the same values come out (old decisions' gate fields
        // are read under their new names, so compare those through the type).
        if kind != "decision" {
            let mut want = normalised(kind, detail);
            let mut got = d2.clone();
            if let (Value::Object(w), Value::Object(g)) = (&mut want, &mut got) {
                g.retain(|_, v| !v.is_null());
                w.retain(|_, v| !v.is_null());
            }
            assert_eq!(got, want, "{kind}: values changed in the round trip");
        }
        assert_eq!(Event::from_row(&k2, &d2), typed, "{kind}: stable");
    }
}

#[test]
fn old_rows_in_a_store_read_back_typed() {
    let store = Store::open_in_memory().unwrap();
    let events = old_events();
    store
        .write(|tx| {
            for (kind, detail) in &events {
                tx.append_event(&NewEvent::new(at(), kind, detail.clone()))?;
            }
            Ok(())
        })
        .unwrap();
    let rows = store.read(|tx| tx.events(&EventFilter::default())).unwrap();
    assert_eq!(rows.len(), events.len());
    for row in rows {
        assert!(
            !matches!(row.event(), Event::Other { .. }),
            "{} {}",
            row.kind,
            row.detail
        );
    }
}
