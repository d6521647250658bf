//! The OpenAI Responses API provider against a server on 127.0.0.1 replaying recorded SSE byte
//! streams (fixtures/providers/responses/), split at awkward byte boundaries: text, function
//! calls with streamed arguments, reasoning summaries and items, terminal failures and their
//! kinds, cut streams; then the binary end to end: reasoning items sent back on the next
//! request and after a resume, retries, and which API a model speaks where.

use keel::kernel::message::{StopReason, Usage};
use keel::kernel::provider::model::{ModelCost, ModelInfo, API_RESPONSES};
use keel::kernel::provider::responses::ResponsesDecoder;
use keel::kernel::provider::{ModelRequest, ProviderEvent};
use serde_json::{json, Value};

use crate::common::http_server::{End, Reply, Server};
use crate::common::provider_stream::{self, done, error_of, merged, reasoning};
use crate::common::support::{root, snap, Sandbox};

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers/responses").join(name)).unwrap()
}

fn cost() -> ModelCost {
    ModelCost {
        input: 2.0,
        output: 10.0,
        cache_read: 0.1,
        cache_write: 0.0,
    }
}

fn model(base_url: &str) -> ModelInfo {
    let m = ModelInfo::unlisted("openai", API_RESPONSES, base_url, "gpt-test");
    reasoning(m, cost(), &["off", "low", "medium", "high"])
}

fn request() -> ModelRequest {
    provider_stream::request("high", Some("sess-1"))
}

/// One call against a server replying `replies`: every event until the stream ends.
fn call(replies: Vec<Reply>) -> (Vec<ProviderEvent>, Server) {
    let server = Server::start(replies);
    let events = provider_stream::events(model(&server.base_url()), "sk-test", request());
    (events, server)
}

/// Usage as the decoder reports it: `input` without the cached part, priced with [`cost`].
fn usage(input: u64, cached: u64, output: u64, reasoning: u64) -> ProviderEvent {
    let mut u = Usage {
        input: input - cached,
        output,
        cache_read: cached,
        total_tokens: input + output,
        reasoning,
        ..Usage::default()
    };
    cost().apply(&mut u);
    ProviderEvent::Usage(u)
}

/// The fixture decoded in-process, fed in one piece and then split at every byte offset: the
/// same events each time.
fn decoded_at_every_split(body: &[u8]) -> Vec<ProviderEvent> {
    provider_stream::decoded_at_every_split(body, "openai (gpt-test)", || {
        ResponsesDecoder::new(&model("http://x"))
    })
}

