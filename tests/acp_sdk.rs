//! Interop with an ACP client keel did not write: the official TypeScript SDK
//! (`@agentclientprotocol/sdk`, pinned in `.ci/run`, which installs it with npm when npm is
//! there and names its entry point in `KEEL_ACP_SDK`) drives `keel --mode acp` through
//! `scripts/acp_sdk_client.mjs`, which also serves keel its file system (`fs/*`). Without it
//! the test says it was skipped.

use serde_json::{json, Value};

use crate::common::support::{fixture, root, Sandbox, CLOCK};

fn sdk() -> Option<String> {
    let path = std::env::var("KEEL_ACP_SDK")
        .ok()
        .filter(|p| std::path::Path::new(p).is_file());
    if path.is_none() {
        crate::common::support::skipped(
            "the ACP SDK interop: KEEL_ACP_SDK is not set (.ci/run sets it when npm is available)",
        );
    }
    path
}

#[test]
fn the_typescript_sdk_client_initializes_prompts_answers_a_permission_and_serves_its_files() {
    let Some(entry) = sdk() else { return };
    let sb = Sandbox::new();
    std::fs::write(sb.work().join("doomed.txt"), "x").unwrap();
    std::fs::write(sb.work().join("greet.txt"), "hello world (saved)\n").unwrap();
    let out = std::process::Command::new("node")
        .arg(root().join("scripts/acp_sdk_client.mjs"))
        .args([&entry, env!("CARGO_BIN_EXE_keel"), &fixture("acp.json")])
        .arg(sb.work())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.dir.path())
        .env("KEEL_HOME", sb.home())
        .env("KEEL_TEST_CLOCK", CLOCK)
        .env("KEEL_TEST_SEED", sb.seed.to_string())
        .env("TMPDIR", sb.dir.path())
        .current_dir(sb.work())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["protocolVersion"], 1);
    assert_eq!(summary["agentName"], "keel");
    assert_eq!(summary["loadSession"], true);
    assert_eq!(
        summary["stopReasons"],
        json!(["end_turn", "end_turn", "end_turn"])
    );
    assert_eq!(summary["listed"], json!([true]));
    assert_eq!(
        summary["updates"],
        // session/new advertises `/rewind` (and any prompt templates) first.
        json!([
            "available_commands_update",
            "agent_thought_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "usage_update",
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "agent_message_chunk",
            "usage_update"
        ])
    );
    let options = json!(["allow_once", "allow_always", "reject_once", "reject_always"]);
    assert_eq!(
        summary["permissions"],
        json!([
            {"toolCallId": "call_rm1", "kind": "execute", "options": options},
            {"toolCallId": "call_edit", "kind": "edit", "options": options},
            {"toolCallId": "call_write", "kind": "edit", "options": options},
        ])
    );
    assert_eq!(
        summary["fsCalls"],
        // Each approval's preview is the diff against the editor's buffer as it is when the
        // dialog opens (a read); the edit tool reads it again when it runs (it may have changed).
        json!([
            {"method": "read", "path": "greet.txt"},
            {"method": "read", "path": "greet.txt"},
            {"method": "write", "path": "greet.txt", "content": "hello keel (unsaved)\n"},
            {"method": "read", "path": "notes.txt"},
            {"method": "write", "path": "notes.txt", "content": "rewritten\n"},
        ]),
        "edits work on the editor's buffers"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("greet.txt")).unwrap(),
        "hello world (saved)\n"
    );
    assert_eq!(summary["exitCode"], 0);
    assert!(
        !sb.work().join("doomed.txt").exists(),
        "the allowed call ran"
    );
}
