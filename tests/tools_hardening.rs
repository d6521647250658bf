//! The tools under hostile input, against the real binary: bounded reads of huge files, the
//! environment and spill directory of `bash`, the size of its progress stream, background
//! children at exit, and tool arguments that are not JSON.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Server};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, Sandbox};

/// Writes a script whose first turn calls `tool` with `args` and whose second answers "done".
fn script(sb: &Sandbox, tool: &str, args: Value) -> String {
    let path = sb.dir.path().join("script.json");
    let body = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "call_1", "name": tool, "arguments": args}}]},
        {"chunks": [{"text": "done"}]},
    ]});
    std::fs::write(&path, body.to_string()).unwrap();
    path.display().to_string()
}

fn json_run(sb: &Sandbox, script: &str, envs: &[(&str, &str)], extra: &[&str]) -> (String, i32) {
    let mut args = scripted_args(&["--json"], script, &[]);
    args.extend_from_slice(extra);
    args.push("go");
    let mut cmd = sb.cmd(&args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (stdout, out.status.code().unwrap_or(-1))
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `tool_execution_end` event.
fn tool_end(stdout: &str) -> Value {
    lines(stdout)
        .into_iter()
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end in {stdout}"))
}

fn tool_result(stdout: &str) -> Value {
    tool_end(stdout)["result"].clone()
}

fn result_text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap().to_string()
}

/// A `/proc/<pid>/...` field in bytes (`rchar:` of `io` is bytes, `VmHWM:` of `status` kB).
fn proc_field(pid: i32, file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    let line = text.lines().find(|l| l.starts_with(key)).unwrap();
    let n: u64 = line[key.len()..]
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    if file == "status" {
        n * 1024
    } else {
        n
    }
}

/// keel's pid, as the parent of a user shell it runs.
fn keel_pid(rpc: &mut Rpc) -> i32 {
    let r = rpc.call(json!({"id": "pid", "type": "bash", "command": "echo $PPID"}));
    r["data"]["output"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `read` of three lines of a 300 MB file stays small: keel reads a few MiB at most and its
/// peak memory does not grow by the file's size (before: 300 MB read, 300 MB resident).
#[test]
fn read_of_three_lines_of_a_300mb_file_reads_only_the_start() {
    let sb = Sandbox::new();
    let file = sb.work().join("huge.log");
    let head: String = (1..=20_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&file, &head).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(300 * 1024 * 1024).unwrap();
    drop(f);
    let path = script(
        &sb,
        "read",
        json!({"path": "huge.log", "offset": 2, "limit": 3}),
    );
    let mut rpc = Rpc::start(&sb, &scripted_args(&[], &path, &[]));
    let pid = keel_pid(&mut rpc);
    let read_before = proc_field(pid, "io", "rchar:");
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let end = rpc.wait(&json!({"type": "tool_execution_end"}));
    let read = proc_field(pid, "io", "rchar:") - read_before;
    let peak = proc_field(pid, "status", "VmHWM:");
    assert!(read < 16 * 1024 * 1024, "read {read} bytes of the file");
    assert!(peak < 100 * 1024 * 1024, "peak RSS {peak} bytes");
    let text = result_text(&end["result"]);
    assert!(
        text.starts_with("line 2\nline 3\nline 4\n\n[More lines in file"),
        "{text}"
    );
    rpc.wait(&json!({"type": "agent_settled"}));
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
}

/// Provider keys never reach `bash`: not by name (every provider keel knows, models.json's
/// `apiKeyEnv`), and not by value (the `--api-key` value under another name).
#[test]
fn bash_does_not_inherit_provider_keys() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home().join("models.json"),
        json!({"providers": {"local": {"baseUrl": "http://127.0.0.1:9/v1",
            "apiKeyEnv": "LOCAL_LLM_KEY", "apiKey": "literal-models-json-key",
            "models": [{"id": "m"}]}}})
        .to_string(),
    )
    .unwrap();
    let envs = [
        ("OPENAI_API_KEY", "sk-openai-secret"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret"),
        ("DEEPSEEK_API_KEY", "sk-deepseek-secret"),
        ("OPENROUTER_API_KEY", "sk-or-secret"),
        ("GROQ_API_KEY", "sk-groq-secret"),
        ("LOCAL_LLM_KEY", "sk-local-secret"),
        ("COPY_OF_FLAG_KEY", "sk-flag-secret"),
        ("COPY_OF_LITERAL", "literal-models-json-key"),
        ("KEEP_ME", "visible"),
    ];
    let path = script(&sb, "bash", json!({"command": "env"}));
    let (stdout, _) = json_run(&sb, &path, &envs, &["--api-key", "sk-flag-secret"]);
    let text = result_text(&tool_result(&stdout));
    assert!(text.contains("KEEP_ME=visible"), "{text}");
    for (name, value) in &envs[..8] {
        assert!(!text.contains(name), "{name} reached bash:\n{text}");
        assert!(!text.contains(value), "{value} reached bash:\n{text}");
    }

    // The user's own commands (RPC `bash`, the TUI's `!cmd`) are scrubbed the same way.
    let mut rpc = {
        let mut c = sb.cmd(&["--mode", "rpc", "--api-key", "sk-flag-secret"]);
        for (k, v) in &envs {
            c.env(k, v);
        }
        Rpc::spawn(c)
    };
    let response = rpc.call(json!({"id": "b", "type": "bash", "command": "env"}));
    let out = response["data"]["output"].as_str().unwrap().to_string();
    rpc.finish();
    assert!(out.contains("KEEP_ME=visible"), "{out}");
    for (name, value) in &envs[..8] {
        assert!(
            !out.contains(name) && !out.contains(value),
            "{name} reached the user's bash:\n{out}"
        );
    }
}

/// Without a session, the full output of a capped `bash` call is kept in a private directory
/// under KEEL_HOME, which is removed when keel exits (before: a world-readable temp dir, kept
/// forever).
#[test]
fn bash_spill_file_is_private_and_removed_at_exit() {
    let sb = Sandbox::new();
    let path = script(&sb, "bash", json!({"command": "seq 1 5000"}));
    let mut rpc = Rpc::start(&sb, &scripted_args(&[], &path, &["--no-session"]));
    rpc.send(&json!({"id": "p", "type": "prompt", "message": "go"}));
    let end = rpc.wait(&json!({"type": "tool_execution_end"}));
    let full = PathBuf::from(
        end["result"]["details"]["fullOutputPath"]
            .as_str()
            .unwrap_or_else(|| panic!("no fullOutputPath in {end}")),
    );
    assert!(
        full.starts_with(sb.home().join("tmp")),
        "{} is not under KEEL_HOME/tmp",
        full.display()
    );
    let dir = full.parent().unwrap();
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(std::fs::read_to_string(&full).unwrap(), expected);
    rpc.wait(&json!({"type": "agent_settled"}));
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
    assert!(!full.exists(), "{} outlived keel", full.display());
    assert!(!dir.exists(), "{} outlived keel", dir.display());
}

/// A saved session keeps the full output of a capped `bash` call beside its file (the
/// `<session>.output/` directory, 0700): the path its tool result names still holds the whole
/// output after keel exits, and when the session is resumed a sandboxed command and `read`
/// can still open it (before: it was in `$KEEL_HOME/tmp/<pid>-*`, removed at exit).
#[test]
fn bash_full_output_is_kept_with_the_session() {
    // Not under /tmp: bubblewrap's private /tmp would hide the session's directory.
    let sb = Sandbox::new_in("/var/tmp").unwrap_or_else(Sandbox::new);
    let path = script(&sb, "bash", json!({"command": "seq 1 5000"}));
    let (stdout, _) = json_run(&sb, &path, &[], &[]);
    let end = lines(&stdout)
        .into_iter()
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap();
    let full = end["result"]["details"]["fullOutputPath"]
        .as_str()
        .unwrap_or_else(|| panic!("no fullOutputPath in {end}"))
        .to_string();
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full} after exit: {e}")),
        expected
    );
    let full = PathBuf::from(full);
    let dir = full.parent().unwrap();
    assert!(
        dir.starts_with(sb.home().join("sessions")),
        "{}",
        dir.display()
    );
    assert!(
        dir.to_string_lossy().ends_with(".output"),
        "{}",
        dir.display()
    );
    let session = dir.with_extension("jsonl");
    assert!(session.is_file(), "{} beside no session", dir.display());
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    // The resumed session's tools read it, under each mechanism; another session's outputs
    // stay hidden.
    let other = dir.with_file_name("other.output");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("bash-1.log"), "other-session-canary").unwrap();
    let name = full.display().to_string();
    let body = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "c1", "name": "bash",
            "arguments": {"command": format!("wc -l < {name}")}}}]},
        {"chunks": [{"toolCall": {"id": "c2", "name": "read",
            "arguments": {"path": name, "offset": 4999}}}]},
        {"chunks": [{"toolCall": {"id": "c3", "name": "bash",
            "arguments": {"command": format!("cat {}/bash-1.log", other.display())}}}]},
        {"chunks": [{"text": "done"}]},
    ]});
    std::fs::write(&path, body.to_string()).unwrap();
    let text = |e: &Value| {
        e["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for mech in crate::sandbox::mechanisms() {
        let envs = [("KEEL_SANDBOX_MECHANISM", mech)];
        let (stdout, _) = json_run(&sb, &path, &envs, &["--continue"]);
        let ends: Vec<Value> = lines(&stdout)
            .into_iter()
            .filter(|l| l["type"] == "tool_execution_end")
            .collect();
        assert_eq!(ends.len(), 3, "{mech}: {stdout}");
        assert_eq!(text(&ends[0]).trim(), "5000", "{mech}: {}", ends[0]);
        assert!(text(&ends[1]).contains("5000"), "{mech}: {}", ends[1]);
        assert_ne!(ends[1]["isError"], json!(true), "{mech}: {}", ends[1]);
        assert!(!text(&ends[2]).contains("canary"), "{mech}: {}", ends[2]);
        assert_eq!(ends[2]["isError"], json!(true), "{mech}: {}", ends[2]);
    }
}

