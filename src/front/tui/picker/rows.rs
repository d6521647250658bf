//! The pickers' row formatting: the stored-session row of `--resume`'s picker, and what the
//! live-session picker of `keel attach` shares with it (the selection marker, ages as `5m ago`
//! or as `ps` shows them, home shortening, cutting text from the left, sharing a row between a
//! title and a cwd, drawing a row inside an area). Pure functions of their arguments: no
//! clock, no environment, no terminal.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use super::super::paint;
use crate::kernel::session::SessionSummary;
use crate::text;

pub const BOLD: Modifier = Modifier::BOLD;
pub const DIM: Modifier = Modifier::DIM;
pub const REVERSED: Modifier = Modifier::REVERSED;

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;
pub const DAY_MS: i64 = 24 * HOUR_MS;
/// Sessions at least this old show a date instead of a relative age.
const DATE_AFTER_MS: i64 = 30 * DAY_MS;
/// Columns between the list's columns.
pub const GAP: usize = 2;
/// The narrowest cwd worth showing (shorter budgets drop it).
const MIN_CWD: usize = 6;

/// How list rows are laid out: "now", the row width, the fixed columns' widths (0: column
/// hidden) and whether the cwd is shown.
pub struct Columns {
    pub now_ms: i64,
    pub width: usize,
    pub age: usize,
    pub count: usize,
    pub cwd: bool,
}

impl Columns {
    /// Columns before the title: the marker, then each shown column with its gap.
    pub fn fixed(&self) -> usize {
        let col = |w: usize| if w == 0 { 0 } else { w + GAP };
        text::width(MARKER) + col(self.age) + col(self.count)
    }
}

/// The selected row's marker; other rows start with as many spaces.
pub const MARKER: &str = "› ";

/// One list row: marker, right-aligned age and message count, the title (name in bold, else
/// the first prompt's first line), then in "all directories" the dim cwd at the right edge.
pub fn row_line(s: &SessionSummary, selected: bool, cols: &Columns) -> Line<'static> {
    let dim = with(DIM);
    let marker = if selected {
        MARKER.to_string()
    } else {
        " ".repeat(text::width(MARKER))
    };
    let gap = " ".repeat(GAP);
    let mut spans = vec![Span::raw(marker)];
    if cols.age > 0 {
        let age = relative_age(s.modified_ms, cols.now_ms);
        spans.push(Span::raw(format!("{age:>0$}{gap}", cols.age)));
    }
    if cols.count > 0 {
        let count = msg_count(s.message_count);
        spans.push(Span::styled(format!("{count:>0$}", cols.count), dim));
        spans.push(Span::raw(gap));
    }
    let rest = cols.width.saturating_sub(cols.fixed());
    let (title, title_style) = title_of(s);
    let cwd = if cols.cwd {
        text::sanitize(&s.cwd)
    } else {
        String::new()
    };
    let (title_max, cwd) = split_rest(rest, text::width(&title), &cwd);
    let title = paint::truncate_line(&Line::from(Span::styled(title, title_style)), title_max);
    let title_w = paint::line_width(&title);
    spans.extend(title.spans);
    if !cwd.is_empty() {
        let pad = rest.saturating_sub(title_w + text::width(&cwd));
        spans.push(Span::raw(" ".repeat(pad)));
        spans.push(Span::styled(cwd, dim));
    }
    let line = Line::from(spans);
    if selected {
        line.style(with(REVERSED))
    } else {
        line
    }
}

/// Shares `rest` columns between a title `title_w` wide and a cwd: both whole when they fit,
/// otherwise the cwd gets up to two fifths (more when the title is short), cut from the left,
/// and is dropped when too little room is left. Returns (title budget, cwd as shown).
pub fn split_rest(rest: usize, title_w: usize, cwd: &str) -> (usize, String) {
    if cwd.is_empty() {
        return (rest, String::new());
    }
    let cwd_w = text::width(cwd);
    if title_w + GAP + cwd_w <= rest {
        return (title_w, cwd.to_string());
    }
    let budget = (rest * 2 / 5)
        .max(rest.saturating_sub(GAP + title_w))
        .min(cwd_w);
    if budget < MIN_CWD {
        return (rest, String::new());
    }
    let shown = truncate_left(cwd, budget);
    (rest.saturating_sub(GAP + text::width(&shown)), shown)
}

/// The row's title text and style: the name in bold, else the first non-blank line of the
/// first prompt, else a dim placeholder. Control characters are sanitized.
fn title_of(s: &SessionSummary) -> (String, Style) {
    let first_line = |t: &str| {
        t.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| text::sanitize(l).trim().to_string())
    };
    if let Some(name) = s.name.as_deref().and_then(first_line) {
        return (name, with(BOLD));
    }
    match s.first_message.as_deref().and_then(first_line) {
        Some(prompt) => (prompt, Style::default()),
        None => ("(no prompt)".to_string(), with(DIM)),
    }
}

