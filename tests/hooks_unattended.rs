//! Hooks and permission rules where nobody watches (issue 31.8, 29's last test line): a
//! user-level PreToolUse guard (exit 2 on `rm -rf`) and a settings deny rule (`rm -f`) stop
//! their commands in a daemon session whose run goes on detached, and in a scheduled run.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::daemon::{keel_on, Daemon};
use crate::common::support::{scripted_args, Sandbox};

const GUARD: &str = r#"cmd=$(jq -r '.tool_input.command'); case "$cmd" in *"rm -rf"*) echo "Blocked by policy: rm -rf" >&2; exit 2;; esac"#;

/// The user's settings: the guard hook and a deny rule for `rm -f`; a `keep/` directory and a
/// file `x` in the work dir; a script that tries `rm -rf keep`, then `rm -f x`. Its path.
fn setup(sb: &Sandbox) -> String {
    let settings = json!({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD}]}]},
        "permissions": {"deny": ["Bash(rm -f:*)"]}
    });
    std::fs::write(sb.home().join("settings.json"), settings.to_string()).unwrap();
    std::fs::create_dir(sb.work().join("keep")).unwrap();
    std::fs::write(sb.work().join("x"), "x").unwrap();
    let script = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": "rm -rf keep"}}}]},
        {"chunks": [{"toolCall": {"id": "c2", "name": "bash", "arguments": {"command": "rm -f x"}}}]},
        {"chunks": [{"text": "done"}]}
    ]});
    let path = sb.dir.path().join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// Both survived.
fn assert_survived(sb: &Sandbox) {
    assert!(sb.work().join("keep").exists(), "the guarded rm -rf ran");
    assert!(sb.work().join("x").exists(), "the denied rm -f ran");
}

/// The results the session's file holds for its two tool calls.
fn tool_results(session_file: &Path) -> Vec<String> {
    std::fs::read_to_string(session_file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["role"] == "toolResult")
        .map(|v| v["message"]["content"].to_string())
        .collect()
}

fn check_results(results: &[String]) {
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains("Blocked by policy: rm -rf"),
        "{results:?}"
    );
    assert!(
        results[1].contains("denied by rule `Bash(rm -f:*)`"),
        "{results:?}"
    );
}

#[test]
fn a_user_guard_hook_and_a_deny_rule_hold_in_a_detached_daemon_run() {
    let sb = Sandbox::new();
    let script = setup(&sb);
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let base = ["--daemon", "--socket", &socket, "--provider", "scripted"];
    let mut args = base.to_vec();
    args.extend(["--json", "--script", &script, "--detach", "clean up"]);
    let started = sb.run(&args);
    assert_eq!(started.code, 0, "{started}");
    let id = started.stdout_lines()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Nobody is attached while it runs; `--wait` then shows what it did.
    let mut args = base.to_vec();
    args.extend(["--json", "--resume", &id, "--wait"]);
    let waited = sb.run(&args);
    assert_eq!(waited.code, 0, "{waited}");
    assert_survived(&sb);
    let hooks: Vec<Value> = waited
        .stdout_lines()
        .into_iter()
        .filter(|v| v["type"] == "hook_finished")
        .collect();
    assert_eq!(hooks.len(), 2, "{waited}");
    assert_eq!(hooks[0]["exitCode"], 2, "{waited}");
    assert_eq!(hooks[0]["reason"], "Blocked by policy: rm -rf");
    let files = sb.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    check_results(&tool_results(&files[0]));
}

#[test]
fn a_user_guard_hook_and_a_deny_rule_hold_in_a_scheduled_run() {
    let sb = Sandbox::new();
    let script = setup(&sb);
    let d = Daemon::start(&sb, &[]);
    let add = scripted_args(
        &["schedule", "add", "guarded", "--every", "1h"],
        &script,
        &["--", "clean", "up"],
    );
    let run = keel_on(&sb, &d.socket, &add);
    assert_eq!(run.code, 0, "{run}");
    let now = keel_on(&sb, &d.socket, &["schedule", "run", "guarded"]);
    assert_eq!(now.code, 0, "{now}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let task = loop {
        let list = keel_on(&sb, &d.socket, &["schedule", "list", "--json"]);
        let t = list
            .stdout_lines()
            .into_iter()
            .find(|t| t["name"] == "guarded")
            .unwrap();
        if t["runs"].as_u64() >= Some(1) && t["lastOutcome"] != "running" {
            break t;
        }
        assert!(Instant::now() < deadline, "the run did not settle: {t}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(task["lastOutcome"], "success", "{task}");
    assert_survived(&sb);
    let files = sb.session_files();
    let file = files
        .iter()
        .find(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains(task["lastSession"].as_str().unwrap())
        })
        .unwrap_or_else(|| panic!("no session file of {task} in {files:?}"));
    check_results(&tool_results(file));
}
