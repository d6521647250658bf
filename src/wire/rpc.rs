//! RPC mode's envelope (`pi-protocol.md` §4.2): one request object per input line, one
//! `response` object per request. Pure: parsing a line and building response lines; the RPC
//! front end does the I/O. Field access goes through [`Request`] so that every missing or
//! mistyped field gets an error that names it.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use std::borrow::Cow;

use super::events::{DialogSubagent, NotifyType, ShownArgs, UiMethod, UiRequest, WireEvent};
use crate::kernel::message::Content;
use crate::kernel::tool::preview::Preview;

/// A request `id` exactly as the client wrote it: any JSON value (pi clients send strings),
/// echoed byte for byte. The same type as JSON-RPC's, which restricts the kinds.
pub use super::jsonrpc::Id;

/// One decoded request line.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed in the response exactly as received.
    pub id: Option<Id>,
    /// The `type` field.
    pub command: String,
    fields: Map<String, Value>,
}

/// Why a line is not a request; `id` and `command` are echoed when they could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Option<Id>,
    /// `parse` when the line is not a JSON object.
    pub command: Option<String>,
    pub error: String,
}

/// Decodes one input line (without its LF).
pub fn parse_line(line: &[u8]) -> Result<Request, Rejected> {
    let parse_error = |error: String| Rejected {
        id: None,
        command: Some("parse".into()),
        error,
    };
    let top: Top = match serde_json::from_slice(line) {
        Ok(t) => t,
        Err(e) => {
            let why = match std::str::from_utf8(line) {
                Err(u) => format!(
                    "the line is not valid UTF-8 (invalid byte at offset {})",
                    u.valid_up_to()
                ),
                Ok(s) if s.trim().is_empty() => "the line is empty".to_string(),
                Ok(_) => e.to_string(),
            };
            return Err(parse_error(format!("Failed to parse command: {why}")));
        }
    };
    let (id, mut fields) = match top {
        Top::Object(id, fields) => (id, fields),
        Top::Other(kind) => {
            return Err(parse_error(format!(
                "Failed to parse command: expected a JSON object, got {kind}"
            )))
        }
    };
    match fields.remove("type") {
        Some(Value::String(command)) => Ok(Request {
            id,
            command,
            fields,
        }),
        Some(other) => Err(Rejected {
            id,
            command: None,
            error: format!(
                "field `type` must be a string naming the command, got {}",
                kind_of(&other)
            ),
        }),
        None => Err(Rejected {
            id,
            command: None,
            error: "field `type` is missing: it names the command (e.g. \"prompt\")".into(),
        }),
    }
}

/// A line's top-level value, read in one pass: for an object, the `id` as raw text and every
/// other field as a value; for anything else, only its kind.
enum Top {
    Object(Option<Id>, Map<String, Value>),
    Other(&'static str),
}

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut id = None;
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "id" {
                id = Some(Id::from_raw(map.next_value::<&RawValue>()?));
            } else {
                fields.insert(key, map.next_value::<Value>()?);
            }
        }
        Ok(Top::Object(id, fields))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::Other("an array"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top, E> {
        Ok(Top::Other("null"))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other("a string"))
    }
}

/// What is wrong with a request's field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamErrorKind {
    /// A required field is absent or null.
    Missing,
    /// The field has another JSON type than the one asked for.
    WrongType,
    /// A string field holds a value outside its allowed set.
    NotAllowed,
    /// An `images` entry is not a pi `ImageContent` object.
    BadImage,
}

/// A request field that cannot be used: its kind, and pi's error text naming the command and
/// the field (the text a client reads in the response's `error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    pub kind: ParamErrorKind,
    pub message: String,
}

impl ParamError {
    fn new(kind: ParamErrorKind, message: String) -> Self {
        ParamError { kind, message }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParamError {}

/// A JSON value's kind, for error messages.
pub fn kind_of(v: &Value) -> &'static str {
    crate::kernel::tool::args::json_kind(v)
}

impl Request {
    /// A request built in code (tests, embedders).
    pub fn new(command: &str, fields: Value) -> Request {
        Request {
            id: None,
            command: command.to_string(),
            fields: match fields {
                Value::Object(m) => m,
                _ => Map::new(),
            },
        }
    }

