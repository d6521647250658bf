//! The inline terminal's bytes fed into a vt100 emulator: scrollback, differential frames,
//! resizes and wide text.

use super::*;
use crate::text;
use std::num::NonZeroU16;

/// Owns a renderer writing into a `Vec` and a vt100 emulator fed with each frame's bytes.
struct Harness {
    term: InlineTerminal<Vec<u8>>,
    vt: vt100::Parser,
    fed: usize,
}

fn lines(texts: &[&str]) -> Vec<Line<'static>> {
    texts.iter().map(|t| Line::raw(t.to_string())).collect()
}

impl Harness {
    fn new(cols: u16, rows: u16, pre: &str) -> Self {
        let size = |n: u16| NonZeroU16::new(n).unwrap();
        let mut vt = vt100::Parser::new(size(rows), size(cols), 1000);
        vt.process(pre.as_bytes());
        let cursor_row = vt.screen().cursor_position().0;
        let term = InlineTerminal::new(Vec::new(), cols, rows, cursor_row);
        Self { term, vt, fed: 0 }
    }

    /// Feeds what was written since the last call; checks the bytes never erase the
    /// screen or scrollback.
    fn feed(&mut self) -> Vec<u8> {
        let bytes = self.term.writer()[self.fed..].to_vec();
        self.fed = self.term.writer().len();
        let s = String::from_utf8_lossy(&bytes);
        assert!(!s.contains("\x1b[2J") && !s.contains("\x1b[3J"), "{s:?}");
        self.vt.process(&bytes);
        bytes
    }

    fn frame(&mut self, history: &[&str], live: &[&str], cursor: Option<(u16, u16)>) -> FrameStats {
        self.frame_lines(&lines(history), live, cursor)
    }

    fn frame_lines(
        &mut self,
        history: &[Line<'_>],
        live: &[&str],
        cursor: Option<(u16, u16)>,
    ) -> FrameStats {
        let live = lines(live);
        let stats = self
            .term
            .frame(
                history,
                live.len() as u16,
                |buf| {
                    let width = buf.area.width;
                    for (y, line) in live.iter().enumerate().take(buf.area.height.into()) {
                        paint::put_line(buf, 0, y as u16, line, width);
                    }
                },
                cursor,
            )
            .unwrap();
        let bytes = self.feed();
        assert_eq!(stats.bytes, bytes.len());
        assert!(
            bytes.starts_with(b"\x1b[?2026h"),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
        assert!(
            bytes.ends_with(b"\x1b[?2026l"),
            "{:?}",
            String::from_utf8_lossy(&bytes)
        );
        stats
    }

    fn screen(&self) -> Vec<String> {
        let cols = self.vt.screen().size().1.get();
        self.vt
            .screen()
            .rows(0, cols)
            .map(|r| r.trim_end().to_string())
            .collect()
    }

    fn scrollback(&mut self) -> Vec<String> {
        let len = self.vt.screen().scrollback_len();
        let mut out = Vec::new();
        for back in (1..=len).rev() {
            self.vt.screen_mut().set_scrollback(back);
            let row = self.vt.screen().rows(0, 1000).next().unwrap_or_default();
            out.push(row.trim_end().to_string());
        }
        self.vt.screen_mut().set_scrollback(0);
        out
    }

    /// Scrollback then screen, with the blank rows at the bottom of the screen dropped.
    fn everything(&mut self) -> Vec<String> {
        let mut all = self.scrollback();
        all.extend(self.screen());
        while all.last().is_some_and(String::is_empty) {
            all.pop();
        }
        all
    }
}

fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i:02}")).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn first_frame_draws_the_live_area_and_places_the_cursor() {
    let mut h = Harness::new(20, 6, "");
    let stats = h.frame(&[], &["hello", "wörld 日本"], Some((3, 1)));
    assert_eq!(h.screen(), ["hello", "wörld 日本", "", "", "", ""]);
    assert_eq!(h.vt.screen().cursor_position(), (1, 3));
    assert!(!h.vt.screen().hide_cursor());
    assert_eq!(stats.history_lines, 0);
    assert_eq!(h.term.viewport(), Rect::new(0, 0, 20, 2));
    h.frame(&[], &["hello", "wörld 日本"], None);
    assert!(h.vt.screen().hide_cursor());
    assert_eq!(h.vt.screen().fgcolor(), vt100::Color::Default);
}

#[test]
fn history_goes_to_scrollback_once_in_order_above_the_live_area() {
    let mut h = Harness::new(20, 6, "");
    let history = numbered("h", 0..30);
    let batches = [1, 3, 0, 7, 2, 1, 9, 4, 3];
    let mut at = 0;
    for (i, n) in batches.iter().enumerate() {
        let live = format!("live {i}");
        let stats = h.frame(
            &refs(&history[at..at + n]),
            &[&live, "status"],
            Some((5, 0)),
        );
        assert_eq!(stats.history_lines, *n);
        at += n;
    }
    assert_eq!(at, 30);
    let mut want = history.clone();
    want.extend(["live 8".to_string(), "status".to_string()]);
    assert_eq!(h.everything(), want);
    assert!(h.scrollback().iter().all(|r| r.starts_with('h')));
    assert_eq!(h.term.viewport(), Rect::new(0, 4, 20, 2));
}

