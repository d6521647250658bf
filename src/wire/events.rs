//! Kernel [`Event`]s → pi wire events (`pi-protocol.md` §2), plus the JSON-mode header and
//! result lines. `wire_events` is pure; the JSON and RPC front ends serialize what it returns.

use serde::Serialize;
use serde_json::Value;

use crate::kernel::event::{
    AssistantDelta, CompactionReason, CompactionResult, Event, EventPayload, RunOutcome,
};
use crate::kernel::message::{AssistantMessage, Content, Message, ToolResultMessage, Usage};
use crate::kernel::tool::bash::BashExecution;
use crate::kernel::tool::ToolOutput;

/// One line of the event stream. Field names are pi's, exactly.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WireEvent<'a> {
    /// A run began.
    AgentStart,
    /// A run ended. `messages`: the messages this run produced; `willRetry`: a retry follows.
    AgentEnd {
        messages: &'a [Message],
        #[serde(rename = "willRetry")]
        will_retry: bool,
    },
    /// Terminal: no more automatic work. `aborted`: the run was aborted. keel's additions:
    /// `outcome` (`completed|failed|turn_limit|blocked|aborted`) and, unless completed, `error`
    /// (the `kind` and message a print or JSON run reports); for `turn_limit` the limit
    /// (`maxTurns`), for `blocked` the call that needed an approval (`toolName`, `toolCallId`).
    #[serde(rename_all = "camelCase")]
    AgentSettled {
        aborted: bool,
        outcome: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<SettledError>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_turns: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_name: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<&'a str>,
    },
    TurnStart,
    /// `message`: the assistant message; `toolResults`: its tool results in call order.
    TurnEnd {
        message: WithRole<'a, AssistantMessage>,
        #[serde(rename = "toolResults")]
        tool_results: Vec<WithRole<'a, ToolResultMessage>>,
    },
    MessageStart {
        message: &'a Message,
    },
    /// Delta only: `usage` is the running usage; the event holds no message snapshot.
    MessageUpdate {
        usage: &'a Usage,
        #[serde(rename = "assistantMessageEvent")]
        assistant_message_event: AssistantMessageEvent<'a>,
    },
    MessageEnd {
        message: &'a Message,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        tool_call_id: &'a str,
        tool_name: &'a str,
        args: &'a Value,
    },
    /// `partialResult`: the output so far as a bounded tail (replace, don't append): for
    /// `bash`, its last 4 KiB / 50 lines, sent at most every 100 ms or 32 KiB of new output.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        tool_call_id: &'a str,
        tool_name: &'a str,
        args: &'a Value,
        partial_result: WireToolResult<'a>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        tool_call_id: &'a str,
        tool_name: &'a str,
        result: WireToolResult<'a>,
        is_error: bool,
        duration_ms: u64,
    },
    /// Always the full current queues.
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        steering: &'a [String],
        follow_up: &'a [String],
    },
    /// A dialog for the client (`--permission ask`): `id` is the tool call id.
    ExtensionUiRequest {
        id: &'a str,
        method: &'static str,
        title: String,
        message: String,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<&'a str>,
    },
    /// RPC only: the session was renamed (`set_session_name`).
    SessionInfoChanged {
        name: &'a str,
    },
    /// RPC only: the thinking level changed (`set_thinking_level`, a model switch).
    ThinkingLevelChanged {
        level: &'a str,
    },
    /// RPC only (keel's addition): the active model changed (`set_model`, `cycle_model`, the
    /// TUI's `/model`). `provider` and `model` are the ids `set_model` takes.
    ModelChanged {
        provider: &'a str,
        model: &'a str,
    },
    /// RPC only (keel's addition): a shell command the user ran (RPC `bash`, the TUI's `!cmd`)
    /// finished and was recorded. The fields are the session's `bashExecution` message:
    /// `command`, `output` (the tail within the caps), `exitCode` (null when killed, timed out
    /// or not started), `cancelled`, `truncated`, `fullOutputPath` (when truncated),
    /// `excludeFromContext` (when true) and `timestamp`.
    BashExecutionEnd(&'a BashExecution),
    CompactionStart {
        reason: CompactionReason,
    },
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        reason: CompactionReason,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<&'a str>,
    },
}

/// A message struct serialized with its `role` tag, as pi writes messages everywhere.
#[derive(Debug, Serialize)]
pub struct WithRole<'a, T> {
    pub role: &'static str,
    #[serde(flatten)]
    pub message: &'a T,
}

