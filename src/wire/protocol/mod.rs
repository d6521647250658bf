//! The daemon's protocol v2 (`DESIGN.md` §10.3): what a client and the daemon's server say to
//! each other over the socket, declared once and used by both sides. Each method is a type
//! implementing [`Method`] (its name, params and result); the server decodes a request into
//! [`Request`] and matches it exhaustively; a client calls `Client::call::<M>` and gets
//! `M::Result`. Notifications from the daemon are [`Notification`]s. The serde names keep the
//! bytes of every message exactly as protocol v2 defines them (camelCase fields, optional
//! fields left out where the table says `?`). Pure data: nothing here does I/O.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use super::jsonrpc::{self as j, ErrorObject};

pub mod daemon;
pub mod notify;
pub mod schedule;
pub mod session;
pub mod snapshot;
pub mod spec;
pub mod table;

#[cfg(test)]
mod tests;

pub use notify::Notification;

/// The protocol the daemon speaks (`p1` in the socket name).
pub const PROTOCOL: u64 = 2;

/// One request/result pair of protocol v2, declared once: the server decodes `Params` and
/// answers `Result`; a client sends `Params` and reads `Result`.
pub trait Method {
    /// The JSON-RPC `method`.
    const NAME: &'static str;
    /// What the request's `params` hold.
    type Params: Serialize + DeserializeOwned;
    /// What the response's `result` holds.
    type Result: Serialize + DeserializeOwned;
}

/// Params of a method that takes none: sent as `{}`; anything received is accepted and
/// ignored (as the daemon always has for `ping`, `daemon/status` and `schedule/reload`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoParams;

impl Serialize for NoParams {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Empty {}.serialize(s)
    }
}

impl<'de> Deserialize<'de> for NoParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| NoParams)
    }
}

/// A result without fields: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `{sessionId}`: the params of a method about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRef {
    /// The session, by the id the client was last told (`session/replaced` changes it).
    pub session_id: String,
}

/// A pi RPC command sent as a protocol v2 request (`prompt`, `get_state`, …): pi's fields
/// without `type`, plus `sessionId`. Forwarded to the session as they came; the pi command
/// set is typed by the host, not here.
#[derive(Debug, Clone)]
pub struct PiCall {
    /// The command (the JSON-RPC `method`).
    pub command: String,
    /// The params as received (`None` when absent or `null`).
    pub params: Option<Box<RawValue>>,
}

/// Every request a client may send, decoded with its params: the server's one `match`.
#[derive(Debug)]
pub enum Request {
    /// `daemon/hello`.
    Hello(daemon::HelloParams),
    /// `ping`.
    Ping(NoParams),
    /// `daemon/status`.
    Status(NoParams),
    /// `daemon/stop`.
    Stop(daemon::StopParams),
    /// `session/open`.
    Open(Box<session::OpenParams>),
    /// `session/attach`.
    Attach(session::AttachParams),
    /// `session/detach`.
    Detach(SessionRef),
    /// `session/close`.
    Close(SessionRef),
    /// `session/list`.
    List(session::ListParams),
    /// `schedule/reload`.
    ScheduleReload(NoParams),
    /// `schedule/run`.
    ScheduleRun(schedule::RunParams),
    /// Any other method: a pi command if the host knows it, else -32601.
    Pi(PiCall),
}

impl Request {
    /// Decodes a request's params by its method. Bad params are -32602 naming the field
    /// ([`j::params`]); a method not declared here is a [`Request::Pi`].
    pub fn decode(method: &str, params: Option<&RawValue>) -> Result<Request, ErrorObject> {
        use self::daemon as d;
        use self::schedule as sc;
        use self::session as s;
        Ok(match method {
            d::Hello::NAME => Request::Hello(j::params(params)?),
            d::Ping::NAME => Request::Ping(j::params(params)?),
            d::Status::NAME => Request::Status(j::params(params)?),
            d::Stop::NAME => Request::Stop(j::params(params)?),
            s::Open::NAME => Request::Open(j::params(params)?),
            s::Attach::NAME => Request::Attach(j::params(params)?),
            s::Detach::NAME => Request::Detach(j::params(params)?),
            s::Close::NAME => Request::Close(j::params(params)?),
            s::List::NAME => Request::List(j::params(params)?),
            sc::Reload::NAME => Request::ScheduleReload(j::params(params)?),
            sc::Run::NAME => Request::ScheduleRun(j::params(params)?),
            // Served by the session's host as pi's `rewind` (params checked there).
            s::Rewind::NAME => Request::Pi(PiCall {
                command: "rewind".to_string(),
                params: params.map(ToOwned::to_owned),
            }),
            s::RewindUndo::NAME => Request::Pi(PiCall {
                command: "rewind_undo".to_string(),
                params: params.map(ToOwned::to_owned),
            }),
            command => Request::Pi(PiCall {
                command: command.to_string(),
                params: params.map(ToOwned::to_owned),
            }),
        })
    }
}
