//! `SandboxPolicy`: what a sandboxed tool may read, write and reach (`DESIGN.md` §14), as plain
//! paths, and the in-process checks the file tools make against it on the real path. Owns the
//! default lists (secrets, runtime directories, protected paths); it never reads settings or the
//! process environment: the caller hands it the places and the lists.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::gitdirs;

/// How much a tool process may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// The writable roots (the session's cwd, extra directories) and a private /tmp are
    /// writable; everything else is read-only; secrets are unreadable.
    WorkspaceWrite,
    /// Nothing on the host is writable (a private /tmp is); secrets are unreadable.
    ReadOnly,
    /// No sandbox (`danger-full-access` is an alias).
    Off,
}

impl SandboxMode {
    /// `workspace-write`, `read-only`, `off` or `danger-full-access`.
    pub fn from_name(name: &str) -> Option<SandboxMode> {
        match name {
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "read-only" => Some(SandboxMode::ReadOnly),
            "off" | "danger-full-access" => Some(SandboxMode::Off),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

/// Secrets under the home directory that are unreadable by default.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".npmrc",
    ".pypirc",
    // Other agents' homes: sessions, keys, settings.
    ".codex",
    ".claude",
    ".gemini",
    ".pi",
];

/// Paths inside each writable root that stay read-only whether or not they exist: a model can
/// commit, but cannot plant a hook, change its own policy, or write what keel or another agent
/// reads as instructions or settings (`DESIGN.md` §14). The hooks and config of every git
/// directory, at any depth, are protected too ([`SandboxPolicy::write_denied`]).
pub const PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".keel",
    ".claude",
    ".mcp.json",
    ".lsp.json",
    "AGENTS.md",
    "CLAUDE.md",
    ".agents/skills",
    ".worktreeinclude",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
];

/// Paths under a home directory that something outside the sandbox runs or reads as
/// configuration later (a login shell, git, the user's `PATH`, systemd, the desktop): read-only
/// when a writable root holds that home (the workspace is `$HOME`, or contains it).
pub const HOME_PROTECTED: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".config/fish",
    ".gitconfig",
    ".config/git",
    ".local/bin",
    ".config/systemd/user",
    ".config/autostart",
    ".ssh",
];

/// Sockets and runtime directories of any session that are never reachable from inside.
const RUNTIME: &[&str] = &[
    "/run/user",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman",
    "/run/dbus",
    "/var/run/dbus",
];

/// Where the session is: what the default lists are made of.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// The session's working directory (the first writable root).
    pub cwd: PathBuf,
    /// `$HOME`, if known: its secrets are denied.
    pub home: Option<PathBuf>,
    /// The account's home in the password database, when it is not `$HOME` (a changed `HOME`
    /// does not move the secrets): denied the same way.
    pub account_home: Option<PathBuf>,
    /// `$KEEL_HOME`: sessions hold code and keys, the daemon's socket lives under it.
    pub keel_home: Option<PathBuf>,
    /// Socket paths and runtime directories to hide: `$XDG_RUNTIME_DIR`, the directories of
    /// `$KEEL_SOCKET` and `$SSH_AUTH_SOCK`.
    pub runtime: Vec<PathBuf>,
}

/// The policy in force for the processes and file tools of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Writable under `workspace-write` (real paths).
    pub writable_roots: Vec<PathBuf>,
    /// Read-only inside the writable roots (those that exist are mounted read-only by
    /// bubblewrap; all are refused to the file tools and checked after each `bash` call).
    pub protected: Vec<PathBuf>,
    /// The git directories of the writable roots when the policy was made (see
    /// [`gitdirs::of_root`], [`gitdirs::walk`]): bubblewrap mounts each on itself, so it
    /// cannot be renamed.
    #[serde(default)]
    pub git_dirs: Vec<PathBuf>,
    /// Under `workspace-write`, also writable to commands (not to the file tools, never
    /// walked): what git writes outside a writable root that is a linked worktree (its own
    /// git directory, the repository's objects, refs and logs; see
    /// [`gitdirs::linked_worktree_writes`]), so that a session in a worktree can commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub git_writable: Vec<PathBuf>,
    /// The protected paths are writable (a file tool's call the user approved); never sent to
    /// a sandboxed process.
    #[serde(skip)]
    pub unprotected: bool,
    /// Unreadable (and, for sockets, unreachable).
    pub deny_read: Vec<PathBuf>,
    /// Readable again although under a `deny_read` path.
    pub allow_read: Vec<PathBuf>,
    /// Whether tool processes may use the network.
    pub network: bool,
    /// With `network` false: the hosts reachable through keel's proxy (bubblewrap only; see
    /// [`super::network::Network`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_allow: Option<Vec<super::network::HostPattern>>,
}

/// The files of a linked worktree's git directory that send git elsewhere or configure it:
/// never writable, though git writes the rest of that directory.
pub const ADMIN_PROTECTED: &[&str] = &["commondir", "gitdir", "config.worktree"];

