//! Issue 46 point 5: the commands Claude Code users type, on the real binary in a pty:
//! `/clear` starts over in a new session with `clear` hooks, `/cost` shows what the session
//! cost, `/init` asks the model for an `AGENTS.md`, an unknown command is an error that sends
//! nothing, and a `statusLine` script's line shows under the editor.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::pty::spawn;
use crate::common::support::{fixture, keel_shell, Sandbox};

use crate::common::support::write_json as write;

/// A script file in the sandbox holding `turns`.
fn script(sb: &Sandbox, turns: Value) -> String {
    let path = sb.dir.path().join("script.json");
    write(&path, &json!({"model": "scripted-claude", "turns": turns}));
    path.display().to_string()
}

/// `keel` on `script`, then `KEEL_EXIT=<code>` once it ends.
fn shell(script: &str) -> String {
    format!("{}; echo KEEL_EXIT=$?", keel_shell(script))
}

/// The id part of a session file's name (`<time>_<id>.jsonl`).
fn id_of(file: &Path) -> String {
    let name = file.file_stem().unwrap().to_str().unwrap();
    name.rsplit_once('_').unwrap().1.to_string()
}

#[test]
fn clear_starts_a_new_session_with_clear_hooks_and_an_empty_screen() {
    let sb = Sandbox::new();
    // In the project: hooks run in the sandbox, which writes there.
    let log = sb.work().join("hooks.log");
    let log = log.display();
    let start = format!(r#"jq -r '"start " + .source + " " + .session_id' >> '{log}'"#);
    let end = format!(r#"jq -r '"end " + .reason + " " + .session_id' >> '{log}'"#);
    let hook = |command: String| json!([{"hooks": [{"type": "command", "command": command}]}]);
    write(
        &sb.home().join("settings.json"),
        &json!({"hooks": {"SessionStart": hook(start), "SessionEnd": hook(end)}}),
    );
    let (mut s, mut child) = spawn(&sb, &shell(&fixture("tui.json")));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("A second line, streamed."));
    s.send("/clear\r");
    s.wait_for("the cleared screen", |t| {
        t.contains("conversation cleared: new session") && !t.contains("A second line")
    });
    let screen = s.text();
    assert!(!screen.contains("hello"), "{screen}");
    s.send("hello\r");
    // The script's `hello` turn is used up: the new session gets its `Done.`.
    s.wait_for("the answer in the new session", |t| t.contains("Done."));
    assert!(s.quit("\x04", &mut child).success());
    let files = sb.session_files();
    assert_eq!(files.len(), 2, "the old session stays on disk: {files:?}");
    let ids: Vec<String> = files.iter().map(|f| id_of(f)).collect();
    let hooks = std::fs::read_to_string(sb.work().join("hooks.log")).unwrap();
    let lines: Vec<&str> = hooks.lines().collect();
    // Which file is which: the first session is the one whose start was `startup`.
    let first = lines[0].strip_prefix("start startup ").expect(&hooks);
    let second = ids.iter().find(|i| *i != first).expect(&hooks);
    assert!(ids.contains(&first.to_string()), "{hooks} {ids:?}");
    assert_eq!(
        lines,
        [
            format!("start startup {first}"),
            format!("end clear {first}"),
            format!("start clear {second}"),
            format!("end prompt_input_exit {second}"),
        ],
        "{hooks}"
    );
}

#[test]
fn cost_shows_the_sessions_cost_tokens_and_time() {
    let sb = Sandbox::new();
    let turns = json!([{
        "match": "^hello",
        "usage": {"input": 1200, "output": 340, "cacheRead": 5000, "cost": 0.0123},
        "chunks": [{"text": "Hi there."}]
    }]);
    let (mut s, mut child) = spawn(&sb, &shell(&script(&sb, turns)));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("hello\r");
    s.wait_for("the answer", |t| t.contains("Hi there."));
    s.send("/cost\r");
    s.wait_for("the cost", |t| t.contains("lines removed"));
    let screen = s.text();
    assert!(screen.contains("$0.0123"), "{screen}");
    assert!(
        screen.contains("1.2k in, 340 out, 5.0k cache read"),
        "{screen}"
    );
    assert!(screen.contains("API time"), "{screen}");
    assert!(screen.contains("wall time"), "{screen}");
    assert!(
        screen.contains("0 lines added, 0 lines removed"),
        "{screen}"
    );
    assert!(s.quit("\x04", &mut child).success());
}

#[test]
fn init_asks_the_model_for_an_agents_md_with_the_users_guidance() {
    let sb = Sandbox::new();
    // The provider answers only a prompt that names AGENTS.md and carries the guidance.
    let turns = json!([
        {"match": "(?s)AGENTS\\.md.*mention the deploy script", "chunks": [{"text": "INIT PROMPT RECEIVED"}]},
        {"repeat": true, "chunks": [{"text": "SOMETHING ELSE RECEIVED"}]}
    ]);
    let (mut s, mut child) = spawn(&sb, &shell(&script(&sb, turns)));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("/init mention the deploy script\r");
    s.wait_for("the model's answer", |t| {
        t.contains("INIT PROMPT RECEIVED") || t.contains("SOMETHING ELSE")
    });
    let screen = s.text();
    assert!(screen.contains("INIT PROMPT RECEIVED"), "{screen}");
    assert!(s.quit("\x04", &mut child).success());
}

#[test]
fn an_unknown_command_is_an_error_and_sends_nothing() {
    let sb = Sandbox::new();
    let (mut s, mut child) = spawn(&sb, &shell(&fixture("tui.json")));
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("/foo bar\r");
    s.wait_for("the error", |t| {
        t.contains("unknown command /foo: /help lists the commands")
    });
    // The editor is empty again: its placeholder shows.
    s.wait_for("the empty editor", |t| t.contains("Ask anything"));
    assert!(s.quit("\x04", &mut child).success());
    assert!(sb.session_files().is_empty(), "nothing reached the model");
}

#[test]
fn a_status_line_script_reads_claudes_json_and_its_line_shows() {
    let sb = Sandbox::new();
    // A statusLine as published for Claude Code: jq over the status JSON, colours included.
    let command = r#"jq -r '"\u001b[32mSL " + .hook_event_name + " " + .model.display_name + " $" + (.cost.total_cost_usd|tostring) + "\u001b[0m"'"#;
    write(
        &sb.home().join("settings.json"),
        &json!({"statusLine": {"type": "command", "command": command}}),
    );
    let turns = json!([{
        "match": "^hello",
        "usage": {"input": 100, "output": 20, "cost": 0.25},
        "chunks": [{"text": "Hi there."}]
    }]);
    let (mut s, mut child) = spawn(&sb, &shell(&script(&sb, turns)));
    s.wait_for("the status line before any cost", |t| {
        t.contains("SL Status scripted-claude $0")
    });
    s.send("hello\r");
    s.wait_for("the status line with the cost", |t| {
        t.contains("SL Status scripted-claude $0.25")
    });
    // Its colour is kept.
    let row = s
        .text()
        .lines()
        .position(|l| l.contains("SL Status"))
        .unwrap();
    let cell = s.parser.screen().cell(row as u16, 0).unwrap();
    assert_eq!(cell.fgcolor(), vt100::Color::Idx(2));
    assert!(s.quit("\x04", &mut child).success());
}
