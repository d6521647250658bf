//! `keel mcp list [--json]` and `keel mcp tools NAME`: each server's transport, status, tool
//! count and error (exit 1 when one failed), one server's tools as the model sees them, and an
//! unknown name as a usage error listing the configured ones.

use serde_json::json;

use crate::common::support::{snap, strs, Sandbox, BUILT_IN_TOOLS};
use crate::mcp::FIXTURE;

fn config(sb: &Sandbox) {
    std::fs::write(
        sb.work().join("mcp.json"),
        json!({"mcpServers": {
            "fx": {"command": FIXTURE},
            "missing": {"command": "/nonexistent/keel-mcp-server"}}})
        .to_string(),
    )
    .unwrap();
}

#[test]
fn mcp_list_reports_each_server_and_fails_when_one_did() {
    let sb = Sandbox::new();
    config(&sb);
    let run = sb.run(&["mcp", "list", "--mcp-config", "mcp.json"]);
    assert_eq!(run.code, 1);
    snap("mcp_list", &run.to_string());
    let run = sb.run(&["mcp", "list", "--json", "--mcp-config", "mcp.json"]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["servers"][0]["name"], "fx");
    assert_eq!(v["servers"][0]["status"], "ready");
    assert_eq!(v["servers"][0]["tools"], 10);
    assert_eq!(v["servers"][0]["protocolVersion"], "2025-11-25");
    assert_eq!(v["servers"][1]["status"], "failed");
    assert!(v["servers"][1]["error"]
        .as_str()
        .unwrap()
        .contains("cannot start"));
}

#[test]
fn mcp_tools_lists_one_servers_tools_and_refuses_an_unknown_name() {
    let sb = Sandbox::new();
    config(&sb);
    let run = sb.run(&["mcp", "tools", "fx", "--mcp-config", "mcp.json"]);
    assert_eq!(run.code, 0, "{run}");
    snap("mcp_tools", &run.to_string());
    let run = sb.run(&["mcp", "tools", "nope", "--mcp-config", "mcp.json"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("no MCP server named `nope`"), "{run}");
    run.assert_stderr("configured servers: fx, missing");
}

#[test]
fn debug_prompt_lists_the_mcp_tools_a_run_would_offer() {
    let sb = Sandbox::new();
    config(&sb);
    let run = sb.run(&["debug", "prompt", "--json", "--mcp-config", "mcp.json"]);
    assert_eq!(run.code, 0, "{run}");
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let names = strs(&v["tools"], "name");
    assert_eq!(names[..8], BUILT_IN_TOOLS);
    // `bash`'s job tools (Claude's shapes for the default model), then `task`.
    assert_eq!(names[8..10], ["bash_output", "bash_kill"]);
    assert_eq!(names[10], "task");
    assert!(names.contains(&"mcp__fx__echo"), "{names:?}");
    assert_eq!(
        names.len(),
        11 + 10,
        "the fixture's ten tools after the built-ins: {names:?}"
    );
    let text = sb.run(&["debug", "prompt", "--mcp-config", "mcp.json"]);
    assert!(text.stdout.contains("mcp__fx__echo"), "{text}");
}
