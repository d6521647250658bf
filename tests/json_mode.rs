//! JSON mode contract (DESIGN §4): for every scenario each stdout line is one JSON object, the
//! first is the session header, the last is the single `result` line, and nothing else is on
//! stdout. Lines are decoded with our own strict structs, as a consumer would.

use serde::Deserialize;

use crate::common::support::{fixture, scripted_args, Run, Sandbox};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Header {
    r#type: String,
    version: u32,
    id: String,
    timestamp: String,
    cwd: String,
    #[serde(rename = "parentSession")]
    parent_session: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code)]
struct ResultLine {
    r#type: String,
    outcome: String,
    exit_code: i32,
    session_id: Option<String>,
    final_text: String,
    usage: serde_json::Value,
    duration_ms: u64,
    error: Option<ResultError>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ResultError {
    kind: String,
    message: String,
}

/// Checks the framing contract and returns the result line.
fn check_contract(run: &Run) -> ResultLine {
    assert!(run.stdout.ends_with('\n'), "stdout must end with a newline");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines.len() >= 2, "{run}");
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(
            v.is_object() && v["type"].is_string(),
            "not an event object: {l}"
        );
    }
    let header: Header = serde_json::from_str(lines[0]).unwrap();
    assert_eq!((header.r#type.as_str(), header.version), ("session", 3));
    let results = lines
        .iter()
        .filter(|l| l.contains("\"type\":\"result\""))
        .count();
    assert_eq!(results, 1, "exactly one result line");
    let result: ResultLine = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    assert_eq!(result.r#type, "result");
    assert_eq!(result.exit_code, run.code);
    assert_eq!(result.session_id.as_deref(), Some(header.id.as_str()));
    for l in &lines {
        if l.contains("\"message_update\"") {
            assert!(
                !l.contains("\"partial\"") && !l.contains("\"message\":"),
                "delta-only: {l}"
            );
        }
    }
    result
}

fn json(sb: &Sandbox, script: &str, extra: &[&str], prompt: &str) -> Run {
    let mut args = extra.to_vec();
    args.push(prompt);
    sb.scripted("--json", script, &args)
}

#[test]
fn success_scenario() {
    let sb = Sandbox::new();
    let run = json(&sb, "hello.json", &[], "hi");
    let r = check_contract(&run);
    assert_eq!(
        (r.outcome.as_str(), r.final_text.as_str()),
        ("success", "Hello from keel!")
    );
    assert_eq!(r.usage["input"], 12);
    assert!(r.error.is_none());
    assert_eq!(run.stderr, "");
}

#[test]
fn tool_error_scenario_is_a_success_with_an_error_result() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.txt"), "the notes\n").unwrap();
    let run = json(&sb, "tool_error.json", &[], "fix the typo");
    let r = check_contract(&run);
    assert_eq!(r.outcome, "success");
    assert!(
        run.stdout.contains("\"type\":\"tool_execution_end\"")
            && run.stdout.contains("\"isError\":true")
    );
}

#[test]
fn provider_error_scenario() {
    let sb = Sandbox::new();
    let run = json(&sb, "provider_error.json", &[], "hi");
    let r = check_contract(&run);
    assert_eq!((r.outcome.as_str(), r.exit_code), ("failed", 1));
    let e = r.error.unwrap();
    assert_eq!(e.kind, "provider_error");
    assert!(e.message.contains("503"));
    assert!(run.stderr.contains("503"), "the error is also on stderr");
}

#[test]
fn max_turns_scenario() {
    let sb = Sandbox::new();
    let run = json(&sb, "max_turns.json", &["--max-turns", "3"], "look");
    let r = check_contract(&run);
    assert_eq!((r.outcome.as_str(), r.exit_code), ("turn_limit", 4));
    assert_eq!(run.stdout.matches("\"type\":\"turn_start\"").count(), 3);
    assert_eq!(r.usage["input"], 300, "usage sums every turn");
}

#[test]
fn blocked_scenario() {
    let sb = Sandbox::new();
    let run = json(&sb, "blocked.json", &["--permission", "ask"], "clean");
    let r = check_contract(&run);
    assert_eq!((r.outcome.as_str(), r.exit_code), ("blocked", 5));
    assert!(r.error.unwrap().message.contains("call_rm"));
}

#[test]
fn interrupted_scenario() {
    let sb = Sandbox::new();
    let sig = nix::sys::signal::Signal::SIGINT;
    let run = sb.interrupt_json("hang.json", &["work"], "\"text_delta\"", sig);
    let r = check_contract(&run);
    assert_eq!((r.outcome.as_str(), r.exit_code), ("interrupted", 130));
    assert!(run
        .stdout
        .contains("\"type\":\"agent_settled\",\"aborted\":true"));
}

#[test]
fn config_error_after_mode_resolution_still_writes_one_result_line() {
    let sb = Sandbox::new();
    let run = sb.run(&["--json", "hi"]);
    assert_eq!(run.code, 3);
    let lines = run.stdout_lines();
    assert_eq!(lines.len(), 1, "{run}");
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["outcome"], "config_error");
    assert_eq!(lines[0]["error"]["kind"], "config_error");
    assert!(run.stderr.starts_with("Error: no model provider"));
}

