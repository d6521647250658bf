//! A small MCP server on stdio for keel's tests and benchmarks (never shipped as a feature):
//! legacy-era JSON-RPC lines (2025-11-25; `server/discover` gets -32601, as the npm reference
//! servers answer). Written by hand, independent of rmcp, so the client is tested against
//! another implementation. Its stdout is the protocol, hence the allowed stdout lints.
//!
//! Knobs (arguments): `--tools N` (N extra tools `t0…`), `--collide` (tools `search_a` and
//! `search.a`), `--slow-init MS`, `--hang` (never answers `initialize`), `--crash-on-call`
//! (exits when a tool is called), `--exit-after-list` (exits right after the first
//! `tools/list`), `--pid-file PATH` (writes its pid there), `--pid-log PATH` (appends
//! its pid and a newline there). Tools: `echo {text}`, `look {text}` (readOnlyHint), `image`, `resources`,
//! `fail`, `env {name}`, `progress {steps}`, `slow {ms}`, `big {bytes}`, `add_tool` (adds `added`
//! and sends `notifications/tools/list_changed`).
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

struct Knobs {
    extra: usize,
    collide: bool,
    slow_init_ms: u64,
    hang: bool,
    crash_on_call: bool,
    exit_after_list: bool,
}

fn knobs() -> Knobs {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |flag: &str| -> u64 {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let has = |flag: &str| args.iter().any(|a| a == flag);
    Knobs {
        extra: num("--tools") as usize,
        collide: has("--collide"),
        slow_init_ms: num("--slow-init"),
        hang: has("--hang"),
        crash_on_call: has("--crash-on-call"),
        exit_after_list: has("--exit-after-list"),
    }
}

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, v: Value) {
    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
    let _ = writeln!(o, "{v}");
    let _ = o.flush();
}

fn tool(name: &str, description: &str, read_only: bool) -> Value {
    let mut t = json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    });
    if read_only {
        t["annotations"] = json!({"readOnlyHint": true});
    }
    t
}

fn tools(k: &Knobs, added: bool) -> Vec<Value> {
    let mut v = vec![
        tool("echo", "Echoes `text`", false),
        tool("look", "Echoes `text`, read-only", true),
        tool("image", "Returns a 1x1 PNG", false),
        tool(
            "resources",
            "Returns a resource link and an embedded resource",
            false,
        ),
        tool("fail", "Always fails", false),
        tool(
            "env",
            "Returns the value of environment variable `name`",
            false,
        ),
        tool("progress", "Sends `steps` progress notifications", false),
        tool("slow", "Answers after `ms` milliseconds", false),
        tool("big", "Returns `bytes` bytes of text", false),
        tool("add_tool", "Adds the tool `added`", false),
    ];
    if k.collide {
        v.push(tool("search_a", "Collides with search.a", false));
        v.push(tool("search.a", "Collides with search_a", false));
    }
    for i in 0..k.extra {
        v.push(tool(&format!("t{i}"), "An extra tool", false));
    }
    if added {
        v.push(tool("added", "Added by add_tool", false));
    }
    v
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn text(t: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": t.into()}]})
}

fn call(
    name: &str,
    args: &Value,
    token: Option<Value>,
    out: &Out,
    cancelled: &AtomicBool,
) -> Value {
    let s = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let n = |k: &str| args.get(k).and_then(Value::as_u64).unwrap_or(0);
    match name {
        "echo" | "look" => text(s("text")),
        "image" => json!({"content": [
            {"type": "text", "text": "a pixel"},
            {"type": "image", "data": PNG, "mimeType": "image/png"}]}),
        "resources" => json!({"content": [
            {"type": "resource_link", "uri": "file:///r.txt", "name": "r.txt", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "file:///e.txt", "text": "embedded text"}}],
            "structuredContent": {"count": 2}}),
        "fail" => json!({"content": [{"type": "text", "text": "it failed"}], "isError": true}),
        "env" => text(std::env::var(s("name")).unwrap_or_else(|_| "<unset>".into())),
        "progress" => {
            let steps = n("steps");
            for i in 1..=steps {
                if let Some(t) = &token {
                    send(
                        out,
                        json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": t, "progress": i, "total": steps, "message": format!("step {i}")}}),
                    );
                }
                std::thread::sleep(Duration::from_millis(n("every")));
            }
            text(format!("{steps} steps done"))
        }
        "slow" => {
            let end = std::time::Instant::now() + Duration::from_millis(n("ms"));
            while std::time::Instant::now() < end {
                if cancelled.load(Ordering::SeqCst) {
                    eprintln!("fixture: call cancelled");
                    return text("cancelled");
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            text("slow done")
        }
        "big" => text("x".repeat(n("bytes") as usize)),
        other => {
            json!({"content": [{"type": "text", "text": format!("unknown tool {other}")}], "isError": true})
        }
    }
}

fn main() {
    let k = knobs();
    eprintln!("fixture: started");
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--pid-file") {
        if let Some(path) = args.get(i + 1) {
            let _ = std::fs::write(path, std::process::id().to_string());
        }
    }
    if let Some(i) = args.iter().position(|a| a == "--pid-log") {
        if let Some(path) = args.get(i + 1) {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path);
            let _ = log.and_then(|mut f| writeln!(f, "{}", std::process::id()));
        }
    }
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let added = Arc::new(AtomicBool::new(false));
    let cancelled = Arc::new(AtomicBool::new(false));
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let id = msg.get("id").cloned();
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match method {
            "initialize" => {
                if k.hang {
                    continue;
                }
                std::thread::sleep(Duration::from_millis(k.slow_init_ms));
                send(
                    &out,
                    reply(json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": true}},
                    "serverInfo": {"name": "keel-mcp-fixture", "version": "1"}})),
                );
            }
            "notifications/initialized" => {}
            "notifications/cancelled" => cancelled.store(true, Ordering::SeqCst),
            "ping" => send(&out, reply(json!({}))),
            "tools/list" => {
                send(
                    &out,
                    reply(json!({"tools": tools(&k, added.load(Ordering::SeqCst))})),
                );
                if k.exit_after_list {
                    std::process::exit(3);
                }
            }
            "tools/call" => {
                if k.crash_on_call {
                    eprintln!("fixture: crashing");
                    std::process::exit(9);
                }
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if name == "add_tool" {
                    added.store(true, Ordering::SeqCst);
                    send(
                        &out,
                        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                    );
                    send(&out, reply(text("added")));
                    continue;
                }
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                let token = params.pointer("/_meta/progressToken").cloned();
                let (out, cancelled) = (out.clone(), cancelled.clone());
                std::thread::spawn(move || {
                    let result = call(&name, &args, token, &out, &cancelled);
                    send(&out, json!({"jsonrpc": "2.0", "id": id, "result": result}));
                });
            }
            _ if id.is_some() => send(
                &out,
                json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("method not found: {method}")}}),
            ),
            _ => {}
        }
    }
}
