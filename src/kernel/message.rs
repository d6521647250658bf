//! Conversation data in pi's message shape (`pi-protocol.md` §5). The same JSON is written to
//! session files and onto the wire, so field names follow pi exactly. Owns no I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Content {
    /// Plain text.
    #[serde(rename = "text")]
    Text { text: String },
    /// Model reasoning; `thinkingSignature` is kept verbatim for providers that need it back.
    #[serde(rename = "thinking")]
    Thinking {
        thinking: String,
        #[serde(
            rename = "thinkingSignature",
            skip_serializing_if = "Option::is_none",
            default
        )]
        signature: Option<String>,
    },
    /// A tool call the model made; `arguments` is the parsed JSON object.
    #[serde(rename = "toolCall")]
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
    },
    /// An inline image (base64).
    #[serde(rename = "image")]
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }
}

/// Token counts and cost of one model call (pi `Usage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: Cost,
}

/// Cost in USD, split like [`Usage`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

impl Usage {
    /// Adds another call's usage into this one.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
    }
}

/// Why an assistant message ended. `Pending` exists only while streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Pending,
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

/// A user prompt, steering or follow-up message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    #[serde(deserialize_with = "content_or_string")]
    pub content: Vec<Content>,
    /// Unix milliseconds.
    pub timestamp: i64,
}

/// One model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<Content>,
    #[serde(default)]
    pub api: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub usage: Usage,
    pub stop_reason: StopReason,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error_message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_ms: Option<u64>,
    /// Unix milliseconds.
    pub timestamp: i64,
}

impl AssistantMessage {
    /// The concatenated text blocks (what print mode shows).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text } = c {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls in content order: (id, name, arguments).
    pub fn tool_calls(&self) -> Vec<(String, String, Value)> {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect()
    }
}

/// The result of one tool call, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Value>,
    pub is_error: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_ms: Option<u64>,
    /// Unix milliseconds.
    pub timestamp: i64,
}

/// Any message of the conversation, tagged by `role`. Unknown roles written by other tools
/// are kept as raw JSON and never sent to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
    #[serde(rename = "user")]
    User(UserMessage),
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
}

impl Message {
    pub fn user(text: impl Into<String>, timestamp: i64) -> Self {
        Message::User(UserMessage {
            content: vec![Content::text(text)],
            timestamp,
        })
    }
}

/// Accepts pi's `content: string` form as well as the block array.
fn content_or_string<'de, D>(d: D) -> Result<Vec<Content>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Blocks(Vec<Content>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Text(text) => vec![Content::Text { text }],
        Either::Blocks(b) => b,
    })
}

/// The text of the user message's text blocks joined by newlines.
pub fn user_text(m: &UserMessage) -> String {
    let mut out = String::new();
    for c in &m.content {
        if let Content::Text { text } = c {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}
