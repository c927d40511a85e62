//! A config text as a config version stores it: every secret in it replaced
//! by its fingerprint (`***` and 16 hex digits), so the ledger never holds a
//! secret, while a changed secret still changes the text, the schedule's
//! settings and so its version. The secrets stay in the file; a [`Keyring`]
//! built from the file puts them back when a stored version is run.
//!
//! Secrets are: every value of an `env` or `headers` table, and in every
//! string that holds a URL, its userinfo and the values of query parameters
//! whose name says token, key, secret or password.

use super::{MASK, SecretError};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Hex digits of a fingerprint after [`MASK`].
const FINGERPRINT_DIGITS: usize = 16;

/// Tables whose every value is a secret.
pub(super) const SECRET_TABLES: &[&str] = &["env", "headers"];

/// Query parameters whose value is a secret: their name (lower-cased)
/// contains one of these.
const SECRET_PARAMS: &[&str] = &["token", "key", "secret", "password"];

/// `***` and the first 64 bits of SHA-256 over a domain tag and `secret`:
/// it tells whether a secret changed, never what it is. It is not keyed by a
/// secret of the database, so whoever reads the ledger can test a guess
/// against it — as with any hash; a guessable password stays guessable.
pub fn fingerprint(secret: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"agentcron config secret\0")
        .chain_update(secret.as_bytes())
        .finalize();
    let hex: String = digest
        .iter()
        .take(FINGERPRINT_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{MASK}{hex}")
}

/// Whether `s` is exactly a fingerprint.
pub fn is_fingerprint(s: &str) -> bool {
    fingerprint_len(s) == Some(s.len())
}

/// The length of the fingerprint `s` starts with, if it does.
fn fingerprint_len(s: &str) -> Option<usize> {
    let digits = s.strip_prefix(MASK)?.get(..FINGERPRINT_DIGITS)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        .then_some(MASK.len() + FINGERPRINT_DIGITS)
}

/// `text` with every fingerprint shown as a bare [`MASK`]: what people see.
pub fn hide_fingerprints(text: &str) -> String {
    replace_fingerprints(text, |_| Some(MASK.to_string())).0
}

/// Replaces each fingerprint in `text` by `f(fingerprint)`; the ones `f`
/// has nothing for are kept and returned.
fn replace_fingerprints(text: &str, mut f: impl FnMut(&str) -> Option<String>) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut unknown = vec![];
    let mut rest = text;
    while let Some(i) = rest.find(MASK) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match fingerprint_len(tail) {
            Some(n) => {
                let fp = &tail[..n];
                match f(fp) {
                    Some(s) => out.push_str(&s),
                    None => {
                        out.push_str(fp);
                        unknown.push(fp.to_string());
                    }
                }
                rest = &tail[n..];
            }
            None => {
                out.push_str(MASK);
                rest = &tail[MASK.len()..];
            }
        }
    }
    out.push_str(rest);
    (out, unknown)
}

/// Whether a query parameter named `name` carries a secret.
pub fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|p| name.contains(p))
}

/// The secrets of config texts, by fingerprint: what a stored version needs
/// to run. Its `Debug` says how many it holds, never which.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    secrets: BTreeMap<String, String>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keyring({} secrets)", self.secrets.len())
    }
}

impl Keyring {
    /// Keeps `secret`; returns its fingerprint.
    fn add(&mut self, secret: &str) -> String {
        let fp = fingerprint(secret);
        self.secrets
            .entry(fp.clone())
            .or_insert_with(|| secret.to_string());
        fp
    }

