//! The turn loop's side of checkpoints: a user message makes a checkpoint due, and the first
//! mutating tool call after it (`edit`, `write`, `bash`, any MCP tool) takes it before it
//! runs. Publishes `CheckpointCreated` or `CheckpointFailed`; never fails the call.

use super::{Checkpoint, CheckpointErrorKind};
use crate::kernel::agent::Inner;
use crate::kernel::event::EventPayload;

/// The built-in tools that change nothing: no checkpoint before them.
const READ_ONLY: [&str; 4] = ["read", "grep", "find", "ls"];

/// A session's checkpoint state.
#[derive(Debug, Default)]
pub(crate) struct Due {
    /// The user message whose checkpoint is still to be taken.
    pub message: Option<String>,
    /// The last snapshot this session took.
    pub last: Option<String>,
    /// Off for the rest of the session (`git` could not be run).
    pub off: bool,
}

/// The user message just appended makes a checkpoint due.
pub(crate) fn user_message(inner: &Inner) {
    if inner.config.checkpoints.is_some() {
        let mut state = inner.lock();
        state.checkpoint.message = state.ids.last().cloned();
    }
}

/// A checkpoint's store writes, under way while its call runs.
pub(crate) struct Writing(tokio::task::JoinHandle<Option<String>>);

/// Takes the due checkpoint before the call of `tool` runs, if the tool may change files.
///
/// The snapshot is whole when this returns: the work tree is walked, the files that changed
/// since the session's last snapshot are read and every id is known, on this thread (awaited
/// on the blocking pool, the run would yield here, and in ACP an `fs/*` request of the tool,
/// sent straight to the editor, could then overtake the `tool_call` update that goes through
/// the host's stream). Writing the objects and the memo is left to the blocking pool, so it
/// overlaps the tool; that task publishes `CheckpointCreated` (or `CheckpointFailed`) once
/// the store has the snapshot, so a session entry never names a snapshot that is not stored.
/// The caller awaits [`written`] before the call finishes.
pub(crate) fn before_call(inner: &Inner, tool: &str) -> Option<Writing> {
    let checkpoints = inner.config.checkpoints.clone()?;
    if READ_ONLY.contains(&tool) {
        return None;
    }
    let (due, previous) = {
        let mut state = inner.lock();
        if state.checkpoint.off {
            return None;
        }
        (
            state.checkpoint.message.take(),
            state.checkpoint.last.clone(),
        )
    };
    let entry_id = due?;
    let session = inner.config.session_id.as_deref().unwrap_or("default");
    let shadow = checkpoints.shadow(&inner.config.cwd, session);
    let (mut snapshot, writes) = match shadow.snapshot_deferred() {
        Ok(taken) => taken,
        Err(e) => {
            if e.kind == CheckpointErrorKind::GitMissing {
                inner.lock().checkpoint.off = true;
            }
            // Untimed: checkpoints on or off, the other events keep their times.
            inner
                .bus
                .publish_untimed(EventPayload::CheckpointFailed { message: e.message });
            return None;
        }
    };
    // The files changed since the previous checkpoint are what changed since this session's
    // last snapshot (only the files whose stat changed were read).
    let files = match previous {
        Some(_) => std::mem::take(&mut snapshot.changed),
        None => Vec::new(),
    };
    let bus = inner.bus.clone();
    let writing = tokio::task::spawn_blocking(move || {
        let tree = snapshot.tree;
        let (payload, written) = match writes.write() {
            Ok(()) => {
                let checkpoint = Checkpoint {
                    entry_id,
                    snapshot: tree.clone(),
                    files,
                    skipped: snapshot.skipped,
                };
                (EventPayload::CheckpointCreated { checkpoint }, Some(tree))
            }
            Err(e) => (EventPayload::CheckpointFailed { message: e.message }, None),
        };
        bus.publish_untimed(payload);
        written
    });
    Some(Writing(writing))
}

/// Waits for a checkpoint's writes (done long before a tool that takes any time finishes);
/// the session's last snapshot is then the one written.
pub(crate) async fn written(inner: &Inner, writing: Option<Writing>) {
    let Some(Writing(task)) = writing else {
        return;
    };
    if let Ok(Some(tree)) = task.await {
        inner.lock().checkpoint.last = Some(tree);
    }
}
