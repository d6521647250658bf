//! Tool-call arguments as the model streamed them: parsing the raw text into the call's
//! arguments, and the error the model gets when they are not a JSON object. Pure functions;
//! never guesses what malformed arguments meant.

use serde_json::Value;

use super::ToolOutput;

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

    use serde_json::json;

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
