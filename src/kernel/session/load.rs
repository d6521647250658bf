//! Loading a session file: reads it in pieces of whole lines, parses the pieces on a few
//! threads, and joins the results in file order (ids, parent repairs, warnings with line
//! numbers). Holds a few pieces of the file at a time, never the whole file next to its
//! entries. Reads only the reader it is given and never writes.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::sync::{mpsc, Mutex};

use super::parse::{find_newline, parse_header, unreadable_message, LineReader};
use super::{Entry, SessionError, SessionErrorKind, SessionHeader};

/// Bytes per piece handed to a parser thread (cut at a line end; a longer line makes a longer
/// piece). A file of one piece is parsed on the calling thread.
pub(super) const PIECE: usize = 512 << 10;
/// Bytes asked of the reader at a time.
const READ: usize = 1 << 20;
/// Parser threads at most, whatever the machine has.
const MAX_THREADS: usize = 4;

/// A session file, read.
pub(super) struct Parsed {
    pub header: SessionHeader,
    /// The readable entries in file order.
    pub entries: Vec<Entry>,
    /// Entry id → index in `entries` (the later one wins for duplicate ids, as in pi).
    pub by_id: HashMap<String, usize>,
    /// The index of each entry's parent; `None` when the file repeats an id, so that parents
    /// must be looked up once all entries are in `by_id`.
    pub parents: Option<Vec<Option<usize>>>,
    /// One sentence per damaged line or repaired parent link.
    pub warnings: Vec<String>,
    /// The file is not empty and does not end with `\n` (a torn line or a failed write).
    pub torn_end: bool,
}

/// Reads the session file behind `reader` (`path` names it in errors and warnings) on up to
/// [`MAX_THREADS`] threads. Bad lines become warnings; a missing or bad header is an error.
pub(super) fn load(path: &Path, file: &std::fs::File) -> Result<Parsed, SessionError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let size = file.metadata().map_or(0, |m| m.len());
    load_with(path, file, size, PIECE, threads.min(MAX_THREADS))
}

/// [`load`] with the piece size and thread count chosen by the caller (tests use tiny pieces).
/// `size` is the file's size if known (else 0), to size the index once.
pub(super) fn load_with(
    path: &Path,
    reader: impl Read,
    size: u64,
    piece: usize,
    threads: usize,
) -> Result<Parsed, SessionError> {
    let mut pieces = Pieces::new(reader, piece.max(1));
    let read = |p: &mut Pieces<_>| p.next().map_err(|e| SessionError::io("read", path, &e));
    // The header is the first non-blank line; the lines before it are blank.
    let mut line = 0;
    let (header, first) = loop {
        let Some(mut piece) = read(&mut pieces)? else {
            return Err(SessionError::new(
                SessionErrorKind::Invalid,
                format!("{} is not a session file: it is empty", path.display()),
            ));
        };
        if let Some(header) = take_header(path, &mut piece, &mut line)? {
            break (header, piece);
        }
    };
    let mut join = Join::new(path, line, size);
    let Some(second) = read(&mut pieces)? else {
        join.add(parse_piece(&first));
        return Ok(join.finish(header, pieces.last_byte));
    };
    if threads <= 1 {
        for piece in [first, second] {
            join.add(parse_piece(&piece));
            pieces.recycle(piece.bytes);
        }
        while let Some(piece) = read(&mut pieces)? {
            join.add(parse_piece(&piece));
            pieces.recycle(piece.bytes);
        }
    } else {
        on_threads(threads, [first, second], &mut pieces, &mut join, read)?;
    }
    Ok(join.finish(header, pieces.last_byte))
}

