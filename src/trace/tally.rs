//! What each event adds to the counters `/metrics` serves: the trace, read
//! for numbers. Pure: one event in, its counts out; the HTTP server keeps the
//! totals.

use crate::core::event::Event;
use crate::core::records::RunReason;

/// The event kinds that move a counter (a tail of the trace asks for these only).
pub const COUNTED_KINDS: [&str; 12] = [
    "window_opened",
    "succeeded",
    "failed",
    "rejected",
    "dead_lettered",
    "skipped",
    "expired",
    "lost",
    "gate",
    "started",
    "alert",
    "alert_failed",
];

/// The label values each counter can take, known before anything happened:
/// `/metrics` exposes a zero series for each (per configured schedule), so
/// `rate()` and absence alerts see 0, not "no data", until the first count.
pub mod known {
    use crate::core::decision::SwitchName;

    /// `state` of `runs_finished`: the terminal states.
    pub const FINISHED: [&str; 5] = ["succeeded", "failed", "dead", "skipped", "expired"];
    /// (`outcome`, `class`) of `attempts`: every pair [`super::tally`] counts.
    pub const ATTEMPT_ENDS: [(&str, &str); 5] = [
        ("succeeded", "none"),
        ("failed", "retryable"),
        ("failed", "non_retryable"),
        ("failed", "needs_human"),
        ("lost", "retryable"),
    ];
    /// `result` of `gate_checks`.
    pub const GATE_RESULTS: [&str; 3] = ["pass", "wait", "fail"];
    /// `outcome` of `alerts`.
    pub const ALERT_OUTCOMES: [&str; 2] = ["raised", "failed"];
    /// Causes of a skip besides the switches (see [`skip_reasons`]).
    const OTHER_SKIPS: [&str; 7] = [
        "gate",
        "coalesced",
        "not_caught_up",
        "schedule_removed",
        "calendar",
        "catchup",
        "other",
    ];

    /// `reason` of `windows_skipped`: every switch, then the other causes.
    pub fn skip_reasons() -> impl Iterator<Item = &'static str> {
        SwitchName::ALL
            .iter()
            .map(|s| s.as_str())
            .chain(OTHER_SKIPS.iter().copied())
    }
}

