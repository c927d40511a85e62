//! Secrets in the config: header values that name where a credential lives
//! instead of holding it (`${ENV:NAME}`, `${FILE:path}`, read when the request
//! is made), and the redaction that keeps credentials out of everything
//! agentcron shows or stores: the userinfo of a URL (`user:pass@`) and every
//! configured header value become `***` in gate reasons, attempt and delivery
//! errors, alerts' failures, events, logs, `show`, `events`, explain and the
//! console (the trace reader redacts URLs again, for rows written before).
//! A URL's query values named like a token, key, secret or password are
//! masked as its userinfo is. Config versions store the config with its
//! secrets sealed ([`sealed`]).

mod sealed;

pub use sealed::{Keyring, Sealed, fingerprint, hide_fingerprints, is_secret_param, seal};

use std::collections::BTreeMap;
use std::path::Path;

/// What a redacted part of a text becomes.
pub const MASK: &str = "***";

/// A header value template that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("header value: environment variable {0} is not set")]
    MissingEnv(String),
    #[error("header value: cannot read {path}: {message}")]
    File { path: String, message: String },
    #[error("header value: {0}")]
    Syntax(String),
    /// A stored config version holds secrets (named by where they are) that
    /// the config file at hand does not.
    #[error("its secrets are not in the config file: {}", .0.join(", "))]
    Missing(Vec<String>),
}

/// One piece of a header value template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part<'a> {
    Text(&'a str),
    Env(&'a str),
    File(&'a str),
}

/// Splits `template` into text and `${ENV:NAME}` / `${FILE:path}` references.
fn parts(template: &str) -> Result<Vec<Part<'_>>, SecretError> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            out.push(Part::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| SecretError::Syntax(format!("`${{` without a closing `}}` in `{template}`")))?;
        let inner = &after[..end];
        let part = match inner.split_once(':') {
            Some(("ENV", name)) if !name.is_empty() => Part::Env(name),
            Some(("FILE", path)) if !path.is_empty() => Part::File(path),
            _ => {
                return Err(SecretError::Syntax(format!(
                    "`${{{inner}}}`: use ${{ENV:NAME}} or ${{FILE:path}}"
                )));
            }
        };
        out.push(part);
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Part::Text(rest));
    }
    Ok(out)
}

/// Checks a template's syntax (at config load): no secret is read.
pub fn check(template: &str) -> Result<(), SecretError> {
    parts(template).map(|_| ())
}

/// Resolves a header value at request time: `${ENV:NAME}` from the
/// environment, `${FILE:path}` from the file's contents without the trailing
/// newline (a relative path against `dir`, the config's folder).
pub fn resolve(template: &str, dir: &Path) -> Result<String, SecretError> {
    let mut out = String::new();
    for part in parts(template)? {
        match part {
            Part::Text(t) => out.push_str(t),
            Part::Env(name) => {
                out.push_str(&std::env::var(name).map_err(|_| SecretError::MissingEnv(name.to_string()))?)
            }
            Part::File(path) => {
                let full = dir.join(path);
                let text = std::fs::read_to_string(&full).map_err(|e| SecretError::File {
                    path: full.display().to_string(),
                    message: e.to_string(),
                })?;
                out.push_str(text.trim_end_matches(['\n', '\r']));
            }
        }
    }
    Ok(out)
}

/// Resolved headers, and a [`Redactor`] that knows their values.
pub fn resolve_headers(
    headers: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<(Vec<(String, String)>, Redactor), SecretError> {
    let mut out = Vec::with_capacity(headers.len());
    let mut redactor = Redactor::default();
    for (name, template) in headers {
        let value = resolve(template, dir)?;
        redactor.secret(&value);
        out.push((name.clone(), value));
    }
    Ok((out, redactor))
}

/// Masks known secret values (and URL userinfo) in text meant for people.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Masks `value` from now on. Very short values are not masked: masking
    /// every `a` in a text hides nothing and mangles everything.
    pub fn secret(&mut self, value: &str) {
        if value.len() >= 4 {
            self.secrets.push(value.to_string());
            // The credential alone, too, when the value is `Scheme credential`.
            if let Some((_, credential)) = value.split_once(' ')
                && credential.len() >= 4
            {
                self.secrets.push(credential.to_string());
            }
        }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = redact_urls(text);
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }
}

