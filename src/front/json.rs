//! JSON mode: stdout carries only JSONL: the session header first, then every wire event, then
//! exactly one `result` line. Logs and diagnostics go to stderr.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::fact::Fact;
use super::{Projector, RunSummary};
use crate::exit::Exit;
use crate::kernel::event::Event;
use crate::kernel::session::SessionHeader;
use crate::output::{Output, StdoutClosed};
use crate::wire::events::{wire_events, SessionLine};

/// The JSON-mode projector.
#[derive(Debug, Default)]
pub struct JsonProjector {
    /// The session id for the result line (None before a session exists).
    pub session_id: Option<String>,
    buf: Vec<u8>,
}

impl JsonProjector {
    pub fn new(session_id: Option<String>) -> Self {
        JsonProjector {
            session_id,
            buf: Vec::with_capacity(4096),
        }
    }
}

/// The JSONL lines for one event (pure; each ends with `\n`).
pub fn lines(event: &Event) -> Vec<String> {
    wire_events(event)
        .iter()
        .filter_map(|w| serde_json::to_string(w).ok())
        .map(|mut s| {
            s.push('\n');
            s
        })
        .collect()
}

/// The header line (`worktree`: the path and branch of the session's worktree, if any).
pub fn header_line(h: &SessionHeader, worktree: Option<&(String, String)>) -> String {
    let line = SessionLine {
        kind: "session",
        version: 3,
        id: &h.id,
        timestamp: &h.timestamp,
        cwd: &h.cwd,
        parent_session: h.parent_session.as_deref(),
        worktree: worktree.map(|w| w.0.as_str()),
        branch: worktree.map(|w| w.1.as_str()),
    };
    let mut s = serde_json::to_string(&line).unwrap_or_default();
    s.push('\n');
    s
}

pub use crate::report::result_line;

impl Projector for JsonProjector {
    fn every_line(&self) -> bool {
        true
    }

    fn on_line(
        &mut self,
        line: &str,
        _fact: Option<&Fact>,
        out: &mut Output,
    ) -> Result<(), StdoutClosed> {
        self.buf.clear();
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
        out.out(&self.buf)
    }

    fn finish(&mut self, summary: &RunSummary, exit: Exit, duration_ms: u64, out: &mut Output) {
        let line = result_line(summary, exit, self.session_id.as_deref(), duration_ms, None);
        let _ = out.out(line.as_bytes()).and_then(|_| out.flush());
        if let Some((_, message)) = summary.error(exit) {
            if exit != Exit::Signal(crate::exit::SIGPIPE) {
                out.err(&format!("Error: {message}\n"));
            }
        }
    }
}
