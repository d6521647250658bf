//! Where the daemon's socket lives and the rules that keep other users out, as data: the
//! socket's name and the `sun_path` limit, the places a socket path comes from, the private
//! directory's rule and its refusal, and the peer-uid rule. The client (`client::locate`) and
//! the daemon (`daemon::socket`) do the I/O; nothing here touches a file. Never prints
//! (reasons are returned).

use std::path::{Path, PathBuf};

use super::{DaemonError, DaemonErrorKind};
use crate::kernel::private::{DirError, DirProblem};

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

/// The predicate of a sentence whose subject is the directory (`me`: the uid it must have).
pub fn describe(problem: DirProblem, me: u32) -> String {
    match problem {
        DirProblem::Symlink => "is a symlink".into(),
        DirProblem::NotDir => "is not a directory".into(),
        DirProblem::Owner(uid) => format!("is owned by uid {uid}, not by uid {me}"),
        DirProblem::Mode(mode) => {
            format!("has mode {mode:04o} (group or others have access)")
        }
    }
}

/// The error for a socket directory `dir` that [`crate::kernel::private::prepare_dir`] or
/// [`crate::kernel::private::check_dir`] refused for owner `uid`: naming it and what is wrong,
/// with what the user can do.
pub fn dir_error(dir: &Path, e: &DirError, uid: u32) -> DaemonError {
    let (problem, owner) = match e {
        DirError::Inspect(e) => return DaemonError::io("inspect the socket directory", dir, e),
        DirError::Create(e) => return DaemonError::io("create the socket directory", dir, e),
        DirError::Unfit { problem, owner } => (*problem, *owner),
    };
    let shown = dir.display();
    let err = DaemonError::new(format!(
        "the daemon's socket directory {shown} {}",
        describe(problem, uid)
    ));
    let elsewhere = "set KEEL_SOCKET (or --socket) to a path in a directory of your own, or \
                     XDG_RUNTIME_DIR to your private runtime directory";
    match problem {
        DirProblem::Mode(_) => err.with_hint(format!("run `chmod 700 {shown}`")),
        // Made by another user (in /tmp, say): only its owner or root can remove it.
        _ if owner != uid => err.with_hint(format!(
            "another user (uid {owner}) made it and keel will not use it: {elsewhere}; or ask \
             an administrator to remove {shown}"
        )),
        _ => err.with_hint(format!("remove {shown}, or {elsewhere}")),
    }
}

/// Refuses an explicit socket path (`what`: the flag or variable that gave it) that is empty
/// or names a directory.
pub fn check_explicit(path: &Path, what: &str) -> Result<(), DaemonError> {
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
    Ok(())
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
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! The rules against real directories: made by `kernel::private`, refused here.
    use std::fs::{self, Permissions};
    use std::os::unix::fs::{symlink, PermissionsExt};

    use super::*;
    use crate::kernel::private;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn private_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), Permissions::from_mode(0o700)).unwrap();
        d
    }

    /// What the client and the daemon do before they use a socket directory.
    fn prepare_dir(dir: &Path) -> Result<(), DaemonError> {
        private::prepare_dir(dir).map_err(|e| dir_error(dir, &e, private::euid()))
    }

    fn verify_dir(dir: &Path, uid: u32) -> Result<(), DaemonError> {
        private::check_dir(dir, uid).map_err(|e| dir_error(dir, &e, uid))
    }

    #[test]
    fn a_directory_another_user_made_is_refused_with_what_the_victim_can_do() {
        let d = private_tempdir();
        let e = verify_dir(d.path(), private::euid() + 1).unwrap_err();
        let hint = e.hint.unwrap();
        assert!(
            hint.starts_with(&format!("another user (uid {}) made it", private::euid())),
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
        let hint = verify_dir(&file, private::euid())
            .unwrap_err()
            .hint
            .unwrap();
        assert!(hint.starts_with(&format!("remove {}, or set", file.display())));
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
        let e = verify_dir(&real, private::euid() + 1).unwrap_err();
        assert!(e.message.ends_with(&format!(
            "is owned by uid {}, not by uid {}",
            private::euid(),
            private::euid() + 1
        )));
        let dangling = d.path().join("dangling");
        symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert!(prepare_dir(&dangling)
            .unwrap_err()
            .message
            .ends_with("is a symlink"));
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
}
