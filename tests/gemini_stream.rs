//! The Gemini decoder and transport in-process against a server on 127.0.0.1 replaying the
//! recorded SSE byte streams of fixtures/providers/gemini/, split at awkward byte boundaries
//! (and, decoded directly, at every byte offset): text, a function call, thinking with
//! signatures, usage, finish reasons, errors and cut streams.

use keel::kernel::message::{StopReason, Usage};
use keel::kernel::provider::gemini::GeminiDecoder;
use keel::kernel::provider::model::{ModelCost, ModelInfo, API_GEMINI};
use keel::kernel::provider::ProviderEvent;
use serde_json::{json, Value};

use crate::common::http_server::{End, Reply, Server};
use crate::common::provider_stream::{self, done, error_of, merged, reasoning, request};
use crate::gemini::bytes;

fn cost() -> ModelCost {
    ModelCost {
        input: 4.0,
        output: 20.0,
        cache_read: 0.2,
        cache_write: 0.0,
    }
}

fn model(base_url: &str) -> ModelInfo {
    let m = ModelInfo::unlisted("google", API_GEMINI, base_url, "gemini-test");
    reasoning(m, cost(), &["off", "low", "medium", "high"])
}

/// One call against a server replying `replies`: every event until the stream ends.
fn call(replies: Vec<Reply>) -> (Vec<ProviderEvent>, Server) {
    let server = Server::start(replies);
    let events = provider_stream::events(
        model(&format!("http://127.0.0.1:{}", server.port)),
        "gk-test",
        request("low", Some("sess-1")),
    );
    (events, server)
}

/// Usage as the decoder reports it, priced with [`cost`]: thoughts are output.
fn usage(prompt: u64, cached: u64, candidates: u64, thoughts: u64) -> ProviderEvent {
    let mut u = Usage {
        input: prompt - cached,
        output: candidates + thoughts,
        cache_read: cached,
        total_tokens: prompt + candidates + thoughts,
        reasoning: thoughts,
        ..Usage::default()
    };
    cost().apply(&mut u);
    ProviderEvent::Usage(u)
}

/// A kept signature: the signature of the fixture's line with `needle`, on a `part`.
fn signature(fixture: &str, needle: &str, part: &str) -> ProviderEvent {
    let text = String::from_utf8(bytes(fixture)).unwrap();
    let line = text.lines().find(|l| l.contains(needle)).unwrap();
    let at = line.find("\"thoughtSignature\":\"").unwrap() + "\"thoughtSignature\":\"".len();
    let sig = line[at..].split('"').next().unwrap();
    ProviderEvent::ThinkingSignature(json!({"part": part, "thoughtSignature": sig}).to_string())
}

/// The fixture decoded in-process, split at every byte offset: the same events each time.
fn decoded_at_every_split(body: &[u8]) -> Vec<ProviderEvent> {
    provider_stream::decoded_at_every_split(body, "google (gemini-test)", || {
        GeminiDecoder::new(&model("http://x"), 1)
    })
}

/// `name` over HTTP (awkward pieces) and decoded at every split: the same events.
fn decode(name: &str) -> Vec<ProviderEvent> {
    let body = bytes(name);
    let (events, _s) = call(vec![Reply::sse(&body)]);
    assert_eq!(events, decoded_at_every_split(&body), "{name}");
    events
}

#[test]
fn gemini_text_with_a_trailing_signature_and_cached_usage() {
    let body = bytes("text.sse");
    assert!(body.windows(2).any(|w| w == b"\r\n"), "CRLF line ends");
    let (events, server) = call(vec![Reply::sse(&body)]);
    assert_eq!(events, decoded_at_every_split(&body));
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::Text("Hello from Gemini. ✓ café 日本".into()),
            signature("text.sse", "STOP", "text"),
            usage(812, 512, 9, 0),
            done(StopReason::Stop),
        ]
    );
    let seen = &server.seen()[0];
    assert_eq!(
        seen.path,
        "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen.header("x-goog-api-key"), Some("gk-test"));
    let body = seen.json();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "be brief"}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "read");
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 8192,
               "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": true}})
    );
}

