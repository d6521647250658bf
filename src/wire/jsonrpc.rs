//! JSON-RPC 2.0 over newline-delimited JSON, the peer shared by the daemon protocol and ACP:
//! what one input line is ([`Incoming`], with the error response already decided for a bad
//! one), the error codes, and the writers of output lines. Pure: no I/O and no knowledge of
//! any method; framing is [`super::jsonl::LineDecoder`]'s, so a CR before LF is dropped and a
//! line is capped at [`MAX_LINE_BYTES`].
//!
//! The rules for input:
//!
//! * One line is one message: a request (`id` present), a notification (no `id`) or a
//!   response (`result` or `error`, no `method`). `jsonrpc` must be `"2.0"`.
//! * Not UTF-8, not JSON, or empty: -32700 with id `null`.
//! * JSON that is not a message (no or wrong `jsonrpc`, a `method` that is not a string,
//!   `params` that are not an object or an array, an `id` that is an object, an array or a
//!   boolean, a member given twice, `method` together with `result`/`error`, both `result`
//!   and `error`, a malformed `error` object): -32600, with the id echoed when it could be
//!   read and null otherwise. A bad *response* is answered with id `null`, because its id
//!   belongs to this side's requests, not to the peer's.
//! * A batch (a JSON array, `[]` included) gets one -32600 with id `null`: batches are not
//!   supported.
//! * A line over the cap gets -32600 with id `null`, naming the cap (it was never parsed, but
//!   -32700 is for text that is not JSON, and such a line is refused for its size alone).
//! * `"params": null` is taken as no params. Other members are ignored.
//! * Ids are kept as their source text: `12345678901234567890`, `1.50` and `"\u0041"` are
//!   echoed byte for byte.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::jsonl::Frame;
pub use super::jsonl::MAX_LINE_BYTES;

mod typed;

pub use typed::params;

/// Invalid JSON: not UTF-8, not JSON, or an empty line. Always sent with id `null`.
pub const PARSE_ERROR: i64 = -32700;
/// Valid JSON that is not a JSON-RPC 2.0 message, a batch, or a line over the cap.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist (for a request; an unknown notification is ignored).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The params do not fit the method; the message names the field (see [`params`]).
pub const INVALID_PARAMS: i64 = -32602;
/// A bug on this side (a result that could not be encoded, a handler that failed).
pub const INTERNAL_ERROR: i64 = -32603;
/// Daemon: a pi command failed; the message is pi's error text.
pub const COMMAND_FAILED: i64 = -32000;
/// Daemon: `daemon/hello` asked for a protocol version the daemon does not speak. The daemon
/// closes the connection after sending it.
pub const VERSION_MISMATCH: i64 = -32010;
/// Daemon: the first request on a connection was not `daemon/hello`. The daemon closes the
/// connection after sending it.
pub const HELLO_FIRST: i64 = -32011;
/// Daemon: no live session has that `sessionId`.
pub const UNKNOWN_SESSION: i64 = -32012;
/// Daemon: the session cannot take this now (e.g. a second writer).
pub const SESSION_BUSY: i64 = -32013;
/// Daemon: the dialog or request was answered already.
pub const ALREADY_ANSWERED: i64 = -32014;
/// Daemon: the client runs inside a keel sandbox, and the daemon takes no request from inside
/// one. The daemon closes the connection after sending it.
pub const SANDBOXED_PEER: i64 = -32015;
/// ACP: the request was cancelled (`session/cancel`, `$/cancel_request`) before it finished.
pub const REQUEST_CANCELLED: i64 = -32800;
/// ACP: a resource (a file, or an unknown session) does not exist.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A message `id` exactly as the peer wrote it, kept as its source text so that it is echoed
/// byte for byte: `98765432109876543210`, `1.50`, `1e2` and `"\u0041"` come back as written,
/// never re-encoded through a float or a string. Two ids are equal when their texts are.
///
/// JSON-RPC allows strings, numbers and null ([`parse_line`] refuses other kinds); pi's RPC
/// mode (`wire::rpc`) keeps any JSON value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Id(Box<str>);

impl Id {
    /// The id of a value read from the input (its text has no surrounding whitespace).
    pub(crate) fn from_raw(raw: &RawValue) -> Id {
        Id(raw.get().into())
    }

    /// The id's JSON text as received (no surrounding whitespace).
    pub fn text(&self) -> &str {
        &self.0
    }

    /// A string id made in code.
    pub fn string(s: &str) -> Id {
        Id(Value::from(s).to_string().into())
    }

    /// The id's value when it is a JSON string.
    pub fn as_string(&self) -> Option<String> {
        serde_json::from_str(&self.0).ok()
    }
}

