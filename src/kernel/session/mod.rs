//! Session files in pi's v3 format: header and entry types, their JSON lines, and the errors.
//! Where files live and how they are found is `list.rs`; loading is `load.rs`; writing is
//! `store.rs`. Never prints: problems come back as `SessionError`s or warning strings.

mod list;
mod load;
mod parse;
mod repair;
mod store;
mod written;

pub use list::{
    file_name, find_latest, id_matches, list, list_all, resolve, session_dir, short_id,
    SessionSummary, SHORT_ID_CHARS,
};
pub use repair::UNFINISHED_TOOL_CALL;
pub use store::{compaction_text, Store};

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::kernel::clock::{parse_iso, Clock};
use crate::kernel::field::{self, Field};
use crate::kernel::message::{Message, UserMessage};

/// The format version keel writes in the header line.
pub const VERSION: u64 = 3;

/// The first line of a session file:
/// `{"type":"session","version":3,"id","timestamp","cwd","parentSession"?}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// The session id (a UUIDv7, or a user-chosen id).
    pub id: String,
    /// Creation time, ISO-8601 UTC with milliseconds.
    pub timestamp: String,
    /// The absolute working directory the session belongs to.
    pub cwd: String,
    /// For forks and clones: the absolute path of the source session file.
    pub parent_session: Option<String>,
}

impl SessionHeader {
    /// A fresh header for `cwd` with an id and timestamp from `clock`.
    pub fn new(clock: &Clock, cwd: impl Into<String>) -> Self {
        SessionHeader {
            id: clock.session_id(),
            timestamp: clock.now_iso(),
            cwd: cwd.into(),
            parent_session: None,
        }
    }

    /// The header as pi's JSON object (field order as pi writes it).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), "session".into());
        m.insert("version".into(), VERSION.into());
        m.insert("id".into(), self.id.clone().into());
        m.insert("timestamp".into(), self.timestamp.clone().into());
        m.insert("cwd".into(), self.cwd.clone().into());
        if let Some(p) = &self.parent_session {
            m.insert("parentSession".into(), p.clone().into());
        }
        Value::Object(m)
    }

    /// Reads a header object. Accepts versions 2 and 3 (same entry shapes); anything else,
    /// including pi's id-less v1, is an `Invalid` error because appending v3 entries would
    /// corrupt it.
    pub fn from_json(v: &Value) -> Result<Self, SessionError> {
        Self::read_json(v).map_err(SessionError::invalid)
    }

    /// [`SessionHeader::from_json`] with the reason as text.
    fn read_json(v: &Value) -> Result<Self, String> {
        let h: written::HeaderView = field::read(v);
        if h.kind.given().as_deref() != Some("session") {
            return Err("the first line is not a session header".into());
        }
        match h.version.given() {
            Some(2) | Some(3) => {}
            Some(n) => return Err(format!("unsupported session format version {n}")),
            None => return Err("unsupported session format version 1".into()),
        }
        let text = |f: Field<String>, name: &str| {
            f.given()
                .ok_or_else(|| format!("the session header has no string `{name}`"))
        };
        Ok(SessionHeader {
            id: text(h.id, "id")?,
            timestamp: text(h.timestamp, "timestamp")?,
            cwd: text(h.cwd, "cwd")?,
            parent_session: h.parent_session.given(),
        })
    }
}

/// What an entry says, by its `type`.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryData {
    /// `message {message}` with a role keel understands.
    Message(Message),
    /// `message` whose message keel cannot read (unknown role such as `system`, `custom`,
    /// `bashExecution`, or an unreadable known one): kept verbatim, never sent to a model.
    RawMessage(Value),
    /// `model_change {provider, modelId}`.
    ModelChange {
        /// Provider name, e.g. `anthropic`.
        provider: String,
        /// Model id within the provider.
        model_id: String,
    },
    /// `thinking_level_change {thinkingLevel}`.
    ThinkingLevelChange {
        /// `off`, `minimal`, `low`, `medium`, `high` or `xhigh`.
        thinking_level: String,
    },
    /// `compaction {summary, firstKeptEntryId, tokensBefore, details?}`.
    Compaction {
        /// The summary that replaces the history before `first_kept_entry_id`.
        summary: String,
        /// The first entry still sent verbatim after the summary.
        first_kept_entry_id: String,
        /// Context size before compacting.
        tokens_before: u64,
        /// Free-form data (pi: read and modified files).
        details: Option<Value>,
    },
    /// `branch_summary {fromId, summary}`.
    BranchSummary {
        /// The entry the abandoned branch started from.
        from_id: String,
        /// What happened on the abandoned branch.
        summary: String,
    },
    /// `label {targetId, label?}`.
    Label {
        /// The labelled entry.
        target_id: String,
        /// The label; `None` removes it.
        label: Option<String>,
    },
    /// `session_info {name}`.
    SessionInfo {
        /// The session's display name.
        name: String,
    },
    /// Any other entry type: the whole line as read (or, when appending, an object with at
    /// least `type`); `id`, `parentId` and `timestamp` are taken from the [`Entry`].
    Other(Value),
}

