//! Where the daemon's socket lives and the checks that keep other users out: the choice of
//! path, the private socket directory (lstat-verified), the `sun_path` length, binding under
//! umask 077, and the peer-uid check on a connection. Reads no environment variable (callers
//! pass the values in) and never prints (reasons are returned).

use std::fs::{self, DirBuilder, Metadata, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::sys::stat::{umask, Mode};
use tokio::net::{UnixListener, UnixStream};

use super::{DaemonError, DaemonErrorKind};
use crate::kernel::private;

/// File name of the socket: `p` + the protocol major, so a keel never talks to a daemon of an
/// incompatible protocol (both can run side by side).
pub const SOCKET_NAME: &str = "p2.sock";

/// Bytes a Unix socket address (`sun_path`) holds, its terminating NUL included.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const SUN_PATH_MAX: usize = 108;
/// Bytes a Unix socket address (`sun_path`) holds, its terminating NUL included.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const SUN_PATH_MAX: usize = 104;

/// Mode of the bound socket (the private directory is what keeps others out; this is defence
/// in depth, since some systems ignore socket permissions).
pub const SOCKET_MODE: u32 = 0o600;

/// Where the socket path came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketOrigin {
    /// `--socket PATH`.
    Flag,
    /// `$KEEL_SOCKET`.
    Env,
    /// `$XDG_RUNTIME_DIR/keel/p2.sock`.
    RuntimeDir,
    /// `$KEEL_HOME/run/p2.sock`.
    Home,
    /// `/tmp/keel-<uid>/p2.sock`: only when `$KEEL_HOME/run/p2.sock` does not fit `sun_path`.
    Tmp,
}

/// The chosen socket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketChoice {
    /// Absolute path of the socket.
    pub path: PathBuf,
    pub origin: SocketOrigin,
    /// Why `$XDG_RUNTIME_DIR` was set but not used (for the caller's log); `None` when it was
    /// used or not set.
    pub fallback: Option<String>,
}

/// The effective uid of this process: the only uid the daemon serves.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Chooses the socket path: `flag` (`--socket`), else `env_socket` (`$KEEL_SOCKET`; empty
/// counts as unset), else `$XDG_RUNTIME_DIR/keel/p2.sock` when that directory is a real
/// directory owned by `uid` with no group or other bits, else `$KEEL_HOME/run/p2.sock`
/// (`keel_home`, private like the rest of it) when it fits `sun_path`, else
/// `/tmp/keel-<uid>/p2.sock` (a directory another user may have made first: the checks refuse
/// it then, with a hint). A relative flag or variable is made absolute against the current
/// directory (the daemon runs in `/`). An explicit path that is empty, names a directory or is
/// too long is an error.
pub fn socket_path(
    env_socket: Option<&Path>,
    flag: Option<&Path>,
    xdg_runtime_dir: Option<&Path>,
    keel_home: &Path,
    uid: u32,
) -> Result<SocketChoice, DaemonError> {
    if let Some(flag) = flag {
        return explicit(flag, "--socket", SocketOrigin::Flag);
    }
    if let Some(env) = env_socket.filter(|p| !p.as_os_str().is_empty()) {
        return explicit(env, "KEEL_SOCKET", SocketOrigin::Env);
    }
    let mut fallback = None;
    if let Some(xdg) = xdg_runtime_dir.filter(|p| !p.as_os_str().is_empty()) {
        let path = xdg.join("keel").join(SOCKET_NAME);
        let problem = runtime_dir_problem(xdg, uid)
            .or_else(|| check_sun_path(&path).err().map(|e| e.message));
        match problem {
            None => {
                return Ok(SocketChoice {
                    path,
                    origin: SocketOrigin::RuntimeDir,
                    fallback: None,
                })
            }
            Some(why) => {
                fallback = Some(format!(
                    "XDG_RUNTIME_DIR {} is not used: {why}",
                    xdg.display()
                ))
            }
        }
    }
    let home = std::path::absolute(keel_home.join("run").join(SOCKET_NAME));
    if let Some(path) = home.ok().filter(|p| check_sun_path(p).is_ok()) {
        return Ok(SocketChoice {
            path,
            origin: SocketOrigin::Home,
            fallback,
        });
    }
    Ok(SocketChoice {
        path: PathBuf::from(format!("/tmp/keel-{uid}")).join(SOCKET_NAME),
        origin: SocketOrigin::Tmp,
        fallback,
    })
}

