//! How one tool call looks in the TUI transcript: a header row (status glyph, tool name,
//! argument summary, duration) and a short body per tool kind (bash output tail, edit diff,
//! one-line summaries). Pure functions from borrowed call data to styled lines that fit the
//! given width; never draws, never reads a clock or the terminal, never touches files.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

pub mod plan;
mod rows;
mod task;

use super::paint;
use crate::text::{self, count};
use crate::wire::events::{BashDetails, ReadDetails, ShownArgs, TodoCount, ToolDetails};
pub use rows::diff_rows;
use rows::{head, output_lines, plain_rows, strip_last, tail};

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
    /// Show every body line (the transcript pager).
    pub full: bool,
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
    if view.name == plan::PLAN && matches!(view.phase, ToolPhase::Done { .. }) {
        if let Some(lines) = plan::done(view, width) {
            return lines;
        }
    }
    if let Some(line) = todo_counts(view) {
        return vec![fit(&line, width)];
    }
    let mut out = vec![header(view, width)];
    out.extend(full_command(view, width));
    let content = width.saturating_sub(text::width(FIRST_PREFIX)).max(1);
    let cap = view.limit(ROWS_PER_LINE);
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

/// An expanded bash call's whole command, when the header cannot show it (several lines, or
/// wider than the row): `$ ` rows, wrapped.
fn full_command(view: &ToolView<'_>, width: usize) -> Vec<Line<'static>> {
    let args = ShownArgs::of(view.args);
    let command = ShownArgs::str(&args.command);
    let shown = view.name == "bash" && (view.expanded || view.full);
    let cut = command.contains('\n') || text::width(command) + 10 > width;
    if !shown || !cut {
        return Vec::new();
    }
    command
        .lines()
        .enumerate()
        .flat_map(|(i, l)| {
            let lead = if i == 0 { "  $ " } else { "    " };
            let line = Line::from(vec![
                Span::styled(lead, dim()),
                Span::raw(text::sanitize(l)),
            ]);
            paint::wrap_line(&line, width, 4)
        })
        .map(|row| fit(&row, width))
        .collect()
}

/// One-line summary of the arguments, e.g. `ls -la` for bash or `src/main.rs:10-20` for read
/// (used by the approval dialog too). Never contains control characters.
pub fn describe(name: &str, args: &serde_json::Value) -> String {
    let a = ShownArgs::of(args);
    let s = ShownArgs::str;
    let path = s(&a.path);
    let raw = match name {
        "bash" => first_line(s(&a.command)),
        "read" => match (a.offset, a.limit) {
            (Some(o), Some(l)) => format!("{path}:{o}-{}", (o + l).saturating_sub(1)),
            (Some(o), None) => format!("{path}:{o}"),
            (None, Some(l)) => format!("{path}:1-{l}"),
            (None, None) => path.to_string(),
        },
        "write" | "edit" => path.to_string(),
        "grep" => describe_grep(&a),
        "find" => with_path(s(&a.pattern).to_string(), path),
        "ls" => match path {
            "" => ".".to_string(),
            p => p.to_string(),
        },
        plan::PLAN => plan::title(s(&a.plan)),
        crate::kernel::subagent::TASK => task::summary(args),
        "todo_write" => match TodoCount::of(args) {
            Some(1) => "1 item".to_string(),
            Some(n) => format!("{n} items"),
            None => String::new(),
        },
        _ => match args {
            Value::Null => String::new(),
            Value::Object(m) if m.is_empty() => String::new(),
            v => v.to_string(),
        },
    };
    text::sanitize(&raw)
}

/// A finished `todo_write`: one line of counts (`todo: 2 done · 1 in progress · 3 pending`);
/// the list itself is drawn live above the editor, and a scrollback cell of it would repeat it
/// at every change. `None` for a call that failed or whose list cannot be read.
fn todo_counts(view: &ToolView<'_>) -> Option<Line<'static>> {
    use crate::kernel::tool::todo::{self, TodoStatus};
    if view.name != "todo_write" || view.is_error || !matches!(view.phase, ToolPhase::Done { .. }) {
        return None;
    }
    let todos = todo::parse(view.args).ok()?;
    let n = |status: TodoStatus| todos.iter().filter(|t| t.status == status).count();
    let counts = match todos.is_empty() {
        true => "todo: the list is cleared".to_string(),
        false => format!(
            "todo: {} done · {} in progress · {} pending",
            n(TodoStatus::Completed),
            n(TodoStatus::InProgress),
            n(TodoStatus::Pending)
        ),
    };
    Some(Line::from(vec![
        Span::styled("✓", fg(Color::Green)),
        Span::raw(" "),
        Span::styled(counts, dim()),
    ]))
}

fn describe_grep(a: &ShownArgs) -> String {
    let s = ShownArgs::str;
    let pattern = s(&a.pattern);
    let mut out = if a.literal == Some(true) {
        format!("\"{pattern}\"")
    } else {
        format!("/{pattern}/")
    };
    if a.ignore_case == Some(true) {
        out.push('i');
    }
    out = with_path(out, s(&a.path));
    if !s(&a.glob).is_empty() {
        out.push_str(&format!(" ({})", s(&a.glob)));
    }
    if let Some(c) = a.context {
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

impl ToolView<'_> {
    /// The collapsed or the expanded one of a pair of limits (none when `full`).
    fn limit(&self, (collapsed, expanded): (usize, usize)) -> usize {
        match (self.full, self.expanded) {
            (true, _) => usize::MAX,
            (false, true) => expanded,
            (false, false) => collapsed,
        }
    }
}

/// The body rows before wrapping, one per logical line.
fn body(view: &ToolView<'_>) -> Vec<Line<'static>> {
    let text = view.text.unwrap_or("");
    match view.phase {
        ToolPhase::AwaitingApproval => Vec::new(),
        ToolPhase::Running { .. } if view.name == "bash" => {
            tail(&output_lines(text), view.limit(BASH_TAIL), dim())
        }
        ToolPhase::Running { .. } if view.name == crate::kernel::subagent::TASK => {
            task::running(view)
        }
        ToolPhase::Running { .. } => Vec::new(),
        ToolPhase::Done { .. } if view.name == crate::kernel::subagent::TASK => task::done(view),
        ToolPhase::Done { .. } => done_body(view).unwrap_or_else(|| {
            let style = if view.is_error { fg(Color::Red) } else { dim() };
            let rows = plain_rows(&output_lines(text), style);
            head(rows, view.limit(TEXT_HEAD))
        }),
    }
}

/// The body of a finished call from its details, or `None` for the plain-text fallback
/// (unknown tool, error without details, details of an unexpected shape).
fn done_body(view: &ToolView<'_>) -> Option<Vec<Line<'static>>> {
    // `bash` with `run_in_background`: a job started, no exit status yet (its text says so).
    if view.name == "bash" && <StartedJob as serde::Deserialize>::deserialize(view.details?).is_ok()
    {
        return None;
    }
    let d = ToolDetails::read(view.name, view.details?)?;
    if let ToolDetails::Bash(b) = &d {
        return Some(bash_done(view.text.unwrap_or(""), b, view.limit(BASH_TAIL)));
    }
    if view.is_error {
        return None;
    }
    let summary = match &d {
        ToolDetails::Edit(e) => return diff_rows(&e.diff, view.limit(DIFF_ROWS)),
        ToolDetails::Read(r) => read_summary(r)?,
        ToolDetails::Write(w) => {
            let size = format_size(w.bytes?);
            let new = if w.created { " (new file)" } else { "" };
            format!("Wrote {size}{new}")
        }
        ToolDetails::Grep(g) => match (g.matches, g.files) {
            (0, _) => "No matches".to_string(),
            (m, f) => {
                let (m, f) = (count(m, "match", "matches"), count(f, "file", "files"));
                format!("{m} in {f}")
            }
        },
        ToolDetails::Find(c) => match c.count {
            0 => "No files".to_string(),
            n => count(n, "file", "files"),
        },
        ToolDetails::Ls(c) => match c.count {
            0 => "No entries".to_string(),
            n => count(n, "entry", "entries"),
        },
        ToolDetails::Bash(_) => return None,
    };
    let mut spans = vec![Span::styled(summary, dim())];
    if d.truncated() {
        spans.push(Span::styled(" · truncated", fg(Color::Yellow)));
    }
    Some(vec![Line::from(spans)])
}

/// `Read 20 lines (lines 10-29 of 400)`.
fn read_summary(d: &ReadDetails) -> Option<String> {
    let total = d.total_lines?;
    let (start, end) = (d.start_line, d.end_line);
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

/// The details of a `bash` call that started a background job.
#[derive(serde::Deserialize)]
struct StartedJob {
    #[allow(dead_code)]
    job: serde::de::IgnoredAny,
}

/// A finished bash call: the output tail (without the status and truncation notes the tool
/// appended for the model) and a status row.
fn bash_done(text: &str, d: &BashDetails, max: usize) -> Vec<Line<'static>> {
    let (yellow, red) = (fg(Color::Yellow), fg(Color::Red));
    let (status, style, note): (String, Style, Option<&str>) = if d.timed_out {
        ("timed out".into(), yellow, Some("Command timed out after "))
    } else if d.cancelled {
        ("cancelled".into(), yellow, Some("Command aborted"))
    } else {
        match d.exit_code {
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
    if d.truncated {
        let is_notice = |l: &str| l.starts_with('[') && l.contains("Full output");
        strip_last(&mut out, is_notice);
    }
    if out == ["(no output)"] {
        out.clear();
    }
    let mut rows = tail(&out, max, dim());
    let mut spans = vec![Span::styled(status, style)];
    if d.truncated {
        let note = match &d.full_output_path {
            Some(p) => format!(" · output truncated, full output in {p}"),
            None => " · output truncated".to_string(),
        };
        spans.push(Span::styled(note, dim()));
    }
    rows.push(Line::from(spans));
    rows
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
