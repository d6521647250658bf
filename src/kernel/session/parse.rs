//! Reading one line of a session file: the header, an entry (with a fast path for message
//! lines), and why a line is unreadable (malformed or non-UTF-8 JSON, a message keel cannot
//! read). Pure functions of the bytes; the file itself is read by `load.rs`.

use std::path::Path;

use serde_json::Value;

use super::{Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::message::Message;

/// The index of the first `\n` in `bytes`. `BufRead::skip_until` on a byte slice searches with
/// the standard library's `memchr`, several bytes per step; a byte-by-byte scan was a tenth of
/// the load time.
pub(super) fn find_newline(bytes: &[u8]) -> Option<usize> {
    let mut rest = bytes;
    let n = std::io::BufRead::skip_until(&mut rest, b'\n').ok()?;
    (n > 0 && bytes[n - 1] == b'\n').then(|| n - 1)
}

/// The header line (line `n` of `path`), or an `Invalid` error saying why it is not one.
pub(super) fn parse_header(
    path: &Path,
    n: usize,
    raw: &[u8],
) -> Result<SessionHeader, SessionError> {
    let parsed = serde_json::from_slice::<Value>(raw)
        .map_err(|e| e.to_string())
        .and_then(|v| SessionHeader::read_json(&v));
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

/// One entry line by itself; the error says why the line is not an entry.
pub(super) fn parse_entry(raw: &[u8]) -> Result<Entry, String> {
    let text = std::str::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    if let Some(entry) = parse_message_line(text) {
        return Ok(entry);
    }
    #[cfg(test)]
    VALUE_LINES.with(|n| n.set(n.get() + 1));
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Entry::read_json(value)
}

#[cfg(test)]
thread_local! {
    /// Lines this thread read through a `Value` tree (the slow path), for tests.
    pub(super) static VALUE_LINES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The shape of a `message` line, read in one pass without building a `Value` tree first.
#[derive(serde::Deserialize)]
pub(super) struct MessageLine<'a> {
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
    message_entry(serde_json::from_str(text).ok()?)
}

fn message_entry(line: MessageLine<'_>) -> Option<Entry> {
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

/// Reads the lines of one piece of a file. Consecutive message lines are read by one JSON
/// reader, which keeps its buffer for strings with escapes (code, tool output) from line to
/// line: growing a fresh buffer for every line was a fifth of the load time. Each line still
/// stands alone: a value that does not end on its own line, or any line the reader cannot take,
/// is read by itself with [`parse_entry`], so the result is the same as reading line by line.
pub(super) struct LineReader<'a> {
    /// The piece, if it is valid UTF-8 (else every line is read by itself).
    text: Option<&'a str>,
    /// The reader and where its input starts in `text`.
    stream: Option<(usize, MessageStream<'a>)>,
}

type MessageStream<'a> =
    serde_json::StreamDeserializer<'a, serde_json::de::StrRead<'a>, MessageLine<'a>>;

/// JSON's whitespace (what may surround a value on its line).
fn json_blank(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

impl<'a> LineReader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        LineReader {
            text: std::str::from_utf8(bytes).ok(),
            stream: None,
        }
    }

    /// The entry on the line `start..end` of the piece (`end` before its `\n` or `\r\n`).
    pub(super) fn entry(&mut self, start: usize, end: usize, line: &[u8]) -> Result<Entry, String> {
        match self.streamed(start, end) {
            Some(entry) => Ok(entry),
            None => parse_entry(line),
        }
    }

    fn streamed(&mut self, start: usize, end: usize) -> Option<Entry> {
        let text = self.text?;
        // The reader continues where its last value ended if only blank lines lie between.
        let at = |(base, s): &(usize, MessageStream<'a>)| base + s.byte_offset();
        let aligned = self.stream.as_ref().is_some_and(|s| {
            let from = at(s);
            from <= start && json_blank(&text[from..start])
        });
        if !aligned {
            self.stream = Some((
                start,
                serde_json::Deserializer::from_str(&text[start..]).into_iter(),
            ));
        }
        let (_, stream) = self.stream.as_mut()?;
        let line = match stream.next() {
            Some(Ok(line)) => line,
            _ => {
                self.stream = None;
                return None;
            }
        };
        let ended = self.stream.as_ref().map_or(usize::MAX, at);
        if ended > end || !json_blank(&text[ended..end]) {
            self.stream = None; // the value ran past its line, or junk follows it
            return None;
        }
        message_entry(line)
    }
}

/// A warning for a message with a known role that keel could not read (kept raw, so it is
/// left out of the model context). Unknown roles are expected and get no warning.
pub(super) fn unreadable_message(entry: &Entry) -> Option<String> {
    let EntryData::RawMessage(raw) = &entry.data else {
        return None;
    };
    let view: super::written::MessageView = crate::kernel::field::read(raw);
    let role = view.role.given()?;
    if !matches!(role.as_str(), "user" | "assistant" | "toolResult") {
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
    use serde_json::Value;

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

    /// Reading the lines of a piece with one JSON reader gives exactly what reading each line
    /// by itself gives: a value spread over two lines, two values on a line, junk or blanks
    /// after a value, form feeds, CRLF and other entry types in between.
    #[test]
    fn a_piece_reads_like_its_lines_one_by_one() {
        let msg = |id: &str, text: &str| {
            let m = serde_json::json!({"role": "user", "content": text, "timestamp": 1});
            serde_json::json!({"type": "message", "id": id, "parentId": null, "timestamp": "t",
                               "message": m})
            .to_string()
        };
        let a = msg("0000000a", "say \"hi\"\n\tthere");
        let b = msg("0000000b", "b");
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Value>(&b).unwrap()).unwrap();
        let lines = [
            a.clone(),
            format!("{b} \t "),
            format!("{a}{b}"),
            format!("{b} x"),
            "\u{c}".to_string(),
            msg("0000000c", "after a form feed"),
            r#"{"type":"model_change","id":"0000000d","parentId":null,"timestamp":"t","provider":"p","modelId":"m"}"#.to_string(),
            format!("{b}\r"),
            pretty,
            format!("  {a}"),
            r#"{"type":"message","id":"0000000e","parentId":null,"timestamp":"t","message":{"role":"user"}}"#.to_string(),
            b.clone(),
        ];
        let text = lines.join("\n");
        let mut reader = LineReader::new(text.as_bytes());
        let mut start = 0;
        let mut entries = 0;
        for line in text.split('\n') {
            let raw = line.strip_suffix('\r').unwrap_or(line).as_bytes();
            if !raw.trim_ascii().is_empty() {
                let got = reader.entry(start, start + raw.len(), raw);
                assert_eq!(got, parse_entry(raw), "line {line:?}");
                entries += usize::from(got.is_ok());
            }
            start += line.len() + 1;
        }
        assert_eq!(entries, 8);
    }
}
