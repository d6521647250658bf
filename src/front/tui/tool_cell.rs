//! How one tool call looks in the TUI transcript: a header row (status glyph, tool name,
//! argument summary, duration) and a short body per tool kind (bash output tail, edit diff,
//! one-line summaries). Pure functions from borrowed call data to styled lines that fit the
//! given width; never draws, never reads a clock or the terminal, never touches files.

use std::borrow::Cow;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::paint;
use crate::text;

/// Braille frames of the running spinner, picked by `ToolView::spinner`.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Prefix of the first body row and of every later one (same width).
const FIRST_PREFIX: &str = "  ⎿ ";
const REST_PREFIX: &str = "    ";
/// Body rows shown (collapsed, expanded): bash output tail, diff rows, plain text head.
const BASH_TAIL: (usize, usize) = (5, 20);
const DIFF_ROWS: (usize, usize) = (20, 60);
const TEXT_HEAD: (usize, usize) = (5, 20);
/// Wrapped rows one logical body line may take (collapsed, expanded) before it is cut with `…`.
const ROWS_PER_LINE: (usize, usize) = (4, 12);
/// Characters of one output line looked at before wrapping (bounds the work per frame).
const MAX_LINE_CHARS: usize = 4096;

/// Where a tool call is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolPhase {
    /// Executing for `elapsed_ms` so far.
    Running { elapsed_ms: u64 },
    /// Waiting for the user to allow or deny it.
    AwaitingApproval,
    /// Finished (successfully or not) after `duration_ms`.
    Done { duration_ms: u64 },
}

/// Everything needed to draw one tool call (borrowed from the transcript model).
pub struct ToolView<'a> {
    /// Tool name (`bash`, `read`, …); unknown names get the generic rendering.
    pub name: &'a str,
    /// The call's arguments as the model sent them.
    pub args: &'a serde_json::Value,
    /// Output so far (running) or final text result.
    pub text: Option<&'a str>,
    /// The tool's structured details (absent on many errors).
    pub details: Option<&'a serde_json::Value>,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Running, awaiting approval or done.
    pub phase: ToolPhase,
    /// Show more body lines.
    pub expanded: bool,
    /// Frame counter for the running spinner glyph.
    pub spinner: usize,
}

