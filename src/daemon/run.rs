//! `keel daemon run`: the server's start and life. With `spawned` (started by a client) it
//! becomes a session leader; it ignores SIGHUP, takes the socket directory's `daemon.lock`
//! (another daemon holding it ends this one with success), removes a stale socket, binds and
//! serves until it is idle, stopped or signalled. Server code only.

use std::path::{Path, PathBuf};

use crate::daemon::server::{self, DaemonOptions, Ending};
use crate::daemon::socket;
use crate::error::StartupError;
use crate::exit::Exit;

/// Serves the daemon `options` describe until it ends; the exit `keel daemon run` ends with.
pub async fn run(options: DaemonOptions, spawned: bool) -> Result<Exit, StartupError> {
    if spawned {
        socket::become_session_leader()
            .map_err(|e| StartupError::internal(format!("setsid failed: {e}")))?;
    }
    // Spawned or in the foreground (a systemd unit, a terminal that closes): SIGHUP must not
    // end the daemon, its sessions and their running tools.
    socket::ignore_sighup().map_err(|e| StartupError::internal(e.to_string()))?;
    let dir = options
        .socket
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let Some(lock) = socket::DaemonLock::acquire(&dir)? else {
        tracing::info!("another keel daemon holds {}; exiting", dir.display());
        return Ok(Exit::Success);
    };
    // With daemon.lock held no other daemon serves this directory: a socket file left here
    // is stale.
    if std::fs::symlink_metadata(&options.socket).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        m.file_type().is_socket()
    }) {
        let _ = std::fs::remove_file(&options.socket);
    }
    let listener = socket::bind(&options.socket)?;
    // Worktrees whose keel died are unlocked (kept), old clean ones removed.
    let (home, older) = (options.keel_home.clone(), options.worktree_cleanup);
    tokio::task::spawn_blocking(move || {
        for (repo, done) in crate::worktree::manage::sweep(&home, older) {
            tracing::info!("worktrees of {}: {done:?}", repo.display());
        }
    });
    Ok(match server::serve(options, listener, lock).await? {
        Ending::Idle | Ending::Stopped => Exit::Success,
        Ending::Signal(n) => Exit::Signal(n),
    })
}
