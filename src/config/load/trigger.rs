//! Layer 1 of a schedule, its trigger: exactly one of `cron`, `every` (+ `anchor`),
//! `after_event` (+ `delay`) or `on_event`, and the keys that only make sense
//! with one of them.

use super::Loader;
use super::table::Tbl;
use super::value::{default_if_absent, list};
use crate::config::model::{Anchor, TriggerConfig};
use crate::time::cron::CronSpec;

const TRIGGER_KEYS: &[&str] = &["cron", "every", "after_event", "on_event"];

impl Loader<'_> {
    pub(super) fn trigger(&mut self, t: &Tbl) -> Option<TriggerConfig> {
        let cron = self
            .opt_str(t, "cron")
            .and_then(|(expr, at)| self.cron(&expr, at));
        let every = self.opt_positive_duration(t, "every");
        let anchor = self.opt_enum(
            t,
            "anchor",
            &[("fixed", Anchor::Fixed), ("last_start", Anchor::LastStart)],
        );
        let after_event = self.opt_event(t, "after_event");
        let delay = self.opt_duration(t, "delay").map(|(d, _)| d);
        let on_event = self.opt_event(t, "on_event");

        let present: Vec<&str> = TRIGGER_KEYS.iter().copied().filter(|k| t.has(k)).collect();
        if t.has("anchor") && !t.has("every") {
            self.error_help(
                t.key_at("anchor"),
                "`anchor` only applies to an `every` trigger",
                Some("remove `anchor`, or use `every = \"5m\"` as the trigger".into()),
            );
        }
        if t.has("delay") && !t.has("after_event") {
            self.error_help(
                t.key_at("delay"),
                "`delay` only applies to an `after_event` trigger",
                Some("remove `delay`, or use `after_event = \"NAME\"` as the trigger".into()),
            );
        }
        match present.as_slice() {
            [] => {
                self.error_help(
                    t.at,
                    format!("{} has no trigger", t.label),
                    Some(
                        "add exactly one of `cron`, `every`, `after_event` (with `delay`) or `on_event`"
                            .into(),
                    ),
                );
                None
            }
            [_] => {
                if t.has("after_event") && !t.has("delay") {
                    self.error_help(
                        t.at,
                        format!("{} has `after_event` but no `delay`", t.label),
                        Some("add e.g. `delay = \"30m\"` (how long after the event to run)".into()),
                    );
                }
                if t.has("cron") {
                    return cron.map(TriggerConfig::Cron);
                }
                if t.has("every") {
                    let anchor = default_if_absent(t, "anchor", anchor, Anchor::Fixed)?;
                    return every.map(|interval| TriggerConfig::Every { interval, anchor });
                }
                if t.has("after_event") {
                    return Some(TriggerConfig::AfterEvent {
                        event: after_event?,
                        delay: delay?,
                    });
                }
                on_event.map(|event| TriggerConfig::OnEvent { event })
            }
            many => {
                let keys = list(many.iter().copied());
                self.error_help(
                    t.at,
                    format!(
                        "{} has {} triggers ({keys}); exactly one is allowed",
                        t.label,
                        many.len()
                    ),
                    Some("keep one of `cron`, `every`, `after_event` or `on_event`".into()),
                );
                None
            }
        }
    }

    /// A cron expression written at `at` (a trigger's or a maintenance window's).
    pub(super) fn cron(&mut self, expr: &str, at: usize) -> Option<CronSpec> {
        match CronSpec::parse(expr) {
            Ok(c) => Some(c),
            Err(m) => {
                self.error(at, m);
                None
            }
        }
    }

    fn opt_event(&mut self, t: &Tbl, key: &str) -> Option<String> {
        let (name, at) = self.opt_str(t, key)?;
        if name.trim().is_empty() {
            self.error(at, format!("`{key}` must name an event"));
            return None;
        }
        Some(name)
    }
}
