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
pub struct Ledger {
    store: Store,
    /// The config file does not load: why, in one line. The verb shows the
    /// ledger's applied version instead (or the ledger alone).
    pub file_invalid: Option<String>,
}

impl Ledger {
    /// Runs `f` on the ledger, in one read transaction.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&dyn LedgerRead) -> crate::store::Result<T>,
    ) -> crate::store::Result<T> {
        self.store.read(|tx| f(tx))
    }
}

/// [`open_for_cli`] for the verbs that read through [`LedgerRead`]: a
/// `postgres://` ledger (`--db`, or the config's `[scheduler] database`) is
/// read there, its password from the URL, `PGPASSWORD` or `[scheduler]
/// password_file`.
///
/// A config file that does not load does not stop a read verb (DESIGN
/// "Status"): it warns on stderr and reads with the ledger's applied version
/// ([`Ledger::file_invalid`] says why); `check` is where the file's errors fail.
pub fn open_ledger_for_cli(config: &Path, db: Option<&Path>) -> Result<(Ledger, Option<Config>), i32> {
    let (store, cfg, file_invalid) = open_to_read(config, db)?;
    Ok((Ledger { store, file_invalid }, cfg))
}

/// Opens the database for a CLI verb, printing a plain error and returning the
/// exit code when it cannot: 2 when nothing can be opened (no config to find it
/// in, no file, locked, corrupt, too new), or the config loader's code when the
/// config names the database but does not load and the verb writes. A verb
/// that only reads goes on with the ledger's version (as
/// [`open_ledger_for_cli`]). No verb creates a file.
pub fn open_for_cli(config: &Path, db: Option<&Path>, write: bool) -> Result<(Store, Option<Config>), i32> {
    if !write {
        let (store, cfg, _) = open_to_read(config, db)?;
        return Ok((store, cfg));
    }
    let cfg = match config_for_cli(config, db)? {
        FileConfig::Loaded(cfg) => cfg.map(|c| *c),
        // A verb that acts does so on the file's word: it must load.
        FileConfig::Invalid(_) => Some(super::load_config(config)?),
    };
    let path = database_path(db, cfg.as_ref())?;
    Ok((open_store(&path, write)?, cfg))
}

/// The read verbs' opening: the store, the config to read it with and, when
/// the file does not load, why (already warned about).
fn open_to_read(config: &Path, db: Option<&Path>) -> Result<(Store, Option<Config>, Option<String>), i32> {
    match config_for_cli(config, db)? {
        FileConfig::Loaded(cfg) => {
            let cfg = cfg.map(|c| *c);
            let path = database_path(db, cfg.as_ref())?;
            Ok((open_store(&path, false)?, cfg, None))
        }
        FileConfig::Invalid(invalid) => {
            let path = db.map_or_else(|| invalid.database.clone(), Path::to_path_buf);
            let store = open_store(&path, false)?;
            let cfg = ledger_config(&store, &path, config, &invalid.why);
            Ok((store, cfg, Some(invalid.why)))
        }
    }
}

/// The config a read verb uses when the file does not load: the version the
/// ledger runs, after a one-line warning on stderr naming the file, the
/// problem and the version.
fn ledger_config(store: &Store, database: &Path, config: &Path, why: &str) -> Option<Config> {
    let loaded = ledger_version(store, database);
    warn_file_invalid(config, why, loaded.as_ref().map(|(v, _)| *v));
    loaded.map(|(_, c)| c)
}

/// The version the ledger runs and its config (its text as stored, secrets
/// sealed: reading needs none), the ledger at `database`.
pub(crate) fn ledger_version(store: &Store, database: &Path) -> Option<(i64, Config)> {
    let stored = store.read(|tx| tx.current_config()).ok().flatten()?;
    let mut cfg = crate::config::load_str(&stored.text, Path::new(&stored.path)).ok()?;
    cfg.scheduler.database = database.to_path_buf();
    Some((stored.version, cfg))
}

/// "warning: config FILE does not load (WHY); showing the ledger's version N
/// — run `agentcron check`", on stderr.
pub(crate) fn warn_file_invalid(config: &Path, why: &str, version: Option<i64>) {
    let showing = match version {
        Some(v) => format!("showing the ledger's version {v}"),
        None => "showing the ledger without a config (times in UTC)".to_string(),
    };
    eprintln!(
        "warning: config {} does not load ({why}); {showing} — run `agentcron check`",
        config.display()
    );
}

