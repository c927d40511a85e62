//! Reloading the configuration while the engine runs (issue 18): on SIGHUP or
//! an `agentcron reload` request the file is read and validated first — an
//! invalid file is recorded as `config_rejected` and the running version
//! stays — then stored and applied through `crate::control`; and whenever
//! the database runs a version this engine does not (another scheduler
//! reloaded, an approval, a rollback) the engine rebuilds itself from that
//! version's stored text. Attempts in flight carry over: their reports,
//! leases and supervisors are untouched by a rebuild.

use super::{Engine, Result};
use crate::agent::runner::AgentRunner;
use crate::config::Config;
use crate::control::{self, Outcome, diff::ScheduleChange};
use crate::core::event::Event;
use crate::store::types::NewEvent;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where a reload reads the config, and the flag SIGHUP raises.
#[derive(Debug, Clone)]
pub struct ReloadSource {
    pub path: PathBuf,
    /// Set by the SIGHUP handler; the loop clears it when it reloads.
    pub hup: Arc<AtomicBool>,
}

impl ReloadSource {
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            hup: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// What this engine runs, for reloads.
#[derive(Default)]
pub(crate) struct Control {
    /// The config version this engine runs (`None`: not versioned, as in
    /// rehearsals and tests that build an engine from a config directly).
    pub version: Option<i64>,
    /// The reload counter as last seen.
    pub seen_seq: Option<i64>,
    /// The runner before deliveries were wrapped around it, to wrap again
    /// with the new configuration's deliveries.
    pub base_runner: Option<Arc<dyn AgentRunner>>,
    /// Removed schedules kept for their running attempts, with the version
    /// that removed them: once those attempts have ended, what they left
    /// waiting (a retry) is skipped like the rest of the schedule's runs.
    pub retired: Vec<(String, i64)>,
    /// The secrets of every config file this engine has read: stored
    /// versions hold only their fingerprints.
    pub secrets: crate::secrets::Keyring,
    /// A version found without its secrets (said once, not every tick).
    pub unrunnable: Option<i64>,
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq)]
pub enum ReloadOutcome {
    /// The file is the version already running.
    Unchanged { version: i64 },
    /// Stored, applied and now running.
    Applied {
        version: i64,
        changes: Vec<ScheduleChange>,
    },
    /// Stored; waits for `approve-config` (the old version keeps running).
    Waiting { version: i64 },
    /// Invalid: recorded as `config_rejected`, the old version keeps running.
    Rejected { errors: Vec<String> },
    /// Another process applied a version; this engine now runs it.
    Adopted { version: i64 },
}

impl Engine {
    /// The config version this engine runs.
    pub fn config_version(&self) -> Option<i64> {
        self.control.version
    }

    /// Says which stored version this engine was built from (at its start).
    pub fn set_config_version(&mut self, version: Option<i64>) {
        self.control.version = version;
    }

    /// The secrets of the config file this engine started from, to run the
    /// versions applied later (stored with fingerprints in their place).
    pub fn keep_secrets(&mut self, secrets: crate::secrets::Keyring) {
        self.control.secrets.merge(secrets);
    }

    /// Once a loop: a SIGHUP or a new reload request reloads the file; a
    /// version applied elsewhere is adopted. Without a [`ReloadSource`] it
    /// does nothing.
    pub fn check_reload(&mut self) -> Result<Option<ReloadOutcome>> {
        self.settle_retired()?;
        let Some(src) = self.opts.reload.clone() else {
            return Ok(None);
        };
        let (current, seq) = self.store.read(|tx| tx.config_watch())?;
        let hup = src.hup.swap(false, Ordering::SeqCst);
        let asked = self.control.seen_seq.is_some_and(|s| s != seq);
        self.control.seen_seq = Some(seq);
        if hup || asked {
            // Only `agentcron reload --allow-empty` may apply a file without
            // schedules; SIGHUP carries no flag and never does.
            let allow_empty = asked && self.store.read(|tx| control::reload_allows_empty(tx, seq))?;
            return self.reload_with(&src.path, allow_empty).map(Some);
        }
        if current.is_some() && current != self.control.version {
            return Ok(self.converge()?.map(|version| ReloadOutcome::Adopted { version }));
        }
        Ok(None)
    }

    /// Reads and validates the config at `path`, stores and applies it (or
    /// leaves it waiting for approval), then runs what the database runs. A
    /// file that would remove every schedule is rejected (see
    /// [`Engine::reload_with`]).
    pub fn reload_from(&mut self, path: &Path) -> Result<ReloadOutcome> {
        self.reload_with(path, false)
    }

