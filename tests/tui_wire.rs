//! The TUI renders the public vocabulary (`DESIGN.md` §10.1): a recorded RPC stream drawn by
//! the view alone, with no kernel in the process, and the facts keel adds to the wire so that
//! the view needs nothing else (`model_changed`, `bash_execution_end`, the approval's call,
//! `agent_settled`'s `maxTurns` / `toolName`), checked on the real binary.

use std::collections::BTreeSet;

use keel::front::tui::view::{Action, View};
use keel::wire::events::{UiMethod, WireEvent};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, root, scripted_args, snap, Sandbox};

/// What the terminal shows at `w` columns, tall enough for the whole transcript: one row per
/// line, trailing spaces and blank rows at the end dropped.
fn screen(view: &mut View, w: u16, h: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal
        .draw(|f| view.render_screen(f.buffer_mut()))
        .unwrap();
    let buf = terminal.backend().buffer().clone();
    let rows: Vec<String> = (0..h)
        .map(|y| keel::front::tui::paint::row_text(&buf, y))
        .collect();
    rows.join("\n").trim_end().to_string()
}

/// `fixtures/streams/everything.rpc.jsonl`: every event line `keel --mode rpc --provider
/// scripted --script fixtures/providers/everything.json --permission ask` wrote (responses
/// left out) in a workspace holding `a.txt` ("alpha") and a prompt template with a bad name
/// (a startup warning, sent as `notify`), with ANTHROPIC_API_KEY set, for these requests:
/// `prompt` "survey the workspace"; at the first approval `steer` "steer: mind the tests"
/// and `follow_up` "follow up: summarise"; every approval confirmed but `edit`'s; after
/// `agent_settled`, `set_session_name` "survey", `bash` "echo user-shell", `set_model`
/// anthropic/claude-sonnet-4-5 and `set_thinking_level` high. The sandbox path reads
/// `/tmp/sandbox`. Before `bash`'s `tool_execution_end`, the two lines a `PostToolUse` hook
/// `true` on Bash adds (`hook_started`, `hook_finished`), and before those a
/// `sandbox_violation` line (added by hand, as the sandbox writes one for a stopped command);
/// before `write`'s, the line a checkpoint that left out a 20 MB `big.bin` adds
/// (`checkpoint_warning`). At the end, by hand: what `set_permission_mode` accept-edits
/// writes (`permission_mode_changed`), a `todo_write` whose items are all done
/// (`todo_update`; the TUI then shows no list) and the `dialog_resolved` a parent's RPC stream
/// carries once its subagent's approval was answered (from `subagent_dialogs.rs`), a
/// background job's `job_started`, `job_output` and `job_ended` (`jobs_rpc.rs`), and the
/// `session_ended` a window attached to a subagent gets when it finished (`tui_attach.rs`).
fn recorded() -> Vec<String> {
    let path = root().join("fixtures/streams/everything.rpc.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Feeds one wire line to the view as a client of the daemon would (nothing to approve is
/// expected: no tool is always allowed here).
fn feed(view: &mut View, line: &str, at_ms: i64) -> WireEvent<'static> {
    let event = WireEvent::parse(line).unwrap_or_else(|| panic!("does not read: {line}"));
    view.now_ms = at_ms;
    let actions = view.on_event(&event, at_ms);
    assert!(actions.is_empty(), "unexpected {actions:?}");
    event
}

#[test]
fn a_recorded_rpc_stream_renders_without_the_kernel() {
    let mut view = View::new();
    view.context_window = 1000;
    let mut at = 1_796_000_000_000;
    let mut dialogs = 0;
    for line in recorded() {
        at += 10;
        let event = feed(&mut view, &line, at);
        assert_ne!(event, WireEvent::Other, "a known type: {line}");
        if let WireEvent::ExtensionUiRequest(r) = &event {
            if r.method == UiMethod::Confirm {
                dialogs += 1;
                let shown = screen(&mut view, 80, 24);
                let tool = r.tool_name.as_deref().unwrap();
                assert!(shown.contains(&format!("? Allow {tool}: ")), "{shown}");
                assert!(shown.contains("a always allow calls like this"), "{shown}");
            }
        }
        if let WireEvent::ToolExecutionEnd { .. } = &event {
            let shown = screen(&mut view, 80, 24);
            assert!(
                !shown.contains("? Allow"),
                "the answered dialog is gone: {shown}"
            );
        }
    }
    assert_eq!(dialogs, 3);
    let shown = screen(&mut view, 80, 200);
    snap("tui_wire_recorded_everything_80", &shown);
    // What only the stream could have told: the warning, the settled queue, the user's shell
    // command, the new model, thinking level, session name and mode in the status line.
    assert!(
        shown.contains("warning: prompt template /tmp/sandbox/work/.keel/prompts/bad name.md"),
        "{shown}"
    );
    assert!(shown.contains("echo user-shell"), "{shown}");
    assert!(!shown.contains("↳ steer"), "the queue emptied: {shown}");
    // At 80 columns the thinking level is the part left out (the mode goes last).
    let status = shown.lines().last().unwrap();
    assert!(
        status.starts_with("claude-sonnet-4-5 · ")
            && status.ends_with(" · survey · accept-edits mode"),
        "{status}"
    );
    let wide = screen(&mut view, 120, 24);
    let status = wide.lines().last().unwrap();
    assert!(
        status.starts_with("claude-sonnet-4-5 · thinking high · ")
            && status.contains(" · survey · accept-edits mode"),
        "{status}"
    );
}

#[test]
fn the_recorded_stream_holds_every_type_of_the_vocabulary() {
    let mut kinds = BTreeSet::new();
    for line in recorded() {
        let v: Value = serde_json::from_str(&line).unwrap();
        let mut kind = v["type"].as_str().unwrap().to_string();
        if kind == "extension_ui_request" {
            kind = format!("{kind}.{}", v["method"].as_str().unwrap());
        }
        kinds.insert(kind);
    }
    let want = [
        "agent_end",
        "agent_settled",
        "agent_start",
        "auto_retry_end",
        "auto_retry_start",
        "bash_execution_end",
        "bash_execution_update",
        "checkpoint_warning",
        "compaction_end",
        "compaction_start",
        "dialog_resolved",
        "extension_ui_request.confirm",
        "extension_ui_request.notify",
        "hook_finished",
        "hook_started",
        "job_ended",
        "job_output",
        "job_started",
        "message_end",
        "message_start",
        "message_update",
        "model_changed",
        "permission_mode_changed",
        "queue_update",
        "sandbox_violation",
        "session_ended",
        "session_info_changed",
        "thinking_level_changed",
        "todo_update",
        "tool_execution_end",
        "tool_execution_start",
        "tool_execution_update",
        "turn_end",
        "turn_start",
    ];
    assert_eq!(kinds, want.iter().map(|s| s.to_string()).collect());
}

#[test]
fn types_and_fields_a_view_does_not_know_are_passed_over() {
    let mut view = View::new();
    let event = feed(&mut view, r#"{"type":"from_a_newer_keel","x":1}"#, 0);
    assert_eq!(event, WireEvent::Other);
    let event = feed(
        &mut view,
        r#"{"type":"session_info_changed","name":"n","extra":{"a":[1]}}"#,
        0,
    );
    assert_eq!(event, WireEvent::SessionInfoChanged { name: "n".into() });
    assert_eq!(WireEvent::parse(r#"{"type":"session_info_changed"}"#), None);
    assert_eq!(WireEvent::parse("not json"), None);
}

#[test]
fn an_approval_in_the_kernels_shape_still_names_its_call() {
    // JSON mode's `extension_ui_request` has no `toolName`/`args`: the running call has them.
    let mut view = View::new();
    feed(
        &mut view,
        r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"rm -rf target/"}}"#,
        0,
    );
    feed(
        &mut view,
        r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"{\"command\":\"rm -rf target/\"}"}"#,
        0,
    );
    let shown = screen(&mut view, 80, 24);
    assert!(shown.contains("? Allow bash: rm -rf target/"), "{shown}");
    let key = |c| crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char(c));
    assert!(matches!(
        view.on_key(key('y')),
        Some(Action::Approve { call_id, .. }) if call_id == "c1"
    ));
}

