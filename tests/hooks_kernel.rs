//! Hooks fired by the kernel's turn loop, with scripts written the way Claude Code users write
//! them (sh + jq, Python reading `json.load(sys.stdin)`), on the scripted provider: guards,
//! JSON decisions, input rewrites, formatters, Stop continuing, prompt context and blocks.

use std::sync::Arc;
use std::time::Duration;

use keel::kernel::event::{Event, EventPayload, RunOutcome};
use keel::kernel::hooks::{HookConfig, HookEnv, Hooks, SessionFields};
use keel::kernel::message::{user_text, Message};
use keel::kernel::tool::ToolEnv;
use keel::{AgentConfig, AgentSession, Permission};
use serde_json::{json, Value};

use crate::common::kernel::{self as kit, drive, rt, scripted};

fn session(
    dir: &std::path::Path,
    script: Value,
    hooks: Value,
    permission: Permission,
) -> AgentSession {
    session_asking(dir, script, hooks, permission, false)
}

/// [`session`] of a front end that can ask (`can_ask`: a person is there).
fn session_asking(
    dir: &std::path::Path,
    script: Value,
    hooks: Value,
    permission: Permission,
    can_ask: bool,
) -> AgentSession {
    let mut c = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = permission;
    c.can_ask = can_ask;
    let (config, warnings) = HookConfig::parse(&hooks, "test settings");
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = HookEnv {
        cwd: dir.to_path_buf(),
        project_dir: dir.to_path_buf(),
        tool_env: ToolEnv::new(vec![]),
        temp_dir: dir.to_path_buf(),
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

fn hook(event: &str, matcher: &str, command: &str) -> Value {
    json!({ event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}] })
}

fn tool_results(events: &[Arc<Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCallFinished { result, .. } => Some(result.text()),
            _ => None,
        })
        .collect()
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

fn bash_then(text: &str, command: &str) -> Value {
    json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": command}}}]},
        {"chunks": [{"text": text}]}
    ]})
}

const GUARD: &str = r#"cmd=$(jq -r '.tool_input.command'); case "$cmd" in *"rm -rf"*) echo "Blocked: rm -rf is not allowed here" >&2; exit 2;; esac"#;

#[test]
fn a_pre_tool_use_guard_exiting_2_stops_rm_and_the_model_sees_why() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("keep")).unwrap();
    let s = session(
        d.path(),
        bash_then("ok", "rm -rf keep"),
        hook("PreToolUse", "Bash", GUARD),
        Permission::Auto,
    );
    let (events, outcome) = run(&s, "clean up");
    assert_eq!(outcome, RunOutcome::Completed);
    assert!(d.path().join("keep").exists(), "the guarded rm ran");
    let result = &tool_results(&events)[0];
    assert!(
        result.contains("Blocked: rm -rf is not allowed here"),
        "{result}"
    );
    let finished = events.iter().find_map(|e| match &e.payload {
        EventPayload::HookFinished {
            event,
            exit_code,
            decision,
            ..
        } => Some((event.clone(), *exit_code, decision.clone())),
        _ => None,
    });
    assert_eq!(
        finished,
        Some(("PreToolUse".into(), Some(2), Some("deny".into())))
    );
}

#[test]
fn a_json_deny_and_a_python_hook_reading_stdin() {
    let d = tempfile::tempdir().unwrap();
    let py = d.path().join("deny.py");
    std::fs::write(
        &py,
        "import json, sys\n\
         data = json.load(sys.stdin)\n\
         if data['tool_name'] == 'Write' and data['tool_input']['file_path'].endswith('.env'):\n\
         \x20   print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse',\n\
         \x20       'permissionDecision': 'deny', 'permissionDecisionReason': 'secrets stay out'}}))\n",
    )
    .unwrap();
    let script = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "write", "arguments": {"path": ".env", "content": "K=1"}}}]},
        {"chunks": [{"text": "done"}]}
    ]});
    let s = session(
        d.path(),
        script,
        hook(
            "PreToolUse",
            "Edit|Write",
            &format!("python3 {}", py.display()),
        ),
        Permission::Auto,
    );
    let (events, _) = run(&s, "write env");
    assert!(!d.path().join(".env").exists());
    assert!(tool_results(&events)[0].contains("secrets stay out"));
}

