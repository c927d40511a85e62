//! Reads `agentcron.toml` into a [`Config`].
//!
//! The file is parsed into a spanned TOML tree and walked by hand rather than through
//! serde, so that one pass can report *every* problem (unknown keys with a "did you
//! mean", wrong types, bad durations, zones and cron expressions, dangling
//! references) each at its own `FILE:LINE:COL`. Defaults are filled in and relative
//! paths resolved against the config file's folder on the way.
//!
//! This module owns the entry points, the [`Loader`] (where diagnostics are
//! collected) and the walk over the whole file; each section of the file has its
//! own submodule, and `table`/`value` hold the readers they share.

mod agents;
mod calendars;
mod deliveries;
mod gates;
mod maintenance;
mod policy;
mod schedule;
mod scheduler;
mod table;
mod tenants;
mod trigger;
mod value;

use super::diagnostic::{Diagnostic, LoadError, Source};
use super::model::Config;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use table::Tbl;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A TOML value of the parsed tree, with its byte span in the file.
type Value<'i> = Spanned<DeValue<'i>>;

/// Reads and validates the config at `path`. A file that cannot be read is
/// [`LoadError::Io`]; anything wrong inside it is [`LoadError::Invalid`].
pub fn load_file(path: &Path) -> Result<Config, LoadError> {
    let bytes = std::fs::read(path).map_err(|e| LoadError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => load_str(&text, path),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let prefix = e
                .as_bytes()
                .get(..valid)
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default();
            let (line, col) = Source::new(prefix).locate(prefix.len());
            Err(LoadError::Invalid(vec![Diagnostic {
                file: path.to_path_buf(),
                line,
                col,
                message: "the config is not valid UTF-8".into(),
                help: None,
            }]))
        }
    }
}

/// Validates config `text` as if read from `path`: `path` names the file in
/// diagnostics, and its folder is where relative paths resolve.
pub fn load_str(text: &str, path: &Path) -> Result<Config, LoadError> {
    load_str_with(text, path, &[])
}

/// Like [`load_str`], but top-level tables named in `extra` belong to someone
/// else (a rehearsal scenario embeds its config this way) and are not errors.
pub fn load_str_with(text: &str, path: &Path, extra: &[&str]) -> Result<Config, LoadError> {
    let mut loader = Loader::new(text, path);
    loader.extra_top = extra.iter().map(|s| s.to_string()).collect();
    let config = match DeTable::parse(text) {
        Ok(root) => Some(loader.config(root.get_ref())),
        Err(e) => {
            let at = e.span().map(|s| s.start).unwrap_or(0);
            loader.error(at, format!("invalid TOML: {}", e.message()));
            None
        }
    };
    if text.len() >= RELEASE_AFTER {
        release_freed_memory();
    }
    match config {
        Some(config) if loader.diags.is_empty() => Ok(config),
        _ => Err(LoadError::Invalid(loader.finish())),
    }
}

/// What can be read of a config file that does not load (see
/// [`load_file`]): everything the loader could make of it, with defaults where
/// a value is wrong or missing (a text that is not TOML reads as an empty
/// file; `None` only if even that fails). Only for finding things the file names that the rest of it does not
/// change — the ledger of `[scheduler] database` — so that the read verbs can
/// show the ledger while the file is being fixed; never to run anything.
pub fn read_around_errors(path: &Path) -> Option<Config> {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let text = if DeTable::parse(&text).is_ok() {
        text
    } else {
        String::new()
    };
    let root = DeTable::parse(&text).ok()?;
    Some(Loader::new(&text, path).config(root.get_ref()))
}

/// Texts from this size on (a few thousand schedules) leave enough freed
/// parse memory to be worth handing back.
const RELEASE_AFTER: usize = 1 << 20;

