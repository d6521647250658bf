//! Repairs made when a session is opened for use, before any request is built from it: a
//! tool call whose result never reached the file (keel was killed while the tool ran) gets an
//! error result, appended as a normal entry so the file itself is whole again. Without it every
//! later request would carry an unpaired tool call, which strict APIs (OpenAI, Anthropic,
//! llama.cpp's server) refuse with HTTP 400 forever.

use std::collections::HashSet;
use std::path::Path;

use super::{EntryData, SessionError, Store};
use crate::kernel::clock::Clock;
use crate::kernel::message::{Content, Message, ToolResultMessage};

/// What the model reads as the result of a tool call that never finished.
pub const UNFINISHED_TOOL_CALL: &str = "keel stopped before this tool call finished (the \
     process ended while the tool ran), so its result is unknown. Check the current state \
     (for example, read the file again) before relying on what the call may have done.";

impl Store {
    /// Opens a session for use: [`Store::open`], then [`Store::close_unfinished_tool_calls`].
    /// The warnings are the load's and the repair's.
    pub fn resume(path: &Path, clock: &Clock) -> Result<(Store, Vec<String>), SessionError> {
        let (mut store, mut warnings) = Store::open(path)?;
        warnings.extend(store.close_unfinished_tool_calls(clock)?);
        Ok((store, warnings))
    }

    /// Gives every tool call of the branch's last assistant message that has no result an
    /// error result ([`UNFINISHED_TOOL_CALL`]), appended under the leaf in call order. Only
    /// the last assistant message can be unfinished: keel writes results before the next
    /// message. Returns one warning naming the calls, or none.
    pub fn close_unfinished_tool_calls(
        &mut self,
        clock: &Clock,
    ) -> Result<Vec<String>, SessionError> {
        let missing = self.unfinished_tool_calls();
        if missing.is_empty() {
            return Ok(Vec::new());
        }
        let at = clock.now_ms();
        for (call_id, tool_name) in &missing {
            let result = ToolResultMessage {
                tool_call_id: call_id.clone(),
                tool_name: tool_name.clone(),
                content: vec![Content::text(UNFINISHED_TOOL_CALL)],
                details: None,
                is_error: true,
                duration_ms: None,
                timestamp: at,
            };
            self.append(EntryData::Message(result.into()), clock)?;
        }
        let names: Vec<String> = missing
            .iter()
            .map(|(id, name)| format!("{name} ({id})"))
            .collect();
        Ok(vec![format!(
            "session {}: {} tool call(s) never finished because keel stopped while they ran; \
             recorded them as failed: {}",
            self.header().id,
            missing.len(),
            names.join(", ")
        )])
    }

    /// (call id, tool name) of each tool call of the last assistant message on the branch
    /// that has no tool result after it.
    fn unfinished_tool_calls(&self) -> Vec<(String, String)> {
        let branch = self.branch();
        let last = branch.iter().rposition(|e| {
            matches!(
                e.data,
                EntryData::Message(Message::User(_) | Message::Assistant(_))
            )
        });
        let Some(at) = last else {
            return Vec::new();
        };
        let EntryData::Message(Message::Assistant(assistant)) = &branch[at].data else {
            return Vec::new();
        };
        let answered: HashSet<&str> = branch[at + 1..]
            .iter()
            .filter_map(|e| match &e.data {
                EntryData::Message(Message::ToolResult(r)) => Some(r.tool_call_id.as_str()),
                _ => None,
            })
            .collect();
        assistant
            .tool_calls()
            .into_iter()
            .filter(|(id, _, _)| !answered.contains(id.as_str()))
            .map(|(id, name, _)| (id, name))
            .collect()
    }
}
