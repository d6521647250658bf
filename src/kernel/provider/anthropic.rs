//! The Anthropic Messages API (`POST /v1/messages`, streamed): the request body built from a
//! [`ModelRequest`], the decoder that turns the response's server-sent events into
//! [`ProviderEvent`]s, and the mapping of error responses to stable error kinds. No I/O here;
//! the HTTP transport sends the body, feeds the bytes and reads the status.

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use super::model::{ModelCost, ModelInfo};
use super::sse::{SseEvent, StreamDecoder};
use super::{ModelRequest, ProviderEvent};
use crate::kernel::message::{
    AssistantMessage, Content, Message, StopReason, ToolResultMessage, Usage,
};

/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u64 = 1024;

/// The JSON body for a streamed `POST {base_url}/v1/messages` call.
///
/// The system prompt and the last block of the last user message carry `cache_control`
/// breakpoints (prompt caching). Assistant messages that ended in an error or an abort are left
/// out, together with the results of their tool calls; consecutive messages of the same role are
/// merged into one. Thinking is enabled with a token budget when the model reasons and the
/// clamped level is not `off`.
pub fn request_body(req: &ModelRequest, model: &ModelInfo) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(model.max_tokens));
    body.insert("stream".into(), json!(true));
    if !req.system_prompt.is_empty() {
        body.insert(
            "system".into(),
            json!([{
                "type": "text",
                "text": req.system_prompt,
                "cache_control": {"type": "ephemeral"},
            }]),
        );
    }
    body.insert("messages".into(), Value::Array(messages(&req.messages)));
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if model.reasoning {
        let level = model.clamp_thinking(&req.thinking_level);
        if let Some(budget) = thinking_budget(&level, model.max_tokens) {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
    }
    Value::Object(body)
}

/// The thinking budget for a level, kept below `max_tokens` as the API requires. `None` for
/// `off`, unknown levels, and limits too small to fit the minimum budget.
fn thinking_budget(level: &str, max_tokens: u64) -> Option<u64> {
    let mut budget = match level {
        "minimal" => MIN_THINKING_BUDGET,
        "low" => 4096,
        "medium" => 10240,
        "high" => 20480,
        "xhigh" => 32000,
        _ => return None,
    };
    if budget >= max_tokens {
        budget = max_tokens
            .saturating_sub(MIN_THINKING_BUDGET)
            .max(MIN_THINKING_BUDGET);
    }
    (budget < max_tokens).then_some(budget)
}

/// The conversation as API messages: alternating roles, cache breakpoint on the last user turn.
fn messages(history: &[Message]) -> Vec<Value> {
    let dropped_calls: HashSet<&str> = history
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) if a.is_failed() => Some(a),
            _ => None,
        })
        .flat_map(|a| a.content.iter())
        .filter_map(|c| match c {
            Content::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();

    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in history {
        match m {
            Message::User(u) => push_blocks(&mut out, "user", plain_blocks(&u.content)),
            Message::Assistant(a) if !a.is_failed() => {
                push_blocks(&mut out, "assistant", assistant_blocks(a))
            }
            Message::Assistant(_) => {}
            Message::ToolResult(r) if !dropped_calls.contains(r.tool_call_id.as_str()) => {
                push_blocks(&mut out, "user", vec![tool_result_block(r)])
            }
            Message::ToolResult(_) => {}
        }
    }

    if let Some((_, blocks)) = out.iter_mut().rev().find(|(role, _)| *role == "user") {
        if let Some(Value::Object(last)) = blocks.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
    }

    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// Appends blocks as a message of `role`, merging into the previous message when it has the
/// same role. Merged `tool_result` blocks go before any other block, as the API requires.
fn push_blocks(out: &mut Vec<(&'static str, Vec<Value>)>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    match out.last_mut() {
        Some((last_role, existing)) if *last_role == role => {
            for block in blocks {
                if is_tool_result(&block) {
                    let at = existing.iter().take_while(|b| is_tool_result(b)).count();
                    existing.insert(at, block);
                } else {
                    existing.push(block);
                }
            }
        }
        _ => out.push((role, blocks)),
    }
}

fn is_tool_result(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("tool_result")
}

/// Text and image blocks of user or tool-result content. Empty text is dropped (the API rejects
/// empty text blocks); thinking and tool calls never appear there and are dropped too.
fn plain_blocks(content: &[Content]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            Content::Image { data, mime_type } => Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": mime_type, "data": data},
            })),
            _ => None,
        })
        .collect()
}