/// A style with one modifier added.
pub fn with(modifier: Modifier) -> Style {
    Style::default().add_modifier(modifier)
}

/// Draws `line` on row `y` of `area`, cut to the area's width with `…`.
/// Rows a page moves before the first render told how tall the list is.
const DEFAULT_PAGE: usize = 10;

/// A filtered list's selection, shared by the pickers: the filter text, which entries match
/// it, which match is highlighted, and how far the list is scrolled.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub filter: String,
    /// Indices into the picker's list of the entries that match the filter.
    pub matches: Vec<usize>,
    /// Index into `matches`.
    pub selected: usize,
    /// First visible match, kept between renders so the list scrolls only when it must.
    top: std::cell::Cell<usize>,
    /// List rows at the last render (the PageUp/PageDown step).
    pub page: std::cell::Cell<usize>,
}

impl Default for Choice {
    fn default() -> Self {
        Choice {
            filter: String::new(),
            matches: Vec::new(),
            selected: 0,
            top: std::cell::Cell::new(0),
            page: std::cell::Cell::new(DEFAULT_PAGE),
        }
    }
}

impl Choice {
    /// The entries whose (lowercased) haystack contains the filter, case-insensitively; the
    /// selection goes back to the first one.
    pub fn refilter<'a>(&mut self, haystacks: impl Iterator<Item = &'a str>) {
        let needle = self.filter.to_lowercase();
        self.matches = haystacks
            .enumerate()
            .filter(|(_, h)| h.contains(&needle))
            .map(|(i, _)| i)
            .collect();
        self.selected = 0;
        self.top.set(0);
    }

    /// Sets the matching entries (filtered by the caller); the selection goes back to the first.
    pub fn set_matches(&mut self, matches: Vec<usize>) {
        self.matches = matches;
        self.selected = 0;
        self.top.set(0);
    }

    /// The highlighted entry's index in the list.
    pub fn chosen(&self) -> Option<usize> {
        self.matches.get(self.selected).copied()
    }

    pub fn move_by(&mut self, delta: isize) {
        let last = self.matches.len().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(delta).min(last);
    }

    /// The moves both pickers share: Up/Down, Ctrl+P/Ctrl+N, PageUp/PageDown (a list's
    /// height), Home/End. False for any other key.
    pub fn move_key(&mut self, key: &crossterm::event::KeyEvent) -> bool {
        use crossterm::event::{KeyCode, KeyModifiers};
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL)
            && !key.modifiers.contains(KeyModifiers::ALT);
        let page = self.page.get().max(1) as isize;
        match key.code {
            KeyCode::Char('p') if ctrl => self.move_by(-1),
            KeyCode::Char('n') if ctrl => self.move_by(1),
            KeyCode::Up => self.move_by(-1),
            KeyCode::Down => self.move_by(1),
            KeyCode::PageUp => self.move_by(-page),
            KeyCode::PageDown => self.move_by(page),
            KeyCode::Home => self.selected = 0,
            KeyCode::End => self.selected = self.matches.len().saturating_sub(1),
            _ => return false,
        }
        true
    }

    /// The first visible match for a list `rows` tall, scrolled just enough to show the
    /// selection and never past the end.
    pub fn scroll_top(&self, rows: usize) -> usize {
        let mut top = self.top.get();
        if self.selected < top {
            top = self.selected;
        } else if self.selected >= top + rows {
            top = self.selected + 1 - rows;
        }
        top = top.min(self.matches.len().saturating_sub(rows));
        self.top.set(top);
        top
    }
}

/// Draws a picker into `area` of `buf`: its title row, its filter row, then `list` in the
/// rows left. Every cell of the area is redrawn; nothing outside it is touched.
pub fn frame(
    area: Rect,
    buf: &mut Buffer,
    title: impl FnOnce(usize) -> Line<'static>,
    filter: impl FnOnce(usize) -> Line<'static>,
    list: impl FnOnce(Rect, &mut Buffer),
) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    for y in area.top()..area.bottom() {
        blank(buf, area, y, Style::default());
    }
    let w = area.width as usize;
    put(buf, area, area.y, &title(w));
    if area.height < 2 {
        return;
    }
    put(buf, area, area.y + 1, &filter(w));
    list(
        Rect::new(area.x, area.y + 2, area.width, area.height - 2),
        buf,
    );
}

pub fn put(buf: &mut Buffer, area: Rect, y: u16, line: &Line<'_>) {
    let line = paint::truncate_line(line, area.width as usize);
    paint::put_line(buf, area.x, y, &line, area.width);
}

/// Fills row `y` of `area` with spaces in `style` (every other attribute reset), staying
/// inside the area even when the buffer is wider.
pub fn blank(buf: &mut Buffer, area: Rect, y: u16, style: Style) {
    let line = Line::styled(" ".repeat(area.width as usize), Style::reset().patch(style));
    paint::put_line(buf, area.x, y, &line, area.width);
}

