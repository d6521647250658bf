//! The few wire events print and JSON mode act on, as [`Fact`]s: a projection of the one event
//! vocabulary ([`WireEvent`], `src/wire/events`), read from the wire line, so that a run here
//! and a run in the daemon are reported from the same bytes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::Value;

use crate::kernel::event::CompactionResult;
use crate::kernel::message::Message;
use crate::wire::events::{
    event_of, CompactionReason, Outcome, SettledError, ToolResult, TypedEvent, UiMethod, WireEvent,
};

pub use crate::wire::events::kind_of;

/// A wire event the print and JSON front ends act on (the part of a [`WireEvent`] they use).
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
        result: ToolResult<'static>,
        is_error: bool,
    },
    ExtensionUiRequest {
        method: UiMethod,
        title: String,
    },
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    CompactionStart {
        reason: CompactionReason,
    },
    CompactionEnd {
        result: Option<CompactionResult>,
        error_message: Option<String>,
    },
    AgentSettled {
        aborted: bool,
        outcome: Outcome,
        error: Option<SettledError>,
        structured_output: Option<Value>,
    },
    /// The sandbox stopped a command: why, and the path or host when known.
    SandboxViolation {
        reason: String,
        what: Option<String>,
    },
    /// A hook ended: what it decided and what it says to the user (see [`hook_lines`]).
    HookFinished {
        event: String,
        command: String,
        decision: Option<String>,
        reason: Option<String>,
        messages: Vec<String>,
    },
}

impl Fact {
    /// The fact print and JSON mode act on in `event`, if it is one.
    pub fn of(event: WireEvent<'_>) -> Option<Fact> {
        use WireEvent as W;
        Some(match event {
            W::MessageEnd { message } => Fact::MessageEnd {
                message: message.into_owned(),
            },
            W::ToolExecutionStart {
                tool_name, args, ..
            } => Fact::ToolExecutionStart {
                tool_name: tool_name.into_owned(),
                args: args.into_owned(),
            },
            W::ToolExecutionEnd {
                tool_name,
                result,
                is_error,
                ..
            } => Fact::ToolExecutionEnd {
                tool_name: tool_name.into_owned(),
                result: result.into_owned(),
                is_error,
            },
            W::ExtensionUiRequest(r) => Fact::ExtensionUiRequest {
                method: r.method,
                title: r.title.unwrap_or_default().into_owned(),
            },
            W::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => Fact::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message: error_message.into_owned(),
            },
            W::CompactionStart { reason } => Fact::CompactionStart { reason },
            W::CompactionEnd {
                result,
                error_message,
                ..
            } => Fact::CompactionEnd {
                result: result.map(|r| r.into_owned()),
                error_message: error_message.map(|e| e.into_owned()),
            },
            W::AgentSettled {
                aborted,
                outcome,
                error,
                structured_output,
                ..
            } => Fact::AgentSettled {
                aborted,
                outcome,
                error,
                structured_output: structured_output.map(|v| v.into_owned()),
            },
            W::SandboxViolation {
                reason, path, host, ..
            } => Fact::SandboxViolation {
                reason: reason.into_owned(),
                what: path.or(host).map(|w| w.into_owned()),
            },
            W::HookFinished {
                event,
                command,
                decision,
                reason,
                messages,
                ..
            } => Fact::HookFinished {
                event: event.into_owned(),
                command: command.into_owned(),
                decision: decision.map(|d| d.into_owned()),
                reason: reason.map(|r| r.into_owned()),
                messages: messages.into_owned(),
            },
            _ => return None,
        })
    }
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
    "sandbox_violation",
    "hook_finished",
];

/// What a front end shows of a `sandbox_violation`: `reason` as words, then the path or host
/// when known (`sandbox stopped a command (outside writable roots): /usr/x`).
pub fn violation_line(reason: &str, what: Option<&str>) -> String {
    let what = what.map(|w| format!(": {w}")).unwrap_or_default();
    format!(
        "sandbox stopped a command ({}){what}",
        reason.replace('_', " ")
    )
}

/// What every front end shows of a `hook_finished`: a line for a decision that changes what
/// happens (`hook PreToolUse \`cmd\` → deny: why`), and one per message to the user (a
/// failure, a hook that could not start, `systemMessage`). Nothing for a hook that just ran.
pub fn hook_lines(
    event: &str,
    command: &str,
    decision: Option<&str>,
    reason: Option<&str>,
    messages: &[String],
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(d @ ("deny" | "block" | "ask" | "defer" | "stop")) = decision {
        let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
        lines.push(format!("hook {event} `{command}` → {d}{why}"));
    }
    lines.extend(messages.iter().map(|m| format!("hook {event}: {m}")));
    lines
}

/// Whether events of type `kind` carry a [`Fact`].
pub fn read(kind: &str) -> bool {
    READ.contains(&kind)
}

/// The fact a wire line of type `kind` carries (`None` for types print and JSON mode pass
/// through, and for a line that does not have the shape of its type).
pub fn parse(kind: &str, line: &str) -> Option<Fact> {
    of_line(kind, line, None)
}

/// [`parse`], reading the typed event instead of the line when there is one (a session in
/// this process): no parse.
pub fn of_line(kind: &str, line: &str, typed: Option<&TypedEvent>) -> Option<Fact> {
    if !read(kind) {
        return None;
    }
    Fact::of(event_of(line, typed)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::wire::events::ErrorKind;

    #[test]
    fn a_settled_line_reads_back_with_its_error() {
        let line = r#"{"type":"agent_settled","aborted":false,"outcome":"failed","error":{"kind":"provider_http","message":"HTTP 500"}}"#;
        let kind = kind_of(line).unwrap();
        assert_eq!(
            parse(&kind, line),
            Some(Fact::AgentSettled {
                aborted: false,
                outcome: Outcome::Failed,
                error: Some(SettledError {
                    kind: ErrorKind::ProviderHttp,
                    message: "HTTP 500".into()
                }),
                structured_output: None,
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
        assert_eq!(
            result.details.as_deref(),
            Some(&serde_json::json!({"exitCode": 2}))
        );
    }

    #[test]
    fn a_dialog_reads_as_its_method_and_title() {
        let notify = r#"{"type":"extension_ui_request","id":"n1","method":"notify","message":"m","notifyType":"warning"}"#;
        assert_eq!(
            parse("extension_ui_request", notify),
            Some(Fact::ExtensionUiRequest {
                method: UiMethod::Notify,
                title: String::new()
            })
        );
    }
}
