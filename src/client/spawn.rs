//! One daemon per socket directory however many clients start at once: connect-or-spawn under
//! `spawn.lock`, waiting on the daemon's life lock `daemon.lock` (its PID inside), and the
//! command line of a spawned daemon (which leaves the terminal's session first). Never
//! prints; never removes a socket without holding `spawn.lock`.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::net::UnixStream;
use tokio::time::Instant;

use super::dial::dial_local;
use super::locate::lock_state;
use crate::kernel::private;
use crate::wire::socket::lock::{LockState, DAEMON_LOCK, SPAWNED_FLAG};
use crate::wire::socket::paths;
use crate::wire::socket::{DaemonError, DaemonErrorKind};

/// Lock file taken by a client while it checks for, and maybe spawns, the daemon.
pub const SPAWN_LOCK: &str = "spawn.lock";
/// How long connect-or-spawn waits, in all, for the lock and for a daemon to accept.
pub const SPAWN_DEADLINE: Duration = Duration::from_secs(10);
/// Interval of the readiness poll while a daemon starts (another process: there is no event
/// to wait on).
pub const READY_POLL: Duration = Duration::from_millis(20);
/// What one connection attempt found.
enum Probe {
    Up(UnixStream),
    /// Nothing listens (no file, or a stale one: `ECONNREFUSED`).
    Down,
    /// Something listens but its backlog is full.
    Busy,
}

/// Connects to the daemon at `socket`, starting it with `spawn` when none runs: the socket's
/// directory is prepared and verified ([`private::prepare_dir`]); connect; on "no such file" or
/// "connection refused" take `spawn.lock` in that directory, connect again (another client may
/// have spawned meanwhile); if `daemon.lock` is held a daemon is starting, so only wait for it;
/// else remove a stale socket (never anything but a socket), call `spawn` and wait until a
/// connect succeeds, polling every [`READY_POLL`]. `deadline` bounds the whole call (the
/// default is [`SPAWN_DEADLINE`]). The lock is released when this returns. Every connect is
/// [`dial_local`]'s: the daemon at the other end must run as our effective uid. Returns the
/// stream and whether `spawn` was called.
pub async fn connect_or_spawn(
    socket: &Path,
    spawn: impl FnOnce() -> io::Result<()>,
    deadline: Duration,
) -> Result<(UnixStream, bool), DaemonError> {
    let until = Instant::now() + deadline;
    let dir = socket_dir(socket)?;
    private::prepare_dir(dir).map_err(|e| paths::dir_error(dir, &e, private::euid()))?;
    if let Probe::Up(s) = probe(socket).await? {
        return Ok((s, false));
    }
    let _lock = spawn_lock(dir, until, deadline).await?;
    let spawned = match probe(socket).await? {
        Probe::Up(s) => return Ok((s, false)),
        Probe::Busy => false,
        Probe::Down => match lock_state(dir)? {
            LockState::Held(_) => false,
            LockState::Free => {
                remove_stale(socket)?;
                spawn().map_err(|e| {
                    DaemonError::new(format!(
                        "cannot start the daemon for {}: {e}",
                        socket.display()
                    ))
                })?;
                true
            }
        },
    };
    let stream = wait_ready(socket, dir, until, deadline).await?;
    Ok((stream, spawned))
}

/// The directory a socket path names (an error for a bare file name).
pub(super) fn socket_dir(socket: &Path) -> Result<&Path, DaemonError> {
    socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            DaemonError::new(format!(
                "the socket path {} has no directory",
                socket.display()
            ))
        })
}

/// One connection attempt through the one local dial ([`dial_local`]: directory checks, then
/// the daemon's peer uid); another user's listener is an error, never `Up`.
async fn probe(socket: &Path) -> Result<Probe, DaemonError> {
    match dial_local(socket).await {
        Ok(s) => Ok(Probe::Up(s)),
        Err(e) => match e.kind {
            DaemonErrorKind::NotListening => Ok(Probe::Down),
            DaemonErrorKind::Busy => Ok(Probe::Busy),
            DaemonErrorKind::Other | DaemonErrorKind::ForeignPeer { .. } => Err(e),
        },
    }
}

