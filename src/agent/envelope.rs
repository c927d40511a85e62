//! The JSON envelope an agent receives on stdin (or as the HTTP request body).
//! Field names are binding (DESIGN.md "The agent protocol"); agents parse them.

use crate::store::types::{RunReason, RunState};
use crate::time::duration::format_duration;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Everything an agent is told about the attempt it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    pub run_id: i64,
    pub tenant: String,
    pub schedule: String,
    pub window: EnvelopeWindow,
    /// `tenant/schedule/window_key`: the same for every attempt of a run, so an agent
    /// can dedupe its side effects (made by [`idempotency_key`]).
    pub idempotency_key: String,
    /// 1-based.
    #[schemars(range(min = 1))]
    pub attempt: u32,
    pub reason: RunReason,
    /// The scheduler's "now" in the schedule's time zone, RFC 3339.
    #[schemars(extend("format" = "date-time"))]
    pub now: String,
    pub context: TimeContext,
    /// Summaries of the schedule's last runs, newest first.
    pub memory: Vec<MemoryEntry>,
    pub completed_steps: Vec<String>,
    /// Side-effect steps that started but were never confirmed: check before acting.
    pub uncertain_steps: Vec<String>,
    /// The uncertain step to check; null unless `reason` is `verify`.
    pub verify_step: Option<String>,
    /// An operator approved with "resume after step X".
    pub resume_after: Option<String>,
    pub payload: serde_json::Value,
}

impl Envelope {
    /// The envelope's JSON text, as serde writes it (the tests compare the
    /// two), written field by field: every claim stores one and serde's
    /// path was a twentieth of a rehearsal's instructions.
    pub fn to_json(&self) -> String {
        let mut out = crate::core::row_text::JsonText(String::with_capacity(512));
        out.num("{\"run_id\":", self.run_id);
        out.str(",\"tenant\":", &self.tenant);
        out.str(",\"schedule\":", &self.schedule);
        out.str(",\"window\":{\"key\":", &self.window.key);
        out.str(",\"start\":", &self.window.start);
        out.str(",\"end\":", &self.window.end);
        out.str(",\"timezone\":", &self.window.timezone);
        out.str("},\"idempotency_key\":", &self.idempotency_key);
        out.num(",\"attempt\":", self.attempt);
        out.str(",\"reason\":", self.reason.as_str());
        out.str(",\"now\":", &self.now);
        out.num(",\"context\":{\"business_day\":", self.context.business_day);
        out.opt_str(
            ",\"since_last_success\":",
            self.context.since_last_success.as_deref(),
        );
        out.opt_str(",\"last_success_at\":", self.context.last_success_at.as_deref());
        out.str(",\"timezone\":", &self.context.timezone);
        out.0.push_str("},\"memory\":[");
        for (i, m) in self.memory.iter().enumerate() {
            out.str(if i == 0 { "{\"window\":" } else { ",{\"window\":" }, &m.window);
            out.str(",\"state\":", m.state.as_str());
            out.opt_str(",\"summary\":", m.summary.as_deref());
            out.0.push('}');
        }
        for (key, steps) in [
            ("],\"completed_steps\":[", &self.completed_steps),
            ("],\"uncertain_steps\":[", &self.uncertain_steps),
        ] {
            out.0.push_str(key);
            for (i, st) in steps.iter().enumerate() {
                out.str(if i == 0 { "" } else { "," }, st);
            }
        }
        out.opt_str("],\"verify_step\":", self.verify_step.as_deref());
        out.opt_str(",\"resume_after\":", self.resume_after.as_deref());
        out.0.push_str(",\"payload\":");
        // A Value always serializes.
        out.0
            .push_str(&serde_json::to_string(&self.payload).unwrap_or_default());
        out.0.push('}');
        out.0
    }
}

/// The envelope as written to a command agent's stdin, one line: the
/// [`Envelope`], and for a handshake agent `"protocol": 2, "acks": true`
/// (facts of the transport). The published schema, docs/schema/envelope.json,
/// is generated from this type.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnvelopeLine<'a> {
    #[serde(flatten)]
    pub envelope: &'a Envelope,
    /// Only for an agent with `handshake = true`; absent for the others (protocol 1).
    #[serde(flatten)]
    pub handshake: Option<Handshake>,
}

/// What a handshake agent's envelope says besides the [`Envelope`]: stdin
/// stays open after the envelope line and carries an `ack` or `deny` line for
/// each side-effect step's `started` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Handshake {
    /// The protocol version, 2.
    #[schemars(range(min = 2, max = 2))]
    pub protocol: u32,
    /// Always `true`: side-effect steps are answered on stdin.
    #[schemars(extend("const" = true))]
    pub acks: bool,
}

/// The window the run belongs to; instants are RFC 3339 in the schedule's local offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvelopeWindow {
    pub key: String,
    #[schemars(extend("format" = "date-time"))]
    pub start: String,
    #[schemars(extend("format" = "date-time"))]
    pub end: String,
    /// IANA name, e.g. `Asia/Shanghai`.
    pub timezone: String,
}

impl EnvelopeWindow {
    pub fn new(key: &str, start: DateTime<Utc>, end: DateTime<Utc>, tz: Tz) -> Self {
        Self {
            key: key.to_string(),
            start: local_rfc3339(start, tz),
            end: local_rfc3339(end, tz),
            timezone: tz.name().to_string(),
        }
    }
}

