//! Issue 16's history-cell glitches and features, each shown on the view fed public events
//! (or on the real binary in a pty): notices keep their line breaks and long paths copy whole,
//! the slash menu, resumed internals, the short id, `!cmd` cells, the retry cell, approval
//! dialogs and grouped exploration cells.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel::front::tui::paint::row_text;
use keel::front::tui::transcript::HistoryCell;
use keel::front::tui::view::{Action, View, COMMANDS};
use keel::kernel::event::{ApprovalDecision, EventPayload, RunOutcome};
use keel::kernel::op::Op;
use keel::kernel::session::{short_id, SHORT_ID_CHARS};
use keel::kernel::tool::ToolOutput;
use keel::wire::events::WireEvent;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use serde_json::json;

use crate::common::daemon::{open, Daemon};
use crate::common::kernel::rt;
use crate::common::pty::spawn;
use crate::common::support::{fixture, keel_shell, scripted_args, snap, Sandbox};
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
        .notice(HistoryCell::Notice(keel::front::tui::help_text(false)));
    let screen = f.screen(100, 40);
    for (c, _) in COMMANDS {
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

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn type_text(view: &mut View, text: &str) {
    for c in text.chars() {
        assert_eq!(view.on_key(key(KeyCode::Char(c))), None);
    }
}

fn menu_names(view: &View) -> Vec<String> {
    let menu = view.slash.menu.as_ref().expect("the / menu is open");
    menu.names().into_iter().map(str::to_string).collect()
}

/// Regression: the `/` menu showed 6 of 11 commands with no "more" marker, and arrows did not
/// select.
#[test]
fn the_slash_menu_shows_every_command_in_a_scrolling_window() {
    let mut f = Feed::new();
    f.view.templates = vec![("review".into(), "review the diff".into())];
    type_text(&mut f.view, "/");
    let all: Vec<String> = COMMANDS.iter().map(|(c, _)| c.to_string()).collect();
    let mut want = all.clone();
    want.push("review".into());
    assert_eq!(menu_names(&f.view), want);
    let screen = f.screen(80, 24);
    snap("tui_cells_slash_menu_80x24", &screen);
    assert!(screen.contains("  ↓ 13 more"), "{screen}");
    // Down to the tenth: the window scrolls and says what is above and below.
    for _ in 0..9 {
        assert_eq!(f.view.on_key(key(KeyCode::Down)), None);
    }
    let screen = f.screen(80, 24);
    assert!(screen.contains("  ↑ 2 more · ↓ 11 more"), "{screen}");
    assert!(
        !screen.contains("/model "),
        "scrolled past /model:\n{screen}"
    );
    let menu = f.view.slash.menu.as_ref().unwrap();
    assert_eq!(menu.chosen(), Some(all[9].as_str()));
    // Enter runs the highlighted command.
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Command {
            name: all[9].clone(),
            args: String::new()
        })
    );
    assert!(f.view.composer.is_empty() && f.view.slash.menu.is_none());
}

#[test]
fn the_slash_menu_filters_as_you_type_and_tab_completes_the_choice() {
    let mut f = Feed::new();
    type_text(&mut f.view, "/m");
    // Names starting with "m" first, then those containing it.
    assert_eq!(
        menu_names(&f.view),
        ["model", "compact", "resume", "name", "permissions"]
    );
    assert_eq!(f.view.on_key(key(KeyCode::Down)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Up)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Down)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Tab)), None);
    assert_eq!(f.view.composer.text(), "/compact ");
    assert!(f.view.slash.menu.is_none(), "a space closes the menu");
    // Esc closes it for this text; typing on opens it again.
    f.view.composer.clear();
    type_text(&mut f.view, "/n");
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    assert!(f.view.slash.menu.is_none());
    type_text(&mut f.view, "e");
    assert_eq!(menu_names(&f.view), ["new"]);
    type_text(&mut f.view, "x");
    assert!(f.view.slash.menu.is_none(), "nothing matches /nex");
}

