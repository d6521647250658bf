//! Decides, once, at the edge: which front end runs and with which settings. The only place
//! that looks at terminals, NO_COLOR, HOME and keel's environment variables; everything after
//! receives plain values.

use std::path::PathBuf;

use crate::error::StartupError;

/// The front end to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The interactive terminal UI (`front::tui`), in the daemon by default.
    Tui,
    Print,
    Json,
    Rpc,
    /// An Agent Client Protocol agent over stdio (`front::acp`).
    Acp,
}

/// Facts about the process environment, gathered by [`Env::detect`] and injectable in tests.
#[derive(Debug, Clone)]
pub struct Env {
    pub stdin_tty: bool,
    pub stdout_tty: bool,
    pub stderr_tty: bool,
    pub no_color: bool,
    pub cwd: PathBuf,
    /// `$KEEL_HOME`, else `$HOME/.keel`.
    pub keel_home: PathBuf,
    /// `$KEEL_TEST_CLOCK`: a fixed start time in Unix ms (deterministic runs).
    pub fixed_clock: Option<u64>,
    /// `$KEEL_TEST_SEED`: deterministic ids.
    pub seed: Option<u64>,
    /// `$TMPDIR` or the system temp dir.
    pub temp_dir: PathBuf,
    /// `$KEEL_LOG`: a tracing filter for stderr logs (default `warn`).
    pub log_filter: String,
    /// `$KEEL_TEST_PANIC`: panic after startup (tests the internal-error path, exit 70).
    pub test_panic: bool,
    /// The environment's non-empty variables (API keys, base URLs, models.json `apiKeyEnv`).
    pub vars: std::collections::BTreeMap<String, String>,
    /// `$KEEL_RETRY_BASE_MS`: the first retry delay (tests make it short).
    pub retry_base_ms: Option<u64>,
    /// The environment the session's tool processes start from when it is not this process's
    /// own: in the daemon, the opening client's (a scheduled run: the one recorded when its
    /// task was added). `None`: they inherit this process's environment.
    pub tool_vars: Option<std::collections::BTreeMap<String, String>>,
    /// The worktree the session runs in (`-w`), held until the session ends.
    pub worktree: Option<crate::worktree::Held>,
}

impl Env {
    /// `TERM=dumb`: a terminal without cursor movement or colours (the TUI falls back to plain
    /// lines).
    pub fn dumb_terminal(&self) -> bool {
        self.vars.get("TERM").is_some_and(|t| t == "dumb")
    }

    /// Reads the real environment.
    pub fn detect() -> Result<Env, StartupError> {
        let cwd = std::env::current_dir().map_err(|e| {
            StartupError::config("cannot determine the current directory").cause(e.to_string())
        })?;
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let keel_home = match (var("KEEL_HOME"), var("HOME")) {
            (Some(h), _) => PathBuf::from(h),
            (None, Some(home)) => PathBuf::from(home).join(".keel"),
            (None, None) => {
                return Err(StartupError::config("neither KEEL_HOME nor HOME is set")
                    .hint("set KEEL_HOME to the directory keel may keep sessions in"))
            }
        };
        let (stdin_tty, stdout_tty, stderr_tty) = crate::output::terminals();
        Ok(Env {
            stdin_tty,
            stdout_tty,
            stderr_tty,
            no_color: var("NO_COLOR").is_some(),
            cwd,
            keel_home,
            fixed_clock: var("KEEL_TEST_CLOCK").and_then(|v| v.parse().ok()),
            seed: var("KEEL_TEST_SEED").and_then(|v| v.parse().ok()),
            temp_dir: std::env::temp_dir(),
            log_filter: var("KEEL_LOG").unwrap_or_else(|| "warn".to_string()),
            test_panic: var("KEEL_TEST_PANIC").is_some(),
            vars: std::env::vars().filter(|(_, v)| !v.is_empty()).collect(),
            retry_base_ms: var("KEEL_RETRY_BASE_MS").and_then(|v| v.parse().ok()),
            tool_vars: None,
            worktree: None,
        })
    }
}
