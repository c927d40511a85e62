//! Command-line verbs. Each verb lives in its own file and returns an exit code:
//! 0 ok; 1 what was checked does not hold; 2 usage error or nothing could be opened.

pub mod actions;
pub mod check;
pub mod config_cmd;
pub mod console;
pub mod db;
pub mod db_copy;
pub mod events;
pub mod explain;
pub mod next;
pub mod rehearse;
pub mod run;
pub mod runs;
pub mod show;
pub mod status;
pub mod trigger;

/// Exit codes of DESIGN.md "Command line".
pub mod exit {
    pub const OK: i32 = 0;
    pub const DOES_NOT_HOLD: i32 = 1;
    pub const USAGE: i32 = 2;
}

/// Loads the config for a verb, printing problems; `Err` carries the exit code
/// (1 invalid, 2 unreadable).
pub fn load_config(path: &std::path::Path) -> Result<crate::config::Config, i32> {
    let cfg = crate::config::load_file(path).map_err(|e| check::report_load_error(path, &e))?;
    crate::store::pg::use_password_file(cfg.scheduler.password_file.as_deref());
    Ok(cfg)
}
