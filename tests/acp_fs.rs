//! ACP's editor file system: a client that advertises `fs.readTextFile` / `fs.writeTextFile`
//! gets keel's `read`, `edit` and `write` as `fs/*` requests (so unsaved buffers are seen and
//! edits land in the editor), and the disk is left alone. Raw NDJSON against the binary.

use serde_json::{json, Value};

use crate::acp::{acp, call, new_session, prompt};
use crate::common::rpc::Rpc;
use crate::common::support::Sandbox;

fn init_with_fs(a: &mut Rpc, read: bool, write: bool) {
    let caps = json!({"fs": {"readTextFile": read, "writeTextFile": write}});
    let r = call(
        a,
        "init",
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": caps}),
    );
    assert_eq!(r["result"]["protocolVersion"], 1);
}

/// Waits for the agent's next `method` request and answers it with `result`.
fn answer(a: &mut Rpc, method: &str, result: Value) -> Value {
    let req = a.wait(&json!({"method": method}));
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}));
    req["params"].clone()
}

#[test]
fn acp_edit_and_write_go_through_the_editors_buffers_not_the_disk() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("greet.txt"), "hello world (saved)\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init_with_fs(&mut a, true, true);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "edit both files");
    let greet = sb.work().join("greet.txt").display().to_string();
    let notes = sb.work().join("notes.txt").display().to_string();

    let read = answer(
        &mut a,
        "fs/read_text_file",
        json!({"content": "hello world (unsaved)\n"}),
    );
    assert_eq!(read, json!({"sessionId": session, "path": greet}));
    let wrote = answer(&mut a, "fs/write_text_file", json!({}));
    assert_eq!(
        wrote,
        json!({"sessionId": session, "path": greet, "content": "hello keel (unsaved)\n"}),
        "the edit applies to the buffer's text"
    );
    let edit =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_edit", "status": "completed"}}}));
    let diff = &edit["params"]["update"]["content"][0];
    assert_eq!(diff["type"], "diff");
    assert_eq!(diff["path"], greet.as_str());
    assert_eq!(
        (&diff["oldText"], &diff["newText"]),
        (&json!("world"), &json!("keel"))
    );
    let wrote = answer(&mut a, "fs/write_text_file", Value::Null);
    assert_eq!(
        wrote,
        json!({"sessionId": session, "path": notes, "content": "rewritten\n"})
    );
    a.wait(&json!({"params": {"update": {"toolCallId": "call_write", "status": "completed"}}}));
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (_, _, code) = a.finish();
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(sb.work().join("greet.txt")).unwrap(),
        "hello world (saved)\n",
        "the disk is the editor's to save"
    );
    assert!(!sb.work().join("notes.txt").exists());
}

#[test]
fn acp_an_editor_refusal_fails_the_tool_call_with_its_message() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.txt"), "on disk\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init_with_fs(&mut a, true, false);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "tools please");
    let req = a.wait(&json!({"method": "fs/read_text_file"}));
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"],
        "error": {"code": -32603, "message": "buffer is locked"}}));
    let failed =
        a.wait(&json!({"params": {"update": {"toolCallId": "call_read", "status": "failed"}}}));
    let text = failed["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        text,
        "Cannot read notes.txt: the editor refused: buffer is locked"
    );
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (out, _, code) = a.finish();
    assert_eq!(code, 0);
    assert!(
        !out.iter().any(|l| l.contains("fs/write_text_file")),
        "an editor that does not write is never asked to"
    );
}

#[test]
fn acp_without_fs_capabilities_the_tools_use_the_disk() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("greet.txt"), "hello world\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init_with_fs(&mut a, false, false);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "edit both files");
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (out, _, _) = a.finish();
    assert!(!out.iter().any(|l| l.contains("fs/")));
    assert_eq!(
        std::fs::read_to_string(sb.work().join("greet.txt")).unwrap(),
        "hello keel\n"
    );
}

/// Every `fs/*` request comes after its call's `tool_call` (and after the previous call's end):
/// the requests go straight to the editor while the updates come through the host's events.
#[test]
fn acp_an_fs_request_comes_after_the_tool_call_that_makes_it() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("greet.txt"), "hello world (saved)\n").unwrap();
    let mut a = acp(&sb, &["--permission", "auto"]);
    init_with_fs(&mut a, true, true);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "edit both files");
    let greet = sb.work().join("greet.txt").display().to_string();
    // What each line tells of the order: a call shown, a call ended, a request for a path.
    let mut order: Vec<String> = Vec::new();
    loop {
        let line = a.wait(&json!({"jsonrpc": "2.0"}));
        if line["id"] == "p" {
            break;
        }
        let update = &line["params"]["update"];
        match (line["method"].as_str(), update["sessionUpdate"].as_str()) {
            (Some("session/update"), Some("tool_call")) => {
                order.push(format!("shown {}", update["toolCallId"].as_str().unwrap()));
            }
            (Some("session/update"), Some("tool_call_update"))
                if update["status"] == "completed" =>
            {
                order.push(format!("ended {}", update["toolCallId"].as_str().unwrap()));
            }
            (Some(m @ ("fs/read_text_file" | "fs/write_text_file")), _) => {
                let file = if line["params"]["path"] == greet.as_str() {
                    "greet"
                } else {
                    "notes"
                };
                order.push(format!("{m} {file}"));
                let result = match m {
                    "fs/read_text_file" => json!({"content": "hello world (unsaved)\n"}),
                    _ => json!({}),
                };
                a.send(&json!({"jsonrpc": "2.0", "id": line["id"], "result": result}));
            }
            _ => {}
        }
    }
    assert_eq!(
        order,
        [
            "shown call_edit",
            "fs/read_text_file greet",
            "fs/write_text_file greet",
            "ended call_edit",
            "shown call_write",
            "fs/write_text_file notes",
            "ended call_write",
        ]
    );
    let (_, _, code) = a.finish();
    assert_eq!(code, 0);
}

/// A subagent's `read` goes to the disk, not the editor: the editor is sent none of a child's
/// calls, so a file request of one would wait for a `tool_call` update that never comes.
#[test]
fn acp_a_subagents_reads_go_to_the_disk_not_the_editor() {
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("notes.txt"), "on disk\n").unwrap();
    let script = sb.home().join("task.json");
    let turns = json!({"turns": [
        {"match": "^delegate", "chunks": [{"toolCall": {"id": "t1", "name": "task", "arguments":
            {"description": "read notes", "prompt": "CHILD read notes", "subagent_type": "explore"}}}]},
        {"match": "^CHILD", "chunks": [{"toolCall": {"id": "r1", "name": "read",
            "arguments": {"path": "notes.txt"}}}]},
        {"match": "^CHILD", "chunks": [{"text": "the child read the notes"}]},
        {"match": "^delegate", "chunks": [{"text": "parent done"}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    let mut a = crate::acp::acp_script(&sb, &script, &["--permission", "auto"]);
    init_with_fs(&mut a, true, true);
    let session = new_session(&mut a, &sb);
    prompt(&mut a, "p", &session, "delegate the reading");
    let done = a.wait(&json!({"params": {"update": {"toolCallId": "t1", "status": "completed"}}}));
    assert!(
        done.to_string().contains("the child read the notes"),
        "{done}"
    );
    assert_eq!(a.stop_reason("p"), "end_turn");
    let (_, _, code) = a.finish();
    assert_eq!(code, 0);
}
