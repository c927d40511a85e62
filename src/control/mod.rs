//! The control plane (DESIGN.md "Control plane", issue 18): configuration
//! versions stored in the database, what a new configuration changes
//! ([`diff`]), and applying it — at a start, a reload, an approval or a
//! rollback — through one path ([`apply_version`]), in one transaction.
//!
//! Applying at instant U: an added schedule is born at U; a changed trigger
//! starts evaluating at U (no window before U is opened because of the
//! edit; window keys never hold a version, so a window already run is never
//! run again); a removed schedule's waiting runs end `skipped` ("schedule
//! removed in vN"); `previous_id` carries a schedule's history to its new id.
//! Every scheduler on the database converges on the applied version.

pub mod diff;
pub mod preview;
pub mod settings;
pub mod versions;

use crate::config::Config;
use crate::config::model::Stage;
use crate::core::event::Event;
use crate::core::planner::retire;
use crate::store::types::{NewEvent, RunFilter, RunState};
use crate::store::{ConfigStatus, ConfigVersion, Result, ScheduleVersion, Store, Tx};
use chrono::{DateTime, TimeDelta, Utc};
use diff::{ChangeKind, ScheduleChange};

/// What storing a configuration did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The database already runs exactly this text.
    Unchanged { version: i64 },
    /// Stored and applied.
    Applied {
        version: i64,
        changes: Vec<ScheduleChange>,
    },
    /// Stored; it changes a gated stage and waits for `approve-config`.
    Waiting {
        version: i64,
        changes: Vec<ScheduleChange>,
    },
}

impl Outcome {
    pub fn version(&self) -> i64 {
        match self {
            Outcome::Unchanged { version }
            | Outcome::Applied { version, .. }
            | Outcome::Waiting { version, .. } => *version,
        }
    }
}

/// The config `text` (already validated into `cfg`) as the database would
/// see it: stored as a new version and applied, or left waiting for an
/// approval when it changes a stage in `require_approval_for` (the new
/// file's or the running version's). The first configuration a database
/// sees is applied as it is. What is stored is the text sealed: its
/// secrets replaced by their fingerprints ([`crate::secrets::seal`]).
pub fn propose(store: &Store, cfg: &Config, text: &str, by: &str, now: DateTime<Utc>) -> Result<Outcome> {
    propose_sealed(store, cfg, &crate::secrets::seal(text), by, now)
}

/// [`propose`] for a text already sealed (whose keyring the caller keeps
/// to run what it stored).
pub fn propose_sealed(
    store: &Store,
    cfg: &Config,
    sealed: &crate::secrets::Sealed,
    by: &str,
    now: DateTime<Utc>,
) -> Result<Outcome> {
    let text = sealed.text.as_str();
    store.write(|tx| {
        let current = tx.current_config()?;
        let hash = crate::engine::registry::config_hash(text.as_bytes());
        if let Some(c) = &current
            && c.hash == hash
        {
            return Ok(Outcome::Unchanged { version: c.version });
        }
        let changes = diff::diff(&tx.current_schedule_versions()?, &settings::of_config(cfg, text));
        let gated = gated_stages(cfg, current.as_ref());
        let waits: Vec<String> = changes
            .iter()
            .filter(|c| gated.contains(&c.stage) && c.needs_approval())
            .map(|c| c.id.clone())
            .collect();
        let path = cfg.path.display().to_string();
        if current.is_some() && !waits.is_empty() {
            // The same file waiting already: no second copy on every reload.
            let waiting = tx
                .config_versions()?
                .into_iter()
                .rev()
                .find(|v| v.status == ConfigStatus::Waiting);
            if let Some(w) = &waiting
                && w.hash == hash
            {
                return Ok(Outcome::Waiting {
                    version: w.version,
                    changes,
                });
            }
            supersede_waiting(tx)?;
            let version =
                tx.insert_config_version(&hash, &path, text, now, by, ConfigStatus::Waiting, None)?;
            tx.append_event(&NewEvent::of(
                now,
                Event::ConfigWaiting {
                    version,
                    by: by.to_string(),
                    schedules: waits,
                },
            ))?;
            return Ok(Outcome::Waiting { version, changes });
        }
        let version = tx.insert_config_version(&hash, &path, text, now, by, ConfigStatus::Applied, None)?;
        let changes = apply_version(tx, version, cfg, text, by, now, None)?;
        Ok(Outcome::Applied { version, changes })
    })
}

