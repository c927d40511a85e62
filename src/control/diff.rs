//! What a configuration changes, schedule by schedule, against the version
//! the database runs: pure, so `plan`, a reload and the tests agree.

use super::settings::{ScheduleSettings, Settings, is_gated_field, is_trigger_field};
use crate::config::model::Stage;
use crate::store::ScheduleVersion;
use serde::Serialize;
use std::collections::BTreeMap;

/// How one schedule changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
    /// `previous_id` names a current schedule: it keeps its history.
    Renamed,
    Unchanged,
}

impl ChangeKind {
    /// `+`, `-`, `~` (changed or renamed), or a space.
    pub fn sign(self) -> char {
        match self {
            ChangeKind::Added => '+',
            ChangeKind::Removed => '-',
            ChangeKind::Changed | ChangeKind::Renamed => '~',
            ChangeKind::Unchanged => ' ',
        }
    }
}

/// One field before and after (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    pub field: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".into());
        write!(f, "{} {} → {}", self.field, show(&self.before), show(&self.after))
    }
}

/// One schedule's change.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleChange {
    pub id: String,
    pub kind: ChangeKind,
    /// The id it had (renamed).
    pub from: Option<String>,
    pub stage: Stage,
    pub fields: Vec<FieldChange>,
    /// Its version now, and after the change (`None`: removed).
    pub version_before: Option<i64>,
    pub version_after: Option<i64>,
    /// The new settings and their hash (not for a removal).
    pub settings: Option<(Settings, String)>,
}

impl ScheduleChange {
    pub fn trigger_changed(&self) -> bool {
        self.fields.iter().any(|f| is_trigger_field(&f.field))
    }

    /// Whether it needs approval when its stage is gated: an addition, a
    /// removal, or a change of its trigger, agent or budget.
    pub fn needs_approval(&self) -> bool {
        match self.kind {
            ChangeKind::Added | ChangeKind::Removed => true,
            ChangeKind::Changed | ChangeKind::Renamed => self.fields.iter().any(|f| is_gated_field(&f.field)),
            ChangeKind::Unchanged => false,
        }
    }
}

/// Every schedule's change, in file order, removals last.
pub fn diff(current: &BTreeMap<String, ScheduleVersion>, new: &[ScheduleSettings]) -> Vec<ScheduleChange> {
    let mut out = vec![];
    let mut kept: Vec<&str> = vec![];
    for s in new {
        let (old, from) = match current.get(&s.id) {
            Some(old) => (Some(old), None),
            None => match s
                .previous_id
                .as_deref()
                .and_then(|p| current.get(p).map(|o| (o, p)))
            {
                // The old id is taken by the new file itself: not a rename.
                Some((old, p)) if !new.iter().any(|n| n.id == p) => (Some(old), Some(p.to_string())),
                _ => (None, None),
            },
        };
        if let Some(old) = old {
            kept.push(&old.schedule);
        }
        let fields = old
            .map(|o| field_changes(&o.settings, &s.settings))
            .unwrap_or_default();
        let kind = match (old, &from) {
            (None, _) => ChangeKind::Added,
            (Some(_), Some(_)) => ChangeKind::Renamed,
            (Some(o), None) if o.hash != s.hash => ChangeKind::Changed,
            (Some(_), None) => ChangeKind::Unchanged,
        };
        let before = old.map(|o| o.version);
        let after = match (kind, before) {
            (ChangeKind::Unchanged, b) => b,
            (ChangeKind::Renamed, Some(b)) if old.is_some_and(|o| o.hash == s.hash) => Some(b),
            (_, Some(b)) => Some(b + 1),
            (_, None) => None, // numbered by the store (a re-added id continues its history)
        };
        out.push(ScheduleChange {
            id: s.id.clone(),
            kind,
            from,
            stage: s.stage,
            fields,
            version_before: before,
            version_after: after,
            settings: Some((s.settings.clone(), s.hash.clone())),
        });
    }
    for (id, old) in current {
        if kept.contains(&id.as_str()) {
            continue;
        }
        let stage = old
            .settings
            .get("stage")
            .and_then(|v| Stage::ALL.iter().find(|(n, _)| format!("\"{n}\"") == *v))
            .map_or(Stage::Prod, |(_, st)| *st);
        out.push(ScheduleChange {
            id: id.clone(),
            kind: ChangeKind::Removed,
            from: None,
            stage,
            fields: vec![],
            version_before: Some(old.version),
            version_after: None,
            settings: None,
        });
    }
    out
}

/// Fields that differ, by name, their values as people may see them: a
/// secret (a fingerprint of it) that changed is a field that changed, shown
/// masked on both sides.
pub fn field_changes(before: &Settings, after: &Settings) -> Vec<FieldChange> {
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let shown = |k: &str, v: Option<&String>| v.map(|v| crate::secrets::shown_setting(k, v));
    names
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| FieldChange {
            field: k.clone(),
            before: shown(k, before.get(k)),
            after: shown(k, after.get(k)),
        })
        .collect()
}

/// Whether anything changes at all.
pub fn any_change(changes: &[ScheduleChange]) -> bool {
    changes.iter().any(|c| c.kind != ChangeKind::Unchanged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn stored(id: &str, version: i64, pairs: &[(&str, &str)]) -> ScheduleVersion {
        let settings: Settings = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ScheduleVersion {
            schedule: id.into(),
            version,
            hash: super::super::settings::hash(&settings),
            settings,
            config_version: 1,
            created_at: DateTime::UNIX_EPOCH,
        }
    }

    fn new(id: &str, previous: Option<&str>, pairs: &[(&str, &str)]) -> ScheduleSettings {
        let settings: Settings = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ScheduleSettings {
            id: id.into(),
            previous_id: previous.map(str::to_string),
            stage: Stage::Prod,
            hash: super::super::settings::hash(&settings),
            settings,
        }
    }

    #[test]
    fn added_removed_changed_renamed_unchanged() {
        let current: BTreeMap<String, ScheduleVersion> = [
            stored("a", 3, &[("cron", "\"0 9 * * *\"")]),
            stored("b", 1, &[("every", "\"1h\"")]),
            stored("c", 2, &[("every", "\"1d\"")]),
            stored("old", 4, &[("every", "\"5m\"")]),
        ]
        .into_iter()
        .map(|v| (v.schedule.clone(), v))
        .collect();
        let file = [
            new("a", None, &[("cron", "\"0 10 * * *\"")]),
            new("b", None, &[("every", "\"1h\"")]),
            new("renamed", Some("old"), &[("every", "\"5m\"")]),
            new("d", None, &[("every", "\"2h\"")]),
        ];
        let changes = diff(&current, &file);
        let kinds: Vec<(&str, ChangeKind, Option<i64>, Option<i64>)> = changes
            .iter()
            .map(|c| (c.id.as_str(), c.kind, c.version_before, c.version_after))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", ChangeKind::Changed, Some(3), Some(4)),
                ("b", ChangeKind::Unchanged, Some(1), Some(1)),
                ("renamed", ChangeKind::Renamed, Some(4), Some(4)),
                ("d", ChangeKind::Added, None, None),
                ("c", ChangeKind::Removed, Some(2), None),
            ]
        );
        assert!(changes[0].trigger_changed());
        assert_eq!(
            changes[0].fields[0].to_string(),
            "cron \"0 9 * * *\" → \"0 10 * * *\""
        );
        assert!(!changes[2].trigger_changed());
        assert!(any_change(&changes));
        assert!(!any_change(&changes[1..2]));
    }
}
