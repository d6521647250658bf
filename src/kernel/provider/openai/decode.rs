//! The decoder of a streamed Chat Completions response: `chat.completion.chunk` objects (text,
//! reasoning, interleaved tool-call fragments, usage, finish reasons, in-stream errors) to
//! [`ProviderEvent`]s. Pure; the transport feeds it SSE events.

use crate::kernel::failure::ErrorKind;
use serde_json::{Map, Value};

use super::error::{clip, ErrorDetail};
use crate::kernel::message::{StopReason, Usage};
use crate::kernel::provider::model::{ModelCost, ModelInfo};
use crate::kernel::provider::sse::{SseEvent, StreamDecoder};
use crate::kernel::provider::ProviderEvent;

/// How much of an unreadable chunk an error quotes, in characters.
const MAX_QUOTE_CHARS: usize = 200;

/// One tool call of the response being streamed.
#[derive(Debug)]
struct OpenCall {
    /// The `index` the server tags its fragments with.
    index: u64,
    id: String,
    /// Whether `id` came from the server (rather than made up from the index).
    server_id: bool,
    open: bool,
}

/// Decoder for a streamed Chat Completions response: each SSE `data` payload is one
/// `chat.completion.chunk` JSON object, and the literal `[DONE]` ends the stream.
#[derive(Debug)]
pub struct OpenAiDecoder {
    cost: ModelCost,
    calls: Vec<OpenCall>,
    /// The stop reason of the `finish_reason` seen so far, if any.
    stop: Option<StopReason>,
    saw_output: bool,
    /// A terminal event was emitted; input is ignored from now on.
    ended: bool,
}

impl OpenAiDecoder {
    /// A decoder pricing usage with `model`'s cost.
    pub fn new(model: &ModelInfo) -> Self {
        OpenAiDecoder {
            cost: model.cost,
            calls: Vec::new(),
            stop: None,
            saw_output: false,
            ended: false,
        }
    }

    fn fail(&mut self, kind: ErrorKind, message: String, out: &mut Vec<ProviderEvent>) {
        self.ended = true;
        out.push(ProviderEvent::Error {
            kind,
            message,
            retry_after_ms: None,
        });
    }

    /// Ends the response normally, or as cut when no `finish_reason` came.
    fn end(&mut self, cut_message: &str, out: &mut Vec<ProviderEvent>) {
        match self.stop {
            Some(stop) => {
                self.close_calls(out);
                self.ended = true;
                out.push(ProviderEvent::Done { stop });
            }
            None => self.fail(ErrorKind::StreamCut, cut_message.to_string(), out),
        }
    }

    /// Ends every open tool call, in index order.
    fn close_calls(&mut self, out: &mut Vec<ProviderEvent>) {
        let mut open: Vec<&mut OpenCall> = self.calls.iter_mut().filter(|c| c.open).collect();
        open.sort_by_key(|c| c.index);
        for call in open {
            call.open = false;
            out.push(ProviderEvent::ToolCallEnd {
                id: call.id.clone(),
            });
        }
    }

    fn on_chunk(&mut self, chunk: &Map<String, Value>, out: &mut Vec<ProviderEvent>) {
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(choice) = choice {
            if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.on_finish(reason, out);
                if self.ended {
                    return;
                }
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            out.push(ProviderEvent::Usage(self.usage(usage)));
        }
    }

    fn on_delta(&mut self, delta: &Map<String, Value>, out: &mut Vec<ProviderEvent>) {
        let text = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        // Servers name reasoning differently; a few send both keys with the same text.
        if let Some(thinking) = text("reasoning_content").or_else(|| text("reasoning")) {
            self.saw_output = true;
            out.push(ProviderEvent::Thinking(thinking.to_string()));
        }
        if let Some(content) = text("content") {
            self.saw_output = true;
            out.push(ProviderEvent::Text(content.to_string()));
        }
        if let Some(items) = delta.get("tool_calls").and_then(Value::as_array) {
            for (position, item) in items.iter().enumerate() {
                self.on_tool_fragment(position, item, out);
            }
        }
    }

