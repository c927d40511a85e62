//! This scheduler's row in the registry (DESIGN.md "Status"): written at the
//! first tick, refreshed every heartbeat beside the lease renewals (which run
//! every tick and while the loop waits on gates), marked stopped by a clean
//! stop. Each refresh also looks at the peers: one that went silent without a
//! clean stop is recorded as `scheduler_lost` and alerted, once.

use super::{Engine, Result};
use crate::config::Config;
use crate::core::event::{Alert, Event};
use crate::core::registry::SchedulerRecord;
use crate::store::types::NewEvent;
use chrono::{DateTime, TimeDelta, Utc};

/// What a live scheduler says about itself in the registry.
#[derive(Debug, Clone)]
pub struct Registration {
    pub host: String,
    pub pid: u32,
    pub version: String,
    /// FNV-1a of the config file's bytes: which config it runs.
    pub config_hash: String,
    /// How often the row is refreshed (`[scheduler] heartbeat`).
    pub heartbeat: TimeDelta,
}

impl Registration {
    /// This process, running `cfg`.
    pub fn of_this_process(cfg: &Config) -> Self {
        let bytes = std::fs::read(&cfg.path).unwrap_or_default();
        Self {
            host: super::hostname(),
            pid: std::process::id(),
            version: crate::VERSION.to_string(),
            config_hash: config_hash(&bytes),
            heartbeat: crate::time::duration::to_delta(cfg.scheduler.heartbeat),
        }
    }
}

/// FNV-1a, 64 bits, as hex: a fingerprint, not a security boundary.
pub fn config_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Engine {
    /// Refreshes this scheduler's row (at most once a heartbeat) and records
    /// peers that went silent. Without a [`Registration`] (rehearsals, most
    /// tests) it does nothing.
    pub(crate) fn refresh_registry(&mut self, now: DateTime<Utc>) -> Result<()> {
        let Some(reg) = &self.opts.registry else {
            return Ok(());
        };
        if self
            .registry_seen
            .is_some_and(|t| now >= t && now < t + reg.heartbeat)
        {
            return Ok(());
        }
        let first = self.registry_seen.is_none();
        self.registry_seen = Some(now);
        let me = SchedulerRecord {
            owner: self.opts.owner.clone(),
            host: reg.host.clone(),
            pid: reg.pid,
            version: reg.version.clone(),
            config_hash: reg.config_hash.clone(),
            heartbeat_ms: reg.heartbeat.num_milliseconds(),
            started_at: now,
            last_seen: now,
            stopped_at: None,
            lost_at: None,
            lost_by: None,
        };
        let rows = self.store.write(|tx| {
            if first || !tx.scheduler_seen(&me.owner, now)? {
                tx.register_scheduler(&me)?;
            }
            tx.schedulers()
        })?;
        for peer in rows.iter().filter(|r| r.newly_lost(&me.owner, now)) {
            let silent = now - peer.last_seen;
            let alert = Alert::scheduler_wide(
                "scheduler_lost",
                format!(
                    "scheduler {} (pid {} on {}) went silent: last seen {}, {}s ago, without a clean stop",
                    peer.owner,
                    peer.pid,
                    peer.host,
                    crate::time::rfc3339(peer.last_seen),
                    silent.num_seconds()
                ),
                now,
            );
            let lost = Event::SchedulerLost {
                owner: peer.owner.clone(),
                last_seen: peer.last_seen,
                by: me.owner.clone(),
                host: peer.host.clone(),
                pid: peer.pid,
            };
            let marked = self.store.write(|tx| {
                if !tx.mark_scheduler_lost(&peer.owner, peer.last_seen, &me.owner, now)? {
                    return Ok(false);
                }
                tx.append_event(&NewEvent::of(now, lost))?;
                tx.append_event(&NewEvent::of(now, Event::Alert(alert.clone())))?;
                Ok(true)
            })?;
            if marked {
                self.send_alert(&alert, now);
            }
        }
        Ok(())
    }

    /// A clean stop: the row says so, and nobody will call this scheduler lost.
    pub(crate) fn registry_stopped(&mut self, now: DateTime<Utc>) -> Result<()> {
        if self.opts.registry.is_some() {
            let owner = self.opts.owner.clone();
            self.store.write(|tx| tx.scheduler_stopped(&owner, now))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn config_hashes_tell_configs_apart() {
        assert_eq!(super::config_hash(b""), "cbf29ce484222325");
        assert_ne!(super::config_hash(b"a = 1"), super::config_hash(b"a = 2"));
    }
}
