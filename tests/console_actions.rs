//! The console's operator actions against a real database: every [`Cmd`] that
//! changes the world goes through `console::actions::perform` (what the shell
//! runs) and lands in the store with who, why and the event the trace needs;
//! refusals come back as the status line. Runs are prepared by the engine on a
//! virtual clock.

mod support;

use agentcron::console::actions::{perform, preview};
use agentcron::console::app::Cmd;
use agentcron::console::dialogs::Intent;
use agentcron::rehearsal::sim::{SimAttempt, SimEnd};
use agentcron::store::types::*;
use chrono::TimeDelta;
use support::*;

const HOURLY: &str = r#"
[[schedule]]
id = "hourly"
agent = "sim"
cron = "0 * * * *"
close_after = "30m"
retry = { max_attempts = 1 }
"#;

fn exits(code: i32) -> agentcron::rehearsal::sim::SimAgent {
    sim_agent(vec![SimAttempt {
        end: SimEnd::Exit(code),
        latency: TimeDelta::seconds(10),
        ..Default::default()
    }])
}

const ACTOR: &str = "alice";

#[test]
fn approve_and_reject_need_a_waiting_run_and_record_who_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2027-06-01T01:59:00Z",
        vec![("hourly", exits(77))],
        vec![],
    );
    d.run_until(t("2027-06-01T03:05:00Z")).unwrap();
    let store = d.store().unwrap();
    let waiting: Vec<Run> = runs(&store, "hourly")
        .into_iter()
        .filter(|r| r.state == RunState::NeedsHuman)
        .collect();
    assert_eq!(waiting.len(), 2, "two windows parked for a human");
    let now = d.now();
    let (a, b) = (waiting[0].id, waiting[1].id);

    let text = perform(
        &store,
        &cfg,
        &Cmd::Approve {
            run: a,
            reason: "refund list checked".into(),
            resume_after: Some("fetch".into()),
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert!(
        text.contains(&format!("#{a} approved by alice, resuming after step fetch")),
        "{text}"
    );
    let run = store.read(|tx| tx.run(a)).unwrap();
    assert_eq!(run.state, RunState::RetryWait);
    assert_eq!(
        run.resume_after.as_deref(),
        Some("fetch"),
        "as `approve --resume-after`"
    );
    let approvals = store.read(|tx| tx.approvals(a)).unwrap();
    assert_eq!(
        (
            approvals[0].approved,
            approvals[0].actor.as_str(),
            approvals[0].reason.as_str()
        ),
        (true, ACTOR, "refund list checked")
    );
    let ev = events(&store, a)
        .into_iter()
        .find(|e| e.kind == "approved")
        .expect("approved event");
    assert_eq!(ev.detail["reason"], "refund list checked");
    assert_eq!(ev.detail["by"], ACTOR);

    // Twice: a repeat, said as on the command line (issue 19), the first
    // reason kept; rejecting it now is refused by the state machine, in words.
    let again = Cmd::Approve {
        run: a,
        reason: "again".into(),
        resume_after: None,
    };
    let said = perform(&store, &cfg, &again, ACTOR, now).unwrap();
    assert!(
        said.contains("already approved") && said.contains("refund list checked"),
        "{said}"
    );
    let late = Cmd::Reject {
        run: a,
        reason: "late".into(),
    };
    let err = perform(&store, &cfg, &late, ACTOR, now).unwrap_err();
    assert!(err.contains("not waiting for approval"), "{err}");

    perform(
        &store,
        &cfg,
        &Cmd::Reject {
            run: b,
            reason: "duplicate refunds".into(),
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert_eq!(store.read(|tx| tx.run(b)).unwrap().state, RunState::Failed);
    assert!(kinds(&store, b).contains(&"rejected".to_string()));
    // An empty reason is refused even if a dialog let it through.
    let err = perform(
        &store,
        &cfg,
        &Cmd::Reject {
            run: 999,
            reason: " ".into(),
        },
        ACTOR,
        now,
    )
    .unwrap_err();
    assert!(err.contains("reason"), "{err}");
}

#[test]
fn kill_switch_pause_resume_trigger_and_circuit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2027-06-01T01:59:00Z",
        vec![("hourly", exits(0))],
        vec![],
    );
    d.run_until(t("2027-06-01T02:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let now = d.now();
    let kill = |on: bool, reason: &str| Cmd::SetKill {
        on,
        reason: reason.into(),
        cancel_running: false,
    };

    perform(&store, &cfg, &kill(true, "incident 4711"), ACTOR, now).unwrap();
    let sw = store.read(|tx| tx.switch("kill")).unwrap().expect("kill switch");
    assert!(sw.on);
    assert_eq!((sw.actor.as_str(), sw.reason.as_str()), (ACTOR, "incident 4711"));
    perform(&store, &cfg, &kill(false, "resolved"), ACTOR, now).unwrap();
    assert!(!store.read(|tx| tx.switch("kill")).unwrap().expect("kill").on);
    // `:kill --cancel-running`: the same switch the CLI's `kill --cancel-running`
    // sets, which every engine reads to stop its running attempts.
    let cancelling = Cmd::SetKill {
        on: true,
        reason: "runaway agent".into(),
        cancel_running: true,
    };
    let text = perform(&store, &cfg, &cancelling, ACTOR, now).unwrap();
    assert!(text.contains("running attempts are being cancelled"), "{text}");
    let cancel = store
        .read(|tx| tx.switch("cancel_running"))
        .unwrap()
        .expect("cancel switch");
    assert!(cancel.on && cancel.reason == "runaway agent", "{cancel:?}");
    perform(&store, &cfg, &kill(false, "agent fixed"), ACTOR, now).unwrap();
    assert!(
        !store
            .read(|tx| tx.switch("cancel_running"))
            .unwrap()
            .expect("cancel")
            .on
    );

    // Pause, then the resume dialog's plan, then resume.
    let pause = Cmd::Pause {
        schedule: "hourly".into(),
        reason: "upstream migration".into(),
    };
    perform(&store, &cfg, &pause, ACTOR, now).unwrap();
    assert!(store.read(|tx| tx.schedule_state("hourly")).unwrap().paused);
    let resume = Intent::Resume {
        schedule: "hourly".into(),
    };
    let plan = preview(&store, &cfg, &resume, ACTOR, now).unwrap();
    assert!(plan.actionable);
    assert!(plan.lines[0].contains("upstream migration"), "{:?}", plan.lines);
    perform(
        &store,
        &cfg,
        &Cmd::Resume {
            schedule: "hourly".into(),
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert!(!store.read(|tx| tx.schedule_state("hourly")).unwrap().paused);
    let changes = schedule_events(&store, "hourly", "switch_changed");
    assert_eq!(changes.len(), 2, "pause and resume are in the trace: {changes:?}");
    assert_eq!(changes[0].detail["reason"], "upstream migration");
    let err = preview(&store, &cfg, &resume, ACTOR, now).unwrap_err();
    assert!(err.contains("not paused"), "{err}");

    // Trigger now: a manual run through the gates.
    let text = perform(
        &store,
        &cfg,
        &Cmd::Trigger {
            schedule: "hourly".into(),
        },
        ACTOR,
        now,
    )
    .unwrap();
    let manual: Vec<Run> = runs(&store, "hourly")
        .into_iter()
        .filter(|r| r.reason == RunReason::Manual)
        .collect();
    assert_eq!(manual.len(), 1, "{text}");
    assert!(text.contains(&manual[0].window_key), "{text}");

    // A closed circuit is not closed again: "already closed", not an error (issue 19).
    let said = perform(
        &store,
        &cfg,
        &Cmd::CloseCircuit {
            schedule: "hourly".into(),
            reason: "probe".into(),
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert!(said.contains("already closed"), "{said}");
    // Unknown schedules are named.
    let err = perform(
        &store,
        &cfg,
        &Cmd::Pause {
            schedule: "nope".into(),
            reason: "x".into(),
        },
        ACTOR,
        now,
    )
    .unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn dead_letters_are_requeued_and_backfill_previews_before_it_queues() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir, &format!("{BASE}{HOURLY}"));
    let mut d = driver(
        &dir,
        cfg.clone(),
        "2027-06-01T01:59:00Z",
        vec![("hourly", exits(75))],
        vec![],
    );
    d.run_until(t("2027-06-01T02:30:00Z")).unwrap();
    let store = d.store().unwrap();
    let now = d.now();
    let dead = runs(&store, "hourly").pop().unwrap();
    assert_eq!(
        dead.state,
        RunState::Dead,
        "one attempt allowed, retryable failure"
    );
    perform(
        &store,
        &cfg,
        &Cmd::Requeue {
            run: dead.id,
            reason: "upstream fixed".into(),
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert_eq!(
        store.read(|tx| tx.run(dead.id)).unwrap().state,
        RunState::RetryWait
    );
    assert!(kinds(&store, dead.id).contains(&"requeued".to_string()));

    // Backfill 22:00–01:00 UTC: the plan first (nothing written), then the queue.
    let (from, to) = (t("2027-05-31T22:00:00Z"), t("2027-06-01T01:00:00Z"));
    let intent = Intent::Backfill {
        schedule: "hourly".into(),
        from,
        to,
        range: "22:00 → 01:00".into(),
    };
    let before = runs(&store, "hourly").len();
    let plan = preview(&store, &cfg, &intent, ACTOR, now).unwrap();
    assert!(plan.actionable);
    assert!(
        plan.lines[1].starts_with("4 window(s) will be queued"),
        "{:?}",
        plan.lines
    );
    assert_eq!(runs(&store, "hourly").len(), before, "a preview writes nothing");
    let text = perform(
        &store,
        &cfg,
        &Cmd::Backfill {
            schedule: "hourly".into(),
            from,
            to,
        },
        ACTOR,
        now,
    )
    .unwrap();
    assert!(text.contains("4 window(s) queued"), "{text}");
    let queued = runs(&store, "hourly")
        .into_iter()
        .filter(|r| r.pool == Pool::Backfill && r.reason == RunReason::Manual)
        .count();
    assert_eq!(queued, 4);
    // Again: everything is left alone, and the dialog cannot confirm.
    let plan = preview(&store, &cfg, &intent, ACTOR, now).unwrap();
    assert!(!plan.actionable, "{:?}", plan.lines);
}
