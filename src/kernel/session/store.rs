//! The append-only session file: lazy creation, one `write_all` per entry line, the advisory
//! lock, loading with torn-line tolerance, the current branch and the model context built from
//! it. Never rewrites or truncates a file, never reads the system clock (ids and times come from
//! `Clock`), and never prints: load problems are returned as warning strings.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{iso_ms, Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::clock::Clock;
use crate::kernel::message::Message;

/// pi's wrapping of a compaction summary when it is sent to the model.
const COMPACTION_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUFFIX: &str = "\n</summary>";

/// A compaction summary as the model sees it (a user message).
pub fn compaction_text(summary: &str) -> String {
    format!("{COMPACTION_PREFIX}{summary}{COMPACTION_SUFFIX}")
}

/// One session: its header, its entries in file order, the current leaf and (once
/// materialized) the open, locked file that new entries are appended to.
#[derive(Debug)]
pub struct Store {
    header: SessionHeader,
    /// `None` for an in-memory session (`--no-session`).
    path: Option<PathBuf>,
    entries: Vec<Entry>,
    /// Entry id → index in `entries` (the later one wins for duplicate ids, as in pi).
    by_id: HashMap<String, usize>,
    leaf: Option<usize>,
    /// The append handle; holds the exclusive lock for the Store's lifetime.
    file: Option<File>,
    /// The file does not end with `\n` (torn line or failed write): start the next write with one.
    needs_newline: bool,
}

impl Store {
    /// A session that will live at `path`. Nothing touches the disk until the first `message`
    /// entry is appended; then the header and every buffered entry are written at once.
    pub fn new_file(path: PathBuf, header: SessionHeader) -> Store {
        Store::build(Some(path), header)
    }

    /// A session that is never written (`--no-session`).
    pub fn in_memory(header: SessionHeader) -> Store {
        Store::build(None, header)
    }

    fn build(path: Option<PathBuf>, header: SessionHeader) -> Store {
        Store {
            header,
            path,
            entries: Vec::new(),
            by_id: HashMap::new(),
            leaf: None,
            file: None,
            needs_newline: false,
        }
    }