/// A tool result as the wire shows it.
#[derive(Debug, Serialize)]
pub struct WireToolResult<'a> {
    pub content: &'a [Content],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<&'a Value>,
}

impl<'a> From<&'a ToolOutput> for WireToolResult<'a> {
    fn from(o: &'a ToolOutput) -> Self {
        WireToolResult {
            content: &o.content,
            details: o.details.as_ref(),
        }
    }
}

/// pi's `assistantMessageEvent`, without `partial`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent<'a> {
    #[serde(rename_all = "camelCase")]
    TextStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    TextDelta {
        content_index: usize,
        delta: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    TextEnd {
        content_index: usize,
        content: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingStart { content_index: usize },
    #[serde(rename_all = "camelCase")]
    ThinkingDelta {
        content_index: usize,
        delta: &'a str,
    },
    #[serde(rename_all = "camelCase")]
    ThinkingEnd {
        content_index: usize,
        content: &'a str,
    },
    #[serde(rename = "toolcall_start", rename_all = "camelCase")]
    ToolcallStart {
        content_index: usize,
        id: &'a str,
        tool_name: &'a str,
    },
    #[serde(rename = "toolcall_delta", rename_all = "camelCase")]
    ToolcallDelta {
        content_index: usize,
        delta: &'a str,
    },
    #[serde(rename = "toolcall_end", rename_all = "camelCase")]
    ToolcallEnd {
        content_index: usize,
        tool_call: WireToolCall<'a>,
    },
}

/// The finished tool call inside `toolcall_end`.
#[derive(Debug, Serialize)]
pub struct WireToolCall<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub name: &'a str,
    pub arguments: &'a Value,
}

fn delta_event(d: &AssistantDelta) -> AssistantMessageEvent<'_> {
    use AssistantMessageEvent as W;
    match d {
        AssistantDelta::TextStarted { index } => W::TextStart {
            content_index: *index,
        },
        AssistantDelta::TextDelta { index, delta } => W::TextDelta {
            content_index: *index,
            delta,
        },
        AssistantDelta::TextFinished { index, text } => W::TextEnd {
            content_index: *index,
            content: text,
        },
        AssistantDelta::ThinkingStarted { index } => W::ThinkingStart {
            content_index: *index,
        },
        AssistantDelta::ThinkingDelta { index, delta } => W::ThinkingDelta {
            content_index: *index,
            delta,
        },
        AssistantDelta::ThinkingFinished { index, thinking } => W::ThinkingEnd {
            content_index: *index,
            content: thinking,
        },
        AssistantDelta::ToolCallStarted { index, id, name } => W::ToolcallStart {
            content_index: *index,
            id,
            tool_name: name,
        },
        AssistantDelta::ToolCallDelta { index, delta } => W::ToolcallDelta {
            content_index: *index,
            delta,
        },
        AssistantDelta::ToolCallFinished {
            index,
            id,
            name,
            arguments,
        } => W::ToolcallEnd {
            content_index: *index,
            tool_call: WireToolCall {
                kind: "toolCall",
                id,
                name,
                arguments,
            },
        },
    }
}

