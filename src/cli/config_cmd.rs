//! The control-plane verbs (issue 18): `plan` previews the file against the
//! version the database runs; `reload` asks every scheduler on the database
//! to re-read its file; `approve-config` applies a version waiting for
//! approval; `rollback` re-applies an earlier version. And what `run
//! --headless` does with the file at its start ([`startup`]).

use super::db::{self, open_for_cli};
use super::exit;
use crate::config::Config;
use crate::control::diff::ChangeKind;
use crate::control::preview::Preview;
use crate::control::{self, ControlError, Outcome};
use crate::store::Store;
use crate::time::{Clock, SystemClock};
use std::path::Path;

/// Exit code of `plan` when applying the file would change something (as
/// `terraform plan -detailed-exitcode`).
pub const CHANGES: i32 = 3;

/// `agentcron plan [--json] [--utc]`: 0 no change, 1 invalid, 3 changes, 2
/// nothing could be opened. The text tells its times in the scheduler's zone
/// (the console header's), or UTC with `--utc`; JSON stays RFC 3339 UTC.
pub fn plan(config: &Path, db: Option<&Path>, json: bool, utc: bool) -> i32 {
    let cfg = match super::load_config(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("agentcron: cannot read config {}: {e}", config.display());
            return exit::USAGE;
        }
    };
    let path = db.map_or_else(|| cfg.scheduler.database.clone(), Path::to_path_buf);
    let now = SystemClock.now();
    // A database that does not exist yet runs nothing: everything is added.
    let store = if path.exists() || path.to_str().is_some_and(crate::store::pg::is_url) {
        match Store::open_read_only(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("agentcron: {e}");
                return exit::USAGE;
            }
        }
    } else {
        match Store::open_in_memory() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("agentcron: {e}");
                return exit::USAGE;
            }
        }
    };
    let preview = match store.read(|tx| control::preview::preview(tx, &cfg, &text, now)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agentcron plan: {e}");
            return exit::USAGE;
        }
    };
    if json {
        let value = serde_json::to_value(&preview).unwrap_or_default();
        let code = db::print_json("plan", &value);
        if code != exit::OK {
            return code;
        }
    } else {
        let tz = db::block_zone(Some(&cfg), None, utc);
        print!("{}", plan_text_in(&preview, &cfg, tz));
    }
    if preview.changes > 0 { CHANGES } else { exit::OK }
}

/// The text form of a preview in the scheduler's zone (`[scheduler]
/// timezone`, the console header's).
pub fn plan_text(p: &Preview, cfg: &Config) -> String {
    plan_text_in(p, cfg, cfg.scheduler.timezone)
}

/// The text form of a preview: one block per changed schedule, every time in
/// `tz` (one zone for the whole output, named in its first line; fires and
/// fates are stored as UTC instants and told in `tz` here).
pub fn plan_text_in(p: &Preview, cfg: &Config, tz: chrono_tz::Tz) -> String {
    let mut out = String::new();
    let running = p
        .current_version
        .map_or("nothing yet".to_string(), |v| format!("v{v}"));
    out.push_str(&format!(
        "plan: {} against the database's {running} (times in {})\n",
        p.config,
        tz.name()
    ));
    for s in &p.schedules {
        if s.change == ChangeKind::Unchanged {
            continue;
        }
        let version = match (s.version_before, s.version_after) {
            (Some(b), Some(a)) if a != b => format!("v{b} → v{a}"),
            (Some(b), Some(_)) => format!("v{b}"),
            (Some(b), None) => format!("v{b} → removed"),
            (None, Some(a)) => format!("new v{a}"),
            (None, None) => String::new(),
        };
        let what = match (&s.change, &s.from) {
            (ChangeKind::Renamed, Some(from)) => format!("renamed from {from}"),
            (k, _) => serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        };
        let sign = s.change.sign();
        out.push_str(&format!(
            "{sign} {} ({what}, stage {}, {version})\n",
            s.id, s.stage
        ));
        if s.needs_approval {
            out.push_str("    waits for approve-config (a gated stage)\n");
        }
        if !cfg.scheduler.stages.iter().any(|st| st.as_str() == s.stage) {
            out.push_str(&format!("    not run here (stage {})\n", s.stage));
        }
        for f in &s.fields {
            out.push_str(&format!("    {f}\n"));
        }
        if !s.fires_before.is_empty() || !s.fires_after.is_empty() {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join(", ")
                }
            };
            out.push_str(&format!("    next fires before: {}\n", list(&s.fires_before)));
            out.push_str(&format!("    next fires after:  {}\n", list(&s.fires_after)));
        }
        for r in &s.runs {
            out.push_str(&format!("    {} {}: {}\n", r.count, r.state, r.fate));
        }
    }
    let verdict = if p.changes == 0 {
        "no schedule changes".to_string()
    } else {
        format!(
            "{} schedule change(s); reloading stores it as v{}{}",
            p.changes,
            p.next_version,
            if p.approval_required {
                " and waits for approve-config"
            } else {
                ""
            }
        )
    };
    out.push_str(&format!("{verdict}\n"));
    crate::time::in_zone(&out, tz)
}