impl SandboxPolicy {
    /// The policy for `places`: the defaults plus the given lists (the flag fills `mode`; the
    /// settings `sandbox.*`/`permissions.additionalDirectories` fill the rest). Relative paths
    /// are taken against the cwd; every path is made real where it exists.
    pub fn new(
        mode: SandboxMode,
        places: &Places,
        extra_writable: &[PathBuf],
        extra_deny_read: &[PathBuf],
        allow_read: &[PathBuf],
        network: bool,
    ) -> SandboxPolicy {
        let abs = |p: &PathBuf| real(&places.cwd.join(p));
        let mut writable_roots = vec![real(&places.cwd)];
        writable_roots.extend(extra_writable.iter().map(abs));
        let mut protected = Vec::new();
        let mut git_dirs = Vec::new();
        for root in writable_roots
            .iter()
            .filter(|_| mode == SandboxMode::WorkspaceWrite)
        {
            protected.extend(PROTECTED.iter().map(|p| root.join(p)));
            let mut dirs = gitdirs::of_root(root);
            dirs.extend(gitdirs::walk(root).dirs.iter().map(|rel| root.join(rel)));
            for dir in &dirs {
                protected.extend(gitdirs::hooks_dirs(dir, root));
                protected.extend(gitdirs::CONFIG_FILES.iter().map(|f| dir.join(f)));
            }
            git_dirs.extend(dirs);
        }
        let mut git_writable: Vec<PathBuf> = Vec::new();
        for root in writable_roots
            .iter()
            .filter(|_| mode == SandboxMode::WorkspaceWrite)
        {
            let writes = gitdirs::linked_worktree_writes(root);
            // Where the worktree's git directory says the repository and the worktree are.
            if let Some(admin) = writes.first() {
                protected.extend(ADMIN_PROTECTED.iter().map(|f| admin.join(f)));
            }
            git_writable.extend(
                writes
                    .into_iter()
                    .filter(|w| !writable_roots.iter().any(|r| w.starts_with(r))),
            );
        }
        git_writable.sort();
        git_writable.dedup();
        protected.sort();
        protected.dedup();
        git_dirs.sort();
        git_dirs.dedup();
        let mut deny_read: Vec<PathBuf> = Vec::new();
        for home in places.home.iter().chain(&places.account_home) {
            deny_read.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
            let home = real(home);
            if mode == SandboxMode::WorkspaceWrite
                && writable_roots.iter().any(|r| home.starts_with(r))
            {
                protected.extend(HOME_PROTECTED.iter().map(|p| home.join(p)));
            }
        }
        protected.sort();
        protected.dedup();
        deny_read.extend(places.keel_home.iter().cloned());
        deny_read.extend(places.runtime.iter().cloned());
        deny_read.extend(RUNTIME.iter().map(PathBuf::from));
        deny_read.extend(extra_deny_read.iter().map(|p| places.cwd.join(p)));
        let mut deny_read: Vec<PathBuf> = deny_read.iter().map(|p| real(p)).collect();
        deny_read.sort();
        deny_read.dedup();
        SandboxPolicy {
            mode,
            writable_roots,
            protected,
            git_dirs,
            git_writable,
            unprotected: false,
            deny_read,
            allow_read: allow_read.iter().map(abs).collect(),
            network,
            network_allow: None,
        }
    }

    /// Why reading `path` (already real) is refused, or `None`.
    pub fn read_denied(&self, path: &Path) -> Option<&Path> {
        if self.mode == SandboxMode::Off || self.allow_read.iter().any(|a| path.starts_with(a)) {
            return None;
        }
        self.deny_read
            .iter()
            .find(|d| path.starts_with(d))
            .map(PathBuf::as_path)
    }

    /// The linked worktree the session works in when `path` is in its repository's main
    /// checkout (and not in the worktree): a write refused there names the worktree to use.
    pub fn worktree_instead(&self, path: &Path) -> Option<&Path> {
        let from = |root: &PathBuf| {
            let writes = gitdirs::linked_worktree_writes(root);
            let common = writes.first()?.parent()?.parent()?;
            let main = common.parent().filter(|_| common.ends_with(".git"))?;
            (path.starts_with(main) && !path.starts_with(root)).then_some(())
        };
        self.writable_roots
            .iter()
            .find(|r| from(r).is_some())
            .map(PathBuf::as_path)
    }

    /// Why writing `path` (already real) is refused, or `None`.
    pub fn write_denied(&self, path: &Path) -> Option<WriteDenial> {
        match self.mode {
            SandboxMode::Off => return None,
            SandboxMode::ReadOnly => return Some(WriteDenial::ReadOnly),
            SandboxMode::WorkspaceWrite => {}
        }
        let inside = self.writable_roots.iter().any(|r| path.starts_with(r));
        if !self.unprotected {
            if let Some(p) = self.protected.iter().find(|p| path.starts_with(p)) {
                return Some(WriteDenial::Protected(p.clone()));
            }
            if let Some(p) = git_protected(path).filter(|_| inside) {
                return Some(WriteDenial::Protected(p));
            }
        }
        if let Some(d) = self.read_denied(path) {
            return Some(WriteDenial::Secret(d.to_path_buf()));
        }
        match inside {
            true => None,
            false => Some(WriteDenial::OutsideRoots),
        }
    }
}

