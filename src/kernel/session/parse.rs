//! Reading a session file's bytes: the header, entries (a fast path for message lines), and
//! the damage a crash or another program can leave (torn, malformed or non-UTF-8 lines,
//! parents that point nowhere), reported as warnings. Reads only the reader it is given.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::{Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::message::Message;

/// Bytes read from the file at a time. A line longer than this grows the buffer to fit it, so
/// a load holds one piece of the file (not all of it) next to the entries parsed so far.
const READ_CHUNK: usize = 1 << 20;

/// A session file, read.
pub(super) struct Parsed {
    pub header: SessionHeader,
    /// The readable entries in file order.
    pub entries: Vec<Entry>,
    /// Entry id → index in `entries` (the later one wins for duplicate ids, as in pi).
    pub by_id: HashMap<String, usize>,
    /// One sentence per damaged line or repaired parent link.
    pub warnings: Vec<String>,
    /// The file is not empty and does not end with `\n` (a torn line or a failed write).
    pub torn_end: bool,
}

/// Reads a session file from `reader` in pieces of [`READ_CHUNK`] bytes and splits it into its
/// header and entries; bad lines become warnings.
pub(super) fn parse(path: &Path, mut reader: impl Read) -> Result<Parsed, SessionError> {
    let mut lines = Lines::new(path);
    let mut buf = vec![0u8; READ_CHUNK];
    // `buf[..filled]` holds bytes read but not yet parsed: always the start of a line.
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0); // one line longer than the buffer
        }
        let n = match reader.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SessionError::io("read", path, &e)),
        };
        if n == 0 {
            break;
        }
        let end = filled + n;
        let Some(last_newline) = buf[filled..end].iter().rposition(|b| *b == b'\n') else {
            filled = end;
            continue;
        };
        let complete = filled + last_newline + 1;
        for line in buf[..complete - 1].split(|b| *b == b'\n') {
            lines.line(line, false)?;
        }
        lines.last_byte = Some(b'\n');
        buf.copy_within(complete..end, 0);
        filled = end - complete;
    }
    if filled > 0 {
        lines.last_byte = Some(buf[filled - 1]);
        lines.line(&buf[..filled], true)?;
    }
    lines.finish()
}

/// The parser's state between lines.
struct Lines<'p> {
    path: &'p Path,
    /// Lines seen so far (1-based number of the last one).
    n: usize,
    header: Option<SessionHeader>,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    warnings: Vec<String>,
    /// The warning of the lines skipped since the last readable entry.
    skipped: Option<usize>,
    last_byte: Option<u8>,
}

impl<'p> Lines<'p> {
    fn new(path: &'p Path) -> Self {
        Lines {
            path,
            n: 0,
            header: None,
            entries: Vec::new(),
            by_id: HashMap::new(),
            warnings: Vec::new(),
            skipped: None,
            last_byte: None,
        }
    }

    /// One line without its `\n`; `torn` when it is the file's last and has no `\n`.
    fn line(&mut self, raw: &[u8], torn: bool) -> Result<(), SessionError> {
        self.n += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.trim_ascii().is_empty() {
            return Ok(());
        }
        if self.header.is_none() {
            self.header = Some(parse_header(self.path, self.n, raw)?);
            return Ok(());
        }
        match parse_entry(raw) {
            Ok(entry) => self.entry(entry),
            Err(e) => {
                let what = if torn { "torn" } else { "malformed" };
                let at = self.path.display();
                self.warnings
                    .push(format!("skipped {what} line {} of {at}: {e}", self.n));
                self.skipped = Some(self.warnings.len() - 1);
            }
        }
        Ok(())
    }

