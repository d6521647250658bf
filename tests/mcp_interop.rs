//! Interop with the MCP reference server `@modelcontextprotocol/server-everything` (pinned in
//! `.ci/run`, which installs it with npm when npm is there and names its entry point in
//! `KEEL_MCP_EVERYTHING`): keel lists its tools, calls `echo` and gets `get-tiny-image`'s
//! image. Without it the test says it was skipped.

use serde_json::{json, Value};

use crate::common::support::{strs, Sandbox};

fn everything() -> Option<String> {
    let path = std::env::var("KEEL_MCP_EVERYTHING")
        .ok()
        .filter(|p| std::path::Path::new(p).is_file());
    if path.is_none() {
        crate::common::support::skipped("the MCP interop: KEEL_MCP_EVERYTHING is not set (.ci/run sets it when npm is available)");
    }
    path
}

#[test]
fn the_reference_server_lists_echoes_and_returns_an_image() {
    let Some(entry) = everything() else { return };
    let sb = Sandbox::new();
    std::fs::write(
        sb.work().join("mcp.json"),
        json!({"mcpServers": {"everything": {"command": "node", "args": [entry]}}}).to_string(),
    )
    .unwrap();
    let run = sb.run(&[
        "mcp",
        "tools",
        "everything",
        "--json",
        "--mcp-config",
        "mcp.json",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let names = strs(&v["tools"], "name");
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    assert!(
        names.contains(&"mcp__everything__get-tiny-image"),
        "{names:?}"
    );
    let script = sb.work().join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"chunks": [
                {"toolCall": {"id": "c0", "name": "mcp__everything__echo", "arguments": {"message": "keel says hi"}}},
                {"toolCall": {"id": "c1", "name": "mcp__everything__get-tiny-image", "arguments": {}}}]},
            {"chunks": [{"text": "done"}]}]})
        .to_string(),
    )
    .unwrap();
    let s = script.display().to_string();
    let run = crate::mcp::run_with(&sb, &s, "mcp.json", &[]);
    assert_eq!(run.code, 0, "{run}");
    let ends: Vec<Value> = run
        .stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], false, "{run}");
    assert!(
        ends[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("keel says hi"),
        "{run}"
    );
    let image = ends[1]["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image");
    assert_eq!(image.expect("an image block")["mimeType"], "image/png");
}
