//! The public event vocabulary as the print and JSON front ends read it: the few wire events
//! whose content they use, parsed back from the wire line. A line made in this process and a
//! line that came from the daemon go through the same parse, so both front ends write the same
//! bytes whether the run is here or in the daemon (`DESIGN.md` §10.1).
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde::Deserialize;
use serde_json::Value;

use crate::kernel::message::{Content, Message, Usage};
use crate::wire::events::SettledError;

/// A wire event a front end acts on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Fact {
    MessageEnd {
        message: Message,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_name: String,
        #[serde(default)]
        args: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        tool_name: String,
        result: ToolResult,
        is_error: bool,
    },
    ExtensionUiRequest {
        method: String,
        #[serde(default)]
        title: String,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    CompactionStart {
        reason: String,
    },
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        #[serde(default)]
        result: Option<Compacted>,
        #[serde(default)]
        error_message: Option<String>,
    },
    AgentSettled {
        #[serde(default)]
        aborted: bool,
        /// `completed|failed|turn_limit|blocked|aborted`.
        outcome: String,
        #[serde(default)]
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

/// The wire event types [`Fact`] reads; every other type is passed through untouched.
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

/// The fact a wire line of type `kind` carries (`None` for types front ends pass through, and
/// for a line that does not have the shape of its type).
pub fn parse(kind: &str, line: &str) -> Option<Fact> {
    if !read(kind) {
        return None;
    }
    serde_json::from_str(line).ok()
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
}
