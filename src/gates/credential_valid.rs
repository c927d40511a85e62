//! `credential_valid`: a token or certificate stays valid for at least
//! `min_remaining`. Its expiry is the first non-empty line of a file, or the first
//! stdout line of a command, as RFC 3339 or unix seconds.
//!
//! Expired or expiring is a real `fail` (waiting will not renew it, and
//! `on_fail = "skip"` can skip the window); an unreadable or unparseable expiry is a
//! `wait` with the error. Reasons never echo the line read, in case a misconfigured
//! source points at the secret itself.

use super::{Gate, GateContext, GateOutcome};
use crate::config::model::CredentialSource;
use crate::time::duration::format_duration;
use crate::time::rfc3339_secs as rfc3339;
use chrono::{DateTime, TimeDelta, Utc};
use std::time::Duration;

pub struct CredentialValid {
    name: String,
    source: CredentialSource,
    min_remaining: Duration,
    dir: Option<std::path::PathBuf>,
}

impl CredentialValid {
    pub fn new(name: String, source: CredentialSource, min_remaining: Duration) -> Self {
        Self {
            name,
            source,
            min_remaining,
            dir: None,
        }
    }

    /// Runs an expiry command in `dir` (the config folder).
    pub fn in_dir(mut self, dir: &std::path::Path) -> Self {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// The expiry line, or why there is none.
    fn read_line(&self, ctx: &GateContext<'_>) -> Result<String, String> {
        match &self.source {
            CredentialSource::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                text.lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| format!("{} is empty", path.display()))
            }
            CredentialSource::Command(argv) => {
                let done = super::command::run(argv, ctx, self.dir.as_deref())
                    .map_err(|e| format!("expiry command: {e}"))?;
                if done.status.code() != Some(0) {
                    return Err(format!("expiry command: {}", done.describe_exit()));
                }
                done.stdout_line
                    .ok_or_else(|| "expiry command printed nothing".to_string())
            }
        }
    }

    fn source_text(&self) -> String {
        match &self.source {
            CredentialSource::File(path) => path.display().to_string(),
            CredentialSource::Command(_) => "the expiry command's output".to_string(),
        }
    }
}

impl Gate for CredentialValid {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "credential_valid"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        let line = match self.read_line(ctx) {
            Ok(l) => l,
            Err(e) => return GateOutcome::wait(e),
        };
        let Some(expires) = parse_expiry(&line) else {
            return GateOutcome::wait(format!(
                "{} is not an expiry (expected RFC 3339 or unix seconds)",
                self.source_text()
            ));
        };
        let required = format_duration(self.min_remaining);
        let remaining = expires - ctx.now;
        let at = rfc3339(expires);
        if remaining <= TimeDelta::zero() {
            return GateOutcome::fail(format!(
                "credential expired at {at}, {} ago ({required} required)",
                whole_seconds(-remaining)
            ));
        }
        let left = whole_seconds(remaining);
        if remaining < crate::time::duration::to_delta(self.min_remaining) {
            GateOutcome::fail(format!(
                "credential expires at {at}, in {left} (< {required} required)"
            ))
        } else {
            GateOutcome::pass(format!(
                "credential valid until {at}, in {left} (≥ {required} required)"
            ))
        }
    }
}

/// RFC 3339, or unix seconds (integer or decimal).
pub fn parse_expiry(text: &str) -> Option<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(secs) = text.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0);
    }
    let secs = text.parse::<f64>().ok().filter(|s| s.is_finite())?;
    // Saturating float→int casts; out-of-range values are refused by from_timestamp_millis.
    DateTime::from_timestamp_millis((secs * 1000.0).round() as i64)
}

/// A positive delta as `4m`, `2h3m` (sub-second parts dropped).
fn whole_seconds(d: TimeDelta) -> String {
    format_duration(Duration::from_secs(d.num_seconds().max(0).unsigned_abs()))
}
