//! What `keel web`'s page and its server say to each other besides the daemon's own protocol
//! (which the server relays as it is): the token traded for the cookie, and a message's text
//! rendered by the HTML export's renderer. Pure data.

use serde::{Deserialize, Serialize};

/// The header every state-changing request carries (`X-Keel: 1`): a page of another origin
/// cannot send it without a CORS preflight, which the server never grants.
pub const CUSTOM_HEADER: &str = "x-keel";

/// `POST /auth`'s body: the token the page read from its URL's fragment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthRequest {
    /// The 256-bit token, as 64 hex digits.
    pub token: String,
}

/// `POST /render`'s body: markdown text of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderRequest {
    /// The text to render (model text: it is escaped, never run).
    pub text: String,
}

/// `POST /render`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderResult {
    /// The HTML the export's renderer made of the text (sanitized: raw HTML shown as text,
    /// unsafe link targets dropped).
    pub html: String,
}

/// What `GET /events/SESSION` reads of a line the daemon wrote, to give a `session/event` its
/// SSE `id:` (`EPOCH/SEQ`); the line itself is sent as it is.
#[derive(Debug, Clone, Deserialize)]
pub struct EventHead {
    /// The notification's method (none for an answer).
    #[serde(default)]
    pub method: Option<String>,
    /// Its cursor, when it has one.
    #[serde(default)]
    pub params: Option<EventCursor>,
}

/// The cursor of a `session/event`'s params.
#[derive(Debug, Clone, Deserialize)]
pub struct EventCursor {
    pub epoch: String,
    pub seq: u64,
}
