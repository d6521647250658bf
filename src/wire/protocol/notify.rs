//! Protocol v2's notifications from the daemon (no id, no answer): `session/event`,
//! `session/replaced`, `daemon/lagged`, `daemon/shutdown` and `daemon/notice`. The server
//! writes `session/event` itself, byte for byte the same as [`SessionEvent`] serialized
//! (its hot path: the event line is copied in, never re-encoded).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::wire::jsonrpc as j;

/// One notification method: its name and params.
pub trait Notify {
    /// The JSON-RPC `method`.
    const NAME: &'static str;
    /// What its `params` hold.
    type Params: Serialize + DeserializeOwned;
}

/// `session/event`: an event of an attached session.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    /// The session, by its id now.
    pub session_id: String,
    /// The stream's epoch.
    pub epoch: String,
    /// The event's number: one more than the last one of this epoch.
    pub seq: u64,
    /// The JSON-mode / RPC-mode wire event, as its compact line.
    pub event: Box<RawValue>,
}
impl Notify for SessionEvent {
    const NAME: &'static str = "session/event";
    type Params = SessionEvent;
}

/// `session/replaced`: the session now serves another one (`new_session`, `fork`, …), or the
/// same one whose conversation a rewind moved (`new_session_id` equal to `session_id`); the
/// client's attachment follows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replaced {
    /// The id the client knew the session by.
    pub session_id: String,
    /// The id it goes by from here on.
    pub new_session_id: String,
    /// The new stream's epoch.
    pub epoch: String,
    /// The last `seq` of the new stream before its events follow.
    pub seq: u64,
}
impl Notify for Replaced {
    const NAME: &'static str = "session/replaced";
    type Params = Replaced;
}

/// `daemon/lagged`: the client's queue overflowed; the daemon closes the connection next and
/// the client attaches again with its cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lagged {
    /// The session that dropped the client, by its id now.
    pub session_id: String,
    /// The last `seq` the client was sent.
    pub seq: u64,
}
impl Notify for Lagged {
    const NAME: &'static str = "daemon/lagged";
    type Params = Lagged;
}

/// `daemon/shutdown`: the daemon exits next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shutdown {
    /// Why (`stopped`, `idle`, a signal, …).
    pub reason: String,
}
impl Notify for Shutdown {
    const NAME: &'static str = "daemon/shutdown";
    type Params = Shutdown;
}

/// `daemon/notice`: a daemon-wide message for the user, sent to every connection (a scheduled
/// run that failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// `warning`.
    pub level: String,
    /// The sentence to show.
    pub message: String,
    /// The scheduled task it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The session of that run, if it had one (`null` otherwise).
    #[serde(default)]
    pub session_id: Option<String>,
    /// How the run ended (`failed`, `blocked`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The run's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}
impl Notify for Notice {
    const NAME: &'static str = "daemon/notice";
    type Params = Notice;
}

/// Every notification the daemon sends.
#[derive(Debug, Clone)]
pub enum Notification {
    Event(SessionEvent),
    Replaced(Replaced),
    Lagged(Lagged),
    Shutdown(Shutdown),
    Notice(Notice),
}

impl Notification {
    /// The notification `method` with these `params`: `None` for a method not declared here
    /// (a client ignores those), `Err` for params that do not fit it.
    pub fn decode(
        method: &str,
        params: Option<&RawValue>,
    ) -> Option<Result<Notification, j::ErrorObject>> {
        fn typed<T: DeserializeOwned>(
            params: Option<&RawValue>,
            wrap: fn(T) -> Notification,
        ) -> Option<Result<Notification, j::ErrorObject>> {
            Some(j::params(params).map(wrap))
        }
        match method {
            SessionEvent::NAME => typed(params, Notification::Event),
            Replaced::NAME => typed(params, Notification::Replaced),
            Lagged::NAME => typed(params, Notification::Lagged),
            Shutdown::NAME => typed(params, Notification::Shutdown),
            Notice::NAME => typed(params, Notification::Notice),
            _ => None,
        }
    }

    /// Its method name.
    pub fn method(&self) -> &'static str {
        match self {
            Notification::Event(_) => SessionEvent::NAME,
            Notification::Replaced(_) => Replaced::NAME,
            Notification::Lagged(_) => Lagged::NAME,
            Notification::Shutdown(_) => Shutdown::NAME,
            Notification::Notice(_) => Notice::NAME,
        }
    }

    /// The notification as one output line (LF-terminated).
    pub fn line(&self) -> Result<String, serde_json::Error> {
        match self {
            Notification::Event(p) => j::notification_line(self.method(), p),
            Notification::Replaced(p) => j::notification_line(self.method(), p),
            Notification::Lagged(p) => j::notification_line(self.method(), p),
            Notification::Shutdown(p) => j::notification_line(self.method(), p),
            Notification::Notice(p) => j::notification_line(self.method(), p),
        }
    }
}
