//! What a session's last snapshot knew about each file: its stat signature (size, mtime,
//! ctime, inode, device, mode bits) and the blob it was stored as; and each directory's tree
//! (so the next snapshot rebuilds only the trees on the paths of what changed). A file whose signature is
//! unchanged is not read again; one whose times were too close to the snapshot to tell a later
//! change apart ("racy", as git calls it) is read again next time. Kept per session in the
//! store (`memo-<session>`), so a restart does not re-read the tree. A memo that is missing,
//! damaged or names objects the store no longer has is ignored: the snapshot reads every file.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::object::{Mode, Objects, Oid};
use super::tree::Trees;
use crate::kernel::private;

/// A file whose mtime or ctime is this close to (or after) the snapshot's start is racy
/// (git's "racily clean" entries): a change right after the file was read could leave its
/// times as they are, so it is read again next time. File times come from the kernel's
/// coarse clock (up to a tick, at most 10 ms, behind the real one) rounded down to what the
/// file system keeps: a file with sub-second times can share its times with a later change
/// only within [`RACY_FINE`] of the start; one whose times are whole seconds (a file system
/// that keeps only seconds, or two: FAT) within [`RACY`].
pub(super) const RACY: Duration = Duration::from_secs(2);

/// The racy window of a file whose times have sub-second parts: a tick of the coarse clock
/// (at most 10 ms) and the coarsest sub-second granularity of a file system (exFAT's 10 ms),
/// with room to spare.
pub(super) const RACY_FINE: Duration = Duration::from_millis(50);

const MAGIC: &[u8] = b"keel-checkpoint-memo 3\n";

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
    /// The signature of an `lstat` taken by descriptor (see `walk.rs`).
    // `Stat`'s field types differ between architectures (x86_64: these casts are no-ops).
    #[allow(clippy::unnecessary_cast)]
    pub fn of(st: &rustix::fs::Stat) -> Sig {
        Sig {
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            ino: st.st_ino as u64,
            dev: st.st_dev as u64,
            mode: st.st_mode as u32,
        }
    }

    /// Whether a change right after a snapshot started at `start` could keep this signature
    /// (its mtime or ctime is not older than `start` less the file system's granularity).
    pub fn racy(&self, start: SystemTime) -> bool {
        let whole_seconds = self.mtime.1 == 0 && self.ctime.1 == 0;
        let window = if whole_seconds { RACY } else { RACY_FINE };
        let limit = start
            .checked_sub(window)
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

/// The last snapshot of a session: its tree, its files by path and its directories' trees.
#[derive(Debug, Default)]
pub(super) struct Memo {
    pub tree: Option<Oid>,
    pub files: BTreeMap<String, Known>,
    pub trees: Trees,
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

    /// Writes the memo to `path`, over the old one in place: no new file per snapshot (making
    /// and deleting a file each turn is most of what a small snapshot costs on ext4). A write
    /// cut short (a crash, a full disk) fails the CRC-32 at its end, and a memo that fails it
    /// is ignored like a missing one. Only the session's own turns write it, one at a time.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let mut bytes = self.encode();
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let mut file = private::open_rw(path)?;
        file.write_all(&bytes)?;
        file.set_len(bytes.len() as u64)
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
        out.extend_from_slice(&(self.trees.len() as u64).to_le_bytes());
        for (dir, id) in &self.trees {
            out.extend_from_slice(&(dir.len() as u64).to_le_bytes());
            out.extend_from_slice(dir.as_bytes());
            out.extend_from_slice(&id.0);
        }
        out
    }
}

/// Reads what [`Memo::save`] wrote; `None` for anything else.
fn decode(bytes: &[u8]) -> Option<Memo> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return None;
    }
    let mut r = Reader(body.strip_prefix(MAGIC)?);
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
    let mut trees = Trees::new();
    for _ in 0..r.u64()? {
        let len = usize::try_from(r.u64()?).ok()?;
        let dir = String::from_utf8(r.take(len)?.to_vec()).ok()?;
        trees.insert(dir, Oid(r.take(20)?.try_into().ok()?));
    }
    r.0.is_empty().then_some(Memo { tree, files, trees })
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
            trees: Trees::new(),
        };
        let known = Known {
            mode: Mode::Executable,
            id,
            sig: sig(2_000),
            racy: true,
        };
        memo.files.insert("d/é.txt".into(), known);
        memo.trees.insert("d".into(), tree);
        let path = dir.path().join("memo-s");
        memo.save(&path).unwrap();
        let back = Memo::load(&path, &objects);
        assert_eq!(back.tree, Some(tree));
        assert_eq!(back.files.get("d/é.txt"), Some(&known));
        assert_eq!(back.trees, memo.trees);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(Memo::load(&path, &objects).files.is_empty());
        // A byte changed in the middle (a write cut short over a longer memo) is refused too.
        let mut torn = bytes.clone();
        torn[MAGIC.len() + 30] ^= 1;
        fs::write(&path, &torn).unwrap();
        assert!(Memo::load(&path, &objects).files.is_empty());
        // Written over a longer memo in place, a shorter one reads back whole.
        fs::write(&path, vec![b'x'; bytes.len() * 3]).unwrap();
        memo.save(&path).unwrap();
        assert_eq!(Memo::load(&path, &objects).files.len(), 1);
        // A memo whose tree the store lost is not trusted.
        memo.tree = Some(Oid([7; 20]));
        memo.save(&path).unwrap();
        assert!(Memo::load(&path, &objects).files.is_empty());
    }

    #[test]
    fn recent_times_are_racy() {
        let start = UNIX_EPOCH + Duration::from_secs(2_001);
        assert!(!sig(1_990).racy(start));
        // Sub-second times: racy within 50 ms of the start (or after it).
        let at = |ms: i64| {
            let mut s = sig(0);
            s.ctime = (ms.div_euclid(1000), ms.rem_euclid(1000) * 1_000_000 + 1);
            s
        };
        assert!(at(2_000_960).racy(start));
        assert!(at(2_001_500).racy(start));
        assert!(!at(2_000_900).racy(start));
        // Whole seconds (a file system that keeps no more): racy within 2 s.
        let mut whole = sig(2_000);
        (whole.mtime.1, whole.ctime.1) = (0, 0);
        assert!(whole.racy(start));
        whole.ctime.0 = 1_998;
        assert!(!whole.racy(start));
    }
}
