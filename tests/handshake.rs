//! The side-effect step handshake (DESIGN.md "Side-effect handshake"), with
//! real agent processes and the real engine on a virtual clock: an ack comes
//! only once the `started` step is committed under a valid fence; a step is
//! denied when the fence no longer holds; a handshake agent that never reads
//! stdin, or acts without waiting, keeps working as before.

mod support;

use agentcron::store::types::*;
use support::real::*;
use support::*;

/// A handshake agent `hs` (python `agent.py` in the config folder) and a
/// daily 09:00 UTC schedule `job`.
fn config(agent_steps: &str, env: &str) -> String {
    format!(
        r#"
[scheduler]
timezone = "UTC"
lease = "60s"

[agents.hs]
kind = "command"
command = ["python3", "agent.py"]
timeout = "30s"
handshake = true
env = {env}
steps = {agent_steps}

[[schedule]]
id = "job"
agent = "hs"
cron = "0 9 * * *"
close_after = "1h"
retry = {{ max_attempts = 1, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }}
"#
    )
}

const STEPS: &str = r#"[{ name = "fetch" }, { name = "deliver", side_effect = true }]"#;

/// The agent: records the envelope's `acks`/`protocol`, announces `deliver`
/// (after `go` exists, if WAIT_FOR_GO), reads one reply line, records it with
/// whether the store already held the journaled step when it arrived, and
/// acts (writes `acted`) only on an ack.
const ASKING_AGENT: &str = r#"
import json, os, sqlite3, sys, time
env = json.loads(sys.stdin.readline())
def emit(o): print(json.dumps(o), flush=True)
while os.environ.get("WAIT_FOR_GO") and not os.path.exists("go"):
    time.sleep(0.02)
emit({"event": "step", "name": "deliver", "status": "started"})
reply = json.loads(sys.stdin.readline() or "null")
db = sqlite3.connect("file:test.db?mode=ro", uri=True)
journaled = db.execute(
    "SELECT count(*) FROM steps WHERE run_id = ? AND attempt = ? AND name = 'deliver' AND status = 'started'",
    (env["run_id"], env["attempt"])).fetchone()[0] == 1
json.dump({"acks": env.get("acks"), "protocol": env.get("protocol"), "reply": reply,
           "journaled": journaled}, open("seen.json", "w"))
if reply and reply.get("event") == "ack":
    open("acted", "w").write("1")
    emit({"event": "step", "name": "deliver", "status": "done"})
    emit({"event": "result", "status": "success"})
else:
    emit({"event": "result", "status": "failure", "error_class": "retryable", "message": "denied"})
"#;

fn with_agent(script: &'static str) -> impl FnOnce(&std::path::Path) {
    move |dir| std::fs::write(dir.join("agent.py"), script).unwrap()
}

