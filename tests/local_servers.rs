//! The binary against local OpenAI-compatible servers that are strict, endless, silent or
//! minimal (tests/common/http_server.rs on 127.0.0.1): the request shape llama.cpp accepts, the caps
//! on a streamed response and on an error body, keep-alive pings that are not progress, and
//! asking the server which models it serves.

use std::time::Duration;

use crate::common::http_server::{End, Reply, Server};
use crate::common::support::{root, Sandbox};

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers").join(path)).unwrap()
}

/// `keel --base-url SERVER --model m ARGS...` with retries after 1 ms, so a failure that is
/// retried cannot make a test slow.
fn keel(sb: &Sandbox, server: &Server, args: &[&str]) -> crate::common::support::Run {
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
    assert!(response.contains(crate::common::http_server::NULL_CONTENT_ERROR));
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
fn results(run: &crate::common::support::Run) -> Vec<serde_json::Value> {
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

/// An error response whose body never ends is read up to 64 KiB, not to its end: the run
/// fails at once with what the server said instead of waiting for the idle timeout.
#[test]
fn an_endless_error_body_is_read_only_up_to_its_cap() {
    let sb = Sandbox::new();
    let piece = "server busy; ".repeat(300);
    let reply = Reply::json(500, "")
        .repeating(piece.as_bytes(), 1000, Duration::ZERO)
        .ending(End::Stall);
    let server = Server::start(vec![reply]);
    let run = keel(
        &sb,
        &server,
        &["--json", "--max-retries", "0", "--idle-timeout", "30", "hi"],
    );
    assert_eq!(run.code, 1, "{run}");
    let result = results(&run).remove(0);
    assert_eq!(result["error"]["kind"], "server_error", "{run}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("openai (m): HTTP 500: server busy; server busy;"),
        "{message}"
    );
    assert!(
        message.ends_with('…'),
        "clipped to 500 characters: {message}"
    );
    server
        .hangups
        .recv_timeout(Duration::from_secs(30))
        .expect("keel closed the connection instead of reading on");
}

// ---- asking the server which models it serves -------------------------------------------

fn model_list(ids: &[&str]) -> Reply {
    let data: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "llamacpp"}))
        .collect();
    Reply::json(
        200,
        &serde_json::json!({"object": "list", "data": data}).to_string(),
    )
}

/// A run of the real binary with extra environment variables.
fn run_env(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> crate::common::support::Run {
    let mut cmd = sb.cmd(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    sb.finish(cmd.output().unwrap())
}

/// Regression: `--base-url` without `--model` sent OpenAI's default `gpt-4.1` to a server that
/// never heard of it. The server is asked; its one model is used.
#[test]
fn base_url_without_model_uses_the_one_model_the_server_serves() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        model_list(&["qwen2.5-coder-7b"]),
        Reply::sse(&bytes("openai/text.sse")),
    ]);
    let run = sb.run(&["--base-url", &server.base_url(), "--json", "hi"]);
    assert_eq!(run.code, 0, "{run}");
    let seen = server.seen();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(seen[1].path, "/v1/chat/completions");
    assert_eq!(seen[1].json()["model"], "qwen2.5-coder-7b");
}

#[test]
fn base_url_without_model_and_several_served_exits_3_listing_them() {
    let sb = Sandbox::new();
    let server = Server::start(vec![model_list(&["llama3.2", "qwen3:8b", "phi4"])]);
    let base = server.base_url();
    let run = sb.run(&["--base-url", &base, "-p", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    assert_eq!(server.seen().len(), 1, "no completion was asked for");
    crate::common::support::snap(
        "local_servers_several_models_exit_3",
        &run.to_string().replace(&base, "[BASE]"),
    );
}

#[test]
fn openai_base_url_accepts_any_model_id_and_asks_the_server_when_none_is_given() {
    let mut sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::sse(&bytes("openai/text.sse")),
        model_list(&["local-only"]),
        Reply::sse(&bytes("openai/text.sse")),
    ]);
    let base = server.base_url();
    // An id no registry lists goes to the server, even with an Anthropic key around.
    let env = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", "ak-unused"),
    ];
    let run = run_env(&sb, &["--model", "my-finetune", "-p", "hi"], &env);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(server.seen()[0].json()["model"], "my-finetune");
    // No model at all: the server is asked, and nothing is sent as gpt-4.1.
    sb.seed += 1; // a session of its own (the fixed clock would name the same file again)
    let run = run_env(&sb, &["-p", "hi"], &[("OPENAI_BASE_URL", base.as_str())]);
    assert_eq!(run.code, 0, "{run}");
    let seen = server.seen();
    assert_eq!(seen[1].path, "/v1/models");
    assert_eq!(seen[2].json()["model"], "local-only");
}

