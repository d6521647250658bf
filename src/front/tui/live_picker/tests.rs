//! Unit tests of the live-session picker's state and drawing (no terminal).

use super::*;
use KeyCode::{Backspace, Down, End, Enter, Esc, Home, PageDown, PageUp, Up};

const HOME: Option<&str> = Some("/home/u");

fn live(id: &str, name: Option<&str>, cwd: &str, age_s: u64, clients: u64) -> LiveSession {
    LiveSession {
        id: id.to_string(),
        state: if clients > 0 { "running" } else { "idle" }.to_string(),
        name: name.map(str::to_string),
        cwd: cwd.to_string(),
        age_ms: age_s * 1000,
        clients,
        first_prompt: None,
    }
}

/// Given oldest first, so the picker must sort them.
fn sample() -> LivePicker {
    let sessions = vec![
        live("c3d4e5f60718", None, "/srv/build", 3 * 3600, 0),
        live(
            "0a1b2c3d4e5f",
            Some("Refactor the kernel"),
            "/home/u/src/keel",
            180,
            1,
        ),
        live("b2c3d4e5f607", Some("Docs"), "/home/u", 45, 2),
    ];
    LivePicker::new(sessions, HOME)
}

/// `n` sessions `s01` (newest) … `sNN`, a minute apart.
fn numbered(n: u64) -> LivePicker {
    let one = |i: u64| live(&format!("s{i:02}"), None, "/w", i * 60, 0);
    LivePicker::new((1..=n).rev().map(one).collect(), HOME)
}

