//! Opening the database for a CLI verb.

use crate::config::Config;
use crate::store::Store;
use std::path::Path;

/// Opens the store named by `--db`, or by the config's `scheduler.database`.
/// Prints a plain error and returns exit code 2 when nothing can be opened.
pub fn open_for_cli(config: &Path, db: Option<&Path>, write: bool) -> Result<(Store, Option<Config>), i32> {
    let cfg = if db.is_some() && !config.exists() {
        None
    } else {
        Some(super::load_config(config)?)
    };
    let path = match (db, &cfg) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(c)) => c.scheduler.database.clone(),
        (None, None) => {
            eprintln!("agentcron: no database: pass --db or a config");
            return Err(super::exit::USAGE);
        }
    };
    if !write && !path.exists() {
        eprintln!(
            "agentcron: no database at {}; start the scheduler first or pass --db",
            path.display()
        );
        return Err(super::exit::USAGE);
    }
    let store = if write {
        Store::open(&path)
    } else {
        Store::open_read_only(&path)
    };
    match store {
        Ok(s) => Ok((s, cfg)),
        Err(e) => {
            eprintln!("agentcron: {e}");
            Err(super::exit::USAGE)
        }
    }
}
