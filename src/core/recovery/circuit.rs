//! The per-schedule circuit breaker: after `open_after` consecutive failed or
//! dead runs new windows are skipped; after `cool_down` one probe run may go.

use crate::config::model::CircuitPolicy;
use crate::core::records::{CircuitState, ScheduleState};
use chrono::{DateTime, Utc};

/// What a run's final outcome does to the circuit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitChange {
    None,
    Opened,
    Closed,
}

/// Applies a finished run (success or failed/dead) to the schedule state.
pub fn on_run_finished(
    st: &mut ScheduleState,
    policy: &CircuitPolicy,
    succeeded: bool,
    now: DateTime<Utc>,
) -> CircuitChange {
    if succeeded {
        st.consecutive_failures = 0;
        if st.circuit != CircuitState::Closed {
            st.circuit = CircuitState::Closed;
            st.circuit_changed_at = Some(now);
            return CircuitChange::Closed;
        }
        return CircuitChange::None;
    }
    st.consecutive_failures = st.consecutive_failures.saturating_add(1);
    let probe_failed = st.circuit == CircuitState::HalfOpen;
    if probe_failed || (st.circuit == CircuitState::Closed && st.consecutive_failures >= policy.open_after) {
        st.circuit = CircuitState::Open;
        st.circuit_changed_at = Some(now);
        return CircuitChange::Opened;
    }
    CircuitChange::None
}

/// Whether an open circuit's cool-down is over (time for the half-open probe).
pub fn cool_down_over(st: &ScheduleState, policy: &CircuitPolicy, now: DateTime<Utc>) -> bool {
    st.circuit == CircuitState::Open
        && st
            .circuit_changed_at
            .is_none_or(|at| now >= at + crate::time::duration::to_delta(policy.cool_down))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;
    use std::time::Duration;

    #[test]
    fn opens_after_three_and_closes_on_probe_success() {
        let policy = CircuitPolicy {
            open_after: 3,
            cool_down: Duration::from_secs(1800),
        };
        let t0 = DateTime::<Utc>::from_timestamp(0, 0).unwrap();
        let mut st = ScheduleState::new("s");
        assert_eq!(on_run_finished(&mut st, &policy, false, t0), CircuitChange::None);
        assert_eq!(on_run_finished(&mut st, &policy, false, t0), CircuitChange::None);
        assert_eq!(
            on_run_finished(&mut st, &policy, false, t0),
            CircuitChange::Opened
        );
        assert!(!cool_down_over(&st, &policy, t0 + TimeDelta::minutes(29)));
        assert!(cool_down_over(&st, &policy, t0 + TimeDelta::minutes(30)));
        st.circuit = CircuitState::HalfOpen;
        assert_eq!(
            on_run_finished(&mut st, &policy, false, t0),
            CircuitChange::Opened
        );
        st.circuit = CircuitState::HalfOpen;
        assert_eq!(on_run_finished(&mut st, &policy, true, t0), CircuitChange::Closed);
        assert_eq!(st.consecutive_failures, 0);
    }
}
