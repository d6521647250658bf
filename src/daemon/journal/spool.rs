//! The journal's on-disk spool (`$KEEL_HOME/journal/`, 0700): every record bound for NATS is
//! appended here first, in order, as one JSON line `{"subject":…,"msgId":…,"payload":…}` in
//! numbered segment files; the publisher reads from the acked position and acks what
//! JetStream stored. Bounded by bytes: when full, whole oldest segments are deleted and their
//! unacked records counted as dropped. Appending never waits for the network. Synchronous
//! file I/O of one line at a time; callers hold it behind a mutex.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::batch::parse;
pub use super::batch::Batch;

/// Default spool cap (`--journal-spool-bytes`).
pub const SPOOL_BYTES: u64 = 256 * 1024 * 1024;
/// The largest segment file (smaller caps get segments of a sixteenth of the cap).
pub const SEGMENT_BYTES: u64 = 4 * 1024 * 1024;

/// One record bound for NATS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub subject: String,
    /// The `Nats-Msg-Id` header (JetStream dedupes on it).
    pub msg_id: String,
    /// The message body, compact JSON without a newline, sent as these bytes.
    pub payload: String,
}

/// What a segment file holds.
#[derive(Debug)]
struct Segment {
    number: u64,
    bytes: u64,
    records: u64,
}

/// The spool's counters, as `daemon/status` shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Records appended since the spool was opened.
    pub spooled: u64,
    /// Records on disk not yet acked (including those found at start).
    pub lag: u64,
    /// Bytes on disk.
    pub bytes: u64,
    /// Records dropped unacked because the spool was full.
    pub dropped: u64,
    /// Records acked since the spool was opened.
    pub acked: u64,
}

/// The spool directory and its segments.
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    segments: VecDeque<Segment>,
    /// Appends go here (the last segment).
    tail: File,
    cursor: Cursor,
    /// The acked position: records and bytes of the first segment already acked.
    acked_records: u64,
    acked_offset: u64,
    counts: Counts,
}

/// How much of a segment one read takes at least (a longer line is read whole).
const READ_BYTES: usize = 256 * 1024;