#[test]
fn responses_text_usage_and_request_shape() {
    let body = bytes("text.sse");
    let (events, server) = call(vec![Reply::sse(&body)]);
    assert_eq!(events, decoded_at_every_split(&body));
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::Text("Hello from the Responses API. ✓ café 日本".into()),
            usage(120, 20, 12, 0),
            done(StopReason::Stop),
        ]
    );
    let seen = &server.seen()[0];
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/responses")
    );
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    let body = seen.json();
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["instructions"], "be brief");
    assert_eq!(body["store"], false);
    assert_eq!(body["stream"], true);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["prompt_cache_key"], "sess-1");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["name"], "read");
    assert_eq!(
        body["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    );
}

#[test]
fn responses_function_calls_with_arguments_streamed_in_pieces() {
    let body = bytes("tool_calls.sse");
    let (events, _s) = call(vec![Reply::sse(&body)]);
    assert_eq!(events, decoded_at_every_split(&body));
    let start = |id: &str, name: &str| ProviderEvent::ToolCallStart {
        id: id.into(),
        name: name.into(),
    };
    let delta = |id: &str, d: &str| ProviderEvent::ToolCallDelta {
        id: id.into(),
        delta: d.into(),
    };
    let end = |id: &str| ProviderEvent::ToolCallEnd { id: id.into() };
    let (a, b) = ("call_Rk2x9V", "call_Hq8ZfJ");
    assert_eq!(
        events,
        vec![
            start(a, "read"),
            delta(a, "{\"pa"),
            delta(a, "th\": \""),
            delta(a, "README"),
            delta(a, ".md\"}"),
            end(a),
            start(b, "ls"),
            delta(b, "{\"path"),
            delta(b, "\": \""),
            delta(b, ".\"}"),
            end(b),
            usage(412, 0, 47, 0),
            done(StopReason::ToolUse),
        ]
    );
}

#[test]
fn responses_reasoning_summary_becomes_thinking_and_the_item_its_signature() {
    let body = bytes("reasoning.sse");
    assert!(body.windows(2).any(|w| w == b"\r\n"), "CRLF line ends");
    let (events, _s) = call(vec![Reply::sse(&body)]);
    assert_eq!(events, decoded_at_every_split(&body));
    let item = json!({"type": "reasoning", "id": "rs_01", "summary": [
        {"type": "summary_text", "text": "**Checking** the sum"},
        {"type": "summary_text", "text": "2 + 2 is 4."}],
        "encrypted_content": "gAAAAABpQ1N0ZW5jcnlwdGVkLXJlYXNvbmluZy0x"});
    let events = merged(events);
    let ProviderEvent::ThinkingSignature(signature) = &events[1] else {
        panic!("{events:?}");
    };
    assert_eq!(serde_json::from_str::<Value>(signature).unwrap(), item);
    assert_eq!(
        events,
        vec![
            ProviderEvent::Thinking("**Checking** the sum\n\n2 + 2 is 4.".into()),
            ProviderEvent::ThinkingSignature(signature.clone()),
            ProviderEvent::Text("2 + 2 = **4**.".into()),
            usage(64, 0, 29, 18),
            done(StopReason::Stop),
        ]
    );
}

#[test]
fn responses_failed_incomplete_and_error_events_map_to_kinds() {
    let decode = |name: &str| {
        let body = bytes(name);
        let (events, _s) = call(vec![Reply::sse(&body)]);
        assert_eq!(events, decoded_at_every_split(&body), "{name}");
        events
    };
    let (kind, message, retry) = error_of(&decode("failed_rate_limit.sse"));
    assert_eq!(kind, "rate_limited");
    assert!(
        message.starts_with("openai (gpt-test): Rate limit reached"),
        "{message}"
    );
    assert_eq!(retry, Some(1200), "the wait the message asks for");
    let events = decode("failed_context.sse");
    assert_eq!(events[0], ProviderEvent::Text("Partial".into()));
    assert_eq!(error_of(&events).0, "context_overflow");
    assert_eq!(
        merged(decode("incomplete_length.sse")),
        vec![
            ProviderEvent::Text("Once upon a time".into()),
            usage(31, 0, 4, 0),
            done(StopReason::Length),
        ]
    );
    let (kind, message, _) = error_of(&decode("incomplete_filter.sse"));
    assert_eq!(kind, "content_filter");
    assert!(
        message.ends_with("content filter stopped the response"),
        "{message}"
    );
    let (kind, message, _) = error_of(&decode("error_event.sse"));
    assert_eq!(kind, "server_error");
    assert!(message.ends_with("The server had an error while processing your request."));
}

#[test]
fn responses_http_errors_have_kinds_and_retry_after() {
    let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let (events, server) = call(vec![Reply::json(429, quota).header("retry-after", "3")]);
    let (kind, message, retry) = error_of(&events);
    assert_eq!((kind.as_str(), retry), ("quota", Some(3000)));
    assert!(
        message.contains("HTTP 429: You exceeded your current quota"),
        "{message}"
    );
    assert_eq!(server.seen()[0].path, "/v1/responses");
    let (events, _s) = call(vec![Reply::json(401, r#"{"error":{"message":"bad key"}}"#)]);
    assert_eq!(error_of(&events).0, "auth");
}

#[test]
fn responses_stream_cut_mid_answer_or_before_it() {
    let body = bytes("text.sse");
    // Cut inside a multi-byte character of a text delta, after output arrived.
    let at = body.windows(2).position(|w| w == "é".as_bytes()).unwrap() + 1;
    let (events, _s) = call(vec![Reply::sse(&body[..at]).ending(End::Cut)]);
    assert!(matches!(events[0], ProviderEvent::Text(_)), "{events:?}");
    assert_eq!(error_of(&events).0, "stream_cut");
    // A body that ends cleanly but without `response.completed`.
    let last = body
        .windows(b"event: response.completed".len())
        .position(|w| w == b"event: response.completed")
        .unwrap();
    let (events, _s) = call(vec![Reply::sse(&body[..last])]);
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "stream_cut");
    assert!(message.ends_with("the stream ended before the response was complete"));
    // Cut before any output: a connection failure (retried by the turn loop).
    let (events, _s) = call(vec![Reply::sse(&body[..300]).ending(End::Cut)]);
    assert_eq!(error_of(&events).0, "connection");
}

// ---- the binary end to end -------------------------------------------------------------

/// A models.json provider `lab` speaking the Responses API at `server`, with one reasoning
/// model `gpt-test`.
fn responses_provider(sb: &Sandbox, server: &Server) {
    let models = json!({"providers": {"lab": {
        "baseUrl": server.base_url(),
        "api": "openai-responses",
        "models": [{"id": "gpt-test", "reasoning": true,
                    "cost": {"input": 2.0, "output": 10.0, "cacheRead": 0.1}}]}}});
    std::fs::write(sb.home().join("models.json"), models.to_string()).unwrap();
}

fn item(name: &str, id: &str) -> Value {
    let text = String::from_utf8(bytes(name)).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["id"] == id)
        .unwrap()["item"]
        .clone()
}

#[test]
fn responses_reasoning_items_go_back_on_the_next_request_and_after_a_resume() {
    let sb = Sandbox::new();
    let server = Server::start(vec![
        Reply::sse(&bytes("reasoning_tool.sse")),
        Reply::sse(&bytes("text.sse")),
        Reply::sse(&bytes("text.sse")),
    ]);
    responses_provider(&sb, &server);
    let run = sb.run(&[
        "--json",
        "--model",
        "lab/gpt-test",
        "--thinking",
        "medium",
        "list",
    ]);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let session_id = lines[0]["id"].as_str().unwrap().to_string();
    assert_eq!(lines.last().unwrap()["usage"]["reasoning"], 24, "{run}");
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{run}");
    let first = seen[0].json();
    assert_eq!(first["reasoning"]["effort"], "medium");
    assert_eq!(first["prompt_cache_key"], session_id.as_str());
    let reasoning = item("reasoning_tool.sse", "rs_02");
    let input = seen[1].json()["input"].as_array().unwrap().clone();
    assert_eq!(input.len(), 4, "{input:#?}");
    assert_eq!(input[1], reasoning, "the encrypted item, verbatim");
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "call_ls1", "name": "ls",
               "arguments": "{\"path\":\".\"}"})
    );
    assert_eq!(input[3]["type"], "function_call_output");
    assert_eq!(input[3]["call_id"], "call_ls1");
    assert_eq!(seen[1].json()["prompt_cache_key"], session_id.as_str());

    // A resumed session sends the item too: it was saved with the assistant message.
    let run = sb.run(&["--json", "--model", "lab/gpt-test", "--continue", "again"]);
    assert_eq!(run.code, 0, "{run}");
    let third = server.seen()[2].json();
    assert_eq!(third["prompt_cache_key"], session_id.as_str());
    let input = third["input"].as_array().unwrap();
    assert_eq!(input[1], reasoning, "{input:#?}");
    assert_eq!(input.last().unwrap()["content"][0]["text"], "again");
}

