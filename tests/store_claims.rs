//! Claims, fencing tokens, leases and attempt bookkeeping, including real
//! contention between separate connections on one file.

#[path = "store_support.rs"]
#[macro_use]
mod support;

use agentcron::config::model::ErrorClass;
use agentcron::store::*;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use support::*;

fn second_claim_of_the_same_run_loses(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let first = claim_as(tx, &run, "a", t0());
            assert_eq!(first.attempt, 1);
            let second = tx.claim(
                run.id,
                RunState::Pending,
                "b",
                t0() + mins(1),
                RunReason::Scheduled,
                t0(),
                t0(),
            )?;
            assert_eq!(second, None);
            let now = tx.run(run.id)?;
            assert_eq!(now.lease_owner.as_deref(), Some("a"));
            assert_eq!(now.attempts, 1);
            assert_eq!(tx.attempts(run.id)?.len(), 1);
            Ok(())
        })
        .unwrap();
}

#[test]
fn four_processes_on_one_file_never_double_claim() {
    const RUNS: usize = 40;
    const WORKERS: usize = 4;
    let (_dir, path) = temp_db();
    let setup = Store::open(&path).unwrap();
    let ids: Vec<i64> = setup
        .write(|tx| {
            Ok((0..RUNS)
                .map(|i| insert(tx, "s", &format!("w{i}"), t0() + mins(i as i64)).id)
                .collect())
        })
        .unwrap();
    drop(setup);

    let barrier = Arc::new(Barrier::new(WORKERS));
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let path = path.clone();
            let ids = ids.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                // Each worker has its own connection, like a separate process.
                let store = Store::open(&path).unwrap();
                let owner = format!("worker-{w}");
                barrier.wait();
                let mut won = Vec::new();
                for id in ids {
                    let claim = store
                        .write(|tx| {
                            tx.claim(
                                id,
                                RunState::Pending,
                                &owner,
                                t0() + mins(5),
                                RunReason::Scheduled,
                                t0(),
                                t0(),
                            )
                        })
                        .unwrap();
                    if let Some(c) = claim {
                        won.push((id, c.fencing_token));
                    }
                }
                won
            })
        })
        .collect();
    let results: Vec<Vec<(i64, i64)>> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    let mut winners_per_run = std::collections::BTreeMap::new();
    let mut tokens = BTreeSet::new();
    for won in &results {
        // Within one worker, later claims got later tokens.
        assert!(won.windows(2).all(|p| p[0].1 < p[1].1), "{won:?}");
        for (id, token) in won {
            *winners_per_run.entry(*id).or_insert(0) += 1;
            assert!(tokens.insert(*token), "token {token} issued twice");
        }
    }
    assert_eq!(winners_per_run.len(), RUNS, "every run claimed");
    assert!(winners_per_run.values().all(|n| *n == 1), "{winners_per_run:?}");
    assert_eq!(tokens.len(), RUNS);

    let store = Store::open(&path).unwrap();
    store
        .read(|tx| {
            for id in &ids {
                let run = tx.run(*id)?;
                assert_eq!(run.state, RunState::Running);
                assert_eq!(run.attempts, 1);
                assert_eq!(tx.attempts(*id)?.len(), 1);
            }
            // Commit order is token order: store-wide strictly increasing.
            let claimed = tx.events(&EventFilter {
                kinds: vec!["claimed".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(claimed.len(), RUNS);
            let seq: Vec<i64> = claimed
                .iter()
                .map(|e| e.detail["token"].as_i64().unwrap())
                .collect();
            assert!(seq.windows(2).all(|p| p[0] < p[1]), "{seq:?}");
            Ok(())
        })
        .unwrap();
}

fn fencing_tokens_strictly_increase_across_runs_and_retries(store: &Store) {
    store
        .write(|tx| {
            let a = insert(tx, "s", "a", t0());
            let b = insert(tx, "s", "b", t0());
            let ca = claim(tx, &a);
            let cb = claim(tx, &b);
            assert!(cb.fencing_token > ca.fencing_token);
            let retry = Change {
                next_check_at: Some(t0() + mins(1)),
                ..Change::default()
            };
            let waiting = tx.transition(a.id, RunState::Running, RunState::RetryWait, &retry, t0(), &[])?;
            let again = claim(tx, &waiting);
            assert_eq!(again.attempt, 2);
            assert!(again.fencing_token > cb.fencing_token);
            assert_eq!(again.run.fencing_token, again.fencing_token);
            let attempts = tx.attempts(a.id)?;
            assert_eq!(attempts.len(), 2);
            assert_eq!(attempts[0].fencing_token, ca.fencing_token);
            assert_eq!(attempts[1].fencing_token, again.fencing_token);
            assert_eq!(attempts[1].n, 2);
            Ok(())
        })
        .unwrap();
}

fn claim_records_attempt_and_event_with_exact_detail(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t("2026-06-06T09:30:00Z"));
            let now = t("2026-06-06T09:31:02.123Z");
            let c = tx
                .claim(
                    run.id,
                    RunState::Pending,
                    "host-1",
                    now + mins(1),
                    RunReason::Catchup,
                    t("2026-06-06T09:30:00Z"),
                    now,
                )?
                .unwrap();
            assert_eq!(c.run.state, RunState::Running);
            assert_eq!(c.run.reason, RunReason::Catchup);
            assert_eq!(c.run.lease_owner.as_deref(), Some("host-1"));
            assert_eq!(c.run.lease_expires, Some(now + mins(1)));
            assert_eq!(c.run.next_check_at, None);
            let attempts = tx.attempts(run.id)?;
            assert_eq!(attempts.len(), 1);
            let a = &attempts[0];
            assert_eq!((a.n, a.fencing_token), (1, c.fencing_token));
            assert_eq!(a.owner, "host-1");
            assert_eq!(a.status, AttemptStatus::Running);
            assert_eq!(a.started_at, now);
            assert_eq!(a.envelope, None);
            let events = tx.events(&EventFilter {
                run_id: Some(run.id),
                kinds: vec!["claimed".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(events.len(), 1);
            assert_eq!(
                events[0].detail,
                json!({
                    "due": "2026-06-06T09:30:00.000Z",
                    "claimed": "2026-06-06T09:31:02.123Z",
                    "owner": "host-1",
                    "attempt": 1,
                    "token": c.fencing_token,
                    "lateness_ms": 62123,
                })
            );
            tx.set_attempt_envelope(run.id, 1, r#"{"run_id":1}"#)?;
            assert_eq!(
                tx.attempts(run.id)?[0].envelope.as_deref(),
                Some(r#"{"run_id":1}"#)
            );
            Ok(())
        })
        .unwrap();
}

fn stale_tokens_cannot_renew_end_or_journal(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let first = claim(tx, &run);
            let later = t0() + mins(10);
            assert!(tx.renew_lease(run.id, first.fencing_token, later)?);
            assert_eq!(tx.run(run.id)?.lease_expires, Some(later));
            assert!(!tx.renew_lease(run.id, first.fencing_token + 100, later)?);

            // The lease expires: the reaper ends the attempt as lost and retries.
            let lost = AttemptEnd {
                status: Some(AttemptStatus::Lost),
                error_class: Some(ErrorClass::Retryable),
                ..AttemptEnd::default()
            };
            assert!(tx.end_attempt(run.id, first.fencing_token, &lost, later)?);
            let waiting = tx.transition(
                run.id,
                RunState::Running,
                RunState::RetryWait,
                &Change::default(),
                later,
                &[],
            )?;
            // The zombie's heartbeat, step and result all bounce.
            assert!(!tx.renew_lease(run.id, first.fencing_token, later + mins(1))?);
            assert!(!tx.record_step(
                run.id,
                first.fencing_token,
                1,
                "deliver",
                StepStatus::Done,
                true,
                later
            )?);
            let late = AttemptEnd::default();
            assert!(!tx.end_attempt(run.id, first.fencing_token, &late, later)?);

            let second = claim(tx, &waiting);
            assert!(!tx.renew_lease(run.id, first.fencing_token, later)?, "old token");
            assert!(tx.renew_lease(run.id, second.fencing_token, later + mins(2))?);
            assert!(!tx.record_step(
                run.id,
                first.fencing_token,
                1,
                "deliver",
                StepStatus::Done,
                true,
                later
            )?);
            assert!(
                !tx.record_step(
                    run.id,
                    second.fencing_token,
                    1,
                    "deliver",
                    StepStatus::Done,
                    true,
                    later
                )?,
                "wrong attempt number"
            );
            assert!(tx.record_step(
                run.id,
                second.fencing_token,
                2,
                "deliver",
                StepStatus::Started,
                true,
                later
            )?);
            assert!(!tx.end_attempt(run.id, first.fencing_token, &late, later)?);
            assert!(tx.end_attempt(run.id, second.fencing_token, &late, later)?);
            assert!(
                !tx.end_attempt(run.id, second.fencing_token, &late, later)?,
                "ends once"
            );

            let attempts = tx.attempts(run.id)?;
            assert_eq!(attempts[0].status, AttemptStatus::Lost);
            assert_eq!(attempts[0].error_class, Some(ErrorClass::Retryable));
            assert_eq!(attempts[1].status, AttemptStatus::Succeeded, "inferred");
            assert_eq!(attempts[1].ended_at, Some(later));
            // end_attempt never moves the run.
            assert_eq!(tx.run(run.id)?.state, RunState::Running);
            Ok(())
        })
        .unwrap();
}

fn end_attempt_records_the_result(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let c = claim(tx, &run);
            tx.append_attempt_log(run.id, c.fencing_token, "streamed\n", 1024)?;
            let end = AttemptEnd {
                status: None,
                error_class: None,
                exit_code: Some(65),
                summary: Some("bad input".into()),
                processed: Some(3),
                message: Some("schema mismatch".into()),
                log: "final\n".into(),
            };
            assert!(tx.end_attempt(run.id, c.fencing_token, &end, t0() + mins(2))?);
            let a = &tx.attempts(run.id)?[0];
            assert_eq!(a.status, AttemptStatus::Failed, "exit 65 inferred as failed");
            assert_eq!(a.exit_code, Some(65));
            assert_eq!(a.summary.as_deref(), Some("bad input"));
            assert_eq!(a.processed, Some(3));
            assert_eq!(a.message.as_deref(), Some("schema mismatch"));
            assert_eq!(a.log, "streamed\nfinal\n");
            Ok(())
        })
        .unwrap();
}

