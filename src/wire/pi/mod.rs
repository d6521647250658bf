//! The pi command set (`pi-protocol.md` §4.4), declared once: [`CommandName`] (the `type`
//! words), [`Command`] (one variant per command with its typed fields) and, in `data`, the
//! typed `data` of each command's success response. The host decodes a request line into a
//! [`Command`] (`decode`: pi's field order and error texts) and matches it exhaustively;
//! clients build a [`Command`] and read the answer into the struct its [`CommandName`] names.
//! The serde names keep every byte as pi writes it (snake_case `type`, camelCase fields,
//! optional fields left out when absent). Unknown fields are ignored, as pi ignores them.
//! Pure data: nothing here does I/O.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rpc::Request;
use crate::kernel::jobs::JobId;
use crate::kernel::message::Content;

pub mod data;
mod decode;
#[cfg(test)]
mod tests;

/// Declares [`CommandName`] from one table: variant and wire word, in pi's order.
macro_rules! command_names {
    ($($variant:ident = $word:literal,)*) => {
        /// The `type` of a pi command, without its fields.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum CommandName {
            $(#[doc = concat!("`", $word, "`")] $variant,)*
        }

        impl CommandName {
            /// Every command the host serves, in `pi-protocol.md` §4.4's order.
            pub const ALL: &'static [CommandName] = &[$(CommandName::$variant,)*];

            /// The `type` word.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(CommandName::$variant => $word,)*
                }
            }
        }
    };
}

command_names! {
    Prompt = "prompt",
    Steer = "steer",
    FollowUp = "follow_up",
    Abort = "abort",
    ClearQueue = "clear_queue",
    NewSession = "new_session",
    SwitchSession = "switch_session",
    Fork = "fork",
    Clone = "clone",
    GetState = "get_state",
    GetMessages = "get_messages",
    SetModel = "set_model",
    CycleModel = "cycle_model",
    GetAvailableModels = "get_available_models",
    SetThinkingLevel = "set_thinking_level",
    CycleThinkingLevel = "cycle_thinking_level",
    GetAvailableThinkingLevels = "get_available_thinking_levels",
    SetSteeringMode = "set_steering_mode",
    SetFollowUpMode = "set_follow_up_mode",
    Compact = "compact",
    SetAutoCompaction = "set_auto_compaction",
    SetAutoRetry = "set_auto_retry",
    AbortRetry = "abort_retry",
    Bash = "bash",
    AbortBash = "abort_bash",
    GetSessionStats = "get_session_stats",
    ExportHtml = "export_html",
    GetForkMessages = "get_fork_messages",
    GetEntries = "get_entries",
    GetTree = "get_tree",
    GetLastAssistantText = "get_last_assistant_text",
    SetSessionName = "set_session_name",
    GetCommands = "get_commands",
    ExtensionUiResponse = "extension_ui_response",
    GetPermissions = "get_permissions",
    SetPermissionMode = "set_permission_mode",
    Rewind = "rewind",
    RewindUndo = "rewind_undo",
    GetCheckpoints = "get_checkpoints",
    RewindPreview = "rewind_preview",
    GetJobs = "get_jobs",
    ReadJob = "read_job",
    KillJob = "kill_job",
    WriteJob = "write_job",
    ResizeJob = "resize_job",
}

impl CommandName {
    /// The command a `type` word names; `None` for a word that names none.
    pub fn parse(word: &str) -> Option<CommandName> {
        CommandName::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == word)
    }

    /// Whether the command adds entries to the session: refused while it cannot be saved
    /// (checked before its fields).
    pub fn changes_session(self) -> bool {
        use CommandName::*;
        match self {
            Prompt | Steer | FollowUp | SetModel | CycleModel | SetThinkingLevel
            | CycleThinkingLevel | Compact | Bash | SetSessionName => true,
            Abort
            | ClearQueue
            | NewSession
            | SwitchSession
            | Fork
            | Clone
            | GetState
            | GetMessages
            | GetAvailableModels
            | GetAvailableThinkingLevels
            | SetSteeringMode
            | SetFollowUpMode
            | SetAutoCompaction
            | SetAutoRetry
            | AbortRetry
            | AbortBash
            | GetSessionStats
            | ExportHtml
            | GetForkMessages
            | GetEntries
            | GetTree
            | GetLastAssistantText
            | GetCommands
            | ExtensionUiResponse
            | GetPermissions
            | SetPermissionMode
            | GetCheckpoints
            | RewindPreview
            | GetJobs
            | ReadJob
            | KillJob
            | WriteJob
            | ResizeJob => false,
            Rewind | RewindUndo => true,
        }
    }

    /// Whether the command replaces the served session (`new_session`, `switch_session`,
    /// `fork`, `clone`): while a run is active it aborts it and is served once it settled.
    pub fn replaces_session(self) -> bool {
        use CommandName::*;
        matches!(self, NewSession | SwitchSession | Fork | Clone)
    }
}

