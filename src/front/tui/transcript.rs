//! The TUI's model of the conversation: folds the public events (`wire::events::WireEvent`, the
//! wire vocabulary) into finished history cells (written once into the terminal's scrollback) and
//! the live state still changing (the streaming line, thinking, running tools, queue, run
//! status). Pure: no terminal, no kernel calls, no kernel events; a stream from the daemon and
//! one made in this process look the same to it.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::Value;

mod children;
mod cost;
mod explore;
mod lines;
mod notices;
mod retry;
mod shell;
pub use children::ChildRef;
pub use shell::{RunningShell, LIVE_OUTPUT_BYTES};

use super::markdown::{self, MarkdownStream, MdLine};
use super::replay::Replayed;
use crate::kernel::event::CompactionResult;
use crate::kernel::message::{user_text, Content, Message, StopReason, Usage};
use crate::kernel::tool::bash::BashExecution;
use crate::wire::events::{AssistantMessageEvent as Delta, WireEvent};
use crate::wire::events::{CompactionReason, Outcome, SettledError};

/// A finished piece of the transcript, laid out when it is written (at the width of that
/// moment).
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryCell {
    /// A user message as the model received it.
    User(String),
    /// Committed lines of an assistant answer.
    Markdown(Vec<MdLine>),
    /// A finished thinking block.
    Thinking(String),
    /// A finished tool call.
    Tool(FinishedTool),
    /// A run of consecutive exploration calls (read, grep, find, ls), at least two.
    Explored(Vec<FinishedTool>),
    /// A shell command the user ran (`!cmd`), and how long it took (0: not known).
    Bash(BashExecution, u64),
    /// Something went wrong (red).
    Error(String),
    /// Something the user should know (dim).
    Notice(String),
}

/// A tool call with its result.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedTool {
    pub name: String,
    pub args: Value,
    pub text: String,
    pub details: Option<Value>,
    pub is_error: bool,
    pub duration_ms: u64,
}

/// A tool call that has started and not finished.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningTool {
    pub call_id: String,
    pub name: String,
    pub args: Value,
    pub partial: Option<String>,
    /// The latest update's details (a `task` call's child: its id and current step).
    pub details: Option<Value>,
    pub started_ms: i64,
    pub awaiting_approval: bool,
}

/// How history cells are laid out.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Layout {
    /// Thinking blocks in full (dim) instead of one summary line.
    pub show_thinking: bool,
    /// Tool cells with longer bodies.
    pub expand_tools: bool,
    /// Tool cells with their whole output (the transcript pager).
    pub full: bool,
}

/// What the run is doing, for the live status row.
#[derive(Debug, Clone, PartialEq)]
pub enum Activity {
    Idle,
    Working {
        since_ms: i64,
    },
    Retrying {
        attempt: u32,
        max: u32,
        until_ms: i64,
        error: String,
    },
    Compacting {
        since_ms: i64,
    },
}

/// Token and cost totals for the status line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub usage: Usage,
    /// Tokens in the context after the latest answer (input + cache + output).
    pub context_tokens: u64,
    /// Answers the model finished (not failed): with all of them reporting no tokens, the
    /// server does not report usage.
    pub answers: u64,
}

impl Totals {
    /// Answers came and none reported a token (a server that does not report usage: its
    /// `↑0 ↓0 · ctx 0%` would be false).
    pub fn unreported(&self) -> bool {
        let u = &self.usage;
        self.answers > 0 && u.input + u.output + u.cache_read + u.cache_write == 0
    }

    fn answered(&mut self, a: &crate::kernel::message::AssistantMessage) {
        self.usage.add(&a.usage);
        if a.stop_reason != StopReason::Error && a.stop_reason != StopReason::Aborted {
            self.answers += 1;
        }
    }
}

