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
                run.id, run.schedule, run.window_key
            );
            exit::OK
        }
        Err(e) => report(e),
    }
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
    let (store, _) = match super::db::open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
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

pub(crate) fn report(e: ActionError) -> i32 {
    eprintln!("agentcron: {e}");
    match e {
        ActionError::Refused(_) => exit::DOES_NOT_HOLD,
        ActionError::Store(_) => exit::USAGE,
    }
}
