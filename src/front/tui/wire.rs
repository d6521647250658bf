//! A kernel event as the lines a host publishes for it, parsed into [`WireEvent`]s: what
//! the view's tests feed it (scenarios are written as kernel events). The TUI itself reads
//! only the host's lines, through its link (`client.rs`), in-process and from the daemon
//! alike (`DESIGN.md` §10.1); this uses the host's own line builders, so both say the same.
//! Pure: no I/O, no kernel state.

use crate::kernel::event::{Event, EventPayload};
use crate::wire::events::{stream_events, WireEvent};
use crate::wire::rpc;

/// The wire lines (compact JSON, no newline) a host publishes for `event`: its stream events
/// (JSON mode's and RPC mode's), or for a tool call waiting for approval the `confirm`
/// dialog. This process answers dialogs itself and never times them out, so the dialog has no
/// `timeout`.
pub fn lines_for(event: &Event) -> Vec<String> {
    if let EventPayload::ApprovalRequested {
        call_id,
        tool_name,
        args,
        preview,
    } = &event.payload
    {
        let line = rpc::approval_line(call_id, tool_name, args, preview.as_ref(), None);
        return vec![line.trim_end().to_string()];
    }
    stream_events(event)
        .iter()
        .filter_map(|w| serde_json::to_string(w).ok())
        .collect()
}

/// The public events for a kernel event of this process: [`lines_for`], each parsed back as
/// a line from the daemon would be.
pub fn events_for(event: &Event) -> Vec<WireEvent<'static>> {
    lines_for(event)
        .iter()
        .filter_map(|line| {
            let parsed = WireEvent::parse(line);
            if parsed.is_none() {
                tracing::error!("a wire line does not read back: {line}");
            }
            parsed
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::kernel::event::RunOutcome;
    use serde_json::json;

    fn ev(payload: EventPayload) -> Event {
        Event {
            seq: 1,
            ts: 5,
            payload,
        }
    }

    #[test]
    fn an_approval_is_the_hosts_dialog_with_the_call() {
        let lines = lines_for(&ev(EventPayload::ApprovalRequested {
            call_id: "c1".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
            preview: None,
        }));
        assert_eq!(
            lines,
            [
                r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"ls","toolName":"bash","args":{"command":"ls"}}"#
            ]
        );
    }

    #[test]
    fn facts_of_rpc_mode_reach_the_view_too() {
        let named = events_for(&ev(EventPayload::SessionNamed { name: "n".into() }));
        assert_eq!(named, [WireEvent::SessionInfoChanged { name: "n".into() }]);
        let model = events_for(&ev(EventPayload::ModelChanged {
            provider: "p".into(),
            model: "m".into(),
        }));
        assert_eq!(
            model,
            [WireEvent::ModelChanged {
                provider: "p".into(),
                model: "m".into()
            }]
        );
        let settled = events_for(&ev(EventPayload::AgentSettled {
            aborted: false,
            outcome: RunOutcome::TurnLimit { max_turns: 3 },
            structured_output: None,
        }));
        assert!(
            matches!(
                &settled[..],
                [WireEvent::AgentSettled {
                    max_turns: Some(3),
                    ..
                }]
            ),
            "{settled:?}"
        );
    }
}
