//! Every theme file in themes/ loads; parents are inherited field by field;
//! the compiled-in copies match the files; broken themes are refused with a
//! message that names the problem; NO_COLOR selects mono.

use agentcron::console::theme::{self, BUILTIN, Theme, ThemeError, Token, parse_theme};
use ratatui::style::{Color, Modifier};
use std::path::{Path, PathBuf};

fn themes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("themes")
}

fn theme_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(themes_dir())
        .expect("themes/ exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_file_in_themes_loads_and_defines_every_token() {
    let files = theme_files();
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let t = theme::load_file(&path, &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("stem");
        assert_eq!(
            t.name,
            stem,
            "the name inside {} matches its file name",
            path.display()
        );
        // Text and selection must differ from the background everywhere.
        assert_ne!(t.style(Token::Selection), t.base(), "{stem}: selection invisible");
    }
}

#[test]
fn the_shipped_themes_are_the_compiled_in_ones() {
    for path in theme_files() {
        let stem = path.file_stem().and_then(|s| s.to_str()).expect("stem");
        let text = std::fs::read_to_string(&path).expect("read");
        let builtin = BUILTIN.iter().find(|(n, _)| *n == stem).map(|(_, t)| *t);
        assert_eq!(builtin, Some(text.as_str()), "{stem} is compiled in unchanged");
    }
    for required in ["dark", "light", "mono", "high-contrast", "colorblind"] {
        assert!(Theme::builtin(required).is_ok(), "{required}");
    }
}

#[test]
fn parents_are_inherited_field_by_field() {
    let dark = Theme::builtin("dark").expect("dark");
    let cb = Theme::builtin("colorblind").expect("colorblind");
    // colorblind names only colours; the rest comes from dark.
    assert_eq!(cb.style(Token::Selection), dark.style(Token::Selection));
    assert_eq!(cb.style(Token::Fg), dark.style(Token::Fg));
    assert_eq!(cb.style(Token::Ok).fg, Some(Color::Rgb(0x56, 0xB4, 0xE9)));
    assert_ne!(cb.style(Token::Ok), dark.style(Token::Ok));

    // A user theme next to the config overrides one field of one token.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("mine.toml"),
        "name = \"mine\"\nparent = \"dark\"\n[tokens]\nerror = { underline = true }\nok = \"#00ff00\"\n",
    )
    .expect("write");
    let mine = theme::select(Some("mine"), false, &[dir.path().to_path_buf()]).expect("mine");
    let err = mine.style(Token::Error);
    assert_eq!(err.fg, dark.style(Token::Error).fg, "colour inherited");
    assert!(
        err.add_modifier.contains(Modifier::BOLD | Modifier::UNDERLINED),
        "bold kept, underline added"
    );
    assert_eq!(mine.style(Token::Ok).fg, Some(Color::Rgb(0, 255, 0)));
    // The same theme by path.
    let by_path = theme::select(
        Some(&dir.path().join("mine.toml").display().to_string()),
        false,
        &[],
    )
    .expect("by path");
    assert_eq!(by_path, mine);
    // A file in the search folder shadows a built-in of the same name.
    std::fs::write(
        dir.path().join("dark.toml"),
        "name = \"dark\"\nparent = \"mono\"\n[tokens]\nok = \"green\"\n",
    )
    .expect("write");
    let shadow = theme::select(Some("dark"), false, &[dir.path().to_path_buf()]).expect("shadow");
    assert_eq!(shadow.style(Token::Ok).fg, Some(Color::Green));
    assert_eq!(
        shadow.style(Token::Muted),
        Theme::builtin("mono").expect("mono").style(Token::Muted)
    );
}

#[test]
fn broken_themes_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(format!("{name}.toml")), text).expect("write")
    };
    write("a", "name = \"a\"\nparent = \"b\"\n");
    write("b", "name = \"b\"\nparent = \"a\"\n");
    let dirs = [dir.path().to_path_buf()];
    assert!(matches!(
        theme::select(Some("a"), false, &dirs),
        Err(ThemeError::Cycle { .. })
    ));
    write("partial", "name = \"partial\"\n[tokens]\nok = \"green\"\n");
    let e = theme::select(Some("partial"), false, &dirs).expect_err("missing tokens");
    assert!(e.to_string().contains("missing token(s) fg, bg, warn"), "{e}");
    assert!(matches!(
        theme::select(Some("nope"), false, &dirs),
        Err(ThemeError::NotFound { .. })
    ));
    for (text, needle) in [
        ("name = \"x\"\n[tokens]\nokk = \"green\"\n", "unknown token `okk`"),
        (
            "name = \"x\"\n[tokens]\nok = \"greenish\"\n",
            "unknown colour `greenish`",
        ),
        (
            "name = \"x\"\n[tokens]\nok = { blink = true }\n",
            "unknown field `blink`",
        ),
        ("name = \"x\"\ncolour = 1\n", "unknown key `colour`"),
        ("[tokens]\n", "missing `name`"),
        ("name = ", "theme t"),
    ] {
        let e = parse_theme(text, "t").expect_err(text);
        assert!(e.to_string().contains(needle), "{text:?}: {e}");
    }
}

#[test]
fn no_color_selects_mono_which_has_no_colour_but_keeps_attributes() {
    let t = theme::select(Some("colorblind"), true, &[]).expect("mono");
    assert_eq!(t.name, "mono");
    for token in Token::ALL {
        let s = t.style(token);
        assert!(matches!(s.fg, None | Some(Color::Reset)), "{token:?}");
        assert!(matches!(s.bg, None | Some(Color::Reset)), "{token:?}");
    }
    assert!(
        t.style(Token::Selection)
            .add_modifier
            .contains(Modifier::REVERSED)
    );
    assert!(t.style(Token::Focus).add_modifier.contains(Modifier::BOLD));
    assert!(theme::no_color_requested(Some("1")));
    assert!(!theme::no_color_requested(Some("")));
}
