//! Reads `agentcron.toml` into a [`Config`].
//!
//! The file is parsed into a spanned TOML tree and walked by hand rather than through
//! serde, so that one pass can report *every* problem (unknown keys with a "did you
//! mean", wrong types, bad durations, zones and cron expressions, dangling
//! references) each at its own `FILE:LINE:COL`. Defaults are filled in and relative
//! paths resolved against the config file's folder on the way.

use super::diagnostic::{Diagnostic, LoadError, Source, closest};
use super::expect::parse_expect;
use super::model::*;
use crate::time::calendar::{Calendar, parse_holidays_file, parse_weekday};
use crate::time::cron::CronSpec;
use crate::time::duration::{format_duration, parse_duration};
use chrono::{NaiveDate, Weekday};
use chrono_tz::Tz;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
    match config {
        Some(config) if loader.diags.is_empty() => Ok(config),
        _ => Err(LoadError::Invalid(loader.finish())),
    }
}

const TOP_KEYS: &[&str] = &[
    "scheduler",
    "calendars",
    "tenants",
    "agents",
    "schedule",
    "maintenance",
];
const SCHEDULER_KEYS: &[&str] = &[
    "timezone",
    "database",
    "workers",
    "backfill_workers",
    "lease",
    "alert",
    "memory_runs",
    "shutdown_grace",
];
const CALENDAR_KEYS: &[&str] = &["weekend", "holidays", "holidays_file", "workdays"];
const TENANT_KEYS: &[&str] = &["max_concurrent"];
const STEP_KEYS: &[&str] = &["name", "side_effect"];
const SCHEDULE_KEYS: &[&str] = &[
    "id",
    "tenant",
    "owner",
    "agent",
    "payload",
    "cron",
    "every",
    "anchor",
    "after_event",
    "delay",
    "on_event",
    "timezone",
    "calendar",
    "non_business_day",
    "dst_gap",
    "dst_fold",
    "check_every",
    "close_after",
    "overlap",
    "max_concurrency",
    "catchup",
    "catchup_window",
    "default_error_class",
    "retry",
    "circuit",
    "budget",
    "approval_ttl",
    "gate",
    "delivery",
];
const TRIGGER_KEYS: &[&str] = &["cron", "every", "after_event", "on_event"];
const RETRY_KEYS: &[&str] = &["max_attempts", "backoff", "initial", "max", "jitter"];
const CIRCUIT_KEYS: &[&str] = &["open_after", "cool_down"];
const BUDGET_KEYS: &[&str] = &[
    "max_runtime",
    "max_tokens",
    "max_cost_per_day",
    "runtime_error_class",
];
const MAINTENANCE_KEYS: &[&str] = &["name", "cron", "duration", "timezone", "schedules", "reason"];

/// A kinded table (`kind = "…"`): its kinds and the keys each one accepts besides
/// the common ones.
struct Kinds {
    what: &'static str,
    common: &'static [&'static str],
    kinds: &'static [(&'static str, &'static [&'static str])],
}

impl Kinds {
    fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|(k, _)| *k).collect()
    }

    fn keys_of(&self, kind: &str) -> Vec<&'static str> {
        let own = self
            .kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, keys)| *keys)
            .unwrap_or(&[]);
        self.common.iter().chain(own).copied().collect()
    }

    fn all_keys(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = self.common.to_vec();
        for key in self.kinds.iter().flat_map(|(_, keys)| keys.iter()) {
            if !all.contains(key) {
                all.push(key);
            }
        }
        all
    }
}

const ALERT_KINDS: Kinds = Kinds {
    what: "alert",
    common: &["kind"],
    kinds: &[
        ("file", &["path"]),
        ("webhook", &["url"]),
        ("command", &["command"]),
    ],
};
const AGENT_KINDS: Kinds = Kinds {
    what: "agent",
    common: &["kind", "timeout", "env", "verify", "steps"],
    kinds: &[("command", &["command"]), ("http", &["url"])],
};
const GATE_KINDS: Kinds = Kinds {
    what: "gate",
    common: &["kind", "name", "on_fail", "timeout"],
    kinds: &[
        ("previous_run_finished", &[]),
        ("file_exists", &["path", "min_size", "newer_than_window"]),
        ("sqlite_query", &["database", "query", "expect"]),
        ("command", &["command"]),
        ("http", &["url", "status", "json_pointer", "expect"]),
        ("credential_valid", &["file", "command", "min_remaining"]),
        ("calendar", &["calendar"]),
    ],
};
const DELIVERY_KINDS: Kinds = Kinds {
    what: "delivery",
    common: &["kind", "name"],
    kinds: &[
        ("file", &["path"]),
        ("webhook", &["url", "headers"]),
        ("command", &["command"]),
    ],
};

/// A TOML table being read, with where it starts and how messages name it.
struct Tbl<'a, 'i> {
    table: &'a DeTable<'i>,
    /// Byte offset of the table's header (or inline `{`): where "missing key" points.
    at: usize,
    label: String,
}

impl<'a, 'i> Tbl<'a, 'i> {
    fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    fn key_at(&self, key: &str) -> usize {
        self.table
            .get_key_value(key)
            .map(|(k, _)| k.span().start)
            .unwrap_or(self.at)
    }
}

/// Names declared in the file, known before schedules are read so references can
/// be checked even when the declaration itself had errors.
struct Declared {
    timezone: Tz,
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

