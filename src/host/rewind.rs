//! `rewind` and `get_checkpoints` (keel's pi extensions, DESIGN §16): the served session's
//! checkpoints, and rewinding its files and conversation to one, refused while a run is
//! active. The host owns the session file, so a rewind of a live session always goes here
//! (one writer).

use super::{Answer, CommandError, CommandErrorKind, Host};
use crate::host::dispatch::data;
use crate::kernel::checkpoint::{self, CheckpointErrorKind, Restore};
use crate::kernel::recorder;
use crate::wire::pi::data::{CheckpointsData, RewindPreviewData};

impl Host {
    /// `get_checkpoints`: every checkpoint of the session file, oldest first.
    pub(super) fn checkpoints(&self) -> CheckpointsData {
        let store = recorder::lock(&self.live.store);
        let shadow = self.config.checkpoints.as_ref().map(|c| {
            let id = store.header().id.clone();
            c.shadow(&self.config.cwd, &id)
        });
        CheckpointsData {
            checkpoints: checkpoint::list(&store, shadow.as_ref()),
        }
    }

    /// `rewind`: restores what `restore` names to before the user message `entry_id`, then
    /// serves the conversation from the new leaf.
    pub(super) fn rewind(&mut self, entry_id: &str, restore: Restore) -> Answer {
        self.rewinding(|store, shadow, clock| {
            checkpoint::rewind(store, shadow, entry_id, restore, clock)
        })
    }

    /// `rewind_undo`: puts back what the session's last rewind changed.
    pub(super) fn rewind_undo(&mut self) -> Answer {
        self.rewinding(checkpoint::undo)
    }

    /// Runs `how` on the session file (refused while a run is active), then serves the
    /// conversation from the new leaf.
    fn rewinding(
        &mut self,
        how: impl FnOnce(
            &mut crate::kernel::session::Store,
            Option<&checkpoint::Shadow>,
            &crate::kernel::clock::Clock,
        ) -> Result<checkpoint::Rewound, checkpoint::CheckpointError>,
    ) -> Answer {
        if self.busy() {
            return Err(CommandError::new(
                CommandErrorKind::Busy,
                "A run is active: abort it before rewinding",
            ));
        }
        let done = {
            let mut store = recorder::lock(&self.live.store);
            let shadow = self.config.checkpoints.as_ref().map(|c| {
                let id = store.header().id.clone();
                c.shadow(&self.config.cwd, &id)
            });
            let leaf = store.leaf_id().map(str::to_string);
            let done = how(&mut store, shadow.as_ref(), &self.clock);
            if done.is_ok() {
                self.live.session.replace_history(store.context_entries());
                if store.leaf_id() != leaf.as_deref() {
                    self.out.push_back(super::Out::Moved);
                }
            }
            done
        };
        let done = done.map_err(command_error)?;
        Ok(data(&done))
    }

    /// `rewind_preview`: what rewinding the files to before `target` would change.
    pub(super) fn rewind_preview(&self, target: &str) -> Answer {
        let store = recorder::lock(&self.live.store);
        let shadow = self.config.checkpoints.as_ref().map(|c| {
            let id = store.header().id.clone();
            c.shadow(&self.config.cwd, &id)
        });
        let (checkpoint, files) =
            checkpoint::preview(&store, shadow.as_ref(), target).map_err(command_error)?;
        Ok(data(&RewindPreviewData { checkpoint, files }))
    }
}

fn command_error(e: checkpoint::CheckpointError) -> CommandError {
    let kind = match e.kind {
        CheckpointErrorKind::NotFound => CommandErrorKind::Entry,
        CheckpointErrorKind::Busy => CommandErrorKind::Busy,
        _ => CommandErrorKind::Checkpoint,
    };
    CommandError::new(kind, e.message)
}