fn usage_adds_up_per_run_and_per_schedule_day(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let c1 = claim(tx, &run);
            assert_eq!(
                tx.add_usage(run.id, c1.fencing_token, 100, 0.25)?,
                Some((100, 0.25))
            );
            assert_eq!(tx.add_usage(run.id, c1.fencing_token + 99, 1, 1.0)?, None);
            let waiting = tx.transition(
                run.id,
                RunState::Running,
                RunState::RetryWait,
                &Change::default(),
                t0(),
                &[],
            )?;
            let c2 = claim_as(tx, &waiting, "w2", t0() + mins(30));
            assert_eq!(
                tx.add_usage(run.id, c2.fencing_token, 50, 0.5)?,
                Some((150, 0.75))
            );
            // Another schedule's spend and yesterday's do not count.
            let other = insert(tx, "other", "w", t0());
            let co = claim(tx, &other);
            tx.add_usage(other.id, co.fencing_token, 1, 9.0)?;
            let day = t("2026-06-06T00:00:00Z");
            let next = t("2026-06-07T00:00:00Z");
            assert_eq!(tx.schedule_cost_between("acme", "s", day, next)?, 0.75);
            assert_eq!(
                tx.schedule_cost_between("acme", "s", day, t0() + mins(30))?,
                0.25,
                "[from, to) excludes an attempt starting at `to`"
            );
            assert_eq!(tx.schedule_cost_between("acme", "s", next, next + mins(1))?, 0.0);
            let attempts = tx.attempts(run.id)?;
            assert_eq!((attempts[0].tokens, attempts[0].cost_usd), (100, 0.25));
            assert_eq!((attempts[1].tokens, attempts[1].cost_usd), (50, 0.5));
            Ok(())
        })
        .unwrap();
}

