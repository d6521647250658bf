//! A terminal emulator for the TUI's bytes whose resizes either reflow the way tmux 3.3 does or
//! just cut (xterm): a vt100 screen plus a model of reflow (rows joined at their wrap marks,
//! re-split at the new width, written and mid-row-erased cells counted, the rows a narrowing
//! adds pushed into the scrollback from the top of the screen).

use keel::front::tui::terminal::InlineTerminal;
use keel::front::tui::view::View;
use keel::front::tui::{self};

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap()
}

/// One row of a terminal as a reflowing terminal sees it: its cells up to the last one that was
/// written (a written space counts, an erased cell does not), and whether it wraps into the next.
struct Row {
    cells: Vec<(String, u16)>,
    wrapped: bool,
}

/// A vt100 screen fed with every frame; resizes either reflow like tmux, VTE and kitty (rows
/// are joined at their wrap marks, re-split at the new width, the screen keeps its height so
/// extra rows go to the scrollback, the cursor stays on its cell) or just cut (xterm).
pub struct Emulator {
    pub term: InlineTerminal<Vec<u8>>,
    pub parser: vt100::Parser,
}

impl Emulator {
    pub fn new(cols: u16, rows: u16, shell_rows: &[&str]) -> Emulator {
        let mut parser = vt100::Parser::new(nz(rows), nz(cols), 2000);
        for r in shell_rows {
            parser.process(format!("{r}\r\n").as_bytes());
        }
        let row = parser.screen().cursor_position().0;
        Emulator {
            term: InlineTerminal::new(Vec::new(), cols, rows, row),
            parser,
        }
    }

    pub fn draw(&mut self, view: &mut View) {
        tui::draw(view, &mut self.term).unwrap();
        let bytes = std::mem::take(self.term.writer_mut());
        self.process(&bytes);
    }

    /// Feeds `bytes`; an erase (`CSI K`, `CSI J`) that starts after column 0 leaves the row's
    /// length as it was, as in tmux 3.3 (modelled by writing spaces to the row's end, so a
    /// reflow counts them).
    pub fn process(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while let Some(at) = find_erase(rest) {
            let (before, erase) = rest.split_at(at.0);
            self.parser.process(before);
            let (row, col) = self.parser.screen().cursor_position();
            if col > 0 {
                let (_, cols) = self.parser.screen().size();
                let pad = " ".repeat(usize::from(cols.get() - col));
                self.parser.process(pad.as_bytes());
                self.parser
                    .process(format!("\x1b[{};{}H", row + 1, col + 1).as_bytes());
            }
            self.parser.process(&erase[..at.1]);
            rest = &erase[at.1..];
        }
        self.parser.process(rest);
    }

    /// A resize on a terminal that does not reflow.
    pub fn cut_to(&mut self, cols: u16, rows: u16) {
        self.parser.screen_mut().set_size(nz(rows), nz(cols));
        let row = self.parser.screen().cursor_position().0;
        self.term.resize(cols, rows, Some(row));
    }

