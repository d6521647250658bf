//! The session lines the HTML export shows, read into typed views: the header, an entry, a
//! message, a content block. Reading never fails: the export shows damaged and foreign
//! sessions too, so a field that is absent or of another type reads as empty (`""`, `0`,
//! `false`, `None`), the way the page has always treated it. Pure data; never renders.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The session header (`{"type":"session","id",…}`).
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Header {
    #[serde(deserialize_with = "text")]
    pub id: String,
    #[serde(deserialize_with = "text")]
    pub cwd: String,
    #[serde(deserialize_with = "text")]
    pub timestamp: String,
    #[serde(deserialize_with = "lenient")]
    pub parent_session: Option<String>,
}

/// One entry of the branch (`message`, `model_change`, `compaction`, …).
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Entry {
    #[serde(rename = "type", deserialize_with = "text")]
    pub kind: String,
    #[serde(deserialize_with = "text")]
    pub timestamp: String,
    /// `message`: the message as written (shown whole when its role is unknown).
    pub message: Value,
    /// `model_change`.
    #[serde(deserialize_with = "text")]
    pub provider: String,
    #[serde(deserialize_with = "text")]
    pub model_id: String,
    /// `thinking_level_change`.
    #[serde(deserialize_with = "text")]
    pub thinking_level: String,
    /// `session_info`.
    #[serde(deserialize_with = "text")]
    pub name: String,
    /// `compaction`, `branch_summary`.
    #[serde(deserialize_with = "text")]
    pub summary: String,
    #[serde(deserialize_with = "count")]
    pub tokens_before: u64,
}

/// A message of any role, the fields the page shows.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Message {
    #[serde(deserialize_with = "text")]
    pub role: String,
    /// A string or an array of blocks (anything else is shown as JSON).
    pub content: Option<Value>,
    /// `assistant`.
    #[serde(deserialize_with = "text")]
    pub provider: String,
    #[serde(deserialize_with = "text")]
    pub model: String,
    #[serde(deserialize_with = "view")]
    pub usage: Usage,
    #[serde(deserialize_with = "text")]
    pub stop_reason: String,
    #[serde(deserialize_with = "lenient")]
    pub error_message: Option<String>,
    /// `toolResult`.
    #[serde(deserialize_with = "text")]
    pub tool_call_id: String,
    #[serde(deserialize_with = "text")]
    pub tool_name: String,
    #[serde(deserialize_with = "lenient")]
    pub is_error: Option<bool>,
    /// Present (even `null`) when the result has the field.
    #[serde(deserialize_with = "present")]
    pub details: Option<Value>,
    /// `bashExecution`.
    #[serde(deserialize_with = "text")]
    pub command: String,
    #[serde(deserialize_with = "text")]
    pub output: String,
    #[serde(deserialize_with = "lenient")]
    pub exit_code: Option<i64>,
    #[serde(deserialize_with = "flag")]
    pub cancelled: bool,
    #[serde(deserialize_with = "flag")]
    pub truncated: bool,
    #[serde(deserialize_with = "flag")]
    pub exclude_from_context: bool,
}

/// An assistant message's usage.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct Usage {
    #[serde(deserialize_with = "count")]
    pub input: u64,
    #[serde(deserialize_with = "count")]
    pub output: u64,
    #[serde(deserialize_with = "view")]
    pub cost: Cost,
}

/// `usage.cost`.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub(super) struct Cost {
    #[serde(deserialize_with = "lenient")]
    pub total: Option<f64>,
}

/// One block of a message's content.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Block {
    #[serde(rename = "type", deserialize_with = "text")]
    pub kind: String,
    #[serde(deserialize_with = "text")]
    pub text: String,
    #[serde(deserialize_with = "text")]
    pub thinking: String,
    /// `toolCall`.
    #[serde(deserialize_with = "text")]
    pub id: String,
    #[serde(deserialize_with = "text")]
    pub name: String,
    pub arguments: Value,
    /// `image`.
    #[serde(deserialize_with = "text")]
    pub mime_type: String,
    #[serde(deserialize_with = "text")]
    pub data: String,
}

/// Reads a view of `v`; anything but an object (an array too, which serde would read field
/// by field) reads as the empty view.
pub(super) fn read<T: for<'de> Deserialize<'de> + Default>(v: &Value) -> T {
    match v {
        Value::Object(_) => T::deserialize(v).unwrap_or_default(),
        _ => T::default(),
    }
}

/// A field of the expected type, else `None`.
fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// A string field, else "".
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(lenient(d)?.unwrap_or_default())
}

/// A boolean field, else false.
fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(lenient(d)?.unwrap_or(false))
}

/// A count: an integer, a float cut to one (negative: 0), else 0.
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(v.as_u64()
        .or_else(|| v.as_f64().map(|f| f.max(0.0) as u64))
        .unwrap_or(0))
}

/// Any value the field holds, `null` included (a missing field stays `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A nested view; a field that is not an object reads as the empty view.
fn view<'de, D: Deserializer<'de>, T: for<'a> Deserialize<'a> + Default>(
    d: D,
) -> Result<T, D::Error> {
    Ok(read(&Value::deserialize(d)?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_of_another_type_read_as_empty_and_a_null_details_is_present() {
        let m: Message = read(&json!({
            "role": "toolResult", "toolName": 7, "isError": "yes", "details": null,
            "usage": [1], "exitCode": 2.5, "cancelled": true
        }));
        assert_eq!((m.role.as_str(), m.tool_name.as_str()), ("toolResult", ""));
        assert_eq!((m.is_error, m.exit_code, m.cancelled), (None, None, true));
        assert_eq!(
            m.details,
            Some(Value::Null),
            "an edit's null details still count"
        );
        assert_eq!(m.usage.input, 0);
        let e: Entry = read(&json!({"type": "compaction", "tokensBefore": 12.9}));
        assert_eq!((e.kind.as_str(), e.tokens_before), ("compaction", 12));
        let none: Message = read(&json!({"role": "user"}));
        assert_eq!(none.details, None);
        assert_eq!(read::<Header>(&json!(null)).id, "");
    }
}
