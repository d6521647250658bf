//! The live area's glitches from issue 16, on the real bytes of `tui::draw` fed into a terminal
//! emulator (`tui_reflow.rs`): resizes on terminals that reflow and on those that do not, big
//! pastes, the first committed line; and in a pty: NO_COLOR, TERM=dumb and the keys.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel::front::tui::view::Action;
use keel::kernel::event::{AssistantDelta, EventPayload};
use keel::kernel::message::{Message, StopReason};
use serde_json::json;

use crate::common::pty::spawn_with;
use crate::common::support::{fixture, keel_shell, Sandbox};
use crate::tui::{assistant, Feed};
use crate::tui_reflow::Emulator;

/// The shell's rows above keel: tmux keeps the screen's row count on a reflow and moves the
/// rows a narrowing adds to the scrollback from the top of the screen, where nothing can erase
/// them; these rows are what goes there (with fewer rows above it, the live area's own top rows
/// would, which is the limit docs/tui.md states).
const EARLIER: [&str; 22] = [
    "$ ls", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q",
    "r", "s", "t", "$ keel",
];

fn count(rows: &[String], pred: impl Fn(&str) -> bool) -> usize {
    rows.iter().filter(|r| pred(r)).count()
}

fn is_rule(row: &str) -> bool {
    !row.is_empty() && row.chars().all(|c| c == '─')
}

/// A view whose live area was laid out a few times at 100 columns (so its rows were written
/// over, with spaces where longer text was), now running `sleep 30`.
fn running_tool(emu: &mut Emulator) -> Feed {
    let mut f = Feed::new();
    emu.draw(&mut f.view);
    f.view
        .composer
        .set_text("a long draft that is typed into the editor before it is sent off");
    emu.draw(&mut f.view);
    f.view.composer.set_text("");
    f.user("work");
    emu.draw(&mut f.view);
    f.stream(
        "Starting the long job, which will take a while to finish.",
        100,
    );
    emu.draw(&mut f.view);
    f.delta(AssistantDelta::TextFinished {
        index: 0,
        text: "Starting the long job, which will take a while to finish.".into(),
    });
    f.send(EventPayload::MessageFinished {
        message: Message::from(assistant(
            vec![keel::kernel::message::Content::text(
                "Starting the long job, which will take a while to finish.",
            )],
            StopReason::ToolUse,
        )),
        entry_id: "e1".into(),
    });
    f.tool("call_sleep", "bash", json!({"command": "sleep 30"}), None);
    emu.draw(&mut f.view);
    f.view.now_ms += 1_900;
    emu.draw(&mut f.view);
    f
}

/// Issue 16.1a: shrinking and growing a reflowing terminal while a tool ran left a frozen
/// `⠙ bash … 2.9s` row in the scrollback.
#[test]
fn resize_while_a_tool_runs_leaves_no_stale_spinner_row() {
    for reflow in [true, false] {
        let mut emu = Emulator::new(100, 30, &EARLIER);
        let mut f = running_tool(&mut emu);
        match reflow {
            true => emu.reflow_to(60),
            false => emu.cut_to(60, 30),
        }
        emu.draw(&mut f.view);
        f.view.now_ms += 1_000;
        emu.draw(&mut f.view);
        match reflow {
            true => emu.reflow_to(140),
            false => emu.cut_to(140, 30),
        }
        emu.draw(&mut f.view);
        let rows = emu.all_rows();
        let one = |what: &str| count(&rows, |r| r.contains(what));
        assert_eq!(one("bash sleep 30"), 1, "reflow {reflow}: {rows:#?}");
        assert_eq!(one("Working…"), 1, "reflow {reflow}: {rows:#?}");
        assert_eq!(count(&rows, is_rule), 1, "reflow {reflow}: {rows:#?}");
        assert_eq!(
            one("Starting the long job"),
            1,
            "reflow {reflow}: {rows:#?}"
        );
    }
}

