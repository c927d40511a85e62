//! The agent's side of the conversation: JSON lines on stdout (DESIGN.md "The
//! agent protocol"). Parsing is total: any input maps to an [`AgentLine`], so a
//! misbehaving agent can never crash or stall the scheduler.

use crate::config::model::ErrorClass;
use crate::store::types::StepStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Longest line parsed as protocol; longer lines are kept (truncated) as log.
pub const MAX_LINE: usize = 1024 * 1024;

/// The protocol version the envelope announces (`"protocol": 2`). Version 2
/// adds the side-effect step handshake: with `"acks": true` in the envelope,
/// stdin stays open after the envelope line and carries [`Reply`] lines.
pub const PROTOCOL_VERSION: u32 = 2;

/// agentcron's answer to a side-effect step's `started` line, one JSON line on
/// the agent's stdin (DESIGN.md "Side-effect handshake").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Reply {
    /// Go ahead: the `started` step is journaled and the attempt's fence
    /// (its fencing token) still held its lease, in one transaction.
    Ack { step: String, fence: i64 },
    /// Do not act: the step could not be journaled under a valid fence.
    Deny { step: String, reason: String },
}

impl Reply {
    /// The line written to the agent (newline included).
    pub fn line(&self) -> String {
        // A plain enum of strings and an integer always serializes.
        let mut line = serde_json::to_string(self).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// What one line of agent output means.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentLine {
    /// `{"event":"heartbeat"}`: the agent is alive.
    Heartbeat,
    /// `{"event":"step","name":…,"status":"started"|"done"|"failed"}`.
    Step { name: String, status: StepStatus },
    /// `{"event":"usage","tokens":…,"cost_usd":…}`, both optional.
    Usage {
        tokens: Option<i64>,
        cost_usd: Option<f64>,
    },
    /// The final `{"event":"result",…}`.
    Result(AgentResult),
    /// Not protocol: plain text, or JSON without an `event` field.
    Log(String),
    /// JSON with an `event` field that is not a valid event. `event` is the
    /// kind it claimed to be (`"result"` also for an HTTP agent's bare result
    /// object), so a broken result is told from other noise without reading
    /// the error text: it is a protocol error that fails the attempt.
    Malformed {
        line: String,
        error: String,
        event: Option<String>,
    },
}

impl AgentLine {
    /// A line that meant to be the result and is not a valid one (unknown
    /// `status` or `error_class`, missing `status`): a protocol error.
    pub fn is_broken_result(&self) -> bool {
        matches!(self, AgentLine::Malformed { event: Some(e), .. } if e == "result")
    }
}

/// The agent's own verdict on its attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AgentResult {
    pub status: ResultStatus,
    /// Only meaningful with `status: failure`; absent = classify by exit code.
    #[serde(default)]
    pub error_class: Option<ErrorClass>,
    #[serde(default)]
    pub summary: Option<String>,
    /// How many items the attempt handled (rows, tickets, …).
    #[serde(default)]
    pub processed: Option<i64>,
    #[serde(default)]
    pub message: Option<String>,
    /// Verify mode: did the uncertain step land in the outside world?
    #[serde(default)]
    pub verified: Option<bool>,
    /// The upstream rate-limited this attempt: retry with backoff and halve the
    /// schedule's concurrency until a success.
    #[serde(default)]
    pub rate_limited: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Success,
    Failure,
}

/// One protocol line an agent writes, as a serde type. [`parse_line`] reads
/// lines by hand (it is total: any input is some [`AgentLine`]); this type is
/// what the published schema, docs/schema/agent-line.json, is generated from,
/// and tests/protocol_schema.rs holds that every line the schema accepts
/// parses as the event it names, and no line it rejects does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ProtocolLine {
    /// The agent is alive.
    Heartbeat,
    /// A step began or ended.
    Step(StepEvent),
    /// Usage; lines add up over the run.
    Usage(UsageEvent),
    /// The verdict; the last one counts.
    Result(AgentResult),
}

/// `{"event":"step",…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StepEvent {
    /// The step's name (not blank), e.g. `deliver`.
    #[schemars(pattern(r"\S"))]
    pub name: String,
    pub status: StepStatus,
}

/// `{"event":"usage",…}`, both fields optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UsageEvent {
    #[serde(default)]
    pub tokens: Option<i64>,
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// Parses one line (without its newline). Never panics.
pub fn parse_line(line: &str) -> AgentLine {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.len() > MAX_LINE {
        let mut cut = MAX_LINE;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        return AgentLine::Log(format!(
            "{} … [line truncated, {} bytes]",
            &line[..cut],
            line.len()
        ));
    }
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
        return AgentLine::Log(line.to_string());
    };
    let Some(event) = object.get("event") else {
        return AgentLine::Log(line.to_string());
    };
    let malformed = |error: String, event: Option<String>| AgentLine::Malformed {
        line: line.to_string(),
        error,
        event,
    };
    let Some(kind) = event.as_str().map(str::to_owned) else {
        return malformed(format!("`event` must be a string, got {event}"), None);
    };
    match parse_event(&kind, object) {
        Ok(parsed) => parsed,
        Err(error) => malformed(error, Some(kind)),
    }
}

/// Reads a JSON object as a result, with or without `"event":"result"` (an HTTP
/// agent may answer with a bare result object).
pub fn parse_result_object(object: Map<String, Value>) -> Result<AgentResult, String> {
    serde_json::from_value(Value::Object(object)).map_err(|e| format!("invalid result: {e}"))
}