impl EntryData {
    /// The pi `type` string of this entry.
    pub fn type_name(&self) -> &str {
        match self {
            EntryData::Message(_) | EntryData::RawMessage(_) => "message",
            EntryData::ModelChange { .. } => "model_change",
            EntryData::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryData::Compaction { .. } => "compaction",
            EntryData::BranchSummary { .. } => "branch_summary",
            EntryData::Label { .. } => "label",
            EntryData::SessionInfo { .. } => "session_info",
            EntryData::Other(v) => written::kind_of(v),
        }
    }

    /// A pi `custom` entry (`customType` = `kind`, the payload in `data`): pi skips it, keel
    /// reads it back with [`Entry::custom`].
    pub fn custom<T: serde::Serialize>(kind: &str, data: &T) -> EntryData {
        let data = serde_json::to_value(data).unwrap_or_default();
        EntryData::Other(serde_json::json!({"type": "custom", "customType": kind, "data": data}))
    }

    /// Whether this is a conversation message (what makes a lazy session file appear).
    pub fn is_message(&self) -> bool {
        matches!(self, EntryData::Message(_) | EntryData::RawMessage(_))
    }

    /// Adds this entry's type fields to a line object (`Other` never overrides common keys).
    fn put_fields(&self, m: &mut Map<String, Value>) -> Result<(), String> {
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        match self {
            EntryData::Message(msg) => put(
                "message",
                serde_json::to_value(msg).map_err(|e| e.to_string())?,
            ),
            EntryData::RawMessage(v) => put("message", v.clone()),
            EntryData::ModelChange { provider, model_id } => {
                put("provider", provider.as_str().into());
                put("modelId", model_id.as_str().into());
            }
            EntryData::ThinkingLevelChange { thinking_level } => {
                put("thinkingLevel", thinking_level.as_str().into())
            }
            EntryData::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                details,
            } => {
                put("summary", summary.as_str().into());
                put("firstKeptEntryId", first_kept_entry_id.as_str().into());
                put("tokensBefore", (*tokens_before).into());
                if let Some(d) = details {
                    put("details", d.clone());
                }
            }
            EntryData::BranchSummary { from_id, summary } => {
                put("fromId", from_id.as_str().into());
                put("summary", summary.as_str().into());
            }
            EntryData::Label { target_id, label } => {
                put("targetId", target_id.as_str().into());
                if let Some(l) = label {
                    put("label", l.as_str().into());
                }
            }
            EntryData::SessionInfo { name } => put("name", name.as_str().into()),
            EntryData::Other(v) => {
                let Some(obj) = v.as_object() else {
                    return Err("an `Other` entry must be a JSON object".into());
                };
                if self.type_name().is_empty() {
                    return Err("an `Other` entry needs a string `type`".into());
                }
                for (k, val) in obj {
                    if !ENTRY_KEYS.contains(&k.as_str()) {
                        put(k, val.clone());
                    }
                }
            }
        }
        Ok(())
    }
}

/// One line of a session file after the header: a node of the session tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// 8 hex digits, unique in the file.
    pub id: String,
    /// The previous entry on this branch; `None` for a root.
    pub parent_id: Option<String>,
    /// ISO-8601 UTC with milliseconds.
    pub timestamp: String,
    /// The type and its fields.
    pub data: EntryData,
}

/// Keys every entry line carries; `Other` payloads never override them.
const ENTRY_KEYS: [&str; 4] = ["type", "id", "parentId", "timestamp"];