/// The wire events for one kernel event (zero or one today; a list so that a kernel fact can
/// map to several lines without changing callers).
pub fn wire_events(event: &Event) -> Vec<WireEvent<'_>> {
    use WireEvent as W;
    let one = match &event.payload {
        EventPayload::ModelChanged { .. }
        | EventPayload::ThinkingLevelChanged { .. }
        | EventPayload::BashExecuted { .. }
        | EventPayload::SessionNamed { .. } => None,
        EventPayload::AgentStarted => Some(W::AgentStart),
        EventPayload::AgentFinished {
            messages,
            will_retry,
        } => Some(W::AgentEnd {
            messages,
            will_retry: *will_retry,
        }),
        EventPayload::AgentSettled { aborted, outcome } => Some(W::AgentSettled {
            aborted: *aborted,
            outcome: outcome_word(outcome),
            error: settled_error(outcome),
            max_turns: match outcome {
                RunOutcome::TurnLimit { max_turns } => Some(*max_turns),
                _ => None,
            },
            tool_name: match outcome {
                RunOutcome::Blocked { tool_name, .. } => Some(tool_name),
                _ => None,
            },
            tool_call_id: match outcome {
                RunOutcome::Blocked { call_id, .. } => Some(call_id),
                _ => None,
            },
        }),
        EventPayload::TurnStarted => Some(W::TurnStart),
        EventPayload::TurnFinished {
            message,
            tool_results,
        } => Some(W::TurnEnd {
            message: WithRole {
                role: "assistant",
                message,
            },
            tool_results: tool_results
                .iter()
                .map(|message| WithRole {
                    role: "toolResult",
                    message,
                })
                .collect(),
        }),
        EventPayload::MessageStarted { message } => Some(W::MessageStart { message }),
        EventPayload::MessageDelta { usage, delta } => Some(W::MessageUpdate {
            usage,
            assistant_message_event: delta_event(delta),
        }),
        EventPayload::MessageFinished { message, .. } => Some(W::MessageEnd { message }),
        EventPayload::ToolCallStarted {
            call_id,
            tool_name,
            args,
        } => Some(W::ToolExecutionStart {
            tool_call_id: call_id,
            tool_name,
            args,
        }),
        EventPayload::ToolCallUpdated {
            call_id,
            tool_name,
            args,
            partial,
        } => Some(W::ToolExecutionUpdate {
            tool_call_id: call_id,
            tool_name,
            args,
            partial_result: partial.into(),
        }),
        EventPayload::ToolCallFinished {
            call_id,
            tool_name,
            result,
            duration_ms,
        } => Some(W::ToolExecutionEnd {
            tool_call_id: call_id,
            tool_name,
            result: result.into(),
            is_error: result.is_error,
            duration_ms: *duration_ms,
        }),
        EventPayload::RetryScheduled {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => Some(W::AutoRetryStart {
            attempt: *attempt,
            max_attempts: *max_attempts,
            delay_ms: *delay_ms,
            error_message,
        }),
        EventPayload::RetryFinished {
            success,
            attempt,
            final_error,
        } => Some(W::AutoRetryEnd {
            success: *success,
            attempt: *attempt,
            final_error: final_error.as_deref(),
        }),
        EventPayload::CompactionStarted { reason } => Some(W::CompactionStart { reason: *reason }),
        EventPayload::CompactionFinished {
            reason,
            result,
            aborted,
            will_retry,
            error_message,
        } => Some(W::CompactionEnd {
            reason: *reason,
            result: result.as_ref(),
            aborted: *aborted,
            will_retry: *will_retry,
            error_message: error_message.as_deref(),
        }),
        EventPayload::QueueChanged {
            steering,
            follow_up,
        } => Some(W::QueueUpdate {
            steering,
            follow_up,
        }),
        EventPayload::ApprovalRequested {
            call_id,
            tool_name,
            args,
            ..
        } => Some(W::ExtensionUiRequest {
            id: call_id,
            method: "confirm",
            title: format!("Allow tool `{tool_name}`?"),
            message: args.to_string(),
        }),
    };
    one.into_iter().collect()
}

/// Why a run did not complete, as `agent_settled` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SettledError {
    pub kind: String,
    pub message: String,
}

/// The `outcome` word of `agent_settled`.
pub fn outcome_word(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Completed => "completed",
        RunOutcome::Failed { .. } => "failed",
        RunOutcome::TurnLimit { .. } => "turn_limit",
        RunOutcome::Blocked { .. } => "blocked",
        RunOutcome::Aborted => "aborted",
    }
}

/// The error `kind` and message of a run that did not complete.
pub fn settled_error(outcome: &RunOutcome) -> Option<SettledError> {
    let (kind, message) = match outcome {
        RunOutcome::Completed => return None,
        RunOutcome::Failed { kind, message } => (kind.clone(), message.clone()),
        RunOutcome::TurnLimit { max_turns } => (
            "turn_limit".into(),
            format!("the turn limit (--max-turns {max_turns}) was reached before the model finished"),
        ),
        RunOutcome::Blocked { tool_name, call_id } => (
            "blocked".into(),
            format!(
                "tool call `{tool_name}` ({call_id}) needs approval, and this headless run cannot ask; rerun with --permission auto to allow it"
            ),
        ),
        RunOutcome::Aborted => ("aborted".into(), "the run was aborted".into()),
    };
    Some(SettledError { kind, message })
}

