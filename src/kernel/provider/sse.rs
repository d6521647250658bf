//! A push decoder for server-sent events (the WHATWG `text/event-stream` format) and the trait
//! each HTTP API implements to turn events into [`ProviderEvent`]s.
//!
//! Bytes arrive in arbitrary pieces: a chunk may end inside a line, inside a CRLF pair or
//! inside a UTF-8 character. The decoder only decodes complete lines, so none of that matters.
//! Written here rather than taken from a crate because the transport feeds it from a loop that
//! also watches the idle timeout and the abort signal; the crates on offer want to own the
//! byte stream.
//!
//! Bounded: a line or an event longer than the decoder's cap (default [`MAX_LINE_BYTES`]) is
//! refused with [`TooLarge`] before it is buffered, so an endless line costs at most the cap.
//! The decoder also counts the bytes that are not comments ([`SseDecoder::data_bytes`]): a
//! server that sends only `: ping` keeps the connection open but makes no progress.

use super::ProviderEvent;

/// One dispatched event: the `event:` name (if any) and the `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Turns the events of one API into provider events. Exactly one terminal event (`Done` or
/// `Error`) comes out over the life of a decoder; after it, input is ignored.
pub trait StreamDecoder: Send {
    /// Handles one event.
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ProviderEvent>);
    /// The byte stream ended; emits the terminal event if none came yet (a cut stream).
    fn finish(&mut self, out: &mut Vec<ProviderEvent>);
    /// Whether any text, thinking or tool call came out yet (a failure before that is
    /// retryable; after it, the turn fails).
    fn saw_output(&self) -> bool;
}

/// The default cap on one SSE line and on the data of one event: 16 MiB.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// A line (or the data of one event) exceeded the decoder's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// `"line"` or `"event"`.
    pub what: &'static str,
    /// The cap in bytes.
    pub limit: usize,
}

