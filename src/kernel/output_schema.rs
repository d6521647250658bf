//! The `--output-schema` contract: a JSON Schema checked once when it is loaded (against its
//! metaschema), the final answer read as JSON and validated against it, and the first
//! violation named for the repair request and the error. Pure: never calls a model, never
//! touches the bus or the filesystem.

use std::sync::Arc;

use serde_json::Value;

/// The name the schema goes by in APIs that want one (`text.format.name`,
/// `response_format.json_schema.name`).
pub const SCHEMA_NAME: &str = "keel_output";

/// Why a schema cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaErrorKind {
    /// The text is not JSON.
    NotJson,
    /// JSON, but not a valid JSON Schema.
    NotASchema,
}

/// A schema that cannot be used: its kind and what is wrong, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    pub kind: SchemaErrorKind,
    pub message: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SchemaError {}

/// A compiled JSON Schema the final answer of a run must match.
pub struct OutputSchema {
    schema: Arc<Value>,
    compiled: boon::Schemas,
    index: boon::SchemaIndex,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Where the schema is registered for the compiler (it names no file; `$ref`s inside it
/// resolve against it).
const SCHEMA_URL: &str = "urn:keel:output-schema";

impl OutputSchema {
    /// Parses and compiles `text`; a schema that is not JSON or breaks its metaschema (draft
    /// 2020-12 unless its `$schema` says otherwise) is refused.
    pub fn parse(text: &str) -> Result<OutputSchema, SchemaError> {
        let schema: Value = serde_json::from_str(text).map_err(|e| SchemaError {
            kind: SchemaErrorKind::NotJson,
            message: format!("not JSON: {e}"),
        })?;
        let not_a_schema = |e: boon::CompileError| SchemaError {
            kind: SchemaErrorKind::NotASchema,
            message: format!("not a valid JSON Schema: {}", first_line(&format!("{e:#}"))),
        };
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler
            .add_resource(SCHEMA_URL, schema.clone())
            .map_err(not_a_schema)?;
        let mut compiled = boon::Schemas::new();
        let index = compiler
            .compile(SCHEMA_URL, &mut compiled)
            .map_err(not_a_schema)?;
        Ok(OutputSchema {
            schema: Arc::new(schema),
            compiled,
            index,
        })
    }

    /// The schema as written (what the providers send).
    pub fn schema(&self) -> &Arc<Value> {
        &self.schema
    }

    /// The JSON value of `answer` (the final assistant text, optionally inside one Markdown
    /// code fence) if it matches; otherwise the first violation, e.g.
    /// `at '/age': want integer, but got string`.
    pub fn check(&self, answer: &str) -> Result<Value, String> {
        let text = unfenced(answer);
        let value: Value = serde_json::from_str(text).map_err(|e| {
            if text.is_empty() {
                "the answer is empty, not JSON".to_string()
            } else {
                format!("the answer is not JSON ({e})")
            }
        })?;
        match self.compiled.validate(&value, self.index) {
            Ok(()) => Ok(value),
            Err(e) => Err(first_violation(&e)),
        }
    }
}

/// The text inside a single fenced block (```json … ```), else the trimmed text.
fn unfenced(answer: &str) -> &str {
    let t = answer.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // The info string (`json`) ends at the first line break.
    match body.split_once('\n') {
        Some((_, inner)) => inner.trim(),
        None => t,
    }
}

/// The first leaf of a validation error tree, as `at 'LOCATION': WHAT`.
fn first_violation(e: &boon::ValidationError<'_, '_>) -> String {
    let mut leaf = e;
    while let Some(first) = leaf.causes.first() {
        leaf = first;
    }
    let at = leaf.instance_location.to_string();
    let at = if at.is_empty() { "/".to_string() } else { at };
    format!("at '{at}': {}", leaf.kind)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PERSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},
        "age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}"#;

    #[test]
    fn a_matching_answer_is_its_value_fenced_or_not() {
        let s = OutputSchema::parse(PERSON).unwrap();
        let want = serde_json::json!({"name": "Ada", "age": 36});
        assert_eq!(s.check(r#" {"name":"Ada","age":36} "#).unwrap(), want);
        assert_eq!(
            s.check("```json\n{\"name\":\"Ada\",\"age\":36}\n```")
                .unwrap(),
            want
        );
    }

    #[test]
    fn the_first_violation_is_named() {
        let s = OutputSchema::parse(PERSON).unwrap();
        let e = s.check(r#"{"name":"Ada","age":"old"}"#).unwrap_err();
        assert!(e.starts_with("at '/age': "), "{e}");
        let e = s.check(r#"{"name":"Ada"}"#).unwrap_err();
        assert!(e.contains("age") && e.starts_with("at '/'"), "{e}");
        let e = s.check("Sure! Here it is.").unwrap_err();
        assert!(e.starts_with("the answer is not JSON"), "{e}");
    }

    #[test]
    fn bad_schemas_are_refused_with_their_kind() {
        let e = OutputSchema::parse("{nope").unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::NotJson);
        let e = OutputSchema::parse(r#"{"type":"fish"}"#).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::NotASchema, "{e}");
        let e = OutputSchema::parse(r#"{"required":"name"}"#).unwrap_err();
        assert_eq!(e.kind, SchemaErrorKind::NotASchema, "{e}");
    }
}