fn seen(h: &Real) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(h.dir.path().join("seen.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_effect_step_is_acked_with_its_fence_only_once_journaled() {
    let mut h = Real::new_with(
        &config(STEPS, "{}"),
        "2026-06-06T09:00:00Z",
        with_agent(ASKING_AGENT),
    );
    h.settle().await;
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    let seen = seen(&h);
    assert_eq!(seen["acks"], true, "the envelope announces acks");
    assert_eq!(seen["protocol"], 2);
    assert_eq!(
        seen["reply"],
        serde_json::json!({"event": "ack", "step": "deliver", "fence": run.fencing_token})
    );
    assert_eq!(seen["journaled"], true, "the ack came after the commit");
    assert!(h.dir.path().join("acted").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_is_denied_once_the_attempt_no_longer_holds_its_lease() {
    let mut h = Real::new_with(
        &config(STEPS, r#"{ WAIT_FOR_GO = "1" }"#),
        "2026-06-06T09:00:00Z",
        with_agent(ASKING_AGENT),
    );
    h.engine.tick().unwrap();
    assert_eq!(h.engine.running_count(), 1);
    // The scheduler stalls past its lease (no tick renews it), then the
    // agent announces its side effect.
    h.clock.set(t("2026-06-06T09:01:01Z"));
    std::fs::write(h.dir.path().join("go"), "").unwrap();
    while h.engine.running_count() > 0 {
        tokio::time::timeout(std::time::Duration::from_secs(30), h.engine.wait_report())
            .await
            .expect("the agent reports")
            .unwrap();
    }
    let run = run_by_key(&h.store, "job", "2026-06-06");
    let seen = seen(&h);
    assert_eq!(seen["reply"]["event"], "deny", "{seen}");
    assert_eq!(seen["reply"]["step"], "deliver");
    assert!(
        seen["reply"]["reason"].as_str().unwrap().contains("lease"),
        "{seen}"
    );
    assert_eq!(seen["journaled"], false);
    assert!(
        !h.dir.path().join("acted").exists(),
        "a denied step is not acted on"
    );
    assert!(
        h.steps(run.id).iter().all(|s| s.name != "deliver"),
        "nothing journaled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_agent_that_never_reads_stdin_or_never_waits_still_works() {
    // It never reads its envelope: non-side-effect steps need no ack, and a
    // side-effect step it does not wait for is journaled as before.
    const DEAF: &str = r#"
import json
def emit(o): print(json.dumps(o), flush=True)
for name in ("fetch", "deliver"):
    emit({"event": "step", "name": name, "status": "started"})
    emit({"event": "step", "name": name, "status": "done"})
emit({"event": "result", "status": "success", "summary": "never read stdin"})
"#;
    let mut h = Real::new_with(&config(STEPS, "{}"), "2026-06-06T09:00:00Z", with_agent(DEAF));
    h.settle().await;
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    let done: Vec<(String, StepStatus)> = h.steps(run.id).into_iter().map(|s| (s.name, s.status)).collect();
    assert_eq!(
        done,
        [
            ("fetch".to_string(), StepStatus::Started),
            ("fetch".to_string(), StepStatus::Done),
            ("deliver".to_string(), StepStatus::Started),
            ("deliver".to_string(), StepStatus::Done),
        ]
    );
}

/// A side-effect step whose journaling transaction fails is denied at once,
/// with the reason: the agent never waits for its timeout (issue 44, 6). The
/// agent breaks the ledger itself before it asks: a trigger makes every
/// journal entry fail, as a lost PostgreSQL transaction or a full disk would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_journaling_transaction_fails_is_denied_at_once() {
    const BREAKING_AGENT: &str = r#"
import json, select, sqlite3, sys
env = json.loads(sys.stdin.readline())
def emit(o): print(json.dumps(o), flush=True)
db = sqlite3.connect("test.db", timeout=30)
db.execute("CREATE TRIGGER no_journal BEFORE INSERT ON steps BEGIN SELECT RAISE(ABORT, 'the journal is broken'); END")
db.commit()
db.close()
emit({"event": "step", "name": "deliver", "status": "started"})
# A bound, so an agent that is never answered says so instead of hanging.
ready, _, _ = select.select([sys.stdin], [], [], 20)
reply = json.loads(sys.stdin.readline() or "null") if ready else "no answer within 20 s"
json.dump({"reply": reply}, open("seen.json", "w"))
if isinstance(reply, dict) and reply.get("event") == "ack":
    open("acted", "w").write("1")
emit({"event": "result", "status": "failure", "error_class": "retryable", "message": "denied"})
"#;
    let mut h = Real::new_with(
        &config(STEPS, "{}"),
        "2026-06-06T09:00:00Z",
        with_agent(BREAKING_AGENT),
    );
    h.engine.tick().unwrap();
    assert_eq!(h.engine.running_count(), 1);
    let mut failed = Vec::new();
    while h.engine.running_count() > 0 {
        let handled = tokio::time::timeout(std::time::Duration::from_secs(30), h.engine.wait_report())
            .await
            .expect("the agent reports");
        if let Err(e) = handled {
            failed.push(e.to_string());
        }
    }
    assert!(
        failed.iter().any(|e| e.contains("the journal is broken")),
        "the journaling transaction failed: {failed:?}"
    );
    let seen = seen(&h);
    assert_eq!(seen["reply"]["event"], "deny", "{seen}");
    assert_eq!(seen["reply"]["step"], "deliver");
    assert!(
        seen["reply"]["reason"]
            .as_str()
            .unwrap()
            .contains("could not be journaled"),
        "{seen}"
    );
    assert!(
        !h.dir.path().join("acted").exists(),
        "a denied step is not acted on"
    );
    let run = run_by_key(&h.store, "job", "2026-06-06");
    assert!(
        h.steps(run.id).iter().all(|s| s.name != "deliver"),
        "nothing journaled"
    );
}