/// The config of a verb that reads it whole (`next SCHEDULE`, `console
/// --attach`): the file, or when it does not load the version the ledger runs
/// (with a warning; `check` tells the file's errors). Without a ledger that
/// has one, the file's errors as [`super::load_config`] reports them.
pub fn config_or_ledger(config: &Path, db: Option<&Path>) -> Result<crate::config::Config, i32> {
    let diags = match crate::config::load_file(config) {
        Ok(_) => return super::load_config(config),
        Err(crate::config::LoadError::Invalid(diags)) => diags,
        Err(e) => return Err(super::check::report_load_error(config, &e)),
    };
    let around = crate::config::load::read_around_errors(config);
    crate::store::pg::use_password_file(around.as_ref().and_then(|c| c.scheduler.password_file.as_deref()));
    let database = match (db, around) {
        (Some(db), _) => db.to_path_buf(),
        (None, Some(c)) => c.scheduler.database,
        (None, None) => config.with_file_name("agentcron.db"),
    };
    let is_url = database.to_str().is_some_and(crate::store::pg::is_url);
    let store = if is_url || database.exists() {
        Store::open_read_only(&database).ok()
    } else {
        None
    };
    let Some(store) = store else {
        return Err(super::check::report_load_error(
            config,
            &crate::config::LoadError::Invalid(diags),
        ));
    };
    match ledger_version(&store, &database) {
        Some((version, cfg)) => {
            warn_file_invalid(config, &one_line(&diags), Some(version));
            Ok(cfg)
        }
        None => Err(super::check::report_load_error(
            config,
            &crate::config::LoadError::Invalid(diags),
        )),
    }
}

/// The config file as a read verb finds it.
enum FileConfig {
    /// Loaded; `None` with `--db` and no file (or a broken one: times in UTC).
    Loaded(Option<Box<Config>>),
    /// There, but it does not load.
    Invalid(InvalidFile),
}

/// A config file that does not load, and what can still be read of it.
struct InvalidFile {
    /// The first problem, in one line (`LINE:COL: message (+N more)`).
    why: String,
    /// Its `[scheduler] database` as far as it reads (else the default).
    database: std::path::PathBuf,
}

/// The config a verb reads: optional with `--db`, required without it,
/// since it names the database; one that does not load is
/// [`FileConfig::Invalid`] (a file that cannot be read at all stops the verb).
fn config_for_cli(config: &Path, db: Option<&Path>) -> Result<FileConfig, i32> {
    if !config.exists() {
        if db.is_some() {
            return Ok(FileConfig::Loaded(None));
        }
        eprintln!(
            "agentcron: no config at {}; pass --config FILE, or --db FILE to read a database directly",
            config.display()
        );
        return Err(exit::USAGE);
    }
    match load_file(config) {
        Ok(cfg) => {
            crate::store::pg::use_password_file(cfg.scheduler.password_file.as_deref());
            Ok(FileConfig::Loaded(Some(Box::new(cfg))))
        }
        Err(LoadError::Invalid(diags)) => {
            let around = crate::config::load::read_around_errors(config);
            crate::store::pg::use_password_file(
                around.as_ref().and_then(|c| c.scheduler.password_file.as_deref()),
            );
            let database =
                around.map_or_else(|| config.with_file_name("agentcron.db"), |c| c.scheduler.database);
            Ok(FileConfig::Invalid(InvalidFile {
                why: one_line(&diags),
                database,
            }))
        }
        Err(e) if db.is_some() => {
            eprintln!("agentcron: note: {e}; showing times in UTC");
            Ok(FileConfig::Loaded(None))
        }
        Err(e) => {
            eprintln!("agentcron: {e}");
            Err(exit::USAGE)
        }
    }
}

/// A config's problems in one line: the first few, located, and how many more
/// (a typo often shows twice: the unknown key, and what it then lacks).
pub(crate) fn one_line(diags: &[crate::config::Diagnostic]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = diags
        .iter()
        .take(SHOWN)
        .map(|d| format!("{}:{}: {}", d.line, d.col, d.message))
        .collect();
    if diags.len() > SHOWN {
        parts.push(format!("{} more", diags.len() - SHOWN));
    }
    if parts.is_empty() {
        return "not a valid config".into();
    }
    parts.join("; ")
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