#[test]
fn list_models_with_a_base_url_lists_what_the_server_serves() {
    let sb = Sandbox::new();
    let ids = ["llama3.2:latest", "qwen3:8b", "Qwen2.5-Coder:7b"];
    let server = Server::start(vec![model_list(&ids), model_list(&ids), model_list(&ids)]);
    let base = server.base_url();
    let run = sb.run(&["--list-models", "--base-url", &base]);
    assert_eq!(run.code, 0, "{run}");
    crate::common::support::snap(
        "local_servers_list_models_base_url",
        &run.to_string().replace(&base, "[BASE]"),
    );
    let run = sb.run(&["--list-models", "qwen", "--base-url", &base, "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let got: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(got, ["qwen3:8b", "Qwen2.5-Coder:7b"]);
    assert_eq!(lines[0]["baseUrl"], base.as_str());
    assert_eq!(lines[0]["provider"], "openai");
    let run = run_env(&sb, &["--list-models"], &[("OPENAI_BASE_URL", &base)]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("llama3.2:latest"), "{run}");
    assert!(!run.stdout.contains("gpt-4.1"), "{run}");
    assert!(server.seen().iter().all(|s| s.path == "/v1/models"));
}

/// Regression: a base URL without `/v1` gave a bare "HTTP 404" with no word about the URL.
#[test]
fn a_404_names_the_url_tried_and_hints_at_a_missing_v1() {
    let sb = Sandbox::new();
    let server = Server::start(vec![Reply::json(404, "404 page not found")]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let run = sb.run(&["--list-models", "--base-url", &base]);
    assert_eq!(run.code, 3, "{run}");
    crate::common::support::snap(
        "local_servers_models_404_hints_v1",
        &run.to_string().replace(&base, "[BASE]"),
    );
    // The same for the completion itself.
    let server = Server::start(vec![Reply::json(404, "404 page not found")]);
    let base = format!("http://127.0.0.1:{}", server.port);
    let run = sb.run(&["--base-url", &base, "--model", "m", "--json", "hi"]);
    assert_eq!(run.code, 1, "{run}");
    let result = results(&run).remove(0);
    assert_eq!(result["error"]["kind"], "bad_request");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("(POST {base}/chat/completions; ")),
        "{message}"
    );
    assert!(message.contains("/v1"), "{message}");
}

#[test]
fn an_unreachable_server_is_a_config_error_naming_the_url() {
    let sb = Sandbox::new();
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    for args in [
        vec!["--base-url", base.as_str(), "-p", "hi"],
        vec!["--list-models", "--base-url", base.as_str()],
    ] {
        let run = sb.run(&args);
        assert_eq!(run.code, 3, "{run}");
        assert!(
            run.stderr
                .contains(&format!("Error: cannot reach {base}/models")),
            "{run}"
        );
        assert!(run.stderr.contains("Hint: is the server running?"), "{run}");
    }
    let run = sb.run(&["--base-url", &base, "--json", "hi"]);
    assert_eq!(results(&run)[0]["error"]["kind"], "config_error", "{run}");
}

/// Regression: llama.cpp's server answers a prompt longer than its context with HTTP 200 and an
/// empty stream. keel took that for a dropped connection and retried it three times (15 s with
/// the real backoff), then failed as `connection`. It is `context_overflow`, known at once.
#[test]
fn an_empty_200_stream_is_a_context_overflow_and_is_not_retried() {
    let sb = Sandbox::new();
    let server = Server::start(vec![Reply::sse(b""), Reply::sse(b""), Reply::sse(b"")]);
    let run = keel(
        &sb,
        &server,
        &["--json", "a prompt too long for the server"],
    );
    assert_eq!(run.code, 1, "{run}");
    let results = results(&run);
    assert_eq!(results.len(), 1, "{run}");
    assert_eq!(results[0]["error"]["kind"], "context_overflow", "{run}");
    let message = results[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("empty"), "{message}");
    // The turn compacts once on an overflow; a first prompt has nothing to compact.
    assert_eq!(server.seen().len(), 1, "not retried: {run}");
}

/// With history to compact, the same empty answer compacts the conversation and the prompt
/// goes again (what an overflow the server names does).
#[test]
fn an_empty_200_stream_with_history_compacts_and_goes_on() {
    let sb = Sandbox::new();
    let text = bytes("openai/text.sse");
    let server = Server::start(vec![
        Reply::sse(&text),
        Reply::sse(b""),
        Reply::sse(&text),
        Reply::sse(&text),
    ]);
    let first = keel(&sb, &server, &["--json", "first"]);
    assert_eq!(first.code, 0, "{first}");
    let second = keel(&sb, &server, &["--json", "--continue", "second"]);
    assert_eq!(second.code, 0, "{second}");
    let lines = second.stdout_lines();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "compaction_start" && l["reason"] == "overflow"),
        "{second}"
    );
    assert_eq!(server.seen().len(), 4, "{second}");
}
