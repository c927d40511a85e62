//! Themes: TOML files of semantic tokens (`ok`, `warn`, `error`, …) with an
//! optional `parent`. The console asks for a token's style, never for a colour,
//! and every state is also a glyph and a word, so a theme only adds colour.
//!
//! NO_COLOR and `--no-color` are handled here by selecting `mono`, which keeps
//! bold, dim, underline and reverse; the shell forces crossterm to emit those
//! attributes (crossterm's own NO_COLOR handling would wipe them).
//!
//! The shipped themes are compiled in, so the binary works from any folder; a
//! file `themes/NAME.toml` next to the config (or a path given to `--theme`)
//! overrides or extends them, and may name a built-in as its parent.

use ratatui::style::{Color, Modifier, Style};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// What a piece of the screen means; themes map each to a style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Token {
    /// Default text.
    Fg,
    /// Screen background.
    Bg,
    Ok,
    Warn,
    Error,
    Paused,
    /// Waiting on a readiness gate.
    Gated,
    Muted,
    Accent,
    /// The focused pane's border and title.
    Focus,
    /// The selected row or cell.
    Selection,
}

impl Token {
    pub const ALL: [Token; 11] = [
        Token::Fg,
        Token::Bg,
        Token::Ok,
        Token::Warn,
        Token::Error,
        Token::Paused,
        Token::Gated,
        Token::Muted,
        Token::Accent,
        Token::Focus,
        Token::Selection,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Token::Fg => "fg",
            Token::Bg => "bg",
            Token::Ok => "ok",
            Token::Warn => "warn",
            Token::Error => "error",
            Token::Paused => "paused",
            Token::Gated => "gated",
            Token::Muted => "muted",
            Token::Accent => "accent",
            Token::Focus => "focus",
            Token::Selection => "selection",
        }
    }

    pub fn parse(s: &str) -> Option<Token> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The shipped themes, compiled in (the files in `themes/`).
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("mono", include_str!("../../themes/mono.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
    ("colorblind", include_str!("../../themes/colorblind.toml")),
];

/// The theme used when none is chosen.
pub const DEFAULT_THEME: &str = "dark";
/// The theme NO_COLOR and `--no-color` select.
pub const NO_COLOR_THEME: &str = "mono";
/// Parent chains longer than this are refused (a cycle, or a mistake).
const MAX_DEPTH: usize = 8;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ThemeError {
    #[error("unknown theme `{name}` (available: {available})")]
    NotFound { name: String, available: String },
    #[error("cannot read theme {path}: {message}")]
    Read { path: String, message: String },
    #[error("theme {source_name}: {message}")]
    Invalid { source_name: String, message: String },
    #[error("theme parents form a cycle: {chain}")]
    Cycle { chain: String },
}

/// One token as written: every field optional, so a child theme can change
/// only what it names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenSpec {
    pub fg: Option<Color>,
    pub bg: Option<Color>,
    pub bold: Option<bool>,
    pub dim: Option<bool>,
    pub italic: Option<bool>,
    pub underline: Option<bool>,
    pub reverse: Option<bool>,
}

impl TokenSpec {
    /// `self` over `parent`, field by field.
    fn over(&self, parent: &TokenSpec) -> TokenSpec {
        TokenSpec {
            fg: self.fg.or(parent.fg),
            bg: self.bg.or(parent.bg),
            bold: self.bold.or(parent.bold),
            dim: self.dim.or(parent.dim),
            italic: self.italic.or(parent.italic),
            underline: self.underline.or(parent.underline),
            reverse: self.reverse.or(parent.reverse),
        }
    }

    fn style(&self) -> Style {
        let mut style = Style::default();
        if let Some(c) = self.fg {
            style = style.fg(c);
        }
        if let Some(c) = self.bg {
            style = style.bg(c);
        }
        let flags = [
            (self.bold, Modifier::BOLD),
            (self.dim, Modifier::DIM),
            (self.italic, Modifier::ITALIC),
            (self.underline, Modifier::UNDERLINED),
            (self.reverse, Modifier::REVERSED),
        ];
        for (on, m) in flags {
            if on == Some(true) {
                style = style.add_modifier(m);
            }
        }
        style
    }
}

/// A theme file, parsed but not yet merged with its parent.
#[derive(Debug, Clone, PartialEq)]
pub struct ThemeFile {
    pub name: String,
    pub description: String,
    pub parent: Option<String>,
    pub tokens: BTreeMap<Token, TokenSpec>,
}

/// A resolved theme: every token has a style.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub description: String,
    styles: [Style; Token::ALL.len()],
}

impl Theme {
    /// The style of a token (patch it over [`Theme::base`]).
    pub fn style(&self, token: Token) -> Style {
        self.styles[token.index()]
    }

