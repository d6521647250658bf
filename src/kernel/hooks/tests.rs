//! The engine end to end with real `sh` processes: payload, parallelism, dedupe, caps.

use super::*;
use serde_json::json;
use std::sync::Mutex;

use crate::kernel::tool::ToolEnv;

fn hooks(dir: &std::path::Path, config: Value) -> Hooks {
    let (config, warnings) = HookConfig::parse(&config, "settings.json");
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = HookEnv {
        cwd: dir.to_path_buf(),
        project_dir: dir.to_path_buf(),
        tool_env: ToolEnv::new(vec![]),
        temp_dir: dir.to_path_buf(),
        readable: Vec::new(),
    };
    let session = SessionFields {
        session_id: "s-1".into(),
        transcript_path: "/k/sessions/s-1.jsonl".into(),
        permission_mode: "default".into(),
        agent: None,
    };
    Hooks::new(config, env, session)
}

fn cmd(event: &str, matcher: &str, commands: &[&str]) -> Value {
    let hooks: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "command", "command": c}))
        .collect();
    json!({ event: [{"matcher": matcher, "hooks": hooks}] })
}

async fn fire(
    h: &Hooks,
    event: HookEvent,
    subjects: &[&str],
    fields: Value,
) -> (Verdict, Vec<HookNotice>) {
    let seen = Mutex::new(Vec::new());
    let fields = fields.as_object().cloned().unwrap_or_default();
    // Unsandboxed: the sandboxed runs are the binary's (tests/hooks_sandbox.rs).
    let sandbox = Arc::new(Sandbox::off(std::path::Path::new("/")));
    let v = h
        .fire(
            event,
            subjects,
            fields,
            &sandbox,
            &AbortSignal::never(),
            &|n| seen.lock().unwrap().push(n),
        )
        .await;
    (v, seen.into_inner().unwrap())
}

#[tokio::test]
async fn stdin_carries_the_session_fields_and_the_events_own() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("stdin.json");
    let h = hooks(
        d.path(),
        cmd("PreToolUse", "Bash", &[&format!("cat > {}", out.display())]),
    );
    let (v, _) = fire(
        &h,
        HookEvent::PreToolUse,
        &["Bash", "bash"],
        json!({
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "c1"}),
    )
    .await;
    assert_eq!(v, Verdict::default());
    let got: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        got,
        json!({
        "session_id": "s-1", "transcript_path": "/k/sessions/s-1.output/claude-transcript.jsonl",
        "cwd": d.path().display().to_string(), "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_use_id": "c1"})
    );
}

