//! The published JSON Schemas of the agent protocol (docs/schema/, linked from
//! docs/PROTOCOL.md): the checked-in files are what `schemars` generates from
//! the types, they name exactly the binding fields of DESIGN.md "The agent
//! protocol", the envelopes the engine really writes validate against them, and
//! the line parser accepts exactly the lines the schema accepts.
//!
//! Regenerate the files after changing a protocol type:
//! `cargo test --test protocol_schema -- --ignored regenerate`.
//!
//! Validation is a small walker below (no validator crate): it knows the
//! keywords these schemas use and panics on any other, so a schema that grows
//! a keyword cannot pass unchecked.

mod support;

use agentcron::agent::protocol::{AgentLine, ProtocolLine, Reply, parse_line};
use agentcron::agent::schema;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use support::real::Real;

const REGENERATE: &str = "cargo test --test protocol_schema -- --ignored regenerate";

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema")
}

#[test]
fn the_checked_in_schemas_are_the_generated_ones() {
    for (name, text) in schema::files() {
        let path = schema_dir().join(name);
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == text,
            "docs/schema/{name} differs from what the protocol types generate; regenerate it with\n    {REGENERATE}\nand commit the result"
        );
    }
}

/// Writes docs/schema/ from the types (run by hand, see the module doc).
#[test]
#[ignore = "writes docs/schema/; run it to regenerate the published schemas"]
fn regenerate() {
    std::fs::create_dir_all(schema_dir()).unwrap();
    for (name, text) in schema::files() {
        std::fs::write(schema_dir().join(name), text).unwrap();
    }
}

#[test]
fn the_docs_link_every_schema_file() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/PROTOCOL.md")).unwrap();
    for (name, _) in schema::files() {
        assert!(
            doc.contains(&format!("(schema/{name})")),
            "docs/PROTOCOL.md links schema/{name}"
        );
    }
}

/// The property names of the object schema at `pointer`, and which are required.
fn fields(schema: &Value, pointer: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let object = schema.pointer(pointer).unwrap_or_else(|| panic!("no {pointer}"));
    let names = object["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{pointer} has properties"))
        .keys()
        .cloned()
        .collect();
    let required = object["required"]
        .as_array()
        .map(|r| r.iter().map(|n| n.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (names, required)
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Follows a `$ref` to its definition.
fn def<'a>(schema: &'a Value, at: &Value) -> &'a Value {
    let reference = at["$ref"].as_str().unwrap_or_else(|| panic!("a $ref: {at}"));
    schema.pointer(&reference[1..]).unwrap()
}