/// Issue 16.1b: the line streaming at the moment of a resize was left behind above its final
/// form.
#[test]
fn resize_while_text_streams_leaves_no_stale_streaming_line() {
    for reflow in [true, false] {
        let mut emu = Emulator::new(100, 30, &EARLIER);
        let mut f = Feed::new();
        f.view
            .composer
            .set_text("a long draft that is typed into the editor before it is sent off");
        emu.draw(&mut f.view);
        f.view.composer.set_text("");
        f.user("stream");
        f.stream(
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi",
            100,
        );
        emu.draw(&mut f.view);
        match reflow {
            true => emu.reflow_to(50),
            false => emu.cut_to(50, 30),
        }
        emu.draw(&mut f.view);
        f.delta(AssistantDelta::TextDelta {
            index: 0,
            delta: " omicron pi\nrho sigma\n".into(),
        });
        emu.draw(&mut f.view);
        match reflow {
            true => emu.reflow_to(120),
            false => emu.cut_to(120, 30),
        }
        emu.draw(&mut f.view);
        let rows = emu.all_rows();
        assert_eq!(
            count(&rows, |r| r.contains("alpha beta")),
            1,
            "reflow {reflow}: {rows:#?}"
        );
        assert_eq!(count(&rows, is_rule), 1, "reflow {reflow}: {rows:#?}");
    }
}

