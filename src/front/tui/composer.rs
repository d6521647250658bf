//! The prompt composer: a multi-line text editor over grapheme clusters, with prompt history
//! and a width-bounded layout. Owns only its text, cursor and history; it never draws to the
//! terminal, reads the environment or decides what a submitted prompt means.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use crate::text;

mod paste;
pub use paste::{max_rows, CHIP_CHARS, CHIP_LINES, MAX_ROWS};

/// The composer's lines; never empty (an empty text is one empty line).
#[derive(Debug)]
struct Lines(Vec<String>);

impl Default for Lines {
    fn default() -> Self {
        Lines(vec![String::new()])
    }
}

/// A multi-line prompt editor. The cursor is a (line, byte offset) pair whose offset always
/// sits on a grapheme-cluster boundary, so one Left press crosses a ZWJ emoji, a flag or a
/// letter with combining marks at once.
///
/// History is browsed with Up on the first line and Down on the last one; the text being
/// written when browsing starts (the draft) is restored after the newest entry. Edits made to
/// a recalled entry are dropped when browsing moves on.
#[derive(Debug, Default)]
pub struct Composer {
    lines: Lines,
    row: usize,
    col: usize,
    /// Display column kept across consecutive Up/Down presses.
    goal: Option<usize>,
    history: Vec<String>,
    /// Index of the history entry shown, while browsing.
    browsing: Option<usize>,
    /// The text that was there when browsing started.
    draft: Option<String>,
    /// The texts of big pastes, shown as chips (`composer/paste.rs`).
    chips: Vec<String>,
}

impl Composer {
    /// An empty composer with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The text: lines joined with `\n`, pasted chips expanded to what was pasted.
    pub fn text(&self) -> String {
        self.expand(&self.raw())
    }

    /// The text with chips as their one character each.
    fn raw(&self) -> String {
        self.lines.0.join("\n")
    }

    /// Whether there are no characters at all (a lone newline is not empty).
    pub fn is_empty(&self) -> bool {
        self.lines.0.len() == 1 && self.lines.0[0].is_empty()
    }

    /// Replaces everything with `s` (normalized like [`Composer::insert_str`]) and puts the
    /// cursor at the end. Ends history browsing.
    pub fn set_text(&mut self, s: &str) {
        self.load(&normalize(s));
        self.chips.clear();
        self.stop_browsing();
    }

    /// Empties the editor and ends history browsing.
    pub fn clear(&mut self) {
        self.set_text("");
    }

    /// Returns the text and clears the editor; a text that is not blank is appended to the
    /// history (not if equal to the newest entry); history browsing resets.
    pub fn take(&mut self) -> String {
        let s = self.text();
        if !s.trim().is_empty() && self.history.last() != Some(&s) {
            self.history.push(s.clone());
        }
        self.clear();
        s
    }

    /// Inserts at the cursor: CRLF and CR become LF, tabs become 4 spaces, other control
    /// characters are dropped. The cursor ends after the inserted text.
    pub fn insert_str(&mut self, s: &str) {
        let s = normalize(s);
        let tail = self.lines.0[self.row].split_off(self.col);
        let mut pieces = s.split('\n');
        if let Some(first) = pieces.next() {
            self.lines.0[self.row].push_str(first);
        }
        for piece in pieces {
            self.row += 1;
            self.lines.0.insert(self.row, piece.to_string());
        }
        let line = &mut self.lines.0[self.row];
        let col = line.len();
        line.push_str(&tail);
        // Inserted text can merge with its neighbours into one cluster: keep to a boundary.
        self.col = boundary_at_or_after(line, col);
    }

    /// The word the cursor is at the end of: the text of the cursor's line from the last
    /// whitespace before the cursor up to it (`@src/ma` while a mention is typed).
    pub fn word_before_cursor(&self) -> &str {
        let line = &self.lines.0[self.row];
        let before = &line[..self.col];
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        &before[start..]
    }

    /// Replaces [`Composer::word_before_cursor`] with `with`; the cursor ends after it.
    pub fn replace_word_before_cursor(&mut self, with: &str) {
        let start = self.col - self.word_before_cursor().len();
        let line = &mut self.lines.0[self.row];
        line.replace_range(start..self.col, "");
        self.col = start;
        self.insert_str(with);
        self.stop_browsing();
    }

    /// Replaces the history (oldest first) and ends history browsing.
    pub fn set_history(&mut self, entries: Vec<String>) {
        self.history = entries;
        self.stop_browsing();
    }

