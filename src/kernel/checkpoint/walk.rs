//! Listing the work tree as git sees it: `.gitignore` files inside it (each applies to its
//! directory and below, a deeper one first; negations honoured), `.git` entries and nested
//! repositories left out, symlinks not followed. Each file is `lstat`ed relative to its
//! directory's open handle (no path walked again per file), as git does. Reads only.

use std::ffi::OsString;
use std::fs::{self, Metadata};
use std::path::Path;

use ignore::gitignore::Gitignore;

use super::Skipped;

/// The files and symlinks git would see under `work`, with their `lstat`, in walk order
/// (each directory's entries sorted by name, a subdirectory's files where it comes); and the
/// paths left out because they are not UTF-8. Unreadable directories are passed over.
pub(super) fn walk(work: &Path) -> (Vec<(String, Metadata)>, Vec<Skipped>) {
    let mut walk = Walk {
        listed: Vec::new(),
        skipped: Vec::new(),
        rules: Vec::new(),
    };
    walk.dir(work, "", true);
    (walk.listed, walk.skipped)
}

struct Walk {
    listed: Vec<(String, Metadata)>,
    skipped: Vec<Skipped>,
    /// The `.gitignore` rules of the directories being walked, the deepest last.
    rules: Vec<Gitignore>,
}

impl Walk {
    /// Lists directory `full` (`rel` from the work tree's top, `/`-separated, `""` the top).
    fn dir(&mut self, full: &Path, rel: &str, top: bool) {
        let Ok(read) = fs::read_dir(full) else {
            return;
        };
        let mut entries: Vec<(OsString, fs::DirEntry)> =
            read.flatten().map(|e| (e.file_name(), e)).collect();
        let has = |name: &str| entries.iter().any(|(n, _)| n == name);
        // A nested repository: git lists it as one entry, not its files.
        if !top && has(".git") && full.join(".git").exists() {
            return;
        }
        let rules = has(".gitignore");
        if rules {
            let (gitignore, _) = Gitignore::new(full.join(".gitignore"));
            self.rules.push(gitignore);
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, entry) in entries {
            if name == ".git" {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !self.rules.is_empty() && self.ignored(&full.join(&name), kind.is_dir()) {
                continue;
            }
            let Some(name) = name.to_str() else {
                let lossy = Path::new(rel).join(&name);
                self.skipped.push(Skipped {
                    path: lossy.to_string_lossy().into_owned(),
                    reason: "nonUtf8Path".into(),
                });
                continue;
            };
            let path = match rel {
                "" => name.to_string(),
                _ => format!("{rel}/{name}"),
            };
            if kind.is_dir() {
                self.dir(&entry.path(), &path, false);
            } else if let Ok(meta) = entry.metadata() {
                self.listed.push((path, meta));
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
