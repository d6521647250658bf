//! What git reads from a workspace, found by what it is rather than by a name that exists: the
//! git directories of a writable root (its `.git` directory or the one a `.git` file names,
//! their common and submodule directories, every directory under the root that looks like a
//! git directory), their hooks directories (`core.hooksPath` included), and the config keys
//! that make git run a program. Owns that knowledge and the bounded walk; it never writes
//! (the after-call check in [`super::watch`] does).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many directory entries one walk of a root looks at, at most (see `docs/sandbox.md`).
pub const WALK_BUDGET: usize = 200_000;

/// The config files of a git directory whose keys git applies.
pub const CONFIG_FILES: &[&str] = &["config", "config.worktree"];

/// Whether `dir` looks like a git directory: a `HEAD` file and either `objects/` and `refs/`
/// (a repository) or a `commondir` file (a linked worktree's).
pub fn is_git_dir(dir: &Path) -> bool {
    let is_dir = |n: &str| std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_dir());
    let is_file = |n: &str| std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_file());
    is_file("HEAD") && ((is_dir("objects") && is_dir("refs")) || is_file("commondir"))
}

/// The git directories git uses for `root` and what it holds: `root/.git` (a directory, or the
/// directory its `gitdir:` line names), that one's `commondir`, and every directory below them
/// in `modules/` that is a git directory (submodules). Real paths, each once.
pub fn of_root(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dot = root.join(".git");
    let first = match std::fs::symlink_metadata(&dot) {
        Ok(m) if m.is_dir() => Some(dot),
        Ok(m) if m.is_file() => gitdir_file(root, &dot),
        _ => None,
    };
    let mut todo: Vec<PathBuf> = first.into_iter().collect();
    while let Some(dir) = todo.pop() {
        if out.contains(&dir) || out.len() > 256 {
            continue;
        }
        if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
            todo.push(super::policy::real(&dir.join(common.trim())));
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("modules")) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.extend(modules_below(&e.path()));
                }
            }
        }
        out.push(dir);
    }
    out
}

/// The git directories at or below `dir` inside a `modules/` tree (a submodule's name may hold
/// slashes, and a submodule has its own `modules/`).
fn modules_below(dir: &Path) -> Vec<PathBuf> {
    if is_git_dir(dir) {
        return vec![dir.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .take(256)
        .flat_map(|e| modules_below(&e.path()))
        .collect()
}

/// What git writes outside a linked worktree `root` (its `.git` a file naming a directory
/// with a `commondir`): that directory (its index, HEAD, logs) and the repository's shared
/// `objects`, `refs` and `logs` (a commit on its branch), those that exist, made real. Never
/// the shared `config` or `hooks`. Empty for anything else.
pub fn linked_worktree_writes(root: &Path) -> Vec<PathBuf> {
    let dot = root.join(".git");
    if !std::fs::symlink_metadata(&dot).is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let Some(admin) = gitdir_file(root, &dot) else {
        return Vec::new();
    };
    let Ok(common) = std::fs::read_to_string(admin.join("commondir")) else {
        return Vec::new();
    };
    let common = super::policy::real(&admin.join(common.trim()));
    let mut out = vec![admin];
    out.extend(["objects", "refs", "logs"].iter().map(|d| common.join(d)));
    out.retain(|p| p.is_dir());
    out
}

/// The directory a `.git` file's `gitdir:` line names (relative to `root`).
fn gitdir_file(root: &Path, file: &Path) -> Option<PathBuf> {
    gitdir_in(root, &std::fs::read(file).ok()?)
}

/// The directory the `gitdir:` line of a `.git` file's `bytes` names (relative to `dir`, the
/// file's directory), made real.
pub fn gitdir_in(dir: &Path, bytes: &[u8]) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(bytes);
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    Some(super::policy::real(&dir.join(target)))
}

/// The hooks directories of the git directory `dir` under the writable root `root`:
/// `dir/hooks`, and the one `core.hooksPath` names when its config sets it (relative to the
/// work tree: the parent of a `.git`, else `root`).
pub fn hooks_dirs(dir: &Path, root: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.join("hooks")];
    let tree = match dir.file_name() == Some(OsStr::new(".git")) {
        true => dir.parent().unwrap_or(root),
        false => root,
    };
    let entries = CONFIG_FILES
        .iter()
        .filter_map(|f| std::fs::read(dir.join(f)).ok())
        .filter_map(|bytes| entries(&bytes));
    for list in entries {
        for (key, value) in list {
            if key == "core.hookspath" && !value.is_empty() {
                let path = match value.strip_prefix("~/") {
                    Some(_) => continue,
                    None => tree.join(&value),
                };
                out.push(super::policy::real(&path));
            }
        }
    }
    out
}

