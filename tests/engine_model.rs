//! The engine's model keeps the schedule states, running counts, runs and
//! execution memory its transactions read or wrote, and trusts them only
//! while nothing else has written the ledger. These tests change them behind
//! its back (another store on the same file, on the same shared in-memory
//! database as rehearsals use, or on the same PostgreSQL ledger; a write on
//! the same store without the model) and roll writes back, and check that
//! what a transaction with the model answers is always what is stored.

#[path = "store_support.rs"]
mod support;

use agentcron::engine::model::EngineStore;
use agentcron::store::*;
use chrono::Duration;
use std::path::Path;
use support::*;

/// `store` with a model of its own, as the engine runs it.
fn modelled(store: Store) -> EngineStore {
    EngineStore::new(std::sync::Arc::new(store))
}

/// `f` with the file's path and two modelled stores on one new SQLite file.
fn on_a_file(f: impl FnOnce(&Path, &EngineStore, &EngineStore)) {
    let (_dir, path) = temp_db();
    f(
        &path,
        &modelled(Store::open(&path).unwrap()),
        &modelled(Store::open(&path).unwrap()),
    );
}

/// `f` with the URL and two modelled stores on a new PostgreSQL database
/// named for `test` (nothing without a server).
fn on_postgres(test: &str, f: impl FnOnce(&Path, &EngineStore, &EngineStore)) {
    if let Some(url) = pg_database(test) {
        let url = Path::new(&url);
        f(
            url,
            &modelled(Store::open(url).unwrap()),
            &modelled(Store::open(url).unwrap()),
        );
    }
}

fn paused(store: &EngineStore, schedule: &str) -> bool {
    store.read(|tx| tx.schedule_state(schedule)).unwrap().paused
}

fn pause(store: &EngineStore, schedule: &str, on: bool) {
    store
        .write(|tx| {
            let mut st = tx.schedule_state(schedule)?;
            st.paused = on;
            st.paused_reason = on.then(|| "by the other one".to_string());
            tx.put_schedule_state(&st)
        })
        .unwrap();
}

fn two_stores_see_each_others_writes(a: &EngineStore, b: &EngineStore) {
    // A reads (and keeps) the state; B changes it; A must see B's change in
    // its next read, its next write and its next batch.
    assert!(!paused(a, "s"));
    pause(b, "s", true);
    assert!(paused(a, "s"), "a read after another store's commit");
    pause(b, "s", false);
    let in_write = a.write(|tx| Ok(tx.schedule_state("s")?.paused)).unwrap();
    assert!(!in_write, "a write after another store's commit");
    pause(b, "s", true);
    let in_batch = a
        .batch(|| a.read(|tx| Ok(tx.schedule_state("s")?.paused)))
        .unwrap();
    assert!(in_batch, "a batch after another store's commit");
    // The many-schedule path (one pass over every row) too.
    pause(b, "s", false);
    let names: Vec<String> = (0..100).map(|i| format!("t{i}")).collect();
    let mut wanted: Vec<&str> = names.iter().map(String::as_str).collect();
    wanted.push("s");
    let states = a.read(|tx| tx.schedule_states(&wanted)).unwrap();
    assert!(!states.last().expect("s").paused);
    pause(b, "s", true);
    let states = a.read(|tx| tx.schedule_states(&wanted)).unwrap();
    assert_eq!(states.len(), 101);
    assert!(
        states.last().expect("s").paused,
        "schedule_states after another store's commit"
    );
}

