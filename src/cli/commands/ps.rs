//! `keel ps [--json]`: the sessions live in the daemon (local, or another host's with
//! `--remote`), as a table or one JSON object per line on stdout. With no daemon running,
//! nothing is listed: "no daemon running" on stderr, exit 0.

use std::path::PathBuf;

use super::{print, Logs};
use crate::cli::args::RemoteArgs;
use crate::cli::invocation::dial_for;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::front::daemon::{live_status, ps_json, ps_table};
use crate::mode::Env;
use crate::output::Output;

/// `keel ps`'s flags.
#[derive(Debug, clap::Args)]
pub struct PsArgs {
    /// One JSON object per session per line.
    #[arg(long)]
    json: bool,
    /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// `keel ps`: logs on stderr.
pub fn run(args: PsArgs) -> Exit {
    super::run(Logs::Stderr, async move |env, out| ps(args, env, out).await)
}

async fn ps(args: PsArgs, env: &Env, out: &mut Output) -> Result<Exit, StartupError> {
    let PsArgs {
        json,
        socket,
        remote,
    } = args;
    let Some(status) = live_status(&dial_for(env, socket.as_deref(), &remote)?).await? else {
        // Nothing runs, so nothing is listed: not an error (a note on stderr).
        out.err("no daemon running\n");
        return Ok(Exit::Success);
    };
    let text = if json {
        ps_json(&status)
    } else {
        ps_table(&status.sessions)
    };
    print(out, &text)
}
