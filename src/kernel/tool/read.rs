//! `read`: returns a window of a text file's lines. Owns only reading; must never modify a file,
//! never return the content of a binary file, never open anything but a regular file, and never
//! hold more of the file in memory than the window it returns (a file that a client such as an
//! editor hands over, `ToolContext::files`, comes whole: it is scanned the same way).

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
use super::details::ReadDetails;
use super::file::open_regular;
use super::text::{self, CutBy, MAX_BYTES, MAX_LINES};
use super::{ToolContext, ToolOutput, ToolSpec};
use crate::kernel::sandbox::SandboxPolicy;

/// Lines longer than this many characters are shortened.
const MAX_LINE_CHARS: usize = 2000;
/// Bytes of one line held in memory: `MAX_LINE_CHARS` characters of any width, and a few more
/// to tell that the line is longer.
const LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4 + 4;
/// After the window, the rest of the file is scanned for the total line count only this far;
/// past it the result says the file continues without a total.
const COUNT_AHEAD_BYTES: u64 = 8 * 1024 * 1024;
/// How much of a file is sniffed for a NUL byte.
const SNIFF_BYTES: u64 = 8 * 1024;
const BUFFER_BYTES: usize = 64 * 1024;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("read"),
        description: Cow::Borrowed(
            "Read a text file. Output is capped at 2000 lines or 50KB; use offset \
                      (1-based line number) and limit to page through large files.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "offset": {"type": "integer", "minimum": 1, "description": "Line number to start from (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"}
            },
            "required": ["path"]
        }),
    }
}

