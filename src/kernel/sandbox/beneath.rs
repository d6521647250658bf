//! Small trees beneath a directory descriptor, for the after-call check ([`super::watch`]):
//! what a path holds (file bytes, directories, symlinks as links), and putting it back as it
//! was. Every step opens one component with `O_NOFOLLOW` beneath the one before, so a symlink
//! a sandboxed process swapped in is removed as a link, never followed. Owns only that; it
//! never decides what to keep.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Files larger than this are compared, not kept (protected files are small).
const KEEP_BYTES: u64 = 1024 * 1024;
/// Entries of one directory, and levels, looked at (more are not kept).
const MAX_ENTRIES: usize = 4096;
const MAX_DEPTH: usize = 16;

/// What a path held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    Dir(BTreeMap<OsString, Node>),
    Link(OsString),
    /// Too large to keep, or not a file, directory or link: known by identity only.
    Other {
        ino: u64,
        size: u64,
        mtime: i64,
    },
}

impl Node {
    /// An empty directory.
    pub fn empty_dir() -> Node {
        Node::Dir(BTreeMap::new())
    }

    /// This node with, if it is a directory, only the entries `keep` accepts.
    pub fn filtered(self, keep: impl Fn(&OsStr) -> bool) -> Node {
        match self {
            Node::Dir(m) => Node::Dir(m.into_iter().filter(|(k, _)| keep(k)).collect()),
            other => other,
        }
    }

    /// A file's bytes.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Node::File { bytes, .. } => Some(bytes),
            _ => None,
        }
    }
}

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from(e)
}

/// Opens the directory `path` (a real path: the writable root).
pub fn open_root(path: &Path) -> std::io::Result<OwnedFd> {
    rustix::fs::open(path, dir_flags(), Mode::empty()).map_err(io)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the directory `rel` beneath `root`, never through a symlink (the file tools' opener,
/// [`crate::kernel::fsx`]).
pub fn open_dir(root: impl AsFd, rel: &Path) -> std::io::Result<OwnedFd> {
    crate::kernel::fsx::dir_at(root.as_fd(), rel).map_err(|e| std::io::Error::other(e.to_string()))
}

/// The identity (device, inode) and type of `name` in `dir`, not following a symlink.
pub fn identity(dir: impl AsFd, name: &OsStr) -> Option<(u64, u64, bool)> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
    Some((st.st_dev, st.st_ino, is_dir))
}

/// What `name` in `dir` holds; `None` when there is nothing.
pub fn capture(dir: impl AsFd, name: &OsStr) -> Option<Node> {
    capture_at(dir.as_fd(), name, 0)
}

fn capture_at(dir: std::os::fd::BorrowedFd<'_>, name: &OsStr, depth: usize) -> Option<Node> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let other = Node::Other {
        ino: st.st_ino,
        size: st.st_size as u64,
        mtime: st.st_mtime,
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => rustix::fs::readlinkat(dir, name, Vec::new())
            .ok()
            .map(|t| Node::Link(OsStr::from_bytes(t.as_bytes()).to_os_string())),
        FileType::Directory if depth < MAX_DEPTH => {
            let fd = rustix::fs::openat(dir, name, dir_flags(), Mode::empty()).ok()?;
            let mut map = BTreeMap::new();
            for child in list(&fd).into_iter().take(MAX_ENTRIES) {
                if let Some(node) = capture_at(fd.as_fd(), &child, depth + 1) {
                    map.insert(child, node);
                }
            }
            Some(Node::Dir(map))
        }
        FileType::RegularFile if (st.st_size as u64) <= KEEP_BYTES => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
            let mut bytes = Vec::new();
            std::fs::File::from(fd)
                .take(KEEP_BYTES + 1)
                .read_to_end(&mut bytes)
                .ok()?;
            Some(Node::File {
                bytes,
                mode: st.st_mode & 0o7777,
            })
        }
        _ => Some(other),
    }
}

/// The names in the directory `fd` (without `.` and `..`).
pub fn list(fd: &OwnedFd) -> Vec<OsString> {
    let Ok(dir) = rustix::fs::Dir::read_from(fd) else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
        .filter(|n| n != "." && n != "..")
        .collect()
}