/// What a walk of a root found (paths relative to it).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// The directories that look like git directories.
    pub dirs: Vec<PathBuf>,
    /// The `.git` files (`gitdir: …`: a worktree's or submodule's pointer).
    pub files: Vec<PathBuf>,
    /// Whether the walk saw everything (it stops after [`WALK_BUDGET`] entries).
    pub whole: bool,
}

/// The git directories and `.git` files under `root`, found by a walk that never follows a
/// symlink, skips nothing git ignores (a repository in an ignored directory is still one a
/// user may `cd` into) and stops after [`WALK_BUDGET`] entries (see [`super::gitwalk`], which
/// also walks again from an earlier walk's record).
pub fn walk(root: &Path) -> Found {
    super::gitwalk::walk(root, None).0
}

/// Whether git runs a program for `key` (lower-case section and name, as `git config --list`
/// writes it) set to `value`: the core commands (`fsmonitor`, `pager`, `editor`, `sshCommand`,
/// `askPass`, `gitProxy`, `hooksPath`), any `*.helper`, filter drivers, diff and merge drivers,
/// `diff.external`, pagers, tools' commands, `alias.*` starting with `!`, `include.path` and
/// `includeIf.*.path` (they bring in other files), and the remote programs of local transports.
pub fn runs_program(key: &str, value: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    let first = first.to_ascii_lowercase();
    let last = last.to_ascii_lowercase();
    let two = parts.len() == 2;
    match (first.as_str(), last.as_str()) {
        ("core", "fsmonitor") => !matches!(value, "" | "false" | "true" | "0" | "1"),
        ("core", "pager" | "editor" | "sshcommand" | "askpass" | "gitproxy" | "hookspath") => true,
        ("alias", _) => value.trim_start().starts_with('!'),
        ("include", "path") | ("includeif", "path") => true,
        ("filter", "clean" | "smudge" | "process") => true,
        ("diff", "textconv" | "command") => true,
        ("diff", "external") => two,
        ("merge", "driver") | ("difftool" | "mergetool", "cmd") => true,
        ("sequence", "editor") | ("interactive", "difffilter") => true,
        ("gpg", "program") | ("pager", _) => true,
        ("remote", "uploadpack" | "receivepack") => true,
        ("browser" | "man", "cmd" | "path") | ("web", "browser") => true,
        (_, "helper") => true,
        _ => false,
    }
}

/// The entries of a git config file's `bytes` (key lower-cased as git writes it, value; a key
/// without `=` has an empty value), as git itself parses them (`git config --file - --list`,
/// includes not followed, run from `/` with no other config). `None` when git cannot parse it
/// or cannot be run: the caller then treats the file as unsafe.
pub fn entries(bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let git = git()?;
    let mut child = Command::new(git)
        .args(["config", "--file", "-", "--null", "--list", "--no-includes"])
        .current_dir("/")
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    if let Some(mut stdin) = child.stdin.take() {
        std::io::Write::write_all(&mut stdin, bytes).ok()?;
    }
    let out = child.wait_with_output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let list = text
        .split('\0')
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('\n') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (e.to_string(), String::new()),
        })
        .collect();
    Some(list)
}

/// The keys that run a program among `entries`, with their values.
pub fn program_keys(entries: &[(String, String)]) -> BTreeSet<(String, String)> {
    entries
        .iter()
        .filter(|(k, v)| runs_program(k, v))
        .cloned()
        .collect()
}

