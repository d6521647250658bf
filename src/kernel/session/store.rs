//! The append-only session file: lazy creation, one `write_all` per entry line (synced to
//! stable storage only by `sync`, once for all the lines written since the last one), the
//! advisory lock, loading with torn-line tolerance, the current branch and the model context
//! built from it. Never rewrites or truncates a file, never reads the system clock (ids and times come from
//! `Clock`), and never prints: load problems are returned as warning strings.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::load::load;
use super::{iso_ms, Entry, EntryData, SessionError, SessionErrorKind, SessionHeader};
use crate::kernel::clock::Clock;
use crate::kernel::message::Message;
use crate::kernel::private;

/// pi's wrapping of a compaction summary when it is sent to the model.
const COMPACTION_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUFFIX: &str = "\n</summary>";

/// A compaction summary as the model sees it (a user message).
pub fn compaction_text(summary: &str) -> String {
    format!("{COMPACTION_PREFIX}{summary}{COMPACTION_SUFFIX}")
}

/// One session: its header, its entries in file order, the current leaf and (once
/// materialized) the open, locked file that new entries are appended to.
#[derive(Debug)]
pub struct Store {
    header: SessionHeader,
    /// `None` for an in-memory session (`--no-session`).
    path: Option<PathBuf>,
    entries: Vec<Entry>,
    /// Entry id → index in `entries` (the later one wins for duplicate ids, as in pi).
    by_id: HashMap<String, usize>,
    /// The index of each entry's parent (its `parent_id` looked up in `by_id`), so walking a
    /// branch of a long session needs no lookups.
    parents: Vec<Option<usize>>,
    leaf: Option<usize>,
    /// The append handle; holds the exclusive lock for the Store's lifetime.
    file: Option<File>,
    /// The file does not end with `\n` (torn line or failed write): start the next write with one.
    needs_newline: bool,
    /// Lines kept in memory because writing them failed (full disk, I/O error): written
    /// before the next entry, so nothing is lost once the store works again.
    unsaved: Vec<u8>,
    /// Bytes were written to the file since its last data sync.
    unsynced: bool,
    /// The file was created here and its directory entry is not synced yet.
    dir_unsynced: bool,
}

impl Store {
    /// A session that will live at `path`. Nothing touches the disk until the first `message`
    /// entry is appended; then the header and every buffered entry are written at once.
    pub fn new_file(path: PathBuf, header: SessionHeader) -> Store {
        Store::build(Some(path), header)
    }

    /// A session that is never written (`--no-session`).
    pub fn in_memory(header: SessionHeader) -> Store {
        Store::build(None, header)
    }

    fn build(path: Option<PathBuf>, header: SessionHeader) -> Store {
        Store {
            header,
            path,
            entries: Vec::new(),
            by_id: HashMap::new(),
            parents: Vec::new(),
            leaf: None,
            file: None,
            needs_newline: false,
            unsaved: Vec::new(),
            unsynced: false,
            dir_unsynced: false,
        }
    }

    /// Loads an existing session file and takes its lock. The leaf is the last entry in the
    /// file. Torn or malformed lines are skipped and reported in the returned warnings (their
    /// children are reattached to the entry before them); a file whose first line is not a
    /// session header is an `Invalid` error.
    pub fn open(path: &Path) -> Result<(Store, Vec<String>), SessionError> {
        let file = regular(path)?
            .read(true)
            .append(true)
            .open(path)
            .map_err(|e| open_error(path, &e))?;
        lock(&file, path)?;
        Store::load(path, file, true)
    }

    /// Loads a session file without locking or ever writing it (the source of a fork, which
    /// another process may hold): the returned store is in memory only.
    pub fn read(path: &Path) -> Result<(Store, Vec<String>), SessionError> {
        let file = regular(path)?
            .read(true)
            .open(path)
            .map_err(|e| open_error(path, &e))?;
        Store::load(path, file, false)
    }

