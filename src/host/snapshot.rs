//! What is in flight, for a snapshot (`DESIGN.md` §10.4): the assistant message being streamed
//! (folded from its deltas) and the running tools with their latest partial output. A client
//! that attaches mid-run gets these instead of a replay and continues from the live events.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::kernel::event::{AssistantDelta, Event, EventPayload};
use crate::kernel::message::Message;
use crate::kernel::session::SessionHeader;
use crate::wire::protocol::snapshot::{PartialResult, RunningTool, SnapshotHeader, Streaming};

/// The streaming part of a session's state.
#[derive(Debug, Default)]
pub struct InFlight {
    /// The partial assistant message (pi's shape, content blocks as far as streamed).
    message: Option<Value>,
    /// Raw argument text of tool calls being streamed, by content index.
    args: BTreeMap<usize, String>,
    /// Running tools by call id.
    tools: BTreeMap<String, RunningTool>,
    /// When the active run started (its `agent_start`, unix ms): an attaching client times
    /// the run from there, not from the attach.
    run_started: Option<i64>,
}

impl InFlight {
    /// Folds one event in.
    pub fn observe(&mut self, event: &Event) {
        match &event.payload {
            EventPayload::AgentStarted => {
                self.run_started.get_or_insert(event.ts);
            }
            EventPayload::MessageStarted {
                message: m @ Message::Assistant(_),
            } => {
                self.message = serde_json::to_value(m).ok();
                self.args.clear();
            }
            EventPayload::MessageDelta { delta, .. } => self.apply(delta),
            EventPayload::MessageFinished {
                message: Message::Assistant(_),
                ..
            } => {
                self.message = None;
                self.args.clear();
            }
            EventPayload::ToolCallStarted {
                call_id,
                tool_name,
                args,
            } => {
                let tool = RunningTool {
                    tool_call_id: call_id.clone(),
                    tool_name: tool_name.clone(),
                    args: args.clone(),
                    started_at: event.ts,
                    partial_result: None,
                };
                self.tools.insert(call_id.clone(), tool);
            }
            EventPayload::ToolCallUpdated {
                call_id, partial, ..
            } => {
                if let Some(tool) = self.tools.get_mut(call_id) {
                    tool.partial_result = Some(PartialResult {
                        content: partial.content.clone(),
                        details: partial.details.clone(),
                        is_error: partial.is_error,
                    });
                }
            }
            EventPayload::ToolCallFinished { call_id, .. } => {
                self.tools.remove(call_id);
            }
            EventPayload::AgentSettled { .. } => *self = InFlight::default(),
            _ => {}
        }
    }

    /// When the active run started (unix ms), if one is active.
    pub fn run_started(&self) -> Option<i64> {
        self.run_started
    }

    /// The message and tools in flight, if any.
    pub fn streaming(&self) -> Option<Streaming> {
        if self.message.is_none() && self.tools.is_empty() {
            return None;
        }
        let tools = self.tools.values().cloned().collect();
        let mut message = self.message.clone();
        if let Some(content) = message
            .as_mut()
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        {
            for (index, raw) in &self.args {
                if let Some(block) = content.get_mut(*index) {
                    block["partialArguments"] = json!(raw);
                }
            }
        }
        Some(Streaming { message, tools })
    }

    fn apply(&mut self, delta: &AssistantDelta) {
        let Some(content) = self
            .message
            .as_mut()
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        let mut put = |index: usize, block: Value| {
            if index >= content.len() {
                content.resize(index + 1, Value::Null);
            }
            content[index] = block;
        };
        match delta {
            AssistantDelta::TextStarted { index } => {
                put(*index, json!({"type": "text", "text": ""}))
            }
            AssistantDelta::ThinkingStarted { index } => {
                put(*index, json!({"type": "thinking", "thinking": ""}))
            }
            AssistantDelta::TextDelta { index, delta } => append(content, *index, "text", delta),
            AssistantDelta::ThinkingDelta { index, delta } => {
                append(content, *index, "thinking", delta)
            }
            AssistantDelta::TextFinished { index, text } => {
                put(*index, json!({"type": "text", "text": text}))
            }
            AssistantDelta::ThinkingFinished { index, thinking } => {
                put(*index, json!({"type": "thinking", "thinking": thinking}))
            }
            AssistantDelta::ToolCallStarted { index, id, name } => {
                self.args.insert(*index, String::new());
                put(
                    *index,
                    json!({"type": "toolCall", "id": id, "name": name, "arguments": {}}),
                );
            }
            AssistantDelta::ToolCallDelta { index, delta } => {
                // Kept aside and put into the block only when a snapshot is taken.
                self.args.entry(*index).or_default().push_str(delta);
            }
            AssistantDelta::ToolCallFinished {
                index,
                id,
                name,
                arguments,
            } => {
                self.args.remove(index);
                put(
                    *index,
                    json!({"type": "toolCall", "id": id, "name": name, "arguments": arguments}),
                );
            }
        }
    }
}

