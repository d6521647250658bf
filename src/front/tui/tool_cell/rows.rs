//! The line-level pieces of a tool cell's body: output lines cleaned as a terminal would show
//! them (escape sequences and carriage returns resolved), heads and tails with a count of what
//! was left out, and unified diffs coloured by line kind. Pure.

use std::borrow::Cow;

use ratatui::style::{Color, Style};
use ratatui::text::Line;

use super::{dim, fg, MAX_LINE_CHARS};
use crate::text::count;

/// Drops the last line when `is_note` says it is a note, then trailing blank lines.
pub(super) fn strip_last(lines: &mut Vec<&str>, is_note: impl Fn(&str) -> bool) {
    if lines.last().is_some_and(|l| is_note(l)) {
        lines.pop();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
    }
}

/// The lines of a text, without trailing blank lines.
pub(super) fn output_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines
}

pub(super) fn plain_rows(lines: &[&str], style: Style) -> Vec<Line<'static>> {
    lines
        .iter()
        .map(|l| Line::styled(clean(l), style))
        .collect()
}

/// The last `max` lines, after a `… N earlier lines` row when some were left out.
pub(super) fn tail(lines: &[&str], max: usize, style: Style) -> Vec<Line<'static>> {
    let hidden = lines.len().saturating_sub(max);
    let mut out = Vec::new();
    if hidden > 0 {
        let n = count(hidden as u64, "earlier line", "earlier lines");
        out.push(Line::styled(format!("… {n}"), dim()));
    }
    out.extend(plain_rows(&lines[hidden..], style));
    out
}

/// The first `max` rows, then `… N more lines` when some were left out.
pub(super) fn head(mut rows: Vec<Line<'static>>, max: usize) -> Vec<Line<'static>> {
    let hidden = rows.len().saturating_sub(max);
    if hidden > 0 {
        rows.truncate(max);
        let n = count(hidden as u64, "more line", "more lines");
        rows.push(Line::styled(format!("… {n}"), dim()));
    }
    rows
}

/// A unified diff, coloured by line kind; the `---`/`+++` file headers are skipped.
pub fn diff_rows(diff: &str, max: usize) -> Option<Vec<Line<'static>>> {
    let mut in_hunk = false;
    let mut rows = Vec::new();
    for line in output_lines(diff) {
        let style = if line.starts_with("@@") {
            in_hunk = true;
            fg(Color::Cyan)
        } else if !in_hunk && (line.starts_with("---") || line.starts_with("+++")) {
            continue;
        } else if line.starts_with('+') {
            fg(Color::Green)
        } else if line.starts_with('-') {
            fg(Color::Red)
        } else {
            dim()
        };
        rows.push(Line::styled(clean(line), style));
    }
    (!rows.is_empty()).then(|| head(rows, max))
}

/// One output line as it would look on a terminal: escape sequences removed, only what
/// follows the last carriage return, and cut to `MAX_LINE_CHARS`.
pub(super) fn clean(line: &str) -> String {
    let line = strip_ansi(line);
    let line = line.trim_end_matches('\r');
    let line = line.rsplit('\r').next().unwrap_or("");
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// Removes ANSI escape sequences (CSI, OSC and two-byte escapes).
pub(super) fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            // CSI: parameter and intermediate bytes, then one final byte in @..=~.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: up to BEL or ESC \.
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    Cow::Owned(out)
}
