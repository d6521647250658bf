//! MCP servers end to end, against the workspace's stdio fixture server
//! (`tests/bin/mcp_fixture.rs`): tools in the provider's request body, calls round-tripping
//! (text, image, resources, progress), `--permission` and `--tools`, `list_changed`, and
//! failing, hanging and crashing servers costing a warning, never the run.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Server};
use crate::common::rpc::Rpc;
use crate::common::support::{root, scripted_args, Run, Sandbox, BUILT_IN_TOOLS};

pub const FIXTURE: &str = env!("CARGO_BIN_EXE_keel-mcp-fixture");

/// Writes `$work/NAME.json` with one fixture server per `(name, args)`; returns its path.
pub fn mcp_config(sb: &Sandbox, file: &str, servers: &[(&str, &[&str])]) -> String {
    let mut map = serde_json::Map::new();
    for (name, args) in servers {
        map.insert(name.to_string(), json!({"command": FIXTURE, "args": args}));
    }
    let path = sb.work().join(format!("{file}.json"));
    std::fs::write(&path, json!({"mcpServers": map}).to_string()).unwrap();
    path.display().to_string()
}

/// A scripted-provider script of `turns` in the sandbox's work dir; its path.
pub fn script(sb: &Sandbox, turns: Value) -> String {
    let path = sb.work().join("script.json");
    std::fs::write(&path, json!({"turns": turns}).to_string()).unwrap();
    path.display().to_string()
}

fn call_turn(calls: &[(&str, Value)]) -> Value {
    let chunks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"toolCall": {"id": format!("c{i}"), "name": name, "arguments": args}}))
        .collect();
    json!({"chunks": chunks})
}

/// A JSON-mode scripted run making `calls` in one turn, then answering "done".
fn json_run(sb: &Sandbox, cfg: &str, calls: &[(&str, Value)], extra: &[&str]) -> Run {
    let s = script(
        sb,
        json!([call_turn(calls), {"chunks": [{"text": "done"}]}]),
    );
    run_with(sb, &s, cfg, extra)
}

/// `keel --json --no-session` with the scripted provider on `script`, the MCP config `cfg`,
/// `extra` flags and the prompt "go".
pub fn run_with(sb: &Sandbox, script: &str, cfg: &str, extra: &[&str]) -> Run {
    let mut args = scripted_args(&["--json", "--no-session"], script, &["--mcp-config", cfg]);
    args.extend_from_slice(extra);
    args.push("go");
    sb.run(&args)
}

/// The `tool_execution_end` results of a JSON run, in order, with their `isError`.
fn results(run: &Run) -> Vec<Value> {
    run.stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_end")
        .map(|l| {
            let mut r = l["result"].clone();
            r["isError"] = l["isError"].clone();
            r
        })
        .collect()
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn mcp_tools_reach_the_provider_after_the_built_ins_with_sanitised_unique_names() {
    let sb = Sandbox::new();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &["--collide"])]);
    let server = Server::start(vec![Reply::sse(
        &std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap(),
    )]);
    let base = server.base_url();
    let run = sb.run(&[
        "--base-url",
        &base,
        "--model",
        "test-model",
        "--no-session",
        "--mcp-config",
        &cfg,
        "-p",
        "hi",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let body = server.seen()[0].json();
    let tools = body["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(&names[..8], BUILT_IN_TOOLS);
    // An OpenAI-compatible model gets the job tools in Codex's shapes with `bash`.
    assert_eq!(&names[8..10], ["exec_command", "write_stdin"]);
    assert_eq!(names[10], "mcp__fx__echo");
    // The `task` tool comes last, its description listing the subagent types.
    assert_eq!(names.last(), Some(&"task"));
    let task = tools.last().unwrap()["function"]["description"]
        .as_str()
        .unwrap();
    assert!(
        task.contains("\n- general: ") && task.contains("\n- explore: "),
        "{task}"
    );
    assert!(names.contains(&"mcp__fx__look"));
    let search: Vec<&&str> = names
        .iter()
        .filter(|n| n.starts_with("mcp__fx__search_a"))
        .collect();
    assert_eq!(search.len(), 2, "{names:?}");
    assert_ne!(search[0], search[1]);
    assert!(names.iter().all(|n| n.len() <= 64
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')));
    let echo = &tools[10]["function"];
    assert_eq!(echo["description"], "Echoes `text`");
    assert_eq!(echo["parameters"]["properties"]["text"]["type"], "string");
}

#[test]
fn a_call_round_trips_text_images_resources_and_progress() {
    let sb = Sandbox::new();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &[])]);
    let run = json_run(
        &sb,
        &cfg,
        &[
            ("mcp__fx__echo", json!({"text": "hello"})),
            ("mcp__fx__image", json!({})),
            ("mcp__fx__resources", json!({})),
            ("mcp__fx__progress", json!({"steps": 3, "every": 20})),
            ("mcp__fx__fail", json!({})),
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{run}");
    let r = results(&run);
    assert_eq!(text_of(&r[0]), "hello");
    assert_eq!(r[0]["isError"], false);
    assert_eq!(r[1]["content"][1]["type"], "image");
    assert_eq!(r[1]["content"][1]["mimeType"], "image/png");
    let res = text_of(&r[2]);
    assert!(
        res.contains("[resource link] r.txt: file:///r.txt"),
        "{res}"
    );
    assert!(res.contains("embedded text"), "{res}");
    assert_eq!(r[2]["details"]["structuredContent"], json!({"count": 2}));
    assert_eq!(text_of(&r[3]), "3 steps done");
    let updates: Vec<String> = run
        .stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_update" && l["toolName"] == "mcp__fx__progress")
        .map(|l| text_of(&l["partialResult"]))
        .collect();
    assert_eq!(
        updates,
        [
            "progress 1/3: step 1",
            "progress 2/3: step 2",
            "progress 3/3: step 3"
        ]
    );
    assert_eq!(r[4]["isError"], true);
    assert_eq!(text_of(&r[4]), "it failed");
}

#[test]
fn read_only_refuses_mcp_tools_unless_annotated_read_only() {
    let sb = Sandbox::new();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &[])]);
    let run = json_run(
        &sb,
        &cfg,
        &[
            ("mcp__fx__echo", json!({"text": "no"})),
            ("mcp__fx__look", json!({"text": "yes"})),
        ],
        &["--permission", "read-only"],
    );
    assert_eq!(run.code, 0, "{run}");
    let r = results(&run);
    assert_eq!(r[0]["isError"], true);
    assert!(text_of(&r[0]).contains("read-only"), "{}", text_of(&r[0]));
    assert_eq!(text_of(&r[1]), "yes");
}