fn key(p: &mut LivePicker, code: KeyCode) -> LiveAction {
    p.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn typ(p: &mut LivePicker, s: &str) {
    for c in s.chars() {
        assert_eq!(key(p, KeyCode::Char(c)), LiveAction::None, "typing {c:?}");
    }
}

fn press(p: &mut LivePicker, code: KeyCode, times: usize) {
    for _ in 0..times {
        key(p, code);
    }
}

fn sel(p: &LivePicker) -> &str {
    &p.selected().unwrap().id
}

fn draw(p: &LivePicker, w: u16, h: u16) -> Buffer {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    p.render(buf.area, &mut buf);
    buf
}

fn rows(p: &LivePicker, w: u16, h: u16) -> Vec<String> {
    let buf = draw(p, w, h);
    (0..h).map(|y| paint::row_text(&buf, y)).collect()
}

#[test]
fn sessions_are_listed_newest_first() {
    let p = sample();
    assert_eq!(p.shown(), ["b2c3d4e5f607", "0a1b2c3d4e5f", "c3d4e5f60718"]);
    assert_eq!(sel(&p), "b2c3d4e5f607", "the newest is selected");
    let tie = vec![live("b", None, "/", 5, 0), live("a", None, "/", 5, 0)];
    assert_eq!(LivePicker::new(tie, None).shown(), ["a", "b"], "ties by id");
}

#[test]
fn the_filter_matches_id_name_and_cwd_case_insensitively() {
    let mut p = sample();
    let queries = [
        ("0A1B", vec!["0a1b2c3d4e5f"]),
        ("kernel", vec!["0a1b2c3d4e5f"]),
        ("~/src", vec!["0a1b2c3d4e5f"]),
        ("/home/u/src", vec!["0a1b2c3d4e5f"]),
        ("BUILD", vec!["c3d4e5f60718"]),
        ("/home/u", vec!["b2c3d4e5f607", "0a1b2c3d4e5f"]),
        ("d4e5f6", vec!["b2c3d4e5f607", "c3d4e5f60718"]),
    ];
    for (query, want) in queries {
        typ(&mut p, query);
        assert_eq!(p.shown(), want, "query {query:?}");
        p.handle_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    }
    typ(&mut p, "docs/home");
    assert!(p.shown().is_empty(), "a match never spans two fields");
    assert_eq!(key(&mut p, Enter), LiveAction::None, "nothing to attach");
    key(&mut p, Backspace);
    p.paste("s\nignored");
    assert_eq!(p.choice.filter, "docs/homs", "a paste adds its first line");
}

#[test]
fn typing_puts_the_selection_back_on_the_first_match() {
    let mut p = sample();
    press(&mut p, Down, 2);
    assert_eq!(sel(&p), "c3d4e5f60718");
    typ(&mut p, "e");
    assert_eq!(sel(&p), "b2c3d4e5f607");
}

#[test]
fn j_k_and_q_are_keys_until_a_filter_is_typed_or_slash_starts_one() {
    let mut p = sample();
    key(&mut p, KeyCode::Char('j'));
    key(&mut p, KeyCode::Char('j'));
    key(&mut p, KeyCode::Char('k'));
    assert_eq!((sel(&p), p.choice.filter.as_str()), ("0a1b2c3d4e5f", ""));
    typ(&mut p, "Ref");
    typ(&mut p, "jkq");
    assert_eq!(p.choice.filter, "Refjkq", "text once a filter is typed");
    press(&mut p, Backspace, 6);
    assert_eq!(key(&mut p, KeyCode::Char('q')), LiveAction::Cancel);
    // `/` first: j, k and q are text from the start.
    key(&mut p, KeyCode::Char('/'));
    typ(&mut p, "k");
    assert_eq!(
        (p.choice.filter.as_str(), p.shown()),
        ("k", vec!["0a1b2c3d4e5f"])
    );
    assert_eq!(rows(&p, 40, 2)[1], "Filter: k");
    key(&mut p, Backspace);
    assert_eq!(
        key(&mut p, Esc),
        LiveAction::None,
        "Esc leaves typing first"
    );
    assert_eq!(key(&mut p, KeyCode::Char('q')), LiveAction::Cancel);
    key(&mut p, KeyCode::Char('/'));
    key(&mut p, Backspace);
    assert_eq!(
        key(&mut p, Esc),
        LiveAction::Cancel,
        "Backspace left typing"
    );
}

#[test]
fn selection_moves_and_clamps() {
    let mut p = numbered(30);
    key(&mut p, Up);
    assert_eq!(sel(&p), "s01");
    press(&mut p, Down, 40);
    assert_eq!(sel(&p), "s30");
    key(&mut p, Home);
    let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
    for c in ['n', 'n', 'p'] {
        p.handle_key(ctrl(c));
    }
    assert_eq!(sel(&p), "s02");
    key(&mut p, PageDown);
    assert_eq!(sel(&p), "s12", "a page is 10 rows before the first render");
    rows(&p, 60, 7); // five list rows
    key(&mut p, PageDown);
    assert_eq!(sel(&p), "s17");
    press(&mut p, PageUp, 5);
    assert_eq!(sel(&p), "s01");
    key(&mut p, End);
    assert_eq!(sel(&p), "s30");
    assert_eq!(
        rows(&p, 60, 7)[6].trim_end(),
        "› s30  idle  30m  0 clients  /w"
    );
}

#[test]
fn enter_attaches_esc_clears_then_cancels_ctrl_c_cancels() {
    let mut p = sample();
    key(&mut p, Down);
    let attach = LiveAction::Attach("0a1b2c3d4e5f".to_string());
    assert_eq!(key(&mut p, Enter), attach);
    typ(&mut p, "zzz");
    assert_eq!(key(&mut p, Esc), LiveAction::None);
    assert_eq!(p.choice.filter, "");
    assert_eq!(key(&mut p, Esc), LiveAction::Cancel);
    typ(&mut p, "x");
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(p.handle_key(ctrl_c), LiveAction::Cancel);
    let release = KeyEvent::new_with_kind(Esc, KeyModifiers::NONE, KeyEventKind::Release);
    assert_eq!(
        p.handle_key(release),
        LiveAction::None,
        "releases are ignored"
    );
}

#[test]
fn narrow_rows_drop_clients_then_age_then_state() {
    let p = sample();
    let at = |w| rows(&p, w, 5)[3].trim_end().to_string();
    let want = [
        (
            80,
            "  2c3d4e5f  running   3m   1 client  Refactor the kernel              ~/src/keel",
        ),
        (50, "  2c3d4e5f  running   3m   1 client  Refactor the…"),
        (44, "  2c3d4e5f  running   3m  Refactor…  …c/keel"),
        (33, "  2c3d4e5f  running  Refactor th…"),
        (24, "  2c3d4e5f  Refactor th…"),
        (12, "  2c3d4e5f"),
    ];
    for (w, row) in want {
        assert_eq!(at(w), row, "{w} columns");
    }
}

#[test]
fn styles_mark_the_selection_ids_and_names() {
    let p = sample();
    let buf = draw(&p, 80, 5);
    let has = |x: u16, y: u16, m| buf[(x, y)].modifier.contains(m);
    assert!([0, 40, 79].iter().all(|&x| has(x, 2, REVERSED)));
    assert!(!has(40, 3, REVERSED));
    assert!(has(2, 3, BOLD), "ids are bold");
    assert_eq!(buf[(37, 3)].symbol(), "R");
    assert!(has(37, 3, BOLD), "names are bold");
    assert!(has(79, 3, DIM), "a cwd next to a name is dim");
    assert!(
        !has(37, 4, BOLD) && !has(37, 4, DIM),
        "a cwd standing for the name is not"
    );
}

#[test]
fn desired_height_counts_title_filter_and_sessions() {
    let mut p = sample();
    assert_eq!((p.desired_height(24), p.desired_height(4)), (5, 4));
    typ(&mut p, "kernel");
    assert_eq!(p.desired_height(24), 5, "typing never shrinks the viewport");
    assert_eq!(LivePicker::new(vec![], None).desired_height(24), 3);
    assert_eq!(
        rows(&LivePicker::new(vec![], None), 40, 3)[2],
        "No sessions are live"
    );
}

#[test]
fn status_entries_become_sessions() {
    let v = serde_json::json!({"sessionId": "abc", "cwd": "/w", "name": "N", "state": "running",
                               "clients": 2, "ageMs": 1500, "epoch": "e", "seq": 3});
    let want = LiveSession {
        id: "abc".into(),
        state: "running".into(),
        name: Some("N".into()),
        cwd: "/w".into(),
        age_ms: 1500,
        clients: 2,
        first_prompt: None,
    };
    let v: crate::wire::protocol::daemon::LiveSession = serde_json::from_value(v).unwrap();
    assert_eq!(LiveSession::from_status(&v), want);
}

/// Draws into an area inset in a wider buffer: nothing may land outside it and no glyph may
/// cross its right edge.
fn assert_inside(p: &LivePicker, w: u16, h: u16) {
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
    let wide = vec![
        live(
            "日本語のセッション",
            Some("👩\u{200d}💻 名前"),
            "/home/u/日本",
            5,
            1,
        ),
        live("ctl\u{1b}[31m", Some("a\nb"), "/x\u{7}", 90_000, 12),
    ];
    let mut filtered = LivePicker::new(wide.clone(), HOME);
    typ(&mut filtered, "日本");
    for p in [
        &sample(),
        &numbered(20),
        &LivePicker::new(wide, HOME),
        &filtered,
    ] {
        for (w, h) in (1..=80).flat_map(|w| [1, 2, 3, 8, 24].map(|h| (w, h))) {
            assert_inside(p, w, h);
        }
    }
}
