//! The turn loop: one run = the prompt, then model calls and tool batches until the model
//! stops, the turn limit is hit, a call is blocked, or the run is aborted. Publishes pi's event
//! sequence (`pi-protocol.md` §2.3) and applies the queue semantics of §7.

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::{Inner, Permission};
use crate::kernel::event::{ApprovalDecision, AssistantDelta, EventPayload, RunOutcome};
use crate::kernel::message::{
    AssistantMessage, Content, Message, StopReason, ToolResultMessage, Usage,
};
use crate::kernel::op::QueueMode;
use crate::kernel::provider::{ModelRequest, ProviderEvent};
use crate::kernel::tool::{self, ToolContext, ToolOutput};

/// Runs one prompt to its end and publishes `AgentSettled` with the outcome.
pub(crate) async fn run(inner: &Inner, prompt: String, abort: AbortSignal) -> RunOutcome {
    inner.bus.publish(EventPayload::AgentStarted);
    let mut produced: Vec<Message> = Vec::new();
    let mut pending_user = vec![prompt];
    let mut turns: u32 = 0;
    let outcome = loop {
        inner.bus.publish(EventPayload::TurnStarted);
        turns += 1;
        for text in pending_user.drain(..) {
            push_message(
                inner,
                &mut produced,
                Message::user(text, inner.clock.now_ms()),
            );
        }
        for text in take_queue(inner, Queue::Steering) {
            push_message(
                inner,
                &mut produced,
                Message::user(text, inner.clock.now_ms()),
            );
        }
        let (assistant, error_kind) = stream_assistant(inner, &abort).await;
        push_message(inner, &mut produced, Message::Assistant(assistant.clone()));
        if let Some(outcome) = failed_outcome(&assistant, error_kind) {
            publish_turn_end(inner, assistant, Vec::new());
            break outcome;
        }
        let calls = assistant.tool_calls();
        let batch = run_tools(inner, &calls, &abort).await;
        for r in &batch.results {
            push_message(inner, &mut produced, Message::ToolResult(r.clone()));
        }
        publish_turn_end(inner, assistant, batch.results);
        if abort.is_aborted() {
            break RunOutcome::Aborted;
        }
        if let Some(outcome) = batch.blocked {
            break outcome;
        }
        let more = !calls.is_empty() || has_queued(inner, Queue::Steering) || {
            let follow = take_queue(inner, Queue::FollowUp);
            let any = !follow.is_empty();
            pending_user.extend(follow);
            any
        };
        if !more {
            break RunOutcome::Completed;
        }
        if let Some(max) = inner.config.max_turns {
            if turns >= max {
                // Follow-ups taken for the next turn go back to the front of their queue.
                requeue_follow_ups(inner, std::mem::take(&mut pending_user));
                break RunOutcome::TurnLimit { max_turns: max };
            }
        }
    };
    inner.bus.publish(EventPayload::AgentFinished {
        messages: produced,
        will_retry: false,
    });
    inner.lock().abort = None;
    let aborted = outcome == RunOutcome::Aborted;
    inner.bus.publish(EventPayload::AgentSettled {
        aborted,
        outcome: outcome.clone(),
    });
    outcome
}

/// The outcome of a turn whose message ended the run: aborted, failed, or truncated (pi
/// treats a `length` stop as a failure too: the answer is incomplete).
fn failed_outcome(m: &AssistantMessage, kind: Option<String>) -> Option<RunOutcome> {
    match m.stop_reason {
        StopReason::Aborted => Some(RunOutcome::Aborted),
        StopReason::Error => Some(RunOutcome::Failed {
            kind: kind.unwrap_or_else(|| "provider_error".into()),
            message: m.error_message.clone().unwrap_or_default(),
        }),
        StopReason::Length if m.tool_calls().is_empty() => Some(RunOutcome::Failed {
            kind: "length".into(),
            message: "Response was truncated: the model reached its output token limit".into(),
        }),
        _ => None,
    }
}

fn publish_turn_end(
    inner: &Inner,
    message: AssistantMessage,
    tool_results: Vec<ToolResultMessage>,
) {
    inner.bus.publish(EventPayload::TurnFinished {
        message,
        tool_results,
    });
}

