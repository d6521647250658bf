//! The composer's editing, history and layout rules.

use super::*;
use crate::front::tui::paint;
use crossterm::event::KeyEventState;

const CTRL: KeyModifiers = KeyModifiers::CONTROL;
const ALT: KeyModifiers = KeyModifiers::ALT;
const SHIFT: KeyModifiers = KeyModifiers::SHIFT;
const NAMED: [KeyCode; 14] = {
    use KeyCode::*;
    [
        Left, Right, Up, Down, Home, End, Enter, Backspace, Delete, Esc, Tab, BackTab, PageUp,
        PageDown,
    ]
};

/// Keys written like "C-w M-b S-Enter Left x": `C-` Ctrl, `M-` Alt, `S-` Shift; a name
/// from `NAMED` as its `Debug` form, or else a character.
fn keys(spec: &str) -> Vec<KeyEvent> {
    let one = |k: &str| {
        let (mut mods, mut name) = (KeyModifiers::NONE, k);
        for (prefix, m) in [("C-", CTRL), ("M-", ALT), ("S-", SHIFT)] {
            if let Some(rest) = name.strip_prefix(prefix) {
                (mods, name) = (mods | m, rest);
            }
        }
        let code = NAMED
            .into_iter()
            .find(|c| format!("{c:?}") == name)
            .unwrap_or_else(|| KeyCode::Char(name.chars().next().unwrap()));
        KeyEvent::new(code, mods)
    };
    spec.split(' ').map(one).collect()
}

/// Presses the keys of `spec`; returns whether the composer owned each.
fn press(c: &mut Composer, spec: &str) -> Vec<bool> {
    keys(spec).into_iter().map(|k| c.handle_key(k)).collect()
}

/// A composer holding `s` with the cursor at its `|`.
fn at(s: &str) -> Composer {
    let mut c = Composer::new();
    c.set_text(&s.replace('|', ""));
    let before = &s[..s.find('|').unwrap()];
    c.row = before.matches('\n').count();
    c.col = before.rsplit('\n').next().unwrap().len();
    c
}

/// The text with `|` at the cursor.
fn marked(c: &Composer) -> String {
    let mut lines = c.lines.0.clone();
    lines[c.row].insert(c.col, '|');
    lines.join("\n")
}

/// Presses `spec` on `start` (text with `|` at the cursor); each key must be owned.
fn check(start: &str, spec: &str, want: &str) {
    let mut c = at(start);
    let owned = press(&mut c, spec);
    assert!(owned.iter().all(|&o| o), "{start:?}: {spec} gave {owned:?}");
    assert_eq!(marked(&c), want, "{start:?} after {spec}");
}

