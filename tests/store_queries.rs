//! The store's queries: windows, due runs, leases, history, steps, the trace,
//! per-schedule state, switches, approvals, maintenance and posted events.

#[path = "store_support.rs"]
#[macro_use]
mod support;

use RunState::*;
use agentcron::store::*;
use serde_json::json;
use support::*;

fn one_run_per_window(store: &Store) {
    store
        .write(|tx| {
            let first = tx.insert_run(&new_run("s", "2026-06-06", t0()), t0())?;
            let first = first.expect("created");
            assert_eq!(first.state, Pending);
            assert_eq!(first.attempts, 0);
            assert_eq!(first.created_at, t0());
            // Same tenant, schedule and window: no second run, even with other fields.
            let mut again = new_run("s", "2026-06-06", t0() + mins(5));
            again.state = Skipped;
            assert_eq!(tx.insert_run(&again, t0() + mins(5))?, None);
            assert_eq!(tx.find_run("acme", "s", "2026-06-06")?, Some(first.clone()));
            // Another schedule, tenant or window is another run.
            assert!(tx.insert_run(&new_run("t", "2026-06-06", t0()), t0())?.is_some());
            let mut other_tenant = new_run("s", "2026-06-06", t0());
            other_tenant.tenant = "globex".into();
            assert!(tx.insert_run(&other_tenant, t0())?.is_some());
            assert!(tx.insert_run(&new_run("s", "2026-06-07", t0()), t0())?.is_some());
            assert_eq!(tx.runs(&RunFilter::default())?.len(), 4);
            assert_eq!(tx.find_run("acme", "s", "2026-06-08")?, None);
            assert!(matches!(tx.run(12345), Err(StoreError::RunNotFound(12345))));
            Ok(())
        })
        .unwrap();
}