    /// Default text on the background: what the whole screen is filled with.
    pub fn base(&self) -> Style {
        self.style(Token::Bg).patch(self.style(Token::Fg))
    }

    /// The built-in theme `name`.
    pub fn builtin(name: &str) -> Result<Theme, ThemeError> {
        resolve_chain(name, &[])
    }

    /// The default theme. The built-in files are checked by tests, so this
    /// cannot fail in a built binary; a broken file falls back to plain styles.
    pub fn default_theme() -> Theme {
        Theme::builtin(DEFAULT_THEME).unwrap_or_else(|_| Theme::plain())
    }

    /// Unstyled (terminal defaults plus reverse for the selection).
    pub fn plain() -> Theme {
        let mut styles = [Style::default(); Token::ALL.len()];
        styles[Token::Selection.index()] = Style::default().add_modifier(Modifier::REVERSED);
        styles[Token::Focus.index()] = Style::default().add_modifier(Modifier::BOLD);
        Theme {
            name: "plain".into(),
            description: String::new(),
            styles,
        }
    }
}

/// Names of the shipped themes.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

fn builtin_source(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Picks the console's theme. `no_color` (NO_COLOR set, or `--no-color`) wins
/// over `choice` and selects `mono`. `choice` is a theme name or a path to a
/// `.toml` file; names are looked up as `NAME.toml` in `search_dirs` first,
/// then among the built-ins.
pub fn select(choice: Option<&str>, no_color: bool, search_dirs: &[PathBuf]) -> Result<Theme, ThemeError> {
    if no_color {
        return resolve_chain(NO_COLOR_THEME, search_dirs);
    }
    let choice = choice.unwrap_or(DEFAULT_THEME);
    if looks_like_path(choice) {
        return load_file(Path::new(choice), search_dirs);
    }
    resolve_chain(choice, search_dirs)
}

/// True when NO_COLOR asks for no colour (set and not empty, per no-color.org).
pub fn no_color_requested(env_value: Option<&str>) -> bool {
    env_value.is_some_and(|v| !v.is_empty())
}

fn looks_like_path(s: &str) -> bool {
    s.ends_with(".toml") || s.contains('/') || s.contains(std::path::MAIN_SEPARATOR)
}

/// Loads a theme file; its parent is looked up next to it, then in
/// `search_dirs`, then among the built-ins.
pub fn load_file(path: &Path, search_dirs: &[PathBuf]) -> Result<Theme, ThemeError> {
    let text = std::fs::read_to_string(path).map_err(|e| ThemeError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let file = parse_theme(&text, &path.display().to_string())?;
    let mut dirs: Vec<PathBuf> = path.parent().map(Path::to_path_buf).into_iter().collect();
    dirs.extend(search_dirs.iter().cloned());
    let mut chain = vec![file.name.clone()];
    let spec = merge_parents(file, &dirs, &mut chain)?;
    finish(spec, &path.display().to_string())
}

struct Merged {
    name: String,
    description: String,
    tokens: BTreeMap<Token, TokenSpec>,
}

fn resolve_chain(name: &str, dirs: &[PathBuf]) -> Result<Theme, ThemeError> {
    let file = find_named(name, dirs)?;
    let mut chain = vec![name.to_string()];
    let merged = merge_parents(file, dirs, &mut chain)?;
    finish(merged, name)
}

fn find_named(name: &str, dirs: &[PathBuf]) -> Result<ThemeFile, ThemeError> {
    for dir in dirs {
        let path = dir.join(format!("{name}.toml"));
        if path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|e| ThemeError::Read {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            return parse_theme(&text, &path.display().to_string());
        }
    }
    match builtin_source(name) {
        Some(text) => parse_theme(text, &format!("{name} (built-in)")),
        None => Err(ThemeError::NotFound {
            name: name.to_string(),
            available: builtin_names().join(", "),
        }),
    }
}

fn merge_parents(file: ThemeFile, dirs: &[PathBuf], chain: &mut Vec<String>) -> Result<Merged, ThemeError> {
    let Some(parent_name) = file.parent.clone() else {
        return Ok(Merged {
            name: file.name,
            description: file.description,
            tokens: file.tokens,
        });
    };
    if chain.contains(&parent_name) || chain.len() >= MAX_DEPTH {
        chain.push(parent_name);
        return Err(ThemeError::Cycle {
            chain: chain.join(" → "),
        });
    }
    chain.push(parent_name.clone());
    let parent = merge_parents(find_named(&parent_name, dirs)?, dirs, chain)?;
    let mut tokens = parent.tokens;
    for (token, spec) in file.tokens {
        let merged = match tokens.get(&token) {
            Some(p) => spec.over(p),
            None => spec,
        };
        tokens.insert(token, merged);
    }
    Ok(Merged {
        name: file.name,
        description: file.description,
        tokens,
    })
}

fn finish(merged: Merged, source_name: &str) -> Result<Theme, ThemeError> {
    let missing: Vec<&str> = Token::ALL
        .iter()
        .filter(|t| !merged.tokens.contains_key(t))
        .map(|t| t.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(ThemeError::Invalid {
            source_name: source_name.to_string(),
            message: format!(
                "missing token(s) {} (define them or name a `parent`)",
                missing.join(", ")
            ),
        });
    }
    let mut styles = [Style::default(); Token::ALL.len()];
    for (token, spec) in &merged.tokens {
        styles[token.index()] = spec.style();
    }
    Ok(Theme {
        name: merged.name,
        description: merged.description,
        styles,
    })
}

/// Parses one theme file without resolving its parent. Unknown keys, unknown
/// tokens and unknown colours are errors that name the place.
pub fn parse_theme(text: &str, source_name: &str) -> Result<ThemeFile, ThemeError> {
    let invalid = |message: String| ThemeError::Invalid {
        source_name: source_name.to_string(),
        message,
    };
    let table: toml::Table = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
    let mut name = None;
    let mut description = String::new();
    let mut parent = None;
    let mut tokens = BTreeMap::new();
    for (key, value) in &table {
        match key.as_str() {
            "name" => name = Some(as_str(value, "name").map_err(&invalid)?.to_string()),
            "description" => description = as_str(value, "description").map_err(&invalid)?.to_string(),
            "parent" => parent = Some(as_str(value, "parent").map_err(&invalid)?.to_string()),
            "tokens" => {
                let toml::Value::Table(t) = value else {
                    return Err(invalid("`tokens` must be a table".into()));
                };
                for (tk, tv) in t {
                    let token = Token::parse(tk).ok_or_else(|| {
                        let known: Vec<&str> = Token::ALL.iter().map(|t| t.as_str()).collect();
                        invalid(format!("unknown token `{tk}` (known: {})", known.join(", ")))
                    })?;
                    tokens.insert(token, parse_spec(tv, tk).map_err(&invalid)?);
                }
            }
            other => {
                return Err(invalid(format!(
                    "unknown key `{other}` (expected name, description, parent, tokens)"
                )));
            }
        }
    }
    let name = name.ok_or_else(|| invalid("missing `name`".into()))?;
    Ok(ThemeFile {
        name,
        description,
        parent,
        tokens,
    })
}

fn as_str<'v>(v: &'v toml::Value, key: &str) -> Result<&'v str, String> {
    v.as_str().ok_or_else(|| format!("`{key}` must be a string"))
}

