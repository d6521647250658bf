//! The facts the kernel publishes on its one bus. Every front end and the session store read
//! these; none of them builds one. Events carry data only: no prose for humans, no ANSI.

use serde_json::Value;

use crate::kernel::failure::ErrorKind;
use crate::kernel::message::{AssistantMessage, Message, ToolResultMessage, Usage};
use crate::kernel::tool::ToolOutput;

/// One published fact with its per-session sequence number and time.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Strictly increasing per session, starting at 1, with no gaps.
    pub seq: u64,
    /// Unix milliseconds when it was published.
    pub ts: i64,
    pub payload: EventPayload,
}

/// A streamed change to the assistant message being produced (pi's `assistantMessageEvent`).
/// `index` is the content block index inside the message.
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantDelta {
    TextStarted {
        index: usize,
    },
    TextDelta {
        index: usize,
        delta: String,
    },
    TextFinished {
        index: usize,
        text: String,
    },
    ThinkingStarted {
        index: usize,
    },
    ThinkingDelta {
        index: usize,
        delta: String,
    },
    ThinkingFinished {
        index: usize,
        thinking: String,
    },
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    /// A raw fragment of the JSON arguments.
    ToolCallDelta {
        index: usize,
        delta: String,
    },
    ToolCallFinished {
        index: usize,
        id: String,
        name: String,
        arguments: Value,
    },
}

/// Why a run stopped: decided by the kernel, mapped to exit codes by the front ends.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// The model finished without error.
    Completed,
    /// The provider or model failed (`kind`: how, as the wire's `error.kind` says it).
    Failed { kind: ErrorKind, message: String },
    /// `--max-turns` was reached while the model still wanted to continue.
    TurnLimit { max_turns: u32 },
    /// A tool call needed an approval nobody could give.
    Blocked { tool_name: String, call_id: String },
    /// A `UserPromptSubmit` hook blocked the run's prompt: nothing was sent to the model
    /// (`reason`: the hook's, for the user).
    PromptBlocked { reason: String },
    /// The run was aborted (abort op, signal).
    Aborted,
    /// The run's cost exceeded `--max-cost` before its next model call: the cap and the USD
    /// spent so far.
    Budget { max_cost: f64, spent: f64 },
}

/// How a tool call was decided under the permission policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    Allow,
    Deny,
    /// Nobody answered in time (or nobody can answer any more): denied, and said so.
    Unanswered,
    /// Allowed, and the session leaves for `accept-edits` (an approved plan, when the user
    /// picked "approve and accept edits"); for any other call the same as `Allow`.
    AllowAcceptEdits,
    /// Nobody answered in time and nobody ever will (an unattended, scheduled run): the call
    /// blocks the run, which ends `Blocked` as a headless run does.
    Blocked,
}

