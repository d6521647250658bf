//! The facts the kernel publishes on its one bus. Every front end and the session store read
//! these; none of them builds one. Events carry data only: no prose for humans, no ANSI.

use serde_json::Value;

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
    /// The provider or model failed (`kind` is a stable machine-readable word).
    Failed { kind: String, message: String },
    /// `--max-turns` was reached while the model still wanted to continue.
    TurnLimit { max_turns: u32 },
    /// A tool call needed an approval nobody could give.
    Blocked { tool_name: String, call_id: String },
    /// The run was aborted (abort op, signal).
    Aborted,
}

/// How a tool call was decided under the permission policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalDecision {
    Allow,
    Deny,
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
    /// The authoritative final message.
    MessageFinished {
        message: Message,
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
    },
    /// The queues changed; always the full current contents.
    QueueChanged {
        steering: Vec<String>,
        follow_up: Vec<String>,
    },
}
