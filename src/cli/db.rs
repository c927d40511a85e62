//! What the read verbs (`runs`, `show`, `events`, `explain`) share: finding and
//! opening the database, the zone times are shown in, and plain aligned tables.
//!
//! The database is `--db` if given, else the config's `[scheduler] database`.
//! With `--db` the config is optional: the verbs only read the database, and
//! without a config times are shown in UTC.

use super::exit;
use crate::config::{Config, LoadError, load_file};
use crate::store::Store;
use crate::store::read::LedgerRead;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::path::Path;

/// A ledger a read verb reads: the embedded file, or a PostgreSQL one.
pub struct Ledger(Store);

impl Ledger {
    /// Runs `f` on the ledger, in one read transaction.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&dyn LedgerRead) -> crate::store::Result<T>,
    ) -> crate::store::Result<T> {
        self.0.read(|tx| f(tx))
    }
}

/// [`open_for_cli`] for the verbs that read through [`LedgerRead`]: a
/// `postgres://` ledger (`--db`, or the config's `[scheduler] database`) is
/// read there, its password from the URL, `PGPASSWORD` or `[scheduler]
/// password_file`.
pub fn open_ledger_for_cli(config: &Path, db: Option<&Path>) -> Result<(Ledger, Option<Config>), i32> {
    let cfg = config_for_cli(config, db)?;
    let path = database_path(db, cfg.as_ref())?;
    Ok((Ledger(open_store(&path, false)?), cfg))
}

/// Opens the database for a CLI verb, printing a plain error and returning the
/// exit code when it cannot: 2 when nothing can be opened (no config to find it
/// in, no file, locked, corrupt, too new), or the config loader's code when the
/// config names the database but does not load. No verb creates a file.
pub fn open_for_cli(config: &Path, db: Option<&Path>, write: bool) -> Result<(Store, Option<Config>), i32> {
    let cfg = config_for_cli(config, db)?;
    let path = database_path(db, cfg.as_ref())?;
    Ok((open_store(&path, write)?, cfg))
}

/// The config a verb reads: optional with `--db`, required (and valid)
/// without it, since it names the database.
fn config_for_cli(config: &Path, db: Option<&Path>) -> Result<Option<Config>, i32> {
    if db.is_some() {
        let cfg = optional_config(config);
        crate::store::pg::use_password_file(cfg.as_ref().and_then(|c| c.scheduler.password_file.as_deref()));
        return Ok(cfg);
    }
    if !config.exists() {
        eprintln!(
            "agentcron: no config at {}; pass --config FILE, or --db FILE to read a database directly",
            config.display()
        );
        return Err(exit::USAGE);
    }
    Ok(Some(super::load_config(config)?))
}

/// `--db`, else the config's `[scheduler] database`.
fn database_path(db: Option<&Path>, cfg: Option<&Config>) -> Result<std::path::PathBuf, i32> {
    match (db, cfg) {
        (Some(p), _) => Ok(p.to_path_buf()),
        (None, Some(c)) => Ok(c.scheduler.database.clone()),
        // The config is always loaded when `--db` is absent (config_for_cli).
        (None, None) => Err(exit::USAGE),
    }
}

/// The ledger at `path`: a file, or a PostgreSQL URL. Never made here: only
/// the scheduler (`run`, the console) and the `db` verbs create a ledger; a
/// verb that made an empty one would act where no scheduler looks.
fn open_store(path: &Path, write: bool) -> Result<Store, i32> {
    let opened = if write {
        Store::open_existing(path)
    } else {
        let is_url = path.to_str().is_some_and(crate::store::pg::is_url);
        if !is_url && !path.exists() {
            eprintln!(
                "agentcron: {}",
                crate::store::StoreError::NoLedger {
                    path: path.display().to_string()
                }
            );
            return Err(exit::USAGE);
        }
        Store::open_read_only(path)
    };
    opened.map_err(|e| {
        eprintln!("agentcron: {e}");
        exit::USAGE
    })
}

/// The config when `--db` already names the database: used for time zones only,
/// so a missing file is fine and a broken one is a note, not an error.
fn optional_config(config: &Path) -> Option<Config> {
    if !config.exists() {
        return None;
    }
    match load_file(config) {
        Ok(c) => Some(c),
        Err(LoadError::Invalid(_)) => {
            eprintln!(
                "agentcron: note: {} is not valid (see `agentcron check`); showing times in UTC",
                config.display()
            );
            None
        }
        Err(e) => {
            eprintln!("agentcron: note: {e}; showing times in UTC");
            None
        }
    }
}

