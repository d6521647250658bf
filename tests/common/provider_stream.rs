//! The recorded-stream tests' provider fixtures (`tests/providers.rs`, `tests/responses.rs`,
//! `tests/gemini_stream.rs`, `tests/output_schema.rs`): the model and request they call with,
//! one streamed call of a real HTTP provider against a test server with its events collected,
//! the same bytes decoded in-process, and what the events end with.

use std::time::Duration;

use keel::kernel::abort::AbortController;
use keel::kernel::message::{Message, StopReason};
use keel::kernel::provider::http::{HttpOptions, HttpProvider};
use keel::kernel::provider::model::{ModelCost, ModelInfo};
use keel::kernel::provider::sse::{SseDecoder, StreamDecoder};
use keel::kernel::provider::{ModelRequest, Provider, ProviderEvent};
use keel::kernel::tool;

/// `m` as a reasoning model priced at `cost`, with the thinking levels `levels`.
pub fn reasoning(mut m: ModelInfo, cost: ModelCost, levels: &[&str]) -> ModelInfo {
    m.cost = cost;
    m.reasoning = true;
    m.thinking_levels = levels.iter().map(|l| l.to_string()).collect();
    m
}

/// The request of the recorded-stream tests: "be brief", one user message ("hi") and the
/// `read` tool, at `thinking_level`, in session `session_id`, without an output schema.
pub fn request(thinking_level: &str, session_id: Option<&str>) -> ModelRequest {
    ModelRequest {
        system_prompt: "be brief".into(),
        messages: vec![Message::user("hi", 1)],
        tools: vec![tool::spec("read").unwrap()],
        thinking_level: thinking_level.into(),
        session_id: session_id.map(String::from),
        output_schema: None,
    }
}

/// Every event of one call of `model` (served by the test server) with `key`, until the
/// stream ends; 5 s connect and idle timeouts.
pub fn events(model: ModelInfo, key: &str, request: ModelRequest) -> Vec<ProviderEvent> {
    let options = HttpOptions {
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..HttpOptions::default()
    };
    let p = HttpProvider::new(model, Some(key.into()), options).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let (_c, signal) = AbortController::new();
            let mut rx = p.stream(request, signal);
            let mut out = Vec::new();
            while let Some(ev) = rx.recv().await {
                out.push(ev);
            }
            out
        })
}

/// Joins runs of text and thinking, so sequences can be written out whatever the chunking.
pub fn merged(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
    use ProviderEvent as E;
    let mut out: Vec<E> = Vec::new();
    for ev in events {
        match (out.last_mut(), ev) {
            (Some(E::Text(a)), E::Text(b)) => a.push_str(&b),
            (Some(E::Thinking(a)), E::Thinking(b)) => a.push_str(&b),
            (_, ev) => out.push(ev),
        }
    }
    out
}

/// `body` decoded in-process by a fresh decoder from `decoder`, fed whole and then split at
/// every byte offset: the same events each time (asserted). Errors carry the transport's
/// `who: ` prefix (`provider (model)`), as over HTTP.
pub fn decoded_at_every_split<D: StreamDecoder>(
    body: &[u8],
    who: &str,
    decoder: impl Fn() -> D,
) -> Vec<ProviderEvent> {
    let decode = |cut: usize| {
        let mut sse = SseDecoder::new();
        let mut decoder = decoder();
        let (mut events, mut out) = (Vec::new(), Vec::new());
        sse.push(&body[..cut], &mut events).unwrap();
        sse.push(&body[cut..], &mut events).unwrap();
        sse.finish(&mut events).unwrap();
        for e in &events {
            decoder.on_event(e, &mut out);
        }
        decoder.finish(&mut out);
        out
    };
    let first = decode(body.len());
    for cut in 1..body.len() {
        assert_eq!(decode(cut), first, "split at byte {cut}");
    }
    first
        .into_iter()
        .map(|ev| match ev {
            ProviderEvent::Error {
                kind,
                message,
                retry_after_ms,
            } => ProviderEvent::Error {
                kind,
                message: format!("{who}: {message}"),
                retry_after_ms,
            },
            ev => ev,
        })
        .collect()
}

/// The kind (its wire word), message and retry hint of the one error that ends `events`.
pub fn error_of(events: &[ProviderEvent]) -> (String, String, Option<u64>) {
    match events.last() {
        Some(ProviderEvent::Error {
            kind,
            message,
            retry_after_ms,
        }) => (kind.to_string(), message.clone(), *retry_after_ms),
        other => panic!("expected a final error, got {other:?} in {events:?}"),
    }
}

/// The event that ends a stream with `stop`.
pub fn done(stop: StopReason) -> ProviderEvent {
    ProviderEvent::Done { stop }
}
