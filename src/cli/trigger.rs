//! `agentcron trigger` and `agentcron event post`: put work in front of the
//! scheduler through the database.

use super::exit;
use crate::operator::{self, ActionError};
use crate::time::{Clock, SystemClock};
use std::path::Path;

pub fn trigger(config: &Path, db: Option<&Path>, schedule: &str, window: Option<&str>) -> i32 {
    let (store, cfg) = match super::db::open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let Some(cfg) = cfg else {
        eprintln!("agentcron trigger: needs the config (--config) to know schedule `{schedule}`");
        return exit::USAGE;
    };
    match operator::trigger(
        &store,
        &cfg,
        schedule,
        window,
        &operator::default_actor(),
        SystemClock.now(),
    ) {
        Ok(run) => {
            println!(
                "run {} queued for {} window {}",
                run.id,
                run.schedule,
                crate::time::key_text(&run.window_key, s_zone(&cfg, schedule))
            );
            match store.read(|tx| what_happens(tx, &cfg, &run)) {
                Ok(lines) => {
                    // In the schedule's zone, like every time people read.
                    for l in lines {
                        println!("  {}", crate::time::in_zone(&l, s_zone(&cfg, schedule)));
                    }
                }
                Err(e) => eprintln!("agentcron trigger: {e}"),
            }
            exit::OK
        }
        Err(e) => report(e),
    }
}

/// What will really happen to a manual run just queued, in the order the
/// scheduler decides it: switches that hold it now, the window it waits
/// behind, its gates, when it gives up.
fn what_happens(
    tx: &crate::store::Tx<'_>,
    cfg: &crate::config::Config,
    run: &crate::store::Run,
) -> crate::store::Result<Vec<String>> {
    let mut out = vec![];
    let Some(s) = cfg.schedule(&run.schedule) else {
        return Ok(out);
    };
    if let Some(k) = tx.switch("kill")?.filter(|k| k.on) {
        out.push(format!(
            "it waits: the global kill switch is on (by {}: {}) — `agentcron unkill` releases it",
            k.actor, k.reason
        ));
    }
    let st = tx.schedule_state(&s.id)?;
    if st.paused {
        out.push(format!(
            "it waits: {} is paused ({}) — `agentcron resume {}` releases it",
            s.id,
            st.paused_reason.unwrap_or_default(),
            s.id
        ));
    }
    let running = tx.running_runs(Some(&s.id))?;
    if let Some(r) = running.first()
        && s.overlap != crate::config::model::Overlap::Allow
    {
        out.push(format!(
            "it waits its turn behind window {} (running); a manual run is never skipped for overlap",
            r.window_key
        ));
    }
    if !s.gates.is_empty() {
        let names: Vec<&str> = s.gates.iter().map(|g| g.name.as_str()).collect();
        out.push(format!(
            "then its gates are checked every {}: {}",
            crate::time::duration::format_duration(s.check_every),
            names.join(", ")
        ));
    }
    let gives_up = run.created_at + crate::time::duration::to_delta(s.catchup_window);
    out.push(format!(
        "the scheduler looks at it within a tick; it expires unrun if it cannot start by {}",
        crate::time::rfc3339_secs(gives_up)
    ));
    Ok(out)
}

pub fn post_event(
    config: &Path,
    db: Option<&Path>,
    name: &str,
    id: Option<&str>,
    payload: Option<&str>,
) -> i32 {
    let payload = match payload {
        None => serde_json::json!({}),
        Some(p) => match serde_json::from_str(p) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("agentcron event post: --payload is not JSON: {e}");
                return exit::USAGE;
            }
        },
    };
    let (store, cfg) = match super::db::open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
    // An event nobody listens to would be stored and never run: say so.
    match &cfg {
        Some(cfg) => {
            if let Err(why) = operator::listeners(cfg, name) {
                eprintln!("agentcron event post: {why}");
                return exit::DOES_NOT_HOLD;
            }
        }
        None => eprintln!(
            "agentcron event post: without the config, whether a schedule listens to `{name}` is not checked"
        ),
    }
    match operator::post_event(&store, name, id, &payload, SystemClock.now()) {
        Ok((id, true)) => {
            println!("posted {name} {id}");
            exit::OK
        }
        Ok((id, false)) => {
            println!("{name} {id} was already posted; deduped");
            exit::OK
        }
        Err(e) => report(e),
    }
}

/// An action's error as the command line reports it: refusals exit 1, an
/// action already in effect is said on stdout and exits 0 (the same for every
/// verb), store trouble exits 2.
pub(crate) fn report(e: ActionError) -> i32 {
    match e {
        ActionError::Already(text) => {
            println!("{text}");
            exit::OK
        }
        ActionError::Refused(_) | ActionError::Invalid(_) => {
            eprintln!("agentcron: {e}");
            exit::DOES_NOT_HOLD
        }
        ActionError::Store(_) => {
            eprintln!("agentcron: {e}");
            exit::USAGE
        }
    }
}

/// The zone a schedule's times are told in (UTC for an id the config lacks).
fn s_zone(cfg: &crate::config::Config, schedule: &str) -> chrono_tz::Tz {
    super::db::block_zone(Some(cfg), Some(schedule), false)
}
