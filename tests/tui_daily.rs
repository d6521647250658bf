//! What a daily user of the TUI saw go wrong (issue 44, points 5 to 9): a plan shown as raw
//! Markdown and lost once approved, a status line that cut the permission mode first, hook
//! context drawn as a prompt, no notification when a run waits behind an unfocused window,
//! and things said twice (warnings, hook denials) or said badly (`/help`'s cycle, a todo list
//! in the scrollback, the trust question as one wall of commands).

use keel::front::tui::transcript::HistoryCell;
use keel::kernel::agent::Permission;
use keel::kernel::event::{EventPayload, RunOutcome};
use keel::kernel::message::Message;
use keel::kernel::tool::ToolOutput;
use serde_json::json;

use crate::common::support::{keel_shell, snap};
use crate::tui::Feed;

const PLAN: &str = "# Refactor the parser\n\n1. **Split** `parse_line` in two\n2. Add a test\n\n- keep the public API\n";

/// A run in plan mode whose `exit_plan_mode` call waits for the user.
fn plan_waiting() -> Feed {
    let mut f = Feed::new();
    f.view.permission = Some(Permission::Plan);
    f.user("plan the refactor");
    let args = json!({ "plan": PLAN });
    f.tool("call_p", "exit_plan_mode", args.clone(), None);
    f.send(EventPayload::ApprovalRequested {
        call_id: "call_p".into(),
        tool_name: "exit_plan_mode".into(),
        args,
        preview: None,
    });
    f
}

/// The dialog showed the plan's Markdown as it was written (`# `, `**`, backticks).
#[test]
fn the_plan_dialog_renders_the_plan_as_markdown() {
    let mut f = plan_waiting();
    let screen = f.screen(80, 24);
    snap("tui_daily_plan_dialog_80x24", &screen);
    assert!(screen.contains("Approve this plan"), "{screen}");
    assert!(screen.contains("Refactor the parser"), "{screen}");
    assert!(screen.contains("Split parse_line in two"), "{screen}");
    for raw in ["# Refactor", "**Split**", "`parse_line`"] {
        assert!(!screen.contains(raw), "{raw} drawn raw: {screen}");
    }
}

/// Once approved, the scrollback kept only the `exit_plan_mode` heading: the plan stays.
#[test]
fn an_approved_plan_stays_in_the_transcript() {
    let mut f = plan_waiting();
    f.send(EventPayload::ToolCallFinished {
        call_id: "call_p".into(),
        tool_name: "exit_plan_mode".into(),
        result: ToolOutput::ok(
            "The user approved the plan. The permission mode is now ask: carry the plan out.",
        ),
        duration_ms: 0,
    });
    f.settle(RunOutcome::Completed);
    let screen = f.screen(80, 24);
    snap("tui_daily_plan_kept_80x24", &screen);
    for line in [
        "Split parse_line in two",
        "Add a test",
        "keep the public API",
    ] {
        assert!(screen.contains(line), "{line} is gone: {screen}");
    }
    assert!(screen.contains("The user approved the plan"), "{screen}");
    assert!(!screen.contains("**Split**"), "{screen}");
}

/// A view with every part of the status line set.
fn busy_status() -> Feed {
    let mut f = Feed::new();
    f.user("hi");
    f.stream("Hello.", 10);
    f.finish("Hello.");
    f.view.place = Some("daemon pid 4242 · 2 clients".into());
    f.view.sandbox = Some("sandbox: workspace-write · net off".into());
    f.view.permission = Some(Permission::AcceptEdits);
    f
}

