//! The decoder of a streamed Messages API response: `message_start`, content block events,
//! `message_delta` and `message_stop` (plus `error` and `ping`) to [`ProviderEvent`]s. Pure; the
//! transport feeds it SSE events.

use crate::kernel::failure::ErrorKind;
use serde_json::Value;

use super::error::kind_for_type;
use crate::kernel::message::{StopReason, Usage};
use crate::kernel::provider::model::{ModelCost, ModelInfo};
use crate::kernel::provider::sse::{SseEvent, StreamDecoder};
use crate::kernel::provider::ProviderEvent;

/// Decodes one streamed Messages API response.
///
/// Text, thinking and tool-use blocks become [`ProviderEvent`]s; `redacted_thinking` blocks and
/// server-side tool blocks are dropped, as are event types it does not know. Usage is reported
/// at `message_start` and on every `message_delta`; `message_stop` ends the stream with `Done`
/// (or an `Error` of kind `refusal` when the model refused).
#[derive(Debug)]
pub struct AnthropicDecoder {
    cost: ModelCost,
    usage: Usage,
    /// Open `tool_use` blocks: (content block index, tool call id).
    tools: Vec<(u64, String)>,
    /// The last `stop_reason` a `message_delta` carried.
    stop_reason: Option<String>,
    finished: bool,
    saw_output: bool,
}

impl AnthropicDecoder {
    /// A decoder pricing usage with `model.cost`.
    pub fn new(model: &ModelInfo) -> Self {
        AnthropicDecoder {
            cost: model.cost,
            usage: Usage::default(),
            tools: Vec::new(),
            stop_reason: None,
            finished: false,
            saw_output: false,
        }
    }

    fn terminal(&mut self, event: ProviderEvent, out: &mut Vec<ProviderEvent>) {
        self.finished = true;
        out.push(event);
    }

    fn fail(&mut self, kind: ErrorKind, message: String, out: &mut Vec<ProviderEvent>) {
        self.terminal(
            ProviderEvent::Error {
                kind,
                message,
                retry_after_ms: None,
            },
            out,
        );
    }

    /// Takes the token counts present in a `usage` object and emits the updated usage.
    fn update_usage(&mut self, usage: Option<&Value>, out: &mut Vec<ProviderEvent>) {
        let Some(usage) = usage else { return };
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        if let Some(n) = field("input_tokens") {
            self.usage.input = n;
        }
        if let Some(n) = field("output_tokens") {
            self.usage.output = n;
        }
        if let Some(n) = field("cache_read_input_tokens") {
            self.usage.cache_read = n;
        }
        if let Some(n) = field("cache_creation_input_tokens") {
            self.usage.cache_write = n;
        }
        let u = &mut self.usage;
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
        self.cost.apply(u);
        out.push(ProviderEvent::Usage(self.usage.clone()));
    }

    fn tool_id(&self, index: u64) -> Option<&str> {
        self.tools
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, id)| id.as_str())
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<ProviderEvent>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let text_of = |field: &str| {
            block
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = text_of("text") {
                    self.saw_output = true;
                    out.push(ProviderEvent::Text(text));
                }
            }
            Some("thinking") => {
                if let Some(thinking) = text_of("thinking") {
                    self.saw_output = true;
                    out.push(ProviderEvent::Thinking(thinking));
                }
            }
            Some("tool_use") => {
                let id = text_of("id").unwrap_or_default();
                let name = text_of("name").unwrap_or_default();
                self.saw_output = true;
                self.tools.push((index, id.clone()));
                out.push(ProviderEvent::ToolCallStart { id, name });
            }
            // `redacted_thinking` (encrypted reasoning) and server tool blocks are dropped.
            _ => {}
        }
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<ProviderEvent>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        let delta = data.get("delta").unwrap_or(&Value::Null);
        let text_of = |field: &str| {
            delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = text_of("text") {
                    self.saw_output = true;
                    out.push(ProviderEvent::Text(text));
                }
            }
            Some("thinking_delta") => {
                if let Some(thinking) = text_of("thinking") {
                    self.saw_output = true;
                    out.push(ProviderEvent::Thinking(thinking));
                }
            }
            Some("signature_delta") => {
                if let Some(signature) = text_of("signature") {
                    out.push(ProviderEvent::ThinkingSignature(signature));
                }
            }
            Some("input_json_delta") => {
                if let (Some(id), Some(fragment)) = (self.tool_id(index), text_of("partial_json")) {
                    out.push(ProviderEvent::ToolCallDelta {
                        id: id.to_string(),
                        delta: fragment,
                    });
                }
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, data: &Value, out: &mut Vec<ProviderEvent>) {
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        if let Some(at) = self.tools.iter().position(|(i, _)| *i == index) {
            let (_, id) = self.tools.remove(at);
            out.push(ProviderEvent::ToolCallEnd { id });
        }
    }

    fn message_stop(&mut self, out: &mut Vec<ProviderEvent>) {
        let stop = match self.stop_reason.as_deref() {
            Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::Length,
            Some("tool_use") => StopReason::ToolUse,
            Some("refusal") => {
                let message = "the model refused to continue (stop_reason refusal)".to_string();
                return self.fail(ErrorKind::Refusal, message, out);
            }
            // end_turn, stop_sequence, pause_turn, and anything newer.
            _ => StopReason::Stop,
        };
        self.terminal(ProviderEvent::Done { stop }, out);
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ProviderEvent>) {
        if self.finished {
            return;
        }
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            Err(_) => {
                let snippet: String = event.data.chars().take(200).collect();
                let message = format!("the server sent an event that is not JSON: {snippet}");
                return self.fail(ErrorKind::BadResponse, message, out);
            }
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                let usage = data.get("message").and_then(|m| m.get("usage"));
                self.update_usage(usage, out);
            }
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out),
            "content_block_stop" => self.block_stop(&data, out),
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_string());
                }
                self.update_usage(data.get("usage"), out);
            }
            "message_stop" => self.message_stop(out),
            "error" => {
                let error = data.get("error").unwrap_or(&Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| event.data.chars().take(200).collect());
                let kind = error
                    .get("type")
                    .and_then(Value::as_str)
                    .map_or(ErrorKind::ProviderError, |t| kind_for_type(t, &message));
                self.fail(kind, message, out);
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.finished {
            let message = "the stream ended before the response was complete".to_string();
            self.fail(ErrorKind::StreamCut, message, out);
        }
    }

    fn saw_output(&self) -> bool {
        self.saw_output
    }
}