    /// [`Engine::reload_from`]; a file without schedules, while the database
    /// runs some, is applied only with `allow_empty` (`agentcron reload
    /// --allow-empty`), else rejected as invalid files are: an emptied or
    /// truncated file must not end every schedule.
    pub fn reload_with(&mut self, path: &Path, allow_empty: bool) -> Result<ReloadOutcome> {
        let now = self.clock.now();
        let loaded = std::fs::read_to_string(path)
            .map_err(|e| vec![format!("cannot read config {}: {e}", path.display())])
            .and_then(|text| match crate::config::load_str(&text, path) {
                Ok(cfg) => Ok((cfg, text)),
                Err(crate::config::LoadError::Invalid(diags)) => {
                    Err(diags.iter().map(ToString::to_string).collect())
                }
                Err(e) => Err(vec![e.to_string()]),
            });
        let loaded = match loaded {
            Ok((cfg, text)) if !allow_empty => {
                match self.store.read(|tx| control::removes_every_schedule(tx, &cfg))? {
                    Some(refusal) => Err(vec![refusal]),
                    None => Ok((cfg, text)),
                }
            }
            other => other,
        };
        let (cfg, text) = match loaded {
            Ok(x) => x,
            Err(errors) => {
                tracing::warn!(
                    errors = errors.len(),
                    "config rejected; the running version stays"
                );
                for e in &errors {
                    tracing::warn!("{e}");
                }
                let rejected = Event::ConfigRejected {
                    path: path.display().to_string(),
                    by: self.opts.owner.clone(),
                    errors: errors.clone(),
                    kept_version: self.control.version,
                };
                self.store
                    .write(|tx| tx.append_event(&NewEvent::of(now, rejected)).map(|_| ()))?;
                return Ok(ReloadOutcome::Rejected { errors });
            }
        };
        let sealed = crate::secrets::seal(&text);
        let outcome = control::propose_sealed(&self.store, &cfg, &sealed, &self.opts.owner, now)?;
        self.control.secrets.merge(sealed.keyring);
        let stages_changed = cfg.scheduler.stages != self.cfg.scheduler.stages;
        if stages_changed {
            // Its own stages changed: rebuild even if the version is the same.
            let mut mine = (*self.cfg).clone();
            mine.scheduler.stages = cfg.scheduler.stages.clone();
            self.cfg = Arc::new(mine);
            self.control.version = None;
        }
        let result = match outcome {
            Outcome::Unchanged { version } => ReloadOutcome::Unchanged { version },
            Outcome::Waiting { version, .. } => {
                tracing::warn!(
                    version,
                    "config v{version} waits for approve-config; the running version stays"
                );
                ReloadOutcome::Waiting { version }
            }
            Outcome::Applied { version, changes } => {
                tracing::info!(version, "config v{version} applied");
                ReloadOutcome::Applied { version, changes }
            }
        };
        self.converge()?;
        Ok(result)
    }

    /// Rebuilds the engine from the version the database runs, if this
    /// engine runs another; returns the version adopted.
    pub fn converge(&mut self) -> Result<Option<i64>> {
        let mut loaded = control::load_current(&self.store, &self.control.secrets);
        if let Err(control::ControlError::Secrets(..)) = loaded
            && let Some(src) = &self.opts.reload
            && let Ok(text) = std::fs::read_to_string(&src.path)
        {
            // Another scheduler applied a version with secrets this one has
            // not read yet: its file may have them now.
            self.control.secrets.merge(crate::secrets::seal(&text).keyring);
            loaded = control::load_current(&self.store, &self.control.secrets);
        }
        let loaded = match loaded {
            Ok(l) => l,
            Err(control::ControlError::Store(e)) => return Err(e.into()),
            Err(e @ control::ControlError::Secrets(version, _)) => {
                if self.control.unrunnable != Some(version) {
                    tracing::error!(error = %e, "the running version stays");
                    self.control.unrunnable = Some(version);
                }
                return Ok(None);
            }
            Err(e) => {
                // The stored text no longer loads (a calendar file gone): keep
                // running what we run, and say so.
                tracing::error!(error = %e, "cannot run the database's config version; the running version stays");
                return Ok(None);
            }
        };
        let Some((v, mut cfg)) = loaded else {
            return Ok(None);
        };
        if Some(v.version) == self.control.version {
            return Ok(None);
        }
        cfg.scheduler.database = self.cfg.scheduler.database.clone();
        // This scheduler's stages are its own (its file's, as it started
        // or last reloaded), whichever process stored the version.
        let stages = self.cfg.scheduler.stages.clone();
        self.rebuild(control::for_stages(&cfg, &stages), Some(v.version))?;
        // The registry row says which config this scheduler now runs.
        if let Some(reg) = self.opts.registry.as_mut() {
            reg.config_hash = v.hash.clone();
            let owner = self.opts.owner.clone();
            self.store
                .write(|tx| tx.set_scheduler_config_hash(&owner, &v.hash))?;
        }
        Ok(Some(v.version))
    }

