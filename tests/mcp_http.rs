//! MCP over Streamable HTTP and per-call limits: a small legacy-era (2025-11-25) MCP server on
//! 127.0.0.1:0 written here (POST JSON-RPC, `Mcp-Session-Id`, 202 for notifications, 405 for
//! GET), reached through `"type": "http"` with configured headers; and the stdio fixture's slow
//! calls timing out, progress keeping a call alive, and an abort cancelling one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};
use crate::mcp::script;
use crate::mcp::FIXTURE;

type Headers = Vec<(String, String)>;

/// What the HTTP server saw: each request's method line, JSON-RPC method and headers.
#[derive(Default)]
struct Seen {
    requests: Vec<(String, String, Headers)>,
}

fn serve(listener: TcpListener, seen: Arc<Mutex<Seen>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { return };
        let seen = seen.clone();
        std::thread::spawn(move || handle(stream, &seen));
    }
}

fn handle(mut stream: TcpStream, seen: &Mutex<Seen>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                len = v.parse().unwrap();
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = msg["method"].as_str().unwrap_or("").to_string();
    seen.lock()
        .unwrap()
        .requests
        .push((first.trim().to_string(), method.clone(), headers));
    let id = msg["id"].clone();
    let reply = |v: Value| json!({"jsonrpc": "2.0", "id": id, "result": v});
    let (status, extra, body) = if !first.starts_with("POST") {
        ("405 Method Not Allowed", "", String::new())
    } else {
        match method.as_str() {
            "initialize" => (
                "200 OK",
                "Mcp-Session-Id: s1\r\n",
                reply(json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "http-test", "version": "1"}}))
                .to_string(),
            ),
            "tools/list" => (
                "200 OK",
                "",
                reply(json!({"tools": [{
                "name": "shout", "description": "Upper-cases `text`",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}))
                .to_string(),
            ),
            "tools/call" => {
                let t = msg["params"]["arguments"]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_uppercase();
                (
                    "200 OK",
                    "",
                    reply(json!({"content": [{"type": "text", "text": t}]})).to_string(),
                )
            }
            _ if msg.get("id").is_none() => ("202 Accepted", "", String::new()),
            _ => (
                "200 OK",
                "",
                json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}})
                .to_string(),
            ),
        }
    };
    let ctype = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\n{ctype}{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn one_call(sb: &Sandbox, name: &str, args: Value) -> String {
    script(
        sb,
        json!([{"chunks": [{"toolCall": {"id": "c0", "name": name, "arguments": args}}]},
               {"chunks": [{"text": "done"}]}]),
    )
}

fn end_of(stdout: &str) -> Value {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["type"] == "tool_execution_end")
        .unwrap_or_else(|| panic!("no tool_execution_end in {stdout}"))
}

#[test]
fn an_http_server_is_called_with_its_session_and_configured_headers() {
    let sb = Sandbox::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s2 = seen.clone();
    std::thread::spawn(move || serve(listener, s2));
    let cfg = sb.work().join("http.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"web": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
            "headers": {"Authorization": "Bearer ${WEB_TOKEN}"}}}})
        .to_string(),
    )
    .unwrap();
    let s = one_call(&sb, "mcp__web__shout", json!({"text": "hi"}));
    let out = sb
        .cmd(&scripted_args(
            &["--json", "--no-session"],
            &s,
            &["--mcp-config", cfg.to_str().unwrap(), "go"],
        ))
        .env("WEB_TOKEN", "tok")
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    let end = end_of(&run.stdout);
    assert_eq!(end["result"]["content"][0]["text"], "HI", "{run}");
    let seen = seen.lock().unwrap();
    let call = seen
        .requests
        .iter()
        .find(|r| r.1 == "tools/call")
        .expect("a tools/call");
    let has = |k: &str, v: &str| call.2.iter().any(|(hk, hv)| hk == k && hv == v);
    assert!(has("authorization", "Bearer tok"), "{:?}", call.2);
    assert!(
        has("mcp-session-id", "s1"),
        "the session id comes back: {:?}",
        call.2
    );
    assert!(
        seen.requests.iter().any(|r| r.1 == "initialize"),
        "fell back to the legacy handshake"
    );
}

fn fixture_config(sb: &Sandbox, extra: Value) -> String {
    let mut entry = json!({"command": FIXTURE});
    for (k, v) in extra.as_object().unwrap() {
        entry[k] = v.clone();
    }
    let path = sb.work().join("fx.json");
    std::fs::write(&path, json!({"mcpServers": {"fx": entry}}).to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn a_silent_call_times_out_but_progress_keeps_one_alive() {
    let sb = Sandbox::new();
    let cfg = fixture_config(&sb, json!({"toolTimeoutSec": 0.4}));
    let s = script(
        &sb,
        json!([{"chunks": [
            {"toolCall": {"id": "c0", "name": "mcp__fx__slow", "arguments": {"ms": 5000}}},
            {"toolCall": {"id": "c1", "name": "mcp__fx__progress", "arguments": {"steps": 6, "every": 150}}}]},
            {"chunks": [{"text": "done"}]}]),
    );
    let started = Instant::now();
    let run = crate::mcp::run_with(&sb, &s, &cfg, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the slow call was not waited for"
    );
    let ends: Vec<Value> = run
        .stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends[0]["isError"], true);
    let t = ends[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(t.contains("timed out after 0.4s without progress"), "{t}");
    assert_eq!(
        ends[1]["isError"], false,
        "0.9 s of progress outlives a 0.4 s timeout"
    );
    assert_eq!(ends[1]["result"]["content"][0]["text"], "6 steps done");
}

#[test]
fn an_abort_cancels_a_running_mcp_call() {
    let sb = Sandbox::new();
    let cfg = fixture_config(&sb, json!({}));
    let s = one_call(&sb, "mcp__fx__slow", json!({"ms": 20000}));
    let started = Instant::now();
    let run = sb.interrupt_json(
        &s,
        &["--no-session", "--mcp-config", &cfg, "go"],
        "\"tool_execution_start\"",
        Signal::SIGINT,
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{run}");
    assert_eq!(run.code, 130, "{run}");
    let end = end_of(&run.stdout);
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("aborted"),
        "{run}"
    );
}
