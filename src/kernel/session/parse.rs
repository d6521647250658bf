//! Reading one line of a session file: the header, an entry (with a fast path for message
//! lines), and why a line is unreadable (malformed or non-UTF-8 JSON, a message keel cannot
//! read). Pure functions of the bytes; the file itself is read by `load.rs`.

use std::path::Path;

use serde_json::Value;

use super::{Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::message::Message;

/// The index of the first `\n` in `bytes`. `BufRead::skip_until` on a byte slice is the
/// platform's `memchr` (many bytes per step); a byte-by-byte scan was a tenth of load time.
pub(super) fn find_newline(bytes: &[u8]) -> Option<usize> {
    let mut rest = bytes;
    let n = std::io::BufRead::skip_until(&mut rest, b'\n').ok()?;
    (n > 0 && bytes[n - 1] == b'\n').then(|| n - 1)
}

pub(super) fn parse_header(
    path: &Path,
    n: usize,
    raw: &[u8],
) -> Result<SessionHeader, SessionError> {
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

pub(super) fn parse_entry(raw: &[u8]) -> Result<Entry, String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    if let Some(entry) = parse_message_line(text) {
        return Ok(entry);
    }
    #[cfg(test)]
    VALUE_LINES.with(|n| n.set(n.get() + 1));
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Entry::from_json(value)
}

#[cfg(test)]
thread_local! {
    /// Lines this thread read through a `Value` tree (the slow path), for tests.
    pub(super) static VALUE_LINES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
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
pub(super) fn unreadable_message(entry: &Entry) -> Option<String> {
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

    /// The fast search finds the same `\n` as a plain scan, wherever it is.
    #[test]
    fn find_newline_agrees_with_a_plain_scan() {
        for len in 0..40 {
            for at in 0..=len {
                let mut bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                bytes.extend_from_slice(&[0x0b, 0x8a, 0x09, 0xff]); // near misses, no `\n`
                if at < len {
                    bytes[at] = b'\n';
                    bytes[len - 1] = b'\n';
                }
                let want = bytes.iter().position(|b| *b == b'\n');
                assert_eq!(find_newline(&bytes), want, "len {len} at {at}");
                assert_eq!(
                    find_newline(&bytes[at.min(len)..]),
                    bytes[at.min(len)..].iter().position(|b| *b == b'\n')
                );
            }
        }
    }
}
