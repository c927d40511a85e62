//! The scheduler registry on a virtual clock (issue 17): every scheduler keeps
//! a row, refreshed every heartbeat; alive = seen within three heartbeats; a
//! peer that goes silent is recorded `scheduler_lost` and alerted once, by
//! one observer, and a new silence after it came back is a new loss.

mod support;

use agentcron::engine::{Engine, EngineOptions, Registration};
use agentcron::rehearsal::sim::SimRunner;
use agentcron::store::Store;
use agentcron::store::types::*;
use agentcron::time::{Clock, VirtualClock};
use chrono::TimeDelta;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::*;

fn registration() -> Registration {
    Registration {
        host: "test-host".into(),
        pid: 42,
        version: "0.1.0".into(),
        config_hash: "abc".into(),
        heartbeat: TimeDelta::seconds(5),
    }
}

fn lost_events(store: &Store) -> Vec<Event> {
    store
        .read(|tx| {
            tx.events(&EventFilter {
                kinds: vec!["scheduler_lost".into()],
                ..EventFilter::default()
            })
        })
        .unwrap()
}

#[test]
fn a_silent_peer_is_lost_once_and_a_returning_one_alive_again() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!(
            "{}\n[[schedule]]\nid = \"report\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\n",
            BASE.replace(
                "[scheduler]\n",
                "[scheduler]\nalert = { kind = \"file\", path = \"alerts.jsonl\" }\n"
            )
        ),
    );
    let db = dir.path().join("shared.db");
    let clock = VirtualClock::new(t("2026-06-06T00:00:00Z"));
    let engine = |owner: &str, registered: bool| {
        let c: Arc<dyn Clock> = Arc::new(clock.clone());
        Engine::new(
            cfg.clone(),
            Arc::new(Store::open(&db).unwrap()),
            c.clone(),
            Arc::new(SimRunner::new(c, BTreeMap::new())),
            EngineOptions {
                owner: owner.into(),
                registry: registered.then(registration),
                ..EngineOptions::default()
            },
        )
    };
    let (mut a, mut b, mut c) = (engine("a", true), engine("b", true), engine("c", true));
    let store = Store::open(&db).unwrap();
    let alive = |at| {
        let rows = store.read(|tx| tx.schedulers()).unwrap();
        agentcron::core::registry::summarize(&rows, at).alive
    };
    for e in [&mut a, &mut b, &mut c] {
        e.tick().unwrap();
    }
    assert_eq!(alive(clock.now()), 3);

    // 10 s without `c`: two heartbeats missed, still alive (three are allowed).
    clock.advance(TimeDelta::seconds(10));
    a.tick().unwrap();
    b.tick().unwrap();
    assert!(lost_events(&store).is_empty());
    assert_eq!(alive(clock.now()), 3);

    // Past 15 s: both peers see it silent; one records it, one alert is sent.
    clock.advance(TimeDelta::seconds(6));
    a.tick().unwrap();
    b.tick().unwrap();
    let lost = lost_events(&store);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].detail["owner"], "c");
    assert_eq!(lost[0].detail["by"], "a");
    assert_eq!(lost[0].detail["last_seen"], "2026-06-06T00:00:00.000Z");
    let alerts = alert_lines(dir.path());
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["what"], "scheduler_lost");
    assert!(
        alerts[0]["message"].as_str().unwrap().contains("scheduler c"),
        "{alerts:?}"
    );
    assert_eq!(alive(clock.now()), 2);

    // More heartbeats of the survivors record nothing more.
    for _ in 0..3 {
        clock.advance(TimeDelta::seconds(5));
        a.tick().unwrap();
        b.tick().unwrap();
    }
    assert_eq!(lost_events(&store).len(), 1);
    assert_eq!(alert_lines(dir.path()).len(), 1);

    // It was frozen, not dead: its next heartbeat makes it alive again …
    c.tick().unwrap();
    assert_eq!(alive(clock.now()), 3);
    let row = store
        .read(|tx| tx.schedulers())
        .unwrap()
        .into_iter()
        .find(|r| r.owner == "c")
        .unwrap();
    assert_eq!((row.lost_at, row.lost_by), (None, None));
    // … and a new silence is a new loss.
    clock.advance(TimeDelta::seconds(9));
    a.tick().unwrap();
    b.tick().unwrap();
    clock.advance(TimeDelta::seconds(7));
    b.tick().unwrap();
    a.tick().unwrap();
    let lost = lost_events(&store);
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert_eq!(lost[1].detail["by"], "b");
    assert_eq!(alert_lines(dir.path()).len(), 2);
}

#[test]
fn a_scheduler_without_a_registration_writes_no_row_and_watches_no_one() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &dir,
        &format!("{BASE}\n[[schedule]]\nid = \"report\"\nagent = \"sim\"\ncron = \"0 9 * * *\"\n"),
    );
    let db = dir.path().join("shared.db");
    let clock = VirtualClock::new(t("2026-06-06T00:00:00Z"));
    let mk = |owner: &str, reg: Option<Registration>| {
        let c: Arc<dyn Clock> = Arc::new(clock.clone());
        Engine::new(
            cfg.clone(),
            Arc::new(Store::open(&db).unwrap()),
            c.clone(),
            Arc::new(SimRunner::new(c, BTreeMap::new())),
            EngineOptions {
                owner: owner.into(),
                registry: reg,
                ..EngineOptions::default()
            },
        )
    };
    let mut rehearsal = mk("rehearsal", None);
    let mut gone = mk("gone", Some(registration()));
    gone.tick().unwrap();
    rehearsal.tick().unwrap();
    clock.advance(TimeDelta::minutes(5));
    rehearsal.tick().unwrap();
    let store = Store::open(&db).unwrap();
    let owners: Vec<String> = store
        .read(|tx| tx.schedulers())
        .unwrap()
        .into_iter()
        .map(|r| r.owner)
        .collect();
    assert_eq!(owners, ["gone"]);
    assert!(
        lost_events(&store).is_empty(),
        "only a registered scheduler watches its peers"
    );
}

#[test]
fn of_two_observers_judging_one_silent_row_only_one_marks_it_lost() {
    let store = Store::open_in_memory().unwrap();
    let seen = t("2026-06-06T00:00:00Z");
    let rec = agentcron::core::registry::SchedulerRecord {
        owner: "c".into(),
        host: "h".into(),
        pid: 7,
        version: "0.1.0".into(),
        config_hash: "x".into(),
        heartbeat_ms: 5_000,
        started_at: seen,
        last_seen: seen,
        stopped_at: None,
        lost_at: None,
        lost_by: None,
    };
    store.write(|tx| tx.register_scheduler(&rec)).unwrap();
    let later = seen + TimeDelta::seconds(20);
    // Both read the row before either wrote: both think it newly lost.
    assert!(rec.newly_lost("a", later) && rec.newly_lost("b", later));
    assert!(
        store
            .write(|tx| tx.mark_scheduler_lost("c", seen, "a", later))
            .unwrap()
    );
    assert!(
        !store
            .write(|tx| tx.mark_scheduler_lost("c", seen, "b", later))
            .unwrap(),
        "the second observer loses"
    );
    // A heartbeat after the judgement (it was only slow) makes the mark miss.
    store.write(|tx| tx.scheduler_seen("c", later)).unwrap();
    assert!(
        !store
            .write(|tx| tx.mark_scheduler_lost("c", seen, "a", later))
            .unwrap(),
        "judged on an old last_seen"
    );
    let row = store.read(|tx| tx.schedulers()).unwrap().pop().unwrap();
    assert_eq!((row.lost_at, row.lost_by), (None, None));
}
