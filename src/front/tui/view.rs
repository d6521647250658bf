//! Everything the TUI shows and how keys change it: the transcript model, the composer, the
//! approval dialog, the session picker and the status line. Keys become [`Action`]s for the
//! controller (`tui/mod.rs`) to carry out against the kernel; the view itself never calls the
//! kernel and never writes to a terminal, so every screen can be rendered in tests.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::composer::Composer;
use super::paint;
use super::picker::{Picker, PickerAction};
use super::tool_cell::{self, ToolPhase, ToolView};
use super::transcript::{Activity, HistoryCell, Layout, Transcript};
use crate::kernel::event::{ApprovalDecision, Event, EventPayload};

/// Slash commands with their one-line help, in the order `/help` lists them.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "model",
        "switch model: /model provider/id (no argument lists them)",
    ),
    (
        "thinking",
        "set the thinking level: /thinking high (no argument cycles)",
    ),
    (
        "compact",
        "summarise older messages to free context: /compact [focus]",
    ),
    ("new", "start a new session"),
    ("resume", "pick a session to resume"),
    (
        "fork",
        "continue in a copy of this session (this one stays as it is)",
    ),
    ("export", "write the session as HTML: /export [file.html]"),
    ("session", "show the session id, file and usage"),
    ("name", "name this session: /name my refactor"),
    ("help", "show commands and keys"),
    ("quit", "leave keel (the session is saved)"),
];

/// What the controller should do after a key or an event.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Prompt(String),
    Steer(String),
    FollowUp(String),
    /// Esc while working: abort the run and put the queued messages back into the editor.
    Abort,
    Approve {
        call_id: String,
        decision: ApprovalDecision,
    },
    /// A slash command (not a template): name without `/`, and the rest of the line.
    Command {
        name: String,
        args: String,
    },
    /// `!command`: run it in the shell and show the output (sent to the model with the next
    /// prompt).
    Bash(String),
    OpenSession(PathBuf),
    Quit,
}

/// A tool call waiting for the user's decision.
#[derive(Debug, Clone, PartialEq)]
struct Approval {
    call_id: String,
    tool_name: String,
    args: Value,
}

/// The laid-out live area of one frame.
#[derive(Debug, Clone, Default)]
pub struct LiveFrame {
    pub height: u16,
    pub cursor: Option<(u16, u16)>,
    rows: Vec<Line<'static>>,
    picker: bool,
}

/// The whole interactive state.
pub struct View {
    pub transcript: Transcript,
    pub composer: Composer,
    pub layout: Layout,
    picker: Option<Picker>,
    approvals: VecDeque<Approval>,
    /// Tools the user chose to always allow in this process.
    always_allowed: BTreeSet<String>,
    /// Calls approved by an "always allow" answer that still wait for their `Approve`.
    pending_auto: Vec<String>,
    /// A one-line hint under the status line (e.g. "press Ctrl+C again to quit").
    hint: Option<String>,
    quit_armed: bool,
    /// Frame counter for spinners.
    pub spinner: usize,
    /// "Now" in unix ms, set by the controller before each frame (injected for tests).
    pub now_ms: i64,
    /// The model's context window, for the status line's percentage.
    pub context_window: u64,
    /// Names of prompt templates, offered after `/`.
    pub templates: Vec<(String, String)>,
    /// The last lines written to scrollback (what a screen shows above the live area).
    shown: VecDeque<Line<'static>>,
    /// Whether anything was written to the history yet (no blank line before the first cell).
    wrote_any: bool,
    /// Whether the last cell written was part of an answer (its next lines follow directly).
    last_was_answer: bool,
}

const SHOWN_KEEP: usize = 400;

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

impl Default for View {
    fn default() -> Self {
        View::new()
    }
}

impl View {
    pub fn new() -> Self {
        View {
            transcript: Transcript::new(),
            composer: Composer::new(),
            layout: Layout::default(),
            picker: None,
            approvals: VecDeque::new(),
            always_allowed: BTreeSet::new(),
            pending_auto: Vec::new(),
            hint: None,
            quit_armed: false,
            spinner: 0,
            now_ms: 0,
            context_window: 0,
            templates: Vec::new(),
            shown: VecDeque::new(),
            wrote_any: false,
            last_was_answer: false,
        }
    }

