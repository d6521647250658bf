//! GFM tables in the TUI: recognising the header and delimiter rows, reading the body rows,
//! and laying the table out at the width it is drawn at: box-drawing borders, columns as wide
//! as their widest cell (grapheme widths), aligned as the delimiter row says. A table wider than
//! the terminal shrinks its widest columns and wraps their cells; where even that cannot fit
//! (a very narrow terminal, many columns), each row is shown as `header: value` lines.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use super::inline::inline;
use super::{BOLD, DIM};
use crate::text;

/// When a table is too wide, a column keeps at least this many columns (or its natural width,
/// if smaller); when even that does not fit, rows are shown as `header: value` lines.
pub const MIN_COLUMN: usize = 6;
/// At most this many columns are laid out (a row's extra cells are dropped, as GFM does with
/// cells beyond the header's).
const MAX_COLUMNS: usize = 64;

/// Column alignment from the delimiter row (`:--`, `:-:`, `--:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Center,
    Right,
}

/// A cell's text as styled pieces.
type Cell = Vec<(String, Style)>;

/// A finished table, laid out when drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The column the table starts at (inside a list item).
    base: usize,
    aligns: Vec<Align>,
    header: Vec<Cell>,
    rows: Vec<Vec<Cell>>,
}

/// A table being read, row by row.
#[derive(Debug, Clone)]
pub(super) struct Builder {
    table: Table,
}

/// Whether a paragraph line may be a table's header row (the next line decides).
pub(super) fn may_be_header(rest: &str) -> bool {
    split_cells(rest).len() > 1 || rest.trim().starts_with('|')
}

/// Whether a line continues a table as a body row.
pub(super) fn is_row(raw: &str) -> bool {
    !raw.trim().is_empty() && raw.contains('|')
}

/// The alignments of a delimiter row with `columns` cells.
fn delimiter(raw: &str, columns: usize) -> Option<Vec<Align>> {
    let cells = split_cells(raw);
    if cells.len() != columns {
        return None;
    }
    cells
        .iter()
        .map(|c| {
            let c = c.trim();
            let body = c.trim_start_matches(':').trim_end_matches(':');
            if body.is_empty() || !body.chars().all(|ch| ch == '-') {
                return None;
            }
            Some(match (c.starts_with(':'), c.ends_with(':')) {
                (true, true) => Align::Center,
                (false, true) => Align::Right,
                _ => Align::Left,
            })
        })
        .collect()
}

/// The cells of a row: split at `|` not escaped as `\|`, without the outer pipes.
fn split_cells(row: &str) -> Vec<String> {
    let mut t = row.trim();
    t = t.strip_prefix('|').unwrap_or(t);
    if t.ends_with('|') && !t.ends_with("\\|") {
        t = &t[..t.len() - 1];
    }
    let mut cells = vec![String::new()];
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                // `\|` stays escaped so the inline parser turns it into a plain `|`.
                if let Some(cell) = cells.last_mut() {
                    cell.push_str("\\|");
                }
                chars.next();
            }
            '|' => cells.push(String::new()),
            _ => {
                if let Some(cell) = cells.last_mut() {
                    cell.push(c);
                }
            }
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

fn cell(source: &str, style: Style) -> Cell {
    inline(source, style)
        .into_iter()
        .map(|s| (text::sanitize(&s.content), s.style))
        .collect()
}

fn cell_width(c: &Cell) -> usize {
    c.iter().map(|(t, _)| text::width(t)).sum()
}

impl Builder {
    /// A table headed by `header` if `next` is its delimiter row.
    pub(super) fn start(header: &str, next: &str) -> Option<Builder> {
        let names = split_cells(header);
        if names.len() > MAX_COLUMNS {
            return None;
        }
        let aligns = delimiter(next, names.len())?;
        Some(Builder {
            table: Table {
                base: 0,
                aligns,
                header: names.iter().map(|n| cell(n, BOLD)).collect(),
                rows: Vec::new(),
            },
        })
    }

    /// The same table drawn from column `base`.
    pub(super) fn at(mut self, base: usize) -> Builder {
        self.table.base = base;
        self
    }

    /// Adds a body row: missing cells are empty, extra ones dropped.
    pub(super) fn push_row(&mut self, raw: &str) {
        let n = self.table.aligns.len();
        let mut cells: Vec<Cell> = split_cells(raw)
            .iter()
            .take(n)
            .map(|c| cell(c, Style::default()))
            .collect();
        cells.resize(n, Vec::new());
        self.table.rows.push(cells);
    }

    pub(super) fn finish(self) -> Table {
        self.table
    }
}

