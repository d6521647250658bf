//! Every command decodes from a request line and encodes back to the same JSON; every
//! command of `pi-protocol.md` §4.4 has a variant; decoding keeps pi's error texts and order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

use super::data::{PromptData, SessionChangeData, State};
use super::*;
use crate::wire::rpc::{parse_line, ParamErrorKind};

/// One request line per command, with every field it takes.
const LINES: &[&str] = &[
    r#"{"type":"prompt","message":"hi","images":[{"type":"image","data":"AA==","mimeType":"image/png"}],"streamingBehavior":"followUp"}"#,
    r#"{"type":"prompt","message":"hi"}"#,
    r#"{"type":"steer","message":"s","images":[{"type":"image","data":"AA==","mimeType":"image/jpeg"}]}"#,
    r#"{"type":"follow_up","message":"f"}"#,
    r#"{"type":"abort"}"#,
    r#"{"type":"clear_queue"}"#,
    r#"{"type":"new_session","parentSession":"/s/a.jsonl"}"#,
    r#"{"type":"new_session"}"#,
    r#"{"type":"switch_session","sessionPath":"a.jsonl"}"#,
    r#"{"type":"fork","entryId":"e1"}"#,
    r#"{"type":"clone"}"#,
    r#"{"type":"get_state"}"#,
    r#"{"type":"get_messages"}"#,
    r#"{"type":"set_model","provider":"p","modelId":"m"}"#,
    r#"{"type":"cycle_model"}"#,
    r#"{"type":"get_available_models"}"#,
    r#"{"type":"set_thinking_level","level":"max"}"#,
    r#"{"type":"cycle_thinking_level"}"#,
    r#"{"type":"get_available_thinking_levels"}"#,
    r#"{"type":"set_steering_mode","mode":"all"}"#,
    r#"{"type":"set_follow_up_mode","mode":"one-at-a-time"}"#,
    r#"{"type":"compact","customInstructions":"keep the tests"}"#,
    r#"{"type":"compact"}"#,
    r#"{"type":"set_auto_compaction","enabled":false}"#,
    r#"{"type":"set_auto_retry","enabled":true}"#,
    r#"{"type":"abort_retry"}"#,
    r#"{"type":"bash","command":"ls","excludeFromContext":true}"#,
    r#"{"type":"bash","command":"ls"}"#,
    r#"{"type":"abort_bash"}"#,
    r#"{"type":"get_session_stats"}"#,
    r#"{"type":"export_html","outputPath":"out.html"}"#,
    r#"{"type":"get_fork_messages"}"#,
    r#"{"type":"get_entries","since":"e1"}"#,
    r#"{"type":"get_tree"}"#,
    r#"{"type":"get_last_assistant_text"}"#,
    r#"{"type":"set_session_name","name":"n"}"#,
    r#"{"type":"get_commands"}"#,
    r#"{"type":"extension_ui_response","id":"d1","confirmed":true}"#,
    r#"{"type":"extension_ui_response","id":"d2","value":"B"}"#,
    r#"{"type":"extension_ui_response","id":"d3","cancelled":true}"#,
    r#"{"type":"extension_ui_response","id":"d4","value":"always","confirmed":true}"#,
    r#"{"type":"get_permissions"}"#,
    r#"{"type":"set_permission_mode","mode":"accept-edits"}"#,
    r#"{"type":"rewind","entryId":"e1","restore":"files"}"#,
    r#"{"type":"rewind","entryId":"e1"}"#,
    r#"{"type":"rewind_undo"}"#,
    r#"{"type":"get_checkpoints"}"#,
    r#"{"type":"rewind_preview","entryId":"e1"}"#,
    r#"{"type":"get_jobs"}"#,
    r#"{"type":"read_job","jobId":2,"since":10,"max":4096}"#,
    r#"{"type":"read_job","jobId":2}"#,
    r#"{"type":"kill_job","jobId":1}"#,
    r#"{"type":"write_job","jobId":1,"data":"q\r"}"#,
    r#"{"type":"resize_job","jobId":1,"cols":80,"rows":24}"#,
];

fn decode(line: &str) -> Result<Command, ParamError> {
    let req = parse_line(line.as_bytes()).unwrap();
    Command::decode(&req).expect("a known command")
}