#[test]
fn updated_input_rewrites_the_command_that_runs() {
    let d = tempfile::tempdir().unwrap();
    let rewrite = r#"jq '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "allow", updatedInput: {command: (.tool_input.command + " --ci")}}}'"#;
    let s = session(
        d.path(),
        bash_then("ok", "echo test"),
        hook("PreToolUse", "Bash", rewrite),
        Permission::Auto,
    );
    let (events, _) = run(&s, "test");
    assert!(
        tool_results(&events)[0].contains("test --ci"),
        "{:?}",
        tool_results(&events)
    );
}

/// A run that writes `hello` to `a.txt` (a relative path), then answers.
fn writes_a_txt() -> Value {
    json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "write", "arguments": {"path": "a.txt", "content": "hello"}}}]},
        {"chunks": [{"text": "done"}]}
    ]})
}

#[test]
fn a_post_tool_use_formatter_changes_the_file_after_write() {
    let d = tempfile::tempdir().unwrap();
    let fmt =
        r#"f=$(jq -r '.tool_input.file_path'); tr a-z A-Z < "$f" > "$f.tmp" && mv "$f.tmp" "$f""#;
    let script = writes_a_txt();
    let s = session(
        d.path(),
        script,
        hook("PostToolUse", "Write", fmt),
        Permission::Auto,
    );
    run(&s, "write");
    assert_eq!(
        std::fs::read_to_string(d.path().join("a.txt")).unwrap(),
        "HELLO"
    );
}

/// Claude Code sends `tool_input.file_path` absolute; guards written for it compare it with
/// absolute paths (issue 46 point 3).
#[test]
fn file_path_reaches_a_hook_absolute_as_claude_sends_it() {
    let d = tempfile::tempdir().unwrap();
    let guard = r#"f=$(jq -r .tool_input.file_path); case "$f" in /*) ;; *) echo "relative: $f" >&2; exit 2;; esac"#;
    let script = writes_a_txt();
    let s = session(
        d.path(),
        script,
        hook("PreToolUse", "Write", guard),
        Permission::Auto,
    );
    let (events, _) = run(&s, "write");
    assert_eq!(
        std::fs::read_to_string(d.path().join("a.txt"))
            .ok()
            .as_deref(),
        Some("hello"),
        "{:?}",
        tool_results(&events)
    );
}

#[test]
fn a_stop_hook_blocks_once_and_the_agent_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let stop = r#"if [ "$(jq -r .stop_hook_active)" = false ]; then echo "run the tests first" >&2; exit 2; fi"#;
    let script = json!({"turns": [
        {"match": "^fix", "chunks": [{"text": "fixed"}]},
        {"match": "^run the tests first", "chunks": [{"text": "tests pass"}]}
    ]});
    let s = session(d.path(), script, hook("Stop", "", stop), Permission::Auto);
    let (events, outcome) = run(&s, "fix it");
    assert_eq!(outcome, RunOutcome::Completed);
    assert_eq!(user_messages(&events), ["fix it", "run the tests first"]);
}

#[test]
fn user_prompt_submit_adds_context_or_blocks_the_prompt() {
    let d = tempfile::tempdir().unwrap();
    let ctx = r#"p=$(jq -r .prompt); case "$p" in *secret*) echo "prompt names a secret" >&2; exit 2;; *) echo "branch: main";; esac"#;
    let script = json!({"turns": [{"repeat": true, "chunks": [{"text": "ok"}]}]});
    let s = session(
        d.path(),
        script,
        hook("UserPromptSubmit", "", ctx),
        Permission::Auto,
    );
    let (events, _) = run(&s, "hello");
    let users = user_messages(&events);
    assert_eq!(users[0], "hello");
    assert!(users[1].contains("branch: main"), "{users:?}");
    let (events, outcome) = run(&s, "print the secret");
    // Not a success: the run did not do what it was asked (issue 44 point 2).
    assert_eq!(
        outcome,
        RunOutcome::PromptBlocked {
            reason: "prompt names a secret".into()
        }
    );
    assert!(
        user_messages(&events).is_empty(),
        "a blocked prompt reached the model"
    );
    let reason = events.iter().find_map(|e| match &e.payload {
        EventPayload::HookFinished { reason, .. } => reason.clone(),
        _ => None,
    });
    assert_eq!(reason.as_deref(), Some("prompt names a secret"));
}

#[test]
fn a_hook_that_asks_blocks_a_run_that_cannot_ask_even_in_auto() {
    let d = tempfile::tempdir().unwrap();
    let ask = r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"touches prod"}}'"#;
    let s = session(
        d.path(),
        bash_then("ok", "touch prod.cfg"),
        hook("PreToolUse", "Bash", ask),
        Permission::Auto,
    );
    let (_, outcome) = run(&s, "go");
    assert!(matches!(outcome, RunOutcome::Blocked { .. }), "{outcome:?}");
    assert!(!d.path().join("prod.cfg").exists());
}