/// The blocks of a kept assistant message, in order. Thinking without a signature is dropped
/// (the API rejects it), as are empty text and images.
fn assistant_blocks(m: &AssistantMessage) -> Vec<Value> {
    m.content
        .iter()
        .filter_map(|c| match c {
            Content::Thinking {
                thinking,
                signature: Some(signature),
            } if !signature.is_empty() => Some(json!({
                "type": "thinking",
                "thinking": thinking,
                "signature": signature,
            })),
            Content::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            Content::ToolCall {
                id,
                name,
                arguments,
            } => {
                let input = if arguments.is_object() {
                    arguments.clone()
                } else {
                    json!({})
                };
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            _ => None,
        })
        .collect()
}

/// A `tool_result` block; `content` is left out when the result has no text or image.
fn tool_result_block(r: &ToolResultMessage) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(r.tool_call_id));
    let content = plain_blocks(&r.content);
    if !content.is_empty() {
        block.insert("content".into(), Value::Array(content));
    }
    block.insert("is_error".into(), json!(r.is_error));
    Value::Object(block)
}

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

    fn fail(&mut self, kind: &str, message: String, out: &mut Vec<ProviderEvent>) {
        self.terminal(
            ProviderEvent::Error {
                kind: kind.into(),
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
                return self.fail("refusal", message, out);
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
                return self.fail("bad_response", message, out);
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
                    .map_or("provider_error", |t| kind_for_type(t, &message));
                self.fail(kind, message, out);
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.finished {
            let message = "the stream ended before the response was complete".to_string();
            self.fail("stream_cut", message, out);
        }
    }

    fn saw_output(&self) -> bool {
        self.saw_output
    }
}

/// Whether an error message says the prompt does not fit the model's context window.
fn is_context_overflow(message: &str) -> bool {
    let m = message.to_lowercase();
    [
        "prompt is too long",
        "context window",
        "context limit",
        "context length",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The stable error kind for an Anthropic error `type`.
fn kind_for_type(error_type: &str, message: &str) -> &'static str {
    match error_type {
        "overloaded_error" => "overloaded",
        "rate_limit_error" => "rate_limited",
        "api_error" => "server_error",
        "timeout_error" => "timeout",
        "authentication_error" | "permission_error" => "auth",
        "invalid_request_error" if is_context_overflow(message) => "context_overflow",
        "invalid_request_error" | "request_too_large" | "not_found_error" => "bad_request",
        _ => "provider_error",
    }
}

/// The stable error kind for an HTTP status without a recognised error body.
fn kind_for_status(status: u16, message: &str) -> &'static str {
    match status {
        401 | 403 => "auth",
        429 => "rate_limited",
        529 => "overloaded",
        400 | 404 | 413 | 422 if is_context_overflow(message) => "context_overflow",
        400 | 404 | 413 | 422 => "bad_request",
        408 => "timeout",
        500..=599 => "server_error",
        _ => "provider_error",
    }
}

/// Maps a non-2xx response to `(kind, message)`.
///
/// The body is read as `{"type":"error","error":{"type","message"}}`; the kind comes from the
/// error type when there is one, else from the status. The message is
/// `HTTP <status>: <server message>`, falling back to the trimmed body (at most 500 characters),
/// or just `HTTP <status>` when the body is empty.
pub fn error_from_response(status: u16, body: &str) -> (String, String) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let error_type = error.and_then(|e| e.get("type")).and_then(Value::as_str);
    let server_message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| body.trim().chars().take(500).collect());
    let kind = match error_type {
        Some(t) => kind_for_type(t, &server_message),
        None => kind_for_status(status, &server_message),
    };
    let message = if server_message.is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status}: {server_message}")
    };
    (kind.to_string(), message)
}

#[cfg(test)]
mod tests {
    use super::super::model::API_ANTHROPIC;
    use super::super::sse::SseDecoder;
    use super::*;
    use crate::kernel::message::UserMessage;
    use crate::kernel::tool::ToolSpec;