    /// Opens the session picker over the composer.
    pub fn open_picker(&mut self, picker: Picker) {
        self.picker = Some(picker);
    }

    pub fn picker_open(&self) -> bool {
        self.picker.is_some()
    }

    /// Shows a transient hint under the status line until the next key.
    pub fn set_hint(&mut self, hint: impl Into<String>) {
        self.hint = Some(hint.into());
    }

    /// Adds a front-end cell (a command's answer, a notice) to the history.
    pub fn notice(&mut self, cell: HistoryCell) {
        self.transcript.push(cell);
    }

    /// Folds a kernel event in; returns actions the user already decided (always-allowed
    /// tools are approved without asking again).
    pub fn on_event(&mut self, event: &Event) -> Vec<Action> {
        self.transcript.on_event(event);
        match &event.payload {
            EventPayload::ApprovalRequested {
                call_id,
                tool_name,
                args,
            } => {
                if self.always_allowed.contains(tool_name) {
                    return vec![Action::Approve {
                        call_id: call_id.clone(),
                        decision: ApprovalDecision::Allow,
                    }];
                }
                self.approvals.push_back(Approval {
                    call_id: call_id.clone(),
                    tool_name: tool_name.clone(),
                    args: args.clone(),
                });
            }
            EventPayload::ToolCallFinished { call_id, .. }
            | EventPayload::ToolCallUpdated { call_id, .. } => {
                self.approvals.retain(|a| &a.call_id != call_id);
            }
            EventPayload::AgentSettled { .. } => self.approvals.clear(),
            _ => {}
        }
        Vec::new()
    }

    /// Approvals decided by an earlier "always allow" answer, to send now.
    pub fn take_auto_approvals(&mut self) -> Vec<Action> {
        self.pending_auto
            .drain(..)
            .map(|call_id| Action::Approve {
                call_id,
                decision: ApprovalDecision::Allow,
            })
            .collect()
    }

    /// Puts texts (queued messages taken back after an abort) in front of the editor's text.
    pub fn restore_to_composer(&mut self, texts: Vec<String>) {
        if texts.is_empty() {
            return;
        }
        let mut all = texts;
        let current = self.composer.text();
        if !current.trim().is_empty() {
            all.push(current);
        }
        self.composer.set_text(&all.join("\n"));
    }