    /// Loads an existing session file and takes its lock. The leaf is the last entry in the
    /// file. Torn or malformed lines are skipped and reported in the returned warnings; a file
    /// whose first line is not a session header is an `Invalid` error.
    pub fn open(path: &Path) -> Result<(Store, Vec<String>), SessionError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => SessionError::new(
                    SessionErrorKind::NotFound,
                    format!("session {} does not exist", path.display()),
                ),
                _ => SessionError::io("open", path, &e),
            })?;
        lock(&file, path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| SessionError::io("read", path, &e))?;
        let (header, entries, warnings) = parse(path, &bytes)?;
        let mut store = Store::build(Some(path.to_path_buf()), header);
        for entry in entries {
            store.push(entry);
        }
        store.file = Some(file);
        store.needs_newline = !bytes.is_empty() && !bytes.ends_with(b"\n");
        Ok((store, warnings))
    }

    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The session file, `None` for an in-memory session. The file may not exist yet.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every entry, in file order (all branches).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The id of the current leaf: the parent of the next appended entry.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.map(|i| self.entries[i].id.as_str())
    }

    /// Whether the file has been created (and is locked by this Store).
    pub fn is_materialized(&self) -> bool {
        self.file.is_some()
    }

    /// Moves the leaf to `id` (or before the first entry with `None`), so the next append
    /// starts a new branch there. Not persisted: on load the leaf is the last entry.
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), SessionError> {
        self.leaf = match id {
            None => None,
            Some(id) => Some(*self.by_id.get(id).ok_or_else(|| {
                SessionError::new(
                    SessionErrorKind::NotFound,
                    format!("no entry {id:?} in session {}", self.header.id),
                )
            })?),
        };
        Ok(())
    }

    /// Appends an entry under the current leaf and makes it the leaf. Its id comes from
    /// `clock.entry_id()` (redrawn on collision), its timestamp from `clock.now_iso()`.
    /// The line is written with one `write_all`; on error nothing is appended.
    pub fn append(&mut self, data: EntryData, clock: &Clock) -> Result<&Entry, SessionError> {
        self.append_as(None, None, data, clock)
    }

    /// Like [`Store::append`], with the id the kernel already gave the entry (a fresh id is
    /// drawn only if `id` is taken in this file; the caller reads the id it got back) and
    /// optionally the entry time in Unix ms.
    pub fn append_as(
        &mut self,
        id: Option<&str>,
        at_ms: Option<i64>,
        data: EntryData,
        clock: &Clock,
    ) -> Result<&Entry, SessionError> {
        let id = match id {
            Some(id) if !id.is_empty() && !self.by_id.contains_key(id) => id.to_string(),
            _ => self.fresh_id(clock),
        };
        let entry = Entry {
            id,
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: match at_ms {
                Some(ms) => crate::kernel::clock::iso(ms),
                None => clock.now_iso(),
            },
            data,
        };
        let line = entry.to_line().map_err(|e| {
            SessionError::new(
                SessionErrorKind::Invalid,
                format!("cannot write a {} entry: {e}", entry.data.type_name()),
            )
        })?;
        if self.file.is_some() {
            self.write(line.as_bytes())?;
        } else if self.path.is_some() && entry.data.is_message() {
            self.materialize(&line)?;
        }
        let i = self.push(entry);
        Ok(&self.entries[i])
    }

    /// Flushes written entries to stable storage (`sync_data`), if the file exists.
    pub fn sync(&mut self) -> Result<(), SessionError> {
        match (&self.file, &self.path) {
            (Some(f), Some(p)) => f.sync_data().map_err(|e| SessionError::io("sync", p, &e)),
            _ => Ok(()),
        }
    }

    /// The entries on the path from the root to the leaf.
    pub fn branch(&self) -> Vec<&Entry> {
        self.branch_to(self.leaf_id()).unwrap_or_default()
    }

    /// The messages the model sees: the branch root→leaf. With a compaction on the branch
    /// (the last one wins), it is the wrapped summary, then the messages from its
    /// `firstKeptEntryId` up to the compaction, then those after it. Branch summaries and
    /// `custom_message` entries become user messages as in pi; unknown roles are left out.
    pub fn context(&self) -> Vec<Message> {
        self.context_entries().into_iter().map(|(_, m)| m).collect()
    }

    /// [`Store::context`] with the id of the entry behind each message (the summary message
    /// carries its compaction entry's id).
    pub fn context_entries(&self) -> Vec<(String, Message)> {
        let path = self.branch();
        let keep = |e: &&Entry| e.context_message().map(|m| (e.id.clone(), m));
        let compaction = path
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| match &e.data {
                EntryData::Compaction {
                    summary,
                    first_kept_entry_id,
                    ..
                } => Some((i, summary, first_kept_entry_id, e)),
                _ => None,
            });
        let Some((at, summary, first_kept, entry)) = compaction else {
            return path.iter().filter_map(keep).collect();
        };
        let mut out = vec![(
            entry.id.clone(),
            Message::user(compaction_text(summary), iso_ms(&entry.timestamp)),
        )];
        if let Some(start) = path[..at].iter().position(|e| &e.id == first_kept) {
            out.extend(path[start..at].iter().filter_map(keep));
        }
        out.extend(path[at + 1..].iter().filter_map(keep));
        out
    }

    /// The provider and model of the last `model_change` on the current branch.
    pub fn last_model(&self) -> Option<(&str, &str)> {
        self.branch().into_iter().rev().find_map(|e| match &e.data {
            EntryData::ModelChange { provider, model_id } => {
                Some((provider.as_str(), model_id.as_str()))
            }
            _ => None,
        })
    }

    /// Writes a new session file at `path` holding the current branch (ids kept) under
    /// `header` (the caller sets `parent_session`). Written and locked immediately.
    pub fn fork_to(&self, path: PathBuf, header: SessionHeader) -> Result<Store, SessionError> {
        self.fork_at(self.leaf_id(), Some(path), header)
    }

    /// A new session holding the branch that ends at `leaf` (nothing for `None`), ids kept,
    /// under `header`. With a path it is written and locked at once; without one it stays in
    /// memory (a `--no-session` fork).
    pub fn fork_at(
        &self,
        leaf: Option<&str>,
        path: Option<PathBuf>,
        header: SessionHeader,
    ) -> Result<Store, SessionError> {
        let mut store = Store::build(path, header);
        for entry in self.branch_to(leaf)? {
            store.push(entry.clone());
        }
        if !store.entries.is_empty() {
            store.materialize("")?;
        }
        Ok(store)
    }

    /// The entries on the path from the root to `leaf` (none for `None`).
    pub fn branch_to(&self, leaf: Option<&str>) -> Result<Vec<&Entry>, SessionError> {
        let Some(id) = leaf else {
            return Ok(Vec::new());
        };
        let Some(&start) = self.by_id.get(id) else {
            return Err(SessionError::new(
                SessionErrorKind::NotFound,
                format!("no entry {id:?} in session {}", self.header.id),
            ));
        };
        let mut out = Vec::new();
        let mut cur = Some(start);
        while let Some(i) = cur {
            if out.len() >= self.entries.len() {
                break; // a parentId cycle in a damaged file
            }
            let entry = &self.entries[i];
            out.push(entry);
            cur = entry
                .parent_id
                .as_ref()
                .and_then(|p| self.by_id.get(p))
                .copied();
        }
        out.reverse();
        Ok(out)
    }

    /// The entry with this id.
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    /// The session's display name: the last `session_info` entry in the file.
    pub fn name(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match &e.data {
            EntryData::SessionInfo { name } => Some(name.as_str()),
            _ => None,
        })
    }

    fn push(&mut self, entry: Entry) -> usize {
        let i = self.entries.len();
        self.by_id.insert(entry.id.clone(), i);
        self.entries.push(entry);
        self.leaf = Some(i);
        i
    }

    fn fresh_id(&self, clock: &Clock) -> String {
        for _ in 0..64 {
            let id = clock.entry_id();
            if !self.by_id.contains_key(&id) {
                return id;
            }
        }
        clock.session_id() // pi's fallback: a full UUID
    }

    /// Creates and locks the file, then writes the header, every entry held so far and
    /// `extra` in one `write_all`. On a failed write the new file is removed again.
    fn materialize(&mut self, extra: &str) -> Result<(), SessionError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| SessionError::io("create the directory of", &path, &e))?;
        }
        let mut bytes = self.header.to_json().to_string();
        bytes.push('\n');
        for entry in &self.entries {
            let line = entry.to_line().map_err(|e| {
                SessionError::new(
                    SessionErrorKind::Invalid,
                    format!("cannot write entry {}: {e}", entry.id),
                )
            })?;
            bytes.push_str(&line);
        }
        bytes.push_str(extra);
        let mut file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| SessionError::io("create", &path, &e))?;
        lock(&file, &path)?;
        if let Err(e) = file.write_all(bytes.as_bytes()) {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(SessionError::io("write", &path, &e));
        }
        self.file = Some(file);
        self.needs_newline = false;
        Ok(())
    }

    /// Appends one complete line with a single `write_all`, after a `\n` if the file ends
    /// in a torn line.
    fn write(&mut self, line: &[u8]) -> Result<(), SessionError> {
        let (Some(file), Some(path)) = (self.file.as_mut(), self.path.as_ref()) else {
            return Ok(());
        };
        let mut bytes = Vec::with_capacity(line.len() + 1);
        if self.needs_newline {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(line);
        match file.write_all(&bytes) {
            Ok(()) => {
                self.needs_newline = false;
                Ok(())
            }
            Err(e) => {
                self.needs_newline = true; // part of the line may be on disk
                Err(SessionError::io("append to", path, &e))
            }
        }
    }
}