/// Parsing a large config allocates many times its size in short-lived
/// values, which the allocator keeps once freed: 100,000 schedules (6.9 MB
/// of TOML) left the process at 188 MB resident, 82 MB after giving them
/// back (`cargo bench --bench engine -- idle`). This is for glibc's
/// allocator (the library's users, the tests); the `agentcron` binary runs on
/// mimalloc, which returns freed pages by itself (108.7 MB idle, measured),
/// and there this call finds nothing to give back.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the OS; it touches
    // no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

const TOP_KEYS: &[&str] = &[
    "scheduler",
    "alert",
    "api",
    "calendars",
    "tenants",
    "agents",
    "schedule",
    "maintenance",
];

/// One key the loader accepts: the table it belongs to, as a dotted path from
/// the top (`""` for the top level, `"schedule.gate"`, `"agents.NAME"`), and
/// the key. Tables with a `kind` also list each kind's name (`kinds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptedKey {
    pub table: &'static str,
    pub key: &'static str,
}

/// Every key the loader accepts, from the same lists it checks tables against
/// (unknown keys are errors), so that docs/CONFIG.md can be held to them
/// (`tests/docs.rs`).
pub fn accepted_keys() -> Vec<AcceptedKey> {
    let lists: Vec<(&'static str, Vec<&'static str>)> = vec![
        ("", TOP_KEYS.to_vec()),
        ("scheduler", scheduler::SCHEDULER_KEYS.to_vec()),
        ("scheduler.alert", scheduler::ALERT_KINDS.all_keys()),
        // Each `[alert.routes]` entry is a sink with the keys of `scheduler.alert`.
        ("alert", scheduler::ALERT_SECTION_KEYS.to_vec()),
        ("api", scheduler::API_KEYS.to_vec()),
        ("calendars.NAME", calendars::CALENDAR_KEYS.to_vec()),
        ("tenants.NAME", tenants::TENANT_KEYS.to_vec()),
        ("agents.NAME", agents::AGENT_KINDS.all_keys()),
        ("agents.NAME.steps", agents::STEP_KEYS.to_vec()),
        ("schedule", schedule::SCHEDULE_KEYS.to_vec()),
        ("schedule.retry", policy::RETRY_KEYS.to_vec()),
        ("schedule.circuit", policy::CIRCUIT_KEYS.to_vec()),
        ("schedule.budget", policy::BUDGET_KEYS.to_vec()),
        ("schedule.gate", gates::GATE_KINDS.all_keys()),
        ("schedule.delivery", deliveries::DELIVERY_KINDS.all_keys()),
        ("maintenance", maintenance::MAINTENANCE_KEYS.to_vec()),
    ];
    lists
        .into_iter()
        .flat_map(|(table, keys)| keys.into_iter().map(move |key| AcceptedKey { table, key }))
        .collect()
}

/// The `kind` values of each table that has them, as (table, kind).
pub fn accepted_kinds() -> Vec<(&'static str, &'static str)> {
    let kinds = [
        ("scheduler.alert", scheduler::ALERT_KINDS.names()),
        ("agents.NAME", agents::AGENT_KINDS.names()),
        ("schedule.gate", gates::GATE_KINDS.names()),
        ("schedule.delivery", deliveries::DELIVERY_KINDS.names()),
    ];
    kinds
        .into_iter()
        .flat_map(|(table, names)| names.into_iter().map(move |n| (table, n)))
        .collect()
}

/// Names declared in the file, known before schedules are read so references can
/// be checked even when the declaration itself had errors.
struct Declared {
    timezone: chrono_tz::Tz,
    agents: BTreeSet<String>,
    calendars: BTreeSet<String>,
    tenants: BTreeSet<String>,
}

/// Walks the tree, building typed values and collecting diagnostics.
struct Loader<'s> {
    src: Source<'s>,
    file: PathBuf,
    abs_path: PathBuf,
    dir: PathBuf,
    /// Sort key (offset in the config) and the diagnostic.
    diags: Vec<(usize, Diagnostic)>,
    /// Top-level keys owned by an embedding document (see [`load_str_with`]).
    extra_top: Vec<String>,
}