#[test]
fn the_schemas_name_exactly_the_binding_fields() {
    let envelope = schema::envelope();
    // DESIGN.md "The agent protocol", plus `resume_after` (docs/PROTOCOL.md)
    // and the handshake's `protocol` and `acks` (DESIGN.md "Side-effect handshake").
    let always = set(&[
        "run_id",
        "tenant",
        "schedule",
        "window",
        "idempotency_key",
        "attempt",
        "reason",
        "now",
        "context",
        "memory",
        "completed_steps",
        "uncertain_steps",
        "verify_step",
        "resume_after",
        "payload",
    ]);
    let (names, required) = fields(&envelope, "");
    assert_eq!(required, always, "every envelope field is always written");
    let mut all = always.clone();
    all.extend(set(&["protocol", "acks"]));
    assert_eq!(names, all);

    let window = def(&envelope, &envelope["properties"]["window"]);
    assert_eq!(fields(window, "").0, set(&["key", "start", "end", "timezone"]));
    let context = def(&envelope, &envelope["properties"]["context"]);
    assert_eq!(
        fields(context, "").0,
        set(&[
            "business_day",
            "since_last_success",
            "last_success_at",
            "timezone"
        ])
    );
    let memory = def(&envelope, &envelope["properties"]["memory"]["items"]);
    assert_eq!(fields(memory, "").0, set(&["window", "state", "summary"]));
    let reason = def(&envelope, &envelope["properties"]["reason"]);
    assert_eq!(
        enum_values(reason),
        set(&["scheduled", "retry", "catchup", "manual", "rehearsal", "verify"])
    );

    let line = schema::agent_line();
    let events: BTreeSet<String> = line["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["properties"]["event"]["const"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, set(&["heartbeat", "step", "usage", "result"]));
    let (result, required) = fields(&line, "/$defs/AgentResult");
    // DESIGN.md's result fields, plus `verified` and `rate_limited` (docs/PROTOCOL.md).
    assert_eq!(
        result,
        set(&[
            "status",
            "error_class",
            "summary",
            "processed",
            "message",
            "verified",
            "rate_limited"
        ])
    );
    assert_eq!(required, set(&["status"]));
    assert_eq!(fields(&line, "/$defs/StepEvent").0, set(&["name", "status"]));
    assert_eq!(fields(&line, "/$defs/UsageEvent").0, set(&["tokens", "cost_usd"]));
}

/// The values of a string enum schema (`enum`, or `oneOf` of `const`s).
fn enum_values(schema: &Value) -> BTreeSet<String> {
    if let Some(values) = schema["enum"].as_array() {
        return values.iter().map(|v| v.as_str().unwrap().to_string()).collect();
    }
    schema["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("an enum: {schema}"))
        .iter()
        .map(|v| v["const"].as_str().unwrap().to_string())
        .collect()
}

/// The demo agent of docs/PROTOCOL.md, saving the line it got on stdin (with
/// `head -n 1`: a handshake agent's stdin stays open) per run and attempt:
/// attempt 1 stops after starting `deliver`, attempt 2 is the verify attempt,
/// attempt 3 does the work.
const AGENT: &str = r#"#!/bin/sh
head -n 1 > "envelope-$AGENTCRON_RUN_ID-$AGENTCRON_ATTEMPT.json"
case "$AGENTCRON_ATTEMPT" in
1)  echo '{"event":"step","name":"fetch","status":"started"}'
    echo '{"event":"step","name":"fetch","status":"done"}'
    echo '{"event":"step","name":"deliver","status":"started"}'
    exit 75 ;;
2)  echo '{"event":"result","status":"success","verified":false}' ;;
*)  echo '{"event":"step","name":"deliver","status":"started"}'
    echo '{"event":"step","name":"deliver","status":"done"}'
    echo '{"event":"result","status":"success","summary":"3 tickets summarised","processed":3}' ;;
esac
"#;

const CONFIG: &str = r##"
[scheduler]
timezone = "Europe/Berlin"
lease = "60s"

[agents.v1]
kind = "command"
command = ["sh", "agent.sh"]
timeout = "30s"
verify = true
steps = [{ name = "fetch" }, { name = "deliver", side_effect = true }]

[agents.v2]
kind = "command"
command = ["sh", "agent.sh"]
timeout = "30s"
verify = true
handshake = true
steps = [{ name = "fetch" }, { name = "deliver", side_effect = true }]

[[schedule]]
id = "digest"
agent = "v1"
payload = { channel = "#support", n = [1, 2.5] }
cron = "0 9 * * *"
close_after = "1h"
retry = { max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }

[[schedule]]
id = "digest-acks"
agent = "v2"
cron = "0 9 * * *"
close_after = "1h"
retry = { max_attempts = 3, backoff = "fixed", initial = "1m", max = "1m", jitter = 0.0 }
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envelopes_the_engine_writes_validate() {
    let mut h = Real::new_with(CONFIG, "2026-06-06T06:59:00Z", |dir| {
        std::fs::write(dir.join("agent.sh"), AGENT).unwrap()
    });
    h.run_until("2026-06-07T12:00:00Z").await;

    let schema = schema::envelope();
    let mut envelopes = vec![];
    for entry in std::fs::read_dir(h.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("envelope-") {
            let text = std::fs::read_to_string(&path).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
            let errors = errors(&schema, &value);
            assert!(errors.is_empty(), "{name} does not validate: {errors:?}\n{text}");
            envelopes.push(value);
        }
    }
    // Two schedules, two days, three attempts each.
    assert_eq!(envelopes.len(), 12, "{envelopes:#?}");
    // Every shape the schema allows was seen, so none validated vacuously.
    let seen =
        |what: &str, test: &dyn Fn(&Value) -> bool| assert!(envelopes.iter().any(test), "no envelope {what}");
    seen("with acks", &|e| e["acks"] == true && e["protocol"] == 2);
    seen("without acks", &|e| {
        e.get("acks").is_none() && e.get("protocol").is_none()
    });
    seen("of a verify attempt", &|e| {
        e["reason"] == "verify" && e["verify_step"] == "deliver" && e["uncertain_steps"] == json!(["deliver"])
    });
    seen("of a retry", &|e| {
        e["reason"] == "retry" && e["completed_steps"] == json!(["fetch"])
    });
    seen("with a memory summary", &|e| {
        e["memory"][0]["state"] == "succeeded" && e["memory"][0]["summary"] == "3 tickets summarised"
    });
    seen("after a success", &|e| {
        e["context"]["last_success_at"].is_string()
    });
    seen("never succeeded", &|e| {
        e["context"]["since_last_success"].is_null()
    });
    seen("with a payload", &|e| e["payload"]["n"] == json!([1, 2.5]));
}

