//! The `[scheduler]` section: zone, database, pools, lease, shutdown grace and the
//! alert sink, with the defaults of [`SchedulerConfig`].

use super::Loader;
use super::table::{Kinds, Tbl};
use crate::config::model::{AlertSink, ApiConfig, SchedulerConfig, Stage};

pub(super) const SCHEDULER_KEYS: &[&str] = &[
    "timezone",
    "database",
    "password_file",
    "workers",
    "backfill_workers",
    "lease",
    "takeover_grace",
    "alert",
    "memory_runs",
    "shutdown_grace",
    "heartbeat",
    "listen",
    "log_file",
    "stages",
    "require_approval_for",
];

/// `[alert]`: its routes only.
pub(super) const ALERT_SECTION_KEYS: &[&str] = &["routes"];
/// `[api]`.
pub(super) const API_KEYS: &[&str] = &["tokens_file", "max_connections", "header_timeout"];

pub(super) const ALERT_KINDS: Kinds = Kinds {
    what: "alert",
    common: &["kind"],
    kinds: &[
        ("file", &["path"]),
        ("webhook", &["url", "headers"]),
        ("command", &["command"]),
    ],
};

impl Loader<'_> {
    pub(super) fn scheduler(&mut self, root: &Tbl) -> SchedulerConfig {
        let mut s = SchedulerConfig {
            database: self.dir.join("agentcron.db"),
            ..SchedulerConfig::default()
        };
        let Some(t) = self.opt_table(root, "scheduler", "[scheduler]".into()) else {
            s.backfill_workers = (s.workers / 2).max(1);
            return s;
        };
        self.check_keys(&t, SCHEDULER_KEYS, &[], None);
        if let Some(tz) = self.opt_tz(&t, "timezone") {
            s.timezone = tz;
        }
        // A PostgreSQL URL is kept as written, not resolved as a file.
        match self.opt_str(&t, "database") {
            Some((url, _)) if crate::store::pg::is_url(&url) => s.database = url.into(),
            Some(_) => {
                if let Some(p) = self.opt_path(&t, "database") {
                    s.database = p;
                }
            }
            None => {}
        }
        s.password_file = self.opt_path(&t, "password_file");
        s.log_file = self.opt_path(&t, "log_file");
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "workers", 1) {
            s.workers = n;
        }
        s.backfill_workers = (s.workers / 2).max(1);
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "backfill_workers", 1) {
            s.backfill_workers = n;
        }
        if let Some(d) = self.opt_positive_duration(&t, "lease") {
            s.lease = d;
        }
        if let Some((d, _)) = self.opt_duration(&t, "takeover_grace") {
            s.takeover_grace = Some(d);
        }
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "memory_runs", 0) {
            s.memory_runs = n;
        }
        if let Some((d, _)) = self.opt_duration(&t, "shutdown_grace") {
            s.shutdown_grace = d;
        }
        if let Some(d) = self.opt_positive_duration(&t, "heartbeat") {
            s.heartbeat = d;
        }
        if let Some((text, at)) = self.opt_str(&t, "listen") {
            match crate::config::model::parse_listen(&text) {
                Ok(addr) => s.listen = Some(addr),
                Err(e) => self.error(at, format!("`listen`: {e}")),
            }
        }
        if let Some(list) = self.stage_list(&t, "stages") {
            if list.is_empty() {
                let at = t.get("stages").map_or(0, |v| v.span().start);
                self.error(at, "`stages` must name at least one stage".to_string());
            } else {
                s.stages = list;
            }
        }
        if let Some(list) = self.stage_list(&t, "require_approval_for") {
            s.require_approval_for = list;
        }
        if let Some(a) = self.opt_table(&t, "alert", "the `alert` table of [scheduler]".into()) {
            s.alert = self.alert(&a);
        }
        s
    }

    /// A list of stage names; a typo is an error naming the right one.
    fn stage_list(&mut self, t: &Tbl, key: &str) -> Option<Vec<Stage>> {
        let items = self.opt_str_list(t, key)?;
        let mut out = vec![];
        for (name, at) in items {
            match Stage::ALL.iter().find(|(n, _)| *n == name) {
                Some((_, st)) => {
                    if !out.contains(st) {
                        out.push(*st);
                    }
                }
                None => {
                    let help =
                        crate::config::diagnostic::did_you_mean(&name, Stage::ALL.iter().map(|(n, _)| *n));
                    self.error_help(at, format!("`{name}` is not a stage in `{key}`"), help);
                }
            }
        }
        Some(out)
    }

    /// `[alert.routes]`: owner → alert sink, each as `[scheduler] alert`.
    pub(super) fn alert_routes(&mut self, root: &Tbl) -> std::collections::BTreeMap<String, AlertSink> {
        let mut out = std::collections::BTreeMap::new();
        let Some(t) = self.opt_table(root, "alert", "[alert]".into()) else {
            return out;
        };
        self.check_keys(&t, ALERT_SECTION_KEYS, &[], None);
        for (owner, mut sink) in self.named_tables(&t, "routes") {
            sink.label = format!("the route of `{owner}` in [alert.routes]");
            if let Some(s) = self.alert(&sink) {
                out.insert(owner, s);
            }
        }
        out
    }

    /// `[api]`: the bearer tokens file (read when the server starts), the
    /// connection cap and the header/idle timeout.
    pub(super) fn api(&mut self, root: &Tbl) -> ApiConfig {
        let mut api = ApiConfig::default();
        let Some(t) = self.opt_table(root, "api", "[api]".into()) else {
            return api;
        };
        self.check_keys(&t, API_KEYS, &[], None);
        api.tokens_file = self.opt_path(&t, "tokens_file");
        if let Some((n, _)) = self.opt_uint::<usize>(&t, "max_connections", 1) {
            api.max_connections = n;
        }
        if let Some(d) = self.opt_positive_duration(&t, "header_timeout") {
            api.header_timeout = d;
        }
        api
    }

    fn alert(&mut self, t: &Tbl) -> Option<AlertSink> {
        let kind = self.kind(t, &ALERT_KINDS)?;
        match kind {
            "file" => Some(AlertSink::File {
                path: self.req_path(t, "path")?,
            }),
            "webhook" => {
                let url = self.req_url(t, "url");
                let headers = self.opt_headers(t, "headers");
                let headers = super::value::default_if_absent(t, "headers", headers, Default::default());
                Some(AlertSink::Webhook {
                    url: url?,
                    headers: headers?,
                })
            }
            _ => Some(AlertSink::Command {
                command: self.req_argv(t, "command")?,
            }),
        }
    }
}