/// `agentcron reload` and the console's `:reload`: every scheduler on the
/// database re-reads its file (see [`crate::engine::Engine::check_reload`]).
/// With `allow_empty` (`--allow-empty`) a file without schedules may remove
/// every schedule. Returns the request's number.
pub fn request_reload(store: &Store, by: &str, allow_empty: bool, now: DateTime<Utc>) -> Result<i64> {
    store.write(|tx| {
        let seq = tx.request_reload()?;
        let asked = Event::ReloadRequested {
            seq,
            by: by.to_string(),
            allow_empty,
        };
        tx.append_event(&NewEvent::of(now, asked))?;
        Ok(seq)
    })
}

/// Whether reload request `seq` was made with `--allow-empty` (the newest
/// request's event says so).
pub fn reload_allows_empty(tx: &Tx, seq: i64) -> Result<bool> {
    let newest = tx.events(&crate::store::types::EventFilter {
        kinds: vec!["reload_requested".into()],
        limit: Some(1),
        newest_first: true,
        ..Default::default()
    })?;
    Ok(newest.first().is_some_and(
        |e| matches!(e.event(), Event::ReloadRequested { seq: s, allow_empty: true, .. } if s == seq),
    ))
}

/// Why `cfg` may not be applied by a plain reload: it has no schedules while
/// the database runs some, so applying it would remove every one (an emptied
/// or truncated file, most likely). `None`: it may.
pub fn removes_every_schedule(tx: &Tx, cfg: &Config) -> Result<Option<String>> {
    if !cfg.schedules.is_empty() {
        return Ok(None);
    }
    let running = tx.current_schedule_versions()?.len();
    Ok((running > 0).then(|| {
        format!(
            "{} has no schedules: applying it would remove all {running} schedule(s) the database runs; \
             if that is meant, run `agentcron reload --allow-empty` (SIGHUP and the console never apply it)",
            cfg.path.display()
        )
    }))
}

/// The stages whose changes wait for approval: the new file's and the
/// running version's (removing a gate is itself a gated change).
fn gated_stages(cfg: &Config, current: Option<&ConfigVersion>) -> Vec<Stage> {
    let mut stages = cfg.scheduler.require_approval_for.clone();
    if let Some(c) = current
        && let Ok(old) = crate::config::load_str(&c.text, std::path::Path::new(&c.path))
    {
        stages.extend(old.scheduler.require_approval_for);
    }
    stages
}

fn supersede_waiting(tx: &Tx) -> Result<()> {
    for v in tx.config_versions()? {
        if v.status == ConfigStatus::Waiting {
            tx.set_config_status(v.version, ConfigStatus::Superseded)?;
        }
    }
    Ok(())
}

