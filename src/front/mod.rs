//! Front ends: print, JSON, RPC, the TUI and ACP, each a projection of a session's wire events
//! onto one kind of output (a pure part, event → lines, tested without I/O, and a thin writer
//! that goes through `Output`), and the client side of the daemon they share (`client`, `link`:
//! a session in this process or in the daemon; `daemon`: what `keel daemon status|ps|attach`
//! show).

pub mod acp;
pub mod client;
pub mod daemon;
pub mod export;
pub mod fact;
pub mod follow;
pub mod install;
pub mod json;
pub mod print;
pub mod rpc;
pub mod run;
pub mod stdin;
pub mod trust;
pub mod tui;

use crate::exit::Exit;
use crate::kernel::message::{Message, Usage};
use crate::output::{Output, StdoutClosed};
use crate::wire::events::{Outcome, SettledError};
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
    /// Summed usage of every assistant message and compaction summary.
    pub usage: Usage,
    /// The run's verdict, once settled.
    pub settled: Option<Settled>,
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
            Fact::AgentSettled { outcome, error, .. } => {
                self.settled = Some(Settled {
                    outcome: outcome.clone(),
                    error: error.clone(),
                })
            }
            _ => {}
        }
    }

    /// The exit the settled run calls for (`None` before it settled).
    pub fn exit(&self) -> Option<Exit> {
        self.settled.as_ref().map(|s| exit_for(&s.outcome))
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
        let e = self.settled.as_ref()?.error.as_ref()?;
        Some((e.kind.to_string(), e.message.clone()))
    }
}

/// The exit for a run that settled with `outcome` (`agent_settled`'s word).
fn exit_for(outcome: &Outcome) -> Exit {
    match outcome {
        Outcome::Completed => Exit::Success,
        Outcome::TurnLimit => Exit::TurnLimit,
        Outcome::Blocked => Exit::Blocked,
        // An abort without a signal (e.g. stdout closed) is reported as a failure.
        Outcome::Failed | Outcome::Aborted => Exit::Failed,
        Outcome::Other(_) => Exit::Internal,
    }
}

/// A front end fed the wire events of a run.
pub trait Projector {
    /// Whether it writes every wire line (JSON mode), or only acts on [`Fact`]s (print mode).
    fn every_line(&self) -> bool;
    /// Writes what this wire line (compact JSON, no newline) means for this front end.
    fn on_line(
        &mut self,
        line: &str,
        fact: Option<&Fact>,
        out: &mut Output,
    ) -> Result<(), StdoutClosed>;
    /// Writes the end of the run (final answer, result line, error).
    fn finish(&mut self, summary: &RunSummary, exit: Exit, duration_ms: u64, out: &mut Output);
}

/// What feeding a line did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fed {
    /// The run has settled.
    pub settled: bool,
    /// stdout took no more bytes.
    pub write_failed: bool,
}

impl std::ops::BitOrAssign for Fed {
    fn bitor_assign(&mut self, other: Fed) {
        self.settled |= other.settled;
        self.write_failed |= other.write_failed;
    }
}

/// Feeds one wire line of type `kind` to the summary and (while stdout takes bytes) the
/// projector.
pub fn feed_line(
    kind: &str,
    line: &str,
    projector: &mut dyn Projector,
    summary: &mut RunSummary,
    out: &mut Output,
) -> Fed {
    let fact = fact::parse(kind, line);
    if let Some(f) = &fact {
        summary.observe(f);
    }
    let write_failed =
        !out.is_stdout_closed() && projector.on_line(line, fact.as_ref(), out).is_err();
    Fed {
        settled: kind == "agent_settled",
        write_failed,
    }
}
