//! The fields of a session file's lines that keel reads, as they were written: typed views
//! read once with [`crate::kernel::field`] (what they mean, and what is wrong with them, is
//! said by `mod.rs`). Every other field of an entry stays in the entry's `Value` and is written
//! back as read.

use serde::Deserialize;
use serde_json::Value;

use crate::kernel::field::{Field, FieldType};

/// The header line.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct HeaderView {
    #[serde(rename = "type")]
    pub kind: Field<String>,
    pub version: Field<u64>,
    pub id: Field<String>,
    pub timestamp: Field<String>,
    pub cwd: Field<String>,
    pub parent_session: Field<String>,
}

/// An entry line: the fields every entry has and those of the types keel knows.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct EntryView {
    #[serde(rename = "type")]
    pub kind: Field<String>,
    pub id: Field<String>,
    pub parent_id: Field<String>,
    pub timestamp: Field<String>,
    /// `message`: kept as written (a message keel cannot read stays verbatim).
    pub message: Field<Value>,
    pub provider: Field<String>,
    pub model_id: Field<String>,
    pub thinking_level: Field<String>,
    pub summary: Field<String>,
    pub first_kept_entry_id: Field<String>,
    pub tokens_before: Field<u64>,
    pub details: Field<Value>,
    pub from_id: Field<String>,
    pub target_id: Field<String>,
    pub label: Field<String>,
    pub name: Field<String>,
    /// A `custom_message` entry's `content`.
    pub content: Field<Value>,
}

/// A message as written, for what a listing shows of it: its role and, for a user message,
/// its text (`content` a string or a list of blocks).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct MessageView {
    pub role: Field<String>,
    pub content: Field<ContentView>,
}

impl FieldType for MessageView {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

/// A message's `content`: text, or blocks (only `{"type": "text", "text": …}` ones are read).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum ContentView {
    Text(String),
    Blocks(Vec<Field<BlockView>>),
}

impl FieldType for ContentView {
    const MUST_BE: &'static str = "a string or a list of blocks";
}

/// One content block.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct BlockView {
    #[serde(rename = "type")]
    pub kind: Field<String>,
    pub text: Field<String>,
}

impl FieldType for BlockView {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

/// The `type` of an entry kept as written (`""` when it has no string `type`).
pub(super) fn kind_of(v: &Value) -> &str {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<&'a str>,
    }
    if !v.is_object() {
        return "";
    }
    Kind::deserialize(v).ok().and_then(|k| k.kind).unwrap_or("")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use serde_json::json;

    use super::super::{Entry, EntryData, SessionHeader};

    /// What reading each malformed line says, word for word, and in which order the fields
    /// are judged (`type` first, then `id`, `parentId`, `timestamp`, then the type's own).
    #[test]
    fn a_malformed_line_is_refused_with_the_same_words() {
        let entry = |v| Entry::from_json(v).err().map(|e| e.to_string());
        let cases = [
            (json!([1]), "an entry must be a JSON object"),
            (json!({"id": 1}), "entry entry has no string `type`"),
            (
                json!({"type": 3, "id": "a"}),
                "entry entry has no string `type`",
            ),
            (
                json!({"type": "label", "timestamp": 1}),
                "label entry has no string `id`",
            ),
            (
                json!({"type": "x", "id": "a", "parentId": 5}),
                "`parentId` must be a string or null",
            ),
            (
                json!({"type": "x", "id": "a", "parentId": null}),
                "x entry has no string `timestamp`",
            ),
            (
                json!({"type": "message", "id": "a", "timestamp": "t"}),
                "a message entry has no `message`",
            ),
            (
                json!({"type": "compaction", "id": "a", "timestamp": "t", "summary": "s",
                       "firstKeptEntryId": "b", "tokensBefore": -1}),
                "a compaction entry has no numeric `tokensBefore`",
            ),
            (
                json!({"type": "model_change", "id": "a", "timestamp": "t", "provider": "p"}),
                "model_change entry has no string `modelId`",
            ),
        ];
        for (line, want) in cases {
            assert_eq!(entry(line.clone()).as_deref(), Some(want), "{line}");
        }
        let header = |v| SessionHeader::from_json(&v).err().map(|e| e.to_string());
        let base =
            json!({"type": "session", "version": 3, "id": "i", "timestamp": "t", "cwd": "/"});
        assert_eq!(header(base.clone()), None);
        let with = |k: &str, v| {
            let mut h = base.clone();
            h[k] = v;
            h
        };
        for (line, want) in [
            (json!([]), "the first line is not a session header"),
            (
                with("version", json!(4)),
                "unsupported session format version 4",
            ),
            (
                with("version", json!(3.0)),
                "unsupported session format version 1",
            ),
            (
                with("cwd", json!(null)),
                "the session header has no string `cwd`",
            ),
        ] {
            assert_eq!(header(line.clone()).as_deref(), Some(want), "{line}");
        }
    }

    /// Entries keel cannot read are kept as written: an unknown type, a message it cannot
    /// read (even `null`), and their fields in their order.
    #[test]
    fn unknown_and_unreadable_entries_are_kept_as_written() {
        let other = json!({"type": "zz", "id": "a", "parentId": null, "timestamp": "t", "b": [1.5, {"y": 1, "x": 2}]});
        let e = Entry::from_json(other.clone()).unwrap();
        assert_eq!(e.data.type_name(), "zz");
        assert_eq!(e.data, EntryData::Other(other));
        for message in [json!({"role": "system", "z": 1, "a": 2}), json!(null)] {
            let line = json!({"type": "message", "id": "a", "timestamp": "t", "message": message});
            let e = Entry::from_json(line).unwrap();
            assert_eq!(e.data, EntryData::RawMessage(message.clone()));
            let written = e.to_line().unwrap();
            assert!(written.contains(&message.to_string()), "{written}");
        }
        let c = json!({"type": "compaction", "id": "a", "timestamp": "t", "summary": "s",
                       "firstKeptEntryId": "b", "tokensBefore": 7, "details": null, "label": 1});
        let EntryData::Compaction {
            details,
            tokens_before,
            ..
        } = Entry::from_json(c).unwrap().data
        else {
            panic!("a compaction")
        };
        assert_eq!((details, tokens_before), (None, 7));
    }
}
