//! The console says whether anyone schedules this database (issue 17): the
//! header's `LIVE · N schedulers`, or in the error style that no scheduler
//! is alive, since when and how many windows fell due since; the schedules
//! pane marks NEXT FIRE overdue when a fire passed with no scheduler alive.
//! Screens are insta snapshots (CI never writes them); the loader is checked
//! against a real store's registry.

#[path = "console_support.rs"]
mod support;

use agentcron::config::load_str;
use agentcron::console::app::{Model, Msg, update};
use agentcron::console::snapshot::{Liveness, load_snapshot};
use agentcron::console::theme::Theme;
use agentcron::core::registry::SchedulerRecord;
use agentcron::status::Overdue;
use agentcron::store::Store;
use chrono::Duration;
use std::path::Path;
use support::*;

fn dark() -> Theme {
    Theme::builtin("dark").expect("dark theme")
}

/// The fixed snapshot, with the registry saying `liveness`; with none alive
/// the first schedule's 09:00 fire passed unevaluated.
fn model(w: u16, h: u16, liveness: Liveness) -> Model {
    let mut snap = fixed_snapshot();
    if liveness.alive == 0 {
        snap.schedules[0].overdue = Some(Overdue {
            due: t("2026-06-08T01:00:00Z"),
            window_key: "2026-06-08".into(),
            windows: 1,
        });
    }
    snap.liveness = Some(liveness);
    let mut m = model_sized(w, h, false);
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    m
}

fn dead() -> Liveness {
    Liveness {
        alive: 0,
        // 03:12:05 in Shanghai.
        last_seen: Some(t("2026-06-07T19:12:05Z")),
        due_since: 4,
        on_older_config: 0,
        config_waiting: None,
    }
}

fn header(screen: &str) -> &str {
    screen.lines().next().unwrap_or_default()
}

#[test]
fn the_header_counts_the_schedulers_alive() {
    let two = Liveness {
        alive: 2,
        last_seen: Some(now()),
        due_since: 0,
        on_older_config: 0,
        config_waiting: None,
    };
    let s = render(&model(160, 48, two), &dark(), 160, 48);
    assert!(header(&s).contains(" LIVE · 2 schedulers "), "{}", header(&s));
    insta::assert_snapshot!("liveness_two_alive_160x48", s);
    let one = Liveness {
        alive: 1,
        last_seen: Some(now()),
        due_since: 0,
        on_older_config: 0,
        config_waiting: None,
    };
    let s = render(&model(80, 24, one), &dark(), 80, 24);
    assert!(header(&s).contains(" LIVE · 1 scheduler "), "{}", header(&s));
}

#[test]
fn the_header_says_when_a_config_change_has_not_reached_every_scheduler() {
    let drifting = Liveness {
        alive: 2,
        last_seen: Some(now()),
        due_since: 0,
        on_older_config: 1,
        config_waiting: Some(3),
    };
    let s = render(&model(160, 48, drifting), &dark(), 160, 48);
    assert!(
        header(&s).contains(" LIVE · 2 schedulers · 1 on an older config · config v3 waits for approval "),
        "{}",
        header(&s)
    );
}

#[test]
fn no_scheduler_alive_is_said_with_when_and_what_fell_due() {
    let s = render(&model(160, 48, dead()), &dark(), 160, 48);
    assert!(
        header(&s).contains("NO SCHEDULER ALIVE (last seen 03:12:05, 4 windows due since)"),
        "{}",
        header(&s)
    );
    assert!(s.contains("⚠ overdue 06-08 09:00"), "{s}");
    insta::assert_snapshot!("liveness_none_alive_160x48", s);
    let s = render(&model(80, 24, dead()), &dark(), 80, 24);
    assert!(
        header(&s).contains("NO SCHEDULER ALIVE (seen 03:12:05, 4 due)"),
        "{}",
        header(&s)
    );
    // The kill switch stays in view beside the longer mode.
    assert!(
        header(&s).to_lowercase().contains("kill switch"),
        "{}",
        header(&s)
    );
    insta::assert_snapshot!("liveness_none_alive_80x24", s);
}

#[test]
fn the_error_style_is_not_colour_alone() {
    let backend = render_backend(&model(160, 48, dead()), &Theme::builtin("mono").unwrap(), 160, 48);
    let cell = &backend.buffer()[(2, 0)];
    assert!(
        cell.modifier.contains(ratatui::style::Modifier::REVERSED),
        "reverse video even without colours"
    );
}