/// Issue 16.1c: idle with a draft, every shrink left one more `────` rule row.
#[test]
fn shrinking_an_idle_editor_with_a_draft_leaves_no_rule_rows_behind() {
    for reflow in [true, false] {
        let mut emu = Emulator::new(120, 30, &EARLIER);
        let mut f = Feed::new();
        f.view
            .composer
            .set_text("a long draft that is typed into the editor and then cut back");
        emu.draw(&mut f.view);
        f.view.composer.set_text("draft");
        emu.draw(&mut f.view);
        for cols in [100, 80, 61, 45, 30, 90] {
            match reflow {
                true => emu.reflow_to(cols),
                false => emu.cut_to(cols, 30),
            }
            emu.draw(&mut f.view);
            let rows = emu.all_rows();
            assert_eq!(
                count(&rows, is_rule),
                1,
                "reflow {reflow} at {cols}: {rows:#?}"
            );
            assert_eq!(count(&rows, |r| r.contains("› draft")), 1, "{rows:#?}");
        }
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The row the hardware cursor is on, and that row's text.
fn cursor_row(emu: &Emulator) -> (u16, String) {
    let (row, _) = emu.parser.screen().cursor_position();
    (row, emu.screen_rows()[usize::from(row)].clone())
}

/// Issue 16.2: pasting 120 lines grew the editor past the screen; the status line went away
/// and the cursor sat on the rule row.
#[test]
fn a_big_paste_is_a_chip_and_the_status_line_and_cursor_stay() {
    let mut emu = Emulator::new(80, 24, &["$ keel"]);
    let mut f = Feed::new();
    emu.draw(&mut f.view);
    let pasted: String = (1..=120).map(|i| format!("line {i}\n")).collect();
    f.view.on_paste("see ");
    f.view.on_paste(&pasted);
    for c in "please".chars() {
        f.view.on_key(key(KeyCode::Char(' ')));
        f.view.on_key(key(KeyCode::Char(c)));
    }
    emu.draw(&mut f.view);
    let screen = emu.screen_rows();
    assert!(
        screen
            .iter()
            .any(|r| r == "› see [Pasted 120 lines] p l e a s e"),
        "{screen:#?}"
    );
    assert!(
        screen.iter().any(|r| r.contains("claude-sonnet-4-5")),
        "{screen:#?}"
    );
    let (_, row) = cursor_row(&emu);
    assert!(row.starts_with("› see [Pasted"), "cursor on {row:?}");
    // Backspace takes the typed text, then the chip as one character.
    for _ in 0..12 {
        f.view.on_key(key(KeyCode::Backspace));
    }
    assert_eq!(f.view.composer.text(), format!("see {pasted}"));
    f.view.on_key(key(KeyCode::Backspace));
    assert_eq!(f.view.composer.text(), "see ");
    // Left crosses a chip in one press; what is sent is the pasted text.
    f.view.on_paste(&pasted);
    f.view.on_key(key(KeyCode::Left));
    f.view.on_key(key(KeyCode::Char('>')));
    let sent = f.view.on_key(key(KeyCode::Enter));
    assert_eq!(sent, Some(Action::Prompt(format!("see >{pasted}"))));
    // A paste of few lines but many characters is a chip too; a small one is text.
    f.view
        .on_paste(&"x".repeat(keel::front::tui::composer::CHIP_CHARS + 1));
    emu.draw(&mut f.view);
    assert!(emu
        .screen_rows()
        .iter()
        .any(|r| r == "› [Pasted 1001 chars]"));
    f.view.composer.clear();
    f.view.on_paste("one\ntwo\nthree\nfour\nfive\n");
    assert_eq!(f.view.composer.text(), "one\ntwo\nthree\nfour\nfive\n");
}

/// Issue 16.2: a long text in the editor (typed, or small pastes) is shown in at most
/// `composer::MAX_ROWS` rows (a third of a short screen), scrolled to the cursor.
#[test]
fn a_tall_draft_is_capped_and_scrolled_to_the_cursor() {
    for (cols, rows, cap) in [(80, 40, 10), (60, 15, 4)] {
        let mut emu = Emulator::new(cols, rows, &["$ keel"]);
        let mut f = Feed::new();
        for i in 0..12 {
            f.view.on_paste(&format!("a{i}\nb{i}\nc{i}\n"));
        }
        f.view.on_paste("end");
        emu.draw(&mut f.view);
        let screen = emu.screen_rows();
        let editor: Vec<&String> = screen
            .iter()
            .skip_while(|r| !r.starts_with('─'))
            .skip(1)
            .take_while(|r| !r.contains("claude-sonnet-4-5"))
            .collect();
        assert_eq!(editor.len(), cap, "{screen:#?}");
        assert!(
            screen.iter().any(|r| r.contains("claude-sonnet-4-5")),
            "{screen:#?}"
        );
        let (_, row) = cursor_row(&emu);
        assert_eq!(row.trim(), "end", "{screen:#?}");
        // Up to the first line: the window follows the cursor.
        for _ in 0..36 {
            f.view.on_key(key(KeyCode::Up));
        }
        f.view.on_key(key(KeyCode::Home));
        f.view.on_key(key(KeyCode::Char('!')));
        emu.draw(&mut f.view);
        let (_, row) = cursor_row(&emu);
        assert_eq!(row, "› !a0", "{:#?}", emu.screen_rows());
        assert!(emu
            .screen_rows()
            .iter()
            .any(|r| r.contains("claude-sonnet-4-5")));
    }
}

/// Issue 16.9: when the first answer line was committed, a blank line appeared above it and
/// the text jumped down a row. The blank line that separates the answer from the prompt is
/// in the live area from the start, so every row stays where it is.
#[test]
fn the_first_committed_answer_line_stays_on_its_row() {
    let mut emu = Emulator::new(60, 20, &["$ keel"]);
    let mut f = Feed::new();
    emu.draw(&mut f.view);
    f.user("hello");
    emu.draw(&mut f.view);
    f.stream("The first line of the answer", 100);
    emu.draw(&mut f.view);
    let row_of = |emu: &Emulator, text: &str| {
        let rows = emu.screen_rows();
        let at = rows.iter().position(|r| r.contains(text));
        (at, rows)
    };
    let (before, rows) = row_of(&emu, "The first line");
    let prompt = rows.iter().position(|r| r.contains("› hello")).unwrap();
    assert_eq!(
        before,
        Some(prompt + 2),
        "one blank row under the prompt: {rows:#?}"
    );
    f.delta(AssistantDelta::TextDelta {
        index: 0,
        delta: ", and more.\nA second".into(),
    });
    emu.draw(&mut f.view);
    let (after, rows) = row_of(&emu, "The first line");
    assert_eq!(after, before, "{rows:#?}");
    let (second, rows) = row_of(&emu, "A second");
    assert_eq!(second, before.map(|b| b + 1), "{rows:#?}");
    f.finish("The first line of the answer, and more.\nA second line.");
    emu.draw(&mut f.view);
    let (done, rows) = row_of(&emu, "The first line");
    assert_eq!(done, before, "{rows:#?}");
    assert_eq!(rows[before.unwrap() - 1], "", "{rows:#?}");
}

/// The cells of the first screen row containing `needle`, from where it starts to the row's
/// end (trailing blanks left out).
fn cells_of<'a>(screen: &'a vt100::Screen, needle: &str) -> Vec<&'a vt100::Cell> {
    let (rows, cols) = screen.size();
    let row = (0..rows.get())
        .find(|&r| {
            screen
                .contents_between(r, 0, r, cols.get())
                .contains(needle)
        })
        .unwrap_or_else(|| panic!("no {needle:?} on screen:\n{}", screen.contents()));
    let text = screen.contents_between(row, 0, row, cols.get());
    let start = text.find(needle).unwrap();
    let first = text[..start].chars().count() as u16;
    let len = text[start..].trim_end().chars().count() as u16;
    (first..first + len)
        .map(|c| screen.cell(row, c).unwrap())
        .collect()
}

