//! The story of one run, built event by event: one clause per thing that
//! mattered, in order — window opened, gates that waited (how often, the last
//! reason, when they passed) and which gates let it through, switches that
//! held it (and who set them), claims, attempts, retries, the human gate, the
//! dead-letter queue, the window closing, catch-up. Repeated checks are
//! counted, never listed.

use super::describe::{Style, describe};
use crate::core::decision::Verdict;
use crate::core::event::{Event, Stopped};
use crate::core::layers::gates::GateVerdict;
use crate::core::records::{RunReason, StepStatus};
use crate::store::types::Run;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use std::collections::BTreeMap;

/// A window opened later than this after its due instant was opened late.
pub(super) const LATE: TimeDelta = TimeDelta::minutes(2);

/// One clause of an explanation: when (if it is about one instant), what
/// kind of thing happened, and the clause as the text form prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub at: Option<DateTime<Utc>>,
    /// `window_opened`, `gate_waited`, `gates_passed`, `held`, `claimed`,
    /// `failed`, `missed`, `liveness`, … (an event kind where one told it).
    pub what: String,
    pub detail: String,
}

/// A gate's checks within one stretch of waiting.
struct GateTally {
    name: String,
    waits: usize,
    last_reason: String,
    last_wait: Option<DateTime<Utc>>,
    /// The first pass after waiting.
    passed: Option<DateTime<Utc>>,
    failed: Option<(DateTime<Utc>, String, String)>,
}

/// A gate's checks since the last claim: what let the next claim through.
struct GateSinceClaim {
    name: String,
    waits: usize,
    /// The latest check's result and time.
    last: (GateVerdict, DateTime<Utc>),
}

/// The clauses of an explanation, and what reading the next event needs.
pub(super) struct Story {
    tz: Tz,
    /// Times on this local date are shown as HH:MM.
    day: NaiveDate,
    pub(super) steps: Vec<Step>,
    /// Gates checked since the last decisive event, in first-checked order.
    gates: Vec<GateTally>,
    /// Gates checked since the last claim, in first-checked order.
    since_claim: Vec<GateSinceClaim>,
    /// The switch holding the run now, if any.
    hold: Option<String>,
    /// Latest status of each step, per attempt.
    journal: BTreeMap<u32, Vec<(String, StepStatus, bool)>>,
    /// The last "gates passed" clause: a retry re-gated alike is not retold.
    gates_passed: Option<String>,
    /// The last claim's lateness, ms: its start is told when it came later.
    claimed_late_ms: Option<i64>,
}

impl Story {
    /// A story told in `tz`, about the window that starts at `day`.
    pub(super) fn new(tz: Tz, day: DateTime<Utc>) -> Self {
        Self {
            tz,
            day: day.with_timezone(&tz).date_naive(),
            steps: vec![],
            gates: vec![],
            since_claim: vec![],
            hold: None,
            journal: BTreeMap::new(),
            gates_passed: None,
            claimed_late_ms: None,
        }
    }

    pub(super) fn push(&mut self, at: Option<DateTime<Utc>>, what: &str, detail: String) {
        if self.steps.last().map(|s| &s.detail) != Some(&detail) {
            self.steps.push(Step {
                at,
                what: what.to_string(),
                detail,
            });
        }
    }

    fn fmt(&self, t: DateTime<Utc>, time: &str) -> String {
        let local = t.with_timezone(&self.tz);
        if local.date_naive() == self.day {
            local.format(time).to_string()
        } else {
            local.format(&format!("%Y-%m-%d {time}")).to_string()
        }
    }

    /// `09:31`, or `09:31:02` when not on the minute, with the date when it
    /// is not the window's day.
    pub(super) fn hm(&self, t: DateTime<Utc>) -> String {
        if t.timestamp() % 60 == 0 {
            self.fmt(t, "%H:%M")
        } else {
            self.fmt(t, "%H:%M:%S")
        }
    }

    /// `09:31:02`, with the date when it is not the window's day.
    pub(super) fn hms(&self, t: DateTime<Utc>) -> String {
        self.fmt(t, "%H:%M:%S")
    }

    /// Always with the date.
    pub(super) fn full(&self, t: DateTime<Utc>) -> String {
        t.with_timezone(&self.tz).format("%Y-%m-%d %H:%M").to_string()
    }

