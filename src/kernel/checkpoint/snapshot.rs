//! Taking a snapshot in-process: walk the work tree with git's ignore rules (`.gitignore`
//! files inside it; `.git` entries and nested repositories left out), read only the files
//! whose stat signature changed since the session's last snapshot (or was racy), store them
//! and the trees as git objects, and remember the signatures. Every file is opened by
//! descriptor beneath the work tree without passing a symlink (`kernel::fsx`); a symlink is
//! stored as a link (mode 120000), never followed. No process is started. Blocking (file
//! system reads and writes).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustix::fs::{FileType, OFlags, Stat};

use super::memo::{Known, Memo, Sig};
use super::object::{Mode, Objects, Oid};
use super::tree;
use super::walk::walk;
use super::{Caps, CheckpointError, CheckpointErrorKind as Kind, Skipped, Snapshot};
use crate::kernel::fsx::{Beneath, FsxError};

/// Where a snapshot reads and writes.
pub(super) struct Place<'a> {
    pub work: &'a Path,
    pub store: &'a Path,
    /// The session's memo file.
    pub memo: &'a Path,
    pub caps: &'a Caps,
}

/// Snapshots `place.work`; `start` is when the snapshot began (what "racy" is measured from).
pub(super) fn take(place: &Place<'_>, start: SystemTime) -> Result<Snapshot, CheckpointError> {
    let (snapshot, writes) = read(place, start, Objects::new(place.store))?;
    writes.write()?;
    Ok(snapshot)
}

/// What a snapshot still has to write: the objects a deferring store holds, then the memo
/// (after them: a memo never names an object that is not stored).
pub(super) struct Writes {
    objects: Objects,
    memo: Memo,
    memo_path: PathBuf,
    store: PathBuf,
}

impl Writes {
    pub fn write(self) -> Result<(), CheckpointError> {
        self.objects
            .flush()
            .map_err(|e| io_error("write an object in", &self.store, &e))?;
        self.memo
            .save(&self.memo_path)
            .map_err(|e| io_error("write", &self.memo_path, &e))
    }
}

/// [`take`] with its writes left to the caller: the snapshot is whole (every file's content
/// read, every id known) when this returns; only the store is not written yet (up to
/// 8 MiB of objects held in memory, the rest written already).
pub(super) fn take_deferred(
    place: &Place<'_>,
    start: SystemTime,
) -> Result<(Snapshot, Writes), CheckpointError> {
    read(place, start, Objects::deferring(place.store))
}

fn read(
    place: &Place<'_>,
    start: SystemTime,
    objects: Objects,
) -> Result<(Snapshot, Writes), CheckpointError> {
    let old = Memo::load(place.memo, &objects);
    let work = Beneath::open(place.work).map_err(|e| io_error("open", place.work, &e))?;
    let (listed, mut skipped) = walk(&work);
    // Each listed file with what the last snapshot knew of it (one lookup per file).
    let listed: Vec<(String, Stat, Option<&Known>)> = listed
        .into_iter()
        .map(|(path, meta)| {
            let known = old.files.get(&path);
            (path, meta, known)
        })
        .collect();
    let mut plan = Plan {
        count: listed.iter().filter(|(_, _, k)| k.is_some()).count(),
        bytes: 0,
        caps: place.caps,
    };
    let (mut files, mut changed, mut kept) = (BTreeMap::new(), Vec::new(), 0);
    for (path, meta, known) in listed {
        let sig = Sig::of(&meta);
        if let Some(k) = known.filter(|k| !k.racy && k.sig == sig) {
            files.insert(path, *k);
            kept += 1;
            continue;
        }
        if let Some(reason) = plan.refuse(known.is_some(), sig.size) {
            skipped.push(Skipped {
                path,
                reason: reason.into(),
            });
            continue;
        }
        match store(&work, &path, &meta, &objects) {
            Ok(Some((mode, id, sig))) => {
                plan.bytes += sig.size;
                plan.count += usize::from(known.is_none());
                kept += usize::from(known.is_some());
                if known.is_none_or(|o| (o.id, o.mode) != (id, mode)) {
                    changed.push(path.clone());
                }
                let racy = sig.racy(start);
                files.insert(
                    path,
                    Known {
                        mode,
                        id,
                        sig,
                        racy,
                    },
                );
            }
            Ok(None) => plan.count -= usize::from(known.is_some()),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                plan.count -= usize::from(known.is_some());
                skipped.push(Skipped {
                    path,
                    reason: "unreadable".into(),
                });
            }
            Err(e) => return Err(io_error("read", &place.work.join(&path), &e)),
        }
    }
    // The last snapshot's files not kept are gone (or left out now).
    if kept < old.files.len() {
        changed.extend(
            old.files
                .keys()
                .filter(|p| !files.contains_key(*p))
                .cloned(),
        );
    }
    changed.sort();
    let built = tree::write(&files, &old.trees, &changed, &objects)
        .map_err(|e| io_error("write a tree in", place.store, &e))?;
    let tree = built.root;
    let memo = Memo {
        tree: Some(tree),
        files,
        trees: built.trees,
    };
    let snapshot = Snapshot {
        tree: tree.to_string(),
        skipped,
        changed,
    };
    let writes = Writes {
        objects,
        memo,
        memo_path: place.memo.to_path_buf(),
        store: place.store.to_path_buf(),
    };
    Ok((snapshot, writes))
}