    /// The history, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// Applies an editing key (`Press` and `Repeat`; a `Release` is ignored and gives false).
    /// Returns false for keys the composer does not own, which the caller handles: plain
    /// Enter, Alt+Enter, Esc, Ctrl+C, Ctrl+D, Tab, BackTab, PageUp/PageDown, F-keys, other
    /// Ctrl/Alt chords, and Up/Down when there is no line to move to and no history step.
    pub fn handle_key(&mut self, key: KeyEvent) -> bool {
        if key.kind == KeyEventKind::Release {
            return false;
        }
        let owned = self.dispatch(key);
        if owned && !matches!(key.code, KeyCode::Up | KeyCode::Down) {
            self.goal = None;
        }
        owned
    }

    /// Lays the text out for `width` columns: the first row starts with `prompt`, every other
    /// row with spaces of the prompt's width. Rows hard-wrap on grapheme clusters; a cursor at
    /// the end of an exactly full row is shown at the start of an extra row. Returns the rows
    /// and the cursor (x, y) inside them. An empty composer shows the dim `placeholder`.
    /// When `width` leaves less than two columns after the prompt, the prompt is left out.
    pub fn render(
        &self,
        width: u16,
        prompt: &str,
        placeholder: Option<&str>,
    ) -> (Vec<Line<'static>>, (u16, u16)) {
        let width = usize::from(width);
        if width == 0 {
            return (vec![Line::default()], (0, 0));
        }
        let mut prompt = text::sanitize(prompt);
        if text::width(&prompt) + 2 > width {
            prompt.clear();
        }
        let pw = text::width(&prompt);
        let avail = width - pw;
        let prompt_span = Span::styled(prompt, Style::default().add_modifier(Modifier::BOLD));
        if let (true, Some(hint)) = (self.is_empty(), placeholder) {
            let hint = clip(&text::sanitize(hint), avail);
            let dim = Style::default().add_modifier(Modifier::DIM);
            let line = Line::from(vec![prompt_span, Span::styled(hint, dim)]);
            return (vec![line], (to_u16(pw), 0));
        }
        let (rows, (x, y)) = self.layout(avail);
        let indent = " ".repeat(pw);
        let mut lead = prompt_span;
        let mut lines = Vec::with_capacity(rows.len());
        for row in rows {
            let next = Span::raw(indent.clone());
            lines.push(Line::from(vec![
                std::mem::replace(&mut lead, next),
                Span::raw(row),
            ]));
        }
        (lines, (to_u16(pw + x), to_u16(y)))
    }

    /// Wraps every logical line to `avail` (at least 1) columns; returns the rows and the
    /// cursor (column inside its row, row index).
    fn layout(&self, avail: usize) -> (Vec<String>, (usize, usize)) {
        let mut rows = Vec::new();
        let mut cursor = (0, 0);
        for (li, line) in self.lines.0.iter().enumerate() {
            let mut row = String::new();
            let mut used = 0;
            for (i, g) in line.grapheme_indices(true) {
                let shown = self.shown(g);
                let mut gw = paste::shown_width(&shown);
                // A chip's label is cut to the width; else (only at width 1) a wide cluster
                // that fits nowhere is shown as a space.
                let g = match (gw > avail, shown) {
                    (false, shown) => shown,
                    (true, std::borrow::Cow::Owned(label)) => clip(&label, avail).into(),
                    (true, _) => " ".into(),
                };
                gw = gw.min(avail);
                if used + gw > avail && used > 0 {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                if li == self.row && i == self.col {
                    cursor = (used, rows.len());
                }
                row.push_str(&g);
                used += gw;
            }
            if li == self.row && self.col == line.len() {
                if used >= avail {
                    rows.push(std::mem::take(&mut row));
                    used = 0;
                }
                cursor = (used, rows.len());
            }
            rows.push(row);
        }
        (rows, cursor)
    }

    fn dispatch(&mut self, key: KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            KeyCode::Char(c) => return self.char_key(c, ctrl, alt),
            KeyCode::Enter => return self.enter_key(key.modifiers),
            KeyCode::Backspace if ctrl || alt => self.delete_word(),
            KeyCode::Backspace => self.backspace(),
            KeyCode::Delete => self.delete(),
            KeyCode::Left if ctrl || alt => self.word_left(),
            KeyCode::Left => self.left(),
            KeyCode::Right if ctrl || alt => self.word_right(),
            KeyCode::Right => self.right(),
            KeyCode::Home => self.col = 0,
            KeyCode::End => self.col = self.line().len(),
            KeyCode::Up => return self.up(),
            KeyCode::Down => return self.down(),
            _ => return false,
        }
        true
    }