#[test]
fn a_rehearsal_shows_no_registry() {
    let mut m = rehearsal_model(160, 48, false);
    let mut snap = fixed_snapshot();
    snap.liveness = Some(dead());
    update(&mut m, Msg::Snapshot(Box::new(snap)));
    let s = render(&m, &dark(), 160, 48);
    assert!(!s.contains("NO SCHEDULER ALIVE"), "{}", header(&s));
}

const CFG: &str = r#"
[agents.a]
kind = "command"
command = ["true"]

[[schedule]]
id = "every-minute"
agent = "a"
cron = "* * * * *"

[[schedule]]
id = "on-demand"
agent = "a"
on_event = "go"
"#;

fn record(owner: &str, last_seen: chrono::DateTime<chrono::Utc>) -> SchedulerRecord {
    SchedulerRecord {
        owner: owner.into(),
        host: "h".into(),
        pid: 1,
        version: "0.1.0".into(),
        config_hash: "x".into(),
        heartbeat_ms: 5_000,
        started_at: last_seen - Duration::hours(1),
        last_seen,
        stopped_at: None,
        lost_at: None,
        lost_by: None,
    }
}

#[test]
fn the_loader_reads_the_registry_and_counts_the_fires_nobody_evaluated() {
    let cfg = load_str(CFG, Path::new("/nonexistent/agentcron.toml")).unwrap();
    let store = Store::open_in_memory().unwrap();
    let now = t("2026-06-08T01:30:00Z");
    // No scheduler ever registered: nothing to say (an older database).
    assert_eq!(load_snapshot(&store, &cfg, now).unwrap().liveness, None);

    let seen = now - Duration::seconds(270);
    store
        .write(|tx| {
            tx.register_scheduler(&record("h:1", seen))?;
            tx.set_last_evaluated("every-minute", seen)
        })
        .unwrap();
    let snap = load_snapshot(&store, &cfg, now).unwrap();
    // 01:26 … 01:30: five minutes fell due unevaluated.
    assert_eq!(
        snap.liveness,
        Some(Liveness {
            alive: 0,
            last_seen: Some(seen),
            due_since: 5,
            on_older_config: 0,
            config_waiting: None,
        })
    );
    let row = snap.schedule("every-minute").unwrap();
    assert_eq!(
        row.overdue.as_ref().map(|o| (o.due, o.windows)),
        Some((t("2026-06-08T01:26:00Z"), 5))
    );
    assert_eq!(
        snap.schedule("on-demand").unwrap().overdue,
        None,
        "event triggers never fall due"
    );

    // A scheduler alive: nothing is overdue, whatever the cursor says.
    store
        .write(|tx| tx.register_scheduler(&record("h:2", now)))
        .unwrap();
    let snap = load_snapshot(&store, &cfg, now).unwrap();
    assert_eq!(snap.liveness.as_ref().map(|l| l.alive), Some(1));
    assert_eq!(snap.schedule("every-minute").unwrap().overdue, None);
}

#[test]
fn the_loader_counts_live_schedulers_on_an_older_config_and_a_waiting_one() {
    use agentcron::store::ConfigStatus;
    let cfg = load_str(CFG, Path::new("/nonexistent/agentcron.toml")).unwrap();
    let store = Store::open_in_memory().unwrap();
    let now = t("2026-06-08T01:30:00Z");
    store
        .write(|tx| {
            let v1 = tx.insert_config_version("x", "a.toml", "old", now, "t", ConfigStatus::Applied, None)?;
            let v2 = tx.insert_config_version("y", "a.toml", "new", now, "t", ConfigStatus::Applied, None)?;
            tx.insert_config_version("z", "a.toml", "gated", now, "t", ConfigStatus::Waiting, None)?;
            tx.set_current_config(v2)?;
            assert!(v1 < v2);
            // h:1 still runs "x" (the older one), h:2 the current "y"; h:3
            // runs "x" too but is long gone.
            tx.register_scheduler(&record("h:1", now))?;
            tx.register_scheduler(&SchedulerRecord {
                config_hash: "y".into(),
                ..record("h:2", now)
            })?;
            tx.register_scheduler(&record("h:3", now - Duration::hours(1)))
        })
        .unwrap();
    let l = load_snapshot(&store, &cfg, now).unwrap().liveness.unwrap();
    assert_eq!((l.alive, l.on_older_config, l.config_waiting), (2, 1, Some(3)));
}