/// `read`'s arguments, read once; each is checked where it is used.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ReadArgs {
    path: Field<String>,
    offset: Field<u64>,
    limit: Field<u64>,
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match read(super::args::read(args), ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn read(args: ReadArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = args.path.required("path")?;
    let path = path.as_str();
    let offset = args.offset.optional("offset")?;
    let limit = args.limit.optional("limit")?;
    if offset == Some(0) {
        return Err(ToolOutput::error(
            "invalid arguments: `offset` is 1-based (first line is 1)",
        ));
    }
    if limit == Some(0) {
        return Err(ToolOutput::error(
            "invalid arguments: `limit` must be at least 1",
        ));
    }
    super::guard::read(ctx, &ctx.resolve(path), path)?;
    let window = Window {
        path: path.to_string(),
        full: ctx.resolve(path),
        start: to_usize(offset.unwrap_or(1)),
        limit: limit.map(to_usize),
        policy: ctx.sandbox.policy.clone(),
    };
    // Through the client that holds the files (an editor's buffers), or from the disk.
    let text = match ctx.files.read(&window.full, &ctx.abort).await {
        Some(Err(_)) if ctx.abort.is_aborted() => return Err(ToolOutput::error("read aborted")),
        Some(text) => {
            Some(text.map_err(|e| ToolOutput::error(format!("Cannot read {path}: {e}")))?)
        }
        None => None,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let task = tokio::task::spawn_blocking(move || match text {
        Some(text) => window.read_text(text, &flag),
        None => window.read(&flag),
    });
    tokio::select! {
        r = task => r.map_err(|e| ToolOutput::error(format!("read failed: {e}")))?,
        _ = ctx.abort.aborted() => {
            cancel.store(true, Ordering::Relaxed);
            Err(ToolOutput::error("read aborted"))
        }
    }
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The requested slice of lines: `start` is 1-based.
struct Window {
    path: String,
    full: PathBuf,
    start: usize,
    limit: Option<usize>,
    /// What the opened file is judged by.
    policy: SandboxPolicy,
}

impl Window {
    /// Opens, sniffs and scans the file (blocking).
    fn read(&self, cancel: &AtomicBool) -> Result<ToolOutput, ToolOutput> {
        let (mut file, meta) = open_regular(&self.full, &self.path, "read", &self.policy)?;
        let mut head = Vec::new();
        (&mut file)
            .take(SNIFF_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| self.failed(e))?;
        self.check_text(&head, meta.len())?;
        let mut reader =
            BufReader::with_capacity(BUFFER_BYTES, std::io::Cursor::new(head).chain(file));
        let scanned =
            scan(&mut reader, self.start, self.limit, cancel).map_err(|e| self.failed(e))?;
        let out = self.render(scanned, meta.len())?;
        Ok(out.with_details_path(&self.full))
    }

    /// Scans `text`, the whole file as a client (an editor) gave it.
    fn read_text(&self, text: String, cancel: &AtomicBool) -> Result<ToolOutput, ToolOutput> {
        let size = text.len() as u64;
        let head = &text.as_bytes()[..text.len().min(SNIFF_BYTES as usize)];
        self.check_text(head, size)?;
        let mut reader = std::io::Cursor::new(text.into_bytes());
        let scanned =
            scan(&mut reader, self.start, self.limit, cancel).map_err(|e| self.failed(e))?;
        let out = self.render(scanned, size)?;
        Ok(out.with_details_path(&self.full))
    }

    fn failed(&self, e: std::io::Error) -> ToolOutput {
        ToolOutput::error(format!("Cannot read {}: {e}", self.path))
    }

    /// Refuses a file whose first bytes (`head`) hold a NUL.
    fn check_text(&self, head: &[u8], size: u64) -> Result<(), ToolOutput> {
        match text::is_binary(head) {
            true => Err(ToolOutput::error(format!(
                "Cannot read {}: binary file, {size} bytes",
                self.path
            ))),
            false => Ok(()),
        }
    }

    fn render(&self, s: Scanned, file_bytes: u64) -> Result<Rendered, ToolOutput> {
        if let Total::Known(total) = s.total {
            if self.start > total.max(1) {
                return Err(ToolOutput::error(format!(
                    "Offset {} is beyond end of file ({} total) in {}",
                    self.start,
                    lines(total),
                    self.path
                )));
            }
        }
        let first = self.start - 1;
        let last = first + s.lines.len();
        let capped = text::cap_head(&s.lines.join("\n"), MAX_BYTES, MAX_LINES);
        let end = first + capped.shown_lines;
        let size = text::format_size(usize::try_from(file_bytes).unwrap_or(usize::MAX));
        let mut out = capped.text.clone();
        if capped.truncated() {
            let limit = match capped.cut_by {
                Some(CutBy::Bytes) => format!(" ({} limit)", text::format_size(MAX_BYTES)),
                _ => String::new(),
            };
            let of = match s.total {
                Total::Known(total) => format!(" of {total}"),
                Total::Unknown => format!(" of a {size} file"),
            };
            out.push_str(&format!(
                "\n\n[Showing lines {}-{end}{of}{limit}. Use offset={} to continue.]",
                self.start,
                end + 1
            ));
        } else {
            let more = match s.total {
                Total::Known(total) if last < total => {
                    let n = total - last;
                    let s = if n == 1 { "" } else { "s" };
                    Some(format!("{n} more line{s} in file"))
                }
                Total::Known(_) => None,
                Total::Unknown => Some(format!("More lines in file ({size} in total)")),
            };
            if let Some(more) = more {
                out.push_str(&format!(
                    "\n\n[{more}. Use offset={} to continue.]",
                    last + 1
                ));
            }
        }
        Ok(Rendered {
            text: out,
            total: s.total,
            start: self.start,
            end,
            truncated: capped.truncated(),
        })
    }
}

/// How many lines the file has, as far as it was scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Total {
    Known(usize),
    /// The file goes on past the count-ahead budget.
    Unknown,
}

/// The window's lines (each already shortened) and the file's line count.
#[derive(Debug)]
struct Scanned {
    lines: Vec<String>,
    total: Total,
}

/// Reads lines `start..` until the window is full (`limit` lines, or past the output caps),
/// then counts what follows within `COUNT_AHEAD_BYTES`. Holds one line (at most
/// `LINE_KEEP_BYTES` of it) plus the window in memory. A window line longer than
/// `COUNT_AHEAD_BYTES` ends the scan: the file's size is then all that is known.
fn scan(
    r: &mut impl BufRead,
    start: usize,
    limit: Option<usize>,
    cancel: &AtomicBool,
) -> std::io::Result<Scanned> {
    let mut lines: Vec<String> = Vec::new();
    let mut joined = 0usize;
    let mut read = 0usize;
    let mut buf = Vec::new();
    loop {
        let full = limit.is_some_and(|l| lines.len() >= l)
            || lines.len() > MAX_LINES
            || joined > MAX_BYTES;
        if full {
            break;
        }
        buf.clear();
        // Lines before the window must be passed whatever their length; window lines only
        // within the count-ahead budget.
        let max_scan = if read + 1 >= start {
            COUNT_AHEAD_BYTES
        } else {
            u64::MAX
        };
        let Some(line) = next_line(r, &mut buf, max_scan, cancel)? else {
            return Ok(Scanned {
                lines,
                total: Total::Known(read),
            });
        };
        read += 1;
        if read < start {
            continue;
        }
        let text = text::to_text(&buf);
        let shown = match line {
            Line::Whole { dropped: 0 } => text::truncate_line(&text, MAX_LINE_CHARS).into_owned(),
            Line::Whole { dropped } => {
                text::shorten_line(&text, MAX_LINE_CHARS, text.chars().count() + dropped)
            }
            Line::Unfinished { dropped } => {
                let seen = text.chars().count() + dropped;
                let more = format!("more than {seen}");
                lines.push(text::shorten_line(&text, MAX_LINE_CHARS, more));
                return Ok(Scanned {
                    lines,
                    total: Total::Unknown,
                });
            }
        };
        joined += shown.len() + usize::from(!lines.is_empty());
        lines.push(shown);
    }
    let total = count_rest(r, read, COUNT_AHEAD_BYTES, cancel)?;
    Ok(Scanned { lines, total })
}

/// One line as `next_line` read it; `dropped` counts the characters not kept in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    Whole {
        dropped: usize,
    },
    /// Longer than the bytes it was allowed to scan.
    Unfinished {
        dropped: usize,
    },
}

