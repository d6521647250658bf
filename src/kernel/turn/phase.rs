//! The phases of one run (`turn::run`): a [`Run`] holds what the run has produced and counted
//! so far, and each of its methods is one phase of a turn (the inputs, the model call with its
//! retries, the tool batch, the end of the turn) that says whether the turn goes on. It
//! publishes events and never writes output.

use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::Value;

use super::contract::{Contract, Verdict};
use super::hooked::{self, Prompt};
use super::{
    compact_if_needed, failed_outcome, has_queued, publish_turn_end, push_message,
    requeue_follow_ups, retry_delay, run_tools, session_tools, stream_assistant, take_queue, Queue,
    Streamed,
};
use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::Inner;
use crate::kernel::checkpoint::turn as checkpoint;
use crate::kernel::compaction;
use crate::kernel::event::{CompactionReason, EventPayload, RunOutcome};
use crate::kernel::failure::ErrorKind;
use crate::kernel::message::{AssistantMessage, Message};
use crate::kernel::op::UserInput;
use crate::kernel::tool_loop::ToolLoop;

/// Why a phase ends its turn early.
pub(super) enum Stop {
    /// The next turn starts now (after a retry's wait, a compaction after an overflow, or with
    /// keel's own next message); it does not count against `--max-turns`, except a hook's.
    NextTurn,
    /// The run ends with this outcome.
    End(RunOutcome),
}

/// What a phase gives the rest of its turn, or why the turn stops there.
type Phase<T = ()> = ControlFlow<Stop, T>;

/// One run's state across its turns.
pub(super) struct Run<'a> {
    inner: &'a Inner,
    abort: AbortSignal,
    /// The messages this run added (the final `AgentFinished` carries them).
    produced: Vec<Message>,
    /// The prompts the next turn sends (the run's prompt, then follow-ups).
    pending_user: Vec<UserInput>,
    turns: u32,
    retries: u32,
    /// Whether the call after the last retry succeeded (`None` while none was retried).
    retry_result: Option<Result<(), String>>,
    overflow_compacted: bool,
    repeats: ToolLoop,
    stop_continues: u32,
    /// What `SessionStart` hooks added, sent with the first prompt.
    start_context: Vec<String>,
    contract: Contract,
    /// keel's own next message (a corrected answer for `--output-schema`, a Stop hook's
    /// reason to go on): sent on the next call, not shown to UserPromptSubmit hooks.
    repair: Option<UserInput>,
    structured_output: Option<Value>,
}

