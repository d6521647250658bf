//! Checkpoints and rewind (DESIGN §16): before the first mutating tool call after a user
//! message the session's cwd is snapshotted into a private shadow repository under
//! `$KEEL_HOME/checkpoints/<project-key>/`; a checkpoint is a session entry; a rewind restores
//! the files of one (and first snapshots the present, so it can be undone). Never touches the
//! user's own `.git`, never prints: problems come back as [`CheckpointError`]s or warnings.

mod entry;
mod memo;
mod object;
mod preview;
mod restore;
mod rewind;
mod shadow;
mod snapshot;
mod tree;
pub(crate) mod turn;
mod walk;

pub use entry::{Checkpoint, Rewound, CHECKPOINT_TYPE, REWIND_TYPE};
pub use preview::{preview, PreviewChange, PreviewFile};
pub use rewind::{list, rewind, undo, Listed, Restore};
pub use shadow::{Restored, Shadow, Skipped, Snapshot};

use std::fmt;
use std::path::{Path, PathBuf};

/// The limits of what one snapshot copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// A file larger than this is left out (`checkpoints.maxFileBytes`).
    pub max_file_bytes: u64,
    /// At most this many files in one snapshot (`checkpoints.maxFiles`).
    pub max_files: usize,
    /// At most this many new bytes copied by one snapshot (`checkpoints.maxTotalBytes`).
    pub max_total_bytes: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_file_bytes: 10 * 1024 * 1024,
            max_files: 100_000,
            max_total_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Checkpoints switched on for a session: where the shadow repositories live, the `git`
/// binary that drives them and the caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoints {
    /// The `git` binary (an absolute path found at startup).
    pub git: PathBuf,
    /// `$KEEL_HOME/checkpoints`.
    pub root: PathBuf,
    pub caps: Caps,
}

impl Checkpoints {
    /// The shadow repository of `cwd`, with the index of `session` (each session keeps its
    /// own index, so two sessions in one directory never share a lock).
    pub fn shadow(&self, cwd: &Path, session: &str) -> Shadow {
        let dir = self.root.join(project_key(cwd));
        Shadow::new(self.git.clone(), dir, cwd.to_path_buf(), session, self.caps)
    }
}

/// The directory name of a project's store: its path made safe (at most 48 characters of
/// its end) and a hash of the whole path, so two paths never share one.
pub fn project_key(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let safe: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let tail: String = safe.trim_matches('-').chars().rev().take(48).collect();
    let tail: String = tail.chars().rev().collect();
    // FNV-1a: stable across versions and platforms (std's hasher is not).
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{tail}-{hash:016x}")
}

/// What went wrong with a checkpoint or a rewind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointErrorKind {
    /// `git` could not be started.
    GitMissing,
    /// A git command failed.
    Git,
    /// Reading or writing the workspace or the store failed.
    Io,
    /// No such checkpoint (or no earlier rewind to undo).
    NotFound,
    /// The session is running: abort first.
    Busy,
    /// Checkpoints are off for this session.
    Disabled,
}

/// A checkpoint or rewind error: its kind and a sentence naming what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointError {
    pub kind: CheckpointErrorKind,
    pub message: String,
}

impl CheckpointError {
    pub fn new(kind: CheckpointErrorKind, message: impl Into<String>) -> Self {
        CheckpointError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CheckpointError {}
