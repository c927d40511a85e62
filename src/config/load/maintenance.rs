//! The `[[maintenance]]` entries: recurring windows (cron + duration in a zone)
//! that hold runs of the schedules they name, or of all schedules.

use super::table::Tbl;
use super::value::{default_if_absent, list};
use super::{Declared, Loader};
use crate::config::diagnostic::did_you_mean;
use crate::config::model::MaintenanceConfig;
use std::collections::{BTreeMap, BTreeSet};

pub(super) const MAINTENANCE_KEYS: &[&str] = &["name", "cron", "duration", "timezone", "schedules", "reason"];

impl Loader<'_> {
    /// `ids` are every schedule id declared, valid or not, so a schedule with its
    /// own errors is not also reported as unknown here.
    pub(super) fn maintenance(
        &mut self,
        root: &Tbl,
        d: &Declared,
        ids: &BTreeSet<String>,
    ) -> Vec<MaintenanceConfig> {
        let mut out = vec![];
        let mut first_at = BTreeMap::new();
        let tables = self.table_array(root, "maintenance").unwrap_or_default();
        for (n, (at, table)) in tables.into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("[[maintenance]] #{}", n + 1),
            };
            self.check_keys(&t, MAINTENANCE_KEYS, &[], None);
            let name = self.req_str(&t, "name");
            if let Some((name, name_at)) = &name
                && let Some(line) = self.repeated(&mut first_at, name, *name_at)
            {
                let help = format!("the first one is on line {line}");
                self.error_help(
                    *name_at,
                    format!("duplicate maintenance name `{name}`"),
                    Some(help),
                );
            }
            let cron = self.req(&t, "cron", |l, t, key| {
                l.opt_str(t, key).and_then(|(expr, at)| l.cron(&expr, at))
            });
            let duration = self.req(&t, "duration", Self::opt_positive_duration);
            let timezone = self.opt_tz(&t, "timezone");
            let schedules = match self.opt_str_list(&t, "schedules") {
                Some(entries) => {
                    let mut ok = true;
                    for (id, at) in &entries {
                        if !ids.contains(id) {
                            let help =
                                did_you_mean(id, ids.iter().map(String::as_str)).unwrap_or_else(|| {
                                    format!("declared schedules: {}", list(ids.iter().map(String::as_str)))
                                });
                            self.error_help(
                                *at,
                                format!("unknown schedule `{id}` in {}", t.label),
                                Some(help),
                            );
                            ok = false;
                        }
                    }
                    ok.then(|| entries.into_iter().map(|(id, _)| id).collect())
                }
                None => (!t.has("schedules")).then(Vec::new),
            };
            let reason = self.opt_str(&t, "reason").map(|(r, _)| r);
            let (Some((name, _)), Some(cron), Some(duration), Some(schedules)) =
                (name, cron, duration, schedules)
            else {
                continue;
            };
            let Some(timezone) = default_if_absent(&t, "timezone", timezone, d.timezone) else {
                continue;
            };
            let Some(reason) = default_if_absent(&t, "reason", reason, format!("maintenance window {name}"))
            else {
                continue;
            };
            out.push(MaintenanceConfig {
                name,
                cron,
                duration,
                timezone,
                schedules,
                reason,
            });
        }
        out
    }
}
