//! What a run was asked for, as the front ends read it: the session's typed spec and the
//! choices that concern only the client (its prompt, where its session lives, how it waits).
//! `cli/` builds one from the command line, once; no front end reads a flag.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::client::dial::Dial;
use crate::wire::protocol::session::OpenParams;
use crate::wire::protocol::spec::{SessionPick, SessionSpec};

/// A run's request, resolved from the command line.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// The session's spec (the same in this process and in the daemon).
    pub spec: SessionSpec,
    /// Variables a provider key given on the command line is handed over in (never stored,
    /// never seen by tools).
    pub keys: BTreeMap<String, String>,
    /// The prompt's words (several are joined with spaces).
    pub prompt: Vec<String>,
    /// Print mode: no activity lines on stderr.
    pub quiet: bool,
    /// The session lives in the daemon (`--daemon`).
    pub daemon: bool,
    /// The TUI's session lives in this process (`--no-daemon`, `KEEL_NO_DAEMON=1`).
    pub no_daemon: bool,
    /// Start the run and print the session id (`--detach`).
    pub detach: bool,
    /// Follow the session's latest run instead of starting one (`--wait`).
    pub wait: bool,
    /// The daemon the session lives in, when it lives in one (`--daemon`, `--remote`, the TUI).
    pub dial: Option<Dial>,
    /// The socket a `--socket` flag named.
    pub socket: Option<PathBuf>,
    /// The session's directory on the remote host (`--cwd`).
    pub remote_cwd: Option<PathBuf>,
    /// East-Asian ambiguous-width characters are two columns wide (`--ambiguous-width`, else
    /// `KEEL_AMBIGUOUS_WIDTH`; `None`: neither said).
    pub ambiguous_wide: Option<bool>,
}

impl Invocation {
    /// `session/open`'s params for the daemon `dial` names, opening `spec`. A remote daemon
    /// gets the session's directory there (`--cwd`, else this directory's path) and none of
    /// this machine's environment: it runs with its own keys and configuration (a key given on
    /// the command line is sent in `keys`).
    pub fn open_params(
        &self,
        dial: &Dial,
        env: &crate::mode::Env,
        spec: SessionSpec,
        headless: bool,
    ) -> OpenParams {
        let mut params = crate::client::open::open_params(env, spec, headless);
        params.keys = self.keys.clone();
        if dial.remote().is_some() {
            params.cwd = self.remote_cwd.clone().unwrap_or_else(|| env.cwd.clone());
            params.env.clear();
        }
        params
    }

    /// The daemon the session lives in (set by the command line before a front end that
    /// may use the daemon starts).
    pub fn dial(&self) -> Result<Dial, crate::error::StartupError> {
        self.dial
            .clone()
            .ok_or_else(|| crate::error::StartupError::internal("no daemon was chosen for the run"))
    }

    /// Whether the spec picks an existing session (`--continue`, `--resume`, `--session`).
    pub fn picks_a_session(&self) -> bool {
        matches!(
            self.spec.session,
            SessionPick::Continue | SessionPick::Resume(_) | SessionPick::File(_)
        )
    }
}
