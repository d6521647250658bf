//! The host setup of a session opened with a spec and an environment that are not this
//! process's own: the daemon's `session/open` and ACP's `session/new`, `session/load` and
//! `session/resume` start sessions here, as a keel process started with that spec in that
//! directory would.

use std::collections::BTreeMap;

use crate::error::StartupError;
use crate::kernel::clock::Clock;
use crate::mode::Env;
use crate::setup::Settings;

/// The host setup of a session started with `settings` in `env`'s directory, as a keel
/// process started there would get it: the daemon's `session/open` and ACP's `session/new`,
/// `session/load` and `session/resume` all start sessions here. `can_ask`: approval dialogs
/// can be answered (false blocks such calls, as a print run does).
pub async fn start(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
    can_ask: bool,
) -> Result<crate::host::HostSetup, StartupError> {
    let provider = prepare(settings, env, clock).await?;
    crate::setup::host_setup_with(settings, env, clock, can_ask, provider)
}

/// The first part of [`start`], the one that may wait on the network: the flags checked, the
/// run's start time read (first, as a keel process reads it at startup: a session opened here
/// gets the ids and times it would get in-process) and the provider chosen (which may ask a
/// server for its models).
pub async fn prepare(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
) -> Result<std::sync::Arc<dyn crate::kernel::provider::Provider>, StartupError> {
    crate::setup::check_session_flags(settings, false)?;
    let _started = clock.now_ms();
    crate::setup::provider(settings, env).await
}

/// -32000 with the startup error's text as the message and the error itself as `data`.
/// The environment of a session in `cwd`: `base` variables overlaid with `sent` (non-empty
/// ones), keel's test variables read from them, no terminal. `sent` is the client's whole
/// environment, and its tools get exactly that (less secrets, see `ToolEnv`); an empty
/// `sent` (a remote client, ACP in its own process) leaves them the daemon's.
pub fn env_in(
    base: &BTreeMap<String, String>,
    keel_home: &std::path::Path,
    temp_dir: &std::path::Path,
    cwd: &std::path::Path,
    sent: BTreeMap<String, String>,
) -> Env {
    let tool_vars = (!sent.is_empty()).then(|| sent.clone());
    let mut vars = base.clone();
    vars.extend(sent.into_iter().filter(|(_, v)| !v.is_empty()));
    let var = |k: &str| vars.get(k).cloned();
    Env {
        stdin_tty: false,
        stdout_tty: false,
        stderr_tty: false,
        no_color: true,
        cwd: cwd.to_path_buf(),
        keel_home: keel_home.to_path_buf(),
        fixed_clock: var("KEEL_TEST_CLOCK").and_then(|v| v.parse().ok()),
        seed: var("KEEL_TEST_SEED").and_then(|v| v.parse().ok()),
        temp_dir: temp_dir.to_path_buf(),
        log_filter: "warn".into(),
        test_panic: false,
        retry_base_ms: var("KEEL_RETRY_BASE_MS").and_then(|v| v.parse().ok()),
        vars,
        tool_vars,
        worktree: None,
    }
}
