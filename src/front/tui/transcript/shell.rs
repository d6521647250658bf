//! A shell command the user runs (`!cmd`) while it runs: its streamed output (the host's
//! `bash_execution_update` deltas, the tail kept), shown live by the bash tool cell's code,
//! and its end (`bash_execution_end`) as a finished shell cell with its duration.

use super::{HistoryCell, Transcript};
use crate::kernel::tool::bash::BashExecution;

/// Bytes of a running shell command's output kept for the live cell (the tail; the finished
/// cell shows the host's record, and its full output file when it was cut).
pub const LIVE_OUTPUT_BYTES: usize = 64 * 1024;

/// A `!cmd` that has started and not finished.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningShell {
    /// Empty when it was started elsewhere (another window of a daemon's session).
    pub command: String,
    pub output: String,
    pub started_ms: i64,
}

impl Transcript {
    /// The user ran `command` at `at_ms` (its output streams in as `bash_execution_update`).
    pub fn shell_started(&mut self, command: &str, at_ms: i64) {
        self.shell = Some(RunningShell {
            command: command.to_string(),
            output: String::new(),
            started_ms: at_ms,
        });
    }

    /// The shell command did not run (the session refused it): nothing is running.
    pub fn shell_refused(&mut self) {
        self.shell = None;
    }

    /// The running shell command, if any.
    pub fn shell(&self) -> Option<&RunningShell> {
        self.shell.as_ref()
    }

    pub(super) fn shell_output(&mut self, delta: &str, at_ms: i64) {
        let shell = self.shell.get_or_insert_with(|| RunningShell {
            command: String::new(),
            output: String::new(),
            started_ms: at_ms,
        });
        shell.output.push_str(delta);
        if shell.output.len() > LIVE_OUTPUT_BYTES {
            let mut cut = shell.output.len() - LIVE_OUTPUT_BYTES;
            while !shell.output.is_char_boundary(cut) {
                cut += 1;
            }
            shell.output.drain(..cut);
        }
    }

    pub(super) fn shell_finished(&mut self, record: &BashExecution, at_ms: i64) {
        let duration_ms = match self.shell.take() {
            Some(s) => (at_ms - s.started_ms).max(0) as u64,
            None => 0,
        };
        self.pending
            .push_back(HistoryCell::Bash(record.clone(), duration_ms));
    }
}