impl Spool {
    /// Opens (creating 0700) `dir`, keeping what an earlier daemon left unacked. Records a
    /// crash left between two acks are sent again (JetStream's duplicate window dedupes them
    /// when the restart comes within it).
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Spool> {
        if let Some(parent) = dir.parent() {
            fs::create_dir_all(parent)?;
        }
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        let mut numbers: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".jsonl")?.parse().ok()
            })
            .collect();
        numbers.sort_unstable();
        let mut segments = VecDeque::new();
        for number in numbers {
            let (bytes, records) = scan(&segment_path(dir, number))?;
            segments.push_back(Segment {
                number,
                bytes,
                records,
            });
        }
        let (acked_records, acked_offset) = read_cursor(dir, &segments);
        let next = segments.back().map_or(1, |s| s.number + 1);
        segments.push_back(Segment {
            number: next,
            bytes: 0,
            records: 0,
        });
        let tail = create_segment(dir, next)?;
        let cursor = Cursor::open(dir)?;
        let lag = segments.iter().map(|s| s.records).sum::<u64>() - acked_records;
        let bytes = segments.iter().map(|s| s.bytes).sum();
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            max_bytes: max_bytes.max(1),
            segment_bytes: (max_bytes / 16).clamp(1, SEGMENT_BYTES),
            segments,
            tail,
            cursor,
            acked_records,
            acked_offset,
            counts: Counts {
                lag,
                bytes,
                ..Counts::default()
            },
        };
        spool.release_acked()?;
        Ok(spool)
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Appends one record (see [`Spool::append_lines`]).
    pub fn append(&mut self, record: &Record) -> io::Result<()> {
        let mut lines = Lines::default();
        lines.record(record);
        self.append_lines(&lines)
    }

    /// Appends spool lines in order, one write per segment. When the spool goes over its cap,
    /// its oldest segments are deleted (never the one being written), their unacked records
    /// counted in `dropped`.
    pub fn append_lines(&mut self, lines: &Lines) -> io::Result<()> {
        // `lines.buf[unwritten..start]` is bound for the tail segment and not written yet.
        let (mut unwritten, mut start) = (0, 0);
        for &end in &lines.ends {
            let line = &lines.buf[start..end];
            let full = self
                .segments
                .back()
                .is_some_and(|s| s.bytes > 0 && s.bytes + line.len() as u64 > self.segment_bytes);
            if full {
                self.write_tail(&lines.buf[unwritten..start])?;
                unwritten = start;
                self.rotate()?;
            }
            start = end;
            if let Some(s) = self.segments.back_mut() {
                s.bytes += line.len() as u64;
                s.records += 1;
            }
            self.counts.spooled += 1;
            self.counts.lag += 1;
            self.counts.bytes += line.len() as u64;
        }
        self.write_tail(&lines.buf[unwritten..start])?;
        while self.counts.bytes > self.max_bytes && self.segments.len() > 1 {
            self.drop_oldest()?;
        }
        Ok(())
    }

    /// Writes whole lines to the tail segment. A write that fails part way (a full disk) is
    /// cut back off, so that no part of a line stays to run into the next append's first line:
    /// the lines it held are counted but not on disk, and [`Spool::read`] counts them dropped.
    fn write_tail(&mut self, chunk: &[u8]) -> io::Result<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let before = self.tail.metadata()?.len();
        self.tail.write_all(chunk).inspect_err(|_| {
            let _ = self.tail.set_len(before);
        })
    }

    /// Up to `max` records from the acked position (stopping at the end of a segment), read
    /// with one read of the segment's next bytes (more only for a line longer than that).
    pub fn read(&mut self, max: usize) -> io::Result<Batch> {
        self.release_acked()?;
        let Some(first) = self.segments.front() else {
            return Ok(Batch::empty(0));
        };
        let (segment, records) = (first.number, first.records);
        if self.acked_records >= records {
            return Ok(Batch::empty(segment));
        }
        // What the segment holds after the acked position, up to one read's worth (a few
        // records at a low rate: no large buffer filled for them).
        let unread = first.bytes.saturating_sub(self.acked_offset);
        let mut want = usize::try_from(unread)
            .unwrap_or(READ_BYTES)
            .clamp(1, READ_BYTES);
        let file = File::open(segment_path(&self.dir, segment))?;
        let mut data = Vec::new();
        // Read until at least one whole line is in, or the file ends.
        let mut eof = false;
        while !eof && memchr(&data).is_none() {
            let have = data.len();
            data.resize(have + want, 0);
            want = READ_BYTES.max(have + want);
            let n = read_at_most(&file, &mut data[have..], self.acked_offset + have as u64)?;
            data.truncate(have + n);
            eof = n == 0;
        }
        let data = Bytes::from(data);
        let mut batch = Batch::empty(segment);
        batch.data = data.clone();
        let (mut start, mut offset) = (0, self.acked_offset);
        while batch.entries.len() < max
            && self.acked_records + (batch.entries.len() as u64) < records
        {
            let Some(nl) = memchr(&data[start..]) else {
                break;
            };
            let end = start + nl + 1;
            offset += (end - start) as u64;
            match parse(&data, start..end) {
                Some(entry) => {
                    batch.entries.push(entry);
                    batch.ends.push(offset);
                }
                None if batch.entries.is_empty() => {
                    // A damaged line (a crash mid-write) is skipped, and counted as dropped.
                    tracing::warn!("journal spool: a damaged record in segment {segment} skipped");
                    self.acked_records += 1;
                    self.acked_offset = offset;
                    self.counts.lag = self.counts.lag.saturating_sub(1);
                    self.counts.dropped += 1;
                }
                // After records of this batch: skipped when it comes first in a later one.
                None => break,
            }
            start = end;
        }
        let short = self.acked_records < records && memchr(&data[start..]).is_none();
        if batch.entries.is_empty() && short {
            // Counted but not on disk (a write that failed, a disk full): lost.
            let missing = records - self.acked_records;
            tracing::warn!("journal spool: {missing} record(s) missing from segment {segment}");
            self.counts.dropped += missing;
            self.counts.lag = self.counts.lag.saturating_sub(missing);
            if let Some(s) = self.segments.front_mut() {
                s.records -= missing;
            }
        }
        if batch.is_empty() && self.segments.len() > 1 {
            // What was left of this segment was skipped or lost: on to the next one.
            return self.read(max);
        }
        Ok(batch)
    }

    /// Acks the first `n` records of `batch` (JetStream stored them). A batch whose segment
    /// was dropped meanwhile acks nothing.
    pub fn ack(&mut self, batch: &Batch, n: usize) -> io::Result<()> {
        if n == 0 || self.segments.front().map(|s| s.number) != Some(batch.segment) {
            return Ok(());
        }
        let n = n.min(batch.ends.len());
        self.acked_records += n as u64;
        self.acked_offset = batch.ends[n - 1];
        self.counts.lag = self.counts.lag.saturating_sub(n as u64);
        self.counts.acked += n as u64;
        self.release_acked()?;
        self.cursor
            .write(batch.segment, self.acked_records, self.acked_offset)
    }

    /// Deletes the leading segments that are wholly acked (never the tail).
    fn release_acked(&mut self) -> io::Result<()> {
        while self.segments.len() > 1 {
            let Some(first) = self.segments.front() else {
                break;
            };
            if self.acked_records < first.records {
                break;
            }
            self.remove_first()?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        let next = self.segments.back().map_or(1, |s| s.number + 1);
        self.tail = create_segment(&self.dir, next)?;
        self.segments.push_back(Segment {
            number: next,
            bytes: 0,
            records: 0,
        });
        Ok(())
    }

    /// Deletes the oldest segment whether acked or not (the spool is full).
    fn drop_oldest(&mut self) -> io::Result<()> {
        let Some(first) = self.segments.front() else {
            return Ok(());
        };
        let unacked = first.records.saturating_sub(self.acked_records);
        self.counts.dropped += unacked;
        self.counts.lag = self.counts.lag.saturating_sub(unacked);
        tracing::warn!(
            "journal spool full: {unacked} unpublished record(s) of segment {} dropped",
            first.number
        );
        self.remove_first()
    }

    fn remove_first(&mut self) -> io::Result<()> {
        let Some(first) = self.segments.pop_front() else {
            return Ok(());
        };
        self.counts.bytes -= first.bytes;
        self.acked_records = 0;
        self.acked_offset = 0;
        match fs::remove_file(segment_path(&self.dir, first.number)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let next = self.segments.front().map_or(0, |s| s.number);
        self.cursor.write(next, 0, 0)
    }
}

/// Spool lines built before they are appended: `{"subject":…,"msgId":…,"payload":<the
/// payload's own bytes>}\n` each.
#[derive(Debug, Default)]
pub struct Lines {
    pub(super) buf: Vec<u8>,
    pub(super) ends: Vec<usize>,
}

impl Lines {
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    pub fn record(&mut self, record: &Record) {
        self.line(&record.subject, &record.msg_id, |out| {
            out.extend_from_slice(record.payload.as_bytes())
        });
    }

    /// A whole line (up to and with its newline) that `write` puts into the buffer.
    pub fn raw(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.buf);
        self.ends.push(self.buf.len());
    }

    /// A line whose payload `payload` writes straight into the buffer (compact JSON).
    pub fn line(&mut self, subject: &str, msg_id: &str, payload: impl FnOnce(&mut Vec<u8>)) {
        // Writing a string into a Vec cannot fail.
        self.buf.extend_from_slice(b"{\"subject\":");
        let _ = serde_json::to_writer(&mut self.buf, subject);
        self.buf.extend_from_slice(b",\"msgId\":");
        let _ = serde_json::to_writer(&mut self.buf, msg_id);
        self.buf.extend_from_slice(b",\"payload\":");
        payload(&mut self.buf);
        self.buf.extend_from_slice(b"}\n");
        self.ends.push(self.buf.len());
    }
}