fn interrupted() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Interrupted, "aborted")
}

/// Reads one line into `buf` (without its `\n`), keeping at most `LINE_KEEP_BYTES` of it and
/// consuming at most about `max_scan` bytes. `None` at the end of the file.
fn next_line(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max_scan: u64,
    cancel: &AtomicBool,
) -> std::io::Result<Option<Line>> {
    let (mut any, mut dropped, mut scanned) = (false, 0usize, 0u64);
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(interrupted());
        }
        if scanned >= max_scan {
            return Ok(Some(Line::Unfinished { dropped }));
        }
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(any.then_some(Line::Whole { dropped }));
        }
        any = true;
        let newline = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..newline.unwrap_or(chunk.len())];
        let kept = LINE_KEEP_BYTES.saturating_sub(buf.len()).min(part.len());
        buf.extend_from_slice(&part[..kept]);
        // Characters, not bytes: every byte that does not continue a UTF-8 sequence.
        dropped += part[kept..].iter().filter(|&&b| b & 0xC0 != 0x80).count();
        let used = newline.map_or(chunk.len(), |i| i + 1);
        r.consume(used);
        scanned += used as u64;
        if newline.is_some() {
            return Ok(Some(Line::Whole { dropped }));
        }
    }
}

/// Counts the lines after the `counted` ones, reading at most about `budget` bytes.
fn count_rest(
    r: &mut impl BufRead,
    counted: usize,
    budget: u64,
    cancel: &AtomicBool,
) -> std::io::Result<Total> {
    let (mut newlines, mut seen, mut last) = (0usize, 0u64, None);
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(interrupted());
        }
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            let unterminated = usize::from(last.is_some_and(|b| b != b'\n'));
            return Ok(Total::Known(counted + newlines + unterminated));
        }
        if seen >= budget {
            return Ok(Total::Unknown);
        }
        newlines += chunk.iter().filter(|&&b| b == b'\n').count();
        last = chunk.last().copied();
        seen += chunk.len() as u64;
        let n = chunk.len();
        r.consume(n);
    }
}

/// The rendered text plus the numbers the details need.
struct Rendered {
    text: String,
    total: Total,
    start: usize,
    end: usize,
    truncated: bool,
}

