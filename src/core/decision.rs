//! The decision pipeline's value: one evaluation of the three layers for one run.
//!
//! Cheap local layers first (time, switches), gates that touch the outside world
//! last, so a killed or finished schedule never hammers an upstream. The result
//! is a plain [`Decision`]: stored as events, rendered by the console, asserted
//! by tests and rehearsals.

use super::layers::gates::{GateResult, GateVerdict};
use serde::{Deserialize, Serialize};

/// What the decision says to do with the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// All three layers pass: claim it.
    Claim,
    /// Not yet: check again at the next tick inside the window.
    Wait,
    /// Do not run this window (reason says why).
    Skip,
    /// A gate failed with `on_fail = "fail"`.
    Fail,
    /// A gate failed with `on_fail = "human"`.
    Human,
    /// The window closed before the gates passed.
    Missed,
    /// A catch-up run older than the catch-up window.
    Expired,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Claim => "claim",
            Verdict::Wait => "wait",
            Verdict::Skip => "skip",
            Verdict::Fail => "fail",
            Verdict::Human => "human",
            Verdict::Missed => "missed",
            Verdict::Expired => "expired",
        }
    }
}

/// One switch (layer 3) that was checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchCheck {
    /// `kill`, `paused`, `circuit`, `maintenance`, `budget`, `overlap`, `quota`.
    pub name: String,
    pub held: bool,
    pub reason: String,
}

/// What a holding switch does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Wait and check again (the window may close meanwhile).
    Wait,
    /// Skip the window now.
    Skip,
}

/// The evaluation of the three layers for one run at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Layer 1: the time verdict in words ("window 09:00–10:00 open").
    pub time: String,
    pub switches: Vec<SwitchCheck>,
    pub gates: Vec<GateResult>,
    pub verdict: Verdict,
    /// The one-line why: the reason of the layer that decided.
    pub reason: String,
}

impl Decision {
    /// A decision made by the time layer alone.
    pub fn by_time(time: String, verdict: Verdict, reason: String) -> Self {
        Self {
            time,
            switches: vec![],
            gates: vec![],
            verdict,
            reason,
        }
    }

    /// Folds switch checks: the first holding switch decides; `None` if all clear.
    pub fn with_switches(time: &str, checks: &[(SwitchCheck, Hold)]) -> Option<Self> {
        let (c, hold) = checks.iter().find(|(c, _)| c.held)?;
        Some(Self {
            time: time.to_string(),
            switches: checks.iter().map(|(c, _)| c.clone()).collect(),
            gates: vec![],
            verdict: match hold {
                Hold::Wait => Verdict::Wait,
                Hold::Skip => Verdict::Skip,
            },
            reason: format!("{}: {}", c.name, c.reason),
        })
    }

    /// Folds gate results in declared order: the first non-pass decides.
    pub fn from_gates(time: String, switches: Vec<SwitchCheck>, gates: Vec<GateResult>) -> Self {
        let mut verdict = Verdict::Claim;
        let mut reason = if gates.is_empty() {
            "no gates; all switches clear".to_string()
        } else {
            "all gates passed".to_string()
        };
        if let Some(g) = gates.iter().find(|g| g.verdict != GateVerdict::Pass) {
            if g.verdict == GateVerdict::Wait {
                verdict = Verdict::Wait;
                reason = format!("gate {} waits: {}", g.name, g.reason);
            } else {
                verdict = match g.on_fail.as_str() {
                    "skip" => Verdict::Skip,
                    "human" => Verdict::Human,
                    _ => Verdict::Fail,
                };
                reason = format!("gate {} failed: {}", g.name, g.reason);
            }
        }
        Self {
            time,
            switches,
            gates,
            verdict,
            reason,
        }
    }

    /// The `decision` event detail.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, verdict: GateVerdict, on_fail: &str) -> GateResult {
        GateResult {
            name: name.into(),
            kind: "command".into(),
            verdict,
            reason: format!("{name} says {verdict}"),
            elapsed_ms: 1,
            on_fail: on_fail.into(),
        }
    }

    #[test]
    fn first_non_pass_gate_decides() {
        let d = Decision::from_gates(
            "open".into(),
            vec![],
            vec![
                gate("a", GateVerdict::Pass, "fail"),
                gate("b", GateVerdict::Wait, "fail"),
                gate("c", GateVerdict::Fail, "skip"),
            ],
        );
        assert_eq!(d.verdict, Verdict::Wait);
        assert!(d.reason.contains("gate b waits"));
        for (on_fail, v) in [
            ("skip", Verdict::Skip),
            ("fail", Verdict::Fail),
            ("human", Verdict::Human),
        ] {
            let d = Decision::from_gates("open".into(), vec![], vec![gate("x", GateVerdict::Fail, on_fail)]);
            assert_eq!(d.verdict, v);
        }
        let d = Decision::from_gates("open".into(), vec![], vec![gate("a", GateVerdict::Pass, "fail")]);
        assert_eq!(d.verdict, Verdict::Claim);
    }

    #[test]
    fn first_holding_switch_decides() {
        let sw = |n: &str, held| SwitchCheck {
            name: n.into(),
            held,
            reason: format!("{n} reason"),
        };
        assert!(Decision::with_switches("t", &[(sw("kill", false), Hold::Wait)]).is_none());
        let d = Decision::with_switches(
            "t",
            &[
                (sw("kill", false), Hold::Wait),
                (sw("circuit", true), Hold::Skip),
                (sw("quota", true), Hold::Wait),
            ],
        )
        .unwrap();
        assert_eq!(d.verdict, Verdict::Skip);
        assert_eq!(d.reason, "circuit: circuit reason");
        assert_eq!(d.switches.len(), 3);
    }
}