impl<'a> Run<'a> {
    /// Publishes `AgentStarted`, fires the session's start hooks once and sets the budget.
    pub(super) async fn start(inner: &'a Inner, prompt: UserInput, abort: AbortSignal) -> Run<'a> {
        inner.bus.publish(EventPayload::AgentStarted);
        // The prompt's options hold from the start (its SessionStart hooks see its model).
        inner.lock().run_options = prompt.options.clone();
        let source = inner.lock().session_start.take();
        let start_context = match source {
            Some(source) => hooked::session_start(inner, source, &abort).await,
            None => Vec::new(),
        };
        let contract = Contract::new(&inner.config);
        inner.lock().budget = contract.budget();
        Run {
            inner,
            abort,
            produced: Vec::new(),
            pending_user: vec![prompt],
            turns: 0,
            retries: 0,
            retry_result: None,
            overflow_compacted: false,
            repeats: ToolLoop::new(inner.config.max_repeated_failures),
            stop_continues: 0,
            start_context,
            contract,
            repair: None,
            structured_output: None,
        }
    }

    /// Runs turns until one ends the run.
    pub(super) async fn turns(&mut self) -> RunOutcome {
        loop {
            if let ControlFlow::Break(Stop::End(outcome)) = self.turn().await {
                return outcome;
            }
        }
    }

    /// One turn: its inputs, the model call, the tool batch, and what comes after it.
    async fn turn(&mut self) -> Phase {
        self.begin()?;
        self.send_inputs().await?;
        let assistant = self.call_model().await?;
        let (called, last_text) = self.run_batch(assistant).await?;
        self.after_turn(called, &last_text).await?;
        self.turn_limit()
    }

    /// Stops a run over its cost cap, else publishes `TurnStarted` and counts the turn.
    fn begin(&mut self) -> Phase {
        if let Some(over) = self.contract.over_budget() {
            requeue_follow_ups(self.inner, std::mem::take(&mut self.pending_user));
            return ControlFlow::Break(Stop::End(over));
        }
        self.inner.bus.publish(EventPayload::TurnStarted);
        self.turns += 1;
        ControlFlow::Continue(())
    }

    /// Appends the turn's prompts (those UserPromptSubmit hooks let through, with their
    /// context), keel's own message and the steering queue; ends the run when hooks blocked
    /// every prompt and nothing else is to be sent.
    async fn send_inputs(&mut self) -> Phase {
        let inner = self.inner;
        let inputs = std::mem::take(&mut self.pending_user);
        let had_inputs = !inputs.is_empty();
        let mut sent = false;
        let mut blocked = None;
        for input in inputs {
            match hooked::prompt_submitted(inner, &input.text, &self.abort).await {
                Prompt::Blocked(reason) => blocked = Some(reason),
                Prompt::Go(context) => {
                    // A prompt of its own (the run's or a follow-up): its options, or none.
                    inner.lock().run_options = input.options.clone();
                    let now = inner.clock.now_ms();
                    self.push(input.into_message(now));
                    checkpoint::user_message(inner);
                    let context: Vec<String> =
                        self.start_context.drain(..).chain(context).collect();
                    if !context.is_empty() {
                        let text = hooked::context_message(&context);
                        self.push(UserInput::text(text).into_message(now));
                    }
                    sent = true;
                }
            }
        }
        if let Some(input) = self.repair.take() {
            self.push(input.into_message(inner.clock.now_ms()));
            sent = true;
        }
        if had_inputs && !sent && !has_queued(inner, Queue::Steering) {
            // Every prompt of this turn was blocked by a hook: nothing goes to the model, and
            // the run says so (it did not do what it was asked).
            return ControlFlow::Break(Stop::End(match blocked {
                Some(reason) => RunOutcome::PromptBlocked { reason },
                None => RunOutcome::Completed,
            }));
        }
        for input in take_queue(inner, Queue::Steering) {
            // A steering message joins the running prompt: it changes its options only when
            // it carries some.
            if !input.options.is_empty() {
                inner.lock().run_options = input.options.clone();
            }
            self.push(input.into_message(inner.clock.now_ms()));
            checkpoint::user_message(inner);
        }
        // The background jobs that ended since the model last heard, before its next request.
        if let Some(notice) = crate::kernel::tool::background::ended_notice(&inner.config.tool_env)
        {
            self.push(UserInput::text(notice).into_message(inner.clock.now_ms()));
        }
        ControlFlow::Continue(())
    }

    /// Compacts if needed and streams the model's answer; a failed answer is compacted after
    /// an overflow, retried, or ends the run.
    async fn call_model(&mut self) -> Phase<AssistantMessage> {
        let (inner, abort) = (self.inner, &self.abort);
        self.contract.spend(&compact_if_needed(inner, abort).await);
        let streamed = stream_assistant(inner, abort).await;
        self.contract.spend(&streamed.message.usage);
        let assistant = streamed.message.clone();
        self.push(Message::from(assistant.clone()));
        if let Some(outcome) = failed_outcome(&assistant, streamed.error_kind.clone()) {
            publish_turn_end(inner, assistant.clone(), Vec::new());
            return ControlFlow::Break(self.failed(&assistant, &streamed, outcome).await);
        }
        if self.retries > 0 && self.retry_result.is_none() {
            self.retry_result = Some(Ok(()));
        }
        ControlFlow::Continue(assistant)
    }

    /// After a failed answer: one compaction after a context overflow, a retry after a
    /// transient error, else the end of the run.
    async fn failed(
        &mut self,
        assistant: &AssistantMessage,
        streamed: &Streamed,
        outcome: RunOutcome,
    ) -> Stop {
        let (inner, abort) = (self.inner, &self.abort);
        let overflow = streamed.error_kind == Some(ErrorKind::ContextOverflow);
        if overflow && !self.overflow_compacted && inner.lock().auto_compaction {
            self.overflow_compacted = true;
            let compacted =
                compaction::compact(inner, CompactionReason::Overflow, None, true, abort).await;
            if let Ok(done) = &compacted {
                self.contract.spend(&done.usage);
                self.turns -= 1;
                return Stop::NextTurn;
            }
        }
        if let Some(delay_ms) = retry_delay(inner, &outcome, streamed, self.retries) {
            return self.retry(assistant, outcome, delay_ms).await;
        }
        if self.retries > 0 && self.retry_result.is_none() {
            self.retry_result = Some(Err(assistant.error_message.clone().unwrap_or_default()));
        }
        Stop::End(outcome)
    }

    /// Announces a retry, waits `delay_ms` (or until the run is aborted or the retry
    /// cancelled) and starts the next attempt.
    async fn retry(
        &mut self,
        assistant: &AssistantMessage,
        outcome: RunOutcome,
        delay_ms: u64,
    ) -> Stop {
        let inner = self.inner;
        self.retries += 1;
        inner.bus.publish(EventPayload::AgentFinished {
            messages: std::mem::take(&mut self.produced),
            will_retry: true,
        });
        inner.bus.publish(EventPayload::RetryScheduled {
            attempt: self.retries,
            max_attempts: inner.config.retry.max_attempts,
            delay_ms,
            error_message: assistant.error_message.clone().unwrap_or_default(),
        });
        let waited = tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => Ok(()),
            _ = self.abort.aborted() => Err(RunOutcome::Aborted),
            _ = inner.retry_cancel.notified() => Err(outcome.clone()),
        };
        if let Err(ended) = waited {
            self.retry_result = Some(Err(match ended {
                RunOutcome::Aborted => "the retry was aborted".into(),
                _ => "the retry was cancelled".into(),
            }));
            return Stop::End(ended);
        }
        inner.bus.publish(EventPayload::AgentStarted);
        self.turns -= 1;
        Stop::NextTurn
    }

