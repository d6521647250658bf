//! The turn loop: one run = the prompt, then model calls and tool batches until the model
//! stops, the turn limit is hit, a call is blocked, or the run is aborted. Publishes pi's event
//! sequence (`pi-protocol.md` §2.3) and applies the queue semantics of §7.

use serde_json::Value;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::checkpoint::turn as checkpoint;
use crate::kernel::compaction;
use crate::kernel::event::{CompactionReason, EventPayload, RunOutcome};
use crate::kernel::failure::ErrorKind;
use crate::kernel::message::{AssistantMessage, Message, StopReason, ToolResultMessage, Usage};
use crate::kernel::op::{QueueMode, UserInput};
use crate::kernel::provider::ModelRequest;
use crate::kernel::tool::external::ExternalSpec;
use crate::kernel::tool::{self, ToolOutput};

mod assemble;
mod contract;
mod escalate;
mod execute;
mod gate;
pub(crate) mod hooked;
mod parallel;
mod phase;
mod session_tools;
mod task;
use assemble::Assembler;
use execute::execute;
use gate::{check_permission, Gate};
use phase::Run;

use crate::kernel::hooks::Decision;

/// Runs one prompt to its end and publishes `AgentSettled` with the outcome.
pub(crate) async fn run(inner: &Inner, prompt: UserInput, abort: AbortSignal) -> RunOutcome {
    let mut run = Run::start(inner, prompt, abort).await;
    let outcome = run.turns().await;
    run.finish(outcome)
}

/// Compacts before a model call when the context has grown past the threshold; the usage of
/// the summarising call. A failed compaction is reported in its events and the call goes
/// ahead (the provider may still accept it; if not, the overflow path takes over).
async fn compact_if_needed(inner: &Inner, abort: &AbortSignal) -> Usage {
    let over = {
        let state = inner.lock();
        let model = state.run_options.model.as_ref().unwrap_or(&state.provider);
        let window = model.info().context_window;
        state.auto_compaction
            && compaction::context_tokens(&state.messages)
                > inner.config.compaction.threshold(window)
    };
    if !over {
        return Usage::default();
    }
    match compaction::compact(inner, CompactionReason::Threshold, None, false, abort).await {
        Ok(done) => done.usage,
        Err(_) => Usage::default(),
    }
}

/// The delay before the next attempt, or `None` when this failure is not retried: retries
/// are off or used up, the error is not transient, output had already streamed, or the
/// server asked for a longer wait than the policy allows.
fn retry_delay(inner: &Inner, outcome: &RunOutcome, streamed: &Streamed, done: u32) -> Option<u64> {
    let RunOutcome::Failed { kind, .. } = outcome else {
        return None;
    };
    let policy = inner.config.retry;
    if streamed.saw_output
        || !kind.is_retryable()
        || !inner.lock().auto_retry
        || done >= policy.max_attempts
    {
        return None;
    }
    match streamed.retry_after_ms {
        Some(ms) if ms > policy.max_delay_ms => None,
        Some(ms) => Some(ms),
        None => {
            let base = policy.base_delay_ms.saturating_mul(1u64 << done.min(20)) as f64;
            let jitter = 0.8 + 0.4 * inner.clock.random_unit();
            Some(((base * jitter) as u64).min(policy.max_delay_ms))
        }
    }
}