fn explicit(path: &Path, what: &str, origin: SocketOrigin) -> Result<SocketChoice, DaemonError> {
    if path.as_os_str().is_empty() {
        return Err(DaemonError::new(format!("{what} is empty"))
            .with_hint("give the path of the daemon's socket file"));
    }
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") || path.file_name().is_none() {
        return Err(DaemonError::new(format!(
            "{what} {} names a directory, not a socket file",
            path.display()
        ))
        .with_hint(format!(
            "use a file in it, e.g. {}",
            path.join(SOCKET_NAME).display()
        )));
    }
    let path = std::path::absolute(path).map_err(|e| DaemonError::io("resolve", path, &e))?;
    check_sun_path(&path)?;
    Ok(SocketChoice {
        path,
        origin,
        fallback: None,
    })
}

/// Why `dir` is no fit for `$XDG_RUNTIME_DIR`, or `None` when it is.
fn runtime_dir_problem(dir: &Path, uid: u32) -> Option<String> {
    if !dir.is_absolute() {
        return Some("it is not an absolute path".into());
    }
    match fs::symlink_metadata(dir) {
        Err(e) => Some(format!("it cannot be read: {e}")),
        Ok(meta) => dir_problem(&meta, uid).map(|p| format!("it {}", p.describe(uid))),
    }
}

/// What makes a directory unfit to hold the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirProblem {
    Symlink,
    NotDir,
    Owner(u32),
    Mode(u32),
}

impl DirProblem {
    /// The predicate of a sentence whose subject is the directory.
    fn describe(self, me: u32) -> String {
        match self {
            DirProblem::Symlink => "is a symlink".into(),
            DirProblem::NotDir => "is not a directory".into(),
            DirProblem::Owner(uid) => format!("is owned by uid {uid}, not by uid {me}"),
            DirProblem::Mode(mode) => {
                format!("has mode {mode:04o} (group or others have access)")
            }
        }
    }
}

/// lstat facts against the rule: a real directory, owned by `uid`, `mode & 0o077 == 0`.
fn dir_problem(meta: &Metadata, uid: u32) -> Option<DirProblem> {
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        Some(DirProblem::Symlink)
    } else if !meta.is_dir() {
        Some(DirProblem::NotDir)
    } else if meta.uid() != uid {
        Some(DirProblem::Owner(meta.uid()))
    } else if mode & 0o077 != 0 {
        Some(DirProblem::Mode(mode))
    } else {
        None
    }
}

/// Makes `dir` ready to hold the socket and the lock files: created 0700 if missing (missing
/// parents too, whatever the umask), then verified with lstat (a real directory, not a
/// symlink, owned by the effective uid, no group or other bits). An existing directory is
/// never changed: a wrong one is refused with an error naming it and what is wrong.
pub fn prepare_dir(dir: &Path) -> Result<(), DaemonError> {
    match fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_private_dir(dir)?,
        Err(e) => return Err(DaemonError::io("inspect the socket directory", dir, &e)),
    }
    verify_dir(dir, euid())
}

fn create_private_dir(dir: &Path) -> Result<(), DaemonError> {
    let fail = |e: &io::Error| DaemonError::io("create the socket directory", dir, e);
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        private::create_dir_all(parent).map_err(|e| fail(&e))?;
    }
    match DirBuilder::new().mode(private::DIR_MODE).create(dir) {
        // Made here: set the exact mode (the umask may have removed owner bits).
        Ok(()) => fs::set_permissions(dir, Permissions::from_mode(private::DIR_MODE))
            .map_err(|e| fail(&e)),
        // Someone else made it meanwhile: it is verified like any existing directory.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(fail(&e)),
    }
}

