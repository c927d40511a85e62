//! The console follows config versions (DESIGN.md "The console"): what its
//! panes list, what `:` completes and what its actions check against is the
//! version the database runs — the ledger's current config version, the one
//! every scheduler on it converges on — not the file the console started
//! with. A reload (SIGHUP, `agentcron reload`, the console's own `:reload`),
//! an approval or a rollback, by this process's embedded scheduler or by
//! another process, shows within a poll.
//!
//! The shell's poller calls [`Follow::poll`] before each probe: one row is
//! read (`config_current`); only when its version moved is the stored text
//! loaded. The console keeps its own file's path (what `:reload` previews)
//! and database.

use crate::config::Config;
use crate::store::{Store, StoreError};

/// What a poll found.
#[derive(Debug)]
pub enum Followed {
    /// The version followed is still the one the database runs (or there is
    /// none yet, or the one it runs could not be loaded and was reported).
    Same,
    /// The database runs `version` now: the config to show and act on.
    Applied { version: i64, cfg: Box<Config> },
    /// The database runs `version` but its stored text does not load here;
    /// the console keeps the config it has.
    Failed { version: i64, error: String },
}

/// Follows the config versions of one database.
#[derive(Debug)]
pub struct Follow {
    /// The console's own config (its file's path and folder, its database).
    own: Config,
    /// The secrets of the console's file, to unseal stored versions.
    keyring: crate::secrets::Keyring,
    /// The version last applied or reported.
    seen: Option<i64>,
}

impl Follow {
    /// Follows from nothing: the first poll loads the version the database runs.
    pub fn new(own: &Config) -> Self {
        let keyring = std::fs::read_to_string(&own.path)
            .map(|text| crate::secrets::seal(&text).keyring)
            .unwrap_or_default();
        Self {
            own: own.clone(),
            keyring,
            seen: None,
        }
    }

    /// The version followed now.
    pub fn version(&self) -> Option<i64> {
        self.seen
    }

    /// Reads the version the database runs and, when it moved, loads it.
    pub fn poll(&mut self, store: &Store) -> Result<Followed, StoreError> {
        let (current, _) = store.read(|tx| tx.config_watch())?;
        let Some(version) = current else {
            return Ok(Followed::Same);
        };
        if Some(version) == self.seen {
            return Ok(Followed::Same);
        }
        let Some(stored) = store.read(|tx| tx.config_version(version))? else {
            return Ok(Followed::Same);
        };
        self.seen = Some(version);
        Ok(match self.load(&stored.text, &stored.path) {
            Ok(cfg) => Followed::Applied {
                version,
                cfg: Box::new(cfg),
            },
            Err(error) => Followed::Failed { version, error },
        })
    }

    /// A stored text as the console uses it: unsealed with the secrets of its
    /// own file (read again, as they may have been added since), else as
    /// stored — the console runs no agent, so a secret it lacks is never
    /// needed; with its own path and database.
    fn load(&mut self, sealed: &str, path: &str) -> Result<Config, String> {
        let text = match self.keyring.unseal(sealed) {
            Ok(t) => t,
            Err(_) => {
                if let Ok(file) = std::fs::read_to_string(&self.own.path) {
                    self.keyring.merge(crate::secrets::seal(&file).keyring);
                }
                self.keyring.unseal(sealed).unwrap_or_else(|_| sealed.to_string())
            }
        };
        let mut cfg =
            crate::config::load_str(&text, std::path::Path::new(path)).map_err(|e| e.to_string())?;
        cfg.path = self.own.path.clone();
        cfg.scheduler.database = self.own.scheduler.database.clone();
        Ok(cfg)
    }
}