/// `agentcron reload [--allow-empty]`: records a request every scheduler on
/// the database picks up (each re-reads its own file, validates it and
/// applies it; a file without schedules only with `--allow-empty`).
pub fn reload(config: &Path, db: Option<&Path>, allow_empty: bool) -> i32 {
    let (store, _) = match open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let by = crate::operator::default_actor();
    match control::request_reload(&store, &by, allow_empty, SystemClock.now()) {
        Ok(seq) => {
            println!("reload requested (#{seq}): every scheduler on this database re-reads its config");
            exit::OK
        }
        Err(e) => {
            eprintln!("agentcron reload: {e}");
            exit::USAGE
        }
    }
}

/// `agentcron approve-config VERSION --reason T [--by NAME]`.
pub fn approve(config: &Path, db: Option<&Path>, version: i64, reason: &str, by: Option<&str>) -> i32 {
    let (store, _) = match open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let by = by.map_or_else(crate::operator::default_actor, str::to_string);
    match control::approve(&store, version, &by, reason, SystemClock.now()) {
        Ok(changes) => {
            let n = changes.iter().filter(|c| c.kind != ChangeKind::Unchanged).count();
            println!("config v{version} approved by {by} and applied ({n} schedule change(s))");
            exit::OK
        }
        Err(e) => report(e),
    }
}

/// `agentcron rollback VERSION --reason T`.
pub fn rollback(config: &Path, db: Option<&Path>, version: i64, reason: &str, by: Option<&str>) -> i32 {
    let (store, _) = match open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let by = by.map_or_else(crate::operator::default_actor, str::to_string);
    // The version runs with the file's secrets (none are stored).
    let secrets = std::fs::read_to_string(config)
        .map(|text| crate::secrets::seal(&text).keyring)
        .unwrap_or_default();
    match control::rollback(&store, version, &by, reason, &secrets, SystemClock.now()) {
        Ok((new, changes)) => {
            let n = changes.iter().filter(|c| c.kind != ChangeKind::Unchanged).count();
            println!("rolled back to v{version} as v{new} ({n} schedule change(s))");
            exit::OK
        }
        Err(e) => report(e),
    }
}

fn report(e: ControlError) -> i32 {
    eprintln!("agentcron: {e}");
    match e {
        ControlError::Store(_) => exit::USAGE,
        _ => exit::DOES_NOT_HOLD,
    }
}

/// What a scheduler runs at its start.
pub struct Startup {
    /// The database's version, with the file's secrets, only its stages.
    pub cfg: Config,
    pub version: Option<i64>,
    /// The file's secrets, for versions applied later (by fingerprint).
    pub secrets: crate::secrets::Keyring,
}

/// At the start of a scheduler: the file (already validated into `cfg`) is
/// stored and applied (or left waiting for approval), and the scheduler runs
/// what the database runs, restricted to its stages, with the file's secrets.
pub fn startup(store: &Store, cfg: &Config, by: &str) -> Result<Startup, i32> {
    let text = match std::fs::read_to_string(&cfg.path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("agentcron: cannot read config {}: {e}", cfg.path.display());
            return Err(exit::USAGE);
        }
    };
    let now = SystemClock.now();
    let sealed = crate::secrets::seal(&text);
    match control::propose_sealed(store, cfg, &sealed, by, now) {
        Ok(Outcome::Waiting { version, .. }) => {
            tracing::warn!(
                version,
                "config v{version} waits for approve-config; running the approved version"
            );
        }
        Ok(Outcome::Applied { version, .. }) => tracing::info!(version, "config v{version} applied"),
        Ok(Outcome::Unchanged { version }) => tracing::info!(version, "config v{version} (unchanged)"),
        Err(e) => {
            eprintln!("agentcron: {e}");
            return Err(exit::USAGE);
        }
    }
    let secrets = sealed.keyring;
    match control::load_current(store, &secrets) {
        Ok(Some((v, mut run))) => {
            run.scheduler.database = cfg.scheduler.database.clone();
            Ok(Startup {
                cfg: control::for_stages(&run, &cfg.scheduler.stages),
                version: Some(v.version),
                secrets,
            })
        }
        Ok(None) => Ok(Startup {
            cfg: control::for_stages(cfg, &cfg.scheduler.stages),
            version: None,
            secrets,
        }),
        Err(e) => {
            eprintln!("agentcron: {e}");
            Err(exit::DOES_NOT_HOLD)
        }
    }
}

/// This process's registry row, naming the config version it runs (the
/// database's, which is not the file's while a change waits for approval).
pub fn registration(store: &Store, cfg: &Config) -> crate::engine::Registration {
    let mut reg = crate::engine::Registration::of_this_process(cfg);
    if let Ok(Some(v)) = store.read(|tx| tx.current_config()) {
        reg.config_hash = v.hash;
    }
    reg
}