/// Appends a message to the conversation and publishes its start and end.
fn push_message(inner: &Inner, produced: &mut Vec<Message>, message: Message) {
    if !matches!(message, Message::Assistant(_)) {
        inner.bus.publish(EventPayload::MessageStarted {
            message: message.clone(),
        });
    }
    inner.lock().messages.push(message.clone());
    inner.bus.publish(EventPayload::MessageFinished {
        message: message.clone(),
    });
    produced.push(message);
}

#[derive(Clone, Copy)]
enum Queue {
    Steering,
    FollowUp,
}

fn has_queued(inner: &Inner, q: Queue) -> bool {
    let state = inner.lock();
    match q {
        Queue::Steering => !state.steering.is_empty(),
        Queue::FollowUp => !state.follow_up.is_empty(),
    }
}

/// Dequeues per the queue's mode and publishes the new queues when anything moved.
fn take_queue(inner: &Inner, q: Queue) -> Vec<String> {
    let mut state = inner.lock();
    let (queue, mode) = match q {
        Queue::Steering => (&mut state.steering, inner.config.steering_mode),
        Queue::FollowUp => (&mut state.follow_up, inner.config.follow_up_mode),
    };
    let taken: Vec<String> = match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    };
    if !taken.is_empty() {
        inner.publish_queue(&state);
    }
    taken
}

fn requeue_follow_ups(inner: &Inner, texts: Vec<String>) {
    if texts.is_empty() {
        return;
    }
    let mut state = inner.lock();
    for t in texts.into_iter().rev() {
        state.follow_up.push_front(t);
    }
    inner.publish_queue(&state);
}

/// Builds the assistant message from one provider stream, publishing each delta. Returns the
/// error kind alongside when the stream failed.
async fn stream_assistant(
    inner: &Inner,
    abort: &AbortSignal,
) -> (AssistantMessage, Option<String>) {
    let started = inner.clock.now_ms();
    let mut msg = AssistantMessage {
        content: Vec::new(),
        api: inner.provider.api().to_string(),
        provider: inner.provider.name().to_string(),
        model: inner.provider.model().to_string(),
        usage: Usage::default(),
        stop_reason: StopReason::Pending,
        error_message: None,
        duration_ms: None,
        timestamp: inner.clock.now_ms(),
    };
    inner.bus.publish(EventPayload::MessageStarted {
        message: Message::Assistant(msg.clone()),
    });
    let request = {
        let state = inner.lock();
        ModelRequest {
            system_prompt: inner.config.system_prompt.clone(),
            messages: state.messages.clone(),
            tools: inner
                .config
                .tools
                .iter()
                .filter_map(|t| tool::spec(t))
                .collect(),
            thinking_level: inner.config.thinking_level.clone(),
        }
    };
    let mut rx = inner.provider.stream(request, abort.clone());
    let mut asm = Assembler::default();
    loop {
        let ev = tokio::select! {
            biased;
            _ = abort.aborted() => {
                asm.close(inner, &mut msg);
                msg.stop_reason = StopReason::Aborted;
                msg.error_message = Some("Request was aborted".into());
                break;
            }
            ev = rx.recv() => ev,
        };
        let Some(ev) = ev else {
            if abort.is_aborted() {
                // The provider stopped because of the abort; the next loop turn records it.
                continue;
            }
            asm.close(inner, &mut msg);
            msg.stop_reason = StopReason::Error;
            msg.error_message = Some("the provider stream ended without a stop reason".into());
            asm.error_kind = Some("stream_cut".into());
            break;
        };
        if asm.apply(inner, &mut msg, ev) {
            break;
        }
    }
    msg.duration_ms = Some((inner.clock.now_ms() - started).max(0) as u64);
    (msg, asm.error_kind)
}