/// At 80 columns the permission mode was what the status line cut: it is the last to go.
#[test]
fn the_permission_mode_is_the_last_part_of_the_status_line_to_go() {
    for w in [80u16, 60, 40, 24] {
        let mut f = busy_status();
        let screen = f.screen(w, 12);
        let status = screen
            .lines()
            .find(|l| l.contains("claude-sonnet") || l.contains("mode"))
            .unwrap_or_default()
            .to_string();
        assert!(status.contains("accept-edits mode"), "at {w}: {screen}");
        assert!(keel::text::width(&status) <= w as usize, "{status}");
        if w == 80 {
            snap("tui_daily_status_80x12", &screen);
        }
    }
    // Where the session runs goes late: a window that lost its daemon says there how to
    // reconnect.
    let mut f = busy_status();
    f.view.place = Some("daemon connection lost · Enter reconnects".into());
    let screen = f.screen(80, 12);
    assert!(
        screen.contains("Enter reconnects · accept-edits mode"),
        "{screen}"
    );
    let wide = busy_status().screen(200, 12);
    let all = "claude-sonnet-4-5 · thinking medium · ↑12.4k ↓830 · $0.050 · ctx 7% · \
               daemon pid 4242 · 2 clients · accept-edits mode · sandbox: workspace-write · net off";
    assert!(wide.contains(all), "{wide}");
}

const CONTEXT: &str = "<hook-context>\nproject uses pnpm\nCI is red on main\n</hook-context>";

/// Hook context was drawn as if the user typed it: `› <hook-context>…`.
#[test]
fn hook_context_is_shown_as_a_hook_notice_not_a_prompt() {
    let mut f = Feed::new();
    f.user("fix the build");
    f.send(EventPayload::MessageStarted {
        message: Message::user(CONTEXT, 0),
    });
    let screen = f.screen(80, 24);
    snap("tui_daily_hook_context_80x24", &screen);
    assert!(!screen.contains("<hook-context>"), "{screen}");
    assert!(!screen.contains("› project uses pnpm"), "{screen}");
    assert!(screen.contains("hook context"), "{screen}");
    assert!(screen.contains("project uses pnpm"), "{screen}");
    // A resumed session shows it the same way.
    let mut t = keel::front::tui::transcript::Transcript::new();
    let replayed = [Message::user("fix the build", 0), Message::user(CONTEXT, 0)]
        .map(keel::front::tui::replay::Replayed::Message);
    t.replay(&replayed);
    let cells = t.finish();
    assert!(matches!(&cells[0], HistoryCell::User(u) if u == "fix the build"));
    assert!(!matches!(&cells[1], HistoryCell::User(_)), "{:?}", cells[1]);
    assert_eq!(
        keel::front::tui::replay::typed(&replayed),
        ["fix the build"],
        "hook context is not a prompt of the editor's history"
    );
}

/// How often `needle` is on the screen.
fn count(screen: &str, needle: &str) -> usize {
    screen.matches(needle).count()
}

/// A startup warning came with the opened session and again as the host's `notify` line.
#[test]
fn a_startup_warning_is_shown_once() {
    let mut f = Feed::new();
    let w = "test settings: unknown key `colour` skipped";
    f.view.notice(HistoryCell::Notice(format!("warning: {w}")));
    let line = keel::wire::rpc::notify_line("notify-1", w, keel::wire::events::NotifyType::Warning);
    let event = keel::wire::events::WireEvent::parse(&line).unwrap();
    f.view.on_event(&event, f.view.now_ms);
    let screen = f.screen(80, 24);
    assert_eq!(count(&screen, "unknown key `colour`"), 1, "{screen}");
}

/// A PreToolUse hook's denial was said by the hook's line and again by the call's result.
#[test]
fn a_hook_denial_is_shown_once() {
    let mut f = Feed::new();
    f.user("clean up");
    f.tool("call_1", "bash", json!({"command": "rm -rf build"}), None);
    f.send(EventPayload::HookFinished {
        event: "PreToolUse".into(),
        command: "./guard.sh".into(),
        exit_code: Some(2),
        duration_ms: 3,
        decision: Some("deny".into()),
        reason: Some("no rm in this repo".into()),
        messages: Vec::new(),
    });
    f.send(EventPayload::ToolCallFinished {
        call_id: "call_1".into(),
        tool_name: "bash".into(),
        result: ToolOutput::error(
            "Tool `bash` was blocked by a PreToolUse hook: no rm in this repo",
        ),
        duration_ms: 0,
    });
    f.settle(RunOutcome::Completed);
    let screen = f.screen(80, 24);
    snap("tui_daily_hook_denial_80x24", &screen);
    assert_eq!(count(&screen, "no rm in this repo"), 1, "{screen}");
    assert!(screen.contains("./guard.sh"), "{screen}");
}

