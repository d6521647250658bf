//! Input framing for RPC mode: JSONL on stdin, framed the way pi frames it.
//!
//! [`LineDecoder`] is a push decoder with no I/O: the reader hands it whatever bytes it got, and
//! it hands back complete [`Frame`]s. Being pure, it can be fuzzed against a reference model.
//!
//! The rules:
//!
//! * A record ends at `\n` (LF) and only there. U+2028 and U+2029 (`E2 80 A8`, `E2 80 A9`) are
//!   ordinary data, as is a lone `\r` inside a line.
//! * One `\r` directly before the terminator is dropped (`a\r\r\n` yields `a\r`). The end of
//!   input counts as a terminator for this purpose.
//! * A line is delivered as raw bytes; checking UTF-8 and parsing JSON is the caller's job.
//!   Empty lines are delivered too (the caller answers them with a parse error, as pi does).
//! * Whatever follows the last LF is delivered by [`LineDecoder::finish`] if the input had any
//!   bytes there at all; an empty remainder yields nothing.
//! * A line whose content (the bytes that would be delivered, so without LF and without the
//!   dropped CR) exceeds the cap is not kept: once it passes the cap its bytes are counted and
//!   thrown away, and a single [`Frame::TooLong`] carrying the full content length is produced at
//!   its terminator. The line after it is decoded normally. A line of exactly the cap is fine.
//!
//! Memory is bounded by the cap however long a line grows, and every input byte is scanned once,
//! however finely the input is chunked.

/// Default cap on one line's content, in bytes.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line, without its terminator (LF, or CR LF).
    Line(Vec<u8>),
    /// A line longer than the cap was dropped; `bytes` is its content length.
    TooLong { bytes: usize },
}

/// Splits a byte stream into [`Frame`]s. See the module docs for the rules.
#[derive(Debug)]
pub struct LineDecoder {
    /// Cap on one line's content length.
    max_line: usize,
    /// Content of the current line so far (never longer than `max_line`), excluding a held CR.
    buf: Vec<u8>,
    /// The current line's last byte so far is a CR that is not in `buf`: it is dropped if the
    /// line ends right after it, and becomes content if anything else follows.
    held_cr: bool,
    /// `Some(n)`: the current line has outgrown the cap; `n` content bytes were seen (excluding
    /// a held CR) and `buf` is empty.
    overflow: Option<usize>,
}

impl Default for LineDecoder {
    fn default() -> Self {
        Self::new(MAX_LINE_BYTES)
    }
}

impl LineDecoder {
    /// A decoder whose lines may hold at most `max_line` content bytes.
    pub fn new(max_line: usize) -> Self {
        Self {
            max_line,
            buf: Vec::new(),
            held_cr: false,
            overflow: None,
        }
    }

