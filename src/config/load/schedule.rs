//! The `[[schedule]]` entries: unique ids, references to declared tenants, agents
//! and calendars, the payload, and every per-schedule setting with its default.
//! The trigger, policies, gates and deliveries of a schedule have their own files.

use super::table::Tbl;
use super::value::{default_if_absent, list};
use super::{Declared, Loader, Value};
use crate::config::diagnostic::did_you_mean;
use crate::config::model::*;
use crate::time::duration::format_duration;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use toml::Spanned;
use toml::de::DeValue;

pub(super) const SCHEDULE_KEYS: &[&str] = &[
    "id",
    "previous_id",
    "stage",
    "tenant",
    "owner",
    "agent",
    "payload",
    "cron",
    "every",
    "anchor",
    "after_event",
    "delay",
    "on_event",
    "timezone",
    "calendar",
    "non_business_day",
    "dst_gap",
    "dst_fold",
    "check_every",
    "close_after",
    "overlap",
    "max_concurrency",
    "catchup",
    "catchup_window",
    "default_error_class",
    "protocol_error_class",
    "retry",
    "circuit",
    "budget",
    "approval_ttl",
    "gate",
    "delivery",
];

impl Loader<'_> {
    /// Returns the valid schedules and every declared id (valid or not) for
    /// maintenance references.
    pub(super) fn schedules(
        &mut self,
        root: &Tbl,
        declared: &Declared,
    ) -> (Vec<ScheduleConfig>, BTreeSet<String>) {
        let mut out = vec![];
        let mut first_at = BTreeMap::new();
        // (schedule id, its previous_id, where the previous_id is)
        let mut renames: Vec<(String, String, usize)> = vec![];
        let tables = self.table_array(root, "schedule").unwrap_or_default();
        for (n, (at, table)) in tables.into_iter().enumerate() {
            let id = match table.get("id").map(Spanned::get_ref) {
                Some(DeValue::String(s)) => Some(s.to_string()),
                _ => None,
            };
            let label = match &id {
                Some(id) => format!("schedule `{id}`"),
                None => format!("[[schedule]] #{}", n + 1),
            };
            let t = Tbl { table, at, label };
            let mut unique = true;
            if let Some(id) = &id {
                let id_at = t.get("id").map(|v| v.span().start).unwrap_or(at);
                if let Some(line) = self.repeated(&mut first_at, id, id_at) {
                    let help = format!("the first schedule `{id}` is on line {line}; ids must be unique");
                    self.error_help(id_at, format!("duplicate schedule id `{id}`"), Some(help));
                    unique = false;
                }
            }
            if let (Some(id), Some(v)) = (&id, t.get("previous_id"))
                && let DeValue::String(p) = v.get_ref()
            {
                renames.push((id.clone(), p.to_string(), v.span().start));
            }
            if let Some(s) = self.schedule(&t, declared)
                && unique
            {
                out.push(s);
            }
        }
        // A rename's old id must be gone from the file: otherwise it names
        // the wrong schedule (a typo, or a copy that kept the line).
        for (id, previous, at) in renames {
            if previous == id {
                self.error(at, format!("`previous_id` of schedule `{id}` is its own id"));
            } else if first_at.contains_key(&previous) {
                self.error_help(
                    at,
                    format!("`previous_id = \"{previous}\"` of schedule `{id}` names a schedule still in this file"),
                    Some(format!("a renamed schedule's old id is gone; remove schedule `{previous}` or this line")),
                );
            }
        }
        (out, first_at.into_keys().collect())
    }

    fn schedule(&mut self, t: &Tbl, d: &Declared) -> Option<ScheduleConfig> {
        self.check_keys(t, SCHEDULE_KEYS, &[], None);
        let id = self.req_str(t, "id").and_then(|(id, at)| {
            if id.is_empty() || id.contains('/') || id.chars().any(char::is_whitespace) {
                self.error(
                    at,
                    format!("schedule id `{id}` must be non-empty, without spaces or `/`"),
                );
                None
            } else {
                Some(id)
            }
        });
        let tenant = match self.opt_str(t, "tenant") {
            Some((tenant, at)) => self.reference(at, "tenant", tenant, &d.tenants, true),
            None => (!t.has("tenant")).then(|| "default".to_string()),
        };
        let owner = self.opt_str(t, "owner").map(|(s, _)| s);
        let previous_id = self.opt_str(t, "previous_id").map(|(s, _)| s);
        let stage = self.opt_enum(t, "stage", &Stage::ALL);
        let agent = self
            .req_str(t, "agent")
            .and_then(|(agent, at)| self.reference(at, "agent", agent, &d.agents, false));
        let payload = match t.get("payload") {
            Some(v) => self.json(v, 0),
            None => Some(serde_json::Value::Object(serde_json::Map::new())),
        };
        let trigger = self.trigger(t);
        let timezone = self.opt_tz(t, "timezone");
        let calendar = match self.opt_str(t, "calendar") {
            Some((cal, at)) => self.reference(at, "calendar", cal, &d.calendars, false).map(Some),
            None => (!t.has("calendar")).then_some(None),
        };
        let non_business_day = self.opt_enum(
            t,
            "non_business_day",
            &[
                ("skip", NonBusinessDay::Skip),
                ("next_business_day", NonBusinessDay::NextBusinessDay),
            ],
        );
        let dst_gap = self.opt_enum(t, "dst_gap", &[("shift", DstGap::Shift), ("skip", DstGap::Skip)]);
        let dst_fold = self.opt_enum(
            t,
            "dst_fold",
            &[
                ("first", DstFold::First),
                ("last", DstFold::Last),
                ("both", DstFold::Both),
            ],
        );
        let check_every = self.opt_positive_duration(t, "check_every");
        let close_after = self.opt_duration(t, "close_after");
        let overlap = self.opt_enum(
            t,
            "overlap",
            &[
                ("skip", Overlap::Skip),
                ("buffer_one", Overlap::BufferOne),
                ("buffer_all", Overlap::BufferAll),
                ("cancel_previous", Overlap::CancelPrevious),
                ("allow", Overlap::Allow),
            ],
        );
        let max_concurrency = self.opt_uint::<u32>(t, "max_concurrency", 1).map(|(n, _)| n);
        let catchup = self.opt_enum(
            t,
            "catchup",
            &[
                ("all", Catchup::All),
                ("latest", Catchup::Latest),
                ("none", Catchup::None),
            ],
        );
        let catchup_window = self.opt_duration(t, "catchup_window").map(|(d, _)| d);
        let default_error_class = self.opt_error_class(t, "default_error_class");
        let protocol_error_class = self.opt_error_class(t, "protocol_error_class");
        let retry = self.retry(t);
        let circuit = self.circuit(t);
        let budget = self.budget(t);
        let approval_ttl = self.opt_positive_duration(t, "approval_ttl");
        // Whether the schedule names a calendar at all: a bad name is reported once,
        // not again by every calendar gate.
        let gates = self.gates(t, d, t.has("calendar"));
        let deliveries = self.deliveries(t);

        let check_every = default_if_absent(t, "check_every", check_every, Duration::from_secs(60));
        let close_after = match (close_after, check_every) {
            (Some((close, at)), Some(check)) if close < check => {
                self.error_help(
                    at,
                    format!(
                        "`close_after` ({}) is shorter than `check_every` ({})",
                        format_duration(close),
                        format_duration(check)
                    ),
                    Some(format!(
                        "a window stays open for at least one check; use close_after >= {}",
                        format_duration(check)
                    )),
                );
                None
            }
            (Some((close, _)), _) => Some(close),
            (None, check) if !t.has("close_after") => check,
            (None, _) => None,
        };

        Some(ScheduleConfig {
            id: id?,
            previous_id,
            stage: default_if_absent(t, "stage", stage, Stage::Prod)?,
            tenant: tenant?,
            owner,
            agent: agent?,
            payload: payload?,
            trigger: trigger?,
            timezone: default_if_absent(t, "timezone", timezone, d.timezone)?,
            calendar: calendar?,
            non_business_day: default_if_absent(
                t,
                "non_business_day",
                non_business_day,
                NonBusinessDay::Skip,
            )?,
            dst_gap: default_if_absent(t, "dst_gap", dst_gap, DstGap::Shift)?,
            dst_fold: default_if_absent(t, "dst_fold", dst_fold, DstFold::First)?,
            check_every: check_every?,
            close_after: close_after?,
            overlap: default_if_absent(t, "overlap", overlap, Overlap::Skip)?,
            max_concurrency: default_if_absent(t, "max_concurrency", max_concurrency, 1)?,
            catchup: default_if_absent(t, "catchup", catchup, Catchup::All)?,
            catchup_window: default_if_absent(
                t,
                "catchup_window",
                catchup_window,
                Duration::from_secs(72 * 3600),
            )?,
            default_error_class: default_if_absent(
                t,
                "default_error_class",
                default_error_class,
                ErrorClass::Retryable,
            )?,
            protocol_error_class: default_if_absent(
                t,
                "protocol_error_class",
                protocol_error_class,
                ErrorClass::NonRetryable,
            )?,
            retry: retry?,
            circuit: circuit?,
            budget: budget?,
            approval_ttl: default_if_absent(t, "approval_ttl", approval_ttl.map(Some), None)?,
            gates: gates?,
            deliveries: deliveries?,
        })
    }

    /// Checks a name against the declared ones; `default` is implied for tenants.
    pub(super) fn reference(
        &mut self,
        at: usize,
        what: &str,
        name: String,
        declared: &BTreeSet<String>,
        default_ok: bool,
    ) -> Option<String> {
        if declared.contains(&name) || (default_ok && name == "default") {
            return Some(name);
        }
        let plural = if what == "agent" {
            "agents"
        } else if what == "tenant" {
            "tenants"
        } else {
            "calendars"
        };
        let help = did_you_mean(&name, declared.iter().map(String::as_str)).unwrap_or_else(|| {
            if declared.is_empty() {
                format!("no {plural} are declared; add a [{plural}.{name}] table")
            } else {
                format!(
                    "declared {plural}: {}; or add a [{plural}.{name}] table",
                    list(declared.iter().map(String::as_str))
                )
            }
        });
        let message = if what == "tenant" {
            format!("tenant `{name}` is not declared (only `default` needs no [tenants] entry)")
        } else {
            format!("unknown {what} `{name}`")
        };
        self.error_help(at, message, Some(help));
        None
    }

    /// Converts a TOML value to JSON for the payload; datetimes become strings.
    fn json(&mut self, v: &Value, depth: usize) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        // Far deeper than any real payload; keeps recursion bounded on hostile input.
        if depth > 64 {
            self.error(v.span().start, "`payload` is nested too deeply");
            return None;
        }
        let at = v.span().start;
        Some(match v.get_ref() {
            DeValue::String(s) => J::String(s.to_string()),
            DeValue::Boolean(b) => J::Bool(*b),
            DeValue::Datetime(d) => J::String(d.to_string()),
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => J::from(n),
                Err(_) => {
                    self.error(at, "integer in `payload` is out of range");
                    return None;
                }
            },
            DeValue::Float(f) => match f
                .as_str()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(n) => J::Number(n),
                None => {
                    self.error(at, "`payload` numbers must be finite (JSON has no inf or nan)");
                    return None;
                }
            },
            DeValue::Array(items) => {
                let mut out = vec![];
                let mut ok = true;
                for item in items.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => out.push(j),
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Array(out)
            }
            DeValue::Table(t) => {
                let mut out = serde_json::Map::new();
                let mut ok = true;
                for (k, item) in t.iter() {
                    match self.json(item, depth + 1) {
                        Some(j) => {
                            out.insert(k.get_ref().to_string(), j);
                        }
                        None => ok = false,
                    }
                }
                if !ok {
                    return None;
                }
                J::Object(out)
            }
        })
    }
}