/// Tracks the open content block while a message streams.
#[derive(Default)]
struct Assembler {
    open: Option<Open>,
    args: String,
    error_kind: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Open {
    Text,
    Thinking,
    ToolCall,
}

impl Assembler {
    /// Applies one provider event; true when the message is complete.
    fn apply(&mut self, inner: &Inner, msg: &mut AssistantMessage, ev: ProviderEvent) -> bool {
        match ev {
            ProviderEvent::Text(t) => {
                let index = self.ensure(inner, msg, Open::Text);
                if let Some(Content::Text { text }) = msg.content.get_mut(index) {
                    text.push_str(&t);
                }
                self.delta(inner, msg, AssistantDelta::TextDelta { index, delta: t });
            }
            ProviderEvent::Thinking(t) => {
                let index = self.ensure(inner, msg, Open::Thinking);
                if let Some(Content::Thinking { thinking, .. }) = msg.content.get_mut(index) {
                    thinking.push_str(&t);
                }
                self.delta(
                    inner,
                    msg,
                    AssistantDelta::ThinkingDelta { index, delta: t },
                );
            }
            ProviderEvent::ToolCallStart { id, name } => {
                self.close(inner, msg);
                msg.content.push(Content::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                });
                self.open = Some(Open::ToolCall);
                self.args.clear();
                let index = msg.content.len() - 1;
                self.delta(
                    inner,
                    msg,
                    AssistantDelta::ToolCallStarted { index, id, name },
                );
            }
            ProviderEvent::ToolCallDelta(d) => {
                if self.open == Some(Open::ToolCall) {
                    self.args.push_str(&d);
                    let index = msg.content.len() - 1;
                    self.delta(
                        inner,
                        msg,
                        AssistantDelta::ToolCallDelta { index, delta: d },
                    );
                }
            }
            ProviderEvent::ToolCallEnd => self.close(inner, msg),
            ProviderEvent::Usage(u) => msg.usage = u,
            ProviderEvent::Done { stop } => {
                self.close(inner, msg);
                msg.stop_reason = stop;
                return true;
            }
            ProviderEvent::Error { kind, message } => {
                self.close(inner, msg);
                msg.stop_reason = StopReason::Error;
                msg.error_message = Some(message);
                self.error_kind = Some(kind);
                return true;
            }
        }
        false
    }

    fn delta(&self, inner: &Inner, msg: &AssistantMessage, delta: AssistantDelta) {
        inner.bus.publish(EventPayload::MessageDelta {
            usage: msg.usage.clone(),
            delta,
        });
    }

    /// Makes sure a block of `kind` is open and returns its index.
    fn ensure(&mut self, inner: &Inner, msg: &mut AssistantMessage, kind: Open) -> usize {
        if self.open != Some(kind) {
            self.close(inner, msg);
            msg.content.push(match kind {
                Open::Thinking => Content::Thinking {
                    thinking: String::new(),
                    signature: None,
                },
                _ => Content::text(""),
            });
            self.open = Some(kind);
            let index = msg.content.len() - 1;
            let d = match kind {
                Open::Thinking => AssistantDelta::ThinkingStarted { index },
                _ => AssistantDelta::TextStarted { index },
            };
            self.delta(inner, msg, d);
        }
        msg.content.len() - 1
    }

    /// Closes the open block, publishing its `*_end` with the final content.
    fn close(&mut self, inner: &Inner, msg: &mut AssistantMessage) {
        let Some(open) = self.open.take() else { return };
        let index = msg.content.len() - 1;
        let d = match (open, msg.content.get_mut(index)) {
            (Open::Text, Some(Content::Text { text })) => AssistantDelta::TextFinished {
                index,
                text: text.clone(),
            },
            (Open::Thinking, Some(Content::Thinking { thinking, .. })) => {
                AssistantDelta::ThinkingFinished {
                    index,
                    thinking: thinking.clone(),
                }
            }
            (
                Open::ToolCall,
                Some(Content::ToolCall {
                    id,
                    name,
                    arguments,
                }),
            ) => {
                *arguments = parse_args(&self.args);
                AssistantDelta::ToolCallFinished {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                }
            }
            _ => return,
        };
        self.delta(inner, msg, d);
    }
}

