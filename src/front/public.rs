//! The public event vocabulary as front ends read it: every wire event (pi's vocabulary plus
//! keel's additions, `src/wire/events.rs`, the host's dialogs and shell updates) as one owned
//! [`PublicEvent`], parsed back from the wire line. A line made in this process and a line that
//! came from the daemon go through the same parse, so a front end renders the same thing whether
//! the run is here or in the daemon (`DESIGN.md` §10.1). Print and JSON mode read the few
//! [`Fact`]s they act on, a projection of the same parse.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde::Deserialize;
use serde_json::Value;

use crate::kernel::message::{Content, Message, Usage};
use crate::kernel::tool::bash::BashExecution;
use crate::wire::events::SettledError;

/// One line of the event stream, as a front end sees it. Fields a front end does not use are
/// left unread (`turn_end` and `agent_end` repeat messages that `message_end` already carried).
/// Fields keel may leave out default, so a line that is read at all is read whole.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PublicEvent {
    /// A run began.
    AgentStart,
    /// A run ended; `will_retry`: a retry of the same prompt follows.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        #[serde(default)]
        will_retry: bool,
    },
    /// No more automatic work for this prompt: how the run ended (keel's fields, see
    /// `WireEvent::AgentSettled`).
    #[serde(rename_all = "camelCase")]
    AgentSettled {
        #[serde(default)]
        aborted: bool,
        /// `completed|failed|turn_limit|blocked|aborted`.
        outcome: String,
        #[serde(default)]
        error: Option<SettledError>,
        /// `turn_limit`: the limit that was reached.
        #[serde(default)]
        max_turns: Option<u32>,
        /// `blocked`: the call that needed an approval.
        #[serde(default)]
        tool_name: Option<String>,
        #[serde(default)]
        tool_call_id: Option<String>,
    },
    TurnStart {},
    TurnEnd {},
    /// A message began (user, assistant with empty content, tool result).
    MessageStart {
        message: Message,
    },
    /// A streamed change to the assistant message (its running `usage` is left unread:
    /// `message_end` has the final one).
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        assistant_message_event: Delta,
    },
    /// The authoritative final message.
    MessageEnd {
        message: Message,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        #[serde(default)]
        tool_call_id: String,
        tool_name: String,
        #[serde(default)]
        args: Value,
    },
    /// `partial_result`: the output so far (replace, don't append).
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        tool_call_id: String,
        #[serde(default)]
        tool_name: String,
        #[serde(default)]
        args: Value,
        partial_result: ToolResult,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        #[serde(default)]
        tool_call_id: String,
        tool_name: String,
        result: ToolResult,
        is_error: bool,
        #[serde(default)]
        duration_ms: u64,
    },
    /// The full current queues.
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        #[serde(default)]
        steering: Vec<String>,
        #[serde(default)]
        follow_up: Vec<String>,
    },
    /// A dialog: an approval (`confirm`) or a message (`notify`).
    ExtensionUiRequest(UiRequest),
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(default)]
        final_error: Option<String>,
    },
    /// The session was renamed.
    SessionInfoChanged {
        name: String,
    },
    ThinkingLevelChanged {
        level: String,
    },
    /// The active model changed (keel's addition).
    ModelChanged {
        provider: String,
        model: String,
    },
    /// `manual|threshold|overflow`.
    CompactionStart {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        #[serde(default)]
        reason: String,
        #[serde(default)]
        result: Option<Compacted>,
        #[serde(default)]
        aborted: bool,
        #[serde(default)]
        will_retry: bool,
        #[serde(default)]
        error_message: Option<String>,
    },
    /// Output of a running RPC `bash` request (`id`: the request's id).
    BashExecutionUpdate {
        #[serde(default)]
        id: Option<Value>,
        delta: String,
    },
    /// A shell command the user ran finished (keel's addition).
    BashExecutionEnd(BashExecution),
    /// A type this keel does not know (a newer daemon's addition): nothing to show.
    #[serde(other)]
    Other,
}

/// pi's `assistantMessageEvent`: `content_index` is the block inside the message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    #[serde(rename_all = "camelCase")]
    TextStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    TextDelta { content_index: usize, delta: String },
    /// `content`: the block's whole text.
    #[serde(rename_all = "camelCase")]
    TextEnd {
        content_index: usize,
        #[serde(default)]
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta { content_index: usize, delta: String },
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        content_index: usize,
        #[serde(default)]
        content: String,
    },
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolcallStart {
        content_index: usize,
        #[serde(default)]
        id: String,
        tool_name: String,
    },
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolcallDelta { content_index: usize, delta: String },
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolcallEnd { content_index: usize },
    /// A delta type this keel does not know.
    #[serde(other)]
    Other,
}

