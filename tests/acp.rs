//! ACP mode (`keel --mode acp`) against the real binary and the scripted provider
//! (`fixtures/providers/acp.json`): raw NDJSON in, JSON-RPC lines out. Tests wait on lines,
//! never on time; transcripts are snapshotted whole with the sandbox path scrubbed.

use serde_json::{json, Value};

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, snap, strs, Sandbox};

/// `keel --mode acp` with the ACP script and `extra` flags.
pub fn acp(sb: &Sandbox, extra: &[&str]) -> Rpc {
    acp_script(sb, &fixture("acp.json"), extra)
}

/// keel in ACP mode playing the scripted turns of `script`.
pub fn acp_script(sb: &Sandbox, script: &str, extra: &[&str]) -> Rpc {
    let mut args = scripted_args(&["--mode", "acp"], script, &[]);
    args.extend_from_slice(extra);
    Rpc::start_raw(sb, &args)
}

/// Sends a request (string ids never collide with the agent's numeric ones) and returns
/// its answer.
pub fn call(a: &mut Rpc, id: &str, method: &str, params: Value) -> Value {
    send(a, id, method, params);
    a.wait(&json!({"id": id}))
}

pub fn send(a: &mut Rpc, id: &str, method: &str, params: Value) {
    a.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
}

fn notify(a: &mut Rpc, method: &str, params: Value) {
    a.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
}

pub fn init(a: &mut Rpc) -> Value {
    call(a, "init", "initialize", json!({"protocolVersion": 1}))
}

/// `session/new` in the sandbox's work dir; the session id.
pub fn new_session(a: &mut Rpc, sb: &Sandbox) -> String {
    let r = call(
        a,
        "new",
        "session/new",
        json!({"cwd": sb.work(), "mcpServers": []}),
    );
    r["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string()
}

pub fn prompt(a: &mut Rpc, id: &str, session: &str, text: &str) {
    send(
        a,
        id,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
    );
}

fn scrub(text: &str, sb: &Sandbox) -> String {
    text.replace(&sb.dir.path().display().to_string(), "[SANDBOX]")
}

fn updates_of(lines: &[String], kind: &str) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["method"] == "session/update" && v["params"]["update"]["sessionUpdate"] == kind
        })
        .map(|v| v["params"]["update"].clone())
        .collect()
}

#[test]
fn acp_transcript_initialize_new_prompt_edit_write_list_close() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("greet.txt"), "hello world\n").unwrap();
    std::fs::write(sb.work().join("notes.txt"), "first notes\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    let init = init(&mut a);
    assert_eq!(init["result"]["protocolVersion"], 1);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p1", &session, "hello");
    assert_eq!(a.stop_reason("p1"), "end_turn");
    prompt(&mut a, "p2", &session, "edit both files");
    assert_eq!(a.stop_reason("p2"), "end_turn");
    prompt(&mut a, "p3", &session, "long answer please");
    assert_eq!(a.stop_reason("p3"), "max_tokens");
    let list = call(&mut a, "list", "session/list", json!({"cwd": sb.work()}));
    assert_eq!(list["result"]["sessions"][0]["sessionId"], session.as_str());
    assert_eq!(
        call(
            &mut a,
            "close",
            "session/close",
            json!({"sessionId": session})
        )["result"],
        json!({})
    );
    let (out, err, code) = a.finish();
    assert_eq!(
        std::fs::read_to_string(sb.work().join("greet.txt")).unwrap(),
        "hello keel\n"
    );
    snap(
        "acp_transcript",
        &scrub(
            &format!("{}\n[stderr]\n{err}\n[exit status: {code}]\n", out.concat()),
            &sb,
        ),
    );
}

