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