/// The `customType` and payload of a pi `custom` entry.
#[derive(serde::Deserialize)]
struct Custom<T> {
    #[serde(rename = "customType")]
    custom_type: String,
    data: T,
}

impl Entry {
    /// The payload of a `custom` entry of type `kind` (`None`: another entry, or a payload
    /// without `T`'s shape).
    pub fn custom<T: serde::de::DeserializeOwned>(&self, kind: &str) -> Option<T> {
        let EntryData::Other(v) = &self.data else {
            return None;
        };
        if self.data.type_name() != "custom" {
            return None;
        }
        let c: Custom<T> = serde_json::from_value(v.clone()).ok()?;
        (c.custom_type == kind).then_some(c.data)
    }

    /// The flat pi JSON object for this entry; an `Invalid` error if a message cannot be
    /// serialized.
    pub fn to_json(&self) -> Result<Value, SessionError> {
        self.json().map_err(SessionError::invalid)
    }

    fn json(&self) -> Result<Value, String> {
        let mut m = Map::new();
        m.insert("type".into(), self.data.type_name().into());
        m.insert("id".into(), self.id.clone().into());
        m.insert("parentId".into(), self.parent_id.clone().into());
        m.insert("timestamp".into(), self.timestamp.clone().into());
        self.data.put_fields(&mut m)?;
        Ok(Value::Object(m))
    }

    /// The entry as one line of JSON followed by `\n`, ready for a single write; an `Invalid`
    /// error if it cannot be serialized.
    pub fn to_line(&self) -> Result<String, SessionError> {
        let line = self
            .json()
            .and_then(|v| serde_json::to_string(&v).map_err(|e| e.to_string()));
        let mut s = line.map_err(SessionError::invalid)?;
        s.push('\n');
        Ok(s)
    }

    /// Reads a flat pi entry object. Unknown types become [`EntryData::Other`] and unreadable
    /// messages [`EntryData::RawMessage`]; a known type missing its fields is an `Invalid`
    /// error.
    pub fn from_json(v: Value) -> Result<Entry, SessionError> {
        Entry::read_json(v).map_err(SessionError::invalid)
    }

    /// [`Entry::from_json`] with the reason as text.
    fn read_json(v: Value) -> Result<Entry, String> {
        if !v.is_object() {
            return Err("an entry must be a JSON object".into());
        }
        let e: written::EntryView = field::read(&v);
        let kind = e.kind.given().ok_or("entry entry has no string `type`")?;
        let text = |f: Field<String>, key: &str| {
            f.given()
                .ok_or_else(|| format!("{kind} entry has no string `{key}`"))
        };
        let id = text(e.id, "id")?;
        let parent_id = match e.parent_id {
            Field::Absent | Field::Null => None,
            Field::Given(s) => Some(s),
            Field::Wrong => return Err("`parentId` must be a string or null".into()),
        };
        let timestamp = text(e.timestamp, "timestamp")?;
        let data = match kind.as_str() {
            "message" => match e.message {
                Field::Absent => return Err("a message entry has no `message`".into()),
                Field::Null | Field::Wrong => EntryData::RawMessage(Value::Null),
                Field::Given(raw) => match serde_json::from_value::<Message>(raw.clone()) {
                    Ok(m) => EntryData::Message(m),
                    Err(_) => EntryData::RawMessage(raw),
                },
            },
            "model_change" => EntryData::ModelChange {
                provider: text(e.provider, "provider")?,
                model_id: text(e.model_id, "modelId")?,
            },
            "thinking_level_change" => EntryData::ThinkingLevelChange {
                thinking_level: text(e.thinking_level, "thinkingLevel")?,
            },
            "compaction" => EntryData::Compaction {
                summary: text(e.summary, "summary")?,
                first_kept_entry_id: text(e.first_kept_entry_id, "firstKeptEntryId")?,
                tokens_before: e
                    .tokens_before
                    .given()
                    .ok_or("a compaction entry has no numeric `tokensBefore`")?,
                details: e.details.given(),
            },
            "branch_summary" => EntryData::BranchSummary {
                from_id: text(e.from_id, "fromId")?,
                summary: text(e.summary, "summary")?,
            },
            "label" => EntryData::Label {
                target_id: text(e.target_id, "targetId")?,
                label: e.label.given(),
            },
            "session_info" => EntryData::SessionInfo {
                name: text(e.name, "name")?,
            },
            _ => EntryData::Other(v),
        };
        Ok(Entry {
            id,
            parent_id,
            timestamp,
            data,
        })
    }
}