/// An `extension_ui_request`, in both shapes keel writes: the kernel's (`id`, `method`,
/// `title`, `message` with the arguments as JSON) and the host's dialogs (`confirm` with
/// `timeout`, `toolName` and `args`; `notify` with `notifyType`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiRequest {
    /// For `confirm`: the tool call id, which `extension_ui_response` answers.
    #[serde(default)]
    pub id: String,
    /// `confirm` or `notify` (pi's other methods are read, and shown as nothing).
    pub method: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub message: String,
    /// When keel gives up and denies, in ms (absent: it waits).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// `notify`: `info`, `warning` or `error`.
    #[serde(default)]
    pub notify_type: Option<String>,
    /// `confirm` from the host: the tool call waiting for approval.
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub args: Option<Value>,
    /// `confirm` from the host for an `edit` or `write`: the diff it would apply to the file
    /// as it is now, and whether a write overwrites or creates.
    #[serde(default)]
    pub preview: Option<crate::kernel::tool::preview::Preview>,
}

impl PublicEvent {
    /// Reads one wire line (compact JSON, no newline). `None` for a line that is not a JSON
    /// object with a string `type`, or a known type without the fields it must have; a type
    /// this keel does not know is [`PublicEvent::Other`].
    pub fn parse(line: &str) -> Option<PublicEvent> {
        serde_json::from_str(line).ok()
    }

    /// The fact print and JSON mode act on, if this is one.
    pub fn into_fact(self) -> Option<Fact> {
        Some(match self {
            PublicEvent::MessageEnd { message } => Fact::MessageEnd { message },
            PublicEvent::ToolExecutionStart {
                tool_name, args, ..
            } => Fact::ToolExecutionStart { tool_name, args },
            PublicEvent::ToolExecutionEnd {
                tool_name,
                result,
                is_error,
                ..
            } => Fact::ToolExecutionEnd {
                tool_name,
                result,
                is_error,
            },
            PublicEvent::ExtensionUiRequest(r) => Fact::ExtensionUiRequest {
                method: r.method,
                title: r.title,
            },
            PublicEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => Fact::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            },
            PublicEvent::CompactionStart { reason } => Fact::CompactionStart { reason },
            PublicEvent::CompactionEnd {
                result,
                error_message,
                ..
            } => Fact::CompactionEnd {
                result,
                error_message,
            },
            PublicEvent::AgentSettled {
                aborted,
                outcome,
                error,
                ..
            } => Fact::AgentSettled {
                aborted,
                outcome,
                error,
            },
            _ => return None,
        })
    }
}

/// A wire event the print and JSON front ends act on (the part of a [`PublicEvent`] they use).
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    MessageEnd {
        message: Message,
    },
    ToolExecutionStart {
        tool_name: String,
        args: Value,
    },
    ToolExecutionEnd {
        tool_name: String,
        result: ToolResult,
        is_error: bool,
    },
    ExtensionUiRequest {
        method: String,
        title: String,
    },
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    CompactionStart {
        reason: String,
    },
    CompactionEnd {
        result: Option<Compacted>,
        error_message: Option<String>,
    },
    AgentSettled {
        aborted: bool,
        /// `completed|failed|turn_limit|blocked|aborted`.
        outcome: String,
        error: Option<SettledError>,
    },
}

/// A tool result as the wire carries it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ToolResult {
    #[serde(default)]
    pub content: Vec<Content>,
    #[serde(default)]
    pub details: Option<Value>,
}

impl ToolResult {
    /// The text parts, one per line.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What a compaction produced, as far as a front end reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    #[serde(default)]
    pub usage: Usage,
}

/// The wire event types a [`Fact`] is read from; print and JSON mode pass every other type
/// through unparsed.
const READ: &[&str] = &[
    "message_end",
    "tool_execution_start",
    "tool_execution_end",
    "extension_ui_request",
    "auto_retry_start",
    "compaction_start",
    "compaction_end",
    "agent_settled",
];

/// Whether events of type `kind` carry a [`Fact`].
pub fn read(kind: &str) -> bool {
    READ.contains(&kind)
}

#[derive(Deserialize)]
struct Tag<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// The `type` of a wire line (`None` if it is not a JSON object with a string `type`).
pub fn kind_of(line: &str) -> Option<String> {
    serde_json::from_str::<Tag>(line)
        .ok()
        .map(|t| t.kind.into_owned())
}