/// Parses `first` and every later piece on `threads` threads, joining them in order.
fn on_threads<R: Read>(
    threads: usize,
    first: [Piece; 2],
    pieces: &mut Pieces<R>,
    join: &mut Join,
    read: impl Fn(&mut Pieces<R>) -> Result<Option<Piece>, SessionError>,
) -> Result<(), SessionError> {
    // A rendezvous channel: a piece is read only when a thread is free to take it.
    let (work_tx, work_rx) = mpsc::sync_channel::<(usize, Piece)>(0);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Parts, Vec<u8>)>();
    let work_rx = Mutex::new(work_rx);
    std::thread::scope(|s| {
        // Owned here, so that any return (a read error too) closes the channel and the
        // threads end.
        let work_tx = work_tx;
        for _ in 0..threads {
            let (work_rx, done_tx) = (&work_rx, done_tx.clone());
            s.spawn(move || loop {
                let next = work_rx.lock().map(|rx| rx.recv());
                let Ok(Ok((seq, piece))) = next else {
                    return; // no more pieces
                };
                let parts = parse_piece(&piece);
                if done_tx.send((seq, parts, piece.bytes)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        // Parsed pieces wait here until the ones before them are joined.
        let mut waiting: BTreeMap<usize, Parts> = BTreeMap::new();
        let mut next = 0;
        let mut done = |(seq, parts, bytes), pieces: &mut Pieces<R>| {
            pieces.recycle(bytes);
            waiting.insert(seq, parts);
            while let Some(parts) = waiting.remove(&next) {
                join.add(parts);
                next += 1;
            }
        };
        let [first, second] = first;
        let (mut piece, mut after, mut sent) = (Some(first), Some(second), 0);
        while let Some(p) = piece {
            // A closed channel means every thread is gone (a panic, which the scope raises).
            if work_tx.send((sent, p)).is_err() {
                break;
            }
            sent += 1;
            for d in done_rx.try_iter() {
                done(d, pieces);
            }
            piece = match after.take() {
                Some(p) => Some(p),
                None => read(pieces)?,
            };
        }
        drop(work_tx);
        for d in done_rx.iter() {
            done(d, pieces);
        }
        Ok(())
    })
}

/// Whole lines of the file: every line of a piece ends with `\n`, except the file's last line
/// when the file does not end with one (a torn line).
struct Piece {
    bytes: Vec<u8>,
    /// Where the first line starts in `bytes` (after the header line).
    start: usize,
    /// The piece ends the file: a line without `\n` at its end is torn.
    at_end: bool,
}

/// Cuts the file into [`Piece`]s of about `size` bytes.
struct Pieces<R> {
    reader: R,
    size: usize,
    /// Bytes read after the last cut: the start of a line that has no `\n` yet.
    carry: Vec<u8>,
    /// Buffers of parsed pieces, reused for the next pieces (fresh memory for every piece
    /// made the kernel fault in pages again and again).
    spare: Vec<Vec<u8>>,
    last_byte: Option<u8>,
    eof: bool,
}

impl<R: Read> Pieces<R> {
    fn new(reader: R, size: usize) -> Self {
        Pieces {
            reader,
            size,
            carry: Vec::new(),
            spare: Vec::new(),
            last_byte: None,
            eof: false,
        }
    }

    /// Keeps the buffer of a parsed piece for a later piece.
    fn recycle(&mut self, mut bytes: Vec<u8>) {
        if self.spare.len() < 8 {
            bytes.clear();
            self.spare.push(bytes);
        }
    }

    /// The next piece, `None` at the end of the file.
    fn next(&mut self) -> std::io::Result<Option<Piece>> {
        let mut buf = std::mem::take(&mut self.carry);
        // `buf[..searched]` holds no `\n` (the carry never does).
        let mut searched = buf.len();
        loop {
            if buf.len() >= self.size {
                // Cut after the last `\n`; what follows starts the next piece.
                if let Some(at) = buf[searched..].iter().rposition(|b| *b == b'\n') {
                    let cut = searched + at + 1;
                    let mut carry = self.spare.pop().unwrap_or_default();
                    carry.extend_from_slice(&buf[cut..]);
                    self.carry = carry;
                    buf.truncate(cut);
                    return Ok(Some(Piece {
                        bytes: buf,
                        start: 0,
                        at_end: false,
                    }));
                }
                searched = buf.len();
            }
            if self.eof {
                return Ok((!buf.is_empty()).then_some(Piece {
                    bytes: buf,
                    start: 0,
                    at_end: true,
                }));
            }
            // Up to a piece, in reads of at most [`READ`] bytes; a line longer than a piece
            // grows it by half.
            let filled = buf.len();
            let more = match self.size.checked_sub(filled) {
                Some(left) if left > 0 => left.min(READ),
                _ => (filled / 2).max(1),
            };
            buf.reserve(more);
            let n = (&mut self.reader).take(more as u64).read_to_end(&mut buf)?;
            match buf.last() {
                _ if n == 0 => self.eof = true,
                last => self.last_byte = last.copied(),
            }
        }
    }
}

/// Finds the first non-blank line of `piece` and reads it as the header, with `piece.start`
/// moved past it. `None` if every line is blank. `line` counts the lines read so far.
fn take_header(
    path: &Path,
    piece: &mut Piece,
    line: &mut usize,
) -> Result<Option<SessionHeader>, SessionError> {
    for (raw, end, _) in Lines::new(piece) {
        *line += 1;
        if raw.trim_ascii().is_empty() {
            continue;
        }
        let header = parse_header(path, *line, raw)?;
        piece.start = end;
        return Ok(Some(header));
    }
    Ok(None)
}

/// The lines of a piece (from `start`): each line without its `\n` (and `\r`), the offset
/// after it, and whether it is the torn tail.
struct Lines<'a> {
    bytes: &'a [u8],
    at: usize,
    torn_tail: bool,
}

impl<'a> Lines<'a> {
    fn new(piece: &'a Piece) -> Self {
        Lines {
            bytes: &piece.bytes,
            at: piece.start,
            torn_tail: piece.at_end,
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (&'a [u8], usize, bool);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.bytes.get(self.at..).filter(|r| !r.is_empty())?;
        let (line, end, torn) = match find_newline(rest) {
            Some(i) => (&rest[..i], self.at + i + 1, false),
            None => (rest, self.bytes.len(), self.torn_tail),
        };
        self.at = end;
        Some((line.strip_suffix(b"\r").unwrap_or(line), end, torn))
    }
}

/// What one line held.
enum Line {
    /// An entry, with a warning if it holds a message keel could not read.
    Entry(Entry, Option<String>),
    /// A line that is not an entry: why, and whether it is the file's torn last line.
    Bad { error: String, torn: bool },
}

/// A parsed piece: its size and line count, and its non-blank lines by index within it.
struct Parts {
    bytes: usize,
    lines: usize,
    items: Vec<(usize, Line)>,
}

fn parse_piece(piece: &Piece) -> Parts {
    let mut parts = Parts {
        bytes: piece.bytes.len() - piece.start,
        lines: 0,
        items: Vec::new(),
    };
    let mut reader = LineReader::new(&piece.bytes[piece.start..]);
    let mut start = 0;
    for (i, (line, next, torn)) in Lines::new(piece).enumerate() {
        let at = start;
        start = next - piece.start;
        parts.lines = i + 1;
        if line.trim_ascii().is_empty() {
            continue;
        }
        let item = match reader.entry(at, at + line.len(), line) {
            Ok(entry) => {
                let warning = unreadable_message(&entry);
                Line::Entry(entry, warning)
            }
            Err(error) => Line::Bad { error, torn },
        };
        parts.items.push((i, item));
    }
    parts
}

/// Joins parsed pieces in file order.
struct Join<'p> {
    path: &'p Path,
    /// The number of the last line of the pieces joined so far.
    line: usize,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    parents: Vec<Option<usize>>,
    duplicates: bool,
    warnings: Vec<String>,
    /// The warning of the lines skipped since the last readable entry.
    skipped: Option<usize>,
    /// The file's size (0: unknown) until the index has been sized from it.
    size: u64,
}

impl<'p> Join<'p> {
    fn new(path: &'p Path, line: usize, size: u64) -> Self {
        Join {
            size,
            path,
            line,
            entries: Vec::new(),
            by_id: HashMap::new(),
            parents: Vec::new(),
            duplicates: false,
            warnings: Vec::new(),
            skipped: None,
        }
    }

    fn add(&mut self, parts: Parts) {
        let mut more = parts.items.len();
        if self.size > 0 && parts.bytes > 0 {
            // Room for as many entries as the first piece suggests the file holds, so the id
            // index is not rehashed as it grows (no entry line is shorter than 64 bytes).
            let lines = self.size as f64 * more as f64 / parts.bytes as f64;
            more = more.max((lines as usize).min((self.size / 64) as usize));
            self.by_id.reserve(more);
            self.size = 0;
        }
        self.entries.reserve(more);
        self.parents.reserve(more);
        for (i, item) in parts.items {
            let n = self.line + i + 1;
            match item {
                Line::Entry(entry, warning) => {
                    if let Some(w) = warning {
                        let at = self.path.display();
                        self.warnings.push(format!("line {n} of {at}: {w}"));
                    }
                    self.entry(n, entry);
                }
                Line::Bad { error, torn } => {
                    let what = if torn { "torn" } else { "malformed" };
                    let at = self.path.display();
                    self.warnings
                        .push(format!("skipped {what} line {n} of {at}: {error}"));
                    self.skipped = Some(self.warnings.len() - 1);
                }
            }
        }
        self.line += parts.lines;
    }

    fn entry(&mut self, n: usize, mut entry: Entry) {
        let before = self.entries.len().checked_sub(1);
        // Nearly always the parent is the entry just before: no lookup for that.
        let parent = entry.parent_id.as_ref().map(|p| match before {
            Some(i) if self.entries[i].id == *p => Some(i),
            _ => self.by_id.get(p.as_str()).copied(),
        });
        // A parent that is not in the file (it was on a damaged line, or never existed) would
        // cut the history before it out of the branch: attach the entry to the readable
        // entry before it instead.
        let parent = match (parent, &entry.parent_id) {
            (Some(None), Some(missing)) => {
                let to = before.map(|i| self.entries[i].id.clone());
                let name = to.as_deref().unwrap_or("the start of the session");
                let note = match self.skipped {
                    Some(w) => {
                        let note = format!("; entry {} after it now continues from {name}", entry.id);
                        self.warnings[w].push_str(&note);
                        None
                    }
                    None => Some(format!(
                        "line {n} of {}: entry {} points at a missing parent {missing}; attached to {name}",
                        self.path.display(),
                        entry.id
                    )),
                };
                self.warnings.extend(note);
                entry.parent_id = to;
                before
            }
            (parent, _) => parent.flatten(),
        };
        self.skipped = None;
        let i = self.entries.len();
        self.duplicates |= self.by_id.insert(entry.id.clone(), i).is_some();
        self.entries.push(entry);
        self.parents.push(parent);
    }

    fn finish(self, header: SessionHeader, last_byte: Option<u8>) -> Parsed {
        Parsed {
            header,
            entries: self.entries,
            by_id: self.by_id,
            parents: (!self.duplicates).then_some(self.parents),
            warnings: self.warnings,
            torn_end: last_byte.is_some_and(|b| b != b'\n'),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kernel::message::Message;
    use crate::kernel::session::parse::VALUE_LINES;
    use crate::kernel::session::EntryData;

    const TORN: &str = include_str!("../../../fixtures/sessions/torn.jsonl");
    const UNKNOWN: &str = include_str!("../../../fixtures/sessions/unknown.jsonl");
    const VALID: &str = include_str!("../../../fixtures/sessions/valid.jsonl");

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

    type Loaded = (Vec<Entry>, Vec<String>, bool);

    fn loaded(text: &[u8], read: usize, piece: usize, threads: usize) -> Loaded {
        let reader = Trickle {
            rest: text,
            piece: read,
        };
        let p = load_with(
            Path::new("s.jsonl"),
            reader,
            text.len() as u64,
            piece,
            threads,
        )
        .unwrap();
        for (id, &i) in &p.by_id {
            assert_eq!(&p.entries[i].id, id);
        }
        let parents = p.parents.expect("no repeated ids in these files");
        for (e, parent) in p.entries.iter().zip(&parents) {
            let want = e.parent_id.as_ref().map(|id| p.by_id[id]);
            assert_eq!(*parent, want, "parent of {}", e.id);
        }
        (p.entries, p.warnings, p.torn_end)
    }

    /// Damaged files (torn and malformed lines, CRLF, blank lines, an unterminated last line)
    /// give the same entries, warnings and torn flag however the file is cut: reads that end
    /// anywhere in a line, pieces of a few bytes, one thread or several.
    #[test]
    fn every_cut_of_the_file_loads_the_same() {
        let crlf = UNKNOWN.replace('\n', "\r\n");
        let blanks = format!("\n  \n{}", TORN.replace('\n', "\n\n"));
        let unterminated = format!("{}\n\n{}", VALID.trim_end(), "{\"type\":\"message\"");
        for text in [TORN, UNKNOWN, VALID, &crlf, &blanks, &unterminated] {
            let whole = loaded(text.as_bytes(), usize::MAX, usize::MAX, 1);
            assert!(!whole.0.is_empty());
            for (read, piece, threads) in [(1, 1, 1), (7, 1, 3), (2, 64, 2), (300, 200, 4)] {
                let cut = loaded(text.as_bytes(), read, piece, threads);
                assert_eq!(cut, whole, "read {read}, piece {piece}, {threads} threads");
            }
        }
        let (entries, warnings, torn) = loaded(unterminated.as_bytes(), 5, 40, 2);
        assert!(torn);
        assert_eq!(entries.len(), loaded(VALID.as_bytes(), 5, 40, 2).0.len());
        let lines = VALID.trim_end().lines().count() + 2;
        assert_eq!(
            warnings,
            [format!(
                "skipped torn line {lines} of s.jsonl: EOF while parsing an object at line 1 column 17"
            )]
        );
    }

    /// Line numbers in warnings count every line of the file, across pieces and threads.
    #[test]
    fn warnings_name_the_line_of_the_file() {
        let mut lines: Vec<&str> = VALID.lines().collect();
        lines.insert(3, "not json");
        lines.insert(1, "");
        let text = lines.join("\n") + "\n";
        for (piece, threads) in [(usize::MAX, 1), (1, 2), (90, 3)] {
            let (_, warnings, torn) = loaded(text.as_bytes(), usize::MAX, piece, threads);
            assert!(!torn);
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].starts_with("skipped malformed line 5 of s.jsonl: expected ident"),
                "{warnings:?}"
            );
        }
    }

    /// A line longer than a piece makes a longer piece instead of being cut.
    #[test]
    fn a_line_longer_than_a_piece_is_read_whole() {
        let big = "x".repeat(3000);
        let head = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;
        let msg = serde_json::json!({"role": "user", "content": big, "timestamp": 1});
        let entry = serde_json::json!({"type": "message", "id": "0000abcd", "parentId": null,
                                       "timestamp": "t", "message": msg});
        let after = r#"{"type":"label","id":"0000abce","parentId":"0000abcd","timestamp":"t","targetId":"0000abcd"}"#;
        let last = after.replace("0000abce", "0000abcf");
        let text = format!("{head}\n{entry}\n{after}\n{last}");
        let (entries, warnings, torn) = loaded(text.as_bytes(), 100, 256, 2);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(torn, "the file does not end with a newline");
        assert_eq!(entries.len(), 3);
        let EntryData::Message(Message::User(u)) = &entries[0].data else {
            panic!("{:?}", entries[0].data.type_name());
        };
        assert_eq!(crate::kernel::message::user_text(u), big);
        assert_eq!(entries[1].parent_id.as_deref(), Some("0000abcd"));
    }

    /// Blank lines only, or nothing, is not a session; a bad first line is an error that
    /// names its line, also when blank lines come first.
    #[test]
    fn no_header_is_an_error() {
        for text in ["", "\n\n  \r\n"] {
            let err = load_with(Path::new("s.jsonl"), text.as_bytes(), 0, 2, 2)
                .err()
                .unwrap();
            assert_eq!(err.message, "s.jsonl is not a session file: it is empty");
        }
        let err = load_with(
            Path::new("s.jsonl"),
            &b"\n\n{\"type\":\"label\"}\n"[..],
            0,
            2,
            2,
        )
        .err()
        .unwrap();
        assert_eq!(err.kind, SessionErrorKind::Invalid);
        assert!(
            err.message
                .starts_with("s.jsonl is not a session file: line 3 is not a session header"),
            "{}",
            err.message
        );
    }

    /// Message lines are read straight into messages; only the other entries (here one
    /// `model_change`) go through a `Value` tree, which made loading long sessions slow.
    #[test]
    fn message_lines_are_read_without_a_value_tree() {
        let text = keel_testkit::session_gen::session_text("/p", "s", 2_000);
        VALUE_LINES.with(|n| n.set(0));
        let (entries, warnings, _) = loaded(text.as_bytes(), usize::MAX, 64 * 1024, 1);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(entries.len(), 2_000);
        let messages = entries.iter().filter(|e| e.data.is_message()).count();
        assert_eq!(messages, 1_999);
        assert!(entries
            .iter()
            .all(|e| !matches!(e.data, EntryData::RawMessage(_))));
        assert_eq!(VALUE_LINES.with(|n| n.get()), entries.len() - messages);
    }

    /// A read that fails halfway is an error naming the file, on one thread or several
    /// (which then stop; they must not wait for pieces that never come).
    #[test]
    fn a_failed_read_is_an_error() {
        struct Failing<'a>(&'a [u8]);
        impl Read for Failing<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Err(std::io::Error::other("disk on fire"));
                }
                let n = buf.len().min(self.0.len()).min(50);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        for threads in [1, 3] {
            let reader = Failing(VALID.as_bytes());
            let err = load_with(Path::new("s.jsonl"), reader, 0, 64, threads)
                .err()
                .unwrap();
            assert_eq!(err.kind, SessionErrorKind::Io);
            assert_eq!(err.message, "cannot read session s.jsonl: disk on fire");
        }
    }
}
