//! The daemon mechanism's one error: a sentence naming the path and what is wrong, an
//! optional hint saying what to do, and a kind for the callers that act on it (no daemon
//! listens; another user's process listens). At startup it is a configuration error (exit 3,
//! `crate::error`).

use std::fmt;
use std::io;
use std::path::Path;

/// What went wrong with the daemon's socket, directory or locks, for a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonError {
    /// One sentence naming the path and the problem.
    pub message: String,
    /// What the user can do about it, when there is something.
    pub hint: Option<String>,
    /// What kind of failure it is, for a caller that acts on it.
    pub kind: DaemonErrorKind,
}

/// The failures a caller tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonErrorKind {
    /// Anything else (a directory that fails its checks, an I/O error, a refused hello, …).
    Other,
    /// Nothing listens on the socket (no directory, no file, or a stale one).
    NotListening,
    /// A daemon listens but its backlog is full.
    Busy,
    /// The process listening on the socket runs as another uid: nothing was sent to it.
    ForeignPeer {
        /// The peer's uid (SO_PEERCRED).
        uid: u32,
    },
}

impl DaemonError {
    pub fn new(message: impl Into<String>) -> Self {
        DaemonError {
            message: message.into(),
            hint: None,
            kind: DaemonErrorKind::Other,
        }
    }

    pub fn with_kind(mut self, kind: DaemonErrorKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// `cannot WHAT PATH: OS error`.
    pub fn io(what: &str, path: &Path, err: &io::Error) -> Self {
        Self::new(format!("cannot {what} {}: {err}", path.display()))
    }
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DaemonError {}
