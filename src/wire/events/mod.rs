//! The event vocabulary (`pi-protocol.md` §2 plus keel's additions), declared once for both
//! directions: [`WireEvent`] is what the JSON and RPC front ends and the daemon write (borrowing
//! the kernel's [`Event`](crate::kernel::event::Event): no copies on the hot path) and what every
//! client of the daemon reads back (owned: `WireEvent<'static>`). A client of a session in
//! this process gets each event typed beside its line ([`TypedEvent`]) and reads that instead
//! of parsing the line: the same event either way, so a front end renders the same thing
//! whether the run is here or in the daemon (`DESIGN.md` §10.1). Pure data: nothing here
//! writes anywhere.
//!
//! Reading is tolerant where a newer peer may add things: an unknown event `type` is
//! [`WireEvent::Other`], an unknown delta type [`AssistantMessageEvent::Other`], an unknown word
//! of a closed set (`outcome`, `method`, error kinds, …) that enum's `Other`; unknown fields are
//! ignored, and fields keel may leave out default.

/// Declares the `type` tag of every variant of a tagged enum once: `kind()` (an exhaustive
/// match, so a new variant must be named here) and `KINDS` (the tags in declaration order).
macro_rules! kinds {
    ($ty:ident { $($var:ident = $tag:literal,)* }) => {
        impl $ty<'_> {
            /// Every `type` tag, in declaration order (`other` stands for the types this keel
            /// does not know).
            pub const KINDS: &'static [&'static str] = &[$($tag),*];

            /// The `type` tag this value is serialized with.
            pub fn kind(&self) -> &'static str {
                match self {
                    $($ty::$var { .. } => $tag,)*
                }
            }
        }
    };
}

mod from_kernel;
mod lines;
mod parts;
mod typed;
mod words;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kernel::event::CompactionResult;
use crate::kernel::jobs::{JobId, JobInfo};
use crate::kernel::message::{Message, Usage};
use crate::kernel::tool::bash::BashExecution;

/// The typed `details` of the built-in tools' results and the argument fields front ends show
/// (declared in the kernel, whose tools write them).
pub use crate::kernel::tool::details::{
    BashDetails, CountDetails, EditDetails, GrepDetails, ReadDetails, ShownArgs, TodoCount,
    ToolDetails, WriteDetails,
};
pub use from_kernel::{rpc_extra_events, settled_error, stream_events, wire_events};
pub use lines::{ResultError, ResultLine, SessionLine};
pub use parts::{
    AssistantMessageEvent, DialogSubagent, SettledError, ToolCall, ToolCallType, ToolResult,
    TurnMessage, TurnToolResult, UiRequest,
};
pub use typed::{event_of, TypedEvent};
pub use words::{CompactionReason, ErrorKind, NotifyType, Outcome, UiMethod};