/// The conversation as the TUI sees it.
#[derive(Debug, Default)]
pub struct Transcript {
    /// Finished cells not yet written to the terminal.
    pending: VecDeque<HistoryCell>,
    /// The answer being streamed (text block), if any.
    stream: Option<MarkdownStream>,
    /// The thinking being streamed, if any.
    thinking: Option<String>,
    /// Tool calls the model is still writing (name), by content index.
    preparing: Vec<(usize, String)>,
    pub running: Vec<RunningTool>,
    pub steering: Vec<String>,
    pub follow_up: Vec<String>,
    pub activity: Option<Activity>,
    pub totals: Totals,
    pub model: String,
    pub thinking_level: String,
    pub session_name: Option<String>,
    /// The task list (`todo_update`, or `get_state`'s on resume), drawn above the editor.
    pub todos: Vec<crate::kernel::tool::todo::TodoItem>,
    /// The subagents this view has seen start, oldest first (Ctrl+G opens the latest's
    /// transcript).
    pub children: Vec<ChildRef>,
    /// A failed answer already showed this run's error.
    error_shown: bool,
    /// When the user's prompt started running (kept across retries and compaction).
    run_since_ms: i64,
    /// The `!cmd` running, if any.
    shell: Option<RunningShell>,
    /// A failed answer's error, until it is known whether a retry follows.
    held_error: Option<String>,
    /// Finished exploration calls held to be committed as one cell, and where in `pending`
    /// they go.
    exploring: Vec<FinishedTool>,
    explore_at: usize,
    /// Why the prompt is being retried, and the attempt that comes.
    retry_error: Option<(String, u32)>,
    /// PreToolUse hook denials whose refused call has not finished yet.
    denials: Vec<notices::Denial>,
    /// The warnings shown (each is shown once).
    warned: std::collections::HashSet<String>,
}

impl Transcript {
    pub fn new() -> Self {
        Transcript::default()
    }

    /// Takes the finished cells not yet written.
    pub fn drain(&mut self) -> Vec<HistoryCell> {
        // Something came after the exploration calls held: they go before it.
        if !self.exploring.is_empty() && self.pending.len() > self.explore_at {
            self.flush_exploring();
        }
        self.explore_at = 0;
        self.pending.drain(..).collect()
    }

    /// Takes every finished cell, the exploration calls still held included (a replay that
    /// is shown whole, as the transcript pager shows it).
    pub fn finish(&mut self) -> Vec<HistoryCell> {
        if !self.exploring.is_empty() {
            self.flush_exploring();
        }
        self.explore_at = 0;
        self.pending.drain(..).collect()
    }

    /// Adds a cell of the front end's own (a notice, a command's answer); a warning already
    /// shown is not shown again.
    pub fn push(&mut self, cell: HistoryCell) {
        if !self.warned_before(&cell) {
            self.pending.push_back(cell);
        }
    }

    /// Whether the model is working (a run is active).
    pub fn is_running(&self) -> bool {
        !matches!(self.activity, None | Some(Activity::Idle))
    }

    /// The thinking text streamed so far, if a thinking block is open.
    pub fn live_thinking(&self) -> Option<&str> {
        self.thinking.as_deref()
    }

    /// The streamed answer's lines not committed yet: the unfinished line, a table being
    /// read (empty when none).
    pub fn live_lines(&self) -> Vec<MdLine> {
        self.stream
            .as_ref()
            .map(MarkdownStream::pending)
            .unwrap_or_default()
    }

    /// Whether an answer's text is streaming (its line keeps a row in the live area even while
    /// empty, so the rows under it do not jump at every committed line).
    pub fn streaming_text(&self) -> bool {
        self.stream.is_some()
    }

    /// The user answered the approval of `call_id` at `at_ms`: its time starts now.
    pub fn approval_answered(&mut self, call_id: &str, at_ms: i64) {
        if let Some(t) = self.running.iter_mut().find(|t| t.call_id == call_id) {
            t.awaiting_approval = false;
            t.started_ms = at_ms;
        }
    }

    /// Tool calls the model is still writing.
    pub fn preparing(&self) -> impl Iterator<Item = &str> {
        self.preparing.iter().map(|(_, n)| n.as_str())
    }