impl<'s> Loader<'s> {
    fn new(text: &'s str, path: &Path) -> Self {
        let abs_path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = match abs_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Self {
            src: Source::new(text),
            file: path.to_path_buf(),
            abs_path,
            dir,
            diags: vec![],
            extra_top: vec![],
        }
    }

    fn finish(mut self) -> Vec<Diagnostic> {
        // Stable: problems at one spot keep the order they were found in.
        self.diags.sort_by_key(|(at, _)| *at);
        self.diags.into_iter().map(|(_, d)| d).collect()
    }

    fn error(&mut self, at: usize, message: impl Into<String>) {
        self.error_help(at, message, None);
    }

    fn error_help(&mut self, at: usize, message: impl Into<String>, help: Option<String>) {
        let (line, col) = self.src.locate(at);
        self.diags.push((
            at,
            Diagnostic {
                file: self.file.clone(),
                line,
                col,
                message: message.into(),
                help,
            },
        ));
    }

    fn line_of(&self, at: usize) -> usize {
        self.src.locate(at).0
    }

    /// Records that `name` is declared at `at`; when it was declared before,
    /// returns the line of that first declaration (every "declared twice"
    /// message points back at it) and keeps the first.
    fn repeated(&self, seen: &mut BTreeMap<String, usize>, name: &str, at: usize) -> Option<usize> {
        match seen.get(name) {
            Some(first) => Some(self.line_of(*first)),
            None => {
                seen.insert(name.to_string(), at);
                None
            }
        }
    }

    /// Resolves a config path against the config folder; `./` parts are dropped.
    fn resolve(&self, written: &str) -> PathBuf {
        let p = Path::new(written);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        let mut out = self.dir.clone();
        for c in p.components().filter(|c| *c != Component::CurDir) {
            out.push(c);
        }
        out
    }

