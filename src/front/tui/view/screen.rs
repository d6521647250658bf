//! How the view is laid out for one frame: the finished cells as scrollback lines, and the
//! live area (thinking, the streaming line, running tools, the run status, the queue, the
//! editor or the approval dialog, the status line), painted into a buffer. Pure: reads the
//! view's state, writes nothing but the buffer it is given.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::{LiveFrame, View};
use crate::front::tui::paint;
use crate::front::tui::tool_cell::{self, ToolPhase, ToolView};
use crate::front::tui::transcript::{Activity, HistoryCell};

/// Scrollback lines kept for [`View::render_screen`].
const SHOWN_KEEP: usize = 400;

fn dim() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

impl View {
    /// The screen was cleared (`/clear`): nothing of the history is on it any more.
    pub fn forget_shown(&mut self) {
        self.shown.clear();
        self.wrote_any = false;
        self.last_was_answer = false;
    }

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
        if let Some(r) = &self.rewind {
            return LiveFrame {
                height: r.desired_height(max_height).min(max_height),
                cursor: None,
                rows: Vec::new(),
                picker: true,
            };
        }
        if self.jobs.is_open() {
            return LiveFrame {
                height: self.jobs.desired_height(max_height).min(max_height),
                cursor: None,
                rows: Vec::new(),
                picker: true,
            };
        }
        let w = width.max(1) as usize;
        let mut rows = self.activity_rows(width);
        let (bottom, cursor) = self.editor_rows(width, max_height);
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
            } else if let Some(r) = &self.rewind {
                r.render(area, buf);
            } else {
                self.jobs.render(area, buf);
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
        // The blank row `take_history` will put above the answer's first line is shown
        // above it now, so committing that line moves nothing.
        if t.streaming_text() && self.wrote_any && !self.last_was_answer {
            rows.push(Line::default());
        }
        let live = t.live_lines();
        rows.extend(live.iter().flat_map(|l| l.rows(w)));
        if live.is_empty() && t.streaming_text() {
            rows.push(Line::default());
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
        if let Some(cell) = t.exploring() {
            rows.extend(cell.lines(width, self.layout));
        }
        rows.extend(self.running_rows(width));
        if let Some(row) = self.status_row() {
            rows.push(row);
        }
        rows.extend(super::todos::rows(&self.transcript.todos, w));
        rows.extend(self.queue_rows(w));
        rows
    }

    /// The running tool calls and the `!cmd` running, each with its time so far.
    fn running_rows(&self, width: u16) -> Vec<Line<'static>> {
        let t = &self.transcript;
        let mut rows = Vec::new();
        // Disconnected: the timers stop where the connection was lost.
        let now = self
            .disconnected
            .map_or(self.now_ms, |at| at.min(self.now_ms));
        for tool in &t.running {
            let phase = if tool.awaiting_approval {
                ToolPhase::AwaitingApproval
            } else {
                ToolPhase::Running {
                    elapsed_ms: (now - tool.started_ms).max(0) as u64,
                }
            };
            let view = ToolView {
                name: &tool.name,
                args: &tool.args,
                text: tool.partial.as_deref(),
                details: tool.details.as_ref(),
                is_error: false,
                phase,
                expanded: self.layout.expand_tools,
                full: false,
                spinner: self.spinner,
            };
            rows.extend(tool_cell::lines(&view, width));
        }
        if let Some(shell) = t.shell() {
            let args = serde_json::json!({ "command": shell.command });
            let view = ToolView {
                name: "bash",
                args: &args,
                text: Some(&shell.output),
                details: None,
                is_error: false,
                phase: ToolPhase::Running {
                    elapsed_ms: (now - shell.started_ms).max(0) as u64,
                },
                expanded: self.layout.expand_tools,
                full: false,
                spinner: self.spinner,
            };
            rows.extend(tool_cell::lines(&view, width));
        }
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
        if self.disconnected.is_some() && self.transcript.is_running() {
            return Some(Line::from(vec![
                Span::styled("✕ ", Style::default().fg(Color::Red)),
                Span::styled(
                    "disconnected from the keel daemon: the run's state is unknown",
                    dim(),
                ),
            ]));
        }
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
                    "retry {attempt}/{max} in {}s: {error} · esc to cancel",
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
    fn editor_rows(&self, width: u16, max_height: u16) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
        let w = width.max(1) as usize;
        // The rule character is ambiguous-width: as many as fit at its measured width.
        let rule = "─".repeat(w / crate::text::width("─").max(1));
        let mut rows = vec![Line::styled(rule, dim())];
        let mut cursor = None;
        if let Some(a) = self.approvals.front() {
            rows.extend(super::approval::rows(
                a,
                self.approvals.len(),
                w,
                max_height as usize,
            ));
        } else {
            let placeholder = if let Some(ended) = &self.ended {
                ended.as_str()
            } else if self.transcript.is_running() {
                "Enter steers · Alt+Enter queues a follow-up · Esc interrupts"
            } else {
                "Ask anything · / for commands · ! runs a shell command"
            };
            let cap = crate::front::tui::composer::max_rows(max_height);
            let (lines, (cx, cy)) =
                self.composer
                    .render_window(width, "› ", Some(placeholder), cap);
            cursor = Some((cx, cy + 1));
            rows.extend(lines);
            rows.extend(self.completion_rows(w));
        }
        if let Some((line, padding)) = &self.script_status {
            rows.extend(crate::front::tui::status_line::row(line, *padding, w));
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
        if let Some(menu) = &self.mention {
            return mention_rows(menu, w);
        }
        match &self.slash.menu {
            Some(menu) => super::slash::rows(menu, w),
            None => Vec::new(),
        }
    }

    /// model · thinking · tokens · cost · context % · session name · place · mode · sandbox;
    /// too narrow for all, the parts go in [`Part`]'s order, the permission mode last.
    fn status_line(&self, w: usize) -> Line<'static> {
        let t = &self.transcript;
        let u = &t.totals.usage;
        let mut parts = vec![(Part::Model, t.model.clone())];
        if !t.thinking_level.is_empty() && t.thinking_level != "off" {
            parts.push((Part::Thinking, format!("thinking {}", t.thinking_level)));
        }
        let unreported = t.totals.unreported();
        match unreported {
            true => parts.push((Part::Tokens, "usage not reported".to_string())),
            false => parts.push((
                Part::Tokens,
                format!(
                    "↑{} ↓{}",
                    fmt_tokens(u.input + u.cache_read + u.cache_write),
                    fmt_tokens(u.output)
                ),
            )),
        }
        if u.cost.total > 0.0 {
            parts.push((Part::Cost, format!("${:.3}", u.cost.total)));
        }
        if self.context_window > 0 && !unreported {
            let pct = t.totals.context_tokens as f64 * 100.0 / self.context_window as f64;
            parts.push((Part::Context, format!("ctx {pct:.0}%")));
        }
        if let Some(n) = &t.session_name {
            parts.push((Part::Name, n.clone()));
        }
        if let Some(p) = &self.place {
            parts.push((Part::Place, p.clone()));
        }
        if let Some(w) = &self.worktree {
            parts.push((Part::Worktree, w.clone()));
        }
        match self.jobs.running() {
            0 => {}
            n => parts.push((Part::Jobs, crate::text::count(n as u64, "job", "jobs"))),
        }
        if let Some(mode) = self.permission {
            parts.push((Part::Mode, format!("{} mode", mode.word())));
        }
        if let Some(s) = &self.sandbox {
            parts.push((Part::Sandbox, s.clone()));
        }
        let text = fit_parts(parts, w);
        // Written to the last column (see `paint::fill_line`).
        paint::fill_line(paint::truncate_line(&Line::styled(text, dim()), w), w)
    }
}

