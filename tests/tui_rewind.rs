//! The TUI's rewind (issue 32 point 4): the picker of checkpointed messages with its preview
//! (snapshots at 80x24 and 40x12), its keys (Esc Esc on an empty idle editor opens it, Esc
//! during a run still aborts, Enter offers the four choices), and end to end in a pty: a
//! scripted turn edits a file, `/rewind` → "code only" puts the file back on disk, `/rewind
//! undo` brings the edit back, then "conversation only" shows the branch the session is on;
//! a rewind made by another client redraws an attached window.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{json, Value};

use keel::front::tui::rewind::RewindPicker;
use keel::front::tui::view::Action;
use keel::kernel::checkpoint::{Listed, PreviewChange, PreviewFile, Restore};
use keel::kernel::event::RunOutcome;
use keel::wire::pi::data::RewindPreviewData;

use crate::common::daemon::Daemon;
use crate::common::support::{keel_shell, Sandbox};
use crate::tui::Feed;

fn listed(id: &str, entry: &str, minutes_ago: i64, prompt: &str, files: &[&str]) -> Listed {
    let at = 1_796_000_000_000 - minutes_ago * 60_000;
    Listed {
        id: id.into(),
        entry_id: entry.into(),
        timestamp: keel::kernel::clock::iso(at),
        prompt: prompt.into(),
        snapshot: format!("tree-{id}"),
        files: files.iter().map(|f| f.to_string()).collect(),
    }
}

fn file(path: &str, change: PreviewChange, lines: Option<(u64, u64)>, moved: bool) -> PreviewFile {
    PreviewFile {
        path: path.into(),
        change,
        added: lines.map(|l| l.0),
        removed: lines.map(|l| l.1),
        changed_since_snapshot: moved,
    }
}

/// A session of three checkpointed prompts; the newest is highlighted with its preview.
fn rewind_feed() -> Feed {
    let mut f = Feed::new();
    f.user("Now clean up the config loader");
    f.settle(RunOutcome::Completed);
    let list = [
        listed("c1", "u1", 90, "Fix the flaky login test", &[]),
        listed(
            "c2",
            "u2",
            30,
            "日本語のドキュメントを書いて\nsecond line",
            &["src/login.rs"],
        ),
        listed(
            "c3",
            "u3",
            2,
            "Now clean up the config loader",
            &["docs/ja.md", "a.txt"],
        ),
    ];
    let picker = RewindPicker::new(&list, f.view.now_ms);
    assert_eq!(f.view.open_rewind(picker).as_deref(), Some("u3"));
    let preview = RewindPreviewData {
        checkpoint: Some("c3".into()),
        files: vec![
            file("docs/ja.md", PreviewChange::Modified, Some((3, 12)), false),
            file("logo.png", PreviewChange::Added, None, false),
            file(
                "src/config/loader.rs",
                PreviewChange::Modified,
                Some((40, 7)),
                true,
            ),
            file(
                "src/config/new.rs",
                PreviewChange::Removed,
                Some((0, 25)),
                false,
            ),
        ],
    };
    f.view.rewind_preview("u3", Ok(preview));
    f
}

#[test]
fn rewind_picker_with_its_preview() {
    Feed::snap_both(rewind_feed, "rewind_picker");
}

#[test]
fn rewind_picker_offers_the_four_choices() {
    Feed::snap_both(
        || {
            let mut f = rewind_feed();
            assert_eq!(f.view.on_key(key(KeyCode::Enter)), None);
            f
        },
        "rewind_choices",
    );
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn esc_esc_on_an_empty_idle_editor_opens_the_rewind_and_esc_still_aborts_a_run() {
    let mut f = Feed::new();
    f.view.now_ms = 1_796_000_000_000;
    let rewind = Action::Command {
        name: "rewind".into(),
        args: String::new(),
    };
    assert_eq!(
        f.view.on_key(key(KeyCode::Esc)),
        None,
        "one Esc does nothing"
    );
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), Some(rewind.clone()));
    // Another key between the two: no rewind.
    f.view.on_key(key(KeyCode::Esc));
    f.view.on_key(key(KeyCode::Left));
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    // Too slow: the second Esc starts over.
    f.view.now_ms += keel::front::tui::view::ESC_ESC_MS + 1;
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), Some(rewind.clone()));
    // Text in the editor: Esc is the editor's.
    f.view.composer.set_text("draft");
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    assert_eq!(f.view.composer.text(), "draft");
    f.view.composer.clear();
    // During a run Esc aborts, every time.
    f.user("work");
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), Some(Action::Abort));
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), Some(Action::Abort));
}

