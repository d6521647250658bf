//! The shapes nested inside wire events: a tool result, a streamed delta
//! (`assistantMessageEvent`), a dialog (`extension_ui_request`), a settled run's error and the
//! role-tagged messages of `turn_end`. Declared once for both directions, like the events.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::words::{ErrorKind, NotifyType, UiMethod};
use crate::kernel::message::{AssistantMessage, Content, ToolResultMessage};
use crate::kernel::tool::details::ToolDetails;
use crate::kernel::tool::preview::Preview;
use crate::kernel::tool::ToolOutput;

/// `turn_end`'s `message`: the assistant message, with `role` first as pi writes messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum TurnMessage<'a> {
    #[serde(rename = "assistant")]
    Assistant(Cow<'a, AssistantMessage>),
}

/// One of `turn_end`'s `toolResults`, with its `role`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum TurnToolResult<'a> {
    #[serde(rename = "toolResult")]
    ToolResult(Cow<'a, ToolResultMessage>),
}

/// A tool result as the wire shows it (`result`, `partialResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult<'a> {
    /// What the model sees.
    #[serde(default)]
    pub content: Cow<'a, [Content]>,
    /// The tool's structured details (exit code, counts, paths), when it has any.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub details: Option<Cow<'a, Value>>,
}

impl ToolResult<'_> {
    /// The typed details of a result of the built-in tool `tool` (see [`ToolDetails::read`]).
    pub fn details_of(&self, tool: &str) -> Option<ToolDetails> {
        ToolDetails::read(tool, self.details.as_deref()?)
    }

    /// The same result, owning its parts.
    pub fn into_owned(self) -> ToolResult<'static> {
        ToolResult {
            content: Cow::Owned(self.content.into_owned()),
            details: self.details.map(|d| Cow::Owned(d.into_owned())),
        }
    }

    /// The text parts, one per line.
    pub fn text(&self) -> String {
        crate::kernel::message::joined_text(&self.content)
    }
}

impl<'a> From<&'a ToolOutput> for ToolResult<'a> {
    fn from(o: &'a ToolOutput) -> Self {
        ToolResult {
            content: Cow::Borrowed(&o.content),
            details: o.details.as_ref().map(Cow::Borrowed),
        }
    }
}

/// pi's `assistantMessageEvent`, without `partial`: `contentIndex` is the block inside the
/// message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent<'a> {
    #[serde(rename_all = "camelCase")]
    TextStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    TextDelta {
        content_index: usize,
        delta: Cow<'a, str>,
    },
    /// `content`: the block's whole text.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        content_index: usize,
        #[serde(default)]
        content: Cow<'a, str>,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        content_index: usize,
        delta: Cow<'a, str>,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        content_index: usize,
        #[serde(default)]
        content: Cow<'a, str>,
    },
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolcallStart {
        content_index: usize,
        #[serde(default)]
        id: Cow<'a, str>,
        tool_name: Cow<'a, str>,
    },
    /// A piece of the call's arguments as JSON text.
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolcallDelta {
        content_index: usize,
        delta: Cow<'a, str>,
    },
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolcallEnd {
        content_index: usize,
        tool_call: ToolCall<'a>,
    },
    /// A delta type this keel does not know (a newer peer's): nothing to show.
    #[serde(other)]
    Other,
}

kinds! { AssistantMessageEvent {
    TextStart = "text_start",
    TextDelta = "text_delta",
    TextEnd = "text_end",
    ThinkingStart = "thinking_start",
    ThinkingDelta = "thinking_delta",
    ThinkingEnd = "thinking_end",
    ToolcallStart = "toolcall_start",
    ToolcallDelta = "toolcall_delta",
    ToolcallEnd = "toolcall_end",
    Other = "other",
} }

/// The `type` of the finished call inside `toolcall_end`: always `toolCall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolCallType {
    #[serde(rename = "toolCall")]
    ToolCall,
}

/// The finished tool call inside `toolcall_end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall<'a> {
    #[serde(rename = "type")]
    pub kind: ToolCallType,
    pub id: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub arguments: Cow<'a, Value>,
}

/// An `extension_ui_request`, in every shape keel writes: the kernel's (`id`, `method`,
/// `title`, `message` with the arguments as JSON), the host's approval (`confirm` with
/// `timeout`, `toolName`, `args` and `preview`) and its messages (`notify` with `notifyType`,
/// no `title`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiRequest<'a> {
    /// For `confirm`: the tool call id, which `extension_ui_response` answers.
    #[serde(default)]
    pub id: Cow<'a, str>,
    /// `confirm` or `notify` (pi's other methods are read, and shown as nothing).
    pub method: UiMethod,
    /// The dialog's title (`notify` has none).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub title: Option<Cow<'a, str>>,
    /// For an approval: a one-line summary of the call (a bash command, `write path`, or the
    /// arguments as JSON); for `notify`: the message.
    #[serde(default)]
    pub message: Cow<'a, str>,
    /// When keel gives up and denies, in ms (absent: it waits).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub timeout: Option<u64>,
    /// `notify`: its level.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub notify_type: Option<NotifyType>,
    /// `confirm` from the host (keel's addition): the tool call waiting for approval, as the
    /// model made it, so that a client can show its own dialog without having seen the call's
    /// `tool_execution_start`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool_name: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub args: Option<Cow<'a, Value>>,
    /// `confirm` from the host for an `edit` or `write`: the diff it would apply to the file as
    /// it is now, and whether a write overwrites or creates
    /// (`{change: "edit"|"overwrite"|"create", path, diff?, error?}`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub preview: Option<Cow<'a, Preview>>,
    /// keel: the approval is a subagent's (`DESIGN.md` §17), shown to the clients of its
    /// parent: which child asks. Answering `id` in the parent's session answers the child's
    /// dialog; the first answer wins, here or in the child's own session.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub subagent: Option<DialogSubagent>,
}

/// The child whose approval a parent's dialog relays (`extension_ui_request`'s `subagent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DialogSubagent {
    /// The child's session id (`keel attach` reaches it in the daemon).
    pub session_id: String,
    /// Its agent definition's name (`explore`, `general`, …).
    pub agent_type: String,
    /// The `task` call's `description`.
    pub description: String,
    /// The parent's `task` call that started the child.
    pub tool_call_id: String,
    /// The dialog's id in the child's own session (its tool call id there).
    pub dialog_id: String,
}

impl<'a> UiRequest<'a> {
    /// A dialog with only its `id` and `method` set.
    pub fn new(id: &'a str, method: UiMethod) -> Self {
        UiRequest {
            id: id.into(),
            method,
            title: None,
            message: Cow::Borrowed(""),
            timeout: None,
            notify_type: None,
            tool_name: None,
            args: None,
            preview: None,
            subagent: None,
        }
    }
}

/// Why a run did not complete, as `agent_settled` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledError {
    pub kind: ErrorKind,
    pub message: String,
}
