//! `.worktreeinclude` (as Claude Code reads it): gitignore patterns naming files of the main
//! checkout that a new worktree gets a copy of (`.env`, local config). Only files git ignores
//! and does not track are copied (tracked ones are in the worktree already); symlinks are
//! copied as links, never followed. Owns only that copy.

use std::path::Path;

use super::{git, WorktreeError};

/// The file's name, at the main checkout's root.
pub const FILE: &str = ".worktreeinclude";

/// Copies the files `.worktreeinclude` names from `from` (the checkout the session started
/// in) into `to` (the new worktree); how many. None when there is no such file.
pub fn copy(from: &Path, to: &Path) -> Result<usize, WorktreeError> {
    if !from.join(FILE).is_file() {
        return Ok(0);
    }
    let listed = |extra: &str| -> Result<Vec<String>, WorktreeError> {
        let args = ["ls-files", "-z", "--others", "--ignored", extra];
        let text = git::run(from, &args)?;
        Ok(text
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
    };
    let named = listed(&format!("--exclude-from={FILE}"))?;
    let ignored: std::collections::HashSet<String> =
        listed("--exclude-standard")?.into_iter().collect();
    let mut copied = 0;
    for rel in named.iter().filter(|r| ignored.contains(*r)) {
        let (src, dst) = (from.join(rel), to.join(rel));
        let Ok(meta) = std::fs::symlink_metadata(&src) else {
            continue;
        };
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&src).map_err(io)?;
            std::os::unix::fs::symlink(target, &dst).map_err(io)?;
        } else if meta.is_file() {
            std::fs::copy(&src, &dst).map_err(io)?;
        } else {
            continue;
        }
        copied += 1;
    }
    Ok(copied)
}

fn io(e: std::io::Error) -> WorktreeError {
    WorktreeError::Io(e.to_string())
}
