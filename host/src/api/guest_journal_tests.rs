//! The journal as the guest SDKs read it, generated: one module per SDK
//! (`guest-sdk/src/journal.rs`, `guest-sdk/python/agenthost/journal.py`,
//! `guest-sdk/typescript/src/journal.ts`) with every event type's name and
//! its payload's fields, rendered from the payload types of
//! `journal/payloads.rs` through their OpenAPI schemas. A field added there
//! fails this test until the modules are regenerated
//! (`UPDATE_GOLDEN=1 cargo test -p agenthost --lib guest_journal`), so no
//! SDK spells an event type or a payload field by hand.

use std::path::PathBuf;

use serde_json::Value;

use crate::journal::EventType;

/// A field's type, as the three languages spell it.
struct FieldType {
    rust: String,
    python: String,
    typescript: String,
}

impl FieldType {
    fn new(rust: &str, python: &str, typescript: &str) -> Self {
        FieldType {
            rust: rust.into(),
            python: python.into(),
            typescript: typescript.into(),
        }
    }

    fn nullable(self) -> Self {
        FieldType {
            rust: format!("Option<{}>", self.rust),
            python: format!("Optional[{}]", self.python),
            typescript: format!("{} | null", self.typescript),
        }
    }
}

struct Field {
    name: String,
    doc: String,
    ty: FieldType,
    required: bool,
}

struct Payload {
    event_type: String,
    name: String,
    doc: String,
    fields: Vec<Field>,
}

/// The schema `$ref` points at.
fn resolve<'a>(schemas: &'a Value, reference: &str) -> &'a Value {
    let name = reference.rsplit('/').next().unwrap_or_default();
    &schemas[name]
}

/// The type of a property schema. Strings, integers, booleans and lists
/// of strings are typed; a string enum is a string (its values in the
/// doc); objects, tagged unions and untyped values stay JSON.
fn field_type(schemas: &Value, schema: &Value, doc: &mut String) -> FieldType {
    if let Some(reference) = schema["$ref"].as_str() {
        let target = resolve(schemas, reference);
        if let Some(values) = target["enum"].as_array() {
            let values: Vec<String> = values
                .iter()
                .filter_map(|v| v.as_str().map(|s| format!("`{s}`")))
                .collect();
            doc.push_str(&format!(" One of {}.", values.join(", ")));
            return FieldType::new("String", "str", "string");
        }
        return FieldType::new("Value", "Any", "unknown");
    }
    if let Some(variants) = schema["oneOf"].as_array() {
        let null = variants.iter().any(|v| v["type"] == "null");
        let others: Vec<&Value> = variants.iter().filter(|v| v["type"] != "null").collect();
        if null && others.len() == 1 {
            if let Some(text) = others[0]["description"].as_str() {
                doc.push_str(text);
            }
            return field_type(schemas, others[0], doc).nullable();
        }
        return FieldType::new("Value", "Any", "unknown");
    }
    let (kind, null) = match &schema["type"] {
        Value::String(kind) => (kind.as_str(), false),
        Value::Array(kinds) => {
            let kind = kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|k| *k != "null");
            (kind.unwrap_or_default(), kinds.len() > 1)
        }
        _ => ("", false),
    };
    let ty = match kind {
        "string" => FieldType::new("String", "str", "string"),
        "boolean" => FieldType::new("bool", "bool", "boolean"),
        "integer" if schema["minimum"].as_f64().is_some_and(|m| m >= 0.0) => {
            FieldType::new("u64", "int", "number")
        }
        "integer" => FieldType::new("i64", "int", "number"),
        "number" => FieldType::new("f64", "float", "number"),
        "array" if schema["items"]["type"] == "string" => {
            FieldType::new("Vec<String>", "List[str]", "string[]")
        }
        "array" => FieldType::new("Vec<Value>", "List[Any]", "unknown[]"),
        _ => FieldType::new("Value", "Any", "unknown"),
    };
    if null { ty.nullable() } else { ty }
}