#[test]
fn the_rewind_picker_previews_each_message_and_enter_then_a_choice_rewinds() {
    let mut f = rewind_feed();
    assert!(f.view.rewind_open());
    assert_eq!(
        f.view.on_key(key(KeyCode::Down)),
        Some(Action::RewindPreview("u2".into()))
    );
    assert!(f.screen(80, 24).contains("Code: looking at the files…"));
    f.view
        .rewind_preview("u2", Err("checkpoints are off for this session".into()));
    assert!(f
        .screen(80, 24)
        .contains("Code: checkpoints are off for this session"));
    assert_eq!(f.view.on_key(key(KeyCode::Enter)), None);
    assert_eq!(
        f.view.on_key(key(KeyCode::Char('2'))),
        Some(Action::Rewind {
            entry_id: "u2".into(),
            prompt: "日本語のドキュメントを書いて".into(),
            restore: Restore::Conversation,
        })
    );
    assert!(!f.view.rewind_open(), "the choice closes the picker");
    let mut f = rewind_feed();
    f.view.on_key(key(KeyCode::Enter));
    f.view.on_key(key(KeyCode::Up));
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Rewind {
            entry_id: "u3".into(),
            prompt: "Now clean up the config loader".into(),
            restore: Restore::Both,
        })
    );
    let mut f = rewind_feed();
    f.view.on_key(key(KeyCode::Enter));
    assert_eq!(f.view.on_key(key(KeyCode::Char('4'))), None, "cancel");
    assert!(!f.view.rewind_open());
}

// ---------------------------------------------------------------------------------------------
// In a real terminal.

/// A script whose first turn edits `a.txt` (`one` → `ONE`), then answers.
pub fn edit_script(sb: &Sandbox) -> String {
    let edit = json!({"path": "a.txt", "oldText": "one", "newText": "ONE"});
    let script = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c0", "name": "edit", "arguments": edit}}]},
        {"chunks": [{"text": "Edited it."}]},
    ]});
    let path = sb.dir.path().join("edit.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// `a.txt` (`one`, `two`) in the workspace, and the shell line that runs keel on
/// [`edit_script`] (its answer costing $0.25) and prints its exit code.
fn edit_shell(sb: &Sandbox) -> String {
    std::fs::write(sb.work().join("a.txt"), "one\ntwo\n").unwrap();
    let path = edit_script(sb);
    let mut script: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    script["turns"][1]["usage"] = json!({"input": 1200, "output": 340, "cost": 0.25});
    std::fs::write(&path, script.to_string()).unwrap();
    format!("{}; echo KEEL_EXIT=$?", keel_shell(&path))
}

#[test]
fn rewind_code_only_in_a_real_terminal_restores_the_file() {
    rewind_code_only(false);
}

#[test]
fn rewind_code_only_through_the_daemon_restores_the_file() {
    rewind_code_only(true);
}

fn rewind_code_only(daemon: bool) {
    let sb = Sandbox::new();
    let a = sb.work().join("a.txt");
    let shell = edit_shell(&sb);
    let d = daemon.then(|| Daemon::start(&sb, &["--idle-exit", "0"]));
    let (mut s, mut child) = match &d {
        Some(d) => {
            let socket = d.socket.display().to_string();
            crate::common::pty::spawn_with(&sb, &shell, &[("KEEL_SOCKET", &socket)])
        }
        None => crate::common::pty::spawn(&sb, &shell),
    };
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("edit a\r");
    s.wait_for("the answer", |t| t.contains("Edited it."));
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "ONE\ntwo\n");

    s.send("/rewind");
    s.wait_for("the typed command", |t| t.contains("› /rewind"));
    s.send("\r");
    s.wait_for("the picker and its preview", |t| {
        t.contains("Rewind · 1 message") && t.contains("Code: 1 file would change")
    });
    let screen = s.text();
    assert!(screen.contains("edit a"), "{screen}");
    // The file "edit a" changed is counted on "edit a" (issue 44 point 3).
    assert!(screen.contains("1 file  edit a"), "{screen}");
    assert!(screen.contains("a.txt  +1 -1"), "{screen}");
    s.send("\r");
    s.wait_for("the choices", |t| t.contains("3. Code only"));
    s.send("3");
    s.wait_for("the report", |t| {
        t.contains("rewound the code to before “edit a”")
    });
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\ntwo\n");
    assert!(s.text().contains("restored a.txt"), "{}", s.text());

    // `/rewind undo` puts the edit back, through the host too.
    s.send("/rewind undo\r");
    s.wait_for("the undo, naming the prompt", |t| {
        t.contains("undid the rewind to before “edit a”: back at “edit a”")
    });
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "ONE\ntwo\n");

    // Conversation only: the transcript starts over with the branch the session is on now.
    s.send("/rewind");
    s.send("\r");
    s.wait_for("the picker again", |t| t.contains("Rewind · 1 message"));
    s.send("\r");
    s.wait_for("the choices again", |t| t.contains("2. Conversation only"));
    s.send("2");
    s.wait_for("the branch and the report", |t| {
        t.contains("── rewound to before “edit a” · session")
            && t.contains("rewound the conversation to before “edit a”")
    });
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "ONE\ntwo\n");
    // The rewound prompt is back in the editor, and what the session spent is still counted.
    // The choices dialog is gone (its `› edit a` line is not the editor), the prompt is in
    // the editor and the status line still counts what was spent.
    s.wait_for("the prompt in the editor and the cost kept", |t| {
        t.lines()
            .any(|l| l.contains("edit a") && !l.contains("rewound"))
            && !t.contains("Ask anything")
            && !t.contains("Enter or 1-4: choose")
            && t.contains("$0.250")
    });
    s.send("\x15");

    s.send("\x04");
    s.wait_for("the exit", |t| t.contains("KEEL_EXIT="));
    assert!(s.text().contains("KEEL_EXIT=0"), "{}", s.text());
    assert!(child.wait().unwrap().success());
    drop(d);
}

