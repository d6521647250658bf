//! One project's shadow repository: a bare git repository under `$KEEL_HOME/checkpoints/`.
//! Snapshots are written into it in-process (`snapshot.rs`, no process started); diffs, and
//! the objects a restore needs, come from the `git` binary with its own `GIT_DIR`, a scratch
//! `GIT_INDEX_FILE` and config, an empty environment (no inherited `GIT_*`, no system or
//! global config, no hooks); the restore itself writes and removes in-process, by descriptor
//! beneath the work tree (`restore.rs`). The user's `.git` is never opened: every `.git`
//! entry of the work tree is skipped, and nested repositories are left out. Blocking (it waits
//! for the file system and git processes).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::object::Mode;
use super::restore::{self, Outcome};
use super::snapshot::{self, Place};
use super::{Caps, CheckpointError, CheckpointErrorKind as Kind};
use crate::kernel::fsx::{Beneath, FsxError};
use crate::kernel::private;

/// Settings every command runs with, whatever the store's config file says.
const CONFIG: [&str; 9] = [
    "core.hooksPath=/dev/null",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.fsmonitor=false",
    "core.symlinks=true",
    "core.filemode=true",
    "core.untrackedCache=false",
    "core.quotePath=false",
    "gc.auto=0",
];

/// A file a snapshot left out, and which cap it broke.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Relative to the cwd, `/`-separated.
    pub path: String,
    /// `maxFileBytes`, `maxFiles` or `maxTotalBytes`.
    pub reason: String,
}

/// One snapshot of the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The git tree id of the snapshot.
    pub tree: String,
    /// The files left out by the caps.
    pub skipped: Vec<Skipped>,
    /// The files added, removed or changed (content or mode) since this session's previous
    /// snapshot, sorted.
    pub changed: Vec<String>,
}

/// What a restore did to the work tree, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// Files rewritten (content or mode) or recreated.
    pub written: Vec<String>,
    /// Files removed (created after the checkpoint).
    pub removed: Vec<String>,
    /// Files neither written nor removed: a symlink is where one of their parent
    /// directories should be (a rewind never follows one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl Restored {
    /// One line per file, as every front end reports a rewind: `restored a.txt`, then
    /// `removed b.txt`.
    pub fn lines(&self) -> impl Iterator<Item = String> + '_ {
        let written = self.written.iter().map(|f| format!("restored {f}"));
        let removed = self.removed.iter().map(|f| format!("removed {f}"));
        let skipped = (self.skipped.iter())
            .map(|f| format!("skipped {f} (a symlink is where its directory should be)"));
        written.chain(removed).chain(skipped)
    }

    /// No file was written, removed or skipped.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty() && self.removed.is_empty() && self.skipped.is_empty()
    }
}

/// A project's shadow repository seen by one session.
#[derive(Debug, Clone)]
pub struct Shadow {
    git: PathBuf,
    dir: PathBuf,
    work: PathBuf,
    index: PathBuf,
    /// What the session's last snapshot knew of each file (see `memo.rs`).
    memo: PathBuf,
    caps: Caps,
}

impl Shadow {
    pub(super) fn new(
        git: PathBuf,
        dir: PathBuf,
        work: PathBuf,
        session: &str,
        caps: Caps,
    ) -> Self {
        let name: String = session
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let memo = dir.join(format!("memo-{name}"));
        // git commands that read no index (diff-tree) are still given one of their own.
        let index = dir.join(format!("index-{name}"));
        Shadow {
            git,
            dir,
            work,
            index,
            memo,
            caps,
        }
    }

    /// Where a snapshot with memo file `memo` reads and writes.
    fn place<'a>(&'a self, memo: &'a Path) -> Place<'a> {
        Place {
            work: &self.work,
            store: &self.dir,
            memo,
            caps: &self.caps,
        }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A git command on the store, with nothing inherited from keel's environment.
    fn command(&self, index: &Path) -> Command {
        let mut c = Command::new(&self.git);
        c.env_clear()
            .env("GIT_DIR", &self.dir)
            .env("GIT_WORK_TREE", &self.work)
            .env("GIT_INDEX_FILE", index)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .current_dir(&self.work);
        for kv in CONFIG {
            c.args(["-c", kv]);
        }
        c
    }

    /// Runs `git args` (with `input` on stdin) on `index`; its stdout, or an error with its
    /// stderr.
    fn run_on(
        &self,
        index: &Path,
        args: &[&str],
        input: &[u8],
    ) -> Result<Vec<u8>, CheckpointError> {
        let mut cmd = self.command(index);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run(cmd, args, input, &self.git)
    }

    fn run(&self, args: &[&str], input: &[u8]) -> Result<Vec<u8>, CheckpointError> {
        self.run_on(&self.index, args, input)
    }

    /// Creates the store (0700) on first use.
    fn ensure(&self) -> Result<(), CheckpointError> {
        if self.dir.join("HEAD").is_file() {
            return Ok(());
        }
        private::create_dir_all(&self.dir).map_err(|e| io("create", &self.dir, &e))?;
        let mut cmd = Command::new(&self.git);
        cmd.env_clear()
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.dir)
            .args(["init", "--bare", "-q"])
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run(cmd, &["init"], b"", &self.git)?;
        Ok(())
    }

