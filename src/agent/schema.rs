//! The published JSON Schemas of the agent protocol (docs/schema/, linked from
//! docs/PROTOCOL.md), generated with `schemars` from the types agentcron writes
//! and reads. tests/protocol_schema.rs fails when the checked-in files differ
//! from what this generates and validates real envelopes against them.

use crate::agent::envelope::EnvelopeLine;
use crate::agent::protocol::{ProtocolLine, Reply};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;

/// Each published schema: its file name under docs/schema/ and its text.
pub fn files() -> [(&'static str, String); 3] {
    [
        ("envelope.json", text(&envelope())),
        ("agent-line.json", text(&agent_line())),
        ("reply.json", text(&reply())),
    ]
}

/// The envelope as agentcron writes it to a command agent's stdin (an HTTP
/// agent's POST body is the same without the handshake fields): a schema of
/// what is serialized, so every field agentcron always writes is required.
pub fn envelope() -> serde_json::Value {
    schema::<EnvelopeLine<'static>>(
        SchemaSettings::draft2020_12().for_serialize(),
        "agentcron envelope",
        "The JSON envelope an agent receives on stdin (one line) or as an HTTP agent's POST body.",
    )
}

/// A protocol line an agent writes on stdout: a schema of what agentcron
/// accepts (optional fields may be absent or null; unknown fields are ignored).
/// Lines without an `event` field are not protocol: they are the attempt's log.
pub fn agent_line() -> serde_json::Value {
    schema::<ProtocolLine>(
        SchemaSettings::draft2020_12().for_deserialize(),
        "agentcron agent line",
        "One JSON line an agent writes on stdout. An HTTP agent may also answer with a bare result object (AgentResult).",
    )
}

/// A line agentcron writes on a handshake agent's stdin in answer to a
/// side-effect step's `started` line.
pub fn reply() -> serde_json::Value {
    schema::<Reply>(
        SchemaSettings::draft2020_12().for_serialize(),
        "agentcron step reply",
        "agentcron's answer to a side-effect step's started line, one JSON line on a handshake agent's stdin.",
    )
}

fn schema<T: JsonSchema>(settings: SchemaSettings, title: &str, description: &str) -> serde_json::Value {
    let generated = settings.into_generator().into_root_schema_for::<T>().to_value();
    // `$schema`, title and description first, then what schemars made.
    let mut schema = serde_json::Map::new();
    if let Some(meta) = generated.get("$schema") {
        schema.insert("$schema".into(), meta.clone());
    }
    schema.insert("title".into(), title.into());
    schema.insert("description".into(), description.into());
    if let serde_json::Value::Object(rest) = generated {
        for (key, value) in rest {
            if !schema.contains_key(&key) {
                schema.insert(key, value);
            }
        }
    }
    serde_json::Value::Object(schema)
}

/// Pretty JSON with a final newline, as the files are checked in.
fn text(schema: &serde_json::Value) -> String {
    // A serde_json::Value always serializes.
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}
