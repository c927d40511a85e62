//! The run state machine of DESIGN.md ("Run state machine"): which state a
//! run may move to from which, and which states are terminal.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a run is in its life. See [`RunState::can_become`] for the machine.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(description = "Where a run is in its life (DESIGN.md \"Run state machine\").")]
pub enum RunState {
    Pending,
    Running,
    RetryWait,
    NeedsHuman,
    Succeeded,
    Failed,
    Dead,
    Skipped,
    Missed,
    Expired,
}

impl RunState {
    pub const ALL: [RunState; 10] = [
        RunState::Pending,
        RunState::Running,
        RunState::RetryWait,
        RunState::NeedsHuman,
        RunState::Succeeded,
        RunState::Failed,
        RunState::Dead,
        RunState::Skipped,
        RunState::Missed,
        RunState::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Running => "running",
            RunState::RetryWait => "retry_wait",
            RunState::NeedsHuman => "needs_human",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Dead => "dead",
            RunState::Skipped => "skipped",
            RunState::Missed => "missed",
            RunState::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Succeeded, failed, dead, skipped and expired never change by themselves.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Dead | RunState::Skipped | RunState::Expired
        )
    }

    /// The state machine of DESIGN.md. `by_operator` is true only for an
    /// operator's recorded requeue, the one way out of `failed` / `dead`.
    pub fn can_become(self, to: RunState, by_operator: bool) -> bool {
        use RunState::*;
        match (self, to) {
            // Claim, or the decision says skip / fail / ask a human; window closed;
            // too old for catch-up.
            (Pending, Running | Skipped | Missed | Expired | Failed | NeedsHuman) => true,
            // Attempt outcome; cancel_previous and kill --cancel-running also end here.
            (Running, Succeeded | RetryWait | NeedsHuman | Failed | Dead) => true,
            // Re-gated retry: claimed again, or a gate now says skip / fail / human.
            (RetryWait, Running | Skipped | Failed | NeedsHuman) => true,
            // Approve (new attempt, or back to the gates) / reject / approval_ttl.
            (NeedsHuman, RetryWait | Pending | Failed) => true,
            // Catch-up rules.
            (Missed, Pending | Skipped | Expired) => true,
            // Operator requeue from the dead-letter queue or the failed list.
            (Failed | Dead, RetryWait) => by_operator,
            _ => false,
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
