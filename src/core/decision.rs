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

/// The switches of layer 3, in the order they are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwitchName {
    Kill,
    Paused,
    Circuit,
    Maintenance,
    Budget,
    /// On-time first: a catch-up run waits while an on-time window of its
    /// schedule is due.
    OnTime,
    Overlap,
    Quota,
}

impl SwitchName {
    /// Every switch, in the order they are checked.
    pub const ALL: [SwitchName; 8] = [
        SwitchName::Kill,
        SwitchName::Paused,
        SwitchName::Circuit,
        SwitchName::Maintenance,
        SwitchName::Budget,
        SwitchName::OnTime,
        SwitchName::Overlap,
        SwitchName::Quota,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SwitchName::Kill => "kill",
            SwitchName::Paused => "paused",
            SwitchName::Circuit => "circuit",
            SwitchName::Maintenance => "maintenance",
            SwitchName::Budget => "budget",
            SwitchName::OnTime => "on_time",
            SwitchName::Overlap => "overlap",
            SwitchName::Quota => "quota",
        }
    }
}

impl std::fmt::Display for SwitchName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What holds a waiting run, as a machine reads it: stored in `runs.hold`
/// beside the prose `state_reason`, so a wake-up never parses a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldKind {
    Kill,
    Paused,
    Circuit,
    Maintenance,
    Budget,
    OnTime,
    Overlap,
    Quota,
    /// A readiness gate answered `wait`.
    Gate,
}

impl HoldKind {
    pub const ALL: [HoldKind; 9] = [
        HoldKind::Kill,
        HoldKind::Paused,
        HoldKind::Circuit,
        HoldKind::Maintenance,
        HoldKind::Budget,
        HoldKind::OnTime,
        HoldKind::Overlap,
        HoldKind::Quota,
        HoldKind::Gate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HoldKind::Gate => "gate",
            other => other.switch().map_or("gate", SwitchName::as_str),
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }

    /// The switch behind the hold, if a switch holds it.
    pub fn switch(self) -> Option<SwitchName> {
        Some(match self {
            HoldKind::Kill => SwitchName::Kill,
            HoldKind::Paused => SwitchName::Paused,
            HoldKind::Circuit => SwitchName::Circuit,
            HoldKind::Maintenance => SwitchName::Maintenance,
            HoldKind::Budget => SwitchName::Budget,
            HoldKind::OnTime => SwitchName::OnTime,
            HoldKind::Overlap => SwitchName::Overlap,
            HoldKind::Quota => SwitchName::Quota,
            HoldKind::Gate => return None,
        })
    }

    /// Holds that end when a running attempt ends and frees a slot: such a
    /// waiting catch-up run is left alone until woken.
    pub fn is_slot(self) -> bool {
        matches!(self, HoldKind::Quota | HoldKind::Overlap | HoldKind::Circuit)
    }

    /// Holds an attempt's end may lift (woken then; the on-time-first hold is
    /// also re-checked every `check_every`, since its window may end without
    /// an attempt).
    pub fn woken_by_an_end(self) -> bool {
        self.is_slot() || self == HoldKind::OnTime
    }

    /// Holds a catch-up run keeps its place in the backfill pool through:
    /// a quota (it had none yet), its schedule's on-time or previous run
    /// (woken when that run ends, a moment later). Under any other (a
    /// switch, a budget, a gate) it gives its place back. The store's count
    /// of due catch-up runs (`DUE_BACKFILL_COUNT`) names the same holds.
    pub fn keeps_catchup_place(self) -> bool {
        matches!(self, HoldKind::Quota | HoldKind::OnTime | HoldKind::Overlap)
    }
}

impl From<SwitchName> for HoldKind {
    fn from(s: SwitchName) -> Self {
        match s {
            SwitchName::Kill => HoldKind::Kill,
            SwitchName::Paused => HoldKind::Paused,
            SwitchName::Circuit => HoldKind::Circuit,
            SwitchName::Maintenance => HoldKind::Maintenance,
            SwitchName::Budget => HoldKind::Budget,
            SwitchName::OnTime => HoldKind::OnTime,
            SwitchName::Overlap => HoldKind::Overlap,
            SwitchName::Quota => HoldKind::Quota,
        }
    }
}

/// One switch (layer 3) that was checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchCheck {
    pub name: SwitchName,
    pub held: bool,
    /// Borrowed when it is a fixed text (`clear`, as nearly every check
    /// is): deciding a run allocates nothing for its clear switches.
    pub reason: std::borrow::Cow<'static, str>,
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
            reason: format!("{}: {}", c.name.as_str(), c.reason),
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

    /// What holds the run when the verdict is to wait: the holding switch,
    /// or a gate that waits.
    pub fn hold(&self) -> Option<HoldKind> {
        if self.verdict != Verdict::Wait {
            return None;
        }
        match self.switches.iter().find(|c| c.held) {
            Some(c) => Some(c.name.into()),
            None => self
                .gates
                .iter()
                .any(|g| g.verdict == GateVerdict::Wait)
                .then_some(HoldKind::Gate),
        }
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
        let d = Decision::from_gates("open".into(), vec![], vec![gate("b", GateVerdict::Wait, "fail")]);
        assert_eq!(d.hold(), Some(HoldKind::Gate));
    }

    #[test]
    fn first_holding_switch_decides() {
        let sw = |n: SwitchName, held| SwitchCheck {
            name: n,
            held,
            reason: format!("{n} reason").into(),
        };
        assert!(Decision::with_switches("t", &[(sw(SwitchName::Kill, false), Hold::Wait)]).is_none());
        let d = Decision::with_switches(
            "t",
            &[
                (sw(SwitchName::Kill, false), Hold::Wait),
                (sw(SwitchName::Circuit, true), Hold::Skip),
                (sw(SwitchName::Quota, true), Hold::Wait),
            ],
        )
        .unwrap();
        assert_eq!(d.verdict, Verdict::Skip);
        assert_eq!(d.reason, "circuit: circuit reason");
        assert_eq!(d.switches.len(), 3);
        assert_eq!(d.hold(), None, "a skip holds nothing");
        let d = Decision::with_switches(
            "t",
            &[
                (sw(SwitchName::Kill, false), Hold::Wait),
                (sw(SwitchName::Quota, true), Hold::Wait),
            ],
        )
        .unwrap();
        assert_eq!(d.hold(), Some(HoldKind::Quota));
        for h in HoldKind::ALL {
            assert_eq!(HoldKind::parse(h.as_str()), Some(h));
        }
    }
}
