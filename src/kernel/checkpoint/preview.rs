//! What a rewind of the files to a checkpoint would change, without changing anything: the
//! present is snapshotted with a scratch memo (the session's own memo, which decides the next
//! checkpoint's changed files, is left as it was; the objects written are content-addressed
//! and shared) and diffed against the checkpoint's snapshot.

use serde::{Deserialize, Serialize};

use super::rewind::locate;
use super::{Checkpoint, CheckpointError, CheckpointErrorKind as Kind, Shadow};
use crate::kernel::session::Store;

/// One file a rewind would write or remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviewFile {
    /// Relative to the cwd, `/`-separated.
    pub path: String,
    /// What the rewind does to it.
    pub change: PreviewChange,
    /// Lines the rewind adds to it (`None` for a binary file).
    pub added: Option<u64>,
    /// Lines the rewind removes from it (`None` for a binary file).
    pub removed: Option<u64>,
    /// Its present content differs from the session's newest checkpoint snapshot: it changed
    /// after keel last snapshotted the workspace, by the newest turn's tools or outside keel.
    pub changed_since_snapshot: bool,
}

/// What a rewind does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreviewChange {
    /// Recreated (it was removed after the checkpoint).
    Added,
    /// Removed (it was created after the checkpoint).
    Removed,
    /// Rewritten (content or mode).
    Modified,
}

/// The checkpoint entry a rewind to before `target` would restore, and per file what it
/// would change.
pub fn preview(
    store: &Store,
    shadow: Option<&Shadow>,
    target: &str,
) -> Result<(Option<String>, Vec<PreviewFile>), CheckpointError> {
    let (_, _, checkpoint) = locate(store, target)?;
    let Some((id, checkpoint)) = checkpoint else {
        return Ok((None, Vec::new()));
    };
    let shadow = shadow.ok_or_else(|| {
        CheckpointError::new(Kind::Disabled, "checkpoints are off for this session")
    })?;
    let present = shadow.peek()?;
    let newest = store
        .entries()
        .iter()
        .rev()
        .find_map(Checkpoint::from_entry)
        .map(|c| c.snapshot);
    let moved = match &newest {
        Some(tree) => shadow.changed(tree, &present.tree)?,
        None => Vec::new(),
    };
    let keep: Vec<&String> = checkpoint.skipped.iter().map(|s| &s.path).collect();
    let mut files = Vec::new();
    for (status, added, removed, path) in shadow.numstat(&present.tree, &checkpoint.snapshot)? {
        let change = match status {
            b'A' => PreviewChange::Added,
            b'D' if keep.contains(&&path) => continue,
            b'D' => PreviewChange::Removed,
            _ => PreviewChange::Modified,
        };
        files.push(PreviewFile {
            changed_since_snapshot: moved.contains(&path),
            path,
            change,
            added,
            removed,
        });
    }
    Ok((Some(id), files))
}
