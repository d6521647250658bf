//! The turn loop: one run = the prompt, then model calls and tool batches until the model
//! stops, the turn limit is hit, a call is blocked, or the run is aborted. Publishes pi's event
//! sequence (`pi-protocol.md` §2.3) and applies the queue semantics of §7.

use std::time::Duration;

use serde_json::Value;

use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::checkpoint::turn as checkpoint;
use crate::kernel::compaction;
use crate::kernel::event::{CompactionReason, EventPayload, RunOutcome};
use crate::kernel::message::{AssistantMessage, Message, StopReason, ToolResultMessage, Usage};
use crate::kernel::op::{QueueMode, UserInput};
use crate::kernel::provider::ModelRequest;
use crate::kernel::tool::external::ExternalSpec;
use crate::kernel::tool::{self, ToolOutput};
use crate::kernel::tool_loop::ToolLoop;

mod assemble;
mod contract;
mod escalate;
mod execute;
mod gate;
pub(crate) mod hooked;
mod parallel;
mod session_tools;
mod task;
use assemble::Assembler;
use contract::{Contract, Verdict};
use execute::execute;
use gate::{check_permission, Gate};
use hooked::Prompt;

use crate::kernel::hooks::Decision;

/// Error kinds worth retrying when they happen before any output.
const RETRYABLE: &[&str] = &[
    "rate_limited",
    "overloaded",
    "server_error",
    "connection",
    "idle_timeout",
    "timeout",
];

