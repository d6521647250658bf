//! Tests of connect-or-spawn, the daemon's locks and the spawned daemon's setup, on real
//! sockets and lock files in temp dirs; setsid, SIGHUP and umask run in a child process.

use std::cell::Cell;
use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener as StdListener, UnixStream as StdStream};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use super::*;
use crate::wire::socket::lock::*;
use std::fs::TryLockError;
use std::path::PathBuf;

fn private_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), Permissions::from_mode(0o700)).unwrap();
    d
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

const SHORT: Duration = Duration::from_millis(100);

#[tokio::test]
async fn a_listening_daemon_is_used_without_spawning() {
    let d = private_tempdir();
    let sock = d.path().join("p2.sock");
    let listener = paths::bind(&sock).unwrap();
    let no_spawn = || Err(io::Error::other("must not spawn"));
    let (_stream, spawned) = connect_or_spawn(&sock, no_spawn, SHORT).await.unwrap();
    assert!(!spawned);
    listener.accept().await.unwrap();
}

#[tokio::test]
async fn a_stale_socket_is_replaced_only_under_the_spawn_lock() {
    let d = private_tempdir();
    let sock = d.path().join("p2.sock");
    drop(StdListener::bind(&sock).unwrap()); // a dead daemon: the file stays
    let refused = StdStream::connect(&sock).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    let mut daemon = None;
    let spawn = || {
        assert!(
            !sock.exists(),
            "the stale socket is removed before spawning"
        );
        let lock = File::open(d.path().join(SPAWN_LOCK)).unwrap();
        assert!(matches!(lock.try_lock(), Err(TryLockError::WouldBlock)));
        daemon = Some(StdListener::bind(&sock)?);
        Ok(())
    };
    let (_stream, spawned) = connect_or_spawn(&sock, spawn, SPAWN_DEADLINE)
        .await
        .unwrap();
    assert!(spawned);
    daemon.unwrap().accept().unwrap();
    let lock = File::open(d.path().join(SPAWN_LOCK)).unwrap();
    // Released on return. A process another test is spawning holds a copy of every open file
    // between its fork and its exec (so the lock, for a moment): retry for up to a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::yield_now()
            }
            Err(e) => panic!("the spawn lock is still held: {e:?}"),
        }
    }
    assert_eq!(mode(&d.path().join(SPAWN_LOCK)), 0o600);
}

#[test]
fn sixteen_clients_starting_at_once_spawn_one_daemon_and_all_connect() {
    let d = private_tempdir();
    let sock = d.path().join("run/p2.sock");
    let spawns = Arc::new(AtomicUsize::new(0));
    let daemons = Arc::new(Mutex::new(Vec::new()));
    let barrier = Arc::new(Barrier::new(16));
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let (sock, spawns, daemons) = (sock.clone(), spawns.clone(), daemons.clone());
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                // The "daemon" listens 100 ms after it is spawned, like a real one that takes
                // time to start: the delay only widens the window the lock must close (every
                // client probes while nothing listens); the assertions hold for any delay.
                let daemon_sock = sock.clone();
                let spawn = move || {
                    spawns.fetch_add(1, Ordering::SeqCst);
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(100));
                        if let Ok(listener) = StdListener::bind(&daemon_sock) {
                            daemons.lock().unwrap().push(listener);
                        }
                    });
                    Ok(())
                };
                barrier.wait();
                rt.block_on(connect_or_spawn(&sock, spawn, SPAWN_DEADLINE))
                    .map(|(_stream, spawned)| spawned)
            })
        })
        .collect();
    let spawned: Vec<bool> = clients
        .into_iter()
        .map(|c| c.join().unwrap().unwrap())
        .collect();
    assert_eq!(spawns.load(Ordering::SeqCst), 1);
    assert_eq!(spawned.iter().filter(|s| **s).count(), 1);
    assert_eq!(spawned.len(), 16);
}

#[tokio::test]
async fn a_daemon_holding_daemon_lock_is_waited_for_and_its_socket_kept() {
    let d = private_tempdir();
    let sock = d.path().join("p2.sock");
    drop(StdListener::bind(&sock).unwrap());
    let _daemon = DaemonLock::acquire(d.path()).unwrap().unwrap();
    let spawns = Cell::new(0);
    let spawn = || {
        spawns.set(spawns.get() + 1);
        Ok(())
    };
    let e = connect_or_spawn(&sock, spawn, SHORT).await.unwrap_err();
    assert_eq!(spawns.get(), 0);
    assert!(sock.exists(), "a starting daemon's socket is never removed");
    let expected = format!(
        "daemon {} holds {} but did not accept connections on {} within 0.1 s",
        std::process::id(),
        d.path().join(DAEMON_LOCK).display(),
        sock.display()
    );
    assert_eq!(e.message, expected);
}

#[tokio::test]
async fn a_spawn_that_fails_or_never_listens_is_reported() {
    let d = private_tempdir();
    let sock = d.path().join("p2.sock");
    let e = connect_or_spawn(&sock, || Err(io::Error::other("no keel here")), SHORT)
        .await
        .unwrap_err();
    let shown = sock.display();
    assert_eq!(
        e.message,
        format!("cannot start the daemon for {shown}: no keel here")
    );
    let e = connect_or_spawn(&sock, || Ok(()), SHORT).await.unwrap_err();
    let expected = format!("the daemon did not accept connections on {shown} within 0.1 s");
    assert_eq!(e.message, expected);
    assert!(e.hint.unwrap().contains("daemon.log"));
}

