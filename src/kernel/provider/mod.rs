//! The provider trait every model backend implements (scripted now, HTTP providers later), and
//! the streamed events it yields. Providers turn a request into a stream of small facts; the
//! turn loop assembles them into messages and bus events. Providers never touch the bus.

pub mod scripted;

use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::message::{Message, StopReason, Usage};
use crate::kernel::tool::ToolSpec;

/// Everything a model call needs.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub system_prompt: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub thinking_level: String,
}

/// One streamed fact from a provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A piece of visible text.
    Text(String),
    /// A piece of reasoning.
    Thinking(String),
    /// A tool call begins.
    ToolCallStart { id: String, name: String },
    /// A raw fragment of the current tool call's JSON arguments.
    ToolCallDelta(String),
    /// The current tool call's arguments are complete.
    ToolCallEnd,
    /// Usage so far (replaces earlier usage).
    Usage(Usage),
    /// The response ended normally.
    Done { stop: StopReason },
    /// The response failed; `kind` is a stable word (`provider_error`, `stream_cut`, ...).
    Error { kind: String, message: String },
}

/// A model backend.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Provider name as shown on the wire (`scripted`, `openai`, ...).
    fn name(&self) -> &str;
    /// API family (`scripted`, `openai-completions`, ...).
    fn api(&self) -> &str;
    /// The model id.
    fn model(&self) -> &str;
    /// Starts one streamed call. The stream ends after `Done` or `Error`; a provider stops
    /// promptly when `abort` fires or the receiver is dropped.
    fn stream(&self, request: ModelRequest, abort: AbortSignal) -> mpsc::Receiver<ProviderEvent>;
}
