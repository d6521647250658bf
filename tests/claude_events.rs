//! Issue 46, point 6, the events `claude_compat` does not reach: `PermissionRequest` (a
//! `permissions.ask` rule on `Bash(touch *)`, answered by the project's hook as Claude's published
//! hooks answer it), `Notification` (`permission_prompt` beside a dialog nobody's hook answered,
//! and `idle_prompt` when a run a person prompted ends), `SubagentStart`/`SubagentStop` (a `task`
//! call, Claude's `Agent`), `PreCompact`/`PostCompact` (then `SessionStart` with `source:
//! compact`), and `SessionEnd` with its `reason`; each recorded with the Claude field a hook
//! script reads, through print, the TUI (in a pty), RPC and a daemon session.
//!
//! Print mode and a print run in a daemon session cannot ask: their call to approve is the one
//! the hook answers, they send no `Notification` (no dialog waits, no person is prompted), and
//! they compact automatically (the scripted model's window is small), so their `SessionStart`
//! with `source: compact` would come with a next prompt they never get. The TUI and RPC answer the
//! second call to approve through their own dialog and compact on `/compact` (RPC `compact`).
//! A subagent's own session events (its `SessionStart`, `Stop`, `SessionEnd`, which carry
//! `agent_id`) are left out of the record: keel fires hooks inside a child as in its parent.
//! A `SubagentStop` hook reads the child's last answer from `agent_transcript_path`.

use serde_json::{json, Value};

use crate::claude_compat::claude_sandbox;
use crate::common::daemon::Daemon;
use crate::common::pty::spawn;
use crate::common::rpc::Rpc;
use crate::common::support::{keel_shell, scripted_args, write_json, Sandbox};

/// The recorder, on every event: one line per event with the Claude fields a hook reads.
const RECORDER: &str = r#"
import json, sys
d = json.load(sys.stdin)
ev = d["hook_event_name"]
if "agent_id" in d and not ev.startswith("Subagent"):
    sys.exit(0)
if ev == "PermissionRequest":
    rules = [r["toolName"] + "(" + r["ruleContent"] + ")" for s in d["permission_suggestions"] for r in s["rules"]]
    seen = d["tool_name"] + ": " + d["tool_input"]["command"] + " " + ",".join(rules)
elif ev == "Notification":
    seen = d["notification_type"] + ": " + d["message"]
elif ev == "SubagentStart":
    seen = d["agent_type"]
elif ev == "SubagentStop":
    read = None
    with open(d["agent_transcript_path"]) as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "assistant":
                read = "".join(b["text"] for b in e["message"]["content"] if b["type"] == "text")
    seen = "|".join([d["agent_type"], d["last_assistant_message"], str(d["stop_hook_active"]), read])
elif ev == "PreCompact":
    seen = d["trigger"] + "|" + d["custom_instructions"]
elif ev == "PostCompact":
    seen = d["trigger"] + "|" + d["compact_summary"]
elif ev == "SessionStart":
    seen = d["source"]
elif ev == "SessionEnd":
    seen = d["reason"]
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"event": ev, "seen": seen}) + "\n")
"#;

/// The project's hook that answers for `touch allowed.txt`, as Claude's published hooks do.
const APPROVER: &str = r#"jq -r '.tool_input.command' | grep -q '^touch allowed' && echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'; exit 0"#;

const SUMMARY: &str = "## Goal\nLook around.";

struct Setup {
    sb: Sandbox,
    script: String,
    log: std::path::PathBuf,
}

