//! The approval dialog (`--permission ask`): what the call would do in full (an edit's diff, a
//! write's content, a bash command wrapped, never cut), scrolled with Up/Down and PgUp/PgDn
//! when it is taller than the room left, and the answers: allow once, always allow calls like it
//! (a rule the session saves), deny, or deny with a message typed in the dialog (sent as steering, so the
//! model reads it before it answers again). `exit_plan_mode`'s dialog shows the plan and
//! answers approve, approve and accept edits, or keep planning (with a message). The dialog is built from the request's
//! `toolName` and `args`; the view stays pure.

use std::cell::Cell;

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::{Action, View};
use crate::front::tui::{paint, tool_cell};
use crate::kernel::event::ApprovalDecision;
use crate::kernel::tool::preview::{Change, Preview};
use crate::wire::events::ShownArgs;

/// Rows around the dialog's body (rule, question, scroll marker, answers, status line,
/// waiting count, hint): the body gets what is left of the live area, at least
/// [`MIN_BODY_ROWS`].
const FRAME_ROWS: usize = 7;
const MIN_BODY_ROWS: usize = 3;

/// The plan-mode tool whose dialog approves a plan (`DESIGN.md` §17).
const PLAN: &str = tool_cell::plan::PLAN;

/// A tool call waiting for the user's decision.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Approval {
    pub call_id: String,
    pub tool_name: String,
    pub args: Value,
    /// For `edit` and `write`: what the call would do to the file as it is now (from the
    /// host); without it the dialog shows the call's own texts.
    pub preview: Option<Preview>,
    /// The subagent that asks (`explore subagent (find the config) asks:`), when the call is
    /// a child's, shown under the question.
    pub from: Option<String>,
    /// First body row shown.
    scroll: usize,
    /// The largest useful `scroll` and the body's height at the last layout.
    max_scroll: Cell<usize>,
    page: Cell<usize>,
    /// A deny message being typed (`d`), if any.
    message: Option<String>,
}

impl Approval {
    pub fn new(call_id: String, tool_name: String, args: Value) -> Approval {
        Approval {
            call_id,
            tool_name,
            args,
            preview: None,
            from: None,
            scroll: 0,
            max_scroll: Cell::new(0),
            page: Cell::new(MIN_BODY_ROWS),
            message: None,
        }
    }

    /// What the call would do, one row per line, each at most `w` columns.
    fn body(&self, w: usize) -> Vec<Line<'static>> {
        let s = |k: &str| self.args.get(k).and_then(Value::as_str);
        let inner = w.saturating_sub(4).max(1);
        let lines: Vec<Line<'static>> = match (self.tool_name.as_str(), s("path")) {
            ("bash", _) => {
                let cmd = s("command").unwrap_or("");
                let style = Style::default().add_modifier(Modifier::BOLD);
                cmd.lines()
                    .map(|l| Line::styled(l.to_string(), style))
                    .collect()
            }
            ("edit", Some(_)) => {
                // Whole lines, so the snippets' ends are no "\ No newline" noise.
                let line = |k| format!("{}\n", s(k).unwrap_or("").trim_end_matches('\n'));
                let (old, new) = (line("oldText"), line("newText"));
                let diff = similar::TextDiff::from_lines(&old, &new);
                let text = diff.unified_diff().context_radius(3).to_string();
                let snippet = tool_cell::diff_rows(&text, usize::MAX).unwrap_or_default();
                match &self.preview {
                    Some(p) => preview_rows(p, snippet),
                    None => snippet,
                }
            }
            ("write", Some(_)) if self.preview.is_some() => self
                .preview
                .as_ref()
                .map_or_else(Vec::new, |p| preview_rows(p, Vec::new())),
            (PLAN, _) => tool_cell::plan::markdown_rows(&self.args, inner),
            ("write", Some(_)) => {
                let green = Style::default().fg(Color::Green);
                let content = s("content").unwrap_or("");
                content
                    .lines()
                    .map(|l| Line::styled(format!("+{l}"), green))
                    .collect()
            }
            _ => vec![Line::raw(tool_cell::describe(&self.tool_name, &self.args))],
        };
        lines
            .iter()
            .flat_map(|l| paint::wrap_line(l, inner, 0))
            .map(|l| {
                let mut spans = vec![Span::raw("    ")];
                spans.extend(l.spans);
                Line::from(spans)
            })
            .collect()
    }
}

