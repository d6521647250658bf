//! Big pastes in the composer: a paste of more than [`CHIP_LINES`] lines or [`CHIP_CHARS`]
//! characters is held as one chip (`[Pasted 120 lines]`) that the cursor and Backspace treat
//! as one character and that becomes the pasted text again when the prompt is sent. Also the
//! editor's height cap. Owns only the chips' texts; never draws or reads the environment.

use super::Composer;
use crate::text;

/// A paste with more lines than this becomes a chip.
pub const CHIP_LINES: usize = 5;
/// A paste with more characters than this becomes a chip.
pub const CHIP_CHARS: usize = 1000;
/// The editor shows at most this many rows (fewer on a short screen), scrolled to the cursor.
pub const MAX_ROWS: usize = 10;

/// A chip is one character of Supplementary Private Use Area-A (U+F0000 + its index), so every
/// grapheme-cluster edit (cursor moves, Backspace, Delete, word moves) treats it as one unit.
const CHIP_BASE: u32 = 0xF_0000;
const CHIP_LAST: u32 = 0xF_FFFD;

/// Whether `c` is in the range chips use (such characters typed or pasted are dropped).
pub(super) fn is_chip_range(c: char) -> bool {
    (CHIP_BASE..=CHIP_LAST).contains(&u32::from(c))
}

/// The editor's row cap for a live area of at most `max_height` rows: [`MAX_ROWS`], or a third
/// of the screen when that is less (at least one row).
pub fn max_rows(max_height: u16) -> usize {
    MAX_ROWS.min(usize::from(max_height) / 3).max(1)
}

impl Composer {
    /// A bracketed paste: inserted as it is when small, else as a chip (see the module docs).
    pub fn paste(&mut self, pasted: &str) {
        let clean = super::normalize(pasted);
        let lines = clean.trim_end_matches('\n').split('\n').count();
        if lines <= CHIP_LINES && clean.chars().count() <= CHIP_CHARS {
            self.insert_str(&clean);
            return;
        }
        let index = u32::try_from(self.chips.len()).unwrap_or(u32::MAX);
        let Some(chip) = char::from_u32(CHIP_BASE + index).filter(|c| is_chip_range(*c)) else {
            // Over 65 000 chips in one prompt: the rest goes in as text.
            self.insert_str(&clean);
            return;
        };
        self.chips.push(clean);
        self.insert_chip(chip);
    }

    /// The text with every chip replaced by what was pasted.
    pub(super) fn expand(&self, raw: &str) -> String {
        let mut out = String::with_capacity(raw.len());
        for c in raw.chars() {
            match self.chip_text(c) {
                Some(t) => out.push_str(t),
                None => out.push(c),
            }
        }
        out
    }

    /// What chip `c` holds (`None`: not a chip).
    fn chip_text(&self, c: char) -> Option<&str> {
        if !is_chip_range(c) {
            return None;
        }
        let i = (u32::from(c) - CHIP_BASE) as usize;
        self.chips.get(i).map(String::as_str)
    }

    /// How a grapheme cluster is shown: a chip as its label, anything else as it is.
    pub(super) fn shown<'a>(&self, g: &'a str) -> std::borrow::Cow<'a, str> {
        let mut chars = g.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => match self.chip_text(c) {
                Some(t) => std::borrow::Cow::Owned(label(t)),
                None => std::borrow::Cow::Borrowed(g),
            },
            _ => std::borrow::Cow::Borrowed(g),
        }
    }

    /// Inserts a chip at the cursor, with a space on each side where it would touch text (so
    /// it never joins a neighbour into one cluster).
    fn insert_chip(&mut self, chip: char) {
        let line = &self.lines.0[self.row];
        let before = line[..self.col].chars().next_back();
        let after = line[self.col..].chars().next();
        let mut s = String::new();
        if before.is_some_and(|c| !c.is_whitespace()) {
            s.push(' ');
        }
        s.push(chip);
        if after.is_some_and(|c| !c.is_whitespace()) {
            s.push(' ');
        }
        let line = &mut self.lines.0[self.row];
        line.insert_str(self.col, &s);
        self.col += s.len();
        if after.is_some_and(|c| !c.is_whitespace()) {
            // The cursor goes after the chip, before the space that separates it.
            self.col -= 1;
        }
    }
}

/// `[Pasted 120 lines]`, or `[Pasted 1500 chars]` for a long paste of few lines.
fn label(t: &str) -> String {
    let lines = t.trim_end_matches('\n').split('\n').count();
    match lines > CHIP_LINES {
        true => format!("[Pasted {lines} lines]"),
        false => format!("[Pasted {} chars]", t.chars().count()),
    }
}

/// The display width of a cluster as the composer shows it.
pub(super) fn shown_width(shown: &str) -> usize {
    text::width(shown)
}

impl Composer {
    /// [`Composer::render`] cut to at most `max_rows` rows, scrolled so the cursor's row is
    /// shown (the rows around it are what fits).
    pub fn render_window(
        &self,
        width: u16,
        prompt: &str,
        placeholder: Option<&str>,
        max_rows: usize,
    ) -> (Vec<ratatui::text::Line<'static>>, (u16, u16)) {
        let (mut lines, (x, y)) = self.render(width, prompt, placeholder);
        let max_rows = max_rows.max(1);
        if lines.len() <= max_rows {
            return (lines, (x, y));
        }
        let y = usize::from(y);
        let first = (y + 1).saturating_sub(max_rows);
        lines.drain(..first);
        lines.truncate(max_rows);
        (lines, (x, u16::try_from(y - first).unwrap_or(0)))
    }
}
