//! Why a command sent on a link got no answer: a kind a front end acts on, and the text it
//! shows (pi's error text when the session answered with one, byte for byte).

use std::fmt;

use crate::host::error::{CommandError, CommandErrorKind};
use crate::wire::jsonrpc::{self as j, ErrorObject};

/// What kind of failure a command met on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkErrorKind {
    /// The session refused the command or it failed (pi's error text).
    Refused,
    /// The session serves no command or method of that name.
    UnknownCommand,
    /// The daemon no longer serves the session the command named (-32012).
    UnknownSession,
    /// The connection to the daemon is closed, or the session in this process has ended.
    Closed,
    /// The answer does not decode as the call's result.
    Malformed,
}

/// A command's failure: its kind and the text to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkError {
    pub kind: LinkErrorKind,
    pub message: String,
}

impl LinkError {
    pub fn new(kind: LinkErrorKind, message: impl Into<String>) -> Self {
        LinkError {
            kind,
            message: message.into(),
        }
    }

    /// The daemon connection is gone.
    pub fn closed() -> Self {
        Self::new(LinkErrorKind::Closed, "the daemon connection is closed")
    }

    /// An error object the daemon answered with.
    pub fn from_daemon(e: ErrorObject) -> Self {
        let kind = match e.code {
            j::METHOD_NOT_FOUND => LinkErrorKind::UnknownCommand,
            j::UNKNOWN_SESSION => LinkErrorKind::UnknownSession,
            _ => LinkErrorKind::Refused,
        };
        Self::new(kind, e.message)
    }
}

impl From<CommandError> for LinkError {
    fn from(e: CommandError) -> Self {
        let kind = match e.kind {
            CommandErrorKind::UnknownCommand => LinkErrorKind::UnknownCommand,
            CommandErrorKind::Ended => LinkErrorKind::Closed,
            _ => LinkErrorKind::Refused,
        };
        Self::new(kind, e.message)
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LinkError {}