/// Every event type with its payload's fields, in `EventType::ALL`'s order.
fn payloads() -> Vec<Payload> {
    let text = super::openapi::to_json(&super::openapi_document());
    let document: Value = serde_json::from_str(&text).unwrap_or_default();
    let schemas = &document["components"]["schemas"];
    let envelopes = schemas["Event"]["oneOf"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut payloads = Vec::new();
    for kind in EventType::ALL {
        let event_type = kind.as_str().to_string();
        let envelope = envelopes
            .iter()
            .find(|e| e["title"] == event_type.as_str())
            .unwrap_or_else(|| panic!("the OpenAPI document has no envelope for {event_type}"));
        let reference = envelope["properties"]["payload"]["$ref"]
            .as_str()
            .unwrap_or_default();
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        let schema = resolve(schemas, reference);
        let required: Vec<&str> = (schema["required"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        let mut fields = Vec::new();
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            let mut doc = property["description"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ty = field_type(schemas, property, &mut doc);
            fields.push(Field {
                name: field.clone(),
                doc: doc.trim().replace('\n', " "),
                ty,
                required: required.contains(&field.as_str()),
            });
        }
        payloads.push(Payload {
            event_type,
            name,
            doc: schema["description"]
                .as_str()
                .unwrap_or_default()
                .replace('\n', " "),
            fields,
        });
    }
    payloads
}

const HEADER: &str = "Generated from the host's event payload types (host/src/journal/payloads.rs) by `cargo test -p agenthost --lib guest_journal`: do not edit; `UPDATE_GOLDEN=1` rewrites it.";

fn rust(payloads: &[Payload]) -> String {
    let mut out = format!(
        "//! The journal as a guest reads it: every event type's name and its\n//! payload's fields (docs/events.md). {HEADER}\n\nuse serde::Deserialize;\nuse serde_json::Value;\n\n"
    );
    for p in payloads {
        out.push_str(&format!(
            "/// The event type of [`{}`].\npub const {}: &str = \"{}\";\n",
            p.name, p.event_type, p.event_type
        ));
    }
    for p in payloads {
        out.push_str(&format!(
            "\n/// {}\n#[derive(Debug, Clone, PartialEq, Deserialize)]\n#[non_exhaustive]\npub struct {} {{\n",
            p.doc, p.name
        ));
        for f in &p.fields {
            let doc = if f.doc.is_empty() {
                "The `".to_string() + &f.name + "` field."
            } else {
                f.doc.clone()
            };
            out.push_str(&format!("    /// {doc}\n"));
            if f.required {
                out.push_str(&format!("    pub {}: {},\n", f.name, f.ty.rust));
            } else if f.ty.rust.starts_with("Option<") || f.ty.rust == "Value" {
                out.push_str(&format!(
                    "    #[serde(default)]\n    pub {}: {},\n",
                    f.name, f.ty.rust
                ));
            } else {
                out.push_str(&format!(
                    "    #[serde(default)]\n    pub {}: Option<{}>,\n",
                    f.name, f.ty.rust
                ));
            }
        }
        out.push_str("}\n");
    }
    out
}

fn python(payloads: &[Payload]) -> String {
    let mut out = format!(
        "\"\"\"The journal as a guest reads it: every event type's name and its\npayload's fields (docs/events.md). {HEADER}\n\"\"\"\n\nfrom typing import Any, List, Optional, TypedDict\n\ntry:\n    from typing import NotRequired\nexcept ImportError:  # Python < 3.11\n    NotRequired = Optional  # type: ignore\n\n"
    );
    for p in payloads {
        out.push_str(&format!("{} = \"{}\"\n", p.event_type, p.event_type));
    }
    for p in payloads {
        out.push_str(&format!(
            "\n\nclass {}(TypedDict):\n    \"\"\"{}\"\"\"\n\n",
            p.name, p.doc
        ));
        if p.fields.is_empty() {
            out.push_str("    pass\n");
        }
        for f in &p.fields {
            let ty = if f.required {
                f.ty.python.clone()
            } else {
                format!("NotRequired[{}]", f.ty.python)
            };
            out.push_str(&format!("    {}: {}\n", f.name, ty));
            if !f.doc.is_empty() {
                out.push_str(&format!(
                    "    \"\"\"{}\"\"\"\n",
                    f.doc.replace('\\', "\\\\")
                ));
            }
        }
    }
    out
}

fn typescript(payloads: &[Payload]) -> String {
    let mut out = format!(
        "/**\n * The journal as a guest reads it: every event type's name and its\n * payload's fields (docs/events.md). {HEADER}\n */\n\n"
    );
    for p in payloads {
        out.push_str(&format!(
            "/** The event type of {{@link {}}}. */\nexport const {} = '{}';\n",
            p.name, p.event_type, p.event_type
        ));
    }
    for p in payloads {
        out.push_str(&format!(
            "\n/** {} */\nexport interface {} {{\n",
            p.doc, p.name
        ));
        for f in &p.fields {
            if !f.doc.is_empty() {
                out.push_str(&format!("  /** {} */\n", f.doc));
            }
            let optional = if f.required { "" } else { "?" };
            out.push_str(&format!("  {}{optional}: {};\n", f.name, f.ty.typescript));
        }
        out.push_str("}\n");
    }
    out
}

fn check(relative: &str, text: &str) -> Result<(), String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        return std::fs::write(&path, text).map_err(|e| format!("{relative}: {e}"));
    }
    let now = std::fs::read_to_string(&path).map_err(|e| format!("{relative}: {e}"))?;
    if now != text {
        return Err(format!(
            "{relative} differs from what the host's payload types generate: run \
             UPDATE_GOLDEN=1 cargo test -p agenthost --lib guest_journal and commit it"
        ));
    }
    Ok(())
}

#[test]
fn guest_journal_modules_are_generated_from_the_payload_types() {
    let payloads = payloads();
    let problems: Vec<String> = [
        check("guest-sdk/src/journal.rs", &rust(&payloads)),
        check("guest-sdk/python/agenthost/journal.py", &python(&payloads)),
        check(
            "guest-sdk/typescript/src/journal.ts",
            &typescript(&payloads),
        ),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
