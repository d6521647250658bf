//! Issue 16's history-cell glitches and features, each shown on the view fed public events
//! (or on the real binary in a pty): notices keep their line breaks and long paths copy whole,
//! the slash menu, resumed internals, the short id, `!cmd` cells, the retry cell, approval
//! dialogs and grouped exploration cells.

use keel::front::tui::transcript::HistoryCell;

use crate::tui::Feed;

/// The rows of a screen joined with nothing between them (what a terminal's copy of a
/// hard-wrapped string gives once its line ends are removed).
fn joined(screen: &str) -> String {
    screen.lines().map(str::trim_end).collect()
}

/// Regression: `/help` came out as one paragraph (its line breaks became spaces).
#[test]
fn help_keeps_one_row_per_command() {
    let mut f = Feed::new();
    f.view
        .notice(HistoryCell::Notice(keel::front::tui::help_text()));
    let screen = f.screen(100, 40);
    for (c, _) in keel::front::tui::view::COMMANDS {
        let start = format!("  /{c} ");
        assert!(
            screen.lines().any(|l| l.starts_with(&start)),
            "/{c} does not start a row:\n{screen}"
        );
    }
    assert!(screen.lines().any(|l| l == "keys:"), "{screen}");
}

/// Regression: wrapping `/session`'s file path put a space into it, so a copied path was wrong.
#[test]
fn a_wrapped_session_path_copies_back_whole() {
    let path = "/home/someone/.keel/sessions/--home-someone-projects-keel--/2026-12-01T16-35-15-471Z_01a23275-df8f-7521-93f1-2c2e0a4bbc81.jsonl";
    let notice = format!("session 01a23275\n  file: {path}\n  name: (none)");
    for width in [40u16, 57, 80, 100] {
        let screen = notice_screen(&notice, width);
        assert!(
            joined(&screen).contains(path),
            "at {width} columns the path does not copy back:\n{screen}"
        );
        let rows: Vec<&str> = screen.lines().collect();
        assert_eq!(rows[0], "session 01a23275", "{screen}");
        assert!(rows.last().unwrap().starts_with("  name: "), "{screen}");
    }
}

/// The screen of a fresh view holding one notice, `width` wide and tall enough for it.
fn notice_screen(notice: &str, width: u16) -> String {
    let mut f = Feed::new();
    f.view.notice(HistoryCell::Notice(notice.to_string()));
    let screen = f.screen(width, 30);
    let rows: Vec<&str> = screen.lines().collect();
    // The notice ends above the live area's rule.
    let end = rows.iter().position(|r| r.starts_with('─')).unwrap();
    rows[..end]
        .iter()
        .copied()
        .filter(|r| !r.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