#[test]
fn responses_429_and_500_are_retried() {
    let sb = Sandbox::new();
    let err = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#;
    let server = Server::start(vec![
        Reply::json(
            429,
            r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
        ),
        Reply::json(500, err),
        Reply::sse(&bytes("failed_rate_limit.sse")),
        Reply::sse(&bytes("text.sse")),
    ]);
    responses_provider(&sb, &server);
    let out = sb
        .cmd(&["--json", "--model", "lab/gpt-test", "hi"])
        .env("KEEL_RETRY_BASE_MS", "1")
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    let lines = run.stdout_lines();
    let retries: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "auto_retry_start")
        .collect();
    assert_eq!(retries.len(), 3, "{run}");
    assert!(retries[0]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("HTTP 429"));
    assert!(retries[1]["errorMessage"]
        .as_str()
        .unwrap()
        .contains("HTTP 500"));
    assert_eq!(
        retries[2]["delayMs"], 1200,
        "the wait response.failed asked for"
    );
    assert_eq!(
        lines.last().unwrap()["finalText"],
        "Hello from the Responses API. ✓ café 日本"
    );
    assert!(server.seen().iter().all(|s| s.path == "/v1/responses"));
}

#[test]
fn responses_is_for_openai_at_its_own_url_and_chat_completions_elsewhere() {
    let sb = Sandbox::new();
    // An OpenAI model id at a URL the user chose: Chat Completions.
    let server = Server::start(vec![Reply::sse(
        &std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap(),
    )]);
    let base = server.base_url();
    let run = sb.run(&["-p", "--base-url", &base, "--model", "gpt-6.2-sol", "hi"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(server.seen()[0].path, "/v1/chat/completions");
    // The registry: OpenAI's models speak Responses, Anthropic's Messages.
    let run = sb.run(&["--list-models", "--json"]);
    let lines = run.stdout_lines();
    let api = |id: &str| {
        lines
            .iter()
            .find(|l| l["id"] == id)
            .unwrap_or_else(|| panic!("{id}: {run}"))["api"]
            .clone()
    };
    assert_eq!(api("gpt-6.2-sol"), "openai-responses");
    assert_eq!(api("claude-sonnet-5-5"), "anthropic-messages");
    // The table names each model's API in its last column.
    let run = sb.run(&["--list-models"]);
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0].last(), Some(&"API"), "{run}");
    let row = |id: &str| {
        rows.iter()
            .find(|r| r.first() == Some(&id))
            .unwrap()
            .clone()
    };
    assert_eq!(row("openai/gpt-6.2-sol").last(), Some(&"openai-responses"));
    assert_eq!(
        row("deepseek/deepseek-chat").last(),
        Some(&"openai-completions")
    );
    // The whole table: a registry update shows here as a reviewed snapshot change.
    snap("list_models_registry", &run.to_string());
}
