//! MCP servers in the daemon: sessions whose server configs are identical share one server
//! (one child process), a session with a different config gets its own, and a shared server
//! stops with the last session that uses it. Against the workspace's stdio fixture server.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::daemon::{is_event, Conn, Daemon};
use crate::common::support::{scripted_args, Sandbox};
use crate::mcp::{gone_within, mcp_config, script};

/// Opens and attaches a session in `cwd` with the MCP config `cfg`, running `script`.
fn open_in(c: &mut Conn, cwd: &Path, id: &str, script: &str, cfg: &str) {
    let args = scripted_args(&[], script, &["--mcp-config", cfg, "--session-id", id]);
    let r = c.call(
        "session/open",
        json!({"cwd": cwd, "spec": crate::common::daemon::spec(&args), "env": {"KEEL_TEST_SEED": "7"}}),
    );
    assert_eq!(r["result"]["sessionId"], id, "{r}");
    let r = c.call("session/attach", json!({"sessionId": id}));
    assert!(r.get("result").is_some(), "{r}");
}

/// Prompts `id` (whose script calls the server's `echo`) and returns the tool's result text.
fn echo(c: &mut Conn, id: &str) -> String {
    let r = c.call("prompt", json!({"sessionId": id, "message": "go"}));
    assert_eq!(r["result"]["disposition"], "started", "{r}");
    let notes = c.notes_until(is_event("agent_settled"));
    let end: Vec<&Value> = notes
        .iter()
        .filter(|v| v["params"]["sessionId"] == id)
        .map(|v| &v["params"]["event"])
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    assert_eq!(end.len(), 1, "{notes:?}");
    assert_eq!(end[0]["isError"], false, "{:?}", end[0]);
    end[0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

fn pids(log: &Path) -> Vec<u32> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn daemon_sessions_with_identical_mcp_configs_share_one_server_until_the_last_closes() {
    let sb = Sandbox::new();
    let log = sb.dir.path().join("pids.log");
    let log_arg = log.display().to_string();
    let cfg = mcp_config(&sb, "mcp", &[("fx", &["--pid-log", &log_arg])]);
    // Four prompts, each a call then an answer.
    let pair = [
        json!({"match": "^go", "chunks": [{"toolCall": {"id": "c1", "name": "mcp__fx__echo", "arguments": {"text": "hi"}}}]}),
        json!({"match": "^go", "chunks": [{"text": "done"}]}),
    ];
    let turns: Vec<Value> = pair.iter().cycle().take(8).cloned().collect();
    let turns = Value::Array(turns);
    let script = script(&sb, turns);
    let other = sb.dir.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();

    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let mut c = d.connect();
    c.hello(true);
    open_in(&mut c, &sb.work(), "one", &script, &cfg);
    open_in(&mut c, &sb.work(), "two", &script, &cfg);
    assert_eq!(echo(&mut c, "one"), "hi");
    assert_eq!(echo(&mut c, "two"), "hi");
    let shared = pids(&log);
    assert_eq!(shared.len(), 1, "one server for both sessions: {shared:?}");

    // Another directory is another config (the server runs in the session's directory).
    open_in(&mut c, &other, "three", &script, &cfg);
    assert_eq!(echo(&mut c, "three"), "hi");
    let all = pids(&log);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_ne!(all[0], all[1]);

    // The shared server outlives the first session and stops with the last.
    let r = c.call("session/close", json!({"sessionId": "one"}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(echo(&mut c, "two"), "hi");
    assert!(
        !gone_within(shared[0], Duration::ZERO),
        "still used by session two"
    );
    let r = c.call("session/close", json!({"sessionId": "two"}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        gone_within(shared[0], Duration::from_secs(10)),
        "the server of the closed sessions still runs"
    );
    assert!(
        !gone_within(all[1], Duration::ZERO),
        "session three's server is untouched"
    );
    assert_eq!(pids(&log).len(), 2, "no server was started again");
}
