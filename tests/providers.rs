//! The HTTP providers against a server on 127.0.0.1 replaying recorded SSE byte streams
//! (fixtures/providers/{openai,anthropic}/), split at awkward byte boundaries: the provider
//! event sequence, errors and their kinds, timeouts, abort; then the binary end to end:
//! retries, a cut stream, usage and cost in the result line, credentials errors.

use std::sync::Arc;
use std::time::Duration;

use keel::kernel::abort::AbortController;
use keel::kernel::message::{StopReason, Usage};
use keel::kernel::provider::http::{HttpOptions, HttpProvider};
use keel::kernel::provider::limits::StreamLimits;
use keel::kernel::provider::model::{ModelCost, ModelInfo, API_ANTHROPIC, API_OPENAI};
use keel::kernel::provider::sse::{SseDecoder, StreamDecoder};
use keel::kernel::provider::{anthropic, openai, ModelRequest, Provider, ProviderEvent};

use crate::common::http_server::{awkward_pieces, End, Reply, Server};
use crate::common::kernel::rt;
use crate::common::provider_stream::{self, error_of, reasoning};
use crate::common::support::{root, snap, Sandbox};

fn bytes(path: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers").join(path)).unwrap()
}

fn text(path: &str) -> String {
    String::from_utf8(bytes(path)).unwrap()
}

fn cost() -> ModelCost {
    ModelCost {
        input: 1.0,
        output: 2.0,
        cache_read: 0.5,
        cache_write: 4.0,
    }
}

fn model(api: &str, base_url: &str) -> ModelInfo {
    let m = ModelInfo::unlisted("local", api, base_url, "test-model");
    reasoning(m, cost(), &["off", "low", "high"])
}

fn request() -> ModelRequest {
    provider_stream::request("off", None)
}

fn options(idle_ms: u64) -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_millis(idle_ms),
        ..HttpOptions::default()
    }
}

/// Streams one call and collects every event until the stream ends.
fn call(provider: &HttpProvider) -> Vec<ProviderEvent> {
    rt().block_on(async {
        let (_c, signal) = AbortController::new();
        let mut rx = provider.stream(request(), signal);
        let mut out = Vec::new();
        while let Some(ev) = rx.recv().await {
            out.push(ev);
        }
        out
    })
}

fn openai_call(replies: Vec<Reply>, idle_ms: u64) -> (Vec<ProviderEvent>, Server) {
    openai_call_with(replies, options(idle_ms))
}

fn openai_call_with(replies: Vec<Reply>, options: HttpOptions) -> (Vec<ProviderEvent>, Server) {
    let server = Server::start(replies);
    let p = HttpProvider::new(
        model(API_OPENAI, &server.base_url()),
        Some("sk-test".into()),
        options,
    )
    .unwrap();
    (call(&p), server)
}

fn anthropic_call(replies: Vec<Reply>) -> (Vec<ProviderEvent>, Server) {
    let server = Server::start(replies);
    let base = format!("http://127.0.0.1:{}", server.port);
    let p = HttpProvider::new(
        model(API_ANTHROPIC, &base),
        Some("ak-test".into()),
        options(5_000),
    )
    .unwrap();
    (call(&p), server)
}

/// Joins runs of text, thinking, signature and same-call argument fragments, so sequences
/// can be written out by hand whatever the chunking.
fn merged(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
    use ProviderEvent as E;
    let mut out: Vec<E> = Vec::new();
    for ev in events {
        match (out.last_mut(), ev) {
            (Some(E::Text(a)), E::Text(b)) => a.push_str(&b),
            (Some(E::Thinking(a)), E::Thinking(b)) => a.push_str(&b),
            (Some(E::ThinkingSignature(a)), E::ThinkingSignature(b)) => a.push_str(&b),
            (Some(E::ToolCallDelta { id: a, delta }), E::ToolCallDelta { id: b, delta: more })
                if *a == b =>
            {
                delta.push_str(&more)
            }
            (_, ev) => out.push(ev),
        }
    }
    out
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    let mut u = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: input + output + cache_read + cache_write,
        ..Usage::default()
    };
    cost().apply(&mut u);
    u
}

