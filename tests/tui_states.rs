//! View states issue 27 asked for, on the view fed public events (no terminal): a window that
//! lost its daemon, a server that reports no usage, singular counts, `/detach` offered only in
//! a daemon window, and approval dialogs that show the change a file-writing call makes.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel::front::tui::transcript::HistoryCell;
use keel::kernel::event::{AssistantDelta, EventPayload, RunOutcome};
use keel::kernel::message::{Content, Message, StopReason};
use keel::kernel::tool::preview::{Change, Preview};
use serde_json::json;

use crate::common::support::snap;
use crate::tui::{assistant, Feed};

/// A run with a tool going, as a window shows it when its daemon connection drops.
fn lost_mid_run() -> Feed {
    let mut f = Feed::new();
    f.view.attached = true;
    f.user("run the tests");
    f.tool("call_1", "bash", json!({"command": "cargo test"}), None);
    f.view.disconnected = Some(f.view.now_ms);
    // Time goes on; nothing of the run is known any more.
    f.view.now_ms += 90_000;
    f.view.spinner += 3;
    f
}

/// The "Working…" spinner and the timers went on while the daemon was gone: the view now
/// says it is disconnected, with no spinner and no running time.
#[test]
fn a_disconnected_window_shows_no_spinner_or_timer() {
    let mut f = lost_mid_run();
    let screen = f.screen(80, 24);
    snap("tui_disconnected_80x24", &screen);
    assert!(!screen.contains("Working…"), "{screen}");
    assert!(screen.contains("disconnected"), "{screen}");
    assert!(!screen.contains("1m 30s"), "no timer ran on: {screen}");
}

fn answer_without_usage(f: &mut Feed) {
    f.user("hi");
    f.send(EventPayload::MessageStarted {
        message: Message::from(assistant(vec![], StopReason::Pending)),
    });
    let m = assistant(vec![Content::text("Hello.")], StopReason::Stop);
    f.send(EventPayload::MessageFinished {
        message: Message::from(m),
        entry_id: "e1".into(),
    });
    f.settle(RunOutcome::Completed);
}

/// A server that reports no usage left the status line at `↑0 ↓0 · ctx 0%`.
#[test]
fn a_server_that_reports_no_usage_is_said_so() {
    let mut f = Feed::new();
    let before = f.screen(80, 24);
    assert!(before.contains("↑0 ↓0"), "nothing asked yet: {before}");
    answer_without_usage(&mut f);
    let screen = f.screen(80, 24);
    let status = screen
        .lines()
        .find(|l| l.starts_with("claude-sonnet-4-5"))
        .unwrap_or_default()
        .to_string();
    assert!(status.contains("usage not reported"), "{screen}");
    assert!(
        !status.contains("↑0 ↓0") && !status.contains("ctx 0%"),
        "{screen}"
    );
}

/// "Thought for 1 words (1 lines)".
#[test]
fn one_line_of_thinking_is_one_line() {
    let mut f = Feed::new();
    f.user("go");
    f.send(EventPayload::MessageStarted {
        message: Message::from(assistant(vec![], StopReason::Pending)),
    });
    f.delta(AssistantDelta::ThinkingStarted { index: 0 });
    f.delta(AssistantDelta::ThinkingFinished {
        index: 0,
        thinking: "Hmm.".into(),
    });
    f.send(EventPayload::CompactionStarted {
        reason: keel::kernel::event::CompactionReason::Threshold,
    });
    let screen = f.screen(80, 24);
    assert!(screen.contains("Thought for 1 word (1 line)"), "{screen}");
}

fn type_text(f: &mut Feed, text: &str) {
    for c in text.chars() {
        f.view
            .on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
    }
}