    fn gate(&mut self, name: &str) -> &mut GateTally {
        let i = match self.gates.iter().position(|g| g.name == name) {
            Some(i) => i,
            None => {
                self.gates.push(GateTally {
                    name: name.to_string(),
                    waits: 0,
                    last_reason: String::new(),
                    last_wait: None,
                    passed: None,
                    failed: None,
                });
                self.gates.len() - 1
            }
        };
        &mut self.gates[i]
    }

    /// Writes out the gate tallies: how often each waited, why, when it passed.
    pub(super) fn flush(&mut self) {
        let gates = std::mem::take(&mut self.gates);
        for g in gates {
            if g.waits > 0 {
                self.push(
                    g.last_wait,
                    "gate_waited",
                    format!(
                        "gate {} waited {} time{} ({})",
                        g.name,
                        g.waits,
                        plural(g.waits),
                        g.last_reason
                    ),
                );
                if let Some(p) = g.passed {
                    self.push(Some(p), "gate_passed", format!("passed {}", self.hm(p)));
                }
            }
            if let Some((at, reason, on_fail)) = g.failed {
                self.push(
                    Some(at),
                    "gate_failed",
                    format!(
                        "gate {} failed {}: {reason} (on_fail = {on_fail})",
                        g.name,
                        self.hm(at)
                    ),
                );
            }
        }
    }

    /// Records a gate check for the next claim's "gates passed".
    fn checked(&mut self, name: &str, result: GateVerdict, at: DateTime<Utc>) {
        let waits = usize::from(result == GateVerdict::Wait);
        match self.since_claim.iter_mut().find(|g| g.name == name) {
            Some(g) => {
                g.waits += waits;
                g.last = (result, at);
            }
            None => self.since_claim.push(GateSinceClaim {
                name: name.to_string(),
                waits,
                last: (result, at),
            }),
        }
    }

    /// The gates whose latest check before a claim passed, with the waits
    /// since the previous claim: `upstream_ready (after 3 waits), token_valid`.
    fn passed_gates(&mut self) -> Option<(DateTime<Utc>, String)> {
        let checked = std::mem::take(&mut self.since_claim);
        let passed: Vec<&GateSinceClaim> = checked.iter().filter(|g| g.last.0 == GateVerdict::Pass).collect();
        let at = passed.iter().map(|g| g.last.1).max()?;
        let names: Vec<String> = passed
            .iter()
            .map(|g| match g.waits {
                0 => g.name.clone(),
                n => format!("{} (after {n} wait{})", g.name, plural(n)),
            })
            .collect();
        Some((at, format!("gates passed: {}", names.join(", "))))
    }

