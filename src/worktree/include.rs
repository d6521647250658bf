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
        // A directory on the way that is a link in the new worktree (its base may differ from
        // the checkout's) would take the copy out of it.
        if through_link(to, Path::new(rel)) {
            continue;
        }
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

/// Whether a directory between `root` and the file `rel` is a symbolic link under `root`.
fn through_link(root: &Path, rel: &Path) -> bool {
    let mut at = root.to_path_buf();
    for part in rel.parent().into_iter().flat_map(Path::components) {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return true;
        }
    }
    false
}

fn io(e: std::io::Error) -> WorktreeError {
    WorktreeError::Io(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::through_link;
    use std::path::Path;

    #[test]
    fn a_directory_that_is_a_link_in_the_worktree_is_not_copied_through() {
        let d = tempfile::tempdir().unwrap();
        let (root, out) = (d.path().join("wt"), d.path().join("elsewhere"));
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(&out, root.join("link")).unwrap();
        assert!(through_link(&root, Path::new("link/.env")));
        assert!(through_link(&root, Path::new("link/a/b/.env")));
        assert!(!through_link(&root, Path::new("real/sub/.env")));
        assert!(!through_link(&root, Path::new(".env")));
        assert!(!through_link(&root, Path::new("missing/.env")));
    }
}