#[test]
fn tools_flag_selects_mcp_tools_by_pattern() {
    let sb = Sandbox::new();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &[]), ("other", &[])]);
    let run = json_run(
        &sb,
        &cfg,
        &[
            ("mcp__fx__echo", json!({"text": "in"})),
            ("mcp__other__echo", json!({"text": "out"})),
        ],
        &["--tools", "read,mcp__fx__*"],
    );
    assert_eq!(run.code, 0, "{run}");
    let r = results(&run);
    assert_eq!(text_of(&r[0]), "in");
    let refused = text_of(&r[1]);
    assert!(refused.contains("is not available"), "{refused}");
    let offered = refused.split("Available tools:").nth(1).unwrap();
    assert!(
        offered.contains("mcp__fx__echo") && !offered.contains("mcp__other__"),
        "{refused}"
    );
}

#[test]
fn list_changed_refreshes_the_tools_before_the_next_request() {
    let sb = Sandbox::new();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &[])]);
    let s = script(
        &sb,
        json!([
            call_turn(&[("mcp__fx__add_tool", json!({}))]),
            call_turn(&[("mcp__fx__added", json!({}))]),
            {"chunks": [{"text": "done"}]}
        ]),
    );
    let run = crate::mcp::run_with(&sb, &s, &cfg, &[]);
    assert_eq!(run.code, 0, "{run}");
    let r = results(&run);
    assert_eq!(text_of(&r[0]), "added");
    assert!(
        text_of(&r[1]).contains("unknown tool added"),
        "the new tool was called: {}",
        text_of(&r[1])
    );
}

#[test]
fn a_hung_server_costs_at_most_the_wait_budget_and_a_warning() {
    let sb = Sandbox::new();
    let pid_file = sb.work().join("stuck.pid");
    let pid_arg = pid_file.display().to_string();
    let cfg = mcp_config(
        &sb,
        "mcp",
        &[("stuck", &["--hang", "--pid-file", &pid_arg]), ("fx", &[])],
    );
    let s = script(&sb, json!([{"chunks": [{"text": "answer"}]}]));
    let started = Instant::now();
    let run = sb.run(&scripted_args(
        &["-p", "--no-session"],
        &s,
        &["--mcp-config", &cfg, "go"],
    ));
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.trim(), "answer");
    assert!(
        run.stderr
            .contains("MCP server `stuck` is still connecting after 2s"),
        "{run}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone_within(pid, Duration::from_secs(5)),
        "the hung server outlived keel"
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaps) before `limit` passes; with a zero
/// `limit`, whether it is gone now (it is looked at least once).
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let zombie = |stat: &str| {
            stat.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        };
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if zombie(&stat) => return true,
            Ok(_) if Instant::now() >= deadline => return false,
            Ok(_) => std::thread::yield_now(),
        }
    }
}

#[test]
fn failing_and_crashing_servers_are_warnings_not_failed_runs() {
    let sb = Sandbox::new();
    let path = sb.work().join("bad.json");
    std::fs::write(
        &path,
        json!({"mcpServers": {
            "missing": {"command": "/nonexistent/keel-mcp-server"},
            "crash": {"command": FIXTURE, "args": ["--crash-on-call"]}}})
        .to_string(),
    )
    .unwrap();
    let cfg = path.display().to_string();
    let run = json_run(
        &sb,
        &cfg,
        &[("mcp__crash__echo", json!({"text": "x"}))],
        &[],
    );
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr.contains(
            "Warning: MCP server `missing` failed: cannot start `/nonexistent/keel-mcp-server`"
        ),
        "{run}"
    );
    let r = results(&run);
    assert_eq!(r[0]["isError"], true);
    assert!(
        text_of(&r[0]).contains("MCP tool `echo` of server `crash` failed"),
        "{}",
        text_of(&r[0])
    );
    let log = std::fs::read_to_string(sb.home().join("logs/mcp-crash.log")).unwrap();
    assert!(
        log.contains("fixture: crashing"),
        "stderr goes to the log: {log}"
    );
    assert!(
        !run.stderr.contains("fixture:"),
        "never to the screen: {run}"
    );
}