#[test]
fn a_state_changed_by_another_store_on_the_file_is_read_fresh() {
    on_a_file(|_, a, b| two_stores_see_each_others_writes(a, b));
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_state_changed_by_another_store_on_postgresql_is_read_fresh() {
    on_postgres(
        "engine_model::a_state_changed_by_another_store_on_postgresql_is_read_fresh",
        |_, a, b| two_stores_see_each_others_writes(a, b),
    );
}

#[test]
fn a_state_changed_by_another_store_on_a_shared_memory_database_is_read_fresh() {
    let path = agentcron::rehearsal::driver::memory_database("state-cache-shared");
    let a = modelled(Store::open(Path::new(&path)).unwrap());
    let b = modelled(Store::open(Path::new(&path)).unwrap());
    two_stores_see_each_others_writes(&a, &b);
}

/// Writes on the model's own connection that the model did not make (a
/// rehearsal's operator step or an alert's event on the engine's store, or a
/// second model on it) do not move SQLite's `data_version`, which only
/// counts other connections' commits: the model must see them all the same.
#[test]
fn a_write_on_the_same_store_without_this_model_is_read_fresh() {
    let (_dir, path) = temp_db();
    let store = std::sync::Arc::new(Store::open(&path).unwrap());
    let a = EngineStore::new(store.clone());
    assert!(!paused(&a, "s"));
    store
        .write(|tx| {
            let mut st = tx.schedule_state("s")?;
            st.paused = true;
            tx.put_schedule_state(&st)
        })
        .unwrap();
    assert!(paused(&a, "s"), "a read after a write without a model");
    let b = EngineStore::new(store.clone());
    pause(&b, "s", false);
    assert!(!paused(&a, "s"), "a read after another model's write");
    store
        .batch(|| {
            store.write(|tx| {
                let mut st = tx.schedule_state("s")?;
                st.paused = true;
                tx.put_schedule_state(&st)
            })
        })
        .unwrap();
    let in_batch = a
        .batch(|| a.read(|tx| Ok(tx.schedule_state("s")?.paused)))
        .unwrap();
    assert!(in_batch, "a batch after a batch without a model");
}

#[test]
fn a_write_that_rolls_back_leaves_nothing_behind_in_the_kept_state() {
    let (_dir, path) = temp_db();
    let a = modelled(Store::open(&path).unwrap());
    assert!(!paused(&a, "s"));
    let failed: Result<()> = a.write(|tx| {
        let mut st = tx.schedule_state("s")?;
        st.paused = true;
        tx.put_schedule_state(&st)?;
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(failed.is_err());
    assert!(!paused(&a, "s"), "a rolled-back write");
    let failed: Result<()> = a.batch(|| {
        a.write(|tx| {
            let mut st = tx.schedule_state("s")?;
            st.paused = true;
            tx.put_schedule_state(&st)?;
            tx.set_last_start("s", t0())
        })?;
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(failed.is_err());
    let st = a.read(|tx| tx.schedule_state("s")).unwrap();
    assert!(
        !st.paused && st.last_start.is_none(),
        "a rolled-back batch: {st:?}"
    );
}

#[test]
fn a_kept_state_is_what_the_database_holds() {
    // Instants keep whole milliseconds in the database; the kept copy must
    // not keep more, and partial writes (last start, last evaluated) must
    // reach it.
    let (_dir, path) = temp_db();
    let a = modelled(Store::open(&path).unwrap());
    let odd = t0() + Duration::microseconds(1_234_567);
    a.write(|tx| {
        let mut st = tx.schedule_state("s")?;
        st.last_success = Some(odd);
        st.circuit_changed_at = Some(odd);
        st.consecutive_failures = 2;
        tx.put_schedule_state(&st)?;
        tx.set_last_start("s", odd + mins(1))?;
        tx.set_last_evaluated("s", odd + mins(2))
    })
    .unwrap();
    let kept = a.read(|tx| tx.schedule_state("s")).unwrap();
    let fresh = modelled(Store::open(&path).unwrap());
    let stored = fresh.read(|tx| tx.schedule_state("s")).unwrap();
    assert_eq!(kept, stored);
    assert_eq!(stored.last_start, Some(t0() + Duration::milliseconds(61_234)));
    assert_eq!(
        stored.last_evaluated,
        Some(t0() + Duration::milliseconds(121_234))
    );
}

/// A state put again with only its last success moved (a run's success)
/// writes that column alone: what the next store reads is the whole state
/// as kept, and a state never stored is written whole.
#[test]
fn a_state_whose_last_success_alone_moved_is_stored_as_kept() {
    let (_dir, path) = temp_db();
    let a = modelled(Store::open(&path).unwrap());
    let odd = t0() + Duration::microseconds(7_654_321);
    let stored = |schedule: &str| {
        Store::open(&path)
            .unwrap()
            .read(|tx| tx.schedule_state(schedule))
            .unwrap()
    };
    a.write(|tx| {
        // Never stored: only its last success differs from the default.
        let mut st = tx.schedule_state("new")?;
        st.last_success = Some(odd);
        tx.put_schedule_state(&st)?;
        let mut st = tx.schedule_state("s")?;
        st.consecutive_failures = 2;
        st.paused_reason = Some("kept".into());
        tx.put_schedule_state(&st)
    })
    .unwrap();
    for k in 1..=3 {
        a.write(|tx| {
            let mut st = tx.schedule_state("s")?;
            st.last_success = Some(odd + mins(k));
            tx.put_schedule_state(&st)
        })
        .unwrap();
        let kept = a.read(|tx| tx.schedule_state("s")).unwrap();
        assert_eq!(kept, stored("s"), "after success {k}");
        assert_eq!(
            kept.last_success,
            Some(t0() + Duration::milliseconds(7_654 + k * 60_000))
        );
        assert_eq!(
            (kept.consecutive_failures, kept.paused_reason.as_deref()),
            (2, Some("kept"))
        );
    }
    let new = stored("new");
    assert_eq!(new, a.read(|tx| tx.schedule_state("new")).unwrap());
    assert_eq!(new.last_success, Some(t0() + Duration::milliseconds(7_654)));
}

/// The running counts as a fresh count over the running runs gives them.
fn counted(store: &EngineStore) -> RunningCounts {
    store
        .read(|tx| {
            let mut c = RunningCounts::default();
            for r in tx.running_runs(None)? {
                c.add(&r.tenant, &r.schedule, r.pool, true);
            }
            Ok(c)
        })
        .unwrap()
}

fn kept(store: &EngineStore) -> RunningCounts {
    (*store.read(|tx| tx.running_by_schedule()).unwrap()).clone()
}

#[test]
fn kept_running_counts_follow_claims_ends_rollbacks_and_other_stores() {
    on_a_file(|_, a, b| kept_running_counts_follow_claims_ends_rollbacks_and_other_stores_on(a, b));
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn kept_running_counts_follow_claims_ends_rollbacks_and_other_stores_on_postgres() {
    on_postgres(
        "engine_model::kept_running_counts_follow_claims_ends_rollbacks_and_other_stores",
        |_, a, b| kept_running_counts_follow_claims_ends_rollbacks_and_other_stores_on(a, b),
    );
}

fn kept_running_counts_follow_claims_ends_rollbacks_and_other_stores_on(a: &EngineStore, b: &EngineStore) {
    use RunState::*;
    // Counted once (nothing runs), then kept up by claims in both pools.
    assert_eq!(kept(a), RunningCounts::default());
    let (one, two) = a
        .write(|tx| {
            let one = claim(tx, &insert(tx, "s", "1", t0())).run;
            let mut late = new_run("s", "2", t0());
            late.pool = Pool::Backfill;
            let two = tx.insert_run(&late, t0())?.expect("new");
            let two = claim(tx, &two).run;
            claim(tx, &insert(tx, "t", "3", t0()));
            Ok((one, two))
        })
        .unwrap();
    let now = kept(a);
    assert_eq!(now, counted(a));
    assert_eq!(
        (
            now.of_schedule("s"),
            now.on_time_of_schedule("s"),
            now.of_tenant("acme")
        ),
        (2, 1, 3)
    );
    // An end (running → succeeded) and a retry (running → retry_wait).
    a.write(|tx| {
        go(tx, &one, Succeeded);
        go(tx, &two, RetryWait);
        Ok(())
    })
    .unwrap();
    assert_eq!(kept(a), counted(a));
    assert_eq!(kept(a).of_schedule("s"), 0);
    // A claim that rolls back is not counted.
    let failed: Result<()> = a.write(|tx| {
        claim(tx, &insert(tx, "s", "4", t0()));
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(failed.is_err());
    assert_eq!(kept(a), counted(a));
    // Another store's claim shows up in A's next transaction.
    b.write(|tx| Ok(claim(tx, &insert(tx, "u", "5", t0())))).unwrap();
    assert_eq!(kept(a).of_schedule("u"), 1);
    assert_eq!(kept(a), counted(a));
}

#[test]
fn a_run_read_again_is_what_the_database_holds() {
    on_a_file(|_, a, b| a_run_read_again_is_what_the_database_holds_on(a, b));
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn a_run_read_again_is_what_the_database_holds_on_postgres() {
    on_postgres(
        "engine_model::a_run_read_again_is_what_the_database_holds",
        |_, a, b| a_run_read_again_is_what_the_database_holds_on(a, b),
    );
}

fn a_run_read_again_is_what_the_database_holds_on(a: &EngineStore, b: &EngineStore) {
    use RunState::*;
    let state = |s: &EngineStore, id: i64| s.read(|tx| tx.run(id)).unwrap().state;
    let run = a.write(|tx| Ok(insert(tx, "s", "1", t0()))).unwrap();
    assert_eq!(state(a, run.id), Pending);
    // Another store claims it: A's next read sees it running.
    b.write(|tx| Ok(claim(tx, &run))).unwrap();
    assert_eq!(state(a, run.id), Running, "a read after another store's commit");
    // A's own write between two reads, in one transaction and across two.
    let running = a.read(|tx| tx.run(run.id)).unwrap();
    let (before, after) = a
        .write(|tx| {
            let before = tx.run(run.id)?.lease_expires;
            tx.renew_lease(run.id, running.fencing_token, t0() + mins(30))?;
            Ok((before, tx.run(run.id)?.lease_expires))
        })
        .unwrap();
    assert_ne!(before, after, "a read after this transaction's own write");
    assert_eq!(a.read(|tx| tx.run(run.id)).unwrap().lease_expires, after);
    // A write that read its own change and then rolled back, alone and in a
    // batch: the next read is the stored row, not what the write had read.
    let failed: Result<()> = a.write(|tx| {
        go(tx, &running, Succeeded);
        assert_eq!(tx.run(run.id)?.state, Succeeded);
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(failed.is_err());
    assert_eq!(state(a, run.id), Running, "a rolled-back write");
    let failed: Result<()> = a.batch(|| {
        a.write(|tx| {
            go(tx, &running, Succeeded);
            tx.run(run.id).map(|_| ())
        })?;
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(failed.is_err());
    assert_eq!(state(a, run.id), Running, "a rolled-back batch");
}

/// Ends the current attempt of running `run` with this summary and message.
fn end(tx: &Tx, run: &Run, summary: Option<&str>, message: Option<&str>) {
    let ended = tx
        .end_attempt(
            run.id,
            run.fencing_token,
            &AttemptEnd {
                summary: summary.map(str::to_string),
                message: message.map(str::to_string),
                ..AttemptEnd::default()
            },
            t0(),
        )
        .unwrap();
    assert!(ended);
}

fn finish(tx: &Tx, run: &Run, to: RunState, why: Option<&str>) -> Run {
    let change = Change {
        state_reason: why.map(str::to_string),
        ..Change::default()
    };
    tx.transition(run.id, run.state, to, &change, t0(), &[]).unwrap()
}

#[test]
fn kept_execution_memory_is_what_the_database_holds() {
    on_a_file(kept_execution_memory_is_what_the_database_holds_on);
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn kept_execution_memory_is_what_the_database_holds_on_postgres() {
    on_postgres(
        "engine_model::kept_execution_memory_is_what_the_database_holds",
        kept_execution_memory_is_what_the_database_holds_on,
    );
}

fn kept_execution_memory_is_what_the_database_holds_on(path: &Path, a: &EngineStore, b: &EngineStore) {
    use RunState::*;
    let memory = |s: &EngineStore| s.read(|tx| tx.execution_memory("acme", "s", 3)).unwrap();
    // What a store that never read it finds: the query itself.
    let stored = || memory(&modelled(Store::open(path).unwrap()));
    let same = |step: &str| {
        let (kept, fresh) = (memory(a), stored());
        assert_eq!(kept, fresh, "{step}");
        kept
    };
    let at = |h: i64| t0() + Duration::hours(h);
    assert!(same("empty").is_empty());
    // Ends with a summary, with only a message, with neither (the state
    // reason), and a window skipped without an attempt.
    a.write(|tx| {
        let r = claim(tx, &insert(tx, "s", "1", at(1))).run;
        end(tx, &r, Some("one"), Some("ignored"));
        finish(tx, &r, Succeeded, None);
        let r = claim(tx, &insert(tx, "s", "2", at(2))).run;
        end(tx, &r, None, Some("boom"));
        finish(tx, &r, Dead, Some("gave up"));
        Ok(())
    })
    .unwrap();
    let kept = same("two ends");
    assert_eq!(kept[0].summary.as_deref(), Some("boom"));
    assert_eq!(kept[1].summary.as_deref(), Some("one"));
    a.write(|tx| {
        let r = claim(tx, &insert(tx, "s", "3", at(3))).run;
        end(tx, &r, None, None);
        finish(tx, &r, Succeeded, Some("no word"));
        let mut skipped = new_run("s", "4", at(4));
        skipped.state = Skipped;
        skipped.state_reason = Some("overlap".into());
        tx.insert_run(&skipped, t0())?;
        Ok(())
    })
    .unwrap();
    let kept = same("an end without a word, a window created skipped");
    assert_eq!(kept[0].summary.as_deref(), Some("overlap"));
    assert_eq!(kept[1].summary.as_deref(), Some("no word"));
    // An older window that finishes later is placed by its window (and,
    // with three kept, falls off the end); another schedule is not in it.
    a.write(|tx| {
        let r = claim(tx, &insert(tx, "s", "0", at(0))).run;
        end(tx, &r, Some("late"), None);
        finish(tx, &r, Succeeded, None);
        let r = claim(tx, &insert(tx, "other", "9", at(9))).run;
        end(tx, &r, Some("elsewhere"), None);
        finish(tx, &r, Succeeded, None);
        Ok(())
    })
    .unwrap();
    same("an older window, another schedule");
    // An attempt ends in one transaction (a retry), its run in another:
    // the word is the attempt's.
    let waiting = a
        .write(|tx| {
            let r = claim(tx, &insert(tx, "s", "5", at(5))).run;
            end(tx, &r, Some("first try"), None);
            Ok(finish(tx, &r, RetryWait, None))
        })
        .unwrap();
    same("a retry waits");
    let failed = a
        .write(|tx| Ok(finish(tx, &waiting, Failed, Some("gate"))))
        .unwrap();
    assert_eq!(same("failed later")[0].summary.as_deref(), Some("first try"));
    // An operator's requeue takes a finished run out of it.
    a.write(|tx| {
        let change = Change {
            operator: Some("ops".into()),
            ..Change::default()
        };
        tx.transition(failed.id, Failed, RetryWait, &change, t0(), &[])
            .map(|_| ())
    })
    .unwrap();
    assert!(same("requeued").iter().all(|m| m.run_id != failed.id));
    // A finish that rolls back leaves nothing behind.
    let rolled: Result<()> = a.write(|tx| {
        let r = claim(tx, &insert(tx, "s", "6", at(6))).run;
        end(tx, &r, Some("never"), None);
        finish(tx, &r, Succeeded, None);
        Err(StoreError::Invariant("made to fail".into()))
    });
    assert!(rolled.is_err());
    same("a rolled-back finish");
    // Another store's finish shows up in A's next read.
    b.write(|tx| {
        let r = claim(tx, &insert(tx, "s", "7", at(7))).run;
        end(tx, &r, Some("from b"), None);
        finish(tx, &r, Succeeded, None);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        same("another store's finish")[0].summary.as_deref(),
        Some("from b")
    );
}

#[test]
fn kept_spend_is_what_the_database_holds() {
    on_a_file(|_, a, b| kept_spend_is_what_the_database_holds_on(a, b));
}

#[test]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
fn kept_spend_is_what_the_database_holds_on_postgres() {
    on_postgres(
        "engine_model::kept_spend_is_what_the_database_holds",
        |_, a, b| kept_spend_is_what_the_database_holds_on(a, b),
    );
}

/// A budgeted schedule's spend for the day, kept by the model: it follows
/// usage added with the model, by another store, and a rollback.
fn kept_spend_is_what_the_database_holds_on(a: &EngineStore, b: &EngineStore) {
    let day = t("2026-06-06T00:00:00Z");
    let next = t("2026-06-07T00:00:00Z");
    let spent = |s: &EngineStore| {
        s.read(|tx| tx.schedule_cost_between("acme", "s", day, next))
            .unwrap()
    };
    let (run, token) = a
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let c = claim(tx, &run);
            Ok((run, c.fencing_token))
        })
        .unwrap();
    assert_eq!(spent(a), 0.0);
    a.write(|tx| tx.add_usage(run.id, token, 10, 0.25)).unwrap();
    assert_eq!(spent(a), 0.25, "usage added with the model");
    b.write(|tx| tx.add_usage(run.id, token, 10, 0.5)).unwrap();
    assert_eq!(spent(a), 0.75, "usage added by another store");
    let failed: Result<()> = a.write(|tx| {
        tx.add_usage(run.id, token, 10, 4.0)?;
        assert_eq!(tx.schedule_cost_between("acme", "s", day, next)?, 4.75);
        Err(StoreError::Invariant("roll back".into()))
    });
    assert!(failed.is_err());
    assert_eq!(spent(a), 0.75, "usage rolled back");
    // Inside one transaction: read, add, read again.
    let (before, after) = a
        .write(|tx| {
            let before = tx.schedule_cost_between("acme", "s", day, next)?;
            tx.add_usage(run.id, token, 10, 1.0)?;
            Ok((before, tx.schedule_cost_between("acme", "s", day, next)?))
        })
        .unwrap();
    assert_eq!((before, after), (0.75, 1.75));
}

/// The model is a cache of the ledger, never a second truth: every shipped
/// rehearsal ends exactly the same when its engines run with the
/// model as when they run with its oracle, whose model forgets every read
/// before each of the engine's calls (every run, every event in order with
/// its detail, every verdict).
#[test]
fn shipped_rehearsals_end_the_same_with_the_model_and_with_its_oracle() {
    use agentcron::rehearsal::Rehearsal;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample-config/rehearsals");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("sample-config/rehearsals")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let ending = |forgetful: bool| {
            let scenario = agentcron::rehearsal::scenario::load(&dir.join(name)).expect("scenario");
            let mut r = if forgetful {
                Rehearsal::with_forgetful_model(scenario)
            } else {
                Rehearsal::new(scenario)
            }
            .expect("rehearsal");
            r.run_to_end().expect("run");
            let store = r.driver.store().expect("store");
            // Runs with their attempts (each envelope and its execution
            // memory included) and the schedules' states, the trace, the
            // verdicts.
            let (runs, events) = store
                .read(|tx| {
                    let runs = tx.runs(&RunFilter::default())?;
                    let attempts = runs
                        .iter()
                        .map(|r| tx.attempts(r.id))
                        .collect::<Result<Vec<_>>>()?;
                    Ok((
                        (
                            runs.into_iter().zip(attempts).collect::<Vec<_>>(),
                            tx.all_schedule_states()?,
                        ),
                        tx.events(&EventFilter::default())?,
                    ))
                })
                .unwrap();
            let verdicts = r.verdicts().expect("verdicts");
            (
                format!("{runs:#?}"),
                format!("{events:#?}"),
                format!("{verdicts:#?}"),
            )
        };
        let (with, oracle) = (ending(false), ending(true));
        assert!(with.1.contains("window_opened"), "{name}: no window opened");
        for (what, with, oracle) in [
            ("runs and schedule states", &with.0, &oracle.0),
            ("trace", &with.1, &oracle.1),
            ("verdicts", &with.2, &oracle.2),
        ] {
            same_text(&format!("{name}: the {what}"), with, oracle);
        }
    }
}

/// `with` equals `oracle`, or a failure that shows where they part (the
/// whole of either is thousands of lines).
fn same_text(what: &str, with: &str, oracle: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (with.lines().collect(), oracle.lines().collect());
    if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
        let around = |l: &[&str]| l[i.saturating_sub(12).min(l.len())..(i + 4).min(l.len())].join("\n");
        panic!(
            "{what} part at line {i}:\n--- with the model ---\n{}\n--- with its oracle ---\n{}",
            around(&a),
            around(&b)
        );
    }
}
