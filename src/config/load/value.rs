//! Typed readers for single keys (strings, integers, numbers, durations, enums,
//! zones, paths, URLs, argv arrays, string maps) and the wording helpers their
//! messages share.
//!
//! Each `opt_*` returns None after reporting when the key is present but wrong, and
//! None silently when it is absent; [`default_if_absent`] tells the two apart.

use super::table::Tbl;
use super::{Loader, Value};
use crate::config::diagnostic::{closest, did_you_mean};
use crate::config::model::ErrorClass;
use crate::time::duration::parse_duration;
use chrono_tz::Tz;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::de::DeValue;

impl Loader<'_> {
    pub(super) fn opt_str(&mut self, t: &Tbl, key: &str) -> Option<(String, usize)> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::String(s) => Some((s.to_string(), v.span().start)),
            _ => {
                self.type_error(key, v, "a string");
                None
            }
        }
    }

    pub(super) fn req_str(&mut self, t: &Tbl, key: &str) -> Option<(String, usize)> {
        self.req(t, key, Self::opt_str)
    }

    /// The entries of an array value, each read by `item`; `want` names the whole
    /// ("an array of dates") when the value is not an array. Every bad entry is
    /// reported, and any makes the whole None.
    pub(super) fn array_of<T>(
        &mut self,
        key: &str,
        v: &Value,
        want: &str,
        mut item: impl FnMut(&mut Self, &Value) -> Option<T>,
    ) -> Option<Vec<T>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.type_error(key, v, want);
            return None;
        };
        let mut out = vec![];
        let mut ok = true;
        for entry in items.iter() {
            match item(self, entry) {
                Some(x) => out.push(x),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    pub(super) fn opt_str_list(&mut self, t: &Tbl, key: &str) -> Option<Vec<(String, usize)>> {
        let v = t.get(key)?;
        self.array_of(key, v, "an array of strings", |l, item| match item.get_ref() {
            DeValue::String(s) => Some((s.to_string(), item.span().start)),
            other => {
                l.error(
                    item.span().start,
                    format!("`{key}` entries must be strings, not {}", a_type(other)),
                );
                None
            }
        })
    }

    pub(super) fn opt_bool(&mut self, t: &Tbl, key: &str) -> Option<bool> {
        let v = t.get(key)?;
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.type_error(key, v, "true or false");
                None
            }
        }
    }

    /// A non-negative integer of at least `min` that fits `T`.
    pub(super) fn opt_uint<T: TryFrom<i64>>(&mut self, t: &Tbl, key: &str, min: i64) -> Option<(T, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        let DeValue::Integer(i) = v.get_ref() else {
            self.type_error(key, v, "an integer");
            return None;
        };
        let Ok(n) = i64::from_str_radix(i.as_str(), i.radix()) else {
            self.error(at, format!("`{key}` is out of range"));
            return None;
        };
        if n < min {
            self.error(at, format!("`{key}` must be at least {min}, not {n}"));
            return None;
        }
        match T::try_from(n) {
            Ok(x) => Some((x, at)),
            Err(_) => {
                self.error(at, format!("`{key}` = {n} is too large"));
                None
            }
        }
    }

    /// A finite number; integers are accepted where a float is expected.
    pub(super) fn opt_f64(&mut self, t: &Tbl, key: &str) -> Option<(f64, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        let n = match v.get_ref() {
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix()).ok().map(|n| n as f64),
            _ => {
                self.type_error(key, v, "a number");
                return None;
            }
        };
        match n {
            Some(n) if n.is_finite() => Some((n, at)),
            _ => {
                self.error(at, format!("`{key}` must be a finite number"));
                None
            }
        }
    }

    pub(super) fn opt_duration(&mut self, t: &Tbl, key: &str) -> Option<(Duration, usize)> {
        let v = t.get(key)?;
        let at = v.span().start;
        match v.get_ref() {
            DeValue::String(s) => match parse_duration(s) {
                Ok(d) => Some((d, at)),
                Err(m) => {
                    self.error(at, m);
                    None
                }
            },
            DeValue::Integer(i) => {
                self.error_help(
                    at,
                    format!("`{key}` must be a duration string, not an integer"),
                    Some(format!(
                        "write `{key} = \"{}s\"` (units: ms, s, m, h, d, w)",
                        i.as_str()
                    )),
                );
                None
            }
            _ => {
                self.type_error(key, v, "a duration string like \"5m\"");
                None
            }
        }
    }

    pub(super) fn opt_positive_duration(&mut self, t: &Tbl, key: &str) -> Option<Duration> {
        let (d, at) = self.opt_duration(t, key)?;
        if d.is_zero() {
            self.error(at, format!("`{key}` must be longer than 0s"));
            return None;
        }
        Some(d)
    }

    pub(super) fn opt_enum<T: Copy>(&mut self, t: &Tbl, key: &str, options: &[(&str, T)]) -> Option<T> {
        let (s, at) = self.opt_str(t, key)?;
        if let Some((_, v)) = options.iter().find(|(name, _)| *name == s) {
            return Some(*v);
        }
        let names = || options.iter().map(|(n, _)| *n);
        let help = match closest(&s, names()) {
            Some(c) => format!("did you mean `{c}`? expected one of: {}", list(names())),
            None => format!("expected one of: {}", list(names())),
        };
        self.error_help(at, format!("`{s}` is not a valid `{key}`"), Some(help));
        None
    }

    pub(super) fn opt_error_class(&mut self, t: &Tbl, key: &str) -> Option<ErrorClass> {
        self.opt_enum(
            t,
            key,
            &[
                ("retryable", ErrorClass::Retryable),
                ("non_retryable", ErrorClass::NonRetryable),
                ("needs_human", ErrorClass::NeedsHuman),
            ],
        )
    }

    pub(super) fn opt_tz(&mut self, t: &Tbl, key: &str) -> Option<Tz> {
        let (s, at) = self.opt_str(t, key)?;
        match s.parse::<Tz>() {
            Ok(tz) => Some(tz),
            Err(_) => {
                let help = did_you_mean(&s, chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()))
                    .unwrap_or_else(|| {
                        "use an IANA zone name such as `UTC`, `Europe/Berlin` or `Asia/Shanghai`".into()
                    });
                self.error_help(at, format!("unknown time zone `{s}`"), Some(help));
                None
            }
        }
    }

    pub(super) fn opt_path(&mut self, t: &Tbl, key: &str) -> Option<PathBuf> {
        let (s, at) = self.opt_str(t, key)?;
        if s.trim().is_empty() {
            self.error(at, format!("`{key}` must not be empty"));
            return None;
        }
        Some(self.resolve(&s))
    }

    pub(super) fn req_path(&mut self, t: &Tbl, key: &str) -> Option<PathBuf> {
        self.req(t, key, Self::opt_path)
    }

    pub(super) fn req_url(&mut self, t: &Tbl, key: &str) -> Option<String> {
        let (url, at) = self.req_str(t, key)?;
        if url.starts_with("http://") || url.starts_with("https://") {
            Some(url)
        } else {
            self.error(
                at,
                // Said in `check`, the log and `config_rejected`: no userinfo.
                format!(
                    "`{key}` must be an http:// or https:// URL, not `{}`",
                    crate::secrets::redact_url(&url)
                ),
            );
            None
        }
    }

    /// An argv array; a relative program path containing `/` resolves against the
    /// config folder so agents run the same from any working directory.
    pub(super) fn opt_argv(&mut self, t: &Tbl, key: &str) -> Option<Vec<String>> {
        let v = t.get(key)?;
        let at = v.span().start;
        let items = match v.get_ref() {
            DeValue::Array(items) => items,
            DeValue::String(s) => {
                let words: Vec<String> = s.split_whitespace().map(|w| format!("{w:?}")).collect();
                self.error_help(
                    at,
                    format!("`{key}` must be an argv array, not a string (no shell is involved)"),
                    Some(format!("write `{key} = [{}]`", words.join(", "))),
                );
                return None;
            }
            _ => {
                self.type_error(key, v, "an array of strings (argv)");
                return None;
            }
        };
        let mut argv = vec![];
        for item in items.iter() {
            match item.get_ref() {
                DeValue::String(s) => argv.push(s.to_string()),
                other => {
                    self.error(
                        item.span().start,
                        format!("`{key}` entries must be strings, not {}", a_type(other)),
                    );
                    return None;
                }
            }
        }
        let Some(program) = argv.first_mut() else {
            self.error_help(
                at,
                format!("`{key}` must not be empty"),
                Some(format!(
                    "give the program and its arguments, e.g. `{key} = [\"python3\", \"agent.py\"]`"
                )),
            );
            return None;
        };
        if program.trim().is_empty() {
            self.error(
                at,
                format!("the program (first entry) of `{key}` must not be empty"),
            );
            return None;
        }
        if program.contains('/') && !Path::new(program.as_str()).is_absolute() {
            *program = self.resolve(program).to_string_lossy().into_owned();
        }
        Some(argv)
    }

    pub(super) fn req_argv(&mut self, t: &Tbl, key: &str) -> Option<Vec<String>> {
        self.req(t, key, Self::opt_argv)
    }

    /// Request headers: a table of strings whose values may name secrets as
    /// `${ENV:NAME}` or `${FILE:path}` (checked here, read at request time).
    pub(super) fn opt_headers(&mut self, t: &Tbl, key: &str) -> Option<BTreeMap<String, String>> {
        let at = t.get(key)?.span().start;
        let headers = self.opt_string_map(t, key)?;
        let mut ok = true;
        for (name, value) in &headers {
            if let Err(e) = crate::secrets::check(value) {
                self.error(at, format!("`{key}.{name}`: {e}"));
                ok = false;
            }
        }
        ok.then_some(headers)
    }

    pub(super) fn opt_string_map(&mut self, t: &Tbl, key: &str) -> Option<BTreeMap<String, String>> {
        let v = t.get(key)?;
        let DeValue::Table(table) = v.get_ref() else {
            self.type_error(key, v, "a table of strings");
            return None;
        };
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (k, val) in table.iter() {
            match val.get_ref() {
                DeValue::String(s) => {
                    out.insert(k.get_ref().to_string(), s.to_string());
                }
                other => {
                    let help = match other {
                        DeValue::Integer(_) | DeValue::Float(_) | DeValue::Boolean(_) => {
                            Some(format!("quote it: `{} = \"{}\"`", k.get_ref(), raw(other)))
                        }
                        _ => None,
                    };
                    self.error_help(
                        val.span().start,
                        format!("`{key}.{}` must be a string, not {}", k.get_ref(), a_type(other)),
                        help,
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }
}

/// The value if the key was present and valid, the default if it was absent, and
/// None (already reported) if it was present but invalid.
pub(super) fn default_if_absent<T>(t: &Tbl, key: &str, value: Option<T>, default: T) -> Option<T> {
    match value {
        Some(v) => Some(v),
        None if !t.has(key) => Some(default),
        None => None,
    }
}

/// Enum options whose names are their values (the `kind` of a kinded table).
pub(super) fn pairs<'n>(names: &[&'n str]) -> Vec<(&'n str, &'n str)> {
    names.iter().map(|n| (*n, *n)).collect()
}

/// "`a`, `b`, `c`", for the lists in help lines.
pub(super) fn list<'n>(names: impl Iterator<Item = &'n str>) -> String {
    names.map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

pub(super) fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// A value's TOML type as messages name it ("not an integer").
pub(super) fn a_type(v: &DeValue) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The literal text of a scalar, for "write it like this" hints.
pub(super) fn raw(v: &DeValue) -> String {
    match v {
        DeValue::Integer(i) => i.to_string(),
        DeValue::Float(f) => f.as_str().to_string(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::String(s) => s.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(_) | DeValue::Table(_) => String::new(),
    }
}
