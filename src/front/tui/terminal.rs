//! The inline-viewport terminal renderer: turns finished transcript lines and a painted live
//! area into terminal bytes. History goes into the terminal's own scrollback (pushed there with
//! DECSTBM scroll regions); the live area at the bottom of the used screen is redrawn
//! differentially. It never switches to the alternate screen, never erases the whole screen or
//! the scrollback (`CSI 2J` / `CSI 3J`), and never touches rows above where it started.

use std::io::{self, Write};

use crossterm::cursor::{Hide, MoveTo, Show};
use crossterm::queue;
use crossterm::style::{Print, PrintStyledContent, StyledContent};
use crossterm::terminal::{BeginSynchronizedUpdate, Clear, ClearType, EndSynchronizedUpdate};
use ratatui::backend::{Backend, CrosstermBackend, IntoCrossterm};
use ratatui::buffer::{Buffer, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;

use super::paint;

/// Reverse Index: moves the cursor up, scrolling the region down when at its top margin.
const REVERSE_INDEX: &[u8] = b"\x1bM";
/// Autowrap off / on around history: a line the terminal measures wider than we did is clipped
/// at the right edge instead of wrapping into the row below.
const AUTOWRAP_OFF: &[u8] = b"\x1b[?7l";
const AUTOWRAP_ON: &[u8] = b"\x1b[?7h";
/// Resets the scroll region to the whole screen (and homes the cursor).
const RESET_REGION: &[u8] = b"\x1b[r";

/// Renders frames into an inline viewport on a terminal written through `W`.
///
/// The live area occupies rows `top .. top + height` of the screen; an empty live area still
/// reserves one blank row at `top` (where the shell prompt goes at exit). Everything above `top`
/// is history or the user's own output and is only ever scrolled, never redrawn.
pub struct InlineTerminal<W: Write> {
    out: W,
    cols: u16,
    rows: u16,
    /// Absolute screen row of the live area's first row.
    top: u16,
    /// Rows of the live area as it is on screen.
    height: u16,
    /// The live area as it is on screen; `None` = unknown (erase it and draw everything).
    prev: Option<Buffer>,
    /// Where the hardware cursor was left (absolute column, row).
    cursor_at: (u16, u16),
    full_redraw: bool,
    /// `NO_COLOR`: colours are dropped from every cell and history line (modifiers stay).
    no_color: bool,
    /// The frame being built, written to `out` with one call.
    scratch: Vec<u8>,
}

/// What one `frame` call wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameStats {
    /// Bytes written to the terminal, synchronized-output wrapper included.
    pub bytes: usize,
    /// Live-area cells written.
    pub cells: usize,
    /// History lines inserted above the live area.
    pub history_lines: usize,
}

impl<W: Write> InlineTerminal<W> {
    /// `cols`x`rows` is the screen; `cursor_row` (0-based) is where the cursor is when the TUI
    /// starts: the live area begins there (everything above is the user's, never touched).
    pub fn new(out: W, cols: u16, rows: u16, cursor_row: u16) -> Self {
        let rows = rows.max(1);
        let top = cursor_row.min(rows - 1);
        Self {
            out,
            cols: cols.max(1),
            rows,
            top,
            height: 0,
            prev: None,
            cursor_at: (0, top),
            full_redraw: false,
            no_color: false,
            scratch: Vec::new(),
        }
    }