#[test]
fn stdio_servers_get_the_allowlisted_environment_plus_their_env_and_no_provider_keys() {
    let sb = Sandbox::new();
    let path = sb.work().join("env.json");
    std::fs::write(
        &path,
        json!({"mcpServers": {"fx": {"command": FIXTURE, "env": {"GIVEN": "${HOME}/given"}}}})
            .to_string(),
    )
    .unwrap();
    let s = script(
        &sb,
        json!([call_turn(&[
            ("mcp__fx__env", json!({"name": "GIVEN"})),
            ("mcp__fx__env", json!({"name": "OPENAI_API_KEY"})),
            ("mcp__fx__env", json!({"name": "HOME"})),
        ]), {"chunks": [{"text": "done"}]}]),
    );
    let cfg = path.display().to_string();
    let run = sb
        .cmd(&scripted_args(
            &["--json", "--no-session"],
            &s,
            &["--mcp-config", &cfg, "go"],
        ))
        .env("OPENAI_API_KEY", "sk-secret")
        .output()
        .unwrap();
    let run = sb.finish(run);
    assert_eq!(run.code, 0, "{run}");
    let r = results(&run);
    let home = sb.dir.path().display().to_string();
    assert_eq!(text_of(&r[0]), format!("{home}/given"));
    assert_eq!(text_of(&r[1]), "<unset>");
    assert_eq!(text_of(&r[2]), home);
}

#[test]
fn untrusted_project_servers_are_skipped_with_one_warning_naming_them() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.work().join(".mcp.json"),
        json!({"mcpServers": {"proj": {"command": FIXTURE}}}).to_string(),
    )
    .unwrap();
    let s = script(&sb, json!([{"chunks": [{"text": "answer"}]}]));
    let args = scripted_args(&["-p", "--no-session"], &s, &["go"]);
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        run.stderr
            .matches("skipped the project's MCP servers `proj`")
            .count(),
        1,
        "{run}"
    );
    let mut trusted = args.to_vec();
    trusted.insert(0, "--trust-project");
    let run = sb.run(&trusted);
    assert!(!run.stderr.contains("skipped"), "{run}");
}

#[test]
fn a_broken_mcp_config_is_a_config_error_naming_the_file() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.work().join("bad.json"),
        r#"{"mcpServers": {"x": {"args": []}}}"#,
    )
    .unwrap();
    let s = script(&sb, json!([{"chunks": [{"text": "answer"}]}]));
    let run = sb.run(&scripted_args(
        &["-p"],
        &s,
        &["--mcp-config", "bad.json", "go"],
    ));
    assert_eq!(run.code, 3, "{run}");
    assert!(
        run.stderr
            .contains("bad.json: server `x`: `command` is missing"),
        "{run}"
    );
    let run = sb.run(&scripted_args(
        &["-p"],
        &s,
        &["--mcp-config", "nope.json", "go"],
    ));
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("no MCP config file at"), "{run}");
}

/// In RPC mode (and so in the TUI and the daemon, which share its host), a server's trouble
/// found after startup reaches the client as a `notify` warning on the stream.
#[test]
fn a_late_server_warning_reaches_rpc_clients_as_a_notify() {
    let sb = Sandbox::new();
    let pid_file = sb.work().join("stuck.pid");
    let pid_arg = pid_file.display().to_string();
    let cfg = mcp_config(
        &sb,
        "mcp",
        &[("stuck", &["--hang", "--pid-file", &pid_arg])],
    );
    let s = script(&sb, json!([{"chunks": [{"text": "answer"}]}]));
    let mut rpc = Rpc::start(
        &sb,
        &scripted_args(&["--no-session"], &s, &["--mcp-config", &cfg]),
    );
    rpc.send(&json!({"type": "prompt", "message": "go"}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let mut notify = None;
    let mut answer_before_notify = false;
    for line in &rpc.seen {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "extension_ui_request" && v["method"] == "notify" {
            notify = Some(v.clone());
        }
        // The warning came before the model's answer, so it is published before it.
        answer_before_notify |= v["type"] == "message_update" && notify.is_none();
    }
    // keel exits once its input is gone.
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
    let notify = notify.expect("a notify line");
    assert!(
        !answer_before_notify,
        "the notify came after the answer's events"
    );
    assert_eq!(notify["notifyType"], "warning", "{notify}");
    assert!(
        notify["message"]
            .as_str()
            .unwrap()
            .contains("MCP server `stuck` is still connecting after 2s"),
        "{notify}"
    );
}