#[test]
fn settled_runs_name_the_turn_limit_and_the_blocked_call() {
    let mut view = View::new();
    feed(&mut view, r#"{"type":"agent_start"}"#, 0);
    feed(
        &mut view,
        r#"{"type":"agent_settled","aborted":false,"outcome":"turn_limit","error":{"kind":"turn_limit","message":"…"},"maxTurns":3}"#,
        0,
    );
    feed(&mut view, r#"{"type":"agent_start"}"#, 0);
    feed(
        &mut view,
        r#"{"type":"agent_settled","aborted":false,"outcome":"blocked","error":{"kind":"blocked","message":"…"},"toolName":"bash","toolCallId":"call_rm"}"#,
        0,
    );
    let shown = screen(&mut view, 80, 24);
    assert!(
        shown.contains("stopped: the turn limit (3) was reached"),
        "{shown}"
    );
    assert!(
        shown.contains("stopped: `bash` needed an approval"),
        "{shown}"
    );

    // The binary writes those fields (JSON mode; RPC and the daemon carry the same line).
    // A sandbox each: with the fixed seed, runs in one would share a session id.
    let run = Sandbox::new().scripted("--json", "max_turns.json", &["--max-turns", "3", "look"]);
    let settled = settled_line(&run.stdout);
    assert_eq!(
        (&settled["outcome"], &settled["maxTurns"]),
        (&json!("turn_limit"), &json!(3))
    );
    let run = Sandbox::new().scripted("--json", "blocked.json", &["--permission", "ask", "clean"]);
    let settled = settled_line(&run.stdout);
    assert_eq!(
        (&settled["toolName"], &settled["toolCallId"]),
        (&json!("bash"), &json!("call_rm"))
    );
    let run = Sandbox::new().scripted("--json", "hello.json", &["hi"]);
    assert_eq!(
        settled_line(&run.stdout),
        json!({"type":"agent_settled","aborted":false,"outcome":"completed"}),
        "nothing added to a completed run"
    );
}

fn settled_line(stdout: &str) -> Value {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "agent_settled")
        .expect("an agent_settled line")
}

/// `keel --mode rpc` with the scripted provider and ANTHROPIC_API_KEY set.
fn start_rpc(sb: &Sandbox) -> Rpc {
    let script = fixture("rpc.json");
    let mut cmd = sb.cmd(&scripted_args(&["--mode", "rpc"], &script, &[]));
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    Rpc::spawn(cmd)
}

/// Closes keel's input; it exits successfully.
fn finish(rpc: Rpc) {
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn rpc_mode_reports_a_model_switch_and_the_view_shows_it() {
    let sb = Sandbox::new();
    let mut rpc = start_rpc(&sb);
    let seen = rpc.call_seen(
        json!({"id":"m1","type":"set_model","provider":"anthropic","modelId":"claude-haiku-4-5"}),
    );
    finish(rpc);
    let kinds: Vec<&str> = seen.iter().map(|v| v["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["model_changed", "response"], "{seen:?}");
    let line = seen[0].to_string();
    assert_eq!(
        line,
        r#"{"type":"model_changed","provider":"anthropic","model":"claude-haiku-4-5"}"#
    );
    let mut view = View::new();
    feed(&mut view, &line, 0);
    let shown = screen(&mut view, 80, 24);
    assert!(
        shown
            .lines()
            .last()
            .unwrap()
            .starts_with("claude-haiku-4-5"),
        "{shown}"
    );
}

/// Regression: the kernel records a shell command when it exits, while its bash task may not
/// have written the last output yet, so `bash_execution_end` could come before the command's
/// `bash_execution_update` lines. It comes after all of them and before the response.
#[test]
fn bash_execution_end_follows_the_commands_output() {
    let sb = Sandbox::new();
    let mut rpc = start_rpc(&sb);
    for i in 0..8 {
        let id = format!("b{i}");
        let seen =
            rpc.call_seen(json!({"id": id, "type": "bash", "command": format!("echo out-{i}")}));
        let kinds: Vec<&str> = seen.iter().map(|v| v["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["bash_execution_update", "bash_execution_end", "response"],
            "{seen:?}"
        );
        let end = &seen[1];
        assert_eq!(end["output"], format!("out-{i}\n"));
        let mut view = View::new();
        feed(&mut view, &end.to_string(), 0);
        let shown = screen(&mut view, 80, 24);
        assert!(shown.contains(&format!("bash echo out-{i}")), "{shown}");
    }
    finish(rpc);
}