    /// One frame, as one write wrapped in `CSI ?2026h` … `CSI ?2026l` and flushed once:
    /// `history` lines (cut to the width) go into scrollback above the live area, then the live
    /// area of `height` rows (capped at rows-1) is painted by `paint` into a viewport-relative
    /// buffer and only the cells that changed since the last frame are written. `cursor`
    /// (viewport-relative) places and shows the hardware cursor; `None` hides it.
    pub fn frame(
        &mut self,
        history: &[Line<'_>],
        height: u16,
        paint: impl FnOnce(&mut Buffer),
        cursor: Option<(u16, u16)>,
    ) -> io::Result<FrameStats> {
        self.scratch.clear();
        queue!(self.scratch, BeginSynchronizedUpdate)?;
        let header = self.scratch.len();
        if self.prev.is_none() {
            self.erase_live()?;
        }
        // Shrink before inserting history (the freed rows take history without scrolling),
        // grow after it.
        let height = height.min(self.rows - 1);
        if height < self.height {
            self.set_height(height)?;
        }
        self.insert_history(history)?;
        self.set_height(height)?;
        let mut buf = Buffer::empty(Rect::new(0, 0, self.cols, self.height));
        paint(&mut buf);
        if self.no_color {
            for cell in &mut buf.content {
                cell.fg = ratatui::style::Color::Reset;
                cell.bg = ratatui::style::Color::Reset;
            }
        }
        let cells = self.draw(&buf)?;
        self.prev = Some(buf);
        self.place_cursor(cursor, self.scratch.len() > header)?;
        queue!(self.scratch, EndSynchronizedUpdate)?;
        self.flush_scratch()?;
        Ok(FrameStats {
            bytes: self.scratch.len(),
            cells,
            history_lines: history.len(),
        })
    }

    /// The screen size changed. `cursor_row` is the real cursor row if the caller could query
    /// it (terminals that reflow move content; the live area moves with the cursor), else
    /// `None` (keep the viewport top, clamped). The next frame erases the old live area from
    /// its top down and draws it in full; scrollback is never cleared.
    pub fn resize(&mut self, cols: u16, rows: u16, cursor_row: Option<u16>) {
        let rows = rows.max(1);
        let top = match cursor_row {
            // The cursor did not move: the terminal did not reflow (xterm), the live area is
            // where it was.
            Some(row) if row == self.cursor_at.1 => i32::from(self.top.min(rows - 1)),
            Some(row) => {
                // A terminal that reflows (VTE, kitty, tmux) rewraps the live rows above the
                // cursor at the new width: each takes as many rows as its drawn text needs now.
                let above = self.reflowed_rows_above_cursor(cols.max(1));
                (i32::from(row) - above).clamp(0, i32::from(rows) - 1)
            }
            None => i32::from(self.top.min(rows - 1)),
        };
        tracing::debug!(
            "resize to {cols}x{rows}: cursor row {cursor_row:?}, live top {} → {top}",
            self.top
        );
        self.top = u16::try_from(top).unwrap_or(0);
        self.cols = cols.max(1);
        self.rows = rows;
        self.prev = None;
        self.cursor_at = (0, cursor_row.unwrap_or(self.top).min(rows - 1));
    }

    /// The live area starts again at row `row` of a `cols`x`rows` screen, unknown (the next
    /// frame draws it in full); used after a suspension, when the shell wrote below it.
    pub fn start_at(&mut self, cols: u16, rows: u16, row: u16) {
        self.cols = cols.max(1);
        self.rows = rows.max(1);
        self.top = row.min(self.rows - 1);
        self.height = 0;
        self.prev = None;
        self.cursor_at = (0, self.top);
    }

    /// Rows the live area's rows above the cursor take after a reflow to `cols` columns (the
    /// cursor's own row offset when nothing is known or the width did not shrink).
    fn reflowed_rows_above_cursor(&self, cols: u16) -> i32 {
        let offset = i32::from(self.cursor_at.1) - i32::from(self.top);
        let Some(prev) = self
            .prev
            .as_ref()
            .filter(|_| cols < self.cols && offset > 0)
        else {
            return offset;
        };
        let mut total = 0;
        for y in 0..(offset as u16).min(prev.area.height) {
            let drawn = (0..prev.area.width)
                .rev()
                .find(|&x| prev[(x, y)].symbol() != " ")
                .map_or(0, |x| i32::from(x) + 1);
            total += ((drawn + i32::from(cols) - 1) / i32::from(cols)).max(1);
        }
        total
    }

    /// Erases the live area and leaves the cursor, shown, at column 0 of its top row (at exit,
    /// so the shell prompt follows the transcript). Wrapped in synchronized output too.
    pub fn clear_live(&mut self) -> io::Result<()> {
        self.scratch.clear();
        queue!(self.scratch, BeginSynchronizedUpdate)?;
        self.erase_live()?;
        queue!(self.scratch, Show, EndSynchronizedUpdate)?;
        self.cursor_at = (0, self.top);
        self.flush_scratch()
    }

    /// Erases the whole screen and its scrollback (`/clear`); the live area starts again at
    /// the top and the next frame draws it in full.
    pub fn clear_all(&mut self) -> io::Result<()> {
        self.scratch.clear();
        self.scratch.extend_from_slice(b"\x1b[H\x1b[2J\x1b[3J");
        self.top = 0;
        self.height = 0;
        self.prev = None;
        self.cursor_at = (0, 0);
        self.flush_scratch()
    }

    /// Benchmarks: when on, every frame rewrites every cell of the live area (the "full
    /// redraw" baseline); off by default.
    pub fn set_full_redraw(&mut self, on: bool) {
        self.full_redraw = on;
    }

    /// `NO_COLOR`: draw without colours from now on (bold, dim, italic and reverse stay).
    pub fn set_no_color(&mut self, on: bool) {
        self.no_color = on;
    }

    /// The live area in absolute screen coordinates.
    pub fn viewport(&self) -> Rect {
        Rect::new(0, self.top, self.cols, self.height)
    }

    /// The screen size as (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        (self.cols, self.rows)
    }