/// The position of the first newline in `data`.
fn memchr(data: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', data)
}

/// Reads what `file` has at `offset` into `buf`, up to its length; 0 at the end.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}.jsonl"))
}

fn create_segment(dir: &Path, number: u64) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(segment_path(dir, number))
}

/// A segment's bytes and whole records (a torn last line is cut off).
fn scan(path: &Path) -> io::Result<(u64, u64)> {
    let data = fs::read(path)?;
    let whole = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    if whole < data.len() {
        OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(whole as u64)?;
    }
    let records = data[..whole].iter().filter(|b| **b == b'\n').count();
    Ok((whole as u64, records as u64))
}

/// `cursor`: `<segment> <records acked> <offset>` of the first segment, each number padded to
/// 20 digits so that every write is the same 63 bytes at offset 0 of the one open file (one
/// small write per ack, no new file and rename): a write that did not happen leaves the
/// previous cursor, and records after it are sent again (JetStream dedupes them).
struct Cursor(File);

impl Cursor {
    fn open(dir: &Path) -> io::Result<Cursor> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join("cursor"))
            .map(Cursor)
    }

    fn write(&self, segment: u64, records: u64, offset: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let line = format!("{segment:020} {records:020} {offset:020}\n");
        self.0.write_all_at(line.as_bytes(), 0)
    }
}