    /// Also knows `other`'s secrets.
    pub fn merge(&mut self, other: Keyring) {
        for (fp, s) in other.secrets {
            self.secrets.entry(fp).or_insert(s);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// The stored text `sealed` with its secrets back, or where it holds a
    /// secret this keyring does not know (`agents.remote.env.API_KEY`).
    pub fn unseal(&self, sealed: &str) -> Result<String, SecretError> {
        let mut missing = vec![];
        let text = rewrite_strings(sealed, |path, _, value| {
            if !value.contains(MASK) {
                return None;
            }
            let (restored, unknown) = replace_fingerprints(value, |fp| self.secrets.get(fp).cloned());
            if !unknown.is_empty() && !missing.contains(&path.to_string()) {
                missing.push(path.to_string());
            }
            (restored != value).then_some(restored)
        });
        if missing.is_empty() {
            Ok(text)
        } else {
            Err(SecretError::Missing(missing))
        }
    }
}

/// A config text with its secrets replaced by fingerprints, and the secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sealed {
    pub text: String,
    pub keyring: Keyring,
}

/// Seals config `text` (a text already sealed comes back the same). A text
/// that is not TOML has no values to seal: it is returned as it is (it never
/// loads, so it is never stored).
pub fn seal(text: &str) -> Sealed {
    let mut keyring = Keyring::default();
    let text = rewrite_strings(text, |_, table, value| {
        if SECRET_TABLES.contains(&table) {
            return (!value.is_empty() && !is_fingerprint(value)).then(|| keyring.add(value));
        }
        if !value.contains("://") {
            return None;
        }
        let sealed = rewrite_url_secrets(value, |secret| {
            if is_fingerprint(secret) {
                secret.to_string()
            } else {
                keyring.add(secret)
            }
        });
        (sealed != value).then_some(sealed)
    });
    Sealed { text, keyring }
}

/// `text` with the string values `f` rewrites (given each one's dotted path,
/// `schedule.0.gate.1.url`, the key of the table holding it, and its value)
/// replaced in place, as TOML strings: comments, order and every other byte
/// stay.
fn rewrite_strings(text: &str, mut f: impl FnMut(&str, &str, &str) -> Option<String>) -> String {
    // Cheap exits: nothing that could be a secret or a fingerprint.
    if !text.contains("://") && !text.contains(MASK) && !SECRET_TABLES.iter().any(|t| text.contains(t)) {
        return text.to_string();
    }
    let Ok(root) = DeTable::parse(text) else {
        return text.to_string();
    };
    let mut edits: Vec<(Range<usize>, String)> = vec![];
    walk_table(root.get_ref(), "", "", &mut |path, table, value, span| {
        if let Some(new) = f(path, table, value) {
            edits.push((span, toml::Value::String(new).to_string()));
        }
    });
    edits.sort_by_key(|(span, _)| span.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (span, literal) in edits {
        // A span that does not cover a whole string token is left alone
        // rather than cut (the parser gives each value's own span).
        let token = text.get(span.clone()).unwrap_or("");
        if span.start < at || !(token.starts_with('"') || token.starts_with('\'')) {
            continue;
        }
        out.push_str(&text[at..span.start]);
        out.push_str(&literal);
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Visits a string value: its path, the key of its table, its value, its span.
type Visit<'a> = dyn FnMut(&str, &str, &str, Range<usize>) + 'a;

/// The values of table `t` (itself under key `table`, at `prefix`).
fn walk_table(t: &DeTable<'_>, prefix: &str, table: &str, visit: &mut Visit<'_>) {
    for (k, v) in t.iter() {
        let path = if prefix.is_empty() {
            k.get_ref().to_string()
        } else {
            format!("{prefix}.{}", k.get_ref())
        };
        walk_value(v, &path, k.get_ref(), table, visit);
    }
}

/// Value `v` at `path`, under key `key` of a table under key `table` (an
/// array item keeps its array's key and table).
fn walk_value(v: &Spanned<DeValue<'_>>, path: &str, key: &str, table: &str, visit: &mut Visit<'_>) {
    match v.get_ref() {
        DeValue::String(s) => visit(path, table, s, v.span()),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_value(item, &format!("{path}.{i}"), key, table, visit);
            }
        }
        DeValue::Table(t) => walk_table(t, path, key, visit),
        _ => {}
    }
}

/// Every URL in `text` with its userinfo and its secret query values
/// replaced by `f(part)`.
pub(super) fn rewrite_url_secrets(text: &str, mut f: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The URL ends at whitespace or a quote; its authority at the first
        // `/`, `?` or `#`, and its userinfo is what precedes the last `@` in it.
        let url_end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .unwrap_or(tail.len());
        let url = &tail[..url_end];
        let auth_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let authority = &url[..auth_end];
        match authority.rfind('@') {
            Some(at) if at > 0 => {
                out.push_str(&f(&authority[..at]));
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        let after = &url[auth_end..];
        match after.find('?') {
            Some(q) => {
                out.push_str(&after[..=q]);
                let query_and_fragment = &after[q + 1..];
                let (query, fragment) = match query_and_fragment.find('#') {
                    Some(h) => query_and_fragment.split_at(h),
                    None => (query_and_fragment, ""),
                };
                let pairs: Vec<String> = query
                    .split('&')
                    .map(|pair| match pair.split_once('=') {
                        Some((k, v)) if !v.is_empty() && is_secret_param(k) => format!("{k}={}", f(v)),
                        _ => pair.to_string(),
                    })
                    .collect();
                out.push_str(&pairs.join("&"));
                out.push_str(fragment);
            }
            None => out.push_str(after),
        }
        rest = &tail[url_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
# a comment that stays
[scheduler]
database = "postgres://sched:pgPW-1@db.local/agentcron"

[agents.remote]
kind = "http"
url = "http://agent:URLPASS@127.0.0.1:9/agent?Api_Key=qk-1&x=1"
env = { API_KEY = "envs3cret", EMPTY = "" }
headers = { Authorization = "Bearer literal-tok" }

[[schedule]]
id = "s"
agent = "remote"
every = "1h"

[[schedule.gate]]
kind = "http"
name = "up"
url = 'http://user:s3cretPW@127.0.0.1:9/x?token=tok3n#frag'
"#;

    #[test]
    fn sealing_keeps_no_secret_and_unsealing_brings_them_back() {
        let sealed = seal(TEXT);
        for secret in [
            "pgPW-1",
            "URLPASS",
            "qk-1",
            "envs3cret",
            "literal-tok",
            "s3cretPW",
            "tok3n",
        ] {
            assert!(!sealed.text.contains(secret), "{secret} in\n{}", sealed.text);
        }
        assert!(sealed.text.contains("# a comment that stays"));
        assert!(sealed.text.contains("&x=1"), "{}", sealed.text);
        assert!(sealed.text.contains("EMPTY = \"\""), "{}", sealed.text);
        assert!(sealed.text.contains("#frag"), "{}", sealed.text);
        assert!(crate::config::load_str(&sealed.text, std::path::Path::new("/tmp/a.toml")).is_ok());
        // Sealing is idempotent, and the same secrets give the same text.
        assert_eq!(seal(&sealed.text).text, sealed.text);
        assert!(seal(&sealed.text).keyring.is_empty());
        assert_eq!(seal(TEXT).text, sealed.text);
        // Back to the file's values, exactly.
        let back = sealed.keyring.unseal(&sealed.text).unwrap();
        let parsed = |t: &str| toml::from_str::<toml::Table>(t).unwrap();
        assert_eq!(parsed(&back), parsed(TEXT));
        assert!(!format!("{:?}", sealed.keyring).contains("envs3cret"));
    }

    #[test]
    fn a_changed_secret_changes_the_sealed_text() {
        let a = seal(TEXT);
        let b = seal(&TEXT.replace("envs3cret", "envs3cret2"));
        assert_ne!(a.text, b.text);
        assert_eq!(
            a.text.lines().filter(|l| !b.text.contains(*l)).count(),
            1,
            "only the env line differs"
        );
    }

    #[test]
    fn unsealing_without_the_secrets_names_where_they_were() {
        let sealed = seal(TEXT);
        let other = seal(&TEXT.replace("envs3cret", "other"));
        match other.keyring.unseal(&sealed.text) {
            Err(SecretError::Missing(paths)) => assert_eq!(paths, ["agents.remote.env.API_KEY"]),
            x => panic!("{x:?}"),
        }
        assert_eq!(Keyring::default().unseal("a = 1\n").unwrap(), "a = 1\n");
    }

    #[test]
    fn fingerprints_are_hidden_from_people() {
        let fp = fingerprint("x-secret");
        assert!(is_fingerprint(&fp));
        assert_eq!(
            hide_fingerprints(&format!("\"{fp}\" and ***, ***zz")),
            "\"***\" and ***, ***zz"
        );
    }
}