    /// The writer the frames go to.
    pub fn writer(&self) -> &W {
        &self.out
    }

    /// The writer the frames go to, mutably.
    pub fn writer_mut(&mut self) -> &mut W {
        &mut self.out
    }

    fn flush_scratch(&mut self) -> io::Result<()> {
        self.out.write_all(&self.scratch)?;
        self.out.flush()
    }

    /// Rows the live area occupies on screen: an empty one still keeps its blank top row.
    fn footprint(&self) -> u16 {
        self.height.max(1)
    }

    /// Clears from the live area's top row down; the live area is then empty and known.
    fn erase_live(&mut self) -> io::Result<()> {
        queue!(
            self.scratch,
            MoveTo(0, self.top),
            Clear(ClearType::FromCursorDown)
        )?;
        self.height = 0;
        self.prev = Some(Buffer::empty(Rect::new(0, 0, self.cols, 0)));
        Ok(())
    }

    /// Puts `history` into the rows above the live area: first into free rows below it (the
    /// live area is pushed down with Reverse Index, so it need not be redrawn), then by
    /// scrolling the region above it, whose top lines go to the terminal's scrollback.
    fn insert_history(&mut self, history: &[Line<'_>]) -> io::Result<()> {
        let lines: Vec<Line<'static>> = history
            .iter()
            .map(|l| paint::truncate_line(l, usize::from(self.cols)))
            .collect();
        if lines.is_empty() {
            return Ok(());
        }
        self.scratch.extend_from_slice(AUTOWRAP_OFF);
        let free = self.rows.saturating_sub(self.top + self.footprint());
        let k = lines.len().min(usize::from(free));
        if k > 0 {
            self.push_live_down(&lines[..k])?;
        }
        let rest = &lines[k..];
        if !rest.is_empty() && self.top >= 2 {
            self.scroll_region_above(rest)?;
        } else if !rest.is_empty() {
            self.scroll_whole_screen(rest)?;
        }
        self.scratch.extend_from_slice(AUTOWRAP_ON);
        Ok(())
    }

    /// Pushes the live area down by `lines.len()` rows (all free below it) and writes the
    /// lines into the rows it left.
    fn push_live_down(&mut self, lines: &[Line<'_>]) -> io::Result<()> {
        write!(self.scratch, "\x1b[{};{}r", self.top + 1, self.rows)?;
        queue!(self.scratch, MoveTo(0, self.top))?;
        for _ in lines {
            self.scratch.extend_from_slice(REVERSE_INDEX);
        }
        self.scratch.extend_from_slice(RESET_REGION);
        queue!(self.scratch, MoveTo(0, self.top))?;
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                queue!(self.scratch, Print("\r\n"))?;
            }
            self.write_line(line)?;
        }
        self.top += lines.len() as u16;
        Ok(())
    }

