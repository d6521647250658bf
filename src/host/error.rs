//! Why the host refused or failed a command: a kind a caller can match on, and pi's error text
//! (the response's `error`, byte for byte what a client reads). Owns only the type and the
//! conversions from the errors of the modules a command calls into.

use std::fmt;

use crate::host::models::ModelError;
use crate::kernel::compaction::CompactError;
use crate::kernel::session::{SessionError, SessionErrorKind};
use crate::wire::rpc::{ParamError, ParamErrorKind};

/// What kind of refusal or failure a command met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandErrorKind {
    /// A field of the request is missing or unusable.
    InvalidParams(ParamErrorKind),
    /// No command of that name.
    UnknownCommand,
    /// A run or a compaction is active and the command does not wait for it.
    Busy,
    /// An entry the request names does not exist, or is not one the command can use.
    Entry,
    /// The session cannot be saved (`session_write`): commands that add to it are refused.
    SessionWrite,
    /// A session file could not be found, read, locked or written.
    Session(SessionErrorKind),
    /// The model cannot be switched to.
    Model,
    /// Compaction had nothing to do, failed or was aborted.
    Compaction,
    /// The HTML export could not be written.
    Export,
    /// The session ended (or was stopped) before the command was answered.
    Ended,
    /// A checkpoint could not be read or restored (`rewind`).
    Checkpoint,
    /// A background job command failed (`get_jobs`, `read_job`, ...): an unknown id, input
    /// to a job on pipes, a job that ended.
    Job,
}

/// A command's error: its kind and pi's error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    pub kind: CommandErrorKind,
    /// The text a client reads in the response's `error`.
    pub message: String,
}

impl CommandError {
    pub fn new(kind: CommandErrorKind, message: impl Into<String>) -> Self {
        CommandError {
            kind,
            message: message.into(),
        }
    }

    /// pi's text for a command the host does not know.
    pub fn unknown_command(command: &str) -> Self {
        Self::new(
            CommandErrorKind::UnknownCommand,
            format!("Unknown command: {command}"),
        )
    }

    /// pi's text for an entry id that names no entry of the session.
    pub fn entry_not_found(id: &str) -> Self {
        Self::new(CommandErrorKind::Entry, format!("Entry not found: {id}"))
    }

    /// The session went away before answering (`message` says how).
    pub fn ended(message: &str) -> Self {
        Self::new(CommandErrorKind::Ended, message)
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CommandError {}

impl From<ParamError> for CommandError {
    fn from(e: ParamError) -> Self {
        Self::new(CommandErrorKind::InvalidParams(e.kind), e.message)
    }
}

impl From<SessionError> for CommandError {
    fn from(e: SessionError) -> Self {
        Self::new(CommandErrorKind::Session(e.kind), e.message)
    }
}

impl From<ModelError> for CommandError {
    fn from(e: ModelError) -> Self {
        Self::new(CommandErrorKind::Model, e.to_string())
    }
}

impl From<crate::kernel::jobs::JobError> for CommandError {
    fn from(e: crate::kernel::jobs::JobError) -> Self {
        Self::new(CommandErrorKind::Job, e.to_string())
    }
}

impl From<CompactError> for CommandError {
    fn from(e: CompactError) -> Self {
        Self::new(CommandErrorKind::Compaction, e.to_string())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{json, Value};

    use super::*;
    use crate::host::actor::{self, SessionHandle};
    use crate::host::models::Models;
    use crate::host::HostSetup;
    use crate::kernel::agent::AgentConfig;
    use crate::kernel::clock::Clock;
    use crate::kernel::provider::http::HttpOptions;
    use crate::kernel::provider::model::Registry;
    use crate::kernel::provider::scripted::ScriptedProvider;
    use crate::kernel::session::{SessionHeader, Store};
    use crate::wire::rpc::Request;

    /// A host serving an empty in-memory session on a script with no turns, in `dir`.
    fn host(dir: &Path) -> SessionHandle {
        let clock = Clock::new(Some(0), Some(1));
        let script = serde_json::from_value(json!({"turns": []})).unwrap();
        let start = Arc::new(ScriptedProvider::from_script(script).unwrap());
        let (registry, vars, http) = (Registry::builtin(), BTreeMap::new(), HttpOptions::default());
        let header = SessionHeader::new(&clock, dir.display().to_string());
        std::fs::create_dir_all(dir.join("sessions")).unwrap();
        let setup = HostSetup {
            config: AgentConfig::new(dir.to_path_buf(), dir.join("tmp")),
            models: Models::new(registry, vars, http, start, None),
            clock: clock.clone(),
            store: Store::in_memory(header),
            announce: false,
            session_dir: dir.join("sessions"),
            prompt_dirs: crate::prompts::Dirs::keel(dir.join("p1"), dir.join("p2")),
            approval_timeout: Duration::from_secs(60),
            unattended: false,
            warnings: Vec::new(),
            skills: Vec::new(),
            late_warnings: None,
            open_spec: Default::default(),
            on_saved_rules: None,
            subagents: None,
            worktree: None,
        };
        actor::spawn(setup, "test".into(), (64, 1 << 20))
    }

    async fn refused(handle: &SessionHandle, command: &str, params: Value) -> CommandError {
        let (answer, _) = handle.request(Request::new(command, params)).await;
        answer.expect_err(command)
    }

    #[tokio::test]
    async fn each_refusal_of_a_command_carries_its_kind_and_pis_text() {
        use CommandErrorKind::*;
        let dir = tempfile::tempdir().unwrap();
        let h = host(dir.path());
        let e = refused(&h, "bogus", json!({})).await;
        assert_eq!(
            (e.kind, e.message.as_str()),
            (UnknownCommand, "Unknown command: bogus")
        );
        let e = refused(&h, "set_session_name", json!({})).await;
        assert_eq!(e.kind, InvalidParams(ParamErrorKind::Missing));
        assert_eq!(
            e.message,
            "set_session_name: field `name` is missing (a string)"
        );
        let e = refused(&h, "set_session_name", json!({"name": " "})).await;
        assert_eq!(e.kind, InvalidParams(ParamErrorKind::NotAllowed));
        let e = refused(&h, "prompt", json!({"message": 1})).await;
        assert_eq!(e.kind, InvalidParams(ParamErrorKind::WrongType));
        let e = refused(&h, "set_thinking_level", json!({})).await;
        assert_eq!(e.kind, InvalidParams(ParamErrorKind::Missing));
        let e = refused(&h, "get_entries", json!({"since": "nope"})).await;
        assert_eq!(
            (e.kind, e.message.as_str()),
            (Entry, "Entry not found: nope")
        );
        let e = refused(&h, "fork", json!({"entryId": "nope"})).await;
        assert_eq!(e.kind, Entry);
        let e = refused(&h, "switch_session", json!({"sessionPath": "nope"})).await;
        assert_eq!(e.kind, Session(SessionErrorKind::NotFound), "{e}");
        let e = h.switch_target("nope").await.unwrap_err();
        assert_eq!(e.kind, Session(SessionErrorKind::NotFound), "{e}");
        let e = refused(&h, "set_model", json!({"provider": "nope", "modelId": "m"})).await;
        assert_eq!(
            (e.kind, e.message.as_str()),
            (Model, "Model not found: nope/m")
        );
        h.stop(Duration::from_secs(5)).await;
        let e = refused(&h, "get_state", json!({})).await;
        assert_eq!(
            (e.kind, e.message.as_str()),
            (Ended, "the session has ended")
        );
    }
}