/// Runs one prompt to its end and publishes `AgentSettled` with the outcome.
pub(crate) async fn run(inner: &Inner, prompt: UserInput, abort: AbortSignal) -> RunOutcome {
    inner.bus.publish(EventPayload::AgentStarted);
    let mut produced: Vec<Message> = Vec::new();
    let mut pending_user = vec![prompt];
    let mut turns: u32 = 0;
    let mut retries: u32 = 0;
    // Whether the call after the last retry succeeded (`None` while none was retried).
    let mut retry_result: Option<Result<(), String>> = None;
    let mut overflow_compacted = false;
    let mut repeats = ToolLoop::new(inner.config.max_repeated_failures);
    let mut stop_continues: u32 = 0;
    let source = inner.lock().session_start.take();
    let mut start_context = match source {
        Some(source) => hooked::session_start(inner, source, &abort).await,
        None => Vec::new(),
    };
    let mut contract = Contract::new(&inner.config);
    inner.lock().budget = contract.budget();
    // keel's own next message (a corrected answer for `--output-schema`, a Stop hook's
    // reason to go on): sent on the next call, not shown to UserPromptSubmit hooks.
    let mut repair: Option<UserInput> = None;
    let mut structured_output = None;
    let outcome = loop {
        if let Some(over) = contract.over_budget() {
            requeue_follow_ups(inner, std::mem::take(&mut pending_user));
            break over;
        }
        inner.bus.publish(EventPayload::TurnStarted);
        turns += 1;
        let inputs = std::mem::take(&mut pending_user);
        let had_inputs = !inputs.is_empty();
        let mut sent = false;
        let mut blocked = None;
        for input in inputs {
            match hooked::prompt_submitted(inner, &input.text, &abort).await {
                Prompt::Blocked(reason) => blocked = Some(reason),
                Prompt::Go(context) => {
                    let now = inner.clock.now_ms();
                    push_message(inner, &mut produced, input.into_message(now));
                    checkpoint::user_message(inner);
                    let context: Vec<String> = start_context.drain(..).chain(context).collect();
                    if !context.is_empty() {
                        let text = hooked::context_message(&context);
                        push_message(
                            inner,
                            &mut produced,
                            UserInput::text(text).into_message(now),
                        );
                    }
                    sent = true;
                }
            }
        }
        if let Some(input) = repair.take() {
            push_message(
                inner,
                &mut produced,
                input.into_message(inner.clock.now_ms()),
            );
            sent = true;
        }
        if had_inputs && !sent && !has_queued(inner, Queue::Steering) {
            // Every prompt of this turn was blocked by a hook: nothing goes to the model, and
            // the run says so (it did not do what it was asked).
            break match blocked {
                Some(reason) => RunOutcome::PromptBlocked { reason },
                None => RunOutcome::Completed,
            };
        }
        for input in take_queue(inner, Queue::Steering) {
            push_message(
                inner,
                &mut produced,
                input.into_message(inner.clock.now_ms()),
            );
            checkpoint::user_message(inner);
        }
        contract.spend(&compact_if_needed(inner, &abort).await);
        let streamed = stream_assistant(inner, &abort).await;
        contract.spend(&streamed.message.usage);
        let assistant = streamed.message.clone();
        push_message(inner, &mut produced, Message::from(assistant.clone()));
        if let Some(outcome) = failed_outcome(&assistant, streamed.error_kind.clone()) {
            publish_turn_end(inner, assistant.clone(), Vec::new());
            let kind = streamed.error_kind.as_deref().unwrap_or("");
            if kind == "context_overflow" && !overflow_compacted && inner.lock().auto_compaction {
                overflow_compacted = true;
                let compacted =
                    compaction::compact(inner, CompactionReason::Overflow, None, true, &abort)
                        .await;
                if let Ok(done) = &compacted {
                    contract.spend(&done.usage);
                    turns -= 1;
                    continue;
                }
            }
            if let Some(delay_ms) = retry_delay(inner, &outcome, &streamed, retries) {
                retries += 1;
                inner.bus.publish(EventPayload::AgentFinished {
                    messages: std::mem::take(&mut produced),
                    will_retry: true,
                });
                inner.bus.publish(EventPayload::RetryScheduled {
                    attempt: retries,
                    max_attempts: inner.config.retry.max_attempts,
                    delay_ms,
                    error_message: assistant.error_message.clone().unwrap_or_default(),
                });
                let waited = tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => Ok(()),
                    _ = abort.aborted() => Err(RunOutcome::Aborted),
                    _ = inner.retry_cancel.notified() => Err(outcome.clone()),
                };
                if let Err(ended) = waited {
                    retry_result = Some(Err(match ended {
                        RunOutcome::Aborted => "the retry was aborted".into(),
                        _ => "the retry was cancelled".into(),
                    }));
                    break ended;
                }
                inner.bus.publish(EventPayload::AgentStarted);
                turns -= 1;
                continue;
            }
            if retries > 0 && retry_result.is_none() {
                retry_result = Some(Err(assistant.error_message.clone().unwrap_or_default()));
            }
            break outcome;
        }
        if retries > 0 && retry_result.is_none() {
            retry_result = Some(Ok(()));
        }
        let calls = assistant.tool_calls();
        let last_text = assistant.text();
        let batch = run_tools(inner, &calls, &abort).await;
        for r in &batch.results {
            push_message(inner, &mut produced, Message::from(r.clone()));
        }
        let repeated = repeats.record(&calls, &batch.results);
        publish_turn_end(inner, assistant, batch.results);
        if abort.is_aborted() {
            break RunOutcome::Aborted;
        }
        if let Some(outcome) = batch.blocked.or(repeated) {
            break outcome;
        }
        let plan = inner.lock().plan_answer.take();
        if let Some(plan) = plan {
            let message = session_tools::plan_message(inner, plan);
            inner.bus.publish(EventPayload::MessageStarted {
                message: message.clone(),
            });
            push_message(inner, &mut produced, message);
            break RunOutcome::Completed;
        }
        if batch.hook_stop.is_some() {
            break RunOutcome::Completed;
        }
        let more = !calls.is_empty() || has_queued(inner, Queue::Steering) || {
            let follow = take_queue(inner, Queue::FollowUp);
            let any = !follow.is_empty();
            pending_user.extend(follow);
            any
        };
        if !more {
            let again = match stop_continues < hooked::MAX_STOP_CONTINUES {
                true => hooked::stopping(inner, stop_continues > 0, &last_text, &abort).await,
                false => None,
            };
            if let Some(reason) = again.filter(|_| !abort.is_aborted()) {
                stop_continues += 1;
                repair = Some(UserInput::text(reason));
                continue;
            }
            match contract.final_answer(&inner.config, &last_text) {
                Verdict::Accept(value) => {
                    structured_output = value;
                    break RunOutcome::Completed;
                }
                // keel's own request: not held to --max-turns (the cap still holds).
                Verdict::Repair(input) => {
                    repair = Some(input);
                    continue;
                }
                Verdict::Fail(outcome) => break outcome,
            }
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
    if let Some(result) = retry_result {
        inner.bus.publish(EventPayload::RetryFinished {
            success: result.is_ok(),
            attempt: retries,
            final_error: result.err(),
        });
    }
    // A store that failed during the run is why it stopped (its abort is not the user's).
    let outcome = inner.store_failed_run().unwrap_or(outcome);
    inner.finish_activity();
    let aborted = outcome == RunOutcome::Aborted;
    inner.bus.publish(EventPayload::AgentSettled {
        aborted,
        structured_output: structured_output.filter(|_| outcome == RunOutcome::Completed),
        outcome: outcome.clone(),
    });
    hooked::idle_prompt(inner, &outcome);
    outcome
}

/// Compacts before a model call when the context has grown past the threshold; the usage of
/// the summarising call. A failed compaction is reported in its events and the call goes
/// ahead (the provider may still accept it; if not, the overflow path takes over).
async fn compact_if_needed(inner: &Inner, abort: &AbortSignal) -> Usage {
    let over = {
        let state = inner.lock();
        let window = state.provider.info().context_window;
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
        || !RETRYABLE.contains(&kind.as_str())
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
    error_kind: Option<String>,
    retry_after_ms: Option<u64>,
    saw_output: bool,
}

/// Builds the assistant message from one provider stream, publishing each delta.
async fn stream_assistant(inner: &Inner, abort: &AbortSignal) -> Streamed {
    let started = inner.clock.now_ms();
    let (provider, thinking_level) = {
        let state = inner.lock();
        (state.provider.clone(), state.thinking_level.clone())
    };
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
    let mut tools: Vec<tool::ToolSpec> = inner
        .config
        .tools
        .iter()
        .filter(|t| *t != session_tools::EXIT_PLAN)
        .filter_map(|t| tool::spec(t))
        .collect();
    if session_tools::offered(inner, session_tools::EXIT_PLAN) {
        tools.extend(tool::spec(session_tools::EXIT_PLAN));
    }
    tools.extend(external_tools(inner).into_iter().map(|t| t.spec));
    tools.extend(inner.config.subagents.as_ref().map(|s| s.spec()));
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
            asm.error_kind = Some("stream_cut".into());
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
