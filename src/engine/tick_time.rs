//! How long the live loop's ticks take, as `/metrics` shows it
//! (`agentcron_tick_duration_seconds`), and when it last completed one, as
//! `/livez` tells it (when it last made progress). One of each per process: a process runs one live
//! scheduler (`run --headless`, or the console's), and the HTTP server that
//! exposes it is built apart from the engine.

use prometheus_client::metrics::histogram::Histogram;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Seconds. Fine below a second (a tick is milliseconds when all is well),
/// with a bound at 150 ms, the p99 a flood of posted events must stay under.
pub const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

static TICKS: LazyLock<Histogram> = LazyLock::new(|| Histogram::new(BUCKETS));

/// One tick of the live loop took `took`.
pub(crate) fn observe(took: Duration) {
    TICKS.observe(took.as_secs_f64());
}

/// The histogram (a handle on the one the loop observes into).
pub fn histogram() -> Histogram {
    TICKS.clone()
}

/// A live loop that has shown no progress for this long is stuck. It shows
/// progress at the end of each pass and, while a pass waits for gates (up to
/// a third of the lease), each time it renews leases meanwhile; every other
/// wait inside a pass is bounded far below this (a PostgreSQL lock wait
/// 10 s, a locked SQLite file 5 s a try), and between passes the loop sleeps
/// at most half a second.
pub const STUCK_AFTER: Duration = Duration::from_secs(120);

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// When the live loop last showed progress, in ms after [`EPOCH`], plus one;
/// 0 while no live loop runs.
static LAST_PROGRESS: AtomicU64 = AtomicU64::new(0);

fn ms_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_millis()).unwrap_or(u64::MAX - 1)
}

/// The live loop made progress now: it completed a pass, or renewed leases
/// while a pass waits for gates.
pub(crate) fn progressed() {
    LAST_PROGRESS.store(ms_since_epoch(Instant::now()) + 1, Ordering::Relaxed);
}

/// The live loop ended (a stopped scheduler is not a stuck one).
pub(crate) fn loop_ended() {
    LAST_PROGRESS.store(0, Ordering::Relaxed);
}

/// How long ago the live loop last made progress, if one runs.
pub fn since_progress() -> Option<Duration> {
    since(
        LAST_PROGRESS.load(Ordering::Relaxed),
        ms_since_epoch(Instant::now()),
    )
}

fn since(last: u64, now_ms: u64) -> Option<Duration> {
    (last > 0).then(|| Duration::from_millis(now_ms.saturating_sub(last - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loop_is_no_age_and_a_pass_is_aged_from_its_instant() {
        assert_eq!(since(0, 5_000), None);
        assert_eq!(since(1_001, 5_000), Some(Duration::from_millis(4_000)));
        assert_eq!(since(1, 0), Some(Duration::ZERO));
    }
}
