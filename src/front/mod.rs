//! Front ends: print, JSON, RPC, the TUI and ACP, each a projection of a session's wire events
//! onto one kind of output (a pure part, event → lines, tested without I/O, and a thin writer
//! that goes through `Output`), and the client side of the daemon they share (`client`, `link`:
//! a session in this process or in the daemon; `daemon`: what `keel daemon status|ps|attach`
//! show).

pub mod acp;
pub mod client;
pub mod daemon;
pub mod export;
pub mod follow;
pub mod install;
pub mod invocation;
pub mod json;
pub mod print;
pub mod rpc;
pub mod run;
pub mod stdin;
pub mod trust;
pub mod tui;

use crate::exit::Exit;
use crate::output::{Output, StdoutClosed};
pub use crate::report::{fact, RunSummary, Settled};
use fact::Fact;

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
