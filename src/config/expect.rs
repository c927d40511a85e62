//! The comparison strings of gates (`expect = "> 0"`, `"== 'ready'"`) parsed into
//! [`Expect`].

use super::model::{CompareOp, Expect, ExpectValue};

/// Parses `"> 0"`, `">= 10"`, `"== 'ready'"`, `"!= 0"`, `"< 5"`, `"<= 5"`, `"= 3"`
/// (`=` is `==`). Values are numbers, quoted text (`'…'` or `"…"`) or `true`/`false`;
/// ordering operators compare numbers only.
pub fn parse_expect(text: &str) -> Result<Expect, String> {
    let s = text.trim();
    // Two-character operators first so `>=` is not read as `>` followed by `=`.
    let ops = [
        (">=", CompareOp::Ge),
        ("<=", CompareOp::Le),
        ("==", CompareOp::Eq),
        ("!=", CompareOp::Ne),
        (">", CompareOp::Gt),
        ("<", CompareOp::Lt),
        ("=", CompareOp::Eq),
    ];
    let Some((op_text, op, rest)) = ops
        .iter()
        .find_map(|(t, op)| s.strip_prefix(t).map(|rest| (*t, *op, rest)))
    else {
        return Err(format!(
            "expect `{s}` must start with a comparison (==, !=, >, >=, <, <=), e.g. \"> 0\""
        ));
    };
    let v = rest.trim();
    if v.is_empty() {
        return Err(format!("expect `{s}` has no value after `{op_text}`"));
    }
    let quoted = |q: char| v.len() >= 2 && v.starts_with(q) && v.ends_with(q);
    let value = if quoted('\'') || quoted('"') {
        // Both quotes are one byte, so these slice bounds are char boundaries.
        ExpectValue::Text(v.get(1..v.len() - 1).unwrap_or_default().to_string())
    } else if v == "true" || v == "false" {
        ExpectValue::Bool(v == "true")
    } else {
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() => ExpectValue::Number(n),
            _ => {
                return Err(format!(
                    "`{v}` in expect `{s}` is not a number, 'quoted text', true or false"
                ));
            }
        }
    };
    let ordering = !matches!(op, CompareOp::Eq | CompareOp::Ne);
    if ordering && !matches!(value, ExpectValue::Number(_)) {
        return Err(format!(
            "`{op_text}` in expect `{s}` compares numbers only; use == or != for text and booleans"
        ));
    }
    Ok(Expect { op, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> (CompareOp, ExpectValue) {
        let e = parse_expect(s).unwrap();
        (e.op, e.value)
    }

    #[test]
    fn parses_every_operator() {
        assert_eq!(ok("> 0"), (CompareOp::Gt, ExpectValue::Number(0.0)));
        assert_eq!(ok(">= 10"), (CompareOp::Ge, ExpectValue::Number(10.0)));
        assert_eq!(
            ok("== 'ready'"),
            (CompareOp::Eq, ExpectValue::Text("ready".into()))
        );
        assert_eq!(ok("!= 0"), (CompareOp::Ne, ExpectValue::Number(0.0)));
        assert_eq!(ok("<5"), (CompareOp::Lt, ExpectValue::Number(5.0)));
        assert_eq!(ok(" <= 5.5 "), (CompareOp::Le, ExpectValue::Number(5.5)));
        assert_eq!(ok("= 3"), (CompareOp::Eq, ExpectValue::Number(3.0)));
        assert_eq!(ok("== true"), (CompareOp::Eq, ExpectValue::Bool(true)));
        assert_eq!(ok("== \"a b\""), (CompareOp::Eq, ExpectValue::Text("a b".into())));
        assert_eq!(ok("== ''"), (CompareOp::Eq, ExpectValue::Text(String::new())));
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "", "0", "> ", ">> 1", "== ready", "> 'a'", "< true", "== nan", "=> 1", "== 'x",
        ] {
            assert!(parse_expect(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