    /// The request's fields other than `type` and `id`.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    fn wrong(&self, key: &str, want: &str, got: &Value) -> ParamError {
        let message = format!(
            "{}: field `{key}` must be {want}, got {}",
            self.command,
            kind_of(got)
        );
        ParamError::new(ParamErrorKind::WrongType, message)
    }

    fn missing(&self, key: &str, want: &str) -> ParamError {
        let message = format!("{}: field `{key}` is missing ({want})", self.command);
        ParamError::new(ParamErrorKind::Missing, message)
    }

    /// A required string field.
    pub fn str(&self, key: &str) -> Result<&str, ParamError> {
        match self.fields.get(key) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(self.missing(key, "a string")),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    /// An optional string field (absent or null is `None`).
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ParamError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    /// A required boolean field.
    pub fn bool(&self, key: &str) -> Result<bool, ParamError> {
        match self.fields.get(key) {
            Some(Value::Bool(b)) => Ok(*b),
            None | Some(Value::Null) => Err(self.missing(key, "true or false")),
            Some(v) => Err(self.wrong(key, "true or false", v)),
        }
    }

    /// An optional boolean field.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ParamError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "true or false", v)),
        }
    }

    /// A string field that must be one of `allowed`.
    pub fn choice(&self, key: &str, allowed: &[&str]) -> Result<Option<String>, ParamError> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(s) if allowed.contains(&s) => Ok(Some(s.to_string())),
            Some(s) => {
                let allowed: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
                let message = format!(
                    "{}: field `{key}` must be one of {}, got {s:?}",
                    self.command,
                    allowed.join(", ")
                );
                Err(ParamError::new(ParamErrorKind::NotAllowed, message))
            }
        }
    }

    /// `images`: pi `ImageContent` objects (`{type:"image", data, mimeType}`).
    pub fn images(&self) -> Result<Vec<Content>, ParamError> {
        let list = match self.fields.get("images") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(v) => return Err(self.wrong("images", "an array of images", v)),
        };
        /// The fields of an image this reads (`type` is not checked).
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Image {
            data: String,
            mime_type: String,
        }
        list.iter()
            .enumerate()
            .map(|(i, v)| {
                let image = v.is_object().then(|| Image::deserialize(v).ok()).flatten();
                match image {
                    Some(Image { data, mime_type }) if mime_type.starts_with("image/") => {
                        Ok(Content::Image { data, mime_type })
                    }
                    _ => Err(ParamError::new(ParamErrorKind::BadImage, format!(
                        "{}: images[{i}] must be {{\"type\":\"image\",\"data\":<base64>,\"mimeType\":\"image/...\"}}",
                        self.command
                    ))),
                }
            })
            .collect()
    }
}

/// `{"id":<id as received>, …body}` without a newline (`id` first, as pi writes it).
fn with_id(id: Option<&Id>, body: Map<String, Value>) -> String {
    let text = Value::Object(body).to_string();
    match (id, text.strip_prefix('{')) {
        (Some(id), Some(rest)) if rest != "}" => format!("{{\"id\":{},{rest}", id.text()),
        (Some(id), _) => format!("{{\"id\":{}}}", id.text()),
        (None, _) => text,
    }
}

fn envelope(command: Option<&str>, success: bool) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("response"));
    if let Some(c) = command {
        m.insert("command".into(), json!(c));
    }
    m.insert("success".into(), json!(success));
    m
}

/// `{"id"?, "type":"response", "command", "success":true, "data"?}` and a newline. `data` is
/// left out when `None` (pi leaves it out for commands without a payload).
pub fn ok_line(id: Option<&Id>, command: &str, data: Option<Value>) -> String {
    let mut m = envelope(Some(command), true);
    if let Some(d) = data {
        m.insert("data".into(), d);
    }
    let mut s = with_id(id, m);
    s.push('\n');
    s
}

/// Like [`ok_line`], with `data` given as JSON text (for payloads too deep to hold as a
/// `Value`). The caller guarantees `data` is one valid JSON value.
pub fn ok_raw_line(id: Option<&Id>, command: &str, data: &str) -> String {
    let mut s = with_id(id, envelope(Some(command), true));
    s.pop(); // the closing brace; `data` is the last key
    s.push_str(",\"data\":");
    s.push_str(data);
    s.push_str("}\n");
    s
}