#[test]
fn text_above_the_start_row_is_kept_above_history() {
    let mut h = Harness::new(20, 6, "one\r\ntwo\r\nthree\r\n");
    assert_eq!(h.term.viewport().y, 3);
    h.frame(&[], &["live"], None);
    let history = numbered("h", 0..10);
    h.frame(&refs(&history[..2]), &["live", "more"], None);
    h.frame(&refs(&history[2..]), &["live"], None);
    let mut want = vec!["one".to_string(), "two".into(), "three".into()];
    want.extend(history);
    want.push("live".into());
    assert_eq!(h.everything(), want);
}

#[test]
fn only_changed_cells_are_written() {
    let mut h = Harness::new(40, 10, "");
    let first = h.frame(
        &[],
        &["the quick brown fox", "jumps over", "the lazy dog"],
        Some((0, 2)),
    );
    // Blank cells are not written: the area was cleared first.
    assert_eq!(first.cells, 16 + 9 + 10);
    let one = h.frame(
        &[],
        &["the quick brown fox", "jumps ower", "the lazy dog"],
        Some((0, 2)),
    );
    assert_eq!(one.cells, 1);
    assert!(one.bytes < 60, "{one:?}");
    assert!(one.bytes * 2 < first.bytes, "{one:?} vs {first:?}");
    assert_eq!(h.screen()[1], "jumps ower");
    let none = h.frame(
        &[],
        &["the quick brown fox", "jumps ower", "the lazy dog"],
        Some((0, 2)),
    );
    assert_eq!(none.cells, 0);
    let unchanged = &h.term.writer()[h.term.writer().len() - none.bytes..];
    assert_eq!(unchanged, b"\x1b[?2026h\x1b[?25h\x1b[?2026l");
}

#[test]
fn growing_at_the_bottom_scrolls_and_shrinking_leaves_no_rows_behind() {
    let pre = "p0\r\np1\r\np2\r\np3\r\np4\r\n";
    let mut h = Harness::new(20, 6, pre);
    h.frame(&[], &["l0", "l1"], None);
    assert_eq!(h.screen(), ["p1", "p2", "p3", "p4", "l0", "l1"]);
    h.frame(&[], &["l0", "l1", "l2", "l3", "l4"], Some((2, 4)));
    assert_eq!(h.screen(), ["p4", "l0", "l1", "l2", "l3", "l4"]);
    assert_eq!(h.vt.screen().cursor_position(), (5, 2));
    h.frame(&["done"], &["l0", "l1"], None);
    assert_eq!(h.screen(), ["p4", "done", "l0", "l1", "", ""]);
    h.frame(&[], &[], None);
    assert_eq!(h.everything(), ["p0", "p1", "p2", "p3", "p4", "done"]);
    // Growing with room below keeps the top.
    h.frame(&[], &["a", "b", "c"], None);
    assert_eq!(h.screen(), ["p4", "done", "a", "b", "c", ""]);
    assert_eq!(h.term.viewport(), Rect::new(0, 2, 20, 3));
}

#[test]
fn height_is_capped_so_a_history_row_stays_and_history_still_flows() {
    let mut h = Harness::new(10, 4, "");
    let history = numbered("h", 0..6);
    h.frame(&[], &["a", "b", "c", "d", "e"], None);
    assert_eq!(h.term.viewport(), Rect::new(0, 0, 10, 3));
    h.frame(&refs(&history[..2]), &["a", "b", "c", "d"], None);
    h.frame(&refs(&history[2..]), &["a", "b", "c"], None);
    assert_eq!(h.screen(), ["h05", "a", "b", "c"]);
    let mut want = history.clone();
    want.extend(["a", "b", "c"].map(String::from));
    assert_eq!(h.everything(), want);
}

