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

    pub fn of_code(code: u8) -> Option<Mode> {
        [Mode::File, Mode::Executable, Mode::Symlink, Mode::Tree]
            .into_iter()
            .find(|m| m.code() == code)
    }
}

/// The loose objects of one store (`<store>/objects`).
pub(super) struct Objects {
    dir: PathBuf,
}

/// Names temporary files uniquely within this process.
static TEMP: AtomicU64 = AtomicU64::new(0);

impl Objects {
    pub fn new(store: &Path) -> Objects {
        Objects {
            dir: store.join("objects"),
        }
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

    fn write(&self, kind: &str, body: &[u8]) -> io::Result<Oid> {
        let header = format!("{kind} {}\0", body.len());
        let mut hasher = Sha1::new();
        hasher.update(header.as_bytes());
        hasher.update(body);
        let id = Oid(hasher.finalize().into());
        let path = self.path(&id);
        if path.is_file() {
            return Ok(id);
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
            z.write_all(header.as_bytes())?;
            z.write_all(body)?;
            z.finish()?.flush()?;
            fs::rename(&temp, &path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written.map(|()| id)
    }
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
}
