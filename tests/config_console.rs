//! The console's `:reload` (issue 18): the dialog shows what `agentcron plan`
//! says of the config file (or its errors, and then cannot be confirmed);
//! confirming records a reload request every scheduler on the database picks
//! up. Through `console::actions` — what the shell runs.

use agentcron::config::load_str;
use agentcron::console::actions::{perform, preview};
use agentcron::console::app::Cmd;
use agentcron::console::command::{Command, parse};
use agentcron::console::dialogs::Intent;
use agentcron::control;
use agentcron::store::Store;
use chrono::{DateTime, Utc};

const V1: &str = r#"
[agents.a]
kind = "command"
command = ["true"]

[[schedule]]
id = "daily"
agent = "a"
cron = "0 9 * * *"
"#;

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-06-06T00:00:00Z")
        .unwrap()
        .to_utc()
}

#[test]
fn reload_shows_the_plan_then_requests_a_reload() {
    assert_eq!(parse("reload"), Ok(Command::Reload));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, V1).unwrap();
    let cfg = load_str(V1, &path).unwrap();
    let store = Store::open(&dir.path().join("test.db")).unwrap();
    control::propose(&store, &cfg, V1, "test", now()).unwrap();

    // Nothing changed: nothing to confirm.
    let p = preview(&store, &cfg, &Intent::Reload, "alice", now()).unwrap();
    assert!(!p.actionable, "{:?}", p.lines);
    assert!(
        p.lines.iter().any(|l| l == "no schedule changes"),
        "{:?}",
        p.lines
    );

    // A changed cron: the plan, then the request.
    std::fs::write(&path, V1.replace("0 9 * * *", "0 10 * * *")).unwrap();
    let p = preview(&store, &cfg, &Intent::Reload, "alice", now()).unwrap();
    assert!(p.actionable);
    assert!(
        p.lines.iter().any(|l| l.starts_with("~ daily (changed")),
        "{:?}",
        p.lines
    );
    assert!(
        p.lines
            .iter()
            .any(|l| l.contains("cron \"0 9 * * *\" → \"0 10 * * *\"")),
        "{:?}",
        p.lines
    );
    let before = store.read(|tx| tx.config_watch()).unwrap().1;
    let said = perform(&store, &cfg, &Cmd::Reload, "alice", now()).unwrap();
    assert!(said.contains("reload"), "{said}");
    assert_eq!(store.read(|tx| tx.config_watch()).unwrap().1, before + 1);
    assert!(Cmd::Reload.is_operator_action(), "hidden by --read-only");

    // A broken file: its errors, located, and no confirm.
    std::fs::write(&path, V1.replace("cron =", "crn =")).unwrap();
    let p = preview(&store, &cfg, &Intent::Reload, "alice", now()).unwrap();
    assert!(!p.actionable);
    let at = format!("{}:", path.display());
    assert!(p.lines.iter().any(|l| l.starts_with(&at)), "{:?}", p.lines);
}

#[test]
fn approve_config_shows_the_waiting_versions_plan_and_applies_it_with_a_reason() {
    assert_eq!(parse("approve-config 2"), Ok(Command::ApproveConfig(2)));
    assert_eq!(parse("approve-config v2"), Ok(Command::ApproveConfig(2)));
    assert!(parse("approve-config two").is_err());
    let gated = format!("[scheduler]\nrequire_approval_for = [\"prod\"]\n{V1}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    let cfg = load_str(&gated, &path).unwrap();
    let store = Store::open(&dir.path().join("test.db")).unwrap();
    control::propose(&store, &cfg, &gated, "test", now()).unwrap();
    let changed = gated.replace("0 9 * * *", "0 10 * * *");
    let new = load_str(&changed, &path).unwrap();
    let waiting = control::propose(&store, &new, &changed, "test", now()).unwrap();
    assert!(
        matches!(waiting, control::Outcome::Waiting { version: 2, .. }),
        "{waiting:?}"
    );

    let intent = Intent::ApproveConfig { version: 2 };
    assert!(intent.needs_reason(), "approvals take a typed reason");
    let p = preview(&store, &cfg, &intent, "alice", now()).unwrap();
    assert!(p.actionable);
    assert!(
        p.lines.iter().any(|l| l.starts_with("~ daily (changed")),
        "{:?}",
        p.lines
    );
    assert_eq!(
        p.lines.last().unwrap(),
        "approving applies v2 (stored 2026-06-06T00:00:00.000Z)"
    );
    let said = perform(
        &store,
        &cfg,
        &Cmd::ApproveConfig {
            version: 2,
            reason: "reviewed".into(),
        },
        "alice",
        now(),
    )
    .unwrap();
    assert!(said.contains("v2 approved by alice"), "{said}");
    assert_eq!(store.read(|tx| tx.config_watch()).unwrap().0, Some(2));
    let v2 = store.read(|tx| tx.config_version(2)).unwrap().unwrap();
    assert_eq!(
        (v2.approved_by.as_deref(), v2.approval_reason.as_deref()),
        (Some("alice"), Some("reviewed"))
    );
    let p = preview(&store, &cfg, &intent, "alice", now()).unwrap();
    assert!(
        !p.actionable && p.lines[0].contains("not waiting"),
        "{:?}",
        p.lines
    );
}
