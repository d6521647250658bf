//! `/rewind` and Esc Esc in the controller: the session's checkpoints (`get_checkpoints`) open
//! the rewind picker, each highlighted message's preview comes from `rewind_preview`, and the
//! chosen rewind is the host's `rewind` command (the one RPC and the daemon use; the rewind
//! itself is never done here). A conversation rewind shows the branch the session is on now.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::{Back, Client};
use crate::front::tui::rewind::RewindPicker;
use crate::front::tui::transcript::HistoryCell;
use crate::kernel::checkpoint::{Restore, Rewound};
use crate::wire::pi::data::{CheckpointsData, ForkMessagesData, RewindPreviewData, State};
use crate::wire::pi::Command;

/// Answers for the rewind picker.
pub(in crate::front::tui) enum RewindBack {
    /// The session's checkpoints, oldest first.
    Listed(CheckpointsData),
    /// A message's preview, or the host's error text.
    Preview(String, Result<RewindPreviewData, String>),
    /// A rewind was refused or failed: why.
    Failed(String),
    /// A rewind was done: what to say, and (conversation rewound) the branch to show.
    Done {
        text: String,
        /// The line above the branch.
        header: String,
        branch: Option<Box<Branch>>,
        /// A conversation rewound to before a prompt: that prompt's whole text, for the
        /// editor (as Claude Code does).
        prompt: Option<String>,
    },
}

/// The session's id, its conversation from the start, and its state.
type Branch = (
    String,
    Vec<crate::front::tui::replay::Replayed>,
    Option<State>,
);

impl Client {
    /// Asks the session for its checkpoints; the picker opens when they come.
    pub(in crate::front::tui) fn open_rewind(&mut self) {
        self.in_back(|commands| async move {
            let got = commands
                .ask::<CheckpointsData>(&Command::GetCheckpoints {})
                .await;
            Some(match got {
                Ok(listed) => Back::Rewind(RewindBack::Listed(listed)),
                Err(e) => Back::Notice(HistoryCell::Error(format!(
                    "cannot list the checkpoints: {}",
                    e.message
                ))),
            })
        });
    }

    /// Asks for what rewinding the code to before `entry_id` would change.
    pub(super) fn rewind_preview(&self, entry_id: String) {
        self.in_back(|commands| async move {
            let ask = Command::RewindPreview {
                entry_id: entry_id.clone(),
            };
            let got = commands.ask::<RewindPreviewData>(&ask).await;
            let got = got.map_err(|e| e.message);
            Some(Back::Rewind(RewindBack::Preview(entry_id, got)))
        });
    }

    /// Rewinds through the host; says what changed, and shows the branch the session is on
    /// after a conversation rewind.
    pub(super) fn rewind(&mut self, entry_id: String, prompt: String, restore: Restore) {
        let ask = Command::Rewind {
            entry_id,
            restore: Some(restore),
        };
        let what = format!("rewound {} to before “{prompt}”", restored(restore));
        self.rewinding(ask, format!("rewound to before “{prompt}” · session"), what);
    }

    /// `/rewind undo`: the host puts back what the session's last rewind changed, and the
    /// report names the prompt the session is back at.
    pub(in crate::front::tui) fn rewind_undo(&mut self) {
        self.rewinding(
            Command::RewindUndo {},
            "rewind undone · session".into(),
            String::new(),
        );
    }

    /// Sends `ask` (`rewind` or `rewind_undo`, whose `what` is empty: it is made from the
    /// answer); reports what it restored, with the branch the session is on (headed `header`)
    /// when the conversation moved.
    fn rewinding(&mut self, ask: Command, header: String, what: String) {
        self.rewinding = true;
        let session = self.link.session_id().to_string();
        self.in_back(|commands| async move {
            let done = match commands.ask::<Rewound>(&ask).await {
                Ok(done) => done,
                Err(e) => {
                    let why = format!("the rewind did not happen: {}", e.message);
                    return Some(Back::Rewind(RewindBack::Failed(why)));
                }
            };
            let undo = what.is_empty();
            let (branch, prompt) = match done.restore.conversation() {
                false => (None, None),
                true => {
                    let (replayed, state) = super::ask::branch(&commands).await;
                    let prompt = match undo {
                        true => None,
                        false => whole_prompt(&commands, &done.entry_id).await,
                    };
                    (Some(Box::new((session, replayed, state))), prompt)
                }
            };
            let what = match undo {
                true => undone(&done),
                false => what,
            };
            let text = report(what, &done);
            Some(Back::Rewind(RewindBack::Done {
                text,
                header,
                branch,
                prompt,
            }))
        });
    }