    /// A width change on a terminal that reflows.
    pub fn reflow_to(&mut self, cols: u16) {
        let (rows, old_cols) = self.parser.screen().size();
        let (rows, old_cols) = (rows.get(), old_cols.get());
        let (cy, cx) = self.parser.screen().cursor_position();
        let all = self.raw_rows(old_cols);
        let first_screen_row = all.len() - usize::from(rows);
        let cursor_row = first_screen_row + usize::from(cy);
        // Join rows into logical lines; remember where the cursor is in its line.
        let mut lines: Vec<Vec<(String, u16)>> = Vec::new();
        let mut cursor = (0usize, 0usize);
        let mut open = false;
        for (i, row) in all.into_iter().enumerate() {
            if !open {
                lines.push(Vec::new());
            }
            let at = lines.len() - 1;
            let line = lines.last_mut().unwrap();
            if i == cursor_row {
                let before: usize = line.iter().map(|(_, w)| usize::from(*w)).sum();
                cursor = (at, before + usize::from(cx));
            }
            line.extend(row.cells);
            open = row.wrapped;
        }
        // Re-split at the new width.
        let mut out: Vec<(String, bool)> = Vec::new();
        let mut new_cursor = (0usize, 0usize);
        for (li, line) in lines.iter().enumerate() {
            let start = out.len();
            let mut text = String::new();
            let mut used = 0u16;
            let mut offsets = Vec::new();
            for (s, w) in line {
                if used + w > cols {
                    out.push((std::mem::take(&mut text), true));
                    used = 0;
                }
                offsets.push((out.len(), used));
                text.push_str(s);
                used += w;
            }
            out.push((text, false));
            if li == cursor.0 {
                let at = cursor.1;
                let (r, c) = if at < offsets.len() {
                    offsets[at]
                } else {
                    let extra = at - offsets.len();
                    let (r, c) = offsets.last().copied().unwrap_or((start, 0));
                    let c = usize::from(c) + 1 + extra;
                    (r, u16::try_from(c.min(usize::from(cols) - 1)).unwrap())
                };
                new_cursor = (r, usize::from(c));
            }
        }
        let total = out.len().max(usize::from(rows));
        let skip = total - usize::from(rows);
        let mut parser = vt100::Parser::new(nz(rows), nz(cols), 2000);
        for (i, (text, wrapped)) in out.iter().enumerate() {
            parser.process(text.as_bytes());
            let full = keel::text::width(text) == usize::from(cols);
            if i + 1 < out.len() && !(*wrapped && full) {
                parser.process(b"\r\n");
            }
        }
        let screen_row = new_cursor.0.saturating_sub(skip);
        parser.process(format!("\x1b[{};{}H", screen_row + 1, new_cursor.1 + 1).as_bytes());
        self.parser = parser;
        let row = self.parser.screen().cursor_position().0;
        self.term.resize(cols, rows, Some(row));
    }

    /// Every row (scrollback, then screen) with the cells a reflow would move.
    fn raw_rows(&mut self, cols: u16) -> Vec<Row> {
        let screen = self.parser.screen_mut();
        screen.set_scrollback(usize::MAX);
        let back = screen.scrollback();
        let mut rows = Vec::new();
        let read = |screen: &vt100::Screen, y: u16| {
            let mut cells = Vec::new();
            let mut used = 0;
            for x in 0..cols {
                let Some(cell) = screen.cell(y, x) else { break };
                if cell.is_wide_continuation() {
                    continue;
                }
                let w = if cell.is_wide() { 2 } else { 1 };
                let s = match cell.has_contents() {
                    true => cell.contents().to_string(),
                    false => " ".to_string(),
                };
                cells.push((s, w));
                if cell.has_contents() {
                    used = cells.len();
                }
            }
            cells.truncate(used);
            Row {
                cells,
                wrapped: screen.row_wrapped(y),
            }
        };
        for offset in (1..=back).rev() {
            screen.set_scrollback(offset);
            rows.push(read(screen, 0));
        }
        screen.set_scrollback(0);
        let (height, _) = screen.size();
        for y in 0..height.get() {
            rows.push(read(screen, y));
        }
        rows
    }

    /// Scrollback then screen, one string per row, trailing spaces dropped.
    pub fn all_rows(&mut self) -> Vec<String> {
        let (_, cols) = self.parser.screen().size();
        self.raw_rows(cols.get())
            .into_iter()
            .map(|r| {
                let s: String = r.cells.into_iter().map(|(s, _)| s).collect();
                s.trim_end().to_string()
            })
            .collect()
    }

    pub fn screen_rows(&self) -> Vec<String> {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .map(|r| r.trim_end().to_string())
            .collect()
    }
}

/// Where the next `CSI K`, `CSI 0K`, `CSI J` or `CSI 0J` starts, and its length.
fn find_erase(bytes: &[u8]) -> Option<(usize, usize)> {
    let forms: [&[u8]; 4] = [b"\x1b[K", b"\x1b[0K", b"\x1b[J", b"\x1b[0J"];
    (0..bytes.len()).find_map(|i| {
        forms
            .iter()
            .find(|f| bytes[i..].starts_with(f))
            .map(|f| (i, f.len()))
    })
}