/// `TERM=dumb` has no picker: `/rewind` prints the checkpoints and the command that rewinds,
/// and the next line is a prompt again (not a key of an invisible picker).
#[test]
fn a_dumb_terminal_lists_the_checkpoints_with_the_command_that_rewinds() {
    let sb = Sandbox::new();
    let shell = edit_shell(&sb);
    let vars = [("KEEL_NO_DAEMON", "1"), ("TERM", "dumb")];
    let (mut s, mut child) = crate::common::pty::spawn_with(&sb, &shell, &vars);
    s.wait_for("the header", |t| t.contains("/help for commands"));
    s.send("edit a\r");
    s.wait_for("the answer", |t| t.contains("Edited it."));
    s.send("/rewind\r");
    s.wait_for("the list", |t| {
        t.contains("checkpoints, newest first (rewind with: keel rewind") && t.contains("Z  edit a")
    });
    assert!(s.quit("/quit\r", &mut child).success());
    assert_eq!(
        std::fs::read_to_string(sb.work().join("a.txt")).unwrap(),
        "ONE\ntwo\n"
    );
}

/// A conversation rewind made by another client (`keel rewind` on the command line, sent to
/// the session's host in the daemon) starts a new epoch of the session's stream: the attached
/// window starts its transcript over with the branch the session is on now, and says why.
#[test]
fn a_conversation_rewind_by_another_client_redraws_the_attached_window() {
    let sb = Sandbox::new();
    let shell = edit_shell(&sb);
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let (mut s, mut child) =
        crate::common::pty::spawn_with(&sb, &shell, &[("KEEL_SOCKET", &socket)]);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("edit a\r");
    s.wait_for("the answer", |t| t.contains("Edited it."));
    let mut c = d.client();
    let id = c.sessions()[0]["sessionId"].as_str().unwrap().to_string();
    let list = sb.run(&["rewind", &id, "--list", "--json", "--socket", &socket]);
    assert_eq!(list.code, 0, "{list}");
    let listed: Value = serde_json::from_str(&list.stdout).unwrap();
    let first = listed[0]["id"].as_str().unwrap().to_string();
    let r = sb.run(&[
        "rewind",
        &id,
        "--to",
        &first,
        "--conversation",
        "--socket",
        &socket,
    ]);
    assert_eq!(r.code, 0, "{r}");
    s.wait_for("the branch, said to come from elsewhere", |t| {
        t.contains("── conversation rewound by another client · session")
    });
    // The transcript started over: the turn rewound away is no longer shown.
    let screen = s.text();
    let after = screen
        .split("conversation rewound by another client")
        .nth(1)
        .unwrap_or_default();
    assert!(!after.contains("Edited it."), "{screen}");
    // The file is as the turn left it (conversation only).
    assert_eq!(
        std::fs::read_to_string(sb.work().join("a.txt")).unwrap(),
        "ONE\ntwo\n"
    );
    s.send("\x04");
    s.wait_for("the exit", |t| t.contains("KEEL_EXIT="));
    assert!(s.text().contains("KEEL_EXIT=0"), "{}", s.text());
    assert!(child.wait().unwrap().success());
    drop(d);
}