/// `{"id"?, "type":"response", "command"?, "success":false, "error"}` and a newline.
pub fn error_line(id: Option<&Id>, command: Option<&str>, error: &str) -> String {
    let mut m = envelope(command, false);
    m.insert("error".into(), json!(error));
    let mut s = with_id(id, m);
    s.push('\n');
    s
}

/// The response to a line that was not a request.
pub fn rejected_line(r: &Rejected) -> String {
    error_line(r.id.as_ref(), r.command.as_deref(), &r.error)
}

/// `{"type":"bash_execution_update","id"?,"delta"}`: output of the RPC `bash` request `id`.
pub fn bash_update_line(id: Option<&Id>, delta: &str) -> String {
    let id = id.map(|id| format!("\"id\":{},", id.text()));
    format!(
        "{{\"type\":\"bash_execution_update\",{}\"delta\":{}}}\n",
        id.unwrap_or_default(),
        json!(delta)
    )
}

/// A dialog line: the `extension_ui_request` event and a newline.
fn dialog_line(request: UiRequest<'_>) -> String {
    let mut s = serde_json::to_string(&WireEvent::ExtensionUiRequest(request)).unwrap_or_default();
    s.push('\n');
    s
}

/// A `confirm` dialog (`extension_ui_request`); `timeout_ms` tells the client when keel
/// gives up and denies.
pub fn confirm_line(id: &str, title: &str, message: &str, timeout_ms: u64) -> String {
    dialog_line(UiRequest {
        title: Some(title.into()),
        message: message.into(),
        timeout: Some(timeout_ms),
        ..UiRequest::new(id, UiMethod::Confirm)
    })
}

/// The `confirm` dialog for a tool call waiting for approval (`--permission ask`): `id` is the
/// tool call id, `message` a one-line summary (a bash command, `write path`, or the arguments
/// as JSON), `timeout` (when given) says when keel gives up and denies. keel's additions:
/// `toolName`, `args` and `preview` (see [`UiRequest`]).
pub fn approval_line(
    call_id: &str,
    tool_name: &str,
    args: &Value,
    preview: Option<&Preview>,
    timeout_ms: Option<u64>,
) -> String {
    dialog_line(approval_request(
        call_id, tool_name, args, preview, timeout_ms,
    ))
}

/// A subagent's approval as its parent's clients see it: [`approval_line`] under the parent's
/// dialog `id`, with `subagent` naming the child (its session, agent type, description, the
/// parent's `task` call and the dialog's id in the child's session).
pub fn subagent_approval_line(
    id: &str,
    tool_name: &str,
    args: &Value,
    preview: Option<&Preview>,
    (timeout_ms, child): (Option<u64>, DialogSubagent),
) -> String {
    dialog_line(UiRequest {
        subagent: Some(child),
        ..approval_request(id, tool_name, args, preview, timeout_ms)
    })
}

/// `dialog_resolved {id}`: dialog `id` (a subagent's, relayed) is no longer open.
pub fn dialog_resolved_line(id: &str) -> String {
    let mut s =
        serde_json::to_string(&WireEvent::DialogResolved { id: id.into() }).unwrap_or_default();
    s.push('\n');
    s
}

/// `session_ended {reason}`: the session takes no more prompts (`subagent_finished`).
pub fn session_ended_line(reason: &str) -> String {
    let mut s = serde_json::to_string(&WireEvent::SessionEnded {
        reason: reason.into(),
    })
    .unwrap_or_default();
    s.push('\n');
    s
}

fn approval_request<'a>(
    call_id: &'a str,
    tool_name: &'a str,
    args: &'a Value,
    preview: Option<&'a Preview>,
    timeout_ms: Option<u64>,
) -> UiRequest<'a> {
    let shown = ShownArgs::of(args);
    let message = match (tool_name, shown.command) {
        ("bash", Some(cmd)) => cmd,
        ("exit_plan_mode", _) => shown.plan.unwrap_or_default(),
        _ => match shown.path {
            Some(p) => format!("{tool_name} {p}"),
            None => args.to_string(),
        },
    };
    let (title, message) = approval_words(tool_name, args, message);
    UiRequest {
        title: Some(title.into()),
        message: message.into(),
        timeout: timeout_ms,
        tool_name: Some(tool_name.into()),
        args: Some(Cow::Borrowed(args)),
        preview: preview.map(Cow::Borrowed),
        ..UiRequest::new(call_id, UiMethod::Confirm)
    }
}