/// The snapshot's `header`: the session file's header line.
pub fn header(h: &SessionHeader) -> SnapshotHeader {
    SnapshotHeader {
        kind: "session".into(),
        version: crate::kernel::session::VERSION,
        id: h.id.clone(),
        timestamp: h.timestamp.clone(),
        cwd: h.cwd.clone(),
        parent_session: h.parent_session.clone(),
        worktree: None,
        branch: None,
    }
}

/// Appends in place (a long answer streams many thousands of deltas).
fn append(content: &mut [Value], index: usize, field: &str, delta: &str) {
    if let Some(Value::String(s)) = content.get_mut(index).and_then(|b| b.get_mut(field)) {
        s.push_str(delta);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::kernel::message::{AssistantMessage, StopReason, Usage};
    use crate::kernel::tool::ToolOutput;

    fn event(payload: EventPayload) -> Event {
        Event {
            seq: 1,
            ts: 0,
            payload,
        }
    }

    #[test]
    fn the_snapshot_header_is_the_session_files_header_line() {
        let clock = crate::kernel::clock::Clock::new(Some(0), Some(1));
        let mut h = SessionHeader::new(&clock, "/w");
        assert_eq!(serde_json::to_value(header(&h)).unwrap(), h.to_json());
        h.parent_session = Some("/s/a.jsonl".into());
        assert_eq!(serde_json::to_value(header(&h)).unwrap(), h.to_json());
    }

    #[test]
    fn a_streaming_message_and_a_running_tool_are_folded_from_their_events() {
        let mut f = InFlight::default();
        assert_eq!(f.streaming(), None);
        let empty = AssistantMessage {
            content: Vec::new(),
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::Pending,
            error_message: None,
            duration_ms: None,
            timestamp: 1,
        };
        f.observe(&event(EventPayload::MessageStarted {
            message: Message::from(empty),
        }));
        for d in [
            AssistantDelta::TextStarted { index: 0 },
            AssistantDelta::TextDelta {
                index: 0,
                delta: "Hel".into(),
            },
            AssistantDelta::TextDelta {
                index: 0,
                delta: "lo".into(),
            },
            AssistantDelta::ToolCallStarted {
                index: 1,
                id: "c1".into(),
                name: "bash".into(),
            },
            AssistantDelta::ToolCallDelta {
                index: 1,
                delta: "{\"comm".into(),
            },
        ] {
            f.observe(&event(EventPayload::MessageDelta {
                usage: Usage::default(),
                delta: d,
            }));
        }
        let snap = serde_json::to_value(f.streaming().unwrap()).unwrap();
        assert_eq!(snap["message"]["content"][0]["text"], "Hello");
        assert_eq!(snap["message"]["content"][1]["partialArguments"], "{\"comm");
        f.observe(&event(EventPayload::ToolCallStarted {
            call_id: "c0".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
        }));
        f.observe(&event(EventPayload::ToolCallUpdated {
            call_id: "c0".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
            partial: ToolOutput::ok("a\nb"),
        }));
        let snap = serde_json::to_value(f.streaming().unwrap()).unwrap();
        assert_eq!(snap["tools"][0]["toolCallId"], "c0");
        assert!(snap["tools"][0]["partialResult"].is_object());
        f.observe(&event(EventPayload::AgentSettled {
            aborted: false,
            outcome: crate::kernel::event::RunOutcome::Completed,
            structured_output: None,
        }));
        assert_eq!(f.streaming(), None);
    }
}