/// The status line's parts, in the order they are left out when the line is too narrow: the
/// sandbox first, then the numbers; where the session runs late (a lost daemon says there
/// how to reconnect), the permission mode last (it says what the next tool call will do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Sandbox,
    Thinking,
    Tokens,
    Cost,
    Context,
    Name,
    Jobs,
    Model,
    Worktree,
    Place,
    Mode,
}

/// The parts joined with ` · `, leaving out the first to go until the line fits `w` columns (the
/// last part left is cut by the caller if it is still too wide).
fn fit_parts(mut parts: Vec<(Part, String)>, w: usize) -> String {
    loop {
        let text = parts
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join(" · ");
        if crate::text::width(&text) <= w || parts.len() <= 1 {
            return text;
        }
        let first_to_go = parts.iter().enumerate().min_by_key(|(_, (p, _))| *p);
        if let Some((i, _)) = first_to_go {
            parts.remove(i);
        }
    }
}

/// The `@` menu: the matching files, the chosen one highlighted, and how to choose.
fn mention_rows(menu: &super::super::files::Menu, w: usize) -> Vec<Line<'static>> {
    let help = "↑↓ choose · Tab or Enter insert · Esc close";
    super::menu::rows(&menu.choice, w, help, |i, selected| {
        let style = super::menu::highlight(Style::default().fg(Color::Cyan), selected);
        Line::from(vec![
            Span::raw("  "),
            Span::styled(format!("@{}", menu.matches[i]), style),
        ])
    })
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