/// The same bytes decoded in-process in one piece: what the transport must reproduce.
fn decoded_whole(body: &[u8], decoder: &mut dyn StreamDecoder) -> Vec<ProviderEvent> {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    sse.push(body, &mut events).unwrap();
    sse.finish(&mut events).unwrap();
    let mut out = Vec::new();
    for e in &events {
        decoder.on_event(e, &mut out);
    }
    decoder.finish(&mut out);
    out
}

#[test]
fn openai_text_usage_and_request_shape() {
    let (events, server) = openai_call(vec![Reply::sse(&bytes("openai/text.sse"))], 5_000);
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::Text("Hello from the local model. ✓ café 日本".into()),
            ProviderEvent::Usage(usage(100, 12, 20, 0)),
            ProviderEvent::Done {
                stop: StopReason::Stop
            },
        ]
    );
    let seen = &server.seen()[0];
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    let body = seen.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["tools"][0]["function"]["name"], "read");
}

#[test]
fn openai_parallel_tool_calls_interleaved_across_chunks() {
    let (events, _s) = openai_call(vec![Reply::sse(&bytes("openai/parallel_tools.sse"))], 5_000);
    let read = "call_Rk2x9VqLmN3pT7wYcA4bE1sD".to_string();
    let ls = "call_Hq8ZfJ2uXo5KcV9nW3tLpB7e".to_string();
    let d = |id: &String, s: &str| ProviderEvent::ToolCallDelta {
        id: id.clone(),
        delta: s.into(),
    };
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::ToolCallStart {
                id: read.clone(),
                name: "read".into()
            },
            d(&read, "{\"path\": "),
            ProviderEvent::ToolCallStart {
                id: ls.clone(),
                name: "ls".into()
            },
            d(&ls, "{\"path"),
            d(&read, "\"README"),
            d(&ls, "\": \""),
            d(&read, ".md\"}"),
            d(&ls, ".\"}"),
            ProviderEvent::ToolCallEnd { id: read },
            ProviderEvent::ToolCallEnd { id: ls },
            ProviderEvent::Usage(usage(412, 47, 0, 0)),
            ProviderEvent::Done {
                stop: StopReason::ToolUse
            },
        ]
    );
}

#[test]
fn openai_reasoning_length_and_in_stream_error_match_whole_decoding() {
    for (file, last) in [
        ("openai/reasoning.sse", "stop"),
        ("openai/length.sse", "length"),
        ("openai/instream_error.sse", "server_error"),
    ] {
        let body = bytes(file);
        let (events, _s) = openai_call(vec![Reply::sse(&body)], 5_000);
        let info = model(API_OPENAI, "http://unused");
        let want = decoded_whole(&body, &mut openai::OpenAiDecoder::new(&info));
        match (events.last(), last) {
            (Some(ProviderEvent::Done { stop }), "stop") => assert_eq!(*stop, StopReason::Stop),
            (Some(ProviderEvent::Done { stop }), "length") => {
                assert_eq!(*stop, StopReason::Length)
            }
            (Some(ProviderEvent::Error { kind, message, .. }), k) => {
                assert_eq!(kind.as_str(), k);
                assert!(message.starts_with("local (test-model): "), "{message}");
            }
            other => panic!("{file}: unexpected end {other:?}"),
        }
        if last != "server_error" {
            assert_eq!(merged(events), merged(want), "{file}");
        }
    }
    let (events, _s) = openai_call(vec![Reply::sse(&bytes("openai/reasoning.sse"))], 5_000);
    assert!(matches!(merged(events)[0], ProviderEvent::Thinking(_)));
}

#[test]
fn openai_error_bodies_have_kinds_and_retry_after() {
    let cases = [
        (
            Reply::json(400, &text("openai/error_400.json")),
            "context_overflow",
            None,
        ),
        (
            Reply::json(401, &text("openai/error_401.json")),
            "auth",
            None,
        ),
        (
            Reply::json(429, &text("openai/error_429.json")).header("retry-after", "7"),
            "rate_limited",
            Some(7000),
        ),
        (Reply::json(503, ""), "overloaded", None),
    ];
    for (reply, kind, retry_after) in cases {
        let status = reply.status;
        let (events, _s) = openai_call(vec![reply], 5_000);
        assert_eq!(events.len(), 1, "{events:?}");
        let (k, message, ra) = error_of(&events);
        assert_eq!((k.as_str(), ra), (kind, retry_after), "{message}");
        assert!(
            message.starts_with(&format!("local (test-model): HTTP {status}")),
            "{message}"
        );
    }
    let (events, _s) = openai_call(
        vec![Reply::json(401, &text("openai/error_401.json"))],
        5_000,
    );
    assert!(error_of(&events).1.contains("Incorrect API key provided"));
}