/// The preview's rows: what the call does to which file (a write says whether it overwrites
/// or creates), then the diff it would apply, or why it would fail (then the call's texts).
fn preview_rows(p: &Preview, snippet: Vec<Line<'static>>) -> Vec<Line<'static>> {
    let path = crate::text::sanitize(&p.path);
    let what = match p.change {
        Change::Edit => format!("edits {path}"),
        Change::Overwrite => format!("overwrites the existing file {path}"),
        Change::Create => format!("new file {path}"),
    };
    let mut rows = vec![Line::styled(what, yellow())];
    match (&p.diff, &p.error) {
        (Some(diff), _) => rows.extend(tool_cell::diff_rows(diff, usize::MAX).unwrap_or_default()),
        // An edit that would fail as the file is now (or too large a diff): the call's own
        // texts follow.
        (None, Some(e)) if p.change == Change::Edit => {
            rows.push(Line::styled(format!("as the file is now: {e}"), yellow()));
            rows.extend(snippet);
        }
        (None, Some(e)) => rows.push(Line::styled(format!("cannot show the change: {e}"), dim())),
        (None, None) => {}
    }
    rows
}

fn yellow() -> Style {
    Style::default().fg(Color::Yellow)
}

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

/// The dialog's rows for a live area `max_rows` tall, `w` wide (`waiting`: dialogs queued).
pub(super) fn rows(a: &Approval, waiting: usize, w: usize, max_rows: usize) -> Vec<Line<'static>> {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let plan = a.tool_name == PLAN;
    let summary = match plan {
        true => String::new(),
        false => tool_cell::describe(&a.tool_name, &a.args),
    };
    let head = match plan {
        true => Line::from(vec![
            Span::styled("? ", yellow()),
            Span::styled("Approve this plan and leave plan mode?", bold),
        ]),
        false => Line::from(vec![
            Span::styled("? ", yellow()),
            Span::styled(format!("Allow {}", a.tool_name), bold),
            Span::raw(": "),
            Span::raw(summary.clone()),
        ]),
    };
    let whole = paint::line_width(&head) <= w;
    let mut out = vec![paint::truncate_line(&head, w)];
    // A subagent's call: which one asks, always shown under the question.
    if let Some(from) = &a.from {
        out.push(paint::truncate_line(
            &Line::styled(format!("  {from}"), dim()),
            w,
        ));
    }
    // A short one-line command is all in the question; anything else is shown in full.
    let shown = ShownArgs::of(&a.args);
    let cmd = ShownArgs::str(&shown.command);
    let body = match a.tool_name.as_str() {
        "bash" if whole && cmd.trim() == summary => Vec::new(),
        "bash" | "edit" | "write" | PLAN => a.body(w),
        _ if whole => Vec::new(),
        _ => a.body(w),
    };
    let frame = FRAME_ROWS + usize::from(a.from.is_some());
    let room = max_rows.saturating_sub(frame).max(MIN_BODY_ROWS);
    let max_scroll = body.len().saturating_sub(room);
    a.max_scroll.set(max_scroll);
    a.page.set(room);
    let top = a.scroll.min(max_scroll);
    out.extend(body.iter().skip(top).take(room).cloned());
    if max_scroll > 0 {
        let below = body.len() - top - room.min(body.len() - top);
        let marker = format!("    ↑ {top} more · ↓ {below} more · ↑↓ PgUp PgDn scroll");
        out.push(paint::truncate_line(&Line::styled(marker, dim()), w));
    }
    let answers = match &a.message {
        Some(text) => Line::from(vec![
            Span::styled("  why not? ", yellow()),
            Span::raw(text.clone()),
            Span::styled("  (Enter denies with this message · Esc goes back)", dim()),
        ]),
        None if plan => Line::from(vec![
            Span::styled("  y", yellow()),
            Span::raw(" approve  "),
            Span::styled("e", yellow()),
            Span::raw(" approve and accept edits  "),
            Span::styled("n", yellow()),
            Span::raw(" keep planning  "),
            Span::styled("d", yellow()),
            Span::raw(" keep planning, with a message"),
        ]),
        None => Line::from(vec![
            Span::styled("  y", yellow()),
            Span::raw(" allow once  "),
            Span::styled("a", yellow()),
            Span::raw(" always allow calls like this  "),
            Span::styled("n", yellow()),
            Span::raw(" deny  "),
            Span::styled("d", yellow()),
            Span::raw(" deny with a message"),
        ]),
    };
    out.extend(paint::wrap_line(&answers, w, 4));
    if waiting > 1 {
        out.push(Line::styled(
            format!("  ({} more waiting)", waiting - 1),
            dim(),
        ));
    }
    out
}

impl View {
    /// A key for the dialog in front: an answer, a scroll, or a character of the deny message.
    pub(super) fn approval_key(&mut self, key: KeyEvent) -> Option<Action> {
        let a = self.approvals.front_mut()?;
        let ctrl = key
            .modifiers
            .contains(crossterm::event::KeyModifiers::CONTROL);
        if let Some(text) = &mut a.message {
            match key.code {
                KeyCode::Char(c) if !ctrl => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Esc => a.message = None,
                KeyCode::Enter => {
                    let message = text.trim().to_string();
                    return self.answer(ApprovalDecision::Deny, message);
                }
                _ => {}
            }
            return None;
        }
        let (page, max) = (a.page.get().max(1), a.max_scroll.get());
        match key.code {
            KeyCode::Up => a.scroll = a.scroll.min(max).saturating_sub(1),
            KeyCode::Down => a.scroll = (a.scroll + 1).min(max),
            KeyCode::PageUp => a.scroll = a.scroll.min(max).saturating_sub(page),
            KeyCode::PageDown => a.scroll = (a.scroll + page).min(max),
            KeyCode::Char('d') => a.message = Some(String::new()),
            KeyCode::Char('y') | KeyCode::Enter => return self.answer(ApprovalDecision::Allow, ""),
            KeyCode::Char('e') if a.tool_name == PLAN => {
                return self.answer(ApprovalDecision::AllowAcceptEdits, "")
            }
            KeyCode::Char('a') if a.tool_name != PLAN => {
                let a = self.approvals.pop_front()?;
                self.transcript.approval_answered(&a.call_id, self.now_ms);
                return Some(Action::AllowAlways { call_id: a.call_id });
            }
            KeyCode::Char('n') | KeyCode::Esc => return self.answer(ApprovalDecision::Deny, ""),
            _ => {}
        }
        None
    }

    /// Closes the front dialog with `decision` (and a deny message for the model, if any).
    fn answer(&mut self, decision: ApprovalDecision, message: impl Into<String>) -> Option<Action> {
        let message = message.into();
        let a = self.approvals.pop_front()?;
        // The tool's time starts now, not when it asked.
        self.transcript.approval_answered(&a.call_id, self.now_ms);
        Some(match (decision, message.is_empty()) {
            (ApprovalDecision::Deny, false) => Action::DenyWithMessage {
                call_id: a.call_id,
                message,
            },
            _ => Action::Approve {
                call_id: a.call_id,
                decision,
            },
        })
    }
}
