//! The latest decision of a run, as the gates pane shows it: when it was
//! made, the time layer's words, each gate's result and the switches that
//! held the run — read from the typed `decision`, `gate` and `switch_held`
//! events of the run's trace.

use crate::core::event::Event;
use crate::store::Event as Row;
use chrono::{DateTime, Utc};

/// One decision of the three layers, as the trace recorded it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionView {
    /// When the decision was recorded (`None`: gates seen, no decision yet).
    pub at: Option<DateTime<Utc>>,
    pub verdict: Option<String>,
    pub reason: Option<String>,
    /// The time layer's own verdict, if the decision states it.
    pub time: Option<String>,
    pub gates: Vec<GateRow>,
    pub switches: Vec<SwitchHold>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateRow {
    pub name: String,
    /// `pass`, `wait`, `fail`.
    pub result: String,
    pub reason: String,
    pub ms: Option<u64>,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SwitchHold {
    pub name: String,
    pub reason: String,
    /// False when the decision lists a switch that let the run through.
    pub held: bool,
    pub at: DateTime<Utc>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The latest decision in a run's events (oldest first): its own gate and
/// switch lists, or else the `gate` and `switch_held` events between the
/// previous decision (or the window opening) and it. `None` when the trace
/// has neither a decision nor a gate or switch event.
pub fn latest_decision(events: &[Row]) -> Option<DecisionView> {
    let typed: Vec<(DateTime<Utc>, Event)> = events.iter().map(|e| (e.at, e.event())).collect();
    let is_decision = |e: &Event| matches!(e, Event::Decision(_));
    let last = typed.iter().rposition(|(_, e)| is_decision(e));
    let (from, to) = match last {
        Some(d) => {
            let prev = typed[..d].iter().rposition(|(_, e)| is_decision(e));
            (prev.map_or(0, |p| p + 1), d + 1)
        }
        None => {
            let opened = typed
                .iter()
                .rposition(|(_, e)| matches!(e, Event::WindowOpened { .. }));
            (opened.map_or(0, |o| o + 1), typed.len())
        }
    };
    let mut view = DecisionView::default();
    if let Some((at, Event::Decision(d))) = last.map(|i| &typed[i]) {
        view.at = Some(*at);
        view.verdict = Some(d.verdict.as_str().to_string());
        view.reason = non_empty(&d.reason);
        view.time = non_empty(&d.time);
        view.gates = d
            .gates
            .iter()
            .map(|g| GateRow {
                name: g.name.clone(),
                result: g.result.as_str().to_string(),
                reason: g.reason.clone(),
                ms: Some(g.ms),
                at: *at,
            })
            .collect();
        view.switches = d
            .switches
            .iter()
            .map(|s| SwitchHold {
                name: s.name.as_str().to_string(),
                reason: s.reason.to_string(),
                held: s.held,
                at: *at,
            })
            .collect();
    }
    let range = &typed[from..to];
    if view.gates.is_empty() {
        view.gates = range
            .iter()
            .filter_map(|(at, e)| match e {
                Event::Gate(g) => Some(GateRow {
                    name: g.name.clone(),
                    result: g.result.as_str().to_string(),
                    reason: g.reason.clone(),
                    ms: Some(g.ms),
                    at: *at,
                }),
                _ => None,
            })
            .collect();
    }
    for (at, e) in range {
        if let Event::SwitchHeld { switch, reason, .. } = e
            && !view.switches.iter().any(|h| h.name == switch.as_str())
        {
            view.switches.push(SwitchHold {
                name: switch.as_str().to_string(),
                reason: reason.clone(),
                held: true,
                at: *at,
            });
        }
    }
    if view.at.is_none() && view.gates.is_empty() && view.switches.is_empty() {
        return None;
    }
    Some(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(id: i64, at: &str, kind: &str, detail: serde_json::Value) -> Row {
        Row {
            id,
            at: DateTime::parse_from_rfc3339(at).unwrap().to_utc(),
            kind: kind.into(),
            tenant: None,
            schedule: None,
            run_id: Some(1),
            detail,
        }
    }

    #[test]
    fn the_latest_decision_tells_its_own_gates_and_the_holds_before_it() {
        let gate = |r: &str| json!({"name": "up", "result": r, "reason": r, "ms": 4});
        let events = [
            row(1, "2026-06-06T01:00:00Z", "gate", gate("wait")),
            row(
                2,
                "2026-06-06T01:00:00Z",
                "decision",
                json!({"verdict": "wait", "reason": "first"}),
            ),
            row(3, "2026-06-06T01:05:00Z", "gate", gate("pass")),
            row(
                4,
                "2026-06-06T01:05:00Z",
                "switch_held",
                json!({"switch": "kill", "reason": "on", "verdict": "wait"}),
            ),
            row(
                5,
                "2026-06-06T01:05:00Z",
                "decision",
                json!({"time": "open", "verdict": "wait", "reason": "kill: on",
                "switches": [{"name": "paused", "held": false, "reason": "clear"}]}),
            ),
        ];
        let v = latest_decision(&events).unwrap();
        assert_eq!(v.at, Some(events[4].at));
        assert_eq!(v.verdict.as_deref(), Some("wait"));
        assert_eq!(v.time.as_deref(), Some("open"));
        // No gates in the decision: the gate events since the previous one.
        assert_eq!(v.gates.len(), 1);
        assert_eq!((v.gates[0].result.as_str(), v.gates[0].ms), ("pass", Some(4)));
        let holds: Vec<(&str, bool)> = v.switches.iter().map(|s| (s.name.as_str(), s.held)).collect();
        assert_eq!(holds, [("paused", false), ("kill", true)]);
        // Gates seen, no decision yet.
        let v = latest_decision(&events[..1]).unwrap();
        assert_eq!((v.at, v.gates.len()), (None, 1));
        assert_eq!(latest_decision(&[]), None);
    }
}
