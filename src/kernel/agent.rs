//! `AgentSession`: the SDK handle and the kernel's mutable state (conversation, queues, the
//! active run, pending approvals). Front ends drive it with `Op`s and read the bus; it never
//! knows which front end is attached.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::kernel::abort::{AbortController, AbortSignal};
use crate::kernel::bus::{Bus, EventRx};
use crate::kernel::clock::Clock;
use crate::kernel::compaction::{self, CompactError, CompactionPolicy};
use crate::kernel::event::{
    ApprovalDecision, CompactionReason, CompactionResult, EventPayload, RunOutcome,
};
use crate::kernel::message::Message;
use crate::kernel::op::{Op, QueueMode};
use crate::kernel::provider::Provider;

/// What the permission policy does with tools that change things (`write`, `edit`, `bash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Permission {
    /// Every tool runs.
    #[default]
    Auto,
    /// Mutating tools are refused with a tool error the model sees.
    ReadOnly,
    /// A front end must approve each mutating call.
    Ask,
}

/// Fixed settings of one agent session.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub cwd: PathBuf,
    pub system_prompt: String,
    /// Enabled tool names (a subset of `tool::ALL`).
    pub tools: Vec<String>,
    pub max_turns: Option<u32>,
    pub permission: Permission,
    /// Whether a front end can answer `ApprovalRequested`; if not, `ask` ends the run `Blocked`.
    pub can_ask: bool,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub thinking_level: String,
    pub bash_timeout: Duration,
    pub temp_dir: PathBuf,
    /// Automatic retries of failed model calls.
    pub retry: RetryPolicy,
    /// Automatic context compaction.
    pub compaction: CompactionPolicy,
}

/// How failed model calls are retried: only failures before any output, of a transient kind
/// (rate limits, overload, 5xx, connection failures, stalls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub enabled: bool,
    /// Retries after the first attempt.
    pub max_attempts: u32,
    /// The first delay; each retry doubles it (with ±20% jitter).
    pub base_delay_ms: u64,
    /// A server asking to wait longer than this (`Retry-After`) fails the call instead.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay_ms: 2_000,
            max_delay_ms: 60_000,
        }
    }
}

impl AgentConfig {
    /// Defaults for an embedder working in `cwd`: every built-in tool, `auto` permission, no
    /// turn limit, one-at-a-time queues, thinking off, a 10-minute bash timeout and the default
    /// system prompt. `temp_dir` receives capped tool output.
    pub fn new(cwd: PathBuf, temp_dir: PathBuf) -> Self {
        let tools: Vec<String> = crate::kernel::tool::ALL
            .iter()
            .map(|s| s.to_string())
            .collect();
        AgentConfig {
            system_prompt: crate::kernel::default_system_prompt(&cwd, &tools),
            cwd,
            tools,
            max_turns: None,
            permission: Permission::Auto,
            can_ask: false,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            thinking_level: "off".into(),
            bash_timeout: Duration::from_secs(600),
            temp_dir,
            retry: RetryPolicy::default(),
            compaction: CompactionPolicy::default(),
        }
    }
}

/// Why a prompt was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// A run is active; steer or follow up instead.
    Busy,
}

impl std::fmt::Display for PromptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PromptError::Busy => f.write_str(
                "the agent is already processing a prompt; use steer or follow_up to queue a message",
            ),
        }
    }
}

impl std::error::Error for PromptError {}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub messages: Vec<Message>,
    /// The session entry id of each message (parallel to `messages`).
    pub ids: Vec<String>,
    /// Runtime switches, initialised from the config's policies.
    pub auto_retry: bool,
    pub auto_compaction: bool,
    pub steering: VecDeque<String>,
    pub follow_up: VecDeque<String>,
    pub abort: Option<AbortController>,
    pub approvals: HashMap<String, oneshot::Sender<ApprovalDecision>>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub bus: Bus,
    pub clock: Clock,
    pub provider: Arc<dyn Provider>,
    pub config: AgentConfig,
    pub state: Mutex<State>,
}

impl Inner {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the full queues.
    pub fn publish_queue(&self, state: &State) {
        self.bus.publish(EventPayload::QueueChanged {
            steering: state.steering.iter().cloned().collect(),
            follow_up: state.follow_up.iter().cloned().collect(),
        });
    }
}

/// The handle an embedder or front end holds. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentSession {
    inner: Arc<Inner>,
}

impl AgentSession {
    /// A session whose conversation starts with `history` (e.g. loaded from a session file).
    pub fn new(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        bus: Bus,
        clock: Clock,
        history: Vec<Message>,
    ) -> Self {
        let history = history.into_iter().map(|m| (clock.entry_id(), m)).collect();
        Self::with_entries(config, provider, bus, clock, history)
    }