/// Regression: resuming showed a compaction's summary and a `!cmd`'s output as prompts the user
/// typed ("Ran `printf …`" with a raw fence). They come back as a compaction cell and a shell
/// cell, as they were shown when they happened.
#[test]
fn a_resumed_session_shows_its_compaction_and_shell_commands_as_such() {
    let sb = Sandbox::new();
    let keel = keel_shell(&fixture("tui.json"));
    let shell = format!("{keel}; echo FIRST_DONE; {keel} --continue");
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("!printf 'early\\n'\r");
    s.wait_for("the first shell command", |t| t.contains("✓ bash printf"));
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("A second line, streamed."));
    s.send("/compact\r");
    s.wait_for("the compaction", |t| t.contains("⇣ compacted"));
    s.send("!printf 'late-one\\nlate-two\\n'\r");
    // Finished (a live cell has a spinner, not ✓): quitting now cancels nothing.
    s.wait_for("the second shell command's end", |t| {
        t.contains("✓ bash printf 'late-one")
    });
    s.send("\x04");
    s.wait_for("the resumed session", |t| {
        t.contains("FIRST_DONE") && t.contains("(resumed)") && t.contains("Ask anything")
    });
    let screen = s.text();
    let resumed = screen.rsplit("FIRST_DONE").next().unwrap();
    assert!(!resumed.contains("Ran `"), "{resumed}");
    assert!(!resumed.contains("```"), "{resumed}");
    assert!(!resumed.contains("summary"), "{resumed}");
    let compacted = resumed.find("⇣ compacted").expect(resumed);
    let bash = resumed.find("✓ bash printf 'late-one").expect(resumed);
    assert!(compacted < bash, "{resumed}");
    assert!(
        resumed.contains("late-one") && resumed.contains("exit 0"),
        "{resumed}"
    );
    s.send("\x04");
    assert!(child.wait().unwrap().success());
}

/// The id part of a session file's name (`<time>_<id>.jsonl`).
fn id_of(file: &std::path::Path) -> String {
    let name = file.file_stem().unwrap().to_str().unwrap();
    name.rsplit_once('_').unwrap().1.to_string()
}

