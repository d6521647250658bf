//! The spool's lines read back: a [`Batch`] is one read of a segment's bytes, and each record
//! in it is found by position (or by the JSON parser for a line that needed escapes), its
//! payload handed on as a view of the read.

use std::ops::Range;

use bytes::Bytes;
use serde::Deserialize;

use super::spool::Record;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    subject: String,
    msg_id: String,
    #[serde(borrow)]
    payload: &'a serde_json::value::RawValue,
}

/// A batch read from the acked position: the bytes read, where each record is in them, and
/// the byte offset in the segment after each one.
pub struct Batch {
    pub(super) data: Bytes,
    pub(super) entries: Vec<Entry>,
    pub(super) ends: Vec<u64>,
    pub(super) segment: u64,
}

/// Where one record of a batch is.
pub(super) enum Entry {
    /// Subject, msg-id and payload are these ranges of [`Batch::data`] as they are.
    Plain {
        subject: Range<usize>,
        msg_id: Range<usize>,
        payload: Range<usize>,
    },
    /// A line that needed JSON unescaping.
    Parsed(Record),
}

/// One record of a batch, as the publisher sends it.
pub struct Out<'a> {
    pub subject: &'a str,
    pub msg_id: &'a str,
    /// The message body (a view of the bytes read, no copy).
    pub payload: Bytes,
}

impl Batch {
    pub(super) fn empty(segment: u64) -> Batch {
        Batch {
            data: Bytes::new(),
            entries: Vec::new(),
            ends: Vec::new(),
            segment,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = Out<'_>> {
        self.entries.iter().map(|e| match e {
            Entry::Plain {
                subject,
                msg_id,
                payload,
            } => Out {
                subject: text(&self.data, subject),
                msg_id: text(&self.data, msg_id),
                payload: self.data.slice(payload.clone()),
            },
            Entry::Parsed(r) => Out {
                subject: &r.subject,
                msg_id: &r.msg_id,
                payload: Bytes::copy_from_slice(r.payload.as_bytes()),
            },
        })
    }

    /// The records, copied out.
    pub fn records(&self) -> Vec<Record> {
        self.iter()
            .map(|o| Record {
                subject: o.subject.to_string(),
                msg_id: o.msg_id.to_string(),
                payload: String::from_utf8_lossy(&o.payload).into_owned(),
            })
            .collect()
    }
}

/// `data[r]`, which [`parse_plain`] found to be UTF-8.
fn text<'a>(data: &'a [u8], r: &Range<usize>) -> &'a str {
    std::str::from_utf8(&data[r.clone()]).unwrap_or_default()
}

/// A spool line back into its record: as [`Lines::line`] writes it, read by position when its
/// subject and msg-id needed no escaping (every line keel writes: subjects and ids are tokens),
/// else parsed as JSON. The payload is not parsed again: the spool holds only lines written
/// whole by this code (a torn last line has no newline and is cut off at open, and a write that
/// failed part way is cut off at once: `Spool::write_tail`).
pub(super) fn parse(data: &[u8], line: Range<usize>) -> Option<Entry> {
    let bytes = &data[line.clone()];
    match parse_plain(bytes) {
        Some((subject, msg_id, payload)) => {
            let at = |r: Range<usize>| line.start + r.start..line.start + r.end;
            Some(Entry::Plain {
                subject: at(subject),
                msg_id: at(msg_id),
                payload: at(payload),
            })
        }
        None => parse_json(std::str::from_utf8(bytes).ok()?).map(Entry::Parsed),
    }
}

/// The ranges of subject, msg-id and payload in `line`, if it is plain: looked at as bytes
/// (the payload is sent as bytes), each part checked to be UTF-8.
fn parse_plain(line: &[u8]) -> Option<(Range<usize>, Range<usize>, Range<usize>)> {
    const SUBJECT: &[u8] = b"{\"subject\":\"";
    const MSG_ID: &[u8] = b"\",\"msgId\":\"";
    const PAYLOAD: &[u8] = b"\",\"payload\":";
    let s_start = SUBJECT.len();
    let s_end = s_start + memchr::memchr(b'"', line.strip_prefix(SUBJECT)?)?;
    let m_start = s_end + MSG_ID.len();
    let m_end = m_start + memchr::memchr(b'"', line[s_end..].strip_prefix(MSG_ID)?)?;
    line[m_end..].strip_prefix(PAYLOAD)?;
    let p_start = m_end + PAYLOAD.len();
    let p_end = line.len().checked_sub(b"}\n".len())?;
    if !line.ends_with(b"}\n") || p_end < p_start {
        return None;
    }
    let plain = |s: &[u8]| !s.contains(&b'\\') && std::str::from_utf8(s).is_ok();
    let payload = &line[p_start..p_end];
    let object = payload.first() == Some(&b'{') && payload.last() == Some(&b'}');
    let whole = object && std::str::from_utf8(payload).is_ok();
    (plain(&line[s_start..s_end]) && plain(&line[m_start..m_end]) && whole).then_some((
        s_start..s_end,
        m_start..m_end,
        p_start..p_end,
    ))
}

fn parse_json(line: &str) -> Option<Record> {
    let l: Line = serde_json::from_str(line.trim_end_matches('\n')).ok()?;
    Some(Record {
        subject: l.subject,
        msg_id: l.msg_id,
        payload: l.payload.get().to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::daemon::journal::spool::tests::rec;
    use crate::daemon::journal::spool::Lines;

    #[test]
    fn a_line_reads_back_as_written_by_position_or_as_json_when_it_needed_escapes() {
        for r in [
            rec(7),
            Record {
                subject: "keel.events.h.s".into(),
                msg_id: "we\"ird\\id:e:1".into(),
                payload: "{\"a\":\"x\\\"y\"}".into(),
            },
        ] {
            let mut lines = Lines::default();
            lines.record(&r);
            let line = std::str::from_utf8(&lines.buf).unwrap();
            assert_eq!(parsed(line), Some(r.clone()), "{line}");
        }
        let plain = r#"{"subject":"s","msgId":"m:1","payload":{"seq":1}}"#.to_string() + "\n";
        let (subject, msg_id, payload) = parse_plain(plain.as_bytes()).unwrap();
        assert_eq!(
            [&plain[subject], &plain[msg_id], &plain[payload]],
            ["s", "m:1", r#"{"seq":1}"#]
        );
        let escaped = r#"{"subject":"s","msgId":"m\"1","payload":{"seq":1}}"#.to_string() + "\n";
        assert_eq!(
            parse_plain(escaped.as_bytes()),
            None,
            "an escaped id goes to the JSON parser"
        );
        assert_eq!(parse_json(&escaped).unwrap().msg_id, "m\"1");
        assert_eq!(parsed("not a spool line\n"), None);
    }

    /// A line through [`parse`], as the record a batch gives.
    fn parsed(line: &str) -> Option<Record> {
        let entry = parse(line.as_bytes(), 0..line.len())?;
        let batch = Batch {
            data: Bytes::copy_from_slice(line.as_bytes()),
            entries: vec![entry],
            ends: vec![line.len() as u64],
            segment: 1,
        };
        batch.records().pop()
    }
}
