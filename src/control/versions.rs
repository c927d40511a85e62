//! Which schedule version a run was opened under and each attempt ran
//! under, as `show`, `explain` and the console's run detail say it:
//! "opened under v7, retried under v8: agent.timeout "10m" → "20m"".

use super::diff::field_changes;
use crate::store::Result;
use serde::Serialize;

/// A run's versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVersions {
    /// The schedule version the run was opened under (`null`: opened
    /// before versions were recorded).
    pub opened_under: Option<i64>,
    /// Per attempt (1-based), the version it ran under.
    pub attempts: Vec<AttemptVersion>,
    /// The sentence.
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptVersion {
    pub attempt: u32,
    pub version: Option<i64>,
}

/// The versions of run `run_id` of `schedule`.
pub fn of_run(tx: &dyn crate::store::read::LedgerRead, run_id: i64, schedule: &str) -> Result<RunVersions> {
    let (opened, attempts) = tx.run_versions(run_id)?;
    let mut summary = match opened {
        Some(v) => format!("opened under v{v}"),
        None => "opened before schedule versions were recorded".to_string(),
    };
    let mut last = opened;
    for (n, v) in &attempts {
        let Some(v) = *v else { continue };
        if last == Some(v) {
            continue;
        }
        let verb = if *n <= 1 { "ran" } else { "retried" };
        summary.push_str(&format!(", {verb} under v{v}"));
        if let Some(prev) = last {
            let before = tx.schedule_version(schedule, prev)?;
            let after = tx.schedule_version(schedule, v)?;
            if let (Some(b), Some(a)) = (before, after) {
                let fields: Vec<String> = field_changes(&b.settings, &a.settings)
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                if !fields.is_empty() {
                    summary.push_str(&format!(": {}", fields.join(", ")));
                }
            }
        }
        last = Some(v);
    }
    Ok(RunVersions {
        opened_under: opened,
        attempts: attempts
            .into_iter()
            .map(|(attempt, version)| AttemptVersion { attempt, version })
            .collect(),
        summary,
    })
}