fn lock(file: &File, path: &Path) -> Result<(), SessionError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(SessionError::new(
            SessionErrorKind::Locked,
            format!(
                "session {} is in use by another keel process",
                path.display()
            ),
        )),
        Err(TryLockError::Error(e)) => Err(SessionError::io("lock", path, &e)),
    }
}

/// Splits a file into its header and entries; bad lines become warnings.
fn parse(
    path: &Path,
    bytes: &[u8],
) -> Result<(SessionHeader, Vec<Entry>, Vec<String>), SessionError> {
    let torn_end = !bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    let mut header = None;
    let mut entries = Vec::new();
    let mut warnings = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.trim_ascii().is_empty() {
            continue;
        }
        let Some(_) = header else {
            header = Some(parse_header(path, i + 1, raw)?);
            continue;
        };
        match parse_entry(raw) {
            Ok(entry) => {
                if let Some(w) = unreadable_message(&entry) {
                    warnings.push(format!("line {} of {}: {w}", i + 1, path.display()));
                }
                entries.push(entry);
            }
            Err(e) => {
                let what = if i == last && torn_end {
                    "torn"
                } else {
                    "malformed"
                };
                warnings.push(format!(
                    "skipped {what} line {} of {}: {e}",
                    i + 1,
                    path.display()
                ));
            }
        }
    }
    match header {
        Some(h) => Ok((h, entries, warnings)),
        None => Err(SessionError::new(
            SessionErrorKind::Invalid,
            format!("{} is not a session file: it is empty", path.display()),
        )),
    }
}

