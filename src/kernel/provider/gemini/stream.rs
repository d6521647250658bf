//! The decoder of a streamed Gemini answer: each SSE `data:` is a whole
//! `GenerateContentResponse` chunk holding only new parts. Text, thought summaries (thinking),
//! function calls (each whole in one part), thought signatures (passed on right after their
//! part, see the module above), usage, finish reasons, a blocked prompt and in-stream errors
//! become [`ProviderEvent`]s. Pure; the transport feeds it SSE events.

use crate::kernel::failure::ErrorKind;
use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::Status;
use super::request::MADE_UP_ID;
use super::{KeptSignature, PartKind};
use crate::kernel::message::{StopReason, Usage};
use crate::kernel::provider::model::{ModelCost, ModelInfo};
use crate::kernel::provider::openai::clip;
use crate::kernel::provider::sse::{SseEvent, StreamDecoder};
use crate::kernel::provider::ProviderEvent;

/// How much of an unreadable chunk an error quotes, in characters.
const MAX_QUOTE_CHARS: usize = 200;

/// One chunk, as far as the decoder reads it (strings borrowed from the event's data).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default, borrow)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<Status>,
    #[serde(default, borrow)]
    response_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default, borrow)]
    content: Option<CandidateContent<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(default, borrow)]
    parts: Vec<Part<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: bool,
    #[serde(default, borrow)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function_call: Option<FunctionCall<'a>>,
}

#[derive(Deserialize)]
struct FunctionCall<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    /// The arguments object, as written (passed on unparsed).
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
}

/// `usageMetadata`: `candidates` excludes thoughts; `cachedContent` is part of `prompt`.
#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: u64,
    candidates_token_count: u64,
    thoughts_token_count: u64,
    cached_content_token_count: u64,
    tool_use_prompt_token_count: u64,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

/// The finish reasons that mean a safety or policy filter stopped the answer.
const FILTERED: &[&str] = &[
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
];

/// Decoder for a streamed `streamGenerateContent?alt=sse` answer.
#[derive(Debug)]
pub struct GeminiDecoder {
    cost: ModelCost,
    /// Names made-up call ids when the response has no id: the request's message count.
    turn: usize,
    /// The response's id (for made-up call ids).
    response_id: Option<String>,
    /// Calls so far (numbers made-up ids).
    calls: usize,
    /// The latest `usageMetadata` (each chunk may carry the counts so far).
    usage: Option<UsageMetadata>,
    saw_output: bool,
    ended: bool,
}

impl GeminiDecoder {
    /// A decoder pricing usage with `model`'s cost, for a request of `turn` messages.
    pub fn new(model: &ModelInfo, turn: usize) -> Self {
        GeminiDecoder {
            cost: model.cost,
            turn,
            response_id: None,
            calls: 0,
            usage: None,
            saw_output: false,
            ended: false,
        }
    }

    fn fail(
        &mut self,
        kind: ErrorKind,
        message: String,
        retry: Option<u64>,
        out: &mut Vec<ProviderEvent>,
    ) {
        self.push_usage(out);
        self.ended = true;
        out.push(ProviderEvent::Error {
            kind,
            message,
            retry_after_ms: retry,
        });
    }

