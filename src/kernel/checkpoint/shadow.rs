//! One project's shadow repository: a bare git repository under `$KEEL_HOME/checkpoints/`
//! driven through the `git` binary with its own `GIT_DIR`, `GIT_INDEX_FILE` (one per session)
//! and config, an empty environment (no inherited `GIT_*`, no system or global config, no
//! hooks), and the session's cwd as `GIT_WORK_TREE`. The user's `.git` is never opened: git
//! skips every `.git` entry of a work tree, and nested repositories are left out. Blocking
//! (it waits for git processes).

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::{Caps, CheckpointError, CheckpointErrorKind as Kind};
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
    /// The files git saw change since this session's previous snapshot (a file touched but
    /// not changed may be among them), sorted.
    pub changed: Vec<String>,
}

/// What a restore did to the work tree, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// Files rewritten (content or mode) or recreated.
    pub written: Vec<String>,
    /// Files removed (created after the checkpoint).
    pub removed: Vec<String>,
}

/// A project's shadow repository seen by one session.
#[derive(Debug, Clone)]
pub struct Shadow {
    git: PathBuf,
    dir: PathBuf,
    work: PathBuf,
    index: PathBuf,
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
        let index = dir.join(format!("index-{name}"));
        Shadow {
            git,
            dir,
            work,
            index,
            caps,
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
    /// caps. Only what changed since this session's last snapshot is read.
    pub fn snapshot(&self) -> Result<Snapshot, CheckpointError> {
        self.ensure()?;
        let listed = self.run(
            &[
                "ls-files",
                "-z",
                "-t",
                "-o",
                "-m",
                "-d",
                "--exclude-standard",
            ],
            b"",
        )?;
        let mut seen = BTreeSet::new();
        let mut plan = Plan {
            count: index_entries(&self.index),
            ..Plan::default()
        };
        for item in listed.split(|b| *b == 0).filter(|s| s.len() > 2) {
            let (tag, path) = (item[0], String::from_utf8_lossy(&item[2..]).into_owned());
            if path.ends_with('/') || !seen.insert(path.clone()) {
                continue; // a nested repository, or a path listed twice (changed and deleted)
            }
            plan.consider(&self.work, tag == b'?', path, &self.caps);
        }
        if !plan.add.is_empty() {
            let input = nul_joined(&plan.add);
            let args = [
                "update-index",
                "-z",
                "--add",
                "--remove",
                "--replace",
                "--stdin",
            ];
            self.run(&args, &input)?;
        }
        if !plan.drop.is_empty() {
            self.run(
                &["update-index", "-z", "--force-remove", "--stdin"],
                &nul_joined(&plan.drop),
            )?;
        }
        let tree = text(self.run(&["write-tree"], b"")?);
        let mut changed: Vec<String> = plan.add.into_iter().chain(plan.drop).collect();
        changed.sort();
        Ok(Snapshot {
            tree,
            skipped: plan.skipped,
            changed,
        })
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
    /// recreated. Files in `keep` (left out of `target` by the caps) are not removed.
    pub fn restore(
        &self,
        present: &str,
        target: &str,
        keep: &[String],
    ) -> Result<Restored, CheckpointError> {
        let mut done = Restored::default();
        let mut write = Vec::new();
        for (status, path) in self.diff(present, target)? {
            match status {
                b'D' if keep.contains(&path) => {}
                b'D' => done.removed.push(path),
                _ => write.push(path),
            }
        }
        for path in &done.removed {
            let full = self.work.join(path);
            match fs::remove_file(&full) {
                Ok(()) => prune_empty(&self.work, full.parent()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io("remove", &full, &e)),
            }
        }
        if !write.is_empty() {
            let scratch = self
                .dir
                .join(format!("index-restore-{}", std::process::id()));
            let result = self.checkout(&scratch, target, &write);
            let _ = fs::remove_file(&scratch);
            result?;
        }
        done.written = write;
        Ok(done)
    }

    /// Writes `paths` as snapshot `tree` holds them, through a scratch index.
    fn checkout(
        &self,
        scratch: &Path,
        tree: &str,
        paths: &[String],
    ) -> Result<(), CheckpointError> {
        for path in paths {
            // A file where a directory was (or the other way round) is replaced.
            let full = self.work.join(path);
            if full.is_dir() && !full.is_symlink() {
                fs::remove_dir_all(&full).map_err(|e| io("remove", &full, &e))?;
            }
        }
        self.run_on(scratch, &["read-tree", tree], b"")?;
        let args = ["checkout-index", "-f", "-z", "--stdin"];
        self.run_on(scratch, &args, &nul_joined(paths))?;
        Ok(())
    }
}

/// What one snapshot adds, drops and leaves out.
#[derive(Default)]
struct Plan {
    /// Files in the snapshot so far.
    count: usize,
    /// New bytes so far.
    bytes: u64,
    add: Vec<String>,
    /// Files of the last snapshot now over a cap.
    drop: Vec<String>,
    skipped: Vec<Skipped>,
}

impl Plan {
    /// Decides one listed path (`new`: not in the last snapshot).
    fn consider(&mut self, work: &Path, new: bool, path: String, caps: &Caps) {
        let Ok(meta) = fs::symlink_metadata(work.join(&path)) else {
            self.add.push(path); // deleted: `--remove` drops it
            return;
        };
        if meta.is_dir() {
            return;
        }
        let size = meta.len();
        let reason = if size > caps.max_file_bytes {
            Some("maxFileBytes")
        } else if new && self.count >= caps.max_files {
            Some("maxFiles")
        } else if self.bytes + size > caps.max_total_bytes {
            Some("maxTotalBytes")
        } else {
            None
        };
        match reason {
            Some(reason) => {
                if !new {
                    self.drop.push(path.clone());
                }
                self.skipped.push(Skipped {
                    path,
                    reason: reason.into(),
                });
            }
            None => {
                self.count += usize::from(new);
                self.bytes += size;
                self.add.push(path);
            }
        }
    }
}

/// The number of entries of a git index file (its header's third word); 0 without one.
fn index_entries(index: &Path) -> usize {
    let mut head = [0u8; 12];
    match fs::File::open(index).and_then(|mut f| f.read_exact(&mut head)) {
        Ok(()) => u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize,
        Err(_) => 0,
    }
}

/// Removes the empty directories from `dir` up to (not including) `root`.
fn prune_empty(root: &Path, mut dir: Option<&Path>) {
    while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
        if fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn nul_joined(paths: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in paths {
        out.extend_from_slice(p.as_bytes());
        out.push(0);
    }
    out
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8_lossy(&out).trim().to_string()
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> CheckpointError {
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