    /// Replays a stored conversation (a resumed session) as finished cells.
    pub fn replay(&mut self, replayed: &[Replayed]) {
        let mut calls: Vec<(String, String, Value)> = Vec::new();
        for r in replayed {
            let m = match r {
                Replayed::Message(m) => m,
                Replayed::Compaction { tokens_before } => {
                    self.pending.push_back(HistoryCell::Notice(format!(
                        "⇣ compacted: ~{tokens_before} tokens of earlier conversation summarised"
                    )));
                    continue;
                }
                Replayed::Bash(b) => {
                    self.pending.push_back(HistoryCell::Bash(b.clone(), 0));
                    continue;
                }
            };
            match m {
                Message::User(u) => self.user_message(user_text(u)),
                Message::Assistant(a) => {
                    for c in &a.content {
                        match c {
                            Content::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                                self.pending
                                    .push_back(HistoryCell::Thinking(thinking.clone()))
                            }
                            Content::Text { text } if !text.trim().is_empty() => self
                                .pending
                                .push_back(HistoryCell::Markdown(markdown::render(text))),
                            _ => {}
                        }
                    }
                    calls = a.tool_calls();
                    if let (StopReason::Error, Some(e)) = (&a.stop_reason, &a.error_message) {
                        self.pending.push_back(HistoryCell::Error(e.clone()));
                    }
                    self.totals.answered(a);
                    self.totals.context_tokens = context_tokens(&a.usage);
                }
                Message::ToolResult(r) => {
                    let args = calls
                        .iter()
                        .find(|(id, _, _)| *id == r.tool_call_id)
                        .map(|(_, _, a)| a.clone())
                        .unwrap_or(Value::Null);
                    self.tool_finished(FinishedTool {
                        name: r.tool_name.clone(),
                        args,
                        text: crate::kernel::message::joined_text(&r.content),
                        details: r.details.clone(),
                        is_error: r.is_error,
                        duration_ms: r.duration_ms.unwrap_or(0),
                    });
                }
            }
        }
        self.flush_exploring();
    }

    /// Folds one public event in; `at_ms` is when it happened (in-process, the kernel's
    /// stamp; from the daemon, when it arrived), for the run and tool timers.
    pub fn on_event(&mut self, event: &WireEvent, at_ms: i64) {
        use WireEvent as P;
        match event {
            P::ModelChanged { model, .. } => self.model = model.to_string(),
            P::ThinkingLevelChanged { level } => self.thinking_level = level.to_string(),
            P::AgentStart => {
                // A retry starts a new run of the same prompt: its time keeps counting.
                if !self.is_running() {
                    self.run_since_ms = at_ms;
                    self.error_shown = false;
                }
                self.activity = Some(self.working());
            }
            P::AgentEnd { .. } | P::TurnStart | P::TurnEnd { .. } | P::Other => {}
            // Background jobs: the TUI's `/jobs` reads them (not in the transcript).
            P::JobStarted { .. } | P::JobOutput { .. } | P::JobEnded { .. } => {}
            P::AgentSettled {
                outcome,
                error,
                max_turns,
                tool_name,
                ..
            } => self.settled(outcome, error.as_ref(), *max_turns, tool_name.as_deref()),
            P::MessageStart { message } => self.message_started(message),
            P::MessageUpdate {
                assistant_message_event,
                ..
            } => self.delta(assistant_message_event),
            P::MessageEnd { message } => self.message_finished(message),
            P::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.preparing.clear();
                self.running.push(RunningTool {
                    call_id: tool_call_id.to_string(),
                    name: tool_name.to_string(),
                    args: args.clone().into_owned(),
                    partial: None,
                    details: None,
                    started_ms: at_ms,
                    awaiting_approval: false,
                });
            }
            P::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                if let Some(t) = self.running.iter_mut().find(|t| t.call_id == *tool_call_id) {
                    t.partial = Some(partial_result.text());
                    t.details = partial_result.details.clone().map(Cow::into_owned);
                    t.awaiting_approval = false;
                    children::seen(&mut self.children, t);
                }
            }
            P::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
            } => {
                let args = match self.running.iter().position(|t| t.call_id == *tool_call_id) {
                    Some(i) => self.running.remove(i).args,
                    None => Value::Null,
                };
                let mut tool = FinishedTool {
                    name: tool_name.to_string(),
                    args,
                    text: result.text(),
                    details: result.details.clone().map(Cow::into_owned),
                    is_error: *is_error,
                    duration_ms: *duration_ms,
                };
                self.denied_by_hook(&mut tool);
                self.tool_finished(tool);
            }
            P::ExtensionUiRequest(r) => self.dialog(r),
            // The view takes the question down.
            P::DialogResolved { .. } => {}
            // The client makes the window read only (`reconnect::session_ended`).
            P::SessionEnded { .. } => {}
            P::QueueUpdate {
                steering,
                follow_up,
            } => {
                self.steering = steering.to_vec();
                self.follow_up = follow_up.to_vec();
            }
            P::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
            } => {
                let until = at_ms + *delay_ms as i64;
                self.retry_scheduled(*attempt, *max_attempts, until, error_message);
            }
            P::AutoRetryEnd {
                success,
                attempt,
                final_error,
            } => self.retry_ended(*success, *attempt, final_error.as_deref()),
            P::BashExecutionUpdate { delta, .. } => self.shell_output(delta, at_ms),
            P::BashExecutionEnd(record) => self.shell_finished(record, at_ms),
            P::SessionInfoChanged { name } => self.session_name = Some(name.to_string()),
            P::HookStarted { .. } => {}
            P::SandboxViolation {
                reason, path, host, ..
            } => {
                let what = path.as_deref().or(host.as_deref());
                let line = crate::report::fact::violation_line(reason, what);
                self.pending.push_back(HistoryCell::Notice(line));
            }
            P::HookFinished {
                event,
                command,
                decision,
                reason,
                messages,
                ..
            } => self.hook_finished(
                event,
                command,
                decision.as_deref(),
                reason.as_deref(),
                messages,
            ),
            P::CheckpointWarning {
                skipped,
                error_message,
            } => self.checkpoint_warning(skipped, error_message.as_deref()),
            P::TodoUpdate { todos } => self.todos = todos.to_vec(),
            // The view keeps the mode (it is shown in the status line).
            P::PermissionModeChanged { .. } => {}
            P::CompactionStart { .. } => {
                self.activity = Some(Activity::Compacting { since_ms: at_ms });
            }
            P::CompactionEnd {
                reason,
                result,
                aborted,
                error_message,
                ..
            } => self.compaction_finished(
                reason,
                result.as_deref(),
                *aborted,
                error_message.as_deref(),
            ),
        }
    }

    /// How the run ended (`agent_settled`).
    fn settled(
        &mut self,
        outcome: &Outcome,
        error: Option<&SettledError>,
        max_turns: Option<u32>,
        tool_name: Option<&str>,
    ) {
        self.flush_stream();
        let error_text = || match error {
            Some(e) => format!("{}: {}", e.kind, e.message),
            None => format!("the run ended: {outcome}"),
        };
        match (outcome, max_turns, tool_name) {
            (Outcome::Completed, ..) => {}
            (Outcome::TurnLimit, Some(max_turns), _) => self.pending.push_back(
                HistoryCell::Notice(format!("stopped: the turn limit ({max_turns}) was reached")),
            ),
            (Outcome::Blocked, _, Some(tool_name)) => self.pending.push_back(HistoryCell::Notice(
                format!("stopped: `{tool_name}` needed an approval"),
            )),
            (Outcome::Aborted, ..) => self
                .pending
                .push_back(HistoryCell::Notice("⏹ interrupted".into())),
            // `failed`, or a verdict without the fields that name it.
            _ => {
                let held = self.take_held_error();
                if !self.error_shown {
                    let e = held.unwrap_or_else(error_text);
                    self.pending.push_back(HistoryCell::Error(e));
                    self.error_shown = true;
                }
            }
        }
        // An aborted or stopped run shows no error its answer had.
        self.take_held_error();
        self.flush_exploring();
        self.flush_denials();
        self.running.clear();
        self.preparing.clear();
        self.activity = Some(Activity::Idle);
    }

    fn message_started(&mut self, message: &Message) {
        match message {
            Message::User(u) => self.user_message(user_text(u)),
            Message::Assistant(_) => {
                if let Some(Activity::Retrying { .. }) = self.activity {
                    self.activity = Some(self.working());
                }
            }
            Message::ToolResult(_) => {}
        }
    }

    fn delta(&mut self, delta: &Delta) {
        match delta {
            Delta::TextStart { .. } => {
                self.flush_stream();
                self.stream = Some(MarkdownStream::new());
            }
            Delta::TextDelta { delta, .. } => {
                let stream = self.stream.get_or_insert_with(MarkdownStream::new);
                let lines = stream.push(delta);
                if !lines.is_empty() {
                    self.pending.push_back(HistoryCell::Markdown(lines));
                }
            }
            Delta::TextEnd { .. } => self.flush_stream(),
            Delta::ThinkingStart { .. } => self.thinking = Some(String::new()),
            Delta::ThinkingDelta { delta, .. } => self
                .thinking
                .get_or_insert_with(String::new)
                .push_str(delta),
            Delta::ThinkingEnd { content, .. } => {
                self.thinking = None;
                if !content.trim().is_empty() {
                    self.pending
                        .push_back(HistoryCell::Thinking(content.to_string()));
                }
            }
            Delta::ToolcallStart {
                content_index,
                tool_name,
                ..
            } => {
                self.flush_stream();
                self.preparing.push((*content_index, tool_name.to_string()));
            }
            Delta::ToolcallDelta { .. } | Delta::ToolcallEnd { .. } | Delta::Other => {}
        }
    }

    fn message_finished(&mut self, message: &Message) {
        let Message::Assistant(a) = message else {
            return;
        };
        self.flush_stream();
        if let Some(t) = self.thinking.take() {
            if !t.trim().is_empty() {
                self.pending.push_back(HistoryCell::Thinking(t));
            }
        }
        self.totals.answered(a);
        if a.usage.input + a.usage.output > 0 {
            self.totals.context_tokens = context_tokens(&a.usage);
        }
        if a.stop_reason == StopReason::Error {
            let e = a
                .error_message
                .as_deref()
                .unwrap_or("the model call failed");
            self.answer_failed(e);
        } else if a.stop_reason != StopReason::Aborted {
            self.answered();
        }
    }

    fn compaction_finished(
        &mut self,
        reason: &CompactionReason,
        result: Option<&CompactionResult>,
        aborted: bool,
        error: Option<&str>,
    ) {
        if let Some(r) = result {
            self.totals.usage.add(&r.usage);
            self.totals.context_tokens = r.estimated_tokens_after;
            self.pending.push_back(HistoryCell::Notice(format!(
                "⇣ compacted ({}): ~{} → ~{} tokens",
                match reason {
                    CompactionReason::Manual => "manual",
                    CompactionReason::Threshold => "context nearly full",
                    CompactionReason::Overflow => "context overflow",
                    CompactionReason::Other(other) => other,
                },
                r.tokens_before,
                r.estimated_tokens_after
            )));
        } else if aborted {
            self.pending
                .push_back(HistoryCell::Notice("compaction cancelled".into()));
        } else if let Some(e) = error {
            self.pending
                .push_back(HistoryCell::Error(format!("compaction failed: {e}")));
        }
        // A run that was compacting goes on working; a manual compaction leaves idle.
        self.activity = match reason {
            CompactionReason::Manual => Some(Activity::Idle),
            _ => Some(self.working()),
        };
    }

    /// Working on the current prompt, timed from when it started.
    fn working(&self) -> Activity {
        Activity::Working {
            since_ms: self.run_since_ms,
        }
    }

    /// Commits what is left of the streamed answer.
    fn flush_stream(&mut self) {
        if let Some(mut s) = self.stream.take() {
            let lines = s.finish();
            if !lines.is_empty() {
                self.pending.push_back(HistoryCell::Markdown(lines));
            }
        }
    }
}

