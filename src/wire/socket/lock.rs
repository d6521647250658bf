//! The contract between a client that spawns the daemon and the daemon it starts: the daemon's
//! life lock `daemon.lock` (its PID inside), how a client reads it, the flag a spawned daemon
//! gets and what that daemon does first to leave the terminal's session. Both sides use it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::paths;
use super::DaemonError;
use crate::kernel::private;

/// Lock file held by a running daemon for its whole life, its PID inside.
pub const DAEMON_LOCK: &str = "daemon.lock";
/// How long [`DaemonLock::acquire`] retries a held `daemon.lock` before it concludes that a
/// daemon holds it: [`lock_state`] takes a free lock for an instant, and a daemon starting at
/// that instant must not give up.
pub const LOCK_GRACE: Duration = Duration::from_millis(100);
/// Flag `daemon_command` adds so the daemon knows it was spawned and must call
/// [`become_session_leader`] and [`ignore_sighup`] first.
pub const SPAWNED_FLAG: &str = "--spawned";

/// Opens (creating it 0600) a lock file without truncating it.
pub(crate) fn lock_file(path: &Path) -> Result<File, DaemonError> {
    let file = private::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| DaemonError::io("open", path, &e))?;
    private::fix_mode(&file).map_err(|e| DaemonError::io("set the mode of", path, &e))?;
    Ok(file)
}

/// Whether a daemon holds `daemon.lock` in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    Free,
    /// Held, with the PID written in the file (`None` while the daemon has not written it yet).
    Held(Option<u32>),
}

/// Reads whether `dir/daemon.lock` is held (taking and releasing it at once when it is free;
/// a daemon acquiring it meanwhile retries for [`LOCK_GRACE`]).
pub fn lock_state(dir: &Path) -> Result<LockState, DaemonError> {
    let path = dir.join(DAEMON_LOCK);
    let mut file = match OpenOptions::new().read(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LockState::Free),
        Err(e) => return Err(DaemonError::io("open", &path, &e)),
    };
    match file.try_lock() {
        Ok(()) => Ok(LockState::Free),
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let pid = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            Ok(LockState::Held(pid))
        }
        Err(TryLockError::Error(e)) => Err(DaemonError::io("lock", &path, &e)),
    }
}

/// `daemon.lock`, held by a running daemon for its whole life (released when dropped, or by
/// the kernel when the process dies); the file holds the PID.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
    path: PathBuf,
}

impl DaemonLock {
    /// Takes `dir/daemon.lock` (preparing `dir` like [`paths::prepare_dir`]) and writes our
    /// PID into it. `None`: another daemon holds it (still after [`LOCK_GRACE`]): this one lost
    /// the race and should exit 0. Blocks for at most [`LOCK_GRACE`].
    pub fn acquire(dir: &Path) -> Result<Option<DaemonLock>, DaemonError> {
        Self::acquire_with(dir, || {})
    }

    /// [`DaemonLock::acquire`], calling `on_busy` each time the lock is found held.
    pub(crate) fn acquire_with(
        dir: &Path,
        mut on_busy: impl FnMut(),
    ) -> Result<Option<DaemonLock>, DaemonError> {
        paths::prepare_dir(dir)?;
        let path = dir.join(DAEMON_LOCK);
        let mut file = lock_file(&path)?;
        let give_up = std::time::Instant::now() + LOCK_GRACE;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                // A live daemon holds it for good; a probe (`lock_state`) for microseconds.
                Err(TryLockError::WouldBlock) if std::time::Instant::now() < give_up => {
                    on_busy();
                    std::thread::sleep(LOCK_GRACE / 10)
                }
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(DaemonError::io("lock", &path, &e)),
            }
        }
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(|e| DaemonError::io("write the PID to", &path, &e))?;
        Ok(Some(DaemonLock { _file: file, path }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes this process the leader of a new session with no controlling terminal, so closing
/// the terminal that started it sends it nothing. The spawned daemon calls it first; it fails
/// (EPERM) in a process-group leader.
pub fn become_session_leader() -> io::Result<()> {
    nix::unistd::setsid().map(|_| ()).map_err(io::Error::from)
}

/// Ignores SIGHUP for the rest of the process: a tokio listener replaces the default action
/// (terminate) and a task drains it. (Setting `SIG_IGN` needs unsafe code.) Needs a runtime.
pub fn ignore_sighup() -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::debug!("SIGHUP ignored");
        }
    });
    Ok(())
}