/// `/help` did not name Shift+Tab, and `/help` and `/permissions` gave the cycle without plan.
#[test]
fn help_and_permissions_name_shift_tab_and_the_whole_cycle() {
    let cycle = "ask → accept-edits → plan → auto";
    let mut mode = Permission::Ask;
    let mut seen = vec![mode.word()];
    for _ in 0..3 {
        mode = mode.next();
        seen.push(mode.word());
    }
    assert_eq!(seen.join(" → "), cycle, "the cycle in the code");
    let help = keel::front::tui::help_text(false);
    let keys = help.lines().skip_while(|l| *l != "keys:");
    let line = keys.filter(|l| l.contains("Shift+Tab")).last();
    assert!(line.is_some_and(|l| l.contains(cycle)), "{help}");
    let data = keel::wire::pi::data::PermissionsData {
        mode: "ask".into(),
        rules: Vec::new(),
    };
    let listing = keel::front::tui::permissions::listing(&data);
    assert!(listing.contains(cycle), "{listing}");
}

fn todos(statuses: &[&str]) -> serde_json::Value {
    let items: Vec<_> = statuses
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"content": format!("Step {i}"), "status": s, "activeForm": format!("Doing step {i}")}))
        .collect();
    json!({ "todos": items })
}

/// Each `todo_write` left the whole list in the scrollback beside the live one: one line of
/// counts instead.
#[test]
fn a_todo_write_leaves_one_line_of_counts_in_the_scrollback() {
    let mut f = Feed::new();
    f.user("do it");
    let args = todos(&[
        "completed",
        "completed",
        "in_progress",
        "pending",
        "pending",
        "pending",
    ]);
    let list: Vec<keel::kernel::tool::todo::TodoItem> =
        serde_json::from_value(args["todos"].clone()).unwrap();
    f.tool("call_t", "todo_write", args, None);
    f.send(EventPayload::TodosUpdated {
        todos: list.clone(),
    });
    f.send(EventPayload::ToolCallFinished {
        call_id: "call_t".into(),
        tool_name: "todo_write".into(),
        result: ToolOutput::ok(keel::kernel::tool::todo::summary(&list)),
        duration_ms: 0,
    });
    let screen = f.screen(80, 24);
    snap("tui_daily_todo_80x24", &screen);
    assert!(
        screen.contains("todo: 2 done · 1 in progress · 3 pending"),
        "{screen}"
    );
    // The live list shows each item once; the scrollback none.
    assert_eq!(count(&screen, "Step 4"), 1, "{screen}");
    assert!(!screen.contains("[ ] Step"), "{screen}");
}

/// The trust question was one wall of comma-separated commands: one item a line.
#[test]
fn the_trust_question_lists_one_item_a_line() {
    use crate::common::support::{fixture, Sandbox};
    let sb = Sandbox::new();
    let settings = json!({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "./check-one.sh"},
            {"type": "command", "command": "./check-two.sh"}
        ]}]},
        "permissions": {"allow": ["Bash(echo:*)", "Bash(ls:*)"]}
    });
    std::fs::create_dir_all(sb.work().join(".keel")).unwrap();
    std::fs::write(sb.work().join(".keel/settings.json"), settings.to_string()).unwrap();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
    let (mut s, mut child) = crate::common::pty::spawn(&sb, &shell);
    s.wait_for("the question", |t| t.contains("[y/N]"));
    let screen = s.text();
    let rows: Vec<&str> = screen.lines().map(str::trim_end).collect();
    for item in [
        "`./check-one.sh`",
        "`./check-two.sh`",
        "`Bash(echo:*)`",
        "`Bash(ls:*)`",
    ] {
        assert!(rows.contains(&format!("    {item}").as_str()), "{screen}");
    }
    assert!(
        rows.contains(&"  hooks:") && rows.contains(&"  allow rules:"),
        "{screen}"
    );
    s.send("n\r");
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    assert!(s.quit("\x04", &mut child).success());
}