    /// Snapshots the work tree: the files git would see (`.gitignore` honoured), within the
    /// caps. Only the files whose stat signature changed since this session's last snapshot
    /// are read; no process is started.
    pub fn snapshot(&self) -> Result<Snapshot, CheckpointError> {
        self.snapshot_at(SystemTime::now())
    }

    /// [`Shadow::snapshot`] begun at `start` (a test's clock decides which files are racy).
    pub(super) fn snapshot_at(&self, start: SystemTime) -> Result<Snapshot, CheckpointError> {
        self.ensure()?;
        snapshot::take(&self.place(&self.memo), start)
    }

    /// [`Shadow::snapshot`], its store writes left to the caller (a turn does them while
    /// its tool runs: see `turn.rs`).
    pub(super) fn snapshot_deferred(
        &self,
    ) -> Result<(Snapshot, super::snapshot::Writes), CheckpointError> {
        self.ensure()?;
        snapshot::take_deferred(&self.place(&self.memo), SystemTime::now())
    }

    /// A snapshot of the work tree that leaves the session's memo as it was (a scratch memo
    /// beside it is used), so the next checkpoint's changed files are not affected.
    pub fn peek(&self) -> Result<Snapshot, CheckpointError> {
        self.ensure()?;
        let mut name = self.memo.as_os_str().to_os_string();
        name.push("-peek");
        let memo = PathBuf::from(name);
        snapshot::take(&self.place(&memo), SystemTime::now())
    }