/// One line of the event stream. Field names are pi's, exactly. Fields that borrow are
/// [`Cow`]s: borrowed when written from a kernel event, owned when read from a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WireEvent<'a> {
    /// A run began.
    AgentStart,
    /// A run ended. `messages`: the messages this run produced; `willRetry`: a retry of the
    /// same prompt follows.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        #[serde(default, deserialize_with = "or_default")]
        messages: Cow<'a, [Message]>,
        #[serde(default)]
        will_retry: bool,
    },
    /// Terminal: no more automatic work for this prompt. `aborted`: the run was aborted.
    /// keel's additions: `outcome` and, unless completed, `error` (the `kind` and message a
    /// print or JSON run reports); for `turn_limit` the limit (`maxTurns`), for `blocked` the
    /// call that needed an approval (`toolName`, `toolCallId`); for a run with an output
    /// schema that completed, the final answer as JSON (`structuredOutput`).
    #[serde(rename_all = "camelCase")]
    AgentSettled {
        #[serde(default)]
        aborted: bool,
        outcome: Outcome,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error: Option<SettledError>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        max_turns: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        tool_name: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        tool_call_id: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        structured_output: Option<Cow<'a, Value>>,
    },
    TurnStart,
    /// `message`: the assistant message; `toolResults`: its tool results in call order.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        message: TurnMessage<'a>,
        tool_results: Vec<TurnToolResult<'a>>,
    },
    /// A message began (user, assistant with empty content, tool result).
    MessageStart {
        message: Cow<'a, Message>,
    },
    /// A streamed change to the assistant message. Delta only: `usage` is the running usage;
    /// the event holds no message snapshot (`message_end` has the final one).
    #[serde(rename_all = "camelCase")]
    MessageUpdate {
        #[serde(default, deserialize_with = "or_default")]
        usage: Cow<'a, Usage>,
        assistant_message_event: AssistantMessageEvent<'a>,
    },
    /// The authoritative final message.
    MessageEnd {
        message: Cow<'a, Message>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        #[serde(default)]
        tool_call_id: Cow<'a, str>,
        tool_name: Cow<'a, str>,
        #[serde(default)]
        args: Cow<'a, Value>,
    },
    /// `partialResult`: the output so far as a bounded tail (replace, don't append): for
    /// `bash`, its last 4 KiB / 50 lines, sent at most every 100 ms or 32 KiB of new output.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        tool_call_id: Cow<'a, str>,
        #[serde(default)]
        tool_name: Cow<'a, str>,
        #[serde(default)]
        args: Cow<'a, Value>,
        partial_result: ToolResult<'a>,
    },
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        #[serde(default)]
        tool_call_id: Cow<'a, str>,
        tool_name: Cow<'a, str>,
        result: ToolResult<'a>,
        is_error: bool,
        #[serde(default)]
        duration_ms: u64,
    },
    /// Always the full current queues.
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        #[serde(default)]
        steering: Cow<'a, [String]>,
        #[serde(default)]
        follow_up: Cow<'a, [String]>,
    },
    /// A dialog for the client: an approval (`confirm`, `--permission ask`; `id` is the tool
    /// call id) or a message (`notify`).
    ExtensionUiRequest(UiRequest<'a>),
    /// keel: dialog `id` of this stream is no longer open: it was answered (by a client of
    /// this session or of the subagent's own session, the first answer wins), timed out, or
    /// its subagent ended. Published for the dialogs a parent shows of its subagents
    /// (`extension_ui_request` with `subagent`); a client takes the question down.
    DialogResolved {
        id: Cow<'a, str>,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: Cow<'a, str>,
    },
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        final_error: Option<Cow<'a, str>>,
    },
    /// RPC only: the session was renamed (`set_session_name`).
    SessionInfoChanged {
        name: Cow<'a, str>,
    },
    /// RPC only: the thinking level changed (`set_thinking_level`, a model switch).
    ThinkingLevelChanged {
        level: Cow<'a, str>,
    },
    /// RPC only (keel's addition): the active model changed (`set_model`, `cycle_model`, the
    /// TUI's `/model`). `provider` and `model` are the ids `set_model` takes.
    ModelChanged {
        provider: Cow<'a, str>,
        model: Cow<'a, str>,
    },
    /// RPC only: output of a running RPC `bash` request (`id`: the request's id, as it was
    /// sent). Written by [`crate::wire::rpc::bash_update_line`].
    BashExecutionUpdate {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        id: Option<Value>,
        delta: Cow<'a, str>,
    },
    /// RPC only (keel's addition): a shell command the user ran (RPC `bash`, the TUI's `!cmd`)
    /// finished and was recorded. The fields are the session's `bashExecution` message:
    /// `command`, `output` (the tail within the caps), `exitCode` (null when killed, timed out
    /// or not started), `cancelled`, `truncated`, `fullOutputPath` (when truncated),
    /// `excludeFromContext` (when true) and `timestamp`.
    BashExecutionEnd(Cow<'a, BashExecution>),
    CompactionStart {
        reason: CompactionReason,
    },
    /// `result` on success, else `errorMessage` (or `aborted`); `willRetry`: the failed model
    /// call is repeated on the compacted context.
    #[serde(rename_all = "camelCase")]
    CompactionEnd {
        reason: CompactionReason,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        result: Option<Cow<'a, CompactionResult>>,
        #[serde(default)]
        aborted: bool,
        #[serde(default)]
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error_message: Option<Cow<'a, str>>,
    },
    /// keel: a hook command started (`event`: its Claude event name).
    HookStarted {
        event: Cow<'a, str>,
        command: Cow<'a, str>,
    },
    /// keel: a hook command ended. `exitCode` is absent when it was killed (timeout, abort) or
    /// could not start; `decision` is what it decided (`allow`, `ask`, `deny`, `defer`,
    /// `block`, `stop`, `error`), `reason` why, `messages` what it says to the user.
    #[serde(rename_all = "camelCase")]
    HookFinished {
        event: Cow<'a, str>,
        command: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        exit_code: Option<i32>,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        decision: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        reason: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "<[_]>::is_empty", default)]
        messages: Cow<'a, [String]>,
    },
    /// keel: the sandbox stopped something the process of tool call `toolCallId` tried:
    /// `reason` is `read_denied`, `protected`, `outside_writable_roots`, `network_off`, or a
    /// refusal of the network allowlist's proxy, with `host` as `name:port`:
    /// `network_not_allowed` (the name is not listed, or is listed only by a `*.` pattern and
    /// resolves to a non-public address), `network_port_not_allowed` (the name is listed, not
    /// on that port) or `network_host_mismatch` (the request named another host, or none, in
    /// its `Host` header or TLS server name);
    /// `path` (the real path) or `host` names what, when known. The call's result says so to
    /// the model in one added line.
    #[serde(rename_all = "camelCase")]
    SandboxViolation {
        tool_call_id: Cow<'a, str>,
        reason: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        path: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        host: Option<Cow<'a, str>>,
    },
    /// keel: a checkpoint (DESIGN §16) left files out (`skipped`: each path and the cap it
    /// broke: `maxFileBytes`, `maxFiles`, `maxTotalBytes`) or could not be taken
    /// (`errorMessage`).
    #[serde(rename_all = "camelCase")]
    CheckpointWarning {
        #[serde(skip_serializing_if = "<[_]>::is_empty", default)]
        skipped: Cow<'a, [crate::kernel::checkpoint::Skipped]>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        error_message: Option<Cow<'a, str>>,
    },
    /// keel: `todo_write` replaced the session's task list (`DESIGN.md` §17). `todos` is
    /// always the whole list, in order: each item's `content` (imperative), `status`
    /// (`pending`, `in_progress` or `completed`) and `activeForm` (the label shown while it
    /// is in progress). `get_state` returns the same list (`todos`), also after a resume.
    TodoUpdate {
        #[serde(default)]
        todos: Cow<'a, [crate::kernel::tool::todo::TodoItem]>,
    },
    /// keel: the session's permission mode changed (`set_permission_mode`, or an approved
    /// plan that left plan mode): `mode` is `ask`, `accept-edits`, `plan`, `auto` or
    /// `read-only`.
    PermissionModeChanged {
        mode: Cow<'a, str>,
    },
    /// keel: a background job of the session started (`job`: its id, command, pid, state,
    /// …, as `get_jobs` lists it).
    JobStarted {
        job: Cow<'a, JobInfo>,
    },
    /// keel: background job `id` wrote: its output now ends at byte offset `next`. At most
    /// one per job every 10 ms, and without the bytes: a client reads them with `read_job`
    /// from the `next` it last read.
    JobOutput {
        id: JobId,
        next: u64,
    },
    /// keel: a background job ended (`job.state`: `exited`, `killed` or `lost`).
    JobEnded {
        job: Cow<'a, JobInfo>,
    },
    /// keel: the session ended and takes no more prompts; sent to the clients attached to it.
    /// `reason`: `subagent_finished` (a subagent's task is over; its file stays, and
    /// `keel --resume` opens it as a session of its own).
    SessionEnded {
        reason: Cow<'a, str>,
    },
    /// A type this keel does not know (a newer peer's addition): nothing to show.
    #[serde(other)]
    Other,
}