fn attempt_log_is_bounded_keeping_head_and_tail(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let c = claim(tx, &run);
            for i in 0..100 {
                tx.append_attempt_log(run.id, c.fencing_token, &format!("line {i:03}\n"), 60)?;
            }
            let log = tx.attempts(run.id)?[0].log.clone();
            assert!(log.starts_with("line 000\nline 001\nline 002\n"), "{log}");
            assert!(log.ends_with("line 098\nline 099\n"), "{log}");
            assert!(log.contains("…[truncated 840 bytes]…"), "{log}");
            // Unknown token: ignored, nothing written anywhere.
            tx.append_attempt_log(run.id, 12345, "zombie", 60)?;
            assert!(!tx.attempts(run.id)?[0].log.contains("zombie"));
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_held_write_lock_ends_in_locked_not_a_hang() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    store.write(|tx| Ok(insert(tx, "s", "w", t0()))).unwrap();
    store
        .set_busy_timeout(std::time::Duration::from_millis(10))
        .unwrap();

    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let got = store.write(|tx| tx.append_event(&NewEvent::new(t0(), "tick", json!({}))));
    assert!(matches!(got, Err(StoreError::Locked { .. })), "{got:?}");
    // Readers are not blocked by a writer (WAL).
    assert_eq!(store.read(|tx| tx.runs(&RunFilter::default())).unwrap().len(), 1);
    other.execute_batch("COMMIT").unwrap();
    store
        .write(|tx| tx.append_event(&NewEvent::new(t0(), "tick", json!({}))))
        .unwrap();
}

/// What a window's run, attempts and events are after `write` opened and
/// claimed it in a new store of `kind` (the run's id included: both ways
/// give the same).
fn opened_and_claimed(
    kind: Kind,
    write: impl FnOnce(&Tx, &NewRun, &agentcron::core::event::Event) -> Result<()>,
) -> (Run, Vec<Attempt>, Vec<(String, String)>) {
    let (_dir, store) = open(kind);
    let mut new = new_run("s", "w", t0() + Duration::microseconds(1_234));
    new.next_check_at = None;
    store
        .write(|tx| {
            // Another run first: ids and fencing tokens are not the first ones.
            claim(tx, &insert(tx, "other", "w", t0()));
            let opened = agentcron::core::layers::time::opened_event(
                &opened_run(&new, 0, t0()),
                None,
                Default::default(),
            );
            write(tx, &new, &opened)
        })
        .expect("opened and claimed");
    store
        .read(|tx| {
            let run = tx.find_run("acme", "s", "w")?.expect("the window's run");
            let filter = EventFilter {
                run_id: Some(run.id),
                ..EventFilter::default()
            };
            let events = tx.events(&filter)?;
            let events = events
                .into_iter()
                .map(|e| {
                    (
                        e.kind.clone(),
                        format!("{} {:?} {:?} {}", e.at, e.tenant, e.schedule, e.detail),
                    )
                })
                .collect();
            Ok((tx.attempts(run.id)?, run, events))
        })
        .map(|(attempts, run, events)| (run, attempts, events))
        .expect("read back")
}

/// The plan a decided claim of `new`'s pending run is (its id unknown: 0).
fn claim_plan(new: &NewRun, now: DateTime<Utc>) -> agentcron::core::plan::Plan {
    use agentcron::core::plan::{Effect, Plan, Scope, Step, Target};
    Plan {
        target: Some(Target {
            run_id: 0,
            tenant: new.tenant.clone(),
            schedule: new.schedule.clone(),
            state: RunState::Pending,
            token: None,
        }),
        steps: vec![Step::Claim {
            owner: "me".into(),
            lease_until: now + mins(5) + Duration::microseconds(7),
            reason: RunReason::Scheduled,
            due: new.due_at,
        }],
        events: vec![(
            Scope::Run,
            agentcron::core::event::Event::Tick {
                owner: "decided".into(),
                running: 3,
            },
        )],
        effects: vec![Effect::Dispatch],
        ..Plan::default()
    }
}

