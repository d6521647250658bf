//! A push decoder for server-sent events (the WHATWG `text/event-stream` format) and the trait
//! each HTTP API implements to turn events into [`ProviderEvent`]s.
//!
//! Bytes arrive in arbitrary pieces: a chunk may end inside a line, inside a CRLF pair or
//! inside a UTF-8 character. The decoder only decodes complete lines, so none of that matters.
//! Written here rather than taken from a crate because the transport feeds it from a loop that
//! also watches the idle timeout and the abort signal; the crates on offer want to own the
//! byte stream.

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

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF in the next one belongs to it.
    after_cr: bool,
    started: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds bytes; complete events are appended to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(pos) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.line.extend_from_slice(&bytes[..pos]);
            let line = std::mem::take(&mut self.line);
            self.on_line(&line, out);
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
        self.line.extend_from_slice(bytes);
    }

    /// The stream ended: a last line without its newline and a last event without its blank
    /// line are still delivered (servers that close early lose nothing).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.on_line(&line, out);
        }
        self.dispatch(out);
    }

    fn on_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
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
            d.push(&bytes[at..c], &mut out);
            at = c;
        }
        d.push(&bytes[at..], &mut out);
        d.finish(&mut out);
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
}
