//! Conversation data in pi's message shape (`pi-protocol.md` §5). The same JSON is written to
//! session files and onto the wire, so field names follow pi exactly. Owns no I/O.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One content block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", try_from = "FlatContent")]
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
    /// Of `output`, the tokens the model spent reasoning (a part of `output`, not added to
    /// `total_tokens`). Written only when a provider reports it (OpenAI Responses).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning: u64,
    pub cost: Cost,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
        self.reasoning += other.reasoning;
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
        joined_text(&self.content)
    }

    /// A failed or aborted response: not an answer, and never sent back to a model.
    pub fn is_failed(&self) -> bool {
        matches!(self.stop_reason, StopReason::Error | StopReason::Aborted)
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
///
/// Each variant holds its message behind an [`Arc`], so a clone shares it: the session store,
/// the agent's history and every model request hold the same messages, not one copy each (a
/// long session is loaded once). Build one with `.into()` from the message struct; change one
/// in place with [`Arc::make_mut`] (which copies it first only if it is shared).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "FlatMessage")]
pub enum Message {
    User(Arc<UserMessage>),
    Assistant(Arc<AssistantMessage>),
    ToolResult(Arc<ToolResultMessage>),
}

impl Message {
    pub fn user(text: impl Into<String>, timestamp: i64) -> Self {
        UserMessage {
            content: vec![Content::text(text)],
            timestamp,
        }
        .into()
    }
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Message::User(Arc::new(m))
    }
}

impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Message::Assistant(Arc::new(m))
    }
}

impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Message::ToolResult(Arc::new(m))
    }
}

/// The wire form of [`Message`]: the message's own fields plus `role`.
#[derive(Serialize)]
#[serde(tag = "role")]
enum TaggedMessage<'a> {
    #[serde(rename = "user")]
    User(&'a UserMessage),
    #[serde(rename = "assistant")]
    Assistant(&'a AssistantMessage),
    #[serde(rename = "toolResult")]
    ToolResult(&'a ToolResultMessage),
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::User(m) => TaggedMessage::User(m),
            Message::Assistant(m) => TaggedMessage::Assistant(m),
            Message::ToolResult(m) => TaggedMessage::ToolResult(m),
        }
        .serialize(s)
    }
}

/// Accepts pi's `content: string` form as well as the block array, without buffering.
fn content_or_string<'de, D>(d: D) -> Result<Vec<Content>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Vec<Content>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or an array of content blocks")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![Content::text(v)])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(1));
            while let Some(c) = seq.next_element::<Content>()? {
                out.push(c);
            }
            // Growth leaves room for 4 blocks where most messages have 1 to 3; a long session
            // holds tens of thousands of these.
            out.shrink_to_fit();
            Ok(out)
        }
    }
    d.deserialize_any(V)
}

/// A `type` or `role` string. The names keel knows are read without allocating; they are
/// matched once per block and message of every loaded line, so this keeps session loads fast.
struct Tag(std::borrow::Cow<'static, str>);

/// The `type`s and `role`s keel reads.
const TAGS: [&str; 7] = [
    "text",
    "thinking",
    "toolCall",
    "image",
    "user",
    "assistant",
    "toolResult",
];

impl std::ops::Deref for Tag {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Tag;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Tag, E> {
                Ok(Tag(match TAGS.iter().find(|t| **t == v) {
                    Some(t) => std::borrow::Cow::Borrowed(*t),
                    None => std::borrow::Cow::Owned(v.to_string()),
                }))
            }
        }
        d.deserialize_str(V)
    }
}

/// Every field any content block may have: read in one pass (serde's internally tagged enums
/// buffer each block first, which dominated session load time), then checked per `type`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FlatContent {
    #[serde(rename = "type")]
    kind: Tag,
    text: Option<String>,
    thinking: Option<String>,
    thinking_signature: Option<String>,
    id: Option<String>,
    name: Option<String>,
    arguments: Option<Value>,
    data: Option<String>,
    mime_type: Option<String>,
}

fn need<T>(v: Option<T>, kind: &str, field: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("a `{kind}` is missing `{field}`"))
}

impl TryFrom<FlatContent> for Content {
    type Error = String;

