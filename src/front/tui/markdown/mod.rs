//! Streaming markdown for the TUI: turns assistant text into styled lines, one complete source
//! line at a time (newline-gated), carrying block state (code fences, list nesting, tables,
//! blank-line collapsing) across lines. Pure: never draws and never writes to a terminal; each
//! rendered line is laid out at the width it is drawn at ([`MdLine::rows`]).
//!
//! `block` owns the block level, `inline` the inline markup, `code` fenced code (highlighted by
//! `crate::text::highlight`), `table` GFM tables.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::paint;
use crate::text;

mod block;
mod code;
mod inline;
mod table;

pub use table::Table;

// ---------------------------------------------------------------------------------------------
// Styles: every colour and modifier the renderer uses, in one place (code colours: `code`).

/// Heading text: level 1 magenta, bold and underlined; level 2 cyan and bold; deeper just bold.
fn heading(level: usize) -> Style {
    match level {
        1 => BOLD.fg(Color::Magenta).add_modifier(Modifier::UNDERLINED),
        2 => BOLD.fg(Color::Cyan),
        _ => BOLD,
    }
}

/// Inline code spans and fenced code lines of a language without a grammar.
const CODE: Style = Style::new().fg(Color::Yellow);
/// Decorations: fence labels, rules, quote bars, link targets, table borders.
const DIM: Style = Style::new().add_modifier(Modifier::DIM);
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
const ITALIC: Style = Style::new().add_modifier(Modifier::ITALIC);
const STRIKE: Style = Style::new().add_modifier(Modifier::CROSSED_OUT);
/// Link text and autolinks.
const LINK: Style = Style::new().add_modifier(Modifier::UNDERLINED);
/// List bullets, numbers and task boxes.
const MARKER: Style = Style::new();

const QUOTE_BAR: &str = "│ ";

// ---------------------------------------------------------------------------------------------
// Public API

/// One rendered block line, laid out (wrapped) at the width it is drawn at.
#[derive(Debug, Clone, PartialEq)]
pub enum MdLine {
    /// A line wrapped with a hanging indent of `indent` columns for its continuation rows.
    Text { line: Line<'static>, indent: usize },
    /// A quoted line: `depth` quote bars start every row it wraps to.
    Quote { depth: usize, line: Line<'static> },
    /// A table: box-drawn at a width that fits, cells wrapping when it does not.
    Table(Table),
}

impl MdLine {
    /// The rows of this line at `width` columns; none is wider than `width` (for any width
    /// of at least 2 columns, the widest a grapheme can be).
    pub fn rows(&self, width: usize) -> Vec<Line<'static>> {
        let width = width.max(1);
        match self {
            MdLine::Text { line, indent } => paint::wrap_line(line, width, *indent),
            MdLine::Quote { depth, line } => quote_rows(*depth, line, width),
            MdLine::Table(t) => t.rows(width),
        }
    }
}

/// A quoted line's rows: as many bars as fit in half the width, then the text wrapped in the
/// rest, the bars repeated on every row.
fn quote_rows(depth: usize, line: &Line<'static>, width: usize) -> Vec<Line<'static>> {
    let bar = text::width(QUOTE_BAR).max(1);
    let depth = depth.min(width / 2 / bar);
    let bars = QUOTE_BAR.repeat(depth);
    paint::wrap_line(line, width - depth * bar, 0)
        .into_iter()
        .map(|row| {
            let mut spans = vec![Span::styled(bars.clone(), DIM)];
            spans.extend(row.spans);
            Line::from(spans)
        })
        .collect()
}

/// Renders a finished text. Equals the lines of a [`MarkdownStream`] fed `source` in any
/// number of deltas and then finished.
pub fn render(source: &str) -> Vec<MdLine> {
    let mut stream = MarkdownStream::new();
    let mut out = stream.push(source);
    out.extend(stream.finish());
    out
}

/// Incremental renderer fed by streamed deltas. A source line is rendered once its `\n` has
/// arrived (or at [`MarkdownStream::finish`]); leading blank lines are dropped and runs of
/// blank lines outside code blocks collapse to one empty line. A line that may be a table's
/// header row waits for the next line, and a table is released whole when it ends.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    /// The unfinished last source line.
    buf: String,
    block: block::Block,
}

impl MarkdownStream {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a delta; returns the lines completed by it.
    pub fn push(&mut self, delta: &str) -> Vec<MdLine> {
        self.buf.push_str(delta);
        let Some(end) = self.buf.rfind('\n') else {
            return Vec::new();
        };
        let rest = self.buf.split_off(end + 1);
        let done = std::mem::replace(&mut self.buf, rest);
        let mut out = Vec::new();
        for l in done.lines() {
            self.block.line(l.strip_suffix('\r').unwrap_or(l), &mut out);
        }
        out
    }

    /// What is not committed yet, rendered as [`MarkdownStream::finish`] would render it now
    /// (for the live area): a held-back header row or table and the unfinished last line.
    /// Empty when nothing is pending or it renders to nothing.
    pub fn pending(&self) -> Vec<MdLine> {
        let mut block = self.block.clone();
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            block.line(self.buf.strip_suffix('\r').unwrap_or(&self.buf), &mut out);
        }
        block.flush(&mut out);
        out
    }

    /// Ends the stream: renders what is pending (an unclosed code fence just ends) and resets
    /// the stream for a new text.
    pub fn finish(&mut self) -> Vec<MdLine> {
        let buf = std::mem::take(&mut self.buf);
        let mut out = Vec::new();
        let l = buf.strip_suffix('\r').unwrap_or(&buf);
        if !l.is_empty() {
            self.block.line(l, &mut out);
        }
        self.block.flush(&mut out);
        self.block = block::Block::default();
        out
    }
}

/// A text line of the non-empty `spans`.
fn md(spans: Vec<Span<'static>>, indent: usize) -> MdLine {
    MdLine::Text {
        line: Line::from(non_empty(spans)),
        indent,
    }
}

fn non_empty(spans: Vec<Span<'static>>) -> Vec<Span<'static>> {
    spans
        .into_iter()
        .filter(|s| !s.content.is_empty())
        .collect()
}

#[cfg(test)]
mod tests;
