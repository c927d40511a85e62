//! A schedule's normalised settings: its own `[[schedule]]` table with the
//! agent and calendar it names folded in (`agent.timeout`, `calendar.holidays`)
//! and its effective zone, flattened to `field → TOML value`. A schedule's
//! version changes exactly when these do: editing another schedule, a comment
//! or the order of keys leaves it alone.

use crate::config::model::{Config, Stage};
use std::collections::BTreeMap;

/// Field → TOML value (`"10m"`, `3`, `["SAT", "SUN"]`).
pub type Settings = BTreeMap<String, String>;

/// One schedule of a configuration, as versions see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSettings {
    pub id: String,
    pub previous_id: Option<String>,
    pub stage: Stage,
    pub settings: Settings,
    /// FNV-1a of the settings, one `field=value` line each in field order.
    pub hash: String,
}

/// Fields that are the schedule's trigger (a change restarts its windows at
/// the reload instant).
const TRIGGER_FIELDS: &[&str] = &[
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
];

/// Whether `field` belongs to the trigger.
pub fn is_trigger_field(field: &str) -> bool {
    let head = field.split('.').next().unwrap_or(field);
    TRIGGER_FIELDS.contains(&head)
}

/// Whether a change of `field` needs approval in a gated stage: the trigger,
/// the agent (and its settings) or the budget.
pub fn is_gated_field(field: &str) -> bool {
    let head = field.split('.').next().unwrap_or(field);
    is_trigger_field(field) || head == "agent" || head == "budget"
}

/// The settings of every schedule of `cfg`, read from its `text` (which
/// `cfg` was loaded from, so it parses).
pub fn of_config(cfg: &Config, text: &str) -> Vec<ScheduleSettings> {
    let root: toml::Table = toml::from_str(text).unwrap_or_default();
    let tables: Vec<&toml::Table> = root
        .get("schedule")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_table).collect())
        .unwrap_or_default();
    let section = |name: &str, key: &str| {
        root.get(name)
            .and_then(toml::Value::as_table)
            .and_then(|t| t.get(key))
            .and_then(toml::Value::as_table)
            .cloned()
    };
    cfg.schedules
        .iter()
        .map(|s| {
            let mut settings = Settings::new();
            if let Some(t) = tables
                .iter()
                .find(|t| t.get("id").and_then(toml::Value::as_str) == Some(s.id.as_str()))
            {
                for (k, v) in t.iter() {
                    if k != "id" && k != "previous_id" {
                        flatten(k, v, &mut settings);
                    }
                }
            }
            // Inherited from [scheduler]: a change there changes the schedule.
            settings.insert(
                "timezone".into(),
                toml::Value::String(s.timezone.name().to_string()).to_string(),
            );
            settings.insert(
                "stage".into(),
                toml::Value::String(s.stage.as_str().to_string()).to_string(),
            );
            if let Some(agent) = section("agents", &s.agent) {
                for (k, v) in agent.iter() {
                    flatten(&format!("agent.{k}"), v, &mut settings);
                }
            }
            if let Some(cal) = s.calendar.as_deref().and_then(|c| section("calendars", c)) {
                for (k, v) in cal.iter() {
                    flatten(&format!("calendar.{k}"), v, &mut settings);
                }
            }
            let hash = hash(&settings);
            ScheduleSettings {
                id: s.id.clone(),
                previous_id: s.previous_id.clone(),
                stage: s.stage,
                settings,
                hash,
            }
        })
        .collect()
}

/// The fingerprint of a schedule's settings.
pub fn hash(settings: &Settings) -> String {
    let lines: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    crate::engine::registry::config_hash(lines.as_bytes())
}

/// Tables become dotted fields; arrays of tables (gates, deliveries) are
/// numbered (`gate.0.kind`); every other value is its TOML text.
fn flatten(prefix: &str, v: &toml::Value, out: &mut Settings) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t.iter() {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        toml::Value::Array(items) if !items.is_empty() && items.iter().all(toml::Value::is_table) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{prefix}.{i}"), item, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn settings(text: &str) -> Vec<ScheduleSettings> {
        let cfg = crate::config::load_str(text, Path::new("/tmp/agentcron.toml")).unwrap();
        of_config(&cfg, text)
    }

    const BASE: &str = r#"
[agents.a]
kind = "command"
command = ["true"]
timeout = "10m"

[[schedule]]
id = "one"
agent = "a"
cron = "0 9 * * *"

[[schedule]]
id = "two"
agent = "a"
every = "1h"
"#;

    #[test]
    fn a_schedule_hash_changes_only_with_its_own_settings() {
        let before = settings(BASE);
        // Another schedule's edit, a comment and key order leave `one` alone.
        let edited = BASE.replace("every = \"1h\"", "every = \"2h\"").replace(
            "[[schedule]]\nid = \"one\"\nagent = \"a\"\ncron",
            "# note\n[[schedule]]\nagent = \"a\"\nid = \"one\"\ncron",
        );
        let after = settings(&edited);
        assert_eq!(before[0].hash, after[0].hash);
        assert_ne!(before[1].hash, after[1].hash);
        // The agent's settings are the schedule's too.
        let slower = settings(&BASE.replace("timeout = \"10m\"", "timeout = \"20m\""));
        assert_ne!(before[0].hash, slower[0].hash);
        assert_eq!(slower[0].settings["agent.timeout"], "\"20m\"");
    }

    #[test]
    fn trigger_and_gated_fields() {
        assert!(is_trigger_field("cron"));
        assert!(is_trigger_field("calendar.holidays"));
        assert!(!is_trigger_field("agent.timeout"));
        assert!(is_gated_field("agent.timeout"));
        assert!(is_gated_field("budget.max_tokens"));
        assert!(!is_gated_field("retry.max_attempts"));
    }
}