impl Rendered {
    fn with_details_path(self, path: &Path) -> ToolOutput {
        let text = if self.total == Total::Known(0) {
            "(empty file)".to_string()
        } else {
            self.text
        };
        let total_lines = match self.total {
            Total::Known(n) => Some(n as u64),
            Total::Unknown => None,
        };
        ToolOutput::ok(text).with_details(json!(ReadDetails {
            path: path.display().to_string(),
            total_lines,
            start_line: self.start as u64,
            end_line: self.end as u64,
            truncated: self.truncated,
        }))
    }
}

/// `1 line`, `2 lines`.
fn lines(n: usize) -> String {
    match n {
        1 => "1 line".to_string(),
        n => format!("{n} lines"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn reads_whole_small_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "one\ntwo\n").unwrap();
        let out = run(&json!({"path": "a.txt"}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "one\ntwo");
        let det = out.details.unwrap();
        assert_eq!(det["totalLines"], 2);
        assert_eq!(det["endLine"], 2);
        assert_eq!(det["truncated"], false);
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("n.txt"), numbered(10)).unwrap();
        let out = run(
            &json!({"path": "n.txt", "offset": 3, "limit": 2}),
            &ctx(d.path()),
        )
        .await;
        assert_eq!(
            out.text(),
            "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"
        );
        let det = out.details.unwrap();
        assert_eq!(
            (det["startLine"].as_u64(), det["endLine"].as_u64()),
            (Some(3), Some(4))
        );
    }

    #[tokio::test]
    async fn default_cap_is_2000_lines_with_continue_hint() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("big.txt"), numbered(5123)).unwrap();
        let out = run(&json!({"path": "big.txt"}), &ctx(d.path())).await;
        let text = out.text();
        assert!(text.starts_with("line 1\nline 2\n"));
        assert!(text
            .contains("line 2000\n\n[Showing lines 1-2000 of 5123. Use offset=2001 to continue.]"));
        assert!(!text.contains("line 2001"));
        assert_eq!(out.details.unwrap()["truncated"], true);
    }

    #[tokio::test]
    async fn byte_cap_and_long_lines() {
        let d = tempfile::tempdir().unwrap();
        let line = "y".repeat(3000);
        let body: String = (0..100).map(|_| format!("{line}\n")).collect();
        std::fs::write(d.path().join("wide.txt"), body).unwrap();
        let out = run(&json!({"path": "wide.txt"}), &ctx(d.path())).await;
        let text = out.text();
        assert!(text.contains("[line truncated, 3000 chars]"));
        assert!(text.len() <= MAX_BYTES + 200);
        assert!(text.contains("(50.0KB limit). Use offset="));
    }

    #[tokio::test]
    async fn binary_missing_and_offset_errors() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("b.bin"), b"\x7fELF\0\0\x01").unwrap();
        let out = run(&json!({"path": "b.bin"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert_eq!(out.text(), "Cannot read b.bin: binary file, 7 bytes");

        let out = run(&json!({"path": "nope.txt"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("nope.txt"));

        std::fs::write(d.path().join("s.txt"), "a\nb\n").unwrap();
        let out = run(&json!({"path": "s.txt", "offset": 5}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("beyond end of file (2 lines total)"));

        let out = run(&json!({"offset": 1}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("`path`"));
    }

    /// "(1 lines total)", "1 more lines in file".
    #[tokio::test]
    async fn one_line_is_said_in_the_singular() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("one.txt"), "a\n").unwrap();
        let out = run(&json!({"path": "one.txt", "offset": 5}), &ctx(d.path())).await;
        assert!(out.text().contains("(1 line total)"), "{}", out.text());
        std::fs::write(d.path().join("two.txt"), "a\nb\n").unwrap();
        let out = run(&json!({"path": "two.txt", "limit": 1}), &ctx(d.path())).await;
        assert!(
            out.text().contains("[1 more line in file."),
            "{}",
            out.text()
        );
    }

    /// A FIFO used to block `read` forever (and keel's exit with it); now it is refused.
    #[tokio::test]
    async fn fifo_directory_and_device_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&d.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        for (path, why) in [
            ("pipe", "it is a FIFO (named pipe), not a regular file"),
            ("sub", "it is a directory (use ls to list it)"),
            ("/dev/zero", "it is a character device, not a regular file"),
        ] {
            let (args, c) = (json!({"path": path}), ctx(d.path()));
            let out = tokio::time::timeout(std::time::Duration::from_secs(10), run(&args, &c))
                .await
                .unwrap_or_else(|_| panic!("read of {path} blocked"));
            assert!(out.is_error);
            assert_eq!(out.text(), format!("Cannot read {path}: {why}"));
        }
    }

    /// Endless `line N` text (lines ended by `sep`), counting what was taken from it.
    struct Endless {
        next: u64,
        pending: Vec<u8>,
        consumed: Arc<std::sync::atomic::AtomicU64>,
        sep: u8,
    }

    impl Read for Endless {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.pending.is_empty() {
                self.next += 1;
                self.pending = format!("line {}", self.next).into_bytes();
                self.pending.push(self.sep);
            }
            let n = out.len().min(self.pending.len());
            out[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            self.consumed.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }

    #[test]
    fn a_window_of_an_endless_file_reads_a_bounded_amount() {
        let consumed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let src = Endless {
            next: 0,
            pending: Vec::new(),
            consumed: Arc::clone(&consumed),
            sep: b'\n',
        };
        let mut r = BufReader::with_capacity(BUFFER_BYTES, src);
        let s = scan(&mut r, 2, Some(3), &AtomicBool::new(false)).unwrap();
        assert_eq!(s.lines, vec!["line 2", "line 3", "line 4"]);
        assert_eq!(s.total, Total::Unknown);
        let n = consumed.load(Ordering::Relaxed);
        assert!(
            n <= COUNT_AHEAD_BYTES + 2 * BUFFER_BYTES as u64,
            "{n} bytes consumed"
        );
    }

    #[test]
    fn a_huge_line_is_kept_only_up_to_the_line_cap() {
        let mut body = "é".repeat(1_000_000).into_bytes();
        body.extend_from_slice(b"\nnext\n");
        let mut r = BufReader::new(std::io::Cursor::new(body));
        let mut buf = Vec::new();
        let no = AtomicBool::new(false);
        let line = next_line(&mut r, &mut buf, u64::MAX, &no).unwrap();
        assert_eq!(buf.len(), LINE_KEEP_BYTES);
        let dropped = 1_000_000 - LINE_KEEP_BYTES / 2;
        assert_eq!(line, Some(Line::Whole { dropped }));
        let s = scan(
            &mut BufReader::new(std::io::Cursor::new(format!("{}\nb\n", "é".repeat(5000)))),
            1,
            None,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(s.total, Total::Known(2));
        assert!(s.lines[0].ends_with("… [line truncated, 5000 chars]"));
        assert_eq!(
            s.lines[0].chars().count(),
            MAX_LINE_CHARS + "… [line truncated, 5000 chars]".chars().count()
        );
    }

    #[test]
    fn an_endless_first_line_is_scanned_only_within_the_budget() {
        let consumed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let src = Endless {
            next: 0,
            pending: Vec::new(),
            consumed: Arc::clone(&consumed),
            sep: b' ',
        };
        let mut r = BufReader::with_capacity(BUFFER_BYTES, src);
        let s = scan(&mut r, 1, Some(1), &AtomicBool::new(false)).unwrap();
        assert_eq!(s.total, Total::Unknown);
        assert!(s.lines[0].starts_with("line 1 line 2 "));
        assert!(s.lines[0].contains("… [line truncated, more than "));
        assert!(consumed.load(Ordering::Relaxed) <= COUNT_AHEAD_BYTES + 2 * BUFFER_BYTES as u64);
    }

    #[tokio::test]
    async fn a_file_longer_than_the_count_ahead_says_it_continues() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.log");
        // Text past the sniffed start, then zeros (a hole) up to 16 MiB.
        std::fs::write(&p, numbered(2000)).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(COUNT_AHEAD_BYTES * 2).unwrap();
        let out = run(&json!({"path": "big.log", "limit": 2}), &ctx(d.path())).await;
        assert_eq!(
            out.text(),
            "line 1\nline 2\n\n[More lines in file (16.0MB in total). Use offset=3 to continue.]"
        );
        assert_eq!(out.details.unwrap()["totalLines"], Value::Null);
    }
}