    fn on_tool_fragment(&mut self, position: usize, item: &Value, out: &mut Vec<ProviderEvent>) {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = item.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            // A few servers send the arguments as an object rather than as JSON text.
            Some(other) => other.to_string(),
        };
        let index = match item.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // No index: match by id, else a new id is a new call and a bare fragment
            // continues the latest call.
            None => match id {
                Some(id) => match self.calls.iter().rev().find(|c| c.id == id) {
                    Some(c) => c.index,
                    None => self.calls.iter().map(|c| c.index + 1).max().unwrap_or(0),
                },
                None => self.calls.last().map_or(position as u64, |c| c.index),
            },
        };
        let current = self.calls.iter().rposition(|c| c.index == index);
        let continues = |c: &OpenCall| match id {
            None => true,
            Some(id) => !c.server_id || c.id == id,
        };
        let at = match current {
            Some(i) if continues(&self.calls[i]) => {
                if !self.calls[i].open {
                    // A fragment of a call that already ended: nothing can be done with it.
                    return;
                }
                i
            }
            _ => {
                // Some servers reuse one index for successive calls, each with its own id.
                if let Some(i) = current {
                    if self.calls[i].open {
                        self.calls[i].open = false;
                        out.push(ProviderEvent::ToolCallEnd {
                            id: self.calls[i].id.clone(),
                        });
                    }
                }
                let call = OpenCall {
                    index,
                    id: id.map_or_else(|| format!("call_{index}"), str::to_string),
                    server_id: id.is_some(),
                    open: true,
                };
                self.saw_output = true;
                out.push(ProviderEvent::ToolCallStart {
                    id: call.id.clone(),
                    name: name.to_string(),
                });
                self.calls.push(call);
                self.calls.len() - 1
            }
        };
        if !arguments.is_empty() {
            out.push(ProviderEvent::ToolCallDelta {
                id: self.calls[at].id.clone(),
                delta: arguments,
            });
        }
    }

    fn on_finish(&mut self, reason: &str, out: &mut Vec<ProviderEvent>) {
        self.close_calls(out);
        let saw_tool = !self.calls.is_empty();
        let stop = match reason {
            "length" => StopReason::Length,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            "content_filter" => {
                self.fail(
                    ErrorKind::ContentFilter,
                    "the provider's content filter stopped the response".to_string(),
                    out,
                );
                return;
            }
            // "stop" and unknown words: the calls the model made still want running.
            _ if saw_tool => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        self.stop = Some(stop);
    }

    fn usage(&self, u: &Value) -> Usage {
        let count = |v: Option<&Value>| {
            v.and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.max(0.0) as u64)))
        };
        let prompt = count(u.get("prompt_tokens")).unwrap_or(0);
        let completion = count(u.get("completion_tokens")).unwrap_or(0);
        // DeepSeek also reports cache hits as `prompt_cache_hit_tokens`.
        let cached = count(
            u.get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens")),
        )
        .or_else(|| count(u.get("prompt_cache_hit_tokens")))
        .unwrap_or(0)
        .min(prompt);
        let mut usage = Usage {
            input: prompt - cached,
            output: completion,
            cache_read: cached,
            cache_write: 0,
            total_tokens: prompt + completion,
            ..Usage::default()
        };
        self.cost.apply(&mut usage);
        usage
    }
}