/// `scheme://user:pass@host/…?token=t` → `scheme://***@host/…?token=***`
/// (a userinfo without a password too: it may be a token; and every query
/// value whose name says token, key, secret or password).
pub fn redact_url(url: &str) -> String {
    redact_urls(url)
}

/// [`redact_url`] for every URL in a free text.
pub fn redact_urls(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    sealed::rewrite_url_secrets(text, |_| MASK.to_string())
}

/// A schedule setting's value (TOML text) as people see it: a value of an
/// `env` or `headers` table masked whole (a version stored before secrets
/// were sealed holds it in clear), elsewhere fingerprints shown bare and
/// URLs redacted.
pub fn shown_setting(field: &str, value: &str) -> String {
    let mut tables = field.split('.').rev().skip(1);
    if tables.any(|t| sealed::SECRET_TABLES.contains(&t)) {
        return toml::Value::String(MASK.into()).to_string();
    }
    redact_urls(&hide_fingerprints(value))
}

/// Redacts URL userinfo in every string of a JSON value (event details).
pub fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) if s.contains("://") => *s = redact_urls(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_masked_wherever_a_url_appears() {
        assert_eq!(
            redact_url("http://user:PASS@host:8080/ready?x=1"),
            "http://***@host:8080/ready?x=1"
        );
        assert_eq!(
            redact_url("https://token@api.example/x"),
            "https://***@api.example/x"
        );
        assert_eq!(
            redact_url("http://host/a@b"),
            "http://host/a@b",
            "an @ in the path is no userinfo"
        );
        assert_eq!(
            redact_urls("GET http://u:p@h/x: connection refused; also ftp://a:b@c"),
            "GET http://***@h/x: connection refused; also ftp://***@c"
        );
        assert_eq!(
            redact_urls(&redact_urls("http://u:p@h")),
            "http://***@h",
            "idempotent"
        );
        assert_eq!(
            redact_urls(
                "GET http://h:9/x?a=1&token=tok3n&Api_Key=k#f failed; https://h/?SECRET=s&password=p"
            ),
            "GET http://h:9/x?a=1&token=***&Api_Key=***#f failed; https://h/?SECRET=***&password=***"
        );
        assert_eq!(
            redact_url("http://h/x?monkey=1"),
            "http://h/x?monkey=***",
            "`key` in the name"
        );
        assert_eq!(redact_url("http://h/x?page=2&q=a"), "http://h/x?page=2&q=a");
        let mut v = serde_json::json!({"reason": "GET http://u:SECRET@h → 503", "n": [ "x://a:b@c", "http://h?token=SECRET" ]});
        redact_json(&mut v);
        assert!(!v.to_string().contains("SECRET"), "{v}");
    }

    #[test]
    fn templates_read_env_and_files_at_request_time() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cret-file\n").unwrap();
        // SAFETY: a test-only variable no other test reads.
        unsafe {
            std::env::set_var("AGENTCRON_TEST_SECRET_ENV", "s3cret-env");
        }
        assert_eq!(
            resolve("Bearer ${ENV:AGENTCRON_TEST_SECRET_ENV}", dir.path()).unwrap(),
            "Bearer s3cret-env"
        );
        assert_eq!(resolve("${FILE:token}", dir.path()).unwrap(), "s3cret-file");
        assert_eq!(resolve("plain", dir.path()).unwrap(), "plain");
        assert_eq!(
            resolve("${ENV:AGENTCRON_TEST_UNSET_VAR}", dir.path()),
            Err(SecretError::MissingEnv("AGENTCRON_TEST_UNSET_VAR".into()))
        );
        assert!(matches!(
            resolve("${FILE:nope}", dir.path()),
            Err(SecretError::File { .. })
        ));
        assert!(check("${ENV:X").is_err());
        assert!(check("${VAULT:x}").unwrap_err().to_string().contains("ENV:NAME"));
        assert!(check("Bearer ${ENV:X} and ${FILE:y}").is_ok());
    }

    #[test]
    fn a_redactor_masks_header_values_and_their_credentials() {
        let mut r = Redactor::default();
        r.secret("Bearer abc123xyz");
        r.secret("x");
        assert_eq!(
            r.redact("sent Bearer abc123xyz; token abc123xyz at http://u:p@h"),
            "sent ***; token *** at http://***@h"
        );
    }
}
