//! `file_exists`: an upstream file is there, big enough and (optionally) written
//! during this window rather than left over from the last one.

use super::{Gate, GateContext, GateOutcome};
use crate::time::rfc3339_secs as rfc3339;
use chrono::{DateTime, Utc};
use std::path::PathBuf;

pub struct FileExists {
    name: String,
    path: PathBuf,
    min_size: Option<u64>,
    newer_than_window: bool,
}

impl FileExists {
    pub fn new(name: String, path: PathBuf, min_size: Option<u64>, newer_than_window: bool) -> Self {
        Self {
            name,
            path,
            min_size,
            newer_than_window,
        }
    }
}

impl Gate for FileExists {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "file_exists"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let path = self.path.display();
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return GateOutcome::wait(format!("{path} not found"));
            }
            Err(e) => return GateOutcome::wait(format!("{path}: {e}")),
        };
        let size = meta.len();
        if let Some(min) = self.min_size
            && size < min
        {
            return GateOutcome::wait(format!("{path} is {size} bytes (< {min} required)"));
        }
        if !self.newer_than_window {
            return GateOutcome::pass(format!("{path} exists ({size} bytes)"));
        }
        let modified = match meta.modified() {
            Ok(t) => DateTime::<Utc>::from(t),
            Err(e) => return GateOutcome::wait(format!("{path}: cannot read mtime: {e}")),
        };
        if modified < ctx.window_start {
            return GateOutcome::wait(format!(
                "{path} modified {} (before the window start {})",
                rfc3339(modified),
                rfc3339(ctx.window_start)
            ));
        }
        GateOutcome::pass(format!(
            "{path} exists ({size} bytes, modified {})",
            rfc3339(modified)
        ))
    }
}