/// The border characters: box drawing, or ASCII where those are drawn two columns wide
/// (`--ambiguous-width wide`).
struct Borders {
    h: &'static str,
    v: &'static str,
    /// Left, middle and right joints of the top, the header rule and the bottom.
    top: [&'static str; 3],
    mid: [&'static str; 3],
    bottom: [&'static str; 3],
}

fn borders() -> Borders {
    if text::width("─┼") == 2 {
        Borders {
            h: "─",
            v: "│",
            top: ["┌", "┬", "┐"],
            mid: ["├", "┼", "┤"],
            bottom: ["└", "┴", "┘"],
        }
    } else {
        Borders {
            h: "-",
            v: "|",
            top: ["+"; 3],
            mid: ["+"; 3],
            bottom: ["+"; 3],
        }
    }
}

impl Table {
    /// The table's rows at `width` columns, each at most `width` wide (given 2 or more).
    pub fn rows(&self, width: usize) -> Vec<Line<'static>> {
        let base = if self.base * 2 <= width { self.base } else { 0 };
        let avail = width - base;
        let n = self.aligns.len();
        let overhead = 3 * n + 1;
        let natural: Vec<usize> = (0..n)
            .map(|i| {
                let body = self.rows.iter().map(|r| cell_width(&r[i]));
                body.chain([cell_width(&self.header[i])])
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let widths = match avail.checked_sub(overhead) {
            Some(budget) if natural.iter().sum::<usize>() <= budget => natural,
            Some(budget)
                if natural.iter().map(|w| *w.min(&MIN_COLUMN)).sum::<usize>() <= budget =>
            {
                shrink(&natural, budget)
            }
            _ => return self.stacked(base, avail),
        };
        let pad = Span::raw(" ".repeat(base));
        let b = borders();
        let mut out = vec![rule(&b, &b.top, &widths)];
        out.extend(self.row_lines(&b, &self.header, &widths));
        out.push(rule(&b, &b.mid, &widths));
        for row in &self.rows {
            out.extend(self.row_lines(&b, row, &widths));
        }
        out.push(rule(&b, &b.bottom, &widths));
        if base > 0 {
            for line in &mut out {
                line.spans.insert(0, pad.clone());
            }
        }
        out
    }

    /// One table row: each cell wrapped to its column, as many lines as the tallest cell.
    fn row_lines(&self, b: &Borders, cells: &[Cell], widths: &[usize]) -> Vec<Line<'static>> {
        let wrapped: Vec<Vec<Cell>> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| text::wrap_styled(c, *w))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(0).max(1);
        (0..height)
            .map(|k| {
                let mut spans = vec![Span::styled(b.v.to_string(), DIM)];
                for ((lines, w), align) in wrapped.iter().zip(widths).zip(&self.aligns) {
                    let piece = lines.get(k).cloned().unwrap_or_default();
                    let room = w.saturating_sub(cell_width(&piece));
                    let (left, right) = match align {
                        Align::Left => (0, room),
                        Align::Right => (room, 0),
                        Align::Center => (room / 2, room - room / 2),
                    };
                    spans.push(Span::raw(" ".repeat(left + 1)));
                    spans.extend(piece.into_iter().map(|(t, s)| Span::styled(t, s)));
                    spans.push(Span::raw(" ".repeat(right + 1)));
                    spans.push(Span::styled(b.v.to_string(), DIM));
                }
                Line::from(spans)
            })
            .collect()
    }

    /// The narrow fallback: each body row as `header: value` lines (the value under its
    /// header, indented, when both do not fit on one line), rows between dim rules.
    fn stacked(&self, base: usize, width: usize) -> Vec<Line<'static>> {
        let b = borders();
        let sep = Line::from(Span::styled(b.h.repeat(width.clamp(1, 12)), DIM));
        let mut out = vec![sep.clone()];
        for row in &self.rows {
            for (name, value) in self.header.iter().zip(row) {
                out.extend(field(name, value, width));
            }
            out.push(sep.clone());
        }
        if self.rows.is_empty() {
            for name in &self.header {
                out.extend(wrapped(name, width, 0));
            }
            out.push(sep);
        }
        if base > 0 {
            for line in &mut out {
                line.spans.insert(0, Span::raw(" ".repeat(base)));
            }
        }
        out
    }
}

/// One `name: value` field of the narrow fallback.
fn field(name: &Cell, value: &Cell, width: usize) -> Vec<Line<'static>> {
    let mut head = name.clone();
    head.push((":".into(), BOLD));
    if cell_width(&head) + 1 + cell_width(value) <= width {
        head.push((" ".into(), Style::default()));
        head.extend(value.iter().cloned());
        return wrapped(&head, width, 0);
    }
    let mut out = wrapped(&head, width, 0);
    out.extend(wrapped(value, width, 2));
    out
}

/// `cell` wrapped to `width`, each row after `indent` spaces (dropped where the width is too
/// small for them).
fn wrapped(cell: &Cell, width: usize, indent: usize) -> Vec<Line<'static>> {
    let indent = if indent * 2 <= width { indent } else { 0 };
    text::wrap_styled(cell, width - indent)
        .into_iter()
        .map(|row| {
            let mut spans = vec![Span::raw(" ".repeat(indent))];
            spans.extend(row.into_iter().map(|(t, s)| Span::styled(t, s)));
            Line::from(spans)
        })
        .collect()
}

/// A horizontal border: `joints` are its left, middle and right characters.
fn rule(b: &Borders, joints: &[&'static str; 3], widths: &[usize]) -> Line<'static> {
    let inner: Vec<String> = widths.iter().map(|w| b.h.repeat(w + 2)).collect();
    let text = format!("{}{}{}", joints[0], inner.join(joints[1]), joints[2]);
    Line::from(Span::styled(text, DIM))
}

/// Column widths within `budget` (which holds every column's `min(natural, MIN_COLUMN)`):
/// narrow columns keep their natural width, the wide ones share what is left evenly (each
/// gets `min(natural, level)` for one water level, so at least `min(natural, MIN_COLUMN)`).
fn shrink(natural: &[usize], budget: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..natural.len()).collect();
    order.sort_by_key(|i| natural[*i]);
    let mut widths = vec![0; natural.len()];
    let mut left = budget;
    for (k, i) in order.iter().enumerate() {
        let share = left / (natural.len() - k);
        widths[*i] = natural[*i].min(share);
        left -= widths[*i];
    }
    widths
}
