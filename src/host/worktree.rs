//! The session's worktree (`-w`, DESIGN §20) as its host sees it: shown to clients, ended
//! with the session.

use super::Host;
use crate::wire::events::NotifyType;
use crate::worktree::{Ended, Held};

impl Host {
    /// The worktree the session runs in, if any.
    pub fn worktree(&self) -> Option<&Held> {
        self.worktree.as_ref()
    }

    /// The path and branch of the worktree the session runs in, if any.
    pub(super) fn worktree_place(&self) -> Option<(String, String)> {
        let w = self.worktree.as_ref()?.worktree();
        Some((w.path.display().to_string(), w.branch))
    }

    /// Ends the session's hold on its worktree (once): removed when nothing changed, else
    /// kept; either way the clients are told.
    pub(super) async fn end_worktree(&mut self) {
        let Some(held) = self.worktree.clone() else {
            return;
        };
        let Some(ended) = held.finish().await else {
            return;
        };
        let (text, kind) = match &ended {
            Ok(e @ Ended::Removed { .. }) => (e.describe(), NotifyType::Info),
            Ok(e) => (e.describe(), NotifyType::Warning),
            Err(e) => (format!("the worktree was kept: {e}"), NotifyType::Warning),
        };
        let id = self.clock.short_id("notify-");
        self.publish(&crate::wire::rpc::notify_line(&id, &text, kind));
    }
}