    /// How a referenced file is named in diagnostics: next to the config as the
    /// user named it, so `tests/x.toml` + `h.txt` reads `tests/h.txt`.
    fn display_path(&self, written: &str) -> PathBuf {
        let p = Path::new(written);
        match self.file.parent() {
            Some(parent) if !p.is_absolute() => parent.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// The whole file: sections in dependency order, so references can be checked.
    fn config(&mut self, root: &DeTable<'_>) -> Config {
        let root = Tbl {
            table: root,
            at: 0,
            label: "the top level".into(),
        };
        let extra = self.extra_top.clone();
        let allowed: Vec<&str> = TOP_KEYS
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
            .collect();
        self.check_keys(&root, &allowed, &[], None);
        let mut scheduler = self.scheduler(&root);
        scheduler.alert_routes = self.alert_routes(&root);
        let api = self.api(&root);
        let calendars = self.calendars(&root);
        let tenants = self.tenants(&root);
        let agents = self
            .agents(&root)
            .into_iter()
            .map(|(id, a)| (id, std::sync::Arc::new(a)))
            .collect();
        let declared = Declared {
            timezone: scheduler.timezone,
            agents: declared_names(&root, "agents"),
            calendars: declared_names(&root, "calendars"),
            tenants: declared_names(&root, "tenants"),
        };
        let (schedules, ids) = self.schedules(&root, &declared);
        let maintenance = self.maintenance(&root, &declared, &ids);
        Config {
            path: self.abs_path.clone(),
            dir: self.dir.clone(),
            scheduler,
            api,
            calendars,
            tenants,
            agents,
            schedules,
            maintenance,
        }
    }
}

/// The entry names of a `[section.NAME]` table, whatever their contents.
fn declared_names(root: &Tbl, key: &str) -> BTreeSet<String> {
    match root.get(key).map(Spanned::get_ref) {
        Some(DeValue::Table(t)) => t.keys().map(|k| k.get_ref().to_string()).collect(),
        _ => BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::*;
    use std::time::Duration;

    fn errors(text: &str) -> Vec<Diagnostic> {
        match load_str(text, Path::new("/cfg/agentcron.toml")) {
            Ok(_) => panic!("expected errors"),
            Err(LoadError::Invalid(d)) => d,
            Err(e) => panic!("unexpected {e}"),
        }
    }

    const AGENT: &str = "[agents.a]\nkind = \"command\"\ncommand = [\"bin/run\", \"x/y\"]\n";

    #[test]
    fn minimal_config_gets_defaults() {
        let text = format!("{AGENT}[[schedule]]\nid = \"s\"\nagent = \"a\"\nevery = \"5m\"\n");
        let c = load_str(&text, Path::new("/cfg/agentcron.toml")).unwrap();
        assert_eq!(c.dir, PathBuf::from("/cfg"));
        assert_eq!(c.scheduler.database, PathBuf::from("/cfg/agentcron.db"));
        assert_eq!(c.scheduler.backfill_workers, 4);
        let s = &c.schedules[0];
        assert_eq!(s.tenant, "default");
        assert_eq!(s.check_every, Duration::from_secs(60));
        assert_eq!(s.close_after, Duration::from_secs(60));
        assert_eq!(s.payload, serde_json::json!({}));
        assert!(matches!(
            s.trigger,
            TriggerConfig::Every {
                anchor: Anchor::Fixed,
                ..
            }
        ));
        assert_eq!(
            c.agents["a"].kind,
            AgentKind::Command {
                command: vec!["/cfg/bin/run".into(), "x/y".into()]
            }
        );
        assert_eq!(c.agents["a"].timeout, Duration::from_secs(600));
    }

    #[test]
    fn backfill_default_is_half_but_at_least_one() {
        let c = load_str("[scheduler]\nworkers = 1\n", Path::new("a.toml")).unwrap();
        assert_eq!(c.scheduler.backfill_workers, 1);
        let c = load_str("[scheduler]\nworkers = 6\n", Path::new("a.toml")).unwrap();
        assert_eq!(c.scheduler.backfill_workers, 3);
    }

    #[test]
    fn unknown_key_points_at_key_with_suggestion() {
        let d = errors("[scheduler]\nwrokers = 3\n");
        assert_eq!((d[0].line, d[0].col), (2, 1));
        assert_eq!(d[0].help.as_deref(), Some("did you mean `workers`?"));
    }

    #[test]
    fn key_of_another_kind_does_not_apply() {
        let text = format!(
            "{AGENT}[[schedule]]\nid = \"s\"\nagent = \"a\"\non_event = \"e\"\n[[schedule.gate]]\nkind = \"file_exists\"\npath = \"p\"\nquery = \"x\"\n"
        );
        let d = errors(&text);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].message
                .contains("does not apply to a gate of kind `file_exists`"),
            "{}",
            d[0]
        );
    }

    #[test]
    fn payload_converts_to_json() {
        let text = format!(
            "{AGENT}[[schedule]]\nid = \"s\"\nagent = \"a\"\non_event = \"e\"\npayload = {{ a = 1, b = [true, 1.5], c = {{ d = \"x\" }}, t = 2026-01-01 }}\n"
        );
        let c = load_str(&text, Path::new("a.toml")).unwrap();
        assert_eq!(
            c.schedules[0].payload,
            serde_json::json!({"a": 1, "b": [true, 1.5], "c": {"d": "x"}, "t": "2026-01-01"})
        );
    }

    #[test]
    fn no_panic_on_odd_input() {
        for text in [
            "",
            "=",
            "[",
            "[[schedule]]",
            "schedule = 1",
            "schedule = [1]",
            "[agents]\na = 1",
            "[scheduler]\nworkers = 99999999999999999999",
            "[scheduler]\nworkers = -1",
            "[[schedule]]\ngate = 3",
            "[[schedule]]\npayload = nan",
            "[scheduler]\nalert = {}",
            "[calendars.c]\nweekend = [1.5]",
            "[[maintenance]]\nschedules = [1]",
        ] {
            let _ = load_str(text, Path::new("x.toml"));
        }
    }
}