/// `tool_execution_update` no longer re-sends a 50 KB tail every 8 KB: for a command printing
/// about 2 MB, all of stdout stays well under the output's size (before: 6.3 times it).
#[test]
fn bash_progress_on_stdout_stays_proportional_to_output() {
    let sb = Sandbox::new();
    // 20,000 lines of 100 bytes: 2,000,000 bytes.
    let path = script(&sb, "bash", json!({"command": "seq -f '%099g' 1 20000"}));
    let (stdout, _) = json_run(&sb, &path, &[], &[]);
    let output_bytes = 2_000_000;
    let ratio = stdout.len() as f64 / output_bytes as f64;
    let updates: Vec<Value> = lines(&stdout)
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_update")
        .collect();
    assert!(
        ratio < 1.5,
        "stdout is {ratio:.2}x the command's output ({} updates)",
        updates.len()
    );
    assert!(!updates.is_empty());
    for u in &updates {
        let text = u["partialResult"]["content"][0]["text"].as_str().unwrap();
        assert!(text.len() <= 4096, "an update carries {} bytes", text.len());
    }
}

fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => matches!(
            stat.rsplit(')').next().unwrap().trim_start().chars().next(),
            Some('Z' | 'X')
        ),
    }
}

/// A background child (`cmd &`) does not hang the call, and keel kills its process group when
/// it exits (before: the child outlived keel). Unsandboxed: inside the sandbox `$!` is a pid of
/// the command's own PID namespace (and the child ends with the call).
#[test]
fn background_children_die_when_keel_exits() {
    let sb = Sandbox::new();
    let path = script(
        &sb,
        "bash",
        json!({"command": "sleep 1000 & echo $! > bg.pid; echo started"}),
    );
    let (stdout, _) = json_run(&sb, &path, &[], &["--sandbox", "off"]);
    assert_eq!(result_text(&tool_result(&stdout)), "started\n");
    let pid: i32 = std::fs::read_to_string(sb.work().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SIGKILL delivery is asynchronous: allow the kernel a moment to finish the exit.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !gone(pid) && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let survived = !gone(pid);
    if survived {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert!(!survived, "background child {pid} outlived keel");
}

/// One OpenAI-style stream calling `tool` with these raw argument bytes.
fn openai_tool_call(tool: &str, raw_args: &str) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        let v = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {v}\n\n")
    };
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": tool, "arguments": raw_args}}]});
    let mut body = chunk(call, Value::Null);
    body.push_str(&chunk(json!({}), json!("tool_calls")));
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Arguments that are not JSON are reported as such, with what was received (before: the
/// tool said "missing required field `path`").
#[test]
fn tool_arguments_that_are_not_json_are_reported_as_such() {
    let sb = Sandbox::new();
    let answer =
        std::fs::read(crate::common::support::root().join("fixtures/providers/openai/text.sse"))
            .unwrap();
    let server = Server::start(vec![
        Reply::sse(&openai_tool_call("read", r#"{"path": "a.txt", "limit": "#)),
        Reply::sse(&answer),
    ]);
    let base = server.base_url();
    let run = sb.run(&["--json", "--base-url", &base, "--model", "m", "go"]);
    assert_eq!(run.code, 0, "{run}");
    let end = tool_end(&run.stdout);
    assert_eq!(end["isError"], true, "{end}");
    let text = result_text(&end["result"]);
    assert!(text.starts_with("arguments are not valid JSON: "), "{text}");
    assert!(
        text.ends_with(r#"Received: {"path": "a.txt", "limit": "#),
        "{text}"
    );
    assert!(!text.contains("missing required field"), "{text}");
    // What the model sees next is that same error.
    let second = server.seen()[1].json();
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .starts_with("arguments are not valid JSON"),
        "{tool_msg}"
    );
}
