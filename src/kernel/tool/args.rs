//! Tool-call arguments as the model streamed them: parsing the raw text into the call's
//! arguments, the error the model gets when they are not a JSON object, and what every tool
//! says about a missing or wrong-typed [`Field`] of its typed arguments (read once, at the
//! edge, with [`read`]). Pure functions; never guesses what malformed arguments meant.

use serde_json::Value;

pub(crate) use crate::kernel::field::{read, Field, FieldType};

use super::ToolOutput;

impl<T: FieldType> Field<T> {
    /// The value, or "missing required field" / "must be a …" (`null` is of the wrong type).
    pub(crate) fn required(self, key: &str) -> Result<T, ToolOutput> {
        match self {
            Field::Given(v) => Ok(v),
            Field::Absent => Err(ToolOutput::error(format!(
                "invalid arguments: missing required field `{key}`"
            ))),
            Field::Null | Field::Wrong => Err(wrong::<T>(key)),
        }
    }

    /// The value if sent (`null` counts as not sent), or "must be a …".
    pub(crate) fn optional(self, key: &str) -> Result<Option<T>, ToolOutput> {
        match self {
            Field::Given(v) => Ok(Some(v)),
            Field::Absent | Field::Null => Ok(None),
            Field::Wrong => Err(wrong::<T>(key)),
        }
    }
}

/// The error for a value of the wrong type.
fn wrong<T: FieldType>(key: &str) -> ToolOutput {
    ToolOutput::error(format!("invalid arguments: `{key}` must be {}", T::MUST_BE))
}

/// Parses streamed arguments. Anything but a JSON object (malformed JSON, or a JSON string,
/// array, ...) is kept as the raw text the model sent, so it is sent back as written and
/// [`error`] can report it.
pub(crate) fn parse(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(raw.to_string()),
    }
}

/// How much of unusable arguments an error quotes.
const QUOTED_ARGS_CHARS: usize = 200;

/// The tool error for arguments that are not a JSON object (`None` when they are one).
pub(crate) fn error(args: &Value) -> Option<ToolOutput> {
    let (problem, raw) = match args {
        Value::Object(_) => return None,
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Err(e) => (format!("arguments are not valid JSON: {e}"), raw.clone()),
            Ok(v) => (
                format!("arguments must be a JSON object, not {}", json_kind(&v)),
                raw.clone(),
            ),
        },
        other => (
            format!("arguments must be a JSON object, not {}", json_kind(other)),
            other.to_string(),
        ),
    };
    let quoted: String = raw.chars().take(QUOTED_ARGS_CHARS).collect();
    let more = raw.chars().count().saturating_sub(QUOTED_ARGS_CHARS);
    let cut = if more > 0 {
        format!("… ({more} more characters)")
    } else {
        String::new()
    };
    Some(ToolOutput::error(format!(
        "{problem}. Received: {quoted}{cut}"
    )))
}

/// A JSON value's kind, for error messages ("a string", "an array", …).
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Sample {
        name: Field<String>,
        count: Field<u64>,
        flag: Field<bool>,
        list: Field<Vec<String>>,
    }

    #[test]
    fn a_field_is_absent_null_wrong_or_given_and_says_so_like_the_tools_always_did() {
        let s: Sample = read(&json!({"name": null, "count": -1, "flag": true, "list": "a"}));
        assert_eq!(s.name, Field::Null);
        assert_eq!(s.count, Field::Wrong);
        assert_eq!(s.flag, Field::Given(true));
        assert_eq!(s.list, Field::Wrong);
        fn said<T>(r: Result<T, ToolOutput>) -> Option<String> {
            r.err().map(|e| e.text())
        }
        assert_eq!(
            said(s.name.clone().required("name")),
            Some("invalid arguments: `name` must be a string".into())
        );
        assert_eq!(said(s.name.optional("name")), None);
        assert_eq!(
            said(s.count.optional("count")),
            Some("invalid arguments: `count` must be a non-negative integer".into())
        );
        assert_eq!(
            said(s.list.optional("list")),
            Some("invalid arguments: `list` must be an array".into())
        );
        let s: Sample = read(&json!({"count": 2.0, "list": ["a", 1]}));
        assert_eq!(s.name, Field::Absent);
        assert_eq!(s.count, Field::Wrong, "as_u64 never took a float");
        assert_eq!(s.list, Field::Wrong);
        assert_eq!(
            said(s.name.required("name")),
            Some("invalid arguments: missing required field `name`".into())
        );
        // Not an object: every field is absent (an array is not read as the struct's fields).
        let s: Sample = read(&json!(["x", 1, true, []]));
        assert_eq!(s.name, Field::Absent);
        assert_eq!(s.count, Field::Absent);
    }

    #[test]
    fn objects_parse_and_anything_else_is_kept_raw() {
        assert_eq!(parse(" "), json!({}));
        assert_eq!(parse(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse(r#"{"a":"#), json!(r#"{"a":"#));
        assert_eq!(parse(r#""text""#), json!(r#""text""#));
        assert_eq!(parse("[1]"), json!("[1]"));
    }

    #[test]
    fn errors_say_what_was_wrong_and_quote_the_start() {
        assert_eq!(error(&json!({"a": 1})), None);
        let e = error(&parse(r#"{"path": "#)).unwrap();
        assert!(e.is_error);
        assert_eq!(
            e.text(),
            r#"arguments are not valid JSON: EOF while parsing a value at line 1 column 9. Received: {"path": "#
        );
        let e = error(&parse(r#""just text""#)).unwrap();
        assert_eq!(
            e.text(),
            r#"arguments must be a JSON object, not a string. Received: "just text""#
        );
        assert_eq!(
            error(&json!([1, 2])).unwrap().text(),
            "arguments must be a JSON object, not an array. Received: [1,2]"
        );
        let long = format!("{{\"content\": \"{}", "é".repeat(500));
        let text = error(&parse(&long)).unwrap().text();
        assert!(text.ends_with("… (313 more characters)"), "{text}");
        assert_eq!(text.matches('é').count(), 200 - 13);
    }
}
