//! How a client reaches the daemon and what it opens there: the socket path, the dial
//! (local, or another host's over ssh), connecting to the daemon or starting one, and
//! `session/open`'s params (this client's directory, session flags and environment).

use std::path::{Path, PathBuf};

use crate::wire::protocol::session::OpenParams;
use crate::wire::protocol::spec::SessionSpec;

use crate::client::dial::{Conn, Dial};
use crate::client::spawn;
use crate::error::StartupError;
use crate::mode::Env;
use crate::wire::socket::paths;

/// The socket: `--socket`, `$KEEL_SOCKET`, the runtime directory, `$KEEL_HOME/run/`, or (when
/// that path is too long) `/tmp/keel-<uid>/`.
pub fn socket_for(env: &Env, flag: Option<&Path>) -> Result<PathBuf, StartupError> {
    let var = |k: &str| env.vars.get(k).map(PathBuf::from);
    let choice = paths::socket_path(
        var("KEEL_SOCKET").as_deref(),
        flag,
        var("XDG_RUNTIME_DIR").as_deref(),
        &env.keel_home,
        paths::euid(),
    )?;
    if let Some(why) = &choice.fallback {
        tracing::info!("not using XDG_RUNTIME_DIR: {why}");
    }
    Ok(choice.path)
}

/// Connects to the daemon, or starts one and waits until it accepts (a remote daemon is
/// started by its bridge).
pub async fn start(dial: &Dial, env: &Env) -> Result<Conn, StartupError> {
    match dial {
        Dial::Local(socket) => start_local(socket, env).await.map(Conn::from),
        Dial::Remote(_) => Ok(dial.connect().await?),
    }
}

/// Connects to the daemon on this machine's `socket`, or starts one and waits until it
/// accepts. Only starting one needs `$KEEL_HOME/logs` (its log is made then).
pub async fn start_local(socket: &Path, env: &Env) -> Result<tokio::net::UnixStream, StartupError> {
    let exe = std::env::current_exe().map_err(|e| {
        StartupError::config("cannot find the keel executable to start the daemon")
            .cause(e.to_string())
    })?;
    let log = env.keel_home.join("logs").join("daemon.log");
    let daemon = socket.to_path_buf();
    let spawn = move || {
        let command = spawn::daemon_command(&exe, &daemon, &log, Vec::<String>::new())
            .map_err(|e| std::io::Error::other(e.message))?;
        tokio::process::Command::from(command).spawn().map(drop)
    };
    let (stream, _spawned) = spawn::connect_or_spawn(socket, spawn, spawn::SPAWN_DEADLINE).await?;
    Ok(stream)
}

/// `session/open`'s params for a client with `spec` in `env`: its directory, the spec and its
/// whole environment (the session reads its provider keys, URLs and `KEEL_*` variables; its
/// tools run in it, less the provider keys, as they would here). Relative paths in the spec
/// stay relative: the session resolves them from `cwd`, as this process would.
pub fn open_params(env: &Env, spec: SessionSpec, headless: bool) -> OpenParams {
    OpenParams {
        cwd: env.cwd.clone(),
        spec,
        env: env.vars.clone(),
        keys: Default::default(),
        headless,
    }
}