    /// Handles a key; returns what the controller must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if let Some(picker) = &mut self.picker {
            return match picker.handle_key(key) {
                PickerAction::None => None,
                PickerAction::Cancel => {
                    self.picker = None;
                    None
                }
                PickerAction::Open(path) => {
                    self.picker = None;
                    Some(Action::OpenSession(path))
                }
            };
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let was_armed = std::mem::take(&mut self.quit_armed);
        self.hint = None;
        if let Some(a) = self.approvals.front().cloned() {
            // The dialog has the keyboard: only its answers and Ctrl+C do anything.
            let action = self.approval_key(&a, key);
            if action.is_some() || key.code != KeyCode::Char('c') || !ctrl {
                return action;
            }
        }
        match key.code {
            KeyCode::Char('c') if ctrl => self.ctrl_c(was_armed),
            KeyCode::Char('d') if ctrl && self.composer.is_empty() => Some(Action::Quit),
            KeyCode::Char('t') if ctrl => {
                self.layout.show_thinking = !self.layout.show_thinking;
                self.set_hint(if self.layout.show_thinking {
                    "thinking is shown in full from now on"
                } else {
                    "thinking is collapsed from now on"
                });
                None
            }
            KeyCode::Char('o') if ctrl => {
                self.layout.expand_tools = !self.layout.expand_tools;
                self.set_hint(if self.layout.expand_tools {
                    "tool output is expanded from now on"
                } else {
                    "tool output is collapsed from now on"
                });
                None
            }
            KeyCode::Esc if self.transcript.is_running() => Some(Action::Abort),
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => self.submit(true),
            // The editor takes a plain Enter after a backslash (a newline); else it sends.
            KeyCode::Enter if key.modifiers.is_empty() => {
                if self.composer.handle_key(key) {
                    None
                } else {
                    self.submit(false)
                }
            }
            KeyCode::Tab => {
                self.complete();
                None
            }
            _ => {
                self.composer.handle_key(key);
                None
            }
        }
    }

    /// Pasted text goes into the editor as it is (newlines included).
    pub fn on_paste(&mut self, text: &str) {
        if let Some(picker) = &mut self.picker {
            for c in text.chars().filter(|c| !c.is_control()) {
                picker.handle_key(KeyEvent::from(KeyCode::Char(c)));
            }
            return;
        }
        self.composer.insert_str(text);
    }

    fn ctrl_c(&mut self, was_armed: bool) -> Option<Action> {
        if !self.composer.is_empty() {
            self.composer.clear();
            return None;
        }
        if was_armed {
            return Some(Action::Quit);
        }
        self.quit_armed = true;
        self.set_hint("press Ctrl+C again to quit (the session is saved)");
        None
    }

    fn approval_key(&mut self, a: &Approval, key: KeyEvent) -> Option<Action> {
        let decision = match key.code {
            KeyCode::Char('y') | KeyCode::Enter => ApprovalDecision::Allow,
            KeyCode::Char('a') => {
                self.always_allowed.insert(a.tool_name.clone());
                ApprovalDecision::Allow
            }
            KeyCode::Char('n') | KeyCode::Esc => ApprovalDecision::Deny,
            _ => return None,
        };
        self.approvals.pop_front();
        // Other calls of a tool that is now always allowed need no question either.
        if decision == ApprovalDecision::Allow && self.always_allowed.contains(&a.tool_name) {
            let more: Vec<Approval> = self
                .approvals
                .iter()
                .filter(|x| x.tool_name == a.tool_name)
                .cloned()
                .collect();
            self.approvals.retain(|x| x.tool_name != a.tool_name);
            for m in more {
                self.pending_auto.push(m.call_id);
            }
        }
        Some(Action::Approve {
            call_id: a.call_id.clone(),
            decision,
        })
    }

    /// Enter (or Alt+Enter: `follow_up`) on the composer's text.
    fn submit(&mut self, follow_up: bool) -> Option<Action> {
        let text = self.composer.text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return None;
        }
        if let Some(rest) = trimmed.strip_prefix('/') {
            let name_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let name = &rest[..name_end];
            let args = rest[name_end..].trim().to_string();
            if COMMANDS.iter().any(|(c, _)| *c == name) || name == "exit" {
                self.composer.take();
                return Some(Action::Command {
                    name: name.to_string(),
                    args,
                });
            }
            if !self.templates.iter().any(|(t, _)| t == name) {
                self.set_hint(format!("unknown command /{name} — /help lists them"));
                return None;
            }
        }
        if let Some(cmd) = trimmed.strip_prefix('!') {
            if cmd.trim().is_empty() {
                return None;
            }
            let cmd = cmd.trim().to_string();
            self.composer.take();
            return Some(Action::Bash(cmd));
        }
        let text = self.composer.take();
        Some(match (self.transcript.is_running(), follow_up) {
            (false, _) => Action::Prompt(text),
            (true, false) => Action::Steer(text),
            (true, true) => Action::FollowUp(text),
        })
    }

    /// Tab after `/na`: completes a command or template name when one matches.
    fn complete(&mut self) {
        let text = self.composer.text();
        let Some(prefix) = text.strip_prefix('/') else {
            return;
        };
        if prefix.contains(char::is_whitespace) {
            return;
        }
        let names = self.command_names();
        let matches: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
        if let [one] = matches.as_slice() {
            self.composer.set_text(&format!("/{one} "));
        }
    }

    fn command_names(&self) -> Vec<String> {
        COMMANDS
            .iter()
            .map(|(c, _)| c.to_string())
            .chain(self.templates.iter().map(|(t, _)| t.clone()))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Layout and painting.

impl View {
    /// Takes the finished cells and lays them out at `width` for the scrollback (a blank line
    /// between cells, except between pieces of one streamed answer). The lines are also kept for [`View::render_screen`].
    pub fn take_history(&mut self, width: u16) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        for cell in self.transcript.drain() {
            let answer = matches!(cell, HistoryCell::Markdown(_));
            if self.wrote_any && !(answer && self.last_was_answer) {
                out.push(Line::default());
            }
            out.extend(cell.lines(width, self.layout));
            self.wrote_any = true;
            self.last_was_answer = answer;
        }
        for l in &out {
            self.shown.push_back(l.clone());
        }
        while self.shown.len() > SHOWN_KEEP {
            self.shown.pop_front();
        }
        out
    }

    /// Lays out the live area for a screen `width` wide, at most `max_height` rows (rows
    /// that do not fit are dropped from the top, so the editor and status line stay).
    pub fn layout_live(&self, width: u16, max_height: u16) -> LiveFrame {
        if let Some(p) = &self.picker {
            return LiveFrame {
                height: p.desired_height(max_height).min(max_height),
                cursor: None,
                rows: Vec::new(),
                picker: true,
            };
        }
        let w = width.max(1) as usize;
        let mut rows = self.activity_rows(width);
        let (bottom, cursor) = self.editor_rows(width);
        let keep = (max_height as usize).saturating_sub(bottom.len());
        if rows.len() > keep {
            rows.drain(..rows.len() - keep);
        }
        let top = rows.len() as u16;
        rows.extend(bottom);
        rows.truncate(max_height as usize);
        for r in &mut rows {
            if paint::line_width(r) > w {
                *r = paint::truncate_line(r, w);
            }
        }
        let height = rows.len() as u16;
        LiveFrame {
            height,
            cursor: cursor
                .map(|(x, y)| (x, y + top))
                .filter(|(_, y)| *y < height),
            rows,
            picker: false,
        }
    }

    /// Paints a laid-out live area into `buf` (its area is the live area).
    pub fn paint(&self, frame: &LiveFrame, buf: &mut Buffer) {
        let area = buf.area;
        if frame.picker {
            if let Some(p) = &self.picker {
                p.render(area, buf);
            }
            return;
        }
        for (i, row) in frame.rows.iter().enumerate() {
            let y = area.y + i as u16;
            if y >= area.bottom() {
                break;
            }
            paint::put_line(buf, area.x, y, row, area.width);
        }
    }

    /// Renders what a terminal of `buf`'s size would show: the latest scrollback lines with
    /// the live area under them (for snapshot tests and the benchmark's full-screen frame).
    pub fn render_screen(&mut self, buf: &mut Buffer) {
        let area = buf.area;
        self.take_history(area.width);
        let frame = self.layout_live(area.width, area.height.saturating_sub(1));
        let above = area.height - frame.height;
        let first = self.shown.len().saturating_sub(above as usize);
        for (i, line) in self.shown.iter().skip(first).enumerate() {
            paint::put_line(buf, area.x, area.y + i as u16, line, area.width);
        }
        let shown_rows = (self.shown.len() - first) as u16;
        let live = Rect::new(area.x, area.y + shown_rows, area.width, frame.height);
        let mut live_buf = Buffer::empty(live);
        self.paint(&frame, &mut live_buf);
        buf.merge(&live_buf);
    }

    /// Thinking, the streaming line, tools, the run status and the queue.
    fn activity_rows(&self, width: u16) -> Vec<Line<'static>> {
        let w = width.max(1) as usize;
        let t = &self.transcript;
        let mut rows = Vec::new();
        if let Some(thinking) = t.live_thinking() {
            rows.extend(self.thinking_rows(thinking, w));
        }
        match t.live_line() {
            Some(line) => rows.extend(paint::wrap_line(&line.line, w, line.indent)),
            None if t.streaming_text() => rows.push(Line::default()),
            None => {}
        }
        for name in t.preparing() {
            let spin = spinner_frame(self.spinner);
            rows.push(Line::from(vec![
                Span::styled(format!("{spin} "), Style::default().fg(Color::Yellow)),
                Span::styled(
                    name.to_string(),
                    Style::default().add_modifier(Modifier::BOLD),
                ),
                Span::styled(" …", dim()),
            ]));
        }
        for tool in &t.running {
            let phase = if tool.awaiting_approval {
                ToolPhase::AwaitingApproval
            } else {
                ToolPhase::Running {
                    elapsed_ms: (self.now_ms - tool.started_ms).max(0) as u64,
                }
            };
            let view = ToolView {
                name: &tool.name,
                args: &tool.args,
                text: tool.partial.as_deref(),
                details: None,
                is_error: false,
                phase,
                expanded: self.layout.expand_tools,
                spinner: self.spinner,
            };
            rows.extend(tool_cell::lines(&view, width));
        }
        if let Some(row) = self.status_row() {
            rows.push(row);
        }
        rows.extend(self.queue_rows(w));
        rows
    }

    fn thinking_rows(&self, thinking: &str, w: usize) -> Vec<Line<'static>> {
        let style = dim().add_modifier(Modifier::ITALIC);
        let words = thinking.split_whitespace().count();
        let mut rows = vec![paint::truncate_line(
            &Line::styled(format!("✻ Thinking… ({words} words)"), style),
            w,
        )];
        if self.layout.show_thinking {
            let all: Vec<Line<'static>> = thinking
                .lines()
                .flat_map(|l| paint::wrap_line(&Line::styled(format!("  {l}"), style), w, 2))
                .collect();
            let skip = all.len().saturating_sub(3);
            rows.extend(all.into_iter().skip(skip));
        }
        rows
    }

    /// "Working… 12s · esc to interrupt", retry countdown or compaction.
    fn status_row(&self) -> Option<Line<'static>> {
        let spin = spinner_frame(self.spinner);
        let secs = |since: i64| ((self.now_ms - since).max(0) / 1000) as u64;
        let (glyph, text) = match self.transcript.activity.as_ref()? {
            Activity::Idle => return None,
            Activity::Working { since_ms } => (
                spin.to_string(),
                format!("Working… {} · esc to interrupt", fmt_secs(secs(*since_ms))),
            ),
            Activity::Retrying {
                attempt,
                max,
                until_ms,
                error,
            } => (
                "↻".to_string(),
                format!(
                    "Retrying ({attempt}/{max}) in {}s: {error} · esc to cancel",
                    ((until_ms - self.now_ms).max(0) + 999) / 1000
                ),
            ),
            Activity::Compacting { since_ms } => (
                "⇣".to_string(),
                format!("Compacting the conversation… {}", fmt_secs(secs(*since_ms))),
            ),
        };
        Some(Line::from(vec![
            Span::styled(format!("{glyph} "), Style::default().fg(Color::Yellow)),
            Span::styled(text, dim()),
        ]))
    }

    fn queue_rows(&self, w: usize) -> Vec<Line<'static>> {
        let t = &self.transcript;
        let mut rows = Vec::new();
        for s in &t.steering {
            rows.push(queued_row("↳ steer", s, Color::Cyan, w));
        }
        for f in &t.follow_up {
            rows.push(queued_row("⏎ queued", f, Color::Blue, w));
        }
        if !rows.is_empty() {
            rows.push(Line::styled(
                "  esc aborts the run and puts queued messages back in the editor",
                dim(),
            ));
        }
        rows
    }

    /// The composer (or the approval dialog), completions, the status line and the hint.
    fn editor_rows(&self, width: u16) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
        let w = width.max(1) as usize;
        // The rule character is ambiguous-width: as many as fit at its measured width.
        let rule = "─".repeat(w / crate::text::width("─").max(1));
        let mut rows = vec![Line::styled(rule, dim())];
        let mut cursor = None;
        if let Some(a) = self.approvals.front() {
            rows.extend(approval_rows(a, self.approvals.len(), w));
        } else {
            let placeholder = if self.transcript.is_running() {
                "Enter steers · Alt+Enter queues a follow-up · Esc interrupts"
            } else {
                "Ask anything · / for commands · ! runs a shell command"
            };
            let (lines, (cx, cy)) = self.composer.render(width, "› ", Some(placeholder));
            cursor = Some((cx, cy + 1));
            rows.extend(lines);
            rows.extend(self.completion_rows(w));
        }
        rows.push(self.status_line(w));
        if let Some(h) = &self.hint {
            rows.push(paint::truncate_line(
                &Line::styled(h.clone(), Style::default().fg(Color::Yellow)),
                w,
            ));
        }
        (rows, cursor)
    }

    fn completion_rows(&self, w: usize) -> Vec<Line<'static>> {
        let text = self.composer.text();
        let Some(prefix) = text.strip_prefix('/') else {
            return Vec::new();
        };
        if prefix.contains(char::is_whitespace) {
            return Vec::new();
        }
        COMMANDS
            .iter()
            .map(|(c, d)| (c.to_string(), d.to_string()))
            .chain(self.templates.iter().cloned())
            .filter(|(c, _)| c.starts_with(prefix))
            .take(6)
            .map(|(c, d)| {
                paint::truncate_line(
                    &Line::from(vec![
                        Span::styled(format!("  /{c:<10} "), Style::default().fg(Color::Cyan)),
                        Span::styled(d, dim()),
                    ]),
                    w,
                )
            })
            .collect()
    }

    /// model · thinking · tokens · cost · context % · session name.
    fn status_line(&self, w: usize) -> Line<'static> {
        let t = &self.transcript;
        let u = &t.totals.usage;
        let mut parts = vec![t.model.clone()];
        if !t.thinking_level.is_empty() && t.thinking_level != "off" {
            parts.push(format!("thinking {}", t.thinking_level));
        }
        parts.push(format!(
            "↑{} ↓{}",
            fmt_tokens(u.input + u.cache_read + u.cache_write),
            fmt_tokens(u.output)
        ));
        if u.cost.total > 0.0 {
            parts.push(format!("${:.3}", u.cost.total));
        }
        if self.context_window > 0 {
            let pct = t.totals.context_tokens as f64 * 100.0 / self.context_window as f64;
            parts.push(format!("ctx {pct:.0}%"));
        }
        if let Some(n) = &t.session_name {
            parts.push(n.clone());
        }
        paint::truncate_line(&Line::styled(parts.join(" · "), dim()), w)
    }
}

