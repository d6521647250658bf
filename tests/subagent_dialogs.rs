//! A subagent's approval dialogs reach its parent's clients (`DESIGN.md` §17; the real binary,
//! the scripted provider, real bwrap): in RPC mode the parent's client gets the child's
//! request, marked with the child, answers it under the id it was given and the child runs the
//! call; through the daemon a client attached to the parent answers, and a client attached to
//! the child sees its own dialog answered.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::daemon::{is_event, open_script, Daemon};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, Sandbox};

/// A parent that starts one `general` child ("run it"), whose `bash` writes `out.txt`.
fn script(sb: &Sandbox) -> String {
    let path = sb.dir.path().join("script.json");
    let turns = json!([
        {"match": "^go", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "run it", "prompt": "CHILD writes", "subagent_type": "general"}}}]},
        {"match": "^CHILD", "chunks": [{"toolCall": {"id": "b1", "name": "bash", "arguments":
            {"command": "echo from-child > out.txt"}}}]},
        {"match": "^CHILD", "chunks": [{"text": "child done"}]},
        {"match": "^go", "chunks": [{"text": "parent done"}]}
    ]);
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    path.display().to_string()
}

/// The child's dialog as the parent shows it: marked with the child, under its own id.
fn assert_childs_dialog(request: &Value) -> String {
    let child = request["subagent"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no subagent mark: {request}"));
    assert_eq!(request["method"], "confirm", "{request}");
    assert_eq!(request["toolName"], "bash", "{request}");
    assert_eq!(request["subagent"]["agentType"], "general", "{request}");
    assert_eq!(request["subagent"]["description"], "run it", "{request}");
    assert_eq!(request["subagent"]["toolCallId"], "t1", "{request}");
    assert_eq!(request["subagent"]["dialogId"], "b1", "{request}");
    assert_eq!(request["id"], format!("{child}/b1"), "{request}");
    child.to_string()
}

fn child_wrote(work: &Path) {
    let out = std::fs::read_to_string(work.join("out.txt")).expect("the child's bash ran");
    assert_eq!(out, "from-child\n");
}

#[test]
fn the_rpc_client_of_the_parent_answers_its_childs_approval_and_the_child_runs_the_call() {
    let sb = Sandbox::new();
    let s = script(&sb);
    let mut rpc = Rpc::start(
        &sb,
        &scripted_args(
            &[],
            &s,
            &["--permission", "ask", "--approval-timeout", "600"],
        ),
    );
    rpc.send(&json!({"id": "p1", "type": "prompt", "message": "go"}));
    let request = rpc.wait(&json!({"type": "extension_ui_request", "toolName": "bash"}));
    let child = assert_childs_dialog(&request);
    let id = request["id"].as_str().unwrap().to_string();
    rpc.send(&json!({"type": "extension_ui_response", "id": id, "confirmed": true}));
    rpc.wait(&json!({"type": "dialog_resolved", "id": id}));
    let end = rpc.wait(&json!({"type": "tool_execution_end", "toolCallId": "t1"}));
    assert_eq!(end["isError"], false, "{end}");
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("child done"), "{text}");
    assert!(text.contains(&child), "{text}");
    rpc.wait(&json!({"type": "agent_settled"}));
    child_wrote(&sb.work());
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn in_the_daemon_a_client_attached_to_the_parent_answers_its_childs_approval() {
    let sb = Sandbox::new();
    let s = script(&sb);
    let d = Daemon::start(&sb, &[]);
    let mut c = d.connect();
    c.hello(true);
    let parent = open_script(&mut c, &sb, &s, &["--permission", "ask"]);
    c.call("session/attach", json!({"sessionId": parent}));
    let r = c.call("prompt", json!({"sessionId": parent, "message": "go"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let seen = c.notes_until(|v| {
        is_event("extension_ui_request")(v) && v["params"]["event"]["toolName"] == "bash"
    });
    let request = &seen.last().unwrap()["params"]["event"];
    let child = assert_childs_dialog(request);
    let id = request["id"].as_str().unwrap().to_string();
    // A client attached to the child sees the same dialog in the child's own stream.
    let mut w = d.client();
    let r = w.call("session/attach", json!({"sessionId": child}));
    let pending = &r["result"]["snapshot"]["pendingUi"];
    assert_eq!(pending[0]["id"], "b1", "{r}");
    // The parent's client answers; a second answer is refused as already answered.
    let params = json!({"sessionId": parent, "id": id, "confirmed": true});
    let r = c.call("extension_ui_response", params.clone());
    assert!(r.get("result").is_some(), "{r}");
    c.notes_until(|v| is_event("dialog_resolved")(v) && v["params"]["event"]["id"] == id);
    let again = c.call("extension_ui_response", params);
    assert_eq!(again["error"]["code"], -32014, "{again}");
    let rest = c.notes_until(is_event("agent_settled"));
    let text = crate::subagents::task_result(&rest, "t1");
    assert!(text.starts_with("child done"), "{text}");
    child_wrote(&sb.work());
}