/// lstat-checks `dir` against the rule for owner `uid`.
pub(crate) fn verify_dir(dir: &Path, uid: u32) -> Result<(), DaemonError> {
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| DaemonError::io("inspect the socket directory", dir, &e))?;
    let Some(problem) = dir_problem(&meta, uid) else {
        return Ok(());
    };
    let shown = dir.display();
    let err = DaemonError::new(format!(
        "the daemon's socket directory {shown} {}",
        problem.describe(uid)
    ));
    let elsewhere = "set KEEL_SOCKET (or --socket) to a path in a directory of your own, or \
                     XDG_RUNTIME_DIR to your private runtime directory";
    Err(match problem {
        DirProblem::Mode(_) => err.with_hint(format!("run `chmod 700 {shown}`")),
        // Made by another user (in /tmp, say): only its owner or root can remove it.
        _ if meta.uid() != uid => err.with_hint(format!(
            "another user (uid {}) made it and keel will not use it: {elsewhere}; or ask an \
             administrator to remove {shown}",
            meta.uid()
        )),
        _ => err.with_hint(format!("remove {shown}, or {elsewhere}")),
    })
}

/// Refuses a socket path longer than `sun_path` holds (its bytes plus the NUL).
pub fn check_sun_path(path: &Path) -> Result<(), DaemonError> {
    check_sun_path_limit(path, SUN_PATH_MAX)
}

fn check_sun_path_limit(path: &Path, limit: usize) -> Result<(), DaemonError> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.contains(&0) {
        return Err(DaemonError::new(format!(
            "the socket path {} contains a NUL byte",
            path.display()
        )));
    }
    if bytes.len() < limit {
        return Ok(());
    }
    Err(DaemonError::new(format!(
        "the socket path {} is {} bytes; with its terminating NUL that exceeds the {limit}-byte \
         limit of a Unix socket address on this system",
        path.display(),
        bytes.len()
    ))
    .with_hint(format!(
        "set KEEL_SOCKET (or --socket) to a path shorter than {limit} bytes"
    )))
}

/// Binds the daemon's socket at `path` in its verified private directory (see
/// [`prepare_dir`]), under umask 077 so it is never reachable through looser bits, then makes
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
/// others; a client can call it to check the daemon. `Err` is the reason, naming both uids
/// (kind [`DaemonErrorKind::ForeignPeer`]), or why the credentials could not be read.
pub fn peer_allowed(stream: &UnixStream) -> Result<(), DaemonError> {
    let cred = stream
        .peer_cred()
        .map_err(|e| DaemonError::new(format!("cannot read the peer's credentials: {e}")))?;
    uid_allowed(cred.uid(), euid())
}

