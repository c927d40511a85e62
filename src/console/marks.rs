//! Glyph + word + token for everything the console marks by state. Never
//! colour alone: a mark is readable on a monochrome terminal, and the colour
//! only repeats what the glyph and the word already say. All glyphs are one
//! cell wide (no emoji), so grids line up in every terminal.

use super::theme::Token;
use crate::store::{AttemptStatus, CircuitState, RunState, StepStatus};

/// How one thing is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub glyph: &'static str,
    pub word: &'static str,
    pub token: Token,
}

const fn mark(glyph: &'static str, word: &'static str, token: Token) -> Mark {
    Mark { glyph, word, token }
}

pub fn run_state(s: RunState) -> Mark {
    match s {
        RunState::Pending => mark("○", "pending", Token::Gated),
        RunState::Running => mark("►", "running", Token::Accent),
        RunState::RetryWait => mark("↻", "retry_wait", Token::Warn),
        RunState::NeedsHuman => mark("?", "needs_human", Token::Warn),
        RunState::Succeeded => mark("✓", "succeeded", Token::Ok),
        RunState::Failed => mark("✗", "failed", Token::Error),
        RunState::Dead => mark("†", "dead", Token::Error),
        RunState::Skipped => mark("»", "skipped", Token::Muted),
        RunState::Missed => mark("◌", "missed", Token::Warn),
        RunState::Expired => mark("×", "expired", Token::Muted),
    }
}

pub fn circuit(c: CircuitState) -> Mark {
    match c {
        CircuitState::Closed => mark("✓", "closed", Token::Ok),
        CircuitState::HalfOpen => mark("◐", "half-open", Token::Warn),
        CircuitState::Open => mark("✗", "open", Token::Error),
    }
}

/// The global kill switch: on means nothing new is claimed.
pub fn kill(on: bool) -> Mark {
    if on {
        mark("■", "KILL SWITCH ON", Token::Error)
    } else {
        mark("○", "kill switch off", Token::Ok)
    }
}

pub fn paused(p: bool) -> Mark {
    if p {
        mark("‖", "paused", Token::Paused)
    } else {
        mark("·", "active", Token::Muted)
    }
}

/// A switch of any kind that holds runs (maintenance, quota, …).
pub fn switch_on(on: bool) -> Mark {
    if on {
        mark("‖", "on", Token::Paused)
    } else {
        mark("·", "off", Token::Muted)
    }
}

/// A gate's answer as recorded in a `gate` event (`pass`, `wait`, `fail`).
pub fn gate_result(result: &str) -> Mark {
    match result {
        "pass" => mark("✓", "pass", Token::Ok),
        "wait" => mark("◷", "wait", Token::Gated),
        "fail" => mark("✗", "fail", Token::Error),
        _ => mark("·", "unknown", Token::Muted),
    }
}

/// A decision's verdict (`run`/`claim`, `wait`, `skip`, `fail`, `human`, `hold`).
pub fn verdict(v: &str) -> Mark {
    match v {
        "run" | "claim" | "claimed" | "go" | "pass" => mark("►", "run", Token::Ok),
        "wait" => mark("◷", "wait", Token::Gated),
        "hold" | "held" => mark("‖", "held", Token::Paused),
        "skip" | "skipped" => mark("»", "skip", Token::Muted),
        "fail" | "failed" => mark("✗", "fail", Token::Error),
        "human" | "needs_human" => mark("?", "human", Token::Warn),
        "missed" => mark("◌", "missed", Token::Warn),
        _ => mark("·", "unknown", Token::Muted),
    }
}

/// A rehearsal expectation: held, broken, or not decided yet.
pub fn expectation(passed: Option<bool>) -> Mark {
    match passed {
        Some(true) => mark("✓", "pass", Token::Ok),
        Some(false) => mark("✗", "FAIL", Token::Error),
        None => mark("…", "pending", Token::Muted),
    }
}

pub fn attempt_status(s: AttemptStatus) -> Mark {
    match s {
        AttemptStatus::Running => mark("►", "running", Token::Accent),
        AttemptStatus::Succeeded => mark("✓", "succeeded", Token::Ok),
        AttemptStatus::Failed => mark("✗", "failed", Token::Error),
        AttemptStatus::Lost => mark("◌", "lost", Token::Warn),
        AttemptStatus::TimedOut => mark("◷", "timed_out", Token::Warn),
        AttemptStatus::Cancelled => mark("×", "cancelled", Token::Muted),
    }
}

pub fn step_status(s: StepStatus) -> Mark {
    match s {
        StepStatus::Started => mark("…", "started", Token::Warn),
        StepStatus::Done => mark("✓", "done", Token::Ok),
        StepStatus::Failed => mark("✗", "failed", Token::Error),
    }
}

/// The mark of an event kind in the trace.
pub fn event_kind(kind: &str) -> Mark {
    match kind {
        "window_opened" => mark("◇", "window_opened", Token::Muted),
        "gate" => mark("◷", "gate", Token::Gated),
        "decision" => mark("◆", "decision", Token::Accent),
        "switch_held" => mark("‖", "switch_held", Token::Paused),
        "skipped" => mark("»", "skipped", Token::Muted),
        "claimed" => mark("►", "claimed", Token::Accent),
        "started" => mark("►", "started", Token::Accent),
        "heartbeat" => mark("·", "heartbeat", Token::Muted),
        "step" => mark("▸", "step", Token::Fg),
        "succeeded" => mark("✓", "succeeded", Token::Ok),
        "failed" => mark("✗", "failed", Token::Error),
        "retry_scheduled" => mark("↻", "retry_scheduled", Token::Warn),
        "parked_for_human" => mark("?", "parked_for_human", Token::Warn),
        "approved" => mark("✓", "approved", Token::Ok),
        "rejected" => mark("✗", "rejected", Token::Error),
        "requeued" => mark("↻", "requeued", Token::Warn),
        "dead_lettered" => mark("†", "dead_lettered", Token::Error),
        "missed" => mark("◌", "missed", Token::Warn),
        "expired" => mark("×", "expired", Token::Muted),
        "circuit_opened" => mark("✗", "circuit_opened", Token::Error),
        "circuit_closed" => mark("✓", "circuit_closed", Token::Ok),
        "switch_changed" => mark("‖", "switch_changed", Token::Paused),
        _ => mark("·", "event", Token::Fg),
    }
}