    const TEXT: &str = include_str!("../../../fixtures/providers/anthropic/text.sse");
    const THINKING_TOOL: &str =
        include_str!("../../../fixtures/providers/anthropic/thinking_tool.sse");
    const MAX_TOKENS: &str = include_str!("../../../fixtures/providers/anthropic/max_tokens.sse");
    const OVERLOADED: &str = include_str!("../../../fixtures/providers/anthropic/overloaded.sse");
    const CUT: &str = include_str!("../../../fixtures/providers/anthropic/cut.sse");
    const ERROR_401: &str = include_str!("../../../fixtures/providers/anthropic/error_401.json");
    const ERROR_400_TOO_LONG: &str =
        include_str!("../../../fixtures/providers/anthropic/error_400_too_long.json");
    const ERROR_529: &str = include_str!("../../../fixtures/providers/anthropic/error_529.json");

    fn sonnet() -> ModelInfo {
        let mut m = ModelInfo::unlisted(
            "anthropic",
            API_ANTHROPIC,
            "https://api.anthropic.com",
            "claude-sonnet-4-5",
        );
        m.reasoning = true;
        m.thinking_levels = ["off", "minimal", "low", "medium", "high", "xhigh"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        m.cost = ModelCost {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        m.max_tokens = 64_000;
        m
    }

    /// Runs `bytes` through the SSE and Anthropic decoders, split at `cut` when given.
    fn decode(bytes: &[u8], cut: Option<usize>) -> Vec<ProviderEvent> {
        let mut sse = SseDecoder::new();
        let mut dec = AnthropicDecoder::new(&sonnet());
        let mut events = Vec::new();
        let mut out = Vec::new();
        let (a, b) = bytes.split_at(cut.unwrap_or(bytes.len()));
        for piece in [a, b] {
            sse.push(piece, &mut events);
            for e in events.drain(..) {
                dec.on_event(&e, &mut out);
            }
        }
        sse.finish(&mut events);
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

    fn user(text: &str, timestamp: i64) -> Message {
        Message::user(text, timestamp)
    }

    fn assistant(content: Vec<Content>, stop_reason: StopReason) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            api: API_ANTHROPIC.into(),
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        })
    }

