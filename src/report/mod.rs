//! What a print or JSON run reports, however it ran (in this process, through the daemon, or
//! as the daemon's scheduled task): the facts read from its wire events (`fact`), the summary
//! folded from them, the exit its verdict calls for, and JSON mode's `result` line. Between the
//! wire and its readers: the front ends and the daemon's scheduler both use it.

pub mod fact;

use crate::exit::Exit;
use crate::kernel::message::{Message, Usage};
use crate::kernel::subagent::SubagentDetails;
use crate::wire::events::{ErrorKind, Outcome, ResultError, ResultLine, SettledError};
use fact::Fact;

/// How a run settled, as its `agent_settled` event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// How it ended.
    pub outcome: Outcome,
    /// Unless completed: the error's kind and message.
    pub error: Option<SettledError>,
}

/// What the print and JSON front ends report at the end of a run, folded from its wire events.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Text of the last assistant message.
    pub final_text: String,
    /// Summed usage of every assistant message and compaction summary, and of the subagents
    /// the run started (and theirs), as their `task` results report it.
    pub usage: Usage,
    /// The run's verdict, once settled.
    pub settled: Option<Settled>,
    /// The final answer as JSON, when the run had an output schema (`--output-schema`).
    pub structured_output: Option<serde_json::Value>,
    /// stdout failed (not a closed pipe) and the run was stopped: the failure's message. The
    /// run then ends as `failed` with error kind `output_write`.
    pub output_error: Option<String>,
}

impl RunSummary {
    /// Folds one fact in.
    pub fn observe(&mut self, fact: &Fact) {
        match fact {
            Fact::MessageEnd {
                message: Message::Assistant(m),
            } => {
                self.usage.add(&m.usage);
                if !m.is_failed() {
                    self.final_text = m.text();
                }
            }
            // Summarising for compaction is a model call too: its tokens are spent.
            Fact::CompactionEnd {
                result: Some(r), ..
            } => self.usage.add(&r.usage),
            // A subagent's calls are the run's too.
            Fact::ToolExecutionEnd {
                tool_name, result, ..
            } => {
                let details = result.details.as_deref();
                if let Some(u) = SubagentDetails::usage_of(tool_name, details) {
                    self.usage.add(&u);
                }
            }
            Fact::AgentSettled {
                outcome,
                error,
                structured_output,
                ..
            } => {
                self.settled = Some(Settled {
                    outcome: outcome.clone(),
                    error: error.clone(),
                });
                self.structured_output = structured_output.clone();
            }
            _ => {}
        }
    }

    /// The exit the settled run calls for (`None` before it settled).
    pub fn exit(&self) -> Option<Exit> {
        self.settled.as_ref().map(|s| exit_for(&s.outcome))
    }

    /// The error `kind` and message for a run that did not succeed.
    pub fn error(&self, exit: Exit) -> Option<(ErrorKind, String)> {
        if let Exit::Signal(n) = exit {
            let name = match n {
                crate::exit::SIGINT => "SIGINT",
                crate::exit::SIGTERM => "SIGTERM",
                crate::exit::SIGHUP => "SIGHUP",
                _ => "SIGPIPE",
            };
            return Some((ErrorKind::Interrupted, format!("interrupted by {name}")));
        }
        if let Some(message) = &self.output_error {
            return Some((ErrorKind::OutputWrite, message.clone()));
        }
        let e = self.settled.as_ref()?.error.as_ref()?;
        Some((e.kind.clone(), e.message.clone()))
    }
}

/// The exit for a run that settled with `outcome` (`agent_settled`'s word).
fn exit_for(outcome: &Outcome) -> Exit {
    match outcome {
        Outcome::Completed => Exit::Success,
        Outcome::TurnLimit => Exit::TurnLimit,
        Outcome::Blocked => Exit::Blocked,
        Outcome::Budget => Exit::Budget,
        // An abort without a signal (e.g. stdout closed) is reported as a failure.
        Outcome::Failed | Outcome::Aborted => Exit::Failed,
        Outcome::Other(_) => Exit::Internal,
    }
}

/// The final `result` line.
pub fn result_line(
    summary: &RunSummary,
    exit: Exit,
    session_id: Option<&str>,
    duration_ms: u64,
    error: Option<(&str, &str)>,
) -> String {
    let derived = summary.error(exit);
    let error = error.or(derived.as_ref().map(|(k, m)| (k.as_str(), m.as_str())));
    let line = ResultLine {
        kind: "result",
        outcome: exit.outcome(),
        exit_code: exit.code(),
        session_id,
        final_text: &summary.final_text,
        usage: &summary.usage,
        duration_ms,
        error: error.map(|(kind, message)| ResultError { kind, message }),
        structured_output: summary.structured_output.as_ref(),
    };
    let mut s = serde_json::to_string(&line).unwrap_or_default();
    s.push('\n');
    s
}