    fn entry(&mut self, mut entry: Entry) {
        let at = self.path.display();
        if let Some(w) = unreadable_message(&entry) {
            self.warnings.push(format!("line {} of {at}: {w}", self.n));
        }
        // A parent that is not in the file (it was on a damaged line, or never existed) would
        // cut the history before it out of the branch: attach the entry to the readable
        // entry before it instead.
        let missing = entry
            .parent_id
            .as_ref()
            .filter(|p| !self.by_id.contains_key(p.as_str()));
        if let Some(missing) = missing {
            let before = self.entries.last().map(|e| e.id.clone());
            let to = before.as_deref().unwrap_or("the start of the session");
            let note = match self.skipped {
                Some(w) => {
                    let note = format!("; entry {} after it now continues from {to}", entry.id);
                    self.warnings[w].push_str(&note);
                    None
                }
                None => Some(format!(
                    "line {} of {at}: entry {} points at a missing parent {missing}; attached to {to}",
                    self.n, entry.id
                )),
            };
            self.warnings.extend(note);
            entry.parent_id = before;
        }
        self.skipped = None;
        self.by_id.insert(entry.id.clone(), self.entries.len());
        self.entries.push(entry);
    }

    fn finish(self) -> Result<Parsed, SessionError> {
        let Some(header) = self.header else {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("{} is not a session file: it is empty", self.path.display()),
            ));
        };
        Ok(Parsed {
            header,
            entries: self.entries,
            by_id: self.by_id,
            warnings: self.warnings,
            torn_end: self.last_byte.is_some_and(|b| b != b'\n'),
        })
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

    const TORN: &str = include_str!("../../../fixtures/sessions/torn.jsonl");
    const UNKNOWN: &str = include_str!("../../../fixtures/sessions/unknown.jsonl");

    /// A reader that hands out at most `piece` bytes per `read`, like a slow pipe.
    struct Trickle<'a> {
        rest: &'a [u8],
        piece: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.piece.min(buf.len()).min(self.rest.len());
            buf[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    fn parsed(text: &[u8], piece: usize) -> (Vec<Entry>, Vec<String>, bool) {
        let reader = Trickle { rest: text, piece };
        let p = parse(Path::new("s.jsonl"), reader).unwrap();
        for (id, &i) in &p.by_id {
            assert_eq!(&p.entries[i].id, id);
        }
        (p.entries, p.warnings, p.torn_end)
    }

    /// Reads that end anywhere in a line (every piece size from 1 byte) give the same entries,
    /// warnings and torn flag as one read of the whole file.
    #[test]
    fn lines_split_across_reads_parse_the_same() {
        let crlf = UNKNOWN.replace('\n', "\r\n");
        let unterminated = format!("{}\n\n{}", UNKNOWN.trim_end(), "{\"type\":\"message\"");
        for text in [TORN, UNKNOWN, crlf.as_str(), unterminated.as_str()] {
            let whole = parsed(text.as_bytes(), usize::MAX);
            assert!(!whole.0.is_empty());
            for piece in [1, 2, 7, 64, 300] {
                assert_eq!(parsed(text.as_bytes(), piece), whole, "piece {piece}");
            }
        }
        let (entries, warnings, torn) = parsed(unterminated.as_bytes(), 5);
        assert!(torn);
        assert_eq!(entries.len(), parsed(UNKNOWN.as_bytes(), 5).0.len());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("skipped torn line "),
            "{warnings:?}"
        );
    }

    /// A line longer than the read buffer grows it instead of being cut into pieces.
    #[test]
    fn a_line_longer_than_the_read_buffer_is_read_whole() {
        let big = "x".repeat(READ_CHUNK * 2 + 17);
        let head = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
        let msg = serde_json::json!({"role": "user", "content": big, "timestamp": 1});
        let entry = serde_json::json!({"type": "message", "id": "0000abcd", "parentId": null,
                                       "timestamp": "t", "message": msg});
        let after = r#"{"type":"label","id":"0000abce","parentId":"0000abcd","timestamp":"t","targetId":"0000abcd"}"#;
        let text = format!("{head}\n{entry}\n{after}\n");
        let (entries, warnings, torn) = parsed(text.as_bytes(), usize::MAX);
        assert!(warnings.is_empty() && !torn, "{warnings:?}");
        assert_eq!(entries.len(), 2);
        let EntryData::Message(Message::User(u)) = &entries[0].data else {
            panic!("{:?}", entries[0].data.type_name());
        };
        assert_eq!(crate::kernel::message::user_text(u), big);
        assert_eq!(entries[1].parent_id.as_deref(), Some("0000abcd"));
    }
}
