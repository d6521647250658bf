//! The session picker behind `keel --resume` without an id: a filterable, scrollable list of
//! stored sessions (this directory or all directories) drawn into a `Buffer`. Pure state plus
//! drawing: it never reads the terminal, the clock, the environment or the disk (sessions and
//! "now" are passed in) and never writes to stdout.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use rows::Choice;
use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::paint;
use crate::kernel::session::SessionSummary;
use crate::text;

pub mod rows;

use rows::{
    blank, msg_count, put, relative_age, row_line, truncate_left, with, Columns, BOLD, DIM,
    REVERSED,
};

/// Below this many columns for the title, the count column and then the age column go.
const MIN_TITLE: usize = 10;

/// What the caller should do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum PickerAction {
    /// Keep the picker open (and redraw it).
    None,
    /// Resume the session stored in this file.
    Open(PathBuf),
    /// Close the picker without resuming anything.
    Cancel,
}

/// Which sessions are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Here,
    All,
}

impl Scope {
    fn label(self) -> &'static str {
        match self {
            Scope::Here => "this directory",
            Scope::All => "all directories",
        }
    }

    fn other(self) -> Self {
        match self {
            Scope::Here => Scope::All,
            Scope::All => Scope::Here,
        }
    }
}

/// A session with the lowercase text the filter searches.
#[derive(Debug)]
struct Entry {
    summary: SessionSummary,
    haystack: String,
}

impl Entry {
    fn new(summary: SessionSummary) -> Self {
        let fields = [
            summary.name.as_deref().unwrap_or(""),
            summary.first_message.as_deref().unwrap_or(""),
            &summary.id,
            &summary.cwd,
        ];
        // Fields are joined by a newline, which a typed filter never contains, so a match
        // never spans two fields.
        let haystack = fields.join("\n").to_lowercase();
        Entry { summary, haystack }
    }
}

/// The picker's state: both session lists, the scope, the filter and the selection.
#[derive(Debug)]
pub struct Picker {
    here: Vec<Entry>,
    all: Vec<Entry>,
    now_ms: i64,
    scope: Scope,
    choice: Choice,
}

impl Picker {
    /// `here`: the sessions of the current directory; `all`: every session of every directory.
    /// Both newest first. `now_ms` is "now" for relative ages (injected so tests are
    /// deterministic). Starts on "this directory" unless `here` is empty.
    pub fn new(here: Vec<SessionSummary>, all: Vec<SessionSummary>, now_ms: i64) -> Self {
        let scope = if here.is_empty() {
            Scope::All
        } else {
            Scope::Here
        };
        let mut picker = Picker {
            here: here.into_iter().map(Entry::new).collect(),
            all: all.into_iter().map(Entry::new).collect(),
            now_ms,
            scope,
            choice: Choice::default(),
        };
        picker.refilter();
        picker
    }

    /// Applies one key: filter editing, selection movement, scope toggle, open or cancel.
    pub fn handle_key(&mut self, key: KeyEvent) -> PickerAction {
        if key.kind == KeyEventKind::Release {
            return PickerAction::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        if self.choice.move_key(&key) {
            return PickerAction::None;
        }
        match key.code {
            KeyCode::Char('c') if ctrl && !alt => return PickerAction::Cancel,
            KeyCode::Char('u') if ctrl && !alt => self.edit(String::clear),
            // Ctrl+Alt is AltGr on some keyboards: it types a character.
            KeyCode::Char(c) if ctrl == alt && !c.is_control() => self.edit(|f| f.push(c)),
            KeyCode::Backspace => self.edit(|f| {
                f.pop();
            }),
            KeyCode::Esc if self.choice.filter.is_empty() => return PickerAction::Cancel,
            KeyCode::Esc => self.edit(String::clear),
            KeyCode::Enter => {
                return match self.selected() {
                    Some(s) => PickerAction::Open(s.path.clone()),
                    None => PickerAction::None,
                }
            }
            KeyCode::Tab | KeyCode::BackTab => {
                self.scope = self.scope.other();
                self.refilter();
            }
            _ => {}
        }
        PickerAction::None
    }

    /// The highlighted session, if any session matches.
    pub fn selected(&self) -> Option<&SessionSummary> {
        let idx = self.choice.chosen()?;
        self.list().get(idx).map(|e| &e.summary)
    }

    /// Rows `render` wants (for an inline viewport): header + filter + list (at most
    /// `max_rows` total). The list part counts the current scope's sessions before filtering,
    /// so typing never shrinks the viewport; an empty list still wants one row for its message.
    pub fn desired_height(&self, max_rows: u16) -> u16 {
        let rows = 2 + self.list().len().max(1);
        rows.min(max_rows as usize) as u16
    }

    /// Draws the picker into `area` of `buf`: title row, filter row, then the list. Every
    /// cell of the area is redrawn; nothing outside it is touched.
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        rows::frame(
            area,
            buf,
            |w| self.title_line(w),
            |w| self.filter_line(w),
            |list, buf| self.render_list(list, buf),
        );
    }