    fn on_chunk(&mut self, chunk: Chunk<'_>, out: &mut Vec<ProviderEvent>) {
        if let Some(status) = chunk.error {
            let message = match status.said() {
                s if s.is_empty() => "the provider reported an error".to_string(),
                s => s,
            };
            return self.fail(status.kind(), message, status.retry_after_ms(), out);
        }
        if chunk.usage_metadata.is_some() {
            self.usage = chunk.usage_metadata;
        }
        if self.response_id.is_none() {
            self.response_id = chunk.response_id.map(Cow::into_owned);
        }
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
                let message = format!("the provider blocked the prompt (block reason {reason})");
                self.fail(ErrorKind::ContentFilter, message, None, out);
            }
            return;
        };
        for part in candidate.content.into_iter().flat_map(|c| c.parts) {
            self.on_part(part, out);
        }
        if let Some(reason) = candidate.finish_reason {
            self.on_finish(&reason, candidate.finish_message, out);
        }
    }

    /// One part, then its signature (kept with the kind of part it came on).
    fn on_part(&mut self, part: Part<'_>, out: &mut Vec<ProviderEvent>) {
        let text = part.text.filter(|t| !t.is_empty());
        let kind = if let Some(call) = part.function_call {
            self.on_call(call, out);
            PartKind::FunctionCall
        } else if part.thought {
            if let Some(t) = text {
                self.saw_output = true;
                out.push(ProviderEvent::Thinking(t.into_owned()));
            }
            PartKind::Thought
        } else {
            if let Some(t) = text {
                self.saw_output = true;
                out.push(ProviderEvent::Text(t.into_owned()));
            }
            PartKind::Text
        };
        if let Some(signature) = part.thought_signature.filter(|s| !s.is_empty()) {
            self.saw_output = true;
            out.push(ProviderEvent::ThinkingSignature(KeptSignature::encode(
                kind, &signature,
            )));
        }
    }

    /// A whole function call: start, its arguments as written, end.
    fn on_call(&mut self, call: FunctionCall<'_>, out: &mut Vec<ProviderEvent>) {
        self.saw_output = true;
        self.calls += 1;
        let id = match call.id.filter(|id| !id.is_empty()) {
            Some(id) => id.into_owned(),
            None => match &self.response_id {
                Some(rid) => format!("{MADE_UP_ID}{rid}-{}", self.calls),
                None => format!("{MADE_UP_ID}{}-{}", self.turn, self.calls),
            },
        };
        out.push(ProviderEvent::ToolCallStart {
            id: id.clone(),
            name: call.name.into_owned(),
        });
        let args = call.args.map_or("{}", RawValue::get);
        if args != "null" {
            out.push(ProviderEvent::ToolCallDelta {
                id: id.clone(),
                delta: args.to_string(),
            });
        }
        out.push(ProviderEvent::ToolCallEnd { id });
    }

    /// The end of the answer. A turn that called tools still ends with `STOP`.
    fn on_finish(&mut self, reason: &str, detail: Option<String>, out: &mut Vec<ProviderEvent>) {
        let stop = match reason {
            "STOP" if self.calls > 0 => StopReason::ToolUse,
            "STOP" => StopReason::Stop,
            "MAX_TOKENS" => StopReason::Length,
            filtered if FILTERED.contains(&filtered) => {
                let message =
                    format!("the provider's filter stopped the response (finish reason {reason})");
                return self.fail(ErrorKind::ContentFilter, message, None, out);
            }
            other => {
                let mut message = format!("the response ended with finish reason {other}");
                if let Some(detail) = detail.filter(|d| !d.is_empty()) {
                    message.push_str(": ");
                    message.push_str(&clip(&detail, MAX_QUOTE_CHARS));
                }
                return self.fail(ErrorKind::Incomplete, message, None, out);
            }
        };
        self.push_usage(out);
        self.ended = true;
        out.push(ProviderEvent::Done { stop });
    }

    /// The last usage seen, priced: thoughts count as output (and as its reasoning part).
    fn push_usage(&mut self, out: &mut Vec<ProviderEvent>) {
        let Some(u) = self.usage.take() else { return };
        let prompt = u.prompt_token_count + u.tool_use_prompt_token_count;
        let cached = u.cached_content_token_count.min(prompt);
        let output = u.candidates_token_count + u.thoughts_token_count;
        let mut usage = Usage {
            input: prompt - cached,
            output,
            cache_read: cached,
            total_tokens: prompt + output,
            reasoning: u.thoughts_token_count,
            ..Usage::default()
        };
        self.cost.apply(&mut usage);
        out.push(ProviderEvent::Usage(usage));
    }
}

impl StreamDecoder for GeminiDecoder {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<ProviderEvent>) {
        let data = event.data.trim();
        if self.ended || data.is_empty() {
            return;
        }
        match serde_json::from_str::<Chunk>(data) {
            Ok(chunk) => self.on_chunk(chunk, out),
            Err(e) => {
                let message = format!(
                    "the provider sent a chunk that is not a valid Gemini response ({e}): {}",
                    clip(data, MAX_QUOTE_CHARS)
                );
                self.fail(ErrorKind::BadResponse, message, None, out);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if !self.ended {
            self.usage = None;
            let message = "the stream ended before the response was complete".to_string();
            self.fail(ErrorKind::StreamCut, message, None, out);
        }
    }

    fn saw_output(&self) -> bool {
        self.saw_output
    }
}