#[tokio::test]
async fn no_matching_hook_starts_no_process() {
    let d = tempfile::tempdir().unwrap();
    let h = hooks(d.path(), cmd("PreToolUse", "Edit", &["touch ran"]));
    let (v, seen) = fire(&h, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    assert_eq!(v, Verdict::default());
    assert!(seen.is_empty());
    assert!(!d.path().join("ran").exists());
}

#[tokio::test]
async fn matching_hooks_run_in_parallel_and_identical_ones_once() {
    let d = tempfile::tempdir().unwrap();
    // Each hook waits for the other's file: they finish only if both run at once.
    let a = "touch a; while [ ! -e b ]; do sleep 0.01; done; echo A >> runs";
    let b = "touch b; while [ ! -e a ]; do sleep 0.01; done; echo B >> runs";
    let mut config = cmd("Stop", "", &[a, b]);
    let (extra, _) = HookConfig::parse(&cmd("Stop", "", &[a]), "other.json");
    let (mut base, _) = HookConfig::parse(&config.take(), "settings.json");
    base.merge(extra);
    let h = Hooks::new(
        base,
        HookEnv {
            cwd: d.path().to_path_buf(),
            project_dir: d.path().to_path_buf(),
            tool_env: ToolEnv::new(vec![]),
            temp_dir: d.path().to_path_buf(),
            readable: Vec::new(),
        },
        SessionFields::default(),
    );
    let (_, seen) = fire(&h, HookEvent::Stop, &[], json!({"stop_hook_active": false})).await;
    let mut runs: Vec<String> = std::fs::read_to_string(d.path().join("runs"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    runs.sort();
    assert_eq!(runs, ["A", "B"]);
    let finished = seen
        .iter()
        .filter(|n| matches!(n, HookNotice::Finished { .. }))
        .count();
    assert_eq!(finished, 2);
}

#[tokio::test]
async fn a_guard_script_written_for_claude_denies_with_its_reason() {
    let d = tempfile::tempdir().unwrap();
    let guard = r#"input=$(cat); case "$input" in *"rm -rf"*) echo "Blocked: rm -rf" >&2; exit 2;; esac; exit 0"#;
    let h = hooks(d.path(), cmd("PreToolUse", "Bash", &[guard]));
    let (v, seen) = fire(
        &h,
        HookEvent::PreToolUse,
        &["Bash"],
        json!({
        "tool_name": "Bash", "tool_input": {"command": "rm -rf /tmp/x"}}),
    )
    .await;
    assert_eq!(
        v.permission,
        Some((Decision::Deny, Some("Blocked: rm -rf".into())))
    );
    assert!(
        matches!(
            &seen[1],
            HookNotice::Finished {
                exit_code: Some(2),
                decision: Some("deny"),
                ..
            }
        ),
        "{seen:?}"
    );
    let (v, _) = fire(
        &h,
        HookEvent::PreToolUse,
        &["Bash"],
        json!({
        "tool_name": "Bash", "tool_input": {"command": "ls"}}),
    )
    .await;
    assert_eq!(v.permission, None);
}

#[tokio::test]
async fn long_context_is_cut_and_saved_whole() {
    let d = tempfile::tempdir().unwrap();
    let h = hooks(
        d.path(),
        cmd(
            "UserPromptSubmit",
            "",
            &["head -c 25000 /dev/zero | tr '\\0' x"],
        ),
    );
    let (v, _) = fire(
        &h,
        HookEvent::UserPromptSubmit,
        &[],
        json!({"prompt": "hi"}),
    )
    .await;
    let text = &v.context[0];
    assert!(text.starts_with(&"x".repeat(TEXT_CAP)));
    assert!(!text.contains(&"x".repeat(TEXT_CAP + 1)));
    let path = text
        .rsplit("all of it: ")
        .next()
        .unwrap()
        .trim_end_matches(']');
    assert_eq!(std::fs::read_to_string(path).unwrap().len(), 25000);
}

/// One handler with extra fields (`once`, `async`, …) on `event`.
fn handler(event: &str, command: &str, extra: Value) -> Value {
    let mut h = json!({"type": "command", "command": command});
    h.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    json!({ event: [{"matcher": "*", "hooks": [h]}] })
}

#[tokio::test]
async fn a_once_hook_runs_once_per_session() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("log");
    let h = hooks(
        d.path(),
        handler(
            "PreToolUse",
            &format!("echo ran >> {}", log.display()),
            json!({"once": true}),
        ),
    );
    let lines = || std::fs::read_to_string(&log).unwrap().lines().count();
    for _ in 0..2 {
        fire(&h, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    }
    assert_eq!(lines(), 1);
    // Another session (the host's `for_session`) runs it once again.
    let other = h.for_session("s-2", "/k/sessions/s-2.jsonl");
    fire(&other, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    fire(&other, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    assert_eq!(lines(), 2);
}

#[tokio::test]
async fn an_async_hook_runs_in_the_background_and_its_result_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("go.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = d.path().join("out");
    // It waits for the test to write the FIFO, then would block the call (exit 2).
    let command = format!(
        "cat {} > {}; echo blocked >&2; exit 2",
        fifo.display(),
        out.display()
    );
    let h = hooks(
        d.path(),
        handler("PreToolUse", &command, json!({"async": true})),
    );
    let (v, notices) = fire(&h, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    // `fire` came back while the hook still waits: nothing decided, nothing reported.
    assert_eq!(v, Verdict::default());
    assert!(notices.is_empty(), "{notices:?}");
    assert!(!out.exists());
    // Written off the runtime's thread: the hook's task must get to open the FIFO's other end.
    let path = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(path, "go\n"))
        .await
        .unwrap()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&out).unwrap_or_default() != "go\n" {
        assert!(
            std::time::Instant::now() < deadline,
            "the async hook never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 44 point 4: hooks of one event run in parallel, and each one's `took` is its own time
/// (every finish used to carry the time of the slowest).
#[tokio::test]
async fn each_hook_reports_its_own_duration() {
    let d = tempfile::tempdir().unwrap();
    let h = hooks(d.path(), cmd("PreToolUse", "Bash", &["sleep 0.4", "true"]));
    let (_, seen) = fire(&h, HookEvent::PreToolUse, &["Bash"], json!({})).await;
    let took: Vec<(String, std::time::Duration)> = seen
        .iter()
        .filter_map(|n| match n {
            HookNotice::Finished { command, took, .. } => Some((command.clone(), *took)),
            _ => None,
        })
        .collect();
    assert_eq!(took.len(), 2, "{seen:?}");
    let slow = took.iter().find(|(c, _)| c == "sleep 0.4").unwrap().1;
    let fast = took.iter().find(|(c, _)| c == "true").unwrap().1;
    assert!(slow >= std::time::Duration::from_millis(400), "{slow:?}");
    assert!(fast < slow / 2, "fast {fast:?}, slow {slow:?}");
}
