//! The transcript's notices: what hooks did (a PreToolUse denial said once, in the cell of the
//! call it refused), the context hooks gave the model, checkpoint warnings, and the dialogs
//! that are messages (a warning said once however many ways it arrives: with the opened
//! session and as the host's `notify` line). Pure, like the rest of `transcript`.

use super::{lines, FinishedTool, HistoryCell, Transcript};
use crate::kernel::checkpoint::Skipped;
use crate::wire::events::{NotifyType, UiMethod, UiRequest};

/// What the kernel tells the model when a PreToolUse hook refused a call (`turn.rs`), before
/// the reason.
const BLOCKED_BY_HOOK: &str = "was blocked by a PreToolUse hook: ";

/// A PreToolUse hook's denial, held until the cell of the call it refused shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Denial {
    command: String,
    reason: String,
}

impl Transcript {
    /// A compact line when a hook blocked, asked, stopped, failed or spoke to the user; quiet
    /// hooks leave no trace in the transcript. A PreToolUse denial is held: the refused call's
    /// cell says it, naming the hook.
    pub(super) fn hook_finished(
        &mut self,
        event: &str,
        command: &str,
        decision: Option<&str>,
        reason: Option<&str>,
        messages: &[String],
    ) {
        let denies = event == "PreToolUse" && matches!(decision, Some("deny" | "block"));
        let decision = match denies {
            true => {
                self.denials.push(Denial {
                    command: command.to_string(),
                    reason: reason.unwrap_or("no reason given").to_string(),
                });
                None
            }
            false => decision,
        };
        let lines = crate::report::fact::hook_lines(event, command, decision, reason, messages);
        self.pending
            .extend(lines.into_iter().map(HistoryCell::Notice));
    }

    /// A call a held hook denial refused: its cell names the hook and gives the reason once
    /// (the model's text said it again without the hook).
    pub(super) fn denied_by_hook(&mut self, tool: &mut FinishedTool) {
        if !tool.is_error {
            return;
        }
        let Some((_, reason)) = tool.text.split_once(BLOCKED_BY_HOOK) else {
            return;
        };
        let Some(i) = self.denials.iter().position(|d| d.reason == reason) else {
            return;
        };
        let d = self.denials.remove(i);
        tool.text = format!("blocked by hook `{}`: {}", d.command, d.reason);
    }

    /// Hook denials no refused call showed (the run ended first): each as its line.
    pub(super) fn flush_denials(&mut self) {
        for d in std::mem::take(&mut self.denials) {
            let lines = crate::report::fact::hook_lines(
                "PreToolUse",
                &d.command,
                Some("deny"),
                Some(&d.reason),
                &[],
            );
            self.pending
                .extend(lines.into_iter().map(HistoryCell::Notice));
        }
    }

    /// A user message: a prompt, or the context hooks gave the model (a hook notice).
    pub(super) fn user_message(&mut self, text: String) {
        let cell = match crate::kernel::hooks::context::parse(&text) {
            Some(context) => HistoryCell::Notice(lines::hook_context(context)),
            None => HistoryCell::User(text),
        };
        self.pending.push_back(cell);
    }

    /// A checkpoint that left files out or failed: a notice naming them.
    pub(super) fn checkpoint_warning(&mut self, skipped: &[Skipped], error: Option<&str>) {
        let names: Vec<String> = skipped
            .iter()
            .map(|s| format!("{} ({})", s.path, s.reason))
            .collect();
        let text = match error {
            Some(e) => format!("checkpoint not taken: {e}"),
            None => format!("checkpoint left out: {}", names.join(", ")),
        };
        self.pending.push_back(HistoryCell::Notice(text));
    }

    /// A dialog: an approval marks its tool call as waiting (the view shows the question); a
    /// message becomes a cell.
    pub(super) fn dialog(&mut self, r: &UiRequest) {
        match r.method {
            UiMethod::Confirm => {
                if let Some(t) = self.running.iter_mut().find(|t| t.call_id == r.id) {
                    t.awaiting_approval = true;
                }
            }
            UiMethod::Notify => match r.notify_type {
                Some(NotifyType::Error) => self
                    .pending
                    .push_back(HistoryCell::Error(r.message.to_string())),
                Some(NotifyType::Warning) => {
                    self.push(HistoryCell::Notice(format!("warning: {}", r.message)))
                }
                _ => self
                    .pending
                    .push_back(HistoryCell::Notice(r.message.to_string())),
            },
            _ => {}
        }
    }

    /// Whether `cell` is a warning already shown (a startup warning comes with the opened
    /// session and again as the host's `notify` line); records it if not.
    pub(super) fn warned_before(&mut self, cell: &HistoryCell) -> bool {
        match cell {
            HistoryCell::Notice(n) if n.starts_with("warning: ") => !self.warned.insert(n.clone()),
            _ => false,
        }
    }
}