/// A numeric id, for requests this side sends.
impl From<u64> for Id {
    fn from(n: u64) -> Id {
        Id(n.to_string().into())
    }
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct ErrorObject {
    /// One of the codes above, or another integer.
    pub code: i64,
    /// One sentence for humans.
    pub message: String,
    /// Anything else worth sending; left out when `None` (`"data":null` reads as `None`).
    #[serde(default)]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error without `data`.
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// The error response to send for a line that is not a valid message.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id to echo; `None` is sent as `null` (it could not be read, or must not be echoed).
    pub id: Option<Id>,
    pub error: ErrorObject,
}

impl ErrorResponse {
    /// The response as one output line.
    pub fn line(&self) -> String {
        error_object_line(self.id.as_ref(), &self.error)
    }
}

/// What one input line is.
#[derive(Debug, Clone)]
pub enum Incoming {
    /// A call that must get exactly one response with this `id`.
    Request {
        id: Id,
        method: String,
        /// An object or an array as received; `None` when absent or `null`.
        params: Option<Box<RawValue>>,
    },
    /// A call without `id`: it never gets a response, not even an error.
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// The answer to a request this side sent (ACP: the agent asks the client).
    Response {
        id: Id,
        result: Result<Box<RawValue>, ErrorObject>,
    },
    /// Not a valid message: send this back (see the module docs for which code when).
    Invalid(ErrorResponse),
}

/// Decodes one framed record; `cap` is the decoder's line cap, named in the error for
/// [`Frame::TooLong`].
pub fn parse_frame(frame: &Frame, cap: usize) -> Incoming {
    match frame {
        Frame::Line(line) => parse_line(line),
        Frame::TooLong { bytes } => Incoming::Invalid(too_long(*bytes, cap)),
    }
}

/// The error for a line of `bytes` content bytes, over the cap of `cap`.
pub fn too_long(bytes: usize, cap: usize) -> ErrorResponse {
    invalid_error(
        None,
        format!(
            "the line is {bytes} bytes, over the cap of {cap} bytes ({}); it was not read",
            human_size(cap)
        ),
    )
}

fn human_size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// Decodes one input line (without its LF; a CR before it already dropped).
pub fn parse_line(line: &[u8]) -> Incoming {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return parse_error(format!(
                "the line is not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ))
        }
    };
    if text
        .bytes()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return parse_error("the line is empty".into());
    }
    match serde_json::from_str::<Top>(text) {
        Err(e) => parse_error(e.to_string()),
        Ok(Top::Batch) => invalid(
            None,
            "batches (JSON arrays) are not supported; send one message per line".into(),
        ),
        Ok(Top::Other(kind)) => invalid(None, format!("expected a JSON object, got {kind}")),
        Ok(Top::Object(members)) => classify(members),
    }
}

fn parse_error(why: String) -> Incoming {
    Incoming::Invalid(ErrorResponse {
        id: None,
        error: ErrorObject::new(PARSE_ERROR, format!("Parse error: {why}")),
    })
}

fn invalid_error(id: Option<Id>, why: String) -> ErrorResponse {
    ErrorResponse {
        id,
        error: ErrorObject::new(INVALID_REQUEST, format!("Invalid request: {why}")),
    }
}

fn invalid(id: Option<Id>, why: String) -> Incoming {
    Incoming::Invalid(invalid_error(id, why))
}

/// The kind of a JSON value, from its first byte (raw values have no leading whitespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    String,
    Number,
    Object,
    Array,
    Bool,
    Null,
}

impl Kind {
    fn of(raw: &RawValue) -> Kind {
        match raw.get().as_bytes().first() {
            Some(b'"') => Kind::String,
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') => Kind::Null,
            _ => Kind::Number,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Object => "an object",
            Kind::Array => "an array",
            Kind::Bool => "a boolean",
            Kind::Null => "null",
        }
    }
}

/// Turns the members of one object into a message, or the error to send back.
fn classify(m: Members<'_>) -> Incoming {
    let id = match m.id.map(|raw| (raw, Kind::of(raw))) {
        None => None,
        Some((raw, Kind::String | Kind::Number | Kind::Null)) => Some(Id::from_raw(raw)),
        Some((_, kind)) => {
            return invalid(
                None,
                format!(
                    "`id` must be a string, a number or null, got {}",
                    kind.name()
                ),
            )
        }
    };
    let is_response = m.method.is_none() && (m.result.is_some() || m.error.is_some());
    // A response's id names one of this side's requests: echoing it would answer a request of
    // the peer's that happens to have the same id.
    let echo = match m.duplicate {
        Some("id") => None,
        _ if is_response => None,
        _ => id.clone(),
    };
    if let Some(name) = m.duplicate {
        return invalid(echo, format!("member `{name}` appears more than once"));
    }
    match m.jsonrpc {
        None => {
            return invalid(
                echo,
                "member `jsonrpc` is missing; it must be \"2.0\"".into(),
            )
        }
        Some(v) if is_version_2(v) => {}
        Some(v) => return invalid(echo, format!("`jsonrpc` must be \"2.0\", got {}", shown(v))),
    }
    if let Some(method) = m.method {
        if m.result.is_some() || m.error.is_some() {
            return invalid(
                echo,
                "a message with `method` cannot also have `result` or `error`".into(),
            );
        }
        return call(id, method, m.params);
    }
    response(id, m.result, m.error)
}

