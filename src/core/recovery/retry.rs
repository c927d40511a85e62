//! The retry planner: when a retryable failure may try again, as a durable
//! `not_before` instant (never a sleep in a worker).

use crate::config::model::{Backoff, RetryPolicy};
use chrono::{DateTime, TimeDelta, Utc};

/// What to do after a retryable failure of attempt `attempt` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPlan {
    /// Try again, not before this instant.
    At(DateTime<Utc>),
    /// `max_attempts` used up: dead-letter the run.
    Exhausted,
}

/// Delay before attempt `attempt + 1`, without jitter: `initial` for fixed
/// backoff, `initial * 2^(attempt-1)` for exponential, capped at `max`.
pub fn base_delay(policy: &RetryPolicy, attempt: u32) -> TimeDelta {
    let initial = crate::time::duration::to_delta(policy.initial);
    let max = crate::time::duration::to_delta(policy.max);
    let delay = match policy.backoff {
        Backoff::Fixed => initial,
        Backoff::Exponential => {
            let exp = attempt.saturating_sub(1).min(30);
            initial.checked_mul(1 << exp).unwrap_or(max)
        }
    };
    delay.min(max)
}

/// Jitter as a deterministic function of (run, attempt): the same run retries at
/// the same instants in every rehearsal, while different runs spread out.
pub fn jitter_factor(run_id: i64, attempt: u32) -> f64 {
    // splitmix64 of the pair: cheap, well mixed, no RNG state to carry.
    let mut z = (run_id as u64) ^ (u64::from(attempt)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // Map to [-1, 1].
    (z as f64 / u64::MAX as f64) * 2.0 - 1.0
}

/// Plans the retry after attempt `attempt` failed retryably at `now`.
pub fn plan(policy: &RetryPolicy, run_id: i64, attempt: u32, now: DateTime<Utc>) -> RetryPlan {
    if attempt >= policy.max_attempts {
        return RetryPlan::Exhausted;
    }
    let base = base_delay(policy, attempt);
    let jitter = policy.jitter.clamp(0.0, 1.0);
    let ms = base.num_milliseconds() as f64;
    // The cap holds after jitter too: a capped delay spreads below `max`, never past it.
    let cap = (policy.max.as_millis() as f64).max(ms);
    let jittered = (ms * (1.0 + jitter * jitter_factor(run_id, attempt))).clamp(0.0, cap);
    RetryPlan::At(now + TimeDelta::milliseconds(jittered.round() as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn policy(backoff: Backoff, jitter: f64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            backoff,
            initial: Duration::from_secs(60),
            max: Duration::from_secs(300),
            jitter,
        }
    }

    #[test]
    fn exponential_doubles_and_caps() {
        let p = policy(Backoff::Exponential, 0.0);
        let mins: Vec<i64> = (1..=4).map(|a| base_delay(&p, a).num_minutes()).collect();
        assert_eq!(mins, [1, 2, 4, 5]);
        let now = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
        assert_eq!(plan(&p, 1, 2, now), RetryPlan::At(now + TimeDelta::minutes(2)));
        assert_eq!(plan(&p, 1, 5, now), RetryPlan::Exhausted);
    }

    #[test]
    fn fixed_stays_fixed() {
        let p = policy(Backoff::Fixed, 0.0);
        assert!((1..=4).all(|a| base_delay(&p, a) == TimeDelta::minutes(1)));
    }

    #[test]
    fn jitter_is_bounded_and_deterministic() {
        let p = policy(Backoff::Fixed, 0.1);
        let now = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
        let mut distinct = std::collections::HashSet::new();
        for run in 0..200 {
            let RetryPlan::At(t) = plan(&p, run, 1, now) else {
                panic!()
            };
            let d = (t - now).num_milliseconds();
            assert!((54_000..=66_000).contains(&d), "{d}");
            assert_eq!(plan(&p, run, 1, now), RetryPlan::At(t));
            distinct.insert(d);
        }
        assert!(distinct.len() > 100, "jitter should spread runs");
    }

    #[test]
    fn jitter_never_pushes_a_capped_delay_past_max() {
        // Exponential 60s, 120s, 240s, then capped at 300s; jitter 0.5.
        let p = policy(Backoff::Exponential, 0.5);
        let now = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
        let mut below = 0;
        for run in 0..200 {
            let RetryPlan::At(t) = plan(&p, run, 4, now) else {
                panic!()
            };
            let d = (t - now).num_milliseconds();
            assert!((150_000..=300_000).contains(&d), "{d}");
            below += usize::from(d < 300_000);
        }
        assert!(below > 50, "capped delays still spread below the cap");
    }
}
