//! `previous_run_finished`: a window waits until the schedule's previous window has
//! reached a terminal state, so two windows of one task never overlap through the
//! gates (overlap policy handles runs that are already running).

use super::{Gate, GateContext, GateOutcome};

pub struct PreviousRunFinished {
    name: String,
}

impl PreviousRunFinished {
    pub fn new(name: String) -> Self {
        Self { name }
    }
}

impl Gate for PreviousRunFinished {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "previous_run_finished"
    }

    fn check(&self, ctx: &GateContext<'_>) -> GateOutcome {
        match ctx.previous_run {
            None => GateOutcome::pass("no previous run"),
            Some(run) if run.state.is_terminal() => {
                GateOutcome::pass(format!("previous window {} is {}", run.window_key, run.state))
            }
            // pending, running, retry_wait, needs_human, missed: not finished yet.
            Some(run) => GateOutcome::wait(format!(
                "previous window {} is still {}",
                run.window_key, run.state
            )),
        }
    }
}