/// The time context of DESIGN.md: local business day, time since the last success.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TimeContext {
    pub business_day: bool,
    /// e.g. `1d2h` (whole minutes); null if the schedule never succeeded.
    pub since_last_success: Option<String>,
    /// RFC 3339, local.
    #[schemars(extend("format" = "date-time"))]
    pub last_success_at: Option<String>,
    pub timezone: String,
}

impl TimeContext {
    pub fn new(now: DateTime<Utc>, tz: Tz, business_day: bool, last_success: Option<DateTime<Utc>>) -> Self {
        Self {
            business_day,
            since_last_success: last_success.map(|at| since(now, at)),
            last_success_at: last_success.map(|at| local_rfc3339(at, tz)),
            timezone: tz.name().to_string(),
        }
    }
}

/// One past run in the execution memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryEntry {
    /// The window key.
    pub window: std::sync::Arc<str>,
    pub state: RunState,
    pub summary: Option<std::sync::Arc<str>>,
}

/// `tenant/schedule/window_key`, the key agents and webhooks dedupe on.
pub fn idempotency_key(tenant: &str, schedule: &str, window_key: &str) -> String {
    let mut key = String::with_capacity(tenant.len() + schedule.len() + window_key.len() + 2);
    for (i, part) in [tenant, schedule, window_key].into_iter().enumerate() {
        if i > 0 {
            key.push('/');
        }
        key.push_str(part);
    }
    key
}

/// An instant as RFC 3339 in `tz`'s offset at that instant, whole seconds.
pub fn local_rfc3339(at: DateTime<Utc>, tz: Tz) -> String {
    crate::time::local_rfc3339_secs(at, tz)
}

/// Elapsed time rounded down to whole minutes (`1d2h`, `45m`); seconds are noise to
/// an agent deciding how far back to look. Under a minute is `0m`; a future instant
/// (clock skew) counts as zero.
fn since(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (now - at).num_seconds().max(0) as u64;
    let minutes = secs / 60;
    if minutes == 0 {
        return "0m".to_string();
    }
    format_duration(std::time::Duration::from_secs(minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_envelope_text_is_what_serde_writes() {
        let now = Utc.with_ymd_and_hms(2026, 6, 6, 12, 0, 0).unwrap();
        let texts = ["", "plain", "say \"hi\" \\ \t\n\u{1}", "héllo 日本 🙂"];
        let states = RunState::ALL;
        for (i, text) in texts.iter().enumerate() {
            let text = text.to_string();
            let some = (i % 2 == 1).then(|| text.clone());
            let envelope = Envelope {
                run_id: i as i64 * 1_000_003 - 5,
                tenant: text.clone(),
                schedule: format!("s{text}"),
                window: EnvelopeWindow::new(
                    &text,
                    now,
                    now + chrono::TimeDelta::hours(1),
                    chrono_tz::Asia::Shanghai,
                ),
                idempotency_key: idempotency_key(&text, "s", &text),
                attempt: i as u32 + 1,
                reason: [
                    RunReason::Scheduled,
                    RunReason::Retry,
                    RunReason::Verify,
                    RunReason::Catchup,
                ][i],
                now: local_rfc3339(now, Tz::UTC),
                context: TimeContext::new(now, Tz::UTC, i % 2 == 0, some.as_ref().map(|_| now)),
                memory: (0..i * 4)
                    .map(|k| MemoryEntry {
                        window: format!("{text}{k}").into(),
                        state: states[k % states.len()],
                        summary: (k % 3 != 0).then(|| text.as_str().into()),
                    })
                    .collect(),
                completed_steps: (0..i).map(|k| format!("{text}{k}")).collect(),
                uncertain_steps: (0..i % 3).map(|k| format!("u{k}{text}")).collect(),
                verify_step: some.clone(),
                resume_after: some,
                payload: match i {
                    0 => serde_json::Value::Null,
                    1 => serde_json::json!({"report": text, "n": [1, 2.5, null]}),
                    _ => serde_json::json!(text),
                },
            };
            let serde = serde_json::to_string(&envelope).expect("serializes");
            assert_eq!(envelope.to_json(), serde);
            let back: Envelope = serde_json::from_str(&envelope.to_json()).expect("parses");
            assert_eq!(back, envelope);
        }
    }

    #[test]
    fn local_times_carry_the_schedule_offset() {
        let at = Utc.with_ymd_and_hms(2026, 6, 6, 1, 0, 0).unwrap();
        assert_eq!(
            local_rfc3339(at, chrono_tz::Asia::Shanghai),
            "2026-06-06T09:00:00+08:00"
        );
        assert_eq!(local_rfc3339(at, Tz::UTC), "2026-06-06T01:00:00+00:00");
    }

    #[test]
    fn since_last_success_is_whole_minutes() {
        let now = Utc.with_ymd_and_hms(2026, 6, 6, 12, 0, 0).unwrap();
        let ctx = TimeContext::new(now, Tz::UTC, true, Some(now - chrono::TimeDelta::seconds(93_630)));
        assert_eq!(ctx.since_last_success.as_deref(), Some("1d2h"));
        let ctx = TimeContext::new(now, Tz::UTC, true, Some(now + chrono::TimeDelta::hours(1)));
        assert_eq!(ctx.since_last_success.as_deref(), Some("0m"));
        let ctx = TimeContext::new(now, Tz::UTC, false, None);
        assert_eq!(ctx.since_last_success, None);
        assert_eq!(ctx.last_success_at, None);
    }

    #[test]
    fn idempotency_key_joins_with_slashes() {
        assert_eq!(
            idempotency_key("acme", "daily", "2026-06-06"),
            "acme/daily/2026-06-06"
        );
    }
}
