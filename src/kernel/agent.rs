//! `AgentSession`: the SDK handle and the kernel's mutable state (conversation, queues, the
//! active run, pending approvals). Front ends drive it with `Op`s and read the bus; it never
//! knows which front end is attached.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::kernel::abort::{AbortController, AbortSignal};
use crate::kernel::bus::{Bus, EventRx};
use crate::kernel::clock::Clock;
use crate::kernel::compaction::{self, CompactError};
use crate::kernel::event::{
    ApprovalDecision, CompactionReason, CompactionResult, EventPayload, RunOutcome,
};
use crate::kernel::message::Message;
use crate::kernel::op::{Op, QueueMode, UserInput};
use crate::kernel::provider::Provider;
use crate::kernel::tool::bash::{self, BashExecution};

mod config;

pub use config::{AgentConfig, Permission, RetryPolicy, Thinking};

/// What `AgentSession::status` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// A run is active (a prompt is being worked on).
    pub running: bool,
    pub compacting: bool,
    pub auto_compaction: bool,
    pub auto_retry: bool,
    /// Messages in the model context.
    pub message_count: usize,
    /// Queued steering and follow-up messages.
    pub pending_count: usize,
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

#[derive(Debug)]
pub(crate) struct State {
    pub messages: Vec<Message>,
    /// The session entry id of each message (parallel to `messages`).
    pub ids: Vec<String>,
    /// The model in use (`set_model` swaps it between runs).
    pub provider: Arc<dyn Provider>,
    /// The thinking level in use, already clamped to the model.
    pub thinking_level: String,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    /// Runtime switches, initialised from the config's policies.
    pub auto_retry: bool,
    pub auto_compaction: bool,
    /// Whether a compaction is running.
    pub compacting: bool,
    /// The activity holding `abort` is a compaction asked for while idle, not a run.
    pub manual_compaction: bool,
    pub steering: VecDeque<UserInput>,
    pub follow_up: VecDeque<UserInput>,
    pub abort: Option<AbortController>,
    pub approvals: HashMap<String, oneshot::Sender<ApprovalDecision>>,
    /// Shell commands the user ran while a run was active: recorded and added to the context
    /// when the run settles, so the conversation keeps its order.
    pub pending_bash: Vec<BashExecution>,
    /// `SessionStart` hooks still to fire (before the next run), with their `source`:
    /// `startup` (a new session), `resume` (one with messages), `compact` (after a compaction),
    /// `clear` (a session that replaced a cleared one).
    pub session_start: Option<&'static str>,
    /// Allow rules added by "always" answers in this session, checked after the config's
    /// rules say nothing.
    pub always: crate::kernel::policy::Rules,
    /// The active run's prompt options (a Claude command's model and allowed tools); empty
    /// between runs.
    pub run_options: crate::kernel::op::PromptOptions,
    /// The permission mode in use (the config's, until `set_permission` changes it).
    pub permission: Permission,
    /// The mode an approved plan switches to: the one in use before plan mode (`ask` for a
    /// session that started in plan mode).
    pub before_plan: Permission,
    /// The task list `todo_write` last wrote (restored from the session file on resume).
    pub todos: Vec<crate::kernel::tool::todo::TodoItem>,
    /// A plan `exit_plan_mode` handed in while nobody could approve it: the run ends with it
    /// as its answer after the current batch.
    pub plan_answer: Option<String>,
    /// The active run's cost account (`None`: uncapped), handed to the subagents it starts.
    pub budget: Option<crate::kernel::budget::Budget>,
    /// Checkpoints (§16): the user message whose checkpoint is still to be taken, the last
    /// snapshot taken, and whether they are off for the rest of the session (`git` missing).
    pub checkpoint: crate::kernel::checkpoint::turn::Due,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub bus: Bus,
    pub clock: Clock,
    pub config: AgentConfig,
    pub state: Mutex<State>,
    /// Wakes a run waiting to retry so it gives up (`abort_retry`).
    pub retry_cancel: Notify,
    /// The session store's health, when a recorder saves this session.
    pub store_health: std::sync::OnceLock<crate::kernel::recorder::StoreHealth>,
}

impl Inner {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How a run that settles now ends when the session cannot be saved, while that is so.
    pub fn store_failed_run(&self) -> Option<RunOutcome> {
        self.store_health.get().and_then(|h| h.failed_run())
    }

