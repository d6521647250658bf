//! Finding the daemon, the client's side of the socket contract (`wire::socket`): which
//! socket path to use (flag, variable, runtime directory, `$KEEL_HOME`, `/tmp`) and whether a
//! daemon holds `daemon.lock`. Reads no environment variable (callers pass the values in);
//! never prints (reasons are returned).

use std::fs::{OpenOptions, TryLockError};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::kernel::private::{self, DirError};
use crate::wire::socket::lock::{LockState, DAEMON_LOCK};
use crate::wire::socket::paths::{
    check_explicit, check_sun_path, describe, SocketChoice, SocketOrigin, SOCKET_NAME,
};
use crate::wire::socket::DaemonError;

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
    check_explicit(path, what)?;
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
    match private::check_dir(dir, uid) {
        Ok(()) => None,
        Err(DirError::Inspect(e) | DirError::Create(e)) => Some(format!("it cannot be read: {e}")),
        Err(DirError::Unfit { problem, .. }) => Some(format!("it {}", describe(problem, uid))),
    }
}

/// Reads whether `dir/daemon.lock` is held (taking and releasing it at once when it is free;
/// a daemon acquiring it meanwhile retries for
/// [`LOCK_GRACE`](crate::wire::socket::lock::LOCK_GRACE)).
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::fs::{self, Permissions};
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;
    use crate::wire::socket::paths::SUN_PATH_MAX;

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
        let me = private::euid();
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
        let me = private::euid();
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
    fn unfit_runtime_dir_falls_back_with_the_reason() {
        let xdg = private_tempdir();
        let me = private::euid();
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
        let me = private::euid();
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
}
