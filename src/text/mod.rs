//! Terminal text measurement by grapheme cluster, shared by print mode and the TUI: display
//! width, width-bounded truncation and word wrapping. Pure functions; never writes anywhere.
//!
//! One setting changes widths: East-Asian ambiguous-width characters (`±`, `①`, `…`, Greek and
//! Cyrillic letters) count as one column by default and as two after `set_ambiguous_wide(true)`,
//! for CJK terminals that draw them wide. The setting belongs to the calling thread (the TUI
//! measures and draws on one thread), so tests with either setting can run side by side.

pub mod highlight;

use std::cell::Cell;

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// Columns a tab stands for when text is laid out (tabs are expanded to spaces before drawing).
pub const TAB_WIDTH: usize = 4;

thread_local! {
    static AMBIGUOUS_WIDE: Cell<bool> = const { Cell::new(false) };
}

/// Counts East-Asian ambiguous-width characters as two columns (`true`) or one (`false`) on
/// the calling thread.
pub fn set_ambiguous_wide(wide: bool) {
    AMBIGUOUS_WIDE.with(|c| c.set(wide));
}

/// Whether ambiguous-width characters count as two columns on the calling thread.
pub fn ambiguous_wide() -> bool {
    AMBIGUOUS_WIDE.with(Cell::get)
}

/// Display width of one grapheme cluster (a ZWJ emoji sequence or a flag counts as one glyph).
pub fn grapheme_width(g: &str) -> usize {
    if g == "\t" {
        return TAB_WIDTH;
    }
    if g.is_ascii() {
        return g.bytes().filter(|b| !b.is_ascii_control()).count().min(1);
    }
    let w = if ambiguous_wide() {
        g.width_cjk()
    } else {
        g.width()
    };
    // An emoji presentation sequence (VS16) or ZWJ sequence renders as one wide glyph.
    if g.chars().count() > 1 && (g.contains('\u{200d}') || g.contains('\u{fe0f}')) {
        return 2;
    }
    w.min(2)
}

/// Whether `g` is an East-Asian ambiguous-width cluster (its width depends on the setting).
pub fn is_ambiguous(g: &str) -> bool {
    !g.is_ascii() && g.width() != g.width_cjk()
}

/// Display width of a string in terminal columns.
pub fn width(s: &str) -> usize {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return s.len();
    }
    s.graphemes(true).map(grapheme_width).sum()
}

/// Replaces control characters (newlines included) with spaces and tabs with `TAB_WIDTH`
/// spaces: what is left can be drawn into terminal cells as it is.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push_str(&" ".repeat(TAB_WIDTH)),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Cuts `s` to at most `max` columns, ending with `…` when something was cut. Never splits a
/// `1 file`, `3 files`: `n` and the word that fits it.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// grapheme cluster; control characters (newlines included) become spaces.
pub fn truncate(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect();
    if width(&clean) <= max {
        return clean;
    }
    let mut out = String::new();
    let mut used = 0;
    let ellipsis = width("…");
    for g in clean.graphemes(true) {
        let w = grapheme_width(g);
        if used + w + ellipsis > max {
            break;
        }
        out.push_str(g);
        used += w;
    }
    out.push('…');
    out
}

/// Word-wraps one line of plain text to `width` columns (at least 1). Breaks at spaces when it
/// can and inside a word only when the word alone is wider than a line; never splits a
/// grapheme cluster, and a cluster wider than `width` gets a line of its own. Tabs and control
/// characters are sanitized first. An empty input gives one empty line.
pub fn wrap(s: &str, width: usize) -> Vec<String> {
    wrap_styled(&[(sanitize(s), ())], width)
        .into_iter()
        .map(|pieces| pieces.into_iter().map(|(t, ())| t).collect())
        .collect()
}

/// Word-wraps one line made of styled pieces (text, style) to `width` columns, keeping each
/// piece's style. Same rules as [`wrap`]; the pieces must already be sanitized (no tabs or
/// newlines). Spaces at a break are dropped; a style run split by a break continues on the next
/// line.
pub fn wrap_styled<S: Clone + PartialEq>(
    pieces: &[(String, S)],
    width: usize,
) -> Vec<Vec<(String, S)>> {
    wrap_hanging(pieces, width, width)
        .into_iter()
        .map(|row| row.pieces)
        .collect()
}

/// One row of [`wrap_hanging`].
#[derive(Debug, Clone, PartialEq)]
pub struct WrappedRow<S> {
    pub pieces: Vec<(String, S)>,
    /// The row goes on with a word the previous row broke (it was wider than a row): nothing
    /// may be put in front of it, so the word's pieces joined give the word back.
    pub continues_word: bool,
}

/// [`wrap_styled`] with a narrower `rest` width for rows after the first (a hanging indent the
/// caller adds), except rows that go on with a broken word: those get the full `width` and are
/// marked, so a caller adds nothing in front of them (a long path or URL stays one string).
pub fn wrap_hanging<S: Clone + PartialEq>(
    pieces: &[(String, S)],
    width: usize,
    rest: usize,
) -> Vec<WrappedRow<S>> {
    let width = width.max(1);
    let rest = rest.clamp(1, width);
    // Tokens: maximal runs of spaces or of non-spaces, each a list of (grapheme, style).
    let mut tokens: Vec<(bool, Vec<(&str, &S)>)> = Vec::new();
    for (text, style) in pieces {
        for g in text.graphemes(true) {
            let space = g == " ";
            match tokens.last_mut() {
                Some((was_space, gs)) if *was_space == space => gs.push((g, style)),
                _ => tokens.push((space, vec![(g, style)])),
            }
        }
    }
    let mut rows = Rows {
        rows: Vec::new(),
        max: width,
        inside: false,
        width,
        rest,
    };
    let mut line = Line::default();
    for (space, gs) in tokens {
        let w: usize = gs.iter().map(|(g, _)| grapheme_width(g)).sum();
        if space {
            if line.used + w <= rows.max {
                line.push_all(&gs);
            } else {
                // A break falls inside this run of spaces: drop them.
                rows.next(&mut line, false);
            }
            continue;
        }
        if line.used + w > rows.max && line.used > 0 {
            line.trim_end();
            rows.next(&mut line, false);
        }
        for (g, style) in gs {
            let gw = grapheme_width(g);
            if line.used + gw > rows.max && line.used > 0 {
                rows.next(&mut line, true);
            }
            line.push(g, style);
        }
    }
    line.trim_end_if_wrapped(!rows.rows.is_empty());
    rows.next(&mut line, false);
    rows.rows
}

