//! The bytes the connection writes by hand, against the protocol's declared types.

use crate::wire::protocol::notify::SessionEvent;

#[test]
fn a_session_event_written_by_hand_is_the_declared_type_byte_for_byte() {
    let event = crate::host::Published {
        seq: 7,
        line: r#"{"type":"agent_start"}"#.into(),
        typed: None,
    };
    let mut out = Vec::new();
    super::event_params("s\"1", "e1", &event, &mut out);
    let text = String::from_utf8(out).unwrap();
    let typed: SessionEvent = serde_json::from_str(&text).unwrap();
    assert_eq!(typed.seq, 7);
    assert_eq!(serde_json::to_string(&typed).unwrap(), text);
}