    fn tool_result(id: &str, content: Vec<Content>, is_error: bool) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            content,
            details: None,
            is_error,
            duration_ms: None,
            timestamp: 0,
        })
    }

    fn call(id: &str, arguments: Value) -> Content {
        Content::ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments,
        }
    }

    #[test]
    fn request_body_converts_the_conversation() {
        let req = ModelRequest {
            system_prompt: "You are keel.".into(),
            messages: vec![
                Message::User(UserMessage {
                    content: vec![
                        Content::text("What is in here?"),
                        Content::Image {
                            data: "iVBORw0KGgo=".into(),
                            mime_type: "image/png".into(),
                        },
                    ],
                    timestamp: 1,
                }),
                assistant(
                    vec![
                        Content::Thinking {
                            thinking: "Look first.".into(),
                            signature: Some("sig-1".into()),
                        },
                        Content::Thinking {
                            thinking: "unsigned, from another provider".into(),
                            signature: None,
                        },
                        Content::text("Let me look."),
                        call("toolu_a", json!({"command": "ls"})),
                        call("toolu_b", json!("{\"command\": \"cat")),
                    ],
                    StopReason::ToolUse,
                ),
                tool_result("toolu_a", vec![Content::text("a.txt\nb.txt")], false),
                tool_result("toolu_b", vec![Content::text("bad arguments")], true),
                user("Only the text files, please.", 2),
                assistant(
                    vec![
                        Content::text("Partial"),
                        call("toolu_c", json!({"command": "find"})),
                    ],
                    StopReason::Error,
                ),
                tool_result("toolu_c", vec![Content::text("never sent")], true),
                user("Try again.", 3),
            ],
            tools: vec![ToolSpec {
                name: "bash",
                description: "Run a shell command",
                parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            }],
            thinking_level: "high".into(),
        };
        let want = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "stream": true,
            "system": [{"type": "text", "text": "You are keel.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "What is in here?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Look first.", "signature": "sig-1"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_a", "name": "bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "bash", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "a.txt\nb.txt"}], "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "bad arguments"}], "is_error": true},
                    {"type": "text", "text": "Only the text files, please."},
                    {"type": "text", "text": "Try again.", "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "tools": [{
                "name": "bash",
                "description": "Run a shell command",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }],
            "thinking": {"type": "enabled", "budget_tokens": 20480},
        });
        let model = sonnet();
        assert_eq!(request_body(&req, &model), want);

        // A small output limit: the budget stays below max_tokens.
        let mut small = model.clone();
        small.max_tokens = 8192;
        let body = request_body(&req, &small);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 7168})
        );
        assert_eq!(body["max_tokens"], json!(8192));
        small.max_tokens = 1500;
        assert_eq!(
            request_body(&req, &small)["thinking"]["budget_tokens"],
            json!(1024)
        );
        small.max_tokens = 1024;
        assert!(request_body(&req, &small).get("thinking").is_none());
    }

    #[test]
    fn request_body_without_system_tools_or_thinking() {
        let mut model = sonnet();
        let mut req = ModelRequest {
            system_prompt: String::new(),
            messages: vec![
                user("hi", 1),
                tool_result("toolu_x", vec![], false),
                assistant(vec![Content::text("")], StopReason::Stop),
            ],
            tools: vec![],
            thinking_level: "off".into(),
        };
        let want = json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 64000,
            "stream": true,
            "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "is_error": false},
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
            ]}],
        });
        assert_eq!(request_body(&req, &model), want);
        // A level the model lacks is clamped; a model without reasoning never thinks.
        model.thinking_levels = vec!["off".into(), "low".into()];
        req.thinking_level = "xhigh".into();
        assert_eq!(
            request_body(&req, &model)["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        model.reasoning = false;
        assert!(request_body(&req, &model).get("thinking").is_none());
    }

    #[test]
    fn error_responses_map_to_kinds() {
        let rows: &[(u16, &str, &str, &str)] = &[
            (401, ERROR_401, "auth", "HTTP 401: invalid x-api-key"),
            (
                400,
                ERROR_400_TOO_LONG,
                "context_overflow",
                "HTTP 400: prompt is too long: 215000 tokens > 200000 maximum",
            ),
            (529, ERROR_529, "overloaded", "HTTP 529: Overloaded"),
            (
                429,
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
                "rate_limited",
                "HTTP 429: slow down",
            ),
            (
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                "server_error",
                "HTTP 500: Internal server error",
            ),
            (
                403,
                r#"{"type":"error","error":{"type":"permission_error","message":"no access"}}"#,
                "auth",
                "HTTP 403: no access",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000"}}"#,
                "context_overflow",
                "HTTP 400: input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000",
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#,
                "bad_request",
                "HTTP 400: max_tokens: Field required",
            ),
            (
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
                "bad_request",
                "HTTP 413: Request exceeds the maximum allowed number of bytes.",
            ),
            (
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}"#,
                "bad_request",
                "HTTP 404: model: claude-nope",
            ),
            (
                402,
                r#"{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}"#,
                "provider_error",
                "HTTP 402: credit balance too low",
            ),
            // No error body: the status decides.
            (401, "Unauthorized", "auth", "HTTP 401: Unauthorized"),
            (403, "", "auth", "HTTP 403"),
            (429, "  too many  \n", "rate_limited", "HTTP 429: too many"),
            (529, "", "overloaded", "HTTP 529"),
            (400, "bad", "bad_request", "HTTP 400: bad"),
            (404, "Not Found", "bad_request", "HTTP 404: Not Found"),
            (413, "", "bad_request", "HTTP 413"),
            (422, "{}", "bad_request", "HTTP 422: {}"),
            (
                400,
                "prompt is too long",
                "context_overflow",
                "HTTP 400: prompt is too long",
            ),
            (408, "", "timeout", "HTTP 408"),
            (502, "<html>Bad Gateway</html>", "server_error", "HTTP 502: <html>Bad Gateway</html>"),
            (503, "", "server_error", "HTTP 503"),
            (418, "teapot", "provider_error", "HTTP 418: teapot"),
        ];
        for (status, body, kind, message) in rows {
            assert_eq!(
                error_from_response(*status, body),
                (kind.to_string(), message.to_string()),
                "{status} {body}"
            );
        }
        let long = "é".repeat(600);
        let (kind, message) = error_from_response(500, &long);
        assert_eq!(kind, "server_error");
        assert_eq!(message, format!("HTTP 500: {}", "é".repeat(500)));
    }
}