/// The outcome of a turn whose message ended the run: aborted, failed, or truncated (pi
/// treats a `length` stop as a failure too: the answer is incomplete).
fn failed_outcome(m: &AssistantMessage, kind: Option<ErrorKind>) -> Option<RunOutcome> {
    match m.stop_reason {
        StopReason::Aborted => Some(RunOutcome::Aborted),
        StopReason::Error => Some(RunOutcome::Failed {
            kind: kind.unwrap_or(ErrorKind::ProviderError),
            message: m.error_message.clone().unwrap_or_default(),
        }),
        StopReason::Length if m.tool_calls().is_empty() => Some(RunOutcome::Failed {
            kind: ErrorKind::Length,
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

/// Appends a message to the conversation under a fresh entry id and publishes its start
/// and end.
fn push_message(inner: &Inner, produced: &mut Vec<Message>, message: Message) {
    if !matches!(message, Message::Assistant(_)) {
        inner.bus.publish(EventPayload::MessageStarted {
            message: message.clone(),
        });
    }
    let entry_id = inner.clock.entry_id();
    {
        let mut state = inner.lock();
        state.messages.push(message.clone());
        state.ids.push(entry_id.clone());
    }
    inner.bus.publish(EventPayload::MessageFinished {
        message: message.clone(),
        entry_id,
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
fn take_queue(inner: &Inner, q: Queue) -> Vec<UserInput> {
    let mut state = inner.lock();
    let state = &mut *state;
    let (queue, mode) = match q {
        Queue::Steering => (&mut state.steering, state.steering_mode),
        Queue::FollowUp => (&mut state.follow_up, state.follow_up_mode),
    };
    let taken: Vec<UserInput> = match mode {
        QueueMode::All => queue.drain(..).collect(),
        QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
    };
    if !taken.is_empty() {
        inner.publish_queue(state);
    }
    taken
}

fn requeue_follow_ups(inner: &Inner, texts: Vec<UserInput>) {
    if texts.is_empty() {
        return;
    }
    let mut state = inner.lock();
    for t in texts.into_iter().rev() {
        state.follow_up.push_front(t);
    }
    inner.publish_queue(&state);
}

/// One streamed model response and how it ended.
struct Streamed {
    message: AssistantMessage,
    error_kind: Option<ErrorKind>,
    retry_after_ms: Option<u64>,
    saw_output: bool,
}

/// The model the run calls (its prompt's, else the session's) and the session's thinking
/// level clamped to it.
pub(super) fn run_model(
    inner: &Inner,
) -> (
    std::sync::Arc<dyn crate::kernel::provider::Provider>,
    String,
) {
    let state = inner.lock();
    match &state.run_options.model {
        Some(p) => (p.clone(), p.info().clamp_thinking(&state.thinking_level)),
        None => (state.provider.clone(), state.thinking_level.clone()),
    }
}

/// Builds the assistant message from one provider stream, publishing each delta.
async fn stream_assistant(inner: &Inner, abort: &AbortSignal) -> Streamed {
    let started = inner.clock.now_ms();
    let (provider, thinking_level) = run_model(inner);
    let mut msg = AssistantMessage {
        content: Vec::new(),
        api: provider.api().to_string(),
        provider: provider.name().to_string(),
        model: provider.model().to_string(),
        usage: Usage::default(),
        stop_reason: StopReason::Pending,
        error_message: None,
        duration_ms: None,
        timestamp: inner.clock.now_ms(),
    };
    inner.bus.publish(EventPayload::MessageStarted {
        message: Message::from(msg.clone()),
    });
    // External sources get a short, bounded wait to list their tools (only the first time).
    for source in &inner.config.external_tools {
        tokio::select! {
            biased;
            _ = abort.aborted() => break,
            _ = source.ready() => {}
        }
    }
    let mut tools: Vec<tool::ToolSpec> =
        tool::offered(&inner.config.tools, inner.config.job_tools, provider.api())
            .into_iter()
            .filter_map(tool::spec)
            .collect();
    if session_tools::offered(inner, session_tools::EXIT_PLAN) {
        tools.extend(tool::spec(session_tools::EXIT_PLAN));
    }
    tools.extend(external_tools(inner).into_iter().map(|t| t.spec));
    tools.extend(inner.config.subagents.as_ref().map(|s| s.spec()));
    if crate::kernel::lsp::tool::offered(inner.config.lsp.as_ref(), crate::kernel::lsp::tool::TOOL)
    {
        tools.push(crate::kernel::lsp::tool::spec());
    }
    let request = {
        let state = inner.lock();
        ModelRequest {
            system_prompt: inner.config.system_prompt.clone(),
            messages: state.messages.clone(),
            tools,
            thinking_level,
            session_id: inner.config.session_id.clone(),
            output_schema: inner
                .config
                .output_schema
                .as_ref()
                .map(|s| s.schema().clone()),
        }
    };
    let mut rx = provider.stream(request, abort.clone());
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
            asm.error_kind = Some(ErrorKind::StreamCut);
            break;
        };
        if asm.apply(inner, &mut msg, ev) {
            break;
        }
    }
    msg.duration_ms = Some((inner.clock.now_ms() - started).max(0) as u64);
    Streamed {
        message: msg,
        error_kind: asm.error_kind,
        retry_after_ms: asm.retry_after_ms,
        saw_output: asm.saw_output,
    }
}

struct Batch {
    results: Vec<ToolResultMessage>,
    blocked: Option<RunOutcome>,
    /// A hook said `continue: false`: the run ends after this batch.
    hook_stop: Option<String>,
}

/// Runs a turn's tool calls, applying the permission policy: one after another, except
/// `task` calls, which run concurrently with each other and with the rest (`parallel.rs`).
async fn run_tools(inner: &Inner, calls: &[(String, String, Value)], abort: &AbortSignal) -> Batch {
    let shared = parallel::Shared::default();
    let (tasks, others): (Vec<_>, Vec<_>) = calls
        .iter()
        .enumerate()
        .partition(|(_, (_, name, _))| is_task(inner, name));
    let in_order = async {
        let mut done = Vec::with_capacity(others.len());
        for (i, call) in others {
            done.push((i, run_call(inner, call, abort, &shared).await));
        }
        done
    };
    let concurrent = parallel::join_all(
        tasks
            .into_iter()
            .map(|(i, call)| {
                let shared = &shared;
                async move { (i, run_call(inner, call, abort, shared).await) }
            })
            .collect(),
    );
    let (mut done, concurrently) = tokio::join!(in_order, concurrent);
    done.extend(concurrently);
    done.sort_by_key(|(i, _)| *i);
    let (blocked, hook_stop) = shared.take();
    Batch {
        results: done.into_iter().map(|(_, r)| r).collect(),
        blocked,
        hook_stop,
    }
}

/// Whether `name` is this session's `task` tool.
fn is_task(inner: &Inner, name: &str) -> bool {
    name == crate::kernel::subagent::TASK && inner.config.subagents.is_some()
}

/// One call of a turn, from `ToolCallStarted` to `ToolCallFinished`.
async fn run_call(
    inner: &Inner,
    (id, name, args): &(String, String, Value),
    abort: &AbortSignal,
    shared: &parallel::Shared,
) -> ToolResultMessage {
    inner.bus.publish(EventPayload::ToolCallStarted {
        call_id: id.clone(),
        tool_name: name.clone(),
        args: args.clone(),
    });
    // The time a person takes to answer an approval is not the tool's (timed again then).
    let mut started = inner.clock.now_ms();
    let output = if abort.is_aborted() {
        ToolOutput::error("Tool call skipped: the run was aborted")
    } else if shared.is_blocked() {
        ToolOutput::error("Tool call skipped: an earlier call in this turn was blocked")
    } else if let Some(bad) = tool::args::error(args) {
        bad
    } else {
        let pre = hooked::pre_tool(inner, id, name, args, abort).await;
        shared.stop(pre.stop);
        let args = pre.args.as_ref().unwrap_or(args);
        let escalated = escalate::wanted(inner, name, args);
        let gate = match pre.decision {
            Some((Decision::Deny, reason)) => Gate::Refuse(ToolOutput::error(format!(
                "Tool `{name}` was blocked by a PreToolUse hook: {}",
                reason.as_deref().unwrap_or("no reason given")
            ))),
            hook if escalated => {
                escalate::gate(inner, (id, name, args), hook.map(|d| d.0), abort).await
            }
            hook => check_permission(inner, id, name, args, hook.map(|d| d.0), abort).await,
        };
        let ran = matches!(gate, Gate::Run | Gate::Approved);
        let writing = ran.then(|| checkpoint::before_call(inner, name)).flatten();
        let run = |inner, abort| async move {
            match is_task(inner, name) {
                true => task::run(inner, id, args, abort).await,
                false => execute(inner, id, name, args, abort, escalated).await,
            }
        };
        let mut out = match gate {
            Gate::Run => run(inner, abort).await,
            Gate::Approved => {
                started = inner.clock.now_ms();
                run(inner, abort).await
            }
            Gate::Refuse(out) => out,
            Gate::Denied(out) => {
                started = inner.clock.now_ms();
                out
            }
            Gate::Block(out) => {
                shared.block(RunOutcome::Blocked {
                    tool_name: name.clone(),
                    call_id: id.clone(),
                });
                out
            }
        };
        checkpoint::written(inner, writing).await;
        if ran {
            let stop = hooked::post_tool(inner, id, name, args, &mut out, abort).await;
            shared.stop(stop);
        }
        hooked::append(&mut out, &pre.context);
        out
    };
    let duration_ms = (inner.clock.now_ms() - started).max(0) as u64;
    inner.bus.publish(EventPayload::ToolCallFinished {
        call_id: id.clone(),
        tool_name: name.clone(),
        result: output.clone(),
        duration_ms,
    });
    ToolResultMessage {
        tool_call_id: id.clone(),
        tool_name: name.clone(),
        content: output.content,
        details: output.details,
        is_error: output.is_error,
        duration_ms: Some(duration_ms),
        timestamp: inner.clock.now_ms(),
    }
}

/// The tools every external source offers now, after the built-ins (a name that repeats a
/// built-in or an earlier source's tool is left out).
fn external_tools(inner: &Inner) -> Vec<ExternalSpec> {
    let mut out: Vec<ExternalSpec> = Vec::new();
    for source in &inner.config.external_tools {
        for t in source.tools() {
            let taken = tool::spec(&t.spec.name).is_some()
                || out.iter().any(|o| o.spec.name == t.spec.name);
            if !taken {
                out.push(t);
            }
        }
    }
    out
}