fn parse_header(path: &Path, n: usize, raw: &[u8]) -> Result<SessionHeader, SessionError> {
    let parsed = serde_json::from_slice::<Value>(raw)
        .map_err(|e| e.to_string())
        .and_then(|v| SessionHeader::from_json(&v));
    parsed.map_err(|e| {
        SessionError::new(
            SessionErrorKind::Invalid,
            format!(
                "{} is not a session file: line {n} is not a session header ({e})",
                path.display()
            ),
        )
    })
}

fn parse_entry(raw: &[u8]) -> Result<Entry, String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    if let Some(entry) = parse_message_line(text) {
        return Ok(entry);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Entry::from_json(value)
}

/// The shape of a `message` line, read in one pass without building a `Value` tree first.
#[derive(serde::Deserialize)]
struct MessageLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    id: String,
    #[serde(rename = "parentId")]
    parent_id: Option<String>,
    timestamp: String,
    message: Message,
}

/// Fast path for the common case (a readable `message` line): most of a long session's load
/// time was spent building and re-reading `Value` trees. `None` sends the line to the general
/// path, which handles every other entry type, unknown roles and errors.
fn parse_message_line(text: &str) -> Option<Entry> {
    let line: MessageLine<'_> = serde_json::from_str(text).ok()?;
    if line.kind != "message" {
        return None;
    }
    Some(Entry {
        id: line.id,
        parent_id: line.parent_id,
        timestamp: line.timestamp,
        data: EntryData::Message(line.message),
    })
}

