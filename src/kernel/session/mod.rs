//! Session files in pi's v3 format: header and entry types, their JSON lines, where files live,
//! and listing/lookup (`--continue`, `--resume`). Never writes files (that is `store.rs`) and
//! never prints: problems come back as `SessionError`s or warning strings.

mod load;
mod parse;
mod repair;
mod store;

pub use repair::UNFINISHED_TOOL_CALL;
pub use store::{compaction_text, Store};

use std::fmt;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::kernel::clock::{parse_iso, Clock};
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
    /// including pi's id-less v1, is an error because appending v3 entries would corrupt it.
    pub fn from_json(v: &Value) -> Result<Self, String> {
        if v.get("type").and_then(Value::as_str) != Some("session") {
            return Err("the first line is not a session header".into());
        }
        match v.get("version").and_then(Value::as_u64) {
            Some(2) | Some(3) => {}
            Some(n) => return Err(format!("unsupported session format version {n}")),
            None => return Err("unsupported session format version 1".into()),
        }
        let field = |name: &str| {
            v.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("the session header has no string `{name}`"))
        };
        Ok(SessionHeader {
            id: field("id")?,
            timestamp: field("timestamp")?,
            cwd: field("cwd")?,
            parent_session: v
                .get("parentSession")
                .and_then(Value::as_str)
                .map(str::to_string),
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
            EntryData::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
        }
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

impl Entry {
    /// The flat pi JSON object for this entry.
    pub fn to_json(&self) -> Result<Value, String> {
        let mut m = Map::new();
        m.insert("type".into(), self.data.type_name().into());
        m.insert("id".into(), self.id.clone().into());
        m.insert("parentId".into(), self.parent_id.clone().into());
        m.insert("timestamp".into(), self.timestamp.clone().into());
        self.data.put_fields(&mut m)?;
        Ok(Value::Object(m))
    }

    /// The entry as one line of JSON followed by `\n`, ready for a single write.
    pub fn to_line(&self) -> Result<String, String> {
        let mut s = serde_json::to_string(&self.to_json()?).map_err(|e| e.to_string())?;
        s.push('\n');
        Ok(s)
    }

    /// Reads a flat pi entry object. Unknown types become [`EntryData::Other`] and unreadable
    /// messages [`EntryData::RawMessage`]; a known type missing its fields is an error.
    pub fn from_json(v: Value) -> Result<Entry, String> {
        let obj = v.as_object().ok_or("an entry must be a JSON object")?;
        let kind = str_field(obj, "type")?;
        let id = str_field(obj, "id")?;
        let parent_id = match obj.get("parentId") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err("`parentId` must be a string or null".into()),
        };
        let timestamp = str_field(obj, "timestamp")?;
        let data = match kind.as_str() {
            "message" => {
                let raw = obj
                    .get("message")
                    .ok_or("a message entry has no `message`")?;
                match serde_json::from_value::<Message>(raw.clone()) {
                    Ok(m) => EntryData::Message(m),
                    Err(_) => EntryData::RawMessage(raw.clone()),
                }
            }
            "model_change" => EntryData::ModelChange {
                provider: str_field(obj, "provider")?,
                model_id: str_field(obj, "modelId")?,
            },
            "thinking_level_change" => EntryData::ThinkingLevelChange {
                thinking_level: str_field(obj, "thinkingLevel")?,
            },
            "compaction" => EntryData::Compaction {
                summary: str_field(obj, "summary")?,
                first_kept_entry_id: str_field(obj, "firstKeptEntryId")?,
                tokens_before: obj
                    .get("tokensBefore")
                    .and_then(Value::as_u64)
                    .ok_or("a compaction entry has no numeric `tokensBefore`")?,
                details: obj.get("details").filter(|d| !d.is_null()).cloned(),
            },
            "branch_summary" => EntryData::BranchSummary {
                from_id: str_field(obj, "fromId")?,
                summary: str_field(obj, "summary")?,
            },
            "label" => EntryData::Label {
                target_id: str_field(obj, "targetId")?,
                label: obj.get("label").and_then(Value::as_str).map(str::to_string),
            },
            "session_info" => EntryData::SessionInfo {
                name: str_field(obj, "name")?,
            },
            _ => EntryData::Other(v.clone()),
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
            EntryData::Other(v)
                if v.get("type").and_then(Value::as_str) == Some("custom_message") =>
            {
                let content = v.get("content")?.clone();
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

fn str_field(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("entry");
    obj.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{kind} entry has no string `{key}`"))
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Entry::from_json(Value::deserialize(d)?).map_err(serde::de::Error::custom)
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

/// The directory holding the sessions of `cwd`: `home/sessions/--<cwd>--`, where `<cwd>` loses
/// its leading `/` or `\` and has every `/`, `\` and `:` replaced by `-` (pi's naming).
pub fn session_dir(home: &Path, cwd: &Path) -> PathBuf {
    let cwd = cwd.to_string_lossy();
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(&cwd);
    let safe = trimmed.replace(['/', '\\', ':'], "-");
    home.join("sessions").join(format!("--{safe}--"))
}

/// The file name of a session: `<timestamp with : and . replaced by ->_<id>.jsonl`.
pub fn file_name(header: &SessionHeader) -> String {
    format!(
        "{}_{}.jsonl",
        header.timestamp.replace([':', '.'], "-"),
        header.id
    )
}

/// One session as the picker and `--continue` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session file.
    pub path: PathBuf,
    /// The header id.
    pub id: String,
    /// The header cwd.
    pub cwd: String,
    /// The header timestamp.
    pub created: String,
    /// Unix ms of the last entry's timestamp, or the file mtime if no entry has one.
    pub modified_ms: i64,
    /// How many `message` entries the file holds.
    pub message_count: usize,
    /// The text of the first user message.
    pub first_message: Option<String>,
    /// The latest `session_info` name.
    pub name: Option<String>,
}

/// Only the fields of an entry line that a summary needs; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(rename = "type")]
    kind: String,
    timestamp: Option<Value>,
    #[serde(borrow)]
    message: Option<&'a serde_json::value::RawValue>,
    name: Option<Value>,
}

/// The first non-blank line as a session header.
fn read_header(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> Option<SessionHeader> {
    loop {
        buf.clear();
        if reader.read_until(b'\n', buf).ok()? == 0 {
            return None;
        }
        if !buf.trim_ascii().is_empty() {
            let v: Value = serde_json::from_slice(buf).ok()?;
            return SessionHeader::from_json(&v).ok();
        }
    }
}

/// Reads a file line by line into a summary without keeping entries. `None` if it has no
/// valid header or (with `cwd`) belongs to another directory.
fn summarize(path: &Path) -> Option<SessionSummary> {
    let file = fs::File::open(path).ok()?;
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let header = read_header(&mut reader, &mut buf)?;
    let mut sum = SessionSummary {
        path: path.to_path_buf(),
        id: header.id,
        cwd: header.cwd,
        created: header.timestamp,
        modified_ms: 0,
        message_count: 0,
        first_message: None,
        name: None,
    };
    let mut last_ms = None;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(peek) = serde_json::from_slice::<Peek>(&buf) else {
            continue;
        };
        if let Some(ms) = peek
            .timestamp
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_iso)
        {
            last_ms = Some(ms);
        }
        match peek.kind.as_str() {
            "message" => {
                sum.message_count += 1;
                if sum.first_message.is_none() {
                    sum.first_message = peek
                        .message
                        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                        .as_ref()
                        .and_then(user_text_of);
                }
            }
            "session_info" => {
                if let Some(Value::String(name)) = peek.name {
                    sum.name = Some(name);
                }
            }
            _ => {}
        }
    }
    sum.modified_ms = last_ms.or_else(|| mtime_ms(path)).unwrap_or(0);
    Some(sum)
}

/// The text blocks of a user message (`content` as string or block array), if it is one.
fn user_text_of(m: &Value) -> Option<String> {
    if m.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    match m.get("content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            Some(texts.join("\n"))
        }
        _ => None,
    }
}

fn mtime_ms(path: &Path) -> Option<i64> {
    let modified = fs::metadata(path).ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

fn summaries(dir: &Path) -> Vec<SessionSummary> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .filter_map(|p| summarize(&p))
        .collect();
    newest_first(&mut out);
    out
}

/// Sorts by `modified_ms`, newest first (the path breaks ties, so the order is stable).
fn newest_first(sessions: &mut [SessionSummary]) {
    sessions.sort_by(|a, b| {
        b.modified_ms
            .cmp(&a.modified_ms)
            .then_with(|| b.path.cmp(&a.path))
    });
}

/// Every `*.jsonl` in `dir` with a valid session header, newest first by `modified_ms`.
/// A missing or unreadable directory lists nothing.
pub fn list(dir: &Path) -> Vec<SessionSummary> {
    summaries(dir)
}

/// Every session of every directory under `home/sessions/`, newest first (the picker's
/// "all directories" view).
pub fn list_all(home: &Path) -> Vec<SessionSummary> {
    let Ok(read) = fs::read_dir(home.join("sessions")) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .flat_map(|dir| summaries(&dir))
        .collect();
    newest_first(&mut out);
    out
}

/// For `--continue`: the newest session in `dir` whose header `cwd` equals `cwd`, by the time
/// of its last entry. Reads only each file's header and tail, so it stays fast for huge files.
pub fn find_latest(dir: &Path, cwd: &str) -> Option<PathBuf> {
    let read = fs::read_dir(dir).ok()?;
    let mut best: Option<(i64, PathBuf)> = None;
    for path in read.filter_map(Result::ok).map(|e| e.path()) {
        if path.extension().is_none_or(|x| x != "jsonl") || !path.is_file() {
            continue;
        }
        let Ok(file) = fs::File::open(&path) else {
            continue;
        };
        let mut buf = Vec::new();
        let Some(header) = read_header(&mut BufReader::new(file), &mut buf) else {
            continue;
        };
        if header.cwd != cwd {
            continue;
        }
        let ms = last_entry_ms(&path)
            .or_else(|| mtime_ms(&path))
            .unwrap_or(0);
        if best
            .as_ref()
            .is_none_or(|(b, p)| ms > *b || (ms == *b && path > *p))
        {
            best = Some((ms, path));
        }
    }
    best.map(|(_, p)| p)
}

/// The timestamp of the last readable entry within the file's final 64 KiB.
fn last_entry_ms(path: &Path) -> Option<i64> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 64 * 1024;
    let mut file = fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut tail = Vec::new();
    file.take(TAIL).read_to_end(&mut tail).ok()?;
    tail.split(|b| *b == b'\n').rev().find_map(|line| {
        let peek: Peek<'_> = serde_json::from_slice(line).ok()?;
        if peek.kind == "session" {
            return None;
        }
        peek.timestamp
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_iso)
    })
}

