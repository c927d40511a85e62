//! How long the live loop's ticks take, as `/metrics` shows it
//! (`agentcron_tick_duration_seconds`). One histogram per process: a process
//! runs one live scheduler (`run --headless`, or the console's), and the HTTP
//! server that exposes it is built apart from the engine.

use prometheus_client::metrics::histogram::Histogram;
use std::sync::LazyLock;
use std::time::Duration;

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
