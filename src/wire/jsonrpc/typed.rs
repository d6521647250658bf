//! Typed params for a JSON-RPC method: decoding `params` into the method's struct, with a
//! -32602 error that names the field at fault. Pure; knows no method.
//!
//! serde_json's messages name a field only when it is missing, unknown or duplicated
//! ("missing field `sessionId`"); "invalid type" and "invalid value" messages do not. They do
//! carry the position where decoding stopped, which is just past the offending value, so the
//! path to it (`client.name`, `args[2]`) is recovered by scanning the params text up to there.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::{ErrorObject, INVALID_PARAMS};

/// Decodes a method's params (`None` when the message had none, or `null`) into `T`.
///
/// Missing params are read as `null` and then as `{}`, so an `Option` or a struct whose
/// fields all have defaults accepts them; a struct with a required field gets "params must be
/// an object, and none were sent (missing field `sessionId`)". Any failure is
/// [`INVALID_PARAMS`] with serde's message, prefixed with the path of the field at fault
/// (`` `client`: missing field `name` ``, `` `force`: invalid type: string "yes", expected a
/// boolean ``), or with a note that it concerns the params as a whole.
pub fn params<T: DeserializeOwned>(raw: Option<&RawValue>) -> Result<T, ErrorObject> {
    let Some(raw) = raw else {
        return missing();
    };
    serde_json::from_str(raw.get()).map_err(|e| {
        let message = message_of(&e);
        let path = path_at(raw.get(), offset_of(raw.get(), e.line(), e.column()));
        ErrorObject::new(
            INVALID_PARAMS,
            format!("Invalid params: {}", with_path(path, &message)),
        )
    })
}

fn missing<T: DeserializeOwned>() -> Result<T, ErrorObject> {
    if let Ok(v) = serde_json::from_str("null") {
        return Ok(v);
    }
    serde_json::from_str("{}").map_err(|e| {
        let message = message_of(&e);
        let why = if message.starts_with("missing field") {
            "params must be an object, and none were sent"
        } else {
            "params are required, and none were sent"
        };
        ErrorObject::new(INVALID_PARAMS, format!("Invalid params: {why} ({message})"))
    })
}

/// serde_json's message without its " at line L column C" suffix.
pub(super) fn message_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) => message.to_string(),
        None => text,
    }
}

/// The byte offset of serde_json's 1-based line and its column (bytes into that line).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (start + column).min(text.len())
}

/// One step of a path into the params.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A container open at some point of the text.
enum Open {
    /// `key` is the member whose value is being read; `None` between members.
    Object {
        key: Option<String>,
    },
    Array {
        index: usize,
    },
}

/// The path to the value that ends at (or, for errors detected on a peek, starts at) byte
/// `end` of the valid JSON `text`.
fn path_at(text: &str, end: usize) -> Vec<Step> {
    let bytes = text.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0;
    while i < end.min(bytes.len()) {
        match bytes[i] {
            b'{' => stack.push(Open::Object { key: None }),
            b'[' => stack.push(Open::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Open::Object { key }) => *key = None,
                Some(Open::Array { index }) => *index += 1,
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if let Some(Open::Object { key: key @ None }) = stack.last_mut() {
                    let quoted = text.get(start..=i).unwrap_or_default();
                    *key = Some(serde_json::from_str(quoted).unwrap_or_else(|_| quoted.into()));
                }
            }
            _ => {}
        }
        i += 1;
    }
    stack
        .into_iter()
        .filter_map(|open| match open {
            Open::Object { key } => key.map(Step::Key),
            Open::Array { index } => Some(Step::Index(index)),
        })
        .collect()
}