/// The lines of a tool cell, each at most `width` columns: the header row, then the body rows
/// (none while awaiting approval).
pub fn lines(view: &ToolView<'_>, width: u16) -> Vec<Line<'static>> {
    let width = width as usize;
    if width == 0 {
        return Vec::new();
    }
    let mut out = vec![header(view, width)];
    let content = width.saturating_sub(text::width(FIRST_PREFIX)).max(1);
    let cap = pick(ROWS_PER_LINE, view.expanded);
    let body = body(view);
    let rows = body.iter().flat_map(|l| wrap_capped(l, content, cap));
    for (i, row) in rows.enumerate() {
        let prefix = if i == 0 {
            Span::styled(FIRST_PREFIX, dim())
        } else {
            Span::raw(REST_PREFIX)
        };
        let mut spans = vec![prefix];
        spans.extend(row.spans);
        out.push(fit(&Line::from(spans), width));
    }
    out
}

/// One-line summary of the arguments, e.g. `ls -la` for bash or `src/main.rs:10-20` for read
/// (used by the approval dialog too). Never contains control characters.
pub fn describe(name: &str, args: &serde_json::Value) -> String {
    let s = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("");
    let n = |key: &str| args.get(key).and_then(Value::as_u64);
    let raw = match name {
        "bash" => first_line(s("command")),
        "read" => match (n("offset"), n("limit")) {
            (Some(o), Some(l)) => format!("{}:{o}-{}", s("path"), (o + l).saturating_sub(1)),
            (Some(o), None) => format!("{}:{o}", s("path")),
            (None, Some(l)) => format!("{}:1-{l}", s("path")),
            (None, None) => s("path").to_string(),
        },
        "write" | "edit" => s("path").to_string(),
        "grep" => describe_grep(args),
        "find" => with_path(s("pattern").to_string(), s("path")),
        "ls" => match s("path") {
            "" => ".".to_string(),
            p => p.to_string(),
        },
        _ => match args {
            Value::Null => String::new(),
            Value::Object(m) if m.is_empty() => String::new(),
            v => v.to_string(),
        },
    };
    text::sanitize(&raw)
}

fn describe_grep(args: &Value) -> String {
    let flag = |key: &str| args.get(key).and_then(Value::as_bool).unwrap_or(false);
    let s = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or("");
    let pattern = s("pattern");
    let mut out = if flag("literal") {
        format!("\"{pattern}\"")
    } else {
        format!("/{pattern}/")
    };
    if flag("ignoreCase") {
        out.push('i');
    }
    out = with_path(out, s("path"));
    if !s("glob").is_empty() {
        out.push_str(&format!(" ({})", s("glob")));
    }
    if let Some(c) = args.get("context").and_then(Value::as_u64) {
        out.push_str(&format!(" -C {c}"));
    }
    out
}

fn with_path(mut s: String, path: &str) -> String {
    if !path.is_empty() {
        s.push_str(" in ");
        s.push_str(path);
    }
    s
}

/// The first non-blank line of a (possibly multi-line) command, with ` …` when more follows.
fn first_line(command: &str) -> String {
    let mut lines = command.trim().lines();
    let first = lines.next().unwrap_or("").trim_end().to_string();
    if lines.next().is_some() {
        first + " …"
    } else {
        first
    }
}

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

fn fg(color: Color) -> Style {
    Style::default().fg(color)
}

/// The header row: glyph, bold name, dim description, then the time (the description is cut
/// first so the time always fits when there is room for the glyph at all).
fn header(view: &ToolView<'_>, width: usize) -> Line<'static> {
    let (glyph, style) = match view.phase {
        ToolPhase::Running { .. } => (SPINNER[view.spinner % SPINNER.len()], fg(Color::Yellow)),
        ToolPhase::AwaitingApproval => ("?", fg(Color::Yellow)),
        ToolPhase::Done { .. } if view.is_error => ("✗", fg(Color::Red)),
        ToolPhase::Done { .. } => ("✓", fg(Color::Green)),
    };
    let mut spans = vec![
        Span::styled(glyph, style),
        Span::raw(" "),
        Span::styled(
            text::sanitize(view.name),
            Style::default().add_modifier(Modifier::BOLD),
        ),
    ];
    let desc = describe(view.name, view.args);
    if !desc.is_empty() {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(desc, dim()));
    }
    let left = Line::from(spans);
    let time = match view.phase {
        ToolPhase::Done { duration_ms } if duration_ms >= 100 => Some(duration_ms),
        // A running call shows its elapsed time once it is no longer instant.
        ToolPhase::Running { elapsed_ms } if elapsed_ms >= 1000 => Some(elapsed_ms),
        _ => None,
    };
    let Some(ms) = time else {
        return fit(&left, width);
    };
    let suffix = format!(" · {}", format_duration(ms));
    let room = width.saturating_sub(text::width(&suffix));
    if room < 2 {
        return fit(&left, width);
    }
    let mut line = fit(&left, room);
    line.spans.push(Span::styled(suffix, dim()));
    line
}

/// `350ms`, `1.2s`, `2m 5s`, `1h 3m` (rounded down).
fn format_duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{}.{}s", ms / 1000, ms % 1000 / 100),
        60_000..=3_599_999 => format!("{}m {}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h {}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

/// `340 B`, `1.2 KB`, `3.0 MB` (1024-based, one decimal).
fn format_size(bytes: u64) -> String {
    const K: f64 = 1024.0;
    match bytes {
        0..=1023 => format!("{bytes} B"),
        1024..=1_048_575 => format!("{:.1} KB", bytes as f64 / K),
        _ => format!("{:.1} MB", bytes as f64 / K / K),
    }
}

/// `1 match`, `2 matches`.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Cuts `line` so it measures at most `width` columns (the cut ends with `…`), measuring the
/// result again so an ellipsis drawn wide (ambiguous-width setting) still fits.
fn fit(line: &Line<'_>, width: usize) -> Line<'static> {
    let mut max = width;
    loop {
        let cut = paint::truncate_line(line, max);
        if max == 0 || paint::line_width(&cut) <= width {
            return cut;
        }
        max -= 1;
    }
}

/// Wraps one body line to `width`, keeping at most `cap` rows (the last kept one ends `…`).
fn wrap_capped(line: &Line<'_>, width: usize, cap: usize) -> Vec<Line<'static>> {
    let mut rows = paint::wrap_line(line, width, 0);
    if rows.len() > cap {
        rows.truncate(cap);
        if let Some(last) = rows.pop() {
            let style = last.spans.last().map(|s| s.style).unwrap_or_default();
            let mut spans = last.spans;
            spans.push(Span::styled("…", style));
            rows.push(fit(&Line::from(spans), width));
        }
    }
    rows
}

/// The collapsed or the expanded one of a pair of limits.
fn pick((collapsed, expanded): (usize, usize), is_expanded: bool) -> usize {
    if is_expanded {
        expanded
    } else {
        collapsed
    }
}

/// The body rows before wrapping, one per logical line.
fn body(view: &ToolView<'_>) -> Vec<Line<'static>> {
    let text = view.text.unwrap_or("");
    match view.phase {
        ToolPhase::AwaitingApproval => Vec::new(),
        ToolPhase::Running { .. } if view.name == "bash" => {
            tail(&output_lines(text), pick(BASH_TAIL, view.expanded), dim())
        }
        ToolPhase::Running { .. } => Vec::new(),
        ToolPhase::Done { .. } => done_body(view).unwrap_or_else(|| {
            let style = if view.is_error { fg(Color::Red) } else { dim() };
            let rows = plain_rows(&output_lines(text), style);
            head(rows, pick(TEXT_HEAD, view.expanded))
        }),
    }
}

/// The body of a finished call from its details, or `None` for the plain-text fallback
/// (unknown tool, error without details, details of an unexpected shape).
fn done_body(view: &ToolView<'_>) -> Option<Vec<Line<'static>>> {
    let d = view.details?;
    if view.name == "bash" {
        return bash_done(view.text.unwrap_or(""), d, pick(BASH_TAIL, view.expanded));
    }
    if view.is_error {
        return None;
    }
    let summary = match view.name {
        "edit" => return diff_rows(d.get("diff")?.as_str()?, pick(DIFF_ROWS, view.expanded)),
        "read" => read_summary(d)?,
        "write" => {
            let size = format_size(num(d, "bytes")?);
            let new = if flag(d, "created") {
                " (new file)"
            } else {
                ""
            };
            format!("Wrote {size}{new}")
        }
        "grep" => match (num(d, "matches")?, num(d, "files")?) {
            (0, _) => "No matches".to_string(),
            (m, f) => {
                let (m, f) = (count(m, "match", "matches"), count(f, "file", "files"));
                format!("{m} in {f}")
            }
        },
        "find" => match num(d, "count")? {
            0 => "No files".to_string(),
            n => count(n, "file", "files"),
        },
        "ls" => match num(d, "count")? {
            0 => "No entries".to_string(),
            n => count(n, "entry", "entries"),
        },
        _ => return None,
    };
    let mut spans = vec![Span::styled(summary, dim())];
    if flag(d, "truncated") {
        spans.push(Span::styled(" · truncated", fg(Color::Yellow)));
    }
    Some(vec![Line::from(spans)])
}

fn num(d: &Value, key: &str) -> Option<u64> {
    d.get(key)?.as_u64()
}

fn flag(d: &Value, key: &str) -> bool {
    d.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `Read 20 lines (lines 10-29 of 400)`.
fn read_summary(d: &Value) -> Option<String> {
    let total = num(d, "totalLines")?;
    let (start, end) = (num(d, "startLine")?, num(d, "endLine")?);
    if total == 0 {
        return Some("Empty file".to_string());
    }
    let n = (end + 1).saturating_sub(start);
    let mut s = format!("Read {}", count(n, "line", "lines"));
    if start > 1 || end < total {
        s.push_str(&format!(" (lines {start}-{end} of {total})"));
    }
    Some(s)
}

/// A finished bash call: the output tail (without the status and truncation notes the tool
/// appended for the model) and a status row.
fn bash_done(text: &str, d: &Value, max: usize) -> Option<Vec<Line<'static>>> {
    let exit = d.get("exitCode")?;
    let (yellow, red) = (fg(Color::Yellow), fg(Color::Red));
    let (status, style, note): (String, Style, Option<&str>) = if flag(d, "timedOut") {
        ("timed out".into(), yellow, Some("Command timed out after "))
    } else if flag(d, "cancelled") {
        ("cancelled".into(), yellow, Some("Command aborted"))
    } else {
        match exit.as_i64() {
            Some(0) => ("exit 0".into(), fg(Color::Green), None),
            Some(c) => (format!("exit {c}"), red, Some("Command exited with code ")),
            // Killed by a signal or could not start: the kept text says which.
            None => ("failed".into(), red, None),
        }
    };
    let mut out = output_lines(text);
    if let Some(note) = note {
        strip_last(&mut out, |l| l.starts_with(note));
    }
    let truncated = flag(d, "truncated");
    if truncated {
        let is_notice = |l: &str| l.starts_with('[') && l.contains("Full output");
        strip_last(&mut out, is_notice);
    }
    if out == ["(no output)"] {
        out.clear();
    }
    let mut rows = tail(&out, max, dim());
    let mut spans = vec![Span::styled(status, style)];
    if truncated {
        let note = match d.get("fullOutputPath").and_then(Value::as_str) {
            Some(p) => format!(" · output truncated, full output in {p}"),
            None => " · output truncated".to_string(),
        };
        spans.push(Span::styled(note, dim()));
    }
    rows.push(Line::from(spans));
    Some(rows)
}

/// Drops the last line when `is_note` says it is a note, then trailing blank lines.
fn strip_last(lines: &mut Vec<&str>, is_note: impl Fn(&str) -> bool) {
    if lines.last().is_some_and(|l| is_note(l)) {
        lines.pop();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
    }
}

/// The lines of a text, without trailing blank lines.
fn output_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    lines
}

fn plain_rows(lines: &[&str], style: Style) -> Vec<Line<'static>> {
    lines
        .iter()
        .map(|l| Line::styled(clean(l), style))
        .collect()
}

/// The last `max` lines, after a `… N earlier lines` row when some were left out.
fn tail(lines: &[&str], max: usize, style: Style) -> Vec<Line<'static>> {
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
fn head(mut rows: Vec<Line<'static>>, max: usize) -> Vec<Line<'static>> {
    let hidden = rows.len().saturating_sub(max);
    if hidden > 0 {
        rows.truncate(max);
        let n = count(hidden as u64, "more line", "more lines");
        rows.push(Line::styled(format!("… {n}"), dim()));
    }
    rows
}

/// A unified diff, coloured by line kind; the `---`/`+++` file headers are skipped.
fn diff_rows(diff: &str, max: usize) -> Option<Vec<Line<'static>>> {
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
fn clean(line: &str) -> String {
    let line = strip_ansi(line);
    let line = line.trim_end_matches('\r');
    let line = line.rsplit('\r').next().unwrap_or("");
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// Removes ANSI escape sequences (CSI, OSC and two-byte escapes).
fn strip_ansi(s: &str) -> Cow<'_, str> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tool call described as JSON: `name`, `args`, `text`, `details`, `error`, `expanded`,
    /// `spinner`, and `ms` with `phase` ("running", "approval"; done by default).
    fn render(spec: &Value, width: u16) -> Vec<Line<'static>> {
        let ms = spec["ms"].as_u64().unwrap_or(0);
        let phase = match spec["phase"].as_str() {
            Some("running") => ToolPhase::Running { elapsed_ms: ms },
            Some("approval") => ToolPhase::AwaitingApproval,
            _ => ToolPhase::Done { duration_ms: ms },
        };
        let view = ToolView {
            name: spec["name"].as_str().unwrap(),
            args: &spec["args"],
            text: spec["text"].as_str(),
            details: spec.get("details"),
            is_error: spec["error"] == true,
            phase,
            expanded: spec["expanded"] == true,
            spinner: spec["spinner"].as_u64().unwrap_or(0) as usize,
        };
        lines(&view, width)
    }

    fn plain(lines: &[Line<'_>]) -> String {
        let rows: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        rows.join("\n")
    }

    /// All rows at width 80, joined with newlines.
    fn rows(spec: Value) -> String {
        plain(&render(&spec, 80))
    }

    /// The foreground colour of the span holding `needle` in `line`.
    fn fg_of(line: &Line<'_>, needle: &str) -> Option<Color> {
        style_of(line, needle).fg
    }

    fn style_of(line: &Line<'_>, needle: &str) -> Style {
        let span = line.spans.iter().find(|s| s.content.contains(needle));
        span.map(|s| s.style).expect(needle)
    }

    fn is_dim(line: &Line<'_>, needle: &str) -> bool {
        style_of(line, needle).add_modifier.contains(Modifier::DIM)
    }

    fn bash(exit: Value) -> Value {
        json!({"exitCode": exit, "cancelled": false, "timedOut": false, "truncated": false})
    }

    /// The body of a finished call with these details, without its prefix.
    fn summary(name: &str, details: Value) -> String {
        let out = rows(json!({"name": name, "args": {"path": "p"}, "details": details}));
        out.split_once("\n  ⎿ ").expect(&out).1.to_string()
    }

    #[test]
    fn bash_ok_shows_output_and_a_green_exit_row() {
        let c = json!({"name": "bash", "args": {"command": "ls -la"}, "text": "a\nb\n",
                       "details": bash(json!(0)), "ms": 1234});
        let lines = render(&c, 80);
        let want = "✓ bash ls -la · 1.2s\n  ⎿ a\n    b\n    exit 0";
        assert_eq!(plain(&lines), want);
        assert_eq!(fg_of(&lines[0], "✓"), Some(Color::Green));
        let bold = style_of(&lines[0], "bash").add_modifier;
        assert!(bold.contains(Modifier::BOLD));
        assert!(is_dim(&lines[0], "ls -la") && is_dim(&lines[1], "a"));
        assert_eq!(fg_of(&lines[3], "exit 0"), Some(Color::Green));
    }

    #[test]
    fn bash_running_shows_the_last_five_lines_after_a_count() {
        let out: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        let mut c = json!({"name": "bash", "args": {"command": "make"}, "text": out,
                           "phase": "running", "ms": 500, "spinner": 13});
        let lines = render(&c, 80);
        let want = "⠸ bash make\n  ⎿ … 7 earlier lines\n    line 8\n    line 9\n    line 10\n    \
                    line 11\n    line 12";
        assert_eq!(plain(&lines), want);
        assert_eq!(fg_of(&lines[0], "⠸"), Some(Color::Yellow));
        c["expanded"] = json!(true);
        assert_eq!(render(&c, 80).len(), 13, "12 lines fit");
        assert!(rows(c.clone()).starts_with("⠸ bash make\n  ⎿ line 1\n    line 2\n"));
        c["text"] = Value::Null;
        c["ms"] = json!(65_000);
        assert_eq!(rows(c), "⠸ bash make · 1m 5s", "no output yet: header only");
    }

    #[test]
    fn bash_failures_show_a_status_row_instead_of_the_tool_note() {
        let c = json!({"name": "bash", "args": {"command": "x"}, "error": true,
                       "text": "oops\n\nCommand exited with code 3", "details": bash(json!(3))});
        let lines = render(&c, 80);
        assert_eq!(plain(&lines), "✗ bash x\n  ⎿ oops\n    exit 3");
        assert_eq!(fg_of(&lines[0], "✗"), Some(Color::Red));
        assert_eq!(fg_of(&lines[2], "exit 3"), Some(Color::Red));
        let cases = [
            (
                "timedOut",
                "before\n\nCommand timed out after 1s",
                "before\n    timed out",
            ),
            ("cancelled", "(no output)\n\nCommand aborted", "cancelled"),
        ];
        for (key, text, want) in cases {
            let mut c = c.clone();
            c["text"] = json!(text);
            c["details"] = bash(Value::Null);
            c["details"][key] = json!(true);
            let lines = render(&c, 80);
            assert_eq!(plain(&lines[1..]), format!("  ⎿ {want}"));
            let status = want.rsplit(' ').next().unwrap();
            assert_eq!(fg_of(&lines[lines.len() - 1], status), Some(Color::Yellow));
        }
        let c = json!({"name": "bash", "args": {"command": "x"},
                       "text": "Command killed by signal 9", "details": bash(Value::Null)});
        let want = "✓ bash x\n  ⎿ Command killed by signal 9\n    failed";
        assert_eq!(rows(c), want);
    }

    #[test]
    fn bash_truncation_points_at_the_full_output() {
        let mut d = bash(json!(0));
        d["truncated"] = json!(true);
        d["fullOutputPath"] = json!("/tmp/o.log");
        let text = "5000\n\n[Showing lines 3001-5000 of 5000. Full output: /tmp/o.log]";
        let out = rows(json!({"name": "bash", "args": {}, "text": text, "details": d}));
        let want = "✓ bash\n  ⎿ 5000\n    exit 0 · output truncated, full output in /tmp/o.log";
        assert_eq!(out, want);
    }

    #[test]
    fn one_huge_output_line_takes_at_most_four_rows() {
        let text = "x".repeat(100_000);
        let c = json!({"name": "bash", "args": {}, "text": text, "details": bash(json!(0))});
        let lines = render(&c, 40);
        assert_eq!(lines.len(), 6);
        assert!(lines[4].to_string().ends_with('…'));
    }

    #[test]
    fn escape_sequences_and_carriage_returns_are_resolved() {
        let text = "\u{1b}[31mred\u{1b}[0m\n\u{1b}]0;t\u{7}run 10%\rrun 100%\r\n";
        let c = json!({"name": "bash", "args": {}, "text": text, "details": bash(json!(0))});
        let out = rows(c);
        assert_eq!(out, "✓ bash\n  ⎿ red\n    run 100%\n    exit 0");
    }

    #[test]
    fn edit_diff_is_coloured_by_line_kind() {
        let diff = "--- f.txt\n+++ f.txt\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n--- x\n d\n";
        let c = json!({"name": "edit", "args": {"path": "f.txt"}, "details": {"diff": diff}});
        let lines = render(&c, 80);
        let want = "✓ edit f.txt\n  ⎿ @@ -2,3 +2,3 @@\n     b\n    -c\n    +C\n    --- x\n     d";
        assert_eq!(plain(&lines), want);
        assert_eq!(fg_of(&lines[1], "@@"), Some(Color::Cyan));
        assert!(is_dim(&lines[2], "b"));
        assert_eq!(fg_of(&lines[3], "-c"), Some(Color::Red));
        assert_eq!(fg_of(&lines[4], "+C"), Some(Color::Green));
        // A removed line starting with "--" inside a hunk is not a file header.
        assert_eq!(fg_of(&lines[5], "--- x"), Some(Color::Red));
    }

    #[test]
    fn long_diffs_are_cut_with_a_count() {
        let diff: String = (0..25).map(|i| format!("+l{i}\n")).collect();
        let diff = format!("@@ -0,0 +1,25 @@\n{diff}");
        let mut c = json!({"name": "edit", "args": {}, "details": {"diff": diff}});
        let lines = render(&c, 80);
        assert_eq!(lines.len(), 22);
        assert_eq!(lines[21].to_string(), "    … 6 more lines");
        c["expanded"] = json!(true);
        assert_eq!(render(&c, 80).len(), 27);
    }

    #[test]
    fn read_and_write_summaries() {
        let read = |t: u64, s: u64, e: u64, tr: bool| {
            let d = json!({"totalLines": t, "startLine": s, "endLine": e, "truncated": tr});
            summary("read", d)
        };
        assert_eq!(read(10, 1, 10, false), "Read 10 lines");
        let want = "Read 20 lines (lines 10-29 of 400)";
        assert_eq!(read(400, 10, 29, false), want);
        let want = "Read 2000 lines (lines 1-2000 of 5000) · truncated";
        assert_eq!(read(5000, 1, 2000, true), want);
        assert_eq!(read(1, 1, 1, false), "Read 1 line");
        assert_eq!(read(0, 1, 0, false), "Empty file");
        let write = |b: u64, new: bool| summary("write", json!({"bytes": b, "created": new}));
        assert_eq!(write(1229, true), "Wrote 1.2 KB (new file)");
        assert_eq!(write(340, false), "Wrote 340 B");
        assert_eq!(write(3 * 1024 * 1024, false), "Wrote 3.0 MB");
    }

    #[test]
    fn search_summaries_get_singular_and_plural_right() {
        let grep = |m: u64, f: u64, t: bool| {
            summary("grep", json!({"matches": m, "files": f, "truncated": t}))
        };
        assert_eq!(grep(12, 3, false), "12 matches in 3 files");
        assert_eq!(grep(1, 1, false), "1 match in 1 file");
        assert_eq!(grep(0, 0, false), "No matches");
        assert_eq!(grep(100, 7, true), "100 matches in 7 files · truncated");
        let find = |n: u64| summary("find", json!({"count": n, "truncated": false}));
        let got = [find(4), find(1), find(0)];
        assert_eq!(got, ["4 files", "1 file", "No files"]);
        let ls = |n: u64, t: bool| summary("ls", json!({"count": n, "truncated": t}));
        let got = [ls(7, false), ls(1, false), ls(0, false), ls(500, true)].join(",");
        assert_eq!(got, "7 entries,1 entry,No entries,500 entries · truncated");
    }

    #[test]
    fn errors_show_the_first_lines_in_red() {
        let c = json!({"name": "read", "args": {"path": "nope"}, "error": true,
                       "text": "Cannot read nope: not found"});
        let lines = render(&c, 80);
        let want = "✗ read nope\n  ⎿ Cannot read nope: not found";
        assert_eq!(plain(&lines), want);
        assert_eq!(fg_of(&lines[1], "Cannot"), Some(Color::Red));
        // Details of a failed edit are ignored: the error text is shown.
        let text: String = (1..=8).map(|i| format!("e{i}\n")).collect();
        let c = json!({"name": "edit", "args": {"path": "f"}, "error": true, "text": text,
                       "details": {"diff": "@@ -1 +1 @@\n-a\n+b\n"}});
        let want = "✗ edit f\n  ⎿ e1\n    e2\n    e3\n    e4\n    e5\n    … 3 more lines";
        assert_eq!(rows(c), want);
    }

    #[test]
    fn unknown_tools_and_missing_details_show_the_first_lines_dim() {
        let text: String = (1..=7).map(|i| format!("r{i}\n")).collect();
        let lines = render(&json!({"name": "mcp", "args": {"q": 1}, "text": text}), 80);
        let want = "✓ mcp {\"q\":1}\n  ⎿ r1\n    r2\n    r3\n    r4\n    r5\n    … 2 more lines";
        assert_eq!(plain(&lines), want);
        assert!(is_dim(&lines[1], "r1"));
        let out = rows(json!({"name": "ls", "args": {}, "text": "a\nb"}));
        assert_eq!(out, "✓ ls .\n  ⎿ a\n    b");
    }

    #[test]
    fn awaiting_approval_is_the_header_only() {
        let c = json!({"name": "bash", "args": {"command": "rm -rf build"}, "text": "x",
                       "details": bash(json!(0)), "phase": "approval"});
        let lines = render(&c, 80);
        assert_eq!(plain(&lines), "? bash rm -rf build");
        assert_eq!(fg_of(&lines[0], "?"), Some(Color::Yellow));
    }

    #[test]
    fn durations_are_formatted_and_always_fit() {
        let got = [350, 1200, 59_999, 125_000, 3_720_000].map(format_duration);
        assert_eq!(got, ["350ms", "1.2s", "59.9s", "2m 5s", "1h 2m"]);
        let header = |ms: u64, width| {
            let c = json!({"name": "bash", "args": {"command": "cargo build --release"}, "ms": ms});
            plain(&render(&c, width))
        };
        assert_eq!(header(99, 80), "✓ bash cargo build --release");
        assert_eq!(header(350, 80), "✓ bash cargo build --release · 350ms");
        assert_eq!(header(1200, 20), "✓ bash cargo… · 1.2s");
    }

    #[test]
    fn describe_summarises_each_tool() {
        let cases = [
            r#"bash {"command": "ls -la"} => ls -la"#,
            r#"bash {"command": "\ncd x\nmake\n"} => cd x …"#,
            r#"bash {"command": "a\tb"} => a    b"#,
            r#"bash null => "#,
            r#"read {"path": "src/main.rs"} => src/main.rs"#,
            r#"read {"path": "a.rs", "offset": 10, "limit": 11} => a.rs:10-20"#,
            r#"read {"path": "a", "offset": 10} => a:10"#,
            r#"read {"path": "a", "limit": 5} => a:1-5"#,
            r#"write {"path": "a.txt", "content": "x"} => a.txt"#,
            r#"edit {"path": "b.rs", "oldText": "x"} => b.rs"#,
            r#"grep {"pattern": "T", "path": "s", "glob": "*.rs", "ignoreCase": true, "context": 2} => /T/i in s (*.rs) -C 2"#,
            r#"grep {"pattern": "a.b", "literal": true} => "a.b""#,
            r#"find {"pattern": "*.rs", "path": "src"} => *.rs in src"#,
            r#"find {"pattern": "*.md"} => *.md"#,
            r#"ls {} => ."#,
            r#"ls {"path": "docs"} => docs"#,
            r#"mcp {} => "#,
            r#"mcp {"a": [1, "x\ny"]} => {"a":[1,"x\ny"]}"#,
        ];
        for case in cases {
            let (call, want) = case.split_once(" => ").unwrap();
            let (name, args) = call.split_once(' ').unwrap();
            let args: Value = serde_json::from_str(args).unwrap();
            assert_eq!(describe(name, &args), want, "{case}");
        }
    }

    #[test]
    fn no_line_is_ever_wider_than_the_width() {
        let wide = "日本語のパス/👩\u{200d}💻/e\u{301}tude/ファイル.rs";
        let out = format!("{wide} {wide}\n👩\u{200d}💻👩\u{200d}💻 日本語 e\u{301}e\u{301}\n");
        let diff = format!("@@ -1 +1 @@\n-{wide}\n+{wide} {wide}\n");
        let mut bash_done = bash(json!(0));
        bash_done["truncated"] = json!(true);
        bash_done["fullOutputPath"] = json!(format!("/tmp/{wide}.log"));
        let calls = [
            json!({"name": "bash", "args": {"command": wide}, "text": out, "details": bash_done,
                   "ms": 4_000_000}),
            json!({"name": "bash", "args": {"command": wide}, "text": out.repeat(9),
                   "phase": "running", "ms": 3000}),
            json!({"name": "edit", "args": {"path": wide}, "details": {"diff": diff}}),
            json!({"name": "read", "args": {"path": wide, "offset": 3, "limit": 4},
                   "details": {"totalLines": 900, "startLine": 3, "endLine": 6, "truncated": true}}),
            json!({"name": "grep", "args": {"pattern": wide}, "details": {"matches": 1, "files": 1}}),
            json!({"name": "write", "args": {"path": wide}, "text": out, "error": true}),
            json!({"name": wide, "args": {"x": wide}, "text": out}),
            json!({"name": "ls", "args": {"path": wide}, "phase": "approval"}),
        ];
        for mode in 0..4 {
            text::set_ambiguous_wide(mode >= 2);
            for mut c in calls.iter().cloned() {
                c["expanded"] = json!(mode % 2 == 1);
                for width in 1..=120u16 {
                    let lines = render(&c, width);
                    assert!(!lines.is_empty());
                    for l in &lines {
                        let w = paint::line_width(l);
                        assert!(w <= width as usize, "{w} > {width}: {l:?}");
                    }
                }
            }
        }
        text::set_ambiguous_wide(false);
        assert!(render(&calls[0], 0).is_empty());
    }
}
