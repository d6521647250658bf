//! Shared text helpers for the tools: bytes → safe text, binary sniffing, head/tail capping by
//! bytes and lines, long-line shortening and truncation notices. Pure functions: never does I/O.

use std::borrow::Cow;
use std::path::Path;

/// Default output cap in bytes.
pub(super) const MAX_BYTES: usize = 50 * 1024;
/// Default output cap in lines.
pub(super) const MAX_LINES: usize = 2000;
/// How much of a file is sniffed for a NUL byte to call it binary.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// True when a NUL byte occurs in the first 8 KiB.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(BINARY_SNIFF_BYTES).any(|&b| b == 0)
}

/// Bytes as text; invalid UTF-8 becomes U+FFFD.
pub(super) fn to_text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The lines of `text` split on `\n`; a trailing newline does not start an extra line.
pub(super) fn split_lines(text: &str) -> Vec<&str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    }
}

/// Which limit cut the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CutBy {
    Lines,
    Bytes,
}

/// The result of capping a text to a head or tail window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Capped {
    /// The kept text (whole lines joined by `\n`, unless `partial_line`).
    pub text: String,
    /// `None` when everything was kept.
    pub cut_by: Option<CutBy>,
    /// Lines in the whole input.
    pub total_lines: usize,
    /// Lines (whole or partial) kept.
    pub shown_lines: usize,
    /// The only kept line was itself cut to fit the byte cap.
    pub partial_line: bool,
}

impl Capped {
    pub(super) fn truncated(&self) -> bool {
        self.cut_by.is_some()
    }
}

/// Keeps the first lines of `text` within `max_bytes` and `max_lines`.
pub(super) fn cap_head(text: &str, max_bytes: usize, max_lines: usize) -> Capped {
    let lines = split_lines(text);
    let total = lines.len();
    if total <= max_lines && text.len() <= max_bytes {
        return uncut(text, total);
    }
    let (kept, cut_by) = match fit_lines(lines.iter().copied(), max_bytes, max_lines) {
        (_, None) => return uncut(text, total),
        (kept, Some(by)) => (kept, by),
    };
    if kept == 0 && max_lines > 0 {
        if let Some(first) = lines.first() {
            let end = floor_boundary(first, max_bytes);
            return partial(&first[..end], total);
        }
    }
    Capped {
        text: lines[..kept].join("\n"),
        cut_by: Some(cut_by),
        total_lines: total,
        shown_lines: kept,
        partial_line: false,
    }
}

/// Keeps the last lines of `text` within `max_bytes` and `max_lines`.
pub(super) fn cap_tail(text: &str, max_bytes: usize, max_lines: usize) -> Capped {
    let lines = split_lines(text);
    let total = lines.len();
    if total <= max_lines && text.len() <= max_bytes {
        return uncut(text, total);
    }
    let (kept, cut_by) = match fit_lines(lines.iter().rev().copied(), max_bytes, max_lines) {
        (_, None) => return uncut(text, total),
        (kept, Some(by)) => (kept, by),
    };
    if kept == 0 && max_lines > 0 {
        if let Some(last) = lines.last() {
            let start = ceil_boundary(last, last.len().saturating_sub(max_bytes));
            return partial(&last[start..], total);
        }
    }
    Capped {
        text: lines[total - kept..].join("\n"),
        cut_by: Some(cut_by),
        total_lines: total,
        shown_lines: kept,
        partial_line: false,
    }
}

fn uncut(text: &str, total: usize) -> Capped {
    Capped {
        text: text.to_string(),
        cut_by: None,
        total_lines: total,
        shown_lines: total,
        partial_line: false,
    }
}

fn partial(text: &str, total: usize) -> Capped {
    Capped {
        text: text.to_string(),
        cut_by: Some(CutBy::Bytes),
        total_lines: total,
        shown_lines: 1,
        partial_line: true,
    }
}

/// How many lines from `lines` fit, and which limit stopped them (`None`: all fit).
fn fit_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
    max_bytes: usize,
    max_lines: usize,
) -> (usize, Option<CutBy>) {
    let mut used = 0usize;
    for (i, line) in lines.enumerate() {
        if i >= max_lines {
            return (i, Some(CutBy::Lines));
        }
        let needed = line.len() + usize::from(i > 0);
        if used + needed > max_bytes {
            return (i, Some(CutBy::Bytes));
        }
        used += needed;
    }
    (max_lines, None)
}

/// The largest char boundary `<= at`.
pub(super) fn floor_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary `>= at`.
fn ceil_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Shortens a line longer than `max_chars` characters, appending a marker.
pub(super) fn truncate_line(line: &str, max_chars: usize) -> Cow<'_, str> {
    match line.char_indices().nth(max_chars) {
        None => Cow::Borrowed(line),
        Some(_) => Cow::Owned(shorten_line(line, max_chars, line.chars().count())),
    }
}

/// The first `max_chars` characters of `start` and a marker saying the whole line had
/// `total_chars` (a count, or words such as "more than 9000"), for a line of which only
/// `start` was kept in memory.
pub(super) fn shorten_line(
    start: &str,
    max_chars: usize,
    total_chars: impl std::fmt::Display,
) -> String {
    let cut = start
        .char_indices()
        .nth(max_chars)
        .map_or(start.len(), |(i, _)| i);
    format!("{}… [line truncated, {total_chars} chars]", &start[..cut])
}

/// A human size: `512B`, `50.0KB`, `1.2MB`.
pub(super) fn format_size(bytes: usize) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes}B")
    } else if b < KB * KB {
        format!("{:.1}KB", b / KB)
    } else {
        format!("{:.1}MB", b / (KB * KB))
    }
}

