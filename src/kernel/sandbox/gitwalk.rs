//! The bounded walk of a writable root that finds its git directories and `.git` files
//! ([`super::gitdirs::Found`]), and the memory of it ([`Tree`]) that lets the next walk read
//! only the directories that changed. The after-call check walks each root before and after
//! every `bash` call; a whole walk reads every directory (55 ms a call in a workspace of 2,000
//! directories here), while a walk from a [`Tree`] reads a directory only when its change time
//! or identity moved, and `stat`s the rest.
//!
//! Why that is enough: whatever a command adds to, removes from or renames in a directory
//! (a new `.git`, a `HEAD` that makes it a git directory, a subdirectory moved in) changes that
//! directory's ctime, and ctime cannot be set back (`utimes` sets it to now; only the clock
//! moves it). A directory whose ctime is close to the time it was recorded ([`RACY`]: the
//! file system's clock is coarser than ours) is read again whatever its ctime says, as git
//! does with a racily clean index. Owns only the walk; what is found is judged by the caller.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::gitdirs::{Found, WALK_BUDGET};

/// How deep one walk goes below a root.
const WALK_DEPTH: usize = 32;
/// A directory changed this close to the time it was recorded is read again on the next walk.
const RACY: Duration = Duration::from_secs(3);

/// What one walk saw of a root's directories, for the next walk of the same root.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    dirs: HashMap<PathBuf, Dir>,
    /// Directories this walk read (the others it took from the tree before).
    pub read: usize,
}

/// One directory as a walk saw it.
#[derive(Debug, Clone)]
struct Dir {
    /// Device, inode and ctime (seconds, nanoseconds).
    stamp: (u64, u64, i64, i64),
    /// Read again next time whatever its stamp says (see [`RACY`]).
    racy: bool,
    /// How many entries it held (counted against the walk's budget when reused).
    entries: usize,
    subdirs: Vec<OsString>,
    /// It looks like a git directory.
    git: bool,
    /// It holds a `.git` file.
    dot_git_file: bool,
}

/// Walks `root` (see [`super::gitdirs::walk`]); with `prev`, the tree of an earlier walk of the
/// same root (used up), a directory whose stamp has not moved is taken from it rather than
/// read.
pub fn walk(root: &Path, mut prev: Option<Tree>) -> (Found, Tree) {
    let now = SystemTime::now();
    let mut found = Found::default();
    let mut tree = Tree::default();
    let mut budget = WALK_BUDGET;
    let mut todo = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = todo.pop() {
        let Ok(meta) = std::fs::symlink_metadata(root.join(&rel)) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let stamp = (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec());
        // Taken out of the earlier walk's tree, not copied: each directory is met once.
        let kept = prev
            .as_mut()
            .and_then(|p| p.dirs.remove(&rel))
            .filter(|d| !d.racy && d.stamp == stamp);
        let dir = match kept {
            Some(d) => d,
            None => {
                tree.read += 1;
                let Some(mut d) = read(&root.join(&rel), stamp) else {
                    continue;
                };
                d.racy = racy(&meta, now);
                d
            }
        };
        if dir.entries > budget {
            tracing::warn!("{}: stopped looking for git directories", root.display());
            return (found, tree);
        }
        budget -= dir.entries;
        if dir.dot_git_file {
            found.files.push(rel.join(".git"));
        }
        if dir.git {
            found.dirs.push(rel.clone());
        }
        if depth < WALK_DEPTH {
            // Inside a git directory only its submodules' and worktrees' directories are more.
            let next = dir
                .subdirs
                .iter()
                .filter(|d| !dir.git || *d == "modules" || *d == "worktrees")
                .map(|d| (rel.join(d), depth + 1));
            todo.extend(next);
        }
        tree.dirs.insert(rel, dir);
    }
    found.whole = true;
    (found, tree)
}

