//! Issue 46, point 6: a Claude Code user's setup, unchanged, through every front end. The hook
//! scripts are written the way published Claude Code hooks read their input (`jq` and Python
//! over stdin) and placed where their users put them: `~/.claude/settings.json` (a `jq` guard
//! that stops `rm -rf`, a SessionStart hook writing `CLAUDE_ENV_FILE`, a Python recorder on every
//! event) and the project's `.claude/settings.json` (a `jq` formatter hook on Write|Edit and the
//! widely copied Stop hook that parses the transcript for the last assistant message). One
//! scripted run calls each built-in tool under its Claude name (one of them failing); print, the TUI (in a pty), RPC
//! and a daemon session must each leave the same record: every event, every Claude field the
//! scripts read, the guard holding, and one model call per prompt (the Stop hook found the
//! answer in the transcript).

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::pty::spawn;
use crate::common::rpc::Rpc;
use crate::common::support::{keel_shell, scripted_args, skipped, Sandbox};

/// The recorder: one line per event with the Claude field a published hook reads for it.
const RECORDER: &str = r#"
import json, sys
d = json.load(sys.stdin)
ev = d["hook_event_name"]
tool = d.get("tool_name")
ti = d.get("tool_input") or {}
tr = d.get("tool_response") or {}
seen = None
if ev == "PreToolUse":
    seen = ti.get("file_path") or ti.get("command") or ti.get("pattern")
    if tool == "TodoWrite":
        seen = ti["todos"][0]["content"]
elif ev == "PostToolUse":
    if tool == "Bash":
        seen = tr["stdout"].strip() + "|" + tr["stderr"] + "|" + str(tr["interrupted"])
    elif tool in ("Write", "Edit"):
        seen = tr["filePath"]
    elif tool == "Read":
        seen = tr["file"]["content"]
    elif tool in ("Grep", "Glob"):
        seen = tr["numFiles"]
    elif tool == "TodoWrite":
        seen = tr["newTodos"][0]["content"] + "|" + str(len(tr["oldTodos"]))
elif ev == "PostToolUseFailure":
    seen = "missing.txt" in d["error"]
elif ev == "UserPromptSubmit":
    seen = d["prompt"]
elif ev == "SessionStart":
    seen = d["source"]
elif ev == "Stop":
    seen = d["stop_hook_active"]
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"event": ev, "tool": tool, "seen": seen, "session": d["session_id"]}) + "\n")
"#;

/// The copied Stop hook: the last assistant message's text from the transcript; without one it
/// blocks the stop (which would cost a second model call).
const STOP: &str = r#"
import json, sys
d = json.load(sys.stdin)
if d.get("stop_hook_active"):
    sys.exit(0)
last = None
with open(d["transcript_path"]) as f:
    for line in f:
        e = json.loads(line)
        if e.get("type") != "assistant":
            continue
        content = e["message"]["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        texts = [b["text"] for b in content if b.get("type") == "text"]
        if texts:
            last = "".join(texts)
if last is None:
    print(json.dumps({"decision": "block", "reason": "no assistant message in the transcript"}))
else:
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps({"event": "StopParsed", "tool": None, "seen": last}) + "\n")
    print(json.dumps({"systemMessage": "stop hook read: " + last}))
"#;

const GUARD: &str = r#"jq -r '.tool_input.command' | grep -q 'rm -rf' && { echo 'Blocked: rm -rf' >&2; exit 2; }; exit 0"#;

/// The run: each built-in tool once, under its Claude name, then the guarded `rm -rf`.
fn script(sb: &Sandbox) -> String {
    let call = |id: &str, name: &str, args: Value| json!({"chunks": [{"toolCall": {"id": id, "name": name, "arguments": args}}]});
    let turns = vec![
        call(
            "c1",
            "write",
            json!({"path": "notes.txt", "content": "alpha\n"}),
        ),
        call("c2", "read", json!({"path": "notes.txt"})),
        call(
            "c3",
            "edit",
            json!({"path": "notes.txt", "oldText": "alpha", "newText": "beta"}),
        ),
        call(
            "c4",
            "bash",
            json!({"command": "echo hello $GREETING; echo warned >&2"}),
        ),
        call(
            "c5",
            "grep",
            json!({"pattern": "beta", "path": "notes.txt"}),
        ),
        call("c6", "find", json!({"pattern": "*.txt"})),
        call("c7", "ls", json!({})),
        call("c9", "read", json!({"path": "missing.txt"})),
        call(
            "c10",
            "todo_write",
            json!({"todos": [{"content": "ship it", "status": "in_progress", "activeForm": "Shipping it"}]}),
        ),
        call("c8", "bash", json!({"command": "rm -rf keep"})),
        json!({"chunks": [{"text": "all done"}]}),
    ];
    let path = sb.dir.path().join("script.json");
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    path.display().to_string()
}

