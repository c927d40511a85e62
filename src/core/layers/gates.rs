//! Layer 2 as data: what a readiness gate answered. The gates themselves
//! (which do IO) live in `crate::gates`; the decision only sees these values.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a gate says about a window right now.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// Ready: go on to the next gate.
    Pass,
    /// Not yet: check again next tick inside the window.
    Wait,
    /// Stop: the gate's `on_fail` decides (skip, fail or ask a human).
    Fail,
}

impl GateVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Pass => "pass",
            GateVerdict::Wait => "wait",
            GateVerdict::Fail => "fail",
        }
    }
}

impl fmt::Display for GateVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateOutcome {
    pub verdict: GateVerdict,
    pub reason: String,
}

impl GateOutcome {
    pub fn pass(reason: impl Into<String>) -> Self {
        Self {
            verdict: GateVerdict::Pass,
            reason: reason.into(),
        }
    }

    pub fn wait(reason: impl Into<String>) -> Self {
        Self {
            verdict: GateVerdict::Wait,
            reason: reason.into(),
        }
    }

    pub fn fail(reason: impl Into<String>) -> Self {
        Self {
            verdict: GateVerdict::Fail,
            reason: reason.into(),
        }
    }
}

/// One gate's result inside a decision, as stored in the `gate` event and shown
/// in the console's gates pane.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct GateResult {
    pub name: String,
    pub kind: String,
    pub verdict: GateVerdict,
    pub reason: String,
    pub elapsed_ms: u64,
    /// `skip`, `fail` or `human`: what a `fail` verdict leads to.
    pub on_fail: String,
}