/// Regression: the header's short id was the UUIDv7's first 8 characters, the same for every
/// session made within the same minute, so `--resume <shown id>` was ambiguous. The shown part
/// differs, and `--resume` takes it.
#[test]
fn the_short_id_of_sessions_made_together_differs_and_resumes_the_right_one() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    // The sandbox's clock is fixed: both are made in the same millisecond.
    for seed in ["1", "2"] {
        let args = scripted_args(&["-p"], &script, &["hello"]);
        let out = sb.cmd(&args).env("KEEL_TEST_SEED", seed).output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let files = sb.session_files();
    let ids: Vec<String> = files.iter().map(|f| id_of(f)).collect();
    assert_eq!(ids[0][..8], ids[1][..8], "same time, same UUIDv7 prefix");
    let short: Vec<&str> = ids.iter().map(|i| short_id(i)).collect();
    assert_eq!(short[0].len(), SHORT_ID_CHARS);
    assert_ne!(short[0], short[1], "{ids:?}");
    let before = std::fs::read_to_string(&files[1]).unwrap().len();
    let r = sb.scripted("-p", "hello.json", &["--resume", short[1], "hello again"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(std::fs::read_to_string(&files[1]).unwrap().len() > before);
    assert_eq!(sb.session_files(), files, "no new session");
}

/// `keel attach` names a live session the same way: by the short id too.
#[test]
fn attach_takes_the_short_id_the_header_shows() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.client();
    let a = open(&mut c, &sb, "hello.json", &[]);
    let _b = open(&mut c, &sb, "hello.json", &[]);
    let socket = d.socket.display().to_string();
    let out = sb
        .cmd(&["attach", "--socket", &socket, short_id(&a)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Found: what stops it is only the missing terminal.
    assert!(stderr.contains("keel attach needs a terminal"), "{stderr}");
    let out = sb
        .cmd(&["attach", "--socket", &socket, "zz99"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no session zz99 is live"), "{stderr}");
}

/// Regression: a `!cmd` showed `$ cmd  (running…)` (which stayed behind) and only its last
/// 5 output lines at the end. Its output streams live in a bash cell while it runs, the
/// finished cell replaces it, and Ctrl+O shows the longer tail as for tool cells.
#[test]
fn a_shell_command_streams_live_and_expands_like_a_bash_tool_cell() {
    let sb = Sandbox::new();
    let shell = keel_shell(&fixture("tui.json"));
    let (mut s, mut child) = spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    // It prints 12 lines, then waits for the test to create `go`.
    s.send("!seq 1 12; while [ ! -f go ]; do sleep 0.05; done; echo after-go\r");
    s.wait_for("the live output while it runs", |t| {
        t.contains("bash seq 1 12") && t.contains("… 7 earlier lines") && t.contains("\n    12")
    });
    assert!(!s.text().contains("running…"), "{}", s.text());
    std::fs::write(sb.work().join("go"), "").unwrap();
    s.wait_for("the finished cell", |t| {
        t.contains("✓ bash seq 1 12") && t.contains("after-go") && t.contains("exit 0")
    });
    let screen = s.text();
    assert_eq!(screen.matches("bash seq 1 12").count(), 1, "{screen}");
    // Expanded, a longer tail is shown, as for a tool cell.
    s.send("\x0f");
    s.send("!seq 101 110\r");
    s.wait_for("the expanded cell", |t| {
        t.contains("✓ bash seq 101 110") && t.contains("    110\n    exit 0")
    });
    let screen = s.text();
    let cell = screen.rsplit("✓ bash seq 101 110").next().unwrap();
    assert!(
        cell.contains("  ⎿ 101\n") && !cell.contains("earlier"),
        "{cell}"
    );
    s.send("\x04");
    assert!(child.wait().unwrap().success());
}

/// What a terminal `w`x`h` shows of `view` (one row per line, trailing spaces dropped).
fn view_screen(view: &mut View, w: u16, h: u16) -> String {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    view.render_screen(&mut buf);
    let rows: Vec<String> = (0..h).map(|y| row_text(&buf, y)).collect();
    rows.join("\n")
}

/// The event lines `keel --mode rpc` writes for one prompt with this script.
fn rpc_lines(sb: &Sandbox, script: &str) -> Vec<String> {
    let path = sb.dir.path().join("script.json");
    std::fs::write(&path, script).unwrap();
    let path = path.display().to_string();
    let args = scripted_args(&["--mode", "rpc"], &path, &[]);
    let r = sb.run_stdin(&args, "{\"type\":\"prompt\",\"message\":\"hi\"}\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<String> = r.stdout.lines().map(str::to_string).collect();
    assert!(
        lines.iter().any(|l| l.contains("agent_settled")),
        "{}",
        r.stdout
    );
    lines
}

/// A server that cannot be reached, three lines of error, retried three times.
const UNREACHABLE: &str = r#"{"model": "m", "turns": [{"repeat": true, "chunks": [
    {"error": "connection refused\ncaused by: tcp connect error\nhint: is the server running?",
     "kind": "overloaded", "retryAfterMs": 20}]}]}"#;

/// Regression: an unreachable server printed the same 3-line error for every retry (about 25
/// lines for one prompt). While retrying, one live row counts down; at the end, one error.
#[test]
fn retries_are_one_live_row_then_one_error() {
    let sb = Sandbox::new();
    let mut view = View::new();
    let mut retry_rows = Vec::new();
    for (i, line) in rpc_lines(&sb, UNREACHABLE).iter().enumerate() {
        let Some(event) = WireEvent::parse(line) else {
            continue;
        };
        let at = 1_000_000 + i as i64 * 10;
        view.now_ms = at;
        assert!(view.on_event(&event, at).is_empty());
        if matches!(event, WireEvent::AutoRetryStart { .. }) {
            let screen = view_screen(&mut view, 100, 30);
            let row = screen
                .lines()
                .find(|l| l.starts_with("↻ "))
                .map(str::to_string);
            retry_rows.push(row.unwrap_or_else(|| panic!("no retry row:\n{screen}")));
        }
    }
    assert_eq!(
        retry_rows,
        (1..=3)
            .map(|n| format!("↻ retry {n}/3 in 1s: connection refused · esc to cancel"))
            .collect::<Vec<_>>()
    );
    let screen = view_screen(&mut view, 100, 30);
    assert_eq!(screen.matches("connection refused").count(), 1, "{screen}");
    assert_eq!(
        screen.matches("hint: is the server running?").count(),
        1,
        "{screen}"
    );
    assert!(screen.contains("(gave up after 3 retries)"), "{screen}");
    assert!(!screen.contains("↻"), "{screen}");
}

/// A retry that works leaves one line saying so, and no error.
#[test]
fn a_retry_that_works_leaves_one_line() {
    let sb = Sandbox::new();
    let script = r#"{"model": "m", "turns": [
        {"chunks": [{"error": "overloaded: try later", "kind": "overloaded", "retryAfterMs": 20}]},
        {"chunks": [{"text": "the answer"}]}]}"#;
    let mut view = View::new();
    for line in rpc_lines(&sb, script) {
        if let Some(event) = WireEvent::parse(&line) {
            assert!(view.on_event(&event, 0).is_empty());
        }
    }
    let screen = view_screen(&mut view, 100, 30);
    assert_eq!(screen.matches("overloaded").count(), 1, "{screen}");
    assert!(
        screen.contains("↻ answered after 1 retry (overloaded: try later)"),
        "{screen}"
    );
    assert!(
        screen.contains("the answer") && !screen.contains('✗'),
        "{screen}"
    );
}

fn approval_view(tool: &str, args: serde_json::Value) -> Feed {
    Feed::asking("change it", tool, args, None)
}