/// pi's wrapping of a branch summary when it is sent to the model.
const BRANCH_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUFFIX: &str = "</summary>";

impl Entry {
    /// What this entry contributes to the model context when it is on the branch: messages
    /// with a known role, and (as in pi) branch summaries and `custom_message` entries as user
    /// messages. Compactions are handled by the store; everything else contributes nothing.
    pub fn context_message(&self) -> Option<Message> {
        match &self.data {
            EntryData::Message(m) => Some(m.clone()),
            EntryData::RawMessage(v) => {
                crate::kernel::tool::bash::BashExecution::from_json(v)?.context_message()
            }
            EntryData::BranchSummary { summary, .. } if !summary.is_empty() => Some(Message::user(
                format!("{BRANCH_PREFIX}{summary}{BRANCH_SUFFIX}"),
                iso_ms(&self.timestamp),
            )),
            EntryData::Other(v) if written::kind_of(v) == "custom_message" => {
                let written::EntryView { content, .. } = field::read(v);
                let content = match content {
                    Field::Absent => return None,
                    Field::Null | Field::Wrong => Value::Null,
                    Field::Given(c) => c,
                };
                let user = json!({"content": content, "timestamp": iso_ms(&self.timestamp)});
                serde_json::from_value::<UserMessage>(user)
                    .ok()
                    .map(Message::from)
            }
            _ => None,
        }
    }
}

/// Unix ms of an ISO timestamp, 0 if it does not parse.
fn iso_ms(ts: &str) -> i64 {
    parse_iso(ts).unwrap_or(0)
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json().map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Entry::read_json(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// What went wrong with a session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionErrorKind {
    /// Reading, writing or creating the file failed.
    Io,
    /// Another keel process holds the file's lock.
    Locked,
    /// No session matches the id.
    NotFound,
    /// Several sessions match the id prefix.
    Ambiguous,
    /// The file is not a session file, or an entry cannot be written.
    Invalid,
}

/// A session error: a kind for the exit-code table and a message for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionError {
    /// What kind of failure this is.
    pub kind: SessionErrorKind,
    /// A complete sentence naming the file or id involved.
    pub message: String,
}

impl SessionError {
    /// An error of `kind` with `message`.
    pub fn new(kind: SessionErrorKind, message: impl Into<String>) -> Self {
        SessionError {
            kind,
            message: message.into(),
        }
    }

    /// An `Invalid` error: a line that is not a session header or entry, or an entry that
    /// cannot be written.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(SessionErrorKind::Invalid, message)
    }

    /// An I/O error about `path` while doing `what`.
    pub fn io(what: &str, path: &Path, err: &std::io::Error) -> Self {
        Self::new(
            SessionErrorKind::Io,
            format!("cannot {what} session {}: {err}", path.display()),
        )
    }
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SessionError {}

/// Whether two paths name one session file (as written, or once both are resolved).
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialize_as_flat_pi_lines() {
        let entry = Entry {
            id: "c2338056".into(),
            parent_id: Some("eee4709c".into()),
            timestamp: "2026-11-30T02:39:46.719Z".into(),
            data: EntryData::Compaction {
                summary: "s".into(),
                first_kept_entry_id: "eee4709c".into(),
                tokens_before: 42,
                details: Some(serde_json::json!({"readFiles": ["a"]})),
            },
        };
        let text = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            text,
            r#"{"type":"compaction","id":"c2338056","parentId":"eee4709c","timestamp":"2026-11-30T02:39:46.719Z","summary":"s","firstKeptEntryId":"eee4709c","tokensBefore":42,"details":{"readFiles":["a"]}}"#
        );
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), entry);
        let root = r#"{"type":"label","id":"1","parentId":null,"timestamp":"t","targetId":"x"}"#;
        let label: Entry = serde_json::from_str(root).unwrap();
        assert_eq!(label.parent_id, None);
        assert_eq!(serde_json::to_string(&label).unwrap(), root);
        let bad = r#"{"type":"model_change","id":"1","parentId":null,"timestamp":"t"}"#;
        let err = serde_json::from_str::<Entry>(bad).unwrap_err().to_string();
        assert!(
            err.contains("model_change entry has no string `provider`"),
            "{err}"
        );
    }
}