/// Issue 16.10: with NO_COLOR the placeholder lost its dim style on two cells (crossterm
/// writes a colour change as `CSI m`, which ends dim too). Dim, bold and reverse are not
/// colours: the placeholder and the run's status stay dim and nothing on screen has a colour.
#[test]
fn no_color_keeps_dim_and_drops_only_colours() {
    let sb = Sandbox::new();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("tui.json")));
    let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1"), ("NO_COLOR", "1")]);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("work\r");
    s.wait_for("the running tool", |t| {
        t.contains("bash sleep 30") && t.contains("Working") && t.contains("Enter steers")
    });
    let screen = s.parser.screen();
    for needle in ["Working", "Enter steers"] {
        for (i, cell) in cells_of(screen, needle).iter().enumerate() {
            assert!(cell.dim(), "cell {i} of the row from {needle:?} is not dim");
        }
    }
    let (rows, cols) = screen.size();
    for r in 0..rows.get() {
        for c in 0..cols.get() {
            let cell = screen.cell(r, c).unwrap();
            assert_eq!(cell.fgcolor(), vt100::Color::Default, "row {r} col {c}");
            assert_eq!(cell.bgcolor(), vt100::Color::Default, "row {r} col {c}");
        }
    }
    s.send("\x1b");
    s.wait_for("the interrupted run", |t| t.contains("interrupted"));
    assert!(s.quit("\x04", &mut child).success());
}

/// Issue 16.10: `TERM=dumb` got the full escape-sequence UI. It gets plain lines: the prompt
/// read as a line, the answer and the tool lines printed as text, an approval question
/// answered by a line, `/quit` (or end of input) leaves, and not one ESC byte is written.
#[test]
fn a_dumb_terminal_gets_plain_lines_without_escape_sequences() {
    let sb = Sandbox::new();
    let shell = format!(
        "{} --permission ask; echo KEEL_EXIT=$?",
        keel_shell(&fixture("tui.json"))
    );
    let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1"), ("TERM", "dumb")]);
    s.wait_for("the header", |t| t.contains("/help for commands"));
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("A second line, streamed."));
    s.send("/nope\r");
    s.wait_for("the unknown command", |t| {
        t.contains("unknown command /nope")
    });
    // An approval question is a line too; the next line answers it.
    s.send("work\r");
    s.wait_for("the question", |t| {
        t.contains("? Allow bash: sleep 30 [y = allow once")
    });
    s.send("n\r");
    s.wait_for("the denied call", |t| t.contains("denied by the user"));
    assert!(s.quit("/quit\r", &mut child).success());
    let text = s.text();
    assert!(text.contains("Hello from keel."), "{text}");
    assert!(text.contains("Session saved. Resume it with"), "{text}");
    assert!(
        !s.raw.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&s.raw)
    );
}

/// Issue 16.14: the first Ctrl+C during a run interrupts it (as Esc does), a second one within
/// a second quits; later than that it interrupts again; idle, Ctrl+C still clears the editor.
#[test]
fn ctrl_c_interrupts_a_run_and_a_second_one_within_a_second_quits() {
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    let mut f = Feed::new();
    f.user("work");
    f.view.composer.set_text("a draft");
    assert_eq!(f.view.on_key(ctrl_c), Some(Action::Abort));
    assert_eq!(f.view.composer.text(), "a draft", "the draft stays");
    f.view.now_ms += keel::front::tui::view::QUIT_WINDOW_MS;
    assert_eq!(f.view.on_key(ctrl_c), Some(Action::Quit));

    let mut f = Feed::new();
    f.user("work");
    assert_eq!(f.view.on_key(ctrl_c), Some(Action::Abort));
    f.view.now_ms += keel::front::tui::view::QUIT_WINDOW_MS + 1;
    assert_eq!(
        f.view.on_key(ctrl_c),
        Some(Action::Abort),
        "too late: interrupts again"
    );
    // Another key in between disarms it.
    f.view.now_ms += 10;
    f.view.on_key(key(KeyCode::Char('x')));
    assert_eq!(f.view.on_key(ctrl_c), Some(Action::Abort));

    let mut f = Feed::new();
    f.view.composer.set_text("idle draft");
    assert_eq!(f.view.on_key(ctrl_c), None);
    assert!(f.view.composer.is_empty());
    assert_eq!(f.view.on_key(ctrl_c), None);
    assert_eq!(f.view.on_key(ctrl_c), Some(Action::Quit));
}

