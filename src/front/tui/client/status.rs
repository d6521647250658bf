//! The controller's side of `statusLine` (`status_line.rs`): which events make the line stale,
//! a run in the background with the session's state and stats as Claude's status JSON, and
//! its line handed to the view.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::{Back, Client};
use crate::front::tui::status_line::{self, StatusInput};
use crate::wire::events::WireEvent;
use crate::wire::pi::data::{SessionStats, State};
use crate::wire::pi::Command;

impl Client {
    /// An event changed the session's state (not a streamed piece of it): the line is stale.
    pub(super) fn status_touched(&mut self, e: &WireEvent) {
        let streamed = matches!(
            e,
            WireEvent::MessageUpdate { .. }
                | WireEvent::ToolExecutionUpdate { .. }
                | WireEvent::BashExecutionUpdate { .. }
        );
        if let Some(r) = self.status.as_mut().filter(|_| !streamed) {
            r.touch();
        }
    }

    /// The session shown changed (a new, resumed or forked one).
    pub(super) fn status_stale(&mut self) {
        if let Some(r) = self.status.as_mut() {
            r.touch();
        }
    }

    /// Runs the command now, in the background: its JSON from the session's state and stats.
    pub(super) fn run_status(&mut self) {
        let Some(r) = self.status.as_mut() else {
            return;
        };
        r.started();
        let command = r.command.command.clone();
        let cwd = r.cwd.clone();
        self.in_back(|commands| async move {
            let state = commands.ask::<State>(&Command::GetState {}).await.ok();
            let stats = commands
                .ask::<SessionStats>(&Command::GetSessionStats {})
                .await;
            let input = StatusInput::new(state.as_ref(), stats.ok().as_ref(), &cwd);
            let input = serde_json::to_vec(&input).unwrap_or_default();
            Some(Back::StatusLine(
                status_line::run(&command, &cwd, input).await,
            ))
        });
    }

    /// A run ended: its line (the last good one stays after a failure); whether it changed.
    pub(super) fn status_ran(&mut self, out: Result<String, String>) -> bool {
        let Some(r) = self.status.as_mut() else {
            return false;
        };
        let changed = r.finished(out);
        let padding = r.command.padding;
        self.view.script_status = r.line.clone().map(|l| (l, padding));
        changed
    }
}