    fn try_from(f: FlatContent) -> Result<Self, String> {
        Ok(match &*f.kind {
            "text" => Content::Text {
                text: need(f.text, "text", "text")?,
            },
            "thinking" => Content::Thinking {
                thinking: need(f.thinking, "thinking", "thinking")?,
                signature: f.thinking_signature,
            },
            "toolCall" => Content::ToolCall {
                id: need(f.id, "toolCall", "id")?,
                name: need(f.name, "toolCall", "name")?,
                arguments: f
                    .arguments
                    .unwrap_or_else(|| Value::Object(Default::default())),
            },
            "image" => Content::Image {
                data: need(f.data, "image", "data")?,
                mime_type: need(f.mime_type, "image", "mimeType")?,
            },
            other => return Err(format!("unknown content type `{other}`")),
        })
    }
}

/// Every field any message may have, read in one pass; see [`FlatContent`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FlatMessage {
    role: Tag,
    #[serde(default, deserialize_with = "opt_content")]
    content: Option<Vec<Content>>,
    timestamp: Option<i64>,
    api: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    stop_reason: Option<StopReason>,
    error_message: Option<String>,
    duration_ms: Option<u64>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    details: Option<Value>,
    is_error: Option<bool>,
}

fn opt_content<'de, D>(d: D) -> Result<Option<Vec<Content>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    content_or_string(d).map(Some)
}

impl TryFrom<FlatMessage> for Message {
    type Error = String;

    fn try_from(f: FlatMessage) -> Result<Self, String> {
        let role = f.role;
        let content = need(f.content, &role, "content")?;
        let timestamp = need(f.timestamp, &role, "timestamp")?;
        Ok(match &*role {
            "user" => UserMessage { content, timestamp }.into(),
            "assistant" => AssistantMessage {
                content,
                api: f.api.unwrap_or_default(),
                provider: f.provider.unwrap_or_default(),
                model: f.model.unwrap_or_default(),
                usage: f.usage.unwrap_or_default(),
                stop_reason: need(f.stop_reason, &role, "stopReason")?,
                error_message: f.error_message,
                duration_ms: f.duration_ms,
                timestamp,
            }
            .into(),
            "toolResult" => ToolResultMessage {
                tool_call_id: need(f.tool_call_id, &role, "toolCallId")?,
                tool_name: need(f.tool_name, &role, "toolName")?,
                content,
                details: f.details,
                is_error: need(f.is_error, &role, "isError")?,
                duration_ms: f.duration_ms,
                timestamp,
            }
            .into(),
            other => return Err(format!("unknown message role `{other}`")),
        })
    }
}

/// The text of the user message's text blocks joined by newlines.
pub fn user_text(m: &UserMessage) -> String {
    joined_text(&m.content)
}

/// The text blocks of `content` joined by newlines (other blocks are left out).
pub fn joined_text(content: &[Content]) -> String {
    let mut out = String::new();
    for c in content {
        if let Content::Text { text } = c {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_messages_round_trip() {
        let lines = [
            r#"{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"AA==","mimeType":"image/png"}],"timestamp":1}"#,
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","thinkingSignature":"sig"},{"type":"toolCall","id":"c","name":"read","arguments":{"path":"a"}}],"api":"x","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"toolUse","timestamp":2}"#,
            r#"{"role":"toolResult","toolCallId":"c","toolName":"read","content":[{"type":"text","text":"x"}],"details":{"n":1},"isError":false,"durationMs":3,"timestamp":3}"#,
        ];
        for l in lines {
            let m: Message = serde_json::from_str(l).unwrap();
            assert_eq!(serde_json::to_string(&m).unwrap(), l);
        }
    }

    #[test]
    fn string_content_unknown_roles_and_missing_fields() {
        let m: Message =
            serde_json::from_str(r#"{"role":"user","content":"plain","timestamp":1}"#).unwrap();
        assert_eq!(m, Message::user("plain", 1));
        let e = serde_json::from_str::<Message>(
            r#"{"role":"bashExecution","command":"ls","timestamp":1}"#,
        );
        assert!(e.is_err());
        let e =
            serde_json::from_str::<Message>(r#"{"role":"assistant","content":[],"timestamp":1}"#);
        assert!(e.unwrap_err().to_string().contains("stopReason"));
        let e = serde_json::from_str::<Message>(
            r#"{"role":"user","content":[{"type":"video"}],"timestamp":1}"#,
        );
        assert!(e.unwrap_err().to_string().contains("video"));
    }
}