/// `` `a.b[2]`: message ``, or the message with a note when no field is at fault.
fn with_path(mut path: Vec<Step>, message: &str) -> String {
    // "unknown field `x`" and "duplicate field `x`" are reported at the key itself, which the
    // message names already.
    let named = message
        .split('`')
        .nth(1)
        .filter(|_| message.starts_with("unknown field") || message.starts_with("duplicate field"));
    if let (Some(name), Some(Step::Key(last))) = (named, path.last()) {
        if name == last {
            path.pop();
        }
    }
    if path.is_empty() {
        let names_a_field = ["missing field", "unknown field", "duplicate field"]
            .iter()
            .any(|p| message.starts_with(p));
        return if names_a_field {
            message.to_string()
        } else {
            format!("{message} (in the params as a whole, not in one field)")
        };
    }
    let mut shown = String::new();
    for step in &path {
        match step {
            Step::Key(k) if shown.is_empty() => shown.push_str(k),
            Step::Key(k) => {
                shown.push('.');
                shown.push_str(k);
            }
            Step::Index(i) => shown.push_str(&format!("[{i}]")),
        }
    }
    format!("`{shown}`: {message}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Client {
        name: String,
        version: String,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Hello {
        protocol_version: u32,
        client: Client,
        #[serde(default)]
        interactive: bool,
        #[serde(default)]
        args: Vec<String>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Stop {
        #[serde(default)]
        force: bool,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Detach {
        session_id: String,
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    fn hello_error(text: &str) -> String {
        let e = params::<Hello>(Some(&raw(text))).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS, "{text}");
        assert_eq!(e.data, None);
        e.message
    }

    #[test]
    fn params_errors_name_the_field() {
        let ok = r#"{"protocolVersion":1,"client":{"name":"n","version":"1"}}"#;
        assert_eq!(params::<Hello>(Some(&raw(ok))).unwrap().protocol_version, 1);
        let table = [
            (
                r#"{"client":{"name":"n","version":"1"}}"#,
                "Invalid params: missing field `protocolVersion`",
            ),
            (
                r#"{"protocolVersion":1,"client":{"version":"1"}}"#,
                "Invalid params: `client`: missing field `name`",
            ),
            (
                r#"{"protocolVersion":"1","client":{"name":"n","version":"1"}}"#,
                "Invalid params: `protocolVersion`: invalid type: string \"1\", expected u32",
            ),
            (
                r#"{"protocolVersion":1,"client":{"name":5,"version":"1"}}"#,
                "Invalid params: `client.name`: invalid type: integer `5`, expected a string",
            ),
            (
                r#"{"protocolVersion":1,"client":{"name":"n","version":"1"},"interactive":"yes"}"#,
                "Invalid params: `interactive`: invalid type: string \"yes\", expected a boolean",
            ),
            (
                r#"{"protocolVersion":-1,"client":{"name":"n","version":"1"}}"#,
                "Invalid params: `protocolVersion`: invalid value: integer `-1`, expected u32",
            ),
            (
                r#"{ "protocolVersion" : 1 , "client" : {"name":"n","version":"1"} , "args" : [ "a" , "b" , {} ] }"#,
                "Invalid params: `args[2]`: invalid type: map, expected a string",
            ),
            (
                r#"{"protocolVersion":1,"client":[],"args":[]}"#,
                "Invalid params: `client`: invalid length 0, expected struct Client with 2 elements",
            ),
            (
                r#"{"protocolVersion":1,"protocolVersion":2}"#,
                "Invalid params: duplicate field `protocolVersion`",
            ),
            (
                r#"{"protocolVersion":1,"client":{"name":"n","version":"1"},"extra":0}"#,
                "Invalid params: unknown field `extra`, expected one of `protocolVersion`, `client`, `interactive`, `args`",
            ),
            // Keys with escapes are decoded for the path.
            (
                r#"{"protocolVersion":1,"cl\u0069ent":{"n\u0061me":[],"version":"1"}}"#,
                "Invalid params: `client.name`: invalid type: sequence, expected a string",
            ),
            (
                r#""hello""#,
                "Invalid params: invalid type: string \"hello\", expected struct Hello (in the params as a whole, not in one field)",
            ),
        ];
        for (text, want) in table {
            assert_eq!(hello_error(text), want, "{text}");
        }
    }

    #[test]
    fn values_inside_strings_do_not_confuse_the_path() {
        let text = r#"{"protocolVersion":1,"client":{"name":"a,\"}]{[b","version":2}}"#;
        assert_eq!(
            hello_error(text),
            "Invalid params: `client.version`: invalid type: integer `2`, expected a string"
        );
        let map = raw(r#"{"a":{"b":[1,2,"x"]}}"#);
        let e = params::<BTreeMap<String, BTreeMap<String, Vec<u8>>>>(Some(&map)).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid params: `a.b[2]`: invalid type: string \"x\", expected u8"
        );
    }

    #[test]
    fn missing_params() {
        assert_eq!(params::<Stop>(None).unwrap(), Stop { force: false });
        assert_eq!(params::<Option<Detach>>(None).unwrap(), None);
        assert_eq!(params::<()>(None).unwrap(), ());
        let e = params::<Detach>(None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                INVALID_PARAMS,
                "Invalid params: params must be an object, and none were sent (missing field `sessionId`)"
            )
        );
        let e = params::<Vec<u8>>(None).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid params: params are required, and none were sent (invalid type: map, expected a sequence)"
        );
    }

    #[test]
    fn params_over_several_lines_still_find_the_field() {
        let text = "{\n  \"protocolVersion\": 1,\n  \"client\": {\"name\": true}\n}";
        assert_eq!(
            hello_error(text),
            "Invalid params: `client.name`: invalid type: boolean `true`, expected a string"
        );
    }
}