struct Setup {
    sb: Sandbox,
    script: String,
    log: PathBuf,
    formatted: PathBuf,
}

/// A sandbox with the user's and the project's Claude settings, the hook scripts and `keep/`.
fn setup() -> Option<Setup> {
    let sb = claude_sandbox("claude_compat")?;
    // HOME is the sandbox's directory: the user's scripts in `~/.claude/hooks`, the project's
    // in `.claude/hooks`, as Claude Code's users keep them; the records in the workspace (what
    // a sandboxed hook may write).
    let dir = sb.dir.path().to_path_buf();
    let logs = sb.work().join(".hooklog");
    std::fs::create_dir_all(&logs).unwrap();
    let (log, formatted) = (logs.join("hooks.jsonl"), logs.join("formatted.log"));
    std::fs::write(dir.join(".claude/hooks/record.py"), RECORDER).unwrap();
    std::fs::write(sb.work().join(".claude/hooks/stop.py"), STOP).unwrap();
    let record = format!("python3 ~/.claude/hooks/record.py {}", log.display());
    let all = |matcher: Option<&str>| {
        let mut group = json!({"hooks": [{"type": "command", "command": record}]});
        if let Some(m) = matcher {
            group["matcher"] = m.into();
        }
        json!([group])
    };
    let mut hooks = serde_json::Map::new();
    for event in ["UserPromptSubmit", "Stop", "SessionEnd"] {
        hooks.insert(event.into(), all(None));
    }
    for event in ["PreToolUse", "PostToolUse", "PostToolUseFailure"] {
        hooks.insert(event.into(), all(Some("*")));
    }
    hooks.insert(
        "SessionStart".into(),
        json!([{"hooks": [
            {"type": "command", "command": record},
            {"type": "command", "command": "echo 'export GREETING=hi-from-env' >> \"$CLAUDE_ENV_FILE\""}
        ]}]),
    );
    hooks["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(json!({"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}));
    let user = json!({"hooks": hooks, "permissions": {"defaultMode": "bypassPermissions"}});
    write(&dir.join(".claude/settings.json"), &user);
    let project = json!({"hooks": {
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command",
            "command": format!("jq -r '.tool_input.file_path' >> {}", formatted.display())}]}],
        "Stop": [{"hooks": [{"type": "command",
            "command": format!("python3 \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/stop.py {}", log.display())}]}]
    }});
    write(&sb.work().join(".claude/settings.json"), &project);
    std::fs::create_dir(sb.work().join("keep")).unwrap();
    let script = script(&sb);
    Some(Setup {
        sb,
        script,
        log,
        formatted,
    })
}

use crate::common::support::write_json as write;

/// A sandbox for hook scripts written as Claude Code's users write them (`jq` and Python over
/// stdin; `None`, and the test skipped, when either is missing), with `~/.claude/hooks` and the
/// project's `.claude/hooks` made and the workspace a git repository. Shared with
/// `claude_events`.
pub(crate) fn claude_sandbox(test: &str) -> Option<Sandbox> {
    for tool in ["jq", "python3"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            skipped(&format!("{test}: `{tool}` is not installed"));
            return None;
        }
    }
    // Not under /tmp: bubblewrap's private /tmp would hide the home's scripts.
    let sb = Sandbox::new_in("/var/tmp").unwrap_or_else(Sandbox::new);
    std::fs::create_dir_all(sb.dir.path().join(".claude/hooks")).unwrap();
    std::fs::create_dir_all(sb.work().join(".claude/hooks")).unwrap();
    std::fs::create_dir_all(sb.work().join(".git")).unwrap();
    Some(sb)
}

/// The recorded events (SessionEnd left out: when it fires depends on the front end).
fn records(s: &Setup) -> Vec<(String, Option<String>, Value)> {
    let text = std::fs::read_to_string(&s.log).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] != "SessionEnd")
        .map(|v| {
            let tool = v["tool"].as_str().map(str::to_string);
            (
                v["event"].as_str().unwrap().to_string(),
                tool,
                v["seen"].clone(),
            )
        })
        .collect()
}

