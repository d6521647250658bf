//! A daemon session behaves as the same session in-process (issue 27, points 9-11): relative
//! paths in its flags resolve from the client's directory, its tools run in the opening
//! client's environment (less the provider keys), and a save failure ends its run as failed
//! with `session_write`, in RPC mode and for an interactive client of the socket.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::daemon::Daemon;
use crate::common::http_server::{Reply, Server};
use crate::common::rpc::Rpc;
use crate::common::support::{fixture, root, scripted_args, Run, Sandbox};

/// A sandbox whose client works in `work/proj` (the test daemon runs in `work`, so a path
/// resolved from the daemon's directory instead of the client's is not found).
fn project(sb: &Sandbox) -> PathBuf {
    let proj = sb.work().join("proj");
    std::fs::create_dir_all(proj.join("rel")).unwrap();
    std::fs::copy(fixture("hello.json"), proj.join("script.json")).unwrap();
    std::fs::write(proj.join("extra.txt"), "EXTRA-FROM-THE-FILE\n").unwrap();
    std::fs::write(proj.join("mcp.json"), r#"{"mcpServers": {}}"#).unwrap();
    proj
}

/// `keel ARGS` in the project directory, in this process or (`daemon`) through `d`, with
/// `KEEL_TEST_SEED=seed` (each new session of a sandbox needs its own id under the fixed
/// clock).
fn keel_in(sb: &Sandbox, d: Option<&Daemon>, args: &[&str], seed: usize) -> Run {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    if let Some(d) = d {
        all.extend(["--daemon".into(), "--socket".into()]);
        all.push(d.socket.display().to_string());
    }
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = sb
        .cmd(&all)
        .env("KEEL_TEST_SEED", seed.to_string())
        .current_dir(sb.work().join("proj"))
        .output()
        .unwrap();
    sb.finish(out)
}

/// The system prompt of the one request `server` saw last.
fn system_prompt(server: &Server) -> String {
    let seen = server.seen();
    let body = seen.last().expect("a request reached the server").json();
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Regression: through `--daemon`, relative paths resolved from the daemon's directory (`/`
/// for a spawned one): `--script rel.json` exited 3 and `--append-system-prompt file.txt`
/// silently became the text "file.txt". Every path-taking flag, in-process and through the
/// daemon, gives the same result.
#[test]
fn relative_path_flags_through_the_daemon_resolve_from_the_clients_directory() {
    let (here, there) = (Sandbox::new(), Sandbox::new());
    for sb in [&here, &there] {
        project(sb);
    }
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let scripted = scripted_args(&["-p"], "script.json", &[]);
    let cases: Vec<Vec<&str>> = vec![
        vec!["hi"],
        vec!["--session-dir", "sessions", "hi"],
        vec!["--session", "rel/named.jsonl", "hi"],
        vec![
            "--fork",
            "rel/named.jsonl",
            "--session-dir",
            "sessions",
            "hi",
        ],
        vec!["--resume", "rel/named.jsonl", "hi"],
        vec!["--mcp-config", "mcp.json", "hi"],
    ];
    for (seed, case) in cases.iter().enumerate() {
        let args = [&scripted[..], case].concat();
        let local = keel_in(&here, None, &args, seed);
        let remote = keel_in(&there, Some(&d), &args, seed);
        assert_eq!(local.code, 0, "{args:?} in-process: {local}");
        assert_eq!(remote.code, 0, "{args:?} through the daemon: {remote}");
        assert_eq!(local.stdout, remote.stdout, "{args:?}");
    }
    // `--script=FILE` spelling too.
    let eq = keel_in(
        &there,
        Some(&d),
        &["-p", "--provider", "scripted", "--script=script.json", "hi"],
        50,
    );
    assert_eq!(eq.code, 0, "{eq}");
    for sb in [&here, &there] {
        let proj = sb.work().join("proj");
        assert!(proj.join("rel/named.jsonl").is_file(), "--session PATH");
        let forks = std::fs::read_dir(proj.join("sessions")).unwrap().count();
        assert_eq!(forks, 2, "--session-dir: the first run and the fork");
    }
    // A file named by --append-system-prompt is read, in both places; a text stays a text.
    for (sb, daemon) in [(&here, None), (&there, Some(&d))] {
        let server = Server::start_with(|_| {
            Reply::sse(&std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap())
        });
        let base = server.base_url();
        let args = [
            "-p",
            "--base-url",
            &base,
            "--model",
            "m",
            "--append-system-prompt",
            "extra.txt",
            "--append-system-prompt",
            "extra text",
            "hi",
        ];
        let run = keel_in(sb, daemon, &args, 90);
        assert_eq!(run.code, 0, "{run}");
        let system = system_prompt(&server);
        assert!(system.contains("EXTRA-FROM-THE-FILE"), "{system}");
        assert!(!system.contains("extra.txt"), "{system}");
        assert!(system.contains("extra text"), "{system}");
    }
}

/// A project with `bin/mine` (a command only the client's PATH has) and a script whose bash
/// call shows what the tool process sees: `FOO`, the client's provider key, a variable only
/// the daemon has, and whether `mine` ran.
fn env_project(sb: &Sandbox) -> (PathBuf, String) {
    // In the workspace: the sandbox's /tmp is private, so a PATH directory elsewhere in this
    // scratch dir (under /tmp) would not be seen by the command.
    let bin = sb.work().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mine = bin.join("mine");
    std::fs::write(&mine, "#!/bin/sh\necho MINE-RAN\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let command = "echo FOO=$FOO KEY=${OPENAI_API_KEY:-none} ONLY=${DAEMON_ONLY:-unset}; mine";
    let script = sb.dir.path().join("env.json");
    let turns = json!({"turns": [
        {"match": "go", "chunks": [
            {"toolCall": {"id": "call_env", "name": "bash", "arguments": {"command": command}}}
        ]},
        {"chunks": [{"text": "done"}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (script, path)
}

/// The client's environment: FOO=`value`, a PATH with `bin/`, a provider key.
fn as_client(c: &mut Command, path: &str, value: &str) {
    c.env("FOO", value)
        .env("PATH", path)
        .env("OPENAI_API_KEY", "sk-client-secret");
}

/// What the bash call of [`env_project`]'s script printed, from a JSON-mode run's stdout.
fn tool_output(stdout: &str) -> String {
    let end = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end: {stdout}"));
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A daemon whose own environment differs from the client's (`FOO`, a variable only it has, a
/// provider key of its own).
fn env_daemon(sb: &Sandbox) -> Daemon {
    Daemon::start_env(
        sb,
        &["--idle-exit", "0"],
        &[
            ("FOO", "daemon"),
            ("DAEMON_ONLY", "1"),
            ("OPENAI_API_KEY", "sk-daemon-key"),
        ],
    )
}

/// Regression: a daemon session's tools ran in the environment of whoever spawned the daemon
/// (its PATH, its virtualenv), not the client that opened the session.
#[test]
fn daemon_tools_run_in_the_opening_clients_environment_less_its_keys() {
    let sb = Sandbox::new();
    let (script, path) = env_project(&sb);
    let d = env_daemon(&sb);
    let script = script.display().to_string();
    let socket = d.socket.display().to_string();
    let args = scripted_args(&["--json", "--no-session"], &script, &["go"]);
    let mut seen = Vec::new();
    for daemon in [false, true] {
        let mut all = args.to_vec();
        if daemon {
            all.extend(["--daemon", "--socket", &socket]);
        }
        let mut c = sb.cmd(&all);
        as_client(&mut c, &path, "client");
        let run = sb.finish(c.output().unwrap());
        assert_eq!(run.code, 0, "{run}");
        seen.push(tool_output(&run.stdout));
    }
    assert_eq!(
        seen[1], "FOO=client KEY=none ONLY=unset\nMINE-RAN\n",
        "through the daemon"
    );
    assert_eq!(seen[0], seen[1], "in-process and through the daemon");
}

/// The output of the user's shell command (RPC `bash`, the TUI's `!cmd`) run in an RPC-mode
/// keel started with `args` in the client's environment.
fn user_command_output(sb: &Sandbox, args: &[&str], path: &str) -> String {
    let mut c = sb.cmd(args);
    as_client(&mut c, path, "client");
    let mut rpc = Rpc::spawn(c);
    let command = "echo FOO=$FOO KEY=${OPENAI_API_KEY:-none} ONLY=${DAEMON_ONLY:-unset}; mine";
    let response = rpc.call(json!({"id": "b", "type": "bash", "command": command}));
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    response["data"]["output"]
        .as_str()
        .unwrap_or_else(|| panic!("{response}"))
        .to_string()
}

/// Regression: the user's own shell commands in a daemon session ran in the daemon's
/// environment too.
#[test]
fn the_users_shell_commands_in_a_daemon_session_run_in_the_clients_environment() {
    let sb = Sandbox::new();
    let (_, path) = env_project(&sb);
    let d = Daemon::start_env(
        &sb,
        &["--idle-exit", "0"],
        &[("FOO", "daemon"), ("DAEMON_ONLY", "1")],
    );
    let socket = d.socket.display().to_string();
    let hello = fixture("hello.json");
    let local = scripted_args(&["--mode", "rpc", "--no-session"], &hello, &[]);
    let remote = [&local[..], &["--daemon", "--socket", &socket]].concat();
    let expected = "FOO=client KEY=none ONLY=unset\nMINE-RAN\n";
    assert_eq!(user_command_output(&sb, &remote, &path), expected);
    assert_eq!(user_command_output(&sb, &local, &path), expected);
}

/// The `--json` result line and the tool output of the last settled run of task `name`, once
/// its state in schedules.json says it settled (polled, with a deadline).
fn task_settled(sb: &Sandbox, name: &str) -> Value {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(sb.home().join("schedules.json")).unwrap_or_default();
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            let task = v["tasks"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["name"] == name).cloned());
            if let Some(t) = task.filter(|t| {
                t["state"]["runs"].as_u64() >= Some(1) && t["state"]["lastOutcome"] != "running"
            }) {
                return t;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name} never settled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Regression: a scheduled run's tools got the daemon's environment. They get the one recorded
/// when the task was added, without its provider keys (which schedules.json never holds).
#[test]
fn a_scheduled_run_gets_the_environment_recorded_when_its_task_was_added() {
    let sb = Sandbox::new();
    let (script, path) = env_project(&sb);
    let d = env_daemon(&sb);
    let script = script.display().to_string();
    let socket = d.socket.display().to_string();
    let args = scripted_args(
        &[
            "schedule", "add", "env", "--every", "1s", "--socket", &socket,
        ],
        &script,
        &["--", "go"],
    );
    let mut c = sb.cmd(&args);
    c.env("KEEL_SCHEDULE_MIN_SECS", "1");
    as_client(&mut c, &path, "added");
    let added = sb.finish(c.output().unwrap());
    assert_eq!(added.code, 0, "{added}");
    let store = std::fs::read_to_string(sb.home().join("schedules.json")).unwrap();
    assert!(!store.contains("sk-client-secret"), "{store}");
    let recorded = &serde_json::from_str::<Value>(&store).unwrap()["tasks"][0]["env"];
    assert_eq!(recorded["FOO"], "added", "{store}");
    assert!(recorded.get("OPENAI_API_KEY").is_none(), "{store}");
    let t = task_settled(&sb, "env");
    assert_eq!(t["state"]["lastOutcome"], "success", "{t}");
    let id = t["state"]["lastSession"].as_str().unwrap();
    let file = sb
        .session_files()
        .into_iter()
        .find(|f| f.display().to_string().contains(id))
        .unwrap_or_else(|| panic!("no session file for {id}"));
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains("FOO=added KEY=none ONLY=unset\\nMINE-RAN"),
        "{text}"
    );
    drop(d);
}

/// Ignores SIGXFSZ and caps files at 4 blocks (2 or 4 KiB by the shell), so a session file
/// takes its header and first prompt but the long answer after it fails with EFBIG, as a write
/// to a full disk fails, in the middle of a run.
const FULL_DISK: &str = "trap '' XFSZ; ulimit -f 4";

/// A script whose answer (16 KiB) cannot be saved under [`FULL_DISK`]; the scripted args.
fn long_answer(sb: &Sandbox) -> Vec<String> {
    let script = sb.dir.path().join("long.json");
    let text = "All work and no play. ".repeat(750);
    let turns = json!({"turns": [{"repeat": true, "chunks": [{"text": text}]}]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    scripted_args(&[], &script, &[])
        .into_iter()
        .map(String::from)
        .collect()
}

/// Asserts that `settled` (an `agent_settled` event) ended the run as failed with
/// `session_write`.
fn assert_write_failed(settled: &Value) {
    assert_eq!(settled["outcome"], "failed", "{settled}");
    assert_eq!(settled["error"]["kind"], "session_write", "{settled}");
    let message = settled["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("File too large"), "{message}");
}

/// Sends one prompt to an RPC-mode keel started with `args` (under [`FULL_DISK`] unless
/// `limited` is false) and returns its `agent_settled` event; stdin is closed after it.
fn rpc_settled(sb: &Sandbox, args: &[String], limited: bool) -> Value {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cmd = match limited {
        true => sb.cmd_after(FULL_DISK, &args),
        false => sb.cmd(&args),
    };
    let mut rpc = Rpc::spawn(cmd);
    rpc.send_bytes(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"hi\"}\n");
    let settled = rpc.wait(&json!({"type": "agent_settled"}));
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    settled
}

/// Regression: a save failure (disk full) ended an RPC run, in-process and through the
/// daemon, as `agent_settled` completed, with only a notify.
#[test]
fn a_save_failure_ends_an_rpc_run_as_failed_with_session_write() {
    let sb = Sandbox::new();
    let mut args = vec!["--mode".to_string(), "rpc".into()];
    args.extend(long_answer(&sb));
    assert_write_failed(&rpc_settled(&sb, &args, true));
    let sb = Sandbox::new();
    let d = Daemon::start_after(&sb, FULL_DISK, &["--idle-exit", "0"]);
    args.extend(["--daemon".into(), "--socket".into()]);
    args.push(d.socket.display().to_string());
    assert_write_failed(&rpc_settled(&sb, &args, false));
}

/// Regression: a save failure (disk full) ended an interactive daemon session's run as
/// `agent_settled` completed, with only a notify.
#[test]
fn a_save_failure_ends_an_interactive_daemon_run_as_failed_with_session_write() {
    let sb = Sandbox::new();
    let d = Daemon::start_after(&sb, FULL_DISK, &["--idle-exit", "0"]);
    let mut c = d.connect();
    c.hello(true);
    let r = c.call(
        "session/open",
        json!({"cwd": sb.work(), "spec": crate::common::daemon::spec(&long_answer(&sb)), "env": {"KEEL_TEST_SEED": "7"}}),
    );
    let id = r["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    let id = id.to_string();
    let r = c.call("session/attach", json!({"sessionId": id}));
    assert!(r.get("result").is_some(), "{r}");
    let r = c.call("prompt", json!({"sessionId": id, "message": "hi"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let events = c.events_until("agent_settled");
    assert_write_failed(&events.last().unwrap().1);
}

/// Regression: a JSON run through the daemon took its verdict from `agent_settled`, so a save
/// failure the daemon met after the kernel settled ended it as a success.
#[test]
fn a_save_failure_ends_a_json_run_through_the_daemon_as_failed_with_session_write() {
    let sb = Sandbox::new();
    let d = Daemon::start_after(&sb, FULL_DISK, &["--idle-exit", "0"]);
    let mut args = vec!["--json".to_string(), "--daemon".into(), "--socket".into()];
    args.push(d.socket.display().to_string());
    args.extend(long_answer(&sb));
    args.push("hi".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = sb.run(&args);
    assert_eq!(run.code, 1, "{run}");
    let lines = run.stdout_lines();
    let settled = lines.iter().find(|v| v["type"] == "agent_settled").unwrap();
    assert_write_failed(settled);
    let result = lines.last().unwrap();
    assert_eq!(result["error"]["kind"], "session_write", "{result}");
}

/// `keel --mode rpc ARGS` with `input` on stdin, in this process or (`daemon`) through `d`;
/// stdout with the sandbox scrubbed, and the exit code.
fn rpc_bytes(sb: &Sandbox, d: Option<&Daemon>, args: &[&str], input: &str) -> (String, i32) {
    let mut all = vec!["--mode", "rpc"];
    all.extend_from_slice(args);
    let socket = d.map(|d| d.socket.display().to_string());
    if let Some(s) = &socket {
        all.extend(["--daemon", "--socket", s]);
    }
    let run = sb.run_stdin(&all, input);
    let stdout = run.to_string();
    let stdout = stdout.split("\n[stderr]").next().unwrap().to_string();
    (stdout, run.code)
}

/// RPC mode is one implementation over the session's link: in this process and through the
/// daemon, lines it answers itself (not JSON, no `type`, a daemon method as `type`, a missing
/// field), a request without an id, a dialog answer nobody asked for and a run give the same
/// bytes in the same order.
#[test]
fn rpc_mode_answers_bad_lines_and_dialog_answers_the_same_in_process_and_through_the_daemon() {
    let lines = [
        r#"{"type":"get_state"}"#,
        "not json",
        r#"{"id":"t"}"#,
        r#"{"id":"d","type":"daemon/stop"}"#,
        r#"{"id":"m","type":"set_model"}"#,
        r#"{"type":"extension_ui_response","id":"nobody-asked","value":"x"}"#,
        r#"{"id":1,"type":"get_available_thinking_levels"}"#,
        "",
        r#"{"id":"s","type":"get_session_stats"}"#,
        // Last: whether a command sent after it is answered before or after the run's first
        // event depends on when the session reads it, in this process and in the daemon alike.
        r#"{"id":"p","type":"prompt","message":"hi"}"#,
    ];
    let input = lines.join("\n") + "\n";
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &["--session-id", "same"]);
    let here = Sandbox::new();
    let (local, code) = rpc_bytes(&here, None, &args, &input);
    assert_eq!(code, 0, "{local}");
    let there = Sandbox::new();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let (remote, code) = rpc_bytes(&there, Some(&d), &args, &input);
    assert_eq!(code, 0, "{remote}");
    assert_eq!(local, remote);
    // One response per request line (the dialog answer gets none), and the daemon still runs.
    let responses = local.matches(r#""type":"response""#).count();
    assert_eq!(responses, lines.len() - 1, "{local}");
    assert!(
        local.contains(r#""command":"prompt","success":true"#),
        "{local}"
    );
    let _c = d.client();
}

/// Regression: through the daemon, RPC mode took prompt arguments (in-process it refuses them).
#[test]
fn rpc_mode_refuses_prompt_arguments_through_the_daemon_too() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let script = fixture("hello.json");
    for daemon in [false, true] {
        let mut args = scripted_args(&["--mode", "rpc"], &script, &[]);
        args.push("hello");
        if daemon {
            args.extend(["--daemon", "--socket", &socket]);
        }
        let run = sb.run_stdin(&args, "");
        assert_eq!(run.code, 2, "{run}");
        run.assert_stderr("rpc mode takes no prompt arguments");
    }
}

/// Regression: through the daemon, RPC mode on a full stdout ended as a closed pipe (141,
/// quiet); in-process it ends with 1 and says why.
#[test]
fn rpc_mode_on_a_full_stdout_exits_1_and_says_why_through_the_daemon_too() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let script = fixture("hello.json");
    let socket = d.socket.display().to_string();
    let args = scripted_args(
        &["--mode", "rpc"],
        &script,
        &["--daemon", "--socket", &socket],
    );
    let run = crate::stdio::rpc_on_full(&sb, &args);
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stderr.contains("No space left on device"),
        "{}",
        run.stderr
    );
}