/// An edit's approval shows the change as a coloured diff; a diff taller than the room left
/// scrolls with PgDn/PgUp and the arrows, and says how much is above and below.
#[test]
fn an_edit_approval_shows_its_diff_and_scrolls() {
    let old: String = (1..=30).map(|i| format!("old line {i}\n")).collect();
    let new: String = (1..=30).map(|i| format!("new line {i}\n")).collect();
    let args = json!({"path": "src/lib.rs", "oldText": old, "newText": new});
    let mut f = approval_view("edit", args);
    let screen = f.screen(80, 24);
    snap("tui_cells_edit_approval_80x24", &screen);
    assert!(screen.contains("? Allow edit: src/lib.rs"), "{screen}");
    assert!(screen.contains("    -old line 1\n"), "{screen}");
    assert!(!screen.contains("+new line 30"), "{screen}");
    assert!(screen.contains("↑ 0 more · ↓ "), "{screen}");
    for _ in 0..10 {
        assert_eq!(f.view.on_key(key(KeyCode::PageDown)), None);
    }
    let screen = f.screen(80, 24);
    assert!(
        screen.contains("    +new line 30\n"),
        "scrolled to the end:\n{screen}"
    );
    assert!(screen.contains(" · ↓ 0 more"), "{screen}");
    assert_eq!(f.view.on_key(key(KeyCode::Up)), None);
    assert!(!f.screen(80, 24).contains("+new line 30"));
    // Answered a minute later: the cell's timer starts at the answer.
    f.view.now_ms += 60_000;
    assert!(matches!(
        f.view.on_key(key(KeyCode::Char('y'))),
        Some(Action::Approve {
            decision: ApprovalDecision::Allow,
            ..
        })
    ));
    let tool = &f.view.transcript.running[0];
    assert_eq!(
        (tool.started_ms, tool.awaiting_approval),
        (f.view.now_ms, false)
    );
}

/// A write's approval shows the content it would write; a multi-line bash command is shown
/// whole, wrapped (the question used to cut it to its first line).
#[test]
fn write_and_bash_approvals_show_everything_they_would_do() {
    let f = |tool: &str, args| approval_view(tool, args).screen(60, 24);
    let screen = f(
        "write",
        json!({"path": "notes.md", "content": "# Notes\nfirst\n"}),
    );
    assert!(screen.contains("    +# Notes\n    +first"), "{screen}");
    let long = format!("cargo build --release --features {}", "x,".repeat(30));
    let cmd = format!("cd build &&\n{long}\necho done");
    let screen = f("bash", json!({"command": cmd}));
    assert!(screen.contains("? Allow bash: cd build && …"), "{screen}");
    let rows: Vec<&str> = screen.lines().collect();
    let start = rows
        .iter()
        .position(|r| r.trim() == "cd build &&")
        .expect(&screen);
    // Every character of the command is there, in order (wrapping drops only spaces).
    let body: String = rows[start + 1..start + 5].concat().replace(' ', "");
    assert_eq!(
        body,
        format!("{long}echo done").replace(' ', ""),
        "{screen}"
    );
    assert!(!screen.contains("x,…"), "nothing is cut:\n{screen}");
}

/// `d` then a message denies the call and gives the message to the model.
#[test]
fn deny_with_a_message_typed_in_the_dialog() {
    let mut f = approval_view("bash", json!({"command": "rm -rf target/"}));
    assert_eq!(f.view.on_key(key(KeyCode::Char('d'))), None);
    type_text(&mut f.view, "use cargo clean instead");
    let screen = f.screen(100, 24);
    assert!(
        screen.contains("why not? use cargo clean instead"),
        "{screen}"
    );
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::DenyWithMessage {
            call_id: "call_1".into(),
            message: "use cargo clean instead".into()
        })
    );
    assert!(
        !f.screen(100, 24).contains("Allow bash"),
        "the dialog closed"
    );
}