    /// With the live area at the bottom: scrolls rows `0 .. top` up once per line (the top
    /// row goes to scrollback) and writes each line into the freed row just above the live
    /// area. Needs `top >= 2` (a one-row scroll region is not valid).
    fn scroll_region_above(&mut self, lines: &[Line<'_>]) -> io::Result<()> {
        write!(self.scratch, "\x1b[1;{}r", self.top)?;
        queue!(self.scratch, MoveTo(0, self.top - 1))?;
        for line in lines {
            queue!(self.scratch, Print("\r\n"))?;
            self.write_line(line)?;
        }
        self.scratch.extend_from_slice(RESET_REGION);
        Ok(())
    }

    /// Fallback when fewer than two rows are above the live area: scrolls the whole screen
    /// once per line (the live area moves too) and erases the live area for a full redraw.
    fn scroll_whole_screen(&mut self, lines: &[Line<'_>]) -> io::Result<()> {
        let bottom = self.rows - 1;
        for line in lines {
            if self.top == 0 {
                // The line scrolls straight off the top row into scrollback.
                queue!(self.scratch, MoveTo(0, 0))?;
                self.write_line(line)?;
                queue!(self.scratch, MoveTo(0, bottom), Print("\n"))?;
            } else {
                queue!(self.scratch, MoveTo(0, bottom), Print("\n"))?;
                queue!(self.scratch, MoveTo(0, self.top - 1))?;
                self.write_line(line)?;
            }
        }
        self.erase_live()
    }

    /// Writes one history line at the cursor: the row is cleared first (so a full-width line
    /// is never cut by a clear in the pending-wrap state), each span with its own SGR and a
    /// reset after it.
    fn write_line(&mut self, line: &Line<'_>) -> io::Result<()> {
        queue!(self.scratch, Clear(ClearType::UntilNewLine))?;
        for span in &line.spans {
            let mut style = line.style.patch(span.style);
            if self.no_color {
                (style.fg, style.bg, style.underline_color) = (None, None, None);
            }
            if style == Style::default() {
                queue!(self.scratch, Print(&span.content))?;
            } else {
                let styled = StyledContent::new(style.into_crossterm(), &span.content);
                queue!(self.scratch, PrintStyledContent(styled))?;
            }
        }
        Ok(())
    }

    /// Changes the live area's height. Shrinking clears the rows given up; growing past the
    /// bottom scrolls the whole screen up (the top rows go to scrollback) and moves `top` up.
    /// The live area keeps its content on screen either way, so the previous buffer is only
    /// cut or extended with blank rows.
    fn set_height(&mut self, height: u16) -> io::Result<()> {
        if height < self.height {
            queue!(
                self.scratch,
                MoveTo(0, self.top + height),
                Clear(ClearType::FromCursorDown)
            )?;
        } else if height > self.height {
            let needed = self.top + height.max(1);
            if needed > self.rows {
                let lift = needed - self.rows;
                queue!(self.scratch, MoveTo(0, self.rows - 1))?;
                for _ in 0..lift {
                    queue!(self.scratch, Print("\n"))?;
                }
                self.top -= lift;
            }
        }
        self.height = height;
        if let Some(prev) = &mut self.prev {
            prev.resize(Rect::new(0, 0, self.cols, height));
        }
        Ok(())
    }

    /// Writes the cells of `buf` that differ from what is on screen (every cell in full-redraw
    /// mode), at absolute rows. Returns how many cells were written.
    fn draw(&mut self, buf: &Buffer) -> io::Result<usize> {
        let forced;
        let next = if self.full_redraw {
            forced = always_update(buf);
            &forced
        } else {
            buf
        };
        let blank;
        let prev = match &self.prev {
            Some(prev) if prev.area == buf.area => prev,
            _ => {
                blank = Buffer::empty(buf.area);
                &blank
            }
        };
        let top = self.top;
        let diff = prev.diff(next);
        if diff.is_empty() {
            return Ok(0);
        }
        let cells = diff.len();
        // A row whose end got shorter is erased from column 0 and written again, never
        // blanked with spaces or erased from the middle: a terminal that reflows (tmux 3.3)
        // keeps counting those cells as text, so on a narrowing the row would rewrap into
        // more rows than the resize expects and be left behind above the redrawn live area.
        let height = usize::from(buf.area.height);
        let mut ends = vec![buf.area.width; height];
        let mut rewrite = vec![false; height];
        if !self.full_redraw {
            let mut known = vec![false; height];
            for (x, y, _) in &diff {
                let y = usize::from(*y);
                if !known[y] {
                    ends[y] = text_end(buf, y as u16);
                    known[y] = true;
                }
                rewrite[y] |= *x >= ends[y];
            }
        }
        for (y, _) in rewrite.iter().enumerate().filter(|(_, r)| **r) {
            queue!(
                self.scratch,
                MoveTo(0, top + y as u16),
                Clear(ClearType::UntilNewLine)
            )?;
        }
        let kept = diff
            .into_iter()
            .filter(|(_, y, _)| !rewrite[usize::from(*y)]);
        let rewritten = rewrite
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .flat_map(|(y, _)| row_cells(buf, y as u16, ends[y]));
        let absolute = kept.chain(rewritten).map(|(x, y, cell)| (x, y + top, cell));
        CrosstermBackend::new(&mut self.scratch).draw(absolute)?;
        Ok(cells)
    }

    /// Moves the hardware cursor into the live area and shows it, or hides it (parked at the
    /// live area's top-left). The move is skipped when nothing moved it since the last frame.
    fn place_cursor(&mut self, cursor: Option<(u16, u16)>, moved: bool) -> io::Result<()> {
        let target = match cursor {
            Some((x, y)) => (x.min(self.cols - 1), self.top + y.min(self.footprint() - 1)),
            None => (0, self.top),
        };
        if moved || target != self.cursor_at {
            queue!(self.scratch, MoveTo(target.0, target.1))?;
        }
        self.cursor_at = target;
        match cursor {
            Some(_) => queue!(self.scratch, Show),
            None => queue!(self.scratch, Hide),
        }
    }
}

/// The column after the last cell of row `y` of `buf` that is not a default blank (wide
/// clusters and forced widths included).
fn text_end(buf: &Buffer, y: u16) -> u16 {
    let area = buf.area;
    let y = area.y + y;
    let mut end = 0;
    for x in area.left()..area.right() {
        let cell = &buf[(x, y)];
        if !is_blank(cell) {
            end = end.max(x - area.left() + cell.cell_width().max(1));
        }
    }
    end.min(area.width)
}

/// The cells of row `y` of `buf` before column `end` that a freshly erased row needs: not the
/// default blanks, nor the cells a wide cluster covers.
fn row_cells(buf: &Buffer, y: u16, end: u16) -> Vec<(u16, u16, &ratatui::buffer::Cell)> {
    let mut out = Vec::new();
    let mut x = 0;
    while x < end {
        let cell = &buf[(buf.area.x + x, buf.area.y + y)];
        if !is_blank(cell) && cell.diff_option != CellDiffOption::Skip {
            out.push((x, y, cell));
        }
        x += cell.cell_width().max(1);
    }
    out
}

fn is_blank(cell: &ratatui::buffer::Cell) -> bool {
    cell.symbol() == " "
        && cell.fg == ratatui::style::Color::Reset
        && cell.bg == ratatui::style::Color::Reset
        && cell.modifier.is_empty()
}

/// A copy of `buf` whose every cell the diff writes, changed or not (cells with a forced width
/// or marked skip keep their option).
fn always_update(buf: &Buffer) -> Buffer {
    let mut forced = buf.clone();
    for cell in &mut forced.content {
        if cell.diff_option == CellDiffOption::None {
            cell.set_diff_option(CellDiffOption::AlwaysUpdate);
        }
    }
    forced
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