/// The event types RPC mode (and so the daemon) adds to JSON mode's vocabulary; a JSON-mode
/// client of the daemon leaves them out. A `notify` dialog is one too (see
/// [`is_rpc_only`]).
pub const RPC_ONLY: &[&str] = &[
    "session_info_changed",
    "thinking_level_changed",
    "model_changed",
    "bash_execution_update",
    "bash_execution_end",
];

/// Whether a stream line of type `kind` belongs to RPC mode only: [`RPC_ONLY`] and the
/// `notify` dialogs RPC mode sends for warnings.
pub fn is_rpc_only(kind: &str, line: &str) -> bool {
    RPC_ONLY.contains(&kind)
        || (kind == "extension_ui_request" && line.contains("\"method\":\"notify\""))
}

impl WireEvent<'_> {
    /// The `type` tag this event is serialized with.
    pub fn kind(&self) -> &'static str {
        use WireEvent as W;
        match self {
            W::AgentStart => "agent_start",
            W::AgentEnd { .. } => "agent_end",
            W::AgentSettled { .. } => "agent_settled",
            W::TurnStart => "turn_start",
            W::TurnEnd { .. } => "turn_end",
            W::MessageStart { .. } => "message_start",
            W::MessageUpdate { .. } => "message_update",
            W::MessageEnd { .. } => "message_end",
            W::ToolExecutionStart { .. } => "tool_execution_start",
            W::ToolExecutionUpdate { .. } => "tool_execution_update",
            W::ToolExecutionEnd { .. } => "tool_execution_end",
            W::QueueUpdate { .. } => "queue_update",
            W::ExtensionUiRequest { .. } => "extension_ui_request",
            W::AutoRetryStart { .. } => "auto_retry_start",
            W::AutoRetryEnd { .. } => "auto_retry_end",
            W::SessionInfoChanged { .. } => "session_info_changed",
            W::ThinkingLevelChanged { .. } => "thinking_level_changed",
            W::ModelChanged { .. } => "model_changed",
            W::BashExecutionEnd(_) => "bash_execution_end",
            W::CompactionStart { .. } => "compaction_start",
            W::CompactionEnd { .. } => "compaction_end",
        }
    }
}

/// Events RPC mode adds to the shared stream: pi reports these changes to editor plugins,
/// which can cause them; JSON mode (a one-shot run) leaves them out. keel adds the model
/// changes and the user's finished shell commands, so that a front end fed only the stream (the
/// TUI) learns them too.
pub fn rpc_extra_events(event: &Event) -> Option<WireEvent<'_>> {
    match &event.payload {
        EventPayload::SessionNamed { name } => Some(WireEvent::SessionInfoChanged { name }),
        EventPayload::ThinkingLevelChanged { level } => {
            Some(WireEvent::ThinkingLevelChanged { level })
        }
        EventPayload::ModelChanged { provider, model } => {
            Some(WireEvent::ModelChanged { provider, model })
        }
        EventPayload::BashExecuted { record, .. } => Some(WireEvent::BashExecutionEnd(record)),
        _ => None,
    }
}

/// The events RPC mode and the daemon publish for one kernel event: [`wire_events`] then
/// [`rpc_extra_events`]. An `ApprovalRequested` is the exception: its host publishes a
/// dialog ([`crate::wire::rpc::approval_line`]) instead of the `extension_ui_request` here.
pub fn stream_events(event: &Event) -> Vec<WireEvent<'_>> {
    let mut all = wire_events(event);
    all.extend(rpc_extra_events(event));
    all
}

/// The first line of JSON mode: the session header.
#[derive(Debug, Serialize)]
pub struct SessionLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub version: u32,
    pub id: &'a str,
    pub timestamp: &'a str,
    pub cwd: &'a str,
    #[serde(rename = "parentSession", skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<&'a str>,
}

/// The last line of JSON mode (keel's extension; pi clients ignore unknown types).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `success|failed|turn_limit|blocked|interrupted|config_error|usage|internal`.
    pub outcome: &'a str,
    /// The process exit status that follows this line.
    pub exit_code: i32,
    /// Null when no session existed (e.g. a config error before it was opened).
    pub session_id: Option<&'a str>,
    /// The final assistant text (empty when there was none).
    pub final_text: &'a str,
    /// Summed usage of every model call of the run.
    pub usage: &'a Usage,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError<'a>>,
}

/// Why a run did not succeed.
#[derive(Debug, Serialize)]
pub struct ResultError<'a> {
    pub kind: &'a str,
    pub message: &'a str,
}
