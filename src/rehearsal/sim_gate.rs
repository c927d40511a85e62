//! Simulated readiness gates: upstream data late until T, a credential that
//! expired, a gate that always fails. They read `now` from the gate context
//! (the virtual clock), like every real gate.

use crate::gates::{Gate, GateContext, GateOutcome};
use crate::time::rfc3339_secs;
use chrono::{DateTime, Utc};

/// What a simulated gate answers.
#[derive(Debug, Clone, PartialEq)]
pub enum SimGateRule {
    Pass,
    /// `wait` before T, `pass` from T on ("upstream data late until T").
    PassFrom(DateTime<Utc>),
    /// Always `fail` with the reason (its `on_fail` decides).
    Fail(String),
    /// `fail` from T on (e.g. a credential expiring at T).
    FailFrom(DateTime<Utc>, String),
}

pub struct SimGate {
    pub name: String,
    pub kind: &'static str,
    pub rule: SimGateRule,
}

impl Gate for SimGate {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        self.kind
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        match &self.rule {
            SimGateRule::Pass => GateOutcome::pass("ready"),
            SimGateRule::PassFrom(t) if ctx.now >= *t => {
                GateOutcome::pass(format!("ready since {}", rfc3339_secs(*t)))
            }
            // As the real gates write instants (readers tell them in their zone).
            SimGateRule::PassFrom(t) => GateOutcome::wait(format!("not ready until {}", rfc3339_secs(*t))),
            SimGateRule::Fail(why) => GateOutcome::fail(why.clone()),
            SimGateRule::FailFrom(t, why) if ctx.now >= *t => GateOutcome::fail(why.clone()),
            SimGateRule::FailFrom(..) => GateOutcome::pass("valid"),
        }
    }
}
