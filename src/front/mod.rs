//! Front ends: projections of the kernel's event bus onto one kind of output. Each has a pure
//! part (event → lines) tested without I/O and a thin writer that goes through `Output`.

pub mod daemon;
pub mod json;
pub mod print;
pub mod rpc;
pub mod signals;
pub mod tui;

use crate::exit::Exit;
use crate::kernel::event::{Event, EventPayload, RunOutcome};
use crate::kernel::message::{Message, Usage};
use crate::output::{Output, StdoutClosed};

/// What the print and JSON front ends report at the end of a run.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Text of the last assistant message.
    pub final_text: String,
    /// Summed usage of every assistant message and compaction summary.
    pub usage: Usage,
    /// The kernel's verdict, once settled.
    pub outcome: Option<RunOutcome>,
    /// stdout failed (not a closed pipe) and the run was stopped: the failure's message. The
    /// run then ends as `failed` with error kind `output_write`.
    pub output_error: Option<String>,
}

impl RunSummary {
    /// Folds one event in.
    pub fn observe(&mut self, event: &Event) {
        match &event.payload {
            EventPayload::MessageFinished {
                message: Message::Assistant(m),
                ..
            } => {
                self.usage.add(&m.usage);
                if !m.is_failed() {
                    self.final_text = m.text();
                }
            }
            // Summarising for compaction is a model call too: its tokens are spent.
            EventPayload::CompactionFinished {
                result: Some(r), ..
            } => self.usage.add(&r.usage),
            EventPayload::AgentSettled { outcome, .. } => self.outcome = Some(outcome.clone()),
            _ => {}
        }
    }

    /// The error `kind` and message for a run that did not succeed.
    pub fn error(&self, exit: Exit) -> Option<(String, String)> {
        if let Exit::Signal(n) = exit {
            let name = match n {
                crate::exit::SIGINT => "SIGINT",
                crate::exit::SIGTERM => "SIGTERM",
                crate::exit::SIGHUP => "SIGHUP",
                _ => "SIGPIPE",
            };
            return Some(("interrupted".into(), format!("interrupted by {name}")));
        }
        if let Some(message) = &self.output_error {
            return Some(("output_write".into(), message.clone()));
        }
        match self.outcome.as_ref()? {
            RunOutcome::Completed => None,
            RunOutcome::Failed { kind, message } => Some((kind.clone(), message.clone())),
            RunOutcome::TurnLimit { max_turns } => Some((
                "turn_limit".into(),
                format!("the turn limit (--max-turns {max_turns}) was reached before the model finished"),
            )),
            RunOutcome::Blocked { tool_name, call_id } => Some((
                "blocked".into(),
                format!(
                    "tool call `{tool_name}` ({call_id}) needs approval, and this headless run cannot ask; rerun with --permission auto to allow it"
                ),
            )),
            RunOutcome::Aborted => Some(("aborted".into(), "the run was aborted".into())),
        }
    }
}

/// A front end fed every event of the bus.
pub trait Projector {
    /// Writes what this event means for this front end.
    fn on_event(&mut self, event: &Event, out: &mut Output) -> Result<(), StdoutClosed>;
    /// Writes the end of the run (final answer, result line, error).
    fn finish(&mut self, summary: &RunSummary, exit: Exit, duration_ms: u64, out: &mut Output);
}
