//! The run state machine as enforced by the store: `transition` refuses exactly
//! what DESIGN.md's machine refuses, and nothing else writes `runs.state`.

#[path = "store_support.rs"]
#[macro_use]
mod support;

use RunState::*;
use agentcron::store::*;
use serde_json::json;
use support::*;

/// DESIGN.md "Run state machine", written out independently of `can_become`
/// so that a change to either one is caught. Beyond the diagram's arrows:
/// pending → failed / needs_human and the re-gated retry_wait → skipped / failed /
/// needs_human are a gate's `on_fail = "fail" | "human" | "skip"` (DESIGN.md
/// layer 2; "a retry is re-gated").
const ALLOWED: &[(RunState, RunState)] = &[
    (Pending, Running),
    (Pending, Skipped),
    (Pending, Missed),
    (Pending, Expired),
    (Pending, Failed),
    (Pending, NeedsHuman),
    (Running, Succeeded),
    (Running, RetryWait),
    (Running, NeedsHuman),
    (Running, Failed),
    (Running, Dead),
    (RetryWait, Running),
    (RetryWait, Skipped),
    (RetryWait, Failed),
    (RetryWait, NeedsHuman),
    (NeedsHuman, RetryWait),
    (NeedsHuman, Pending),
    (NeedsHuman, Failed),
    (Missed, Pending),
    (Missed, Skipped),
    (Missed, Expired),
];

/// Only an operator's recorded requeue reopens failed / dead runs.
const OPERATOR_ONLY: &[(RunState, RunState)] = &[(Failed, RetryWait), (Dead, RetryWait)];

fn operator() -> Change {
    Change {
        operator: Some("ops@example".into()),
        ..Change::default()
    }
}

#[test]
fn can_become_matches_the_design() {
    for from in RunState::ALL {
        for to in RunState::ALL {
            let plain = ALLOWED.contains(&(from, to));
            let op = plain || OPERATOR_ONLY.contains(&(from, to));
            assert_eq!(from.can_become(to, false), plain, "{from} → {to}");
            assert_eq!(from.can_become(to, true), op, "{from} → {to} by operator");
        }
    }
}