/// Makes stored version `version` (whose text `text` loaded as `cfg`) the one
/// the database runs, at `now`: schedule versions, births, trigger restarts,
/// renames and removals, and a `config_applied` event. Returns the changes.
pub fn apply_version(
    tx: &Tx,
    version: i64,
    cfg: &Config,
    text: &str,
    by: &str,
    now: DateTime<Utc>,
    rollback_of: Option<i64>,
) -> Result<Vec<ScheduleChange>> {
    let first = tx.config_watch()?.0.is_none();
    let changes = diff::diff(&tx.current_schedule_versions()?, &settings::of_config(cfg, text));
    // Windows with a nominal time at or after `now` are opened (a fire
    // exactly at the reload instant is).
    let cursor = now - TimeDelta::milliseconds(1);
    // An added schedule never opens a window a schedule removed in the same
    // change already evaluated: a rename without `previous_id` that lands on
    // a fire instant the old name has opened must not run it under both.
    let mut born_after = cursor;
    for c in changes.iter().filter(|c| c.kind == ChangeKind::Removed) {
        if let Some(at) = tx.schedule_state(&c.id)?.last_evaluated {
            born_after = born_after.max(at);
        }
    }
    let (mut added, mut removed, mut changed, mut renamed) = (vec![], vec![], vec![], vec![]);
    for c in &changes {
        if let Some(from) = &c.from {
            tx.rename_schedule(from, &c.id)?;
            renamed.push((from.clone(), c.id.clone()));
        }
        match c.kind {
            ChangeKind::Unchanged => continue,
            ChangeKind::Removed => {
                remove_schedule(tx, &c.id, version, now)?;
                removed.push(c.id.clone());
                continue;
            }
            ChangeKind::Added => added.push(c.id.clone()),
            ChangeKind::Changed => changed.push(c.id.clone()),
            ChangeKind::Renamed => {}
        }
        let Some((settings, hash)) = &c.settings else {
            continue;
        };
        let same = c.version_before.is_some() && c.version_after == c.version_before;
        let v = match (same, c.version_before) {
            (true, Some(b)) => {
                tx.set_schedule_current(&c.id, b)?;
                b
            }
            _ => {
                let v = tx.last_schedule_version(&c.id)? + 1;
                tx.put_schedule_version(&ScheduleVersion {
                    schedule: c.id.clone(),
                    version: v,
                    hash: hash.clone(),
                    settings: settings.clone(),
                    config_version: version,
                    created_at: now,
                })?;
                let mut ev = NewEvent::of(
                    now,
                    Event::ScheduleVersioned {
                        version: v,
                        config_version: version,
                        fields: c.fields.iter().map(ToString::to_string).collect(),
                    },
                );
                ev.schedule = Some(c.id.clone());
                ev.tenant = cfg.schedule(&c.id).map(|s| s.tenant.clone());
                tx.append_event(&ev)?;
                v
            }
        };
        let _ = v;
        // The first configuration of a database changes nothing that ran
        // before it (an upgraded file keeps its catch-up gap).
        if !first && c.kind == ChangeKind::Added {
            tx.restart_schedule_at(&c.id, born_after, now)?;
        } else if !first && c.trigger_changed() {
            tx.restart_schedule_at(&c.id, cursor, now)?;
        }
    }
    supersede_waiting(tx)?;
    tx.set_config_status(version, ConfigStatus::Applied)?;
    tx.set_current_config(version)?;
    tx.append_event(&NewEvent::of(
        now,
        Event::ConfigApplied {
            version,
            hash: crate::engine::registry::config_hash(text.as_bytes()),
            by: by.to_string(),
            added,
            removed,
            changed,
            renamed,
            rollback_of,
        },
    ))?;
    Ok(changes)
}

/// A removed schedule: no current version, its waiting runs skipped through
/// the planner and the one writer, its unqueued catch-up windows dropped.
fn remove_schedule(tx: &Tx, id: &str, version: i64, now: DateTime<Utc>) -> Result<()> {
    tx.drop_schedule_current(id)?;
    tx.drop_schedule_backlog(id)?;
    skip_waiting_runs(tx, id, version, now)
}

/// The `pending` and `retry_wait` runs of schedule `id`, removed in
/// `version`, end `skipped` (also for a retry its last running attempt left).
pub fn skip_waiting_runs(tx: &Tx, id: &str, version: i64, now: DateTime<Utc>) -> Result<()> {
    let waiting = tx.runs(&RunFilter {
        schedule: Some(id.to_string()),
        states: vec![RunState::Pending, RunState::RetryWait],
        ..RunFilter::default()
    })?;
    for run in waiting {
        if let Some(plan) = retire::schedule_removed(&run, version) {
            // A conflict (another scheduler moved it meanwhile) leaves it be.
            tx.apply(&plan, now)?;
        }
    }
    Ok(())
}

