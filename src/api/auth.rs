//! Bearer tokens (`[api] tokens_file`): who may call the API, and for what.
//! A token is a secret: it is compared in constant time, never logged, never
//! echoed in an error; a caller is known by the token's `name`.

use serde::Deserialize;
use std::path::Path;

/// Shortest token accepted: a guessable token is no lock.
pub const MIN_TOKEN_LEN: usize = 16;

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Every `GET` of the API.
    Read,
    /// Reads, and the mutations (events, approvals, kill switch, pause …).
    Operate,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Operate => "operate",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    role: Role,
    token: String,
}

/// A caller the token file knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub role: Role,
}

/// The tokens the server accepts (none: the API is closed, only the probes
/// and `/metrics` answer).
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Caller)>,
}

impl std::fmt::Debug for Tokens {
    /// Names and roles only: the secrets stay out of any debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(_, c)| (&c.name, c.role.as_str())))
            .finish()
    }
}

/// Equal in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Tokens {
    /// Reads and checks a tokens file; errors name the file and the entry,
    /// never a token.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the tokens file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("tokens file {}: {e}", path.display()))
    }

    /// Parses the file's text (see [`Tokens::load`]).
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let file: File = toml::from_str(text).map_err(|e| e.message().to_string())?;
        let mut entries: Vec<(Vec<u8>, Caller)> = Vec::new();
        for (i, e) in file.token.into_iter().enumerate() {
            let which = format!("token {} (`{}`)", i + 1, e.name);
            if e.name.trim().is_empty() {
                return Err(format!("token {} has an empty name", i + 1));
            }
            if e.token.chars().count() < MIN_TOKEN_LEN || e.token.chars().any(char::is_whitespace) {
                return Err(format!(
                    "{which}: a token needs at least {MIN_TOKEN_LEN} characters and no spaces"
                ));
            }
            if entries.iter().any(|(t, _)| same(t, e.token.as_bytes())) {
                return Err(format!("{which}: the same token is listed twice"));
            }
            if entries.iter().any(|(_, c)| c.name == e.name) {
                return Err(format!("{which}: the name is listed twice"));
            }
            entries.push((
                e.token.into_bytes(),
                Caller {
                    name: e.name,
                    role: e.role,
                },
            ));
        }
        Ok(Tokens { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The caller an `Authorization` header value names, if any. The scheme
    /// is matched without regard to case (`Bearer`, `bearer`: RFC 7235 §2.1)
    /// and may be followed by more than one space. Every entry is compared,
    /// so the time taken does not tell which one matched.
    pub fn caller(&self, authorization: Option<&str>) -> Option<Caller> {
        let (scheme, token) = authorization?.trim_start().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let token = token.trim();
        let mut found = None;
        for (t, c) in &self.entries {
            if same(t, token.as_bytes()) {
                found = Some(c.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[token]]
name = "grafana"
role = "read"
token = "read-token-0123456789"

[[token]]
name = "chatops"
role = "operate"
token = "operate-token-0123456789"
"#;

    #[test]
    fn tokens_name_their_caller_and_role() {
        let t = Tokens::parse(FILE).unwrap();
        let c = t.caller(Some("Bearer operate-token-0123456789")).unwrap();
        assert_eq!((c.name.as_str(), c.role), ("chatops", Role::Operate));
        assert_eq!(
            t.caller(Some("Bearer read-token-0123456789")).unwrap().role,
            Role::Read
        );
        assert_eq!(t.caller(Some("Bearer nope")), None);
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            assert_eq!(
                t.caller(Some(&format!("{scheme}  read-token-0123456789")))
                    .map(|c| c.role),
                Some(Role::Read),
                "the scheme is case-insensitive: {scheme}"
            );
        }
        assert_eq!(t.caller(Some("Basic read-token-0123456789")), None);
        assert_eq!(t.caller(Some("Bearerread-token-0123456789")), None);
        assert_eq!(
            t.caller(Some("read-token-0123456789")),
            None,
            "needs the Bearer scheme"
        );
        assert_eq!(t.caller(None), None);
        assert!(
            !format!("{t:?}").contains("token-0123"),
            "debug output hides secrets"
        );
    }

    #[test]
    fn bad_files_are_refused_without_echoing_tokens() {
        let short = "[[token]]\nname = \"x\"\nrole = \"read\"\ntoken = \"short\"\n";
        let e = Tokens::parse(short).unwrap_err();
        assert!(e.contains("at least 16"), "{e}");
        assert!(!e.contains("short\""), "{e}");
        let role = "[[token]]\nname = \"x\"\nrole = \"admin\"\ntoken = \"0123456789abcdef\"\n";
        assert!(Tokens::parse(role).unwrap_err().contains("admin"));
        let dup = format!(
            "{FILE}\n[[token]]\nname = \"again\"\nrole = \"read\"\ntoken = \"read-token-0123456789\"\n"
        );
        assert!(Tokens::parse(&dup).unwrap_err().contains("twice"));
        assert!(Tokens::parse("tokens = 1").is_err(), "unknown keys are errors");
        assert!(Tokens::parse("").unwrap().is_empty());
    }
}