#[test]
fn acp_templates_are_commands_and_tool_calls_stream_live_bash_output() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.txt"), "some notes\n").unwrap();
    std::fs::create_dir_all(sb.work().join(".keel/prompts")).unwrap();
    std::fs::write(
        sb.work().join(".keel/prompts/review.md"),
        "Review $1 carefully.\n",
    )
    .unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    let commands =
        a.wait(&json!({"params": {"update": {"sessionUpdate": "available_commands_update"}}}));
    assert_eq!(
        commands["params"]["update"]["availableCommands"],
        json!([
            {"name": "review", "description": "Review $1 carefully.", "input": {"hint": "arguments"}},
            {"name": "rewind", "description": "List the checkpoints, or rewind files and conversation to before a message", "input": {"hint": "checkpoint or message id, then files, conversation or both (none: list them)"}}
        ]),
        "prompt templates are commands, then keel's /rewind"
    );
    prompt(&mut a, "p", &session, "tools please");
    let read = a.wait(
        &json!({"params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_read"}}}),
    );
    let read = &read["params"]["update"];
    assert_eq!(read["kind"], "read");
    assert_eq!(read["status"], "in_progress");
    let notes = sb.work().join("notes.txt").display().to_string();
    assert_eq!(read["locations"], json!([{"path": notes}]));
    assert_eq!(read["rawInput"], json!({"path": "notes.txt"}));
    let bash = a.wait(
        &json!({"params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_bash"}}}),
    );
    assert_eq!(bash["params"]["update"]["kind"], "execute");
    assert_eq!(bash["params"]["update"]["title"], "echo live; echo output");
    let live = a
        .wait(&json!({"params": {"update": {"toolCallId": "call_bash", "status": "in_progress"}}}));
    let text = live["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("live"), "live output: {text}");
    let done =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_bash", "status": "completed"}}}));
    let text = done["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("live\noutput"), "final output: {text}");
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (out, _, code) = a.finish();
    assert_eq!(code, 0);
    let read_done: Vec<Value> = updates_of(&out, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "call_read")
        .collect();
    assert_eq!(read_done.len(), 1);
    assert_eq!(read_done[0]["status"], "completed");
    assert!(read_done[0]["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("some notes"));
}

/// Answers the next permission request with `option` (or `cancelled`), returning the request.
fn answer_permission(a: &mut Rpc, option: Option<&str>) -> Value {
    let req = a.wait(&json!({"method": "session/request_permission"}));
    let outcome = match option {
        Some(o) => json!({"outcome": "selected", "optionId": o}),
        None => json!({"outcome": "cancelled"}),
    };
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": outcome}}));
    req
}

#[test]
fn acp_permission_requests_allow_reject_and_always() {
    let sb = Sandbox::new();
    let mut a = acp(&sb, &[]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    let doomed = sb.work().join("doomed.txt");

    std::fs::write(&doomed, "x").unwrap();
    prompt(&mut a, "p1", &session, "rm it");
    let pending = a.wait(
        &json!({"params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "call_rm1"}}}),
    );
    assert_eq!(
        pending["params"]["update"].get("status"),
        None,
        "pending until approved"
    );
    let req = answer_permission(&mut a, Some("reject_once"));
    let params = &req["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCall"]["toolCallId"], "call_rm1");
    assert_eq!(params["toolCall"]["kind"], "execute");
    assert_eq!(
        params["toolCall"]["rawInput"],
        json!({"command": "rm -f doomed.txt"})
    );
    let kinds = strs(&params["options"], "kind");
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    let failed =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_rm1", "status": "failed"}}}));
    assert!(failed.to_string().contains("denied"), "{failed}");
    assert_eq!(a.stop_reason("p1"), "end_turn");
    assert!(doomed.exists(), "a rejected call does not run");

    prompt(&mut a, "p2", &session, "rm it again");
    answer_permission(&mut a, Some("allow_once"));
    a.wait(&json!({"params": {"update": {"toolCallId": "call_rm2", "status": "in_progress"}}}));
    a.wait(&json!({"params": {"update": {"toolCallId": "call_rm2", "status": "completed"}}}));
    assert_eq!(a.stop_reason("p2"), "end_turn");
    assert!(!doomed.exists(), "an allowed call runs");

    prompt(&mut a, "p3", &session, "rm it, always");
    answer_permission(&mut a, Some("allow_always"));
    assert_eq!(a.stop_reason("p3"), "end_turn");
    prompt(&mut a, "p4", &session, "rm it once more");
    a.wait(&json!({"params": {"update": {"toolCallId": "call_rm4", "status": "completed"}}}));
    assert_eq!(a.stop_reason("p4"), "end_turn");
    let (out, _, code) = a.finish();
    assert_eq!(code, 0);
    let asked = out
        .iter()
        .filter(|l| l.contains("session/request_permission"))
        .count();
    assert_eq!(asked, 3, "allow always answers the fourth call itself");
}

#[test]
fn acp_cancel_mid_stream_and_mid_permission_answers_cancelled() {
    let sb = Sandbox::new();
    let mut a = acp(&sb, &[]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p1", &session, "hang on");
    a.wait(&json!({"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}));
    notify(&mut a, "session/cancel", json!({"sessionId": session}));
    assert_eq!(a.stop_reason("p1"), "cancelled");

    std::fs::write(sb.work().join("doomed.txt"), "x").unwrap();
    prompt(&mut a, "p2", &session, "rm it");
    let req = a.wait(&json!({"method": "session/request_permission"}));
    notify(&mut a, "session/cancel", json!({"sessionId": session}));
    assert_eq!(a.stop_reason("p2"), "cancelled");
    // The client answers the request as cancelled, as the spec asks; nothing runs.
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": {"outcome": "cancelled"}}}));
    assert!(sb.work().join("doomed.txt").exists());

    prompt(&mut a, "p3", &session, "hang again");
    a.wait(&json!({"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}));
    notify(&mut a, "$/cancel_request", json!({"requestId": "p3"}));
    assert_eq!(a.wait(&json!({"id": "p3"}))["error"]["code"], -32800);
    let (_, _, code) = a.finish();
    assert_eq!(code, 0);
}

#[test]
fn acp_load_in_a_new_process_replays_the_branch_before_answering() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.txt"), "n\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "hello there");
    a.wait(&json!({"id": "p"}));
    let (_, _, code) = a.finish();
    assert_eq!(code, 0, "end of input exits 0");
    assert_eq!(sb.session_files().len(), 1, "the session is saved");

    let mut b = acp(&sb, &["--permission", "auto"]);
    init(&mut b);
    let list = call(&mut b, "list", "session/list", json!({}));
    assert_eq!(list["result"]["sessions"][0]["title"], "hello there");
    let r = call(
        &mut b,
        "load",
        "session/load",
        json!({"sessionId": session, "cwd": sb.work(), "mcpServers": []}),
    );
    assert_eq!(
        r["result"]["configOptions"][0]["id"], "model",
        "--permission fixes the mode"
    );
    let resumed = call(
        &mut b,
        "resume",
        "session/resume",
        json!({"sessionId": session, "cwd": sb.work()}),
    );
    assert_eq!(
        resumed["result"]["configOptions"],
        r["result"]["configOptions"]
    );
    let (out, _, _) = b.finish();
    let load_at = out
        .iter()
        .position(|l| l.contains("\"id\":\"load\""))
        .unwrap();
    let kinds: Vec<String> = out[..load_at]
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["method"] == "session/update")
        .map(|v| {
            format!(
                "{} {}",
                v["params"]["update"]["sessionUpdate"], v["params"]["update"]["messageId"]
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "\"user_message_chunk\" \"msg_1\"",
            "\"agent_thought_chunk\" \"msg_2\"",
            "\"agent_message_chunk\" \"msg_2\"",
        ]
    );
    let after = out[load_at + 1..]
        .iter()
        .filter(|l| l.contains("session/update") && !l.contains("available_commands_update"))
        .count();
    assert_eq!(after, 0, "resume replays nothing");

    // Resumed in a third process without replay, the next answer's message id goes on.
    let mut c = acp(&sb, &["--permission", "auto"]);
    call(
        &mut c,
        "resume",
        "session/resume",
        json!({"sessionId": session, "cwd": sb.work()}),
    );
    prompt(&mut c, "p2", &session, "hello again");
    let chunk = c.wait(&json!({"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}));
    assert_eq!(chunk["params"]["update"]["messageId"], "msg_4");
    c.wait(&json!({"id": "p2"}));
    c.finish();
}

#[test]
fn acp_errors_have_their_codes_and_name_the_field() {
    let sb = Sandbox::new();
    let mut a = acp(&sb, &["--max-turns", "1", "--permission", "auto"]);
    let v7 = call(&mut a, "v7", "initialize", json!({"protocolVersion": 7}));
    assert_eq!(
        v7["result"]["protocolVersion"], 1,
        "the one version keel speaks"
    );
    a.send_bytes(b"this is not json\n");
    a.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":\"x\"}\n");
    a.send_bytes(b"[]\n");
    notify(&mut a, "_editor/unknown_notification", json!({}));
    call(&mut a, "unknown", "session/fly", json!({}));
    call(&mut a, "nocwd", "session/new", json!({"mcpServers": []}));
    call(
        &mut a,
        "relcwd",
        "session/new",
        json!({"cwd": "relative/dir", "mcpServers": []}),
    );
    call(
        &mut a,
        "badprompt",
        "session/prompt",
        json!({"sessionId": "s", "prompt": "hi"}),
    );
    call(
        &mut a,
        "nosession",
        "session/prompt",
        json!({"sessionId": "nope", "prompt": []}),
    );
    call(
        &mut a,
        "noload",
        "session/load",
        json!({"sessionId": "nope", "cwd": sb.work(), "mcpServers": []}),
    );
    call(
        &mut a,
        "noclose",
        "session/close",
        json!({"sessionId": "nope"}),
    );
    call(&mut a, "cursor", "session/list", json!({"cursor": "abc"}));
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "limit", &session, "loop forever");
    assert_eq!(a.stop_reason("limit"), "max_turn_requests");
    let (out, err, code) = a.finish();
    let answers: Vec<String> = out
        .iter()
        .filter(|l| l.contains("\"error\""))
        .cloned()
        .collect();
    snap(
        "acp_errors",
        &scrub(
            &format!(
                "{}\n[stderr]\n{err}\n[exit status: {code}]\n",
                answers.concat()
            ),
            &sb,
        ),
    );
}

#[test]
fn acp_permission_request_carries_the_edit_and_write_diffs() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("greet.txt"), "hello world\n").unwrap();
    std::fs::write(sb.work().join("notes.txt"), "first notes\n").unwrap();
    let mut a = acp(&sb, &[]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "edit both");
    let edit = answer_permission(&mut a, Some("allow_once"));
    let greet = sb.work().join("greet.txt").display().to_string();
    assert_eq!(
        edit["params"]["toolCall"]["content"],
        json!([{"type": "diff", "path": greet, "oldText": "world", "newText": "keel"}])
    );
    let write = answer_permission(&mut a, Some("allow_once"));
    let notes = sb.work().join("notes.txt").display().to_string();
    assert_eq!(
        write["params"]["toolCall"]["content"],
        json!([{"type": "diff", "path": notes, "oldText": "first notes\n", "newText": "rewritten\n"}])
    );
    let done =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_write", "status": "completed"}}}));
    assert_eq!(
        done["params"]["update"]["content"][0]["oldText"],
        "first notes\n"
    );
    assert_eq!(a.stop_reason("p"), "end_turn");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("notes.txt")).unwrap(),
        "rewritten\n"
    );
    a.finish();
}

#[test]
fn acp_modes_and_config_options_switch_the_policy_model_and_thinking() {
    let sb = Sandbox::new();
    let mut a = acp(&sb, &[]);
    init(&mut a);
    let r = call(
        &mut a,
        "new",
        "session/new",
        json!({"cwd": sb.work(), "mcpServers": []}),
    );
    let session = r["result"]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(r["result"]["modes"]["currentModeId"], "ask");
    let ids = strs(&r["result"]["configOptions"], "id");
    assert_eq!(ids, ["mode", "model", "thought_level"]);
    assert_eq!(
        r["result"]["configOptions"][1]["currentValue"],
        "scripted/scripted-acp"
    );

    let set = call(
        &mut a,
        "auto",
        "session/set_mode",
        json!({"sessionId": session, "modeId": "auto"}),
    );
    assert_eq!(set["result"], json!({}));
    let update = a.wait(&json!({"params": {"update": {"sessionUpdate": "config_option_update"}}}));
    assert_eq!(
        update["params"]["update"]["configOptions"][0]["currentValue"],
        "auto"
    );
    std::fs::write(sb.work().join("doomed.txt"), "x").unwrap();
    prompt(&mut a, "p1", &session, "rm it");
    a.wait(&json!({"params": {"update": {"toolCallId": "call_rm1", "status": "completed"}}}));
    a.wait(&json!({"id": "p1"}));
    assert!(
        !sb.work().join("doomed.txt").exists(),
        "auto runs the call without asking"
    );

    let set = call(
        &mut a,
        "ro",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "read-only"}),
    );
    assert_eq!(
        set["result"]["configOptions"][0]["currentValue"],
        "read-only"
    );
    std::fs::write(sb.work().join("doomed.txt"), "x").unwrap();
    prompt(&mut a, "p2", &session, "rm it again");
    a.wait(&json!({"params": {"update": {"toolCallId": "call_rm2", "status": "failed"}}}));
    a.wait(&json!({"id": "p2"}));
    assert!(
        sb.work().join("doomed.txt").exists(),
        "read-only refuses the call"
    );

    let think = call(
        &mut a,
        "think",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    );
    let thought = think["result"]["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "thought_level")
        .unwrap()
        .clone();
    let state_level = thought["currentValue"].as_str().unwrap().to_string();
    assert!(
        ["high", "off"].contains(&state_level.as_str()),
        "the level the session took: {state_level}"
    );
    let bad_model = call(
        &mut a,
        "badmodel",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "value": "nope/nope"}),
    );
    assert_eq!(bad_model["error"]["code"], -32602);
    let bad_option = call(
        &mut a,
        "badopt",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "speed", "value": "x"}),
    );
    assert_eq!(bad_option["error"]["code"], -32602);
    assert!(bad_option["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`configId`"));
    let bad_mode = call(
        &mut a,
        "badmode",
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    assert!(bad_mode["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`modeId`"));
    let (out, _, code) = a.finish();
    assert_eq!(code, 0);
    assert!(
        !out.iter().any(|l| l.contains("session/request_permission")),
        "neither mode asks"
    );
    let modes = updates_of(&out, "current_mode_update");
    assert_eq!(
        modes,
        [json!({"sessionUpdate": "current_mode_update", "currentModeId": "read-only"})]
    );
}

#[test]
fn acp_with_a_prompt_is_a_usage_error() {
    let sb = Sandbox::new();
    let run = sb.run(&["--acp", "hello"]);
    assert_eq!(run.code, 2, "{run}");
    run.assert_stderr("acp mode takes no prompt arguments");
}

#[test]
fn acp_sigterm_mid_run_answers_cancelled_saves_and_exits_143() {
    let sb = Sandbox::new();
    let mut a = acp(&sb, &[]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "hang on");
    a.wait(&json!({"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}));
    a.signal(nix::sys::signal::Signal::SIGTERM);
    let (out, _, code) = a.collect();
    assert_eq!(code, 143);
    let answer = out
        .iter()
        .find(|l| l.contains("\"id\":\"p\""))
        .expect("the prompt is answered");
    assert!(answer.contains("\"stopReason\":\"cancelled\""), "{answer}");
    assert!(sb.session_text().contains("hang on"), "the prompt is saved");
}

#[test]
fn acp_client_mcp_servers_are_started_for_the_session_and_their_tools_called() {
    let sb = Sandbox::new();
    let script = sb.dir.path().join("mcp.json");
    let turns = json!({"turns": [
        {"chunks": [{"toolCall": {"id": "call_echo", "name": "mcp__fx__echo", "arguments": {"text": "from the editor"}}}]},
        {"chunks": [{"text": "echoed"}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    let mut a = Rpc::start_raw(
        &sb,
        &scripted_args(&["--mode", "acp"], &script, &["--permission", "auto"]),
    );
    let caps = init(&mut a);
    assert_eq!(
        caps["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": false}),
        "{caps}"
    );
    let r = call(
        &mut a,
        "new",
        "session/new",
        json!({"cwd": sb.work(), "mcpServers": [
            {"name": "fx", "command": crate::mcp::FIXTURE, "args": [], "env": [{"name": "FIXTURE_TOKEN", "value": "t"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
        ]}),
    );
    let session = r["result"]["sessionId"]
        .as_str()
        .expect("a session")
        .to_string();
    prompt(&mut a, "p", &session, "use the tool");
    let done =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_echo", "status": "completed"}}}));
    let text = done["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.contains("from the editor"), "{done}");
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (_, err, code) = a.finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("MCP server `old` from the client is left out"),
        "{err}"
    );
    // The config file that carried the servers (and their env) is gone.
    let left: Vec<_> = std::fs::read_dir(sb.home().join("tmp"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with(".acp-mcp-")),
        "{left:?}"
    );
}

/// `--mode acp --daemon`: the editor's sessions live in the daemon, so `keel ps` lists them
/// and a terminal attached there sees the same run; closing the editor leaves a session
/// another client shows live.
#[test]
fn acp_sessions_in_the_daemon_are_shared_with_its_other_clients() {
    let sb = Sandbox::new();
    let d = crate::common::daemon::Daemon::start(&sb, &["--idle-exit", "0"]);
    let socket = d.socket.display().to_string();
    let mut a = acp(&sb, &["--daemon", "--socket", &socket]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    let mut c = d.connect();
    c.hello(true);
    let live = c.sessions();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["sessionId"], session.as_str());
    let r = c.call("session/attach", json!({"sessionId": session}));
    assert!(r.get("result").is_some(), "{r}");
    prompt(&mut a, "p", &session, "hello there");
    assert_eq!(a.stop_reason("p"), "end_turn");
    // The terminal's connection saw the editor's run.
    let seen = c.events_until("agent_settled");
    assert!(
        seen.iter()
            .any(|(_, e)| e["type"] == "message_start" && e["message"]["role"] == "user"),
        "{seen:?}"
    );
    // An approval the editor is asked for can be answered from the terminal.
    let doomed = sb.work().join("doomed.txt");
    std::fs::write(&doomed, "x").unwrap();
    prompt(&mut a, "p2", &session, "rm it");
    let asked = a.wait(&json!({"method": "session/request_permission"}));
    let ask = c.notes_until(|v| v["params"]["event"]["method"] == "confirm");
    let dialog = ask.last().unwrap()["params"]["event"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = c.call(
        "extension_ui_response",
        json!({"sessionId": session, "id": dialog, "confirmed": true}),
    );
    assert!(r.get("result").is_some(), "{r}");
    a.wait(&json!({"params": {"update": {"toolCallId": dialog, "status": "completed"}}}));
    assert!(!doomed.exists(), "the terminal's answer ran the call");
    // The editor's question is withdrawn.
    let withdrawn = a.wait(&json!({"method": "$/cancel_request"}));
    assert_eq!(withdrawn["params"]["requestId"], asked["id"], "{withdrawn}");
    // The editor goes away: the session stays live for the client still attached.
    let (_, err, code) = a.finish();
    assert_eq!(code, 0, "{err}");
    let live = c.sessions();
    assert_eq!(live.len(), 1, "still live: {live:?}");
    assert_eq!(live[0]["clients"], 1, "{live:?}");
}