    /// Creates a new session file at `path` holding only `header`, atomically: the header is
    /// written and locked under a temporary name, then linked to `path`, which fails if
    /// anything exists there. So a second process creating the same path gets `Locked` (its
    /// `open` finds the lock), never an empty or duplicate file. The directory is synced.
    pub fn create(path: PathBuf, header: SessionHeader) -> Result<Store, SessionError> {
        let dir = parent_dir(&path);
        private::create_dir_all(dir)
            .map_err(|e| SessionError::io("create the directory of", &path, &e))?;
        let mut bytes = header.to_json().to_string();
        bytes.push('\n');
        let tmp = tempfile::Builder::new()
            .prefix(".keel-new-")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(|e| SessionError::io("create", &path, &e))?;
        let io = |what: &str, e: std::io::Error| SessionError::io(what, &path, &e);
        private::fix_mode(tmp.as_file()).map_err(|e| io("create", e))?;
        lock(tmp.as_file(), &path)?;
        tmp.as_file()
            .write_all(bytes.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| io("write", e))?;
        if let Err(e) = fs::hard_link(tmp.path(), &path) {
            return Err(match e.kind() {
                ErrorKind::AlreadyExists => SessionError::new(
                    SessionErrorKind::Locked,
                    format!(
                        "session {} is in use by another keel process",
                        path.display()
                    ),
                ),
                _ => io("create", e),
            });
        }
        // The temporary name goes; the lock stays with the open file (the same inode). The
        // file offset is at its end, where every later line is appended.
        let (file, tmp_path) = tmp.keep().map_err(|e| io("create", e.error))?;
        let _ = fs::remove_file(tmp_path);
        private::sync_dir(dir).map_err(|e| io("sync the directory of", e))?;
        let mut store = Store::build(Some(path), header);
        store.file = Some(file);
        Ok(store)
    }

    fn load(path: &Path, file: File, writable: bool) -> Result<(Store, Vec<String>), SessionError> {
        let parsed = load(path, &file)?;
        let mut store = Store::build(writable.then(|| path.to_path_buf()), parsed.header);
        store.leaf = parsed.entries.len().checked_sub(1);
        store.entries = parsed.entries;
        store.by_id = parsed.by_id;
        match parsed.parents {
            Some(parents) => store.parents = parents,
            None => store.link_parents(),
        }
        if writable {
            store.file = Some(file);
            store.needs_newline = parsed.torn_end;
        }
        Ok((store, parsed.warnings))
    }