#[test]
fn the_validator_rejects_what_the_envelope_schema_forbids() {
    let schema = schema::envelope();
    let good = json!({
        "run_id": 2, "tenant": "default", "schedule": "ticket-digest",
        "window": {"key": "2026-11-30", "start": "2026-11-30T11:00:05+01:00",
                   "end": "2026-11-30T11:01:05+01:00", "timezone": "Europe/Berlin"},
        "idempotency_key": "default/ticket-digest/2026-11-30", "attempt": 2, "reason": "verify",
        "now": "2026-11-30T11:00:07+01:00",
        "context": {"business_day": true, "since_last_success": "0m",
                    "last_success_at": "2026-11-30T11:00:00+01:00", "timezone": "Europe/Berlin"},
        "memory": [{"window": "2026-11-29", "state": "succeeded", "summary": "3 tickets summarised"}],
        "completed_steps": ["fetch"], "uncertain_steps": ["deliver"], "verify_step": "deliver",
        "resume_after": null, "payload": {"channel": "#support"}
    });
    assert_eq!(errors(&schema, &good), Vec::<String>::new());
    let mut with_acks = good.clone();
    with_acks["protocol"] = json!(2);
    with_acks["acks"] = json!(true);
    assert_eq!(errors(&schema, &with_acks), Vec::<String>::new());
    type Spoil = fn(&mut Value);
    let bad: [(&str, Spoil); 11] = [
        ("a missing field", |e| {
            drop(e.as_object_mut().unwrap().remove("idempotency_key"))
        }),
        ("a renamed field", |e| {
            let v = e.as_object_mut().unwrap().remove("run_id").unwrap();
            e["runId"] = v;
        }),
        ("a string attempt", |e| e["attempt"] = json!("2")),
        ("a negative attempt", |e| e["attempt"] = json!(-1)),
        ("an unknown reason", |e| e["reason"] = json!("whim")),
        ("an unknown run state", |e| {
            e["memory"][0]["state"] = json!("fine")
        }),
        ("a window without key", |e| {
            drop(e["window"].as_object_mut().unwrap().remove("key"))
        }),
        ("a non-string step", |e| e["completed_steps"] = json!([1])),
        ("protocol 1", |e| e["protocol"] = json!(1)),
        ("attempt 0", |e| e["attempt"] = json!(0)),
        ("a `now` that is no instant", |e| e["now"] = json!("today")),
    ];
    for (what, spoil) in bad {
        let mut envelope = good.clone();
        spoil(&mut envelope);
        assert!(
            !errors(&schema, &envelope).is_empty(),
            "{what} validates: {envelope}"
        );
    }
}

#[test]
fn the_replies_validate() {
    let schema = schema::reply();
    for reply in [
        Reply::Ack {
            step: "deliver".into(),
            fence: 7,
        },
        Reply::Deny {
            step: "deliver".into(),
            reason: "lease lost".into(),
        },
    ] {
        let value: Value = serde_json::from_str(reply.line().trim()).unwrap();
        assert_eq!(errors(&schema, &value), Vec::<String>::new(), "{value}");
    }
    assert!(!errors(&schema, &json!({"event": "ack", "step": "deliver"})).is_empty());
    assert!(!errors(&schema, &json!({"event": "maybe", "step": "deliver"})).is_empty());
}

