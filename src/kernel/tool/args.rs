//! Tool-call arguments as the model streamed them: parsing the raw text into the call's
//! arguments, the error the model gets when they are not a JSON object, and [`Arg`], the field
//! type each tool's typed arguments are read into (once, at the edge) so every tool says the
//! same thing about a missing or wrong-typed field. Pure functions; never guesses what
//! malformed arguments meant.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::ToolOutput;

/// One argument as the model sent it. A field of a tool's `#[derive(Deserialize)]` arguments
/// (with `#[serde(default)]`): reading it never fails, so what is wrong is said by the tool, in
/// its order, when it uses the field ([`Arg::required`], [`Arg::optional`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Arg<T> {
    /// Not sent.
    #[default]
    Absent,
    /// Sent as `null`.
    Null,
    /// Sent as something else than a `T`.
    Wrong,
    Given(T),
}

/// A type an [`Arg`] holds, and how a message names it.
pub(crate) trait ArgType: DeserializeOwned {
    /// "a string", "a boolean", …: what a wrong value must be.
    const MUST_BE: &'static str;
    /// Whether `v` may be read as this type at all (a struct would also read an array).
    fn accepts(_v: &Value) -> bool {
        true
    }
}

impl ArgType for String {
    const MUST_BE: &'static str = "a string";
}

impl ArgType for bool {
    const MUST_BE: &'static str = "a boolean";
}

impl ArgType for u64 {
    const MUST_BE: &'static str = "a non-negative integer";
}

impl<T: DeserializeOwned> ArgType for Vec<T> {
    const MUST_BE: &'static str = "an array";
    fn accepts(v: &Value) -> bool {
        v.is_array()
    }
}

impl<'de, T: ArgType> Deserialize<'de> for Arg<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Arg::Null,
            v if !T::accepts(&v) => Arg::Wrong,
            v => serde_json::from_value(v).map_or(Arg::Wrong, Arg::Given),
        })
    }
}

impl<T: ArgType> Arg<T> {
    /// The value, or "missing required field" / "must be a …" (`null` is of the wrong type).
    pub(crate) fn required(self, key: &str) -> Result<T, ToolOutput> {
        match self {
            Arg::Given(v) => Ok(v),
            Arg::Absent => Err(ToolOutput::error(format!(
                "invalid arguments: missing required field `{key}`"
            ))),
            Arg::Null | Arg::Wrong => Err(wrong::<T>(key)),
        }
    }

    /// The value if sent (`null` counts as not sent), or "must be a …".
    pub(crate) fn optional(self, key: &str) -> Result<Option<T>, ToolOutput> {
        match self {
            Arg::Given(v) => Ok(Some(v)),
            Arg::Absent | Arg::Null => Ok(None),
            Arg::Wrong => Err(wrong::<T>(key)),
        }
    }

    /// The value if sent as a `T`; nothing said about anything else.
    pub(crate) fn given(self) -> Option<T> {
        match self {
            Arg::Given(v) => Some(v),
            Arg::Absent | Arg::Null | Arg::Wrong => None,
        }
    }

    /// Whether the field was sent at all (even as `null`).
    pub(crate) fn is_absent(&self) -> bool {
        matches!(self, Arg::Absent)
    }
}

/// The error for a value of the wrong type.
fn wrong<T: ArgType>(key: &str) -> ToolOutput {
    ToolOutput::error(format!("invalid arguments: `{key}` must be {}", T::MUST_BE))
}

/// A tool's typed arguments. Arguments that are not an object read as an empty one (each
/// required field is then missing), as they did when fields were looked up one by one.
pub(crate) fn read<T: DeserializeOwned + Default>(args: &Value) -> T {
    if !args.is_object() {
        return T::default();
    }
    T::deserialize(args).unwrap_or_default()
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

    use serde_json::json;

    #[derive(Debug, Default, Deserialize)]
    #[serde(default)]
    struct Sample {
        name: Arg<String>,
        count: Arg<u64>,
        flag: Arg<bool>,
        list: Arg<Vec<String>>,
    }

    #[test]
    fn a_field_is_absent_null_wrong_or_given_and_says_so_like_the_tools_always_did() {
        let s: Sample = read(&json!({"name": null, "count": -1, "flag": true, "list": "a"}));
        assert_eq!(s.name, Arg::Null);
        assert_eq!(s.count, Arg::Wrong);
        assert_eq!(s.flag, Arg::Given(true));
        assert_eq!(s.list, Arg::Wrong);
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
        assert_eq!(s.name, Arg::Absent);
        assert_eq!(s.count, Arg::Wrong, "as_u64 never took a float");
        assert_eq!(s.list, Arg::Wrong);
        assert_eq!(
            said(s.name.required("name")),
            Some("invalid arguments: missing required field `name`".into())
        );
        // Not an object: every field is absent (an array is not read as the struct's fields).
        let s: Sample = read(&json!(["x", 1, true, []]));
        assert_eq!(s.name, Arg::Absent);
        assert_eq!(s.count, Arg::Absent);
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