    /// A removed schedule's last running attempt ended: its runs left waiting
    /// (a retry planned by that attempt's end) are skipped now.
    fn settle_retired(&mut self) -> Result<()> {
        if self.control.retired.is_empty() {
            return Ok(());
        }
        let busy: Vec<String> = self
            .running
            .values()
            .map(|r| self.cfg.schedules[r.schedule].id.clone())
            .collect();
        let (done, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.control.retired)
            .into_iter()
            .partition(|(id, _)| !busy.contains(id));
        self.control.retired = keep;
        let now = self.clock.now();
        for (id, version) in done {
            self.store.write(|tx| {
                // Only if the database really removed it (not moved to
                // another stage, nor added back meanwhile).
                if tx.current_schedule_versions()?.contains_key(&id) {
                    return Ok(());
                }
                control::skip_waiting_runs(tx, &id, version, now)
            })?;
        }
        Ok(())
    }

    /// Replaces the configuration with `cfg`, keeping what is in flight:
    /// running attempts (their schedule found by id; a removed schedule's is
    /// kept, opening nothing, until its attempt ends), the report channel,
    /// renewal and registry timers. Window openings are planned afresh from
    /// the store (where the reload restarted changed triggers at its instant).
    pub fn rebuild(&mut self, mut cfg: Config, version: Option<i64>) -> Result<()> {
        let now = self.clock.now();
        let ids: HashMap<usize, String> = self
            .running
            .values()
            .map(|r| (r.schedule, self.cfg.schedules[r.schedule].id.clone()))
            .collect();
        let mut retired = vec![];
        for (old_idx, id) in &ids {
            if cfg.schedule(id).is_none() && !retired.contains(id) {
                cfg.schedules.push(self.cfg.schedules[*old_idx].clone());
                retired.push(id.clone());
            }
        }
        let runner = self
            .control
            .base_runner
            .clone()
            .unwrap_or_else(|| self.runner.clone());
        let mut fresh = Engine::new(
            Arc::new(cfg),
            self.store.shared().clone(),
            self.clock.clone(),
            runner,
            self.opts.clone(),
        );
        // The model goes on with the ledger it describes.
        fresh.store = self.store.clone();
        for id in &retired {
            if let Some(idx) = fresh.index.remove(id) {
                fresh.rules[idx] = None;
            }
        }
        let position: HashMap<String, usize> = fresh
            .cfg
            .schedules
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        for mut r in self.running.take_all() {
            if let Some(idx) = ids.get(&r.schedule).and_then(|id| position.get(id)) {
                r.schedule = *idx;
            }
            fresh.running.insert(r);
        }
        std::mem::swap(&mut fresh.reports_tx, &mut self.reports_tx);
        std::mem::swap(&mut fresh.reports_rx, &mut self.reports_rx);
        fresh.pending_starts = std::mem::take(&mut self.pending_starts);
        fresh.pending_replies = std::mem::take(&mut self.pending_replies);
        fresh.posted_seq = self.posted_seq;
        fresh.last_renewal = self.last_renewal;
        fresh.last_tick_event = self.last_tick_event;
        fresh.registry_seen = self.registry_seen;
        fresh.stopping = self.stopping;
        fresh.started = self.started;
        fresh.alive_since = self.alive_since;
        fresh.control.version = version;
        fresh.control.seen_seq = self.control.seen_seq;
        fresh.control.base_runner = self.control.base_runner.clone();
        fresh.control.retired = std::mem::take(&mut self.control.retired);
        fresh.control.secrets = std::mem::take(&mut self.control.secrets);
        fresh.control.unrunnable = self.control.unrunnable;
        if let Some(v) = version {
            for id in retired {
                // Retired already (a rebuild after a failed transaction).
                if !fresh.control.retired.iter().any(|(r, _)| *r == id) {
                    fresh.control.retired.push((id, v));
                }
            }
        }
        if fresh.started {
            fresh.load_cursors(now)?;
        }
        fresh.holding = std::mem::take(&mut self.holding);
        *self = fresh;
        if let Some(applied) = &self.opts.applied {
            applied.set(self.cfg.clone());
        }
        Ok(())
    }
}