#[cfg(test)]
mod tests {
    use super::super::sonnet;
    use super::*;
    use crate::kernel::provider::sse::SseDecoder;
    use serde_json::json;

    const TEXT: &str = include_str!("../../../../fixtures/providers/anthropic/text.sse");
    const THINKING_TOOL: &str =
        include_str!("../../../../fixtures/providers/anthropic/thinking_tool.sse");
    const MAX_TOKENS: &str =
        include_str!("../../../../fixtures/providers/anthropic/max_tokens.sse");
    const OVERLOADED: &str =
        include_str!("../../../../fixtures/providers/anthropic/overloaded.sse");
    const CUT: &str = include_str!("../../../../fixtures/providers/anthropic/cut.sse");

    /// Runs `bytes` through the SSE and Anthropic decoders, split at `cut` when given.
    fn decode(bytes: &[u8], cut: Option<usize>) -> Vec<ProviderEvent> {
        let mut sse = SseDecoder::new();
        let mut dec = AnthropicDecoder::new(&sonnet());
        let mut events = Vec::new();
        let mut out = Vec::new();
        let (a, b) = bytes.split_at(cut.unwrap_or(bytes.len()));
        for piece in [a, b] {
            sse.push(piece, &mut events).unwrap();
            for e in events.drain(..) {
                dec.on_event(&e, &mut out);
            }
        }
        sse.finish(&mut events).unwrap();
        for e in events.drain(..) {
            dec.on_event(&e, &mut out);
        }
        dec.finish(&mut out);
        out
    }

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> ProviderEvent {
        let mut u = Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: input + output + cache_read + cache_write,
            ..Usage::default()
        };
        sonnet().cost.apply(&mut u);
        ProviderEvent::Usage(u)
    }

    fn text(s: &str) -> ProviderEvent {
        ProviderEvent::Text(s.into())
    }

    fn error(kind: &str, message: &str) -> ProviderEvent {
        ProviderEvent::Error {
            kind: kind.into(),
            message: message.into(),
            retry_after_ms: None,
        }
    }

    fn assert_every_split(fixture: &str, want: &[ProviderEvent]) {
        let bytes = fixture.as_bytes();
        assert_eq!(decode(bytes, None), want);
        for i in 1..bytes.len() {
            assert_eq!(decode(bytes, Some(i)), want, "split at byte {i}");
        }
    }

    #[test]
    fn text_stream_with_cache_usage() {
        let want = vec![
            usage(250, 1, 1200, 300),
            text("Bonjour"),
            text(" — na"),
            text("ïve caf"),
            text("é ✓"),
            usage(250, 15, 1200, 300),
            ProviderEvent::Done {
                stop: StopReason::Stop,
            },
        ];
        assert_every_split(TEXT, &want);
        let joined: String = want
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(joined, "Bonjour — naïve café ✓");
        // 250 × $3 + 15 × $15 + 1200 × $0.30 + 300 × $3.75, per million tokens.
        let ProviderEvent::Usage(u) = &want[5] else {
            unreachable!()
        };
        assert_eq!(u.total_tokens, 1765);
        assert!((u.cost.total - 0.002460).abs() < 1e-12, "{}", u.cost.total);
    }

    #[test]
    fn thinking_then_text_then_tool_call() {
        let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
        let delta = |d: &str| ProviderEvent::ToolCallDelta {
            id: id.into(),
            delta: d.into(),
        };
        let want = vec![
            usage(1843, 4, 0, 0),
            ProviderEvent::Thinking("The user wants to see every file".into()),
            ProviderEvent::Thinking(", hidden ones included.".into()),
            ProviderEvent::Thinking(" ls -la does that.".into()),
            ProviderEvent::ThinkingSignature(
                "EqQBCkgIBxABGAIiQHx0yQ0JX2ZbW1FkR8v3nWcN4mS6r0pLq7TzB0a9Yk3uE1s8Vf2hJdK5xG7cRnQwPoZ0iLmA4tY6uHb9eQ1SDL2kZ3Xa8Uf0Wq5NrYcEgzJ7pQ".into(),
            ),
            text("Listing the directory"),
            text(" with hidden files."),
            ProviderEvent::ToolCallStart {
                id: id.into(),
                name: "bash".into(),
            },
            delta("{\"comman"),
            delta("d\":\"l"),
            delta("s -"),
            delta("la\"}"),
            ProviderEvent::ToolCallEnd { id: id.into() },
            usage(1843, 112, 0, 0),
            ProviderEvent::Done {
                stop: StopReason::ToolUse,
            },
        ];
        assert_every_split(THINKING_TOOL, &want);
        let args: String = want
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"command": "ls -la"})
        );
    }

    #[test]
    fn max_tokens_overloaded_and_cut_streams() {
        assert_eq!(
            decode(MAX_TOKENS.as_bytes(), None),
            vec![
                usage(38, 2, 0, 0),
                text("Once upon a time, in a"),
                text(" village by the"),
                usage(38, 10, 0, 0),
                ProviderEvent::Done {
                    stop: StopReason::Length
                },
            ]
        );
        assert_eq!(
            decode(OVERLOADED.as_bytes(), None),
            vec![usage(512, 1, 0, 0), error("overloaded", "Overloaded")]
        );
        assert_eq!(
            decode(CUT.as_bytes(), None),
            vec![
                usage(90, 1, 0, 0),
                text("The build"),
                text(" failed because"),
                error(
                    "stream_cut",
                    "the stream ended before the response was complete"
                ),
            ]
        );
    }

    fn feed(events: &[(&str, &str)]) -> (Vec<ProviderEvent>, bool) {
        let mut dec = AnthropicDecoder::new(&sonnet());
        let mut out = Vec::new();
        for (name, data) in events {
            let e = SseEvent {
                event: Some(name.to_string()),
                data: data.to_string(),
            };
            dec.on_event(&e, &mut out);
        }
        dec.finish(&mut out);
        (out, dec.saw_output())
    }

    #[test]
    fn refusal_bad_json_stream_errors_and_ignored_events() {
        let (out, saw) = feed(&[
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":3}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert!(!saw);
        assert_eq!(
            out,
            vec![
                usage(0, 3, 0, 0),
                error(
                    "refusal",
                    "the model refused to continue (stop_reason refusal)"
                ),
            ]
        );

        let long = format!("<html>{}</html>", "x".repeat(300));
        let (out, _) = feed(&[("message_start", &long), ("message_stop", "{}")]);
        let want = format!(
            "the server sent an event that is not JSON: {}",
            &long[..200]
        );
        assert_eq!(out, vec![error("bad_response", &want)]);

        let (out, saw) = feed(&[
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}"#,
            ),
            ("future_event", r#"{"type":"future_event","x":1}"#),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"pause_turn"},"usage":{"output_tokens":2}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert!(saw);
        assert_eq!(
            out,
            vec![
                text("Hi"),
                usage(0, 2, 0, 0),
                ProviderEvent::Done {
                    stop: StopReason::Stop
                }
            ]
        );

        let rows = [
            (
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
                "rate_limited",
            ),
            ("api_error", "Internal server error", "server_error"),
            (
                "permission_error",
                "Your API key does not have permission",
                "auth",
            ),
            (
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
                "context_overflow",
            ),
            (
                "invalid_request_error",
                "messages: text content blocks must be non-empty",
                "bad_request",
            ),
            (
                "billing_error",
                "Your credit balance is too low",
                "provider_error",
            ),
        ];
        for (error_type, message, kind) in rows {
            let data = json!({"type": "error", "error": {"type": error_type, "message": message}});
            let (out, _) = feed(&[("error", &data.to_string())]);
            assert_eq!(out, vec![error(kind, message)], "{error_type}");
        }
    }
}