    /// Aborts the active run or compaction and denies open approvals.
    pub fn abort(&self) {
        let mut state = self.lock();
        if let Some(a) = &state.abort {
            a.abort();
        }
        for (_, tx) in state.approvals.drain() {
            let _ = tx.send(ApprovalDecision::Deny);
        }
    }

    /// The model in use.
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.lock().provider.clone()
    }

    /// The model the active run calls: its prompt's (a Claude command's `model`), else the
    /// session's.
    pub fn run_provider(&self) -> Arc<dyn Provider> {
        let state = self.lock();
        state
            .run_options
            .model
            .clone()
            .unwrap_or_else(|| state.provider.clone())
    }

    /// Ends the active run or compaction: records shell commands the user ran meanwhile.
    pub fn finish_activity(&self) {
        let pending = {
            let mut state = self.lock();
            state.abort = None;
            state.manual_compaction = false;
            state.run_options = Default::default();
            std::mem::take(&mut state.pending_bash)
        };
        for record in pending {
            self.record_bash(record);
        }
    }

    /// Publishes a user shell command (the recorder writes it) and adds it to the context
    /// unless it was excluded.
    pub fn record_bash(&self, record: BashExecution) {
        let entry_id = self.clock.entry_id();
        if let Some(message) = record.context_message() {
            let mut state = self.lock();
            state.messages.push(message);
            state.ids.push(entry_id.clone());
        }
        self.bus
            .publish(EventPayload::BashExecuted { record, entry_id });
    }

    /// Sets the permission mode (entering plan mode remembers the mode to go back to) and
    /// publishes it when it changed.
    pub fn set_permission(&self, permission: Permission) {
        let changed = {
            let mut state = self.lock();
            let before = state.permission;
            if permission == Permission::Plan && before != Permission::Plan {
                state.before_plan = before;
            }
            state.permission = permission;
            before != permission
        };
        if changed {
            self.bus
                .publish(EventPayload::PermissionChanged { mode: permission });
        }
    }

    /// Publishes the full queues.
    pub fn publish_queue(&self, state: &State) {
        self.bus.publish(EventPayload::QueueChanged {
            steering: state.steering.iter().map(|m| m.text.clone()).collect(),
            follow_up: state.follow_up.iter().map(|m| m.text.clone()).collect(),
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
            thinking_level: provider.info().clamp_thinking(&config.thinking_level),
            provider,
            steering_mode: config.steering_mode,
            follow_up_mode: config.follow_up_mode,
            auto_retry: config.retry.enabled,
            auto_compaction: config.compaction.enabled,
            compacting: false,
            manual_compaction: false,
            steering: VecDeque::new(),
            follow_up: VecDeque::new(),
            abort: None,
            approvals: HashMap::new(),
            pending_bash: Vec::new(),
            session_start: None,
            always: Default::default(),
            run_options: Default::default(),
            permission: config.permission,
            before_plan: Permission::Ask,
            todos: Vec::new(),
            plan_answer: None,
            budget: None,
            checkpoint: Default::default(),
        };
        let mut state = state;
        state.session_start = Some(if state.messages.is_empty() {
            "startup"
        } else {
            "resume"
        });
        AgentSession {
            inner: Arc::new(Inner {
                bus,
                clock,
                config,
                state: Mutex::new(state),
                retry_cancel: Notify::new(),
                store_health: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Ends runs with `session_write` when the store that records this session fails: each
    /// failed write aborts the active run, which then reports why it stopped. A run started
    /// while the store fails ends as soon as its first entry cannot be saved either; once a
    /// write succeeds again, runs go on. Call once, right after creating the session.
    pub fn watch_store(&self, health: &crate::kernel::recorder::StoreHealth) {
        if self.inner.store_health.set(health.clone()).is_err() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        health.on_fault(move || {
            if let Some(inner) = weak.upgrade() {
                inner.abort();
            }
        });
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> EventRx {
        self.inner.bus.subscribe()
    }

    /// Announces the model and thinking level (the session store records them).
    pub fn announce_model(&self) {
        let (provider, level) = {
            let state = self.inner.lock();
            (state.provider.clone(), state.thinking_level.clone())
        };
        self.inner.bus.publish(EventPayload::ModelChanged {
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
        });
        self.inner
            .bus
            .publish(EventPayload::ThinkingLevelChanged { level });
    }

    /// The model in use.
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.inner.provider()
    }

    /// Switches the model for the next model call. The thinking level is clamped to what the
    /// new model supports; both changes are published (and recorded in the session).
    pub fn set_model(&self, provider: Arc<dyn Provider>) {
        let (level, changed) = {
            let mut state = self.inner.lock();
            let level = provider.info().clamp_thinking(&state.thinking_level);
            let changed = level != state.thinking_level;
            state.provider = provider.clone();
            state.thinking_level = level.clone();
            (level, changed)
        };
        self.inner.bus.publish(EventPayload::ModelChanged {
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
        });
        if changed {
            self.inner
                .bus
                .publish(EventPayload::ThinkingLevelChanged { level });
        }
    }

    /// The thinking level in use.
    pub fn thinking_level(&self) -> String {
        self.inner.lock().thinking_level.clone()
    }

    /// Sets the thinking level, clamped to the model; returns the level now in use.
    pub fn set_thinking_level(&self, requested: &str) -> String {
        let level = {
            let mut state = self.inner.lock();
            let level = state.provider.info().clamp_thinking(requested);
            state.thinking_level = level.clone();
            level
        };
        self.inner.bus.publish(EventPayload::ThinkingLevelChanged {
            level: level.clone(),
        });
        level
    }

    /// The queue modes (steering, follow-up).
    pub fn queue_modes(&self) -> (QueueMode, QueueMode) {
        let state = self.inner.lock();
        (state.steering_mode, state.follow_up_mode)
    }

    pub fn set_steering_mode(&self, mode: QueueMode) {
        self.inner.lock().steering_mode = mode;
    }

    pub fn set_follow_up_mode(&self, mode: QueueMode) {
        self.inner.lock().follow_up_mode = mode;
    }

    /// A snapshot of the runtime state front ends report (`get_state`).
    pub fn status(&self) -> Status {
        let state = self.inner.lock();
        Status {
            running: state.abort.is_some() && !state.manual_compaction,
            compacting: state.compacting,
            auto_compaction: state.auto_compaction,
            auto_retry: state.auto_retry,
            message_count: state.messages.len(),
            pending_count: state.steering.len() + state.follow_up.len(),
        }
    }

    /// The last answer of the model (not a failed or aborted message).
    pub fn last_assistant_text(&self) -> Option<String> {
        let state = self.inner.lock();
        state.messages.iter().rev().find_map(|m| match m {
            Message::Assistant(a) if !a.is_failed() && !a.text().is_empty() => Some(a.text()),
            _ => None,
        })
    }

    /// Runs a shell command for the user (not the model): output chunks go to `chunks` as
    /// they arrive; the command is recorded in the session and, unless `exclude_from_context`,
    /// reaches the model with the next prompt. `abort` stops it (its process group is killed).
    pub async fn bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        chunks: mpsc::UnboundedSender<Vec<u8>>,
        abort: AbortSignal,
    ) -> BashExecution {
        let config = &self.inner.config;
        let mut record = bash::run_user(
            command,
            &config.cwd,
            &config.temp_dir,
            &config.tool_env,
            config.bash_timeout,
            abort,
            chunks,
        )
        .await;
        record.exclude_from_context = exclude_from_context;
        record.timestamp = self.inner.clock.now_ms();
        let mut state = self.inner.lock();
        if state.abort.is_some() {
            state.pending_bash.push(record.clone());
        } else {
            drop(state);
            self.inner.record_bash(record.clone());
        }
        record
    }

    /// Gives up a pending automatic retry: the run ends with the error that caused it.
    pub fn abort_retry(&self) {
        self.inner.retry_cancel.notify_waiters();
    }

    /// Names the session (recorded as a `session_info` entry).
    pub fn set_session_name(&self, name: String) {
        self.inner.bus.publish(EventPayload::SessionNamed { name });
    }

    /// Replaces the conversation with `history` ((entry id, message) pairs, as
    /// `Store::context_entries` returns them): a rewind moved the session's leaf.
    pub fn replace_history(&self, history: Vec<(String, Message)>) {
        let (ids, messages) = history.into_iter().unzip();
        let mut state = self.inner.lock();
        state.ids = ids;
        state.messages = messages;
    }

    /// The snapshot of the session's last checkpoint (read from its file): what the next
    /// checkpoint lists its changed files against.
    pub fn resume_checkpoints(&self, last: Option<String>) {
        self.inner.lock().checkpoint.last = last;
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
        self.prompt_input(UserInput::text(text))
    }

    /// Starts a run with a message that may carry images.
    pub fn prompt_input(&self, input: UserInput) -> Result<JoinHandle<RunOutcome>, PromptError> {
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
            crate::kernel::turn::run(&inner, input, signal).await
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

    /// The `source` the `SessionStart` hooks get before the next run (Claude's word, e.g.
    /// `clear` for a session that replaced a cleared one).
    pub fn start_hooks_as(&self, source: &'static str) {
        self.inner.lock().session_start = Some(source);
    }

    /// Fires the `SessionEnd` hooks (`reason`: Claude's word, e.g. `prompt_input_exit`,
    /// `clear`, `other`) and waits for them; nothing when none is configured.
    pub async fn end_hooks(&self, reason: &str) {
        let fields = serde_json::json!({ "reason": reason });
        let never = AbortSignal::never();
        let hook = crate::kernel::hooks::HookEvent::SessionEnd;
        crate::kernel::turn::hooked::fire(&self.inner, hook, &[reason], fields, &never).await;
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
            state.manual_compaction = true;
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
        self.inner.finish_activity();
        result
    }

    /// Queues a steering message.
    pub fn steer(&self, text: String) {
        self.steer_input(UserInput::text(text));
    }

    /// Queues a steering message that may carry images.
    pub fn steer_input(&self, input: UserInput) {
        let mut state = self.inner.lock();
        state.steering.push_back(input);
        self.inner.publish_queue(&state);
    }

    /// Queues a follow-up message.
    pub fn follow_up(&self, text: String) {
        self.follow_up_input(UserInput::text(text));
    }

    /// Queues a follow-up message that may carry images.
    pub fn follow_up_input(&self, input: UserInput) {
        let mut state = self.inner.lock();
        state.follow_up.push_back(input);
        self.inner.publish_queue(&state);
    }

    /// Aborts the active run, if any. Queues are kept.
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// Empties both queues and returns what was removed.
    pub fn clear_queue(&self) -> (Vec<String>, Vec<String>) {
        let mut state = self.inner.lock();
        let steering: Vec<String> = state.steering.drain(..).map(|m| m.text).collect();
        let follow_up: Vec<String> = state.follow_up.drain(..).map(|m| m.text).collect();
        self.inner.publish_queue(&state);
        (steering, follow_up)
    }

    /// Adds allow rules for the rest of the session (an "always" answer): `rules` as written,
    /// with where they came from, paths anchored at `root`. Rules that do not parse are left out.
    pub fn allow_always(&self, rules: &crate::kernel::policy::RuleList, root: &Path) {
        let (added, _) = crate::kernel::policy::Rules::build(&[], &[], rules, root, root);
        self.inner.lock().always.extend(added);
    }

    /// The permission mode in use.
    pub fn permission(&self) -> Permission {
        self.inner.lock().permission
    }

    /// Changes the permission mode for the calls to come (the TUI's Shift+Tab, ACP's modes)
    /// and publishes the change.
    pub fn set_permission(&self, permission: Permission) {
        self.inner.set_permission(permission);
    }

    /// The task list `todo_write` last wrote.
    pub fn todos(&self) -> Vec<crate::kernel::tool::todo::TodoItem> {
        self.inner.lock().todos.clone()
    }

    /// The list the session's file holds (a resumed session): the state, not news, so
    /// nothing is published.
    pub fn resume_todos(&self, todos: Vec<crate::kernel::tool::todo::TodoItem>) {
        self.inner.lock().todos = todos;
    }

    /// Takes over the permission mode and "always" rules of the session this one replaces.
    pub fn inherit_policy(&self, previous: &AgentSession) {
        let (always, permission, before_plan) = {
            let p = previous.inner.lock();
            (p.always.clone(), p.permission, p.before_plan)
        };
        let mut state = self.inner.lock();
        state.always = always;
        state.permission = permission;
        state.before_plan = before_plan;
    }

    /// The permission rules in force: the config's, then the session's "always" answers.
    pub fn rules(&self) -> Vec<(&'static str, String, String)> {
        let own = |e: Vec<(&'static str, &str, &str)>| {
            e.into_iter()
                .map(|(l, r, o)| (l, r.to_string(), o.to_string()))
                .collect::<Vec<_>>()
        };
        let mut out = own(self.inner.config.rules.entries());
        out.extend(own(self.inner.lock().always.entries()));
        out
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