    /// Runs the answer's tool calls and ends the turn; the run ends on an abort, a blocked
    /// call, a tool loop, an answered plan or a hook's stop. Gives whether the model called
    /// tools and its text.
    async fn run_batch(&mut self, assistant: AssistantMessage) -> Phase<(bool, String)> {
        let inner = self.inner;
        let calls = assistant.tool_calls();
        let last_text = assistant.text();
        let batch = run_tools(inner, &calls, &self.abort).await;
        for r in &batch.results {
            self.push(Message::from(r.clone()));
        }
        let repeated = self.repeats.record(&calls, &batch.results);
        publish_turn_end(inner, assistant, batch.results);
        if self.abort.is_aborted() {
            return ControlFlow::Break(Stop::End(RunOutcome::Aborted));
        }
        if let Some(outcome) = batch.blocked.or(repeated) {
            return ControlFlow::Break(Stop::End(outcome));
        }
        let plan = inner.lock().plan_answer.take();
        if let Some(plan) = plan {
            let message = session_tools::plan_message(inner, plan);
            inner.bus.publish(EventPayload::MessageStarted {
                message: message.clone(),
            });
            self.push(message);
            return ControlFlow::Break(Stop::End(RunOutcome::Completed));
        }
        if batch.hook_stop.is_some() {
            return ControlFlow::Break(Stop::End(RunOutcome::Completed));
        }
        ControlFlow::Continue((!calls.is_empty(), last_text))
    }

    /// Goes on when the model called tools or a queue holds a message; else the run is at
    /// rest: a Stop hook may keep it going, and the final answer is checked against the
    /// output schema (accepted, sent back for repair, or failed).
    async fn after_turn(&mut self, called: bool, last_text: &str) -> Phase {
        let inner = self.inner;
        let more = called || has_queued(inner, Queue::Steering) || {
            let follow = take_queue(inner, Queue::FollowUp);
            let any = !follow.is_empty();
            self.pending_user.extend(follow);
            any
        };
        if more {
            return ControlFlow::Continue(());
        }
        let again = match self.stop_continues < hooked::MAX_STOP_CONTINUES {
            true => hooked::stopping(inner, self.stop_continues > 0, last_text, &self.abort).await,
            false => None,
        };
        if let Some(reason) = again.filter(|_| !self.abort.is_aborted()) {
            self.stop_continues += 1;
            self.repair = Some(UserInput::text(reason));
            return ControlFlow::Break(Stop::NextTurn);
        }
        match self.contract.final_answer(&inner.config, last_text) {
            Verdict::Accept(value) => {
                self.structured_output = value;
                ControlFlow::Break(Stop::End(RunOutcome::Completed))
            }
            // keel's own request: not held to --max-turns (the cap still holds).
            Verdict::Repair(input) => {
                self.repair = Some(input);
                ControlFlow::Break(Stop::NextTurn)
            }
            Verdict::Fail(outcome) => ControlFlow::Break(Stop::End(outcome)),
        }
    }

    /// Ends the run at `--max-turns`.
    fn turn_limit(&mut self) -> Phase {
        if let Some(max) = self.inner.config.max_turns {
            if self.turns >= max {
                // Follow-ups taken for the next turn go back to the front of their queue.
                requeue_follow_ups(self.inner, std::mem::take(&mut self.pending_user));
                return ControlFlow::Break(Stop::End(RunOutcome::TurnLimit { max_turns: max }));
            }
        }
        ControlFlow::Continue(())
    }

    /// Publishes the run's end (`AgentFinished`, `RetryFinished` after retries,
    /// `AgentSettled`) and fires the idle hook; the outcome, a failed store's first.
    pub(super) fn finish(self, outcome: RunOutcome) -> RunOutcome {
        let inner = self.inner;
        inner.bus.publish(EventPayload::AgentFinished {
            messages: self.produced,
            will_retry: false,
        });
        if let Some(result) = self.retry_result {
            inner.bus.publish(EventPayload::RetryFinished {
                success: result.is_ok(),
                attempt: self.retries,
                final_error: result.err(),
            });
        }
        // A store that failed during the run is why it stopped (its abort is not the user's).
        let outcome = inner.store_failed_run().unwrap_or(outcome);
        inner.finish_activity();
        let aborted = outcome == RunOutcome::Aborted;
        inner.bus.publish(EventPayload::AgentSettled {
            aborted,
            structured_output: self
                .structured_output
                .filter(|_| outcome == RunOutcome::Completed),
            outcome: outcome.clone(),
        });
        hooked::idle_prompt(inner, &outcome);
        outcome
    }

    /// Appends a message this run produced (see [`push_message`]).
    fn push(&mut self, message: Message) {
        push_message(self.inner, &mut self.produced, message);
    }
}