#[tokio::test]
async fn a_file_that_is_not_a_socket_is_never_removed() {
    let d = private_tempdir();
    let sock = d.path().join("p2.sock");
    fs::write(&sock, "notes").unwrap();
    let no_spawn = || Err(io::Error::other("must not spawn"));
    let e = connect_or_spawn(&sock, no_spawn, SHORT).await.unwrap_err();
    let expected = format!(
        "{} exists and is not a socket; keel does not remove it",
        sock.display()
    );
    assert_eq!(e.message, expected);
    assert_eq!(fs::read_to_string(&sock).unwrap(), "notes");
}

#[tokio::test]
async fn connect_or_spawn_refuses_a_socket_directory_others_can_enter() {
    let d = private_tempdir();
    fs::set_permissions(d.path(), Permissions::from_mode(0o711)).unwrap();
    let no_spawn = || Err(io::Error::other("must not spawn"));
    let e = connect_or_spawn(&d.path().join("p2.sock"), no_spawn, SHORT)
        .await
        .unwrap_err();
    assert!(
        e.message
            .ends_with("has mode 0711 (group or others have access)"),
        "{e}"
    );
    assert!(!d.path().join(SPAWN_LOCK).exists());
}

#[test]
fn daemon_lock_is_exclusive_holds_the_pid_and_is_freed_on_drop() {
    let d = private_tempdir();
    assert_eq!(lock_state(d.path()).unwrap(), LockState::Free);
    let first = DaemonLock::acquire(d.path()).unwrap().unwrap();
    let pid = std::process::id();
    assert_eq!(
        fs::read_to_string(first.path()).unwrap(),
        format!("{pid}\n")
    );
    assert_eq!(mode(first.path()), 0o600);
    assert!(DaemonLock::acquire(d.path()).unwrap().is_none());
    assert_eq!(
        fs::read_to_string(first.path()).unwrap(),
        format!("{pid}\n")
    );
    assert_eq!(lock_state(d.path()).unwrap(), LockState::Held(Some(pid)));
    drop(first);
    assert_eq!(lock_state(d.path()).unwrap(), LockState::Free);
    assert!(DaemonLock::acquire(d.path()).unwrap().is_some());
}

/// Runs `cmd`, retrying while a freshly written script is still open in a forked sibling.
fn status_of(cmd: &mut Command) -> std::process::ExitStatus {
    loop {
        match cmd.status() {
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy => continue,
            other => return other.unwrap(),
        }
    }
}

#[test]
#[cfg(target_os = "linux")]
fn daemon_command_runs_in_root_with_null_stdio_and_stderr_in_a_private_log() {
    let d = private_tempdir();
    let exe = d.path().join("fake-keel");
    let script = "#!/bin/sh\necho \"cwd=$(pwd)\" >&2\necho \"args=$*\" >&2\n\
                  echo \"stdin=$(readlink /proc/$$/fd/0)\" >&2\n\
                  echo \"stdout=$(readlink /proc/$$/fd/1)\" >&2\n";
    fs::write(&exe, script).unwrap();
    fs::set_permissions(&exe, Permissions::from_mode(0o755)).unwrap();
    let log = d.path().join("home/logs/daemon.log");
    let sock = Path::new("/run/k/p2.sock");
    let mut cmd = daemon_command(&exe, sock, &log, ["--idle-exit", "5"]).unwrap();
    assert!(status_of(&mut cmd).success());
    let text = fs::read_to_string(&log).unwrap();
    let expected = "cwd=/\nargs=daemon run --socket /run/k/p2.sock --spawned --idle-exit 5\n\
                    stdin=/dev/null\nstdout=/dev/null\n";
    assert_eq!(text, expected);
    assert_eq!(mode(&log), 0o600);
    assert_eq!(mode(&d.path().join("home/logs")), 0o700);
    let mut again = daemon_command(&exe, sock, &log, Vec::<String>::new()).unwrap();
    assert!(status_of(&mut again).success());
    assert!(
        fs::read_to_string(&log).unwrap().starts_with(expected),
        "the log is appended"
    );
}

#[test]
fn daemon_command_needs_absolute_paths() {
    let d = private_tempdir();
    let log = d.path().join("daemon.log");
    let e = daemon_command(Path::new("keel"), Path::new("/s"), &log, [""; 0]).unwrap_err();
    assert_eq!(
        e.message,
        "the keel executable path keel is not absolute (the daemon runs in /)"
    );
    let e = daemon_command(Path::new("/bin/keel"), Path::new("s.sock"), &log, [""; 0]).unwrap_err();
    assert_eq!(
        e.message,
        "the socket path s.sock is not absolute (the daemon runs in /)"
    );
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
        .args(["--exact", "client::spawn::tests::child_process"])
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
            let _listener = paths::bind(&sock).unwrap();
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
    let probe = lock_file(&d.path().join(DAEMON_LOCK)).unwrap();
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
