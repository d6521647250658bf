//! How each finished history cell is laid out at a width: user prompts, answers, thinking,
//! tool calls (through `tool_cell`), shell commands, errors and notices. Pure: styled lines
//! that fit the width, nothing drawn.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::{HistoryCell, Layout};
use crate::front::tui::paint;
use crate::front::tui::tool_cell::{self, ToolPhase, ToolView};
use crate::kernel::tool::bash::BashExecution;
use crate::wire::events::BashDetails;

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

impl HistoryCell {
    /// The cell's lines at `width` columns (each fits), with a blank line before cells that
    /// start a new block.
    pub fn lines(&self, width: u16, layout: Layout) -> Vec<Line<'static>> {
        let w = width.max(1) as usize;
        match self {
            HistoryCell::User(text) => user_lines(text, w),
            HistoryCell::Markdown(lines) => lines.iter().flat_map(|l| l.rows(w)).collect(),
            HistoryCell::Thinking(text) => thinking_lines(text, w, layout.show_thinking),
            HistoryCell::Explored(tools) if layout.expand_tools => tools
                .iter()
                .flat_map(|t| HistoryCell::Tool(t.clone()).lines(width, layout))
                .collect(),
            HistoryCell::Explored(tools) => vec![super::explore::summary(tools, w)],
            HistoryCell::Tool(t) => {
                let view = ToolView {
                    name: &t.name,
                    args: &t.args,
                    text: Some(&t.text),
                    details: t.details.as_ref(),
                    is_error: t.is_error,
                    phase: ToolPhase::Done {
                        duration_ms: t.duration_ms,
                    },
                    expanded: layout.expand_tools,
                    full: layout.full,
                    spinner: 0,
                };
                tool_cell::lines(&view, width)
            }
            HistoryCell::Bash(b, ms) => bash_lines(b, *ms, width, layout),
            HistoryCell::Error(e) => {
                let style = Style::default().fg(Color::Red);
                e.lines()
                    .enumerate()
                    .flat_map(|(i, l)| {
                        let prefix = if i == 0 { "✗ " } else { "  " };
                        paint::wrap_line(
                            &Line::from(vec![Span::raw(prefix), Span::raw(l.to_string())])
                                .style(style),
                            w,
                            2,
                        )
                    })
                    .collect()
            }
            HistoryCell::Notice(n) => notice_lines(n, w),
        }
    }
}

/// Lines of hook context shown at most (the model gets them all).
const HOOK_CONTEXT_LINES: usize = 6;

/// The notice for the context hooks gave the model with a prompt: what it says, indented
/// under a heading that says where it came from.
pub(super) fn hook_context(context: &str) -> String {
    let lines: Vec<&str> = context.lines().collect();
    let mut out = String::from("hook context (sent to the model with the prompt):");
    for l in lines.iter().take(HOOK_CONTEXT_LINES) {
        out.push_str(&format!("\n  {l}"));
    }
    if lines.len() > HOOK_CONTEXT_LINES {
        let more = lines.len() - HOOK_CONTEXT_LINES;
        let s = if more == 1 { "" } else { "s" };
        out.push_str(&format!(
            "\n  … {more} more line{s} (/transcript shows them)"
        ));
    }
    out
}

/// A notice keeps its line breaks; a wrapped line goes on two columns right of where it
/// starts (so a table of commands stays a table).
fn notice_lines(text: &str, w: usize) -> Vec<Line<'static>> {
    text.split('\n')
        .flat_map(|l| {
            let indent = l.len() - l.trim_start_matches(' ').len() + 2;
            paint::wrap_line(&Line::styled(l.to_string(), dim()), w, indent)
        })
        .collect()
}

fn user_lines(text: &str, w: usize) -> Vec<Line<'static>> {
    let style = Style::default().add_modifier(Modifier::BOLD);
    let mut out = Vec::new();
    let text = crate::mentions::fold_blocks(text);
    for (i, l) in text.lines().enumerate() {
        let prefix = if i == 0 { "› " } else { "  " };
        let line = Line::from(vec![
            Span::styled(prefix, Style::default().fg(Color::Cyan)),
            Span::styled(l.to_string(), style),
        ]);
        out.extend(paint::wrap_line(&line, w, 2));
    }
    if out.is_empty() {
        out.push(Line::from(Span::styled(
            "› ",
            Style::default().fg(Color::Cyan),
        )));
    }
    out
}

fn thinking_lines(text: &str, w: usize, show: bool) -> Vec<Line<'static>> {
    let style = dim().add_modifier(Modifier::ITALIC);
    let count = text.lines().filter(|l| !l.trim().is_empty()).count();
    if !show {
        let words = text.split_whitespace().count();
        let s = |n: usize| if n == 1 { "" } else { "s" };
        let (ws, ls) = (s(words), s(count));
        let summary =
            format!("✻ Thought for {words} word{ws} ({count} line{ls}) · Ctrl+T shows thinking");
        return vec![paint::truncate_line(&Line::styled(summary, style), w)];
    }
    let mut out = vec![Line::styled("✻ Thinking", style)];
    for l in text.lines() {
        out.extend(paint::wrap_line(
            &Line::styled(format!("  {l}"), style),
            w,
            2,
        ));
    }
    out
}

fn bash_lines(b: &BashExecution, ms: u64, width: u16, layout: Layout) -> Vec<Line<'static>> {
    let details = serde_json::json!(BashDetails {
        exit_code: b.exit_code,
        cancelled: b.cancelled,
        timed_out: false,
        truncated: b.truncated,
        full_output_path: b.full_output_path.clone(),
        full_output_truncated: false,
        job: None,
    });
    let args = serde_json::json!({ "command": b.command });
    let view = ToolView {
        name: "bash",
        args: &args,
        text: Some(&b.output),
        details: Some(&details),
        is_error: b.exit_code != Some(0),
        phase: ToolPhase::Done { duration_ms: ms },
        expanded: layout.expand_tools,
        full: layout.full,
        spinner: 0,
    };
    let mut lines = tool_cell::lines(&view, width);
    if b.exclude_from_context {
        lines.push(Line::styled("    (not sent to the model)", dim()));
    }
    lines
}
