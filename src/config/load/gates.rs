//! Layer 2 of a schedule, its `[[schedule.gate]]` entries: one reader per gate
//! kind, unique gate names, `expect` comparisons and the calendar a calendar gate
//! checks.

use super::table::{Kinds, Tbl};
use super::value::{a_type, default_if_absent, raw};
use super::{Declared, Loader};
use crate::config::expect::parse_expect;
use crate::config::model::{CredentialSource, Expect, GateConfig, GateKind, OnFail};
use std::collections::BTreeMap;
use std::time::Duration;
use toml::de::DeValue;

pub(super) const GATE_KINDS: Kinds = Kinds {
    what: "gate",
    common: &["kind", "name", "on_fail", "timeout"],
    kinds: &[
        ("previous_run_finished", &[]),
        ("file_exists", &["path", "min_size", "newer_than_window"]),
        ("sqlite_query", &["database", "query", "expect"]),
        ("command", &["command"]),
        ("http", &["url", "status", "json_pointer", "expect", "headers"]),
        ("credential_valid", &["file", "command", "min_remaining"]),
        ("calendar", &["calendar"]),
    ],
};

impl Loader<'_> {
    pub(super) fn gates(
        &mut self,
        parent: &Tbl,
        d: &Declared,
        schedule_calendar: bool,
    ) -> Option<Vec<GateConfig>> {
        let mut out = vec![];
        let tables = self.table_array(parent, "gate");
        let mut ok = tables.is_some();
        let mut first_at = BTreeMap::new();
        for (n, (at, table)) in tables.unwrap_or_default().into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("gate #{} of {}", n + 1, parent.label),
            };
            match self.gate(&t, d, schedule_calendar) {
                Some(g) => {
                    let name_at = t.get("name").map(|v| v.span().start).unwrap_or(at);
                    if let Some(line) = self.repeated(&mut first_at, &g.name, name_at) {
                        let help = format!(
                            "the first gate `{}` is on line {line}; give each gate its own `name`",
                            g.name,
                        );
                        self.error_help(
                            name_at,
                            format!("gate name `{}` is used twice in {}", g.name, parent.label),
                            Some(help),
                        );
                        ok = false;
                    }
                    out.push(g);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn gate(&mut self, t: &Tbl, d: &Declared, schedule_calendar: bool) -> Option<GateConfig> {
        let kind_name = self.kind(t, &GATE_KINDS);
        let name = self.opt_str(t, "name").map(|(n, _)| n);
        let on_fail = self.opt_enum(
            t,
            "on_fail",
            &[
                ("skip", OnFail::Skip),
                ("fail", OnFail::Fail),
                ("human", OnFail::Human),
            ],
        );
        let timeout = self.opt_positive_duration(t, "timeout");
        let kind = match kind_name? {
            "previous_run_finished" => Some(GateKind::PreviousRunFinished),
            "file_exists" => {
                let path = self.req_path(t, "path");
                let min_size = self.opt_uint::<u64>(t, "min_size", 0).map(|(n, _)| n);
                let newer = self.opt_bool(t, "newer_than_window");
                Some(GateKind::FileExists {
                    path: path?,
                    min_size: default_if_absent(t, "min_size", min_size.map(Some), None)?,
                    newer_than_window: default_if_absent(t, "newer_than_window", newer, false)?,
                })
            }
            "sqlite_query" => {
                let database = self.req_path(t, "database");
                let query = self.req_str(t, "query").and_then(|(q, at)| {
                    if q.trim().is_empty() {
                        self.error(at, "`query` must not be empty");
                        None
                    } else {
                        Some(q)
                    }
                });
                let expect = self.req(t, "expect", Self::opt_expect);
                Some(GateKind::SqliteQuery {
                    database: database?,
                    query: query?,
                    expect: expect?,
                })
            }
            "command" => Some(GateKind::Command {
                command: self.req_argv(t, "command")?,
            }),
            "http" => {
                let url = self.req_url(t, "url");
                let status = self.opt_uint::<u16>(t, "status", 100).and_then(|(s, at)| {
                    if s > 599 {
                        self.error(at, format!("`status` must be an HTTP status (100-599), not {s}"));
                        None
                    } else {
                        Some(s)
                    }
                });
                let pointer = self.opt_str(t, "json_pointer").and_then(|(p, at)| {
                    if p.is_empty() || p.starts_with('/') {
                        Some(p)
                    } else {
                        self.error_help(
                            at,
                            format!("`json_pointer` `{p}` must start with `/`"),
                            Some(format!("JSON pointers look like \"/{p}\" (RFC 6901)")),
                        );
                        None
                    }
                });
                let expect = self.opt_expect(t, "expect");
                let headers = self.opt_headers(t, "headers");
                Some(GateKind::Http {
                    headers: default_if_absent(t, "headers", headers, Default::default())?,
                    url: url?,
                    status: default_if_absent(t, "status", status, 200)?,
                    json_pointer: default_if_absent(t, "json_pointer", pointer.map(Some), None)?,
                    expect: default_if_absent(t, "expect", expect.map(Some), None)?,
                })
            }
            "credential_valid" => {
                let source = match (t.has("file"), t.has("command")) {
                    (true, false) => self.opt_path(t, "file").map(CredentialSource::File),
                    (false, true) => self.opt_argv(t, "command").map(CredentialSource::Command),
                    (true, true) => {
                        self.error_help(
                            t.key_at("command"),
                            "a credential_valid gate takes `file` or `command`, not both",
                            Some("keep the one that prints the expiry".into()),
                        );
                        None
                    }
                    (false, false) => {
                        self.error_help(
                            t.at,
                            format!("{} (credential_valid) needs `file` or `command`", t.label),
                            Some("`file` is read, `command` is run; the first line holds the expiry".into()),
                        );
                        None
                    }
                };
                let min_remaining = self.opt_duration(t, "min_remaining").map(|(d, _)| d);
                Some(GateKind::CredentialValid {
                    source: source?,
                    min_remaining: default_if_absent(t, "min_remaining", min_remaining, Duration::ZERO)?,
                })
            }
            _ => {
                let calendar = match self.opt_str(t, "calendar") {
                    Some((c, at)) => self.reference(at, "calendar", c, &d.calendars, false).map(Some),
                    None if t.has("calendar") => None,
                    None if !schedule_calendar => {
                        self.error_help(
                            t.at,
                            format!("{} (calendar) has no calendar to check", t.label),
                            Some("set `calendar` on the gate or on the schedule".into()),
                        );
                        None
                    }
                    None => Some(None),
                };
                calendar.map(|calendar| GateKind::Calendar { calendar })
            }
        };
        let kind = kind?;
        Some(GateConfig {
            name: default_if_absent(t, "name", name, kind.kind_name().to_string())?,
            on_fail: default_if_absent(t, "on_fail", on_fail, OnFail::Fail)?,
            timeout: default_if_absent(t, "timeout", timeout, Duration::from_secs(30))?,
            kind,
        })
    }

    fn opt_expect(&mut self, t: &Tbl, key: &str) -> Option<Expect> {
        let v = t.get(key)?;
        let DeValue::String(s) = v.get_ref() else {
            let help = match v.get_ref() {
                DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) => Some(format!(
                    "write a comparison string, e.g. `{key} = \"== {}\"`",
                    raw(v.get_ref())
                )),
                _ => None,
            };
            let found = a_type(v.get_ref());
            self.error_help(
                v.span().start,
                format!("`{key}` must be a comparison string like \"> 0\", not {found}"),
                help,
            );
            return None;
        };
        match parse_expect(s) {
            Ok(e) => Some(e),
            Err(m) => {
                self.error(v.span().start, m);
                None
            }
        }
    }
}