/// The rows `wrap_hanging` has filled, and the width of the one being filled.
struct Rows<S> {
    rows: Vec<WrappedRow<S>>,
    max: usize,
    /// The row being filled goes on with a broken word.
    inside: bool,
    width: usize,
    rest: usize,
}

impl<S: Clone + PartialEq> Rows<S> {
    /// Ends the row being filled; `broken`: the break is inside a word.
    fn next(&mut self, line: &mut Line<S>, broken: bool) {
        self.rows.push(WrappedRow {
            pieces: line.take(),
            continues_word: self.inside,
        });
        self.inside = broken;
        self.max = if broken { self.width } else { self.rest };
    }
}

/// A line being filled by `wrap_styled`.
struct Line<S> {
    pieces: Vec<(String, S)>,
    used: usize,
}

impl<S> Default for Line<S> {
    fn default() -> Self {
        Line {
            pieces: Vec::new(),
            used: 0,
        }
    }
}

impl<S: Clone + PartialEq> Line<S> {
    fn push(&mut self, g: &str, style: &S) {
        self.used += grapheme_width(g);
        match self.pieces.last_mut() {
            Some((text, s)) if s == style => text.push_str(g),
            _ => self.pieces.push((g.to_string(), style.clone())),
        }
    }

    fn push_all(&mut self, gs: &[(&str, &S)]) {
        for (g, s) in gs {
            self.push(g, s);
        }
    }

    fn trim_end(&mut self) {
        while let Some((text, _)) = self.pieces.last_mut() {
            let kept = text.trim_end_matches(' ').len();
            self.used -= text.len() - kept;
            text.truncate(kept);
            if !text.is_empty() {
                break;
            }
            self.pieces.pop();
        }
    }

    fn trim_end_if_wrapped(&mut self, wrapped: bool) {
        if wrapped {
            self.trim_end();
        }
    }

    fn take(&mut self) -> Vec<(String, S)> {
        self.used = 0;
        std::mem::take(&mut self.pieces)
    }
}

/// A byte count as `keel ps` and the TUI's `/jobs` say it: `512 B`, `3.4 KiB`, `12 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match v < 10.0 {
        true => format!("{v:.1} {}", UNITS[unit]),
        false => format!("{v:.0} {}", UNITS[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_of_wide_and_combined_text() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("日本語"), 6);
        assert_eq!(width("e\u{301}"), 1); // e + combining acute
        assert_eq!(width("👩\u{200d}💻"), 2); // ZWJ sequence
        assert_eq!(width("❤\u{fe0f}"), 2); // VS16
        assert_eq!(width("🇯🇵"), 2); // flag: two regional indicators, one glyph
        assert!(is_ambiguous("±"));
        assert!(!is_ambiguous("a"));
        assert!(!is_ambiguous("日"));
    }

    #[test]
    fn truncate_never_exceeds_width_or_splits_clusters() {
        let s = "日本語のテキスト👩\u{200d}💻 and more";
        for max in 1..20 {
            let t = truncate(s, max);
            assert!(width(&t) <= max, "{t:?} wider than {max}");
        }
        assert_eq!(truncate("日本語", 4), "日…");
        assert_eq!(truncate("a\nb", 10), "a b");
    }

    #[test]
    fn wrap_breaks_at_spaces_and_inside_long_words() {
        assert_eq!(wrap("the quick brown fox", 10), ["the quick", "brown fox"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 5), [""]);
        assert_eq!(wrap("a\tb", 10), ["a    b"]);
        assert_eq!(
            wrap("日本語のテキスト", 5),
            ["日本", "語の", "テキ", "スト"]
        );
        // A cluster wider than the line still gets a line of its own.
        assert_eq!(wrap("日x", 1), ["日", "x"]);
    }

    #[test]
    fn wrapped_lines_never_exceed_the_width() {
        let s = "Ünïcödé 日本語 👩\u{200d}💻 ❤\u{fe0f} e\u{301}e\u{301} words   with   gaps and a verylongwordthatneverends";
        for w in 2..40 {
            for line in wrap(s, w) {
                assert!(width(&line) <= w, "{line:?} wider than {w}");
            }
        }
    }

    #[test]
    fn wrap_styled_keeps_styles_across_breaks() {
        let pieces = vec![("hello ".to_string(), 1), ("big world".to_string(), 2)];
        let lines = wrap_styled(&pieces, 7);
        assert_eq!(
            lines,
            vec![
                vec![("hello".to_string(), 1)],
                vec![("big".to_string(), 2)],
                vec![("world".to_string(), 2)],
            ]
        );
    }

    #[test]
    fn ambiguous_width_setting_widens_ambiguous_characters() {
        assert_eq!(width("±①"), 2);
        set_ambiguous_wide(true);
        assert_eq!(width("±①"), 4);
        assert_eq!(wrap("±±±", 4), ["±±", "±"]);
        assert_eq!(truncate("±±±", 4), "±…");
        set_ambiguous_wide(false);
    }
}