impl StreamDecoder for OpenAiDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ProviderEvent>) {
        if self.ended {
            return;
        }
        let data = event.data.trim();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.end("the stream ended without a finish reason", out);
            return;
        }
        let chunk = match serde_json::from_str::<Value>(data) {
            Ok(Value::Object(chunk)) => chunk,
            Ok(_) => {
                let message = format!(
                    "the provider sent a chunk that is not a JSON object: {}",
                    clip(data, MAX_QUOTE_CHARS)
                );
                self.fail(ErrorKind::BadResponse, message, out);
                return;
            }
            Err(e) => {
                let message = format!(
                    "the provider sent a chunk that is not valid JSON ({e}): {}",
                    clip(data, MAX_QUOTE_CHARS)
                );
                self.fail(ErrorKind::BadResponse, message, out);
                return;
            }
        };
        let error = match chunk.get("error") {
            Some(e) if !e.is_null() => Some(ErrorDetail::from_error(e)),
            // `event: error` with the error fields at the top level.
            _ if event.event.as_deref() == Some("error") => {
                Some(ErrorDetail::from_error(&Value::Object(chunk.clone())))
            }
            _ => None,
        };
        if let Some(detail) = error {
            let kind = detail.classify(detail.status_hint());
            let message = if detail.message.is_empty() {
                "the provider reported an error during the response".to_string()
            } else {
                detail.message
            };
            self.fail(kind, message, out);
            return;
        }
        self.on_chunk(&chunk, out);
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.ended {
            self.end("the stream ended before the response was complete", out);
        }
    }

    fn saw_output(&self) -> bool {
        self.saw_output
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_model as model;
    use super::*;
    use crate::kernel::provider::sse::SseDecoder;

    const TEXT: &str = include_str!("../../../../fixtures/providers/openai/text.sse");
    const PARALLEL: &str = include_str!("../../../../fixtures/providers/openai/parallel_tools.sse");
    const REASONING: &str = include_str!("../../../../fixtures/providers/openai/reasoning.sse");
    const LENGTH: &str = include_str!("../../../../fixtures/providers/openai/length.sse");
    const INSTREAM_ERROR: &str =
        include_str!("../../../../fixtures/providers/openai/instream_error.sse");
    const CUT: &str = include_str!("../../../../fixtures/providers/openai/cut.sse");

    /// Decodes `bytes` fed in pieces ending at `cuts`, then finishes both decoders.
    fn decode(bytes: &[u8], cuts: &[usize]) -> (Vec<ProviderEvent>, bool) {
        let mut sse = SseDecoder::new();
        let mut decoder = OpenAiDecoder::new(&model());
        let mut events = Vec::new();
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            sse.push(&bytes[at..cut], &mut events).unwrap();
            at = cut;
            for e in events.drain(..) {
                decoder.on_event(&e, &mut out);
            }
        }
        sse.finish(&mut events).unwrap();
        for e in events.drain(..) {
            decoder.on_event(&e, &mut out);
        }
        decoder.finish(&mut out);
        // Nothing more comes out once the stream is over.
        let mut after = Vec::new();
        decoder.on_event(
            &SseEvent {
                event: None,
                data: r#"{"choices":[{"delta":{"content":"late"}}]}"#.into(),
            },
            &mut after,
        );
        decoder.finish(&mut after);
        assert_eq!(after, vec![]);
        (out, decoder.saw_output())
    }

    /// The events of `fixture` in one piece and split at every byte offset.
    fn assert_fixture(fixture: &str, want: &[ProviderEvent]) {
        let bytes = fixture.as_bytes();
        let (got, saw) = decode(bytes, &[]);
        assert_eq!(got, want);
        let expect_output = want.iter().any(|e| {
            matches!(
                e,
                ProviderEvent::Text(_)
                    | ProviderEvent::Thinking(_)
                    | ProviderEvent::ToolCallStart { .. }
            )
        });
        assert_eq!(saw, expect_output);
        let terminals = got
            .iter()
            .filter(|e| matches!(e, ProviderEvent::Done { .. } | ProviderEvent::Error { .. }))
            .count();
        assert_eq!(terminals, 1);
        for i in 1..bytes.len() {
            assert_eq!(decode(bytes, &[i]).0, want, "split at byte {i}");
        }
    }

    fn text(s: &str) -> ProviderEvent {
        ProviderEvent::Text(s.into())
    }

    fn thinking(s: &str) -> ProviderEvent {
        ProviderEvent::Thinking(s.into())
    }

    fn start(id: &str, name: &str) -> ProviderEvent {
        ProviderEvent::ToolCallStart {
            id: id.into(),
            name: name.into(),
        }
    }

    fn delta(id: &str, d: &str) -> ProviderEvent {
        ProviderEvent::ToolCallDelta {
            id: id.into(),
            delta: d.into(),
        }
    }

    fn end(id: &str) -> ProviderEvent {
        ProviderEvent::ToolCallEnd { id: id.into() }
    }

    fn done(stop: StopReason) -> ProviderEvent {
        ProviderEvent::Done { stop }
    }

    fn error(kind: &str, message: &str) -> ProviderEvent {
        ProviderEvent::Error {
            kind: kind.into(),
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// Usage priced with [`model`]'s cost.
    fn usage(input: u64, output: u64, cache_read: u64) -> ProviderEvent {
        let mut u = Usage {
            input,
            output,
            cache_read,
            cache_write: 0,
            total_tokens: input + output + cache_read,
            ..Usage::default()
        };
        model().cost.apply(&mut u);
        ProviderEvent::Usage(u)
    }

    #[test]
    fn text_fixture() {
        assert_fixture(
            TEXT,
            &[
                text("Hello"),
                text(" from"),
                text(" the local"),
                text(" model."),
                text(" \u{2713} caf\u{e9}"),
                text(" \u{65e5}\u{672c}"),
                usage(100, 12, 20),
                done(StopReason::Stop),
            ],
        );
        // The prices really are per million tokens.
        let (events, _) = decode(TEXT.as_bytes(), &[]);
        let Some(ProviderEvent::Usage(u)) =
            events.iter().find(|e| matches!(e, ProviderEvent::Usage(_)))
        else {
            panic!("no usage in {events:?}");
        };
        assert_eq!(u.total_tokens, 132);
        let want = 100.0 * 2.0 / 1e6 + 12.0 * 8.0 / 1e6 + 20.0 * 0.5 / 1e6;
        assert!((u.cost.total - want).abs() < 1e-15, "{u:?}");
    }

    #[test]
    fn parallel_tools_fixture() {
        let (a, b) = (
            "call_Rk2x9VqLmN3pT7wYcA4bE1sD",
            "call_Hq8ZfJ2uXo5KcV9nW3tLpB7e",
        );
        assert_fixture(
            PARALLEL,
            &[
                start(a, "read"),
                delta(a, "{\"pa"),
                delta(a, "th\": "),
                start(b, "ls"),
                delta(b, "{\"path"),
                delta(a, "\"README"),
                delta(b, "\": \""),
                delta(a, ".md\"}"),
                delta(b, "."),
                delta(b, "\"}"),
                end(a),
                end(b),
                usage(412, 47, 0),
                done(StopReason::ToolUse),
            ],
        );
    }

    #[test]
    fn reasoning_fixture_with_crlf() {
        assert!(REASONING.contains("\r\n"));
        assert_fixture(
            REASONING,
            &[
                thinking("The user"),
                thinking(" asks for"),
                thinking(" 2 + 2."),
                thinking(" That is"),
                thinking(" 4."),
                text("2 + 2"),
                text(" = **4**."),
                usage(64, 29, 0),
                done(StopReason::Stop),
            ],
        );
    }

    #[test]
    fn length_fixture() {
        assert_fixture(
            LENGTH,
            &[
                text("Once"),
                text(" upon"),
                text(" a"),
                text(" time"),
                usage(31, 4, 0),
                done(StopReason::Length),
            ],
        );
    }

    #[test]
    fn instream_error_fixture() {
        assert_fixture(
            INSTREAM_ERROR,
            &[
                text("Let me"),
                text(" check"),
                error(
                    "server_error",
                    "The server had an error while processing your request.",
                ),
            ],
        );
    }

    #[test]
    fn cut_fixture() {
        assert_fixture(
            CUT,
            &[
                text("The"),
                text(" answer"),
                text(" is"),
                error(
                    "stream_cut",
                    "the stream ended before the response was complete",
                ),
            ],
        );
    }

    /// Decodes SSE text whose events are the given data payloads.
    fn decode_data(payloads: &[&str]) -> Vec<ProviderEvent> {
        let stream: String = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
        decode(stream.as_bytes(), &[]).0
    }

    #[test]
    fn odd_but_valid_chunks() {
        let got = decode_data(&[
            r#"{"object":"chat.completion.chunk"}"#,
            r#"{"choices":[]}"#,
            r#"{"choices":[{"index":0}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning":"hmm","x":1}}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"a","reasoning":"a"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"","tool_calls":null}}]}"#,
            // A whole call in one chunk without an id; another with arguments as an object.
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","function":{"name":"ls","arguments":{"path":"."}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            got,
            vec![
                thinking("hmm"),
                thinking("a"),
                start("call_0", "read"),
                delta("call_0", "{\"path\":\"a\"}"),
                start("call_1", "ls"),
                delta("call_1", "{\"path\":\".\"}"),
                end("call_0"),
                end("call_1"),
                done(StopReason::ToolUse),
            ]
        );
    }

    #[test]
    fn calls_sharing_an_index_or_without_one() {
        let got = decode_data(&[
            // Successive calls that all claim index 0 but carry their own ids.
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"read","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"arguments":" "}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"ls","arguments":"{}"}}]}}]}"#,
            // No index at all: matched by id, or a new call.
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"c","function":{"name":"grep","arguments":"{"}},{"id":"c","function":{"arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert_eq!(
            got,
            vec![
                start("a", "read"),
                delta("a", "{}"),
                delta("a", " "),
                end("a"),
                start("b", "ls"),
                delta("b", "{}"),
                start("c", "grep"),
                delta("c", "{"),
                delta("c", "}"),
                end("b"),
                end("c"),
                // No [DONE]: the server closed after the finish reason.
                done(StopReason::ToolUse),
            ]
        );
    }

    #[test]
    fn terminal_cases() {
        assert_eq!(
            decode_data(&[
                r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"content_filter"}]}"#,
                "[DONE]",
            ]),
            vec![
                text("x"),
                error(
                    "content_filter",
                    "the provider's content filter stopped the response"
                ),
            ]
        );
        assert_eq!(
            decode_data(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#, "[DONE]"]),
            vec![
                text("x"),
                error("stream_cut", "the stream ended without a finish reason")
            ]
        );
        let got = decode_data(&[
            r#"{"choices":[{"delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"delta":{"content":"x"}}]"#,
        ]);
        let [ProviderEvent::Text(_), ProviderEvent::Error {
            kind,
            message,
            retry_after_ms: None,
        }] = got.as_slice()
        else {
            panic!("{got:?}");
        };
        assert_eq!(*kind, ErrorKind::BadResponse);
        assert!(message.contains("not valid JSON"), "{message}");
        assert!(
            message.ends_with(r#"{"choices":[{"delta":{"content":"x"}}]"#),
            "{message}"
        );
        let long = format!("<html>{}</html>", "x".repeat(400));
        let got = decode_data(&[&long]);
        let [ProviderEvent::Error { kind, message, .. }] = got.as_slice() else {
            panic!("{got:?}");
        };
        assert_eq!(*kind, ErrorKind::BadResponse);
        assert!(
            message.ends_with(&format!("<html>{}…", "x".repeat(194))),
            "{message}"
        );
        assert_eq!(
            decode_data(&["42"]),
            vec![error(
                "bad_response",
                "the provider sent a chunk that is not a JSON object: 42"
            )]
        );
        // Unknown finish reasons count as a normal stop; usage after the finish still counts.
        assert_eq!(
            decode_data(&[
                r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"eos"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_cache_hit_tokens":1}}"#,
                "[DONE]",
            ]),
            vec![
                text("x"),
                usage(3, 1, 0),
                usage(2, 2, 1),
                done(StopReason::Stop)
            ]
        );
        // Nothing at all arrived.
        assert_eq!(
            decode(b"", &[]).0,
            vec![error(
                "stream_cut",
                "the stream ended before the response was complete"
            )]
        );
    }

    #[test]
    fn instream_error_kinds() {
        let kind_of = |payload: &str| match decode_data(&[payload]).as_slice() {
            [ProviderEvent::Error { kind, message, .. }] => (kind.clone(), message.clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind_of(
                r#"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#
            ),
            ("rate_limited".into(), "Rate limit reached".into())
        );
        assert_eq!(
            kind_of(r#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error"}}"#).0,
            ErrorKind::ContextOverflow
        );
        assert_eq!(
            kind_of(r#"{"error":{"message":"Upstream error","code":502}}"#),
            ("server_error".into(), "Upstream error".into())
        );
        assert_eq!(
            kind_of(r#"{"error":{"message":"Overloaded","type":"overloaded_error"}}"#).0,
            ErrorKind::Overloaded
        );
        assert_eq!(
            kind_of(r#"{"error":"model crashed"}"#),
            ("provider_error".into(), "model crashed".into())
        );
        assert_eq!(
            kind_of(r#"{"error":{}}"#),
            (
                "provider_error".into(),
                "the provider reported an error during the response".into()
            )
        );
        let mut decoder = OpenAiDecoder::new(&model());
        let mut out = Vec::new();
        decoder.on_event(
            &SseEvent {
                event: Some("error".into()),
                data: r#"{"message":"boom","type":"server_error"}"#.into(),
            },
            &mut out,
        );
        assert_eq!(out, vec![error("server_error", "boom")]);
        assert!(!decoder.saw_output());
    }
}