/// Reads one directory's entries.
fn read(path: &Path, stamp: (u64, u64, i64, i64)) -> Option<Dir> {
    let entries = std::fs::read_dir(path).ok()?;
    let (mut head, mut objects, mut refs, mut common) = (false, false, false, false);
    let mut dir = Dir {
        stamp,
        racy: false,
        entries: 0,
        subdirs: Vec::new(),
        git: false,
        dot_git_file: false,
    };
    for e in entries.flatten() {
        dir.entries += 1;
        let name = e.file_name();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                objects |= name == "objects";
                refs |= name == "refs";
                dir.subdirs.push(name);
            }
            Ok(t) if t.is_file() => {
                head |= name == "HEAD";
                common |= name == "commondir";
                dir.dot_git_file |= name == ".git";
            }
            _ => {}
        }
    }
    dir.git = head && ((objects && refs) || common);
    Some(dir)
}

/// Whether `meta`'s ctime is within [`RACY`] of `now` (or after it, or unreadable).
fn racy(meta: &std::fs::Metadata, now: SystemTime) -> bool {
    let Ok(secs) = u64::try_from(meta.ctime()) else {
        return true;
    };
    let nanos = u32::try_from(meta.ctime_nsec()).unwrap_or(0);
    let ctime = UNIX_EPOCH + Duration::new(secs, nanos);
    now.duration_since(ctime).map_or(true, |age| age < RACY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(dir: &Path) {
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    /// A tree of `n` directories two deep and its record, taken as settled (what it is
    /// [`RACY`] seconds after it was made; the test does not wait for the clock).
    fn settled(root: &Path, n: usize) -> Tree {
        for i in 0..n {
            std::fs::create_dir_all(root.join(format!("p{}", i / 10)).join(format!("d{i}")))
                .unwrap();
        }
        let (_, mut tree) = walk(root, None);
        for d in tree.dirs.values_mut() {
            d.racy = false;
        }
        tree
    }

    #[test]
    fn an_unchanged_tree_is_stat_ed_not_read_and_finds_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        repo(&root.join("p0/d3/.git"));
        let prev = settled(root, 40);
        let (first, _) = walk(root, None);
        let (again, tree) = walk(root, Some(prev));
        assert_eq!(again, first);
        assert_eq!(tree.read, 0, "nothing changed, nothing read");
        assert_eq!(first.dirs, [PathBuf::from("p0/d3/.git")]);
    }

    #[test]
    fn a_git_directory_made_deep_in_the_tree_after_the_record_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let prev = settled(root, 40);
        repo(&root.join("p3/d35/nested/.git"));
        std::fs::write(root.join("p2/d21/.git"), "gitdir: /elsewhere\n").unwrap();
        let (found, tree) = walk(root, Some(prev));
        assert_eq!(found.dirs, [PathBuf::from("p3/d35/nested/.git")]);
        assert_eq!(found.files, [PathBuf::from("p2/d21/.git")]);
        // Only the two changed directories and what is new below them were read.
        assert!(tree.read <= 6, "{}", tree.read);
    }

    #[test]
    fn setting_the_modification_time_back_does_not_hide_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let prev = settled(root, 20);
        let target = root.join("p1/d12");
        let before = std::fs::symlink_metadata(&target)
            .unwrap()
            .modified()
            .unwrap();
        repo(&target.join("sub/.git"));
        std::fs::File::open(&target)
            .unwrap()
            .set_modified(before)
            .unwrap();
        let (found, _) = walk(root, Some(prev));
        assert_eq!(found.dirs, [PathBuf::from("p1/d12/sub/.git")]);
    }

    #[test]
    fn a_racy_directory_is_read_again_though_its_stamp_did_not_move() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("a")).unwrap();
        let (_, mut prev) = walk(root, None);
        assert!(prev.dirs.values().all(|d| d.racy), "just made: racy");
        // Pretend the stamp did not move although `.git` was added (a coarse clock).
        repo(&root.join("a/.git"));
        let stamp = prev.dirs[Path::new("a")].stamp;
        let now = std::fs::symlink_metadata(root.join("a")).unwrap();
        prev.dirs.get_mut(Path::new("a")).unwrap().stamp =
            (stamp.0, stamp.1, now.ctime(), now.ctime_nsec());
        let (found, _) = walk(root, Some(prev));
        assert_eq!(found.dirs, [PathBuf::from("a/.git")]);
    }
}
