//! What a finished call adds to the status line's and `/session`'s totals besides the model's
//! own answers: a `task` call's child usage (its own subagents' included), as the result's
//! details report it. Pure.

use super::{FinishedTool, Totals};
use crate::kernel::subagent::SubagentDetails;

impl Totals {
    /// Counts a finished call's subagent usage (nothing for any other tool). The context
    /// tokens stay the parent's: a child's context is its own.
    pub(super) fn tool_finished(&mut self, tool: &FinishedTool) {
        if let Some(u) = SubagentDetails::usage_of(&tool.name, tool.details.as_ref()) {
            self.usage.add(&u);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::super::Transcript;
    use crate::kernel::event::{Event, EventPayload};
    use crate::kernel::message::{AssistantMessage, Message, StopReason, Usage};
    use crate::kernel::tool::ToolOutput;

    fn feed(t: &mut Transcript, payload: EventPayload) {
        let event = Event {
            seq: 0,
            ts: 1_000,
            payload,
        };
        for e in crate::front::tui::wire::events_for(&event) {
            t.on_event(&e, event.ts);
        }
    }

    fn usage(input: u64, cost: f64) -> Usage {
        let mut u = Usage {
            input,
            total_tokens: input,
            ..Default::default()
        };
        u.cost.input = cost;
        u.cost.total = cost;
        u
    }

    fn finished(t: &mut Transcript, id: &str, name: &str, details: serde_json::Value) {
        feed(
            t,
            EventPayload::ToolCallStarted {
                call_id: id.into(),
                tool_name: name.into(),
                args: json!({}),
            },
        );
        feed(
            t,
            EventPayload::ToolCallFinished {
                call_id: id.into(),
                tool_name: name.into(),
                result: ToolOutput::ok("done").with_details(details),
                duration_ms: 5,
            },
        );
    }

    #[test]
    fn a_task_result_s_usage_counts_in_the_totals() {
        let mut t = Transcript::new();
        feed(&mut t, EventPayload::AgentStarted);
        let answer = AssistantMessage {
            content: vec![],
            api: String::new(),
            provider: String::new(),
            model: String::new(),
            usage: usage(100, 0.01),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            duration_ms: None,
            timestamp: 0,
        };
        feed(
            &mut t,
            EventPayload::MessageFinished {
                message: Message::from(answer),
                entry_id: "e".into(),
            },
        );
        let child = json!({"sessionId": "c", "agentType": "general", "description": "d",
            "toolCount": 2, "usage": usage(200, 0.02), "durationMs": 9});
        finished(&mut t, "t1", "task", child.clone());
        // Another tool's details are not a child's.
        finished(&mut t, "b1", "bash", child);
        assert_eq!(t.totals.usage.input, 300, "{:?}", t.totals);
        assert!(
            (t.totals.usage.cost.total - 0.03).abs() < 1e-9,
            "{:?}",
            t.totals
        );
        assert_eq!(t.totals.context_tokens, 100, "the context is the parent's");
        assert_eq!(t.totals.answers, 1);
    }
}