    /// A session whose conversation starts with `history` as (session entry id, message)
    /// pairs, as `Store::context_entries` returns them.
    pub fn with_entries(
        config: AgentConfig,
        provider: Arc<dyn Provider>,
        bus: Bus,
        clock: Clock,
        history: Vec<(String, Message)>,
    ) -> Self {
        let (ids, messages) = history.into_iter().unzip();
        let state = State {
            messages,
            ids,
            auto_retry: config.retry.enabled,
            auto_compaction: config.compaction.enabled,
            ..State::default()
        };
        AgentSession {
            inner: Arc::new(Inner {
                bus,
                clock,
                provider,
                config,
                state: Mutex::new(state),
            }),
        }
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> EventRx {
        self.inner.bus.subscribe()
    }

    /// Announces the model and thinking level (the session store records them).
    pub fn announce_model(&self) {
        self.inner.bus.publish(EventPayload::ModelChanged {
            provider: self.inner.provider.name().to_string(),
            model: self.inner.provider.model().to_string(),
        });
        self.inner.bus.publish(EventPayload::ThinkingLevelChanged {
            level: self.inner.config.thinking_level.clone(),
        });
    }

    /// Whether a run is active.
    pub fn is_running(&self) -> bool {
        self.inner.lock().abort.is_some()
    }

    /// The current conversation (a copy).
    pub fn messages(&self) -> Vec<Message> {
        self.inner.lock().messages.clone()
    }

    /// Starts a run. Acceptance is decided under the state lock, so two prompts in the same
    /// instant can never both start.
    pub fn prompt(&self, text: String) -> Result<JoinHandle<RunOutcome>, PromptError> {
        let signal: AbortSignal = {
            let mut state = self.inner.lock();
            if state.abort.is_some() {
                return Err(PromptError::Busy);
            }
            let (controller, signal) = AbortController::new();
            state.abort = Some(controller);
            signal
        };
        let inner = self.inner.clone();
        Ok(tokio::spawn(async move {
            crate::kernel::turn::run(&inner, text, signal).await
        }))
    }

    /// Turns automatic retries on or off.
    pub fn set_auto_retry(&self, enabled: bool) {
        self.inner.lock().auto_retry = enabled;
    }

    /// Turns automatic compaction on or off.
    pub fn set_auto_compaction(&self, enabled: bool) {
        self.inner.lock().auto_compaction = enabled;
    }

    /// Compacts the conversation now (RPC `compact`, TUI `/compact`). Only while idle.
    pub async fn compact(
        &self,
        instructions: Option<String>,
    ) -> Result<CompactionResult, CompactError> {
        let signal = {
            let mut state = self.inner.lock();
            if state.abort.is_some() {
                drop(state);
                let e = CompactError::Failed(
                    "the agent is busy; compact when the run has settled".into(),
                );
                let reason = CompactionReason::Manual;
                self.inner
                    .bus
                    .publish(EventPayload::CompactionStarted { reason });
                self.inner.bus.publish(EventPayload::CompactionFinished {
                    reason,
                    result: None,
                    aborted: false,
                    will_retry: false,
                    error_message: Some(e.to_string()),
                });
                return Err(e);
            }
            let (controller, signal) = AbortController::new();
            state.abort = Some(controller);
            signal
        };
        let result = compaction::compact(
            &self.inner,
            CompactionReason::Manual,
            instructions.as_deref(),
            false,
            &signal,
        )
        .await;
        self.inner.lock().abort = None;
        result
    }

    /// Queues a steering message.
    pub fn steer(&self, text: String) {
        let mut state = self.inner.lock();
        state.steering.push_back(text);
        self.inner.publish_queue(&state);
    }

    /// Queues a follow-up message.
    pub fn follow_up(&self, text: String) {
        let mut state = self.inner.lock();
        state.follow_up.push_back(text);
        self.inner.publish_queue(&state);
    }

    /// Aborts the active run, if any. Queues are kept.
    pub fn abort(&self) {
        let mut state = self.inner.lock();
        if let Some(a) = &state.abort {
            a.abort();
        }
        for (_, tx) in state.approvals.drain() {
            let _ = tx.send(ApprovalDecision::Deny);
        }
    }

    /// Empties both queues and returns what was removed.
    pub fn clear_queue(&self) -> (Vec<String>, Vec<String>) {
        let mut state = self.inner.lock();
        let steering: Vec<String> = state.steering.drain(..).collect();
        let follow_up: Vec<String> = state.follow_up.drain(..).collect();
        self.inner.publish_queue(&state);
        (steering, follow_up)
    }

    /// Answers a pending approval; false if no such request is pending.
    pub fn approve(&self, call_id: &str, decision: ApprovalDecision) -> bool {
        match self.inner.lock().approvals.remove(call_id) {
            Some(tx) => tx.send(decision).is_ok(),
            None => false,
        }
    }

    /// Dispatches an [`Op`]. Only `Prompt` can fail.
    pub fn submit(&self, op: Op) -> Result<Option<JoinHandle<RunOutcome>>, PromptError> {
        match op {
            Op::Prompt { text } => self.prompt(text).map(Some),
            Op::Steer { text } => {
                self.steer(text);
                Ok(None)
            }
            Op::FollowUp { text } => {
                self.follow_up(text);
                Ok(None)
            }
            Op::Abort => {
                self.abort();
                Ok(None)
            }
            Op::ClearQueue => {
                self.clear_queue();
                Ok(None)
            }
            Op::Approve { call_id, decision } => {
                self.approve(&call_id, decision);
                Ok(None)
            }
            Op::Compact { instructions } => {
                let me = self.clone();
                tokio::spawn(async move {
                    // The result (or the reason there is none) is published as events.
                    let _ = me.compact(instructions).await;
                });
                Ok(None)
            }
            Op::SetAutoRetry { enabled } => {
                self.set_auto_retry(enabled);
                Ok(None)
            }
            Op::SetAutoCompaction { enabled } => {
                self.set_auto_compaction(enabled);
                Ok(None)
            }
        }
    }
}
