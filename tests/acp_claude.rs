//! Issue 46, point 4, in ACP: what keel leaves out of a Claude Code settings file is said once
//! at the session's start, as it is in print mode (stderr), the TUI and RPC (`notify`): a
//! warning `notice` for a client that advertised `session.notices`, else an agent message
//! chunk of its own.

use serde_json::{json, Value};

use crate::acp::{call, new_session, prompt};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, write_json, Sandbox};

/// The `session/update` payloads among `lines`, with the text each shows.
fn shown(lines: &[String]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["method"] == "session/update")
        .map(|v| {
            let u = &v["params"]["update"];
            let text = match u["sessionUpdate"].as_str() {
                Some("notice") => u["title"].as_str(),
                _ => u["content"]["text"].as_str(),
            };
            let kind = u["sessionUpdate"].as_str().unwrap_or_default();
            (kind.to_string(), text.unwrap_or_default().to_string())
        })
        .collect()
}

#[test]
fn what_keel_ignores_in_a_claude_file_is_a_notice_in_acp_mode() {
    for notices in [true, false] {
        let sb = Sandbox::new();
        // The user's Claude file, as Claude Code's users keep it: a key keel does not use.
        let user = sb.dir.path().join(".claude/settings.json");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        write_json(&user, &json!({"apiKeyHelper": "~/.claude/key.sh"}));
        let script = sb.dir.path().join("script.json");
        let turns = json!([{"repeat": true, "chunks": [{"text": "hi"}]}]);
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        let script = script.display().to_string();
        let args = scripted_args(&["--mode", "acp"], &script, &["--permission", "auto"]);
        let mut a = Rpc::start_raw(&sb, &args);
        let caps = match notices {
            true => json!({"session": {"notices": {}}}),
            false => json!({}),
        };
        let init = json!({"protocolVersion": 1, "clientCapabilities": caps});
        call(&mut a, "init", "initialize", init);
        let session = new_session(&mut a, &sb);
        for id in ["p1", "p2"] {
            prompt(&mut a, id, &session, "hello");
            assert_eq!(a.stop_reason(id), "end_turn");
        }
        let (lines, stderr, code) = a.finish();
        assert_eq!(code, 0, "{stderr}");
        let said: Vec<_> = shown(&lines)
            .into_iter()
            .filter(|(_, text)| text.contains("keel does not use (apiKeyHelper)"))
            .collect();
        let kind = if notices {
            "notice"
        } else {
            "agent_message_chunk"
        };
        assert_eq!(said.len(), 1, "once, at the start: {lines:?}");
        assert_eq!(said[0].0, kind, "{lines:?}");
        assert!(said[0].1.contains(".claude/settings.json"), "{lines:?}");
    }
}