/// Cuts `s` from the left to at most `max` columns, starting with `…` when something was cut.
pub fn truncate_left(s: &str, max: usize) -> String {
    if text::width(s) <= max {
        return s.to_string();
    }
    let mut used = text::width("…");
    if used > max {
        return String::new();
    }
    let mut kept = Vec::new();
    for g in s.graphemes(true).rev() {
        let w = text::grapheme_width(g);
        if used + w > max {
            break;
        }
        kept.push(g);
        used += w;
    }
    kept.reverse();
    format!("…{}", kept.concat())
}

/// `1 msg`, `12 msgs`.
pub fn msg_count(n: usize) -> String {
    if n == 1 {
        "1 msg".to_string()
    } else {
        format!("{n} msgs")
    }
}

/// How long ago `then_ms` was at `now_ms`: `just now`, `5m ago`, `3h ago`, `2d ago`, or the
/// UTC date `YYYY-MM-DD` from 30 days on. Times in the future read as `just now`.
pub fn relative_age(then_ms: i64, now_ms: i64) -> String {
    let ago = now_ms.saturating_sub(then_ms);
    if ago < MINUTE_MS {
        "just now".to_string()
    } else if ago < HOUR_MS {
        format!("{}m ago", ago / MINUTE_MS)
    } else if ago < DAY_MS {
        format!("{}h ago", ago / HOUR_MS)
    } else if ago < DATE_AFTER_MS {
        format!("{}d ago", ago / DAY_MS)
    } else {
        let (y, m, d) = civil_from_days(then_ms.div_euclid(DAY_MS));
        format!("{y:04}-{m:02}-{d:02}")
    }
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A duration as `ps` shows it: `42s`, `17m`, `5h`, `3d`.
pub fn short_age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `path` with the home directory `home` written `~` (`/home/u/src` → `~/src`, `/home/u` →
/// `~`); any other path, or no home, as it is. Only whole components match: `/home/user2`
/// is not under `/home/user`.
pub fn home_short(path: &str, home: Option<&str>) -> String {
    let Some(home) = home
        .map(|h| h.trim_end_matches('/'))
        .filter(|h| !h.is_empty())
    else {
        return path.to_string();
    };
    match path.strip_prefix(home) {
        Some("") => "~".to_string(),
        Some(rest) if rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// 2024-03-01T12:00:00Z.
    const NOW: i64 = 1_709_294_400_000;

    #[test]
    fn relative_ages_at_their_boundaries_then_utc_dates() {
        let cases = [
            (-5_000, "just now"),
            (MINUTE_MS - 1, "just now"),
            (MINUTE_MS, "1m ago"),
        ];
        let more = [
            (HOUR_MS - 1, "59m ago"),
            (HOUR_MS, "1h ago"),
            (DAY_MS - 1, "23h ago"),
        ];
        let days = [(DAY_MS, "1d ago"), (30 * DAY_MS - 1, "29d ago")];
        for (ago, want) in cases.into_iter().chain(more).chain(days) {
            assert_eq!(relative_age(NOW - ago, NOW), want, "{ago} ms ago");
        }
        // From 30 days on: the UTC date of the session itself.
        let leap_day = 1_709_164_800_000; // 2024-02-29T00:00:00Z
        assert_eq!(relative_age(leap_day, leap_day + 30 * DAY_MS), "2024-02-29");
        assert_eq!(
            relative_age(leap_day - 1, leap_day + 90 * DAY_MS),
            "2024-02-28"
        );
        assert_eq!(relative_age(0, NOW), "1970-01-01");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(951_782_400 / 86_400), (2000, 2, 29));
        assert_eq!(civil_from_days(4_102_444_799 / 86_400), (2099, 12, 31));
    }

    #[test]
    fn ages_read_like_ps() {
        let got: Vec<String> = [0, 59_999, 60_000, 3_599_999, 3_600_000, 86_400_000 * 3]
            .into_iter()
            .map(short_age)
            .collect();
        assert_eq!(got, ["0s", "59s", "1m", "59m", "1h", "3d"]);
    }

    #[test]
    fn home_becomes_a_tilde_on_whole_components_only() {
        let home = Some("/home/u");
        assert_eq!(home_short("/home/u/src/keel", home), "~/src/keel");
        assert_eq!(home_short("/home/u", home), "~");
        assert_eq!(home_short("/home/u/", Some("/home/u/")), "~/");
        assert_eq!(home_short("/home/user2/x", home), "/home/user2/x");
        assert_eq!(home_short("/srv/home/u", home), "/srv/home/u");
        assert_eq!(home_short("/home/u/x", None), "/home/u/x");
        assert_eq!(
            home_short("/x", Some("/")),
            "/x",
            "a root home shortens nothing"
        );
    }
}
