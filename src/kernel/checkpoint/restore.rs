//! Putting a snapshot's files back into the work tree by descriptor (issue 43): every write
//! and removal happens beneath the work tree, opened once, through parent directories opened
//! without passing a symlink (`kernel::fsx`); a path with a symlink where one of its parent
//! directories should be is skipped and reported, never followed. What is in the way is
//! replaced as `git checkout-index -f` does (a file where a directory goes, a directory where
//! a file goes); contents come from the store, read by `git cat-file --batch`. Blocking.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;

use super::object::Mode;
use crate::kernel::fsx::{self, Beneath, FsxError, Make};

/// Whether a path was done or skipped (a symlink where a parent directory should be).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Done,
    Skipped,
}

/// Removes the file (or symlink) `path` and the directories it leaves empty, up to the root.
/// A file already gone counts as removed.
pub(super) fn remove(root: &Beneath, path: &str) -> Result<Outcome, FsxError> {
    let rel = Path::new(path);
    match root.remove(rel) {
        Ok(()) => {}
        Err(FsxError::Symlink(_)) => return Ok(Outcome::Skipped),
        Err(e) if e.is_not_found() => return Ok(Outcome::Done),
        Err(e) => return Err(e),
    }
    let mut dir = rel.parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
        let Ok((parent, name)) = root.parent(d, Make::Nothing) else {
            break;
        };
        if rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(Outcome::Done)
}

/// Writes `body` at `path` as `mode` says (a file's content, or a symlink's target),
/// replacing whatever is there; missing parent directories are created.
pub(super) fn write(
    root: &Beneath,
    path: &str,
    mode: Mode,
    body: &[u8],
) -> Result<Outcome, FsxError> {
    let (dir, name) = match root.parent(Path::new(path), Make::Replacing) {
        Err(FsxError::Symlink(_)) => return Ok(Outcome::Skipped),
        other => other?,
    };
    let name = name.as_os_str();
    match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            fsx::remove_tree(dir.as_fd(), name)?
        }
        Ok(_) => rustix::fs::unlinkat(&dir, name, AtFlags::empty())?,
        Err(Errno::NOENT) => {}
        Err(e) => return Err(e.into()),
    }
    let perm = match mode {
        Mode::Symlink => {
            rustix::fs::symlinkat(OsStr::from_bytes(body), &dir, name)?;
            return Ok(Outcome::Done);
        }
        Mode::Executable => 0o777,
        Mode::File | Mode::Tree => 0o666,
    };
    // O_EXCL | O_NOFOLLOW: a name that came back since it was removed is not written through.
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dir, name, flags, rustix::fs::Mode::from_raw_mode(perm))?;
    std::fs::File::from(fd).write_all(body)?;
    Ok(Outcome::Done)
}

/// The `(path, mode, id)` of the files of `git ls-tree -r -z` output that are in `wanted`.
pub(super) fn listed(out: &[u8], wanted: &HashSet<&str>) -> Vec<(String, Mode, String)> {
    let mut found = Vec::new();
    for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let Some(tab) = record.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let path = String::from_utf8_lossy(&record[tab + 1..]).into_owned();
        let mut head = record[..tab].split(|b| *b == b' ');
        let (Some(mode), Some(_), Some(id)) = (head.next(), head.next(), head.next()) else {
            continue;
        };
        if let (Some(mode), true) = (Mode::of_octal(mode), wanted.contains(path.as_str())) {
            found.push((path, mode, String::from_utf8_lossy(id).into_owned()));
        }
    }
    found
}

/// The bodies `git cat-file --batch` wrote, in order (`None` for a missing object).
pub(super) fn bodies(mut out: &[u8]) -> Vec<Option<Vec<u8>>> {
    let mut found = Vec::new();
    while let Some(end) = out.iter().position(|b| *b == b'\n') {
        let header = String::from_utf8_lossy(&out[..end]).into_owned();
        out = &out[end + 1..];
        let size = header
            .rsplit(' ')
            .next()
            .and_then(|s| s.parse::<usize>().ok());
        match size.filter(|_| !header.ends_with(" missing")) {
            Some(size) if size <= out.len() => {
                found.push(Some(out[..size].to_vec()));
                out = out.get(size + 1..).unwrap_or_default();
            }
            _ => found.push(None),
        }
    }
    found
}
