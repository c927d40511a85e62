//! The scheduler registry as values (DESIGN.md "Status"): every scheduler
//! process keeps a row (who, where, which build and config, when it started,
//! when it was last seen); whether it is alive is a pure function of that row
//! and `now`, so the engine, `agentcron status`, the console and `/metrics`
//! cannot disagree about it.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

/// A scheduler is alive while it was seen within this many heartbeats.
/// Three, not one: a tick that waits on a slow gate or a locked database
/// for a moment is not a dead scheduler.
pub const ALIVE_HEARTBEATS: i32 = 3;

/// One scheduler process's registry row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchedulerRecord {
    /// `host:pid` (the lease owner).
    pub owner: String,
    pub host: String,
    pub pid: u32,
    /// The agentcron version it runs.
    pub version: String,
    /// A hash of the config file it loaded (its version).
    pub config_hash: String,
    /// How often it refreshes `last_seen`.
    pub heartbeat_ms: i64,
    pub started_at: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// Set by its clean stop.
    pub stopped_at: Option<DateTime<Utc>>,
    /// Set by the peer that saw it go silent (and cleared if it comes back).
    pub lost_at: Option<DateTime<Utc>>,
    pub lost_by: Option<String>,
}

/// What the registry says of a scheduler at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Seen within [`ALIVE_HEARTBEATS`] heartbeats.
    Alive,
    /// Stopped cleanly.
    Stopped,
    /// Silent for longer than that without a clean stop (crashed, killed,
    /// frozen, or its machine is gone).
    Lost,
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Stopped => "stopped",
            Liveness::Lost => "lost",
        }
    }
}

impl SchedulerRecord {
    /// How long it may stay silent and still count as alive.
    pub fn alive_for(&self) -> TimeDelta {
        TimeDelta::milliseconds(self.heartbeat_ms.max(1)) * ALIVE_HEARTBEATS
    }

    /// Alive, stopped or lost at `now`. A stopped scheduler is stopped even if
    /// its last heartbeat is recent.
    pub fn liveness(&self, now: DateTime<Utc>) -> Liveness {
        if self.stopped_at.is_some() {
            Liveness::Stopped
        } else if now <= self.last_seen + self.alive_for() {
            Liveness::Alive
        } else {
            Liveness::Lost
        }
    }

    /// A peer that went silent and no one has recorded as lost yet: `me`
    /// records `scheduler_lost` for it (once; the store's conditional update
    /// decides between several observers).
    pub fn newly_lost(&self, me: &str, now: DateTime<Utc>) -> bool {
        self.owner != me && self.lost_at.is_none() && self.liveness(now) == Liveness::Lost
    }
}

/// The registry at a glance: how many are alive, and when one was last seen.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RegistrySummary {
    pub alive: usize,
    pub stopped: usize,
    pub lost: usize,
    /// The newest `last_seen` of any scheduler (alive or not).
    pub last_seen: Option<DateTime<Utc>>,
}

/// Counts the rows by liveness at `now`.
pub fn summarize(rows: &[SchedulerRecord], now: DateTime<Utc>) -> RegistrySummary {
    let mut s = RegistrySummary::default();
    for r in rows {
        match r.liveness(now) {
            Liveness::Alive => s.alive += 1,
            Liveness::Stopped => s.stopped += 1,
            Liveness::Lost => s.lost += 1,
        }
        s.last_seen = Some(s.last_seen.map_or(r.last_seen, |t| t.max(r.last_seen)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn rec(owner: &str, last_seen: &str) -> SchedulerRecord {
        SchedulerRecord {
            owner: owner.into(),
            host: "h".into(),
            pid: 1,
            version: "0".into(),
            config_hash: "x".into(),
            heartbeat_ms: 5000,
            started_at: t("2026-06-01T00:00:00Z"),
            last_seen: t(last_seen),
            stopped_at: None,
            lost_at: None,
            lost_by: None,
        }
    }

    #[test]
    fn alive_means_seen_within_three_heartbeats() {
        let r = rec("a", "2026-06-01T09:00:00Z");
        assert_eq!(r.liveness(t("2026-06-01T09:00:15Z")), Liveness::Alive);
        assert_eq!(r.liveness(t("2026-06-01T09:00:15.001Z")), Liveness::Lost);
        let mut stopped = r.clone();
        stopped.stopped_at = Some(t("2026-06-01T09:00:00Z"));
        assert_eq!(stopped.liveness(t("2026-06-01T09:00:01Z")), Liveness::Stopped);
    }

    #[test]
    fn a_silent_peer_is_newly_lost_once_and_never_by_itself() {
        let r = rec("a", "2026-06-01T09:00:00Z");
        let later = t("2026-06-01T09:01:00Z");
        assert!(r.newly_lost("b", later));
        assert!(
            !r.newly_lost("a", later),
            "a scheduler never declares itself lost"
        );
        assert!(!r.newly_lost("b", t("2026-06-01T09:00:10Z")), "still alive");
        let mut marked = r.clone();
        marked.lost_at = Some(later);
        assert!(!marked.newly_lost("b", later), "already recorded");
        let s = summarize(&[r, rec("c", "2026-06-01T09:00:59Z")], later);
        assert_eq!((s.alive, s.lost, s.stopped), (1, 1, 0));
        assert_eq!(s.last_seen, Some(t("2026-06-01T09:00:59Z")));
    }
}