/// A message without `method`: a response, if it has exactly one of `result` and `error`.
fn response(id: Option<Id>, result: Option<&RawValue>, error: Option<&RawValue>) -> Incoming {
    let result = match (result, error) {
        (Some(_), Some(_)) => {
            return invalid(
                None,
                "a response cannot have both `result` and `error`".into(),
            )
        }
        (Some(result), None) => Ok(result.to_owned()),
        (None, Some(error)) => match error_object(error) {
            Ok(e) => Err(e),
            Err(why) => return invalid(None, why),
        },
        // Not a response at all, so the id is the peer's and is echoed.
        (None, None) => {
            return invalid(
                id,
                "the object has no `method` (a request or notification) and no `result` or \
                 `error` (a response)"
                    .into(),
            )
        }
    };
    match id {
        Some(id) => Incoming::Response { id, result },
        None => invalid(None, "a response must have an `id`".into()),
    }
}

/// A request or notification whose envelope is valid so far.
fn call(id: Option<Id>, method: &RawValue, params: Option<&RawValue>) -> Incoming {
    let method = match Kind::of(method) {
        Kind::String => match serde_json::from_str::<String>(method.get()) {
            Ok(m) => m,
            Err(e) => return invalid(id, format!("`method` could not be read: {e}")),
        },
        kind => {
            return invalid(
                id,
                format!("`method` must be a string, got {}", kind.name()),
            )
        }
    };
    let params = match params.map(|p| (p, Kind::of(p))) {
        None | Some((_, Kind::Null)) => None,
        Some((p, Kind::Object | Kind::Array)) => Some(p.to_owned()),
        Some((_, kind)) => {
            return invalid(
                id,
                format!(
                    "`params` must be an object or an array, got {}",
                    kind.name()
                ),
            )
        }
    };
    match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    }
}

fn is_version_2(v: &RawValue) -> bool {
    v.get() == "\"2.0\""
        || (Kind::of(v) == Kind::String
            && serde_json::from_str::<String>(v.get()).is_ok_and(|s| s == "2.0"))
}

/// A value for an error message: its text when short, else its kind.
fn shown(v: &RawValue) -> String {
    const SHOWN: usize = 40;
    if v.get().len() <= SHOWN {
        v.get().to_string()
    } else {
        Kind::of(v).name().to_string()
    }
}

/// A response's `error` member, checked.
fn error_object(raw: &RawValue) -> Result<ErrorObject, String> {
    let want = "`error` must be an object with an integer `code` and a string `message`";
    if Kind::of(raw) != Kind::Object {
        return Err(format!("{want}, got {}", Kind::of(raw).name()));
    }
    serde_json::from_str(raw.get()).map_err(|e| format!("{want}: {}", typed::message_of(&e)))
}

/// A line's top-level value, read in one pass.
enum Top<'a> {
    Object(Members<'a>),
    Batch,
    /// Any other JSON value; its kind.
    Other(&'static str),
}

/// The members of a message object, as raw text borrowed from the line. Unknown members are
/// skipped without being decoded.
#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    /// The first member name seen twice.
    duplicate: Option<&'static str>,
}

/// A member name; anything not in JSON-RPC is `Other`.
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        d.deserialize_identifier(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "jsonrpc" => Key::Jsonrpc,
            "id" => Key::Id,
            "method" => Key::Method,
            "params" => Key::Params,
            "result" => Key::Result,
            "error" => Key::Error,
            _ => Key::Other,
        })
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Top<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Top<'a>, D::Error> {
        d.deserialize_any(TopVisitor(std::marker::PhantomData))
    }
}