/// For `--resume ID` / `--session ID`: the session whose id equals `query`, else the only one
/// whose id starts with it. Never guesses: no match is `NotFound` (listing known ids), several
/// are `Ambiguous` (listing every candidate).
pub fn resolve(dir: &Path, query: &str) -> Result<PathBuf, SessionError> {
    let all = list(dir);
    let exact: Vec<&SessionSummary> = all.iter().filter(|s| s.id == query).collect();
    let candidates = if exact.is_empty() && !query.is_empty() {
        all.iter().filter(|s| s.id.starts_with(query)).collect()
    } else {
        exact
    };
    match candidates.as_slice() {
        [one] => Ok(one.path.clone()),
        [] => Err(not_found(dir, query, &all)),
        many => {
            let mut msg = format!("session id {query:?} is ambiguous; it matches:");
            for s in many {
                msg.push_str(&format!("\n  {}  {}", s.id, s.path.display()));
            }
            Err(SessionError::new(SessionErrorKind::Ambiguous, msg))
        }
    }
}

fn not_found(dir: &Path, query: &str, all: &[SessionSummary]) -> SessionError {
    let mut msg = format!("no session {query:?} in {}", dir.display());
    if all.is_empty() {
        msg.push_str(" (it holds no sessions)");
    } else {
        msg.push_str("; known sessions, newest first:");
        for s in all.iter().take(10) {
            let first = s.first_message.as_deref().map(preview).unwrap_or_default();
            msg.push_str(&format!("\n  {}  {first}", s.id));
        }
        if all.len() > 10 {
            msg.push_str(&format!("\n  … and {} more", all.len() - 10));
        }
    }
    SessionError::new(SessionErrorKind::NotFound, msg)
}