    pub(super) fn on_rewind(&mut self, back: RewindBack) {
        match back {
            RewindBack::Listed(listed) => {
                let picker = RewindPicker::new(&listed.checkpoints, self.clock.now_ms());
                if picker.is_empty() {
                    return self.view.notice(HistoryCell::Notice(
                        "nothing to rewind: this session has no checkpoints yet (keel takes one \
                         before the first change of each turn)"
                            .into(),
                    ));
                }
                if self.plain {
                    // TERM=dumb cannot show a picker: the list, and the command that rewinds.
                    let id = self.link.session_id();
                    let mut text = format!(
                        "checkpoints, newest first (rewind with: keel rewind {id} --to ID \
                         [--files | --conversation]):"
                    );
                    for c in listed.checkpoints.iter().rev() {
                        text.push_str(&format!("\n  {}  {}  {}", c.id, c.timestamp, c.prompt));
                    }
                    return self.view.notice(HistoryCell::Notice(text));
                }
                if let Some(id) = self.view.open_rewind(picker) {
                    self.rewind_preview(id);
                }
            }
            RewindBack::Preview(id, got) => self.view.rewind_preview(&id, got),
            RewindBack::Failed(why) => {
                self.rewinding = false;
                self.view.notice(HistoryCell::Error(why));
            }
            RewindBack::Done {
                text,
                header,
                branch,
                prompt,
            } => {
                self.rewinding = false;
                if let Some((id, replayed, state)) = branch.map(|b| *b) {
                    // What the session spent stays spent: the status line keeps its tokens
                    // and cost (the context is the branch's).
                    let spent = self.view.transcript.totals.clone();
                    self.replacing = Some(header);
                    self.replay(&id, &replayed, state.as_ref());
                    let totals = &mut self.view.transcript.totals;
                    totals.usage = spent.usage;
                    totals.answers = spent.answers;
                }
                if let Some(prompt) = prompt {
                    if self.view.composer.text().is_empty() {
                        self.view.composer.set_text(&prompt);
                    }
                }
                self.view.notice(HistoryCell::Notice(text));
            }
        }
    }
}

impl Client {
    /// The conversation of the shown session was rewound (`session/replaced` with the same
    /// id): whether this window asked for it (the answer then shows the branch). A rewind made
    /// by another client is shown as a session change, under a line saying so.
    pub(super) fn rewound_here(&mut self) -> bool {
        if self.rewinding {
            return true;
        }
        self.replacing = Some("conversation rewound by another client · session".into());
        false
    }
}

/// The whole text of the user message `entry_id` (`get_fork_messages`), if the host has it.
async fn whole_prompt(commands: &crate::client::link::Commands, entry_id: &str) -> Option<String> {
    let got = commands
        .ask::<ForkMessagesData>(&Command::GetForkMessages {})
        .await
        .ok()?;
    got.messages
        .into_iter()
        .find(|m| m.entry_id == entry_id)
        .map(|m| m.text)
}

/// An undo's first line: the rewind it undid and the prompt the session is back at.
fn undone(done: &Rewound) -> String {
    let to = done.prompt.as_deref().unwrap_or(&done.entry_id);
    match &done.back_at {
        Some(back) => format!("undid the rewind to before “{to}”: back at “{back}”"),
        None => format!("undid the rewind to before “{to}”"),
    }
}

/// What a rewind restores, as the report names it.
fn restored(restore: Restore) -> &'static str {
    match restore {
        Restore::Both => "code and conversation",
        Restore::Conversation => "the conversation",
        Restore::Files => "the code",
    }
}

/// `what` (`rewound the code to before “edit a”`), the files written and removed, and how to
/// undo it.
fn report(what: String, done: &Rewound) -> String {
    let mut text = what;
    if done.restore.files() {
        if done.restored.is_empty() {
            text.push_str("; no file changed");
        }
        for line in done.restored.lines() {
            text.push_str(&format!("\n  {line}"));
        }
    }
    text.push_str("\n  /rewind undo puts it back");
    text
}