    fn char_key(&mut self, c: char, ctrl: bool, alt: bool) -> bool {
        match (ctrl, alt) {
            // Ctrl+Alt with a non-letter is AltGr on Windows: it types a character.
            (false, false) | (true, true) if !c.is_control() => {
                if ctrl && c.is_ascii_alphabetic() {
                    return false;
                }
                self.insert_str(c.encode_utf8(&mut [0; 4]));
            }
            (true, false) => match c.to_ascii_lowercase() {
                'a' => self.col = 0,
                'e' => self.col = self.line().len(),
                'u' => self.delete_back_to(0),
                'k' => self.kill_to_end(),
                // Terminals that send ^H for Backspace.
                'h' => self.backspace(),
                'w' => self.delete_word(),
                'j' => self.insert_str("\n"),
                _ => return false,
            },
            (false, true) => match c {
                'b' => self.word_left(),
                'f' => self.word_right(),
                _ => return false,
            },
            _ => return false,
        }
        true
    }

    /// Shift+Enter inserts a newline, and so does plain Enter after a backslash (which it
    /// removes); plain Enter otherwise, Alt+Enter and Ctrl+Enter belong to the caller.
    fn enter_key(&mut self, mods: KeyModifiers) -> bool {
        if mods.intersects(KeyModifiers::ALT | KeyModifiers::CONTROL) {
            return false;
        }
        if !mods.contains(KeyModifiers::SHIFT) {
            if !self.line()[..self.col].ends_with('\\') {
                return false;
            }
            self.col -= 1;
            self.lines.0[self.row].remove(self.col);
        }
        self.insert_str("\n");
        true
    }

    fn line(&self) -> &str {
        &self.lines.0[self.row]
    }

    /// Replaces the text (already normalized; chips kept) without touching the browsing state;
    /// cursor at the end.
    fn load(&mut self, s: &str) {
        self.lines = Lines(s.split('\n').map(str::to_string).collect());
        self.row = self.lines.0.len() - 1;
        self.col = self.line().len();
        self.goal = None;
    }

    fn stop_browsing(&mut self) {
        self.browsing = None;
        self.draft = None;
    }

    fn left(&mut self) {
        if self.col > 0 {
            self.col = prev_boundary(self.line(), self.col);
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.line().len();
        }
    }

    fn right(&mut self) {
        if self.col < self.line().len() {
            self.col = next_boundary(self.line(), self.col);
        } else if self.row + 1 < self.lines.0.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    fn delete_word(&mut self) {
        self.delete_back_to(word_start_before(self.line(), self.col));
    }

    fn word_left(&mut self) {
        if self.col == 0 {
            self.left();
        } else {
            self.col = word_start_before(self.line(), self.col);
        }
    }

    fn word_right(&mut self) {
        if self.col == self.line().len() {
            self.right();
        } else {
            self.col = word_end_after(self.line(), self.col);
        }
    }

    /// Removes the cluster before the cursor, or joins with the previous line at its start.
    fn backspace(&mut self) {
        let end = (self.row, self.col);
        self.left();
        self.remove_to(end);
    }

    /// Removes the cluster after the cursor, or joins the next line at the line end.
    fn delete(&mut self) {
        let start = (self.row, self.col);
        self.right();
        let end = (self.row, self.col);
        (self.row, self.col) = start;
        self.remove_to(end);
    }

    /// Deletes from byte `start` of the line to the cursor (Ctrl+W, Ctrl+U); at the line
    /// start, joins with the previous line instead.
    fn delete_back_to(&mut self, start: usize) {
        if self.col == 0 {
            self.backspace();
        } else {
            let end = self.col;
            self.col = start;
            self.remove_to((self.row, end));
        }
    }

    /// Ctrl+K: deletes to the line end; at the line end, joins the next line.
    fn kill_to_end(&mut self) {
        if self.col == self.line().len() {
            self.delete();
        } else {
            let end = self.line().len();
            self.remove_to((self.row, end));
        }
    }

    /// Removes the text from the cursor up to `end` (row, byte), which is not before it.
    fn remove_to(&mut self, end: (usize, usize)) {
        let (end_row, end_col) = end;
        if end_row == self.row {
            self.lines.0[self.row].replace_range(self.col..end_col, "");
        } else {
            let tail = self.lines.0[end_row][end_col..].to_string();
            self.lines.0.drain(self.row + 1..=end_row);
            let line = &mut self.lines.0[self.row];
            line.truncate(self.col);
            line.push_str(&tail);
        }
        self.col = boundary_at_or_after(self.line(), self.col);
    }

    fn up(&mut self) -> bool {
        if self.row > 0 {
            self.move_vertically(self.row - 1);
            return true;
        }
        let target = match self.browsing {
            Some(i) if i > 0 => i - 1,
            Some(_) => return false,
            None if self.history.is_empty() => return false,
            None => {
                self.draft = Some(self.raw());
                self.history.len() - 1
            }
        };
        self.browsing = Some(target);
        let entry = normalize(&self.history[target]);
        self.load(&entry);
        true
    }

    fn down(&mut self) -> bool {
        if self.row + 1 < self.lines.0.len() {
            self.move_vertically(self.row + 1);
            return true;
        }
        let Some(i) = self.browsing else {
            return false;
        };
        if let Some(entry) = self.history.get(i + 1).map(|e| normalize(e)) {
            self.browsing = Some(i + 1);
            self.load(&entry);
        } else {
            let draft = self.draft.take().unwrap_or_default();
            self.load(&draft);
            self.browsing = None;
        }
        true
    }

    /// Moves to `row`, keeping the display column of the first press in a series.
    fn move_vertically(&mut self, row: usize) {
        let goal = match self.goal {
            Some(goal) => goal,
            None => text::width(&self.line()[..self.col]),
        };
        self.goal = Some(goal);
        self.row = row;
        let mut used = 0;
        self.col = self.line().len();
        for (i, g) in self.line().grapheme_indices(true) {
            used += text::grapheme_width(g);
            if used > goal {
                self.col = i;
                break;
            }
        }
    }
}

/// CRLF and CR become LF, tabs become spaces, other control characters are dropped.
fn normalize(s: &str) -> String {
    let s = s.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str(&" ".repeat(text::TAB_WIDTH)),
            c if c.is_control() || paste::is_chip_range(c) => {}
            c => out.push(c),
        }
    }
    out
}

