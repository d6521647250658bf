//! What the plain-lines front end (`TERM=dumb`, `client/lines.rs`) reads from the view besides
//! the history: the approval question waiting for an answer and the transient hint.

use super::View;
use crate::front::tui::tool_cell;

impl View {
    /// The approval dialog's question as one plain line, while one waits.
    pub fn approval_question(&self) -> Option<String> {
        let a = self.approvals.front()?;
        Some(format!(
            "? Allow {}: {}",
            a.tool_name,
            tool_cell::describe(&a.tool_name, &a.args)
        ))
    }

    /// Takes the hint shown under the status line (an unknown command, …).
    pub fn take_hint(&mut self) -> Option<String> {
        self.hint.take()
    }
}
