//! The shadow repository's object database, written in-process: git loose objects (a
//! zlib-compressed `"<kind> <len>\0"` header and body, named by the SHA-1 of both), the
//! format the `git` binary reads back for a restore. A snapshot writes its blobs and trees
//! here without starting a process; an object already stored is never written again.
//! Never touches anything outside the store.

use std::fmt;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use flate2::write::ZlibEncoder;
use flate2::Compression;
use sha1::{Digest, Sha1};

/// A git object id (SHA-1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Oid(pub [u8; 20]);

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A tree entry's mode, as git writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    File,
    Executable,
    Symlink,
    Tree,
}

impl Mode {
    fn octal(self) -> &'static [u8] {
        match self {
            Mode::File => b"100644",
            Mode::Executable => b"100755",
            Mode::Symlink => b"120000",
            Mode::Tree => b"40000",
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Mode::File => 0,
            Mode::Executable => 1,
            Mode::Symlink => 2,
            Mode::Tree => 3,
        }
    }

    /// The mode git writes as `octal` (`100644`, …), as `ls-tree` shows it.
    pub fn of_octal(octal: &[u8]) -> Option<Mode> {
        [Mode::File, Mode::Executable, Mode::Symlink, Mode::Tree]
            .into_iter()
            .find(|m| m.octal() == octal)
    }

    pub fn of_code(code: u8) -> Option<Mode> {
        [Mode::File, Mode::Executable, Mode::Symlink, Mode::Tree]
            .into_iter()
            .find(|m| m.code() == code)
    }
}

/// The loose objects of one store (`<store>/objects`).
pub(super) struct Objects {
    dir: PathBuf,
    /// Deferring: the objects named but not written yet, in the order they were named (blobs
    /// before the trees that list them), and their bytes.
    held: Option<Mutex<Held>>,
}

/// See [`Objects::deferring`].
#[derive(Default)]
struct Held {
    objects: Vec<(Oid, &'static str, Vec<u8>)>,
    bytes: usize,
}

/// The most bytes a deferring store holds: past it, objects are written as they are named
/// (a first snapshot of a large tree is not kept in memory).
const HOLD_BYTES: usize = 8 << 20;

/// Names temporary files uniquely within this process.
static TEMP: AtomicU64 = AtomicU64::new(0);

impl Objects {
    pub fn new(store: &Path) -> Objects {
        Objects {
            dir: store.join("objects"),
            held: None,
        }
    }

    /// A store whose objects are named (their ids computed) at once and written by
    /// [`Objects::flush`], up to [`HOLD_BYTES`] of them; the rest are written as they come.
    /// What a turn needs before its tool runs is the ids; the writing can overlap the tool.
    pub fn deferring(store: &Path) -> Objects {
        Objects {
            held: Some(Mutex::new(Held::default())),
            ..Objects::new(store)
        }
    }

    /// Writes the objects a deferring store holds, in the order they were named.
    pub fn flush(&self) -> io::Result<()> {
        let Some(held) = &self.held else {
            return Ok(());
        };
        let held = std::mem::take(&mut *held.lock().unwrap_or_else(|e| e.into_inner()));
        for (id, kind, body) in held.objects {
            self.store(id, kind, &body)?;
        }
        Ok(())
    }

