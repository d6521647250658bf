//! Hook payloads as Claude Code sends them (issue 46 point 3): hook scripts copied from Claude
//! Code setups (jq and Python over stdin) read `tool_response` in Claude's per-tool shapes, a
//! Claude-format transcript at `transcript_path`, and `CLAUDE_ENV_FILE` in `SessionStart`.

use std::sync::Arc;
use std::time::Duration;

use keel::kernel::event::{Event, EventPayload, RunOutcome};
use keel::kernel::hooks::{HookConfig, HookEnv, Hooks, SessionFields};
use keel::kernel::message::{user_text, Message};
use keel::kernel::sandbox::Sandbox;
use keel::{AgentConfig, AgentSession, Permission};
use serde_json::{json, Value};

use crate::common::kernel::{self as kit, drive, rt, scripted};

/// A session in `dir` on the scripted provider with `hooks` (Claude's `hooks` object), saved
/// at `dir/s1.jsonl` as far as the hooks know.
fn session(dir: &std::path::Path, script: Value, hooks: Value) -> AgentSession {
    let mut c = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = Permission::Auto;
    // The shapes, not the sandbox, are under test here (hooks_sandbox tests the sandbox).
    c.sandbox = Arc::new(Sandbox::off(dir));
    let (config, warnings) = HookConfig::parse(&hooks, "test settings");
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = HookEnv {
        cwd: dir.to_path_buf(),
        project_dir: dir.to_path_buf(),
        tool_env: c.tool_env.clone(),
        temp_dir: c.temp_dir.clone(),
        readable: Vec::new(),
    };
    let fields = SessionFields {
        session_id: "s1".into(),
        transcript_path: dir.join("s1.jsonl").display().to_string(),
        permission_mode: "bypassPermissions".into(),
        agent: None,
    };
    c.hooks = Some(Hooks::new(config, env, fields));
    kit::session(c, scripted(&script.to_string()), Vec::new())
}

fn run(s: &AgentSession, prompt: &str) -> (Vec<Arc<Event>>, RunOutcome) {
    rt().block_on(drive(s, prompt, |_, _| {}))
}

fn user_messages(events: &[Arc<Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::MessageFinished {
                message: Message::User(u),
                ..
            } => Some(user_text(u)),
            _ => None,
        })
        .collect()
}

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"chunks": [{"toolCall": {"id": id, "name": name, "arguments": arguments}}]})
}

/// One `PostToolUse` hook per Claude tool name, each reading the fields published hooks read
/// and appending what it found to `seen.log` (jq fails on a missing field: nothing is logged).
#[test]
fn post_tool_use_hooks_read_claudes_tool_response_fields() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("seen.log");
    let log = log.display();
    let reads = [
        (
            "Write",
            r#""Write " + .tool_response.type + " " + .tool_response.filePath + " " + .tool_response.content"#,
        ),
        (
            "Edit",
            r#""Edit " + .tool_response.filePath + " " + .tool_response.originalFile + " " + (.tool_response.structuredPatch[0].lines | join(","))"#,
        ),
        (
            "Read",
            r#""Read " + .tool_response.file.filePath + " " + .tool_response.file.content + " " + (.tool_response.file.numLines | tostring)"#,
        ),
        (
            "Grep",
            r#""Grep " + (.tool_response.filenames | join(","))"#,
        ),
        (
            "Glob",
            r#""Glob " + (.tool_response.filenames | join(",")) + " " + (.tool_response.numFiles | tostring)"#,
        ),
        (
            "Bash",
            r#""Bash " + .tool_response.stdout + " " + (.tool_response.interrupted | tostring)"#,
        ),
    ];
    let groups: Vec<Value> = reads
        .iter()
        .map(|(tool, expr)| {
            let command = format!("jq -rj '{expr} + \"\\n\"' >> {log}");
            json!({"matcher": tool, "hooks": [{"type": "command", "command": command}]})
        })
        .collect();
    let script = json!({"turns": [
        call("c1", "write", json!({"path": "src/a.txt", "content": "hello\n"})),
        call("c2", "edit", json!({"path": "src/a.txt", "oldText": "hello", "newText": "world"})),
        call("c3", "read", json!({"path": "src/a.txt"})),
        call("c4", "grep", json!({"pattern": "world", "path": "src"})),
        call("c5", "find", json!({"pattern": "*.txt", "path": "src"})),
        call("c6", "bash", json!({"command": "printf hi"})),
        {"chunks": [{"text": "done"}]}
    ]});
    let s = session(d.path(), script, json!({ "PostToolUse": groups }));
    let (_, outcome) = run(&s, "go");
    assert_eq!(outcome, RunOutcome::Completed);
    let a = d.path().join("src/a.txt");
    let a = a.display();
    let seen = std::fs::read_to_string(d.path().join("seen.log")).unwrap_or_default();
    assert_eq!(
        seen,
        format!(
            "Write create {a} hello\n\n\
             Edit {a} hello\n -hello,+world\n\
             Read {a} world 1\n\
             Grep {a}\n\
             Glob {a} 1\n\
             Bash hi false\n"
        )
    );
}