/// `insert_run` builds the new run instead of reading it back: what it
/// returns must be the stored row exactly, for every state a run can be
/// created in, with instants that carry sub-millisecond parts (stored as
/// whole milliseconds) and with or without a next check.
fn an_inserted_run_is_returned_as_it_was_stored(store: &Store) {
    let odd = t0() + chrono::Duration::microseconds(1_234_567);
    store
        .write(|tx| {
            for (i, state) in [Pending, Skipped, Missed, Expired].into_iter().enumerate() {
                for next_check in [None, Some(odd + mins(3))] {
                    let mut new = new_run("s", &format!("w{i}-{}", next_check.is_some()), odd);
                    new.state = state;
                    new.pool = Pool::Backfill;
                    new.reason = RunReason::Catchup;
                    new.state_reason = Some(format!("because {i}"));
                    new.next_check_at = next_check;
                    let made = tx.insert_run(&new, odd + mins(1))?.expect("created");
                    assert_eq!(
                        Some(&made),
                        tx.try_run(made.id)?.as_ref(),
                        "{state} {next_check:?}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}

fn pending_runs_default_to_being_checked_when_due(store: &Store) {
    store
        .write(|tx| {
            let mut new = new_run("s", "w", t0());
            new.next_check_at = None;
            assert_eq!(tx.insert_run(&new, t0())?.unwrap().next_check_at, Some(t0()));
            let mut skipped = new_run("s", "x", t0());
            skipped.state = Skipped;
            skipped.state_reason = Some("calendar".into());
            let run = tx.insert_run(&skipped, t0())?.unwrap();
            assert_eq!(run.next_check_at, None, "a decided run is never checked");
            assert_eq!(run.state_reason.as_deref(), Some("calendar"));
            Ok(())
        })
        .unwrap();
}

fn due_runs_are_pending_or_retrying_and_due_oldest_check_first(store: &Store) {
    store
        .write(|tx| {
            insert(tx, "s", "late", t0() + mins(10));
            let early = insert(tx, "s", "early", t0() + mins(2));
            let _future = insert(tx, "s", "future", t0() + mins(60));
            let running = insert(tx, "s", "running", t0());
            claim(tx, &running);
            let retry = run_in(tx, RetryWait, "retry");
            tx.set_next_check(retry.id, t0() + mins(5), Some("backoff"))?;
            let skipped = insert(tx, "s", "skipped", t0());
            go(tx, &skipped, Skipped);

            let now = t0() + mins(10);
            let got = tx.due_runs(now, 10)?;
            let keys: Vec<&str> = got.iter().map(|r| r.window_key.as_str()).collect();
            assert_eq!(keys, ["early", "retry", "late"]);
            assert_eq!(got[1].state_reason.as_deref(), Some("backoff"));
            let two: Vec<i64> = tx.due_runs(now, 2)?.iter().map(|r| r.id).collect();
            assert_eq!(two, [early.id, retry.id]);
            assert!(tx.due_runs(t0() + mins(1), 10)?.is_empty());
            assert_eq!(tx.next_due_check()?, Some(t0() + mins(2)));
            Ok(())
        })
        .unwrap();
}

fn next_due_check_ignores_runs_not_waiting(store: &Store) {
    store
        .write(|tx| {
            assert_eq!(tx.next_due_check()?, None);
            let run = insert(tx, "s", "w", t0());
            assert_eq!(tx.next_due_check()?, Some(t0()));
            claim(tx, &run);
            assert_eq!(tx.next_due_check()?, None, "a running run is not due");
            Ok(())
        })
        .unwrap();
}

fn set_next_check_only_moves_waiting_runs(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            assert!(tx.set_next_check(run.id, t0() + mins(5), Some("gate: upstream"))?);
            let moved = tx.run(run.id)?;
            assert_eq!(moved.next_check_at, Some(t0() + mins(5)));
            assert_eq!(moved.state, Pending);
            assert_eq!(moved.state_reason.as_deref(), Some("gate: upstream"));
            assert!(tx.set_next_check(run.id, t0() + mins(6), None)?);
            assert_eq!(tx.run(run.id)?.state_reason.as_deref(), Some("gate: upstream"));
            claim(tx, &tx.run(run.id)?);
            assert!(!tx.set_next_check(run.id, t0() + mins(7), None)?);
            assert_eq!(tx.run(run.id)?.next_check_at, None);
            assert!(!tx.set_next_check(999, t0(), None)?);
            Ok(())
        })
        .unwrap();
}

/// A freed slot wakes the head of its schedule's on-time queue: the oldest
/// runs a slot holds, as many as there are places (a head already due
/// counts), a retry only once its backoff is over; never the whole queue,
/// which was then decided again at every end.
fn a_freed_slot_wakes_the_head_of_its_schedules_queue(store: &Store) {
    use agentcron::core::decision::HoldKind;
    let later = t0() + mins(60);
    store
        .write(|tx| {
            let running = claim(tx, &insert(tx, "s", "r", t0())).run;
            let backoff = Change {
                not_before: Some(later),
                next_check_at: Some(later),
                ..Change::default()
            };
            let retry = tx.transition(running.id, Running, RetryWait, &backoff, t0(), &[])?;
            let queue: Vec<Run> = ["a", "b", "c", "d"]
                .iter()
                .map(|k| insert(tx, "s", k, t0()))
                .collect();
            let holds = [
                HoldKind::Overlap,
                HoldKind::Overlap,
                HoldKind::Quota,
                HoldKind::Gate,
            ];
            for (r, hold) in queue.iter().zip(holds) {
                assert!(tx.hold_until(r.id, later, "held", Some(hold))?);
            }
            assert!(tx.hold_until(retry.id, later, "held", Some(HoldKind::Overlap))?);
            let next = |r: &Run| tx.run(r.id).map(|r| r.next_check_at);
            assert_eq!(tx.recheck_held("s", 1, false, true, t0())?, (1, 0));
            assert_eq!(next(&queue[0])?, Some(t0()), "the head goes");
            for r in [&queue[1], &queue[2], &queue[3], &retry] {
                assert_eq!(next(r)?, Some(later), "{}", r.window_key);
            }
            // Two places: the head, already due, takes one.
            assert_eq!(tx.recheck_held("s", 2, false, true, t0())?, (1, 0));
            assert_eq!(next(&queue[1])?, Some(t0()));
            // A quota hold left to the caller is passed over; a gate is no slot.
            assert_eq!(tx.recheck_held("s", 3, false, false, t0())?, (0, 0));
            assert_eq!(tx.recheck_held("s", 3, false, true, t0())?, (1, 0));
            assert_eq!(next(&queue[2])?, Some(t0()));
            assert_eq!(next(&queue[3])?, Some(later), "held by its gate");
            assert_eq!(next(&retry)?, Some(later), "its backoff is not over");
            Ok(())
        })
        .unwrap();
}

fn expired_leases_are_running_runs_past_their_lease(store: &Store) {
    store
        .write(|tx| {
            let a = insert(tx, "s", "a", t0());
            let b = insert(tx, "s", "b", t0());
            let c = insert(tx, "s", "c", t0());
            let ca = claim_as(tx, &a, "w", t0()); // lease until t0+1m
            let cb = claim_as(tx, &b, "w", t0() + mins(5)); // until t0+6m
            let cc = claim_as(tx, &c, "w", t0());
            let _ = cb;
            // c finished: its old lease no longer matters.
            go(tx, &cc.run, Succeeded);
            let zombies: Vec<i64> = tx.expired_leases(t0() + mins(2))?.iter().map(|r| r.id).collect();
            assert_eq!(zombies, [a.id]);
            assert!(
                tx.expired_leases(t0() + mins(1))?.is_empty(),
                "lease_expires < now"
            );
            assert!(tx.renew_lease(a.id, ca.fencing_token, t0() + mins(10))?);
            let zombies: Vec<i64> = tx.expired_leases(t0() + mins(7))?.iter().map(|r| r.id).collect();
            assert_eq!(zombies, [b.id]);
            Ok(())
        })
        .unwrap();
}

fn previous_run_is_the_latest_earlier_window_of_the_same_schedule(store: &Store) {
    store
        .write(|tx| {
            let d1 = insert(tx, "s", "d1", t0());
            let d2 = insert(tx, "s", "d2", t0() + mins(1440));
            let _other = insert(tx, "t", "d2", t0() + mins(1400));
            let d3 = t0() + mins(2880);
            assert_eq!(tx.previous_run("acme", "s", d3)?.map(|r| r.id), Some(d2.id));
            assert_eq!(
                tx.previous_run("acme", "s", d2.window_start)?.map(|r| r.id),
                Some(d1.id),
                "strictly before"
            );
            assert_eq!(tx.previous_run("acme", "s", t0())?, None);
            assert_eq!(tx.previous_run("globex", "s", d3)?, None);
            Ok(())
        })
        .unwrap();
}

/// A schedule's runs are indexed in two halves (schema 16: the running ones
/// apart, so a claim does not write a page of its schedule's history): every
/// reader of one schedule's runs in any state sees both, in window order.
fn a_schedules_running_runs_are_part_of_its_history(store: &Store) {
    store
        .write(|tx| {
            let day = |n: i64| t0() + mins(1440 * n);
            // Windows 1..=5: 2 and 4 running, 1 succeeded, 3 pending, 5 failed.
            let runs: Vec<Run> = (1..=5)
                .map(|n| insert(tx, "s", &format!("d{n}"), day(n)))
                .collect();
            let _other = insert(tx, "t", "d9", day(9));
            let done = go(tx, &claim(tx, &runs[0]).run, Succeeded);
            let two = claim(tx, &runs[1]).run;
            let four = claim(tx, &runs[3]).run;
            let five = go(tx, &runs[4], Failed);
            let ids = |v: Vec<Run>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
            let of_s = |states: Vec<RunState>, newest_first, limit| RunFilter {
                schedule: Some("s".into()),
                states,
                newest_first,
                limit,
                ..RunFilter::default()
            };
            let all = [done.id, two.id, runs[2].id, four.id, five.id];
            assert_eq!(ids(tx.runs(&of_s(vec![], false, None))?), all);
            let newest: Vec<i64> = all.iter().rev().copied().collect();
            assert_eq!(ids(tx.runs(&of_s(vec![], true, None))?), newest);
            assert_eq!(ids(tx.runs(&of_s(vec![], true, Some(2)))?), [five.id, four.id]);
            assert_eq!(
                ids(tx.runs(&of_s(vec![], false, Some(3)))?),
                [done.id, two.id, runs[2].id]
            );
            assert_eq!(
                ids(tx.runs(&of_s(vec![Running], false, None))?),
                [two.id, four.id]
            );
            assert_eq!(
                ids(tx.runs(&of_s(vec![Running, Failed], true, None))?),
                [five.id, four.id, two.id]
            );
            assert_eq!(
                ids(tx.runs(&of_s(vec![Pending, Succeeded], false, None))?),
                [done.id, runs[2].id]
            );
            // The previous run is whichever half holds the newest earlier window.
            assert_eq!(tx.previous_run("acme", "s", day(5))?.map(|r| r.id), Some(four.id));
            assert_eq!(
                tx.previous_run("acme", "s", day(4))?.map(|r| r.id),
                Some(runs[2].id)
            );
            assert_eq!(tx.previous_run("acme", "s", day(3))?.map(|r| r.id), Some(two.id));
            assert_eq!(tx.previous_run("acme", "s", day(2))?.map(|r| r.id), Some(done.id));
            // A newer window counts whether or not it is running.
            assert!(tx.has_newer_run("acme", "s", day(4))?, "five, failed");
            let _ = go(tx, &runs[2], Skipped);
            let _ = go(tx, &four, Succeeded);
            assert!(!tx.has_newer_run("acme", "s", day(5))?);
            let six = claim(tx, &insert(tx, "s", "d6", day(6))).run;
            assert!(tx.has_newer_run("acme", "s", day(5))?, "six, running");
            assert!(!tx.has_newer_run("acme", "s", day(6))?);
            assert_eq!(tx.previous_run("acme", "s", day(7))?.map(|r| r.id), Some(six.id));
            // The trace of a schedule holds its running runs' events too.
            tx.append_event(&NewEvent::new(day(6), "probe", json!({})).for_run(&six))?;
            let probes = tx.events(&EventFilter {
                schedule: Some("s".into()),
                kinds: vec!["probe".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(
                probes.iter().map(|e| e.run_id).collect::<Vec<_>>(),
                [Some(six.id)]
            );
            Ok(())
        })
        .unwrap();
}

fn running_counts_by_schedule_tenant_and_pool(store: &Store) {
    store
        .write(|tx| {
            let a = insert(tx, "s", "a", t0());
            let b = insert(tx, "t", "b", t0());
            let mut nc = new_run("s", "c", t0());
            nc.pool = Pool::Backfill;
            nc.tenant = "globex".into();
            let c = tx.insert_run(&nc, t0())?.unwrap();
            let _waiting = insert(tx, "s", "d", t0());
            claim_as(tx, &a, "w", t0() + mins(2));
            claim_as(tx, &b, "w", t0());
            claim_as(tx, &c, "w", t0() + mins(1));
            assert_eq!(tx.count_running(None, None, None)?, 3);
            assert_eq!(tx.count_running(Some("s"), None, None)?, 2);
            assert_eq!(tx.count_running(Some("s"), Some("acme"), None)?, 1);
            assert_eq!(tx.count_running(None, Some("acme"), None)?, 2);
            assert_eq!(tx.count_running(None, None, Some(Pool::Backfill))?, 1);
            assert_eq!(tx.count_running(None, None, Some(Pool::OnTime))?, 2);
            assert_eq!(tx.count_running(Some("t"), None, Some(Pool::Backfill))?, 0);
            let pairs = tx.running_counts()?;
            let key = |t: &str, s: &str| (t.to_string(), s.to_string());
            assert_eq!(pairs.len(), 3, "{pairs:?}");
            assert_eq!(pairs[&key("acme", "s")], 1);
            assert_eq!(pairs[&key("acme", "t")], 1);
            assert_eq!(pairs[&key("globex", "s")], 1);
            let all: Vec<i64> = tx.running_runs(None)?.iter().map(|r| r.id).collect();
            assert_eq!(all, [b.id, c.id, a.id], "soonest lease first");
            let of_s: Vec<i64> = tx.running_runs(Some("s"))?.iter().map(|r| r.id).collect();
            assert_eq!(of_s, [c.id, a.id]);
            Ok(())
        })
        .unwrap();
}

fn recent_runs_are_finished_runs_newest_window_first(store: &Store) {
    store
        .write(|tx| {
            let mut ids = Vec::new();
            for (i, state) in [Succeeded, Failed, Pending, Skipped, Running, Dead, Expired]
                .into_iter()
                .enumerate()
            {
                let run = insert(tx, "s", &format!("w{i}"), t0() + mins(60 * i as i64));
                let run = match state {
                    Pending => run,
                    Running => claim(tx, &run).run,
                    Succeeded | Dead => go(tx, &claim(tx, &run).run, state),
                    _ => go(tx, &run, state),
                };
                ids.push(run.id);
            }
            insert(tx, "other", "w9", t0());
            let recent: Vec<i64> = tx.recent_runs("acme", "s", 3)?.iter().map(|r| r.id).collect();
            assert_eq!(recent, [ids[6], ids[5], ids[3]]);
            let all: Vec<i64> = tx.recent_runs("acme", "s", 10)?.iter().map(|r| r.id).collect();
            assert_eq!(all, [ids[6], ids[5], ids[3], ids[1], ids[0]]);
            Ok(())
        })
        .unwrap();
}

fn execution_memory_is_recent_runs_with_their_last_attempts_words(store: &Store) {
    store
        .write(|tx| {
            let end = |summary: Option<&str>, message: Option<&str>| AttemptEnd {
                summary: summary.map(str::to_string),
                message: message.map(str::to_string),
                ..AttemptEnd::default()
            };
            // Two attempts: the last one's summary, not the first one's message.
            let a = claim(tx, &insert(tx, "s", "w0", t0()));
            tx.end_attempt(
                a.run.id,
                a.fencing_token,
                &end(None, Some("first try failed")),
                t0(),
            )?;
            let retry = go(tx, &a.run, RetryWait);
            let a2 = claim(tx, &retry);
            tx.end_attempt(a2.run.id, a2.fencing_token, &end(Some("sent 3"), None), t0())?;
            let a = go(tx, &a2.run, Succeeded);
            // No summary: the message.
            let b = claim(tx, &insert(tx, "s", "w1", t0() + mins(60)));
            tx.end_attempt(b.run.id, b.fencing_token, &end(None, Some("timed out")), t0())?;
            let change = Change {
                state_reason: Some("retries exhausted".into()),
                ..Change::default()
            };
            let b = tx.transition(b.run.id, Running, Dead, &change, t0(), &[])?;
            // No attempt at all: the state reason.
            let c = insert(tx, "s", "w2", t0() + mins(120));
            let change = Change {
                state_reason: Some("calendar: not a business day".into()),
                ..Change::default()
            };
            let c = tx.transition(c.id, Pending, Skipped, &change, t0(), &[])?;
            // An attempt that said nothing, no reason: nothing.
            let d = claim(tx, &insert(tx, "s", "w3", t0() + mins(180)));
            tx.end_attempt(d.run.id, d.fencing_token, &end(None, None), t0())?;
            let d = go(tx, &d.run, Succeeded);
            // Not finished, or another schedule: not in the memory.
            insert(tx, "s", "w4", t0() + mins(240));
            insert(tx, "other", "w5", t0() + mins(240));

            let memory = tx.execution_memory("acme", "s", 10)?;
            let recent: Vec<i64> = tx.recent_runs("acme", "s", 10)?.iter().map(|r| r.id).collect();
            let ids: Vec<i64> = memory.iter().map(|m| m.run_id).collect();
            assert_eq!(ids, recent);
            assert_eq!(ids, [d.id, c.id, b.id, a.id]);
            let starts: Vec<_> = memory.iter().map(|m| m.window_start).collect();
            assert_eq!(
                starts,
                [d.window_start, c.window_start, b.window_start, a.window_start]
            );
            let words: Vec<Option<&str>> = memory.iter().map(|m| m.summary.as_deref()).collect();
            assert_eq!(
                words,
                [
                    None,
                    Some("calendar: not a business day"),
                    Some("timed out"),
                    Some("sent 3")
                ]
            );
            assert_eq!(&*memory[0].window_key, "w3");
            assert_eq!(memory[1].state, Skipped);
            assert_eq!(tx.execution_memory("acme", "s", 2)?.len(), 2);
            Ok(())
        })
        .unwrap();
}

fn run_listing_filters_and_counts_by_state(store: &Store) {
    store
        .write(|tx| {
            let a = insert(tx, "s", "a", t0());
            let b = insert(tx, "s", "b", t0() + mins(1));
            let c = insert(tx, "t", "c", t0() + mins(2));
            go(tx, &b, Skipped);
            let ids = |f: RunFilter| -> Vec<i64> { tx.runs(&f).unwrap().iter().map(|r| r.id).collect() };
            assert_eq!(ids(RunFilter::default()), [a.id, b.id, c.id]);
            let newest = RunFilter {
                newest_first: true,
                limit: Some(2),
                ..RunFilter::default()
            };
            assert_eq!(ids(newest), [c.id, b.id]);
            let of_s = RunFilter {
                schedule: Some("s".into()),
                ..RunFilter::default()
            };
            assert_eq!(ids(of_s), [a.id, b.id]);
            let waiting = RunFilter {
                states: vec![Pending, RetryWait],
                ..RunFilter::default()
            };
            assert_eq!(ids(waiting), [a.id, c.id]);
            let none = RunFilter {
                tenant: Some("globex".into()),
                ..RunFilter::default()
            };
            assert!(ids(none).is_empty());

            let counts = tx.count_by_state()?;
            assert_eq!(counts.len(), RunState::ALL.len());
            assert!(counts.contains(&(Pending, 2)));
            assert!(counts.contains(&(Skipped, 1)));
            assert!(counts.contains(&(Running, 0)));
            Ok(())
        })
        .unwrap();
}

fn step_journal_tells_completed_from_uncertain(store: &Store) {
    store
        .write(|tx| {
            let run = insert(tx, "s", "w", t0());
            let c1 = claim(tx, &run);
            let step = |token: i64, n: u32, name: &str, status: StepStatus, se: bool| {
                assert!(
                    tx.record_step(run.id, token, n, name, status, se, t0()).unwrap(),
                    "{name} {status:?}"
                );
            };
            step(c1.fencing_token, 1, "fetch", StepStatus::Started, false);
            step(c1.fencing_token, 1, "fetch", StepStatus::Done, false);
            step(c1.fencing_token, 1, "summarize", StepStatus::Started, false);
            step(c1.fencing_token, 1, "summarize", StepStatus::Done, false);
            step(c1.fencing_token, 1, "deliver", StepStatus::Started, true);
            step(c1.fencing_token, 1, "archive", StepStatus::Started, true);
            step(c1.fencing_token, 1, "archive", StepStatus::Failed, true);
            // Attempt 1 dies mid-delivery.
            assert_eq!(tx.completed_steps(run.id)?, ["fetch", "summarize"]);
            assert_eq!(tx.uncertain_steps(run.id)?, ["deliver"]);

            let waiting = go(tx, &tx.run(run.id)?, RetryWait);
            let c2 = claim(tx, &waiting);
            step(c2.fencing_token, 2, "deliver", StepStatus::Done, true);
            step(c2.fencing_token, 2, "fetch", StepStatus::Started, false);
            assert_eq!(tx.completed_steps(run.id)?, ["fetch", "summarize", "deliver"]);
            // The latest word on `fetch` is `started`: uncertain again.
            assert_eq!(tx.uncertain_steps(run.id)?, ["fetch"]);

            let steps = tx.steps(run.id)?;
            assert_eq!(steps.len(), 9);
            assert_eq!(steps[4].name, "deliver");
            assert!(steps[4].side_effect);
            assert_eq!((steps[7].attempt, steps[7].status), (2, StepStatus::Done));
            Ok(())
        })
        .unwrap();
}

fn event_filters_select_and_order(store: &Store) {
    store
        .write(|tx| {
            let a = insert(tx, "s", "a", t0());
            let b = insert(tx, "t", "b", t0());
            let tick = tx.append_event(&NewEvent::new(t0(), "tick", json!({"n": 1})))?;
            let e1 = tx.append_event(&NewEvent::new(t0(), "window_opened", json!({})).for_run(&a))?;
            let e2 = tx.append_event(
                &NewEvent::new(t0(), "gate", json!({"name": "upstream", "result": "wait"})).for_run(&a),
            )?;
            let e3 = tx.append_event(&NewEvent::new(t0(), "gate", json!({})).for_run(&b))?;
            let e4 =
                tx.append_event(&NewEvent::new(t0(), "circuit_opened", json!({})).for_schedule("acme", "s"))?;
            assert!(tick < e1 && e1 < e2 && e2 < e3 && e3 < e4);
            assert_eq!(tx.max_event_id()?, e4);

            let ids = |f: EventFilter| -> Vec<i64> { tx.events(&f).unwrap().iter().map(|e| e.id).collect() };
            assert_eq!(ids(EventFilter::default()), [tick, e1, e2, e3, e4]);
            let of_run = EventFilter {
                run_id: Some(a.id),
                ..EventFilter::default()
            };
            assert_eq!(ids(of_run), [e1, e2]);
            let of_schedule = EventFilter {
                schedule: Some("s".into()),
                ..EventFilter::default()
            };
            assert_eq!(ids(of_schedule), [e1, e2, e4]);
            // The schedule's own events and its runs' are found through
            // different indexes (schema 8): still one order, one limit.
            let newest_of_schedule = EventFilter {
                schedule: Some("s".into()),
                newest_first: true,
                limit: Some(2),
                ..EventFilter::default()
            };
            assert_eq!(ids(newest_of_schedule), [e4, e2]);
            let gates = EventFilter {
                kinds: vec!["gate".into(), "tick".into()],
                ..EventFilter::default()
            };
            assert_eq!(ids(gates), [tick, e2, e3]);
            let tail = EventFilter {
                after_id: Some(e2),
                ..EventFilter::default()
            };
            assert_eq!(ids(tail), [e3, e4]);
            let newest = EventFilter {
                newest_first: true,
                limit: Some(2),
                ..EventFilter::default()
            };
            assert_eq!(ids(newest), [e4, e3]);
            let combined = EventFilter {
                schedule: Some("s".into()),
                kinds: vec!["gate".into()],
                after_id: Some(tick),
                ..EventFilter::default()
            };
            let got = tx.events(&combined)?;
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].detail, json!({"name": "upstream", "result": "wait"}));
            assert_eq!(got[0].at, t0());
            assert_eq!(got[0].tenant.as_deref(), Some("acme"));
            Ok(())
        })
        .unwrap();
}

fn switches_are_upserted_and_traced(store: &Store) {
    store
        .write(|tx| {
            assert_eq!(tx.switch("kill")?, None);
            tx.set_switch("kill", true, "alice", "incident 42", t0())?;
            tx.set_switch("kill", false, "bob", "resolved", t0() + mins(5))?;
            tx.set_switch("pause:s", true, "carol", "upstream migration", t0())?;
            let kill = tx.switch("kill")?.unwrap();
            assert!(!kill.on);
            assert_eq!((kill.actor.as_str(), kill.reason.as_str()), ("bob", "resolved"));
            assert_eq!(kill.at, t0() + mins(5));
            let names: Vec<String> = tx.switches()?.into_iter().map(|s| s.name).collect();
            assert_eq!(names, ["kill", "pause:s"]);
            let changed = tx.events(&EventFilter {
                kinds: vec!["switch_changed".into()],
                ..EventFilter::default()
            })?;
            let details: Vec<_> = changed.iter().map(|e| e.detail.clone()).collect();
            assert_eq!(
                details,
                [
                    json!({"name": "kill", "on": true, "actor": "alice", "reason": "incident 42"}),
                    json!({"name": "kill", "on": false, "actor": "bob", "reason": "resolved"}),
                    json!({"name": "pause:s", "on": true, "actor": "carol", "reason": "upstream migration"}),
                ]
            );
            Ok(())
        })
        .unwrap();
}

fn approvals_are_recorded_per_run(store: &Store) {
    store
        .write(|tx| {
            let run = run_in(tx, NeedsHuman, "w");
            let approve = Approval {
                run_id: run.id,
                approved: true,
                actor: "alice".into(),
                reason: "checked the ledger".into(),
                resume_after: Some("summarize".into()),
                at: t0() + mins(3),
            };
            tx.record_approval(&approve)?;
            let reject = Approval {
                approved: false,
                resume_after: None,
                ..approve.clone()
            };
            tx.record_approval(&reject)?;
            assert_eq!(tx.approvals(run.id)?, [approve.clone(), reject]);
            assert!(tx.approvals(run.id + 1)?.is_empty());
            let orphan = Approval {
                run_id: 4242,
                ..approve
            };
            assert!(matches!(
                tx.record_approval(&orphan),
                Err(StoreError::RunNotFound(4242))
            ));
            Ok(())
        })
        .unwrap();
}

fn maintenance_windows_are_half_open(store: &Store) {
    store
        .write(|tx| {
            let all = tx.add_maintenance(t0(), t0() + mins(60), "db upgrade", "ops", &[], t0())?;
            let some = tx.add_maintenance(
                t0() + mins(30),
                t0() + mins(90),
                "vendor outage",
                "ops",
                &["s".to_string(), "t".to_string()],
                t0(),
            )?;
            let at = |m: i64| -> Vec<i64> {
                tx.maintenance_at(t0() + mins(m))
                    .unwrap()
                    .iter()
                    .map(|w| w.id)
                    .collect()
            };
            assert_eq!(at(-1), Vec::<i64>::new());
            assert_eq!(at(0), [all]);
            assert_eq!(at(45), [all, some]);
            assert_eq!(at(60), [some], "`to` is exclusive");
            assert_eq!(at(90), Vec::<i64>::new());
            let list = tx.maintenance_list()?;
            assert_eq!(list.len(), 2);
            assert!(list[0].schedules.is_empty());
            assert_eq!(list[1].schedules, ["s", "t"]);
            assert_eq!(list[1].reason, "vendor outage");
            assert_eq!((list[1].from, list[1].to), (t0() + mins(30), t0() + mins(90)));
            let traced = tx.events(&EventFilter {
                kinds: vec!["switch_changed".into()],
                ..EventFilter::default()
            })?;
            assert_eq!(traced.len(), 2);
            assert_eq!(traced[1].detail["maintenance_id"], json!(some));
            Ok(())
        })
        .unwrap();
}

fn posted_events_are_deduped_and_read_in_order(store: &Store) {
    store
        .write(|tx| {
            let s1 = tx
                .post_event("ticket", "T-1", &json!({"prio": 1}), t0())?
                .unwrap();
            assert_eq!(tx.post_event("ticket", "T-1", &json!({"prio": 9}), t0())?, None);
            let s2 = tx
                .post_event("deploy", "T-1", &json!(null), t0() + mins(1))?
                .unwrap();
            let s3 = tx
                .post_event("ticket", "T-2", &json!([1, 2]), t0() + mins(2))?
                .unwrap();
            assert!(s1 < s2 && s2 < s3);
            let all = tx.posted_events_after(0, 10)?;
            let seqs: Vec<i64> = all.iter().map(|p| p.seq).collect();
            assert_eq!(seqs, [s1, s2, s3]);
            assert_eq!(all[0].payload, json!({"prio": 1}), "the first post wins");
            assert_eq!(
                (all[0].name.as_str(), all[0].event_id.as_str()),
                ("ticket", "T-1")
            );
            assert_eq!(all[2].arrived_at, t0() + mins(2));
            let after: Vec<i64> = tx.posted_events_after(s1, 1)?.iter().map(|p| p.seq).collect();
            assert_eq!(after, [s2]);
            assert!(tx.posted_events_after(s3, 10)?.is_empty());
            Ok(())
        })
        .unwrap();
}

fn schedule_state_defaults_and_upserts(store: &Store) {
    store
        .write(|tx| {
            let fresh = tx.schedule_state("s")?;
            assert_eq!(fresh, ScheduleState::new("s"));
            assert_eq!(fresh.concurrency_divisor, 1);
            assert_eq!(fresh.circuit, CircuitState::Closed);
            assert!(tx.all_schedule_states()?.is_empty(), "reading stores nothing");

            tx.set_last_evaluated("s", t0())?;
            assert_eq!(tx.schedule_state("s")?.last_evaluated, Some(t0()));
            assert_eq!(tx.schedule_state("s")?.concurrency_divisor, 1);

            let st = ScheduleState {
                schedule: "s".into(),
                last_evaluated: Some(t0() + mins(1)),
                circuit: CircuitState::HalfOpen,
                circuit_changed_at: Some(t0()),
                consecutive_failures: 3,
                paused: true,
                paused_reason: Some("budget".into()),
                concurrency_divisor: 4,
                last_start: Some(t0()),
                last_success: Some(t0() - mins(60)),
            };
            tx.put_schedule_state(&st)?;
            assert_eq!(tx.schedule_state("s")?, st);
            let closed = ScheduleState {
                circuit: CircuitState::Closed,
                consecutive_failures: 0,
                ..st.clone()
            };
            tx.put_schedule_state(&closed)?;
            tx.set_last_evaluated("s", t0() + mins(2))?;
            let got = tx.schedule_state("s")?;
            assert_eq!(got.circuit, CircuitState::Closed);
            assert_eq!(
                got.paused_reason.as_deref(),
                Some("budget"),
                "kept by set_last_evaluated"
            );
            assert_eq!(got.last_evaluated, Some(t0() + mins(2)));
            tx.set_last_evaluated("t", t0())?;
            let names: Vec<String> = tx
                .all_schedule_states()?
                .into_iter()
                .map(|s| s.schedule)
                .collect();
            assert_eq!(names, ["s", "t"]);
            Ok(())
        })
        .unwrap();
}

/// Counts by state, the slow way: every run, counted here.
fn counted(tx: &Tx) -> Vec<(RunState, u64)> {
    let runs = tx.runs(&RunFilter::default()).unwrap();
    RunState::ALL
        .iter()
        .map(|s| (*s, runs.iter().filter(|r| r.state == *s).count() as u64))
        .collect()
}

fn sorted(mut v: Vec<(RunState, u64)>) -> Vec<(RunState, u64)> {
    v.sort_by_key(|(s, _)| s.as_str());
    v
}

fn run_counts_follow_every_insert_and_transition(store: &Store) {
    store
        .write(|tx| {
            for (i, to) in [Succeeded, Skipped, NeedsHuman, Running, Pending, Expired, Missed]
                .into_iter()
                .enumerate()
            {
                run_in(tx, to, &format!("w{i}"));
                assert_eq!(sorted(tx.count_by_state()?), sorted(counted(tx)), "after {to}");
            }
            let r = run_in(tx, RetryWait, "w-retry");
            go(tx, &r, Running);
            assert_eq!(sorted(tx.count_by_state()?), sorted(counted(tx)));
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_migration_counts_the_runs_an_older_database_already_has() {
    let (_dir, path) = temp_db();
    {
        let store = Store::open(&path).unwrap();
        store
            .write(|tx| {
                run_in(tx, Succeeded, "a");
                run_in(tx, Succeeded, "b");
                run_in(tx, Failed, "c");
                insert(tx, "s", "d", t0());
                Ok(())
            })
            .unwrap();
    }
    // Back to schema 1, as a database written before the counts existed.
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TRIGGER IF EXISTS run_counts_insert; DROP TRIGGER IF EXISTS run_counts_update; \
             DROP TRIGGER IF EXISTS run_counts_delete; DROP TABLE run_counts; \
             DROP INDEX runs_due_on_time; DROP INDEX runs_due_backfill; DROP INDEX runs_waiting; \
             DROP TABLE catchup_backlog; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    store
        .read(|tx| {
            let counts = tx.count_by_state()?;
            assert!(counts.contains(&(Succeeded, 2)), "{counts:?}");
            assert!(counts.contains(&(Failed, 1)), "{counts:?}");
            assert!(counts.contains(&(Pending, 1)), "{counts:?}");
            assert_eq!(sorted(counts), sorted(counted(tx)));
            Ok(())
        })
        .unwrap();
}

/// Stored configurations and schedule versions read back as written, one
/// by number and all in order, and a renamed schedule keeps its versions,
/// its state and its runs under the new id.
fn config_versions_and_schedule_renames_read_back(store: &Store) {
    store
        .write(|tx| {
            let a = tx.insert_config_version(
                "h1",
                "/etc/a.toml",
                "x = 1",
                t0(),
                "vm:1",
                ConfigStatus::Applied,
                None,
            )?;
            let b = tx.insert_config_version(
                "h2",
                "/etc/a.toml",
                "x = 2",
                t0() + mins(1),
                "vm:1",
                ConfigStatus::Waiting,
                Some("gated"),
            )?;
            assert!(b > a);
            tx.set_current_config(a)?;
            let one = tx.config_version(b)?.expect("version b");
            assert_eq!((one.hash.as_str(), one.text.as_str()), ("h2", "x = 2"));
            assert_eq!(
                (one.status, one.note.as_deref()),
                (ConfigStatus::Waiting, Some("gated"))
            );
            assert_eq!(one.loaded_at, t0() + mins(1));
            assert_eq!(tx.config_version(b + 100)?, None);
            let all: Vec<i64> = tx.config_versions()?.iter().map(|v| v.version).collect();
            assert_eq!(all, [a, b]);
            assert_eq!(tx.current_config()?.map(|v| v.version), Some(a));
            let (watched, seq) = tx.config_watch()?;
            assert_eq!(watched, Some(a));
            assert_eq!(tx.request_reload()?, seq + 1);
            let settings: std::collections::BTreeMap<String, String> =
                [("cron".to_string(), "0 9 * * *".to_string())].into();
            tx.put_schedule_version(&ScheduleVersion {
                schedule: "old".into(),
                version: 1,
                hash: "s1".into(),
                settings: settings.clone(),
                config_version: a,
                created_at: t0(),
            })?;
            tx.insert_run(&new_run("old", "w1", t0()), t0())?;
            tx.set_last_evaluated("old", t0())?;
            tx.rename_schedule("old", "new")?;
            // The rename moves the history; the reload that renamed it
            // makes the new id's version current.
            assert!(tx.current_schedule_versions()?.is_empty());
            tx.set_schedule_current("new", 1)?;
            let current = tx.current_schedule_versions()?;
            assert_eq!(current.keys().collect::<Vec<_>>(), ["new"]);
            assert_eq!(current["new"].settings, settings);
            assert_eq!(current["new"].config_version, a);
            assert_eq!(tx.schedule_version("new", 1)?.map(|v| v.hash), Some("s1".into()));
            assert!(tx.find_run("acme", "new", "w1")?.is_some());
            assert!(tx.find_run("acme", "old", "w1")?.is_none());
            assert_eq!(tx.schedule_state("new")?.last_evaluated, Some(t0()));
            Ok(())
        })
        .unwrap();
}

/// The ledger answers `/readyz`'s question (its schema version, which this
/// build must match) and its size, from the ledger itself on every database.
fn the_ledger_reports_its_schema_and_size(store: &Store) {
    store
        .read(|tx| {
            assert_eq!(tx.schema_version()?, tx.build_schema_version());
            let expected = if store.is_postgres() {
                agentcron::store::pg::PG_SCHEMA_VERSION
            } else {
                agentcron::store::SCHEMA_VERSION
            };
            assert_eq!(tx.build_schema_version(), expected);
            assert!(tx.database_bytes()? > 0);
            Ok(())
        })
        .unwrap();
}

conformance!(
    one_run_per_window,
    an_inserted_run_is_returned_as_it_was_stored,
    pending_runs_default_to_being_checked_when_due,
    due_runs_are_pending_or_retrying_and_due_oldest_check_first,
    next_due_check_ignores_runs_not_waiting,
    set_next_check_only_moves_waiting_runs,
    a_freed_slot_wakes_the_head_of_its_schedules_queue,
    expired_leases_are_running_runs_past_their_lease,
    previous_run_is_the_latest_earlier_window_of_the_same_schedule,
    a_schedules_running_runs_are_part_of_its_history,
    running_counts_by_schedule_tenant_and_pool,
    recent_runs_are_finished_runs_newest_window_first,
    execution_memory_is_recent_runs_with_their_last_attempts_words,
    run_listing_filters_and_counts_by_state,
    step_journal_tells_completed_from_uncertain,
    event_filters_select_and_order,
    switches_are_upserted_and_traced,
    approvals_are_recorded_per_run,
    maintenance_windows_are_half_open,
    posted_events_are_deduped_and_read_in_order,
    schedule_state_defaults_and_upserts,
    run_counts_follow_every_insert_and_transition,
    config_versions_and_schedule_renames_read_back,
    the_ledger_reports_its_schema_and_size,
);
