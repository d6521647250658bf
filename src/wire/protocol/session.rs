//! Protocol v2's session methods: `session/open` (start or find a session), `session/attach`
//! and `session/detach` (follow its stream on this connection), `session/close` (end it when
//! nothing else uses it) and `session/list` (the saved sessions of a directory).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Empty, Method, SessionRef};
use crate::kernel::session::SessionSummary;

/// `session/open`: starts the session the spec describes in that directory, as a client
/// started there would, or returns the live one the spec picks.
pub enum Open {}
impl Method for Open {
    const NAME: &'static str = "session/open";
    type Params = OpenParams;
    type Result = OpenResult;
}

/// `session/open`'s params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenParams {
    /// The session's directory (absolute, on the daemon's host).
    pub cwd: PathBuf,
    /// What the session is opened with.
    #[serde(default)]
    pub spec: super::spec::SessionSpec,
    /// The client's environment (laid over the daemon's; its tools run in it). Empty: the
    /// daemon's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables the session may read a provider key from (the spec's `apiKey` names one)
    /// but its tools never see: a remote client sends these without its environment. Never
    /// stored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, String>,
    /// A tool call that needs approval is blocked at once, as in a print run (no dialog).
    #[serde(default)]
    pub headless: bool,
}

/// `session/open`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenResult {
    /// The session's id.
    pub session_id: String,
    /// Its stream's epoch (`null` if the session ended at once).
    pub epoch: Option<String>,
    /// The last `seq` it published.
    pub seq: u64,
    /// False: the spec picked a session the daemon already held.
    pub created: bool,
    /// Startup warnings, and the spec's fields not applied to a session found live.
    pub warnings: Vec<String>,
    /// The session header (JSON mode's first line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<SessionHeader>,
    /// The session file, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    /// The latest run of the session, if one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
}

/// The header of an opened session, as JSON mode prints it first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The session format version (3).
    pub version: u32,
    /// The session id.
    pub id: String,
    /// When the session was created (ISO 8601).
    pub timestamp: String,
    /// The session's directory.
    pub cwd: String,
    /// The session it was forked from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    /// keel's: the git worktree the session runs in (`-w`), its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// keel's: that worktree's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// Where the latest run of a session is in its stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    /// The `seq` of its `agent_start`.
    pub seq: u64,
    /// Its `agent_settled` wire event once it settled, else `null`.
    pub settled: Option<Value>,
}

/// `session/attach`: follow a session's stream on this connection, from a cursor if given.
pub enum Attach {}
impl Method for Attach {
    const NAME: &'static str = "session/attach";
    type Params = AttachParams;
    type Result = AttachResult;
}

/// `session/attach`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachParams {
    /// The session.
    pub session_id: String,
    /// Where the client's copy of the stream ends; without one, a snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// A point of a session's stream: `{epoch, seq}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The stream's epoch.
    pub epoch: String,
    /// The last `seq` the client has.
    pub seq: u64,
}

/// `session/attach`'s result (`DESIGN.md` §10.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachResult {
    /// A replay of what followed the cursor, or a snapshot.
    pub mode: AttachMode,
    /// The stream's epoch.
    pub epoch: String,
    /// The last `seq` the replay or snapshot covers; live events follow from `seq + 1`.
    pub seq: u64,
    /// With `mode: snapshot`, the materialised state as of `seq` (built by the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Box<super::snapshot::Snapshot>>,
}

/// How an attach starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    /// The events after the cursor follow.
    Replay,
    /// A snapshot of the state is in the result.
    Snapshot,
}

/// `session/detach`: stop following a session on this connection.
pub enum Detach {}
impl Method for Detach {
    const NAME: &'static str = "session/detach";
    type Params = SessionRef;
    type Result = Empty;
}

/// `session/close`: end a live session nothing else uses (no run, no other client).
pub enum Close {}
impl Method for Close {
    const NAME: &'static str = "session/close";
    type Params = SessionRef;
    type Result = Empty;
}

/// `session/rewind` (DESIGN §16): rewind a live session's files, conversation or both to
/// before one of its user messages; served by the session's host (pi's `rewind` with
/// `sessionId`), refused while a run is active.
pub enum Rewind {}
impl Method for Rewind {
    const NAME: &'static str = "session/rewind";
    type Params = RewindParams;
    type Result = crate::kernel::checkpoint::Rewound;
}

/// `session/rewind`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindParams {
    pub session_id: String,
    /// The user message (or checkpoint) entry to rewind to before.
    pub entry_id: String,
    /// `both` (absent), `conversation` or `files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<crate::kernel::checkpoint::Restore>,
}

/// `session/rewind_undo` (DESIGN §16): undo a live session's last rewind; served by the
/// session's host (pi's `rewind_undo` with `sessionId`), refused while a run is active.
pub enum RewindUndo {}
impl Method for RewindUndo {
    const NAME: &'static str = "session/rewind_undo";
    type Params = RewindUndoParams;
    type Result = crate::kernel::checkpoint::Rewound;
}

/// `session/rewind_undo`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindUndoParams {
    pub session_id: String,
}

/// `session/list`: the saved sessions of a directory and of every directory.
pub enum List {}
impl Method for List {
    const NAME: &'static str = "session/list";
    type Params = ListParams;
    type Result = ListResult;
}

/// `session/list`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListParams {
    /// The directory whose sessions come first.
    pub cwd: PathBuf,
}

/// `session/list`'s result, newest first, as the TUI's picker shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListResult {
    /// The sessions of `cwd`.
    pub here: Vec<SessionSummary>,
    /// The sessions of every directory.
    pub all: Vec<SessionSummary>,
}
