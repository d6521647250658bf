//! `keel attach [ID]`: shows a session live in the daemon in the TUI (the only one, or the one
//! chosen in the live-session picker when several are live and no id is given). With
//! `--job N`, shows that background job of the session live instead (`tui::attach_job`).

use std::path::PathBuf;

use super::Logs;
use crate::cli::args::RemoteArgs;
use crate::cli::invocation::dial_for;
use crate::client::open::open_params;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::daemon::{ambiguous_wide, attach_target, status_of};
use crate::mode::Env;
use crate::output::Output;

/// `keel attach`'s arguments.
#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// The session id (a unique prefix is enough).
    id: Option<String>,
    /// Show this background job of the session live instead (its output, the keys typed go
    /// to it; Ctrl+\ detaches and leaves it running).
    #[arg(long, value_name = "ID")]
    job: Option<crate::kernel::jobs::JobId>,
    /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// `keel attach`: it draws the TUI, so logs go to the log file, never the screen.
pub fn run(args: AttachArgs) -> Exit {
    super::run(Logs::File, async move |env, out| {
        attach(args, env, out).await
    })
}

async fn attach(args: AttachArgs, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    let AttachArgs {
        id,
        job,
        socket,
        remote,
    } = args;
    let dial = dial_for(env, socket.as_deref(), &remote)?;
    let status = status_of(&dial).await?;
    let session = match attach_target(&status, id.as_deref(), env, out).await? {
        Ok(session) => session,
        Err(exit) => return Ok(exit),
    };
    if !env.stdin_tty || !env.stdout_tty {
        return Err(StartupError::usage("keel attach needs a terminal"));
    }
    if let Some(job) = job {
        return crate::front::tui::attach_job::run(&dial, &session, job).await;
    }
    let cwd = status
        .sessions
        .iter()
        .find(|s| s.session_id == session)
        .map(|s| PathBuf::from(&s.cwd))
        .unwrap_or_else(|| env.cwd.clone());
    let remote_env = dial.remote().is_some();
    // A remote host's session runs no statusLine here.
    let status_line = match remote_env {
        true => None,
        false => crate::setup::status_line::configured_in(env),
    };
    let setup = crate::front::tui::client::AttachSetup {
        dial,
        session,
        prompt: None,
        warnings: Vec::new(),
        ambiguous_wide: ambiguous_wide(env),
        reopen: {
            let mut here = env.clone();
            here.cwd = cwd;
            let mut params = open_params(&here, Default::default(), false);
            if remote_env {
                // The remote daemon runs with its own environment.
                params.env.clear();
            }
            params
        },
        env: env.clone(),
        session_dir: crate::kernel::session::session_dir(&env.keel_home, &env.cwd),
        pick_session: false,
        notify: crate::front::tui::notify::channel_in(env),
        status_line,
    };
    crate::front::tui::client::run(setup, out).await
}