/// Parses streamed arguments; malformed JSON is kept as a string so the tool can report it.
fn parse_args(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

struct Batch {
    results: Vec<ToolResultMessage>,
    blocked: Option<RunOutcome>,
}

/// Runs a turn's tool calls one after another, applying the permission policy.
async fn run_tools(inner: &Inner, calls: &[(String, String, Value)], abort: &AbortSignal) -> Batch {
    let mut results = Vec::with_capacity(calls.len());
    let mut blocked = None;
    for (id, name, args) in calls {
        inner.bus.publish(EventPayload::ToolCallStarted {
            call_id: id.clone(),
            tool_name: name.clone(),
            args: args.clone(),
        });
        let started = inner.clock.now_ms();
        let output = if abort.is_aborted() {
            ToolOutput::error("Tool call skipped: the run was aborted")
        } else if blocked.is_some() {
            ToolOutput::error("Tool call skipped: an earlier call in this turn was blocked")
        } else {
            match check_permission(inner, id, name, args, abort).await {
                Gate::Run => execute(inner, id, name, args, abort).await,
                Gate::Refuse(out) => out,
                Gate::Block(out) => {
                    blocked = Some(RunOutcome::Blocked {
                        tool_name: name.clone(),
                        call_id: id.clone(),
                    });
                    out
                }
            }
        };
        let duration_ms = (inner.clock.now_ms() - started).max(0) as u64;
        inner.bus.publish(EventPayload::ToolCallFinished {
            call_id: id.clone(),
            tool_name: name.clone(),
            result: output.clone(),
            duration_ms,
        });
        results.push(ToolResultMessage {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            content: output.content,
            details: output.details,
            is_error: output.is_error,
            duration_ms: Some(duration_ms),
            timestamp: inner.clock.now_ms(),
        });
    }
    Batch { results, blocked }
}

enum Gate {
    Run,
    Refuse(ToolOutput),
    Block(ToolOutput),
}

async fn check_permission(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> Gate {
    if !inner.config.tools.iter().any(|t| t == name) || tool::spec(name).is_none() {
        return Gate::Refuse(ToolOutput::error(format!(
            "Tool `{name}` is not available. Available tools: {}",
            inner.config.tools.join(", ")
        )));
    }
    if !tool::is_mutating(name) {
        return Gate::Run;
    }
    match inner.config.permission {
        Permission::Auto => Gate::Run,
        Permission::ReadOnly => Gate::Refuse(ToolOutput::error(format!(
            "Tool `{name}` is not allowed: keel runs with --permission read-only"
        ))),
        Permission::Ask if !inner.config.can_ask => Gate::Block(ToolOutput::error(format!(
            "Tool `{name}` needs approval and this run cannot ask (--permission ask in a headless mode)"
        ))),
        Permission::Ask => ask(inner, id, name, args, abort).await,
    }
}

async fn ask(inner: &Inner, id: &str, name: &str, args: &Value, abort: &AbortSignal) -> Gate {
    let (tx, rx) = oneshot::channel();
    inner.lock().approvals.insert(id.to_string(), tx);
    inner.bus.publish(EventPayload::ApprovalRequested {
        call_id: id.to_string(),
        tool_name: name.to_string(),
        args: args.clone(),
    });
    let decision = tokio::select! {
        d = rx => d.unwrap_or(ApprovalDecision::Deny),
        _ = abort.aborted() => ApprovalDecision::Deny,
    };
    inner.lock().approvals.remove(id);
    match decision {
        ApprovalDecision::Allow => Gate::Run,
        ApprovalDecision::Deny => Gate::Refuse(ToolOutput::error(format!(
            "Tool `{name}` was denied by the user"
        ))),
    }
}

/// Executes one call, forwarding its partial output as `ToolCallUpdated` events.
async fn execute(
    inner: &Inner,
    id: &str,
    name: &str,
    args: &Value,
    abort: &AbortSignal,
) -> ToolOutput {
    let (ptx, mut prx) = mpsc::unbounded_channel::<ToolOutput>();
    let ctx = ToolContext {
        cwd: inner.config.cwd.clone(),
        abort: abort.clone(),
        progress: Some(ptx),
        bash_timeout: inner.config.bash_timeout,
        temp_dir: inner.config.temp_dir.clone(),
    };
    let run = tool::execute(name, args, &ctx);
    tokio::pin!(run);
    let publish = |partial: ToolOutput| {
        inner.bus.publish(EventPayload::ToolCallUpdated {
            call_id: id.to_string(),
            tool_name: name.to_string(),
            args: args.clone(),
            partial,
        });
    };
    let output = loop {
        tokio::select! {
            biased;
            Some(partial) = prx.recv() => publish(partial),
            out = &mut run => break out,
        }
    };
    while let Ok(partial) = prx.try_recv() {
        publish(partial);
    }
    output
}