fn queued_row(label: &str, text: &str, color: Color, w: usize) -> Line<'static> {
    paint::truncate_line(
        &Line::from(vec![
            Span::styled(format!("{label}: "), Style::default().fg(color)),
            Span::raw(text.replace('\n', " ")),
        ]),
        w,
    )
}

fn approval_rows(a: &Approval, waiting: usize, w: usize) -> Vec<Line<'static>> {
    let yellow = Style::default().fg(Color::Yellow);
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut rows = paint::wrap_line(
        &Line::from(vec![
            Span::styled("? ", yellow),
            Span::styled(format!("Allow {}", a.tool_name), bold),
            Span::raw(": "),
            Span::raw(tool_cell::describe(&a.tool_name, &a.args)),
        ]),
        w,
        2,
    );
    rows.truncate(4);
    rows.push(paint::truncate_line(
        &Line::from(vec![
            Span::styled("  y", yellow),
            Span::raw(" allow once  "),
            Span::styled("a", yellow),
            Span::raw(format!(" always allow {}  ", a.tool_name)),
            Span::styled("n", yellow),
            Span::raw(" deny"),
        ]),
        w,
    ));
    if waiting > 1 {
        rows.push(Line::styled(
            format!("  ({} more waiting)", waiting - 1),
            dim(),
        ));
    }
    rows
}

/// 950 → "950", 12_300 → "12.3k", 1_200_000 → "1.2M".
pub fn fmt_tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

fn fmt_secs(s: u64) -> String {
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m {}s", s / 60, s % 60)
    }
}

/// One frame of the working spinner.
fn spinner_frame(n: usize) -> char {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
    FRAMES[n % FRAMES.len()]
}