/// The user's `~/.claude/settings.json` (the recorder on every event, the ask rule) and the
/// project's `.claude/settings.json` (the approver). `asks`: the run can ask (TUI, RPC): a
/// second call to approve, answered by the front end, and no automatic compaction.
fn setup(asks: bool) -> Option<Setup> {
    let sb = claude_sandbox("claude_events")?;
    let dir = sb.dir.path().to_path_buf();
    let logs = sb.work().join(".hooklog");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("events.jsonl");
    std::fs::write(dir.join(".claude/hooks/record.py"), RECORDER).unwrap();
    let record = format!("python3 ~/.claude/hooks/record.py {}", log.display());
    let mut hooks = serde_json::Map::new();
    for event in [
        "SessionStart",
        "PermissionRequest",
        "Notification",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "SessionEnd",
    ] {
        let group = json!([{"hooks": [{"type": "command", "command": record}]}]);
        hooks.insert(event.into(), group);
    }
    let permissions = json!({"defaultMode": "bypassPermissions", "ask": ["Bash(touch *)"]});
    write_json(
        &dir.join(".claude/settings.json"),
        &json!({"hooks": hooks, "permissions": permissions}),
    );
    let project = json!({"hooks": {"PermissionRequest": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": APPROVER}]}]}});
    write_json(&sb.work().join(".claude/settings.json"), &project);
    let script = script(&sb, asks);
    Some(Setup { sb, script, log })
}

/// The run of `go`: the call the hook approves, (`asks`) the one the front end approves, a
/// subagent, and a call whose usage fills the small window (without `asks`: compacted then);
/// with `asks`, `more` after a `/compact`.
fn script(sb: &Sandbox, asks: bool) -> String {
    let call = |id: &str, name: &str, args: Value| json!({"toolCall": {"id": id, "name": name, "arguments": args}});
    let go = |chunk: Value| json!({"match": "^go", "chunks": [chunk]});
    let mut turns = vec![go(call(
        "b1",
        "bash",
        json!({"command": "touch allowed.txt"}),
    ))];
    if asks {
        turns.push(go(call(
            "b2",
            "bash",
            json!({"command": "touch asked.txt"}),
        )));
    }
    turns.push(go(call(
        "t1",
        "task",
        json!({"description": "look", "prompt": "CHILD look around"}),
    )));
    turns.push(json!({"match": "^CHILD", "chunks": [{"text": "child saw it"}]}));
    let mut full = go(call("l1", "ls", json!({})));
    if !asks {
        full["usage"] = json!({"input": 1900});
    }
    turns.push(full);
    turns.push(json!({"match": "^\\[User\\]", "repeat": true, "chunks": [{"text": SUMMARY}]}));
    turns.push(json!({"match": "^more", "chunks": [{"text": "more done"}]}));
    turns.push(json!({"chunks": [{"text": "all done"}]}));
    let path = sb.dir.path().join("script.json");
    let script = json!({"contextWindow": 2000, "turns": turns});
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// The record: the events in order, and the `Notification`s apart, sorted (nothing waits for
/// a `Notification` hook, so its line may come after a later event's).
fn records(s: &Setup) -> (Vec<(String, String)>, Vec<String>) {
    let text = std::fs::read_to_string(&s.log).unwrap_or_default();
    let mut events = Vec::new();
    let mut notes = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let seen = v["seen"].as_str().unwrap_or_default().to_string();
        match v["event"].as_str().unwrap() {
            "Notification" => notes.push(seen),
            event => events.push((event.to_string(), seen)),
        }
    }
    notes.sort();
    (events, notes)
}

/// What every front end must leave; `asks`: it could ask (and compacted on `/compact`).
fn check(s: &Setup, mode: &str, asks: bool) {
    let ev = |e: &str, seen: &str| (e.to_string(), seen.to_string());
    let trigger = if asks { "manual" } else { "auto" };
    let mut want = vec![
        ev("SessionStart", "startup"),
        ev("PermissionRequest", "Bash: touch allowed.txt Bash(touch:*)"),
    ];
    if asks {
        want.push(ev(
            "PermissionRequest",
            "Bash: touch asked.txt Bash(touch:*)",
        ));
    }
    want.extend([
        ev("SubagentStart", "general"),
        ev("SubagentStop", "general|child saw it|False|child saw it"),
        ev("PreCompact", &format!("{trigger}|")),
        ev("PostCompact", &format!("{trigger}|{SUMMARY}")),
    ]);
    if asks {
        want.push(ev("SessionStart", "compact"));
    }
    // Claude's reason when the user leaves the prompt; a print run, RPC's end of input and a
    // stopped daemon are `other`.
    let end = if mode == "tui" {
        "prompt_input_exit"
    } else {
        "other"
    };
    want.push(ev("SessionEnd", end));
    let notes: Vec<String> = match asks {
        true => vec![
            "idle_prompt: keel is waiting for your input".into(),
            "idle_prompt: keel is waiting for your input".into(),
            "permission_prompt: keel needs your permission to use Bash".into(),
        ],
        false => Vec::new(),
    };
    let (got, got_notes) = records(s);
    assert_eq!(got, want, "{mode}: the hooks' record");
    assert_eq!(got_notes, notes, "{mode}: the Notification hooks' record");
    assert!(s.sb.work().join("allowed.txt").exists(), "{mode}");
    assert_eq!(s.sb.work().join("asked.txt").exists(), asks, "{mode}");
}

/// Waits (30 s at most) for the detached `Notification` hooks of a front end that can ask:
/// nothing in the front end waits for them.
fn notified(s: &Setup) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while records(s).1.len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn args(s: &Setup) -> Vec<&str> {
    scripted_args(&["--trust-project"], &s.script, &[])
}

#[test]
fn claude_events_in_print_mode() {
    let Some(s) = setup(false) else { return };
    let mut all = vec!["-p"];
    all.extend(args(&s));
    all.push("go");
    let run = s.sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.trim(), "all done", "{run}");
    check(&s, "print", false);
}

#[test]
fn claude_events_in_a_daemon_session() {
    let Some(s) = setup(false) else { return };
    let mut d = Daemon::start(&s.sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut all = vec!["--daemon", "--socket", &socket, "-p"];
    all.extend(args(&s));
    all.push("go");
    let run = s.sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.trim(), "all done", "{run}");
    // The session outlives its print client: it ends with the daemon.
    let stop = s.sb.run(&["daemon", "stop", "--socket", &socket]);
    assert_eq!(stop.code, 0, "{stop}");
    assert_eq!(d.wait(), 0);
    check(&s, "daemon", false);
}

#[test]
fn claude_events_in_rpc_mode() {
    let Some(s) = setup(true) else { return };
    let mut rpc = Rpc::start(&s.sb, &args(&s));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let dialog = rpc.wait(&json!({"type": "extension_ui_request", "method": "confirm"}));
    rpc.send(&json!({"type": "extension_ui_response", "id": dialog["id"], "confirmed": true}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let compacted = rpc.call(json!({"id": "c", "type": "compact"}));
    assert_eq!(compacted["success"], true, "{compacted}");
    rpc.send(&json!({"id": "m", "type": "prompt", "message": "more"}));
    rpc.wait(&json!({"type": "agent_settled"}));
    notified(&s);
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    check(&s, "rpc", true);
}

#[test]
fn claude_events_in_the_tui() {
    let Some(s) = setup(true) else { return };
    let shell = format!(
        "{} --trust-project; echo KEEL_EXIT=$?",
        keel_shell(&s.script)
    );
    let (mut screen, mut child) = spawn(&s.sb, &shell);
    screen.wait_for("the editor", |t| t.contains("Ask anything"));
    screen.send("go\r");
    screen.wait_for("the dialog", |t| t.contains("allow once"));
    screen.send("y");
    screen.wait_for("the answer", |t| t.contains("all done"));
    screen.send("/compact\r");
    screen.wait_for("the compaction", |t| t.contains("⇣ compacted"));
    screen.send("more\r");
    screen.wait_for("the second answer", |t| t.contains("more done"));
    notified(&s);
    assert!(screen.quit("\x04", &mut child).success());
    check(&s, "tui", true);
}

/// A run that cannot ask (a print run, here in a daemon session, which outlives it) blocks a
/// call nobody's hook approves: no dialog waits, so no `Notification` says one does.
#[test]
fn claude_events_no_permission_prompt_where_nobody_is_asked() {
    let Some(s) = setup(false) else { return };
    let turns = json!([{"chunks": [{"toolCall": {"id": "b2", "name": "bash",
        "arguments": {"command": "touch asked.txt"}}}]}]);
    let script = s.sb.script(turns);
    let mut d = Daemon::start(&s.sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut all = vec!["--daemon", "--socket", &socket, "-p"];
    all.extend(scripted_args(&["--trust-project"], &script, &["go"]));
    let run = s.sb.run(&all);
    assert_eq!(run.code, 5, "blocked: {run}");
    let stop = s.sb.run(&["daemon", "stop", "--socket", &socket]);
    assert_eq!(stop.code, 0, "{stop}");
    assert_eq!(d.wait(), 0);
    let (events, notes) = records(&s);
    assert_eq!(notes, Vec::<String>::new(), "{events:?}");
    assert_eq!(
        events.last(),
        Some(&("SessionEnd".to_string(), "other".to_string()))
    );
    assert!(!s.sb.work().join("asked.txt").exists());
}