/// The real binary, in this process and through the daemon: a settings warning and an agent
/// file's warning are each shown once.
#[test]
fn settings_and_agents_warnings_are_shown_once_in_the_tui() {
    use crate::common::support::{fixture, Sandbox};
    for daemon in [false, true] {
        let sb = Sandbox::new();
        std::fs::write(sb.home().join("settings.json"), r#"{"colour": "blue"}"#).unwrap();
        let agents = sb.home().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(agents.join("broken.md"), "no front matter here\n").unwrap();
        let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
        let d = daemon.then(|| crate::common::daemon::Daemon::start(&sb, &["--idle-exit", "0"]));
        let (mut s, mut child) = match &d {
            None => crate::common::pty::spawn(&sb, &shell),
            Some(d) => {
                let socket = d.socket.display().to_string();
                crate::common::pty::spawn_with(&sb, &shell, &[("KEEL_SOCKET", &socket)])
            }
        };
        s.wait_for("the editor", |t| t.contains("Ask anything"));
        // A prompt and its answer: whatever the host says after a client spoke is shown.
        s.send("hello\r");
        s.wait_for("the answer", |t| t.contains("Hello"));
        let screen = s.text();
        assert_eq!(count(&screen, "colour"), 1, "daemon {daemon}: {screen}");
        assert_eq!(count(&screen, "broken.md"), 1, "daemon {daemon}: {screen}");
        assert!(s.quit("\x04", &mut child).success());
    }
}

/// A run that ended while the window was not focused said nothing: with `notify: osc777` the
/// TUI writes a desktop notification then (the terminal reported focus lost, `CSI O`), and
/// nothing once the window is focused again (`CSI I`).
#[test]
fn a_run_that_ends_in_an_unfocused_window_notifies() {
    use crate::common::support::{fixture, Sandbox};
    let sb = Sandbox::new();
    std::fs::write(sb.home().join("settings.json"), r#"{"notify": "osc777"}"#).unwrap();
    let shell = format!("{}; echo KEEL_EXIT=$?", keel_shell(&fixture("hello.json")));
    let (mut s, mut child) = crate::common::pty::spawn(&sb, &shell);
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    let raw = String::from_utf8_lossy(&s.raw).to_string();
    assert!(raw.contains("\x1b[?1004h"), "focus reporting is asked for");
    let note = "\x1b]777;notify;keel;the run ended; keel waits for your input\x07";
    s.send("\x1b[O");
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("Hello from keel"));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    let notified =
        |s: &crate::common::pty::Screen| String::from_utf8_lossy(&s.raw).matches(note).count();
    // The placeholder is back: the run settled, and the notification was written before
    // that frame.
    assert_eq!(notified(&s), 1, "{:?}", String::from_utf8_lossy(&s.raw));
    // Focused again: the next run ends without a notification.
    s.send("\x1b[I");
    s.send("again\r");
    s.wait_for("the second answer", |t| {
        t.matches("Hello from keel").count() == 2
    });
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    assert!(s.quit("\x04", &mut child).success());
    assert_eq!(notified(&s), 1, "not again once focused");
    let raw = String::from_utf8_lossy(&s.raw).to_string();
    assert!(
        raw.contains("\x1b[?1004l"),
        "focus reporting is turned off again"
    );
}

/// A session in a worktree (`-w`) says its branch in the status line, after where it runs.
#[test]
fn the_status_line_names_the_worktree_branch() {
    let mut f = busy_status();
    f.view.worktree = Some("⎇ keel/fix".into());
    let wide = f.screen(200, 12);
    assert!(
        wide.contains("ctx 7% · daemon pid 4242 · 2 clients · ⎇ keel/fix · accept-edits mode"),
        "{wide}"
    );
}
