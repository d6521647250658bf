//! "Always allow" persists (issue 29 point 6), end to end through RPC on the scripted
//! provider: answering an approval dialog with `value: "always"` writes the narrowest rule to
//! `<project>/.keel/settings.local.json` (keeping what the file held), says so in a `notify`,
//! and a later session in `ask` mode runs a command the rule covers without a dialog;
//! `set_permission_mode` and `get_permissions` change and show the session's policy.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{keel_shell, scripted_args, Sandbox};

/// A script whose first turn runs `command` in bash, then answers "done".
fn script(sb: &Sandbox, name: &str, command: &str) -> String {
    let call = json!({"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": command}}});
    let s = json!({"turns": [{"chunks": [call]}, {"chunks": [{"text": "done"}]}]});
    let path = sb.home().join(name);
    std::fs::write(&path, s.to_string()).unwrap();
    path.display().to_string()
}

fn ask_run(sb: &Sandbox, script: &str) -> Rpc {
    Rpc::start(
        sb,
        &scripted_args(&[], script, &["--permission", "ask", "--no-session"]),
    )
}

fn local(sb: &Sandbox) -> std::path::PathBuf {
    sb.work().join(".keel/settings.local.json")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn always_allow_writes_the_rule_and_the_next_session_runs_the_command_without_asking() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.work().join(".keel")).unwrap();
    let kept = r#"{"maxTurns": 9, "permissions": {"deny": ["Bash(rm:*)"]}}"#;
    std::fs::write(local(&sb), kept).unwrap();

    let first = script(&sb, "first.json", "touch made.txt");
    let mut rpc = ask_run(&sb, &first);
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "make it"}));
    let dialog = rpc.wait(&json!({"type": "extension_ui_request", "method": "confirm"}));
    rpc.send(&json!({"type": "extension_ui_response", "id": dialog["id"], "value": "always"}));
    let note = rpc.wait(&json!({"type": "extension_ui_request", "method": "notify"}));
    let message = note["message"].as_str().unwrap();
    assert!(message.contains("`Bash(touch:*)`"), "{note}");
    assert!(message.contains("settings.local.json"), "{note}");
    rpc.wait(&json!({"type": "agent_settled"}));
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(sb.work().join("made.txt").exists(), "the answered call ran");
    assert_eq!(
        read(&local(&sb)),
        json!({"maxTurns": 9, "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(touch:*)"]}}),
        "the rule is added, the rest of the file kept"
    );

    let second = script(&sb, "second.json", "touch other.txt");
    let mut rpc = ask_run(&sb, &second);
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "make another"}));
    let end = rpc.wait(&json!({"type": "tool_execution_end"}));
    assert_eq!(end["isError"], false, "{end}");
    rpc.wait(&json!({"type": "agent_settled"}));
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !lines.iter().any(|l| l.contains(r#""method":"confirm""#)),
        "no dialog: {lines:?}"
    );
    assert!(sb.work().join("other.txt").exists());
}

#[test]
fn an_always_answer_covers_the_rest_of_the_session_and_a_broken_file_is_left_alone() {
    let sb = Sandbox::new();
    let call = |id: &str, command: &str| json!({"toolCall": {"id": id, "name": "bash", "arguments": {"command": command}}});
    let s = json!({"turns": [
        {"chunks": [call("c1", "touch a.txt")]},
        {"chunks": [call("c2", "touch b.txt")]},
        {"chunks": [{"text": "done"}]},
    ]});
    let path = sb.home().join("script.json");
    std::fs::write(&path, s.to_string()).unwrap();
    let mut rpc = ask_run(&sb, &path.display().to_string());
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "make both"}));
    let dialog = rpc.wait(&json!({"type": "extension_ui_request", "method": "confirm"}));
    // Broken after startup (a broken file at startup is a config error).
    std::fs::create_dir_all(sb.work().join(".keel")).unwrap();
    std::fs::write(local(&sb), "{ not json").unwrap();
    rpc.send(&json!({"type": "extension_ui_response", "id": dialog["id"], "confirmed": true, "value": "always"}));
    let note = rpc.wait(&json!({"type": "extension_ui_request", "method": "notify"}));
    assert_eq!(note["notifyType"], "warning", "{note}");
    let message = note["message"].as_str().unwrap();
    assert!(message.contains("for this session only"), "{note}");
    assert!(message.contains("not valid JSON"), "{note}");
    rpc.wait(&json!({"type": "agent_settled"}));
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let asked = lines
        .iter()
        .filter(|l| l.contains(r#""method":"confirm""#))
        .count();
    assert_eq!(asked, 1, "the second touch runs on the session's rule");
    assert!(sb.work().join("b.txt").exists());
    assert_eq!(std::fs::read_to_string(local(&sb)).unwrap(), "{ not json");
}

#[test]
fn set_permission_mode_changes_the_sessions_mode_and_get_permissions_lists_the_rules() {
    let sb = Sandbox::new();
    let project = sb.work().join(".keel/settings.json");
    std::fs::create_dir_all(project.parent().unwrap()).unwrap();
    let rules = json!({"permissions": {"deny": ["Bash(rm:*)"], "ask": ["Bash(git push:*)"]}});
    std::fs::write(&project, rules.to_string()).unwrap();
    let path = script(&sb, "touch.json", "touch auto.txt");
    let mut rpc = ask_run(&sb, &path);
    let got = rpc.call(json!({"id": "g", "type": "get_permissions"}));
    assert_eq!(got["data"]["mode"], "ask", "{got}");
    let origin = project.display().to_string();
    assert_eq!(
        got["data"]["rules"],
        json!([
            {"list": "deny", "rule": "Bash(rm:*)", "origin": origin},
            {"list": "ask", "rule": "Bash(git push:*)", "origin": origin},
        ])
    );
    let bad = rpc.call(json!({"id": "b", "type": "set_permission_mode", "mode": "yolo"}));
    assert_eq!(bad["success"], false, "{bad}");
    let set =
        rpc.call(json!({"id": "s", "type": "set_permission_mode", "mode": "bypassPermissions"}));
    assert_eq!(set["data"]["mode"], "auto", "{set}");
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "touch it"}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let (lines, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !lines.iter().any(|l| l.contains(r#""method":"confirm""#)),
        "auto asks nothing: {lines:?}"
    );
    assert!(sb.work().join("auto.txt").exists());
}

/// The TUI's `a` answers "always" too: the notice is shown and the rule is in the file (a
/// dumb terminal, whose lines answer the question).
#[test]
fn the_tuis_a_answer_saves_the_rule_and_shows_the_notice() {
    let sb = Sandbox::new();
    let path = script(&sb, "tui.json", "touch tui.txt");
    let shell = format!("{} --permission ask; echo KEEL_EXIT=$?", keel_shell(&path));
    let vars = [("KEEL_NO_DAEMON", "1"), ("TERM", "dumb")];
    let (mut s, mut child) = crate::common::pty::spawn_with(&sb, &shell, &vars);
    s.wait_for("the header", |t| t.contains("/help for commands"));
    s.send("make it\r");
    s.wait_for("the question", |t| {
        t.contains("? Allow bash: touch tui.txt")
    });
    s.send("a\r");
    s.wait_for("the notice", |t| {
        t.contains("Always allowed `Bash(touch:*)`")
    });
    s.wait_for("the answer", |t| t.contains("done"));
    assert!(s.quit("/quit\r", &mut child).success());
    assert_eq!(
        read(&local(&sb)),
        json!({"permissions": {"allow": ["Bash(touch:*)"]}})
    );
    assert!(sb.work().join("tui.txt").exists());
}
