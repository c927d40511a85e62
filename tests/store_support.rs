//! Shared helpers for the `store_*` tests: fixed instants, new runs, and a way
//! to bring a run into any state through legal paths only. Included with
//! `#[path]` by the other files; compiled alone it is an empty test crate.
#![allow(dead_code)]

use agentcron::store::*;
use chrono::{DateTime, Duration, Utc};
use std::path::PathBuf;

pub fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test instant")
        .with_timezone(&Utc)
}

/// 2026-06-06T09:00:00Z, the instant every test starts from.
pub fn t0() -> DateTime<Utc> {
    t("2026-06-06T09:00:00Z")
}

pub fn mins(n: i64) -> Duration {
    Duration::minutes(n)
}

pub fn new_run(schedule: &str, key: &str, start: DateTime<Utc>) -> NewRun {
    NewRun {
        tenant: "acme".into(),
        schedule: schedule.into(),
        window_key: key.into(),
        window_start: start,
        window_end: start + mins(60),
        due_at: start,
        state: RunState::Pending,
        reason: RunReason::Scheduled,
        pool: Pool::OnTime,
        state_reason: None,
        next_check_at: Some(start),
    }
}

pub fn insert(tx: &Tx, schedule: &str, key: &str, start: DateTime<Utc>) -> Run {
    tx.insert_run(&new_run(schedule, key, start), t0())
        .expect("insert")
        .expect("new window")
}

pub fn claim_as(tx: &Tx, run: &Run, owner: &str, now: DateTime<Utc>) -> Claim {
    tx.claim(
        run.id,
        run.state,
        owner,
        now + mins(1),
        RunReason::Scheduled,
        run.due_at,
        now,
    )
    .expect("claim")
    .expect("claim won")
}

pub fn claim(tx: &Tx, run: &Run) -> Claim {
    claim_as(tx, run, "worker-1", t0())
}

pub fn go(tx: &Tx, run: &Run, to: RunState) -> Run {
    tx.transition(run.id, run.state, to, &Change::default(), t0(), &[])
        .expect("legal transition")
}

/// A fresh run (window `key` of schedule `s`) brought into `state` through
/// claims and legal transitions only.
pub fn run_in(tx: &Tx, state: RunState, key: &str) -> Run {
    use RunState::*;
    let run = insert(tx, "s", key, t0());
    match state {
        Pending => run,
        Running => claim(tx, &run).run,
        RetryWait | Succeeded | Dead => {
            let running = claim(tx, &run).run;
            go(tx, &running, state)
        }
        NeedsHuman | Failed | Skipped | Missed | Expired => go(tx, &run, state),
    }
}

pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agentcron.db");
    (dir, path)
}
