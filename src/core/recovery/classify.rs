//! Error classification (DESIGN.md "Error classes"): turns what an attempt said
//! and how it ended into success, or a failure with a class and a readable reason.
//!
//! Precedence, first match wins:
//! 1. The agent could not be started → `non_retryable` (a missing binary or
//!    permission problem does not fix itself), unless this machine was out of
//!    open files, processes or memory → `retryable` (that passes, and it is
//!    not the agent's fault).
//! 2. Cancelled by the operator or the engine → `retryable`, reason `cancelled`.
//! 3. The agent reported `failure` with an `error_class` → that class: the agent
//!    knows best, even if it then hung or exited oddly.
//! 4. The ending is clean (exit 0, HTTP 2xx): a `success` result or no result at
//!    all is success; a `failure` result without a class gets `default_class`.
//! 5. Otherwise the ending decides (sysexits, timeout, signal, HTTP status). This
//!    includes a `success` result followed by a non-zero exit, a timeout or an HTTP
//!    error: the agent claimed success but did not finish cleanly, and side effects
//!    after its claim are unknown, so it is classified like any failed ending.

use crate::agent::protocol::{AgentResult, ResultStatus};
use crate::config::model::ErrorClass;
use crate::core::records::Ending;

/// The judgement on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success {
        summary: Option<String>,
        processed: Option<i64>,
    },
    Failure {
        class: ErrorClass,
        /// Human-readable, e.g. "exit code 75 (EX_TEMPFAIL)".
        reason: String,
    },
}

/// Classifies an attempt. `default_class` is the schedule's `default_error_class`
/// (for unknown exit codes and signals); `timeout_class` is the class of an attempt
/// killed for running too long (retryable unless the budget says otherwise).
pub fn classify(
    result: Option<&AgentResult>,
    ending: &Ending,
    default_class: ErrorClass,
    timeout_class: ErrorClass,
) -> Outcome {
    match ending {
        Ending::SpawnFailed(message) => return failure(ErrorClass::NonRetryable, message.clone()),
        Ending::OutOfResources(message) => return failure(ErrorClass::Retryable, message.clone()),
        Ending::Cancelled => return failure(ErrorClass::Retryable, "cancelled".to_string()),
        _ => {}
    }
    if let Some(r) = result
        && r.status == ResultStatus::Failure
        && let Some(class) = r.error_class
    {
        return failure(class, agent_failure_reason(r));
    }
    match (ending_failure(ending, default_class, timeout_class), result) {
        (None, None) => Outcome::Success {
            summary: None,
            processed: None,
        },
        (None, Some(r)) if r.status == ResultStatus::Success => Outcome::Success {
            summary: r.summary.clone(),
            processed: r.processed,
        },
        (None, Some(r)) => failure(default_class, agent_failure_reason(r)),
        (Some((class, reason)), Some(r)) if r.status == ResultStatus::Success => {
            failure(class, format!("{reason} after the agent reported success"))
        }
        (Some((class, reason)), Some(r)) => failure(class, format!("{}; {reason}", agent_failure_reason(r))),
        (Some((class, reason)), None) => failure(class, reason),
    }
}

/// What the attempt reported beyond its last valid result, for [`honest`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reported {
    /// The last result line was not a valid result: `(error, line)`.
    pub broken_result: Option<(String, String)>,
    /// Side-effect steps this attempt journaled `started` and never `done` or `failed`.
    pub unconfirmed_steps: Vec<String>,
}

/// The honesty rules on top of [`classify`] (DESIGN.md "Containment"): an
/// agent's word is never stretched into success.
/// - A result line with an unknown `status` or `error_class` (or none) is a
///   protocol error: a failure of `protocol_class` (the schedule's
///   `protocol_error_class`, `non_retryable` by default) naming the line, even
///   on exit 0. Only a start failure or a cancel (which say why it ended) win.
/// - Exit 0 without any result while a side-effect step of this attempt is
///   `started` and never confirmed is not success: the step's outcome is
///   unknown. The failure is `retryable`, so the recovery rules treat the step
///   as uncertain: a verify attempt, or a human when nobody can check.
pub fn honest(
    outcome: Outcome,
    result: Option<&AgentResult>,
    ending: &Ending,
    reported: &Reported,
    protocol_class: ErrorClass,
) -> Outcome {
    if matches!(ending, Ending::SpawnFailed(_) | Ending::Cancelled) {
        return outcome;
    }
    if let Some((error, line)) = &reported.broken_result {
        return failure(
            protocol_class,
            format!("protocol error: {error} in result line {}", clip(line, 300)),
        );
    }
    if result.is_none()
        && matches!(outcome, Outcome::Success { .. })
        && !reported.unconfirmed_steps.is_empty()
    {
        return failure(
            ErrorClass::Retryable,
            format!(
                "ended without a result while side-effect step {} was started and not confirmed",
                reported.unconfirmed_steps.join(", ")
            ),
        );
    }
    outcome
}