    fn path(&self, id: &Oid) -> PathBuf {
        let hex = id.to_string();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    /// Whether the store holds object `id` (loose; the store is never packed: `gc.auto=0`).
    pub fn has(&self, id: &Oid) -> bool {
        self.path(id).is_file()
    }

    /// Stores a blob; its id.
    pub fn blob(&self, body: &[u8]) -> io::Result<Oid> {
        self.write("blob", body)
    }

    /// Stores a tree of `entries` (name, mode, id; any order); its id.
    pub fn tree(&self, entries: &mut [(Vec<u8>, Mode, Oid)]) -> io::Result<Oid> {
        // git's order: names compared as bytes, a tree's name as if it ended with '/'.
        entries.sort_by(|a, b| Iterator::cmp(sort_key(a), sort_key(b)));
        let mut body = Vec::with_capacity(entries.len() * 40);
        for (name, mode, id) in entries.iter() {
            body.extend_from_slice(mode.octal());
            body.push(b' ');
            body.extend_from_slice(name);
            body.push(0);
            body.extend_from_slice(&id.0);
        }
        self.write("tree", &body)
    }

    fn write(&self, kind: &'static str, body: &[u8]) -> io::Result<Oid> {
        let mut hasher = Sha1::new();
        hasher.update(header(kind, body).as_bytes());
        hasher.update(body);
        let id = Oid(hasher.finalize().into());
        if let Some(held) = &self.held {
            let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
            if held.bytes + body.len() <= HOLD_BYTES {
                held.bytes += body.len();
                held.objects.push((id, kind, body.to_vec()));
                return Ok(id);
            }
        }
        self.store(id, kind, body)?;
        Ok(id)
    }

    /// Writes object `id` unless the store has it.
    fn store(&self, id: Oid, kind: &str, body: &[u8]) -> io::Result<()> {
        let path = self.path(&id);
        if path.is_file() {
            return Ok(());
        }
        let dir = path.parent().unwrap_or(&self.dir);
        let temp = dir.join(format!(
            "tmp_obj_{}_{}",
            std::process::id(),
            TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        // As git leaves its objects: read-only (the store's directory is 0700). Not synced:
        // a snapshot lost with the machine costs only that checkpoint, and the memo is
        // written after its objects.
        let create = || {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&temp)
        };
        // The fan-out directory is made only when it is missing (one syscall per object).
        let file = match create() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir)?;
                create()?
            }
            other => other?,
        };
        let written = (|| {
            let mut z = ZlibEncoder::new(io::BufWriter::new(file), Compression::fast());
            z.write_all(header(kind, body).as_bytes())?;
            z.write_all(body)?;
            z.finish()?.flush()?;
            fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// A loose object's header: `"<kind> <len>\0"`.
fn header(kind: &str, body: &[u8]) -> String {
    format!("{kind} {}\0", body.len())
}

fn sort_key(
    entry: &(Vec<u8>, Mode, Oid),
) -> std::iter::Chain<std::slice::Iter<'_, u8>, std::slice::Iter<'_, u8>> {
    let slash: &[u8] = if entry.1 == Mode::Tree { b"/" } else { b"" };
    entry.0.iter().chain(slash.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_and_tree_ids_are_gits() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path());
        // `printf 'hello\n' | git hash-object --stdin`
        let hello = objects.blob(b"hello\n").unwrap();
        assert_eq!(
            hello.to_string(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert!(objects.has(&hello));
        // The empty tree, and a tree whose order puts "a.b" before the directory "a".
        let empty = objects.tree(&mut []).unwrap();
        assert_eq!(
            empty.to_string(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
        let sub = objects
            .tree(&mut [(b"x".to_vec(), Mode::File, hello)])
            .unwrap();
        let mut entries = vec![
            (b"a".to_vec(), Mode::Tree, sub),
            (b"a.b".to_vec(), Mode::Executable, hello),
        ];
        let top = objects.tree(&mut entries).unwrap();
        assert_eq!(entries[0].0, b"a.b");
        assert!(objects.has(&top));
    }

    #[test]
    fn a_deferring_store_names_objects_at_once_and_writes_them_when_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::deferring(dir.path());
        let hello = objects.blob(b"hello\n").unwrap();
        assert_eq!(
            hello.to_string(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        let top = objects
            .tree(&mut [(b"x".to_vec(), Mode::File, hello)])
            .unwrap();
        assert!(!objects.has(&hello) && !objects.has(&top), "held");
        // Past the limit, an object is written as it is named.
        let big = objects.blob(&vec![1u8; HOLD_BYTES]).unwrap();
        assert!(objects.has(&big));
        objects.flush().unwrap();
        assert!(objects.has(&hello) && objects.has(&top));
        let plain = Objects::new(dir.path());
        assert_eq!(plain.blob(b"hello\n").unwrap(), hello, "the same object");
    }
}