/// A window opened already claimed (`Tx::open_claimed`, the engine's way for
/// a window claimed the moment it opens) writes what opening it pending and
/// then applying its claim writes: the same run row, attempt, fencing token
/// and events, field for field, sub-millisecond instants and all. A window
/// whose run exists is a conflict that writes nothing.
#[test]
fn a_window_opened_claimed_is_an_insert_and_a_claim() {
    let opened_at = t0() + Duration::microseconds(5_555);
    let now = t0() + mins(1) + Duration::microseconds(999);
    for kind in [Kind::Memory, Kind::File, Kind::Shared] {
        let two_steps = opened_and_claimed(kind, |tx, new, opened| {
            let run = tx.insert_run(new, opened_at)?.expect("new window");
            tx.append_event(&NewEvent::of(opened_at, opened.clone()).for_run(&run))?;
            let mut plan = claim_plan(new, now);
            if let Some(t) = plan.target.as_mut() {
                t.run_id = run.id;
            }
            let applied = tx.apply(&plan, now)?;
            assert!(!applied.is_conflict());
            Ok(())
        });
        let mut built = None;
        let at_once = opened_and_claimed(kind, |tx, new, opened| {
            let plan = claim_plan(new, now);
            assert!(opens_claimed(&plan));
            let applied = tx.open_claimed(new, opened.clone(), opened_at, plan.clone(), now)?;
            let Applied::Done {
                run, claim, effects, ..
            } = applied
            else {
                panic!("not written: {applied:?}");
            };
            assert_eq!(effects, plan.effects);
            let claim = claim.expect("the claim");
            assert_eq!((claim.attempt, claim.fencing_token), (1, 2));
            // The run as written is the claim's alone.
            assert_eq!(run, None);
            built = Some(Box::new(claim.run));
            // Opened again (another scheduler first): nothing is written.
            let again = tx.open_claimed(new, opened.clone(), opened_at, plan.clone(), now)?;
            assert!(again.is_conflict(), "{again:?}");
            Ok(())
        });
        assert_eq!(
            built.as_deref(),
            Some(&at_once.0),
            "{kind:?}: the built run is the stored row"
        );
        assert_eq!(two_steps.0, at_once.0, "{kind:?}: the run row");
        assert_eq!(two_steps.1, at_once.1, "{kind:?}: the attempts");
        assert_eq!(two_steps.2, at_once.2, "{kind:?}: the events");
        assert_eq!(
            at_once.2.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["window_opened", "tick", "claimed"]
        );
    }
}

/// A plan that is not one first claim is refused before anything is written.
fn open_claimed_refuses_any_other_plan(store: &Store) {
    let mut new = new_run("s", "w", t0());
    new.next_check_at = None;
    let opened =
        agentcron::core::layers::time::opened_event(&opened_run(&new, 0, t0()), None, Default::default());
    let mut plan = claim_plan(&new, t0());
    plan.steps
        .push(agentcron::core::plan::Step::Recheck { at: t0(), why: None });
    assert!(!opens_claimed(&plan));
    let refused = store.write(|tx| tx.open_claimed(&new, opened.clone(), t0(), plan.clone(), t0()));
    assert!(matches!(refused, Err(StoreError::Invariant(_))), "{refused:?}");
    let none = store.read(|tx| tx.find_run("acme", "s", "w")).expect("read");
    assert_eq!(none, None);
}

/// Opens window `key` of schedule `s` already claimed; its fencing token.
fn open_claimed_token(tx: &Tx, key: &str) -> Result<i64> {
    Ok(open_claimed_at(tx, key, t0(), false)?.fencing_token)
}

/// Opens window `key` of schedule `s` (opened at t0) already claimed at
/// `now`; with `decided` its plan records a claim decision (folded into the
/// claim's row), else a `tick` (written as its own row).
fn open_claimed_at(tx: &Tx, key: &str, now: DateTime<Utc>, decided: bool) -> Result<Run> {
    let mut new = new_run("s", key, t0());
    new.next_check_at = None;
    let opened =
        agentcron::core::layers::time::opened_event(&opened_run(&new, 0, t0()), None, Default::default());
    let mut plan = claim_plan(&new, now);
    if decided {
        plan.events = vec![(agentcron::core::plan::Scope::Run, claim_decision())];
    }
    match tx.open_claimed(&new, opened, t0(), plan, now)? {
        Applied::Done { claim: Some(c), .. } => Ok(c.run),
        other => panic!("not claimed: {other:?}"),
    }
}

/// The fencing counter's row as stored.
fn stored_counter(store: &Store) -> i64 {
    store.read(|tx| tx.fencing_counter()).expect("read the counter")
}

/// A window opened claimed takes its token from the counter this connection
/// keeps, written once at commit: a claim of a pending run in the same
/// transaction still takes a newer token (it reads the row), the stored
/// counter is the newest token after the commit, a rolled-back transaction's
/// tokens are given again, and a token another connection took is never
/// given twice.
fn fencing_tokens_of_windows_opened_claimed_never_repeat(store: &Store) {
    let (a, b, c) = store
        .write(|tx| {
            let a = open_claimed_token(tx, "a")?;
            let b = claim(tx, &insert(tx, "s", "b", t0())).fencing_token;
            let c = open_claimed_token(tx, "c")?;
            Ok((a, b, c))
        })
        .expect("three claims");
    assert!(a < b && b < c, "tokens {a} {b} {c}");
    assert_eq!(stored_counter(store), c, "the counter after the commit");
    let failed: Result<i64> = store.write(|tx| {
        let d = open_claimed_token(tx, "d")?;
        assert_eq!(d, c + 1);
        Err(StoreError::Invariant("rolled back on purpose".into()))
    });
    assert!(failed.is_err());
    assert_eq!(stored_counter(store), c, "a rolled-back claim moved nothing");
    let d = store
        .write(|tx| open_claimed_token(tx, "d"))
        .expect("claimed after the rollback");
    assert_eq!(d, c + 1, "the rolled-back token is taken again");
    assert_eq!(stored_counter(store), d);
}

/// Two connections to one file, each opening windows claimed: the counter
/// one keeps is forgotten once the other commits, so no token repeats.
#[test]
fn two_connections_opening_windows_claimed_never_share_a_token() {
    let (_dir, path) = temp_db();
    two_connections_never_share_a_token(&path);
}