/// Regression: the tool's duration counted the time a person took to answer its approval.
#[test]
fn the_time_an_approval_waits_is_not_the_tools_duration() {
    use keel::kernel::provider::scripted::ScriptedProvider;
    use keel::{AgentConfig, AgentSession, Bus, Clock, Permission};
    let dir = tempfile::tempdir().unwrap();
    let mut c = AgentConfig::new(dir.path().to_path_buf(), dir.path().to_path_buf());
    c.permission = Permission::Ask;
    c.can_ask = true;
    let script = r#"{"turns":[
      {"match":"^go","chunks":[{"toolCall":{"id":"c1","name":"write","arguments":{"path":"x.txt","content":"x"}}}]},
      {"chunks":[{"text":"done"}]}]}"#;
    let provider = ScriptedProvider::from_script(serde_json::from_str(script).unwrap()).unwrap();
    // The fixed clock moves one millisecond per reading: the person's wait is 10 000 readings.
    let clock = Clock::new(Some(1), Some(1));
    let bus = Bus::new(clock.clone());
    let s = AgentSession::new(c, Arc::new(provider), bus, clock.clone(), Vec::new());
    let rt = rt();
    let duration = rt.block_on(async {
        let mut rx = s.subscribe();
        let _run = s.prompt("go".into()).unwrap();
        while let Some(ev) = rx.recv().await {
            match &ev.payload {
                EventPayload::ApprovalRequested { call_id, .. } => {
                    for _ in 0..10_000 {
                        clock.now_ms();
                    }
                    let op = Op::Approve {
                        call_id: call_id.clone(),
                        decision: ApprovalDecision::Allow,
                    };
                    s.submit(op).unwrap();
                }
                EventPayload::ToolCallFinished { duration_ms, .. } => return *duration_ms,
                _ => {}
            }
        }
        panic!("no tool call finished");
    });
    assert!(duration < 1_000, "{duration} ms: the wait was counted");
}

fn read_ok(path: &str) -> Option<ToolOutput> {
    let d =
        json!({"path": path, "totalLines": 10, "startLine": 1, "endLine": 10, "truncated": false});
    Some(ToolOutput::ok("...").with_details(d))
}

fn grep_ok() -> Option<ToolOutput> {
    Some(ToolOutput::ok("...").with_details(json!({"matches": 2, "files": 1, "truncated": false})))
}

/// Five exploration calls (`live`: what the live area shows of them), then an edit.
fn explore(f: &mut Feed, live_shows: &str) {
    f.user("look around");
    for (i, p) in ["a.rs", "b.rs", "c.rs"].iter().enumerate() {
        f.tool(&format!("r{i}"), "read", json!({"path": p}), read_ok(p));
    }
    f.tool("g1", "grep", json!({"pattern": "fn main"}), grep_ok());
    f.tool(
        "g2",
        "find",
        json!({"pattern": "*.toml"}),
        Some(ToolOutput::error("bad glob")),
    );
    // Still running: the run of them is held, shown live.
    let screen = f.screen(80, 24);
    let live = screen.rsplit("› look around").next().unwrap();
    assert!(live.contains(live_shows), "{screen}");
    let diff = "@@ -1 +1 @@\n-a\n+b\n";
    let edit = Some(ToolOutput::ok("ok").with_details(json!({"diff": diff})));
    f.tool(
        "e1",
        "edit",
        json!({"path": "a.rs", "oldText": "a", "newText": "b"}),
        edit,
    );
}

/// A run of consecutive read/grep/find/ls calls is one cell; Ctrl+O shows the calls in it.
#[test]
fn consecutive_exploration_calls_are_one_cell_that_ctrl_o_expands() {
    let mut f = Feed::new();
    explore(&mut f, "▸ read 3 files, 2 searches · 1 failed");
    f.settle(RunOutcome::Completed);
    let screen = f.screen(80, 24);
    snap("tui_cells_explored_80x24", &screen);
    assert_eq!(
        screen
            .matches("▸ read 3 files, 2 searches · 1 failed")
            .count(),
        1
    );
    assert!(!screen.contains("✓ read"), "{screen}");
    let group = screen.find("▸ read").unwrap();
    assert!(
        group < screen.find("✓ edit a.rs").unwrap(),
        "in its place:\n{screen}"
    );
    // Expanded: the same run shows each call.
    assert_eq!(
        f.view
            .on_key(KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL)),
        None
    );
    explore(&mut f, "✗ find *.toml");
    f.settle(RunOutcome::Completed);
    let screen = f.screen(80, 40);
    let second = screen.rsplit("› look around").next().unwrap();
    for want in [
        "✓ read a.rs",
        "✓ read c.rs",
        "✓ grep /fn main/",
        "✗ find *.toml",
    ] {
        assert!(second.contains(want), "{want}:\n{screen}");
    }
    assert!(!second.contains('▸'), "{screen}");
    // A single call stays a plain cell.
    let mut f = Feed::new();
    f.user("one");
    f.tool("r1", "read", json!({"path": "a.rs"}), read_ok("a.rs"));
    f.settle(RunOutcome::Completed);
    let screen = f.screen(80, 24);
    assert!(
        screen.contains("✓ read a.rs") && !screen.contains('▸'),
        "{screen}"
    );
}