/// Every kind of fact.
#[derive(Debug, Clone, PartialEq)]
pub enum EventPayload {
    /// The active model was set (start of a session, or a change).
    ModelChanged {
        provider: String,
        model: String,
    },
    /// The thinking level was set.
    ThinkingLevelChanged {
        level: String,
    },
    /// A run (one prompt with everything it triggers) began.
    AgentStarted,
    /// A run ended; `messages` are the messages it produced.
    AgentFinished {
        messages: Vec<Message>,
        will_retry: bool,
    },
    /// No more automatic work will happen for this prompt.
    AgentSettled {
        aborted: bool,
        outcome: RunOutcome,
        /// The final answer as JSON, when the run had an output schema and completed.
        structured_output: Option<Value>,
    },
    TurnStarted,
    TurnFinished {
        message: AssistantMessage,
        tool_results: Vec<ToolResultMessage>,
    },
    /// A message began (user, assistant with empty content, or tool result).
    MessageStarted {
        message: Message,
    },
    /// A streamed change to the assistant message; `usage` is the running usage.
    MessageDelta {
        usage: Usage,
        delta: AssistantDelta,
    },
    /// The authoritative final message. `entry_id` is its id in the session tree.
    MessageFinished {
        message: Message,
        entry_id: String,
    },
    ToolCallStarted {
        call_id: String,
        tool_name: String,
        args: Value,
    },
    /// Partial output of a running tool (accumulated, replace-not-append).
    ToolCallUpdated {
        call_id: String,
        tool_name: String,
        args: Value,
        partial: ToolOutput,
    },
    ToolCallFinished {
        call_id: String,
        tool_name: String,
        result: ToolOutput,
        duration_ms: u64,
    },
    /// A tool call waits for a front end to approve it (`--permission ask`).
    ApprovalRequested {
        call_id: String,
        tool_name: String,
        args: Value,
        /// What a file-changing call would do to the file as it is now (`edit`, `write`).
        preview: Option<crate::kernel::tool::preview::Preview>,
    },
    /// The queues changed; always the full current contents.
    QueueChanged {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
    /// A model call failed before any output and will be retried after `delay_ms`
    /// (published after the failed run's `AgentFinished{will_retry: true}`).
    RetryScheduled {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    /// Automatic retrying of this prompt ended: the retried call succeeded, or the last
    /// failure (or an abort) ended it.
    RetryFinished {
        success: bool,
        attempt: u32,
        final_error: Option<String>,
    },
    /// The user ran a shell command (not the model); `entry_id` is its session entry.
    BashExecuted {
        record: crate::kernel::tool::bash::BashExecution,
        entry_id: String,
    },
    /// The session was given a display name.
    SessionNamed {
        name: String,
    },
    /// Older messages are being summarised to free context.
    CompactionStarted {
        reason: CompactionReason,
    },
    /// Compaction ended: `result` on success, else `error_message` (or `aborted`).
    /// `will_retry`: the failed model call is repeated on the compacted context.
    CompactionFinished {
        reason: CompactionReason,
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        error_message: Option<String>,
    },
    /// A hook command started (`event` is its Claude event name).
    HookStarted {
        event: String,
        command: String,
    },
    /// A hook command ended: its exit code (`None`: killed or not started), what it decided,
    /// its reason and what it says to the user.
    HookFinished {
        event: String,
        command: String,
        exit_code: Option<i32>,
        duration_ms: u64,
        decision: Option<String>,
        reason: Option<String>,
        messages: Vec<String>,
    },
    /// The sandbox stopped something a tool call's process tried (`path` or `host`, when
    /// known); the call's result says so to the model.
    SandboxViolation {
        call_id: String,
        reason: crate::kernel::sandbox::ViolationReason,
        path: Option<std::path::PathBuf>,
        host: Option<String>,
    },
    /// The workspace was snapshotted before the first change after a user message (the
    /// session store records it as a `keel.checkpoint` entry).
    CheckpointCreated {
        checkpoint: crate::kernel::checkpoint::Checkpoint,
    },
    /// No checkpoint could be taken (`message` says why; with `git` missing checkpoints are
    /// off for the rest of the session).
    CheckpointFailed {
        message: String,
    },
    /// `todo_write` replaced the task list (always the whole list; the session store records
    /// it as a `keel.todos` entry).
    TodosUpdated {
        todos: Vec<crate::kernel::tool::todo::TodoItem>,
    },
    /// The permission mode changed (a front end set it, or an approved plan left plan mode).
    PermissionChanged {
        mode: crate::kernel::agent::Permission,
    },
    /// A background job of the session started, wrote (coalesced: at most one per job each
    /// 10 ms) or ended (DESIGN §19). Not recorded: jobs die with their session.
    Job(crate::kernel::jobs::JobEvent),
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CompactionReason {
    /// Asked for (RPC `compact`, TUI `/compact`).
    Manual,
    /// The context grew past the threshold before a model call.
    Threshold,
    /// The provider rejected the request as too long.
    Overflow,
}

/// What a compaction produced (pi's `CompactionResult`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    #[serde(default)]
    pub summary: String,
    /// The first message kept verbatim after the summary.
    #[serde(default)]
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub estimated_tokens_after: u64,
    /// Tokens the summarisation call itself used.
    #[serde(default)]
    pub usage: Usage,
    /// The id of the `compaction` session entry (also the summary message's id).
    #[serde(skip)]
    pub entry_id: String,
    /// When it was made (Unix ms): the summary message's and the entry's time.
    #[serde(skip)]
    pub timestamp: i64,
}