/// The first line of `text`, cut to 60 characters.
fn preview(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(60).collect();
    if line.chars().count() > 60 || text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const VALID: &str = include_str!("../../../fixtures/sessions/valid.jsonl");
    const NO_HEADER: &str = include_str!("../../../fixtures/sessions/no-header.jsonl");

    /// Writes a session with one user message at `last_ts` and returns its path.
    fn session(dir: &Path, id: &str, cwd: &str, last_ts: &str, text: &str) -> PathBuf {
        let path = dir.join(format!("{id}.jsonl"));
        let ts = "2026-01-01T00:00:00.000Z";
        let head = json!({"type": "session", "version": 3, "id": id, "timestamp": ts, "cwd": cwd});
        let msg = json!({"role": "user", "content": text, "timestamp": 0});
        let entry = json!({"type": "message", "id": "0000abcd", "parentId": null,
                           "timestamp": last_ts, "message": msg});
        fs::write(&path, format!("{head}\n{entry}\n")).unwrap();
        path
    }

    #[test]
    fn directory_and_file_names_follow_pi() {
        let home = Path::new("/h/.keel");
        let dir = session_dir(home, Path::new("/home/u/proj"));
        assert_eq!(dir, PathBuf::from("/h/.keel/sessions/--home-u-proj--"));
        let win = session_dir(home, Path::new("C:\\Users\\u"));
        assert_eq!(win, PathBuf::from("/h/.keel/sessions/--C--Users-u--"));
        let header = SessionHeader {
            id: "01a22a4d-c23c-773e-be8a-b1dc1a1a060b".into(),
            timestamp: "2026-11-30T02:34:28.797Z".into(),
            cwd: "/p".into(),
            parent_session: None,
        };
        assert_eq!(
            file_name(&header),
            "2026-11-30T02-34-28-797Z_01a22a4d-c23c-773e-be8a-b1dc1a1a060b.jsonl"
        );
        assert_eq!(
            header.to_json().to_string(),
            r#"{"type":"session","version":3,"id":"01a22a4d-c23c-773e-be8a-b1dc1a1a060b","timestamp":"2026-11-30T02:34:28.797Z","cwd":"/p"}"#
        );
    }

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

    #[test]
    fn list_summarizes_valid_files_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let valid = dir.path().join("valid.jsonl");
        fs::write(&valid, VALID).unwrap();
        fs::write(dir.path().join("no-header.jsonl"), NO_HEADER).unwrap();
        fs::write(dir.path().join("notes.txt"), VALID).unwrap();
        let newer = session(dir.path(), "newer", "/x", "2027-01-01T00:00:00.000Z", "hey");
        let all = list(dir.path());
        let paths: Vec<&Path> = all.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(paths, [newer.as_path(), valid.as_path()]);
        let want = SessionSummary {
            path: valid,
            id: "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70".into(),
            cwd: "/home/u/proj".into(),
            created: "2026-11-30T02:39:46.717Z".into(),
            modified_ms: parse_iso("2026-11-30T02:39:50.000Z").unwrap(),
            message_count: 5,
            first_message: Some("list the files".into()),
            name: Some("my run".into()),
        };
        assert_eq!(all[1], want);
        assert!(list(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn list_all_merges_every_directory_newest_first() {
        let home = tempfile::tempdir().unwrap();
        let a = session_dir(home.path(), Path::new("/a"));
        let b = session_dir(home.path(), Path::new("/b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        let old = session(&a, "old", "/a", "2026-01-01T00:00:00.000Z", "first");
        let mid = session(&b, "mid", "/b", "2026-02-01T00:00:00.000Z", "second");
        let new = session(&a, "new", "/a", "2026-03-01T00:00:00.000Z", "third");
        let paths: Vec<PathBuf> = list_all(home.path()).into_iter().map(|s| s.path).collect();
        assert_eq!(paths, [new, mid, old]);
        assert!(list_all(&home.path().join("missing")).is_empty());
    }

    #[test]
    fn find_latest_uses_last_entry_time_and_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // written first (older mtime) but with the newest entry
        let want = session(d, "b-newest", "/a", "2026-06-01T00:00:00.000Z", "b");
        session(d, "a-older", "/a", "2026-05-01T00:00:00.000Z", "a");
        session(d, "c-other", "/c", "2026-07-01T00:00:00.000Z", "c");
        assert_eq!(find_latest(d, "/a"), Some(want));
        assert_eq!(find_latest(d, "/nowhere"), None);
    }

    #[test]
    fn resolve_never_guesses() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let abc = session(d, "abc", "/p", "2026-01-03T00:00:00.000Z", "first\nsecond");
        let abcd = session(d, "abcd", "/p", "2026-01-02T00:00:00.000Z", "two");
        let xyz = session(d, "xyz9", "/p", "2026-01-01T00:00:00.000Z", "three");
        assert_eq!(resolve(d, "abc").unwrap(), abc);
        assert_eq!(resolve(d, "abcd").unwrap(), abcd);
        assert_eq!(resolve(d, "xy").unwrap(), xyz);
        let amb = resolve(d, "ab").unwrap_err();
        assert_eq!(amb.kind, SessionErrorKind::Ambiguous);
        let want = format!(
            "session id \"ab\" is ambiguous; it matches:\n  abc  {}\n  abcd  {}",
            abc.display(),
            abcd.display()
        );
        assert_eq!(amb.message, want);
        let none = resolve(d, "q").unwrap_err();
        assert_eq!(none.kind, SessionErrorKind::NotFound);
        let want = format!(
            "no session \"q\" in {}; known sessions, newest first:\n  abc  first…\n  abcd  two\n  xyz9  three",
            d.display()
        );
        assert_eq!(none.message, want);
        assert_eq!(resolve(d, "").unwrap_err().kind, SessionErrorKind::NotFound);
        let empty = tempfile::tempdir().unwrap();
        let err = resolve(empty.path(), "abc").unwrap_err();
        assert!(err.message.ends_with("(it holds no sessions)"), "{err}");
    }
}