#[test]
fn gemini_thought_then_signed_parallel_function_calls() {
    let events = decode("function_call.sse");
    let start = |id: &str, name: &str| ProviderEvent::ToolCallStart {
        id: id.into(),
        name: name.into(),
    };
    let delta = |id: &str, d: &str| ProviderEvent::ToolCallDelta {
        id: id.into(),
        delta: d.into(),
    };
    let end = |id: &str| ProviderEvent::ToolCallEnd { id: id.into() };
    assert_eq!(
        events,
        vec![
            ProviderEvent::Thinking("**Listing** the directory first.".into()),
            start("c1", "ls"),
            delta("c1", r#"{"path":"."}"#),
            end("c1"),
            signature("function_call.sse", "\"ls\"", "functionCall"),
            start("c2", "read"),
            delta("c2", r#"{"path":"README.md","limit":20}"#),
            end("c2"),
            usage(1200, 0, 31, 88),
            done(StopReason::ToolUse),
        ]
    );
}

#[test]
fn gemini_thinking_with_signatures_on_a_thought_and_on_the_text() {
    let events = decode("thinking.sse");
    let Some(ProviderEvent::ThinkingSignature(kept)) = events.get(2) else {
        panic!("{events:?}");
    };
    let kept: Value = serde_json::from_str(kept).unwrap();
    assert_eq!(kept["part"], "thought");
    assert_eq!(
        merged(events),
        vec![
            ProviderEvent::Thinking("Checking the sum: 2 + 2.".into()),
            signature("thinking.sse", ": 2 + 2.", "thought"),
            ProviderEvent::Thinking("Then the answer.".into()),
            ProviderEvent::Text("2 + 2 = **4**.".into()),
            signature("thinking.sse", "STOP", "text"),
            usage(64, 0, 7, 40),
            done(StopReason::Stop),
        ]
    );
}

#[test]
fn gemini_finish_reasons_blocked_prompts_and_stream_errors_map_to_kinds() {
    assert_eq!(
        merged(decode("max_tokens.sse")),
        vec![
            ProviderEvent::Text("Once upon a time".into()),
            usage(31, 0, 4, 0),
            done(StopReason::Length),
        ]
    );
    let events = decode("safety.sse");
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "content_filter");
    assert!(message.ends_with("(finish reason SAFETY)"), "{message}");
    let (kind, message, _) = error_of(&decode("blocked.sse"));
    assert_eq!(kind, "content_filter");
    assert!(message.contains("PROHIBITED_CONTENT"), "{message}");
    let events = decode("error_event.sse");
    assert_eq!(events[0], ProviderEvent::Text("Partial".into()));
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "overloaded");
    assert_eq!(
        message,
        "google (gemini-test): The model is overloaded. Please try again later."
    );
    let (kind, _, retry) = error_of(&decode("rate_limit_event.sse"));
    assert_eq!((kind.as_str(), retry), ("rate_limited", Some(1500)));
}

#[test]
fn gemini_http_errors_have_kinds_and_the_body_retry_delay() {
    let quota = String::from_utf8(bytes("error_429.json")).unwrap();
    let (events, _s) = call(vec![Reply::json(429, &quota)]);
    let (kind, message, retry) = error_of(&events);
    assert_eq!((kind.as_str(), retry), ("rate_limited", Some(17_000)));
    assert!(
        message.starts_with("google (gemini-test): HTTP 429: You exceeded your current quota"),
        "{message}"
    );
    // A Retry-After header wins over the body.
    let (events, _s) = call(vec![Reply::json(429, &quota).header("retry-after", "2")]);
    assert_eq!(error_of(&events).2, Some(2000));
    let (events, _s) = call(vec![Reply::json(
        404,
        r#"{"error":{"code":404,"message":"models/gemini-test is not found","status":"NOT_FOUND"}}"#,
    )]);
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "bad_request");
    assert!(
        message.ends_with(":streamGenerateContent?alt=sse)"),
        "the URL tried, no /v1 hint: {message}"
    );
}

#[test]
fn gemini_stream_cut_mid_answer_or_before_it() {
    let body = bytes("text.sse");
    // Cut inside a multi-byte character of a text part, after output arrived.
    let at = body.windows(2).position(|w| w == "é".as_bytes()).unwrap() + 1;
    let (events, _s) = call(vec![Reply::sse(&body[..at]).ending(End::Cut)]);
    assert_eq!(events[0], ProviderEvent::Text("Hello from ".into()));
    assert_eq!(error_of(&events).0, "stream_cut");
    // A body that ends cleanly but without a finish reason.
    let last = body
        .windows(b"\"STOP\"".len())
        .position(|w| w == b"\"STOP\"")
        .unwrap();
    let start = body[..last]
        .windows(6)
        .rposition(|w| w == b"data: ")
        .unwrap();
    let (events, _s) = call(vec![Reply::sse(&body[..start])]);
    let (kind, message, _) = error_of(&events);
    assert_eq!(kind, "stream_cut");
    assert!(message.ends_with("the stream ended before the response was complete"));
    // Cut before any output: a connection failure (retried by the turn loop).
    let (events, _s) = call(vec![Reply::sse(&body[..40]).ending(End::Cut)]);
    assert_eq!(error_of(&events).0, "connection");
}
