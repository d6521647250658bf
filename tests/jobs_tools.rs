//! The model's background jobs through keel's binary and the scripted provider (issue 47,
//! points 1, 3 and 5), under bubblewrap and the Landlock fallback: `bash` with
//! `run_in_background` starts a server that the next call reaches on loopback inside the
//! session's sandbox, `bash_output` reads what it logged, and it is gone once the run ends; a
//! job that ends is told to the model before its next request; `bash_kill` ends a job's whole
//! tree, `setsid`, `nohup` and double forks included.

use std::net::TcpListener;

use serde_json::{json, Value};

use crate::common::support::{alive, scripted_args, Sandbox};
use crate::sandbox::{mechanisms, world};

pub(crate) fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"chunks": [{"toolCall": {"id": id, "name": name, "arguments": args}}]})
}

pub(crate) fn text(t: &str) -> Value {
    json!({"chunks": [{"text": t}]})
}

/// Runs `turns` in JSON mode under `mech`; the events, stderr and exit code.
pub(crate) fn run(
    sb: &Sandbox,
    mech: &str,
    turns: Vec<Value>,
) -> (Vec<Value>, String, Option<i32>) {
    run_with(sb, mech, &[], turns)
}

/// [`run`] with more flags.
pub(crate) fn run_with(
    sb: &Sandbox,
    mech: &str,
    flags: &[&str],
    turns: Vec<Value>,
) -> (Vec<Value>, String, Option<i32>) {
    let path = sb.dir.path().join("script.json");
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    let script = path.display().to_string();
    let before = [&["--json"], flags].concat();
    let args = scripted_args(&before, &script, &["go"]);
    let out = sb
        .cmd(&args)
        .env("KEEL_SANDBOX_MECHANISM", mech)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (events, stderr, out.status.code())
}