/// Issue 16.14: prompt history persists per project in `$KEEL_HOME/history.jsonl` (0600, one
/// JSON object a line, appended); a torn last line is tolerated; Up in a fresh TUI recalls the
/// previous session's prompts of this directory, not another directory's.
#[test]
fn prompt_history_persists_per_project_across_sessions() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
    let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1")]);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("the first prompt\r");
    s.wait_for("the answer", |t| t.contains("Hello from keel!"));
    assert!(s.quit("\x04", &mut child).success());

    let path = sb.home().join("history.jsonl");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["text"], "the first prompt");
    assert!(lines[0]["ts"].as_i64().unwrap() > 0);
    let cwd = lines[0]["cwd"].as_str().unwrap().to_string();
    // Another project's entry and a torn last line (a crash mid-write).
    let other = serde_json::json!({"cwd": "/elsewhere", "text": "not mine", "ts": 1});
    std::fs::write(&path, format!("{text}{other}\n{{\"cwd\": \"{cwd}\", \"te")).unwrap();

    let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1")]);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("\x1b[A");
    s.wait_for("the recalled prompt", |t| t.contains("› the first prompt"));
    s.send("\x1b[A");
    s.send("!");
    s.wait_for("still the oldest entry", |t| {
        t.contains("› the first prompt!")
    });
    s.send("\x15second\r");
    s.wait_for("the second answer", |t| {
        t.matches("Hello from keel!").count() >= 1 && t.contains("› second")
    });
    assert!(s.quit("\x04", &mut child).success());
    let text = std::fs::read_to_string(&path).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["text"], "second", "{text}");
    assert_eq!(last["cwd"], cwd.as_str());
}

/// Issue 16.14: Ctrl+Z gives the terminal back and stops keel (the shell's job control sees
/// it stopped, 128 + SIGTSTP); `fg` takes the terminal again and the live area is drawn in
/// full under what the shell printed, and keys work again.
#[test]
fn ctrl_z_suspends_and_fg_restores_the_ui() {
    let sb = Sandbox::new();
    // A shell with job control: keel in its own process group; once it stops, the shell
    // prints the terminal's modes, waits for a line, then runs `fg`.
    let shell = format!(
        "set -m; {}; echo KEEL_STOPPED=$?; stty -a; read go; fg; echo KEEL_EXIT=$?",
        keel_shell(&fixture("tui.json"))
    );
    let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1")]);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    assert!(s.parser.screen().bracketed_paste());
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("A second line, streamed."));
    s.send("\x1a");
    s.wait_for("the stopped job and the terminal's modes", |t| {
        t.contains("KEEL_STOPPED=148") && t.contains("echoctl")
    });
    let screen = s.text();
    let words: Vec<&str> = screen.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "{screen}"
    );
    assert!(
        !s.parser.screen().bracketed_paste(),
        "bracketed paste is off while stopped"
    );
    assert!(!s.parser.screen().hide_cursor());
    // The user types `fg` (here: a line the shell waits for, then `fg`): the editor is back
    // under the shell's lines, in raw mode again.
    s.send("\r");
    s.wait_for("the editor again", |t| {
        t.rfind("Ask anything")
            .is_some_and(|at| at > t.find("KEEL_STOPPED").unwrap())
    });
    assert!(s.parser.screen().bracketed_paste());
    s.send("again\r");
    s.wait_for("the second answer", |t| {
        t.contains("› again") && t.contains("Done.")
    });
    assert!(s.quit("\x04", &mut child).success());
}

/// Issue 16.14: a terminal that says it supports the kitty keyboard protocol is asked for
/// disambiguated keys (so Shift+Enter is told from Enter) and the flags are popped at exit;
/// one that does not answer is not asked.
#[test]
fn the_kitty_keyboard_protocol_is_pushed_where_supported_and_popped_at_exit() {
    for supported in [true, false] {
        let sb = Sandbox::new();
        let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("tui.json")));
        let (mut s, mut child) = spawn_with(&sb, &shell, &[("KEEL_NO_DAEMON", "1")]);
        s.kitty = supported;
        s.wait_for("the editor", |t| t.contains("Ask anything"));
        if supported {
            // Shift+Enter in the kitty protocol: a new line, not a send.
            s.send("one\x1b[13;2utwo");
            s.wait_for("two editor lines", |t| {
                t.contains("› one") && t.contains("  two")
            });
        }
        // Ctrl+C clears the editor, Ctrl+D on the empty one quits.
        s.send("\x03");
        s.wait_for("an empty editor", |t| t.contains("Ask anything"));
        assert!(s.quit("\x04", &mut child).success());
        let raw = String::from_utf8_lossy(&s.raw).to_string();
        let pushed = raw.find("\x1b[>1u");
        let popped = raw.find("\x1b[<1u");
        match supported {
            true => assert!(pushed.is_some() && popped > pushed, "{raw:?}"),
            false => assert!(pushed.is_none() && popped.is_none(), "{raw:?}"),
        }
    }
}
