//! Tables of the spanned tree: the [`Tbl`] view every section reads through,
//! getting sub-tables and arrays of tables, required keys, and the unknown-key
//! check (with "did you mean" and "does not apply to this kind").

use super::value::{a_type, article, list, pairs};
use super::{Loader, Value};
use crate::config::diagnostic::did_you_mean;
use toml::de::{DeTable, DeValue};

/// A TOML table being read, with where it starts and how messages name it.
pub(super) struct Tbl<'a, 'i> {
    pub(super) table: &'a DeTable<'i>,
    /// Byte offset of the table's header (or inline `{`): where "missing key" points.
    pub(super) at: usize,
    pub(super) label: String,
}

impl<'a, 'i> Tbl<'a, 'i> {
    pub(super) fn get(&self, key: &str) -> Option<&'a Value<'i>> {
        self.table.get(key)
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    pub(super) fn key_at(&self, key: &str) -> usize {
        self.table
            .get_key_value(key)
            .map(|(k, _)| k.span().start)
            .unwrap_or(self.at)
    }
}

/// A kinded table (`kind = "…"`): its kinds and the keys each one accepts besides
/// the common ones.
pub(super) struct Kinds {
    pub(super) what: &'static str,
    pub(super) common: &'static [&'static str],
    pub(super) kinds: &'static [(&'static str, &'static [&'static str])],
}

impl Kinds {
    pub(super) fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|(k, _)| *k).collect()
    }

    fn keys_of(&self, kind: &str) -> Vec<&'static str> {
        let own = self
            .kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, keys)| *keys)
            .unwrap_or(&[]);
        self.common.iter().chain(own).copied().collect()
    }

    pub(super) fn all_keys(&self) -> Vec<&'static str> {
        let mut all: Vec<&'static str> = self.common.to_vec();
        for key in self.kinds.iter().flat_map(|(_, keys)| keys.iter()) {
            if !all.contains(key) {
                all.push(key);
            }
        }
        all
    }
}

impl Loader<'_> {
    /// The entries of a `[section.NAME]` table of tables, each as a [`Tbl`].
    pub(super) fn named_tables<'a, 'i>(
        &mut self,
        root: &Tbl<'a, 'i>,
        section: &str,
    ) -> Vec<(String, Tbl<'a, 'i>)> {
        let Some(v) = root.get(section) else {
            return vec![];
        };
        let DeValue::Table(t) = v.get_ref() else {
            self.type_error(section, v, "a table of named entries");
            return vec![];
        };
        let mut out = vec![];
        for (name, entry) in t.iter() {
            let name = name.get_ref().to_string();
            match entry.get_ref() {
                DeValue::Table(inner) => out.push((
                    name.clone(),
                    Tbl {
                        table: inner,
                        at: entry.span().start,
                        label: format!("[{section}.{name}]"),
                    },
                )),
                _ => self.type_error(&format!("{section}.{name}"), entry, "a table"),
            }
        }
        out
    }

    /// The tables of an array of tables such as `[[schedule]]`, each with where it
    /// starts; `None` (reported) when `key` is present but not an array.
    pub(super) fn table_array<'a, 'i>(
        &mut self,
        parent: &Tbl<'a, 'i>,
        key: &str,
    ) -> Option<Vec<(usize, &'a DeTable<'i>)>> {
        let Some(v) = parent.get(key) else {
            return Some(vec![]);
        };
        let DeValue::Array(items) = v.get_ref() else {
            let help = format!("write each entry as its own [[{key}]] table (double brackets)");
            let found = a_type(v.get_ref());
            self.error_help(
                v.span().start,
                format!("`{key}` must be an array of tables, not {found}"),
                Some(help),
            );
            return None;
        };
        let mut out = vec![];
        for item in items.iter() {
            match item.get_ref() {
                DeValue::Table(t) => out.push((item.span().start, t)),
                other => self.error(
                    item.span().start,
                    format!("each `{key}` entry must be a table, not {}", a_type(other)),
                ),
            }
        }
        Some(out)
    }

    pub(super) fn opt_table<'a, 'i>(
        &mut self,
        t: &Tbl<'a, 'i>,
        key: &str,
        label: String,
    ) -> Option<Tbl<'a, 'i>> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Table(table) => Some(Tbl {
                table,
                at: v.span().start,
                label,
            }),
            _ => {
                self.type_error(key, v, "a table");
                None
            }
        }
    }

    /// Reports keys of `t` not in `allowed`. Keys that are valid for another kind
    /// of the same table (`related`) get a "does not apply" message instead.
    pub(super) fn check_keys(
        &mut self,
        t: &Tbl,
        allowed: &[&str],
        related: &[&str],
        kind: Option<(&str, &str)>,
    ) {
        for (key, _) in t.table.iter() {
            let name = key.get_ref().as_ref();
            if allowed.contains(&name) {
                continue;
            }
            let at = key.span().start;
            if related.contains(&name) {
                let (what, kind) = kind.unwrap_or(("table", ""));
                self.error_help(
                    at,
                    format!(
                        "`{name}` does not apply to {} {what} of kind `{kind}`",
                        article(what)
                    ),
                    Some(format!(
                        "keys of a `{kind}` {what}: {}",
                        list(allowed.iter().copied())
                    )),
                );
                continue;
            }
            let help = did_you_mean(name, allowed.iter().copied())
                .unwrap_or_else(|| format!("known keys here: {}", list(allowed.iter().copied())));
            self.error_help(at, format!("unknown key `{name}` in {}", t.label), Some(help));
        }
    }

    /// Reads `kind` and checks the table's keys against it. Without a valid kind
    /// the keys are still checked against those of every kind.
    pub(super) fn kind(&mut self, t: &Tbl, kinds: &Kinds) -> Option<&'static str> {
        let names = kinds.names();
        let kind = self.req(t, "kind", |l, t, key| l.opt_enum(t, key, &pairs(&names)));
        match kind {
            Some(k) => {
                let allowed = kinds.keys_of(k);
                self.check_keys(t, &allowed, &kinds.all_keys(), Some((kinds.what, k)));
            }
            None => self.check_keys(t, &kinds.all_keys(), &[], None),
        }
        kind
    }

    /// Reports a missing required key at the table's start; true when present.
    pub(super) fn require(&mut self, t: &Tbl, key: &str) -> bool {
        if t.has(key) {
            return true;
        }
        self.error(t.at, format!("{} is missing the required key `{key}`", t.label));
        false
    }

    /// A required key: reported missing at the table's start, else read by `read`.
    pub(super) fn req<T>(
        &mut self,
        t: &Tbl,
        key: &str,
        read: impl FnOnce(&mut Self, &Tbl, &str) -> Option<T>,
    ) -> Option<T> {
        if self.require(t, key) {
            read(self, t, key)
        } else {
            None
        }
    }

    pub(super) fn type_error(&mut self, key: &str, v: &Value, want: &str) {
        let found = a_type(v.get_ref());
        self.error(v.span().start, format!("`{key}` must be {want}, not {found}"));
    }
}