fn read_cursor(dir: &Path, segments: &VecDeque<Segment>) -> (u64, u64) {
    let Some(first) = segments.front() else {
        return (0, 0);
    };
    let Ok(text) = fs::read_to_string(dir.join("cursor")) else {
        return (0, 0);
    };
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match v.as_slice() {
        [segment, records, offset] if *segment == first.number && *records <= first.records => {
            (*records, (*offset).min(first.bytes))
        }
        _ => (0, 0),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(super) mod tests {
    use super::*;

    /// A record of session `s`, numbered `n`.
    pub(in crate::daemon::journal) fn rec(n: u64) -> Record {
        Record {
            subject: "keel.events.h.s".into(),
            msg_id: format!("s:e:{n}"),
            payload: format!("{{\"seq\":{n},\"event\":{{\"type\":\"x\"}}}}"),
        }
    }

    fn drain(spool: &mut Spool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let b = spool.read(3).unwrap();
            if b.is_empty() {
                return out;
            }
            out.extend(b.records().into_iter().map(|r| r.msg_id.clone()));
            spool.ack(&b, b.len()).unwrap();
        }
    }

    #[test]
    fn records_come_back_in_order_with_their_payload_bytes_and_acked_ones_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let mut spool = Spool::open(&path, 1 << 20).unwrap();
        let odd = Record {
            payload: "{\"a\" : 1,\"b\":\"\\u00e9\"}".into(),
            ..rec(0)
        };
        spool.append(&odd).unwrap();
        for n in 1..=5 {
            spool.append(&rec(n)).unwrap();
        }
        let b = spool.read(2).unwrap();
        assert_eq!(b.records()[0], odd, "payload bytes kept as they were");
        spool.ack(&b, 1).unwrap();
        assert_eq!(spool.counts().lag, 5);
        let b = spool.read(10).unwrap();
        assert_eq!(b.len(), 5, "from the acked position");
        assert_eq!(b.records()[0], rec(1));
        spool.ack(&b, 5).unwrap();
        assert_eq!(spool.counts().lag, 0);
        assert!(spool.read(10).unwrap().is_empty());
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn a_full_spool_drops_its_oldest_records_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        // ~70 bytes a line: a 1,000-byte cap has 62-byte segments (one record each).
        let mut spool = Spool::open(dir.path(), 1000).unwrap();
        for n in 1..=40 {
            spool.append(&rec(n)).unwrap();
        }
        let c = spool.counts();
        assert!(c.bytes <= 1000, "{c:?}");
        assert!(c.dropped > 0, "{c:?}");
        assert_eq!(c.spooled, 40);
        assert_eq!(
            c.dropped + c.lag,
            40,
            "every record is either dropped or waiting"
        );
        let got = drain(&mut spool);
        let want: Vec<String> = (c.dropped + 1..=40).map(|n| format!("s:e:{n}")).collect();
        assert_eq!(got, want, "the oldest went, the newest stayed, in order");
    }

    #[test]
    fn an_unacked_spool_is_sent_again_after_a_restart_from_its_acked_position() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut spool = Spool::open(dir.path(), 1 << 20).unwrap();
            for n in 1..=6 {
                spool.append(&rec(n)).unwrap();
            }
            let b = spool.read(2).unwrap();
            spool.ack(&b, 2).unwrap();
        }
        // A torn last line (a crash mid-append) is cut off.
        let seg = segment_path(dir.path(), 1);
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(b"{\"subject\":\"x\",\"msg").unwrap();
        let mut spool = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(spool.counts().lag, 4);
        let got = drain(&mut spool);
        assert_eq!(got, ["s:e:3", "s:e:4", "s:e:5", "s:e:6"]);
    }

    #[test]
    fn a_line_longer_than_one_read_comes_whole_and_a_damaged_line_is_skipped_once_it_is_first() {
        let dir = tempfile::tempdir().unwrap();
        let big = Record {
            payload: format!("{{\"x\":\"{}\"}}", "a".repeat(READ_BYTES * 2 + 7)),
            ..rec(2)
        };
        {
            let mut spool = Spool::open(dir.path(), 64 << 20).unwrap();
            spool.append(&rec(1)).unwrap();
            spool.append(&big).unwrap();
        }
        // A whole line that is not a record, as a damaged disk could leave it.
        let seg = segment_path(dir.path(), 1);
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(b"{\"subject\":\n").unwrap();
        let mut spool = Spool::open(dir.path(), 64 << 20).unwrap();
        spool.append(&rec(3)).unwrap();
        assert_eq!(spool.counts().lag, 4);
        let b = spool.read(10).unwrap();
        assert_eq!(b.records(), [rec(1)], "what one read held whole");
        spool.ack(&b, 1).unwrap();
        let b = spool.read(10).unwrap();
        assert_eq!(
            b.records(),
            [big],
            "read on until the line ended, then stopped before the damaged one"
        );
        spool.ack(&b, 1).unwrap();
        let b = spool.read(10).unwrap();
        assert_eq!(b.records(), [rec(3)], "skipped, and on to the next segment");
        spool.ack(&b, 1).unwrap();
        let c = spool.counts();
        assert_eq!((c.lag, c.dropped, c.acked), (0, 1, 3));
    }

    #[test]
    fn one_append_of_many_lines_fills_segments_in_order_and_the_cursor_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            // ~70-byte lines and 1,000-byte segments (a 16,000-byte cap): 40 lines, 3 segments.
            let mut spool = Spool::open(dir.path(), 16_000).unwrap();
            let mut lines = Lines::default();
            for n in 1..=40 {
                lines.record(&rec(n));
            }
            spool.append_lines(&lines).unwrap();
            assert!(spool.segments.len() >= 3, "{:?}", spool.segments);
            for s in &spool.segments {
                let len = fs::metadata(segment_path(dir.path(), s.number))
                    .unwrap()
                    .len();
                assert_eq!(len, s.bytes, "segment {} on disk as counted", s.number);
                assert!(s.bytes <= 1000, "{s:?}");
            }
            // 25 acked: past the first segment's end, into the second.
            let mut acked = 0;
            while acked < 25 {
                let b = spool.read(25 - acked).unwrap();
                acked += b.len();
                spool.ack(&b, b.len()).unwrap();
            }
        }
        let mut spool = Spool::open(dir.path(), 16_000).unwrap();
        assert_eq!(spool.counts().lag, 15);
        let got = drain(&mut spool);
        let want: Vec<String> = (26..=40).map(|n| format!("s:e:{n}")).collect();
        assert_eq!(got, want);
    }
}
