//! Kernel [`Event`]s → wire events: what a session in this process or in the daemon publishes
//! for each fact. Pure; the events borrow the kernel event.

use std::borrow::Cow;

use super::parts::{AssistantMessageEvent, SettledError, ToolCall, ToolCallType};
use super::parts::{TurnMessage, TurnToolResult, UiRequest};
use super::words::{ErrorKind, Outcome, UiMethod};
use super::WireEvent;
use crate::kernel::event::{AssistantDelta, Event, EventPayload, RunOutcome};
use crate::kernel::jobs::JobEvent;

/// pi's `assistantMessageEvent` for one kernel delta.
fn delta_event(d: &AssistantDelta) -> AssistantMessageEvent<'_> {
    use AssistantMessageEvent as W;
    match d {
        AssistantDelta::TextStarted { index } => W::TextStart {
            content_index: *index,
        },
        AssistantDelta::TextDelta { index, delta } => W::TextDelta {
            content_index: *index,
            delta: delta.into(),
        },
        AssistantDelta::TextFinished { index, text } => W::TextEnd {
            content_index: *index,
            content: text.into(),
        },
        AssistantDelta::ThinkingStarted { index } => W::ThinkingStart {
            content_index: *index,
        },
        AssistantDelta::ThinkingDelta { index, delta } => W::ThinkingDelta {
            content_index: *index,
            delta: delta.into(),
        },
        AssistantDelta::ThinkingFinished { index, thinking } => W::ThinkingEnd {
            content_index: *index,
            content: thinking.into(),
        },
        AssistantDelta::ToolCallStarted { index, id, name } => W::ToolcallStart {
            content_index: *index,
            id: id.into(),
            tool_name: name.into(),
        },
        AssistantDelta::ToolCallDelta { index, delta } => W::ToolcallDelta {
            content_index: *index,
            delta: delta.into(),
        },
        AssistantDelta::ToolCallFinished {
            index,
            id,
            name,
            arguments,
        } => W::ToolcallEnd {
            content_index: *index,
            tool_call: ToolCall {
                kind: ToolCallType::ToolCall,
                id: id.into(),
                name: name.into(),
                arguments: Cow::Borrowed(arguments),
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
        | EventPayload::SessionNamed { .. }
        | EventPayload::Job(_) => None,
        EventPayload::AgentStarted => Some(W::AgentStart),
        EventPayload::AgentFinished {
            messages,
            will_retry,
        } => Some(W::AgentEnd {
            messages: Cow::Borrowed(messages),
            will_retry: *will_retry,
        }),
        EventPayload::AgentSettled {
            aborted,
            outcome,
            structured_output,
        } => Some(W::AgentSettled {
            aborted: *aborted,
            outcome: outcome_word(outcome),
            error: settled_error(outcome),
            max_turns: match outcome {
                RunOutcome::TurnLimit { max_turns } => Some(*max_turns),
                _ => None,
            },
            tool_name: match outcome {
                RunOutcome::Blocked { tool_name, .. } => Some(tool_name.into()),
                _ => None,
            },
            tool_call_id: match outcome {
                RunOutcome::Blocked { call_id, .. } => Some(call_id.into()),
                _ => None,
            },
            structured_output: structured_output.as_ref().map(Cow::Borrowed),
        }),
        EventPayload::TurnStarted => Some(W::TurnStart),
        EventPayload::TurnFinished {
            message,
            tool_results,
        } => Some(W::TurnEnd {
            message: TurnMessage::Assistant(Cow::Borrowed(message)),
            tool_results: tool_results
                .iter()
                .map(|m| TurnToolResult::ToolResult(Cow::Borrowed(m)))
                .collect(),
        }),
        EventPayload::MessageStarted { message } => Some(W::MessageStart {
            message: Cow::Borrowed(message),
        }),
        EventPayload::MessageDelta { usage, delta } => Some(W::MessageUpdate {
            usage: Cow::Borrowed(usage),
            assistant_message_event: delta_event(delta),
        }),
        EventPayload::MessageFinished { message, .. } => Some(W::MessageEnd {
            message: Cow::Borrowed(message),
        }),
        EventPayload::ToolCallStarted {
            call_id,
            tool_name,
            args,
        } => Some(W::ToolExecutionStart {
            tool_call_id: call_id.into(),
            tool_name: tool_name.into(),
            args: Cow::Borrowed(args),
        }),
        EventPayload::ToolCallUpdated {
            call_id,
            tool_name,
            args,
            partial,
        } => Some(W::ToolExecutionUpdate {
            tool_call_id: call_id.into(),
            tool_name: tool_name.into(),
            args: Cow::Borrowed(args),
            partial_result: partial.into(),
        }),
        EventPayload::ToolCallFinished {
            call_id,
            tool_name,
            result,
            duration_ms,
        } => Some(W::ToolExecutionEnd {
            tool_call_id: call_id.into(),
            tool_name: tool_name.into(),
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
            error_message: error_message.into(),
        }),
        EventPayload::RetryFinished {
            success,
            attempt,
            final_error,
        } => Some(W::AutoRetryEnd {
            success: *success,
            attempt: *attempt,
            final_error: final_error.as_deref().map(Cow::Borrowed),
        }),
        EventPayload::CompactionStarted { reason } => Some(W::CompactionStart {
            reason: (*reason).into(),
        }),
        EventPayload::CompactionFinished {
            reason,
            result,
            aborted,
            will_retry,
            error_message,
        } => Some(W::CompactionEnd {
            reason: (*reason).into(),
            result: result.as_ref().map(Cow::Borrowed),
            aborted: *aborted,
            will_retry: *will_retry,
            error_message: error_message.as_deref().map(Cow::Borrowed),
        }),
        EventPayload::SandboxViolation {
            call_id,
            reason,
            path,
            host,
        } => Some(W::SandboxViolation {
            tool_call_id: call_id.into(),
            reason: reason.word().into(),
            path: path.as_ref().map(|p| p.display().to_string().into()),
            host: host.as_deref().map(Cow::Borrowed),
        }),
        EventPayload::CheckpointCreated { checkpoint } if checkpoint.skipped.is_empty() => None,
        EventPayload::CheckpointCreated { checkpoint } => Some(W::CheckpointWarning {
            skipped: Cow::Borrowed(&checkpoint.skipped),
            error_message: None,
        }),
        EventPayload::CheckpointFailed { message } => Some(W::CheckpointWarning {
            skipped: Cow::Borrowed(&[]),
            error_message: Some(Cow::Borrowed(message)),
        }),
        EventPayload::TodosUpdated { todos } => Some(W::TodoUpdate {
            todos: Cow::Borrowed(todos),
        }),
        EventPayload::PermissionChanged { mode } => Some(W::PermissionModeChanged {
            mode: mode.word().into(),
        }),
        EventPayload::HookStarted { event, command } => Some(W::HookStarted {
            event: event.into(),
            command: command.into(),
        }),
        EventPayload::HookFinished {
            event,
            command,
            exit_code,
            duration_ms,
            decision,
            reason,
            messages,
        } => Some(W::HookFinished {
            event: event.into(),
            command: command.into(),
            exit_code: *exit_code,
            duration_ms: *duration_ms,
            decision: decision.as_deref().map(Cow::Borrowed),
            reason: reason.as_deref().map(Cow::Borrowed),
            messages: Cow::Borrowed(messages),
        }),
        EventPayload::QueueChanged {
            steering,
            follow_up,
        } => Some(W::QueueUpdate {
            steering: Cow::Borrowed(steering),
            follow_up: Cow::Borrowed(follow_up),
        }),
        EventPayload::ApprovalRequested {
            call_id,
            tool_name,
            args,
            ..
        } => {
            let (title, message) =
                crate::wire::rpc::approval_words(tool_name, args, args.to_string());
            Some(W::ExtensionUiRequest(UiRequest {
                title: Some(title.into()),
                message: message.into(),
                ..UiRequest::new(call_id, UiMethod::Confirm)
            }))
        }
    };
    one.into_iter().collect()
}

/// The `outcome` of `agent_settled`.
fn outcome_word(outcome: &RunOutcome) -> Outcome {
    match outcome {
        RunOutcome::Completed => Outcome::Completed,
        RunOutcome::Failed { .. } => Outcome::Failed,
        RunOutcome::TurnLimit { .. } => Outcome::TurnLimit,
        RunOutcome::Blocked { .. } | RunOutcome::PromptBlocked { .. } => Outcome::Blocked,
        RunOutcome::Aborted => Outcome::Aborted,
        RunOutcome::Budget { .. } => Outcome::Budget,
    }
}

/// The error `kind` and message of a run that did not complete.
pub fn settled_error(outcome: &RunOutcome) -> Option<SettledError> {
    let (kind, message) = match outcome {
        RunOutcome::Completed => return None,
        RunOutcome::Failed { kind, message } => (kind.clone(), message.clone()),
        RunOutcome::TurnLimit { max_turns } => (
            ErrorKind::TurnLimit,
            format!("the turn limit (--max-turns {max_turns}) was reached before the model finished"),
        ),
        RunOutcome::Blocked { tool_name, call_id } => (
            ErrorKind::Blocked,
            format!(
                "tool call `{tool_name}` ({call_id}) needs approval, and this headless run cannot ask; rerun with --permission auto to allow it"
            ),
        ),
        RunOutcome::PromptBlocked { reason } => (
            ErrorKind::Blocked,
            format!("the prompt was blocked by a UserPromptSubmit hook: {reason}"),
        ),
        RunOutcome::Aborted => (ErrorKind::Aborted, "the run was aborted".into()),
        RunOutcome::Budget { max_cost, spent } => (
            ErrorKind::Budget,
            format!(
                "the cost cap (--max-cost {max_cost}) was exceeded before the next model call: this run cost ${spent:.4}"
            ),
        ),
    };
    Some(SettledError { kind, message })
}

/// Events RPC mode adds to the shared stream: pi reports these changes to editor plugins,
/// which can cause them; JSON mode (a one-shot run) leaves them out. keel adds the model
/// changes and the user's finished shell commands, so that a front end fed only the stream (the
/// TUI) learns them too.
pub fn rpc_extra_events(event: &Event) -> Option<WireEvent<'_>> {
    match &event.payload {
        EventPayload::SessionNamed { name } => {
            Some(WireEvent::SessionInfoChanged { name: name.into() })
        }
        EventPayload::ThinkingLevelChanged { level } => Some(WireEvent::ThinkingLevelChanged {
            level: level.into(),
        }),
        EventPayload::ModelChanged { provider, model } => Some(WireEvent::ModelChanged {
            provider: provider.into(),
            model: model.into(),
        }),
        EventPayload::BashExecuted { record, .. } => {
            Some(WireEvent::BashExecutionEnd(Cow::Borrowed(record)))
        }
        EventPayload::Job(JobEvent::Started { info }) => Some(WireEvent::JobStarted {
            job: Cow::Borrowed(info),
        }),
        EventPayload::Job(JobEvent::Output { id, next }) => Some(WireEvent::JobOutput {
            id: *id,
            next: *next,
        }),
        EventPayload::Job(JobEvent::Ended { info }) => Some(WireEvent::JobEnded {
            job: Cow::Borrowed(info),
        }),
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
