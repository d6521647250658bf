//! The transcript pager (`/transcript`): the whole session on the terminal's alternate screen,
//! every thinking block, tool output and bash command in full, with scrolling and search.
//! Owns only the pager's state, keys and drawing into a buffer; the controller fetches the
//! session, switches screens and writes the buffer. Leaving it gives the inline view back
//! untouched (the alternate screen never writes into the scrollback).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::paint;
use super::transcript::{HistoryCell, Layout};

/// What a key asks of the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PagerKey {
    /// Redraw.
    Stay,
    /// Leave the pager.
    Close,
}

/// The pager over the cells of a session.
pub struct Pager {
    cells: Vec<HistoryCell>,
    /// The cells laid out at `width`, and each row's plain text (for search).
    lines: Vec<Line<'static>>,
    plain: Vec<String>,
    width: u16,
    /// The first row shown.
    top: usize,
    /// The search being typed after `/`.
    typing: Option<String>,
    /// The last search, and the rows that match it.
    query: String,
    matches: Vec<usize>,
    /// A one-line message on the bottom row (no match, …).
    note: Option<String>,
}

impl Pager {
    /// A pager over `cells`, scrolled to the end (the newest part of the session).
    pub fn new(cells: Vec<HistoryCell>) -> Pager {
        Pager {
            cells,
            lines: Vec::new(),
            plain: Vec::new(),
            width: 0,
            top: usize::MAX,
            typing: None,
            query: String::new(),
            matches: Vec::new(),
            note: None,
        }
    }

    /// Lays the cells out again for `width` columns (kept while the width is the same).
    fn layout(&mut self, width: u16) {
        if width == self.width && !self.lines.is_empty() {
            return;
        }
        let layout = Layout {
            show_thinking: true,
            expand_tools: true,
            full: true,
        };
        self.lines.clear();
        for (i, cell) in self.cells.iter().enumerate() {
            if i > 0 {
                self.lines.push(Line::default());
            }
            self.lines.extend(cell.lines(width, layout));
        }
        self.plain = self
            .lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        self.width = width;
        self.find();
    }

    /// Rows of text a screen of `rows` shows (the last row is the status line).
    fn page(rows: u16) -> usize {
        usize::from(rows.saturating_sub(1)).max(1)
    }

    fn last_top(&self, rows: u16) -> usize {
        self.lines.len().saturating_sub(Self::page(rows))
    }

