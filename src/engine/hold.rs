//! Holding through store faults: a transaction that failed for a reason that
//! passes (another process held the write lock too long, a PostgreSQL ledger
//! away for a moment, a full disk) wrote nothing, so the live loop logs it
//! and tries the same work again at its next pass instead of stopping. What
//! the engine keeps in memory may have moved on inside the transaction that
//! rolled back (a window taken off the due heap, a cursor moved), so before
//! the next tick it is rebuilt from the store, as at a start.

use super::{Engine, EngineError, Result};
use crate::core::event::{Alert, Event};
use crate::store::StoreError;
use crate::store::types::NewEvent;
use chrono::{DateTime, TimeDelta, Utc};

/// A full disk's episode ends once writes have gone through for this long: a
/// disk that frees a few pages (a WAL reused after a checkpoint, a row
/// deleted) and fills again is the same episode, alerted once.
const DISK_ROOM_FOR: TimeDelta = TimeDelta::minutes(5);

/// The store fault the live loop is holding through, if any.
#[derive(Default)]
pub(crate) struct Holding {
    /// A transaction failed: the in-memory model may be ahead of the
    /// store, and is rebuilt from it before the next tick.
    resync: bool,
    /// The disk has been full since this episode began.
    disk_full: Option<DiskFull>,
}

/// One episode of a full disk: its `disk_full` alert went to the sink when
/// it began; its event is written to the ledger once there is room.
struct DiskFull {
    since: DateTime<Utc>,
    /// The last write that failed for want of room.
    last_full: DateTime<Utc>,
    unrecorded: Option<NewEvent>,
}

impl Engine {
    /// One pass of the live loop: a reload asked for (SIGHUP, `agentcron
    /// reload`, a version another process applied), then a tick. A transient
    /// store error is held ([`Engine::hold`]): logged, and the next pass
    /// rebuilds the engine's plans from the store and does the work again.
    /// On a full disk an alert `disk_full` goes out once per episode (not at
    /// every pass) and is recorded in the ledger once a pass succeeds.
    pub fn pass(&mut self) -> Result<()> {
        let done = self.pass_through();
        self.hold(done)?;
        if !self.holding.resync {
            let recorded = self.disk_room_again();
            self.hold(recorded)?;
        }
        Ok(())
    }

    fn pass_through(&mut self) -> Result<()> {
        if self.holding.resync {
            self.resync()?;
            self.holding.resync = false;
        }
        self.check_reload()?;
        self.tick()
    }

    /// `r`, with a transient store error logged and passed over: nothing of
    /// the failed transaction was written, and the next pass tries again
    /// from what the store holds. Any other error is returned.
    pub(crate) fn hold(&mut self, r: Result<()>) -> Result<()> {
        let e = match r {
            Err(EngineError::Store(e)) if e.is_transient() => e,
            other => return other,
        };
        self.holding.resync = true;
        match &e {
            StoreError::Locked { waited_ms } => {
                tracing::warn!(waited_ms, "database locked by another process; retrying");
            }
            StoreError::DiskFull { .. } => self.disk_full(&e),
            other => tracing::warn!(error = %other, "database unavailable; retrying"),
        }
        Ok(())
    }

    /// A write failed on a full disk: the first time in an episode, says so
    /// (an error in the log, the alert to the sink at once); later, quietly.
    fn disk_full(&mut self, e: &StoreError) {
        let now = self.clock.now();
        if let Some(episode) = self.holding.disk_full.as_mut() {
            episode.last_full = now;
            tracing::debug!(error = %e, "the disk is still full; retrying");
            return;
        }
        tracing::error!(
            error = %e,
            "the disk is full: holding (nothing half-written; every pass tries the same work again)"
        );
        let alert = Alert::scheduler_wide(
            "disk_full",
            format!(
                "{e}; scheduler {} holds: it opens and starts nothing it cannot record, and tries again until there is room",
                self.opts.owner
            ),
            now,
        );
        self.send_alert(&alert, now);
        self.holding.disk_full = Some(DiskFull {
            since: now,
            last_full: now,
            unrecorded: Some(NewEvent::of(now, Event::Alert(alert))),
        });
    }

    /// After a pass that went through: a full disk's alert is recorded (at
    /// the instant it was raised), and once writes have gone through for
    /// [`DISK_ROOM_FOR`] the episode is over.
    fn disk_room_again(&mut self) -> Result<()> {
        let Some(episode) = self.holding.disk_full.as_mut() else {
            return Ok(());
        };
        if let Some(ev) = episode.unrecorded.take()
            && let Err(e) = self.store.write(|tx| tx.append_event(&ev).map(|_| ()))
        {
            episode.unrecorded = Some(ev);
            return Err(e.into());
        }
        let now = self.clock.now();
        if now - episode.last_full < DISK_ROOM_FOR {
            return Ok(());
        }
        let held_s = (episode.last_full - episode.since).num_seconds();
        self.holding.disk_full = None;
        tracing::warn!(
            held_s,
            "the disk has had room again for a while; the held work is done"
        );
        Ok(())
    }

    /// Rebuilds the due heap, cursors, backlog looks and the posted-event
    /// cursor from the store, keeping the attempts in flight (as a reload
    /// does; schedules a reload removed stay retired).
    fn resync(&mut self) -> Result<()> {
        let mut cfg = (*self.cfg).clone();
        let retired = &self.control.retired;
        cfg.schedules
            .retain(|s| !retired.iter().any(|(id, _)| *id == s.id));
        // Posted events read inside the rolled-back transaction are read again
        // (their windows are deduped by event id).
        self.posted_seq = 0;
        self.rebuild(cfg, self.control.version)
    }

    /// Whether the engine holds through a full disk now.
    pub fn disk_full_since(&self) -> Option<DateTime<Utc>> {
        self.holding.disk_full.as_ref().map(|d| d.since)
    }
}
