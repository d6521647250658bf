//! bubblewrap: finding it, probing once whether it works here, and the argv that runs one
//! command under a [`SandboxPolicy`]. Owns only that argv; it never spawns the sandboxed
//! command itself (the `bash` tool does).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::policy::{SandboxMode, SandboxPolicy};

/// A bubblewrap that works here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bwrap {
    pub path: PathBuf,
    /// Whether a fresh `/proc` can be mounted (not in some containers).
    pub proc_mount: bool,
}

/// The first `bwrap` on `path_var` (a `PATH` value) that is not inside `cwd` (a workspace
/// could ship its own).
pub fn find(path_var: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    let dirs = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    std::env::split_paths(dirs)
        .filter(|d| d.is_absolute() && !d.starts_with(cwd))
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

/// The flags that leave a command no capability and no way to make namespaces, for any
/// caller, root included (issue 43, point 1): a user namespace of its own (as root, bubblewrap
/// makes none unless asked, and the command kept every capability of the host: `CAP_SYS_ADMIN`
/// could unmount the masks), nested user namespaces disabled (bubblewrap caps the count at the
/// one it is in), and every capability dropped, bounding set included. bubblewrap sets
/// `PR_SET_NO_NEW_PRIVS` itself.
pub const WALLS: [&str; 4] = ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"];

/// Runs `true` under `bwrap` with the namespaces and [`WALLS`] the sandbox uses: with a fresh
/// `/proc`, else without one. `None` when neither works (no user namespaces, AppArmor,
/// seccomp, a bubblewrap older than 0.8 without `--disable-userns`).
pub fn probe(path: &Path) -> Option<Bwrap> {
    let works = |proc_mount: bool| {
        let mut cmd = Command::new(path);
        cmd.args(["--unshare-pid", "--unshare-net", "--die-with-parent"])
            .args(WALLS)
            .args(["--ro-bind", "/", "/", "--dev", "/dev"]);
        if proc_mount {
            cmd.args(["--proc", "/proc"]);
        }
        cmd.args(["--", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    [true, false]
        .into_iter()
        .find(|&p| works(p))
        .map(|proc_mount| Bwrap {
            path: path.to_path_buf(),
            proc_mount,
        })
}

/// The arguments before `--`: the whole host read-only, a private `/tmp` (`tmp` on the host),
/// the writable roots bound writable, secrets and runtime directories masked, git directories
/// bound on themselves and protected paths that exist re-bound read-only, own PID namespace,
/// no network unless the policy allows it.
pub fn args(bwrap: &Bwrap, policy: &SandboxPolicy, tmp: &Path, cwd: &Path) -> Vec<OsString> {
    let mut a = Args::default();
    a.flags(&["--new-session", "--die-with-parent", "--unshare-pid"]);
    a.flags(&WALLS);
    if !policy.network {
        a.flags(&["--unshare-net"]);
    }
    a.pair("--ro-bind", Path::new("/"), Path::new("/"));
    a.one("--dev", Path::new("/dev"));
    if bwrap.proc_mount {
        a.one("--proc", Path::new("/proc"));
    }
    a.pair("--bind", tmp, Path::new("/tmp"));
    // Read-only, the workspace is bound again, read-only: one under `/tmp` would otherwise be
    // hidden by the private `/tmp` (and a command could not even start in it).
    let (roots, bind): (&[PathBuf], &str) = match policy.mode {
        SandboxMode::WorkspaceWrite => (&policy.writable_roots, "--bind"),
        SandboxMode::ReadOnly => (&policy.writable_roots, "--ro-bind"),
        SandboxMode::Off => (&[], "--bind"),
    };
    let writable = policy.mode == SandboxMode::WorkspaceWrite;
    // A mask over a root's ancestor goes first (the root is bound again on top of it); a mask
    // inside a root goes after the root's bind.
    let (before, after): (Vec<&PathBuf>, Vec<&PathBuf>) = policy
        .deny_read
        .iter()
        .filter(|d| visible(d, roots))
        .partition(|d| roots.iter().any(|r| r.starts_with(d)));
    before.into_iter().for_each(|d| a.mask(d));
    for root in roots.iter().filter(|r| r.exists()) {
        a.pair(bind, root, root);
    }
    // What git writes outside a linked worktree (its own git directory, the shared objects
    // and refs): writable, the shared config and hooks not.
    let git_writable: &[PathBuf] = match writable {
        true => &policy.git_writable,
        false => &[],
    };
    for w in git_writable.iter().filter(|w| w.exists()) {
        a.pair("--bind", w, w);
    }
    after.into_iter().for_each(|d| a.mask(d));
    for p in policy.allow_read.iter().filter(|p| visible(p, roots)) {
        a.pair("--ro-bind", p, p);
    }
    // Each git directory inside a root is a mount of itself (a mount point cannot be renamed
    // or removed: `mv .git x` fails with EBUSY), then its hooks and config are read-only.
    // Nothing is bound that does not exist: bubblewrap would create it on the user's disk.
    let inside = |p: &&PathBuf| {
        writable
            && p.exists()
            && roots
                .iter()
                .chain(git_writable)
                .any(|r| p.starts_with(r) && *p != r)
    };
    for g in policy.git_dirs.iter().filter(inside) {
        a.pair("--bind", g, g);
    }
    for p in policy.protected.iter().filter(inside) {
        a.pair("--ro-bind", p, p);
    }
    // Read-only only now: a root, an allowed path or a protected path bound inside a masked
    // directory needs its mount point made in the mask's tmpfs first.
    for p in std::mem::take(&mut a.masked) {
        a.one("--remount-ro", &p);
    }
    a.one("--chdir", cwd);
    a.pair("--setenv", Path::new("TMPDIR"), Path::new("/tmp"));
    a.argv
}

/// Whether `p` is worth a mount: it exists, and it is not under the private `/tmp` (where the
/// host's files are not visible anyway) unless a writable root there holds it.
fn visible(p: &Path, roots: &[PathBuf]) -> bool {
    p.exists() && (!p.starts_with("/tmp") || roots.iter().any(|r| p.starts_with(r)))
}

#[derive(Default)]
struct Args {
    argv: Vec<OsString>,
    /// The directories masked with a tmpfs, made read-only after every bind.
    masked: Vec<PathBuf>,
}

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.argv.extend(flags.iter().map(OsString::from));
    }

    fn one(&mut self, flag: &str, p: &Path) {
        self.argv.push(flag.into());
        self.argv.push(p.into());
    }

    fn pair(&mut self, flag: &str, from: &Path, to: &Path) {
        self.one(flag, from);
        self.argv.push(to.into());
    }

    /// A directory becomes an empty tmpfs (read-only once the binds are done); a file or
    /// socket reads as `/dev/null`.
    fn mask(&mut self, p: &Path) {
        if p.is_dir() {
            self.one("--tmpfs", p);
            self.masked.push(p.to_path_buf());
        } else {
            self.pair("--ro-bind", Path::new("/dev/null"), p);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::policy::Places;
    use super::*;

    #[test]
    fn masks_go_around_the_roots_bind() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("home/work/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("home/.ssh")).unwrap();
        std::fs::create_dir_all(root.join("home/work/.ssh")).unwrap();
        let places = Places {
            cwd: root.join("home/work"),
            home: Some(root.join("home")),
            account_home: None,
            keel_home: None,
            runtime: vec![],
        };
        let extra = [PathBuf::from(".ssh")];
        let policy = SandboxPolicy::new(
            SandboxMode::WorkspaceWrite,
            &places,
            &[],
            &extra,
            &[],
            false,
        );
        let b = Bwrap {
            path: "bwrap".into(),
            proc_mount: true,
        };
        let argv: Vec<String> = args(&b, &policy, Path::new("/t"), &places.cwd)
            .into_iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let at = |s: &str| argv.iter().position(|a| a == s).unwrap();
        let work = root.join("home/work").display().to_string();
        let bind = argv
            .windows(3)
            .position(|w| w[0] == "--bind" && w[1] == work);
        let inner = root.join("home/work/.ssh").display().to_string();
        assert!(bind.unwrap() < at(&inner), "{argv:?}");
        assert!(argv.contains(&"--unshare-net".to_string()));
        let hooks = root.join("home/work/.git/hooks").display().to_string();
        assert!(at(&hooks) > bind.unwrap());
    }
}