/// A config file holding `entries` minus those in `drop`, as git writes one (`[section
/// "sub"]` then `key = "value"`, quoted and escaped).
pub fn config_without(entries: &[(String, String)], drop: &BTreeSet<(String, String)>) -> Vec<u8> {
    let mut out = String::new();
    let mut header = String::new();
    for (key, value) in entries {
        if drop.contains(&(key.clone(), value.clone())) {
            continue;
        }
        let (Some((section, rest)), Some((_, name))) = (key.split_once('.'), key.rsplit_once('.'))
        else {
            continue;
        };
        let sub = rest.rsplit_once('.').map(|(s, _)| s);
        let h = match sub {
            Some(s) => format!("[{section} \"{}\"]\n", escape(s)),
            None => format!("[{section}]\n"),
        };
        if h != header {
            out.push_str(&h);
            header = h;
        }
        out.push_str(&format!("\t{name} = \"{}\"\n", escape(value)));
    }
    out.into_bytes()
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

/// The `git` on keel's own `PATH` (the one a user's shell finds), looked up once.
fn git() -> Option<&'static Path> {
    static GIT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    GIT.get_or_init(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join("git"))
            .find(|p| p.is_file())
    })
    .as_deref()
}

/// Whether `name` is a hook git may run (not one of the `.sample`s git installs).
pub fn is_hook(name: &OsStr) -> bool {
    !name.to_string_lossy().ends_with(".sample")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_run_programs() {
        for (k, v) in [
            ("core.fsmonitor", "touch /x"),
            ("core.pager", "less"),
            ("credential.https://x.helper", "store"),
            ("filter.lfs.smudge", "x"),
            ("diff.pdf.textconv", "x"),
            ("diff.external", "x"),
            ("alias.st", "!sh"),
            ("include.path", "/x"),
            ("includeIf.gitdir:/x.path", "/y"),
        ] {
            assert!(runs_program(k, v), "{k}");
        }
        for (k, v) in [
            ("core.fsmonitor", "true"),
            ("alias.st", "status"),
            ("user.name", "x"),
            ("remote.origin.url", "x"),
            ("diff.pdf.binary", "true"),
        ] {
            assert!(!runs_program(k, v), "{k}");
        }
    }

    #[test]
    fn a_config_is_read_as_git_reads_it_and_written_without_the_dropped_keys() {
        let text =
            b"[core] fsmonitor = touch /x\n[remote \"o\"]\n\turl = a\\\"b\n[alias]\n\tx = !sh\n";
        let Some(list) = entries(text) else {
            return; // no git here
        };
        let bad = program_keys(&list);
        assert_eq!(bad.len(), 2, "{bad:?}");
        let safe = config_without(&list, &bad);
        let again = entries(&safe).unwrap();
        assert_eq!(again, [("remote.o.url".to_string(), "a\"b".to_string())]);
    }

    #[test]
    fn the_walk_finds_a_renamed_and_a_nested_git_directory() {
        let d = tempfile::tempdir().unwrap();
        for g in ["a/.g", "b/sub/.git", ".git", ".git/modules/m"] {
            for p in ["objects", "refs"] {
                std::fs::create_dir_all(d.path().join(g).join(p)).unwrap();
            }
            std::fs::write(d.path().join(g).join("HEAD"), "ref: x").unwrap();
        }
        std::fs::create_dir_all(d.path().join("c")).unwrap();
        std::fs::write(d.path().join("c/.git"), "gitdir: ../.git/modules/m").unwrap();
        let Found {
            dirs: mut found,
            files,
            whole,
        } = walk(d.path());
        found.sort();
        assert!(whole);
        assert_eq!(files, [PathBuf::from("c/.git")]);
        let want: Vec<PathBuf> = [".git", ".git/modules/m", "a/.g", "b/sub/.git"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(found, want);
        assert_eq!(of_root(d.path()).len(), 2);
    }
}