/// At most `n` bytes of `s` (on a char boundary), with `…` when cut.
fn clip(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// True when the attempt was rate limited (HTTP 429), which also halves the
/// schedule's concurrency until a success (DESIGN.md "Retries").
pub fn is_rate_limited(ending: &Ending) -> bool {
    matches!(
        ending,
        Ending::Http {
            status: Some(429),
            ..
        }
    )
}

fn failure(class: ErrorClass, reason: String) -> Outcome {
    Outcome::Failure { class, reason }
}

fn agent_failure_reason(r: &AgentResult) -> String {
    match r.message.as_deref().or(r.summary.as_deref()) {
        Some(text) if !text.trim().is_empty() => format!("agent reported failure: {}", text.trim()),
        _ => "agent reported failure".to_string(),
    }
}

/// The class and reason the ending alone implies; `None` for a clean ending.
fn ending_failure(
    ending: &Ending,
    default_class: ErrorClass,
    timeout_class: ErrorClass,
) -> Option<(ErrorClass, String)> {
    match ending {
        Ending::Exited { code: Some(0), .. } => None,
        Ending::Exited { code: Some(code), .. } => Some(match code {
            75 => (ErrorClass::Retryable, "exit code 75 (EX_TEMPFAIL)".to_string()),
            65 => (ErrorClass::NonRetryable, "exit code 65 (EX_DATAERR)".to_string()),
            78 => (ErrorClass::NonRetryable, "exit code 78 (EX_CONFIG)".to_string()),
            77 => (ErrorClass::NeedsHuman, "exit code 77 (EX_NOPERM)".to_string()),
            other => (default_class, format!("exit code {other}")),
        }),
        Ending::Exited {
            code: None,
            signal: Some(signal),
        } => Some((
            default_class,
            format!("killed by signal {signal}{}", signal_name(*signal)),
        )),
        Ending::Exited {
            code: None,
            signal: None,
        } => Some((default_class, "exited without a status".to_string())),
        Ending::TimedOut => Some((timeout_class, "timed out (ran past its max runtime)".to_string())),
        Ending::LeaseExpired => Some((
            ErrorClass::Retryable,
            "stopped: its lease passed without a renewal (the scheduler froze or could not write)"
                .to_string(),
        )),
        Ending::Http {
            status: Some(status), ..
        } if (200..300).contains(status) => None,
        Ending::Http {
            status: Some(status),
            error,
        } => {
            let detail = error
                .as_deref()
                .filter(|e| *e != format!("HTTP {status}"))
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            let class = match status {
                429 => ErrorClass::Retryable,
                500..=599 => ErrorClass::Retryable,
                400..=499 => ErrorClass::NonRetryable,
                _ => default_class,
            };
            let label = if *status == 429 { " (rate limited)" } else { "" };
            Some((class, format!("HTTP {status}{label}{detail}")))
        }
        Ending::Http { status: None, error } => Some((
            ErrorClass::Retryable,
            format!(
                "connection failed: {}",
                error.as_deref().unwrap_or("unknown error")
            ),
        )),
        // Handled before the ending is consulted; kept total for safety.
        Ending::SpawnFailed(message) => Some((ErrorClass::NonRetryable, message.clone())),
        Ending::OutOfResources(message) => Some((ErrorClass::Retryable, message.clone())),
        Ending::Cancelled => Some((ErrorClass::Retryable, "cancelled".to_string())),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGQUIT => " (SIGQUIT)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGPIPE => " (SIGPIPE)",
        libc::SIGTERM => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ErrorClass::*;

    fn exit(code: i32) -> Ending {
        Ending::Exited {
            code: Some(code),
            signal: None,
        }
    }

    fn http(status: u16) -> Ending {
        Ending::Http {
            status: Some(status),
            error: (!(200..300).contains(&status)).then(|| format!("HTTP {status}")),
        }
    }

    fn result(status: ResultStatus, class: Option<ErrorClass>) -> AgentResult {
        AgentResult {
            status,
            error_class: class,
            summary: Some("did things".into()),
            processed: Some(7),
            message: None,
            verified: None,
            rate_limited: None,
        }
    }

    fn class_of(outcome: &Outcome) -> Option<ErrorClass> {
        match outcome {
            Outcome::Success { .. } => None,
            Outcome::Failure { class, .. } => Some(*class),
        }
    }

    fn reason_of(outcome: &Outcome) -> &str {
        match outcome {
            Outcome::Success { .. } => "",
            Outcome::Failure { reason, .. } => reason,
        }
    }

    /// Classifies with a non-default `default_class` so its use is visible.
    fn run(result: Option<&AgentResult>, ending: &Ending) -> Outcome {
        classify(result, ending, NeedsHuman, Retryable)
    }

    #[test]
    fn a_broken_result_is_a_protocol_error_never_success() {
        let broken = Reported {
            broken_result: Some((
                "invalid result: unknown variant `retriable`".into(),
                r#"{"event":"result","status":"failure","error_class":"retriable"}"#.into(),
            )),
            ..Reported::default()
        };
        let ok = run(None, &exit(0));
        let judged = honest(ok, None, &exit(0), &broken, NonRetryable);
        assert_eq!(class_of(&judged), Some(NonRetryable));
        assert!(
            reason_of(&judged).contains(r#""error_class":"retriable""#),
            "{judged:?}"
        );
        // The schedule may class it otherwise; a cancel still says why it ended.
        let judged = honest(run(None, &exit(0)), None, &exit(0), &broken, Retryable);
        assert_eq!(class_of(&judged), Some(Retryable));
        let cancelled = honest(
            run(None, &Ending::Cancelled),
            None,
            &Ending::Cancelled,
            &broken,
            NonRetryable,
        );
        assert_eq!(reason_of(&cancelled), "cancelled");
    }

    #[test]
    fn exit_zero_without_result_mid_side_effect_is_uncertain_not_success() {
        let open = Reported {
            unconfirmed_steps: vec!["deliver".into()],
            ..Reported::default()
        };
        let judged = honest(run(None, &exit(0)), None, &exit(0), &open, NonRetryable);
        assert_eq!(class_of(&judged), Some(Retryable));
        assert!(reason_of(&judged).contains("deliver"), "{judged:?}");
        // A success result is the agent's word: kept.
        let said = result(ResultStatus::Success, None);
        let kept = honest(
            run(Some(&said), &exit(0)),
            Some(&said),
            &exit(0),
            &open,
            NonRetryable,
        );
        assert!(matches!(kept, Outcome::Success { .. }));
        // Nothing open: exit 0 without a result stays success.
        let plain = honest(
            run(None, &exit(0)),
            None,
            &exit(0),
            &Reported::default(),
            NonRetryable,
        );
        assert!(matches!(plain, Outcome::Success { .. }));
    }

    #[test]
    fn exit_zero_without_result_is_success_without_summary() {
        assert_eq!(
            run(None, &exit(0)),
            Outcome::Success {
                summary: None,
                processed: None
            }
        );
    }

    #[test]
    fn success_result_with_exit_zero_keeps_summary() {
        assert_eq!(
            run(Some(&result(ResultStatus::Success, None)), &exit(0)),
            Outcome::Success {
                summary: Some("did things".into()),
                processed: Some(7)
            }
        );
    }

    #[test]
    fn sysexits_map_to_classes() {
        let cases = [
            (75, Retryable, "exit code 75 (EX_TEMPFAIL)"),
            (65, NonRetryable, "exit code 65 (EX_DATAERR)"),
            (78, NonRetryable, "exit code 78 (EX_CONFIG)"),
            (77, NeedsHuman, "exit code 77 (EX_NOPERM)"),
        ];
        for (code, class, reason) in cases {
            let outcome = classify(None, &exit(code), Retryable, Retryable);
            assert_eq!(outcome, failure(class, reason.into()), "exit {code}");
        }
    }

    #[test]
    fn other_codes_and_signals_use_the_default_class() {
        for default in [Retryable, NonRetryable, NeedsHuman] {
            for code in [1, 2, 64, 76, 127, 255] {
                let outcome = classify(None, &exit(code), default, Retryable);
                assert_eq!(outcome, failure(default, format!("exit code {code}")));
            }
            let killed = Ending::Exited {
                code: None,
                signal: Some(9),
            };
            assert_eq!(
                classify(None, &killed, default, Retryable),
                failure(default, "killed by signal 9 (SIGKILL)".into())
            );
            let unknown = Ending::Exited {
                code: None,
                signal: None,
            };
            assert_eq!(
                class_of(&classify(None, &unknown, default, Retryable)),
                Some(default)
            );
        }
    }

    #[test]
    fn timeout_uses_the_timeout_class() {
        assert_eq!(
            class_of(&classify(None, &Ending::TimedOut, NeedsHuman, Retryable)),
            Some(Retryable)
        );
        let configured = classify(None, &Ending::TimedOut, Retryable, NonRetryable);
        assert_eq!(class_of(&configured), Some(NonRetryable));
        assert!(reason_of(&configured).starts_with("timed out"));
    }

    #[test]
    fn spawn_failure_is_non_retryable_with_its_message() {
        let ending = Ending::SpawnFailed("agent command `nope` not found: No such file".into());
        assert_eq!(
            run(None, &ending),
            failure(
                NonRetryable,
                "agent command `nope` not found: No such file".into()
            )
        );
        // Even a stray result cannot turn it into something else.
        assert_eq!(
            class_of(&run(
                Some(&result(ResultStatus::Failure, Some(Retryable))),
                &ending
            )),
            Some(NonRetryable)
        );
    }

    #[test]
    fn cancelled_is_retryable() {
        assert_eq!(
            run(None, &Ending::Cancelled),
            failure(Retryable, "cancelled".into())
        );
        assert_eq!(
            run(Some(&result(ResultStatus::Success, None)), &Ending::Cancelled),
            failure(Retryable, "cancelled".into())
        );
    }

    #[test]
    fn the_agents_class_wins() {
        for class in [Retryable, NonRetryable, NeedsHuman] {
            let mut r = result(ResultStatus::Failure, Some(class));
            r.message = Some("quota exceeded".into());
            for ending in [
                exit(0),
                exit(1),
                exit(75),
                exit(77),
                Ending::TimedOut,
                http(200),
                http(500),
            ] {
                let outcome = classify(Some(&r), &ending, NonRetryable, NonRetryable);
                assert_eq!(
                    outcome,
                    failure(class, "agent reported failure: quota exceeded".into()),
                    "{ending:?}"
                );
            }
        }
    }

    #[test]
    fn failure_without_class_uses_the_exit_code_then_the_default() {
        let r = result(ResultStatus::Failure, None);
        assert_eq!(
            classify(Some(&r), &exit(75), NonRetryable, Retryable),
            failure(
                Retryable,
                "agent reported failure: did things; exit code 75 (EX_TEMPFAIL)".into()
            )
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(77), Retryable, Retryable)),
            Some(NeedsHuman)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(0), NonRetryable, Retryable)),
            Some(NonRetryable)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(0), Retryable, Retryable)),
            Some(Retryable)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(3), NeedsHuman, Retryable)),
            Some(NeedsHuman)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &http(200), NeedsHuman, Retryable)),
            Some(NeedsHuman)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &http(503), NeedsHuman, Retryable)),
            Some(Retryable)
        );
        let bare = AgentResult { summary: None, ..r };
        assert_eq!(
            reason_of(&classify(Some(&bare), &exit(0), Retryable, Retryable)),
            "agent reported failure"
        );
    }

    #[test]
    fn success_result_with_a_bad_ending_is_classified_by_the_ending() {
        let r = result(ResultStatus::Success, None);
        assert_eq!(
            classify(Some(&r), &exit(75), NeedsHuman, Retryable),
            failure(
                Retryable,
                "exit code 75 (EX_TEMPFAIL) after the agent reported success".into()
            )
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(1), NeedsHuman, Retryable)),
            Some(NeedsHuman)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &exit(65), Retryable, Retryable)),
            Some(NonRetryable)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &Ending::TimedOut, NeedsHuman, Retryable)),
            Some(Retryable)
        );
        assert_eq!(
            class_of(&classify(Some(&r), &http(400), Retryable, Retryable)),
            Some(NonRetryable)
        );
    }

    #[test]
    fn http_statuses() {
        let r = result(ResultStatus::Success, None);
        assert_eq!(
            run(Some(&r), &http(200)),
            Outcome::Success {
                summary: Some("did things".into()),
                processed: Some(7)
            }
        );
        assert_eq!(
            run(None, &http(204)),
            Outcome::Success {
                summary: None,
                processed: None
            }
        );
        assert_eq!(
            run(None, &http(429)),
            failure(Retryable, "HTTP 429 (rate limited)".into())
        );
        assert_eq!(run(None, &http(500)), failure(Retryable, "HTTP 500".into()));
        assert_eq!(run(None, &http(503)), failure(Retryable, "HTTP 503".into()));
        assert_eq!(run(None, &http(400)), failure(NonRetryable, "HTTP 400".into()));
        assert_eq!(run(None, &http(404)), failure(NonRetryable, "HTTP 404".into()));
        // Neither success nor an error class of its own: the schedule's default.
        assert_eq!(class_of(&run(None, &http(302))), Some(NeedsHuman));
        let with_detail = Ending::Http {
            status: Some(502),
            error: Some("bad gateway".into()),
        };
        assert_eq!(
            run(None, &with_detail),
            failure(Retryable, "HTTP 502: bad gateway".into())
        );
        let refused = Ending::Http {
            status: None,
            error: Some("connection refused".into()),
        };
        assert_eq!(
            classify(None, &refused, NonRetryable, NonRetryable),
            failure(Retryable, "connection failed: connection refused".into())
        );
    }

    #[test]
    fn rate_limits_are_recognised() {
        assert!(is_rate_limited(&http(429)));
        assert!(!is_rate_limited(&http(500)));
        assert!(!is_rate_limited(&exit(75)));
    }
}
