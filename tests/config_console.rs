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

/// Issue 52: a console attached to a database another process schedules
/// keeps following the version the database runs — a reload done elsewhere
/// (here: `control::propose`, what `agentcron reload` ends in) is what its
/// panes list and its actions check against, within one poll.
#[test]
fn an_attached_console_follows_a_reload_done_by_another_process() {
    use agentcron::console::follow::{Follow, Followed};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentcron.toml");
    std::fs::write(&path, V1).unwrap();
    let mine = load_str(V1, &path).unwrap();
    let store = Store::open(&dir.path().join("test.db")).unwrap();
    control::propose(&store, &mine, V1, "scheduler", now()).unwrap();

    let mut follow = Follow::new(&mine);
    match follow.poll(&store).unwrap() {
        Followed::Applied { version: 1, cfg } => {
            assert_eq!(cfg.schedules.len(), 1);
            assert_eq!(cfg.path, mine.path, "its own file is what :reload previews");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(follow.poll(&store).unwrap(), Followed::Same));

    // Another process reloads its own file, which adds a schedule.
    let other_dir = tempfile::tempdir().unwrap();
    let other_path = other_dir.path().join("agentcron.toml");
    let v2 = format!("{V1}\n[[schedule]]\nid = \"added\"\nagent = \"a\"\non_event = \"go\"\n");
    std::fs::write(&other_path, &v2).unwrap();
    let theirs = load_str(&v2, &other_path).unwrap();
    control::propose(&store, &theirs, &v2, "elsewhere", now()).unwrap();

    // The file the console started with does not know it: acting on it from
    // there is what the console did before (“no schedule in the config”).
    let trigger = Cmd::Trigger {
        schedule: "added".into(),
    };
    assert!(perform(&store, &mine, &trigger, "alice", now()).is_err());
    let followed = match follow.poll(&store).unwrap() {
        Followed::Applied { version: 2, cfg } => cfg,
        other => panic!("{other:?}"),
    };
    assert!(followed.schedule("added").is_some());
    assert_eq!(follow.version(), Some(2));
    let said = perform(&store, &followed, &trigger, "alice", now()).unwrap();
    assert!(said.contains("added"), "{said}");
}