/// A schedule id a read verb was given must be one the config has, or (a
/// schedule since removed, or no config) one the database knows; else the
/// message says which it may have meant (exit 1).
pub fn check_schedule(store: &Store, cfg: Option<&Config>, id: &str) -> Result<(), String> {
    check_schedule_among(cfg, id, || store.read(|tx| tx.schedule_names()))
}

/// [`check_schedule`] on either kind of ledger.
pub fn check_schedule_in(ledger: &Ledger, cfg: Option<&Config>, id: &str) -> Result<(), String> {
    check_schedule_among(cfg, id, || ledger.read(|tx| tx.schedule_names()))
}

fn check_schedule_among(
    cfg: Option<&Config>,
    id: &str,
    stored: impl FnOnce() -> crate::store::Result<Vec<String>>,
) -> Result<(), String> {
    if cfg.is_some_and(|c| c.schedule(id).is_some()) {
        return Ok(());
    }
    let stored: Vec<String> = stored().unwrap_or_default();
    if stored.iter().any(|s| s == id) {
        return Ok(());
    }
    let mut known: Vec<&str> = cfg
        .map(|c| c.schedules.iter().map(|s| s.id.as_str()).collect())
        .unwrap_or_default();
    for s in &stored {
        if !known.contains(&s.as_str()) {
            known.push(s);
        }
    }
    Err(crate::operator::unknown_schedule(id, known.iter().copied()))
}

/// A tenant a read verb was given must be one of the config's (unchecked
/// without a config); else the message names the closest (exit 1).
pub fn check_tenant(cfg: Option<&Config>, tenant: &str) -> Result<(), String> {
    match cfg {
        Some(c) => crate::operator::tenant_schedules(c, tenant)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// The zone a schedule's times are shown in: its own when the config knows it,
/// else UTC.
pub fn zone(cfg: Option<&Config>, schedule: Option<&str>) -> Tz {
    cfg.zip(schedule)
        .and_then(|(c, s)| c.schedule(s))
        .map_or(Tz::UTC, |s| s.timezone)
}

/// An instant for JSON: RFC 3339 UTC with milliseconds, like the event details.
pub use crate::time::rfc3339;

/// An instant for tables: local date and time with the offset.
pub fn local(t: DateTime<Utc>, tz: Tz) -> String {
    crate::time::local_text(t, tz)
}

/// The one zone a block of text (a table, a run, an explanation) shows its
/// times in: UTC with `--utc`, else the schedule's zone when the block is one
/// schedule's, else the scheduler's default zone (UTC without a config).
pub fn block_zone(cfg: Option<&Config>, schedule: Option<&str>, utc: bool) -> Tz {
    if utc {
        return Tz::UTC;
    }
    match (cfg, schedule) {
        (Some(c), Some(s)) => c.schedule(s).map_or(c.scheduler.timezone, |s| s.timezone),
        (Some(c), None) => c.scheduler.timezone,
        (None, _) => Tz::UTC,
    }
}

/// One line of text for a table cell: control characters become spaces, and
/// text longer than `max` characters is cut with an ellipsis.
pub fn cell(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Aligned columns separated by two spaces; the last column is not padded.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(c);
            if i + 1 < row.len() {
                let pad = widths[i].saturating_sub(c.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints `value` as pretty JSON on stdout (URL userinfo masked in every
/// string, for rows written before the writers masked it); a serialization
/// failure (not expected for plain values) is reported and becomes exit 1.
pub fn print_json(verb: &str, value: &serde_json::Value) -> i32 {
    let mut value = value.clone();
    crate::secrets::redact_json(&mut value);
    match serde_json::to_string_pretty(&value) {
        Ok(s) => {
            println!("{s}");
            exit::OK
        }
        Err(e) => {
            eprintln!("agentcron {verb}: {e}");
            exit::DOES_NOT_HOLD
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_cells_stay_on_one_line() {
        let rows = vec![
            vec!["ID".to_string(), "NAME".into(), "X".into()],
            vec!["12".to_string(), "a".into(), "long last".into()],
        ];
        assert_eq!(table(&rows), "ID  NAME  X\n12  a     long last\n");
        assert_eq!(cell("a\nb", 10), "a b");
        assert_eq!(cell("abcdef", 4), "abc…");
    }
}
