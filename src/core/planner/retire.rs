//! A schedule removed by a reload (issue 18): its waiting runs end `skipped`
//! with the version that removed it; running attempts finish as they would
//! and `needs_human` runs keep waiting for their human. Nothing is deleted.

use super::{skipped, target};
use crate::core::event::SkipCause;
use crate::core::plan::{Plan, Scope, Step};
use crate::core::records::{Change, Run, RunState};

/// The reason a removed schedule's waiting run ends with.
pub fn removed_reason(config_version: i64) -> String {
    format!("schedule removed in v{config_version}")
}

/// The plan that ends `run` because config `config_version` removed its
/// schedule; `None` when the run is not waiting (`pending` / `retry_wait`).
pub fn schedule_removed(run: &Run, config_version: i64) -> Option<Plan> {
    if !matches!(run.state, RunState::Pending | RunState::RetryWait) {
        return None;
    }
    let reason = removed_reason(config_version);
    let mut plan = Plan {
        target: Some(target(run, None)),
        ..Plan::default()
    };
    plan.steps.push(Step::Transition {
        to: RunState::Skipped,
        change: Change {
            state_reason: Some(reason.clone()),
            ..Change::default()
        },
    });
    plan.event(Scope::Run, skipped(&reason, SkipCause::ScheduleRemoved));
    Some(plan)
}
