//! The binary against local OpenAI-compatible servers that are strict, endless, silent or
//! minimal (tests/http_server.rs on 127.0.0.1): the request shape llama.cpp accepts, the caps
//! on a streamed response, keep-alive pings that are not progress, and asking the server which
//! models it serves.

use std::time::Duration;

use crate::http_server::{Reply, Server};
use crate::support::{root, Sandbox};

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers").join(path)).unwrap()
}

/// `keel --base-url SERVER --model m ARGS...` with retries after 1 ms, so a failure that is
/// retried cannot make a test slow.
fn keel(sb: &Sandbox, server: &Server, args: &[&str]) -> crate::support::Run {
    let base = server.base_url();
    let mut all = vec!["--base-url", base.as_str(), "--model", "m"];
    all.extend_from_slice(args);
    let out = sb
        .cmd(&all)
        .env("KEEL_RETRY_BASE_MS", "1")
        .output()
        .unwrap();
    sb.finish(out)
}

/// The assistant messages of a recorded Chat Completions request.
fn assistant_messages(body: &serde_json::Value) -> Vec<serde_json::Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .cloned()
        .collect()
}

/// Regression: a turn of tool calls alone was sent back with `content: null`, which llama.cpp's
/// server answers with HTTP 500, so no tool loop could finish there and such a session could
/// not be continued.
#[test]
fn tool_call_only_turn_is_sent_with_empty_content_so_a_strict_server_accepts_the_loop() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::sse(&bytes("openai/parallel_tools.sse")).strict(),
        Reply::sse(&bytes("openai/text.sse")).strict(),
    ]);
    let run = keel(&sb, &server, &["--json", "look around"]);
    assert_eq!(run.code, 0, "{run}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "no request was refused and retried: {run}");
    let second = assistant_messages(&seen[1].json());
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0]["content"], "", "{second:?}");
    assert_eq!(second[0]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(
        run.stdout_lines().last().unwrap()["finalText"],
        "Hello from the local model. ✓ café 日本"
    );

    // The stored session, continued against the same strict server, is accepted too.
    let server = Server::start(vec![Reply::sse(&bytes("openai/text.sse")).strict()]);
    let run = keel(&sb, &server, &["--json", "--continue", "and now?"]);
    assert_eq!(run.code, 0, "{run}");
    let body = server.seen()[0].json();
    assert_eq!(assistant_messages(&body)[0]["content"], "");
}

/// The strict reply mode really refuses `null` content (the test above would prove nothing if
/// it accepted everything).
#[test]
fn the_strict_test_server_refuses_null_content() {
    let server = Server::start(vec![Reply::sse(&bytes("openai/text.sse")).strict()]);
    let body = r#"{"messages":[{"role":"assistant","content":null,"tool_calls":[]}]}"#;
    let response = raw_post(server.port, "/v1/chat/completions", body);
    assert!(response.starts_with("HTTP/1.1 500"), "{response}");
    assert!(response.contains("got null"), "{response}");
    assert!(response.contains(crate::http_server::NULL_CONTENT_ERROR));
}

/// A bare HTTP/1.1 POST over a socket; the whole response as text.
fn raw_post(port: u16, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The `result` lines of a JSON-mode run.
fn results(run: &crate::support::Run) -> Vec<serde_json::Value> {
    run.stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "result")
        .collect()
}

/// Regression: a server that sent one endless SSE line made keel buffer it until memory ran
/// out (3.7 GB, then abort with exit 134). The line is refused at the 16 MiB cap.
#[test]
fn an_endless_sse_line_fails_with_stream_too_large_at_16_mib() {
    let sb = Sandbox::new();
    let prefix = br#"data: {"choices":[{"delta":{"content":""#;
    // 17 MiB of one line in 64 KiB chunks, then the response ends (the server stops by itself).
    let reply = Reply::sse(prefix).repeating(&[b'x'; 64 * 1024], 17 * 16, Duration::ZERO);
    let server = Server::start(vec![reply]);
    let run = keel(&sb, &server, &["--json", "hi"]);
    assert_eq!(run.code, 1, "{run}");
    let results = results(&run);
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(results[0]["error"]["kind"], "stream_too_large", "{run}");
    let message = results[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("SSE line over the cap of 16 MiB"),
        "{message}"
    );
    assert_eq!(server.seen().len(), 1, "not retried");
}

/// Regression: `: ping` comments reset the idle timer, so a server that only pinged kept a run
/// waiting forever. Comments keep the connection open but are not progress.
#[test]
fn a_server_that_only_sends_pings_hits_the_idle_timeout() {
    let sb = Sandbox::new();
    // Pings every 5 ms for at most 10 s, never any data.
    let reply = Reply::sse(b"").repeating(b": ping\n\n", 2000, Duration::from_millis(5));
    let server = Server::start(vec![reply]);
    let run = keel(
        &sb,
        &server,
        &[
            "--json",
            "--idle-timeout",
            "0.5",
            "--max-retries",
            "0",
            "hi",
        ],
    );
    assert_eq!(run.code, 1, "{run}");
    let results = results(&run);
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(results[0]["error"]["kind"], "idle_timeout", "{run}");
    let message = results[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no data for 0.5s (only keep-alive comments)"),
        "{message}"
    );
    server
        .hangups
        .recv_timeout(Duration::from_secs(30))
        .expect("keel closed the connection");
}
