//! Runs of consecutive exploration calls (`read`, `grep`, `find`, `ls`) as one cell:
//! `▸ read 12 files` or `▸ read 3 files, 2 searches`, and with Ctrl+O (expanded tool output)
//! the individual cells. A finished exploration call is held (and shown live, in the live
//! area) until something else is committed after it or the run ends; then the run of them
//! is committed as one cell, in its place.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::{FinishedTool, HistoryCell, Transcript};
use crate::front::tui::paint;
use crate::text::count;

/// Whether calls of this tool are grouped.
fn explores(name: &str) -> bool {
    matches!(name, "read" | "grep" | "find" | "ls")
}

impl Transcript {
    /// A finished tool call: an exploration call joins the run being held; any other is
    /// committed after it. A `task` call's child usage counts in the totals.
    pub(super) fn tool_finished(&mut self, tool: FinishedTool) {
        self.totals.tool_finished(&tool);
        if !explores(&tool.name) {
            self.flush_exploring();
            self.pending.push_back(HistoryCell::Tool(tool));
            return;
        }
        if self.exploring.is_empty() {
            self.explore_at = self.pending.len();
        }
        self.exploring.push(tool);
    }

    /// Commits the held run in its place (one call stays a plain tool cell).
    pub(super) fn flush_exploring(&mut self) {
        let at = self.explore_at.min(self.pending.len());
        if let Some(cell) = group(std::mem::take(&mut self.exploring)) {
            self.pending.insert(at, cell);
        }
        self.explore_at = 0;
    }

    /// The held run as a cell, for the live area.
    pub fn exploring(&self) -> Option<HistoryCell> {
        group(self.exploring.clone())
    }
}

fn group(mut tools: Vec<FinishedTool>) -> Option<HistoryCell> {
    match tools.len() {
        0 => None,
        1 => tools.pop().map(HistoryCell::Tool),
        _ => Some(HistoryCell::Explored(tools)),
    }
}

/// The group's summary row: what kinds of calls it holds, and how many failed.
pub(super) fn summary(tools: &[FinishedTool], w: usize) -> Line<'static> {
    let n = |names: &[&str]| {
        tools
            .iter()
            .filter(|t| names.contains(&t.name.as_str()))
            .count()
    };
    let (reads, searches, lists) = (n(&["read"]), n(&["grep", "find"]), n(&["ls"]));
    let mut parts = Vec::new();
    if reads > 0 {
        parts.push(format!("read {}", count(reads as u64, "file", "files")));
    }
    if searches > 0 {
        parts.push(count(searches as u64, "search", "searches"));
    }
    if lists > 0 {
        parts.push(format!(
            "listed {}",
            count(lists as u64, "directory", "directories")
        ));
    }
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let mut spans = vec![
        Span::styled("▸ ", Style::default().fg(Color::Green)),
        Span::styled(parts.join(", "), bold),
    ];
    let failed = tools.iter().filter(|t| t.is_error).count();
    if failed > 0 {
        let red = Style::default().fg(Color::Red);
        spans.push(Span::styled(format!(" · {failed} failed"), red));
    }
    paint::truncate_line(&Line::from(spans), w)
}