fn plain(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

const ZWJ: &str = "👩\u{200d}💻";

#[test]
fn typing_inserts_characters_with_or_without_shift() {
    check("|", "S-H i 日", "Hi日|");
    // Ctrl+Alt with a symbol is AltGr on Windows.
    check("a|", "C-M-@", "a@|");
    // A character that joins the next one into a cluster leaves the cursor after both.
    check("|🇵", "🇯", "🇯🇵|");
    let mut c = Composer::new();
    assert!(c.is_empty());
    c.set_text("a\nb");
    assert_eq!((marked(&c), c.is_empty()), ("a\nb|".into(), false));
    c.clear();
    assert!(c.is_empty());
}

#[test]
fn release_is_ignored_and_repeat_applies() {
    let mut c = Composer::new();
    let x = KeyCode::Char('x');
    let release = KeyEvent::new_with_kind(x, KeyModifiers::NONE, KeyEventKind::Release);
    assert!(!c.handle_key(release));
    assert!(c.is_empty());
    let (kind, state) = (KeyEventKind::Repeat, KeyEventState::NONE);
    let repeat = KeyEvent::new_with_kind_and_state(x, KeyModifiers::NONE, kind, state);
    assert!(c.handle_key(repeat));
    assert_eq!(c.text(), "x");
}

#[test]
fn keys_the_composer_does_not_own_return_false() {
    let mut c = at("a|bc");
    let spec = "Enter M-Enter Esc C-c C-d C-M-x Tab S-BackTab PageUp PageDown Up Down";
    for (key, owned) in keys(spec).into_iter().zip(press(&mut c, spec)) {
        assert!(!owned, "{key:?} was taken");
    }
    assert!(!c.handle_key(KeyEvent::new(KeyCode::F(1), KeyModifiers::NONE)));
    assert_eq!(marked(&c), "a|bc");
}

#[test]
fn backspace_and_delete_remove_one_cluster_or_join_lines() {
    check(
        &format!("a{ZWJ}🇯🇵e\u{301}|"),
        "Backspace",
        &format!("a{ZWJ}🇯🇵|"),
    );
    check(&format!("a日{ZWJ}🇯🇵|"), "Backspace Backspace", "a日|");
    check(
        &format!("a日|{ZWJ}"),
        "Backspace Backspace",
        &format!("|{ZWJ}"),
    );
    check("|🇯🇵e\u{301}x", "Delete", "|e\u{301}x");
    check("|e\u{301}日x", "Delete Delete", "|x");
    check("ab\n|cd", "Backspace", "ab|cd");
    check("ab|\ncd", "Delete", "ab|cd");
    check("|ab", "Backspace", "|ab");
    check("ab|", "Delete", "ab|");
    check("ab|", "C-h", "a|");
}

#[test]
fn left_and_right_cross_clusters_and_lines() {
    let mut c = at(&format!("x{ZWJ}\n🇯🇵e\u{301}日|"));
    let mut seen = Vec::new();
    while press(&mut c, "Left") == [true] && c.row + c.col > 0 {
        seen.push(marked(&c));
    }
    let want = [
        format!("x{ZWJ}\n🇯🇵e\u{301}|日"),
        format!("x{ZWJ}\n🇯🇵|e\u{301}日"),
        format!("x{ZWJ}\n|🇯🇵e\u{301}日"),
        format!("x{ZWJ}|\n🇯🇵e\u{301}日"),
        format!("x|{ZWJ}\n🇯🇵e\u{301}日"),
    ];
    assert_eq!(seen, want);
    check(
        &format!("x|{ZWJ}\ny"),
        "Right Right",
        &format!("x{ZWJ}\n|y"),
    );
    check("a|", "Right", "a|");
}

#[test]
fn word_moves_with_ctrl_arrows_and_alt_letters() {
    check("foo bar_baz, qux|", "C-Left", "foo bar_baz, |qux");
    check("foo bar_baz, |qux", "C-Left", "foo bar_baz|, qux");
    check("foo bar_baz|, qux", "M-b", "foo |bar_baz, qux");
    check("|foo bar_baz, qux", "C-Right", "foo| bar_baz, qux");
    check("foo |bar_baz, qux", "M-f", "foo bar_baz|, qux");
    check("foo bar_baz|, qux", "M-Right", "foo bar_baz,| qux");
    check("日本語 テスト\n|b", "C-Left C-Left", "日本語 |テスト\nb");
    check("a|\nb", "C-Right", "a\n|b");
}

#[test]
fn home_end_and_ctrl_a_e_go_to_the_line_ends() {
    check("ab\nc|d", "Home", "ab\n|cd");
    check("ab\nc|d", "End", "ab\ncd|");
    check("ab\nc|d", "C-a", "ab\n|cd");
    check("ab\nc|d", "C-e", "ab\ncd|");
}

#[test]
fn kill_keys_delete_to_line_ends_and_words() {
    check("x\nabc |def", "C-k", "x\nabc |");
    check("x\nabc |def", "C-u", "x\n|def");
    check("x foo bar  |", "C-w", "x foo |");
    check("x foo |", "M-Backspace", "x |");
    check(&format!("a 日本語 テスト{ZWJ}|"), "C-w C-w", "a 日本語 |");
    check("path/to|", "C-w", "path/|");
    // At a line start Ctrl+U and Ctrl+W join with the previous line; at its end Ctrl+K
    // joins the next one.
    check("ab\n|cd", "C-u", "ab|cd");
    check("ab\n|cd", "C-w", "ab|cd");
    check("ab|\ncd", "C-k", "ab|cd");
}

#[test]
fn newline_keys_and_backslash_enter() {
    check("a|b", "C-j S-Enter", "a\n\n|b");
    check("foo\\|", "Enter", "foo\n|");
    let mut c = at("foo\\|");
    assert_eq!(
        press(&mut c, "M-Enter"),
        [false],
        "Alt+Enter belongs to the caller"
    );
    assert_eq!(marked(&c), "foo\\|");
    let mut c = at("fo|o\\");
    assert_eq!(
        press(&mut c, "Enter"),
        [false],
        "no backslash before the cursor"
    );
    assert_eq!(marked(&c), "fo|o\\");
}

#[test]
fn up_and_down_keep_the_display_column() {
    check("日本語\na|bcdef\nx", "Up", "|日本語\nabcdef\nx");
    check("日本語\nabcd|ef\nx", "Up", "日本|語\nabcdef\nx");
    check("日本|語\nabcdef\nx", "Down", "日本語\nabcd|ef\nx");
    check("日本語\nabcde|f\nx", "Down", "日本語\nabcdef\nx|");
    // The column of the first press in a series is kept across a short line.
    check("日本語\nabcde|f\nx", "Down Up", "日本語\nabcde|f\nx");
    check("日本語\nabcde|f\nx", "Down Left Up", "日本語\n|abcdef\nx");
}

#[test]
fn history_recall_and_draft_restore() {
    let mut c = at("dra|ft");
    assert_eq!(press(&mut c, "Up"), [false], "no history yet");
    c.set_history(vec!["one".into(), "two\nlines".into()]);
    let steps = [
        ("Up", "two\nlines|"),
        ("Up", "two|\nlines"),
        ("Up", "one|"),
        ("Down", "two\nlines|"),
        ("Down", "draft|"),
    ];
    for (spec, want) in steps {
        assert_eq!(press(&mut c, spec), [true]);
        assert_eq!(marked(&c), want);
    }
    assert_eq!(press(&mut c, "Down"), [false]);
    assert_eq!(press(&mut c, "Up Up Up Up"), [true, true, true, false]);
    assert_eq!(c.history(), ["one", "two\nlines"]);
}

#[test]
fn paste_normalizes_line_ends_tabs_and_controls() {
    let mut c = at("X|Y");
    c.insert_str("a\r\nb\rc\td\u{7}e\n");
    assert_eq!(marked(&c), "Xa\nb\nc    de\n|Y");
    assert_eq!(c.text(), "Xa\nb\nc    de\nY");
}

#[test]
fn take_clears_and_records_history_without_duplicates() {
    let mut c = at("hi|");
    assert_eq!(c.take(), "hi");
    assert!(c.is_empty());
    for s in ["hi", "  \n ", "yo"] {
        c.set_text(s);
        assert_eq!(c.take(), s);
    }
    assert_eq!(c.history(), ["hi", "yo"]);
    // Browsing resets: Up starts again from the newest entry.
    press(&mut c, "Up Up");
    c.take();
    assert_eq!(c.history(), ["hi", "yo", "hi"]);
    press(&mut c, "Up");
    assert_eq!(c.text(), "hi");
    press(&mut c, "Down");
    assert!(c.is_empty(), "the empty draft is restored");
}

#[test]
fn rendered_rows_never_exceed_the_width() {
    let s = format!("Ünïcödé 日本語 {ZWJ} 🇯🇵 e\u{301}e\u{301} x\n\nsecond 日本語のテキスト");
    let flat: String = s.split(['\n', ' ']).collect();
    for c in [at(&format!("{s}|")), at(&s.replacen(' ', " |", 1))] {
        for width in 1..=40u16 {
            let (rows, (x, y)) = c.render(width, "› ", None);
            let widest = rows.iter().map(paint::line_width).max().unwrap();
            assert!(widest <= usize::from(width), "{rows:?} wider than {width}");
            assert!(
                x < width && usize::from(y) < rows.len(),
                "cursor at {width}"
            );
            let body = plain(&rows).concat().replace("› ", "").replace(' ', "");
            // At width 1 a wide cluster cannot be drawn and shows as a space.
            assert!(width == 1 || body == flat, "text lost at {width}: {body}");
        }
    }
}

#[test]
fn cursor_at_a_wrap_boundary_with_wide_characters() {
    let (rows, cursor) = at("ab日本|").render(7, "› ", None);
    assert_eq!(plain(&rows), ["› ab日", "  本"]);
    assert_eq!(cursor, (4, 1));
    let before_wrapped = at("ab日|本").render(7, "› ", None).1;
    assert_eq!(before_wrapped, (2, 1), "start of the next row");
    assert_eq!(at("ab|日本").render(7, "› ", None).1, (4, 0));
}

#[test]
fn cursor_at_the_end_of_an_exactly_full_row_goes_to_the_next_row() {
    let cases = [
        ("abcd", "› abcd"),
        ("日本", "› 日本"),
        ("a\nabcd", "  abcd"),
    ];
    for (s, full) in cases {
        let mut c = at(&format!("{s}|"));
        let (rows, cursor) = c.render(6, "› ", None);
        assert_eq!(plain(&rows).last().map(String::as_str), Some("  "), "{s:?}");
        assert_eq!(cursor, (2, to_u16(rows.len() - 1)), "{s:?}");
        // Away from the end, the extra row goes.
        press(&mut c, "Left");
        let (rows, cursor) = c.render(6, "› ", None);
        assert_eq!(plain(&rows).last().map(String::as_str), Some(full), "{s:?}");
        assert_eq!(cursor.1, to_u16(rows.len() - 1), "{s:?}");
    }
}

#[test]
fn placeholder_prompt_and_continuation_indent() {
    let c = Composer::new();
    let (rows, cursor) = c.render(20, "› ", Some("Ask anything"));
    assert_eq!(
        (plain(&rows), cursor),
        (vec!["› Ask anything".into()], (2, 0))
    );
    assert!(rows[0].spans[1].style.add_modifier.contains(Modifier::DIM));
    assert!(rows[0].spans[0].style.add_modifier.contains(Modifier::BOLD));
    assert_eq!(plain(&c.render(8, "› ", Some("Ask 日本")).0), ["› Ask 日"]);
    assert_eq!(plain(&c.render(8, "› ", None).0), ["› "]);
    let (rows, cursor) = at("one two\nb|").render(6, "› ", None);
    assert_eq!(plain(&rows), ["› one ", "  two", "  b"]);
    assert_eq!(cursor, (3, 2));
}