fn transition_refuses_exactly_what_the_machine_refuses(store: &Store) {
    store
        .write(|tx| {
            for (i, from) in RunState::ALL.into_iter().enumerate() {
                for (j, to) in RunState::ALL.into_iter().enumerate() {
                    let run = run_in(tx, from, &format!("w-{i}-{j}"));
                    assert_eq!(run.state, from);
                    let plain = ALLOWED.contains(&(from, to));
                    let by_operator = OPERATOR_ONLY.contains(&(from, to));
                    let ev = NewEvent::new(t0(), "test", json!({"to": to.as_str()}));
                    let got = tx.transition(run.id, from, to, &Change::default(), t0(), &[ev]);
                    if plain {
                        let after = got.unwrap_or_else(|e| panic!("{from} → {to}: {e}"));
                        assert_eq!(after.state, to);
                        assert_eq!(tx.run(run.id)?.state, to, "{from} → {to} stored");
                        continue;
                    }
                    match got {
                        Err(StoreError::IllegalTransition {
                            run: id,
                            from: f,
                            to: t,
                        }) => {
                            assert_eq!((id, f, t), (run.id, from, to));
                        }
                        other => panic!("{from} → {to} without operator: {other:?}"),
                    }
                    assert_eq!(tx.run(run.id)?, run, "{from} → {to} refused but changed");
                    let got = tx.transition(run.id, from, to, &operator(), t0(), &[]);
                    if by_operator {
                        assert_eq!(got.unwrap().state, to, "{from} → {to} by operator");
                    } else {
                        assert!(
                            matches!(got, Err(StoreError::IllegalTransition { .. })),
                            "{from} → {to} by operator: {got:?}"
                        );
                        assert_eq!(tx.run(run.id)?, run);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

fn transition_from_the_wrong_state_is_a_conflict(store: &Store) {
    store
        .write(|tx| {
            let run = run_in(tx, Pending, "w");
            let got = tx.transition(run.id, Running, Succeeded, &Change::default(), t0(), &[]);
            match got {
                Err(StoreError::StateConflict {
                    run: id,
                    expected,
                    actual,
                }) => {
                    assert_eq!((id, expected, actual), (run.id, Running, Pending));
                }
                other => panic!("expected a conflict, got {other:?}"),
            }
            assert_eq!(tx.run(run.id)?.state, Pending);
            let got = tx.transition(9999, Pending, Skipped, &Change::default(), t0(), &[]);
            assert!(matches!(got, Err(StoreError::RunNotFound(9999))), "{got:?}");
            Ok(())
        })
        .unwrap();
}

fn transition_sets_change_fields_and_clears_what_the_target_state_clears(store: &Store) {
    store
        .write(|tx| {
            let run = run_in(tx, Running, "w");
            assert!(run.lease_owner.is_some() && run.lease_expires.is_some());
            let later = t0() + mins(5);
            let change = Change {
                state_reason: Some("rate limited".into()),
                not_before: Some(later),
                next_check_at: Some(later),
                error_class: Some(agentcron::config::model::ErrorClass::Retryable),
                last_error: Some("429".into()),
                ..Change::default()
            };
            let retry = tx.transition(run.id, Running, RetryWait, &change, later, &[])?;
            assert_eq!(retry.lease_owner, None, "leaving running clears the lease");
            assert_eq!(retry.lease_expires, None);
            assert_eq!(retry.not_before, Some(later));
            assert_eq!(retry.next_check_at, Some(later));
            assert_eq!(retry.state_reason.as_deref(), Some("rate limited"));
            assert_eq!(retry.last_error.as_deref(), Some("429"));
            assert_eq!(retry.updated_at, later);
            assert_eq!(retry.fencing_token, run.fencing_token);

            // None leaves fields alone; a terminal state clears the schedule.
            let skip = Change {
                state_reason: None,
                not_before: Some(later + mins(1)),
                ..Change::default()
            };
            let skipped = tx.transition(run.id, RetryWait, Skipped, &skip, later, &[])?;
            assert_eq!(skipped.state_reason.as_deref(), Some("rate limited"));
            assert_eq!(skipped.last_error.as_deref(), Some("429"));
            assert_eq!(skipped.not_before, None, "terminal clears not_before");
            assert_eq!(skipped.next_check_at, None, "terminal clears next_check_at");
            Ok(())
        })
        .unwrap();
}

fn transition_events_get_the_run_filled_in_and_roll_back_with_it(store: &Store) {
    let run = store.write(|tx| Ok(run_in(tx, Pending, "w"))).unwrap();
    let before = store.read(|tx| tx.max_event_id()).unwrap();

    // A failing unit of work leaves neither the state nor the event behind.
    let failed = store.write(|tx| {
        let ev = NewEvent::new(t0(), "skipped", json!({"reason": "calendar"}));
        tx.transition(run.id, Pending, Skipped, &Change::default(), t0(), &[ev])?;
        Err::<(), _>(StoreError::RunNotFound(-1))
    });
    assert!(failed.is_err());
    store
        .read(|tx| {
            assert_eq!(tx.run(run.id)?.state, Pending);
            assert_eq!(tx.max_event_id()?, before);
            Ok(())
        })
        .unwrap();

    store
        .write(|tx| {
            let ev = NewEvent::new(t0(), "skipped", json!({"reason": "calendar"}));
            tx.transition(run.id, Pending, Skipped, &Change::default(), t0(), &[ev])
        })
        .unwrap();
    let events = store
        .read(|tx| {
            tx.events(&EventFilter {
                run_id: Some(run.id),
                ..EventFilter::default()
            })
        })
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "skipped");
    assert_eq!(events[0].run_id, Some(run.id));
    assert_eq!(events[0].tenant.as_deref(), Some("acme"));
    assert_eq!(events[0].schedule.as_deref(), Some("s"));
    assert_eq!(events[0].detail, json!({"reason": "calendar"}));
}

fn claim_only_leaves_pending_or_retry_wait(store: &Store) {
    store
        .write(|tx| {
            for (i, from) in RunState::ALL.into_iter().enumerate() {
                let run = run_in(tx, from, &format!("c-{i}"));
                let got = tx.claim(run.id, from, "w", t0() + mins(1), RunReason::Retry, t0(), t0());
                if matches!(from, Pending | RetryWait) {
                    let c = got?.expect("claimable");
                    assert_eq!(c.run.state, Running);
                } else {
                    assert!(
                        matches!(got, Err(StoreError::IllegalTransition { to: Running, .. })),
                        "claim from {from}: {got:?}"
                    );
                    assert_eq!(tx.run(run.id)?, run);
                }
            }
            Ok(())
        })
        .unwrap();
}

fn runs_cannot_be_created_already_running_or_finished(store: &Store) {
    store
        .write(|tx| {
            for (i, state) in RunState::ALL.into_iter().enumerate() {
                let mut new = new_run("s", &format!("n-{i}"), t0());
                new.state = state;
                let got = tx.insert_run(&new, t0());
                let creatable = matches!(state, Pending | Skipped | Missed | Expired);
                match got {
                    Ok(Some(run)) if creatable => assert_eq!(run.state, state),
                    Err(StoreError::IllegalTransition { to, .. }) if !creatable => {
                        assert_eq!(to, state)
                    }
                    other => panic!("create in {state}: {other:?}"),
                }
            }
            Ok(())
        })
        .unwrap();
}

/// "One owner per fact": outside `Tx::transition` and `Tx::claim` (and their
/// PostgreSQL counterparts: `PgStore::claim`, `complete`, `complete_all`
/// and `take_over`, which check the same state machine), no SQL in the crate sets `runs.state`.
#[test]
fn only_transition_and_claim_write_the_state_column() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    walk(&src, &mut files);
    let mut writers = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lower = text.to_lowercase();
        let mut rest = lower.as_str();
        while let Some(at) = rest.find("update runs") {
            let stmt = &rest[at..];
            let end = stmt.find("where").unwrap_or(stmt.len());
            let set = &stmt[..end];
            let sets_state = set.match_indices("state").any(|(i, _)| {
                let before = set[..i].chars().last().unwrap_or(' ');
                let after = set[i + 5..].trim_start();
                !(before.is_alphanumeric() || before == '_') && after.starts_with('=')
            });
            if sets_state {
                let name = file.strip_prefix(&src).unwrap().to_string_lossy();
                writers.push(name.replace('\\', "/"));
            }
            rest = &stmt[11..];
        }
    }
    writers.sort();
    // Each database's text of the same three statements (`store::sqlite`,
    // `store::pg::sql`): the claim (attempts), and the transition in general
    // and for a running run that ends (runs); and the protocol's own four.
    assert_eq!(
        writers,
        [
            "store/pg/mod.rs",
            "store/pg/mod.rs",
            "store/pg/mod.rs",
            "store/pg/mod.rs",
            "store/pg/sql/attempts.rs",
            "store/pg/sql/runs.rs",
            "store/pg/sql/runs.rs",
            "store/sqlite/attempts.rs",
            "store/sqlite/runs.rs",
            "store/sqlite/runs.rs"
        ],
        "writers of runs.state"
    );
}

conformance!(
    transition_refuses_exactly_what_the_machine_refuses,
    transition_from_the_wrong_state_is_a_conflict,
    transition_sets_change_fields_and_clears_what_the_target_state_clears,
    transition_events_get_the_run_filled_in_and_roll_back_with_it,
    claim_only_leaves_pending_or_retry_wait,
    runs_cannot_be_created_already_running_or_finished,
);