/// `/detach` is listed by `/help` and offered by the `/` menu in a window attached to the
/// daemon, and only there (in this process it has nothing to leave running).
#[test]
fn detach_is_offered_only_where_it_means_something() {
    assert!(keel::front::tui::help_text(true).contains("\n  /detach "));
    assert!(!keel::front::tui::help_text(false).contains("/detach"));
    for attached in [true, false] {
        let mut f = Feed::new();
        f.view.attached = attached;
        type_text(&mut f, "/de");
        let screen = f.screen(80, 24);
        assert_eq!(screen.contains("/detach"), attached, "{screen}");
    }
    let mut f = Feed::new();
    f.view.attached = true;
    f.view
        .notice(HistoryCell::Notice(keel::front::tui::help_text(true)));
    assert!(f.screen(100, 40).contains("  /detach "));
}

fn approval(tool: &str, args: serde_json::Value, preview: Preview) -> String {
    Feed::asking("change it", tool, args, Some(preview)).screen(80, 24)
}

/// A write over an existing file did not say it overwrites it, and showed the new content
/// only; an edit showed its two texts without context. The dialog shows the preview.
#[test]
fn approvals_show_the_change_against_the_file_as_it_is() {
    let over = approval(
        "write",
        json!({"path": "notes.md", "content": "one\n2\n"}),
        Preview {
            change: Change::Overwrite,
            path: "notes.md".into(),
            diff: Some("--- notes.md\n+++ notes.md\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n".into()),
            error: None,
        },
    );
    snap("tui_write_overwrite_approval_80x24", &over);
    assert!(
        over.contains("overwrites the existing file notes.md"),
        "{over}"
    );
    assert!(
        over.contains("    @@ -1,2 +1,2 @@\n     one\n    -two\n    +2"),
        "{over}"
    );
    let new = approval(
        "write",
        json!({"path": "new.md", "content": "fresh\n"}),
        Preview {
            change: Change::Create,
            path: "new.md".into(),
            diff: Some("--- new.md\n+++ new.md\n@@ -0,0 +1 @@\n+fresh\n".into()),
            error: None,
        },
    );
    assert!(new.contains("new file new.md"), "{new}");
    let edit = approval(
        "edit",
        json!({"path": "f.txt", "oldText": "c\n", "newText": "C\n"}),
        Preview {
            change: Change::Edit,
            path: "f.txt".into(),
            diff: Some("--- f.txt\n+++ f.txt\n@@ -1,5 +1,5 @@\n a\n b\n-c\n+C\n d\n e\n".into()),
            error: None,
        },
    );
    assert!(
        edit.contains("    @@ -1,5 +1,5 @@\n     a\n     b\n    -c\n    +C\n"),
        "{edit}"
    );
}

/// The status line names the sandbox of the model's commands (issue 30 point 8): its mode and
/// network, `off` when the user chose none, and a session whose sandbox is not known shows
/// nothing about it.
#[test]
fn the_status_line_shows_the_sandbox() {
    use keel::wire::protocol::snapshot::SandboxState;
    let mut f = Feed::new();
    let state = |mode: &str, network: bool, mechanism: &str| SandboxState {
        mode: mode.into(),
        network,
        mechanism: mechanism.into(),
    };
    let status = |f: &mut Feed| {
        let screen = f.screen(120, 24);
        let line = screen.lines().rev().find(|l| l.contains("ctx 0%"));
        line.unwrap_or("").trim_end().to_string()
    };
    assert!(!status(&mut f).contains("sandbox"));
    f.view
        .set_sandbox(Some(&state("workspace-write", false, "bubblewrap")));
    let screen = f.screen(120, 24);
    snap("tui_status_sandbox_120x24", &screen);
    assert!(
        status(&mut f).ends_with("· sandbox: workspace-write · net off"),
        "{screen}"
    );
    f.view
        .set_sandbox(Some(&state("read-only", true, "landlock")));
    assert!(status(&mut f).ends_with("sandbox: read-only · net on"));
    f.view.set_sandbox(Some(&state("off", true, "off")));
    assert!(status(&mut f).ends_with("· sandbox: off"));
    f.view
        .set_sandbox(Some(&state("workspace-write", false, "none")));
    assert!(status(&mut f).ends_with("· sandbox: none (unavailable)"));
}