/// Where the whole of a tail-capped output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FullOutput<'a> {
    Saved(&'a Path),
    /// Only the first this many bytes were saved.
    SavedStart(&'a Path, usize),
    Unavailable,
}

/// The notice appended under a tail-capped output, e.g.
/// `[Showing lines 4001-6000 of 6000. Full output: /tmp/keel-bash-x.log]`.
pub(super) fn tail_notice(c: &Capped, max_bytes: usize, full: FullOutput<'_>) -> String {
    let head = if c.partial_line {
        format!(
            "Showing the last {} of line {} (line exceeds the {} limit)",
            format_size(c.text.len()),
            c.total_lines,
            format_size(max_bytes)
        )
    } else {
        let start = c.total_lines - c.shown_lines + 1;
        let limit = match c.cut_by {
            Some(CutBy::Bytes) => format!(" ({} limit)", format_size(max_bytes)),
            _ => String::new(),
        };
        format!(
            "Showing lines {start}-{} of {}{limit}",
            c.total_lines, c.total_lines
        )
    };
    match full {
        FullOutput::Saved(p) => format!("[{head}. Full output: {}]", p.display()),
        FullOutput::SavedStart(p, n) => format!(
            "[{head}. Full output (its first {} only): {}]",
            format_size(n),
            p.display()
        ),
        FullOutput::Unavailable => format!("[{head}. Full output unavailable]"),
    }
}

/// A sorted list of names as a tool result: at most `limit` lines, a note when more existed
/// (`what` says which limit, `advice` is appended to the "Use limit=N for more" hint), and
/// `empty` when there is nothing. Details: `{count, truncated}`.
pub(super) fn listing(
    mut items: Vec<String>,
    limit: usize,
    empty: &str,
    what: &str,
    advice: &str,
) -> super::ToolOutput {
    let truncated = items.len() > limit;
    items.truncate(limit);
    let mut text = if items.is_empty() {
        empty.to_string()
    } else {
        items.join("\n")
    };
    if truncated {
        text.push_str(&format!(
            "\n\n[{limit} {what}. Use limit={} for more{advice}.]",
            limit.saturating_mul(2)
        ));
    }
    super::ToolOutput::ok(text).with_details(serde_json::json!(super::details::CountDetails {
        count: items.len() as u64,
        truncated,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn binary_detection_looks_at_first_8k_only() {
        assert!(is_binary(b"abc\0def"));
        assert!(!is_binary(b"plain text\n"));
        let mut late = vec![b'a'; 9000];
        late.push(0);
        assert!(!is_binary(&late));
    }

    #[test]
    fn invalid_utf8_becomes_replacement_char() {
        assert_eq!(to_text(b"ok \xff\xfe end"), "ok \u{fffd}\u{fffd} end");
    }

    #[test]
    fn line_counting_ignores_trailing_newline() {
        assert!(split_lines("").is_empty());
        assert_eq!(split_lines("a"), vec!["a"]);
        assert_eq!(split_lines("a\n"), vec!["a"]);
        assert_eq!(split_lines("a\nb"), vec!["a", "b"]);
        assert_eq!(split_lines("a\nb\n"), vec!["a", "b"]);
        assert_eq!(split_lines("\n"), vec![""]);
    }

    #[test]
    fn head_cap_by_lines_and_bytes() {
        let text = "l1\nl2\nl3\nl4\n";
        let c = cap_head(text, 1000, 2);
        assert_eq!(c.text, "l1\nl2");
        assert_eq!(c.cut_by, Some(CutBy::Lines));
        assert_eq!((c.total_lines, c.shown_lines), (4, 2));
        let c = cap_head(text, 7, 100);
        assert_eq!(c.text, "l1\nl2");
        assert_eq!(c.cut_by, Some(CutBy::Bytes));
        let c = cap_head(text, 100, 100);
        assert_eq!(c.text, text);
        assert!(!c.truncated());
    }

    #[test]
    fn tail_cap_keeps_the_end_and_cuts_a_huge_last_line() {
        let c = cap_tail("l1\nl2\nl3\nl4", 1000, 2);
        assert_eq!(c.text, "l3\nl4");
        assert_eq!(c.cut_by, Some(CutBy::Lines));
        let c = cap_tail("short\nééééé", 5, 100);
        assert!(c.partial_line);
        assert_eq!(c.text, "éé");
        let c = cap_head("ééééé", 5, 100);
        assert_eq!(c.text, "éé");
    }

    #[test]
    fn long_lines_are_shortened_with_marker() {
        assert_eq!(truncate_line("short", 10), "short");
        let long = "x".repeat(30);
        let t = truncate_line(&long, 10);
        assert!(t.starts_with(&"x".repeat(10)));
        assert!(t.ends_with("[line truncated, 30 chars]"));
    }

    #[test]
    fn notices_and_sizes() {
        assert_eq!(format_size(100), "100B");
        assert_eq!(format_size(50 * 1024), "50.0KB");
        let c = cap_tail("a\nb\nc\nd", 1000, 2);
        let n = tail_notice(&c, 1000, FullOutput::Saved(Path::new("/tmp/x.log")));
        assert_eq!(n, "[Showing lines 3-4 of 4. Full output: /tmp/x.log]");
        let n = tail_notice(&c, 1000, FullOutput::SavedStart(Path::new("/x.log"), 2048));
        assert_eq!(
            n,
            "[Showing lines 3-4 of 4. Full output (its first 2.0KB only): /x.log]"
        );
    }
}
