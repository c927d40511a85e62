//! The recovery rules (DESIGN.md "Recovery rules") with real agent processes on
//! a virtual clock: a ledger-writing agent, told per attempt what to do, run by
//! the real engine and runner. Every case asserts run state, attempts, the
//! event trail and the ledger of side effects.

#[path = "store_support.rs"]
mod store_support;
mod support;

use agentcron::config::model::ErrorClass;
use agentcron::operator::{self, ActionError};
use agentcron::store::types::*;
use serde_json::json;
use support::real::*;
use support::*;

/// A daily 09:00 UTC schedule `report` of agent `bot` with `extra` lines.
fn daily(timeout: &str, verify: bool, extra: &str) -> String {
    format!(
        r#"{}
[[schedule]]
id = "report"
agent = "bot"
cron = "0 9 * * *"
close_after = "1h"
{extra}
"#,
        base(timeout, verify)
    )
}

fn ms(s: &str) -> String {
    // Event details carry instants as RFC 3339 with milliseconds.
    t(s).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

const KEY: &str = "default/report/2026-06-06";

/// Three attempts, one minute apart.
const RETRY_1M: &str =
    r#"retry = { max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_then_retry_delivers_exactly_once() {
    let mut h = Real::new(&daily("4s", false, RETRY_1M), "2026-06-06T08:59:00Z");
    // Attempt 1 fetches, then hangs before deliver until the 2 s timeout kills it.
    h.script(json!({"1": {"sleep_before": {"deliver": 30}}}));
    h.run_until("2026-06-06T10:00:00Z").await;

    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.attempts, 2);
    let attempts = h.attempts(run.id);
    assert_eq!(attempts[0].status, AttemptStatus::TimedOut);
    assert_eq!(attempts[0].error_class, Some(ErrorClass::Retryable));
    assert_eq!(attempts[1].status, AttemptStatus::Succeeded);
    assert_eq!(attempts[1].reason, RunReason::Retry);
    assert_eq!(
        trail(&h.store, run.id),
        [
            "window_opened",
            "claimed",
            "started",
            "step fetch started",
            "step fetch done",
            "failed",
            "retry_scheduled",
            "claimed",
            "started",
            "step deliver started",
            "step deliver done",
            "succeeded",
        ]
    );
    let failed = &of_kind(&h.store, run.id, "failed")[0];
    assert_eq!(failed.detail["class"], "retryable");
    assert_eq!(failed.detail["reason"], "timed out after 4s");
    let retry = &of_kind(&h.store, run.id, "retry_scheduled")[0];
    assert_eq!(retry.detail["not_before"], ms("2026-06-06T09:01:00Z"));
    let claims = of_kind(&h.store, run.id, "claimed");
    assert_eq!(claims[1].at, t("2026-06-06T09:01:00Z"));
    // Attempt 2 was told fetch is done and did only deliver: one side effect.
    assert_eq!(h.envelope(run.id, 2)["completed_steps"], json!(["fetch"]));
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=2")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_back_off_exponentially_then_dead_letter_then_requeue() {
    let mut h = Real::new(
        &daily(
            "30s",
            false,
            // 1m, then 2m capped at 90s.
            r#"retry = { max_attempts = 3, backoff = "exponential", initial = "1m", max = "90s", jitter = 0.0 }"#,
        ),
        "2026-06-06T08:59:00Z",
    );
    h.script(json!({"*": {"do": ["fetch"], "exit": 75}, "4": {}}));
    h.run_until("2026-06-06T09:30:00Z").await;

    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Dead);
    assert_eq!(run.attempts, 3);
    let attempts = h.attempts(run.id);
    assert!(
        attempts
            .iter()
            .all(|a| a.status == AttemptStatus::Failed && a.exit_code == Some(75))
    );
    let claimed: Vec<_> = of_kind(&h.store, run.id, "claimed")
        .into_iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(
        claimed,
        [
            t("2026-06-06T09:00:00Z"),
            t("2026-06-06T09:01:00Z"),
            t("2026-06-06T09:02:30Z")
        ]
    );
    let not_before: Vec<_> = of_kind(&h.store, run.id, "retry_scheduled")
        .into_iter()
        .map(|e| e.detail["not_before"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        not_before,
        [ms("2026-06-06T09:01:00Z"), ms("2026-06-06T09:02:30Z")]
    );
    let dead = of_kind(&h.store, run.id, "dead_lettered");
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].at, t("2026-06-06T09:02:30Z"));
    assert_eq!(dead[0].detail["attempts"], 3);
    let alerts = of_kind(&h.store, run.id, "alert");
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].detail["what"], "dead_lettered");
    assert_eq!(h.alert_lines().len(), 1, "the sink got the alert too");
    assert_eq!(trail(&h.store, run.id).last().map(String::as_str), Some("alert"));

    // The dead-letter queue: requeue (who, why) → retry_wait, claimed at once.
    let now = h.now();
    let err = operator::requeue(&h.store, run.id, "alice", "", now).unwrap_err();
    assert!(matches!(err, ActionError::Refused(_)), "a reason is required");
    let requeued = operator::requeue(&h.store, run.id, "alice", "upstream fixed", now).unwrap();
    assert_eq!(requeued.state, RunState::RetryWait);
    let ev = &of_kind(&h.store, run.id, "requeued")[0];
    assert_eq!(
        (ev.detail["by"].as_str(), ev.detail["from"].as_str()),
        (Some("alice"), Some("dead"))
    );
    h.run_until("2026-06-06T10:00:00Z").await;
    let run = h.run(run.id);
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.attempts, 4);
    assert_eq!(
        of_kind(&h.store, run.id, "claimed").last().unwrap().at,
        t("2026-06-06T09:30:00Z")
    );
    // A succeeded run is not in the queue any more.
    let err = operator::requeue(&h.store, run.id, "alice", "again", h.now()).unwrap_err();
    assert!(matches!(err, ActionError::Refused(_)));
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=4")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_65_fails_at_once_and_alerts() {
    let mut h = Real::new(&daily("30s", false, ""), "2026-06-06T08:59:00Z");
    h.script(json!({"*": {"do": ["fetch"], "exit": 65}}));
    h.run_until("2026-06-06T12:00:00Z").await;

    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(run.attempts, 1);
    assert_eq!(run.error_class, Some(ErrorClass::NonRetryable));
    assert_eq!(
        trail(&h.store, run.id),
        [
            "window_opened",
            "claimed",
            "started",
            "step fetch started",
            "step fetch done",
            "failed",
            "alert"
        ]
    );
    let failed = &of_kind(&h.store, run.id, "failed")[0];
    assert_eq!(failed.detail["class"], "non_retryable");
    assert_eq!(failed.detail["final"], true);
    assert_eq!(failed.detail["reason"], "exit code 65 (EX_DATAERR)");
    assert_eq!(failed.at, t("2026-06-06T09:00:00Z"));
    let lines = h.alert_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["what"], "failed");
    assert_eq!(lines[0]["run"], run.id);
    assert_eq!(lines[0]["schedule"], "report");
    assert!(h.ledger().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_77_waits_for_a_human_who_approves_or_rejects() {
    let mut h = Real::new(&daily("30s", false, ""), "2026-06-06T08:59:00Z");
    // Every first attempt needs a human; a second attempt (after approval) succeeds.
    h.script(json!({"1": {"do": ["fetch"], "exit": 77}}));
    h.run_until("2026-06-06T09:10:00Z").await;

    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::NeedsHuman);
    assert_eq!(run.error_class, Some(ErrorClass::NeedsHuman));
    let parked = of_kind(&h.store, run.id, "parked_for_human");
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].at, t("2026-06-06T09:00:00Z"));
    assert_eq!(
        of_kind(&h.store, run.id, "alert")[0].detail["what"],
        "needs_human"
    );

    let approved = operator::approve(&h.store, run.id, "alice", "refund checked", None, h.now()).unwrap();
    assert_eq!(approved.state, RunState::RetryWait);
    // Approving twice is a repeat (issue 19): already approved, the first reason kept.
    let again = operator::approve(&h.store, run.id, "alice", "twice", None, h.now());
    assert!(
        matches!(&again, Err(ActionError::Already(t)) if t.contains("refund checked")),
        "{again:?}"
    );
    h.run_until("2026-06-07T09:10:00Z").await;

    let run = h.run(run.id);
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.attempts, 2);
    assert_eq!(
        of_kind(&h.store, run.id, "claimed")[1].at,
        t("2026-06-06T09:10:00Z"),
        "claimed when approved"
    );
    let ev = &of_kind(&h.store, run.id, "approved")[0];
    assert_eq!(ev.detail["by"], "alice");
    assert_eq!(ev.detail["reason"], "refund checked");
    assert_eq!(ev.at, t("2026-06-06T09:10:00Z"));
    let approvals = h.store.read(|tx| tx.approvals(run.id)).unwrap();
    assert_eq!(approvals.len(), 1);
    assert!(approvals[0].approved);
    assert_eq!(approvals[0].actor, "alice");
    assert_eq!(approvals[0].reason, "refund checked");
    assert_eq!(approvals[0].at, t("2026-06-06T09:10:00Z"));
    // Approving it again once it ran is still a repeat of that approval (issue 19).
    let done = operator::approve(&h.store, run.id, "alice", "late", None, h.now());
    assert!(matches!(done, Err(ActionError::Already(_))), "{done:?}");

    // The second day's run: rejected.
    let run2 = run_by_key(&h.store, "report", "2026-06-07");
    assert_eq!(run2.state, RunState::NeedsHuman);
    let rejected = operator::reject(
        &h.store,
        Some(&h.cfg),
        run2.id,
        "bob",
        "not safe to resend",
        h.now(),
    )
    .unwrap();
    assert_eq!(rejected.state, RunState::Failed);
    h.run_until("2026-06-07T12:00:00Z").await;
    let run2 = h.run(run2.id);
    assert_eq!(run2.state, RunState::Failed);
    assert_eq!(run2.attempts, 1);
    assert!(
        run2.state_reason
            .as_deref()
            .unwrap()
            .contains("not safe to resend")
    );
    let ev = &of_kind(&h.store, run2.id, "rejected")[0];
    assert_eq!(ev.detail["by"], "bob");
    assert_eq!(ev.detail["reason"], "not safe to resend");
    assert_eq!(ev.at, t("2026-06-07T09:10:00Z"));
    let approvals = h.store.read(|tx| tx.approvals(run2.id)).unwrap();
    assert_eq!(approvals.len(), 1);
    assert!(!approvals[0].approved);
    assert_eq!(
        (approvals[0].actor.as_str(), approvals[0].at),
        ("bob", t("2026-06-07T09:10:00Z"))
    );
    // Rejecting twice is a repeat (issue 19): already rejected, nothing changes.
    let err = operator::reject(&h.store, Some(&h.cfg), run2.id, "bob", "again", h.now());
    assert!(matches!(err, Err(ActionError::Already(_))), "{err:?}");
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=2")]);
}