    /// Handles a key on a screen `rows` high.
    pub fn key(&mut self, key: KeyEvent, rows: u16) -> PagerKey {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(typed) = &mut self.typing {
            match key.code {
                KeyCode::Enter => {
                    self.query = std::mem::take(typed);
                    self.typing = None;
                    self.find();
                    self.next_match(rows, true, true);
                }
                KeyCode::Esc => self.typing = None,
                KeyCode::Backspace => {
                    typed.pop();
                }
                KeyCode::Char('c') if ctrl => self.typing = None,
                KeyCode::Char(c) if !ctrl => typed.push(c),
                _ => {}
            }
            return PagerKey::Stay;
        }
        self.note = None;
        let page = Self::page(rows);
        let last = self.last_top(rows);
        let top = self.top.min(last);
        self.top = match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return PagerKey::Close,
            KeyCode::Char('c') if ctrl => return PagerKey::Close,
            KeyCode::Char('/') => {
                self.typing = Some(String::new());
                top
            }
            KeyCode::Char('n') => return self.next_match(rows, true, false),
            KeyCode::Char('N') => return self.next_match(rows, false, false),
            KeyCode::Up | KeyCode::Char('k') => top.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') | KeyCode::Enter => (top + 1).min(last),
            KeyCode::PageUp | KeyCode::Char('b') => top.saturating_sub(page),
            KeyCode::PageDown | KeyCode::Char(' ') => (top + page).min(last),
            KeyCode::Char('u') if ctrl => top.saturating_sub(page / 2),
            KeyCode::Char('d') if ctrl => (top + page / 2).min(last),
            KeyCode::Home | KeyCode::Char('g') => 0,
            KeyCode::End | KeyCode::Char('G') => last,
            _ => top,
        };
        PagerKey::Stay
    }

    /// The rows holding the query (case-insensitive).
    fn find(&mut self) {
        let q = self.query.to_lowercase();
        self.matches = match q.is_empty() {
            true => Vec::new(),
            false => (0..self.plain.len())
                .filter(|&i| self.plain[i].to_lowercase().contains(&q))
                .collect(),
        };
    }

    /// Scrolls to the next (or previous) match after the top row (`inclusive`: at it or after).
    fn next_match(&mut self, rows: u16, forward: bool, inclusive: bool) -> PagerKey {
        if self.query.is_empty() {
            return PagerKey::Stay;
        }
        let top = self.top.min(self.last_top(rows));
        let hit = match forward {
            true => self
                .matches
                .iter()
                .find(|&&m| m > top || (inclusive && m == top))
                .or(self.matches.first()),
            false => self
                .matches
                .iter()
                .rev()
                .find(|&&m| m < top)
                .or(self.matches.last()),
        };
        match hit {
            Some(&m) => self.top = m,
            None => self.note = Some(format!("no match for “{}”", self.query)),
        }
        PagerKey::Stay
    }

    /// Draws the pager on a whole screen.
    pub fn draw(&mut self, buf: &mut Buffer) {
        let Rect { width, height, .. } = buf.area;
        if width == 0 || height == 0 {
            return;
        }
        self.layout(width);
        let page = Self::page(height);
        let top = self.top.min(self.last_top(height));
        self.top = top;
        let q = self.query.to_lowercase();
        for (y, i) in (top..self.lines.len()).take(page).enumerate() {
            let mut line = self.lines[i].clone();
            if !q.is_empty() && self.matches.binary_search(&i).is_ok() {
                line = mark(&line, &self.plain[i], &q);
            }
            paint::put_line(buf, 0, y as u16, &line, width);
        }
        let status = match (&self.typing, &self.note) {
            (Some(typed), _) => format!("/{typed}"),
            (None, Some(note)) => note.clone(),
            (None, None) => {
                let end = (top + page).min(self.lines.len());
                let found = match self.matches.len() {
                    0 if self.query.is_empty() => String::new(),
                    1 => format!(" · 1 row matches “{}” (n/N)", self.query),
                    n => format!(" · {n} rows match “{}” (n/N)", self.query),
                };
                format!(
                    "transcript · rows {}–{end} of {}{found} · / search · q close",
                    (top + 1).min(end.max(1)),
                    self.lines.len()
                )
            }
        };
        let style = Style::default().add_modifier(Modifier::REVERSED);
        let bar = paint::fill_line(Line::styled(status, style), width as usize);
        paint::put_line(buf, 0, height - 1, &bar, width);
    }

    /// Where the cursor goes (typing a search), else `None`.
    pub fn cursor(&self, buf: &Buffer) -> Option<(u16, u16)> {
        let typed = self.typing.as_ref()?;
        let x = crate::text::width(typed) + 1;
        let w = buf.area.width.saturating_sub(1);
        Some(((x as u16).min(w), buf.area.height.saturating_sub(1)))
    }
}

