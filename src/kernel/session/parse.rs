//! Reading a session file's bytes: the header, entries (a fast path for message lines), and
//! the damage a crash or another program can leave (torn, malformed or non-UTF-8 lines,
//! parents that point nowhere), reported as warnings. Never touches the disk.

use std::path::Path;

use serde_json::Value;

use super::{Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::message::Message;

/// Splits a file into its header and entries; bad lines become warnings.
pub(super) fn parse(
    path: &Path,
    bytes: &[u8],
) -> Result<(SessionHeader, Vec<Entry>, Vec<String>), SessionError> {
    let torn_end = !bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = lines.len().saturating_sub(1);
    let mut header = None;
    let mut entries: Vec<Entry> = Vec::new();
    let mut warnings = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    // The warning of the lines skipped since the last readable entry.
    let mut skipped: Option<usize> = None;
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
            Ok(mut entry) => {
                if let Some(w) = unreadable_message(&entry) {
                    warnings.push(format!("line {} of {}: {w}", i + 1, path.display()));
                }
                // A parent that is not in the file (it was on a damaged line, or never
                // existed) would cut the history before it out of the branch: attach the
                // entry to the readable entry before it instead.
                if let Some(missing) = entry.parent_id.clone().filter(|p| !seen.contains(p)) {
                    let before = entries.last().map(|e| e.id.clone());
                    let to = before.as_deref().unwrap_or("the start of the session");
                    match skipped {
                        Some(w) => warnings[w].push_str(&format!(
                            "; entry {} after it now continues from {to}",
                            entry.id
                        )),
                        None => warnings.push(format!(
                            "line {} of {}: entry {} points at a missing parent {missing}; attached to {to}",
                            i + 1,
                            path.display(),
                            entry.id
                        )),
                    }
                    entry.parent_id = before;
                }
                skipped = None;
                seen.insert(entry.id.clone());
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
                skipped = Some(warnings.len() - 1);
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
