//! The `[agents.NAME]` sections: how an agent runs (command or HTTP), its timeout,
//! environment, `verify` and its named steps.

use super::Loader;
use super::table::{Kinds, Tbl};
use super::value::default_if_absent;
use crate::config::model::{AgentConfig, AgentKind, StepConfig};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) const STEP_KEYS: &[&str] = &["name", "side_effect"];

pub(super) const AGENT_KINDS: Kinds = Kinds {
    what: "agent",
    common: &["kind", "timeout", "env", "verify", "steps"],
    kinds: &[
        ("command", &["command", "handshake"]),
        ("http", &["url", "headers"]),
    ],
};

impl Loader<'_> {
    pub(super) fn agents(&mut self, root: &Tbl) -> BTreeMap<String, AgentConfig> {
        let mut out = BTreeMap::new();
        for (name, t) in self.named_tables(root, "agents") {
            if let Some(agent) = self.agent(&name, &t) {
                out.insert(name, agent);
            }
        }
        out
    }

    fn agent(&mut self, name: &str, t: &Tbl) -> Option<AgentConfig> {
        let kind = self.kind(t, &AGENT_KINDS);
        let timeout = self.opt_positive_duration(t, "timeout");
        let env = self.opt_string_map(t, "env");
        let verify = self.opt_bool(t, "verify");
        let handshake = self.opt_bool(t, "handshake");
        let headers = self.opt_headers(t, "headers");
        let steps = self.steps(t);
        let kind = match kind? {
            "command" => AgentKind::Command {
                command: self.req_argv(t, "command")?,
            },
            _ => AgentKind::Http {
                url: self.req_url(t, "url")?,
            },
        };
        let timeout = default_if_absent(t, "timeout", timeout, Duration::from_secs(600))?;
        let env = default_if_absent(t, "env", env, BTreeMap::new())?;
        let verify = default_if_absent(t, "verify", verify, false)?;
        let handshake = default_if_absent(t, "handshake", handshake, false)?;
        let headers = default_if_absent(t, "headers", headers, BTreeMap::new())?;
        Some(AgentConfig {
            id: name.to_string(),
            kind,
            timeout,
            env,
            verify,
            steps: steps?,
            handshake,
            headers,
        })
    }

    fn steps(&mut self, t: &Tbl) -> Option<Vec<StepConfig>> {
        let mut out: Vec<StepConfig> = vec![];
        let mut first_at = BTreeMap::new();
        let tables = self.table_array(t, "steps");
        let mut ok = tables.is_some();
        for (at, table) in tables.unwrap_or_default() {
            let st = Tbl {
                table,
                at,
                label: format!("a step of {}", t.label),
            };
            self.check_keys(&st, STEP_KEYS, &[], None);
            let name = self.req_str(&st, "name");
            let side_effect = self.opt_bool(&st, "side_effect");
            let side_effect = default_if_absent(&st, "side_effect", side_effect, false);
            match (name, side_effect) {
                (Some((name, name_at)), Some(side_effect)) => {
                    if let Some(line) = self.repeated(&mut first_at, &name, name_at) {
                        let help = format!("the first `{name}` step is on line {line}");
                        self.error_help(name_at, format!("step `{name}` is declared twice"), Some(help));
                        ok = false;
                    }
                    out.push(StepConfig { name, side_effect });
                }
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }
}