    /// The header line.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The session file, `None` for an in-memory session. The file may not exist yet.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every entry, in file order (all branches).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The id of the current leaf: the parent of the next appended entry.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.map(|i| self.entries[i].id.as_str())
    }

    /// Whether the file has been created (and is locked by this Store).
    pub fn is_materialized(&self) -> bool {
        self.file.is_some()
    }

    /// Moves the leaf to `id` (or before the first entry with `None`), so the next append
    /// starts a new branch there. Not persisted: on load the leaf is the last entry.
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), SessionError> {
        self.leaf = match id {
            None => None,
            Some(id) => Some(*self.by_id.get(id).ok_or_else(|| {
                SessionError::new(
                    SessionErrorKind::NotFound,
                    format!("no entry {id:?} in session {}", self.header.id),
                )
            })?),
        };
        Ok(())
    }

    /// Appends an entry under the current leaf and makes it the leaf. Its id comes from
    /// `clock.entry_id()` (redrawn on collision), its timestamp from `clock.now_iso()`.
    /// The line is written with one `write_all`; on error nothing is appended.
    pub fn append(&mut self, data: EntryData, clock: &Clock) -> Result<&Entry, SessionError> {
        self.append_as(None, None, data, clock)
    }

    /// Like [`Store::append`], with the id the kernel already gave the entry (a fresh id is
    /// drawn only if `id` is taken in this file; the caller reads the id it got back) and
    /// optionally the entry time in Unix ms.
    pub fn append_as(
        &mut self,
        id: Option<&str>,
        at_ms: Option<i64>,
        data: EntryData,
        clock: &Clock,
    ) -> Result<&Entry, SessionError> {
        let id = match id {
            Some(id) if !id.is_empty() && !self.by_id.contains_key(id) => id.to_string(),
            _ => self.fresh_id(clock),
        };
        let entry = Entry {
            id,
            parent_id: self.leaf_id().map(str::to_string),
            timestamp: match at_ms {
                Some(ms) => crate::kernel::clock::iso(ms),
                None => clock.now_iso(),
            },
            data,
        };
        let line = entry.to_line().map_err(|e| {
            SessionError::new(
                SessionErrorKind::Invalid,
                format!("cannot write a {} entry: {e}", entry.data.type_name()),
            )
        })?;
        let is_message = entry.data.is_message();
        // The entry is part of the session from now on, saved or not: a failed write keeps
        // it (and what follows) in memory and retries before the next entry and at sync.
        let i = self.push(entry);
        let written = if self.file.is_some() {
            self.write(line.as_bytes())
        } else if self.path.is_some() && (is_message || self.has_message()) {
            self.materialize()
        } else {
            Ok(())
        };
        written.map(|()| &self.entries[i])
    }

    /// Writes entries that failed to save before, then flushes what was written since the
    /// last sync to stable storage with one `sync_data` (none if nothing was), and the
    /// directory of a file created since. The turn loop calls it at each turn's end: a killed
    /// process loses nothing (every line is written as it comes), a power cut at most the
    /// turn in progress. An error names the file and the OS error.
    pub fn sync(&mut self) -> Result<(), SessionError> {
        if self.file.is_none() && self.path.is_some() && self.has_message() {
            self.materialize()?;
        }
        if !self.unsaved.is_empty() {
            self.write(&[])?;
        }
        let (Some(file), Some(path)) = (&self.file, &self.path) else {
            return Ok(());
        };
        if self.unsynced {
            private::sync_data(file).map_err(|e| SessionError::io("sync", path, &e))?;
            self.unsynced = false;
        }
        if self.dir_unsynced {
            private::sync_dir(parent_dir(path))
                .map_err(|e| SessionError::io("sync the directory of", path, &e))?;
            self.dir_unsynced = false;
        }
        Ok(())
    }

    /// Whether entries are held in memory that are not (yet) in the file.
    pub fn has_unsaved(&self) -> bool {
        !self.unsaved.is_empty()
            || (self.file.is_none() && self.path.is_some() && self.has_message())
    }

    fn has_message(&self) -> bool {
        self.entries.iter().any(|e| e.data.is_message())
    }

    /// The entries on the path from the root to the leaf.
    pub fn branch(&self) -> Vec<&Entry> {
        self.branch_to(self.leaf_id()).unwrap_or_default()
    }

    /// The messages the model sees: the branch root→leaf. With a compaction on the branch
    /// (the last one wins), it is the wrapped summary, then the messages from its
    /// `firstKeptEntryId` up to the compaction, then those after it. Branch summaries and
    /// `custom_message` entries become user messages as in pi; unknown roles are left out.
    pub fn context(&self) -> Vec<Message> {
        self.context_entries().into_iter().map(|(_, m)| m).collect()
    }

    /// [`Store::context`] with the id of the entry behind each message (the summary message
    /// carries its compaction entry's id).
    pub fn context_entries(&self) -> Vec<(String, Message)> {
        let path = self.branch();
        let keep = |e: &&Entry| e.context_message().map(|m| (e.id.clone(), m));
        let compaction = path
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| match &e.data {
                EntryData::Compaction {
                    summary,
                    first_kept_entry_id,
                    ..
                } => Some((i, summary, first_kept_entry_id, e)),
                _ => None,
            });
        let Some((at, summary, first_kept, entry)) = compaction else {
            return path.iter().filter_map(keep).collect();
        };
        let mut out = vec![(
            entry.id.clone(),
            Message::user(compaction_text(summary), iso_ms(&entry.timestamp)),
        )];
        if let Some(start) = path[..at].iter().position(|e| &e.id == first_kept) {
            out.extend(path[start..at].iter().filter_map(keep));
        }
        out.extend(path[at + 1..].iter().filter_map(keep));
        out
    }

    /// The provider and model of the last `model_change` on the current branch.
    pub fn last_model(&self) -> Option<(&str, &str)> {
        self.branch().into_iter().rev().find_map(|e| match &e.data {
            EntryData::ModelChange { provider, model_id } => {
                Some((provider.as_str(), model_id.as_str()))
            }
            _ => None,
        })
    }

    /// Writes a new session file at `path` holding the current branch (ids kept) under
    /// `header` (the caller sets `parent_session`). Written, synced and locked immediately.
    pub fn fork_to(&self, path: PathBuf, header: SessionHeader) -> Result<Store, SessionError> {
        self.fork_at(self.leaf_id(), Some(path), header)
    }

    /// A new session holding the branch that ends at `leaf` (nothing for `None`), ids kept,
    /// under `header`. With a path it is written, synced and locked at once (a file that
    /// cannot be synced is removed again); without one it stays in memory (a `--no-session`
    /// fork).
    pub fn fork_at(
        &self,
        leaf: Option<&str>,
        path: Option<PathBuf>,
        header: SessionHeader,
    ) -> Result<Store, SessionError> {
        let mut store = Store::build(path, header);
        for entry in self.branch_to(leaf)? {
            store.push(entry.clone());
        }
        if !store.entries.is_empty() {
            store.materialize()?;
            if let Err(e) = store.sync() {
                if let Some(path) = store.path.clone() {
                    drop(store);
                    let _ = fs::remove_file(path);
                }
                return Err(e);
            }
        }
        Ok(store)
    }

    /// The entries on the path from the root to `leaf` (none for `None`).
    pub fn branch_to(&self, leaf: Option<&str>) -> Result<Vec<&Entry>, SessionError> {
        let Some(id) = leaf else {
            return Ok(Vec::new());
        };
        let Some(&start) = self.by_id.get(id) else {
            return Err(SessionError::new(
                SessionErrorKind::NotFound,
                format!("no entry {id:?} in session {}", self.header.id),
            ));
        };
        let mut out = Vec::new();
        let mut cur = Some(start);
        while let Some(i) = cur {
            if out.len() >= self.entries.len() {
                break; // a parentId cycle in a damaged file
            }
            out.push(&self.entries[i]);
            cur = self.parents[i];
        }
        out.reverse();
        Ok(out)
    }

    /// The entry with this id.
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    /// The session's display name: the last `session_info` entry in the file.
    pub fn name(&self) -> Option<&str> {
        self.entries.iter().rev().find_map(|e| match &e.data {
            EntryData::SessionInfo { name } => Some(name.as_str()),
            _ => None,
        })
    }

    fn push(&mut self, entry: Entry) -> usize {
        let i = self.entries.len();
        let parent = entry
            .parent_id
            .as_ref()
            .and_then(|p| self.by_id.get(p))
            .copied();
        let taken = self.by_id.insert(entry.id.clone(), i).is_some();
        self.entries.push(entry);
        self.parents.push(parent);
        if taken {
            self.link_parents(); // a duplicate id now stands for the later entry
        }
        self.leaf = Some(i);
        i
    }

    /// Looks up every entry's parent in `by_id`.
    fn link_parents(&mut self) {
        let by_id = &self.by_id;
        self.parents = (self.entries.iter())
            .map(|e| e.parent_id.as_ref().and_then(|p| by_id.get(p)).copied())
            .collect();
    }

    fn fresh_id(&self, clock: &Clock) -> String {
        for _ in 0..64 {
            let id = clock.entry_id();
            if !self.by_id.contains_key(&id) {
                return id;
            }
        }
        clock.session_id() // pi's fallback: a full UUID
    }

    /// Creates (O_EXCL, owner-only) and locks the file, then writes the header and every
    /// entry held so far in one `write_all`; the file and its directory are synced by the
    /// next [`Store::sync`]. On a failed write the new file is removed again and the entries
    /// stay in memory for the next try.
    fn materialize(&mut self) -> Result<(), SessionError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let dir = parent_dir(&path);
        private::create_dir_all(dir)
            .map_err(|e| SessionError::io("create the directory of", &path, &e))?;
        let mut bytes = self.header.to_json().to_string();
        bytes.push('\n');
        for entry in &self.entries {
            let line = entry.to_line().map_err(|e| {
                SessionError::new(
                    SessionErrorKind::Invalid,
                    format!("cannot write entry {}: {e}", entry.id),
                )
            })?;
            bytes.push_str(&line);
        }
        let file = private::options()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| SessionError::io("create", &path, &e))?;
        lock(&file, &path)?;
        let written = private::fix_mode(&file).and_then(|()| (&file).write_all(bytes.as_bytes()));
        if let Err(e) = written {
            drop(file);
            let _ = fs::remove_file(&path);
            return Err(SessionError::io("write", &path, &e));
        }
        self.file = Some(file);
        self.needs_newline = false;
        self.unsaved.clear();
        self.unsynced = true;
        self.dir_unsynced = true;
        Ok(())
    }

    /// Appends what failed to save before and then `line`, with a single `write_all`, after a
    /// `\n` if the file ends in a torn line. On failure everything is kept for the next try.
    fn write(&mut self, line: &[u8]) -> Result<(), SessionError> {
        let (Some(file), Some(path)) = (self.file.as_mut(), self.path.as_ref()) else {
            return Ok(());
        };
        let mut bytes = Vec::with_capacity(self.unsaved.len() + line.len() + 1);
        if self.needs_newline {
            bytes.push(b'\n');
        }
        bytes.extend_from_slice(&self.unsaved);
        bytes.extend_from_slice(line);
        match file.write_all(&bytes) {
            Ok(()) => {
                self.needs_newline = false;
                self.unsaved.clear();
                self.unsynced = true;
                Ok(())
            }
            Err(e) => {
                self.needs_newline = true; // part of the line may be on disk
                self.unsaved.extend_from_slice(line);
                Err(SessionError::io("append to", path, &e))
            }
        }
    }
}