#[test]
fn a_cut_stream_fails_and_a_cut_before_output_is_a_connection_error() {
    let body = bytes("openai/text.sse");
    let mut reply = Reply::sse(&body[..body.len() / 2]).ending(End::Cut);
    reply.pieces = awkward_pieces(&body[..body.len() / 2]);
    let (events, _s) = openai_call(vec![reply], 5_000);
    assert!(matches!(events[0], ProviderEvent::Text(_)));
    assert_eq!(error_of(&events).0, "stream_cut");

    let (events, _s) = openai_call(vec![Reply::sse(&bytes("openai/cut.sse"))], 5_000);
    assert_eq!(error_of(&events).0, "stream_cut", "{events:?}");

    let (events, _s) = openai_call(vec![Reply::sse(b"").ending(End::Cut)], 5_000);
    assert_eq!(events.len(), 1);
    assert_eq!(error_of(&events).0, "connection");
}

#[test]
fn a_stalled_stream_hits_the_idle_timeout_and_the_connection_is_closed() {
    let body = bytes("openai/text.sse");
    let first_event = body.windows(2).position(|w| w == b"\n\n").unwrap() + 2;
    let second = first_event
        + body[first_event..]
            .windows(2)
            .position(|w| w == b"\n\n")
            .unwrap()
        + 2;
    let reply = Reply::sse(&body[..second]).ending(End::Stall);
    let (events, server) = openai_call(vec![reply], 300);
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "idle_timeout");
    assert!(message.contains("stalled"), "{message}");
    server
        .hangups
        .recv_timeout(Duration::from_secs(10))
        .expect("the stalled connection was closed");
}

/// Transport options with the given caps on the response body and on one call's arguments.
fn capped(max_response_bytes: u64, max_tool_args_bytes: u64) -> HttpOptions {
    HttpOptions {
        limits: StreamLimits {
            max_response_bytes,
            max_tool_args_bytes,
            ..StreamLimits::default()
        },
        ..options(5_000)
    }
}

#[test]
fn a_response_over_its_cap_fails_with_stream_too_large() {
    let body = bytes("openai/text.sse");
    let cap = body.len() as u64;
    let (events, _s) = openai_call_with(vec![Reply::sse(&body)], capped(cap, 1 << 20));
    assert!(
        matches!(events.last(), Some(ProviderEvent::Done { .. })),
        "{events:?}"
    );
    let (events, _s) = openai_call_with(vec![Reply::sse(&body)], capped(cap - 1, 1 << 20));
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "stream_too_large");
    assert_eq!(
        message,
        format!(
            "local (test-model): the response exceeded the cap of {} bytes per response",
            cap - 1
        )
    );
}

#[test]
fn tool_arguments_over_their_cap_fail_with_stream_too_large() {
    let body = bytes("openai/parallel_tools.sse");
    let (events, _s) = openai_call(vec![Reply::sse(&body)], 5_000);
    let longest = [
        "call_Rk2x9VqLmN3pT7wYcA4bE1sD",
        "call_Hq8ZfJ2uXo5KcV9nW3tLpB7e",
    ]
    .map(|call| {
        events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallDelta { id, delta } if id == call => Some(delta.len()),
                _ => None,
            })
            .sum::<usize>() as u64
    })
    .into_iter()
    .max()
    .unwrap();
    let (events, _s) = openai_call_with(vec![Reply::sse(&body)], capped(1 << 20, longest));
    assert!(
        matches!(events.last(), Some(ProviderEvent::Done { .. })),
        "{events:?}"
    );
    let (events, _s) = openai_call_with(vec![Reply::sse(&body)], capped(1 << 20, longest - 1));
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "stream_too_large");
    assert!(
        message.ends_with(&format!(
            "the arguments of the `read` tool call exceeded the cap of {} bytes",
            longest - 1
        )),
        "{message}"
    );
}

