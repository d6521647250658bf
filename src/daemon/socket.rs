//! The daemon's side of the socket contract (`wire::socket`): its life lock `daemon.lock`
//! (its PID inside), leaving the terminal's session when a client spawned it, ignoring SIGHUP,
//! binding the socket in its private directory, and the peer-uid check on a connection.
//! Server code only; never prints (reasons are returned).

use std::fs::{self, File, Permissions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::sys::stat::{umask, Mode};
use tokio::net::{UnixListener, UnixStream};

use crate::kernel::private;
use crate::wire::socket::lock::{DAEMON_LOCK, LOCK_GRACE};
use crate::wire::socket::paths::{self, check_sun_path, uid_allowed, SOCKET_MODE};
use crate::wire::socket::DaemonError;

/// Prepares the socket directory `dir` ([`private::prepare_dir`]), its refusal said as a
/// [`DaemonError`].
fn prepare_dir(dir: &Path) -> Result<(), DaemonError> {
    private::prepare_dir(dir).map_err(|e| paths::dir_error(dir, &e, private::euid()))
}

/// `daemon.lock`, held by a running daemon for its whole life (released when dropped, or by
/// the kernel when the process dies); the file holds the PID.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
}

impl DaemonLock {
    /// Takes `dir/daemon.lock` (preparing `dir` like [`private::prepare_dir`]) and writes our
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
        prepare_dir(dir)?;
        let path = dir.join(DAEMON_LOCK);
        let mut file = private::open_lock(&path).map_err(|e| DaemonError::io("open", &path, &e))?;
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
        Ok(Some(DaemonLock { _file: file }))
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

/// Binds the daemon's socket at `path` in its verified private directory (see
/// [`private::prepare_dir`]), under umask 077 so it is never reachable through looser bits, then makes
/// it exactly 0600. The umask is process-wide: the daemon binds before it starts anything else
/// (no thread may create files meanwhile). An existing file at `path`, stale or live, is an
/// error: only connect-or-spawn removes a stale socket, under its lock. Needs a tokio runtime.
pub fn bind(path: &Path) -> Result<UnixListener, DaemonError> {
    check_sun_path(path)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            DaemonError::new(format!(
                "the socket path {} has no directory",
                path.display()
            ))
        })?;
    prepare_dir(dir)?;
    let old = umask(Mode::from_bits_truncate(0o077));
    let bound = UnixListener::bind(path);
    umask(old);
    let listener = bound.map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => DaemonError::new(format!(
            "cannot bind {}: the path is in use",
            path.display()
        ))
        .with_hint("another daemon may be listening there (`keel daemon status`)"),
        _ => DaemonError::io("bind", path, &e),
    })?;
    fs::set_permissions(path, Permissions::from_mode(SOCKET_MODE))
        .map_err(|e| DaemonError::io("set the mode of", path, &e))?;
    Ok(listener)
}