/// A warning for a message with a known role that keel could not read (kept raw, so it is
/// left out of the model context). Unknown roles are expected and get no warning.
fn unreadable_message(entry: &Entry) -> Option<String> {
    let EntryData::RawMessage(raw) = &entry.data else {
        return None;
    };
    let role = raw.get("role").and_then(Value::as_str)?;
    if !matches!(role, "user" | "assistant" | "toolResult") {
        return None;
    }
    let err = serde_json::from_value::<Message>(raw.clone()).err()?;
    Some(format!(
        "kept unreadable {role} message {} out of the model context: {err}",
        entry.id
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kernel::clock::parse_iso;
    use crate::kernel::message::{AssistantMessage, Content, StopReason, Usage};

    const VALID: &str = include_str!("../../../fixtures/sessions/valid.jsonl");
    const TORN: &str = include_str!("../../../fixtures/sessions/torn.jsonl");
    const UNKNOWN: &str = include_str!("../../../fixtures/sessions/unknown.jsonl");
    const NO_HEADER: &str = include_str!("../../../fixtures/sessions/no-header.jsonl");

    fn clock() -> Clock {
        Clock::new(Some(1_796_006_400_000), Some(1))
    }

    fn header(clock: &Clock) -> SessionHeader {
        SessionHeader::new(clock, "/home/u/proj")
    }

    fn fixture(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
        let path = dir.path().join(name);
        fs::write(&path, text).unwrap();
        path
    }

    fn assistant(text: &str, ts: i64) -> EntryData {
        EntryData::Message(Message::Assistant(AssistantMessage {
            content: vec![Content::text(text)],
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "mock-1".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            duration_ms: Some(12),
            timestamp: ts,
        }))
    }

    fn user(text: &str) -> EntryData {
        EntryData::Message(Message::user(text, 1_796_006_400_500))
    }

    fn lines(path: &Path) -> Vec<Value> {
        let text = fs::read_to_string(path).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn round_trip_write_then_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/er/s.jsonl");
        let c = clock();
        let mut store = Store::new_file(path.clone(), header(&c));
        let model = EntryData::ModelChange {
            provider: "mock".into(),
            model_id: "mock-1".into(),
        };
        store.append(model, &c).unwrap();
        store.append(user("hi"), &c).unwrap();
        store.append(assistant("hello", 5), &c).unwrap();
        let label = EntryData::Label {
            target_id: store.entries()[1].id.clone(),
            label: None,
        };
        store.append(label, &c).unwrap();
        store.sync().unwrap();
        let (want_entries, want_context) = (store.entries().to_vec(), store.context());
        let want_header = store.header().clone();
        drop(store);
        let (back, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(back.header(), &want_header);
        assert_eq!(back.entries(), want_entries.as_slice());
        assert_eq!(back.context(), want_context);
        assert_eq!(want_context.len(), 2);
        assert_eq!(back.leaf_id(), Some(want_entries[3].id.as_str()));
        assert_eq!(
            back.entries()[1].parent_id.as_deref(),
            Some(want_entries[0].id.as_str())
        );
        assert_eq!(back.path(), Some(path.as_path()));
    }

    #[test]
    fn file_appears_only_with_the_first_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s.jsonl");
        let c = clock();
        let mut store = Store::new_file(path.clone(), header(&c));
        let info = EntryData::SessionInfo { name: "run".into() };
        store.append(info, &c).unwrap();
        let thinking = EntryData::ThinkingLevelChange {
            thinking_level: "off".into(),
        };
        store.append(thinking, &c).unwrap();
        store.sync().unwrap();
        assert!(!path.exists());
        assert!(!store.is_materialized());
        store.append(user("go"), &c).unwrap();
        assert!(store.is_materialized());
        let on_disk = lines(&path);
        let types: Vec<&str> = on_disk
            .iter()
            .map(|v| v["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "session",
                "session_info",
                "thinking_level_change",
                "message"
            ]
        );
        assert_eq!(on_disk[0], store.header().to_json());
        assert_eq!(on_disk[2]["parentId"], on_disk[1]["id"]);
        assert_eq!(on_disk[3]["parentId"], on_disk[2]["id"]);
        store.append(assistant("ok", 9), &c).unwrap();
        assert_eq!(lines(&path).len(), 5);
    }

    #[test]
    fn in_memory_never_writes() {
        let c = clock();
        let mut store = Store::in_memory(header(&c));
        store.append(user("a"), &c).unwrap();
        store.sync().unwrap();
        assert_eq!(store.path(), None);
        assert!(!store.is_materialized());
        assert_eq!(store.context(), vec![Message::user("a", 1_796_006_400_500)]);
    }

    #[test]
    fn torn_last_line_is_skipped_and_the_next_append_stands_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "torn.jsonl", TORN);
        let c = clock();
        let (mut store, warnings) = Store::open(&path).unwrap();
        assert_eq!(warnings.len(), 1);
        let want = format!("skipped torn line 7 of {}: ", path.display());
        assert!(warnings[0].starts_with(&want), "{}", warnings[0]);
        assert_eq!(store.entries().len(), 5);
        assert_eq!(store.leaf_id(), Some("ca620c5e"));
        let id = store.append(assistant("again", 7), &c).unwrap().id.clone();
        drop(store);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"));
        let last = text.lines().last().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(last).unwrap()["id"],
            id.as_str()
        );
        let (back, warnings) = Store::open(&path).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("skipped malformed line 7 of "),
            "{warnings:?}"
        );
        assert_eq!(back.entries().len(), 6);
        assert_eq!(back.leaf_id(), Some(id.as_str()));
        assert_eq!(back.entries()[5].parent_id.as_deref(), Some("ca620c5e"));
        assert_eq!(back.context().len(), 2);
    }

    #[test]
    fn missing_final_newline_on_a_whole_line_is_no_loss() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "s.jsonl", VALID.trim_end());
        let (mut store, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(store.entries().len(), 9);
        store.append(user("more"), &clock()).unwrap();
        drop(store);
        let (back, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(back.entries().len(), 10);
    }

    #[test]
    fn valid_pi_fixture_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "valid.jsonl", VALID);
        let (store, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(store.header().id, "01a22a52-7c1d-7a3e-9f10-3b5c2d4e6f70");
        assert_eq!(store.header().cwd, "/home/u/proj");
        assert_eq!(store.entries().len(), 9);
        assert_eq!(store.leaf_id(), Some("9c0d1e2f"));
        assert!(matches!(store.entries()[3].data, EntryData::RawMessage(_)));
        assert_eq!(
            store.entries()[1].data,
            EntryData::ModelChange {
                provider: "mock".into(),
                model_id: "mock-1".into()
            }
        );
        let roles: Vec<&str> = store
            .context()
            .iter()
            .map(|m| match m {
                Message::User(_) => "user",
                Message::Assistant(_) => "assistant",
                Message::ToolResult(_) => "toolResult",
            })
            .collect();
        assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    }

    #[test]
    fn unknown_types_and_roles_survive_load_and_fork() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "unknown.jsonl", UNKNOWN);
        let (store, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let originals: Vec<Value> = UNKNOWN
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kept = [0, 2, 3, 4]; // model_change, bashExecution message, custom, future_thing
        assert!(matches!(store.entries()[2].data, EntryData::RawMessage(_)));
        assert!(matches!(store.entries()[3].data, EntryData::Other(_)));
        assert!(matches!(store.entries()[4].data, EntryData::Other(_)));
        for i in kept {
            assert_eq!(
                store.entries()[i].to_json().unwrap(),
                originals[i],
                "entry {i}"
            );
            let line = store.entries()[i].to_line().unwrap();
            let orig = UNKNOWN.lines().nth(i + 1).unwrap();
            assert_eq!(line.trim_end(), orig, "byte-identical line {i}");
        }
        // The user's shell command reaches the model as a user message, as in pi.
        let context = store.context();
        assert_eq!(context.len(), 3);
        assert!(
            matches!(&context[1], Message::User(u) if crate::kernel::message::user_text(u).starts_with("Ran `"))
        );
        let c = clock();
        let fork_path = dir.path().join("fork.jsonl");
        let mut h = header(&c);
        h.parent_session = Some(path.display().to_string());
        let fork = store.fork_to(fork_path.clone(), h.clone()).unwrap();
        drop(fork);
        let written = lines(&fork_path);
        assert_eq!(written[0], h.to_json());
        assert_eq!(written[0]["parentSession"], path.display().to_string());
        for i in kept {
            assert_eq!(written[i + 1], originals[i]);
        }
    }

    #[test]
    fn a_first_line_that_is_not_a_header_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "no-header.jsonl", NO_HEADER);
        let err = Store::open(&path).unwrap_err();
        assert_eq!(err.kind, SessionErrorKind::Invalid);
        assert!(
            err.message.contains("line 1 is not a session header"),
            "{err}"
        );
        assert!(err.message.contains("no-header.jsonl"), "{err}");
        let empty = fixture(&dir, "empty.jsonl", "");
        assert_eq!(
            Store::open(&empty).unwrap_err().kind,
            SessionErrorKind::Invalid
        );
        let missing = Store::open(&dir.path().join("nope.jsonl")).unwrap_err();
        assert_eq!(missing.kind, SessionErrorKind::NotFound);
    }

    #[test]
    fn a_second_open_is_locked_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(&dir, "valid.jsonl", VALID);
        let (first, _) = Store::open(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert_eq!(err.kind, SessionErrorKind::Locked);
        let want = format!(
            "session {} is in use by another keel process",
            path.display()
        );
        assert_eq!(err.message, want);
        drop(first);
        assert!(Store::open(&path).is_ok());
        let c = clock();
        let fresh = dir.path().join("fresh.jsonl");
        let mut store = Store::new_file(fresh.clone(), header(&c));
        store.append(user("x"), &c).unwrap();
        assert_eq!(
            Store::open(&fresh).unwrap_err().kind,
            SessionErrorKind::Locked
        );
    }

    #[test]
    fn fork_keeps_ids_of_the_current_branch_only() {
        let dir = tempfile::tempdir().unwrap();
        let c = clock();
        let mut store = Store::in_memory(header(&c));
        let a = store.append(user("a"), &c).unwrap().id.clone();
        let b = store.append(assistant("b", 2), &c).unwrap().id.clone();
        store.append(user("abandoned"), &c).unwrap();
        store.set_leaf(Some(&b)).unwrap();
        let d = store.append(user("d"), &c).unwrap().id.clone();
        assert!(store.set_leaf(Some("ffffffff")).is_err());
        let path = dir.path().join("f/fork.jsonl");
        let mut h = header(&c);
        h.parent_session = Some("/src/session.jsonl".into());
        let fork = store.fork_to(path.clone(), h.clone()).unwrap();
        assert!(path.exists());
        assert_eq!(
            Store::open(&path).unwrap_err().kind,
            SessionErrorKind::Locked
        );
        drop(fork);
        let (back, warnings) = Store::open(&path).unwrap();
        assert!(warnings.is_empty());
        let ids: Vec<&str> = back.entries().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, [a.as_str(), b.as_str(), d.as_str()]);
        assert_eq!(back.header(), &h);
        assert_eq!(back.context(), store.context());
    }

    #[test]
    fn context_starts_at_the_last_compaction() {
        let c = clock();
        let mut store = Store::in_memory(header(&c));
        store.append(user("old"), &c).unwrap();
        store.append(assistant("old answer", 1), &c).unwrap();
        let kept = store.append(user("kept"), &c).unwrap().id.clone();
        store.append(assistant("kept answer", 2), &c).unwrap();
        let compaction = EntryData::Compaction {
            summary: "did things".into(),
            first_kept_entry_id: kept,
            tokens_before: 1234,
            details: None,
        };
        let ts = store.append(compaction, &c).unwrap().timestamp.clone();
        store.append(user("after"), &c).unwrap();
        let from_id = store.entries()[0].id.clone();
        let branch = EntryData::BranchSummary {
            from_id,
            summary: "tried X".into(),
        };
        let bts = store.append(branch, &c).unwrap().timestamp.clone();
        let custom =
            serde_json::json!({"type": "custom_message", "customType": "e", "content": "note"});
        let cts = store
            .append(EntryData::Other(custom), &c)
            .unwrap()
            .timestamp
            .clone();
        let EntryData::Message(kept_answer) = store.entries()[3].data.clone() else {
            panic!("entry 3 is the kept answer");
        };
        let summary = "The conversation history before this point was compacted into the \
                       following summary:\n\n<summary>\ndid things\n</summary>";
        let branch = "The following is a summary of a branch that this conversation came \
                      back from:\n\n<summary>\ntried X</summary>";
        let want = vec![
            Message::user(summary, parse_iso(&ts).unwrap()),
            Message::user("kept", 1_796_006_400_500),
            kept_answer,
            Message::user("after", 1_796_006_400_500),
            Message::user(branch, parse_iso(&bts).unwrap()),
            Message::user("note", parse_iso(&cts).unwrap()),
        ];
        assert_eq!(store.context(), want);
    }

    #[test]
    fn colliding_ids_are_redrawn() {
        let (c1, c2) = (clock(), clock());
        let mut store = Store::in_memory(header(&Clock::new(None, Some(99))));
        let first = store.append(user("a"), &c1).unwrap().id.clone();
        let second = store.append(user("b"), &c2).unwrap().id.clone();
        let fresh = clock();
        assert_eq!(fresh.entry_id(), first);
        assert_eq!(fresh.entry_id(), second, "c2 drew `first` again and redrew");
        assert_eq!(second.len(), 8);
        assert!(second.chars().all(|ch| ch.is_ascii_hexdigit()));
    }
}
