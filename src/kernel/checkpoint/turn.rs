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

/// Takes the due checkpoint before the call of `tool` runs, if the tool may change files.
pub(crate) async fn before_call(inner: &Inner, tool: &str) {
    let Some(checkpoints) = inner.config.checkpoints.clone() else {
        return;
    };
    if READ_ONLY.contains(&tool) {
        return;
    }
    let (due, previous) = {
        let mut state = inner.lock();
        if state.checkpoint.off {
            return;
        }
        (
            state.checkpoint.message.take(),
            state.checkpoint.last.clone(),
        )
    };
    let Some(entry_id) = due else {
        return;
    };
    let session = inner.config.session_id.as_deref().unwrap_or("default");
    let shadow = checkpoints.shadow(&inner.config.cwd, session);
    // The files changed since the previous checkpoint are what changed since this session's
    // last snapshot (in-process: no git process, only the files whose stat changed are read).
    // Taken on this thread. Awaited on the blocking pool, the run yields here, and in ACP an
    // `fs/*` request of the next tool (sent straight to the editor) can then overtake the
    // `tool_call` updates that go through the host's event stream: tests/acp_fs.rs consumes
    // the early request while it waits for the update and then waits forever (3 runs in 10).
    let taken = shadow.snapshot().map(|mut snapshot| {
        let files = match previous {
            Some(_) => std::mem::take(&mut snapshot.changed),
            None => Vec::new(),
        };
        (snapshot, files)
    });
    let payload = match taken {
        Ok((snapshot, files)) => {
            inner.lock().checkpoint.last = Some(snapshot.tree.clone());
            EventPayload::CheckpointCreated {
                checkpoint: Checkpoint {
                    entry_id,
                    snapshot: snapshot.tree,
                    files,
                    skipped: snapshot.skipped,
                },
            }
        }
        Err(e) => {
            if e.kind == CheckpointErrorKind::GitMissing {
                inner.lock().checkpoint.off = true;
            }
            EventPayload::CheckpointFailed { message: e.message }
        }
    };
    // Untimed: checkpoints on or off, the other events keep their times.
    inner.bus.publish_untimed(payload);
}