#[test]
fn abort_during_streaming_closes_the_request_at_once() {
    let body = bytes("openai/text.sse");
    let reply = Reply::sse(&body[..body.len() / 2]).ending(End::Stall);
    let server = Server::start(vec![reply]);
    let p =
        HttpProvider::new(model(API_OPENAI, &server.base_url()), None, options(60_000)).unwrap();
    rt().block_on(async {
        let (controller, signal) = AbortController::new();
        let mut rx = p.stream(request(), signal);
        let first = rx.recv().await.unwrap();
        assert!(matches!(first, ProviderEvent::Text(_)), "{first:?}");
        controller.abort();
        // The stream ends without a terminal event: the caller records the abort.
        while let Some(ev) = rx.recv().await {
            assert!(matches!(ev, ProviderEvent::Text(_)), "{ev:?}");
        }
    });
    server
        .hangups
        .recv_timeout(Duration::from_secs(10))
        .expect("the server saw the client hang up");
    assert_eq!(
        server.seen()[0].header("authorization"),
        None,
        "no key, no header"
    );
}

#[test]
fn anthropic_text_thinking_tools_and_errors() {
    let (events, server) = anthropic_call(vec![Reply::sse(&bytes("anthropic/text.sse"))]);
    let seen = &server.seen()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.header("x-api-key"), Some("ak-test"));
    assert_eq!(
        seen.header("anthropic-version"),
        Some(anthropic::API_VERSION)
    );
    assert_eq!(seen.json()["system"][0]["text"], "be brief");
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::Usage(usage(250, 1, 1200, 300)),
            ProviderEvent::Text("Bonjour — naïve café ✓".into()),
            ProviderEvent::Usage(usage(250, 15, 1200, 300)),
            ProviderEvent::Done {
                stop: StopReason::Stop
            },
        ]
    );

    let body = bytes("anthropic/thinking_tool.sse");
    let (events, _s) = anthropic_call(vec![Reply::sse(&body)]);
    let info = model(API_ANTHROPIC, "http://unused");
    let want = decoded_whole(&body, &mut anthropic::AnthropicDecoder::new(&info));
    let events = merged(events);
    assert_eq!(events, merged(want));
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            ProviderEvent::Usage(_) => "usage",
            ProviderEvent::Thinking(_) => "thinking",
            ProviderEvent::ThinkingSignature(_) => "signature",
            ProviderEvent::Text(_) => "text",
            ProviderEvent::ToolCallStart { .. } => "start",
            ProviderEvent::ToolCallDelta { .. } => "delta",
            ProviderEvent::ToolCallEnd { .. } => "end",
            ProviderEvent::Done { .. } => "done",
            ProviderEvent::Error { .. } => "error",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "usage",
            "thinking",
            "signature",
            "text",
            "start",
            "delta",
            "end",
            "usage",
            "done"
        ]
    );
    let args: String = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&args).unwrap(),
        serde_json::json!({"command":"ls -la"})
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Done {
            stop: StopReason::ToolUse
        })
    );

    let (events, _s) = anthropic_call(vec![Reply::sse(&bytes("anthropic/max_tokens.sse"))]);
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Done {
            stop: StopReason::Length
        })
    );
    let (events, _s) = anthropic_call(vec![Reply::sse(&bytes("anthropic/overloaded.sse"))]);
    assert_eq!(error_of(&events).0, "overloaded");
    let (events, _s) = anthropic_call(vec![Reply::sse(&bytes("anthropic/cut.sse"))]);
    assert_eq!(error_of(&events).0, "stream_cut");
    for (status, file, kind) in [
        (401, "anthropic/error_401.json", "auth"),
        (400, "anthropic/error_400_too_long.json", "context_overflow"),
        (529, "anthropic/error_529.json", "overloaded"),
    ] {
        let (events, _s) = anthropic_call(vec![Reply::json(status, &text(file))]);
        assert_eq!(error_of(&events).0, kind, "{file}");
    }
}

// ---- the binary end to end -------------------------------------------------------------

fn keel_at(sb: &Sandbox, server: &Server, extra: &[&str]) -> crate::common::support::Run {
    let base = server.base_url();
    let mut args = vec!["--base-url", base.as_str(), "--model", "test-model"];
    args.extend_from_slice(extra);
    sb.run(&args)
}

