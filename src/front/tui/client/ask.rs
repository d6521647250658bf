//! Asking the session from the controller without waiting for it: a command (or several) runs
//! on a task of its own with a handle to the session's commands, and what it makes of the
//! answers comes back to the controller's loop as a [`Back`]. One place for the pattern every
//! picker, slash command and session change uses.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::future::Future;

use super::{internals, Back, Client};
use crate::client::link::Commands;
use crate::front::tui::replay::Replayed;
use crate::wire::pi::data::{MessagesData, State};
use crate::wire::pi::Command;

impl Client {
    /// Runs `ask` with the session's commands on a task of its own; what it returns, if
    /// anything, is handed back to the loop.
    pub(in crate::front::tui) fn in_back<F, Fut>(&self, ask: F)
    where
        F: FnOnce(Commands) -> Fut + Send + 'static,
        Fut: Future<Output = Option<Back>> + Send + 'static,
    {
        let commands = self.commands.clone();
        let back = self.back_tx.clone();
        tokio::spawn(async move {
            if let Some(answer) = ask(commands).await {
                let _ = back.send(answer);
            }
        });
    }
}

/// The conversation of the branch the session is on, from its start, as the transcript
/// replays it, and the session's state (after a session change or a rewind).
pub(super) async fn branch(commands: &Commands) -> (Vec<Replayed>, Option<State>) {
    let got = commands.ask::<MessagesData>(&Command::GetMessages {}).await;
    let messages = got.map(|m| m.messages).unwrap_or_default();
    let replayed = internals(commands).await.replay(&messages);
    let state = commands.ask::<State>(&Command::GetState {}).await.ok();
    (replayed, state)
}
