//! The decoder of a streamed Responses API answer: typed events (`response.output_item.*`,
//! text, reasoning summary and function-call argument deltas, `response.completed` /
//! `failed` / `incomplete`, `error`) to [`ProviderEvent`]s. Pure; the transport feeds it SSE
//! events. Reasoning items are passed on whole (as the thinking signature) so they can be sent
//! back verbatim.

use crate::kernel::failure::ErrorKind;
use serde::Deserialize;
use serde_json::Value;

use crate::kernel::message::{StopReason, Usage};
use crate::kernel::provider::model::{ModelCost, ModelInfo};
use crate::kernel::provider::openai::{clip, ErrorDetail};
use crate::kernel::provider::sse::{SseEvent, StreamDecoder};
use crate::kernel::provider::ProviderEvent;

/// How much of an unreadable event an error quotes, in characters.
const MAX_QUOTE_CHARS: usize = 200;

/// One streamed event, by its `type`. Types keel does not use are `Other`.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.output_item.added")]
    ItemAdded { item: Item },
    #[serde(rename = "response.output_item.done")]
    ItemDone { item: Value },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.refusal.delta"
    )]
    TextDelta { delta: String },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta {
        #[serde(default)]
        summary_index: u64,
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningDelta { delta: String },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        #[serde(default)]
        item_id: String,
        delta: String,
    },
    #[serde(rename = "response.completed")]
    Completed { response: Response },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Response },
    #[serde(rename = "response.failed")]
    Failed { response: Response },
    #[serde(rename = "error")]
    Error(Value),
    #[serde(other)]
    Other,
}

