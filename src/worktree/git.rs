//! Running `git` for the worktree module: one command in one directory, the variables that
//! would send it elsewhere (`GIT_DIR`, `GIT_WORK_TREE`, … a hook's environment) removed, its
//! failure a typed error with git's own words. Owns only that.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::WorktreeError;

/// Variables that point git at another repository or index.
const SCRUB: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
];

/// `git ARGS` in `dir`: its stdout, trimmed of the last newline; an error with its stderr.
pub fn run(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let out = output(dir, args)?;
    if !out.status.success() {
        return Err(failed(args, &out));
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

/// `git ARGS` in `dir`, whatever it exits with.
pub fn output(dir: &Path, args: &[&str]) -> Result<Output, WorktreeError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args).stdin(Stdio::null());
    for v in SCRUB {
        cmd.env_remove(v);
    }
    cmd.output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => WorktreeError::NoGit,
        _ => WorktreeError::Io(e.to_string()),
    })
}

/// The error of a git command that failed.
pub fn failed(args: &[&str], out: &Output) -> WorktreeError {
    // git says some failures on stdout (a merge's CONFLICT lines): both, stdout first.
    let said = [&out.stdout, &out.stderr].map(|b| String::from_utf8_lossy(b).trim().to_string());
    let stderr = said
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    WorktreeError::Git {
        command: format!("git {}", args.join(" ")),
        stderr,
    }
}

/// Holds the repository's worktree lock (`keel-worktrees.lock` in its shared git directory)
/// until dropped: two keels making worktrees at once take turns, so each gets its own index.
pub fn serialize(common: &Path) -> Result<std::fs::File, WorktreeError> {
    let path = common.join("keel-worktrees.lock");
    let io = |e: std::io::Error| WorktreeError::Io(format!("{}: {e}", path.display()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| io(e.into()))?;
    Ok(file)
}
