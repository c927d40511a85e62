//! The configuration a scheduler runs, shared with what serves beside it (the
//! HTTP API): the engine publishes every version it applies (a reload, an
//! approval, a rollback, a version another scheduler stored), and a reader
//! takes the current one once per request, so it never answers from a
//! configuration the scheduler has left.

use super::Config;
use std::sync::{Arc, RwLock};

/// A handle on the configuration the engine runs; clones share it.
#[derive(Debug, Clone)]
pub struct Applied(Arc<RwLock<Arc<Config>>>);

impl Applied {
    pub fn new(cfg: Arc<Config>) -> Self {
        Self(Arc::new(RwLock::new(cfg)))
    }

    /// The version running now.
    pub fn get(&self) -> Arc<Config> {
        // Nothing can panic while the lock is held (an `Arc` is cloned or
        // replaced), so a poisoned lock still holds a whole value.
        match self.0.read() {
            Ok(cfg) => cfg.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The engine applied `cfg`.
    pub fn set(&self, cfg: Arc<Config>) {
        match self.0.write() {
            Ok(mut slot) => *slot = cfg,
            Err(poisoned) => *poisoned.into_inner() = cfg,
        }
    }
}