/// An output item, as far as the decoder reads it.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Item {
    #[serde(rename = "reasoning")]
    Reasoning {
        #[serde(default)]
        summary: Vec<SummaryPart>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    #[serde(rename = "function_call")]
    FunctionCall {
        #[serde(default)]
        id: String,
        call_id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct SummaryPart {
    #[serde(default)]
    text: String,
}

/// The `response` object of a terminal event.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Response {
    usage: Option<ResponseUsage>,
    error: Option<Value>,
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IncompleteDetails {
    reason: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ResponseUsage {
    input_tokens: u64,
    input_tokens_details: Option<TokenDetails>,
    output_tokens: u64,
    output_tokens_details: Option<TokenDetails>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenDetails {
    cached_tokens: u64,
    reasoning_tokens: u64,
}

/// A function call being streamed.
#[derive(Debug)]
struct OpenCall {
    /// The item id (`fc_…`) argument deltas refer to.
    item_id: String,
    /// The call id (`call_…`): keel's tool call id, sent back with the output.
    call_id: String,
    /// Whether any argument text went out for it.
    streamed: bool,
}

/// Decoder for a streamed Responses API answer.
#[derive(Debug)]
pub struct ResponsesDecoder {
    cost: ModelCost,
    calls: Vec<OpenCall>,
    /// Whether any function call came (the stop reason is then `ToolUse`).
    saw_call: bool,
    /// Summary text went out for the current reasoning item, and the index of its last part.
    summary: Option<u64>,
    saw_output: bool,
    ended: bool,
}

impl ResponsesDecoder {
    /// A decoder pricing usage with `model`'s cost.
    pub fn new(model: &ModelInfo) -> Self {
        ResponsesDecoder {
            cost: model.cost,
            calls: Vec::new(),
            saw_call: false,
            summary: None,
            saw_output: false,
            ended: false,
        }
    }

    fn fail(&mut self, kind: ErrorKind, message: String, out: &mut Vec<ProviderEvent>) {
        self.fail_after(kind, message, None, out);
    }

    fn fail_after(
        &mut self,
        kind: ErrorKind,
        message: String,
        retry_after_ms: Option<u64>,
        out: &mut Vec<ProviderEvent>,
    ) {
        self.ended = true;
        out.push(ProviderEvent::Error {
            kind,
            message,
            retry_after_ms,
        });
    }

    fn on(&mut self, event: Event, out: &mut Vec<ProviderEvent>) {
        match event {
            Event::ItemAdded { item } => self.item_added(item, out),
            Event::ItemDone { item } => self.item_done(item, out),
            Event::TextDelta { delta } => self.emit(ProviderEvent::Text(delta), out),
            Event::SummaryDelta {
                summary_index,
                delta,
            } => {
                // A new summary part is a new paragraph of the same thinking block.
                if self.summary.is_some_and(|last| last != summary_index) {
                    out.push(ProviderEvent::Thinking("\n\n".into()));
                }
                self.summary = Some(summary_index);
                self.emit(ProviderEvent::Thinking(delta), out);
            }
            Event::ReasoningDelta { delta } => {
                self.summary.get_or_insert(0);
                self.emit(ProviderEvent::Thinking(delta), out);
            }
            Event::ArgumentsDelta { item_id, delta } => {
                let call = match self.calls.iter().position(|c| c.item_id == item_id) {
                    Some(at) => self.calls.get_mut(at),
                    None => self.calls.last_mut(),
                };
                if let (Some(call), false) = (call, delta.is_empty()) {
                    call.streamed = true;
                    out.push(ProviderEvent::ToolCallDelta {
                        id: call.call_id.clone(),
                        delta,
                    });
                }
            }
            Event::Completed { response } => {
                self.usage(&response, out);
                self.close_calls(out);
                let stop = match self.saw_call {
                    true => StopReason::ToolUse,
                    false => StopReason::Stop,
                };
                self.ended = true;
                out.push(ProviderEvent::Done { stop });
            }
            Event::Incomplete { response } => self.incomplete(response, out),
            Event::Failed { response } => {
                self.usage(&response, out);
                let error = response.error.unwrap_or(Value::Null);
                self.error(&error, "the response failed", out);
            }
            Event::Error(error) => self.error(&error, "the provider reported an error", out),
            Event::Other => {}
        }
    }

    /// Text and thinking count as output.
    fn emit(&mut self, ev: ProviderEvent, out: &mut Vec<ProviderEvent>) {
        let empty =
            matches!(&ev, ProviderEvent::Text(t) | ProviderEvent::Thinking(t) if t.is_empty());
        if !empty {
            self.saw_output = true;
            out.push(ev);
        }
    }

    fn item_added(&mut self, item: Item, out: &mut Vec<ProviderEvent>) {
        match item {
            Item::Reasoning { .. } => self.summary = None,
            Item::FunctionCall {
                id,
                call_id,
                name,
                arguments,
            } => {
                self.saw_output = true;
                self.saw_call = true;
                out.push(ProviderEvent::ToolCallStart {
                    id: call_id.clone(),
                    name,
                });
                let streamed = !arguments.is_empty();
                if streamed {
                    out.push(ProviderEvent::ToolCallDelta {
                        id: call_id.clone(),
                        delta: arguments,
                    });
                }
                self.calls.push(OpenCall {
                    item_id: id,
                    call_id,
                    streamed,
                });
            }
            Item::Other => {}
        }
    }

    /// A finished item: a reasoning item is passed on whole (to be sent back), a function
    /// call is closed (with its arguments, when none were streamed).
    fn item_done(&mut self, raw: Value, out: &mut Vec<ProviderEvent>) {
        let Ok(item) = Item::deserialize(&raw) else {
            return;
        };
        match item {
            Item::Reasoning {
                summary,
                encrypted_content,
            } => {
                if self.summary.is_none() {
                    let text: Vec<&str> = summary.iter().map(|p| p.text.as_str()).collect();
                    self.emit(ProviderEvent::Thinking(text.join("\n\n")), out);
                }
                self.summary = None;
                // Without its encrypted content an item cannot be sent back with `store: false`.
                if encrypted_content.is_some() {
                    self.saw_output = true;
                    out.push(ProviderEvent::ThinkingSignature(raw.to_string()));
                }
            }
            Item::FunctionCall {
                call_id, arguments, ..
            } => {
                let Some(at) = self.calls.iter().position(|c| c.call_id == call_id) else {
                    return;
                };
                let call = self.calls.remove(at);
                if !call.streamed && !arguments.is_empty() {
                    out.push(ProviderEvent::ToolCallDelta {
                        id: call_id.clone(),
                        delta: arguments,
                    });
                }
                out.push(ProviderEvent::ToolCallEnd { id: call_id });
            }
            Item::Other => {}
        }
    }

    fn close_calls(&mut self, out: &mut Vec<ProviderEvent>) {
        for call in self.calls.drain(..) {
            out.push(ProviderEvent::ToolCallEnd { id: call.call_id });
        }
    }

    /// `response.incomplete`: cut by the output limit (the partial answer stands), or stopped
    /// by the content filter or something newer (an error).
    fn incomplete(&mut self, response: Response, out: &mut Vec<ProviderEvent>) {
        self.usage(&response, out);
        let reason = response.incomplete_details.unwrap_or_default().reason;
        match reason.as_str() {
            "max_output_tokens" => {
                self.close_calls(out);
                self.ended = true;
                out.push(ProviderEvent::Done {
                    stop: StopReason::Length,
                });
            }
            "content_filter" => self.fail(
                ErrorKind::ContentFilter,
                "the provider's content filter stopped the response".into(),
                out,
            ),
            other => self.fail(
                ErrorKind::Incomplete,
                format!("the response ended incomplete (reason `{other}`)"),
                out,
            ),
        }
    }

    fn error(&mut self, error: &Value, fallback: &str, out: &mut Vec<ProviderEvent>) {
        let detail = ErrorDetail::from_error(error);
        let kind = detail.classify(detail.status_hint());
        let retry_after = retry_hint(&detail.message);
        let message = match detail.message.is_empty() {
            true => fallback.to_string(),
            false => detail.message,
        };
        self.fail_after(kind, message, retry_after, out);
    }

    fn usage(&mut self, response: &Response, out: &mut Vec<ProviderEvent>) {
        let Some(u) = &response.usage else { return };
        let details = |d: &Option<TokenDetails>| {
            d.as_ref()
                .map_or((0, 0), |d| (d.cached_tokens, d.reasoning_tokens))
        };
        let cached = details(&u.input_tokens_details).0.min(u.input_tokens);
        let reasoning = details(&u.output_tokens_details).1.min(u.output_tokens);
        let mut usage = Usage {
            input: u.input_tokens - cached,
            output: u.output_tokens,
            cache_read: cached,
            total_tokens: u.input_tokens + u.output_tokens,
            reasoning,
            ..Usage::default()
        };
        self.cost.apply(&mut usage);
        out.push(ProviderEvent::Usage(usage));
    }
}

/// The wait a rate-limit message asks for ("… Please try again in 1.2s." / "in 250ms").
fn retry_hint(message: &str) -> Option<u64> {
    let rest = &message[message.find("try again in ")? + "try again in ".len()..];
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number.parse().ok()?;
    let unit = &rest[number.len()..];
    let ms = match unit {
        u if u.starts_with("ms") => value,
        u if u.starts_with('s') => value * 1000.0,
        _ => return None,
    };
    Some(ms.max(0.0) as u64)
}

impl StreamDecoder for ResponsesDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ProviderEvent>) {
        let data = event.data.trim();
        if self.ended || data.is_empty() || data == "[DONE]" {
            return;
        }
        match serde_json::from_str::<Event>(data) {
            Ok(ev) => self.on(ev, out),
            Err(e) => {
                let message = format!(
                    "the provider sent an event that is not a valid Responses event ({e}): {}",
                    clip(data, MAX_QUOTE_CHARS)
                );
                self.fail(ErrorKind::BadResponse, message, out);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.ended {
            let message = "the stream ended before the response was complete".to_string();
            self.fail(ErrorKind::StreamCut, message, out);
        }
    }

    fn saw_output(&self) -> bool {
        self.saw_output
    }
}
