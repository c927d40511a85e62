//! The one source of "now". Engine, gates and recovery take time from a [`Clock`]
//! so that rehearsals and tests can run months of schedule on a virtual clock.

use chrono::{DateTime, TimeDelta, Utc};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

/// Where time comes from.
pub trait Clock: Send + Sync + Debug {
    fn now(&self) -> DateTime<Utc>;

    /// True for a virtual clock: callers must not wait in real time for it.
    fn is_virtual(&self) -> bool {
        false
    }
}

/// The machine's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The machine's wall clock moved by an offset: the database's clock, for
/// schedulers that share a PostgreSQL ledger (their leases and due times
/// then agree however far apart their machines' clocks are). Cloning shares
/// the offset; whoever measures it sets it.
#[derive(Debug, Clone, Default)]
pub struct OffsetClock {
    offset_ms: Arc<std::sync::atomic::AtomicI64>,
}

impl OffsetClock {
    pub fn new(offset_ms: i64) -> Self {
        let c = Self::default();
        c.set_offset_ms(offset_ms);
        c
    }

    pub fn set_offset_ms(&self, ms: i64) {
        self.offset_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + TimeDelta::milliseconds(self.offset_ms())
    }
}

/// A clock that only moves when told to. Cloning shares the same instant.
#[derive(Debug, Clone)]
pub struct VirtualClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl VirtualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// Moves the clock to `t` (backwards too: clock jumps are a rehearsal fault).
    pub fn set(&self, t: DateTime<Utc>) {
        *self.lock() = t;
    }

    pub fn advance(&self, by: TimeDelta) {
        let mut now = self.lock();
        *now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // A poisoned lock only means another thread panicked while holding a plain
        // timestamp; the value itself is still valid.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }

    fn is_virtual(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_offset_clock_runs_its_offset_ahead_of_the_machine() {
        use super::{Clock, OffsetClock};
        let c = OffsetClock::new(60_000);
        let ahead = c.now() - chrono::Utc::now();
        assert!(
            ahead > chrono::TimeDelta::seconds(59) && ahead <= chrono::TimeDelta::seconds(60),
            "{ahead}"
        );
        c.set_offset_ms(-5_000);
        assert!(c.now() < chrono::Utc::now());
    }

    use super::*;

    #[test]
    fn virtual_clock_moves_only_when_told() {
        let t0 = DateTime::parse_from_rfc3339("2026-06-06T09:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let c = VirtualClock::new(t0);
        let shared = c.clone();
        assert_eq!(c.now(), t0);
        shared.advance(TimeDelta::minutes(5));
        assert_eq!(c.now(), t0 + TimeDelta::minutes(5));
        c.set(t0 - TimeDelta::hours(1));
        assert_eq!(shared.now(), t0 - TimeDelta::hours(1));
        assert!(c.is_virtual());
        assert!(!SystemClock.is_virtual());
    }
}