kinds! { WireEvent {
    AgentStart = "agent_start",
    AgentEnd = "agent_end",
    AgentSettled = "agent_settled",
    TurnStart = "turn_start",
    TurnEnd = "turn_end",
    MessageStart = "message_start",
    MessageUpdate = "message_update",
    MessageEnd = "message_end",
    ToolExecutionStart = "tool_execution_start",
    ToolExecutionUpdate = "tool_execution_update",
    ToolExecutionEnd = "tool_execution_end",
    QueueUpdate = "queue_update",
    ExtensionUiRequest = "extension_ui_request",
    DialogResolved = "dialog_resolved",
    SessionEnded = "session_ended",
    AutoRetryStart = "auto_retry_start",
    AutoRetryEnd = "auto_retry_end",
    SessionInfoChanged = "session_info_changed",
    ThinkingLevelChanged = "thinking_level_changed",
    ModelChanged = "model_changed",
    BashExecutionUpdate = "bash_execution_update",
    BashExecutionEnd = "bash_execution_end",
    CompactionStart = "compaction_start",
    HookStarted = "hook_started",
    HookFinished = "hook_finished",
    CompactionEnd = "compaction_end",
    SandboxViolation = "sandbox_violation",
    CheckpointWarning = "checkpoint_warning",
    TodoUpdate = "todo_update",
    PermissionModeChanged = "permission_mode_changed",
    JobStarted = "job_started",
    JobOutput = "job_output",
    JobEnded = "job_ended",
    Other = "other",
} }

/// Reads a `T`, or its default when the value does not have `T`'s shape: for the fields no
/// reader acts on (a delta's running `usage`, the messages `agent_end` repeats), so that a
/// peer's variation there does not make the line unreadable. The event is internally tagged,
/// so `d` holds the field's buffered value and a failed read consumes nothing else.
fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(T::deserialize(d).unwrap_or_default())
}

impl WireEvent<'static> {
    /// Reads one wire line (compact JSON, no newline). `None` for a line that is not a JSON
    /// object with a string `type`, or a known type without the fields it must have; a type
    /// this keel does not know is [`WireEvent::Other`].
    pub fn parse(line: &str) -> Option<WireEvent<'static>> {
        serde_json::from_str(line).ok()
    }
}

#[derive(Deserialize)]
struct Tag<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The `type` of a wire line (`None` if it is not a JSON object with a string `type`), read
/// without reading the rest.
pub fn kind_of(line: &str) -> Option<String> {
    serde_json::from_str::<Tag>(line)
        .ok()
        .map(|t| t.kind.into_owned())
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
    "job_started",
    "job_output",
    "job_ended",
];

/// Whether a stream line of type `kind` belongs to RPC mode only: [`RPC_ONLY`] and the
/// `notify` dialogs of information. A warning or an error (the sandbox is off or unavailable,
/// a setting not applied) is JSON mode's too: a script must see that a protection is off.
pub fn is_rpc_only(kind: &str, line: &str) -> bool {
    let said = |level: &str| line.contains(&format!("\"notifyType\":\"{level}\""));
    RPC_ONLY.contains(&kind)
        || (kind == "extension_ui_request"
            && line.contains("\"method\":\"notify\"")
            && !said("warning")
            && !said("error"))
}
