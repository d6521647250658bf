//! The provider trait every model backend implements (scripted, OpenAI Chat Completions and
//! Responses, Anthropic, Gemini), and the streamed events it yields. Providers turn a request into a stream of small facts; the
//! turn loop assembles them into messages and bus events. Providers never touch the bus.

pub mod anthropic;
pub mod catalog;
pub mod gemini;
pub mod http;
pub mod limits;
pub mod model;
pub mod openai;
pub mod responses;
pub mod scripted;
pub mod served;
pub mod sse;

use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::failure::ErrorKind;
use crate::kernel::message::{Message, StopReason, Usage};
use crate::kernel::tool::ToolSpec;
use model::ModelInfo;

/// Everything a model call needs.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub system_prompt: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub thinking_level: String,
    /// The session this call belongs to (a cache-routing hint for APIs that take one).
    pub session_id: Option<String>,
    /// The JSON Schema the final answer must match (`--output-schema`), for the provider to
    /// pass in the API's native form: Responses `text.format`, Chat Completions
    /// `response_format`, Gemini `responseSchema`; Anthropic gets an instruction. `None`: free
    /// text. keel validates the answer whatever the API made of it.
    pub output_schema: Option<std::sync::Arc<serde_json::Value>>,
}

/// One streamed fact from a provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A piece of visible text.
    Text(String),
    /// A piece of reasoning.
    Thinking(String),
    /// The opaque signature of the current thinking block (Anthropic; a Responses reasoning
    /// item; a Gemini thought signature of the part just streamed); sent back verbatim.
    ThinkingSignature(String),
    /// A tool call begins. Several calls may be open at once (parallel calls streamed
    /// interleaved); `id` ties their fragments together.
    ToolCallStart { id: String, name: String },
    /// A raw fragment of the JSON arguments of the open call `id`.
    ToolCallDelta { id: String, delta: String },
    /// The arguments of call `id` are complete.
    ToolCallEnd { id: String },
    /// Usage so far (replaces earlier usage).
    Usage(Usage),
    /// The response ended normally.
    Done { stop: StopReason },
    /// The response failed; `kind` says how (`ProviderError`, `StreamCut`, ...).
    /// `retry_after_ms` carries the server's `Retry-After` when it sent one.
    Error {
        kind: ErrorKind,
        message: String,
        retry_after_ms: Option<u64>,
    },
}

/// A model backend.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The model this provider calls: id, provider name, API, limits and prices.
    fn info(&self) -> &ModelInfo;
    /// Provider name as shown on the wire (`scripted`, `openai`, ...).
    #[allow(clippy::misnamed_getters)] // the provider's name, not the model's display name
    fn name(&self) -> &str {
        &self.info().provider
    }
    /// API family (`scripted`, `openai-completions`, ...).
    fn api(&self) -> &str {
        &self.info().api
    }
    /// The model id.
    fn model(&self) -> &str {
        &self.info().id
    }
    /// Starts one streamed call. The stream ends after `Done` or `Error`; a provider stops
    /// promptly when `abort` fires or the receiver is dropped.
    fn stream(&self, request: ModelRequest, abort: AbortSignal) -> mpsc::Receiver<ProviderEvent>;
}
