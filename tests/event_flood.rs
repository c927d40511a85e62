//! A flood of posted events (issue 44, items 2 and 3): every event posted
//! becomes exactly one run, however many arrive in one millisecond and
//! without an id, and a queue of them writes a trace bounded per run, not
//! one that grows with the queue.

mod support;

use agentcron::operator;
use agentcron::rehearsal::sim::{SimAgent, SimAttempt};
use agentcron::store::types::*;
use chrono::TimeDelta;
use serde_json::json;
use std::collections::HashSet;
use support::*;

/// One `on_event = "go"` schedule with `extra` settings; its agent takes a
/// second (of virtual time) and succeeds.
fn go_schedule(extra: &str) -> (tempfile::TempDir, agentcron::rehearsal::driver::Driver) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            r#"{BASE}
[[schedule]]
id = "go"
agent = "sim"
on_event = "go"
check_every = "1h"
close_after = "2h"
{extra}
"#
        ),
    );
    // No steps: the trace of a run is then its window, holds, decisions,
    // claim, start and end.
    let agent = SimAgent {
        steps: vec![],
        attempts: vec![SimAttempt {
            latency: TimeDelta::seconds(1),
            ..Default::default()
        }],
        phases: vec![],
    };
    let d = driver(&dir, cfg, "2026-06-01T00:00:00Z", vec![("go", agent)], vec![]);
    (dir, d)
}

/// Every run of `go` succeeded with one attempt, and none wrote more than
/// `max` trace rows.
fn all_succeeded_with_bounded_traces(store: &agentcron::store::Store, n: usize, max: usize) {
    let runs = runs(store, "go");
    assert_eq!(runs.len(), n, "one run per event");
    for r in &runs {
        assert_eq!(
            (r.state, r.attempts),
            (RunState::Succeeded, 1),
            "{}: {:?}",
            r.window_key,
            r.state_reason
        );
        let kinds = kinds(store, r.id);
        assert!(
            kinds.len() <= max,
            "{}: {} trace rows: {kinds:?}",
            r.window_key,
            kinds.len()
        );
    }
}

/// Item 2: the id generated for an event posted without one was the
/// millisecond plus the pid, so every other event of the same millisecond
/// in one process was "already posted" and dropped.
#[test]
fn events_posted_without_an_id_in_one_millisecond_each_become_a_run() {
    let (_dir, mut d) = go_schedule("overlap = \"allow\"\nmax_concurrency = 4");
    d.settle().unwrap();
    let store = d.store().unwrap();
    let now = d.now();
    let mut ids = HashSet::new();
    for _ in 0..200 {
        let (id, new) = operator::post_event(&store, "go", None, &json!({}), now).unwrap();
        assert!(new, "event {id} was taken for a duplicate");
        assert!(ids.insert(id.clone()), "id {id} generated twice");
    }
    d.run_until(now + TimeDelta::minutes(5)).unwrap();
    all_succeeded_with_bounded_traces(&store, 200, 10);
    let keys: HashSet<String> = runs(&store, "go").into_iter().map(|r| r.window_key).collect();
    assert_eq!(keys, ids, "each run's window key is its event's id");
}

/// Item 3: runs queued behind one another (a posted event waits its turn
/// behind the running one, by overlap or by the schedule's quota). Each end
/// woke every waiting run, and each of them recorded its hold again because
/// its reason named the window now running: N runs wrote O(N²) rows. A hold
/// is recorded once per run and kind, and an end wakes the head of the queue.
#[test]
fn a_queue_of_posted_events_writes_a_bounded_trace_per_run() {
    const N: usize = 300;
    for extra in [
        "max_concurrency = 1",
        "overlap = \"buffer_all\"",
        "overlap = \"allow\"\nmax_concurrency = 1",
    ] {
        let (_dir, mut d) = go_schedule(extra);
        d.settle().unwrap();
        let store = d.store().unwrap();
        let t0 = d.now();
        for i in 0..N {
            operator::post_event(&store, "go", Some(&format!("e{i:04}")), &json!({}), t0).unwrap();
        }
        d.settle().unwrap();
        let held: Vec<Run> = runs(&store, "go")
            .into_iter()
            .filter(|r| r.state == RunState::Pending)
            .collect();
        assert_eq!(held.len(), N - 1, "{extra}: one runs, the others wait their turn");
        let first_check = held[0].next_check_at;
        // The first run ends and the next goes: the rest of the queue is not
        // decided again (its next check is where its first decision put it).
        d.run_until(t0 + TimeDelta::seconds(1)).unwrap();
        let waiting: Vec<Run> = runs(&store, "go")
            .into_iter()
            .filter(|r| r.state == RunState::Pending)
            .collect();
        assert_eq!(waiting.len(), N - 2, "{extra}");
        for r in &waiting {
            assert_eq!(
                r.next_check_at, first_check,
                "{extra}: {} was decided again when a slot it could not take freed",
                r.window_key
            );
        }
        d.run_until(t0 + TimeDelta::minutes(30)).unwrap();
        all_succeeded_with_bounded_traces(&store, N, 10);
        // Explain still says why a run waited: its one hold event, with the
        // window it waited behind.
        let last = run_by_key(&store, "go", &format!("e{:04}", N - 1));
        let held = events(&store, last.id)
            .into_iter()
            .filter(|e| e.kind == "switch_held")
            .collect::<Vec<_>>();
        assert_eq!(held.len(), 1, "{extra}: {held:?}");
        let why = held[0].detail["reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("e0000") || why.contains("1/1 running"),
            "{extra}: {why}"
        );
    }
}
