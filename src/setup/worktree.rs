//! Entering a session's worktree (`-w`, DESIGN §20) where the session is set up: in this
//! process (print, JSON, RPC and the TUI without the daemon) and in the daemon
//! (`session/open`), the same way: the worktree made, the session's directory moved into it
//! (the directory it was started in, as a place in the new checkout), its variables given to
//! the tools, the settings read again there, and the lease held in the environment until the
//! session's host ends it.

use crate::error::StartupError;
use crate::mode::{Env, Mode};
use crate::setup::Settings;
use crate::worktree::{self, Held};

/// The settings and environment of a session whose spec asks for a worktree, in it; `None`
/// when it does not. Outside a git repository (or in a bare one) a usage error (exit 2).
pub fn enter(
    settings: &Settings,
    env: &Env,
    mode: Mode,
) -> Result<Option<(Settings, Env)>, StartupError> {
    let Some(wanted) = &settings.spec.worktree else {
        return Ok(None);
    };
    let base = match settings.worktree.base {
        Some(crate::settings::WorktreeBase::Fresh) => worktree::Base::Fresh,
        _ => worktree::Base::Head,
    };
    let (lease, cwd) = worktree::create(&env.cwd, wanted.name.as_deref(), base)
        .map_err(|e| StartupError::usage(format!("-w: {e}")))?;
    worktree::manage::remember(&env.keel_home, &lease.worktree().repo);
    let notes = lease.notes().to_vec();
    let vars = lease.worktree().vars();
    let mut env = env.clone();
    env.cwd = cwd;
    let mut tools = env.tool_vars.take().unwrap_or_else(|| env.vars.clone());
    tools.extend(vars.iter().cloned());
    env.tool_vars = Some(tools);
    env.vars.extend(vars);
    env.worktree = Some(Held::new(lease));
    // The session is in the worktree now: reopened from its spec, it is not made again.
    let mut spec = settings.spec.clone();
    spec.worktree = None;
    let mut settings = Settings::resolve(&spec, mode, &env)?;
    settings.warnings.extend(notes);
    Ok(Some((settings, env)))
}

/// What the user is told of the worktree when the session is over (after its host ended the
/// lease): `None` when there was none.
pub fn ended_note(env: &Env) -> Option<String> {
    let ended = env.worktree.as_ref()?.ended()?;
    Some(match ended {
        Ok(e) => e.describe(),
        Err(e) => format!("the worktree was kept: {e}"),
    })
}