impl super::Sandbox {
    /// This sandbox with `dir` readable too (a saved session's kept outputs, beside its file
    /// under the denied `$KEEL_HOME`), and a zygote of its own, which binds it. A zygote that
    /// runs already (the probe of a bubblewrap never probed, started at session build) keeps
    /// serving rather than start a second bubblewrap: its commands do not see `dir` (the file
    /// tools do). `--sandbox off` reads everything already.
    pub fn reading(mut self, dir: &Path) -> super::Sandbox {
        if self.policy.mode == SandboxMode::Off {
            return self;
        }
        self.policy.allow_read.push(real(dir));
        if self.zygote_pid().is_none() {
            self.zygote = self.zygote.fresh();
        }
        self
    }
}

/// Why a write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDenial {
    /// The mode is `read-only`.
    ReadOnly,
    /// Outside every writable root.
    OutsideRoots,
    /// A protected path inside a writable root.
    Protected(PathBuf),
    /// A denied path.
    Secret(PathBuf),
}

/// `path` with symlinks and `..` resolved as far as it exists; the rest (which does not exist
/// yet) is appended normalised. A symlink in the last component is resolved too, so a link
/// pointing outside is judged by its target.
pub fn real(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let mut rest = Vec::new();
    let mut head = path.to_path_buf();
    while let Some(name) = head.file_name() {
        rest.push(name.to_os_string());
        if !head.pop() {
            break;
        }
        if let Ok(p) = std::fs::canonicalize(&head) {
            head = p;
            break;
        }
    }
    let mut out = normalise(&head);
    for name in rest.iter().rev() {
        match Path::new(name).components().next() {
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(_) => out.push(name),
        }
    }
    out
}

/// `..` and `.` removed lexically (for paths that do not exist).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The hooks directory or config file of a git directory that `path` is or lies in, at any
/// depth: below a `.git` (which need not exist yet) or below a directory that is a git
/// directory by its contents (a renamed `.git`).
fn git_protected(path: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::new();
    let mut parts = path.components().peekable();
    while let Some(c) = parts.next() {
        at.push(c);
        let next = parts.peek().map(|n| n.as_os_str());
        let guarded = match next.and_then(|n| n.to_str()) {
            Some("hooks") => true,
            Some(n) => gitdirs::CONFIG_FILES.contains(&n),
            None => false,
        };
        if guarded && (c.as_os_str() == ".git" || gitdirs::is_git_dir(&at)) {
            return next.map(|n| at.join(n));
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn policy(dir: &Path) -> SandboxPolicy {
        let places = Places {
            cwd: dir.join("work"),
            home: Some(dir.join("home")),
            account_home: None,
            keel_home: Some(dir.join("keel")),
            runtime: vec![],
        };
        SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false)
    }

    #[test]
    fn the_real_path_decides() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("work/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("home/.ssh")).unwrap();
        std::os::unix::fs::symlink(root.join("home"), root.join("work/out")).unwrap();
        let p = policy(&root);
        assert_eq!(p.write_denied(&real(&root.join("work/a/b.txt"))), None);
        assert_eq!(
            p.write_denied(&real(&root.join("work/out/x"))),
            Some(WriteDenial::OutsideRoots),
            "a symlink pointing outside does not escape"
        );
        assert_eq!(
            p.write_denied(&real(&root.join("work/../home/x"))),
            Some(WriteDenial::OutsideRoots)
        );
        assert!(matches!(
            p.write_denied(&real(&root.join("work/.git/hooks/pre-commit"))),
            Some(WriteDenial::Protected(_))
        ));
        assert!(p
            .read_denied(&real(&root.join("work/out/.ssh/id_rsa")))
            .is_some());
        assert!(p.read_denied(&real(&root.join("keel/run/sock"))).is_some());
        assert!(p.read_denied(&real(&root.join("home/notes"))).is_none());
    }

    #[test]
    fn the_accounts_home_is_denied_as_home_is() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        let places = Places {
            cwd: root.join("work"),
            home: Some(root.join("home")),
            account_home: Some(root.join("account")),
            keel_home: None,
            runtime: vec![],
        };
        let p = SandboxPolicy::new(SandboxMode::WorkspaceWrite, &places, &[], &[], &[], false);
        assert!(p.read_denied(&root.join("account/.ssh/id_rsa")).is_some());
        assert!(p.read_denied(&root.join("home/.aws/credentials")).is_some());
    }

    #[test]
    fn modes_by_name() {
        assert_eq!(
            SandboxMode::from_name("danger-full-access"),
            Some(SandboxMode::Off)
        );
        assert_eq!(SandboxMode::from_name("nope"), None);
    }
}