/// Each tool result's text and error flag, in order.
pub(crate) fn results(events: &[Value]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter(|v| v["type"] == "tool_execution_end")
        .map(|v| {
            let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
            (text.to_string(), v["isError"] == true)
        })
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Under bubblewrap with the default policy (the network off: the sandbox's own network
/// namespace has its loopback); under the Landlock fallback, which has no network namespace,
/// with the network on (off, a command there cannot open an inet socket at all: see
/// `docs/jobs.md`).
#[test]
fn a_background_server_answers_the_next_call_inside_the_sandbox_and_ends_with_the_run() {
    for mech in mechanisms() {
        let flags: &[&str] = match mech {
            "bwrap" => &[],
            _ => &["--sandbox-network", "on"],
        };
        let sb = world();
        let port = free_port();
        let server = format!("python3 -m http.server {port} --bind 127.0.0.1");
        let fetch = format!(
            "for i in $(seq 100); do curl -s http://127.0.0.1:{port}/ && exit 0; sleep 0.1; done; exit 1"
        );
        let turns = vec![
            call(
                "c1",
                "bash",
                json!({"command": server, "run_in_background": true}),
            ),
            call("c2", "bash", json!({"command": fetch})),
            call("c3", "bash_output", json!({"id": "1"})),
            text("done"),
        ];
        let (events, stderr, code) = run_with(&sb, mech, flags, turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        let r = results(&events);
        assert_eq!(r.len(), 3, "{mech}: {r:?}");
        assert!(
            r[0].0
                .starts_with("Command running in background with ID: 1."),
            "{mech}: {r:?}"
        );
        assert!(
            !r[1].1 && r[1].0.contains("Directory listing"),
            "{mech}: the server did not answer: {r:?}\n{stderr}"
        );
        assert!(
            r[2].0
                .starts_with(&format!("Job 1 (`{server}`) is running.")),
            "{mech}: {r:?}"
        );
        assert!(r[2].0.contains("\"GET / HTTP/1.1\" 200"), "{mech}: {r:?}");
        let left = alive(&format!("http.server {port}"));
        assert!(
            left.is_empty(),
            "{mech}: the server outlived the run: {left:?}"
        );
    }
}

#[test]
fn a_job_that_ends_is_told_to_the_model_before_its_next_request() {
    for mech in mechanisms() {
        let sb = world();
        let turns = vec![
            call(
                "c1",
                "bash",
                json!({"command": "echo building; exit 3", "run_in_background": true}),
            ),
            // Waits for its end; the notice comes with the next request.
            call("c2", "bash_output", json!({"id": "1", "wait": 30})),
            call("c3", "bash_output", json!({"id": 1, "wait": 30})),
            json!({"match": "Job 1 \\(`echo building; exit 3`\\) exited with code 3\\. Its last lines:\\nbuilding", "chunks": [{"text": "heard it"}]}),
        ];
        let (events, stderr, code) = run(&sb, mech, turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        let last = events.iter().rev().find(|v| v["type"] == "result").unwrap();
        assert_eq!(last["finalText"], "heard it", "{mech}: {stderr}");
        let r = results(&events);
        assert!(
            r.iter().any(|(t, _)| t.contains("exited with code 3")),
            "{mech}: {r:?}"
        );
    }
}

#[test]
fn bash_kill_ends_the_whole_tree_and_unknown_ids_are_clear_errors() {
    for mech in mechanisms() {
        let sb = world();
        let marker = format!("1000.{}", free_port());
        let tree = format!(
            "setsid sleep {marker} & nohup sleep {marker} >/dev/null 2>&1 & (sleep {marker} &); echo started; wait"
        );
        let turns = vec![
            call(
                "c1",
                "bash",
                json!({"command": tree, "run_in_background": true}),
            ),
            call("c2", "bash_output", json!({"id": "1", "wait": 30})),
            call("c3", "bash_kill", json!({"id": "1"})),
            // Seen from where the job ran (inside bubblewrap's pid namespace, too).
            call(
                "c4",
                "bash",
                json!({"command": format!("ps -eo args | grep -c '^sleep {marker}'; true")}),
            ),
            call("c5", "bash_output", json!({"id": "7"})),
            call("c6", "bash_kill", json!({})),
            text("done"),
        ];
        let (events, stderr, code) = run(&sb, mech, turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        let r = results(&events);
        assert!(r[1].0.contains("started"), "{mech}: {r:?}");
        assert!(r[2].0.ends_with("was killed."), "{mech}: {r:?}");
        assert_eq!(r[3].0.trim(), "0", "{mech}: survivors of bash_kill: {r:?}");
        assert_eq!(r[4], ("No background job with id 7".into(), true), "{mech}");
        assert!(r[5].1 && r[5].0.contains("`id`"), "{mech}: {r:?}");
        let left = alive(&format!("sleep {marker}"));
        assert!(left.is_empty(), "{mech}: survivors: {left:?}");
    }
}

/// Codex's shapes over the same table: a command that ends within its yield answers as Codex
/// does (and is never a job to the model: no notice of its end); one on a terminal goes on
/// under a session id that `write_stdin` types into; typing into a pipes job or an ended one
/// is a clear error; `Bash` rules and hooks hold `exec_command` as they hold `bash`.
#[test]
fn codex_shapes_run_on_the_same_table_and_bash_rules_and_hooks_hold_them() {
    for mech in mechanisms() {
        let sb = world();
        std::fs::create_dir(sb.work().join("keep")).unwrap();
        let seen = sb.work().join("seen.txt");
        let settings = json!({
            "permissions": {"deny": ["Bash(rm:*)"]},
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": format!("jq -r .tool_input.command >> {}", seen.display())}]}]}
        })
        .to_string();
        let turns = vec![
            call(
                "c1",
                "exec_command",
                json!({"cmd": "echo hi; exit 4", "yield_time_ms": 20000}),
            ),
            call(
                "c2",
                "exec_command",
                json!({"cmd": "read x; echo got $x", "tty": true, "yield_time_ms": 300}),
            ),
            call(
                "c3",
                "write_stdin",
                json!({"session_id": 2, "chars": "yes\n", "yield_time_ms": 20000}),
            ),
            call("c4", "write_stdin", json!({"session_id": 2, "chars": "x"})),
            call(
                "c5",
                "exec_command",
                json!({"cmd": "exec sleep 1000", "yield_time_ms": 250}),
            ),
            call("c6", "write_stdin", json!({"session_id": 3, "chars": "x"})),
            call("c7", "exec_command", json!({"cmd": "rm -rf keep"})),
            text("done"),
        ];
        let (events, stderr, code) = run_with(&sb, mech, &["--settings", &settings], turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        let r = results(&events);
        assert_eq!(r.len(), 7, "{mech}: {r:?}");
        let lines = |t: &str| t.lines().map(str::to_string).collect::<Vec<_>>();
        let first = lines(&r[0].0);
        assert!(first[0].starts_with("Chunk ID: "), "{mech}: {r:?}");
        assert!(first[1].starts_with("Wall time: ") && first[1].ends_with(" seconds"));
        assert_eq!(
            first[2..],
            [
                "Process exited with code 4",
                "Original token count: 1",
                "Output:",
                "hi"
            ],
            "{mech}: {r:?}"
        );
        assert!(
            r[1].0.contains("Process running with session ID 2"),
            "{mech}: {r:?}"
        );
        assert!(r[2].0.contains("got yes"), "{mech}: {r:?}");
        assert!(
            r[2].0.contains("Process exited with code 0"),
            "{mech}: {r:?}"
        );
        assert_eq!(r[3], ("Job 2 has ended".to_string(), true), "{mech}");
        assert!(
            r[4].0.contains("Process running with session ID 3"),
            "{mech}: {r:?}"
        );
        assert!(r[5].1 && r[5].0.contains("runs on pipes"), "{mech}: {r:?}");
        assert!(r[6].1, "{mech}: rm ran: {r:?}");
        assert!(
            sb.work().join("keep").exists(),
            "{mech}: the deny rule did not hold"
        );
        let notices: Vec<&Value> = events
            .iter()
            .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
            .filter(|v| v.to_string().contains("Background jobs ended"))
            .collect();
        assert!(notices.is_empty(), "{mech}: told twice: {notices:?}");
        let seen = std::fs::read_to_string(&seen).unwrap_or_default();
        assert!(
            seen.contains("echo hi; exit 4\n"),
            "{mech}: the Bash hook: {seen}"
        );
        assert!(
            seen.contains("rm -rf keep") || !seen.is_empty(),
            "{mech}: {seen}"
        );
    }
}

/// A background job is held by the check every `bash` call gets: what it plants in a
/// protected path (a git hook that would run at the user's next commit) is undone when it
/// ends, and the model is told. Under Landlock, where `.git/hooks` is writable, the plant
/// lands and is undone; under bubblewrap it never lands (read-only). A job still running when
/// the session ends is checked too.
#[test]
fn what_a_job_plants_in_a_protected_path_is_undone_when_it_ends() {
    for mech in mechanisms() {
        let sb = world();
        let hook = sb.work().join(".git/hooks/pre-commit");
        // After the calls that start them returned (a `bash` call's own check would undo what
        // lands while it runs).
        // No output: `bash_output`'s wait returns at its end only.
        let plant = "sleep 0.5; { echo 'touch /tmp/pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; } >/dev/null 2>&1";
        let later = "sleep 0.2; echo 'touch /tmp/pwned' > .git/hooks/post-checkout; chmod +x .git/hooks/post-checkout; exec sleep 1000";
        let turns = vec![
            call(
                "c1",
                "bash",
                json!({"command": plant, "run_in_background": true}),
            ),
            call(
                "c2",
                "exec_command",
                json!({"cmd": later, "yield_time_ms": 250}),
            ),
            call("c3", "bash_output", json!({"id": "1", "wait": 30})),
            json!({"match": "Background jobs ended", "chunks": [{"text": "heard"}]}),
        ];
        let (events, stderr, code) = run(&sb, mech, turns);
        assert_eq!(code, Some(0), "{mech}: {stderr}");
        assert!(!hook.exists(), "{mech}: the planted hook stayed: {stderr}");
        assert!(
            !sb.work().join(".git/hooks/post-checkout").exists(),
            "{mech}: the hook planted by a job running at the session's end stayed"
        );
        let told = events
            .iter()
            .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
            .map(|v| v.to_string())
            .find(|t| t.contains("Background jobs ended"))
            .unwrap_or_default();
        if mech != "bwrap" {
            assert!(
                told.contains(".git/hooks is protected: what the command changed was undone"),
                "{mech}: the notice did not say what was undone: {told}"
            );
        }
    }
}

/// `jobs.maxLive` from the settings: one more job than it allows is refused, clearly.
#[test]
fn the_settings_cap_live_jobs() {
    let mech = mechanisms()[0];
    let sb = world();
    let settings = json!({"jobs": {"maxLive": 1}}).to_string();
    let bg = |id: &str| {
        call(
            id,
            "bash",
            json!({"command": "exec sleep 1000", "run_in_background": true}),
        )
    };
    let turns = vec![bg("c1"), bg("c2"), text("done")];
    let (events, stderr, code) = run_with(&sb, mech, &["--settings", &settings], turns);
    assert_eq!(code, Some(0), "{stderr}");
    let r = results(&events);
    assert!(!r[0].1, "{r:?}");
    assert_eq!(
        r[1],
        (
            "Too many background jobs: at most 1 may run at once in a session; kill one first"
                .to_string(),
            true
        )
    );
}