impl std::fmt::Display for CommandName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `new_session`'s `reason` (keel's field): why the conversation starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NewSessionReason {
    /// The user cleared the conversation (`/clear`).
    Clear,
}

/// `prompt`'s `streamingBehavior`: how a prompt sent during a run is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamingBehavior {
    /// Delivered at the next turn boundary of the active run.
    Steer,
    /// Delivered once the active run has ended.
    FollowUp,
}

/// `set_steering_mode`/`set_follow_up_mode`'s `mode`: how many queued messages a turn
/// boundary releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum DeliveryMode {
    /// `all`: every queued message at once.
    #[serde(rename = "all")]
    All,
    /// `one-at-a-time`: one message per boundary.
    #[serde(rename = "one-at-a-time")]
    #[default]
    OneAtATime,
}

/// One pi command (a request line without its `id`), with its typed fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Command {
    /// Starts a run with a user message (or queues it during a run, given
    /// `streamingBehavior`). Data: [`data::PromptData`].
    Prompt {
        /// The user message; `/skill:NAME`, `/template` and a skill's `/NAME` are expanded.
        message: String,
        /// pi `ImageContent` objects (`{type:"image", data, mimeType}`), only images.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Content>,
        /// How to queue the message when a run is active; absent: refused while busy.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        streaming_behavior: Option<StreamingBehavior>,
    },
    /// Queues a steering message. Data: [`data::PromptData`] (`queued`).
    Steer {
        /// The message.
        message: String,
        /// Images attached to it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Content>,
    },
    /// Queues a follow-up message. Data: [`data::PromptData`] (`queued`).
    FollowUp {
        /// The message.
        message: String,
        /// Images attached to it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Content>,
    },
    /// Stops the active run; answered once it settled. No data.
    Abort {},
    /// Empties both queues. Data: [`data::ClearQueueData`].
    ClearQueue {},
    /// Starts a new, empty session. Data: [`data::SessionChangeData`].
    NewSession {
        /// Recorded in the new header's `parentSession`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_session: Option<String>,
        /// Why the conversation starts over (keel's field): `clear` (the TUI's `/clear`) ends
        /// the old session's hooks with `SessionEnd` `reason: "clear"` and starts the new one's
        /// with `SessionStart` `source: "clear"`, as Claude Code's `/clear` does. Absent: a
        /// plain new session (`SessionStart` `source: "startup"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<NewSessionReason>,
    },
    /// Serves another session file. Data: [`data::SessionChangeData`].
    SwitchSession {
        /// A file path (relative to the cwd) or a session id.
        session_path: String,
    },
    /// A new session holding the path up to the parent of a user message. Data:
    /// [`data::SessionChangeData`] with the message's `text`.
    Fork {
        /// The user message entry to fork before.
        entry_id: String,
    },
    /// A new session holding the active branch. Data: [`data::SessionChangeData`].
    Clone {},
    /// Data: [`data::State`].
    GetState {},
    /// Data: [`data::MessagesData`].
    GetMessages {},
    /// Switches the model. Data: the new model ([`crate::kernel::provider::model::ModelInfo`]).
    SetModel {
        /// The provider's name.
        provider: String,
        /// The model's id at that provider.
        model_id: String,
    },
    /// Switches to the next available model. Data: [`data::CycleModelData`] or `null`.
    CycleModel {},
    /// Data: [`data::ModelsData`].
    GetAvailableModels {},
    /// Sets the thinking level (clamped to the model). No data.
    SetThinkingLevel {
        /// `off`, `minimal`, `low`, `medium`, `high`, `xhigh` or `max` (= `xhigh`).
        level: String,
    },
    /// The model's next thinking level. Data: [`data::LevelData`] or `null`.
    CycleThinkingLevel {},
    /// Data: [`data::LevelsData`].
    GetAvailableThinkingLevels {},
    /// No data.
    SetSteeringMode {
        /// How many steering messages a turn boundary releases.
        mode: DeliveryMode,
    },
    /// No data.
    SetFollowUpMode {
        /// How many follow-up messages a run's end releases.
        mode: DeliveryMode,
    },
    /// Summarizes the older part of the context. Data: pi's `CompactionResult`
    /// ([`crate::kernel::event::CompactionResult`]).
    Compact {
        /// Appended to the summary prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom_instructions: Option<String>,
    },
    /// No data.
    SetAutoCompaction {
        /// Compact when the context nears the model's window.
        enabled: bool,
    },
    /// No data.
    SetAutoRetry {
        /// Retry failed model calls.
        enabled: bool,
    },
    /// Cancels a scheduled retry. No data.
    AbortRetry {},
    /// Runs a shell command for the user; output streams as `bash_execution_update`. Data:
    /// [`data::BashData`].
    Bash {
        /// The command line.
        command: String,
        /// Keep the output out of the model's context.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exclude_from_context: Option<bool>,
    },
    /// Stops running shell commands. No data.
    AbortBash {},
    /// Data: [`data::SessionStats`].
    GetSessionStats {},
    /// Writes the session as HTML. Data: [`data::ExportData`].
    ExportHtml {
        /// Where (relative to the cwd); absent: a name in the cwd.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_path: Option<String>,
    },
    /// Data: [`data::ForkMessagesData`].
    GetForkMessages {},
    /// Data: [`data::EntriesData`].
    GetEntries {
        /// Only the entries after this one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
    },
    /// Data: `{tree, leafId}` (written as JSON text: trees can be deeper than a `Value`).
    GetTree {},
    /// Data: [`data::TextData`].
    GetLastAssistantText {},
    /// Names the session. No data.
    SetSessionName {
        /// The name (trimmed; empty is refused).
        name: String,
    },
    /// Data: [`data::CommandsData`].
    GetCommands {},
    /// Answers a dialog (`extension_ui_request`); gets no response line.
    ExtensionUiResponse {
        /// The dialog's id (on a request line, its `id`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// A `select`/`input`/`editor` answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// A `confirm` answer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirmed: Option<bool>,
        /// The dialog was dismissed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cancelled: Option<bool>,
    },
    /// keel's addition. Data: [`data::PermissionsData`].
    GetPermissions {},
    /// keel's addition: the permission mode for the calls to come. Data:
    /// [`data::PermissionsData`].
    SetPermissionMode {
        /// `ask`, `accept-edits`, `auto` or `read-only` (or Claude's `default`, `acceptEdits`,
        /// `bypassPermissions`).
        mode: String,
    },
    /// keel: rewinds the files, the conversation or both to before a user message (DESIGN
    /// §16); refused while a run is active. Data: [`crate::kernel::checkpoint::Rewound`].
    Rewind {
        /// The user message entry (or a checkpoint entry) to rewind to before.
        entry_id: String,
        /// `both` (absent), `conversation` or `files`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restore: Option<crate::kernel::checkpoint::Restore>,
    },
    /// keel: undoes the session's last rewind (its files and conversation as they were
    /// before it); refused while a run is active. Data: [`crate::kernel::checkpoint::Rewound`].
    RewindUndo {},
    /// keel: the session's checkpoints. Data: [`data::CheckpointsData`].
    GetCheckpoints {},
    /// keel: what a rewind of the files to before `entry_id` (a user message or a
    /// checkpoint) would change. Data: [`data::RewindPreviewData`].
    RewindPreview { entry_id: String },
    /// keel: the session's background jobs, running and ended, by id (DESIGN §19). Data:
    /// [`data::JobsData`].
    GetJobs {},
    /// keel: what job `jobId` wrote from byte offset `since` (absent: 0) on, at most `max`
    /// bytes (absent: all the ring holds). A client that comes back asks from the `next` it
    /// last saw and gets exactly what it missed. Data: [`data::JobReadData`].
    ReadJob {
        /// The job (its `id` in [`crate::kernel::jobs::JobInfo`]; a request's `id` is its own).
        job_id: JobId,
        /// The offset to read from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<u64>,
        /// At most this many bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
    /// keel: ends job `jobId`'s whole tree (TERM, then KILL after a grace period); answered
    /// once it ended. Data: [`data::JobData`].
    KillJob {
        /// The job.
        job_id: JobId,
    },
    /// keel: types `data` into terminal job `jobId` (a job on pipes takes no input: refused).
    /// No data.
    WriteJob {
        /// The job.
        job_id: JobId,
        /// The text typed, as is (`"\r"` is Enter, `"\u0003"` Ctrl-C).
        data: String,
    },
    /// keel: sets terminal job `jobId`'s size (its program gets `SIGWINCH`). No data.
    ResizeJob {
        /// The job.
        job_id: JobId,
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
}

impl Command {
    /// The command's `type`.
    pub fn name(&self) -> CommandName {
        use CommandName as N;
        match self {
            Command::Prompt { .. } => N::Prompt,
            Command::Steer { .. } => N::Steer,
            Command::FollowUp { .. } => N::FollowUp,
            Command::Abort {} => N::Abort,
            Command::ClearQueue {} => N::ClearQueue,
            Command::NewSession { .. } => N::NewSession,
            Command::SwitchSession { .. } => N::SwitchSession,
            Command::Fork { .. } => N::Fork,
            Command::Clone {} => N::Clone,
            Command::GetState {} => N::GetState,
            Command::GetMessages {} => N::GetMessages,
            Command::SetModel { .. } => N::SetModel,
            Command::CycleModel {} => N::CycleModel,
            Command::GetAvailableModels {} => N::GetAvailableModels,
            Command::SetThinkingLevel { .. } => N::SetThinkingLevel,
            Command::CycleThinkingLevel {} => N::CycleThinkingLevel,
            Command::GetAvailableThinkingLevels {} => N::GetAvailableThinkingLevels,
            Command::SetSteeringMode { .. } => N::SetSteeringMode,
            Command::SetFollowUpMode { .. } => N::SetFollowUpMode,
            Command::Compact { .. } => N::Compact,
            Command::SetAutoCompaction { .. } => N::SetAutoCompaction,
            Command::SetAutoRetry { .. } => N::SetAutoRetry,
            Command::AbortRetry {} => N::AbortRetry,
            Command::Bash { .. } => N::Bash,
            Command::AbortBash {} => N::AbortBash,
            Command::GetSessionStats {} => N::GetSessionStats,
            Command::ExportHtml { .. } => N::ExportHtml,
            Command::GetForkMessages {} => N::GetForkMessages,
            Command::GetEntries { .. } => N::GetEntries,
            Command::GetTree {} => N::GetTree,
            Command::GetLastAssistantText {} => N::GetLastAssistantText,
            Command::SetSessionName { .. } => N::SetSessionName,
            Command::GetCommands {} => N::GetCommands,
            Command::ExtensionUiResponse { .. } => N::ExtensionUiResponse,
            Command::GetPermissions {} => N::GetPermissions,
            Command::SetPermissionMode { .. } => N::SetPermissionMode,
            Command::Rewind { .. } => N::Rewind,
            Command::RewindUndo {} => N::RewindUndo,
            Command::GetCheckpoints {} => N::GetCheckpoints,
            Command::RewindPreview { .. } => N::RewindPreview,
            Command::GetJobs {} => N::GetJobs,
            Command::ReadJob { .. } => N::ReadJob,
            Command::KillJob { .. } => N::KillJob,
            Command::WriteJob { .. } => N::WriteJob,
            Command::ResizeJob { .. } => N::ResizeJob,
        }
    }

    /// The command's fields without `type`, as a client sends them (`Commands::request`
    /// takes the name and these). An `extension_ui_response` keeps its dialog `id` here.
    pub fn fields(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(mut m)) => {
                m.remove("type");
                m
            }
            _ => Map::new(),
        }
    }

    /// The command as a request (no `id`), as the host receives it in this process.
    pub fn to_request(&self) -> Request {
        Request::new(self.name().as_str(), Value::Object(self.fields()))
    }
}