/// Puts `name` in `dir` back to `before` (`None`: nothing) where it now holds `after`, touching
/// only what differs (inside directories, entry by entry). Returns whether it changed anything.
pub fn restore(dir: impl AsFd, name: &OsStr, before: Option<&Node>, after: Option<&Node>) -> bool {
    let dir = dir.as_fd();
    if before == after {
        return false;
    }
    if let (Some(Node::Dir(b)), Some(Node::Dir(a))) = (before, after) {
        let Ok(fd) = rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) else {
            return false;
        };
        let mut changed = false;
        let names: std::collections::BTreeSet<&OsString> = b.keys().chain(a.keys()).collect();
        for n in names {
            changed |= restore(&fd, n, b.get(n), a.get(n));
        }
        return changed;
    }
    if after.is_some() {
        if let Err(e) = remove(dir, name) {
            tracing::warn!("cannot remove {}: {e}", Path::new(name).display());
        }
    }
    if let Some(node) = before {
        if let Err(e) = create(dir, name, node) {
            tracing::warn!("cannot restore {}: {e}", Path::new(name).display());
        }
    }
    true
}

/// Removes `name` in `dir` and, for a directory, all it holds; a symlink is removed itself.
pub fn remove(dir: std::os::fd::BorrowedFd<'_>, name: &OsStr) -> std::io::Result<()> {
    let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(());
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(io);
    }
    crate::kernel::fsx::remove_tree(dir, name).map_err(|e| std::io::Error::other(e.to_string()))
}

/// Creates `name` in `dir` as `node` (nothing for [`Node::Other`], which was not kept).
fn create(dir: std::os::fd::BorrowedFd<'_>, name: &OsStr, node: &Node) -> std::io::Result<()> {
    match node {
        Node::File { bytes, mode } => write_new(dir, name, bytes, *mode),
        Node::Link(target) => rustix::fs::symlinkat(target.as_os_str(), dir, name).map_err(io),
        Node::Dir(map) => {
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)).map_err(io)?;
            let fd = rustix::fs::openat(dir, name, dir_flags(), Mode::empty()).map_err(io)?;
            for (child, node) in map {
                create(fd.as_fd(), child, node)?;
            }
            Ok(())
        }
        Node::Other { .. } => Ok(()),
    }
}

/// Creates the file `name` in `dir` (it must not exist) holding `bytes`.
pub fn write_new(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(mode & 0o777)).map_err(io)?;
    std::fs::File::from(fd).write_all(bytes)
}

/// Replaces the file `name` in `dir` with one holding `bytes` (whatever was there is removed,
/// a symlink as a link).
pub fn replace(dir: impl AsFd, name: &OsStr, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = dir.as_fd();
    remove(dir, name)?;
    write_new(dir, name, bytes, mode)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// `.keel` beneath `fd` put back to `before` from what it holds now.
    fn put_back(fd: &OwnedFd, before: Option<&Node>) -> bool {
        let after = capture(fd, OsStr::new(".keel"));
        restore(fd, OsStr::new(".keel"), before, after.as_ref())
    }

    #[test]
    fn a_tree_is_put_back_and_a_swapped_symlink_is_removed_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("w/.keel")).unwrap();
        std::fs::write(root.join("w/.keel/settings.json"), "{}").unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::fs::write(root.join("outside/keep"), "keep").unwrap();
        let fd = open_root(&root.join("w")).unwrap();
        let before = capture(&fd, OsStr::new(".keel"));
        std::fs::write(root.join("w/.keel/settings.json"), "{\"evil\":1}").unwrap();
        std::fs::write(root.join("w/.keel/new.json"), "x").unwrap();
        assert!(put_back(&fd, before.as_ref()));
        assert_eq!(
            std::fs::read_to_string(root.join("w/.keel/settings.json")).unwrap(),
            "{}"
        );
        assert!(!root.join("w/.keel/new.json").exists());
        // A directory swapped for a symlink to outside: the link goes, outside stays.
        std::fs::remove_dir_all(root.join("w/.keel")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("w/.keel")).unwrap();
        assert!(put_back(&fd, before.as_ref()));
        assert!(root.join("outside/keep").exists());
        assert!(root.join("w/.keel").is_dir());
        assert_eq!(capture(&fd, OsStr::new(".keel")), before);
    }
}
