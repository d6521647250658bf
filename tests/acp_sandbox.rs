//! What an ACP client sees of the sandbox (issue 30: every front end says so): a session whose
//! sandbox is off is a warning `notice` for a client that advertised `session.notices`, an
//! agent message chunk for any other; a command the sandbox stopped is a `tool_call_update` of
//! its call that names why (the `sandbox_violation` event), not only the result's text.

use serde_json::{json, Value};

use crate::acp::{call, new_session, prompt};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, Sandbox};

/// `keel --mode acp` running `turns` with `extra` flags, initialized with `caps` as the
/// client's capabilities; the session id.
fn start(sb: &Sandbox, turns: Value, caps: Value, extra: &[&str]) -> (Rpc, String) {
    let script = sb.dir.path().join("script.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    let script = script.display().to_string();
    let mut args = scripted_args(&["--mode", "acp"], &script, &["--permission", "auto"]);
    args.extend_from_slice(extra);
    let mut a = Rpc::start_raw(sb, &args);
    let init = json!({"protocolVersion": 1, "clientCapabilities": caps});
    assert_eq!(
        call(&mut a, "init", "initialize", init)["result"]["protocolVersion"],
        1
    );
    let session = new_session(&mut a, sb);
    (a, session)
}

/// The `session/update` payloads among `lines`.
fn updates(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["method"] == "session/update")
        .map(|v| v["params"]["update"].clone())
        .collect()
}

fn of_kind<'a>(updates: &'a [Value], kind: &str) -> Vec<&'a Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

#[test]
fn a_sandbox_that_is_off_reaches_the_acp_client_as_a_notice_or_a_message() {
    for notices in [true, false] {
        let sb = Sandbox::new();
        let caps = match notices {
            true => json!({"session": {"notices": {}}}),
            false => json!({}),
        };
        let turns = json!([{"chunks": [{"text": "hi"}]}]);
        let (mut a, session) = start(&sb, turns, caps, &["--sandbox", "off"]);
        prompt(&mut a, "p1", &session, "hello");
        assert_eq!(a.stop_reason("p1"), "end_turn");
        let (lines, stderr, code) = a.finish();
        assert_eq!(code, 0, "{stderr}");
        let all = updates(&lines);
        let said = |u: &&Value| {
            let text = match u["sessionUpdate"].as_str() {
                Some("notice") => u["title"].as_str(),
                _ => u["content"]["text"].as_str(),
            };
            text.unwrap_or_default().contains("the sandbox is off")
        };
        let notice: Vec<_> = of_kind(&all, "notice").into_iter().filter(said).collect();
        let chunk: Vec<_> = of_kind(&all, "agent_message_chunk")
            .into_iter()
            .filter(said)
            .collect();
        if notices {
            assert_eq!(notice.len(), 1, "{lines:?}");
            assert_eq!(notice[0]["severity"], "warning", "{lines:?}");
            assert!(chunk.is_empty(), "one way, not two: {lines:?}");
        } else {
            assert!(notice.is_empty(), "not advertised: {lines:?}");
            assert_eq!(chunk.len(), 1, "{lines:?}");
        }
    }
}

#[test]
fn a_command_the_sandbox_stopped_is_a_tool_call_update_that_says_why() {
    let sb = Sandbox::new();
    let call_ = json!({"toolCall": {"id": "call_0", "name": "bash",
        "arguments": {"command": "echo x > /usr/keel-probe"}}});
    let turns = json!([{"chunks": [call_]}, {"chunks": [{"text": "done"}]}]);
    let (mut a, session) = start(&sb, turns, json!({}), &[]);
    prompt(&mut a, "p1", &session, "write outside");
    assert_eq!(a.stop_reason("p1"), "end_turn");
    let (lines, stderr, code) = a.finish();
    assert_eq!(code, 0, "{stderr}");
    let all = updates(&lines);
    let said = "sandbox stopped a command (outside writable roots): /usr/keel-probe";
    let texts = |u: &Value| -> Vec<String> {
        u["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter_map(|c| c["content"]["text"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let updates: Vec<&Value> = of_kind(&all, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "call_0")
        .collect();
    assert!(
        updates.iter().any(|u| texts(u).iter().any(|t| t == said)),
        "{lines:?}"
    );
    // The call's last update (its result) keeps it, beside the result's own text.
    let last = updates.last().unwrap();
    assert_eq!(last["status"], "failed", "{last}");
    let text = texts(last);
    assert!(text.iter().any(|t| t == said), "{last}");
    assert!(
        text.iter().any(|t| t.contains("Read-only file system")),
        "{last}"
    );
}