/// The peer-uid rule: `peer` must be `me` (else a [`DaemonErrorKind::ForeignPeer`] error).
pub fn uid_allowed(peer: u32, me: u32) -> Result<(), DaemonError> {
    if peer == me {
        Ok(())
    } else {
        Err(DaemonError::new(format!(
            "the peer runs as uid {peer}, not as this process's effective uid {me}"
        ))
        .with_kind(DaemonErrorKind::ForeignPeer { uid: peer }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn private_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), Permissions::from_mode(0o700)).unwrap();
        d
    }

    const HOME: &str = "/home/me/.keel";

    #[test]
    fn socket_path_is_flag_then_env_then_runtime_dir_then_keel_home_then_tmp() {
        let xdg = private_tempdir();
        let (flag, env) = (Path::new("/f/flag.sock"), Path::new("/e/env.sock"));
        let me = euid();
        let pick = |e, f, x| socket_path(e, f, x, Path::new(HOME), me).unwrap();
        let c = pick(Some(env), Some(flag), Some(xdg.path()));
        assert_eq!((c.path.as_path(), c.origin), (flag, SocketOrigin::Flag));
        let c = pick(Some(env), None, Some(xdg.path()));
        assert_eq!((c.path.as_path(), c.origin), (env, SocketOrigin::Env));
        let c = pick(Some(Path::new("")), None, Some(xdg.path()));
        assert_eq!(c.path, xdg.path().join("keel/p2.sock"));
        assert_eq!((c.origin, c.fallback), (SocketOrigin::RuntimeDir, None));
        let c = pick(None, None, None);
        assert_eq!(c.path, Path::new(HOME).join("run/p2.sock"));
        assert_eq!((c.origin, c.fallback), (SocketOrigin::Home, None));
    }

    #[test]
    fn the_tmp_socket_is_used_only_when_keel_homes_does_not_fit_sun_path() {
        // /tmp/keel-<uid> is a name another user can take first; $KEEL_HOME/run is private.
        let me = euid();
        // `/run/p2.sock` is 12 bytes: this home makes a path of SUN_PATH_MAX - 1 bytes.
        let home = format!("/{}", "k".repeat(SUN_PATH_MAX - 1 - 12 - 1));
        let fits = socket_path(None, None, None, Path::new(&home), me).unwrap();
        assert_eq!(fits.path.as_os_str().len(), SUN_PATH_MAX - 1);
        assert_eq!(fits.origin, SocketOrigin::Home);
        let home = format!("{home}k");
        let long = socket_path(None, None, None, Path::new(&home), me).unwrap();
        assert_eq!(long.path, PathBuf::from(format!("/tmp/keel-{me}/p2.sock")));
        assert_eq!(long.origin, SocketOrigin::Tmp);
    }

    #[test]
    fn a_directory_another_user_made_is_refused_with_what_the_victim_can_do() {
        let d = private_tempdir();
        let e = verify_dir(d.path(), euid() + 1).unwrap_err();
        let hint = e.hint.unwrap();
        assert!(
            hint.starts_with(&format!("another user (uid {}) made it", euid())),
            "{hint}"
        );
        for what in [
            "KEEL_SOCKET",
            "XDG_RUNTIME_DIR",
            "ask an administrator to remove",
        ] {
            assert!(hint.contains(what), "{hint}");
        }
        let file = d.path().join("file");
        fs::write(&file, "").unwrap();
        let hint = verify_dir(&file, euid()).unwrap_err().hint.unwrap();
        assert!(hint.starts_with(&format!("remove {}, or set", file.display())));
    }

    #[test]
    fn unfit_runtime_dir_falls_back_with_the_reason() {
        let xdg = private_tempdir();
        let me = euid();
        let reason = |x: &Path, uid| {
            let c = socket_path(None, None, Some(x), Path::new(HOME), uid).unwrap();
            assert_eq!(c.path, Path::new(HOME).join("run/p2.sock"));
            c.fallback.unwrap()
        };
        let other = reason(xdg.path(), me + 1);
        assert!(
            other.contains(&format!("is owned by uid {me}, not by uid {}", me + 1)),
            "{other}"
        );
        fs::set_permissions(xdg.path(), Permissions::from_mode(0o750)).unwrap();
        let loose = reason(xdg.path(), me);
        assert!(loose.starts_with(&format!(
            "XDG_RUNTIME_DIR {} is not used",
            xdg.path().display()
        )));
        assert!(loose.contains("has mode 0750"), "{loose}");
        let link = xdg.path().join("link");
        symlink("/", &link).unwrap();
        assert!(reason(&link, me).contains("is a symlink"));
        assert!(reason(Path::new("run/user"), me).contains("not an absolute path"));
        assert!(reason(&xdg.path().join("gone"), me).contains("cannot be read"));
        let deep = private_tempdir();
        let mut long = deep.path().to_path_buf();
        while long.as_os_str().len() < SUN_PATH_MAX {
            long.push("abcdefghij");
        }
        fs::create_dir_all(&long).unwrap();
        fs::set_permissions(&long, Permissions::from_mode(0o700)).unwrap();
        assert!(reason(&long, me).contains("-byte limit"));
    }

    #[test]
    fn explicit_socket_paths_are_checked_and_made_absolute() {
        let me = euid();
        let c = socket_path(
            None,
            Some(Path::new("rel/s.sock")),
            None,
            Path::new(HOME),
            me,
        )
        .unwrap();
        assert!(
            c.path.is_absolute() && c.path.ends_with("rel/s.sock"),
            "{:?}",
            c.path
        );
        let err = |e, f| socket_path(e, f, None, Path::new(HOME), me).unwrap_err();
        assert_eq!(err(None, Some(Path::new(""))).message, "--socket is empty");
        let dir = err(Some(Path::new("/tmp/x/")), None);
        assert_eq!(
            dir.message,
            "KEEL_SOCKET /tmp/x/ names a directory, not a socket file"
        );
        let long = format!("/{}", "s".repeat(SUN_PATH_MAX));
        let e = err(None, Some(Path::new(&long)));
        assert!(e.message.contains("exceeds the"), "{}", e.message);
        assert!(e.hint.unwrap().contains("KEEL_SOCKET"));
    }

    #[test]
    fn sun_path_over_the_limit_is_refused_naming_length_and_limit() {
        let fits = format!("/{}", "a".repeat(106)); // 107 bytes + NUL = 108
        check_sun_path_limit(Path::new(&fits), 108).unwrap();
        let over = format!("{fits}b");
        let e = check_sun_path_limit(Path::new(&over), 108).unwrap_err();
        assert!(e.message.contains("is 108 bytes"), "{}", e.message);
        assert!(e.message.contains("the 108-byte limit"), "{}", e.message);
        assert_eq!(
            e.hint.as_deref(),
            Some("set KEEL_SOCKET (or --socket) to a path shorter than 108 bytes")
        );
        let bsd = check_sun_path_limit(Path::new(&fits[..104]), 104).unwrap_err();
        assert!(bsd.message.contains("is 104 bytes") && bsd.message.contains("104-byte limit"));
        check_sun_path_limit(Path::new(&fits[..103]), 104).unwrap();
        assert!(check_sun_path(Path::new("/a\0b"))
            .unwrap_err()
            .message
            .contains("NUL"));
    }

    #[test]
    fn prepare_dir_creates_missing_directories_0700() {
        let d = private_tempdir();
        let dir = d.path().join("a/b/keel");
        prepare_dir(&dir).unwrap();
        assert_eq!(mode(&d.path().join("a")), 0o700);
        assert_eq!(mode(&dir), 0o700);
        prepare_dir(&dir).unwrap();
    }

    #[test]
    fn prepare_dir_refuses_a_symlink_a_loose_dir_a_file_and_another_owner() {
        let d = private_tempdir();
        let real = d.path().join("real");
        fs::create_dir(&real).unwrap();
        fs::set_permissions(&real, Permissions::from_mode(0o700)).unwrap();
        let link = d.path().join("link");
        symlink(&real, &link).unwrap();
        let e = prepare_dir(&link).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "the daemon's socket directory {} is a symlink",
                link.display()
            )
        );
        fs::set_permissions(&real, Permissions::from_mode(0o750)).unwrap();
        let e = prepare_dir(&real).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "the daemon's socket directory {} has mode 0750 (group or others have access)",
                real.display()
            )
        );
        assert_eq!(e.hint, Some(format!("run `chmod 700 {}`", real.display())));
        assert_eq!(mode(&real), 0o750, "an existing directory is never changed");
        fs::set_permissions(&real, Permissions::from_mode(0o700)).unwrap();
        prepare_dir(&real).unwrap();
        let file = d.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(prepare_dir(&file)
            .unwrap_err()
            .message
            .ends_with("is not a directory"));
        let e = verify_dir(&real, euid() + 1).unwrap_err();
        assert!(e.message.ends_with(&format!(
            "is owned by uid {}, not by uid {}",
            euid(),
            euid() + 1
        )));
        let dangling = d.path().join("dangling");
        symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert!(prepare_dir(&dangling)
            .unwrap_err()
            .message
            .ends_with("is a symlink"));
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
        let long = d.path().join("s".repeat(SUN_PATH_MAX));
        assert!(bind(&long).unwrap_err().message.contains("-byte limit"));
        fs::set_permissions(d.path(), Permissions::from_mode(0o755)).unwrap();
        let e = bind(&d.path().join("p2.sock")).unwrap_err();
        assert!(e.message.contains("has mode 0755"), "{}", e.message);
        assert!(!d.path().join("p2.sock").exists());
    }

    #[test]
    fn uid_allowed_only_for_the_same_uid_and_the_refusal_names_both() {
        uid_allowed(1000, 1000).unwrap();
        let why = uid_allowed(1001, 1000).unwrap_err();
        assert_eq!(
            why.message,
            "the peer runs as uid 1001, not as this process's effective uid 1000"
        );
        assert_eq!(why.kind, DaemonErrorKind::ForeignPeer { uid: 1001 });
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
}