/// The fact a wire line of type `kind` carries (`None` for types print and JSON mode pass
/// through, and for a line that does not have the shape of its type).
pub fn parse(kind: &str, line: &str) -> Option<Fact> {
    if !read(kind) {
        return None;
    }
    PublicEvent::parse(line)?.into_fact()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_line_reads_back_with_its_error() {
        let line = r#"{"type":"agent_settled","aborted":false,"outcome":"failed","error":{"kind":"provider_http","message":"HTTP 500"}}"#;
        let kind = kind_of(line).unwrap();
        assert_eq!(
            parse(&kind, line),
            Some(Fact::AgentSettled {
                aborted: false,
                outcome: "failed".into(),
                error: Some(SettledError {
                    kind: "provider_http".into(),
                    message: "HTTP 500".into()
                }),
            })
        );
    }

    #[test]
    fn types_front_ends_pass_through_are_not_parsed() {
        let line = r#"{"type":"message_update","usage":{},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"x"}}"#;
        assert_eq!(kind_of(line).as_deref(), Some("message_update"));
        assert_eq!(parse("message_update", line), None);
        assert_eq!(kind_of("[1]"), None);
        assert_eq!(kind_of("{\"type\":3}"), None);
    }

    #[test]
    fn a_tool_end_reads_its_text_and_details() {
        let line = r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"details":{"exitCode":2}},"isError":true,"durationMs":3}"#;
        let Some(Fact::ToolExecutionEnd {
            tool_name,
            result,
            is_error,
        }) = parse("tool_execution_end", line)
        else {
            panic!("not read");
        };
        assert_eq!((tool_name.as_str(), is_error), ("bash", true));
        assert_eq!(result.text(), "a\nb");
        assert_eq!(result.details, Some(serde_json::json!({"exitCode": 2})));
    }

    #[test]
    fn both_dialog_shapes_read() {
        let host = r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"ls","timeout":1000,"toolName":"bash","args":{"command":"ls"}}"#;
        let Some(PublicEvent::ExtensionUiRequest(r)) = PublicEvent::parse(host) else {
            panic!("not read");
        };
        assert_eq!(
            (r.id.as_str(), r.timeout, r.tool_name.as_deref()),
            ("c1", Some(1000), Some("bash"))
        );
        assert_eq!(r.args, Some(serde_json::json!({"command": "ls"})));
        let kernel = r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"{}"}"#;
        let Some(PublicEvent::ExtensionUiRequest(r)) = PublicEvent::parse(kernel) else {
            panic!("not read");
        };
        assert_eq!((r.tool_name, r.args, r.timeout), (None, None, None));
        let notify = r#"{"type":"extension_ui_request","id":"n1","method":"notify","message":"m","notifyType":"warning"}"#;
        let Some(PublicEvent::ExtensionUiRequest(r)) = PublicEvent::parse(notify) else {
            panic!("not read");
        };
        assert_eq!(r.notify_type.as_deref(), Some("warning"));
        // Print mode's fact is the same read.
        assert_eq!(
            parse("extension_ui_request", notify),
            Some(Fact::ExtensionUiRequest {
                method: "notify".into(),
                title: String::new()
            })
        );
    }

    #[test]
    fn deltas_and_shell_commands_read() {
        let line = r#"{"type":"message_update","usage":{},"assistantMessageEvent":{"type":"toolcall_start","contentIndex":2,"id":"c","toolName":"ls"}}"#;
        assert!(matches!(
            PublicEvent::parse(line),
            Some(PublicEvent::MessageUpdate {
                assistant_message_event: Delta::ToolcallStart { content_index: 2, ref tool_name, .. },
                ..
            }) if tool_name == "ls"
        ));
        let unknown = r#"{"type":"message_update","assistantMessageEvent":{"type":"image_delta"}}"#;
        assert!(matches!(
            PublicEvent::parse(unknown),
            Some(PublicEvent::MessageUpdate {
                assistant_message_event: Delta::Other,
                ..
            })
        ));
        let bash = r#"{"type":"bash_execution_end","command":"ls","output":"a\n","exitCode":null,"cancelled":true,"truncated":false,"timestamp":5}"#;
        let Some(PublicEvent::BashExecutionEnd(b)) = PublicEvent::parse(bash) else {
            panic!("not read");
        };
        assert_eq!(
            (
                b.command.as_str(),
                b.exit_code,
                b.cancelled,
                b.exclude_from_context
            ),
            ("ls", None, true, false)
        );
    }
}