/// The Stop hook copied from many Claude Code setups: it finds the last assistant message's
/// text in the transcript, and blocks the stop when it finds none.
const STOP_HOOK: &str = r#"import json, sys
data = json.load(sys.stdin)
if data.get("stop_hook_active"):
    sys.exit(0)
last = None
with open(data["transcript_path"]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        entry = json.loads(line)
        if entry.get("type") == "assistant":
            for block in entry.get("message", {}).get("content", []):
                if block.get("type") == "text":
                    last = block["text"]
if last is None:
    print("no assistant message in the transcript", file=sys.stderr)
    sys.exit(2)
with open("last.txt", "w") as out:
    out.write(last)
"#;

#[test]
fn a_stop_hook_finds_the_last_assistant_text_in_the_transcript() {
    let d = tempfile::tempdir().unwrap();
    let py = d.path().join("stop.py");
    std::fs::write(&py, STOP_HOOK).unwrap();
    let command = format!("python3 {}", py.display());
    let script = json!({"turns": [
        call("c1", "bash", json!({"command": "echo checked"})),
        {"chunks": [{"text": "all done"}]},
        {"repeat": true, "chunks": [{"text": "a second model call"}]}
    ]});
    let hooks = json!({"Stop": [{"hooks": [{"type": "command", "command": command}]}]});
    let s = session(d.path(), script, hooks);
    let (events, outcome) = run(&s, "check it");
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(
        user_messages(&events),
        ["check it"],
        "one model call per prompt"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("last.txt"))
            .ok()
            .as_deref(),
        Some("all done")
    );
    // The transcript is Claude's: a user line with the prompt as a string, the assistant's
    // tool_use under Claude's tool name, the tool_result in a user line, each line chained.
    let path = d.path().join("s1.output/claude-transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["user", "assistant", "user", "assistant"]);
    assert_eq!(lines[0]["message"]["content"], "check it");
    assert_eq!(lines[0]["parentUuid"], Value::Null);
    assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
    assert_eq!(lines[1]["sessionId"], "s1");
    let tool_use = &lines[1]["message"]["content"][0];
    assert_eq!(
        (
            &tool_use["type"],
            &tool_use["name"],
            &tool_use["input"]["command"]
        ),
        (&json!("tool_use"), &json!("Bash"), &json!("echo checked"))
    );
    let result = &lines[2]["message"]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], tool_use["id"]);
    assert!(lines[3]["timestamp"].as_str().unwrap().ends_with('Z'));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the transcript is the owner's only");
}

#[test]
fn claude_env_file_from_session_start_reaches_later_bash_calls() {
    let d = tempfile::tempdir().unwrap();
    let start = r#"test -n "$CLAUDE_ENV_FILE" && echo 'export GREETING=from-session-start' >> "$CLAUDE_ENV_FILE""#;
    let hooks = json!({"SessionStart": [{"hooks": [{"type": "command", "command": start}]}]});
    let script = json!({"turns": [
        call("c1", "bash", json!({"command": "echo \"greeting=$GREETING\""})),
        {"chunks": [{"text": "done"}]}
    ]});
    let s = session(d.path(), script, hooks);
    let (events, _) = run(&s, "greet");
    let result = events.iter().find_map(|e| match &e.payload {
        EventPayload::ToolCallFinished { result, .. } => Some(result.text()),
        _ => None,
    });
    assert_eq!(result.as_deref(), Some("greeting=from-session-start\n"));
}