/// The caps as a snapshot goes.
struct Plan<'a> {
    /// Files in the snapshot so far (those of the last one counted from the start).
    count: usize,
    /// Bytes read so far.
    bytes: u64,
    caps: &'a Caps,
}

impl Plan<'_> {
    /// Which cap leaves out a file to read (`known`: in the last snapshot), if any.
    fn refuse(&mut self, known: bool, size: u64) -> Option<&'static str> {
        let reason = if size > self.caps.max_file_bytes {
            "maxFileBytes"
        } else if !known && self.count >= self.caps.max_files {
            "maxFiles"
        } else if self.bytes + size > self.caps.max_total_bytes {
            "maxTotalBytes"
        } else {
            return None;
        };
        self.count -= usize::from(known);
        Some(reason)
    }
}

/// Stores one file (its content, or a symlink's target) as a blob: its mode, id and the
/// signature of what was read. `None`: gone, not a file git keeps (a socket, a fifo), or
/// changed into something else since it was listed (a symlink in its path now: left out,
/// never followed). Opened by descriptor beneath the work tree.
fn store(
    work: &Beneath,
    path: &str,
    listed: &Stat,
    objects: &Objects,
) -> io::Result<Option<(Mode, Oid, Sig)>> {
    let rel = Path::new(path);
    let kind = FileType::from_raw_mode(listed.st_mode);
    if kind != FileType::Symlink && kind != FileType::RegularFile {
        return Ok(None);
    }
    let flags = match kind {
        FileType::Symlink => OFlags::PATH,
        _ => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
    };
    let fd = match work.open_at(rel, flags) {
        Ok(fd) => fd,
        Err(FsxError::Io(e)) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        Err(_) => return Ok(None),
    };
    let now = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(now.st_mode) != kind {
        return Ok(None);
    }
    if kind == FileType::Symlink {
        let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
        let id = objects.blob(target.as_bytes())?;
        return Ok(Some((Mode::Symlink, id, Sig::of(&now))));
    }
    // The signature of what is read: a write during the read moves its ctime past it.
    let mut file = File::from(fd);
    let mut body = Vec::with_capacity(usize::try_from(now.st_size).unwrap_or(0));
    file.read_to_end(&mut body)?;
    let mode = match now.st_mode & 0o100 {
        0 => Mode::File,
        _ => Mode::Executable,
    };
    Ok(Some((mode, objects.blob(&body)?, Sig::of(&now))))
}

fn io_error(what: &str, path: &Path, e: &io::Error) -> CheckpointError {
    CheckpointError::new(Kind::Io, format!("cannot {what} {}: {e}", path.display()))
}