/// The demo lines of docs/PROTOCOL.md and of the protocol fixture agent
/// (`echo '…'`), and lines near each rule's edge.
fn example_lines() -> Vec<String> {
    let mut lines: Vec<String> = [
        r#"{"event":"heartbeat"}"#,
        r#"{"event":"heartbeat","extra":[1]}"#,
        r#"{"event":"step","name":"deliver","status":"started"}"#,
        r#"{"event":"step","name":"deliver","status":"failed","attempt":1}"#,
        r#"{"event":"step","name":"x","status":"maybe"}"#,
        r#"{"event":"step","status":"done"}"#,
        r#"{"event":"step","name":" ","status":"done"}"#,
        r#"{"event":"step","name":"","status":"done"}"#,
        r#"{"event":"step","name":3,"status":"done"}"#,
        r#"{"event":"usage"}"#,
        r#"{"event":"usage","tokens":1200,"cost_usd":0.03}"#,
        r#"{"event":"usage","tokens":null,"cost_usd":1}"#,
        r#"{"event":"usage","tokens":"many"}"#,
        r#"{"event":"usage","tokens":1.5}"#,
        r#"{"event":"usage","cost_usd":"0.03"}"#,
        r#"{"event":"result","status":"success"}"#,
        r#"{"event":"result","status":"success","error_class":null}"#,
        r#"{"event":"result","status":"failure","error_class":"needs_human","summary":"s","processed":3,"message":"m","verified":true,"rate_limited":false}"#,
        r#"{"event":"result","status":"failure","error_class":"retriable"}"#,
        r#"{"event":"result","status":"maybe"}"#,
        r#"{"event":"result"}"#,
        r#"{"event":"result","status":"success","processed":"3"}"#,
        r#"{"event":"result","status":"success","verified":"yes"}"#,
        r#"{"event":"result","status":"success","summary":7}"#,
        r#"{"event":"party"}"#,
        r#"{"event":42}"#,
        r#"{"event":null}"#,
        r#"{"level":"info","msg":"json without event is log"}"#,
        r#"[1,2]"#,
        "plain text",
        "",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in ["docs/PROTOCOL.md", "tests/fixtures/agents/protocol.sh"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let echoed: Vec<String> = text
            .lines()
            .filter_map(|l| l.split("echo '").nth(1)?.split('\'').next())
            .filter(|l| l.starts_with('{'))
            .map(str::to_string)
            .collect();
        assert!(echoed.len() >= 5, "{file} has its demo lines");
        lines.extend(echoed);
    }
    lines
}

/// What the serde type says a line means, as the parser's [`AgentLine`].
fn as_agent_line(line: ProtocolLine) -> AgentLine {
    match line {
        ProtocolLine::Heartbeat => AgentLine::Heartbeat,
        ProtocolLine::Step(s) => AgentLine::Step {
            name: s.name,
            status: s.status,
        },
        ProtocolLine::Usage(u) => AgentLine::Usage {
            tokens: u.tokens,
            cost_usd: u.cost_usd,
        },
        ProtocolLine::Result(r) => AgentLine::Result(r),
    }
}

#[test]
fn the_parser_accepts_exactly_the_lines_the_schema_accepts() {
    let schema = schema::agent_line();
    let (mut valid, mut invalid) = (0, 0);
    for line in example_lines() {
        let errors = match serde_json::from_str::<Value>(&line) {
            Ok(value) => errors(&schema, &value),
            Err(e) => vec![format!("not JSON: {e}")],
        };
        let parsed = parse_line(&line);
        let protocol = !matches!(parsed, AgentLine::Log(_) | AgentLine::Malformed { .. });
        assert_eq!(
            errors.is_empty(),
            protocol,
            "{line}: the schema says {errors:?}, the parser {parsed:?}"
        );
        if protocol {
            valid += 1;
            let typed: ProtocolLine = serde_json::from_str(&line).unwrap();
            assert_eq!(as_agent_line(typed), parsed, "{line}");
        } else {
            invalid += 1;
        }
    }
    assert!(
        valid >= 10 && invalid >= 10,
        "{valid} valid, {invalid} invalid examples"
    );
}

// ---- A small JSON Schema validator for the keywords these schemas use ----

/// Why `value` does not validate against `schema` (empty: it does).
fn errors(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = vec![];
    check(schema, schema, value, "$", &mut out);
    out
}

fn check(root: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let rules = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return out.push(format!("{at}: nothing is allowed")),
        Value::Object(rules) => rules,
        other => panic!("not a schema: {other}"),
    };
    for (keyword, rule) in rules {
        let fail = |out: &mut Vec<String>, why: String| out.push(format!("{at}: {why}"));
        match keyword.as_str() {
            "$schema" | "title" | "description" | "default" | "$defs" => {}
            "$ref" => {
                let target = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix('#'))
                    .and_then(|p| root.pointer(p))
                    .unwrap_or_else(|| panic!("unresolved $ref {rule}"));
                check(root, target, value, at, out);
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                    other => panic!("type {other}"),
                };
                if !types.iter().any(|t| is_type(t, value)) {
                    fail(out, format!("{value} is not {types:?}"));
                }
            }
            "format" => {
                if !fits_format(rule.as_str().unwrap(), value) {
                    fail(out, format!("{value} is not {rule}"));
                }
            }
            "minimum" => {
                if let Some(n) = value.as_f64()
                    && n < rule.as_f64().unwrap()
                {
                    fail(out, format!("{value} < {rule}"));
                }
            }
            "maximum" => {
                if let Some(n) = value.as_f64()
                    && n > rule.as_f64().unwrap()
                {
                    fail(out, format!("{value} > {rule}"));
                }
            }
            "const" => {
                if value != rule {
                    fail(out, format!("{value} is not {rule}"));
                }
            }
            "enum" => {
                if !rule.as_array().unwrap().contains(value) {
                    fail(out, format!("{value} is not one of {rule}"));
                }
            }
            "pattern" => {
                if let Some(text) = value.as_str() {
                    let fits = match rule.as_str().unwrap() {
                        r"\S" => text.chars().any(|c| !c.is_whitespace()),
                        other => panic!("the validator does not know the pattern {other}"),
                    };
                    if !fits {
                        fail(out, format!("{value} does not match {rule}"));
                    }
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for name in rule.as_array().unwrap() {
                        if !object.contains_key(name.as_str().unwrap()) {
                            fail(out, format!("{name} is missing"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    for (name, sub) in rule.as_object().unwrap() {
                        if let Some(v) = object.get(name) {
                            check(root, sub, v, &format!("{at}.{name}"), out);
                        }
                    }
                }
            }
            "additionalProperties" => {
                if let Some(object) = value.as_object() {
                    let known = rules.get("properties").and_then(Value::as_object);
                    for (name, v) in object {
                        if !known.is_some_and(|k| k.contains_key(name)) {
                            check(root, rule, v, &format!("{at}.{name}"), out);
                        }
                    }
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, v) in items.iter().enumerate() {
                        check(root, rule, v, &format!("{at}[{i}]"), out);
                    }
                }
            }
            "oneOf" | "anyOf" => {
                let passing = rule
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| {
                        let mut sub_errors = vec![];
                        check(root, sub, value, at, &mut sub_errors);
                        sub_errors.is_empty()
                    })
                    .count();
                let fits = if keyword == "oneOf" {
                    passing == 1
                } else {
                    passing >= 1
                };
                if !fits {
                    fail(out, format!("{value} fits {passing} of the {keyword} schemas"));
                }
            }
            "allOf" => {
                for sub in rule.as_array().unwrap() {
                    check(root, sub, value, at, out);
                }
            }
            other => panic!(
                "the test's validator does not know the keyword `{other}`: teach it before publishing a schema that uses it"
            ),
        }
    }
}

fn is_type(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        // Strict, as serde reads integers: `1.0` is not one.
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        other => panic!("unknown type {other}"),
    }
}

/// Whether `value` fits `format`; a format says nothing of a value of
/// another type.
fn fits_format(format: &str, value: &Value) -> bool {
    match format {
        "date-time" => value
            .as_str()
            .is_none_or(|text| chrono::DateTime::parse_from_rfc3339(text).is_ok()),
        _ if !value.is_number() => true,
        "int64" => value.is_i64(),
        "int32" => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        "uint32" => value.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
        "uint64" => value.is_u64(),
        "double" | "float" => true,
        other => panic!("the validator does not know the format {other}"),
    }
}