    fn steps_note(&self, attempt: u32) -> String {
        let Some(steps) = self.journal.get(&attempt) else {
            return String::new();
        };
        let list: Vec<String> = steps
            .iter()
            .map(|(name, status, side_effect)| {
                let unconfirmed = *side_effect && *status == StepStatus::Started;
                format!(
                    "{name} {}{}",
                    status.as_str(),
                    if unconfirmed {
                        " (side effect, unconfirmed)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        format!(" (steps: {})", list.join(", "))
    }

    /// Reads one event of the run (or of its context) into the story.
    pub(super) fn event(&mut self, at: DateTime<Utc>, e: &Event, run: &Run) {
        let hm = self.hm(at);
        match e {
            Event::WindowOpened {
                window,
                reason,
                opener,
            } => {
                let due = window.due;
                let by = opener
                    .by
                    .as_deref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default();
                let mut c = if *reason == RunReason::Catchup {
                    format!(
                        "window due {} opened {hm} as a catch-up run (backfill pool)",
                        self.hm(due)
                    )
                } else if *reason == RunReason::Manual && opener.backfill == Some(true) {
                    format!(
                        "window due {} back-filled {hm}{by} (agentcron backfill, {} pool)",
                        self.hm(due),
                        window.pool.as_str()
                    )
                } else if *reason == RunReason::Manual && opener.event.is_none() {
                    if at - due > LATE {
                        format!(
                            "window due {} triggered by hand {hm}{by} (agentcron trigger --window)",
                            self.hm(due)
                        )
                    } else {
                        format!(
                            "window opened {hm} by a manual trigger{by} (closes {})",
                            self.hm(run.window_end)
                        )
                    }
                } else if at - due > LATE {
                    format!(
                        "window due {} opened late, {hm} (closes {})",
                        self.hm(due),
                        self.hm(run.window_end)
                    )
                } else {
                    format!(
                        "window opened {} (closes {})",
                        self.hm(due),
                        self.hm(run.window_end)
                    )
                };
                if window.note.as_deref() == Some("dst_shifted") {
                    c.push_str(" — its time fell in a DST gap and was shifted to the end of it");
                }
                if let Some(ev) = &opener.event {
                    c.push_str(&format!(" for event {ev}"));
                }
                self.push(Some(at), "window_opened", c);
            }
            // Created already decided: calendar, coalesced, not caught up, too old.
            Event::Skipped {
                reason,
                window: Some(w),
                ..
            }
            | Event::Expired {
                reason,
                window: Some(w),
                ..
            } => {
                let c = format!("window due {} {}: {reason}", self.hm(w.due), e.kind());
                self.push(Some(at), e.kind(), c);
            }
            Event::Gate(g) => {
                let t = self.gate(&g.name);
                match g.result {
                    GateVerdict::Wait => {
                        t.waits += 1;
                        t.last_reason = g.reason.clone();
                        t.last_wait = Some(at);
                        t.passed = None;
                    }
                    GateVerdict::Pass if t.waits > 0 && t.passed.is_none() => t.passed = Some(at),
                    GateVerdict::Fail => t.failed = Some((at, g.reason.clone(), g.on_fail.clone())),
                    GateVerdict::Pass => {}
                }
                self.checked(&g.name, g.result, at);
            }
            Event::Decision(d) => {
                // Released only when the switches were checked and all were clear;
                // a decision by the time layer alone checks none.
                let clear = !d.switches.is_empty() && d.switches.iter().all(|c| !c.held);
                if clear && let Some(h) = self.hold.take() {
                    self.flush();
                    self.push(
                        Some(at),
                        "released",
                        format!("{} released it {hm}", switch_label(&h)),
                    );
                }
            }
            Event::SwitchHeld {
                switch,
                reason,
                verdict,
            } => {
                // A skipping switch is told by the `skipped` that follows.
                if *verdict != Verdict::Skip && self.hold.as_deref() != Some(switch.as_str()) {
                    self.flush();
                    self.push(
                        Some(at),
                        "held",
                        format!("held by {} from {hm}: {reason}", switch_label(switch.as_str())),
                    );
                    self.hold = Some(switch.as_str().to_string());
                }
            }
            Event::Claimed {
                owner,
                attempt,
                lateness_ms,
                ..
            } => {
                let passed = self.passed_gates();
                self.flush();
                if let Some((when, text)) = passed
                    && self.gates_passed.as_ref() != Some(&text)
                {
                    self.gates_passed = Some(text.clone());
                    self.push(Some(when), "gates_passed", text);
                }
                self.hold = None;
                self.claimed_late_ms = Some(*lateness_ms);
                let hms = self.hms(at);
                let c = if *attempt <= 1 {
                    let when = if *lateness_ms < 1000 {
                        "on time".to_string()
                    } else {
                        format!("{} after due", human(TimeDelta::milliseconds(*lateness_ms)))
                    };
                    format!("claimed {hms} by {owner} ({when})")
                } else {
                    format!("attempt {attempt} claimed {hms} by {owner}")
                };
                self.push(Some(at), "claimed", c);
            }
            // The agent ran a second or more after its claim (a slow spawn, a
            // loaded machine): when it really started is part of the answer.
            Event::Started {
                attempt,
                verify_step: None,
                lateness_ms: Some(late),
                ..
            } if self.claimed_late_ms.is_some_and(|c| late - c >= 1000) => {
                let hms = self.hms(at);
                let after = human(TimeDelta::milliseconds(late - self.claimed_late_ms.unwrap_or(0)));
                let what = if *attempt <= 1 {
                    format!("agent started {hms}, {after} after its claim")
                } else {
                    format!("attempt {attempt}'s agent started {hms}, {after} after its claim")
                };
                self.push(Some(at), "started", what);
            }
            Event::Started {
                attempt,
                verify_step: Some(step),
                ..
            } => self.push(
                Some(at),
                "verify",
                format!("attempt {attempt} started in verify mode: checking whether step {step} landed"),
            ),
            Event::Step {
                name,
                status,
                attempt,
                side_effect,
                ..
            } => {
                let steps = self.journal.entry(*attempt).or_default();
                match steps.iter_mut().find(|(s, _, _)| s == name) {
                    Some(slot) => slot.1 = *status,
                    None => steps.push((name.clone(), *status, *side_effect)),
                }
            }
            Event::Succeeded {
                attempt,
                summary,
                processed,
            } => {
                let mut c = format!("attempt {attempt} succeeded {hm}");
                if let Some(s) = summary {
                    c.push_str(&format!(" — \"{s}\""));
                }
                if let Some(p) = processed {
                    c.push_str(&format!(" ({p} processed)"));
                }
                self.push(Some(at), "succeeded", c);
            }
            Event::Failed {
                attempt,
                class,
                reason,
                stopped,
                ..
            } => {
                self.flush();
                let c = match (attempt, stopped) {
                    // The reason says when, in the schedule's zone.
                    (Some(n), Some(Stopped::OperatorQuit)) => format!(
                        "attempt {n} {reason} (not a failure: it retries at once){}",
                        self.steps_note(*n)
                    ),
                    // The reason says when; what follows says if and when it retries.
                    (Some(n), Some(Stopped::Shutdown)) => format!(
                        "attempt {n} {reason} (the shutdown grace period ran out){}",
                        self.steps_note(*n)
                    ),
                    (Some(n), Some(Stopped::KillSwitch)) => format!(
                        "attempt {n} stopped {hm} by the kill switch (--cancel-running): {reason}{}",
                        self.steps_note(*n)
                    ),
                    (Some(n), _) => format!(
                        "attempt {n} failed {hm} ({}): {reason}{}",
                        class.as_str(),
                        self.steps_note(*n)
                    ),
                    (None, _) => format!("failed {hm}: {reason}"),
                };
                self.push(Some(at), "failed", c);
            }
            Event::RetryScheduled {
                not_before,
                after,
                next_attempt,
                max_attempts,
                ..
            } => {
                if after.as_deref() == Some("verify") {
                    self.push(Some(at), "verified", "verified; a normal attempt follows".into());
                } else {
                    let of = max_attempts.map(|m| format!(" of {m}")).unwrap_or_default();
                    let c = format!(
                        "retry scheduled: attempt {next_attempt}{of} not before {}",
                        self.hm(*not_before)
                    );
                    self.push(Some(at), "retry_scheduled", c);
                }
            }
            Event::ParkedForHuman { reason } => {
                self.flush();
                self.push(
                    Some(at),
                    "parked_for_human",
                    format!("parked for a human {hm}: {reason}"),
                );
            }
            Event::Approved { by, reason, .. } | Event::Rejected { by, reason, .. } => self.push(
                Some(at),
                e.kind(),
                format!("{} {hm} by {by}: \"{reason}\"", e.kind()),
            ),
            Event::DeadLettered {
                attempts,
                max_attempts,
                ..
            } => self.push(
                Some(at),
                "dead_lettered",
                format!("dead-lettered {hm} after {attempts} of {max_attempts} attempts"),
            ),
            Event::Lost { attempt, reason, .. } => {
                self.push(Some(at), "lost", format!("attempt {attempt} lost {hm}: {reason}"))
            }
            Event::StaleResult { .. } => self.push(
                Some(at),
                "stale_result",
                format!("a late result of an attempt that was no longer current was ignored {hm}"),
            ),
            Event::Missed { reason, .. } => {
                self.flush();
                self.hold = None;
                self.push(Some(at), "missed", format!("missed {hm}: {reason}"));
            }
            Event::Skipped { reason, .. } | Event::Expired { reason, .. } => {
                self.flush();
                self.hold = None;
                let c = format!("{} {hm}: {reason}", e.kind());
                self.push(Some(at), e.kind(), c);
            }
            Event::CatchupQueued { expires, .. } => {
                let c = format!(
                    "queued for catch-up in the backfill pool until {}",
                    self.hm(*expires)
                );
                self.push(Some(at), "catchup_queued", c);
            }
            Event::ConcurrencyHalved { effective, .. } => self.push(
                Some(at),
                "concurrency_halved",
                format!("schedule concurrency halved to {effective} after a rate limit"),
            ),
            Event::Alert(a) => self.push(Some(at), "alert", format!("owner alerted ({})", a.what)),
            Event::SwitchChanged {
                name,
                on,
                actor,
                reason,
                ..
            } => {
                let what = match (name.as_str(), on) {
                    ("kill", true) => "kill switch turned on".to_string(),
                    ("kill", false) => "kill switch turned off".to_string(),
                    ("paused", true) => "schedule paused".to_string(),
                    ("paused", false) => "schedule resumed".to_string(),
                    (n, on) => format!("switch {n} turned {}", if *on { "on" } else { "off" }),
                };
                self.push(
                    Some(at),
                    "switch_changed",
                    format!("{what} {hm} by {actor}: \"{reason}\""),
                );
            }
            Event::CircuitOpened {
                consecutive_failures,
                probe_after,
                ..
            } => {
                let mut c = format!("circuit opened {hm}");
                if let Some(n) = consecutive_failures {
                    c.push_str(&format!(" after {n} consecutive failed runs"));
                }
                if let Some(p) = probe_after {
                    c.push_str(&format!(" (probe after {})", self.hm(*p)));
                }
                self.push(Some(at), "circuit_opened", c);
            }
            Event::CircuitHalfOpen { reason } => {
                self.push(Some(at), e.kind(), format!("circuit half-open {hm}: {reason}"))
            }
            Event::CircuitClosed { reason, .. } => {
                self.push(Some(at), e.kind(), format!("circuit closed {hm}: {reason}"))
            }
            // A plan of on-time and calendar windows only is no catch-up.
            Event::CatchupPlanned { summary, .. } => {
                let late = summary.catch_up + summary.coalesced + summary.not_caught_up + summary.expired;
                if late > 0
                    && let Some(c) = catchup_clause(self, at, e)
                {
                    self.push(Some(at), "catchup_planned", c);
                }
            }
            Event::Started { .. }
            | Event::Heartbeat { .. }
            | Event::Tick { .. }
            | Event::SchedulerStarted { .. }
            | Event::AgentOutput { .. } => {}
            other => {
                let c = format!("{} {hm}: {}", other.kind(), describe(other, Style::Table));
                self.push(Some(at), other.kind(), c);
            }
        }
    }
}

/// What a `catchup_planned` decided: how many windows of each fate.
pub(super) fn catchup_clause(story: &Story, at: DateTime<Utc>, e: &Event) -> Option<String> {
    let Event::CatchupPlanned {
        since,
        policy,
        windows,
        summary,
        ..
    } = e
    else {
        return None;
    };
    let parts: Vec<String> = [
        (summary.on_time, "on time"),
        (summary.catch_up, "caught up"),
        (summary.coalesced, "coalesced"),
        (summary.not_caught_up, "skipped (catchup = \"none\")"),
        (summary.expired, "expired"),
        (summary.calendar, "skipped by calendar"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, label)| format!("{n} {label}"))
    .collect();
    let since = since
        .map(|t| format!(" since {}", story.full(t)))
        .unwrap_or_default();
    Some(format!(
        "catch-up planned {} for {windows} window{} due{since} (catchup = \"{policy}\"): {}",
        story.hm(at),
        plural(*windows),
        parts.join(", ")
    ))
}

fn switch_label(name: &str) -> String {
    match name {
        "kill" => "the kill switch".into(),
        "paused" => "the schedule pause".into(),
        "circuit" => "the circuit breaker".into(),
        "maintenance" => "a maintenance window".into(),
        "budget" => "the budget".into(),
        "on_time" => "the on-time-first rule".into(),
        "overlap" => "the overlap rule".into(),
        "quota" => "a concurrency quota".into(),
        other => format!("switch {other}"),
    }
}

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `1m31s`, `15m`, `3h28m`: whole seconds, as durations are written in config.
pub(super) fn human(d: TimeDelta) -> String {
    let secs = u64::try_from(d.num_seconds()).unwrap_or(0);
    crate::time::duration::format_duration(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_config() {
        assert_eq!(human(TimeDelta::milliseconds(91_500)), "1m31s");
        assert_eq!(human(TimeDelta::minutes(15)), "15m");
        assert_eq!(human(TimeDelta::seconds(-5)), "0s");
    }
}
