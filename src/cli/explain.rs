//! `agentcron explain SCHEDULE [--window KEY] [--json]`: "why did it (not)
//! run?", told by [`crate::trace::explain`]; this verb only opens the store
//! and prints the answer as text or JSON.

use super::db::{self, open_for_cli};
use super::exit;
use crate::time::{Clock, SystemClock};
use std::path::Path;

pub struct Options<'a> {
    pub schedule: &'a str,
    pub window: Option<&'a str>,
    pub json: bool,
}

pub fn run(config: &Path, db: Option<&Path>, opts: &Options<'_>) -> i32 {
    let (store, cfg) = match open_for_cli(config, db, false) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let now = SystemClock.now();
    let answer = store.read(|tx| crate::trace::explain(tx, cfg.as_ref(), opts.schedule, opts.window, now));
    let x = match answer {
        Ok(x) => x,
        Err(e) => {
            eprintln!("agentcron explain: {e}");
            return exit::USAGE;
        }
    };
    if opts.json {
        let code = db::print_json("explain", &x.to_json());
        if code != exit::OK {
            return code;
        }
    } else {
        print!("{}", x.text());
    }
    if x.found() { exit::OK } else { exit::DOES_NOT_HOLD }
}