struct TopVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TopVisitor<'a> {
    type Value = Top<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'a>, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<Key>()? {
            let (slot, name) = match key {
                Key::Jsonrpc => (&mut m.jsonrpc, "jsonrpc"),
                Key::Id => (&mut m.id, "id"),
                Key::Method => (&mut m.method, "method"),
                Key::Params => (&mut m.params, "params"),
                Key::Result => (&mut m.result, "result"),
                Key::Error => (&mut m.error, "error"),
                Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            let value = map.next_value::<&'de RawValue>()?;
            if slot.is_some() {
                m.duplicate.get_or_insert(name);
            } else {
                *slot = Some(value);
            }
        }
        Ok(Top::Object(m))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Top<'a>, A::Error> {
        // Read to the end, so that a batch that is not even JSON is a parse error.
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Top::Batch)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Top<'a>, E> {
        Ok(Top::Other("null"))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Top<'a>, E> {
        Ok(Top::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Top<'a>, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Top<'a>, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Top<'a>, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Top<'a>, E> {
        Ok(Top::Other("a string"))
    }
}

/// Every line starts with this: `"jsonrpc":"2.0"` first.
const HEAD: &str = "{\"jsonrpc\":\"2.0\",";

/// `{"jsonrpc":"2.0","id":…,"result":…}` and a newline. A result that cannot be encoded (a
/// map with non-string keys, a failing `Serialize`) becomes a -32603 error line for the same
/// id, so the request is still answered exactly once.
pub fn result_line(id: &Id, result: &impl Serialize) -> String {
    match serde_json::to_string(result) {
        Ok(json) => raw_result_line(id, &json),
        Err(e) => error_line(
            Some(id),
            INTERNAL_ERROR,
            &format!("Internal error: the result could not be encoded: {e}"),
            None,
        ),
    }
}

/// Like [`result_line`], with the result given as JSON text (for payloads already encoded, or
/// too deep to hold as a `Value`). The caller guarantees `json` is one valid JSON value; line
/// breaks in it (valid JSON can only hold them as whitespace) become spaces, so the output is
/// always one line.
pub fn raw_result_line(id: &Id, json: &str) -> String {
    let mut s = String::with_capacity(HEAD.len() + id.text().len() + json.len() + 16);
    s.push_str(HEAD);
    s.push_str("\"id\":");
    s.push_str(id.text());
    s.push_str(",\"result\":");
    push_one_line(&mut s, json);
    s.push_str("}\n");
    s
}

/// `{"jsonrpc":"2.0","id":…|null,"error":{"code","message","data"?}}` and a newline.
pub fn error_line(id: Option<&Id>, code: i64, message: &str, data: Option<Value>) -> String {
    push_error_line(id, code, message, data.as_ref())
}

/// [`error_line`] for an [`ErrorObject`] (e.g. from [`params`]).
pub fn error_object_line(id: Option<&Id>, error: &ErrorObject) -> String {
    push_error_line(id, error.code, &error.message, error.data.as_ref())
}

fn push_error_line(id: Option<&Id>, code: i64, message: &str, data: Option<&Value>) -> String {
    let mut s = String::from(HEAD);
    s.push_str("\"id\":");
    s.push_str(id.map_or("null", Id::text));
    s.push_str(",\"error\":{\"code\":");
    s.push_str(&code.to_string());
    s.push_str(",\"message\":");
    s.push_str(&Value::from(message).to_string());
    if let Some(data) = data {
        s.push_str(",\"data\":");
        s.push_str(&data.to_string());
    }
    s.push_str("}}\n");
    s
}

/// `{"jsonrpc":"2.0","method":…,"params":…}` and a newline; `params` is left out when it
/// encodes as `null` (pass `&()` for none). Fails only if `params` cannot be encoded.
pub fn notification_line(
    method: &str,
    params: &impl Serialize,
) -> Result<String, serde_json::Error> {
    call_line(None, method, params)
}

/// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` and a newline (the request this side
/// sends, e.g. ACP's `session/request_permission`); `params` as in [`notification_line`].
pub fn request_line(
    id: &Id,
    method: &str,
    params: &impl Serialize,
) -> Result<String, serde_json::Error> {
    call_line(Some(id), method, params)
}

fn call_line(
    id: Option<&Id>,
    method: &str,
    params: &impl Serialize,
) -> Result<String, serde_json::Error> {
    let params = serde_json::to_string(params)?;
    let mut s = String::from(HEAD);
    if let Some(id) = id {
        s.push_str("\"id\":");
        s.push_str(id.text());
        s.push(',');
    }
    s.push_str("\"method\":");
    s.push_str(&Value::from(method).to_string());
    if params != "null" {
        s.push_str(",\"params\":");
        s.push_str(&params);
    }
    s.push_str("}\n");
    Ok(s)
}

/// Appends JSON text with any CR or LF (whitespace, in valid JSON) turned into a space.
fn push_one_line(s: &mut String, json: &str) {
    if json.contains(['\n', '\r']) {
        s.extend(
            json.chars()
                .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
        );
    } else {
        s.push_str(json);
    }
}

#[cfg(test)]
mod tests;