/// The directory a session file lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Refuses a path that exists but is not a regular file (a FIFO would block the open, a
/// device would never end), before opening it. Returns fresh open options.
fn regular(path: &Path) -> Result<OpenOptions, SessionError> {
    match fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(SessionError::new(
            SessionErrorKind::Invalid,
            format!(
                "{} is not a session file: it is {}",
                path.display(),
                crate::kernel::tool::file::irregular_kind(&m).unwrap_or("not a regular file")
            ),
        )),
        _ => Ok(OpenOptions::new()),
    }
}

fn open_error(path: &Path, e: &std::io::Error) -> SessionError {
    match e.kind() {
        ErrorKind::NotFound => SessionError::new(
            SessionErrorKind::NotFound,
            format!("session {} does not exist", path.display()),
        ),
        _ => SessionError::io("open", path, e),
    }
}

/// How long a lock held elsewhere is waited for before the session counts as in use: a
/// process this one (or a test beside it) is spawning holds a copy of every open file, and so
/// of the lock, from its fork until its exec closes it, a few milliseconds.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

fn lock(file: &File, path: &Path) -> Result<(), SessionError> {
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return locked(other, path),
        }
    }
}

fn locked(result: Result<(), TryLockError>, path: &Path) -> Result<(), SessionError> {
    match result {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(SessionError::new(
            SessionErrorKind::Locked,
            format!(
                "session {} is in use by another keel process",
                path.display()
            ),
        )),
        Err(TryLockError::Error(e)) => Err(SessionError::io("lock", path, &e)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