/// What every front end must leave: each event with the Claude field its script read.
fn check(s: &Setup, mode: &str) {
    let notes = std::fs::canonicalize(s.sb.work())
        .unwrap()
        .join("notes.txt")
        .display()
        .to_string();
    let missing = notes.replace("notes.txt", "missing.txt");
    let ev = |e: &str, t: Option<&str>, seen: Value| (e.to_string(), t.map(str::to_string), seen);
    let want = vec![
        ev("SessionStart", None, json!("startup")),
        ev("UserPromptSubmit", None, json!("go")),
        ev("PreToolUse", Some("Write"), json!(notes)),
        ev("PostToolUse", Some("Write"), json!(notes)),
        ev("PreToolUse", Some("Read"), json!(notes)),
        ev("PostToolUse", Some("Read"), json!("alpha")),
        ev("PreToolUse", Some("Edit"), json!(notes)),
        ev("PostToolUse", Some("Edit"), json!(notes)),
        ev(
            "PreToolUse",
            Some("Bash"),
            json!("echo hello $GREETING; echo warned >&2"),
        ),
        ev(
            "PostToolUse",
            Some("Bash"),
            json!("hello hi-from-env|warned\n|False"),
        ),
        ev("PreToolUse", Some("Grep"), json!("beta")),
        ev("PostToolUse", Some("Grep"), json!(1)),
        ev("PreToolUse", Some("Glob"), json!("*.txt")),
        ev("PostToolUse", Some("Glob"), json!(1)),
        ev("PreToolUse", Some("LS"), Value::Null),
        ev("PostToolUse", Some("LS"), Value::Null),
        ev("PreToolUse", Some("Read"), json!(missing)),
        ev("PostToolUseFailure", Some("Read"), json!(true)),
        ev("PreToolUse", Some("TodoWrite"), json!("ship it")),
        ev("PostToolUse", Some("TodoWrite"), json!("ship it|0")),
        ev("PreToolUse", Some("Bash"), json!("rm -rf keep")),
        ev("Stop", None, json!(false)),
        ev("StopParsed", None, json!("all done")),
    ];
    let mut got = records(s);
    // The two Stop hooks run at once: their lines come in either order.
    let n = got.len();
    if n >= 2 {
        got[n - 2..].sort_by(|a, b| a.0.cmp(&b.0));
    }
    assert_eq!(got, want, "{mode}: the hooks' record");
    assert!(
        s.sb.work().join("keep").exists(),
        "{mode}: the guard did not hold"
    );
    let formatted = std::fs::read_to_string(&s.formatted).unwrap_or_default();
    assert_eq!(
        formatted,
        format!("{notes}\n{notes}\n"),
        "{mode}: the formatter hook"
    );
}

/// The flags every front end gets: the scripted run, the project trusted for this run.
fn args(s: &Setup) -> Vec<&str> {
    scripted_args(&["--trust-project"], &s.script, &[])
}

#[test]
fn a_claude_code_setup_runs_unchanged_in_print_mode() {
    let Some(s) = setup() else { return };
    let mut all = vec!["-p"];
    all.extend(args(&s));
    all.push("go");
    let run = s.sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.trim(), "all done", "{run}");
    check(&s, "print");
}

#[test]
fn a_claude_code_setup_runs_unchanged_in_rpc_mode() {
    let Some(s) = setup() else { return };
    let mut rpc = Rpc::start(&s.sb, &args(&s));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    check(&s, "rpc");
}

#[test]
fn a_claude_code_setup_runs_unchanged_in_a_daemon_session() {
    let Some(s) = setup() else { return };
    let d = Daemon::start(&s.sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut all = vec!["--daemon", "--socket", &socket, "-p"];
    all.extend(args(&s));
    all.push("go");
    let run = s.sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.trim(), "all done", "{run}");
    check(&s, "daemon");
}

#[test]
fn a_claude_code_setup_runs_unchanged_in_the_tui() {
    let Some(s) = setup() else { return };
    let shell = format!(
        "{} --trust-project; echo KEEL_EXIT=$?",
        keel_shell(&s.script)
    );
    let (mut screen, mut child) = spawn(&s.sb, &shell);
    screen.wait_for("the editor", |t| t.contains("Ask anything"));
    screen.send("go\r");
    // The Stop hook's systemMessage: it ran, after every other hook of the run.
    screen.wait_for("the Stop hook's message", |t| {
        t.contains("stop hook read: all done")
    });
    check(&s, "tui");
    assert!(screen.quit("\x04", &mut child).success());
}

/// What keel leaves out of a Claude file is said once at the start in RPC mode too, as a
/// `notify` warning (print mode says it on stderr: `claude_settings`).
#[test]
fn what_keel_ignores_in_a_claude_file_is_a_notify_in_rpc_mode() {
    let Some(s) = setup() else { return };
    let user = s.sb.dir.path().join(".claude/settings.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&user).unwrap()).unwrap();
    v["apiKeyHelper"] = json!("~/.claude/key.sh");
    write(&user, &v);
    let mut rpc = Rpc::start(&s.sb, &args(&s));
    rpc.send(&json!({"id": "s", "type": "get_state"}));
    let note = rpc.wait(&json!({"type": "extension_ui_request", "method": "notify"}));
    let message = note["message"].as_str().unwrap();
    assert!(
        message.contains("keel does not use (apiKeyHelper)"),
        "{note}"
    );
    assert!(message.contains(".claude/settings.json"), "{note}");
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}