fn parse_event(kind: &str, object: Map<String, Value>) -> Result<AgentLine, String> {
    let value = Value::Object(object);
    match kind {
        "heartbeat" => Ok(AgentLine::Heartbeat),
        "step" => {
            let step: StepEvent =
                serde_json::from_value(value).map_err(|e| format!("invalid step event: {e}"))?;
            if step.name.trim().is_empty() {
                return Err("invalid step event: `name` is empty".to_string());
            }
            Ok(AgentLine::Step {
                name: step.name,
                status: step.status,
            })
        }
        "usage" => {
            let usage: UsageEvent =
                serde_json::from_value(value).map_err(|e| format!("invalid usage event: {e}"))?;
            Ok(AgentLine::Usage {
                tokens: usage.tokens,
                cost_usd: usage.cost_usd,
            })
        }
        "result" => match value {
            Value::Object(object) => parse_result_object(object).map(AgentLine::Result),
            // parse_line only hands objects here.
            _ => Err("invalid result: not an object".to_string()),
        },
        other => Err(format!("unknown event `{other}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_kind_parses() {
        assert_eq!(parse_line(r#"{"event":"heartbeat"}"#), AgentLine::Heartbeat);
        assert_eq!(
            parse_line(r#"{"event":"step","name":"deliver","status":"started","extra":1}"#),
            AgentLine::Step {
                name: "deliver".into(),
                status: StepStatus::Started
            }
        );
        assert_eq!(
            parse_line(r#"{"event":"usage","tokens":1200,"cost_usd":0.03}"#),
            AgentLine::Usage {
                tokens: Some(1200),
                cost_usd: Some(0.03)
            }
        );
        assert_eq!(
            parse_line(r#"{"event":"usage","cost_usd":null}"#),
            AgentLine::Usage {
                tokens: None,
                cost_usd: None
            }
        );
        let AgentLine::Result(r) = parse_line(
            r#"{"event":"result","status":"failure","error_class":"needs_human","summary":"s","processed":3,"message":"m","verified":true}"#,
        ) else {
            panic!("not a result")
        };
        assert_eq!(r.status, ResultStatus::Failure);
        assert_eq!(r.error_class, Some(ErrorClass::NeedsHuman));
        assert_eq!(r.summary.as_deref(), Some("s"));
        assert_eq!(r.processed, Some(3));
        assert_eq!(r.message.as_deref(), Some("m"));
        assert_eq!(r.verified, Some(true));
    }

    #[test]
    fn minimal_result_and_null_class() {
        let AgentLine::Result(r) = parse_line(r#"{"event":"result","status":"success","error_class":null}"#)
        else {
            panic!("not a result")
        };
        assert_eq!(r.status, ResultStatus::Success);
        assert_eq!(r.error_class, None);
        assert_eq!(r.summary, None);
    }

    #[test]
    fn non_protocol_lines_are_log() {
        assert_eq!(parse_line("hello"), AgentLine::Log("hello".into()));
        assert_eq!(parse_line("hello\r"), AgentLine::Log("hello".into()));
        assert_eq!(parse_line(""), AgentLine::Log("".into()));
        assert_eq!(parse_line("[1,2]"), AgentLine::Log("[1,2]".into()));
        assert_eq!(
            parse_line(r#"{"level":"info"}"#),
            AgentLine::Log(r#"{"level":"info"}"#.into())
        );
        assert_eq!(parse_line("{\"event\":"), AgentLine::Log("{\"event\":".into()));
    }

    #[test]
    fn invalid_events_are_malformed() {
        for line in [
            r#"{"event":"step","name":"x","status":"maybe"}"#,
            r#"{"event":"step","status":"done"}"#,
            r#"{"event":"step","name":" ","status":"done"}"#,
            r#"{"event":"usage","tokens":"many"}"#,
            r#"{"event":"result","status":"great"}"#,
            r#"{"event":"result","status":"failure","error_class":"sometimes"}"#,
            r#"{"event":"result"}"#,
            r#"{"event":"party"}"#,
            r#"{"event":42}"#,
        ] {
            assert!(
                matches!(parse_line(line), AgentLine::Malformed { .. }),
                "{line} should be malformed"
            );
            assert_eq!(
                parse_line(line).is_broken_result(),
                line.contains(r#""event":"result""#),
                "{line}: only results are broken results"
            );
        }
    }

    #[test]
    fn replies_are_one_json_line_each() {
        let ack = Reply::Ack {
            step: "deliver".into(),
            fence: 7,
        };
        assert_eq!(
            ack.line(),
            "{\"event\":\"ack\",\"step\":\"deliver\",\"fence\":7}\n"
        );
        let deny = Reply::Deny {
            step: "deliver".into(),
            reason: "lease lost".into(),
        };
        assert_eq!(
            deny.line(),
            "{\"event\":\"deny\",\"step\":\"deliver\",\"reason\":\"lease lost\"}\n"
        );
        assert_eq!(serde_json::from_str::<Reply>(ack.line().trim()).unwrap(), ack);
    }

    #[test]
    fn huge_lines_are_truncated_log() {
        let line = format!("{{\"event\":\"heartbeat\",\"pad\":\"{}\"}}", "é".repeat(MAX_LINE));
        let AgentLine::Log(text) = parse_line(&line) else {
            panic!("not log")
        };
        assert!(text.len() < MAX_LINE + 100);
        assert!(text.ends_with("bytes]"));
    }
}