/// The same on a PostgreSQL ledger.
#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn two_connections_opening_windows_claimed_never_share_a_token_on_postgresql() {
    let name = "store_claims::two_connections_opening_windows_claimed_never_share_a_token_on_postgresql";
    if let Some(url) = pg_database(name) {
        two_connections_never_share_a_token(std::path::Path::new(&url));
    }
}

/// Six windows opened claimed through two connections to `db` in turns, in
/// batches as the engine claims.
fn two_connections_never_share_a_token(db: &std::path::Path) {
    let one = Store::open(db).expect("first connection");
    let two = Store::open(db).expect("second connection");
    let mut seen = BTreeSet::new();
    for i in 0..6 {
        let store = if i % 3 == 0 { &two } else { &one };
        let key = format!("w{i}");
        let token = store
            .batch(|| store.write(|tx| open_claimed_token(tx, &key)))
            .expect("claimed");
        assert!(seen.insert(token), "token {token} given twice");
        assert_eq!(seen.last(), Some(&token), "tokens increase");
        assert_eq!(stored_counter(&one), token);
        assert_eq!(stored_counter(&two), token);
    }
}

/// A claim decision as the planner records it.
fn claim_decision() -> agentcron::core::event::Event {
    use agentcron::core::decision::Verdict;
    use agentcron::core::event::{DecisionRecord, Event};
    Event::Decision(DecisionRecord {
        time: "window 09:00 open".into(),
        switches: vec![],
        gates: vec![],
        verdict: Verdict::Claim,
        reason: "all layers clear".into(),
    })
}

/// The events of window `w`'s run as listed: (id, kind, at, detail).
fn listed(tx: &Tx, filter: EventFilter) -> Vec<(i64, String, DateTime<Utc>, serde_json::Value)> {
    tx.events(&filter)
        .expect("events")
        .into_iter()
        .map(|e| (e.id, e.kind, e.at, e.detail))
        .collect()
}

