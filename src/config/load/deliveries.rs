//! The `[[schedule.delivery]]` entries: where a run's result goes (file, webhook
//! or command) and the step name each delivery is journaled under.

use super::Loader;
use super::table::{Kinds, Tbl};
use super::value::default_if_absent;
use crate::config::model::{DeliveryConfig, DeliveryKind};
use std::collections::BTreeMap;

pub(super) const DELIVERY_KINDS: Kinds = Kinds {
    what: "delivery",
    common: &["kind", "name"],
    kinds: &[
        ("file", &["path"]),
        ("webhook", &["url", "headers"]),
        ("command", &["command"]),
    ],
};

impl Loader<'_> {
    pub(super) fn deliveries(&mut self, parent: &Tbl) -> Option<Vec<DeliveryConfig>> {
        let mut out = vec![];
        let tables = self.table_array(parent, "delivery");
        let mut ok = tables.is_some();
        let mut first_at = BTreeMap::new();
        for (n, (at, table)) in tables.unwrap_or_default().into_iter().enumerate() {
            let t = Tbl {
                table,
                at,
                label: format!("delivery #{} of {}", n + 1, parent.label),
            };
            let kind = self.kind(&t, &DELIVERY_KINDS);
            let name = self.opt_str(&t, "name");
            let kind = match kind {
                Some("file") => self.req_path(&t, "path").map(|path| DeliveryKind::File { path }),
                Some("webhook") => {
                    let url = self.req_url(&t, "url");
                    let headers = self.opt_headers(&t, "headers");
                    let headers = default_if_absent(&t, "headers", headers, BTreeMap::new());
                    url.zip(headers)
                        .map(|(url, headers)| DeliveryKind::Webhook { url, headers })
                }
                Some(_) => self
                    .req_argv(&t, "command")
                    .map(|command| DeliveryKind::Command { command }),
                None => None,
            };
            // The journal's step names: `deliver`, then `deliver-2`, … by position.
            let default_name = if n == 0 {
                "deliver".to_string()
            } else {
                format!("deliver-{}", n + 1)
            };
            let (name, name_at) = match name {
                Some((name, name_at)) => (Some(name), name_at),
                None if t.has("name") => (None, at),
                None => (Some(default_name), at),
            };
            if let Some(name) = &name
                && let Some(line) = self.repeated(&mut first_at, name, name_at)
            {
                let help = format!(
                    "the first delivery `{name}` is on line {line}; give each delivery its own `name`"
                );
                self.error_help(
                    name_at,
                    format!("delivery name `{name}` is used twice in {}", parent.label),
                    Some(help),
                );
                ok = false;
            }
            match (name, kind) {
                (Some(name), Some(kind)) => out.push(DeliveryConfig { name, kind }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }
}