fn types(run: &crate::common::support::Run) -> Vec<String> {
    run.stdout_lines()
        .iter()
        .map(|l| l["type"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn print_mode_against_a_local_server_needs_no_key() {
    let sb = Sandbox::new();
    let server = Server::start(vec![Reply::sse(&bytes("openai/text.sse"))]);
    let run = keel_at(&sb, &server, &["-p", "say hello"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Hello from the local model. ✓ café 日本\n");
    let seen = &server.seen()[0];
    assert_eq!(seen.header("authorization"), None);
    let body = seen.json();
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        serde_json::json!({"role":"user","content":"say hello"})
    );
    // Unlisted model on a custom endpoint: the openai-compatible defaults.
    assert_eq!(body["max_tokens"], 8192);
}

#[test]
fn json_result_carries_usage_and_cost_from_models_json() {
    let sb = Sandbox::new();
    let server = Server::start(vec![Reply::sse(&bytes("openai/text.sse"))]);
    let models = serde_json::json!({"providers": {"local": {
        "baseUrl": server.base_url(),
        "apiKeyEnv": "LOCAL_KEY",
        "models": [{"id": "test-model", "contextWindow": 32768,
                    "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0.5}}]}}});
    std::fs::write(sb.home().join("models.json"), models.to_string()).unwrap();
    let out = sb
        .cmd(&["--json", "--model", "local/test-model", "hi"])
        .env("LOCAL_KEY", "lk-1")
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        server.seen()[0].header("authorization"),
        Some("Bearer lk-1")
    );
    let lines = run.stdout_lines();
    let result = lines.last().unwrap();
    assert_eq!(result["outcome"], "success");
    let want = usage(100, 12, 20, 0);
    assert_eq!(result["usage"], serde_json::to_value(&want).unwrap());
    assert!(result["usage"]["cost"]["total"].as_f64().unwrap() > 0.0);
    let end = lines
        .iter()
        .find(|l| l["type"] == "message_end" && l["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(end["message"]["provider"], "local");
    assert_eq!(end["message"]["api"], "openai-completions");
}

#[test]
fn a_429_with_retry_after_is_retried_then_succeeds() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::json(429, &text("openai/error_429.json")).header("retry-after", "1"),
        Reply::sse(&bytes("openai/text.sse")),
    ]);
    let run = keel_at(&sb, &server, &["--json", "hi"]);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let start = lines
        .iter()
        .find(|l| l["type"] == "auto_retry_start")
        .unwrap();
    assert_eq!(start["attempt"], 1);
    assert_eq!(start["maxAttempts"], 3);
    assert_eq!(start["delayMs"], 1000, "Retry-After is honoured");
    assert!(start["errorMessage"].as_str().unwrap().contains("HTTP 429"));
    assert_eq!(
        types(&run).iter().filter(|t| *t == "agent_end").count(),
        2,
        "the failed attempt and the retry are separate runs"
    );
    let first_end = lines.iter().find(|l| l["type"] == "agent_end").unwrap();
    assert_eq!(first_end["willRetry"], true);
    let end = lines
        .iter()
        .find(|l| l["type"] == "auto_retry_end")
        .unwrap();
    assert_eq!(
        end,
        &serde_json::json!({"type":"auto_retry_end","success":true,"attempt":1})
    );
    assert_eq!(
        lines.last().unwrap()["finalText"],
        "Hello from the local model. ✓ café 日本"
    );
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn a_500_three_times_after_the_first_fails_with_exit_1() {
    let sb = Sandbox::new();
    let err = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#;
    let server = Server::start((0..4).map(|_| Reply::json(500, err)).collect());
    let out = sb
        .cmd(&[
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--json",
            "hi",
        ])
        .env("KEEL_RETRY_BASE_MS", "1")
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 1, "{run}");
    let lines = run.stdout_lines();
    let attempts: Vec<i64> = lines
        .iter()
        .filter(|l| l["type"] == "auto_retry_start")
        .map(|l| l["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    let end = lines
        .iter()
        .find(|l| l["type"] == "auto_retry_end")
        .unwrap();
    assert_eq!(end["success"], false);
    assert_eq!(end["attempt"], 3);
    assert!(end["finalError"].as_str().unwrap().contains("HTTP 500"));
    let result = lines.last().unwrap();
    assert_eq!(result["outcome"], "failed");
    assert_eq!(result["error"]["kind"], "server_error");
    assert_eq!(server.seen().len(), 4, "one call and three retries");
}

#[test]
fn a_stream_cut_mid_message_fails_the_turn_without_retry() {
    let sb = Sandbox::new();
    let body = bytes("openai/text.sse");
    let server = Server::start(vec![Reply::sse(&body[..body.len() / 2]).ending(End::Cut)]);
    let run = keel_at(&sb, &server, &["-p", "hi"]);
    assert_eq!(run.code, 1, "{run}");
    assert_eq!(
        run.stdout, "",
        "print mode writes no partial answer to stdout"
    );
    run.assert_stderr("the stream was cut mid-response");
    assert_eq!(server.seen().len(), 1, "output had arrived: no retry");
    let server = Server::start(vec![Reply::sse(&body[..body.len() / 2]).ending(End::Cut)]);
    let run = keel_at(&sb, &server, &["--json", "--no-session", "hi"]);
    let lines = run.stdout_lines();
    assert_eq!(lines.last().unwrap()["error"]["kind"], "stream_cut");
    assert!(!types(&run).contains(&"auto_retry_start".to_string()));
}

#[test]
fn a_stalled_stream_fails_on_the_idle_timeout() {
    let sb = Sandbox::new();
    let body = bytes("openai/text.sse");
    let server = Server::start(vec![Reply::sse(&body[..body.len() / 2]).ending(End::Stall)]);
    let run = keel_at(&sb, &server, &["--json", "--idle-timeout", "0.3", "hi"]);
    assert_eq!(run.code, 1, "{run}");
    let result = run.stdout_lines().last().unwrap().clone();
    assert_eq!(result["error"]["kind"], "idle_timeout");
}

#[test]
fn missing_credentials_and_unknown_models_say_what_to_set() {
    let sb = Sandbox::new();
    snap(
        "providers_no_openai_key",
        &sb.run(&["-p", "--provider", "openai", "hi"]).to_string(),
    );
    snap(
        "providers_unknown_anthropic_model",
        &sb.run(&["-p", "--model", "anthropic/claude-9", "hi"])
            .to_string(),
    );
    std::fs::write(
        sb.home().join("models.json"),
        r#"{"providers":{"x":{"baseUrl":1}}}"#,
    )
    .unwrap();
    let run = sb.run(&["-p", "--provider", "x", "hi"]);
    assert_eq!(run.code, 3, "{run}");
    assert!(run.stderr.contains("models.json"), "{run}");
}

#[test]
fn list_models_shows_builtins_and_models_json() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home().join("models.json"),
        r#"{"providers":{"lab":{"baseUrl":"http://127.0.0.1:9/v1","models":[{"id":"qwen3-coder","contextWindow":65536}]}}}"#,
    )
    .unwrap();
    let run = sb.run(&["--list-models"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("anthropic/claude-sonnet-4-5"), "{run}");
    assert!(run.stdout.contains("lab/qwen3-coder"), "{run}");
    let run = sb.run(&["--list-models", "qwen", "--json"]);
    let lines = run.stdout_lines();
    assert_eq!(lines.len(), 1, "{run}");
    assert_eq!(lines[0]["contextWindow"], 65536);
    assert_eq!(lines[0]["provider"], "lab");
}

/// Regression: limits under 1000 tokens were printed as `0K`.
#[test]
fn list_models_prints_limits_under_1000_as_numbers() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home().join("models.json"),
        r#"{"providers":{"tiny":{"baseUrl":"http://127.0.0.1:9/v1","models":[
            {"id":"t1","contextWindow":512,"maxTokens":256},
            {"id":"t2","contextWindow":32768,"maxTokens":1000}]}}}"#,
    )
    .unwrap();
    let run = sb.run(&["--list-models", "tiny/"]);
    assert_eq!(run.code, 0, "{run}");
    let row = |id: &str| -> Vec<String> {
        let line = run.stdout.lines().find(|l| l.starts_with(id)).unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(row("tiny/t1")[1..3], ["512", "256"], "{run}");
    assert_eq!(row("tiny/t2")[1..3], ["32K", "1K"], "{run}");
    assert!(!run.stdout.contains("0K"), "{run}");
}

/// The provider is shared behind `Arc<dyn Provider>` by the kernel.
#[test]
fn http_provider_is_a_provider() {
    let p: Arc<dyn Provider> = Arc::new(
        HttpProvider::new(
            model(API_OPENAI, "http://127.0.0.1:9/v1"),
            None,
            options(100),
        )
        .unwrap(),
    );
    assert_eq!(
        (p.name(), p.api(), p.model()),
        ("local", API_OPENAI, "test-model")
    );
}