/// The first cluster boundary of `line` at or after byte `col`.
fn boundary_at_or_after(line: &str, col: usize) -> usize {
    line.grapheme_indices(true)
        .map(|(i, _)| i)
        .find(|&i| i >= col)
        .unwrap_or(line.len())
}

fn prev_boundary(line: &str, col: usize) -> usize {
    line[..col]
        .grapheme_indices(true)
        .next_back()
        .map_or(0, |(i, _)| i)
}

fn next_boundary(line: &str, col: usize) -> usize {
    boundary_at_or_after(line, col + 1)
}

/// Word classes: runs of one class form a word; whitespace separates words.
#[derive(PartialEq, Clone, Copy)]
enum Class {
    Space,
    Word,
    Punct,
}

fn class(g: &str) -> Class {
    match g.chars().next() {
        Some(c) if c.is_whitespace() => Class::Space,
        Some(c) if c.is_alphanumeric() || c == '_' => Class::Word,
        _ => Class::Punct,
    }
}

/// Start of the word before `col`: skips whitespace, then one run of the same class.
fn word_start_before(line: &str, col: usize) -> usize {
    let gs: Vec<(usize, &str)> = line[..col].grapheme_indices(true).collect();
    let mut i = gs.len();
    while i > 0 && class(gs[i - 1].1) == Class::Space {
        i -= 1;
    }
    if let Some(&(_, g)) = i.checked_sub(1).and_then(|j| gs.get(j)) {
        let kind = class(g);
        while i > 0 && class(gs[i - 1].1) == kind {
            i -= 1;
        }
    }
    gs.get(i).map_or(col, |&(b, _)| b)
}

/// End of the word after `col`: skips whitespace, then one run of the same class.
fn word_end_after(line: &str, col: usize) -> usize {
    let mut gs = line[col..]
        .grapheme_indices(true)
        .map(|(i, g)| (col + i, class(g)))
        .skip_while(|&(_, k)| k == Class::Space)
        .peekable();
    let Some(&(_, kind)) = gs.peek() else {
        return line.len();
    };
    gs.find(|&(_, k)| k != kind).map_or(line.len(), |(i, _)| i)
}

/// The longest prefix of `s` (by clusters) that fits in `max` columns.
fn clip(s: &str, max: usize) -> String {
    let mut used = 0;
    s.graphemes(true)
        .take_while(|g| {
            used += text::grapheme_width(g);
            used <= max
        })
        .collect()
}

fn to_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