/// `line` with the first occurrence of `q` (lowercase) in its text shown reversed.
fn mark(line: &Line<'static>, plain: &str, q: &str) -> Line<'static> {
    let lower = plain.to_lowercase();
    // Lowercasing may change byte lengths: mark only when it kept them.
    let Some(at) = lower.find(q).filter(|_| lower.len() == plain.len()) else {
        return line.clone();
    };
    let (start, end) = (at, at + q.len());
    let mut spans = Vec::new();
    let mut pos = 0;
    for s in &line.spans {
        let text = s.content.as_ref();
        let (a, b) = (pos, pos + text.len());
        pos = b;
        if b <= start || a >= end {
            spans.push(s.clone());
            continue;
        }
        let cut = |i: usize| i.clamp(a, b) - a;
        let (x, y) = (cut(start), cut(end));
        let (Some(before), Some(hit), Some(after)) = (text.get(..x), text.get(x..y), text.get(y..))
        else {
            spans.push(s.clone());
            continue;
        };
        for (part, style) in [
            (before, s.style),
            (hit, s.style.add_modifier(Modifier::REVERSED)),
            (after, s.style),
        ] {
            if !part.is_empty() {
                spans.push(Span::styled(part.to_string(), style));
            }
        }
    }
    Line::from(spans).style(line.style)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::front::tui::transcript::FinishedTool;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn screen(p: &mut Pager, w: u16, h: u16) -> Vec<String> {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        p.draw(&mut buf);
        (0..h)
            .map(|y| paint::row_text(&buf, y).trim_end().to_string())
            .collect()
    }

    fn cells() -> Vec<HistoryCell> {
        let output: String = (1..=60).map(|i| format!("line {i}\n")).collect();
        vec![
            HistoryCell::User("run it".into()),
            HistoryCell::Thinking("first I think\nthen I act".into()),
            HistoryCell::Tool(FinishedTool {
                name: "bash".into(),
                args: serde_json::json!({"command": "seq 60 | sed 's/^/line /'"}),
                text: output,
                details: Some(serde_json::json!({"exitCode": 0})),
                is_error: false,
                duration_ms: 5,
            }),
            HistoryCell::Notice("the end".into()),
        ]
    }

    #[test]
    fn it_opens_at_the_end_with_every_output_line_and_the_thinking_in_full() {
        let mut p = Pager::new(cells());
        let shown = screen(&mut p, 60, 10);
        assert!(shown[8].contains("the end"), "{shown:?}");
        assert!(shown[9].starts_with("transcript · rows"), "{shown:?}");
        p.key(key(KeyCode::Home), 10);
        let all: Vec<String> = (0..20)
            .flat_map(|_| {
                let rows = screen(&mut p, 60, 10);
                p.key(key(KeyCode::PageDown), 10);
                rows.into_iter().take(9)
            })
            .collect();
        let text = all.join("\n");
        assert!(text.contains("then I act"), "thinking in full");
        for i in [1, 30, 60] {
            assert!(text.contains(&format!("line {i}")), "output line {i}");
        }
    }

    #[test]
    fn search_jumps_to_matches_and_n_goes_round() {
        let mut p = Pager::new(cells());
        screen(&mut p, 60, 10);
        p.key(key(KeyCode::Home), 10);
        for c in "/LINE 4".chars() {
            p.key(key(KeyCode::Char(c)), 10);
        }
        assert_eq!(screen(&mut p, 60, 10)[9], "/LINE 4");
        p.key(key(KeyCode::Enter), 10);
        let shown = screen(&mut p, 60, 10);
        assert!(shown[0].contains("line 4"), "{shown:?}");
        assert!(shown[9].contains("11 rows match “LINE 4”"), "{shown:?}");
        p.key(key(KeyCode::Char('n')), 10);
        assert!(screen(&mut p, 60, 10)[0].contains("line 40"));
        p.key(key(KeyCode::Char('N')), 10);
        assert!(screen(&mut p, 60, 10)[0].contains("line 4"));
        for c in "/nowhere".chars() {
            p.key(key(KeyCode::Char(c)), 10);
        }
        p.key(key(KeyCode::Enter), 10);
        assert_eq!(screen(&mut p, 60, 10)[9], "no match for “nowhere”");
        assert_eq!(p.key(key(KeyCode::Char('q')), 10), PagerKey::Close);
    }

    #[test]
    fn a_match_is_shown_reversed() {
        let line = Line::from(vec![Span::raw("ab"), Span::raw("cd")]);
        let marked = mark(&line, "abcd", "bc");
        let parts: Vec<(&str, bool)> = marked
            .spans
            .iter()
            .map(|s| {
                let rev = s.style.add_modifier.contains(Modifier::REVERSED);
                (s.content.as_ref(), rev)
            })
            .collect();
        assert_eq!(
            parts,
            [("a", false), ("b", true), ("c", true), ("d", false)]
        );
    }
}