#[test]
fn piped_stdin_is_joined_before_the_prompt_with_a_blank_line() {
    let sb = Sandbox::new();
    let script = fixture("hello.json");
    let run = sb.run_stdin(
        &scripted_args(&["--json"], &script, &["what is this?"]),
        "some piped text\n",
    );
    check_contract(&run);
    let user = run
        .stdout_lines()
        .into_iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .unwrap();
    assert_eq!(
        user["message"]["content"][0]["text"],
        "some piped text\n\nwhat is this?"
    );
}

/// A print or JSON run in this process is served by a session host, as one in the daemon is
/// (issue 28, one path): its prompt is pi's `prompt` command, so a prompt template expands as
/// it does in RPC mode, the TUI and through the daemon (the run used to send "/review …" to
/// the model as typed).
#[test]
fn a_run_in_this_process_expands_prompt_templates_as_the_session_host_does() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.work().join(".keel/prompts")).unwrap();
    std::fs::write(
        sb.work().join(".keel/prompts/review.md"),
        "Review $1 carefully.\n",
    )
    .unwrap();
    let run = json(&sb, "hello.json", &[], "/review notes.txt");
    check_contract(&run);
    let user = run
        .stdout_lines()
        .into_iter()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "user")
        .unwrap();
    assert_eq!(
        user["message"]["content"][0]["text"], "Review notes.txt carefully.\n",
        "{run}"
    );
}

#[test]
fn output_is_linear_in_streamed_tokens() {
    // 50k deltas: every message_update line stays small (no snapshots of the whole message).
    let sb = Sandbox::new();
    let run = json(&sb, "flood.json", &["--no-session"], "go");
    check_contract(&run);
    let updates: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("\"text_delta\""))
        .collect();
    assert_eq!(updates.len(), 50_000);
    let max = updates.iter().map(|l| l.len()).max().unwrap();
    assert!(max < 400, "a delta line is {max} bytes");
}

#[test]
fn bad_flags_with_json_still_end_with_one_result_line() {
    let sb = Sandbox::new();
    let run = sb.run(&["--json", "--bogus", "hi"]);
    assert_eq!(run.code, 2);
    let lines = run.stdout_lines();
    assert_eq!(lines.len(), 1, "{run}");
    assert_eq!(
        (lines[0]["outcome"].as_str(), lines[0]["exitCode"].as_i64()),
        (Some("usage"), Some(2))
    );
    assert!(lines[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--bogus"));
    assert!(
        run.stderr.contains("--bogus"),
        "the full clap message stays on stderr"
    );
}

#[test]
fn session_dir_flag_moves_storage() {
    let sb = Sandbox::new();
    let run = sb.scripted("--json", "hello.json", &["--session-dir", "store", "hi"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(sb.session_files().is_empty(), "nothing under KEEL_HOME");
    let files: Vec<_> = std::fs::read_dir(sb.work().join("store"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1);
    let again = sb.scripted(
        "--json",
        "hello.json",
        &["--session-dir", "store", "--continue", "more"],
    );
    assert_eq!(again.stdout_lines()[0]["id"], run.stdout_lines()[0]["id"]);
}
