//! What a session's last snapshot knew about each file: its stat signature (size, mtime,
//! ctime, inode, device, mode bits) and the blob it was stored as. A file whose signature is
//! unchanged is not read again; one whose times were too close to the snapshot to tell a later
//! change apart ("racy", as git calls it) is read again next time. Kept per session in the
//! store (`memo-<session>`), so a restart does not re-read the tree. A memo that is missing,
//! damaged or names objects the store no longer has is ignored: the snapshot reads every file.

use std::collections::BTreeMap;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::object::{Mode, Objects, Oid};
use crate::kernel::private;

/// A file whose mtime or ctime is this close to (or after) the snapshot's start is racy:
/// file times come from a coarse clock, so a change soon after could leave them as they are.
pub(super) const RACY: Duration = Duration::from_secs(2);

const MAGIC: &[u8] = b"keel-checkpoint-memo 1\n";

/// A file's stat signature: equal signatures mean the file was not written in between
/// (any write moves ctime, which user space cannot set back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sig {
    pub size: u64,
    pub mtime: (i64, i64),
    pub ctime: (i64, i64),
    pub ino: u64,
    pub dev: u64,
    pub mode: u32,
}

impl Sig {
    pub fn of(meta: &Metadata) -> Sig {
        Sig {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
        }
    }

    /// Whether a change right after a snapshot started at `start` could keep this signature.
    pub fn racy(&self, start: SystemTime) -> bool {
        let limit = start
            .checked_sub(RACY)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| (d.as_secs() as i64, i64::from(d.subsec_nanos())))
            .unwrap_or((0, 0));
        self.mtime >= limit || self.ctime >= limit
    }
}

/// One file of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    pub mode: Mode,
    pub id: Oid,
    pub sig: Sig,
    /// Read again at the next snapshot, whatever its signature.
    pub racy: bool,
}

/// The last snapshot of a session: its tree and its files by path.
#[derive(Debug, Default)]
pub(super) struct Memo {
    pub tree: Option<Oid>,
    pub files: BTreeMap<String, Known>,
}

impl Memo {
    /// The memo at `path`, if it is whole and its tree is still in `objects`.
    pub fn load(path: &Path, objects: &Objects) -> Memo {
        fs::read(path)
            .ok()
            .and_then(|bytes| decode(&bytes))
            .filter(|m| m.tree.is_some_and(|t| objects.has(&t)))
            .unwrap_or_default()
    }

    /// Writes the memo to `path` (a new file renamed over the old one).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let temp = path.with_extension(format!("tmp{}", std::process::id()));
        private::write_file(&temp, &self.encode())?;
        fs::rename(&temp, path)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + 24 + self.files.len() * 100);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.tree.map(|t| t.0).unwrap_or_default());
        out.extend_from_slice(&(self.files.len() as u64).to_le_bytes());
        for (path, k) in &self.files {
            out.extend_from_slice(&(path.len() as u64).to_le_bytes());
            out.extend_from_slice(path.as_bytes());
            out.push(k.mode.code());
            out.push(u8::from(k.racy));
            out.extend_from_slice(&k.id.0);
            let s = &k.sig;
            for n in [s.size, s.ino, s.dev, u64::from(s.mode)] {
                out.extend_from_slice(&n.to_le_bytes());
            }
            for n in [s.mtime.0, s.mtime.1, s.ctime.0, s.ctime.1] {
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
        out
    }
}

/// Reads what [`Memo::encode`] wrote; `None` for anything else.
fn decode(bytes: &[u8]) -> Option<Memo> {
    let mut r = Reader(bytes.strip_prefix(MAGIC)?);
    let tree = Some(Oid(r.take(20)?.try_into().ok()?));
    let count = r.u64()?;
    let mut files = BTreeMap::new();
    for _ in 0..count {
        let len = usize::try_from(r.u64()?).ok()?;
        let path = String::from_utf8(r.take(len)?.to_vec()).ok()?;
        let mode = Mode::of_code(r.take(1)?[0])?;
        let racy = r.take(1)?[0] != 0;
        let id = Oid(r.take(20)?.try_into().ok()?);
        let (size, ino, dev, bits) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let mtime = (r.i64()?, r.i64()?);
        let ctime = (r.i64()?, r.i64()?);
        let sig = Sig {
            size,
            mtime,
            ctime,
            ino,
            dev,
            mode: u32::try_from(bits).ok()?,
        };
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
    r.0.is_empty().then_some(Memo { tree, files })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(ctime: i64) -> Sig {
        Sig {
            size: 5,
            mtime: (1_000, 7),
            ctime: (ctime, 9),
            ino: 42,
            dev: 3,
            mode: 0o100644,
        }
    }

    #[test]
    fn a_memo_reads_back_as_written_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::new(dir.path());
        let id = objects.blob(b"x").unwrap();
        let tree = objects
            .tree(&mut [(b"a".to_vec(), Mode::File, id)])
            .unwrap();
        let mut memo = Memo {
            tree: Some(tree),
            files: BTreeMap::new(),
        };
        let known = Known {
            mode: Mode::Executable,
            id,
            sig: sig(2_000),
            racy: true,
        };
        memo.files.insert("d/é.txt".into(), known);
        let path = dir.path().join("memo-s");
        memo.save(&path).unwrap();
        let back = Memo::load(&path, &objects);
        assert_eq!(back.tree, Some(tree));
        assert_eq!(back.files.get("d/é.txt"), Some(&known));
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(Memo::load(&path, &objects).files.is_empty());
        // A memo whose tree the store lost is not trusted.
        memo.tree = Some(Oid([7; 20]));
        memo.save(&path).unwrap();
        assert!(Memo::load(&path, &objects).files.is_empty());
    }

    #[test]
    fn recent_times_are_racy() {
        let start = UNIX_EPOCH + Duration::from_secs(2_001);
        assert!(sig(2_000).racy(start));
        assert!(!sig(1_990).racy(start));
    }
}