use crate::wire::rpc::ParamError;

#[test]
fn every_command_decodes_from_its_line_and_encodes_back_to_it() {
    let mut seen = std::collections::HashSet::new();
    for line in LINES {
        let want: Value = serde_json::from_str(line).unwrap();
        let command = decode(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(serde_json::to_value(&command).unwrap(), want, "{line}");
        // serde's own decoding agrees with the host's field-by-field one.
        assert_eq!(serde_json::from_value::<Command>(want).unwrap(), command);
        // What a client sends in this process decodes to the same command.
        assert_eq!(decode_request(&command.to_request()), command, "{line}");
        assert_eq!(command.name().as_str(), want_type(line));
        seen.insert(command.name());
    }
    let missing: Vec<_> = CommandName::ALL
        .iter()
        .filter(|c| !seen.contains(c))
        .collect();
    assert!(missing.is_empty(), "no line for {missing:?}");
}

fn want_type(line: &str) -> String {
    let v: Value = serde_json::from_str(line).unwrap();
    v.get("type").and_then(Value::as_str).unwrap().to_string()
}

/// A request built in code: a dialog answer's `id` is a field there (the host's dialog path
/// moves it to the request's id).
fn decode_request(req: &Request) -> Command {
    let mut req = req.clone();
    if let Some(Value::String(id)) = req.fields().get("id") {
        req.id = Some(crate::wire::rpc::Id::string(id));
    }
    Command::decode(&req).unwrap().unwrap()
}

/// The commands of `pi-protocol.md` §4.4's table, as written there.
const PI_COMMANDS: &[&str] = &[
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "clear_queue",
    "new_session",
    "get_state",
    "get_messages",
    "set_model",
    "cycle_model",
    "get_available_models",
    "set_thinking_level",
    "cycle_thinking_level",
    "get_available_thinking_levels",
    "set_steering_mode",
    "set_follow_up_mode",
    "compact",
    "set_auto_compaction",
    "set_auto_retry",
    "abort_retry",
    "bash",
    "abort_bash",
    "get_session_stats",
    "export_html",
    "switch_session",
    "fork",
    "clone",
    "get_fork_messages",
    "get_entries",
    "get_tree",
    "get_last_assistant_text",
    "set_session_name",
    "get_commands",
    // §4.5: the dialog answer.
    "extension_ui_response",
    // keel's additions: the permission policy.
    "get_permissions",
    "set_permission_mode",
];

#[test]
fn every_documented_pi_command_has_a_variant() {
    for word in PI_COMMANDS {
        let name = CommandName::parse(word).unwrap_or_else(|| panic!("no variant for {word}"));
        assert_eq!(name.as_str(), *word);
    }
    // keel's own additions (DESIGN §16), beside pi's.
    const KEEL_COMMANDS: &[&str] = &[
        "rewind",
        "rewind_undo",
        "get_checkpoints",
        "rewind_preview",
        "get_jobs",
        "read_job",
        "kill_job",
        "write_job",
        "resize_job",
    ];
    for word in KEEL_COMMANDS {
        assert!(CommandName::parse(word).is_some(), "no variant for {word}");
    }
    assert_eq!(
        CommandName::ALL.len(),
        PI_COMMANDS.len() + KEEL_COMMANDS.len(),
        "a variant pi lacks"
    );
    assert_eq!(CommandName::parse("bogus_cmd"), None);
}

#[test]
fn decoding_keeps_pis_error_texts_and_order() {
    let cases = [
        (
            r#"{"type":"prompt","images":5}"#,
            ParamErrorKind::Missing,
            "prompt: field `message` is missing (a string)",
        ),
        (
            r#"{"type":"prompt","message":"x","images":5,"streamingBehavior":"now"}"#,
            ParamErrorKind::WrongType,
            "prompt: field `images` must be an array of images, got a number",
        ),
        (
            r#"{"type":"prompt","message":"x","streamingBehavior":"now"}"#,
            ParamErrorKind::NotAllowed,
            "prompt: field `streamingBehavior` must be one of \"steer\", \"followUp\", got \"now\"",
        ),
        (
            r#"{"modelId":1,"type":"set_model"}"#,
            ParamErrorKind::Missing,
            "set_model: field `provider` is missing (a string)",
        ),
        (
            r#"{"type":"set_thinking_level","level":null}"#,
            ParamErrorKind::Missing,
            "set_thinking_level: field `level` is missing (a string)",
        ),
        (
            r#"{"type":"set_follow_up_mode"}"#,
            ParamErrorKind::Missing,
            "set_follow_up_mode: field `mode` is missing (a string)",
        ),
        (
            r#"{"type":"read_job","since":-1}"#,
            ParamErrorKind::Missing,
            "read_job: field `jobId` is missing (a job id: a whole number)",
        ),
        (
            r#"{"type":"read_job","jobId":"1"}"#,
            ParamErrorKind::WrongType,
            "read_job: field `jobId` must be a whole number, got a string",
        ),
        (
            r#"{"type":"read_job","jobId":1,"since":-1}"#,
            ParamErrorKind::WrongType,
            "read_job: field `since` must be a whole number, got -1",
        ),
        (
            r#"{"type":"resize_job","jobId":1,"cols":0,"rows":24}"#,
            ParamErrorKind::NotAllowed,
            "resize_job: field `cols` must be from 1 to 65535, got 0",
        ),
        (
            r#"{"type":"resize_job","jobId":1,"cols":80,"rows":70000}"#,
            ParamErrorKind::NotAllowed,
            "resize_job: field `rows` must be at most 65535, got 70000",
        ),
        (
            r#"{"type":"bash","command":"ls","excludeFromContext":"yes"}"#,
            ParamErrorKind::WrongType,
            "bash: field `excludeFromContext` must be true or false, got a string",
        ),
    ];
    for (line, kind, message) in cases {
        let e = decode(line).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (kind, message), "{line}");
    }
    // Unknown fields are ignored; a dialog answer never fails (unusable fields are absent).
    let c = decode(r#"{"type":"get_state","extra":[1]}"#).unwrap();
    assert_eq!(c, Command::GetState {});
    let c = decode(r#"{"id":7,"type":"extension_ui_response","confirmed":"yes"}"#).unwrap();
    let none = Command::ExtensionUiResponse {
        id: None,
        value: None,
        confirmed: None,
        cancelled: None,
    };
    assert_eq!(c, none);
    let unknown = parse_line(br#"{"type":"bogus"}"#).unwrap();
    assert!(Command::decode(&unknown).is_none());
}

#[test]
fn answers_read_into_their_data_types() {
    let p: PromptData = serde_json::from_value(json!({"disposition": "started"})).unwrap();
    assert_eq!(p.disposition, data::Disposition::Started);
    let fork: SessionChangeData =
        serde_json::from_value(json!({"text": "t", "cancelled": false})).unwrap();
    assert_eq!(
        serde_json::to_string(&fork).unwrap(),
        r#"{"text":"t","cancelled":false}"#
    );
    let state = json!({"thinkingLevel":"off","isStreaming":false,"isCompacting":false,
        "steeringMode":"one-at-a-time","followUpMode":"all","sessionId":"s",
        "autoCompactionEnabled":true,"autoRetryEnabled":true,"messageCount":2,
        "pendingMessageCount":0});
    let s: State = serde_json::from_value(state.clone()).unwrap();
    assert_eq!(s.follow_up_mode, DeliveryMode::All);
    assert_eq!(serde_json::to_value(&s).unwrap(), state);
}

#[test]
fn read_job_data_decodes_what_the_host_encodes() {
    for plain in [
        &b""[..],
        b"f",
        b"fo",
        b"foo",
        b"foob",
        b"fooba",
        b"foobar",
        &[0xFB, 0xFF, 0xBF, 0],
    ] {
        let encoded = data::encode_base64(plain);
        assert_eq!(
            data::decode_base64(&encoded).as_deref(),
            Some(plain),
            "{encoded}"
        );
    }
    assert_eq!(data::encode_base64(b"foobar"), "Zm9vYmFy");
    assert_eq!(data::encode_base64(&[0xFB, 0xFF, 0xBF]), "+/+/");
    for bad in ["Zg", "Zg=", "Z===", "Zg==Zg==", "Zm9v!A==", "=AAA"] {
        assert_eq!(data::decode_base64(bad), None, "{bad}");
    }
}