/// Approves a waiting version and applies it (`approve-config`).
pub fn approve(
    store: &Store,
    version: i64,
    by: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> std::result::Result<Vec<ScheduleChange>, ControlError> {
    if reason.trim().is_empty() {
        return Err(ControlError::Refused("a reason is required".into()));
    }
    store.write(|tx| {
        let Some(v) = tx.config_version(version)? else {
            return Ok(Err(ControlError::NotFound(version)));
        };
        if v.status != ConfigStatus::Waiting {
            return Ok(Err(ControlError::Refused(format!(
                "config v{version} is {}, not waiting for approval",
                v.status.as_str()
            ))));
        }
        let cfg = match crate::config::load_str(&v.text, std::path::Path::new(&v.path)) {
            Ok(c) => c,
            Err(e) => return Ok(Err(ControlError::Invalid(e.to_string()))),
        };
        tx.approve_config_version(version, by, reason, now)?;
        Ok(Ok(apply_version(tx, version, &cfg, &v.text, by, now, None)?))
    })?
}

/// Re-applies stored version `version` as a new version (`rollback`).
/// Secrets are never stored, so the schedulers run the version with the
/// secrets of their config files: it is refused unless `secrets` (the
/// file's) holds every secret the version was stored with — a rollback
/// runs exactly what ran then, or nothing.
pub fn rollback(
    store: &Store,
    version: i64,
    by: &str,
    reason: &str,
    secrets: &crate::secrets::Keyring,
    now: DateTime<Utc>,
) -> std::result::Result<(i64, Vec<ScheduleChange>), ControlError> {
    if reason.trim().is_empty() {
        return Err(ControlError::Refused("a reason is required".into()));
    }
    store.write(|tx| {
        let Some(v) = tx.config_version(version)? else {
            return Ok(Err(ControlError::NotFound(version)));
        };
        if tx.config_watch()?.0 == Some(version) {
            return Ok(Err(ControlError::Refused(format!(
                "config v{version} is the one running"
            ))));
        }
        if let Err(e) = secrets.unseal(&v.text) {
            return Ok(Err(ControlError::Refused(format!(
                "config v{version} cannot be rolled back to: {e} (agentcron stores only their fingerprints); \
                 put them back in the file, or edit the file and reload"
            ))));
        }
        let cfg = match crate::config::load_str(&v.text, std::path::Path::new(&v.path)) {
            Ok(c) => c,
            Err(e) => return Ok(Err(ControlError::Invalid(e.to_string()))),
        };
        let note = format!("rollback to v{version}: {reason}");
        let new = tx.insert_config_version(
            &v.hash,
            &v.path,
            &v.text,
            now,
            by,
            ConfigStatus::Applied,
            Some(&note),
        )?;
        let changes = apply_version(tx, new, &cfg, &v.text, by, now, Some(version))?;
        Ok(Ok((new, changes)))
    })?
}

/// Errors of the control verbs (exit 1 but for the store's).
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("config version v{0} not found")]
    NotFound(i64),
    #[error("{0}")]
    Refused(String),
    #[error("the stored config no longer loads: {0}")]
    Invalid(String),
    #[error("config v{0} cannot run here: {1}")]
    Secrets(i64, crate::secrets::SecretError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The configuration the database runs, loaded (its stored text with its
/// secrets from `secrets`, at its stored path), or `None` before the first.
pub fn load_current(
    store: &Store,
    secrets: &crate::secrets::Keyring,
) -> std::result::Result<Option<(ConfigVersion, Config)>, ControlError> {
    let Some(v) = store.read(|tx| tx.current_config())? else {
        return Ok(None);
    };
    let text = secrets
        .unseal(&v.text)
        .map_err(|e| ControlError::Secrets(v.version, e))?;
    let cfg = crate::config::load_str(&text, std::path::Path::new(&v.path))
        .map_err(|e| ControlError::Invalid(e.to_string()))?;
    Ok(Some((v, cfg)))
}

/// `cfg` with only the schedules of `stages` — the `[scheduler] stages` of
/// the scheduler's own file, not of the stored version, so schedulers of
/// different stages can share a database: what one scheduler runs. The
/// others are "not run here".
pub fn for_stages(cfg: &Config, stages: &[Stage]) -> Config {
    let mut out = cfg.clone();
    out.schedules.retain(|s| stages.contains(&s.stage));
    out.scheduler.stages = stages.to_vec();
    out
}