const CRASH_RETRY: &str =
    r#"retry = { max_attempts = 5, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_deliver_without_verify_asks_a_human() {
    let mut h = Real::new(&daily("30s", false, CRASH_RETRY), "2026-06-06T08:59:00Z");
    h.script(json!({"1": {"crash_in": "deliver", "landed": true}}));
    h.run_until("2026-06-06T12:00:00Z").await;

    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::NeedsHuman);
    assert_eq!(run.attempts, 1);
    let reason = run.state_reason.clone().unwrap();
    assert!(
        reason.contains("side-effect step deliver") && reason.contains("cannot be verified"),
        "{reason}"
    );
    let failed = &of_kind(&h.store, run.id, "failed")[0];
    assert_eq!(failed.detail["class"], "needs_human");
    assert!(failed.detail["reason"].as_str().unwrap().contains("SIGKILL"));
    assert!(of_kind(&h.store, run.id, "retry_scheduled").is_empty());
    assert_eq!(
        h.store.read(|tx| tx.uncertain_steps(run.id)).unwrap(),
        ["deliver"]
    );
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=1")]);
}

/// Crash during deliver, `verify = true`: the next attempt only checks whether
/// it landed; then a normal attempt finishes the work without repeating it.
async fn crash_then_verify(landed: bool) -> (Real, Run) {
    let mut h = Real::new(&daily("30s", true, CRASH_RETRY), "2026-06-06T08:59:00Z");
    h.script(json!({"1": {"crash_in": "deliver", "landed": landed}}));
    h.run_until("2026-06-06T12:00:00Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(run.attempts, 3);
    let failed = &of_kind(&h.store, run.id, "failed")[0];
    assert_eq!(failed.detail["class"], "retryable");
    let verify = h.envelope(run.id, 2);
    assert_eq!(verify["reason"], "verify");
    assert_eq!(verify["verify_step"], "deliver");
    assert_eq!(verify["uncertain_steps"], json!(["deliver"]));
    assert_eq!(h.attempts(run.id)[1].reason, RunReason::Verify);
    let normal = h.envelope(run.id, 3);
    assert_eq!(normal["reason"], "retry");
    assert_eq!(normal["verify_step"], serde_json::Value::Null);
    assert_eq!(normal["uncertain_steps"], json!([]));
    // The verify answer is journaled on attempt 2.
    let verified: Vec<_> = h
        .steps(run.id)
        .into_iter()
        .filter(|s| s.attempt == 2)
        .map(|s| (s.name, s.status))
        .collect();
    let status = if landed {
        StepStatus::Done
    } else {
        StepStatus::Failed
    };
    assert_eq!(verified, [("deliver".to_string(), status)]);
    let retries = of_kind(&h.store, run.id, "retry_scheduled");
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[1].detail["after"], "verify");
    (h, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_deliver_that_landed_is_verified_and_not_repeated() {
    let (h, run) = crash_then_verify(true).await;
    assert_eq!(
        h.envelope(run.id, 3)["completed_steps"],
        json!(["fetch", "deliver"])
    );
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=1")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_deliver_that_did_not_land_delivers_exactly_once() {
    let (h, run) = crash_then_verify(false).await;
    assert_eq!(h.envelope(run.id, 3)["completed_steps"], json!(["fetch"]));
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=3")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn circuit_opens_after_three_failed_runs_and_one_probe_closes_it() {
    let toml = format!(
        r#"{}
[[schedule]]
id = "poller"
owner = "ops@example.com"
agent = "bot"
every = "10m"
close_after = "5m"
circuit = {{ open_after = 3, cool_down = "25m" }}
"#,
        base("30s", false)
    );
    let mut h = Real::new(&toml, "2026-06-06T00:00:00Z");
    h.script(json!({"*": {"do": ["fetch"], "exit": 65}}));
    h.run_until("2026-06-06T00:45:00Z").await;
    // The upstream is fixed; the next runs would succeed.
    h.script(json!({}));
    h.run_until("2026-06-06T01:05:00Z").await;

    let runs = runs(&h.store, "poller");
    let states: Vec<_> = runs.iter().map(|r| (r.window_start, r.state)).collect();
    use RunState::*;
    assert_eq!(
        states,
        [
            (t("2026-06-06T00:00:00Z"), Failed),
            (t("2026-06-06T00:10:00Z"), Failed),
            (t("2026-06-06T00:20:00Z"), Failed),
            (t("2026-06-06T00:30:00Z"), Skipped),
            (t("2026-06-06T00:40:00Z"), Skipped),
            (t("2026-06-06T00:50:00Z"), Succeeded),
            (t("2026-06-06T01:00:00Z"), Succeeded),
        ]
    );
    for r in &runs[3..5] {
        let why = r.state_reason.as_deref().unwrap();
        assert!(why.contains("circuit_open"), "{why}");
        assert_eq!(r.attempts, 0);
    }
    let opened = schedule_events(&h.store, "poller", "circuit_opened");
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].at, t("2026-06-06T00:20:00Z"));
    assert_eq!(opened[0].detail["probe_after"], ms("2026-06-06T00:45:00Z"));
    let circuit_alerts: Vec<_> = schedule_events(&h.store, "poller", "alert")
        .into_iter()
        .filter(|e| e.detail["what"] == "circuit_opened")
        .collect();
    assert_eq!(circuit_alerts.len(), 1);
    assert_eq!(circuit_alerts[0].detail["owner"], "ops@example.com");
    // After the cool-down exactly one probe: the 00:50 window, claimed half-open.
    let half = schedule_events(&h.store, "poller", "circuit_half_open");
    assert_eq!(half.len(), 1);
    assert_eq!(half[0].at, t("2026-06-06T00:50:00Z"));
    let probe = &runs[5];
    assert_eq!(probe.attempts, 1);
    let closed = schedule_events(&h.store, "poller", "circuit_closed");
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].at, t("2026-06-06T00:50:00Z"));
    let st = h.schedule_state("poller");
    assert_eq!(st.circuit, CircuitState::Closed);
    assert_eq!(st.consecutive_failures, 0);
    assert!(h.alert_lines().iter().any(|a| a["what"] == "circuit_opened"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_attempts_late_result_does_not_change_the_run() {
    let h = Real::new(&daily("30s", false, RETRY_1M), "2026-06-06T09:00:00Z");
    lost_attempts_late_result(h).await;
}

/// The same on a PostgreSQL ledger: scheduler b's sweep takes over the run
/// scheduler a lost, through another connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: .ci/with-postgres cargo test -- --include-ignored"]
async fn a_lost_attempts_late_result_does_not_change_the_run_on_postgresql() {
    let name = "recovery_flow::a_lost_attempts_late_result_does_not_change_the_run_on_postgresql";
    let Some(url) = tokio::task::spawn_blocking(move || store_support::pg_database(name))
        .await
        .unwrap()
    else {
        return;
    };
    let h = Real::on_postgres(&daily("30s", false, RETRY_1M), "2026-06-06T09:00:00Z", &url);
    lost_attempts_late_result(h).await;
}

async fn lost_attempts_late_result(mut h: Real) {
    // Attempt 1 (scheduler a) reports success, but only after its lease was lost.
    h.script(json!({"1": {"do": ["fetch"]}}));
    h.engine.tick().unwrap();
    assert_eq!(h.engine.running_count(), 1, "a claimed and started attempt 1");
    // Its agent reports running (its `started`) before a stalls.
    tokio::time::timeout(std::time::Duration::from_secs(30), h.engine.wait_report())
        .await
        .expect("attempt 1 starts")
        .unwrap();
    let run = run_by_key(&h.store, "report", "2026-06-06");
    let token1 = h.run(run.id).fencing_token;

    // Scheduler a stalls past its lease; scheduler b finds the zombie once
    // the takeover grace (lease / 3 = 20 s, issue 14) has passed too.
    let mut b = h.second_engine("b");
    h.clock.set(t("2026-06-06T09:01:21Z"));
    b.tick().unwrap();
    let lost = h.run(run.id);
    assert_eq!(lost.state, RunState::RetryWait);
    assert_eq!(h.attempts(run.id)[0].status, AttemptStatus::Lost);
    h.clock.set(t("2026-06-06T09:02:21Z"));
    b.tick().unwrap();
    assert_eq!(b.running_count(), 1, "b claimed attempt 2");
    tokio::time::timeout(std::time::Duration::from_secs(30), b.wait_report())
        .await
        .expect("attempt 2 starts")
        .unwrap();
    let token2 = h.run(run.id).fencing_token;
    assert!(token2 > token1);

    // Now a's attempt reports: every line and the result arrive late.
    while h.engine.running_count() > 0 {
        tokio::time::timeout(std::time::Duration::from_secs(30), h.engine.wait_report())
            .await
            .expect("attempt 1 ends")
            .unwrap();
    }
    let now = h.run(run.id);
    assert_eq!(now.state, RunState::Running);
    assert_eq!(now.fencing_token, token2);
    assert_eq!(now.lease_owner.as_deref(), Some("b"));
    let attempts = h.attempts(run.id);
    assert_eq!(
        attempts[0].status,
        AttemptStatus::Lost,
        "the late success is not recorded"
    );
    assert_eq!(attempts[1].status, AttemptStatus::Running);
    let stale = of_kind(&h.store, run.id, "stale_result");
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0].detail["token"], token1);
    assert!(
        h.steps(run.id).iter().all(|s| s.attempt != 1),
        "late step reports are not journaled"
    );

    // b's attempt finishes the run.
    settle(&mut b).await;
    let done = h.run(run.id);
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(done.attempts, 2);
    assert_eq!(
        trail(&h.store, run.id)
            .into_iter()
            .filter(|k| !k.starts_with("step"))
            .collect::<Vec<_>>(),
        [
            "window_opened",
            "claimed",
            "started",
            "lost",
            "failed",
            "retry_scheduled",
            "claimed",
            "started",
            "stale_result",
            "succeeded"
        ]
    );
    assert_eq!(of_kind(&h.store, run.id, "succeeded").len(), 1);
    assert_eq!(h.ledger(), [format!("{KEY} deliver attempt=2")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limited_failure_halves_concurrency_until_a_success() {
    let toml = format!(
        r#"{}
[[schedule]]
id = "sync"
agent = "bot"
on_event = "go"
close_after = "1h"
overlap = "allow"
max_concurrency = 4
retry = {{ max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }}
"#,
        base("30s", false)
    );
    let mut h = Real::new(&toml, "2026-06-06T09:00:00Z");
    let limited = json!({"do": ["fetch"], "exit": 1,
                         "result": {"status": "failure", "error_class": "retryable",
                                    "rate_limited": true, "message": "upstream said slow down"}});
    h.script(json!({"r1/1": limited}));
    operator::post_event(&h.store, "go", Some("r1"), &json!({}), h.now()).unwrap();
    h.settle().await;
    let r1 = run_by_key(&h.store, "sync", "r1");
    assert_eq!(r1.state, RunState::RetryWait);
    let halved = of_kind(&h.store, r1.id, "concurrency_halved");
    assert_eq!(halved.len(), 1);
    assert_eq!(halved[0].detail["divisor"], 2);
    assert_eq!(halved[0].detail["effective"], 2);
    assert_eq!(h.schedule_state("sync").concurrency_divisor, 2);

    // Three windows at once while halved: two run, one waits on the quota.
    h.clock.set(t("2026-06-06T09:00:10Z"));
    for id in ["a", "b", "c"] {
        operator::post_event(&h.store, "go", Some(id), &json!({}), h.now()).unwrap();
    }
    h.engine.tick().unwrap();
    assert_eq!(h.engine.running_count(), 2, "effective concurrency 4 / 2");
    let c = run_by_key(&h.store, "sync", "c");
    assert_eq!(c.state, RunState::Pending);
    let held = of_kind(&h.store, c.id, "switch_held");
    assert_eq!(held[0].detail["switch"], "quota");
    let why = held[0].detail["reason"].as_str().unwrap();
    assert!(why.contains("2/2") && why.contains("halved"), "{why}");
    // The first success resets the divisor and wakes the held window.
    h.settle().await;
    assert_eq!(h.schedule_state("sync").concurrency_divisor, 1);
    for id in ["a", "b", "c"] {
        assert_eq!(run_by_key(&h.store, "sync", id).state, RunState::Succeeded);
    }
    assert_eq!(
        of_kind(&h.store, c.id, "claimed")[0].at,
        t("2026-06-06T09:00:10Z")
    );

    h.run_until("2026-06-06T09:05:00Z").await;
    assert_eq!(h.run(r1.id).state, RunState::Succeeded);
    assert_eq!(h.run(r1.id).attempts, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_ttl_fails_a_run_nobody_approved() {
    let mut h = Real::new(
        &daily("30s", false, r#"approval_ttl = "1h""#),
        "2026-06-06T08:59:00Z",
    );
    h.script(json!({"*": {"do": ["fetch"], "exit": 77}}));
    h.run_until("2026-06-06T15:00:00Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Failed);
    assert!(
        run.state_reason.as_deref().unwrap().starts_with("approval_ttl"),
        "{:?}",
        run.state_reason
    );
    let failed = of_kind(&h.store, run.id, "failed");
    assert_eq!(failed.len(), 2, "the attempt, then the expiry");
    assert_eq!(
        failed[1].at,
        t("2026-06-06T10:00:00Z"),
        "exactly when the TTL ran out"
    );
    assert!(
        failed[1].detail["reason"]
            .as_str()
            .unwrap()
            .contains("no approval within 1h")
    );
    let alert = of_kind(&h.store, run.id, "alert");
    assert_eq!(alert.last().unwrap().detail["what"], "approval_ttl");
    let err = operator::approve(&h.store, run.id, "alice", "too late", None, h.now());
    assert!(matches!(err, Err(ActionError::Refused(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_circuit_lets_exactly_one_probe_through() {
    let toml = format!(
        r#"{}
[[schedule]]
id = "hooks"
agent = "bot"
on_event = "go"
close_after = "1h"
overlap = "allow"
max_concurrency = 4
circuit = {{ open_after = 3, cool_down = "30m" }}
"#,
        base("30s", false)
    );
    let mut h = Real::new(&toml, "2026-06-06T09:00:00Z");
    let fail = json!({"do": ["fetch"], "exit": 65});
    h.script(json!({"f1": fail, "f2": fail, "f3": fail}));
    let post = |h: &Real, id: &str| {
        operator::post_event(&h.store, "go", Some(id), &json!({}), h.now()).unwrap();
    };
    for id in ["f1", "f2", "f3"] {
        post(&h, id);
    }
    h.settle().await;
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Open);
    h.clock.set(t("2026-06-06T09:10:00Z"));
    post(&h, "early");
    h.settle().await;
    let early = run_by_key(&h.store, "hooks", "early");
    assert_eq!(early.state, RunState::Skipped);

    // Cool-down over: two windows due at the same instant, one probe.
    h.clock.set(t("2026-06-06T09:30:00Z"));
    post(&h, "p1");
    post(&h, "p2");
    h.engine.tick().unwrap();
    assert_eq!(h.engine.running_count(), 1, "exactly one probe is claimed");
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::HalfOpen);
    h.settle().await;
    let (p1, p2) = (
        run_by_key(&h.store, "hooks", "p1"),
        run_by_key(&h.store, "hooks", "p2"),
    );
    assert_eq!(p1.state, RunState::Succeeded);
    assert_eq!(p2.state, RunState::Skipped);
    assert!(
        p2.state_reason.as_deref().unwrap().contains("half-open"),
        "{:?}",
        p2.state_reason
    );
    assert_eq!(p2.attempts, 0);
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Closed);
    assert_eq!(schedule_events(&h.store, "hooks", "circuit_half_open").len(), 1);
    assert_eq!(schedule_events(&h.store, "hooks", "circuit_closed").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_waits_for_not_before_even_when_an_operator_wakes_it() {
    let mut h = Real::new(&daily("30s", false, RETRY_1M), "2026-06-06T08:59:00Z");
    h.script(json!({"1": {"do": ["fetch"], "exit": 75}}));
    h.run_until("2026-06-06T09:00:10Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::RetryWait);
    // Pause and resume inside the backoff: resume re-checks held runs at once,
    // but the retry still waits for its not_before.
    operator::pause(&h.store, &h.cfg, "report", "alice", "look at it", h.now()).unwrap();
    h.run_until("2026-06-06T09:00:20Z").await;
    operator::resume(&h.store, &h.cfg, "report", "alice", "fine", h.now()).unwrap();
    h.run_until("2026-06-06T09:10:00Z").await;
    let run = h.run(run.id);
    assert_eq!(run.state, RunState::Succeeded);
    let claims: Vec<_> = of_kind(&h.store, run.id, "claimed")
        .into_iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(claims, [t("2026-06-06T09:00:00Z"), t("2026-06-06T09:01:00Z")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkill_starts_held_windows_at_once() {
    let mut h = Real::new(
        &daily("30s", false, r#"check_every = "10m""#),
        "2026-06-06T08:59:00Z",
    );
    h.script(json!({}));
    operator::kill(&h.store, "alice", "incident", false, h.now()).unwrap();
    h.run_until("2026-06-06T09:00:20Z").await;
    let run = run_by_key(&h.store, "report", "2026-06-06");
    assert_eq!(run.state, RunState::Pending);
    let held = of_kind(&h.store, run.id, "switch_held");
    assert_eq!(held[0].detail["switch"], "kill");
    operator::unkill(&h.store, "alice", "over", h.now()).unwrap();
    h.run_until("2026-06-06T09:30:00Z").await;
    let run = h.run(run.id);
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(
        of_kind(&h.store, run.id, "claimed")[0].at,
        t("2026-06-06T09:00:20Z"),
        "claimed when the switch went off, not a check_every later"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_runs_count_for_the_circuit_and_a_rejected_probe_reopens_it() {
    let toml = format!(
        r#"{}
[[schedule]]
id = "hooks"
agent = "bot"
on_event = "go"
close_after = "1h"
overlap = "allow"
max_concurrency = 4
circuit = {{ open_after = 2, cool_down = "30m" }}
"#,
        base("30s", false)
    );
    let mut h = Real::new(&toml, "2026-06-06T09:00:00Z");
    let human = json!({"do": ["fetch"], "exit": 77});
    h.script(json!({"f1": human, "f2": human, "probe": human, "ok": {"do": ["fetch"]}}));
    let post = |h: &Real, id: &str| {
        operator::post_event(&h.store, "go", Some(id), &json!({}), h.now()).unwrap();
    };
    // Two runs parked for a human and rejected: two failed runs, the circuit opens.
    for id in ["f1", "f2"] {
        post(&h, id);
    }
    h.settle().await;
    for id in ["f1", "f2"] {
        let run = run_by_key(&h.store, "hooks", id);
        assert_eq!(run.state, RunState::NeedsHuman);
        operator::reject(&h.store, Some(&h.cfg), run.id, "bob", "wrong list", h.now()).unwrap();
    }
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Open);
    assert_eq!(h.schedule_state("hooks").consecutive_failures, 2);
    assert_eq!(schedule_events(&h.store, "hooks", "circuit_opened").len(), 1);
    let alerts = schedule_events(&h.store, "hooks", "alert");
    assert!(
        alerts.iter().any(|e| e.detail["what"] == "circuit_opened"),
        "{alerts:?}"
    );

    // After the cool-down the probe parks for a human too; rejecting it reopens
    // the circuit (it must not stay half-open for good).
    h.clock.set(t("2026-06-06T09:30:00Z"));
    post(&h, "probe");
    h.settle().await;
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::HalfOpen);
    let probe = run_by_key(&h.store, "hooks", "probe");
    assert_eq!(probe.state, RunState::NeedsHuman);
    operator::reject(&h.store, Some(&h.cfg), probe.id, "bob", "still wrong", h.now()).unwrap();
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Open);
    assert_eq!(schedule_events(&h.store, "hooks", "circuit_opened").len(), 2);

    // The next cool-down's probe succeeds and closes it.
    h.clock.set(t("2026-06-06T10:01:00Z"));
    post(&h, "ok");
    h.settle().await;
    assert_eq!(run_by_key(&h.store, "hooks", "ok").state, RunState::Succeeded);
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_nobody_approves_reopens_the_circuit_at_its_approval_ttl() {
    let toml = format!(
        r#"{}
[[schedule]]
id = "hooks"
agent = "bot"
on_event = "go"
close_after = "1h"
overlap = "allow"
max_concurrency = 4
approval_ttl = "10m"
circuit = {{ open_after = 1, cool_down = "5m" }}
"#,
        base("30s", false)
    );
    let mut h = Real::new(&toml, "2026-06-06T09:00:00Z");
    h.script(json!({"f1": {"do": ["fetch"], "exit": 65}, "probe": {"do": ["fetch"], "exit": 77}}));
    operator::post_event(&h.store, "go", Some("f1"), &json!({}), h.now()).unwrap();
    h.settle().await;
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Open);
    h.clock.set(t("2026-06-06T09:06:00Z"));
    operator::post_event(&h.store, "go", Some("probe"), &json!({}), h.now()).unwrap();
    h.settle().await;
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::HalfOpen);
    h.run_until("2026-06-06T09:20:00Z").await;
    let probe = run_by_key(&h.store, "hooks", "probe");
    assert_eq!(probe.state, RunState::Failed, "{:?}", probe.state_reason);
    assert_eq!(h.schedule_state("hooks").circuit, CircuitState::Open);
}