/// Whether the process at the other end of `stream` runs as our effective uid (SO_PEERCRED,
/// as it was at connect time). The daemon calls it on every accepted connection and closes the
/// others. `Err` is the reason, naming both uids (kind
/// [`crate::wire::socket::DaemonErrorKind::ForeignPeer`]), or why the credentials could not be
/// read.
pub fn peer_allowed(stream: &UnixStream) -> Result<(), DaemonError> {
    let cred = stream
        .peer_cred()
        .map_err(|e| DaemonError::new(format!("cannot read the peer's credentials: {e}")))?;
    uid_allowed(cred.uid(), private::euid())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! setsid, SIGHUP and umask run in a child process (this test binary again).
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::Command;

    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn private_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[tokio::test]
    async fn bind_makes_a_0600_socket_and_a_second_bind_fails() {
        let d = private_tempdir();
        let sock = d.path().join("run/p2.sock");
        let listener = bind(&sock).unwrap();
        assert_eq!(mode(&sock), 0o600);
        assert_eq!(mode(&d.path().join("run")), 0o700);
        let e = bind(&sock).unwrap_err();
        assert_eq!(
            e.message,
            format!("cannot bind {}: the path is in use", sock.display())
        );
        // Still the first daemon's socket.
        let (_c, accepted) = tokio::join!(UnixStream::connect(&sock), listener.accept());
        accepted.unwrap();
    }

    #[tokio::test]
    async fn bind_refuses_a_path_over_the_sun_path_limit_and_a_loose_directory() {
        let d = private_tempdir();
        let long = d.path().join("s".repeat(paths::SUN_PATH_MAX));
        assert!(bind(&long).unwrap_err().message.contains("-byte limit"));
        fs::set_permissions(d.path(), Permissions::from_mode(0o755)).unwrap();
        let e = bind(&d.path().join("p2.sock")).unwrap_err();
        assert!(e.message.contains("has mode 0755"), "{}", e.message);
        assert!(!d.path().join("p2.sock").exists());
    }

    #[tokio::test]
    async fn peer_allowed_accepts_our_own_connection_both_ways() {
        let d = private_tempdir();
        let sock = d.path().join("p2.sock");
        let listener = bind(&sock).unwrap();
        let (client, accepted) = tokio::join!(UnixStream::connect(&sock), listener.accept());
        let (server, _) = accepted.unwrap();
        peer_allowed(&server).unwrap();
        peer_allowed(&client.unwrap()).unwrap();
        let (a, _b) = UnixStream::pair().unwrap();
        peer_allowed(&a).unwrap();
    }

    #[test]
    fn daemon_lock_is_exclusive_holds_the_pid_and_is_freed_on_drop() {
        let d = private_tempdir();
        let first = DaemonLock::acquire(d.path()).unwrap().unwrap();
        let path = d.path().join(DAEMON_LOCK);
        let pid = std::process::id();
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{pid}\n"));
        assert_eq!(mode(&path), 0o600);
        assert!(DaemonLock::acquire(d.path()).unwrap().is_none());
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{pid}\n"));
        drop(first);
        assert!(DaemonLock::acquire(d.path()).unwrap().is_some());
    }

    /// Which child-process check [`child_process`] runs.
    const CHILD_ENV: &str = "KEEL_TEST_DAEMON_CHILD";

    /// This test binary run again as a child (through `sh -c 'SETUP; exec …'`), running only
    /// [`child_process`]; its stdout.
    fn run_child(what: &str, setup: &str, dir: &Path, group_leader: bool) -> String {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("{setup} exec \"$0\" \"$@\""))
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "daemon::socket::tests::child_process"])
            .args(["--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, what)
            .env("KEEL_TEST_DAEMON_DIR", dir);
        if group_leader {
            c.process_group(0);
        }
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
        stdout
    }

    #[test]
    #[ignore = "run as a child process by the session-leader, SIGHUP and umask tests"]
    fn child_process() {
        let Ok(what) = std::env::var(CHILD_ENV) else {
            return;
        };
        let dir = PathBuf::from(std::env::var("KEEL_TEST_DAEMON_DIR").unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match what.as_str() {
            "setsid" => match become_session_leader() {
                Ok(()) => {
                    let sid = nix::unistd::getsid(None).unwrap();
                    println!("leader={}", sid == nix::unistd::getpid()); // stdout-ok: to the parent test
                }
                Err(e) => println!("setsid failed: {}", e.kind()), // stdout-ok: to the parent test
            },
            "sighup" => rt.block_on(async {
                ignore_sighup().unwrap();
                nix::sys::signal::raise(nix::sys::signal::Signal::SIGHUP).unwrap();
                println!("survived SIGHUP"); // stdout-ok: to the parent test
            }),
            "umask" => rt.block_on(async {
                let sock = dir.join("run/p2.sock");
                let _listener = bind(&sock).unwrap();
                let now = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
                let report = format!(
                    "dir={:o} socket={:o} umask={:o}",
                    mode(&dir.join("run")),
                    mode(&sock),
                    now.bits()
                );
                println!("{report}"); // stdout-ok: to the parent test
            }),
            other => panic!("unknown child check {other}"),
        }
    }

    #[test]
    fn a_spawned_daemon_becomes_a_session_leader() {
        let d = private_tempdir();
        let out = run_child("setsid", "", d.path(), false);
        assert!(out.contains("leader=true"), "{out}");
    }

    #[test]
    fn become_session_leader_fails_in_a_process_group_leader() {
        // Why daemon_command must not use process_group(0).
        let d = private_tempdir();
        let out = run_child("setsid", "", d.path(), true);
        assert!(out.contains("setsid failed: permission denied"), "{out}");
    }

    #[test]
    fn ignore_sighup_keeps_the_daemon_alive() {
        let d = private_tempdir();
        let out = run_child("sighup", "", d.path(), false);
        assert!(out.contains("survived SIGHUP"), "{out}");
    }

    #[test]
    fn bind_under_a_loose_or_tight_umask_gives_0700_dir_0600_socket_and_restores_it() {
        let d = private_tempdir();
        let out = run_child("umask", "umask 000;", d.path(), false);
        assert!(out.contains("dir=700 socket=600 umask=0\n"), "{out}");
        let d = private_tempdir();
        let out = run_child("umask", "umask 277;", d.path(), false);
        assert!(out.contains("dir=700 socket=600 umask=277\n"), "{out}");
    }

    #[test]
    fn a_daemon_starting_while_lock_state_probes_still_gets_daemon_lock() {
        // Regression: a status probe holding a free daemon.lock for an instant made a daemon
        // starting at that instant believe another daemon ran, and exit.
        let d = private_tempdir();
        let probe = private::open_lock(&d.path().join(DAEMON_LOCK)).unwrap();
        probe.try_lock().unwrap();
        let mut probe = Some(probe);
        let mut busy = 0;
        let lock = DaemonLock::acquire_with(d.path(), || {
            busy += 1;
            drop(probe.take()); // the probe ends
        });
        assert!(lock.unwrap().is_some());
        assert_eq!(busy, 1);
    }
}
