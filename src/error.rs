//! Startup errors: a kind that picks the exit code, a message, causes and hints, rendered the
//! way jj renders them (`Error: …`, `Caused by: …`, `Hint: …`).

use crate::exit::Exit;

/// What went wrong before (or instead of) a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Usage,
    Config,
    Internal,
    /// Ended by signal n before the run began (e.g. while stdin was read).
    Interrupted(i32),
}

/// A startup error with hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupError {
    pub kind: ErrorKind,
    pub message: String,
    pub causes: Vec<String>,
    pub hints: Vec<String>,
}

impl StartupError {
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Config, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// Signal `n` arrived; `message` says what keel was doing.
    pub fn interrupted(n: i32, message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Interrupted(n), message)
    }

    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        StartupError {
            kind,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
        }
    }

    pub fn cause(mut self, cause: impl Into<String>) -> Self {
        self.causes.push(cause.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    pub fn exit(&self) -> Exit {
        match self.kind {
            ErrorKind::Usage => Exit::Usage,
            ErrorKind::Config => Exit::Config,
            ErrorKind::Internal => Exit::Internal,
            ErrorKind::Interrupted(n) => Exit::Signal(n),
        }
    }

    /// The machine word for the JSON result's `error.kind`.
    pub fn kind_word(&self) -> &'static str {
        match self.kind {
            ErrorKind::Usage => "usage",
            ErrorKind::Config => "config_error",
            ErrorKind::Internal => "internal",
            ErrorKind::Interrupted(_) => "interrupted",
        }
    }

    /// The multi-line text for stderr.
    pub fn render(&self) -> String {
        let mut out = format!("Error: {}\n", self.message);
        for c in &self.causes {
            out.push_str(&format!("Caused by: {c}\n"));
        }
        for h in &self.hints {
            out.push_str(&format!("Hint: {h}\n"));
        }
        out
    }
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartupError {}