fn context_tokens(u: &Usage) -> u64 {
    u.input + u.cache_read + u.cache_write + u.output
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::kernel::event::{AssistantDelta, Event, EventPayload, RunOutcome};
    use crate::kernel::message::AssistantMessage;
    use ratatui::text::Line;

    /// A kernel event as the controller feeds it: through its wire lines.
    fn feed(t: &mut Transcript, event: &Event) {
        for e in crate::front::tui::wire::events_for(event) {
            t.on_event(&e, event.ts);
        }
    }

    fn ev(payload: EventPayload) -> Event {
        Event {
            seq: 0,
            ts: 1_000,
            payload,
        }
    }

    fn text_of(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn delta(d: AssistantDelta) -> Event {
        ev(EventPayload::MessageDelta {
            usage: Usage::default(),
            delta: d,
        })
    }

    #[test]
    fn streamed_text_is_committed_a_full_line_at_a_time() {
        let mut t = Transcript::new();
        feed(&mut t, &ev(EventPayload::AgentStarted));
        feed(&mut t, &delta(AssistantDelta::TextStarted { index: 0 }));
        feed(
            &mut t,
            &delta(AssistantDelta::TextDelta {
                index: 0,
                delta: "# Title\nhalf a li".into(),
            }),
        );
        let cells = t.drain();
        assert_eq!(cells.len(), 1);
        let lines = cells[0].lines(40, Layout::default());
        assert_eq!(text_of(&lines), ["Title"]);
        let live = t.live_lines();
        assert_eq!(text_of(&live[0].rows(40)), ["half a li"]);
        feed(
            &mut t,
            &delta(AssistantDelta::TextDelta {
                index: 0,
                delta: "ne".into(),
            }),
        );
        assert!(t.drain().is_empty(), "no newline yet, nothing committed");
        feed(
            &mut t,
            &delta(AssistantDelta::TextFinished {
                index: 0,
                text: String::new(),
            }),
        );
        let cells = t.drain();
        assert_eq!(
            text_of(&cells[0].lines(40, Layout::default())),
            ["half a line"]
        );
        assert!(t.live_lines().is_empty());
    }

    #[test]
    fn a_retried_prompt_keeps_counting_from_its_first_start() {
        let mut t = Transcript::new();
        let at = |ts: i64, payload| Event {
            seq: 0,
            ts,
            payload,
        };
        feed(&mut t, &at(1_000, EventPayload::AgentStarted));
        feed(
            &mut t,
            &at(
                2_000,
                EventPayload::RetryScheduled {
                    attempt: 1,
                    max_attempts: 3,
                    delay_ms: 2_000,
                    error_message: "overloaded".into(),
                },
            ),
        );
        assert!(matches!(
            t.activity,
            Some(Activity::Retrying {
                until_ms: 4_000,
                ..
            })
        ));
        feed(&mut t, &at(4_000, EventPayload::AgentStarted));
        assert_eq!(t.activity, Some(Activity::Working { since_ms: 1_000 }));
    }

    #[test]
    fn failed_answer_shows_its_error_once() {
        let mut t = Transcript::new();
        feed(&mut t, &ev(EventPayload::AgentStarted));
        let m = AssistantMessage {
            content: vec![],
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: Usage::default(),
            stop_reason: StopReason::Error,
            error_message: Some("overloaded: try later".into()),
            duration_ms: None,
            timestamp: 0,
        };
        feed(
            &mut t,
            &ev(EventPayload::MessageFinished {
                message: Message::from(m),
                entry_id: "e".into(),
            }),
        );
        feed(
            &mut t,
            &ev(EventPayload::AgentSettled {
                aborted: false,
                outcome: RunOutcome::Failed {
                    kind: "overloaded".into(),
                    message: "try later".into(),
                },
                structured_output: None,
            }),
        );
        let cells = t.drain();
        assert_eq!(cells, [HistoryCell::Error("overloaded: try later".into())]);
        assert!(!t.is_running());
    }
}
