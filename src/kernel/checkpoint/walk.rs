//! Listing the work tree as git sees it: `.gitignore` files inside it (each applies to its
//! directory and below, a deeper one first; negations honoured; a symlinked one is not read,
//! as git does not), `.git` entries and nested repositories left out, symlinks not followed.
//! Each directory is opened by descriptor from its parent's (`O_NOFOLLOW`: one swapped for a
//! symlink while the walk goes is not entered), listed from it, and each entry `lstat`ed
//! relative to it (no path walked again per file), as git does. Reads only.

use std::ffi::{CStr, OsStr, OsString};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat};

use super::Skipped;
use crate::kernel::fsx::{Beneath, Make};

/// The files and symlinks git would see under `work`, with their `lstat`, in walk order
/// (each directory's entries sorted by name, a subdirectory's files where it comes); and the
/// paths left out because they are not UTF-8. Unreadable directories are passed over.
pub(super) fn walk(work: &Beneath) -> (Vec<(String, Stat)>, Vec<Skipped>) {
    let mut walk = Walk {
        listed: Vec::new(),
        skipped: Vec::new(),
        rules: Vec::new(),
    };
    if let Ok(top) = work.dir(Path::new(""), Make::Nothing) {
        walk.dir(top.as_fd(), work.path(), "", true);
    }
    (walk.listed, walk.skipped)
}

struct Walk {
    listed: Vec<(String, Stat)>,
    skipped: Vec<Skipped>,
    /// The `.gitignore` rules of the directories being walked, the deepest last.
    rules: Vec<Gitignore>,
}

/// Opens `name` in `at` without following a symlink.
fn open_at(at: BorrowedFd<'_>, name: &OsStr, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    rustix::fs::openat(at, name, flags, Mode::empty())
}

/// The entry names of the open directory `fd` (`.` and `..` left out).
fn entries(fd: BorrowedFd<'_>) -> Vec<OsString> {
    let Ok(dir) = Dir::read_from(fd) else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| e.file_name() != c"." && e.file_name() != c"..")
        .map(|e| name_of(e.file_name()))
        .collect()
}

fn name_of(name: &CStr) -> OsString {
    OsStr::from_bytes(name.to_bytes()).to_os_string()
}

/// The rules of the `.gitignore` in the open directory `fd` (`full` names it), read without
/// following a symlink.
fn gitignore(fd: BorrowedFd<'_>, full: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(full);
    let mut text = Vec::new();
    if let Ok(file) = open_at(fd, OsStr::new(".gitignore"), OFlags::RDONLY) {
        let _ = std::fs::File::from(file).read_to_end(&mut text);
    }
    for line in String::from_utf8_lossy(&text).lines() {
        let _ = builder.add_line(Some(full.join(".gitignore")), line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

impl Walk {
    /// Lists the open directory `fd` (`full` its path, `rel` from the work tree's top,
    /// `/`-separated, `""` the top).
    fn dir(&mut self, fd: BorrowedFd<'_>, full: &Path, rel: &str, top: bool) {
        let mut entries = entries(fd);
        let has = |name: &str| entries.iter().any(|n| n == name);
        // A nested repository: git lists it as one entry, not its files.
        if !top && has(".git") && rustix::fs::statat(fd, ".git", AtFlags::empty()).is_ok() {
            return;
        }
        let rules = has(".gitignore");
        if rules {
            self.rules.push(gitignore(fd, full));
        }
        entries.sort();
        for name in entries {
            if name == ".git" {
                continue;
            }
            let Ok(stat) = rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let is_dir = FileType::from_raw_mode(stat.st_mode) == FileType::Directory;
            if !self.rules.is_empty() && self.ignored(&full.join(&name), is_dir) {
                continue;
            }
            let Some(utf8) = name.to_str() else {
                let lossy = Path::new(rel).join(&name);
                self.skipped.push(Skipped {
                    path: lossy.to_string_lossy().into_owned(),
                    reason: "nonUtf8Path".into(),
                });
                continue;
            };
            let path = match rel {
                "" => utf8.to_string(),
                _ => format!("{rel}/{utf8}"),
            };
            if !is_dir {
                self.listed.push((path, stat));
                continue;
            }
            // Opened without following: a directory swapped for a symlink is not entered.
            if let Ok(sub) = open_at(fd, &name, OFlags::RDONLY | OFlags::DIRECTORY) {
                self.dir(sub.as_fd(), &full.join(&name), &path, false);
            }
        }
        if rules {
            self.rules.pop();
        }
    }

    /// Whether the `.gitignore` rules leave `path` out: the deepest file with a rule that
    /// matches decides (an ignore, or a `!` negation that keeps it).
    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        for rules in self.rules.iter().rev() {
            let m = rules.matched(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
        }
        false
    }
}