    fn list(&self) -> &[Entry] {
        match self.scope {
            Scope::Here => &self.here,
            Scope::All => &self.all,
        }
    }

    fn edit(&mut self, change: impl FnOnce(&mut String)) {
        change(&mut self.choice.filter);
        self.refilter();
    }

    /// Recomputes the matches and puts the selection back on the first one.
    fn refilter(&mut self) {
        let list = match self.scope {
            Scope::Here => &self.here,
            Scope::All => &self.all,
        };
        let haystacks = list.iter().map(|e| e.haystack.as_str());
        self.choice.refilter(haystacks);
    }

    /// The longest variant of the title row that fits in `w` columns: hints are dropped
    /// (Enter first, then Esc, then Tab), then the "Resume a session" prefix.
    fn title_line(&self, w: usize) -> Line<'static> {
        let total = self.list().len();
        let count = if self.choice.filter.is_empty() {
            format!("({total})")
        } else {
            format!("({}/{total})", self.choice.matches.len())
        };
        let scope = format!("{} {count}", self.scope.label());
        let tab = format!("Tab: {}", self.scope.other().label());
        let hint_sets: [Vec<&str>; 4] = [
            vec![&tab, "Enter: open", "Esc: cancel"],
            vec![&tab, "Esc: cancel"],
            vec![&tab],
            vec![],
        ];
        let dim = with(DIM);
        for prefix in [true, false] {
            for hints in &hint_sets {
                let mut spans = Vec::new();
                if prefix {
                    let bold = with(BOLD);
                    spans.push(Span::styled("Resume a session", bold));
                    spans.push(Span::styled(" · ", dim));
                }
                spans.push(Span::raw(scope.clone()));
                if !hints.is_empty() {
                    spans.push(Span::styled("  ·  ", dim));
                    spans.push(Span::styled(hints.join(" · "), dim));
                }
                let line = Line::from(spans);
                if paint::line_width(&line) <= w {
                    return line;
                }
            }
        }
        Line::raw(scope)
    }

    /// `Filter: <text>` with a reversed-cell caret (the text's tail when it is too long), or
    /// a dim hint when the filter is empty.
    fn filter_line(&self, w: usize) -> Line<'static> {
        let label = "Filter: ";
        let caret = Span::styled(" ", with(REVERSED));
        if self.choice.filter.is_empty() {
            let hint = with(DIM);
            return Line::from(vec![
                Span::raw(label),
                caret,
                Span::styled("type to filter", hint),
            ]);
        }
        let room = w.saturating_sub(text::width(label) + 1);
        let shown = truncate_left(&text::sanitize(&self.choice.filter), room);
        Line::from(vec![Span::raw(label), Span::raw(shown), caret])
    }

    fn render_list(&self, area: Rect, buf: &mut Buffer) {
        let rows = area.height as usize;
        if rows == 0 {
            return;
        }
        self.choice.page.set(rows);
        let w = area.width as usize;
        if self.choice.matches.is_empty() {
            let message = Line::styled(self.empty_message(), with(DIM));
            put(buf, area, area.y, &message);
            return;
        }
        let list = self.list();
        let mut cols = Columns {
            now_ms: self.now_ms,
            width: w,
            age: self.column_width(|s| relative_age(s.modified_ms, self.now_ms)),
            count: self.column_width(|s| msg_count(s.message_count)),
            cwd: self.scope == Scope::All,
        };
        if cols.fixed() + MIN_TITLE > w {
            cols.count = 0;
        }
        if cols.fixed() + MIN_TITLE > w {
            cols.age = 0;
        }
        let top = self.choice.scroll_top(rows);
        for (row, &idx) in self.choice.matches.iter().enumerate().skip(top).take(rows) {
            let y = area.y + (row - top) as u16;
            let selected = row == self.choice.selected;
            if selected {
                blank(buf, area, y, with(REVERSED));
            }
            let line = row_line(&list[idx].summary, selected, &cols);
            put(buf, area, y, &line);
        }
    }

    fn empty_message(&self) -> String {
        if !self.choice.filter.is_empty() {
            format!(
                "No sessions match \"{}\"",
                text::sanitize(&self.choice.filter)
            )
        } else if self.scope == Scope::Here {
            "No sessions in this directory — Tab shows all directories".to_string()
        } else {
            "No sessions yet".to_string()
        }
    }

    /// The widest value of a column over all matches (so columns do not shift on scroll).
    fn column_width(&self, cell: impl Fn(&SessionSummary) -> String) -> usize {
        let list = self.list();
        self.choice
            .matches
            .iter()
            .map(|&i| text::width(&cell(&list[i].summary)))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::rows::{DAY_MS, HOUR_MS, MARKER, MINUTE_MS};
    use super::*;
    use ratatui::style::Modifier;
    use KeyCode::{BackTab, Backspace, Down, End, Enter, Esc, Home, PageDown, PageUp, Tab, Up};

    /// 2024-03-01T12:00:00Z.
    const NOW: i64 = 1_709_294_400_000;
    const KEEL: &str = "/home/u/keel";
    const FAR: &str = "/very/long/path/to/another/project";

    fn sess(id: &str, cwd: &str, prompt: &str, ago: i64, count: usize) -> SessionSummary {
        SessionSummary {
            path: PathBuf::from(format!("/s/{id}.jsonl")),
            id: id.to_string(),
            cwd: cwd.to_string(),
            created: "2024-01-01T00:00:00Z".to_string(),
            modified_ms: NOW - ago,
            message_count: count,
            first_message: Some(prompt.to_string()),
            name: None,
        }
    }

    /// Sessions `prompt 1` (newest) to `prompt n`, one minute apart.
    fn numbered(n: usize) -> Vec<SessionSummary> {
        let one = |i| {
            sess(
                &format!("id{i}"),
                "/w",
                &format!("prompt {i}"),
                i as i64 * 60_000,
                i,
            )
        };
        (1..=n).map(one).collect()
    }

    /// Here: a CJK prompt, a named session, a ZWJ emoji prompt 40 days old; one more elsewhere.
    fn sample() -> Picker {
        let mut named = sess("b2", KEEL, "ignored prompt", 3 * HOUR_MS, 12);
        named.name = Some("Refactor the kernel".to_string());
        let emoji = "👩\u{200d}💻 fix e\u{301}moji\nsecond line";
        let cjk = sess("a1", KEEL, "日本語のテストを書いて", 5 * MINUTE_MS, 1);
        let here = vec![cjk, named, sess("c3", KEEL, emoji, 40 * DAY_MS, 3)];
        let mut all = here.clone();
        all.push(sess("d4", FAR, "other dir work", 2 * DAY_MS, 7));
        Picker::new(here, all, NOW)
    }

    fn key(p: &mut Picker, code: KeyCode) -> PickerAction {
        p.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn ctrl(p: &mut Picker, c: char) -> PickerAction {
        p.handle_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
    }

    fn typ(p: &mut Picker, s: &str) {
        for c in s.chars() {
            assert_eq!(key(p, KeyCode::Char(c)), PickerAction::None);
        }
    }

    fn press(p: &mut Picker, code: KeyCode, times: usize) {
        for _ in 0..times {
            key(p, code);
        }
    }

    fn ids(p: &Picker) -> Vec<&str> {
        let list = p.list();
        p.choice
            .matches
            .iter()
            .map(|&i| list[i].summary.id.as_str())
            .collect()
    }

    fn sel(p: &Picker) -> &str {
        &p.selected().unwrap().id
    }

    fn draw(p: &Picker, w: u16, h: u16) -> Buffer {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        p.render(buf.area, &mut buf);
        buf
    }

    fn rows(p: &Picker, w: u16, h: u16) -> Vec<String> {
        let buf = draw(p, w, h);
        (0..h).map(|y| paint::row_text(&buf, y)).collect()
    }

    fn has(buf: &Buffer, x: u16, y: u16, m: Modifier) -> bool {
        buf[(x, y)].modifier.contains(m)
    }

    #[test]
    fn filter_is_case_insensitive_over_each_field() {
        let mut named = sess("s1", "/x", "zzz", 0, 1);
        named.name = Some("Alpha Release".to_string());
        let list = vec![
            named,
            sess("s2", "/x", "Fix the BETA bug", 0, 1),
            sess("GAMMA-123", "/x", "p", 0, 1),
            sess("s4", "/src/Delta", "p", 0, 1),
            sess("s5", "/x", "Été", 0, 1),
        ];
        let mut p = Picker::new(list.clone(), list, NOW);
        let queries = [
            ("alpha", "s1"),
            ("ZZZ", "s1"),
            ("beta", "s2"),
            ("gamma", "GAMMA-123"),
        ];
        for (query, want) in queries.into_iter().chain([("DELTA", "s4"), ("éTÉ", "s5")]) {
            typ(&mut p, query);
            assert_eq!(ids(&p), [want], "query {query:?}");
            ctrl(&mut p, 'u');
        }
        typ(&mut p, "releasezzz");
        assert!(ids(&p).is_empty(), "a match never spans two fields");
    }

    #[test]
    fn backspace_and_ctrl_u_edit_the_filter() {
        let mut p = sample();
        typ(&mut p, "refx");
        assert!(ids(&p).is_empty());
        key(&mut p, Backspace);
        assert_eq!((p.choice.filter.as_str(), ids(&p)), ("ref", vec!["b2"]));
        ctrl(&mut p, 'u');
        assert_eq!(
            (p.choice.filter.as_str(), ids(&p)),
            ("", vec!["a1", "b2", "c3"])
        );
        // Alt+letter and other Ctrl chords do not type; Shift and AltGr (Ctrl+Alt) do.
        p.handle_key(KeyEvent::new(KeyCode::Char('x'), KeyModifiers::ALT));
        ctrl(&mut p, 'x');
        p.handle_key(KeyEvent::new(KeyCode::Char('R'), KeyModifiers::SHIFT));
        let altgr = KeyModifiers::CONTROL | KeyModifiers::ALT;
        p.handle_key(KeyEvent::new(KeyCode::Char('@'), altgr));
        assert_eq!(p.choice.filter, "R@");
    }

    #[test]
    fn scope_starts_here_unless_empty_and_tab_toggles_it() {
        assert_eq!(Picker::new(vec![], numbered(2), NOW).scope, Scope::All);
        let mut p = sample();
        assert_eq!(p.scope, Scope::Here);
        typ(&mut p, "i");
        key(&mut p, Down);
        assert_eq!((ids(&p), sel(&p)), (vec!["b2", "c3"], "c3"));
        key(&mut p, Tab);
        assert_eq!(
            (p.scope, p.choice.filter.as_str()),
            (Scope::All, "i"),
            "filter kept"
        );
        assert_eq!(
            (ids(&p), sel(&p)),
            (vec!["b2", "c3", "d4"], "b2"),
            "first match"
        );
        key(&mut p, BackTab);
        assert_eq!(p.scope, Scope::Here);
    }

    #[test]
    fn selection_moves_and_clamps() {
        let mut p = Picker::new(numbered(30), vec![], NOW);
        key(&mut p, Up);
        assert_eq!(sel(&p), "id1");
        press(&mut p, Down, 40);
        assert_eq!(sel(&p), "id30");
        key(&mut p, Home);
        for k in ['n', 'n', 'p'] {
            ctrl(&mut p, k);
        }
        assert_eq!(sel(&p), "id2");
        key(&mut p, PageDown);
        assert_eq!(sel(&p), "id12", "a page is 10 rows before the first render");
        rows(&p, 40, 7); // five list rows
        key(&mut p, PageDown);
        assert_eq!(sel(&p), "id17");
        press(&mut p, PageUp, 5);
        assert_eq!(sel(&p), "id1");
        key(&mut p, End);
        key(&mut p, PageDown);
        assert_eq!(sel(&p), "id30");
    }

    #[test]
    fn scrolling_keeps_the_selection_visible() {
        let mut p = Picker::new(numbered(20), vec![], NOW);
        press(&mut p, Down, 14);
        let r = rows(&p, 80, 8);
        assert_eq!(
            r[7], "› 15m ago  15 msgs  prompt 15",
            "scrolled just enough"
        );
        assert_eq!(r[2], "  10m ago  10 msgs  prompt 10");
        // Moving up inside the visible rows does not scroll; past the top it does.
        press(&mut p, Up, 3);
        let r = rows(&p, 80, 8);
        assert_eq!(r[2], "  10m ago  10 msgs  prompt 10");
        assert_eq!(r[4], "› 12m ago  12 msgs  prompt 12");
        press(&mut p, Up, 3);
        assert_eq!(rows(&p, 80, 8)[2], "›  9m ago   9 msgs  prompt 9");
        key(&mut p, End);
        assert_eq!(rows(&p, 80, 8)[7], "› 20m ago  20 msgs  prompt 20");
        // Filtering to fewer rows than fit scrolls back to the top.
        typ(&mut p, "prompt 1");
        assert_eq!(rows(&p, 80, 8)[2], "›  1m ago    1 msg  prompt 1");
    }

    #[test]
    fn enter_opens_esc_clears_then_cancels_ctrl_c_cancels() {
        let mut p = sample();
        key(&mut p, Down);
        let open = PickerAction::Open(PathBuf::from("/s/b2.jsonl"));
        assert_eq!(key(&mut p, Enter), open);
        typ(&mut p, "nothing matches this");
        assert_eq!(key(&mut p, Enter), PickerAction::None);
        assert_eq!(key(&mut p, Esc), PickerAction::None);
        assert_eq!(p.choice.filter, "");
        assert_eq!(key(&mut p, Esc), PickerAction::Cancel);
        typ(&mut p, "x");
        assert_eq!(ctrl(&mut p, 'c'), PickerAction::Cancel);
        let release = KeyEvent::new_with_kind(Esc, KeyModifiers::NONE, KeyEventKind::Release);
        assert_eq!(
            p.handle_key(release),
            PickerAction::None,
            "releases are ignored"
        );
        assert_eq!(Picker::new(vec![], vec![], NOW).selected(), None);
    }

    #[test]
    fn renders_this_directory_at_80_and_40_columns() {
        let p = sample();
        let emoji = "  2024-01-21   3 msgs  👩\u{200d}💻 fix e\u{301}moji";
        let r80 = [
            "Resume a session · this directory (3)  ·  Tab: all directories · Esc: cancel",
            "Filter:  type to filter",
            "›     5m ago    1 msg  日本語のテストを書いて",
            "      3h ago  12 msgs  Refactor the kernel",
            emoji,
            "",
        ];
        assert_eq!(rows(&p, 80, 6), r80);
        let r40 = [
            "Resume a session · this directory (3)",
            "Filter:  type to filter",
            "›     5m ago    1 msg  日本語のテストを…",
            "      3h ago  12 msgs  Refactor the ker…",
            emoji,
        ];
        assert_eq!(rows(&p, 40, 5), r40);
    }

    #[test]
    fn renders_all_directories_with_the_cwd_at_the_end() {
        let mut p = sample();
        key(&mut p, Tab);
        let r = rows(&p, 80, 6);
        let want = [
            "Resume a session · all directories (4)  ·  Tab: this directory · Esc: cancel",
            "›     5m ago    1 msg  日本語のテストを書いて                       /home/u/keel",
            "      2d ago   7 msgs  other dir work         /very/long/path/to/another/project",
        ];
        assert_eq!([&r[0], &r[2], &r[5]], want);
        let r = rows(&p, 40, 6);
        assert_eq!(r[3], "      3h ago  12 msgs  Refactor…  …/keel");
        assert_eq!(r[5], "      2d ago   7 msgs  other di…  …oject");
        // Narrow: the count column goes first, then the age, so the title stays readable.
        assert_eq!(rows(&p, 28, 6)[2], "›     5m ago  日本語のテス…");
        assert_eq!(rows(&p, 16, 6)[2], "› 日本語のテス…");
    }

    #[test]
    fn styles_mark_the_selection_names_and_cwds() {
        let mut p = sample();
        key(&mut p, Tab);
        let buf = draw(&p, 80, 6);
        assert!([0, 40, 79]
            .iter()
            .all(|&x| has(&buf, x, 2, Modifier::REVERSED)));
        assert!(!has(&buf, 40, 3, Modifier::REVERSED));
        assert_eq!(buf[(23, 3)].symbol(), "R");
        assert!(has(&buf, 23, 3, Modifier::BOLD), "names are bold");
        assert!(!has(&buf, 23, 2, Modifier::BOLD), "prompts are not");
        assert!(has(&buf, 79, 3, Modifier::DIM), "the cwd is dim");
    }

    #[test]
    fn title_shortens_gracefully() {
        let mut p = sample();
        let titles = [
            "Resume a session · this directory (3)  ·  Tab: all directories · Enter: open · Esc: cancel",
            "Resume a session · this directory (3)  ·  Tab: all directories",
            "this directory (3)",
            "this direct…",
        ];
        for (w, want) in [100, 70, 36, 12].into_iter().zip(titles) {
            assert_eq!(rows(&p, w, 1)[0], want);
        }
        typ(&mut p, "kernel");
        assert_eq!(
            rows(&p, 40, 1)[0],
            "Resume a session · this directory (1/3)"
        );
    }

    #[test]
    fn filter_row_shows_text_and_caret() {
        let mut p = sample();
        typ(&mut p, "日本");
        let buf = draw(&p, 40, 3);
        assert_eq!(paint::row_text(&buf, 1), "Filter: 日本");
        assert!(has(&buf, 12, 1, Modifier::REVERSED), "caret after the text");
        typ(&mut p, "語のテストを書いて");
        let buf = draw(&p, 20, 3);
        assert_eq!(paint::row_text(&buf, 1), "Filter: …トを書いて", "tail kept");
        assert!(has(&buf, 19, 1, Modifier::REVERSED));
    }

    #[test]
    fn empty_states_say_why() {
        let mut p = Picker::new(vec![], numbered(1), NOW);
        key(&mut p, Tab);
        let why = "No sessions in this directory — Tab shows all directories";
        assert_eq!(rows(&p, 80, 3)[2], why);
        assert_eq!(key(&mut p, Enter), PickerAction::None);
        key(&mut p, Tab);
        typ(&mut p, "zzz");
        let buf = draw(&p, 80, 3);
        assert_eq!(paint::row_text(&buf, 2), "No sessions match \"zzz\"");
        assert!(has(&buf, 0, 2, Modifier::DIM));
        let none = Picker::new(vec![], vec![], NOW);
        assert_eq!(rows(&none, 40, 3)[2], "No sessions yet");
    }

    #[test]
    fn prompts_show_their_first_line_sanitized() {
        let mut s = sess("x", "/w", "\n  run\u{1b}[31m red\tx\u{7}\nnext line", 0, 2);
        let row = |s: &SessionSummary| {
            let p = Picker::new(vec![s.clone()], vec![], NOW);
            rows(&p, 80, 3).swap_remove(2)
        };
        assert_eq!(row(&s), "› just now  2 msgs  run [31m red    x");
        s.first_message = None;
        assert_eq!(row(&s), "› just now  2 msgs  (no prompt)");
        s.name = Some("  \n named\nmore".to_string());
        assert_eq!(row(&s), "› just now  2 msgs  named");
    }

    #[test]
    fn desired_height_counts_header_filter_and_list() {
        let mut p = sample();
        assert_eq!((p.desired_height(24), p.desired_height(4)), (5, 4));
        typ(&mut p, "kernel");
        assert_eq!(p.desired_height(24), 5, "typing never shrinks the viewport");
        key(&mut p, Tab);
        assert_eq!(p.desired_height(24), 6);
        assert_eq!(Picker::new(vec![], vec![], NOW).desired_height(24), 3);
    }

    /// Draws into an area inset in a wider buffer: nothing may land outside it and no glyph
    /// may cross its right edge.
    fn assert_inside(p: &Picker, w: u16, h: u16) {
        let area = Rect::new(3, 1, w, h);
        let mut buf = Buffer::empty(Rect::new(0, 0, w + 6, h + 2));
        p.render(area, &mut buf);
        let blank = Buffer::empty(Rect::new(0, 0, 1, 1))[(0, 0)].clone();
        for (x, y) in (0..h + 2).flat_map(|y| (0..w + 6).map(move |x| (x, y))) {
            let cell = &buf[(x, y)];
            if area.contains((x, y).into()) {
                let right = x + text::width(cell.symbol()) as u16;
                assert!(
                    right <= area.right(),
                    "w={w} h={h}: ({x},{y}) crosses the edge"
                );
            } else {
                assert_eq!(cell, &blank, "w={w} h={h}: ({x},{y}) is outside the area");
            }
        }
    }

    #[test]
    fn nothing_is_ever_wider_than_the_area() {
        assert!(
            !text::is_ambiguous(MARKER),
            "the marker's width must not vary"
        );
        let (mut all, mut filtered) = (sample(), sample());
        key(&mut all, Tab);
        typ(&mut filtered, "👩\u{200d}💻日本語");
        let many = Picker::new(numbered(20), numbered(20), NOW);
        for wide in [false, true] {
            text::set_ambiguous_wide(wide);
            for p in [&sample(), &many, &all, &filtered] {
                for (w, h) in (1..=80).flat_map(|w| [1, 2, 3, 8, 12, 24].map(|h| (w, h))) {
                    assert_inside(p, w, h);
                }
            }
        }
        text::set_ambiguous_wide(false);
    }
}