/// The title and message of an approval dialog: a `bash` call that asks to leave the sandbox
/// says so and shows its justification.
pub fn approval_words(tool_name: &str, args: &Value, message: String) -> (String, String) {
    use crate::kernel::tool::bash::Escalation;
    match (tool_name, Escalation::of(args)) {
        ("bash", Some(e)) => (
            "Run `bash` outside the sandbox?".to_string(),
            format!(
                "{}\nJustification: {}",
                e.command,
                e.justification.as_deref().unwrap_or("(none given)")
            ),
        ),
        // Plan mode (§17): `confirmed:true` approves (with `value:"accept-edits"`, edits run
        // without asking from then on); anything else keeps planning.
        ("exit_plan_mode", _) => ("Approve the plan and leave plan mode?".to_string(), message),
        _ => (format!("Allow tool `{tool_name}`?"), message),
    }
}

/// A `notify` message (`extension_ui_request` without a reply).
pub fn notify_line(id: &str, message: &str, level: NotifyType) -> String {
    dialog_line(UiRequest {
        message: message.into(),
        notify_type: Some(level),
        ..UiRequest::new(id, UiMethod::Notify)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn id(text: &str) -> Id {
        Id::from_raw(&RawValue::from_string(text.to_string()).unwrap())
    }

    /// Regression: ids went through `Value`, so `98765432109876543210` came back as
    /// `9.876543210987654e+19`. Every id is echoed as its source text, in every kind of line.
    #[test]
    fn ids_are_echoed_exactly_as_received() {
        let ids = [
            "98765432109876543210",
            "12345678901234567890",
            "123456789012345678901234567890",
            "-9223372036854775809",
            "1.5",
            "1.50",
            "1e2",
            "-0",
            "\"p1\"",
            "\"\\u0041\\n\"",
            "null",
            "true",
            "[1,{\"a\":2.0}]",
        ];
        for text in ids {
            let line = format!(r#"{{"id": {text} ,"type":"get_state"}}"#);
            let r = parse_line(line.as_bytes()).unwrap();
            let got = r.id.clone().unwrap();
            assert_eq!(got.text(), text);
            let want = format!("{{\"id\":{text},\"type\":\"response\"");
            assert!(ok_line(r.id.as_ref(), "get_state", None).starts_with(&want));
            assert!(error_line(r.id.as_ref(), Some("x"), "e").starts_with(&want));
            assert!(ok_raw_line(r.id.as_ref(), "get_tree", "[]").starts_with(&want));
            let update = bash_update_line(r.id.as_ref(), "out");
            assert!(update.contains(&format!(",\"id\":{text},")), "{update}");
            serde_json::from_str::<Value>(&update).unwrap();
            // Not a request (no `type`): the id is still echoed as written.
            let rejected = parse_line(format!(r#"{{"id":{text}}}"#).as_bytes()).unwrap_err();
            assert!(rejected_line(&rejected).starts_with(&format!("{{\"id\":{text},")));
        }
        assert_eq!(id("\"a\\u0062\"").as_string().as_deref(), Some("ab"));
        assert_eq!(id("7").as_string(), None);
    }

    #[test]
    fn requests_and_their_fields() {
        let r = parse_line(br#"{"id":"a","type":"prompt","message":"hi","n":1}"#).unwrap();
        assert_eq!(r.id, Some(id("\"a\"")));
        assert_eq!(r.command, "prompt");
        assert_eq!(r.str("message").unwrap(), "hi");
        assert_eq!(
            r.str("n").unwrap_err(),
            ParamError {
                kind: ParamErrorKind::WrongType,
                message: "prompt: field `n` must be a string, got a number".into()
            }
        );
        assert_eq!(
            r.str("other").unwrap_err(),
            ParamError {
                kind: ParamErrorKind::Missing,
                message: "prompt: field `other` is missing (a string)".into()
            }
        );
        assert_eq!(r.opt_bool("x").unwrap(), None);
        let e = r.bool("message").unwrap_err();
        assert_eq!(e.kind, ParamErrorKind::WrongType, "{e}");
        assert_eq!(r.bool("x").unwrap_err().kind, ParamErrorKind::Missing);
        let r = parse_line(br#"{"type":"set_steering_mode","mode":"some"}"#).unwrap();
        let e = r.choice("mode", &["all", "one-at-a-time"]).unwrap_err();
        assert!(e.message.contains("\"all\", \"one-at-a-time\""), "{e}");
        assert_eq!(e.kind, ParamErrorKind::NotAllowed);
    }

    #[test]
    fn lines_that_are_not_requests() {
        let e = parse_line(b"this is not json").unwrap_err();
        assert_eq!(e.command.as_deref(), Some("parse"));
        assert!(
            e.error.starts_with("Failed to parse command: "),
            "{}",
            e.error
        );
        let e = parse_line(b"[1,2]").unwrap_err();
        assert!(e.error.contains("expected a JSON object, got an array"));
        let e = parse_line(b"\"x\xff\"").unwrap_err();
        assert!(e.error.contains("not valid UTF-8"), "{}", e.error);
        let e = parse_line(b"").unwrap_err();
        assert!(e.error.contains("empty"));
        let e = parse_line(br#"{"id":7}"#).unwrap_err();
        assert_eq!((e.id, e.command), (Some(id("7")), None));
        let e = parse_line(br#"{"id":"q","type":5}"#).unwrap_err();
        assert!(e.error.contains("must be a string"));
    }

    #[test]
    fn envelopes_keep_pi_key_order() {
        assert_eq!(
            ok_line(Some(&id("\"r1\"")), "abort", None),
            "{\"id\":\"r1\",\"type\":\"response\",\"command\":\"abort\",\"success\":true}\n"
        );
        assert_eq!(
            ok_line(None, "cycle_model", Some(Value::Null)),
            "{\"type\":\"response\",\"command\":\"cycle_model\",\"success\":true,\"data\":null}\n"
        );
        assert_eq!(
            error_line(None, Some("parse"), "bad"),
            "{\"type\":\"response\",\"command\":\"parse\",\"success\":false,\"error\":\"bad\"}\n"
        );
        let raw = ok_raw_line(Some(&id("1")), "get_tree", "{\"tree\":[]}");
        assert_eq!(
            serde_json::from_str::<Value>(&raw).unwrap(),
            json!({"id":1,"type":"response","command":"get_tree","success":true,"data":{"tree":[]}})
        );
        assert!(raw.ends_with("}\n"));
        // U+2028 stays raw: it is data, not a line break.
        assert!(ok_line(None, "x", Some(json!("a\u{2028}b"))).contains('\u{2028}'));
    }

    #[test]
    fn approval_dialogs_carry_the_call() {
        let args = json!({"command": "rm -rf build"});
        let line = approval_line("call_1", "bash", &args, None, Some(1000));
        assert_eq!(
            line,
            "{\"type\":\"extension_ui_request\",\"id\":\"call_1\",\"method\":\"confirm\",\"title\":\"Allow tool `bash`?\",\"message\":\"rm -rf build\",\"timeout\":1000,\"toolName\":\"bash\",\"args\":{\"command\":\"rm -rf build\"}}\n"
        );
        let v: Value = serde_json::from_str(&approval_line(
            "c",
            "write",
            &json!({"path": "a.txt"}),
            None,
            None,
        ))
        .unwrap();
        assert_eq!(v["message"], "write a.txt");
        assert!(v.get("timeout").is_none(), "no timeout when none applies");
        let v: Value =
            serde_json::from_str(&approval_line("c", "x", &json!({"n": 1}), None, None)).unwrap();
        assert_eq!(v["message"], "{\"n\":1}");
    }

    #[test]
    fn images_are_checked() {
        let r = Request::new(
            "prompt",
            json!({"images":[{"type":"image","data":"AA==","mimeType":"image/png"}]}),
        );
        assert_eq!(r.images().unwrap().len(), 1);
        let r = Request::new("prompt", json!({"images":[{"data":"AA=="}]}));
        let e = r.images().unwrap_err();
        assert!(e.message.contains("images[0]"), "{e}");
        assert_eq!(e.kind, ParamErrorKind::BadImage);
        let e = Request::new("prompt", json!({"images": 1}))
            .images()
            .unwrap_err();
        assert_eq!(e.kind, ParamErrorKind::WrongType);
        // An array is no image, though serde would read one field by field.
        let r = Request::new("prompt", json!({"images":[["AA==", "image/png"]]}));
        assert_eq!(r.images().unwrap_err().kind, ParamErrorKind::BadImage);
    }
}