/// Takes `dir/spawn.lock` (flock, blocking on the blocking pool) or fails at `until`.
async fn spawn_lock(dir: &Path, until: Instant, deadline: Duration) -> Result<File, DaemonError> {
    let path = dir.join(SPAWN_LOCK);
    let file = private::open_lock(&path).map_err(|e| DaemonError::io("open", &path, &e))?;
    let locking = tokio::task::spawn_blocking(move || file.lock().map(|()| file));
    match tokio::time::timeout_at(until, locking).await {
        Ok(Ok(Ok(file))) => Ok(file),
        Ok(Ok(Err(e))) => Err(DaemonError::io("lock", &path, &e)),
        Ok(Err(e)) => Err(DaemonError::new(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
        Err(_) => Err(DaemonError::new(format!(
            "another keel held {} for more than {} s while starting the daemon",
            path.display(),
            deadline.as_secs_f64()
        ))),
    }
}

/// Removes the stale socket file at `socket` (absent is fine); anything but a socket is left
/// alone and refused.
fn remove_stale(socket: &Path) -> Result<(), DaemonError> {
    let meta = match fs::symlink_metadata(socket) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(DaemonError::io("inspect", socket, &e)),
    };
    if !meta.file_type().is_socket() {
        return Err(DaemonError::new(format!(
            "{} exists and is not a socket; keel does not remove it",
            socket.display()
        ))
        .with_hint("remove it, or choose another --socket path"));
    }
    match fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(DaemonError::io("remove the stale socket", socket, &e))
        }
        _ => Ok(()),
    }
}

/// Polls `socket` until a connect succeeds or `until` passes.
async fn wait_ready(
    socket: &Path,
    dir: &Path,
    until: Instant,
    deadline: Duration,
) -> Result<UnixStream, DaemonError> {
    loop {
        if let Probe::Up(s) = probe(socket).await? {
            return Ok(s);
        }
        if Instant::now() >= until {
            return Err(not_ready(socket, dir, deadline));
        }
        tokio::time::sleep(READY_POLL.min(until.saturating_duration_since(Instant::now()))).await;
    }
}

fn not_ready(socket: &Path, dir: &Path, deadline: Duration) -> DaemonError {
    let secs = deadline.as_secs_f64();
    match lock_state(dir) {
        Ok(LockState::Held(pid)) => {
            let who = pid.map_or_else(|| "a daemon".to_string(), |p| format!("daemon {p}"));
            DaemonError::new(format!(
                "{who} holds {} but did not accept connections on {} within {secs} s",
                dir.join(DAEMON_LOCK).display(),
                socket.display()
            ))
            .with_hint("it may be wedged: stop it, then try again")
        }
        _ => DaemonError::new(format!(
            "the daemon did not accept connections on {} within {secs} s",
            socket.display()
        ))
        .with_hint("see $KEEL_HOME/logs/daemon.log, or run `keel daemon run` to see it fail"),
    }
}

/// The command that starts a daemon for `socket`: `EXE daemon run --socket SOCKET --spawned
/// EXTRA…`, stdin and stdout `/dev/null`, stderr appended to `log` (created 0600, its
/// directory 0700), working directory `/`. Left to the daemon: `--spawned` tells it to call
/// `daemon::socket::become_session_leader` and `ignore_sighup` first (a safe `setsid` in the child itself;
/// `pre_exec` would need unsafe code). Do not give it `process_group(0)`: a group leader
/// cannot call setsid. Spawn it with `tokio::process::Command::from(cmd)` and drop the child:
/// tokio reaps it when it exits, so a long-lived client keeps no zombie.
pub fn daemon_command<I, S>(
    exe: &Path,
    socket: &Path,
    log: &Path,
    extra_args: I,
) -> Result<Command, DaemonError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    for (what, p) in [("keel executable", exe), ("socket", socket)] {
        if !p.is_absolute() {
            return Err(DaemonError::new(format!(
                "the {what} path {} is not absolute (the daemon runs in /)",
                p.display()
            )));
        }
    }
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        private::create_dir_all(dir).map_err(|e| DaemonError::io("create", dir, &e))?;
    }
    let log_file = private::append_file(log).map_err(|e| DaemonError::io("open", log, &e))?;
    let mut cmd = Command::new(exe);
    cmd.args(["daemon", "run", "--socket"])
        .arg(socket)
        .arg(SPAWNED_FLAG)
        .args(extra_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log_file))
        .current_dir("/");
    Ok(cmd)
}

#[cfg(test)]
mod tests;
