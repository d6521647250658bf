//! The event vocabulary read back and written again: every line of a recorded RPC stream that
//! holds every event type comes back byte for byte, and the shapes peers may send read.

use std::collections::BTreeSet;

use serde_json::json;

use super::{AssistantMessageEvent as Delta, NotifyType, UiMethod, WireEvent};

/// `fixtures/streams/everything.rpc.jsonl`: every event line an RPC run wrote (see
/// `tests/tui_wire.rs` for how it was recorded).
fn recorded() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/streams/everything.rpc.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_recorded_line_reads_back_and_writes_the_same_bytes() {
    for (n, line) in recorded().iter().enumerate() {
        let event = WireEvent::parse(line)
            .unwrap_or_else(|| panic!("line {} does not read: {line}", n + 1));
        assert_ne!(event, WireEvent::Other, "line {}: a known type", n + 1);
        let tag = format!("{{\"type\":\"{}\"", event.kind());
        assert!(line.starts_with(&tag), "line {}: kind() is {tag}", n + 1);
        let again = serde_json::to_string(&event).unwrap();
        assert_eq!(again, *line, "line {} changed on the way back", n + 1);
    }
}

#[test]
fn the_recorded_stream_holds_every_variant_of_the_vocabulary() {
    let (mut kinds, mut deltas, mut methods) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    for line in recorded() {
        let event = WireEvent::parse(&line).unwrap();
        kinds.insert(event.kind());
        match event {
            WireEvent::MessageUpdate {
                assistant_message_event: d,
                ..
            } => {
                deltas.insert(d.kind());
            }
            WireEvent::ExtensionUiRequest(r) if !methods.contains(&r.method) => {
                methods.push(r.method)
            }
            _ => {}
        }
    }
    let known = |all: &[&'static str]| -> BTreeSet<&'static str> {
        all.iter().copied().filter(|k| *k != "other").collect()
    };
    assert_eq!(kinds, known(WireEvent::KINDS));
    assert_eq!(deltas, known(Delta::KINDS));
    // The dialog methods keel writes.
    assert_eq!(methods, [UiMethod::Notify, UiMethod::Confirm]);
}

#[test]
fn both_dialog_shapes_read() {
    let host = r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"ls","timeout":1000,"toolName":"bash","args":{"command":"ls"}}"#;
    let Some(WireEvent::ExtensionUiRequest(r)) = WireEvent::parse(host) else {
        panic!("not read");
    };
    assert_eq!(
        (&*r.id, r.timeout, r.tool_name.as_deref()),
        ("c1", Some(1000), Some("bash"))
    );
    assert_eq!(r.args.as_deref(), Some(&json!({"command": "ls"})));
    let kernel = r#"{"type":"extension_ui_request","id":"c1","method":"confirm","title":"Allow tool `bash`?","message":"{}"}"#;
    let Some(WireEvent::ExtensionUiRequest(r)) = WireEvent::parse(kernel) else {
        panic!("not read");
    };
    assert_eq!((r.tool_name, r.args, r.timeout), (None, None, None));
    let notify = r#"{"type":"extension_ui_request","id":"n1","method":"notify","message":"m","notifyType":"warning"}"#;
    let Some(WireEvent::ExtensionUiRequest(r)) = WireEvent::parse(notify) else {
        panic!("not read");
    };
    assert_eq!(r.notify_type, Some(NotifyType::Warning));
}

#[test]
fn deltas_and_shell_commands_read() {
    let line = r#"{"type":"message_update","usage":{},"assistantMessageEvent":{"type":"toolcall_start","contentIndex":2,"id":"c","toolName":"ls"}}"#;
    assert!(matches!(
        WireEvent::parse(line),
        Some(WireEvent::MessageUpdate {
            assistant_message_event: Delta::ToolcallStart { content_index: 2, ref tool_name, .. },
            ..
        }) if tool_name == "ls"
    ));
    let unknown = r#"{"type":"message_update","assistantMessageEvent":{"type":"image_delta"}}"#;
    assert!(matches!(
        WireEvent::parse(unknown),
        Some(WireEvent::MessageUpdate {
            assistant_message_event: Delta::Other,
            ..
        })
    ));
    let bash = r#"{"type":"bash_execution_end","command":"ls","output":"a\n","exitCode":null,"cancelled":true,"truncated":false,"timestamp":5}"#;
    let Some(WireEvent::BashExecutionEnd(b)) = WireEvent::parse(bash) else {
        panic!("not read");
    };
    assert_eq!(
        (
            b.command.as_str(),
            b.exit_code,
            b.cancelled,
            b.exclude_from_context
        ),
        ("ls", None, true, false)
    );
}

#[test]
fn words_a_newer_peer_adds_do_not_make_a_line_unreadable() {
    let line = r#"{"type":"agent_settled","aborted":false,"outcome":"paused","error":{"kind":"budget","message":"m"}}"#;
    let event = WireEvent::parse(line).unwrap();
    let WireEvent::AgentSettled { outcome, error, .. } = &event else {
        panic!("not read: {event:?}");
    };
    assert_eq!(outcome.as_str(), "paused");
    assert_eq!(error.as_ref().map(|e| e.kind.as_str()), Some("budget"));
    assert_eq!(serde_json::to_string(&event).unwrap(), line);
    let dialog = r#"{"type":"extension_ui_request","id":"s","method":"setStatus","message":"x"}"#;
    assert!(matches!(
        WireEvent::parse(dialog),
        Some(WireEvent::ExtensionUiRequest(r)) if r.method == UiMethod::Other("setStatus".into())
    ));
}

#[test]
fn written_events_borrow_the_kernel_event() {
    use std::borrow::Cow;

    use super::wire_events;
    use crate::kernel::event::{AssistantDelta, Event, EventPayload};
    use crate::kernel::message::{Message, Usage};

    let ev = |payload| Event {
        seq: 1,
        ts: 0,
        payload,
    };
    // The hot path (one line per streamed token) copies nothing out of the kernel event.
    let delta = ev(EventPayload::MessageDelta {
        usage: Usage::default(),
        delta: AssistantDelta::TextDelta {
            index: 0,
            delta: "x".into(),
        },
    });
    assert!(matches!(
        wire_events(&delta)[..],
        [WireEvent::MessageUpdate {
            usage: Cow::Borrowed(_),
            assistant_message_event: Delta::TextDelta {
                delta: Cow::Borrowed(_),
                ..
            },
        }]
    ));
    let end = ev(EventPayload::MessageFinished {
        message: Message::user("hi", 1),
        entry_id: "e".into(),
    });
    assert!(matches!(
        wire_events(&end)[..],
        [WireEvent::MessageEnd {
            message: Cow::Borrowed(_)
        }]
    ));
}