/// One increment.
#[derive(Debug, Clone, PartialEq)]
pub enum Count {
    WindowOpened,
    /// A run reached a terminal state: `succeeded`, `failed`, `dead`, `skipped`, `expired`.
    RunFinished(&'static str),
    /// Why a window was skipped: a switch (`overlap`, `circuit`, `paused` …),
    /// `gate`, `calendar`, `coalesced`, `not_caught_up`, `catchup`, or `other`
    /// for rows written before skips said.
    WindowSkipped(&'static str),
    /// An attempt ended: outcome `succeeded`, `failed` or `lost`; class the
    /// error class (`none` for a success). Its run and number find its usage.
    AttemptEnded {
        outcome: &'static str,
        class: &'static str,
        run: Option<i64>,
        attempt: u32,
    },
    /// A gate answered `pass`, `wait` or `fail`.
    GateChecked {
        gate: String,
        result: &'static str,
    },
    /// The agent started this many seconds after the window was due.
    StartLateness(f64),
    /// An alert was raised (`raised`) or its sink refused it (`failed`).
    Alert(&'static str),
}

/// The counts of one event of run `run` (the row's run id).
pub fn tally(event: &Event, run: Option<i64>) -> Vec<Count> {
    match event {
        Event::WindowOpened { .. } => vec![Count::WindowOpened],
        Event::Succeeded { attempt, .. } => vec![
            Count::AttemptEnded {
                outcome: "succeeded",
                class: "none",
                run,
                attempt: *attempt,
            },
            Count::RunFinished("succeeded"),
        ],
        Event::Failed {
            attempt,
            class,
            is_final,
            ..
        } => {
            let mut out = vec![];
            if let Some(n) = attempt {
                out.push(Count::AttemptEnded {
                    outcome: "failed",
                    class: class.as_str(),
                    run,
                    attempt: *n,
                });
            }
            if *is_final == Some(true) {
                out.push(Count::RunFinished("failed"));
            }
            out
        }
        Event::Rejected { .. } => vec![Count::RunFinished("failed")],
        Event::DeadLettered { .. } => vec![Count::RunFinished("dead")],
        Event::Lost { attempt, .. } => vec![Count::AttemptEnded {
            outcome: "lost",
            class: "retryable",
            run,
            attempt: *attempt,
        }],
        Event::Skipped {
            cause,
            run_reason,
            window,
            ..
        } => {
            let why = match (cause, window) {
                (Some(c), _) => c.as_str(),
                (None, Some(w)) if w.note.as_deref() == Some("calendar_skipped") => "calendar",
                (None, Some(_)) if *run_reason == Some(RunReason::Catchup) => "catchup",
                _ => "other",
            };
            vec![Count::RunFinished("skipped"), Count::WindowSkipped(why)]
        }
        Event::Expired { .. } => vec![Count::RunFinished("expired")],
        Event::Gate(g) => vec![Count::GateChecked {
            gate: g.name.clone(),
            result: g.result.as_str(),
        }],
        // The agent's real start, not its claim (rows written before the
        // start carried its lateness count nothing).
        Event::Started {
            lateness_ms: Some(lateness_ms),
            ..
        } => vec![Count::StartLateness((*lateness_ms).max(0) as f64 / 1000.0)],
        Event::Alert(_) => vec![Count::Alert("raised")],
        Event::AlertFailed { .. } => vec![Count::Alert("failed")],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::ErrorClass;
    use crate::core::decision::SwitchName;
    use crate::core::event::SkipCause;

    #[test]
    fn a_run_and_its_attempts_are_counted_once_each() {
        let ok = Event::Succeeded {
            attempt: 2,
            summary: None,
            processed: None,
        };
        assert_eq!(
            tally(&ok, Some(7)),
            vec![
                Count::AttemptEnded {
                    outcome: "succeeded",
                    class: "none",
                    run: Some(7),
                    attempt: 2
                },
                Count::RunFinished("succeeded")
            ]
        );
        let retry = Event::Failed {
            attempt: Some(1),
            class: ErrorClass::Retryable,
            reason: "x".into(),
            is_final: None,
            stopped: None,
        };
        assert_eq!(
            tally(&retry, Some(7)).len(),
            1,
            "a retried attempt finishes no run"
        );
        let skip = Event::Skipped {
            reason: "overlap: run 3 still runs".into(),
            cause: Some(SkipCause::Switch(SwitchName::Overlap)),
            run_reason: None,
            window: None,
        };
        assert_eq!(tally(&skip, None)[1], Count::WindowSkipped("overlap"));
        let old = Event::Skipped {
            reason: "overlap: …".into(),
            cause: None,
            run_reason: None,
            window: None,
        };
        assert_eq!(
            tally(&old, None)[1],
            Count::WindowSkipped("other"),
            "prose is never read"
        );
    }

    /// The zero series `/metrics` seeds cover what the tally can count.
    #[test]
    fn known_label_values_cover_what_is_counted() {
        use crate::core::event::SkipCause;
        let reasons: Vec<&str> = known::skip_reasons().collect();
        for cause in SwitchName::ALL.map(SkipCause::Switch).into_iter().chain([
            SkipCause::Gate,
            SkipCause::Coalesced,
            SkipCause::NotCaughtUp,
            SkipCause::ScheduleRemoved,
        ]) {
            assert!(reasons.contains(&cause.as_str()), "{}", cause.as_str());
        }
        for class in [
            ErrorClass::Retryable,
            ErrorClass::NonRetryable,
            ErrorClass::NeedsHuman,
        ] {
            assert!(known::ATTEMPT_ENDS.contains(&("failed", class.as_str())));
        }
    }
}