/// Incremental SSE parser.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF in the next one belongs to it.
    after_cr: bool,
    started: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// The cap on `line` and on `data`, in bytes.
    max_line: usize,
    /// Bytes of non-empty, non-comment lines so far.
    data_bytes: u64,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_max_line(MAX_LINE_BYTES)
    }
}

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// A decoder that refuses lines and events over `max_line` bytes.
    pub fn with_max_line(max_line: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            started: false,
            event: None,
            data: String::new(),
            has_data: false,
            max_line,
            data_bytes: 0,
        }
    }

    /// How many bytes of real lines (not comments, not blank) arrived so far, counted as they
    /// arrive, also inside a line not yet complete. Growth is progress; keep-alives are not.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Feeds bytes; complete events are appended to `out`. Fails once a line or an event
    /// would exceed the cap; the decoder must not be fed after that.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), TooLarge> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(pos) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.extend_line(&bytes[..pos])?;
            let line = std::mem::take(&mut self.line);
            self.on_line(&line, out)?;
            if bytes[pos] == b'\r' {
                match bytes.get(pos + 1) {
                    Some(b'\n') => bytes = &bytes[pos + 2..],
                    Some(_) => bytes = &bytes[pos + 1..],
                    None => {
                        self.after_cr = true;
                        bytes = &[];
                    }
                }
            } else {
                bytes = &bytes[pos + 1..];
            }
        }
        self.extend_line(bytes)
    }

    /// Appends a piece of the current line, refusing it when the line would exceed the cap.
    fn extend_line(&mut self, piece: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + piece.len() > self.max_line {
            return Err(TooLarge {
                what: "line",
                limit: self.max_line,
            });
        }
        self.line.extend_from_slice(piece);
        // The first line may start with a byte-order mark (stripped in `on_line`).
        let bom = "\u{feff}".as_bytes();
        let line = if self.started {
            &self.line[..]
        } else {
            self.line.strip_prefix(bom).unwrap_or(&self.line)
        };
        if line.first().is_some_and(|b| *b != b':') {
            self.data_bytes += piece.len() as u64;
        }
        Ok(())
    }

    /// The stream ended: a last line without its newline and a last event without its blank
    /// line are still delivered (servers that close early lose nothing).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), TooLarge> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.on_line(&line, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    fn on_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), TooLarge> {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.data.len() + value.len() + 1 > self.max_line {
                    return Err(TooLarge {
                        what: "event",
                        limit: self.max_line,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event = None;
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let mut at = 0;
        for &c in cuts {
            d.push(&bytes[at..c], &mut out).unwrap();
            at = c;
        }
        d.push(&bytes[at..], &mut out).unwrap();
        d.finish(&mut out).unwrap();
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(Into::into),
            data: data.into(),
        }
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream = "\u{feff}: keep-alive\r\nevent: delta\r\ndata: {\"t\":\"h\u{e9}llo \u{1f600}\"}\r\n\r\ndata: a\ndata:b\n\n:ping\n\ndata: [DONE]\r\r";
        let bytes = stream.as_bytes();
        let want = vec![
            ev(Some("delta"), "{\"t\":\"h\u{e9}llo \u{1f600}\"}"),
            ev(None, "a\nb"),
            ev(None, "[DONE]"),
        ];
        assert_eq!(decode_in_pieces(bytes, &[]), want);
        for i in 1..bytes.len() {
            assert_eq!(decode_in_pieces(bytes, &[i]), want, "cut at {i}");
            for j in i + 1..bytes.len() {
                assert_eq!(decode_in_pieces(bytes, &[i, j]), want, "cuts at {i},{j}");
            }
        }
        // One byte at a time.
        let all: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(decode_in_pieces(bytes, &all), want);
    }

    #[test]
    fn unterminated_last_event_and_fieldless_lines() {
        assert_eq!(
            decode_in_pieces(b"event: x\ndata\n\ndata: last", &[]),
            vec![ev(Some("x"), ""), ev(None, "last")]
        );
        // An event name without data dispatches nothing and does not leak into the next.
        assert_eq!(
            decode_in_pieces(b"event: ping\n\ndata: 1\n\n", &[]),
            vec![ev(None, "1")]
        );
        // Invalid UTF-8 is replaced, not fatal.
        assert_eq!(
            decode_in_pieces(b"data: \xff\n\n", &[]),
            vec![ev(None, "\u{fffd}")]
        );
    }

    #[test]
    fn a_line_over_the_cap_is_refused_before_it_is_buffered() {
        let line_err = Err(TooLarge {
            what: "line",
            limit: 16,
        });
        // Exactly the cap is fine, also in pieces and with CRLF.
        let mut d = SseDecoder::with_max_line(16);
        let mut out = Vec::new();
        assert_eq!(d.push(b"data: 0123456", &mut out), Ok(()));
        assert_eq!(d.push(b"789\r\n\r\n", &mut out), Ok(()));
        assert_eq!(out, vec![ev(None, "0123456789")]);
        // One byte more, whether it comes in one piece or trickles in.
        let mut d = SseDecoder::with_max_line(16);
        assert_eq!(d.push(b"data: 01234567890\n", &mut out), line_err);
        let mut d = SseDecoder::with_max_line(16);
        for b in b"data: 0123456789" {
            assert_eq!(d.push(&[*b], &mut out), Ok(()));
        }
        assert_eq!(d.push(b"x", &mut out), line_err);
        assert!(d.line.len() <= 16, "nothing past the cap was buffered");
        // Comments count too: an endless comment line is still an endless line.
        let mut d = SseDecoder::with_max_line(16);
        assert_eq!(d.push(&[b':'; 17], &mut out), line_err);
    }

    #[test]
    fn an_event_whose_data_lines_add_up_over_the_cap_is_refused() {
        let mut d = SseDecoder::with_max_line(16);
        let mut out = Vec::new();
        assert_eq!(d.push(b"data: 0123456\ndata: 01234567\n", &mut out), Ok(()));
        assert_eq!(
            d.push(b"data: 0\n", &mut out),
            Err(TooLarge {
                what: "event",
                limit: 16
            })
        );
        assert_eq!(out, vec![]);
        // The data of each event counts on its own.
        let mut d = SseDecoder::with_max_line(16);
        let many: Vec<u8> = b"data: 0123456789\n\n".repeat(10);
        assert_eq!(d.push(&many, &mut out), Ok(()));
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn comments_and_blank_lines_are_not_progress() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push("\u{feff}: hi\n\n".as_bytes(), &mut out).unwrap();
        for _ in 0..100 {
            d.push(b": ping\n\n", &mut out).unwrap();
            d.push(b":", &mut out).unwrap();
            d.push(b"\r\n\r\n", &mut out).unwrap();
        }
        assert_eq!(d.data_bytes(), 0);
        assert_eq!(out, vec![]);
        // A data line counts as it arrives, before it is complete.
        d.push(b"da", &mut out).unwrap();
        assert_eq!(d.data_bytes(), 2);
        d.push(b"ta: x\n", &mut out).unwrap();
        assert_eq!(d.data_bytes(), 7);
        d.push(b"\n: ping\n", &mut out).unwrap();
        assert_eq!(d.data_bytes(), 7);
        assert_eq!(out, vec![ev(None, "x")]);
        let mut d = SseDecoder::new();
        d.push(b"event: ping\n", &mut out).unwrap();
        assert_eq!(d.data_bytes(), 11, "named events are data, not comments");
    }
}