#[test]
fn resize_redraws_the_live_area_and_keeps_scrollback() {
    let mut h = Harness::new(20, 6, "");
    let history = numbered("history line ", 0..10);
    h.frame(
        &refs(&history),
        &["a wide live line xx", "second"],
        Some((1, 1)),
    );
    let before = h.scrollback();
    let (rows, _) = h.vt.screen().size();
    h.vt.screen_mut()
        .set_size(rows, NonZeroU16::new(12).unwrap());
    let row = h.vt.screen().cursor_position().0;
    h.term.resize(12, 6, Some(row));
    assert_eq!(h.term.size(), (12, 6));
    h.frame(&[], &["a wide live line xx", "second"], None);
    assert_eq!(h.scrollback(), before);
    let screen = h.screen();
    assert_eq!(screen[4..], ["a wide live", "second"]);
    h.frame(&["after resize, longer"], &["x"], None);
    let all = h.everything();
    assert_eq!(all[all.len() - 2..], ["after resiz…", "x"]);
    // Without a cursor row the top is kept, clamped to the smaller screen.
    h.vt.screen_mut()
        .set_size(NonZeroU16::new(3).unwrap(), NonZeroU16::new(12).unwrap());
    h.term.resize(12, 3, None);
    h.frame(&[], &["y"], None);
    assert_eq!(h.term.viewport(), Rect::new(0, 2, 12, 1));
    assert_eq!(h.screen()[2], "y");
}

#[test]
fn wide_text_fits_in_history_and_live_rows() {
    let mut h = Harness::new(20, 6, "");
    let long = "日本語".repeat(5);
    h.frame(
        &[&long, "e\u{301}tude 日本語"],
        &["日本語 live", "ok"],
        None,
    );
    assert_eq!(
        h.screen()[..2],
        ["日本語日本語日本語…", "e\u{301}tude 日本語"]
    );
    // ASCII over wide glyphs and back leaves no half glyphs behind.
    h.frame(&[], &["abcdefgh live", "ok"], None);
    assert_eq!(h.screen()[2], "abcdefgh live");
    h.frame(&[], &["x日本語", "ok"], None);
    assert_eq!(h.screen()[2], "x日本語");
    for row in h.everything() {
        assert!(text::width(&row) <= 20, "{row}");
    }
    let zwj = Line::raw("👩\u{200d}💻 dev");
    h.frame_lines(&[zwj], &["x"], None);
    let all = h.everything();
    assert_eq!(all[all.len() - 2..], ["👩\u{200d}💻 dev", "x"]);
}

#[test]
fn a_full_width_history_line_keeps_its_last_column() {
    let mut h = Harness::new(10, 4, "");
    h.frame(&["0123456789", "abcdefghij", "ABCDEFGHIJ"], &["live"], None);
    h.frame(&["klmnopqrst"], &["live"], None);
    assert_eq!(
        h.everything(),
        [
            "0123456789",
            "abcdefghij",
            "ABCDEFGHIJ",
            "klmnopqrst",
            "live"
        ]
    );
}

#[test]
fn styled_history_resets_its_attributes() {
    use ratatui::style::{Color, Modifier};
    let mut h = Harness::new(20, 6, "");
    let line = Line::from(vec![
        ratatui::text::Span::styled("red", Style::default().fg(Color::Red)),
        ratatui::text::Span::styled("bold", Style::default().add_modifier(Modifier::BOLD)),
        ratatui::text::Span::raw("plain"),
    ]);
    h.frame_lines(&[line], &["live"], None);
    let screen = h.vt.screen();
    assert_eq!(screen.cell(0, 0).unwrap().fgcolor(), vt100::Color::Idx(1));
    assert!(screen.cell(0, 3).unwrap().bold());
    assert!(!screen.cell(0, 7).unwrap().bold());
    assert_eq!(screen.cell(0, 7).unwrap().fgcolor(), vt100::Color::Default);
    assert!(!screen.bold());
}

#[test]
fn diff_mode_writes_far_fewer_bytes_than_full_redraw_when_streaming() {
    let run = |full: bool| {
        let mut h = Harness::new(80, 24, "");
        h.term.set_full_redraw(full);
        let mut text = String::new();
        let mut total = 0;
        for i in 0..40 {
            text.push(char::from(b'a' + (i % 26) as u8));
            let stats = h.frame(&[], &["header", "", &text, "", "footer"], None);
            if full {
                assert_eq!(stats.cells, 5 * 80);
            }
            total += stats.bytes;
        }
        assert_eq!(h.screen()[2], text);
        total
    };
    let (diff, full) = (run(false), run(true));
    assert!(diff * 5 <= full, "diff {diff} vs full {full}");
}

#[test]
fn clear_live_leaves_the_cursor_at_the_live_top() {
    let mut h = Harness::new(20, 6, "$ keel\r\n");
    h.frame(&["answer"], &["input", "status"], None);
    h.term.clear_live().unwrap();
    let bytes = h.feed();
    assert!(bytes.starts_with(b"\x1b[?2026h") && bytes.ends_with(b"\x1b[?2026l"));
    assert_eq!(h.everything(), ["$ keel", "answer"]);
    assert_eq!(h.vt.screen().cursor_position(), (2, 0));
    assert!(!h.vt.screen().hide_cursor());
}

#[test]
fn a_one_row_screen_still_pushes_history() {
    let mut h = Harness::new(10, 1, "");
    h.frame(&["a", "b"], &["live"], None);
    h.frame(&["c"], &[], None);
    assert_eq!(h.scrollback(), ["a", "b", "c"]);
}