    /// `(status, lines added, lines removed, path)` of every file that differs from `from`
    /// to `to`, sorted by path; the line counts are `None` for a binary file.
    #[allow(clippy::type_complexity)]
    pub fn numstat(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(u8, Option<u64>, Option<u64>, String)>, CheckpointError> {
        let statuses = self.diff(from, to)?;
        if statuses.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.run(
            &[
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--numstat",
                from,
                to,
            ],
            b"",
        )?;
        let mut counts = std::collections::HashMap::new();
        for record in out.split(|b| *b == 0).filter(|s| !s.is_empty()) {
            let mut parts = record.splitn(3, |b| *b == b'\t');
            let (Some(a), Some(r), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            let num = |b: &[u8]| std::str::from_utf8(b).ok().and_then(|s| s.parse().ok());
            counts.insert(String::from_utf8_lossy(path).into_owned(), (num(a), num(r)));
        }
        Ok(statuses
            .into_iter()
            .map(|(status, path)| {
                let (a, r) = counts.get(&path).copied().unwrap_or((None, None));
                (status, a, r, path)
            })
            .collect())
    }

    /// The files that differ between two snapshots, sorted.
    pub fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, CheckpointError> {
        Ok(self.diff(from, to)?.into_iter().map(|(_, p)| p).collect())
    }

    /// `(status, path)` of every file that differs from `from` to `to` (`A`, `D`, `M`, `T`).
    fn diff(&self, from: &str, to: &str) -> Result<Vec<(u8, String)>, CheckpointError> {
        if from == to {
            return Ok(Vec::new());
        }
        self.ensure()?;
        let out = self.run(&["diff-tree", "-r", "-z", "--no-renames", from, to], b"")?;
        let mut fields = out.split(|b| *b == 0).filter(|s| !s.is_empty());
        let mut diff = Vec::new();
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            let status = meta.last().copied().unwrap_or(b'M');
            diff.push((status, String::from_utf8_lossy(path).into_owned()));
        }
        Ok(diff)
    }

    /// Makes the work tree match snapshot `target`, from the present snapshot `present`:
    /// files changed since are rewritten (modes too), created ones removed, deleted ones
    /// recreated. Files in `keep` (left out of `target` by the caps) are not removed. Every
    /// write and removal is made by descriptor beneath the work tree; a path with a symlink
    /// where a parent directory should be is skipped (and listed so), never followed.
    pub fn restore(
        &self,
        present: &str,
        target: &str,
        keep: &[String],
    ) -> Result<Restored, CheckpointError> {
        let mut done = Restored::default();
        let mut write = Vec::new();
        let mut removed = Vec::new();
        for (status, path) in self.diff(present, target)? {
            match status {
                b'D' if keep.contains(&path) => {}
                b'D' => removed.push(path),
                _ => write.push(path),
            }
        }
        let root = Beneath::open(&self.work).map_err(|e| io("open", &self.work, &e))?;
        for path in removed {
            let outcome = restore::remove(&root, &path);
            let outcome = outcome.map_err(|e| fsx_error("remove", &self.work.join(&path), &e))?;
            match outcome {
                Outcome::Done => done.removed.push(path),
                Outcome::Skipped => done.skipped.push(path),
            }
        }
        for (path, mode, body) in self.blobs(target, &write)? {
            let outcome = restore::write(&root, &path, mode, &body);
            let outcome = outcome.map_err(|e| fsx_error("write", &self.work.join(&path), &e))?;
            match outcome {
                Outcome::Done => done.written.push(path),
                Outcome::Skipped => done.skipped.push(path),
            }
        }
        Ok(done)
    }

    /// The mode and content of each of `paths` as snapshot `tree` holds them.
    fn blobs(
        &self,
        tree: &str,
        paths: &[String],
    ) -> Result<Vec<(String, Mode, Vec<u8>)>, CheckpointError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: HashSet<&str> = paths.iter().map(String::as_str).collect();
        let listing = self.run(&["ls-tree", "-r", "-z", "--full-tree", tree], b"")?;
        let files = restore::listed(&listing, &wanted);
        let ids: String = files.iter().map(|(_, _, id)| format!("{id}\n")).collect();
        let out = self.run(&["cat-file", "--batch"], ids.as_bytes())?;
        let bodies = restore::bodies(&out);
        files
            .into_iter()
            .zip(bodies.into_iter().chain(std::iter::repeat(None)))
            .map(|((path, mode, id), body)| match body {
                Some(body) => Ok((path, mode, body)),
                None => Err(CheckpointError::new(
                    Kind::Git,
                    format!("the checkpoint store has no object {id} for {path}"),
                )),
            })
            .collect()
    }
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> CheckpointError {
    CheckpointError::new(Kind::Io, format!("cannot {what} {}: {e}", path.display()))
}

fn fsx_error(what: &str, path: &Path, e: &FsxError) -> CheckpointError {
    CheckpointError::new(Kind::Io, format!("cannot {what} {}: {e}", path.display()))
}

/// Runs `cmd`, writing `input` to its stdin from another thread (a large input must not
/// block on a full output pipe).
fn run(
    mut cmd: Command,
    args: &[&str],
    input: &[u8],
    git: &Path,
) -> Result<Vec<u8>, CheckpointError> {
    let mut child = cmd.spawn().map_err(|e| {
        CheckpointError::new(
            Kind::GitMissing,
            format!("cannot run {}: {e}", git.display()),
        )
    })?;
    let stdin = child.stdin.take();
    let output = std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(input);
            }
        });
        child.wait_with_output()
    })
    .map_err(|e| CheckpointError::new(Kind::Git, format!("git {}: {e}", args.join(" "))))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(CheckpointError::new(
            Kind::Git,
            format!("git {} failed: {}", args.join(" "), err.trim()),
        ));
    }
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn git_path() -> PathBuf {
        let path = std::env::var_os("PATH").unwrap();
        std::env::split_paths(&path)
            .map(|d| d.join("git"))
            .find(|p| p.is_file())
            .unwrap()
    }

    fn shadow(root: &Path, work: &Path) -> Shadow {
        let store = root.join("store");
        Shadow::new(git_path(), store, work.to_path_buf(), "s1", Caps::default())
    }

    /// `git add -A && git write-tree` of `work` in a store of its own (`excluded`: a
    /// pathspec git is not to add, such as a nested repository).
    fn gits_tree(root: &Path, work: &Path, excluded: &[&str]) -> String {
        let store = root.join("floor.git");
        let git = |args: &[&str]| {
            let out = Command::new(git_path())
                .env_clear()
                .env("GIT_DIR", &store)
                .env("GIT_WORK_TREE", work)
                .env("GIT_INDEX_FILE", store.join("index"))
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("HOME", &store)
                .current_dir(work)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        if !store.exists() {
            let init = Command::new(git_path())
                .args(["init", "-q", "--bare"])
                .arg(&store)
                .output()
                .unwrap();
            assert!(init.status.success());
        }
        let mut add = vec!["add", "-A", "--", "."];
        add.extend(excluded);
        git(&add);
        git(&["write-tree"])
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn a_snapshot_is_the_tree_git_writes_for_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        write(&work.join(".gitignore"), "*.log\nbuild/\n!keep.log\n");
        write(&work.join("a.txt"), "a\n");
        write(&work.join("a.b"), "dot\n");
        write(&work.join("a/x.rs"), "fn x() {}\n");
        write(&work.join("a/deep/er/y"), "y\n");
        write(&work.join("run.sh"), "#!/bin/sh\n");
        fs::set_permissions(work.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        write(&work.join("noise.log"), "ignored\n");
        write(&work.join("keep.log"), "kept\n");
        write(&work.join("build/out.o"), "ignored\n");
        write(&work.join("sub/.gitignore"), "secret\n");
        write(&work.join("sub/secret"), "ignored\n");
        write(&work.join("sub/open"), "seen\n");
        let nested = work.join("nested");
        fs::create_dir_all(&nested).unwrap();
        let init = Command::new(git_path())
            .arg("init")
            .arg("-q")
            .arg(&nested)
            .status();
        assert!(init.unwrap().success());
        write(&work.join("nested/inner.txt"), "a nested repository\n");
        std::os::unix::fs::symlink("a.txt", work.join("link")).unwrap();
        let snapshot = shadow(dir.path(), &work).snapshot().unwrap();
        let git = gits_tree(dir.path(), &work, &[":!nested"]);
        assert_eq!(snapshot.tree, git);
        assert!(snapshot.changed.contains(&"a/deep/er/y".to_string()));
        assert!(!snapshot.changed.iter().any(|p| p.starts_with("nested")));
        // git itself reads the store's objects back.
        let shadow = shadow(dir.path(), &work);
        let listed = shadow.run(&["ls-tree", "-r", "--name-only", &snapshot.tree], b"");
        assert!(String::from_utf8(listed.unwrap())
            .unwrap()
            .contains("sub/open"));
    }

    #[test]
    fn later_snapshots_are_gits_tree_after_deep_added_and_removed_changes() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        write(&work.join(".gitignore"), "*.log\n");
        write(&work.join("a/b/c/deep.txt"), "deep\n");
        write(&work.join("a/b/other.txt"), "other\n");
        write(&work.join("gone/g.txt"), "g\n");
        write(&work.join("side/s.txt"), "s\n");
        let shadow = shadow(dir.path(), &work);
        let later = SystemTime::now() + Duration::from_secs(3600);
        shadow.snapshot_at(later).unwrap();
        write(&work.join("a/b/c/deep.txt"), "deeper\n");
        fs::remove_dir_all(work.join("gone")).unwrap();
        write(&work.join("new/dir/n.txt"), "n\n");
        write(&work.join("new/dir/x.log"), "ignored\n");
        let second = shadow.snapshot_at(later).unwrap();
        assert_eq!(second.tree, gits_tree(dir.path(), &work, &[]));
        let changed = ["a/b/c/deep.txt", "gone/g.txt", "new/dir/n.txt"];
        assert_eq!(second.changed, changed);
        // A memo of the old format (or a damaged one) costs a full snapshot, not a wrong one.
        fs::write(&shadow.memo, b"keel-checkpoint-memo 1\n").unwrap();
        write(&work.join("side/s.txt"), "s2\n");
        let third = shadow.snapshot_at(later).unwrap();
        assert_eq!(third.tree, gits_tree(dir.path(), &work, &[]));
    }

    #[test]
    fn a_rewrite_keeping_size_and_mtime_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        write(&work.join("f.txt"), "one\n");
        write(&work.join("g.txt"), "same\n");
        let shadow = shadow(dir.path(), &work);
        // A snapshot taken long after the files' times: nothing is racy, so only the stat
        // signature can tell that f.txt changed.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let first = shadow.snapshot_at(later).unwrap();
        let before = fs::metadata(work.join("f.txt")).unwrap();
        let mtime = before.modified().unwrap();
        fs::write(work.join("f.txt"), "two\n").unwrap();
        fs::File::options()
            .write(true)
            .open(work.join("f.txt"))
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let after = fs::metadata(work.join("f.txt")).unwrap();
        assert_eq!(
            (after.len(), after.modified().unwrap()),
            (before.len(), mtime)
        );
        let second = shadow.snapshot_at(later).unwrap();
        assert_ne!(second.tree, first.tree);
        assert_eq!(second.changed, vec!["f.txt".to_string()]);
        assert_eq!(second.tree, gits_tree(dir.path(), &work, &[]));
        // Nothing changed: the same tree, nothing listed.
        let third = shadow.snapshot_at(later).unwrap();
        assert_eq!((third.tree, third.changed), (second.tree, Vec::new()));
        let _ = UNIX_EPOCH;
    }

    /// Every object of the store at `dir`, decompressed.
    fn objects(dir: &Path) -> Vec<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        for fan in fs::read_dir(dir.join("objects")).unwrap().flatten() {
            for obj in fs::read_dir(fan.path()).into_iter().flatten().flatten() {
                let raw = fs::read(obj.path()).unwrap();
                let mut body = Vec::new();
                let mut z = flate2::read::ZlibDecoder::new(&raw[..]);
                if z.read_to_end(&mut body).is_ok() {
                    out.push(body);
                }
            }
        }
        out
    }

    /// Issue 43 point 8: a snapshot read a file swapped for a symlink to a secret, or walked
    /// into a directory swapped for a symlink to `~/.ssh`, and stored what it found.
    #[test]
    fn snapshots_while_names_swap_with_symlinks_never_store_what_is_behind_them() {
        use crate::kernel::fsx::tests::swap;
        let dir = tempfile::tempdir().unwrap();
        let (work, ssh) = (dir.path().join("work"), dir.path().join("ssh"));
        write(&ssh.join("id_rsa"), "secret-canary\n");
        write(&work.join("f"), "decoy\n");
        write(&work.join("d/decoy"), "decoy\n");
        std::os::unix::fs::symlink(ssh.join("id_rsa"), work.join("f.l")).unwrap();
        std::os::unix::fs::symlink(&ssh, work.join("d.l")).unwrap();
        let shadow = shadow(dir.path(), &work);
        let _swaps = [
            swap(work.join("f"), work.join("f.l")),
            swap(work.join("d"), work.join("d.l")),
        ];
        let failed: Vec<CheckpointError> =
            (0..1000).filter_map(|_| shadow.snapshot().err()).collect();
        let secret = b"secret-canary";
        let stored = objects(&shadow.dir);
        assert!(stored.len() > 4, "{} objects", stored.len());
        for body in stored {
            let leak = body.windows(secret.len()).any(|w| w == secret);
            assert!(!leak, "stored: {}", String::from_utf8_lossy(&body));
        }
        // The race is no error either: what changed under the walk is left out this time.
        assert!(
            failed.is_empty(),
            "{} failed: {:?}",
            failed.len(),
            failed.first()
        );
    }

    /// Issue 43 point 9: a rewind removed a "created" file through a directory that had become
    /// a symlink to one outside, deleting the file there.
    #[test]
    fn a_restore_skips_a_path_whose_directory_is_a_symlink_now_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let (work, outside) = (dir.path().join("work"), dir.path().join("outside"));
        write(&work.join("a.txt"), "a\n");
        write(&work.join("e/keep"), "keep\n");
        write(&outside.join("new.txt"), "outside canary\n");
        write(&outside.join("keep"), "outside keep\n");
        let shadow = shadow(dir.path(), &work);
        let before = shadow.snapshot().unwrap();
        write(&work.join("d/new.txt"), "made\n");
        write(&work.join("e/keep"), "changed\n");
        let present = shadow.snapshot().unwrap();
        // Both directories are symlinks to `outside` by the time of the restore.
        fs::remove_dir_all(work.join("d")).unwrap();
        fs::remove_dir_all(work.join("e")).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("d")).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("e")).unwrap();
        let done = shadow.restore(&present.tree, &before.tree, &[]).unwrap();
        assert_eq!(done.skipped, ["d/new.txt", "e/keep"]);
        assert!(
            done.removed.is_empty() && done.written.is_empty(),
            "{done:?}"
        );
        let lines: Vec<String> = done.lines().collect();
        assert_eq!(
            lines[0],
            "skipped d/new.txt (a symlink is where its directory should be)"
        );
        let read = |p: &str| fs::read_to_string(outside.join(p)).unwrap();
        assert_eq!(
            (read("new.txt"), read("keep")),
            ("outside canary\n".into(), "outside keep\n".into())
        );
    }
}
