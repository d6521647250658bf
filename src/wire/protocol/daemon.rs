//! Protocol v2's daemon methods: `daemon/hello` (first on every connection), `ping`,
//! `daemon/status` (the snapshot `keel daemon status` and `keel ps` show) and `daemon/stop`.

use serde::{Deserialize, Serialize};

use super::{Empty, Method, NoParams};

/// `daemon/hello`: the first request on every connection.
pub enum Hello {}
impl Method for Hello {
    const NAME: &'static str = "daemon/hello";
    type Params = HelloParams;
    type Result = HelloResult;
}

/// `daemon/hello`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloParams {
    /// The protocol the client speaks; the daemon closes the connection after -32010 when it
    /// is not [`super::PROTOCOL`].
    pub protocol_version: u64,
    /// Who the client is (logged by the daemon).
    pub client: ClientInfo,
    /// Whether this client may answer dialogs (`extension_ui_response`); default false.
    #[serde(default)]
    pub interactive: bool,
}

/// A client's name and version, as it says them in hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    /// The client program (`keel`).
    pub name: String,
    /// Its version.
    pub version: String,
}

/// `daemon/hello`'s result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelloResult {
    /// The protocol the daemon speaks.
    pub protocol_version: u64,
    /// About the daemon process.
    pub daemon: DaemonInfo,
}

/// The daemon process, as hello describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonInfo {
    /// The daemon's keel version (a client warns when it differs from its own).
    pub version: String,
    /// Its process id.
    pub pid: u32,
    /// When it started (ISO 8601).
    pub started_at: String,
    /// Its `KEEL_HOME`.
    pub keel_home: String,
    /// The socket it listens on.
    pub socket: String,
}

/// `ping`: `{}` → `{}`, a heartbeat.
pub enum Ping {}
impl Method for Ping {
    const NAME: &'static str = "ping";
    type Params = NoParams;
    type Result = Empty;
}

/// `daemon/status`: the daemon, its live sessions, its schedules and its journal.
pub enum Status {}
impl Method for Status {
    const NAME: &'static str = "daemon/status";
    type Params = NoParams;
    type Result = StatusResult;
}

/// `daemon/status`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// The daemon's keel version.
    pub version: String,
    /// Its process id.
    pub pid: u32,
    /// How long it has been running, in milliseconds.
    pub uptime_ms: u64,
    /// Connections open now, the one asking left out.
    pub clients: usize,
    /// The live sessions.
    pub sessions: Vec<LiveSession>,
    /// The scheduler's state.
    pub schedules: ScheduleStatus,
    /// The event journal's state; absent when the daemon runs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalStatus>,
}

/// One live session of the daemon, as `keel ps` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    /// The session id.
    pub session_id: String,
    /// Its directory.
    pub cwd: String,
    /// Its name (`session_info`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The start of its first prompt, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_prompt: Option<String>,
    /// Whether a run is going.
    pub state: RunState,
    /// Clients attached to it.
    pub clients: usize,
    /// Its stream's epoch.
    pub epoch: String,
    /// The last `seq` it published.
    pub seq: u64,
    /// How long it has been live in this daemon, in milliseconds.
    pub age_ms: u64,
    /// Its session file, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    /// The session that started it as a subagent (`task`), while that one is its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// The sandbox the model's commands run in (absent from a daemon that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<super::snapshot::SandboxState>,
    /// Its background jobs, running and ended, by id (left out when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<crate::kernel::jobs::JobInfo>,
    /// The git worktree it runs in (`-w`), its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// That worktree's branch (`keel/NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// Whether a session has a run going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// No run.
    Idle,
    /// A run is going.
    Running,
}

impl RunState {
    /// Its wire name (`idle`, `running`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Idle => "idle",
            RunState::Running => "running",
        }
    }
}

/// The scheduler's part of `daemon/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleStatus {
    /// Tasks in the schedule store.
    pub tasks: usize,
    /// Of those, the ones not paused.
    pub active: usize,
    /// The tasks with a run going, by name, sorted.
    pub running: Vec<String>,
    /// Why the store could not be read, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The event journal's part of `daemon/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalStatus {
    /// The NATS server, credentials redacted.
    pub url: String,
    /// The host name the journal publishes under.
    pub host: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// Records on disk not yet acknowledged.
    pub lag: u64,
    /// Records spooled since the daemon started.
    pub spooled: u64,
    /// Records acknowledged since the daemon started.
    pub published: u64,
    /// Records dropped unacknowledged because the spool was full.
    pub dropped: u64,
    /// Bytes of the spool on disk.
    pub spool_bytes: u64,
    /// The last publishing error, if any (`null` when none).
    pub last_error: Option<String>,
}

/// `daemon/stop`: `{}` then the daemon exits (refused while a run is active unless forced).
pub enum Stop {}
impl Method for Stop {
    const NAME: &'static str = "daemon/stop";
    type Params = StopParams;
    type Result = Empty;
}

/// `daemon/stop`'s params.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopParams {
    /// Stop even with runs going (they are aborted).
    #[serde(default)]
    pub force: bool,
}