/// One event per transition: a window opened claimed writes one row for its
/// opening, its decision and its claim, listed as the three events written
/// one by one would be (kinds, instants, details, in order; newest first the
/// other way round), with the row's id; a listing of one of those kinds
/// finds it in the claim's row.
fn a_claims_row_holds_the_opening_and_the_decision(store: &Store) {
    let opened_at = t0() + Duration::milliseconds(5);
    let now = t0() + mins(1);
    let (one_by_one, folded, rows) = store
        .write(|tx| {
            // Written one by one: the opening, the decision, the claim.
            let mut new = new_run("s", "apart", t0());
            new.next_check_at = None;
            let opened = agentcron::core::layers::time::opened_event(
                &opened_run(&new, 0, t0()),
                None,
                Default::default(),
            );
            let run = tx.insert_run(&new, opened_at)?.expect("new window");
            tx.append_event(&NewEvent::of(opened_at, opened).for_run(&run))?;
            tx.append_event(&NewEvent::of(now, claim_decision()).for_run(&run))?;
            tx.claim(
                run.id,
                run.state,
                "me",
                now + mins(5),
                RunReason::Scheduled,
                run.due_at,
                now,
            )?
            .expect("claimed");
            let apart = run.id;
            // Opened claimed.
            let mut new = new_run("s", "folded", t0());
            new.next_check_at = None;
            let opened = agentcron::core::layers::time::opened_event(
                &opened_run(&new, 0, t0()),
                None,
                Default::default(),
            );
            let mut plan = claim_plan(&new, now);
            plan.events = vec![(agentcron::core::plan::Scope::Run, claim_decision())];
            let before = tx.max_event_id()?;
            let Applied::Done {
                claim: Some(claim), ..
            } = tx.open_claimed(&new, opened.clone(), opened_at, plan.clone(), now)?
            else {
                panic!("not claimed");
            };
            let run = claim.run;
            let rows = tx.max_event_id()? - before;
            let of = |id| EventFilter {
                run_id: Some(id),
                ..EventFilter::default()
            };
            Ok((listed(tx, of(apart)), listed(tx, of(run.id)), rows))
        })
        .expect("written");
    assert_eq!(rows, 1, "one row for the opening, the decision and the claim");
    let strip = |v: &[(i64, String, DateTime<Utc>, serde_json::Value)]| {
        v.iter()
            .map(|(_, k, at, d)| {
                let mut d = d.clone();
                // The window's own key differs between the two runs.
                if let Some(o) = d.as_object_mut() {
                    o.remove("window_key");
                    o.remove("token");
                }
                (k.clone(), *at, d)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&folded), strip(&one_by_one));
    assert_eq!(
        folded
            .iter()
            .map(|(_, k, at, _)| (k.as_str(), *at))
            .collect::<Vec<_>>(),
        [("window_opened", opened_at), ("decision", now), ("claimed", now)]
    );
    let id = folded[0].0;
    assert!(folded.iter().all(|(i, ..)| *i == id), "{folded:?}");
    store
        .read(|tx| {
            let run_id = tx.find_run("acme", "s", "folded")?.expect("run").id;
            let kinds = |kinds: &[&str], newest_first| EventFilter {
                run_id: Some(run_id),
                kinds: kinds.iter().map(|k| k.to_string()).collect(),
                newest_first,
                ..EventFilter::default()
            };
            let names = |v: Vec<(i64, String, DateTime<Utc>, serde_json::Value)>| {
                v.into_iter().map(|(_, k, ..)| k).collect::<Vec<_>>()
            };
            assert_eq!(names(listed(tx, kinds(&["decision"], false))), ["decision"]);
            assert_eq!(
                names(listed(tx, kinds(&["window_opened", "claimed"], false))),
                ["window_opened", "claimed"]
            );
            assert_eq!(
                names(listed(tx, kinds(&[], true))),
                ["claimed", "decision", "window_opened"]
            );
            assert_eq!(
                names(listed(tx, kinds(&["started"], false))),
                Vec::<String>::new()
            );
            Ok(())
        })
        .expect("read");
}

/// A listing with a limit counts events, pages past rows that hold none of
/// the kinds asked for, and a reader tailing by id with a limit sees every
/// event once (a row's events are not cut in two).
fn limited_listings_of_folded_rows_miss_nothing(store: &Store) {
    let now = t0() + mins(1);
    store
        .write(|tx| {
            for i in 0..5 {
                // Rows without a decision.
                for _ in 0..3 {
                    let tick = agentcron::core::event::Event::Tick {
                        owner: "me".into(),
                        running: i,
                    };
                    tx.append_event(&NewEvent::of(now, tick))?;
                }
                // A claim whose row holds no decision.
                claim(tx, &insert(tx, "s", &format!("q{i}"), t0()));
                // A pending run's claim: decision and claim in one row.
                let run = insert(tx, "s", &format!("p{i}"), t0());
                let mut plan = claim_plan(&new_run("s", &format!("p{i}"), t0()), now);
                plan.events = vec![(agentcron::core::plan::Scope::Run, claim_decision())];
                if let Some(t) = plan.target.as_mut() {
                    t.run_id = run.id;
                }
                assert!(!tx.apply(&plan, now)?.is_conflict());
            }
            Ok(())
        })
        .expect("written");
    store
        .read(|tx| {
            let decisions = tx.events(&EventFilter {
                kinds: vec!["decision".into()],
                limit: Some(4),
                ..EventFilter::default()
            })?;
            assert_eq!(decisions.len(), 4, "{decisions:?}");
            assert!(decisions.iter().all(|e| e.kind == "decision"));
            let newest = tx.events(&EventFilter {
                kinds: vec!["decision".into()],
                limit: Some(2),
                newest_first: true,
                ..EventFilter::default()
            })?;
            assert_eq!(newest.len(), 2);
            assert!(newest[0].id > newest[1].id);
            let all = tx.events(&EventFilter::default())?;
            assert_eq!(
                all.len(),
                5 * (2 + 1 + 3),
                "decision and claim, a claim, three ticks"
            );
            let mut tailed = Vec::new();
            let mut after = 0;
            loop {
                let page = tx.events(&EventFilter {
                    after_id: Some(after),
                    limit: Some(5),
                    ..EventFilter::default()
                })?;
                let Some(last) = page.last() else { break };
                after = last.id;
                assert!(page.len() <= 5);
                tailed.extend(page);
            }
            assert_eq!(tailed, all);
            Ok(())
        })
        .expect("read");
}

/// The `started` event of an attempt as dispatch writes it.
fn started(attempt: u32, token: i64) -> agentcron::core::event::Event {
    agentcron::core::event::Event::Started {
        attempt,
        token,
        reason: RunReason::Scheduled,
        agent: "noop".into(),
        verify_step: None,
        timeout_ms: 60_000,
        lateness_ms: None,
    }
}

/// A claim whose attempt starts next in the transaction is one row with its
/// start; any other event in between, a listing, a rollback and the commit
/// each leave the trace exactly as if every event had its own row.
fn a_claims_row_is_written_at_once_and_its_start_is_a_row_of_its_own(store: &Store) {
    let now = t0() + mins(1);
    let open = |tx: &Tx, key: &str| open_claimed_at(tx, key, now, true);
    let kinds = |tx: &Tx, run: &Run| -> Vec<(i64, String)> {
        tx.events(&EventFilter {
            run_id: Some(run.id),
            ..EventFilter::default()
        })
        .expect("events")
        .into_iter()
        .map(|e| (e.id, e.kind))
        .collect()
    };
    let names = |v: &[(i64, String)]| v.iter().map(|(_, k)| k.clone()).collect::<Vec<_>>();
    store
        .write(|tx| {
            let before = tx.max_event_id()?;
            // Claimed: one row (opening, decision, claim) written at once.
            let a = open(tx, "a")?;
            assert_eq!(tx.max_event_id()? - before, 1, "the claim's row");
            // Then started: a row of its own.
            tx.append_event(&NewEvent::of(now, started(1, a.fencing_token)).for_run(&a))?;
            assert_eq!(tx.max_event_id()? - before, 2, "the start's row");
            let listed = kinds(tx, &a);
            assert_eq!(
                names(&listed),
                ["window_opened", "decision", "claimed", "started"]
            );
            assert!(listed[..3].iter().all(|(id, _)| *id == listed[0].0));
            assert!(listed[3].0 > listed[0].0);
            // Claimed, another event, then started: in that order.
            let b = open(tx, "b")?;
            let tick = agentcron::core::event::Event::Tick {
                owner: "me".into(),
                running: 1,
            };
            let tick_id = tx.append_event(&NewEvent::of(now, tick))?;
            tx.append_event(&NewEvent::of(now, started(1, b.fencing_token)).for_run(&b))?;
            let listed = kinds(tx, &b);
            assert_eq!(
                names(&listed),
                ["window_opened", "decision", "claimed", "started"]
            );
            assert!(
                listed[2].0 < tick_id && tick_id < listed[3].0,
                "{listed:?} tick {tick_id}"
            );
            // Claimed, listed inside the transaction: already there.
            let c = open(tx, "c")?;
            assert_eq!(names(&kinds(tx, &c)), ["window_opened", "decision", "claimed"]);
            // Claimed, then another run's start: not in its trace.
            let d = open(tx, "d")?;
            tx.append_event(&NewEvent::of(now, started(1, 99)).for_run(&a))?;
            assert_eq!(names(&kinds(tx, &d)), ["window_opened", "decision", "claimed"]);
            // Claimed last: committed with the transaction.
            open(tx, "e")?;
            Ok(())
        })
        .expect("written");
    let rolled_back: Result<()> = store.write(|tx| {
        open(tx, "f")?;
        Err(StoreError::Invariant("rolled back on purpose".into()))
    });
    assert!(rolled_back.is_err());
    store
        .read(|tx| {
            let e = tx.find_run("acme", "s", "e")?.expect("e");
            assert_eq!(names(&kinds(tx, &e)), ["window_opened", "decision", "claimed"]);
            assert_eq!(tx.find_run("acme", "s", "f")?, None);
            let all = tx.events(&EventFilter::default())?;
            assert_eq!(all.len(), 4 + 5 + 3 + 3 + 1 + 3, "{all:?}");
            let claims = tx.events(&EventFilter {
                kinds: vec!["claimed".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(claims.len(), 5, "one claim each of a to e");
            let starts = tx.events(&EventFilter {
                kinds: vec!["started".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(starts.len(), 3);
            Ok(())
        })
        .expect("read");
}

/// What a transaction keeps unwritten until its commit (the moved fencing
/// counter) and a claim's event survive the store forgetting its kept reads
/// in the middle of it (a schedule renamed) and a `started` event whose
/// detail is not an object, and go with a transaction whose closure panics
/// (the next transaction does not write them).
fn what_a_transaction_keeps_unwritten_is_written_once_or_dropped(store: &Store) {
    let now = t0() + mins(1);
    let open = |tx: &Tx, key: &str| open_claimed_at(tx, key, now, false);
    let claimed_of = |store: &Store, run: &Run| {
        store
            .read(|tx| {
                tx.events(&EventFilter {
                    run_id: Some(run.id),
                    kinds: vec!["claimed".into()],
                    ..EventFilter::default()
                })
            })
            .expect("events")
            .len()
    };
    // A rename after the claim, in the same transaction.
    let a = store
        .write(|tx| {
            let a = open(tx, "a")?;
            tx.rename_schedule("s", "s2")?;
            Ok(a)
        })
        .expect("claimed and renamed");
    assert_eq!(claimed_of(store, &a), 1, "the claim's event is written");
    assert_eq!(stored_counter(store), a.fencing_token);
    // A start whose detail is not an object: the claim gets its own row.
    let b = store
        .write(|tx| {
            let b = open(tx, "b")?;
            tx.append_event(&NewEvent::new(now, "started", serde_json::json!(null)).for_run(&b))?;
            Ok(b)
        })
        .expect("claimed and started");
    assert!(b.fencing_token > a.fencing_token);
    assert_eq!(claimed_of(store, &b), 1, "the claim's event is written");
    // A closure that panics after a claim: nothing of it is written later.
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: Result<()> = store.write(|tx| {
            open(tx, "c")?;
            panic!("on purpose");
        });
    }));
    assert!(panicked.is_err());
    assert_eq!(stored_counter(store), b.fencing_token, "the counter did not move");
    let all = store
        .read(|tx| tx.events(&EventFilter::default()))
        .expect("events");
    assert!(
        all.iter()
            .all(|e| e.run_id == Some(a.id) || e.run_id == Some(b.id)),
        "nothing of the rolled-back claim: {all:?}"
    );
    let d = store.write(|tx| open(tx, "d")).expect("claimed after the panic");
    assert_eq!(d.fencing_token, b.fencing_token + 1);
}

/// A claim's attempt row is inserted with the claim, its envelope stored
/// into it: every statement in the transaction sees it, the commit writes
/// it, a rollback drops it, and each attempt is one row.
fn a_claims_attempt_row_is_seen_by_every_statement_and_written_once(store: &Store) {
    let now = t0() + mins(1);
    let attempts_of = |store: &Store, id: i64| store.read(|tx| tx.attempts(id)).expect("attempts");
    // Claimed, then its envelope: one row, with the envelope.
    let a = store
        .write(|tx| {
            let a = open_claimed_at(tx, "a", now, false)?;
            tx.set_attempt_envelope(a.id, 1, "{\"run\":\"a\"}")?;
            Ok(a)
        })
        .expect("claimed a");
    let got = attempts_of(store, a.id);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].envelope.as_deref(), Some("{\"run\":\"a\"}"));
    assert_eq!((got[0].n, got[0].fencing_token), (1, a.fencing_token));
    assert_eq!(got[0].status, AttemptStatus::Running);
    // Claimed, then read in the same transaction before any envelope.
    let (b, seen) = store
        .write(|tx| {
            let b = open_claimed_at(tx, "b", now, false)?;
            let seen = tx.attempts(b.id)?;
            tx.set_attempt_envelope(b.id, 1, "{}")?;
            Ok((b, seen))
        })
        .expect("claimed b");
    assert_eq!(seen.len(), 1, "the claim's own transaction sees its attempt");
    assert_eq!(seen[0].envelope, None);
    let got = attempts_of(store, b.id);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].envelope.as_deref(), Some("{}"), "stored by the update");
    // Two claims, then the first one's envelope: both rows, each once.
    let (c, d) = store
        .write(|tx| {
            let c = open_claimed_at(tx, "c", now, false)?;
            let d = open_claimed_at(tx, "d", now, false)?;
            tx.set_attempt_envelope(c.id, 1, "{\"run\":\"c\"}")?;
            Ok((c, d))
        })
        .expect("claimed c and d");
    assert_eq!(
        attempts_of(store, c.id)[0].envelope.as_deref(),
        Some("{\"run\":\"c\"}")
    );
    let got = attempts_of(store, d.id);
    assert_eq!(got.len(), 1, "the commit wrote the held row: {got:?}");
    assert_eq!(got[0].envelope, None);
    // The held row meets an end in the same transaction.
    let e = store
        .write(|tx| {
            let e = open_claimed_at(tx, "e", now, false)?;
            assert!(tx.end_attempt(e.id, e.fencing_token, &AttemptEnd::default(), now)?);
            Ok(e)
        })
        .expect("claimed and ended e");
    let got = attempts_of(store, e.id);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, AttemptStatus::Succeeded);
    // A rollback: nothing of the claim is written later.
    let err: Result<()> = store.write(|tx| {
        open_claimed_at(tx, "f", now, false)?;
        Err(StoreError::Invariant("on purpose".into()))
    });
    assert!(err.is_err());
    let g = store
        .write(|tx| open_claimed_at(tx, "g", now, false))
        .expect("claimed g");
    let all = store
        .read(|tx| {
            let mut n = 0;
            for run in [&a, &b, &c, &d, &e, &g] {
                n += tx.attempts(run.id)?.len();
            }
            Ok(n)
        })
        .expect("attempts");
    assert_eq!(all, 6, "one row per claim, none of the rolled-back one");
}

