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

impl StartupError {
    /// The error as JSON (`{kind, message, causes, hints}`), for a daemon that reports a
    /// client's startup error: the client renders it and exits as it would have in-process.
    pub fn to_json(&self) -> serde_json::Value {
        let kind = match self.kind {
            ErrorKind::Interrupted(n) => format!("interrupted:{n}"),
            _ => self.kind_word().to_string(),
        };
        serde_json::json!({
            "kind": kind,
            "message": self.message,
            "causes": self.causes,
            "hints": self.hints,
        })
    }

    /// The error [`StartupError::to_json`] wrote (`None` for anything else).
    pub fn from_json(v: &serde_json::Value) -> Option<StartupError> {
        use crate::kernel::field::{self, Field};
        /// What `to_json` writes, read tolerantly: `kind` and `message` must be strings; a
        /// list that is not one reads as empty and keeps only its strings.
        #[derive(Default, serde::Deserialize)]
        #[serde(default)]
        struct Written {
            kind: Field<String>,
            message: Field<String>,
            causes: Field<Vec<Field<String>>>,
            hints: Field<Vec<Field<String>>>,
        }
        let w: Written = field::read(v);
        let kind = match w.kind.given()?.as_str() {
            "usage" => ErrorKind::Usage,
            "config_error" => ErrorKind::Config,
            "internal" => ErrorKind::Internal,
            other => ErrorKind::Interrupted(other.strip_prefix("interrupted:")?.parse().ok()?),
        };
        let list = |l: Field<Vec<Field<String>>>| -> Vec<String> {
            l.given()
                .unwrap_or_default()
                .into_iter()
                .filter_map(Field::given)
                .collect()
        };
        Some(StartupError {
            kind,
            message: w.message.given()?,
            causes: list(w.causes),
            hints: list(w.hints),
        })
    }
}

impl std::fmt::Display for StartupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartupError {}

impl From<crate::wire::socket::DaemonError> for StartupError {
    fn from(e: crate::wire::socket::DaemonError) -> Self {
        let err = StartupError::config(e.message);
        match e.hint {
            Some(hint) => err.hint(hint),
            None => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_survives_the_trip_through_json() {
        for e in [
            StartupError::usage("no prompt").hint("pass one"),
            StartupError::config("no key").cause("env").hint("set it"),
            StartupError::internal("bug"),
            StartupError::interrupted(15, "while reading stdin"),
        ] {
            assert_eq!(StartupError::from_json(&e.to_json()), Some(e.clone()));
        }
        assert_eq!(
            StartupError::from_json(&serde_json::json!({"kind": "x"})),
            None
        );
    }

    #[test]
    fn a_written_error_is_read_tolerantly_but_needs_its_kind_and_message() {
        use serde_json::json;
        let e = StartupError::from_json(&json!({
            "kind": "usage", "message": "m", "causes": ["a", 1, null, "b"], "hints": "h"}))
        .unwrap();
        assert_eq!((e.causes, e.hints), (vec!["a".into(), "b".into()], vec![]));
        for bad in [
            json!({"kind": "usage"}),
            json!({"kind": "usage", "message": 1}),
            json!({"kind": 1, "message": "m"}),
            json!({"kind": "interrupted:x", "message": "m"}),
            json!(["usage", "m"]),
        ] {
            assert_eq!(StartupError::from_json(&bad), None, "{bad}");
        }
        let e = StartupError::from_json(&json!({"kind": "interrupted:2", "message": "m"}));
        assert_eq!(e.map(|e| e.kind), Some(ErrorKind::Interrupted(2)));
    }

    #[test]
    fn a_daemon_error_is_a_config_error_with_its_hint() {
        let e = crate::wire::socket::DaemonError::new("socket directory /x has mode 0755")
            .with_hint("run `chmod 700 /x`");
        let s = StartupError::from(e);
        assert_eq!(s.exit(), Exit::Config);
        assert_eq!(s.message, "socket directory /x has mode 0755");
        assert_eq!(s.hints, vec!["run `chmod 700 /x`".to_string()]);
    }
}