    // ----- whole file -------------------------------------------------------------

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
        let scheduler = self.scheduler(&root);
        let calendars = self.calendars(&root);
        let tenants = self.tenants(&root);
        let agents = self.agents(&root);
        let declared = Declared {
            timezone: scheduler.timezone,
            agents: self.declared_names(&root, "agents"),
            calendars: self.declared_names(&root, "calendars"),
            tenants: self.declared_names(&root, "tenants"),
        };
        let (schedules, ids) = self.schedules(&root, &declared);
        let maintenance = self.maintenance(&root, &declared, &ids);
        Config {
            path: self.abs_path.clone(),
            dir: self.dir.clone(),
            scheduler,
            calendars,
            tenants,
            agents,
            schedules,
            maintenance,
        }
    }

    fn declared_names(&self, root: &Tbl, key: &str) -> BTreeSet<String> {
        match root.get(key).map(Spanned::get_ref) {
            Some(DeValue::Table(t)) => t.keys().map(|k| k.get_ref().to_string()).collect(),
            _ => BTreeSet::new(),
        }
    }

    /// The entries of a `[section.NAME]` table of tables, each as a [`Tbl`].
    fn named_tables<'a, 'i>(&mut self, root: &Tbl<'a, 'i>, section: &str) -> Vec<(String, Tbl<'a, 'i>)> {
        let Some(v) = root.get(section) else {
            return vec![];
        };
        let DeValue::Table(t) = v.get_ref() else {
            self.type_error(section, v, "a table of named entries");
            return vec![];
        };
        let mut out = vec![];
        for (name, entry) in t.iter() {
            let name = name.get_ref().to_string();
            match entry.get_ref() {
                DeValue::Table(inner) => out.push((
                    name.clone(),
                    Tbl {
                        table: inner,
                        at: entry.span().start,
                        label: format!("[{section}.{name}]"),
                    },
                )),
                _ => self.type_error(&format!("{section}.{name}"), entry, "a table"),
            }
        }
        out
    }

    /// The tables of an array of tables such as `[[schedule]]`.
    fn table_array<'a, 'i>(&mut self, parent: &Tbl<'a, 'i>, key: &str) -> Vec<(usize, &'a DeTable<'i>)> {
        let Some(v) = parent.get(key) else {
            return vec![];
        };
        let DeValue::Array(items) = v.get_ref() else {
            let help = format!("write each entry as its own [[{key}]] table (double brackets)");
            let found = a_type(v.get_ref());
            self.error_help(
                v.span().start,
                format!("`{key}` must be an array of tables, not {found}"),
                Some(help),
            );
            return vec![];
        };
        let mut out = vec![];
        for item in items.iter() {
            match item.get_ref() {
                DeValue::Table(t) => out.push((item.span().start, t)),
                other => self.error(
                    item.span().start,
                    format!("each `{key}` entry must be a table, not {}", a_type(other)),
                ),
            }
        }
        out
    }

    // ----- [scheduler] ------------------------------------------------------------

    fn scheduler(&mut self, root: &Tbl) -> SchedulerConfig {
        let mut s = SchedulerConfig {
            database: self.dir.join("agentcron.db"),
            ..SchedulerConfig::default()
        };
        let Some(t) = self.opt_table(root, "scheduler", "[scheduler]".into()) else {
            s.backfill_workers = (s.workers / 2).max(1);
            return s;
        };
        self.check_keys(&t, SCHEDULER_KEYS, &[], None);
        if let Some(tz) = self.opt_tz(&t, "timezone") {
            s.timezone = tz;
        }
        if let Some(p) = self.opt_path(&t, "database") {
            s.database = p;
        }
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "workers", 1) {
            s.workers = n;
        }
        s.backfill_workers = (s.workers / 2).max(1);
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "backfill_workers", 1) {
            s.backfill_workers = n;
        }
        if let Some(d) = self.opt_positive_duration(&t, "lease") {
            s.lease = d;
        }
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "memory_runs", 0) {
            s.memory_runs = n;
        }
        if let Some((d, _)) = self.opt_duration(&t, "shutdown_grace") {
            s.shutdown_grace = d;
        }
        if let Some(a) = self.opt_table(&t, "alert", "the `alert` table of [scheduler]".into()) {
            s.alert = self.alert(&a);
        }
        s
    }

    fn alert(&mut self, t: &Tbl) -> Option<AlertSink> {
        let kind = self.kind(t, &ALERT_KINDS)?;
        match kind {
            "file" => Some(AlertSink::File {
                path: self.req_path(t, "path")?,
            }),
            "webhook" => Some(AlertSink::Webhook {
                url: self.req_url(t, "url")?,
            }),
            _ => Some(AlertSink::Command {
                command: self.req_argv(t, "command")?,
            }),
        }
    }

    // ----- [calendars.NAME] -------------------------------------------------------

    fn calendars(&mut self, root: &Tbl) -> BTreeMap<String, Arc<Calendar>> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "calendars") {
            self.check_keys(&t, CALENDAR_KEYS, &[], None);
            let mut ok = true;
            let weekend = match t.get("weekend") {
                None => vec![Weekday::Sat, Weekday::Sun],
                Some(v) => self.weekdays(v).unwrap_or_else(|| {
                    ok = false;
                    vec![]
                }),
            };
            let mut cal = Calendar::new(&name, &weekend);
            match self.opt_dates(&t, "holidays") {
                Some(dates) => cal.holidays.extend(dates),
                None => ok &= !t.has("holidays"),
            }
            if let Some((written, at)) = self.opt_str(&t, "holidays_file") {
                match self.holidays_file(&written, at) {
                    Some(dates) => cal.holidays.extend(dates),
                    None => ok = false,
                }
            } else {
                ok &= !t.has("holidays_file");
            }
            match self.opt_dates(&t, "workdays") {
                Some(dates) => cal.workdays.extend(dates),
                None => ok &= !t.has("workdays"),
            }
            if ok {
                out.insert(name, Arc::new(cal));
            }
        }
        out
    }

    fn weekdays(&mut self, v: &Value) -> Option<Vec<Weekday>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.type_error("weekend", v, "an array of weekdays");
            return None;
        };
        let mut out = vec![];
        let mut ok = true;
        for item in items.iter() {
            let text = match item.get_ref() {
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(i) => i.as_str().to_string(),
                other => {
                    self.error(
                        item.span().start,
                        format!(
                            "a weekend day must be a weekday name or number, not {}",
                            a_type(other)
                        ),
                    );
                    ok = false;
                    continue;
                }
            };
            match parse_weekday(&text) {
                Some(d) => out.push(d),
                None => {
                    self.error_help(
                        item.span().start,
                        format!("`{text}` is not a weekday"),
                        Some("use MON, TUE, WED, THU, FRI, SAT, SUN or 0-7 (0 and 7 are Sunday)".into()),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn opt_dates(&mut self, t: &Tbl, key: &str) -> Option<Vec<NaiveDate>> {
        let v = t.get(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.type_error(key, v, "an array of dates");
            return None;
        };
        let mut out = vec![];
        let mut ok = true;
        for item in items.iter() {
            let text = match item.get_ref() {
                DeValue::String(s) => s.to_string(),
                DeValue::Datetime(d) => d.to_string(),
                other => {
                    self.error(
                        item.span().start,
                        format!(
                            "`{key}` entries must be dates like \"2026-10-01\", not {}",
                            a_type(other)
                        ),
                    );
                    ok = false;
                    continue;
                }
            };
            match NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
                Ok(d) => out.push(d),
                Err(_) => {
                    self.error(
                        item.span().start,
                        format!("`{text}` is not a date; expected YYYY-MM-DD"),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// Reads a holidays file; its syntax errors are reported at its own line and
    /// column, and sorted where the config references it.
    fn holidays_file(&mut self, written: &str, at: usize) -> Option<Vec<NaiveDate>> {
        if written.trim().is_empty() {
            self.error(at, "`holidays_file` must not be empty");
            return None;
        }
        let path = self.resolve(written);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                self.error(at, format!("cannot read holidays file `{written}`: {e}"));
                return None;
            }
        };
        match parse_holidays_file(&text) {
            Ok(dates) => Some(dates),
            Err((line, col, message)) => {
                self.diags.push((
                    at,
                    Diagnostic {
                        file: self.display_path(written),
                        line,
                        col,
                        message,
                        help: None,
                    },
                ));
                None
            }
        }
    }

    // ----- [tenants.NAME] ---------------------------------------------------------

    fn tenants(&mut self, root: &Tbl) -> BTreeMap<String, TenantConfig> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "tenants") {
            self.check_keys(&t, TENANT_KEYS, &[], None);
            let max_concurrent = self.opt_uint::<u32>(&t, "max_concurrent", 1).map(|(n, _)| n);
            if max_concurrent.is_some() || !t.has("max_concurrent") {
                out.insert(name, TenantConfig { max_concurrent });
            }
        }
        out
    }

    // ----- [agents.NAME] ----------------------------------------------------------

    fn agents(&mut self, root: &Tbl) -> BTreeMap<String, AgentConfig> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "agents") {
            if let Some(agent) = self.agent(&name, &t) {
                out.insert(name, agent);
            }
        }
        out
    }

    fn agent(&mut self, name: &str, t: &Tbl) -> Option<AgentConfig> {
        let kind = self.kind(t, &AGENT_KINDS);
        let timeout = self.opt_positive_duration(t, "timeout");
        let env = self.opt_string_map(t, "env");
        let verify = self.opt_bool(t, "verify");
        let steps = self.steps(t);
        let kind = match kind? {
            "command" => AgentKind::Command {
                command: self.req_argv(t, "command")?,
            },
            _ => AgentKind::Http {
                url: self.req_url(t, "url")?,
            },
        };
        let timeout = default_if_absent(t, "timeout", timeout, Duration::from_secs(600))?;
        let env = default_if_absent(t, "env", env, BTreeMap::new())?;
        let verify = default_if_absent(t, "verify", verify, false)?;
        Some(AgentConfig {
            id: name.to_string(),
            kind,
            timeout,
            env,
            verify,
            steps: steps?,
        })
    }

    fn steps(&mut self, t: &Tbl) -> Option<Vec<StepConfig>> {
        let mut out: Vec<StepConfig> = vec![];
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        let mut ok = true;
        for (at, table) in self.table_array(t, "steps") {
            let st = Tbl {
                table,
                at,
                label: format!("a step of {}", t.label),
            };
            self.check_keys(&st, STEP_KEYS, &[], None);
            let name = self.req_str(&st, "name");
            let side_effect = self.opt_bool(&st, "side_effect");
            let side_effect = default_if_absent(&st, "side_effect", side_effect, false);
            match (name, side_effect) {
                (Some((name, name_at)), Some(side_effect)) => {
                    if let Some(first) = first_at.get(&name) {
                        let help = format!("the first `{name}` step is on line {}", self.line_of(*first));
                        self.error_help(name_at, format!("step `{name}` is declared twice"), Some(help));
                        ok = false;
                    } else {
                        first_at.insert(name.clone(), name_at);
                    }
                    out.push(StepConfig { name, side_effect });
                }
                _ => ok = false,
            }
        }
        if t.has("steps") && !t.get("steps").is_some_and(|v| v.get_ref().is_array()) {
            ok = false;
        }
        ok.then_some(out)
    }

    // ----- [[schedule]] -----------------------------------------------------------

    /// Returns the valid schedules and every declared id (valid or not) for
    /// maintenance references.
    fn schedules(&mut self, root: &Tbl, declared: &Declared) -> (Vec<ScheduleConfig>, BTreeSet<String>) {
        let mut out = vec![];
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        for (n, (at, table)) in self.table_array(root, "schedule").into_iter().enumerate() {
            let id = match table.get("id").map(Spanned::get_ref) {
                Some(DeValue::String(s)) => Some(s.to_string()),
                _ => None,
            };
            let label = match &id {
                Some(id) => format!("schedule `{id}`"),
                None => format!("[[schedule]] #{}", n + 1),
            };
            let t = Tbl { table, at, label };
            let mut unique = true;
            if let Some(id) = &id {
                let id_at = t.get("id").map(|v| v.span().start).unwrap_or(at);
                if let Some(first) = first_at.get(id) {
                    let help = format!(
                        "the first schedule `{id}` is on line {}; ids must be unique",
                        self.line_of(*first)
                    );
                    self.error_help(id_at, format!("duplicate schedule id `{id}`"), Some(help));
                    unique = false;
                } else {
                    first_at.insert(id.clone(), id_at);
                }
            }
            if let Some(s) = self.schedule(&t, declared)
                && unique
            {
                out.push(s);
            }
        }
        (out, first_at.into_keys().collect())
    }

    fn schedule(&mut self, t: &Tbl, d: &Declared) -> Option<ScheduleConfig> {
        self.check_keys(t, SCHEDULE_KEYS, &[], None);
        let id = self.req_str(t, "id").and_then(|(id, at)| {
            if id.is_empty() || id.contains('/') || id.chars().any(char::is_whitespace) {
                self.error(
                    at,
                    format!("schedule id `{id}` must be non-empty, without spaces or `/`"),
                );
                None
            } else {
                Some(id)
            }
        });
        let tenant = match self.opt_str(t, "tenant") {
            Some((tenant, at)) => self.reference(at, "tenant", tenant, &d.tenants, true),
            None => (!t.has("tenant")).then(|| "default".to_string()),
        };
        let owner = self.opt_str(t, "owner").map(|(s, _)| s);
        let agent = self
            .req_str(t, "agent")
            .and_then(|(agent, at)| self.reference(at, "agent", agent, &d.agents, false));
        let payload = match t.get("payload") {
            Some(v) => self.json(v, 0),
            None => Some(serde_json::Value::Object(serde_json::Map::new())),
        };
        let trigger = self.trigger(t);
        let timezone = self.opt_tz(t, "timezone");
        let calendar = match self.opt_str(t, "calendar") {
            Some((cal, at)) => self.reference(at, "calendar", cal, &d.calendars, false).map(Some),
            None => (!t.has("calendar")).then_some(None),
        };
        let non_business_day = self.opt_enum(
            t,
            "non_business_day",
            &[
                ("skip", NonBusinessDay::Skip),
                ("next_business_day", NonBusinessDay::NextBusinessDay),
            ],
        );
        let dst_gap = self.opt_enum(t, "dst_gap", &[("shift", DstGap::Shift), ("skip", DstGap::Skip)]);
        let dst_fold = self.opt_enum(
            t,
            "dst_fold",
            &[
                ("first", DstFold::First),
                ("last", DstFold::Last),
                ("both", DstFold::Both),
            ],
        );
        let check_every = self.opt_positive_duration(t, "check_every");
        let close_after = self.opt_duration(t, "close_after");
        let overlap = self.opt_enum(
            t,
            "overlap",
            &[
                ("skip", Overlap::Skip),
                ("buffer_one", Overlap::BufferOne),
                ("buffer_all", Overlap::BufferAll),
                ("cancel_previous", Overlap::CancelPrevious),
                ("allow", Overlap::Allow),
            ],
        );
        let max_concurrency = self.opt_uint::<u32>(t, "max_concurrency", 1).map(|(n, _)| n);
        let catchup = self.opt_enum(
            t,
            "catchup",
            &[
                ("all", Catchup::All),
                ("latest", Catchup::Latest),
                ("none", Catchup::None),
            ],
        );
        let catchup_window = self.opt_duration(t, "catchup_window").map(|(d, _)| d);
        let default_error_class = self.opt_error_class(t, "default_error_class");
        let retry = self.retry(t);
        let circuit = self.circuit(t);
        let budget = self.budget(t);
        let approval_ttl = self.opt_positive_duration(t, "approval_ttl");
        // Whether the schedule names a calendar at all: a bad name is reported once,
        // not again by every calendar gate.
        let gates = self.gates(t, d, t.has("calendar"));
        let deliveries = self.deliveries(t);

        let check_every = default_if_absent(t, "check_every", check_every, Duration::from_secs(60));
        let close_after = match (close_after, check_every) {
            (Some((close, at)), Some(check)) if close < check => {
                self.error_help(
                    at,
                    format!(
                        "`close_after` ({}) is shorter than `check_every` ({})",
                        format_duration(close),
                        format_duration(check)
                    ),
                    Some(format!(
                        "a window stays open for at least one check; use close_after >= {}",
                        format_duration(check)
                    )),
                );
                None
            }
            (Some((close, _)), _) => Some(close),
            (None, check) if !t.has("close_after") => check,
            (None, _) => None,
        };

        Some(ScheduleConfig {
            id: id?,
            tenant: tenant?,
            owner,
            agent: agent?,
            payload: payload?,
            trigger: trigger?,
            timezone: default_if_absent(t, "timezone", timezone, d.timezone)?,
            calendar: calendar?,
            non_business_day: default_if_absent(
                t,
                "non_business_day",
                non_business_day,
                NonBusinessDay::Skip,
            )?,
            dst_gap: default_if_absent(t, "dst_gap", dst_gap, DstGap::Shift)?,
            dst_fold: default_if_absent(t, "dst_fold", dst_fold, DstFold::First)?,
            check_every: check_every?,
            close_after: close_after?,
            overlap: default_if_absent(t, "overlap", overlap, Overlap::Skip)?,
            max_concurrency: default_if_absent(t, "max_concurrency", max_concurrency, 1)?,
            catchup: default_if_absent(t, "catchup", catchup, Catchup::All)?,
            catchup_window: default_if_absent(
                t,
                "catchup_window",
                catchup_window,
                Duration::from_secs(72 * 3600),
            )?,
            default_error_class: default_if_absent(
                t,
                "default_error_class",
                default_error_class,
                ErrorClass::Retryable,
            )?,
            retry: retry?,
            circuit: circuit?,
            budget: budget?,
            approval_ttl: default_if_absent(t, "approval_ttl", approval_ttl.map(Some), None)?,
            gates: gates?,
            deliveries: deliveries?,
        })
    }

    /// Checks a name against the declared ones; `default` is implied for tenants.
    fn reference(
        &mut self,
        at: usize,
        what: &str,
        name: String,
        declared: &BTreeSet<String>,
        default_ok: bool,
    ) -> Option<String> {
        if declared.contains(&name) || (default_ok && name == "default") {
            return Some(name);
        }
        let plural = if what == "agent" {
            "agents"
        } else if what == "tenant" {
            "tenants"
        } else {
            "calendars"
        };
        let help = match closest(&name, declared.iter().map(String::as_str)) {
            Some(s) => format!("did you mean `{s}`?"),
            None if declared.is_empty() => {
                format!("no {plural} are declared; add a [{plural}.{name}] table")
            }
            None => format!(
                "declared {plural}: {}; or add a [{plural}.{name}] table",
                list(declared.iter().map(String::as_str))
            ),
        };
        let message = if what == "tenant" {
            format!("tenant `{name}` is not declared (only `default` needs no [tenants] entry)")
        } else {
            format!("unknown {what} `{name}`")
        };
        self.error_help(at, message, Some(help));
        None
    }

    /// Layer 1: exactly one of cron | every (+ anchor) | after_event (+ delay) | on_event.
    fn trigger(&mut self, t: &Tbl) -> Option<TriggerConfig> {
        let cron = self
            .opt_str(t, "cron")
            .and_then(|(expr, at)| self.cron(&expr, at));
        let every = self.opt_positive_duration(t, "every");
        let anchor = self.opt_enum(
            t,
            "anchor",
            &[("fixed", Anchor::Fixed), ("last_start", Anchor::LastStart)],
        );
        let after_event = self.opt_event(t, "after_event");
        let delay = self.opt_duration(t, "delay").map(|(d, _)| d);
        let on_event = self.opt_event(t, "on_event");

        let present: Vec<&str> = TRIGGER_KEYS.iter().copied().filter(|k| t.has(k)).collect();
        if t.has("anchor") && !t.has("every") {
            self.error_help(
                t.key_at("anchor"),
                "`anchor` only applies to an `every` trigger",
                Some("remove `anchor`, or use `every = \"5m\"` as the trigger".into()),
            );
        }
        if t.has("delay") && !t.has("after_event") {
            self.error_help(
                t.key_at("delay"),
                "`delay` only applies to an `after_event` trigger",
                Some("remove `delay`, or use `after_event = \"NAME\"` as the trigger".into()),
            );
        }
        match present.as_slice() {
            [] => {
                self.error_help(
                    t.at,
                    format!("{} has no trigger", t.label),
                    Some(
                        "add exactly one of `cron`, `every`, `after_event` (with `delay`) or `on_event`"
                            .into(),
                    ),
                );
                None
            }
            [_] => {
                if t.has("after_event") && !t.has("delay") {
                    self.error_help(
                        t.at,
                        format!("{} has `after_event` but no `delay`", t.label),
                        Some("add e.g. `delay = \"30m\"` (how long after the event to run)".into()),
                    );
                }
                if t.has("cron") {
                    return cron.map(TriggerConfig::Cron);
                }
                if t.has("every") {
                    let anchor = default_if_absent(t, "anchor", anchor, Anchor::Fixed)?;
                    return every.map(|interval| TriggerConfig::Every { interval, anchor });
                }
                if t.has("after_event") {
                    return Some(TriggerConfig::AfterEvent {
                        event: after_event?,
                        delay: delay?,
                    });
                }
                on_event.map(|event| TriggerConfig::OnEvent { event })
            }
            many => {
                let keys = list(many.iter().copied());
                self.error_help(
                    t.at,
                    format!(
                        "{} has {} triggers ({keys}); exactly one is allowed",
                        t.label,
                        many.len()
                    ),
                    Some("keep one of `cron`, `every`, `after_event` or `on_event`".into()),
                );
                None
            }
        }
    }

    fn cron(&mut self, expr: &str, at: usize) -> Option<CronSpec> {
        match CronSpec::parse(expr) {
            Ok(c) => Some(c),
            Err(m) => {
                self.error(at, m);
                None
            }
        }
    }

    fn opt_event(&mut self, t: &Tbl, key: &str) -> Option<String> {
        let (name, at) = self.opt_str(t, key)?;
        if name.trim().is_empty() {
            self.error(at, format!("`{key}` must name an event"));
            return None;
        }
        Some(name)
    }

    fn retry(&mut self, parent: &Tbl) -> Option<RetryPolicy> {
        let mut r = RetryPolicy::default();
        if !parent.has("retry") {
            return Some(r);
        }
        let t = self.opt_table(parent, "retry", format!("the `retry` table of {}", parent.label))?;
        self.check_keys(&t, RETRY_KEYS, &[], None);
        let mut ok = true;
        match self.opt_uint::<u32>(&t, "max_attempts", 1) {
            Some((n, _)) => r.max_attempts = n,
            None => ok &= !t.has("max_attempts"),
        }
        match self.opt_enum(
            &t,
            "backoff",
            &[("fixed", Backoff::Fixed), ("exponential", Backoff::Exponential)],
        ) {
            Some(b) => r.backoff = b,
            None => ok &= !t.has("backoff"),
        }
        let initial = self.opt_duration(&t, "initial");
        let max = self.opt_duration(&t, "max");
        match initial {
            Some((d, _)) => r.initial = d,
            None => ok &= !t.has("initial"),
        }
        match max {
            Some((d, _)) => r.max = d,
            None => ok &= !t.has("max"),
        }
        if ok && r.initial > r.max {
            let at = initial
                .map(|(_, at)| at)
                .or(max.map(|(_, at)| at))
                .unwrap_or(t.at);
            self.error_help(
                at,
                format!(
                    "`retry.initial` ({}) is longer than `retry.max` ({})",
                    format_duration(r.initial),
                    format_duration(r.max)
                ),
                Some("the first retry delay must not exceed the cap; lower `initial` or raise `max`".into()),
            );
            ok = false;
        }
        match self.opt_f64(&t, "jitter") {
            Some((j, _)) if (0.0..=1.0).contains(&j) => r.jitter = j,
            Some((j, at)) => {
                self.error_help(
                    at,
                    format!("`jitter` must be between 0 and 1, not {j:?}"),
                    Some("jitter is the fraction of the delay varied at random, e.g. 0.1".into()),
                );
                ok = false;
            }
            None => ok &= !t.has("jitter"),
        }
        ok.then_some(r)
    }

    fn circuit(&mut self, parent: &Tbl) -> Option<CircuitPolicy> {
        let mut c = CircuitPolicy::default();
        if !parent.has("circuit") {
            return Some(c);
        }
        let t = self.opt_table(
            parent,
            "circuit",
            format!("the `circuit` table of {}", parent.label),
        )?;
        self.check_keys(&t, CIRCUIT_KEYS, &[], None);
        let mut ok = true;
        match self.opt_uint::<u32>(&t, "open_after", 1) {
            Some((n, _)) => c.open_after = n,
            None => ok &= !t.has("open_after"),
        }
        match self.opt_duration(&t, "cool_down") {
            Some((d, _)) => c.cool_down = d,
            None => ok &= !t.has("cool_down"),
        }
        ok.then_some(c)
    }

    fn budget(&mut self, parent: &Tbl) -> Option<BudgetPolicy> {
        let mut b = BudgetPolicy::default();
        if !parent.has("budget") {
            return Some(b);
        }
        let t = self.opt_table(
            parent,
            "budget",
            format!("the `budget` table of {}", parent.label),
        )?;
        self.check_keys(&t, BUDGET_KEYS, &[], None);
        let mut ok = true;
        b.max_runtime = self.opt_positive_duration(&t, "max_runtime");
        ok &= b.max_runtime.is_some() || !t.has("max_runtime");
        b.max_tokens = self.opt_uint::<u64>(&t, "max_tokens", 1).map(|(n, _)| n);
        ok &= b.max_tokens.is_some() || !t.has("max_tokens");
        match self.opt_f64(&t, "max_cost_per_day") {
            Some((c, _)) if c > 0.0 => b.max_cost_per_day = Some(c),
            Some((c, at)) => {
                self.error(
                    at,
                    format!("`max_cost_per_day` must be greater than 0, not {c:?}"),
                );
                ok = false;
            }
            None => ok &= !t.has("max_cost_per_day"),
        }
        match self.opt_error_class(&t, "runtime_error_class") {
            Some(c) => b.runtime_error_class = c,
            None => ok &= !t.has("runtime_error_class"),
        }
        ok.then_some(b)
    }

    // ----- [[schedule.gate]] ------------------------------------------------------

    fn gates(&mut self, parent: &Tbl, d: &Declared, schedule_calendar: bool) -> Option<Vec<GateConfig>> {
        let mut out = vec![];
        let mut ok = !parent.has("gate") || parent.get("gate").is_some_and(|v| v.get_ref().is_array());
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        for (n, (at, table)) in self.table_array(parent, "gate").into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("gate #{} of {}", n + 1, parent.label),
            };
            match self.gate(&t, d, schedule_calendar) {
                Some(g) => {
                    let name_at = t.get("name").map(|v| v.span().start).unwrap_or(at);
                    if let Some(first) = first_at.get(&g.name) {
                        let help = format!(
                            "the first gate `{}` is on line {}; give each gate its own `name`",
                            g.name,
                            self.line_of(*first)
                        );
                        self.error_help(
                            name_at,
                            format!("gate name `{}` is used twice in {}", g.name, parent.label),
                            Some(help),
                        );
                        ok = false;
                    } else {
                        first_at.insert(g.name.clone(), name_at);
                    }
                    out.push(g);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn gate(&mut self, t: &Tbl, d: &Declared, schedule_calendar: bool) -> Option<GateConfig> {
        let kind_name = self.kind(t, &GATE_KINDS);
        let name = self.opt_str(t, "name").map(|(n, _)| n);
        let on_fail = self.opt_enum(
            t,
            "on_fail",
            &[
                ("skip", OnFail::Skip),
                ("fail", OnFail::Fail),
                ("human", OnFail::Human),
            ],
        );
        let timeout = self.opt_positive_duration(t, "timeout");
        let kind = match kind_name? {
            "previous_run_finished" => Some(GateKind::PreviousRunFinished),
            "file_exists" => {
                let path = self.req_path(t, "path");
                let min_size = self.opt_uint::<u64>(t, "min_size", 0).map(|(n, _)| n);
                let newer = self.opt_bool(t, "newer_than_window");
                Some(GateKind::FileExists {
                    path: path?,
                    min_size: default_if_absent(t, "min_size", min_size.map(Some), None)?,
                    newer_than_window: default_if_absent(t, "newer_than_window", newer, false)?,
                })
            }
            "sqlite_query" => {
                let database = self.req_path(t, "database");
                let query = self.req_str(t, "query").and_then(|(q, at)| {
                    if q.trim().is_empty() {
                        self.error(at, "`query` must not be empty");
                        None
                    } else {
                        Some(q)
                    }
                });
                let expect = self.req_expect(t, "expect");
                Some(GateKind::SqliteQuery {
                    database: database?,
                    query: query?,
                    expect: expect?,
                })
            }
            "command" => Some(GateKind::Command {
                command: self.req_argv(t, "command")?,
            }),
            "http" => {
                let url = self.req_url(t, "url");
                let status = self.opt_uint::<u16>(t, "status", 100).and_then(|(s, at)| {
                    if s > 599 {
                        self.error(at, format!("`status` must be an HTTP status (100-599), not {s}"));
                        None
                    } else {
                        Some(s)
                    }
                });
                let pointer = self.opt_str(t, "json_pointer").and_then(|(p, at)| {
                    if p.is_empty() || p.starts_with('/') {
                        Some(p)
                    } else {
                        self.error_help(
                            at,
                            format!("`json_pointer` `{p}` must start with `/`"),
                            Some(format!("JSON pointers look like \"/{p}\" (RFC 6901)")),
                        );
                        None
                    }
                });
                let expect = self.opt_expect(t, "expect");
                Some(GateKind::Http {
                    url: url?,
                    status: default_if_absent(t, "status", status, 200)?,
                    json_pointer: default_if_absent(t, "json_pointer", pointer.map(Some), None)?,
                    expect: default_if_absent(t, "expect", expect.map(Some), None)?,
                })
            }
            "credential_valid" => {
                let source = match (t.has("file"), t.has("command")) {
                    (true, false) => self.opt_path(t, "file").map(CredentialSource::File),
                    (false, true) => self.opt_argv(t, "command").map(CredentialSource::Command),
                    (true, true) => {
                        self.error_help(
                            t.key_at("command"),
                            "a credential_valid gate takes `file` or `command`, not both",
                            Some("keep the one that prints the expiry".into()),
                        );
                        None
                    }
                    (false, false) => {
                        self.error_help(
                            t.at,
                            format!("{} (credential_valid) needs `file` or `command`", t.label),
                            Some("`file` is read, `command` is run; the first line holds the expiry".into()),
                        );
                        None
                    }
                };
                let min_remaining = self.opt_duration(t, "min_remaining").map(|(d, _)| d);
                Some(GateKind::CredentialValid {
                    source: source?,
                    min_remaining: default_if_absent(t, "min_remaining", min_remaining, Duration::ZERO)?,
                })
            }
            _ => {
                let calendar = match self.opt_str(t, "calendar") {
                    Some((c, at)) => self.reference(at, "calendar", c, &d.calendars, false).map(Some),
                    None if t.has("calendar") => None,
                    None if !schedule_calendar => {
                        self.error_help(
                            t.at,
                            format!("{} (calendar) has no calendar to check", t.label),
                            Some("set `calendar` on the gate or on the schedule".into()),
                        );
                        None
                    }
                    None => Some(None),
                };
                calendar.map(|calendar| GateKind::Calendar { calendar })
            }
        };
        let kind = kind?;
        Some(GateConfig {
            name: default_if_absent(t, "name", name, kind.kind_name().to_string())?,
            on_fail: default_if_absent(t, "on_fail", on_fail, OnFail::Fail)?,
            timeout: default_if_absent(t, "timeout", timeout, Duration::from_secs(30))?,
            kind,
        })
    }

    fn opt_expect(&mut self, t: &Tbl, key: &str) -> Option<Expect> {
        let v = t.get(key)?;
        let DeValue::String(s) = v.get_ref() else {
            let help = match v.get_ref() {
                DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) => Some(format!(
                    "write a comparison string, e.g. `{key} = \"== {}\"`",
                    raw(v.get_ref())
                )),
                _ => None,
            };
            let found = a_type(v.get_ref());
            self.error_help(
                v.span().start,
                format!("`{key}` must be a comparison string like \"> 0\", not {found}"),
                help,
            );
            return None;
        };
        match parse_expect(s) {
            Ok(e) => Some(e),
            Err(m) => {
                self.error(v.span().start, m);
                None
            }
        }
    }

    fn req_expect(&mut self, t: &Tbl, key: &str) -> Option<Expect> {
        if self.require(t, key) {
            self.opt_expect(t, key)
        } else {
            None
        }
    }

    // ----- [[schedule.delivery]] --------------------------------------------------

    fn deliveries(&mut self, parent: &Tbl) -> Option<Vec<DeliveryConfig>> {
        let mut out = vec![];
        let mut ok =
            !parent.has("delivery") || parent.get("delivery").is_some_and(|v| v.get_ref().is_array());
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        for (n, (at, table)) in self.table_array(parent, "delivery").into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("delivery #{} of {}", n + 1, parent.label),
            };
            let kind = self.kind(&t, &DELIVERY_KINDS);
            let name = self.opt_str(&t, "name");
            let kind = match kind {
                Some("file") => self.req_path(&t, "path").map(|path| DeliveryKind::File { path }),
                Some("webhook") => {
                    let url = self.req_url(&t, "url");
                    let headers = self.opt_string_map(&t, "headers");
                    let headers = default_if_absent(&t, "headers", headers, BTreeMap::new());
                    url.zip(headers)
                        .map(|(url, headers)| DeliveryKind::Webhook { url, headers })
                }
                Some(_) => self
                    .req_argv(&t, "command")
                    .map(|command| DeliveryKind::Command { command }),
                None => None,
            };
            let default_name = if n == 0 {
                "deliver".to_string()
            } else {
                format!("deliver-{}", n + 1)
            };
            let (name, name_at) = match name {
                Some((name, name_at)) => (Some(name), name_at),
                None if t.has("name") => (None, at),
                None => (Some(default_name), at),
            };
            if let Some(name) = &name {
                if let Some(first) = first_at.get(name) {
                    let help = format!(
                        "the first delivery `{name}` is on line {}; give each delivery its own `name`",
                        self.line_of(*first)
                    );
                    self.error_help(
                        name_at,
                        format!("delivery name `{name}` is used twice in {}", parent.label),
                        Some(help),
                    );
                    ok = false;
                } else {
                    first_at.insert(name.clone(), name_at);
                }
            }
            match (name, kind) {
                (Some(name), Some(kind)) => out.push(DeliveryConfig { name, kind }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }

    // ----- [[maintenance]] --------------------------------------------------------

    fn maintenance(&mut self, root: &Tbl, d: &Declared, ids: &BTreeSet<String>) -> Vec<MaintenanceConfig> {
        let mut out = vec![];
        let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
        for (n, (at, table)) in self.table_array(root, "maintenance").into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("[[maintenance]] #{}", n + 1),
            };
            self.check_keys(&t, MAINTENANCE_KEYS, &[], None);
            let name = self.req_str(&t, "name");
            if let Some((name, name_at)) = &name {
                if let Some(first) = first_at.get(name) {
                    let help = format!("the first one is on line {}", self.line_of(*first));
                    self.error_help(
                        *name_at,
                        format!("duplicate maintenance name `{name}`"),
                        Some(help),
                    );
                } else {
                    first_at.insert(name.clone(), *name_at);
                }
            }
            let cron = if self.require(&t, "cron") {
                self.opt_str(&t, "cron")
                    .and_then(|(expr, at)| self.cron(&expr, at))
            } else {
                None
            };
            let duration = if self.require(&t, "duration") {
                self.opt_positive_duration(&t, "duration")
            } else {
                None
            };
            let timezone = self.opt_tz(&t, "timezone");
            let schedules = match self.opt_str_list(&t, "schedules") {
                Some(entries) => {
                    let mut ok = true;
                    for (id, at) in &entries {
                        if !ids.contains(id) {
                            let help = match closest(id, ids.iter().map(String::as_str)) {
                                Some(s) => format!("did you mean `{s}`?"),
                                None => {
                                    format!("declared schedules: {}", list(ids.iter().map(String::as_str)))
                                }
                            };
                            self.error_help(
                                *at,
                                format!("unknown schedule `{id}` in {}", t.label),
                                Some(help),
                            );
                            ok = false;
                        }
                    }
                    ok.then(|| entries.into_iter().map(|(id, _)| id).collect())
                }
                None => (!t.has("schedules")).then(Vec::new),
            };
            let reason = self.opt_str(&t, "reason").map(|(r, _)| r);
            let (Some((name, _)), Some(cron), Some(duration), Some(schedules)) =
                (name, cron, duration, schedules)
            else {
                continue;
            };
            let Some(timezone) = default_if_absent(&t, "timezone", timezone, d.timezone) else {
                continue;
            };
            let Some(reason) = default_if_absent(&t, "reason", reason, format!("maintenance window {name}"))
            else {
                continue;
            };
            out.push(MaintenanceConfig {
                name,
                cron,
                duration,
                timezone,
                schedules,
                reason,
            });
        }
        out
    }

    // ----- typed readers ----------------------------------------------------------
    //
    // Each returns None after reporting when the key is present but wrong, and None
    // silently when it is absent; `default_if_absent` tells the two apart.

    /// Reports keys of `t` not in `allowed`. Keys that are valid for another kind
    /// of the same table (`related`) get a "does not apply" message instead.
    fn check_keys(&mut self, t: &Tbl, allowed: &[&str], related: &[&str], kind: Option<(&str, &str)>) {
        for (key, _) in t.table.iter() {
            let name = key.get_ref().as_ref();
            if allowed.contains(&name) {
                continue;
            }
            let at = key.span().start;
            if related.contains(&name) {
                let (what, kind) = kind.unwrap_or(("table", ""));
                self.error_help(
                    at,
                    format!(
                        "`{name}` does not apply to {} {what} of kind `{kind}`",
                        article(what)
                    ),
                    Some(format!(
                        "keys of a `{kind}` {what}: {}",
                        list(allowed.iter().copied())
                    )),
                );
                continue;
            }
            let help = match closest(name, allowed.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None => format!("known keys here: {}", list(allowed.iter().copied())),
            };
            self.error_help(at, format!("unknown key `{name}` in {}", t.label), Some(help));
        }
    }

    /// Reads `kind` and checks the table's keys against it. Without a valid kind
    /// the keys are still checked against those of every kind.
    fn kind(&mut self, t: &Tbl, kinds: &Kinds) -> Option<&'static str> {
        let names = kinds.names();
        let kind = if self.require(t, "kind") {
            self.opt_enum(t, "kind", &pairs(&names))
        } else {
            None
        };
        match kind {
            Some(k) => {
                let allowed = kinds.keys_of(k);
                self.check_keys(t, &allowed, &kinds.all_keys(), Some((kinds.what, k)));
            }
            None => self.check_keys(t, &kinds.all_keys(), &[], None),
        }
        kind
    }

    /// Reports a missing required key at the table's start; true when present.
    fn require(&mut self, t: &Tbl, key: &str) -> bool {
        if t.has(key) {
            return true;
        }
        self.error(t.at, format!("{} is missing the required key `{key}`", t.label));
        false
    }

    fn type_error(&mut self, key: &str, v: &Value, want: &str) {
        let found = a_type(v.get_ref());
        self.error(v.span().start, format!("`{key}` must be {want}, not {found}"));
    }

    fn opt_table<'a, 'i>(&mut self, t: &Tbl<'a, 'i>, key: &str, label: String) -> Option<Tbl<'a, 'i>> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Table(table) => Some(Tbl {
                table,
                at: v.span().start,
                label,
            }),
            _ => {
                self.type_error(key, v, "a table");
                None
            }
        }
    }

    fn opt_str(&mut self, t: &Tbl, key: &str) -> Option<(String, usize)> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some((s.to_string(), v.span().start)),
            _ => {
                self.type_error(key, v, "a string");
                None
            }
        }
    }

    fn req_str(&mut self, t: &Tbl, key: &str) -> Option<(String, usize)> {
        if self.require(t, key) {
            self.opt_str(t, key)
        } else {
            None
        }
    }

    fn opt_str_list(&mut self, t: &Tbl, key: &str) -> Option<Vec<(String, usize)>> {
        let v = t.get(key)?;
        let DeValue::Array(items) = v.get_ref() else {
            self.type_error(key, v, "an array of strings");
            return None;
        };
        let mut out = vec![];
        let mut ok = true;
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => out.push((s.to_string(), item.span().start)),
                other => {
                    self.error(
                        item.span().start,
                        format!("`{key}` entries must be strings, not {}", a_type(other)),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn opt_bool(&mut self, t: &Tbl, key: &str) -> Option<bool> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.type_error(key, v, "true or false");
                None
            }
        }
    }

    /// A non-negative integer of at least `min` that fits `T`.
    fn opt_uint<T: TryFrom<i64>>(&mut self, t: &Tbl, key: &str, min: i64) -> Option<(T, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        let DeValue::Integer(i) = v.get_ref() else {
            self.type_error(key, v, "an integer");
            return None;
        };
        let Ok(n) = i64::from_str_radix(i.as_str(), i.radix()) else {
            self.error(at, format!("`{key}` is out of range"));
            return None;
        };
        if n < min {
            self.error(at, format!("`{key}` must be at least {min}, not {n}"));
            return None;
        }
        match T::try_from(n) {
            Ok(x) => Some((x, at)),
            Err(_) => {
                self.error(at, format!("`{key}` = {n} is too large"));
                None
            }
        }
    }

    /// A finite number; integers are accepted where a float is expected.
    fn opt_f64(&mut self, t: &Tbl, key: &str) -> Option<(f64, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        let n = match v.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok().map(|n| n as f64),
            _ => {
                self.type_error(key, v, "a number");
                return None;
            }
        };
        match n {
            Some(n) if n.is_finite() => Some((n, at)),
            _ => {
                self.error(at, format!("`{key}` must be a finite number"));
                None
            }
        }
    }

    fn opt_duration(&mut self, t: &Tbl, key: &str) -> Option<(Duration, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        match v.get_ref() {
            DeValue::String(s) => match parse_duration(s) {
                Ok(d) => Some((d, at)),
                Err(m) => {
                    self.error(at, m);
                    None
                }
            },
            DeValue::Integer(i) => {
                self.error_help(
                    at,
                    format!("`{key}` must be a duration string, not an integer"),
                    Some(format!(
                        "write `{key} = \"{}s\"` (units: ms, s, m, h, d, w)",
                        i.as_str()
                    )),
                );
                None
            }
            _ => {
                self.type_error(key, v, "a duration string like \"5m\"");
                None
            }
        }
    }

    fn opt_positive_duration(&mut self, t: &Tbl, key: &str) -> Option<Duration> {
        let (d, at) = self.opt_duration(t, key)?;
        if d.is_zero() {
            self.error(at, format!("`{key}` must be longer than 0s"));
            return None;
        }
        Some(d)
    }

    fn opt_enum<T: Copy>(&mut self, t: &Tbl, key: &str, options: &[(&str, T)]) -> Option<T> {
        let (s, at) = self.opt_str(t, key)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == s) {
            return Some(*v);
        }
        let names = || options.iter().map(|(n, _)| *n);
        let help = match closest(&s, names()) {
            Some(c) => format!("did you mean `{c}`? expected one of: {}", list(names())),
            None => format!("expected one of: {}", list(names())),
        };
        self.error_help(at, format!("`{s}` is not a valid `{key}`"), Some(help));
        None
    }

    fn opt_error_class(&mut self, t: &Tbl, key: &str) -> Option<ErrorClass> {
        self.opt_enum(
            t,
            key,
            &[
                ("retryable", ErrorClass::Retryable),
                ("non_retryable", ErrorClass::NonRetryable),
                ("needs_human", ErrorClass::NeedsHuman),
            ],
        )
    }

    fn opt_tz(&mut self, t: &Tbl, key: &str) -> Option<Tz> {
        let (s, at) = self.opt_str(t, key)?;
        match s.parse::<Tz>() {
            Ok(tz) => Some(tz),
            Err(_) => {
                let help = match closest(&s, chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())) {
                    Some(c) => format!("did you mean `{c}`?"),
                    None => "use an IANA zone name such as `UTC`, `Europe/Berlin` or `Asia/Shanghai`".into(),
                };
                self.error_help(at, format!("unknown time zone `{s}`"), Some(help));
                None
            }
        }
    }

    fn opt_path(&mut self, t: &Tbl, key: &str) -> Option<PathBuf> {
        let (s, at) = self.opt_str(t, key)?;
        if s.trim().is_empty() {
            self.error(at, format!("`{key}` must not be empty"));
            return None;
        }
        Some(self.resolve(&s))
    }

    fn req_path(&mut self, t: &Tbl, key: &str) -> Option<PathBuf> {
        if self.require(t, key) {
            self.opt_path(t, key)
        } else {
            None
        }
    }

    fn req_url(&mut self, t: &Tbl, key: &str) -> Option<String> {
        let (url, at) = self.req_str(t, key)?;
        if url.starts_with("http://") || url.starts_with("https://") {
            Some(url)
        } else {
            self.error(
                at,
                format!("`{key}` must be an http:// or https:// URL, not `{url}`"),
            );
            None
        }
    }

    /// An argv array; a relative program path containing `/` resolves against the
    /// config folder so agents run the same from any working directory.
    fn opt_argv(&mut self, t: &Tbl, key: &str) -> Option<Vec<String>> {
        let v = t.get(key)?;
        let at = v.span().start;
        let items = match v.get_ref() {
            DeValue::Array(items) => items,
            DeValue::String(s) => {
                let words: Vec<String> = s.split_whitespace().map(|w| format!("{w:?}")).collect();
                self.error_help(
                    at,
                    format!("`{key}` must be an argv array, not a string (no shell is involved)"),
                    Some(format!("write `{key} = [{}]`", words.join(", "))),
                );
                return None;
            }
            _ => {
                self.type_error(key, v, "an array of strings (argv)");
                return None;
            }
        };
        let mut argv = vec![];
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => argv.push(s.to_string()),
                other => {
                    self.error(
                        item.span().start,
                        format!("`{key}` entries must be strings, not {}", a_type(other)),
                    );
                    return None;
                }
            }
        }
        let Some(program) = argv.first_mut() else {
            self.error_help(
                at,
                format!("`{key}` must not be empty"),
                Some(format!(
                    "give the program and its arguments, e.g. `{key} = [\"python3\", \"agent.py\"]`"
                )),
            );
            return None;
        };
        if program.trim().is_empty() {
            self.error(
                at,
                format!("the program (first entry) of `{key}` must not be empty"),
            );
            return None;
        }
        if program.contains('/') && !Path::new(program.as_str()).is_absolute() {
            *program = self.resolve(program).to_string_lossy().into_owned();
        }
        Some(argv)
    }

    fn req_argv(&mut self, t: &Tbl, key: &str) -> Option<Vec<String>> {
        if self.require(t, key) {
            self.opt_argv(t, key)
        } else {
            None
        }
    }

    fn opt_string_map(&mut self, t: &Tbl, key: &str) -> Option<BTreeMap<String, String>> {
        let v = t.get(key)?;
        let DeValue::Table(table) = v.get_ref() else {
            self.type_error(key, v, "a table of strings");
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, val) in table.iter() {
            match val.get_ref() {
                DeValue::String(s) => {
                    out.insert(k.get_ref().to_string(), s.to_string());
                }
                other => {
                    let help = match other {
                        DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) => {
                            Some(format!("quote it: `{} = \"{}\"`", k.get_ref(), raw(other)))
                        }
                        _ => None,
                    };
                    self.error_help(
                        val.span().start,
                        format!("`{key}.{}` must be a string, not {}", k.get_ref(), a_type(other)),
                        help,
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// Converts a TOML value to JSON for the payload; datetimes become strings.
    fn json(&mut self, v: &Value, depth: usize) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        // Far deeper than any real payload; keeps recursion bounded on hostile input.
        if depth > 64 {
            self.error(v.span().start, "`payload` is nested too deeply");
            return None;
        }
        let at = v.span().start;
        Some(match v.get_ref() {
            DeValue::String(s) => J::String(s.to_string()),
            DeValue::Boolean(b) => J::Bool(*b),
            DeValue::Datetime(d) => J::String(d.to_string()),
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => J::from(n),
                Err(_) => {
                    self.error(at, "integer in `payload` is out of range");
                    return None;
                }
            },
            DeValue::Float(f) => match f
                .as_str()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(n) => J::Number(n),
                None => {
                    self.error(at, "`payload` numbers must be finite (JSON has no inf or nan)");
                    return None;
                }
            },
            DeValue::Array(items) => {
                let mut out = vec![];
                let mut ok = true;
                for item in items.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => out.push(j),
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Array(out)
            }
            DeValue::Table(t) => {
                let mut out = serde_json::Map::new();
                let mut ok = true;
                for (k, item) in t.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => {
                            out.insert(k.get_ref().to_string(), j);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Object(out)
            }
        })
    }
}

/// The value if the key was present and valid, the default if it was absent, and
/// None (already reported) if it was present but invalid.
fn default_if_absent<T>(t: &Tbl, key: &str, value: Option<T>, default: T) -> Option<T> {
    match value {
        Some(v) => Some(v),
        None if !t.has(key) => Some(default),
        None => None,
    }
}

fn pairs<'n>(names: &[&'n str]) -> Vec<(&'n str, &'n str)> {
    names.iter().map(|n| (*n, *n)).collect()
}

fn list<'n>(names: impl Iterator<Item = &'n str>) -> String {
    names.map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn a_type(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The literal text of a scalar, for "write it like this" hints.
fn raw(v: &DeValue) -> String {
    match v {
        DeValue::Integer(i) => i.to_string(),
        DeValue::Float(f) => f.as_str().to_string(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::String(s) => s.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(_) | DeValue::Table(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