/// A batch's claim commits with its attempt row (with the envelope) and
/// its whole trace (opening, decision, claim): all of them are there as
/// soon as the batch has committed, before any agent could start; a claim
/// rolled back leaves none of them.
fn a_claim_commits_with_its_attempt_row_and_its_trace_and_a_rollback_with_none(store: &Store) {
    let now = t0() + mins(1);
    let rows = |run: &Run| {
        store
            .read(|tx| {
                let events = tx.events(&EventFilter {
                    run_id: Some(run.id),
                    ..EventFilter::default()
                })?;
                Ok((tx.attempts(run.id)?, events))
            })
            .expect("read")
    };
    let a = store
        .batch(|| {
            store.write(|tx| {
                let a = open_claimed_at(tx, "a", now, true)?;
                tx.set_attempt_envelope(a.id, 1, r#"{"run":"a"}"#)?;
                Ok(a)
            })
        })
        .expect("claim a");
    let (attempts, events) = rows(&a);
    assert_eq!(attempts.len(), 1, "the attempt row commits with its claim");
    assert_eq!(attempts[0].fencing_token, a.fencing_token);
    assert_eq!(attempts[0].envelope.as_deref(), Some(r#"{"run":"a"}"#));
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["window_opened", "decision", "claimed"]);
    // A claim that rolls back: nothing of it is written.
    let failed: Result<Run> = store.batch(|| {
        store.write(|tx| {
            let b = open_claimed_at(tx, "b", now, true)?;
            tx.set_attempt_envelope(b.id, 1, r#"{"run":"b"}"#)?;
            Err(StoreError::Invariant("the test rolls this claim back".into()))
        })
    });
    assert!(failed.is_err());
    let all = store.read(|tx| tx.runs(&RunFilter::default())).unwrap();
    assert_eq!(all.len(), 1, "b rolled back: {all:?}");
    let events = store.read(|tx| tx.events(&EventFilter::default())).unwrap();
    assert!(
        events.iter().all(|e| e.run_id == Some(a.id)),
        "a rolled-back claim left trace rows: {events:?}"
    );
    // The agent's start, reported later, is its own row after them.
    store
        .write(|tx| tx.append_event(&NewEvent::of(now, started(1, a.fencing_token)).for_run(&a)))
        .unwrap();
    let kinds: Vec<String> = rows(&a).1.into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["window_opened", "decision", "claimed", "started"]);
}

/// An event written after a claim in the same transaction (a tick, a
/// circuit's change, another run's) follows the claim's rows, and the
/// claim's `started` event follows it: the trace keeps the order things
/// happened in.
fn events_after_a_claim_keep_their_order(store: &Store) {
    let now = t0() + mins(1);
    let a = store
        .batch(|| {
            store.write(|tx| {
                let a = open_claimed_at(tx, "a", now, true)?;
                let tick = agentcron::core::event::Event::Tick {
                    owner: "me".into(),
                    running: 1,
                };
                tx.append_event(&NewEvent::of(now, tick))?;
                tx.append_event(&NewEvent::of(now, started(1, a.fencing_token)).for_run(&a))?;
                Ok(a)
            })
        })
        .expect("claim a");
    let all = store.read(|tx| tx.events(&EventFilter::default())).unwrap();
    let order: Vec<(&str, Option<i64>)> = all.iter().map(|e| (e.kind.as_str(), e.run_id)).collect();
    assert_eq!(
        order,
        [
            ("window_opened", Some(a.id)),
            ("decision", Some(a.id)),
            ("claimed", Some(a.id)),
            ("tick", None),
            ("started", Some(a.id)),
        ]
    );
}

conformance!(
    a_claims_attempt_row_is_seen_by_every_statement_and_written_once,
    a_claim_commits_with_its_attempt_row_and_its_trace_and_a_rollback_with_none,
    events_after_a_claim_keep_their_order,
    what_a_transaction_keeps_unwritten_is_written_once_or_dropped,
    a_claims_row_is_written_at_once_and_its_start_is_a_row_of_its_own,
    a_claims_row_holds_the_opening_and_the_decision,
    limited_listings_of_folded_rows_miss_nothing,
    fencing_tokens_of_windows_opened_claimed_never_repeat,
    open_claimed_refuses_any_other_plan,
    second_claim_of_the_same_run_loses,
    fencing_tokens_strictly_increase_across_runs_and_retries,
    claim_records_attempt_and_event_with_exact_detail,
    stale_tokens_cannot_renew_end_or_journal,
    end_attempt_records_the_result,
    usage_adds_up_per_run_and_per_schedule_day,
    attempt_log_is_bounded_keeping_head_and_tail,
);