#[test]
fn a_hook_allow_answers_ask_mode_without_a_dialog() {
    let d = tempfile::tempdir().unwrap();
    let allow = r#"echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'"#;
    let s = session(
        d.path(),
        bash_then("ok", "touch made"),
        hook("PreToolUse", "Bash", allow),
        Permission::Ask,
    );
    let (_, outcome) = run(&s, "go");
    assert_eq!(outcome, RunOutcome::Completed);
    assert!(d.path().join("made").exists());
}

#[test]
fn a_permission_request_hook_answers_the_dialog_and_notification_is_not_fired() {
    let d = tempfile::tempdir().unwrap();
    let allow = r#"echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'"#;
    let mut hooks = hook("PermissionRequest", "Bash", allow);
    hooks["Notification"] = json!([{"hooks": [{"type": "command", "command": "touch notified"}]}]);
    let s = session(
        d.path(),
        bash_then("ok", "touch made"),
        hooks,
        Permission::Ask,
    );
    // The session can ask, yet nobody answers here: only the hook can let the call run.
    let (_, outcome) = run(&s, "go");
    assert_eq!(outcome, RunOutcome::Completed);
    assert!(d.path().join("made").exists());
    assert!(!d.path().join("notified").exists());
}

#[test]
fn a_pre_compact_hook_blocks_compaction() {
    let d = tempfile::tempdir().unwrap();
    let script = json!({"turns": [{"repeat": true, "chunks": [{"text": "ok"}]}]});
    let s = session(
        d.path(),
        script,
        hook("PreCompact", "manual", "echo 'not now' >&2; exit 2"),
        Permission::Auto,
    );
    run(&s, "hello");
    run(&s, "again");
    let rt = rt();
    let err = rt.block_on(s.compact(None)).unwrap_err();
    assert!(
        err.to_string().contains("blocked by a hook: not now"),
        "{err}"
    );
}

#[test]
fn session_start_context_reaches_the_first_prompt_and_session_end_fires() {
    let d = tempfile::tempdir().unwrap();
    let mut hooks = hook("SessionStart", "startup", "echo 'project uses pnpm'");
    hooks["SessionEnd"] =
        json!([{"hooks": [{"type": "command", "command": "jq -r .reason > ended"}]}]);
    let script = json!({"turns": [{"repeat": true, "chunks": [{"text": "ok"}]}]});
    let s = session(d.path(), script, hooks, Permission::Auto);
    let (events, _) = run(&s, "hello");
    let users = user_messages(&events);
    assert_eq!(users[0], "hello");
    assert!(users[1].contains("project uses pnpm"), "{users:?}");
    let (events, _) = run(&s, "again");
    assert_eq!(user_messages(&events), ["again"], "SessionStart fires once");
    let rt = rt();
    rt.block_on(s.end_hooks("prompt_input_exit"));
    assert_eq!(
        std::fs::read_to_string(d.path().join("ended")).unwrap(),
        "prompt_input_exit\n"
    );
}

/// A run that ended and waits for the user fired no `Notification`: Claude's `idle_prompt`
/// (matched by its `notification_type`), for a session a person prompts only.
#[test]
fn a_run_that_ends_fires_the_idle_prompt_notification() {
    let d = tempfile::tempdir().unwrap();
    let script = json!({"turns": [{"repeat": true, "chunks": [{"text": "done"}]}]});
    let hooks = hook(
        "Notification",
        "idle_prompt",
        "jq -r '.notification_type + \" \" + .message' > notified",
    );
    let s = session_asking(d.path(), script, hooks, Permission::Auto, true);
    let rt = rt();
    let finished = rt.block_on(async {
        let mut rx = s.subscribe();
        let run = s.prompt("go".into()).unwrap();
        assert_eq!(run.await.unwrap(), RunOutcome::Completed);
        let wait = async {
            while let Some(ev) = rx.recv().await {
                if let EventPayload::HookFinished {
                    event, exit_code, ..
                } = &ev.payload
                {
                    if event == "Notification" {
                        return Some(*exit_code);
                    }
                }
            }
            None
        };
        tokio::time::timeout(Duration::from_secs(30), wait).await
    });
    assert_eq!(finished, Ok(Some(Some(0))), "the hook ran and ended");
    let said = std::fs::read_to_string(d.path().join("notified")).unwrap();
    assert_eq!(said.trim(), "idle_prompt keel is waiting for your input");
}