    /// Feeds bytes; appends complete frames to `out` in order.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        let mut rest = bytes;
        while let Some(lf) = rest.iter().position(|&b| b == b'\n') {
            self.extend(&rest[..lf]);
            out.push(self.end_line());
            rest = &rest[lf + 1..];
        }
        self.extend(rest);
    }

    /// End of input: the unterminated last line, if any (or `TooLong` if it was oversized).
    pub fn finish(&mut self) -> Option<Frame> {
        if self.buf.is_empty() && !self.held_cr && self.overflow.is_none() {
            return None;
        }
        Some(self.end_line())
    }

    /// Bytes currently buffered; never more than the cap.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Adds a piece of the current line (no LF inside).
    fn extend(&mut self, piece: &[u8]) {
        let Some((&last, body)) = piece.split_last() else {
            return;
        };
        // Something follows a held CR, so that CR was content after all.
        if std::mem::take(&mut self.held_cr) {
            self.append(b"\r");
        }
        if last == b'\r' {
            self.append(body);
            self.held_cr = true;
        } else {
            self.append(piece);
        }
    }

    /// Appends content bytes, switching to counting once the cap is passed.
    fn append(&mut self, content: &[u8]) {
        if let Some(seen) = self.overflow.as_mut() {
            *seen += content.len();
            return;
        }
        let total = self.buf.len() + content.len();
        if total > self.max_line {
            self.overflow = Some(total);
            self.buf.clear();
            // A line that big is unusual: give the memory back rather than keep it for good.
            self.buf.shrink_to(0);
        } else {
            self.buf.extend_from_slice(content);
        }
    }

    /// Closes the current line (a held CR is the dropped one) and resets for the next.
    fn end_line(&mut self) -> Frame {
        self.held_cr = false;
        match self.overflow.take() {
            Some(bytes) => Frame::TooLong { bytes },
            None => Frame::Line(std::mem::take(&mut self.buf)),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Feeds `input` in one push and finishes.
    fn decode(cap: usize, input: &[u8]) -> Vec<Frame> {
        let mut dec = LineDecoder::new(cap);
        let mut out = Vec::new();
        dec.push(input, &mut out);
        out.extend(dec.finish());
        out
    }

    fn line(s: &[u8]) -> Frame {
        Frame::Line(s.to_vec())
    }

    #[test]
    fn two_lines_in_one_push() {
        let mut dec = LineDecoder::new(64);
        let mut out = Vec::new();
        dec.push(b"{\"a\":1}\n{\"b\":2}\n", &mut out);
        assert_eq!(out, vec![line(b"{\"a\":1}"), line(b"{\"b\":2}")]);
        assert_eq!(dec.buffered(), 0);
        assert_eq!(dec.finish(), None);
    }

    #[test]
    fn line_split_at_every_offset() {
        let input: &[u8] = b"{\"type\":\"prompt\"}\r\nsecond\r\n";
        for cut in 0..=input.len() {
            let mut dec = LineDecoder::new(64);
            let mut out = Vec::new();
            dec.push(&input[..cut], &mut out);
            dec.push(&input[cut..], &mut out);
            assert_eq!(dec.finish(), None, "cut {cut}");
            assert_eq!(
                out,
                vec![line(b"{\"type\":\"prompt\"}"), line(b"second")],
                "cut {cut}"
            );
        }
    }

    #[test]
    fn byte_at_a_time() {
        let input: &[u8] = b"ab\r\r\nc\rd\n\r";
        let mut dec = LineDecoder::new(64);
        let mut out = Vec::new();
        for b in input {
            dec.push(std::slice::from_ref(b), &mut out);
        }
        out.extend(dec.finish());
        assert_eq!(out, vec![line(b"ab\r"), line(b"c\rd"), line(b"")]);
    }

    #[test]
    fn crlf_stripped() {
        assert_eq!(decode(64, b"abc\r\n"), vec![line(b"abc")]);
    }

    #[test]
    fn only_one_cr_stripped() {
        assert_eq!(decode(64, b"a\r\r\n"), vec![line(b"a\r")]);
    }

    #[test]
    fn lone_cr_in_middle_kept() {
        assert_eq!(decode(64, b"a\rb\n"), vec![line(b"a\rb")]);
        assert_eq!(decode(64, b"\ra\n"), vec![line(b"\ra")]);
    }

    #[test]
    fn unicode_line_separators_are_data() {
        let input = "{\"m\":\"x\u{2028}y\u{2029}z\"}\n".as_bytes();
        let frames = decode(64, input);
        assert_eq!(frames, vec![line(&input[..input.len() - 1])]);
    }

    #[test]
    fn final_line_without_lf_via_finish() {
        let mut dec = LineDecoder::new(64);
        let mut out = Vec::new();
        dec.push(b"one\ntwo", &mut out);
        assert_eq!(out, vec![line(b"one")]);
        assert_eq!(dec.finish(), Some(line(b"two")));
        assert_eq!(dec.finish(), None);
        // The end of input ends a line like LF does: one CR before it is dropped.
        assert_eq!(decode(64, b"x\r"), vec![line(b"x")]);
        assert_eq!(decode(64, b"\r"), vec![line(b"")]);
    }

    #[test]
    fn empty_lines_delivered() {
        assert_eq!(
            decode(64, b"\n\r\na\n\n"),
            vec![line(b""), line(b""), line(b"a"), line(b"")]
        );
    }

    #[test]
    fn empty_input_yields_nothing() {
        assert_eq!(decode(64, b""), vec![]);
        let mut dec = LineDecoder::new(64);
        let mut out = Vec::new();
        dec.push(b"", &mut out);
        assert!(out.is_empty());
        assert_eq!(dec.finish(), None);
    }

    #[test]
    fn exactly_cap_is_fine() {
        assert_eq!(decode(4, b"abcd\n"), vec![line(b"abcd")]);
        // The dropped CR does not count against the cap.
        assert_eq!(decode(4, b"abcd\r\n"), vec![line(b"abcd")]);
        assert_eq!(decode(4, b"abcd"), vec![line(b"abcd")]);
    }

    #[test]
    fn cap_plus_one_is_too_long_and_next_line_decodes() {
        assert_eq!(
            decode(4, b"abcde\nok\n"),
            vec![Frame::TooLong { bytes: 5 }, line(b"ok")]
        );
        assert_eq!(
            decode(4, b"abcd\r\r\nok\r\n"),
            vec![Frame::TooLong { bytes: 5 }, line(b"ok")]
        );
        // Split so that the overflow happens in a later push than the start of the line.
        let mut dec = LineDecoder::new(4);
        let mut out = Vec::new();
        dec.push(b"abc", &mut out);
        dec.push(b"defgh", &mut out);
        assert_eq!(dec.buffered(), 0);
        dec.push(b"ij\nnext", &mut out);
        assert_eq!(out, vec![Frame::TooLong { bytes: 10 }]);
        assert_eq!(dec.finish(), Some(line(b"next")));
    }

    #[test]
    fn oversized_final_line_at_finish() {
        assert_eq!(
            decode(4, b"ok\nabcdefg"),
            vec![line(b"ok"), Frame::TooLong { bytes: 7 }]
        );
        assert_eq!(decode(4, b"abcdefg\r"), vec![Frame::TooLong { bytes: 7 }]);
    }

    #[test]
    fn buffer_bounded_by_small_cap() {
        let cap = 1000;
        let mut dec = LineDecoder::new(cap);
        let mut out = Vec::new();
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..320 {
            dec.push(&chunk, &mut out);
            assert!(dec.buffered() <= cap);
        }
        dec.push(b"\n", &mut out);
        assert_eq!(
            out,
            vec![Frame::TooLong {
                bytes: 20 * 1024 * 1024
            }]
        );
    }

    #[test]
    fn huge_line_at_real_cap_then_get_state() {
        let mut dec = LineDecoder::default();
        let mut out = Vec::new();
        let chunk = vec![b'a'; 64 * 1024];
        for _ in 0..(20 * 1024 * 1024 / chunk.len()) {
            dec.push(&chunk, &mut out);
            assert!(dec.buffered() <= MAX_LINE_BYTES);
            assert!(out.is_empty());
        }
        dec.push(b"\n{\"type\":\"get_state\"}\n", &mut out);
        assert_eq!(
            out,
            vec![
                Frame::TooLong {
                    bytes: 20 * 1024 * 1024
                },
                line(b"{\"type\":\"get_state\"}"),
            ]
        );
        assert_eq!(dec.finish(), None);
    }

    /// xorshift64*: small, seeded, good enough to drive a fuzz loop.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        /// Uniform-ish in `0..n` (`n > 0`).
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The obvious whole-input model of the framing rules.
    fn reference(cap: usize, input: &[u8]) -> Vec<Frame> {
        if input.is_empty() {
            return Vec::new();
        }
        let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        // `split` yields an empty last piece after a final LF: there is no unterminated line.
        if pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        pieces
            .into_iter()
            .map(|p| {
                let p = p.strip_suffix(b"\r").unwrap_or(p);
                if p.len() > cap {
                    Frame::TooLong { bytes: p.len() }
                } else {
                    Frame::Line(p.to_vec())
                }
            })
            .collect()
    }

    #[test]
    fn fuzz_random_inputs_match_reference() {
        const CASES: usize = 100_000;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut input = Vec::with_capacity(64);
        let mut out = Vec::new();
        let mut cases = 0usize;
        for _ in 0..CASES {
            let cap = 1 + rng.below(16);
            input.clear();
            let len = rng.below(64);
            for _ in 0..len {
                let b = match rng.below(8) {
                    0 | 1 => b'\n',
                    2 | 3 => b'\r',
                    4 => b'a',
                    5 => 0xE2,
                    6 => [0x80, 0xA8, 0xA9][rng.below(3)],
                    _ => rng.next() as u8,
                };
                input.push(b);
            }

            let mut dec = LineDecoder::new(cap);
            out.clear();
            let mut rest = &input[..];
            while !rest.is_empty() {
                // Mostly small chunks, now and then an empty push or the whole remainder.
                let n = match rng.below(10) {
                    0 => 0,
                    1 => rest.len(),
                    _ => 1 + rng.below(rest.len().min(8)),
                };
                let (chunk, tail) = rest.split_at(n);
                dec.push(chunk, &mut out);
                assert!(dec.buffered() <= cap, "cap {cap}, input {input:?}");
                rest = tail;
            }
            out.extend(dec.finish());
            assert_eq!(dec.finish(), None, "finish twice, input {input:?}");

            assert_eq!(out, reference(cap, &input), "cap {cap}, input {input:?}");
            cases += 1;
        }
        assert_eq!(cases, CASES);
        assert!(cases >= 100_000);
    }
}