fn parse_color(s: &str, token: &str) -> Result<Color, String> {
    Color::from_str(s).map_err(|_| {
        format!("token `{token}`: unknown colour `{s}` (a name such as green, \"#rrggbb\", or 0-255)")
    })
}

fn parse_spec(v: &toml::Value, token: &str) -> Result<TokenSpec, String> {
    match v {
        toml::Value::String(s) => Ok(TokenSpec {
            fg: Some(parse_color(s, token)?),
            ..TokenSpec::default()
        }),
        toml::Value::Table(t) => {
            let mut spec = TokenSpec::default();
            for (k, fv) in t {
                let flag = || {
                    fv.as_bool()
                        .ok_or_else(|| format!("token `{token}`: `{k}` must be true or false"))
                };
                match k.as_str() {
                    "fg" => spec.fg = Some(parse_color(as_str(fv, "fg")?, token)?),
                    "bg" => spec.bg = Some(parse_color(as_str(fv, "bg")?, token)?),
                    "bold" => spec.bold = Some(flag()?),
                    "dim" => spec.dim = Some(flag()?),
                    "italic" => spec.italic = Some(flag()?),
                    "underline" => spec.underline = Some(flag()?),
                    "reverse" => spec.reverse = Some(flag()?),
                    other => {
                        return Err(format!(
                            "token `{token}`: unknown field `{other}` (fg, bg, bold, dim, italic, underline, reverse)"
                        ));
                    }
                }
            }
            Ok(spec)
        }
        _ => Err(format!("token `{token}` must be a colour string or a table")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_resolve() {
        for name in builtin_names() {
            let t = Theme::builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(t.name, name);
        }
    }

    #[test]
    fn no_color_selects_mono_with_attributes() {
        let t = select(Some("dark"), true, &[]).expect("mono");
        assert_eq!(t.name, "mono");
        assert!(
            t.style(Token::Selection)
                .add_modifier
                .contains(Modifier::REVERSED)
        );
        assert!(t.style(Token::Error).add_modifier.contains(Modifier::BOLD));
        assert!(no_color_requested(Some("1")));
        assert!(!no_color_requested(Some("")));
        assert!(!no_color_requested(None));
    }
}
