//! The `data` of pi's success responses, one struct per shape (`pi-protocol.md` §4.4): the
//! host builds them, clients read answers into them. Field order is the order pi writes (and
//! keel's `preserve_order` JSON keeps); optional fields are left out where pi leaves them out.
//! Commands whose data is a kernel type use it directly: `set_model` a
//! [`ModelInfo`], `compact` a [`CompactionResult`](crate::kernel::event::CompactionResult).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DeliveryMode;
use crate::kernel::jobs::{JobChunk, JobId, JobInfo};
use crate::kernel::message::Message;
use crate::kernel::provider::model::ModelInfo;

/// What happened to a `prompt`/`steer`/`follow_up` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Disposition {
    /// A run started with it.
    Started,
    /// It waits in a queue.
    Queued,
    /// Something else consumed it (pi's extension commands; keel never answers this).
    Handled,
}

/// `prompt`, `steer`, `follow_up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptData {
    pub disposition: Disposition,
}

/// `clear_queue`: the texts removed from each queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClearQueueData {
    pub steering: Vec<String>,
    pub follow_up: Vec<String>,
}

/// `new_session`, `switch_session`, `fork`, `clone`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionChangeData {
    /// `fork`: the text of the user message forked before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Always false in keel (pi: an extension cancelled the change).
    pub cancelled: bool,
}

/// `get_state` (pi's `RpcSessionState`, plus `autoRetryEnabled`), and an attach snapshot's
/// `state`. Read leniently: a field that is absent reads as its default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct State {
    /// The current model (pi leaves it out when none is selected; keel always has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    pub thinking_level: String,
    /// A run is active.
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: DeliveryMode,
    pub follow_up_mode: DeliveryMode,
    /// Absent for a session that is not saved (`--no-session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    /// Absent while the session has no name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    pub auto_compaction_enabled: bool,
    pub auto_retry_enabled: bool,
    /// Messages in the model context.
    pub message_count: u64,
    /// Queued steering and follow-up messages.
    pub pending_message_count: u64,
    /// keel: the task list `todo_write` last wrote (restored on resume; absent while empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub todos: Vec<crate::kernel::tool::todo::TodoItem>,
}

/// `get_messages`: the model context, compaction-aware.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessagesData {
    pub messages: Vec<Message>,
}

/// `cycle_model` (or `null`: nothing to cycle to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleModelData {
    pub model: ModelInfo,
    pub thinking_level: String,
    /// Always false in keel (pi: cycling within `--models`).
    pub is_scoped: bool,
}

/// `get_available_models`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelsData {
    pub models: Vec<ModelInfo>,
}

/// `cycle_thinking_level` (or `null`: the model has one level).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelData {
    /// The level now set.
    pub level: String,
}

/// `get_available_thinking_levels`, weakest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelsData {
    pub levels: Vec<String>,
}

/// `bash` (pi's `BashResult`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashData {
    /// The output tail within the caps.
    pub output: String,
    /// `null` when the command was killed, timed out or could not start.
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub truncated: bool,
    /// Where all of the output is, when truncated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
}

/// `get_session_stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    /// Absent for a session that is not saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_file: Option<String>,
    pub session_id: String,
    pub user_messages: u64,
    pub assistant_messages: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub total_messages: u64,
    /// Summed over the session's assistant messages and its subagents' (`task` results).
    pub tokens: TokenStats,
    /// USD, summed over the session's assistant messages and its subagents' (`task` results).
    pub cost: f64,
    pub context_usage: ContextUsage,
    /// Milliseconds since this session was opened in its host (keel's field; wall time).
    #[serde(default)]
    pub duration_ms: u64,
    /// Milliseconds the model took to answer, summed over the assistant messages (keel's
    /// field; API time).
    #[serde(default)]
    pub api_duration_ms: u64,
    /// Lines the `edit` and `write` tools added (keel's field; a write counts the lines it
    /// wrote, an edit its diff's).
    #[serde(default)]
    pub lines_added: u64,
    /// Lines the `edit` tool removed (keel's field).
    #[serde(default)]
    pub lines_removed: u64,
}

/// Token counts of [`SessionStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenStats {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// How full the model's context window is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    /// Estimated tokens of the current context.
    pub tokens: u64,
    pub context_window: u64,
    /// `tokens` as a percentage of `context_window` (a float).
    pub percent: f64,
}

/// `export_html`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportData {
    /// The file written.
    pub path: String,
}

/// `get_fork_messages`: every user message, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkMessagesData {
    pub messages: Vec<ForkMessage>,
}

/// A user message `fork` can start from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkMessage {
    pub entry_id: String,
    pub text: String,
}

/// `get_entries`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntriesData {
    /// Session entries as stored (header excluded), in append order.
    pub entries: Vec<Value>,
    /// The active leaf; `null` for an empty session.
    pub leaf_id: Option<String>,
}

/// `get_last_assistant_text`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextData {
    /// `null` when there is no assistant text.
    pub text: Option<String>,
}

/// `get_commands`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandsData {
    pub commands: Vec<CommandInfo>,
}

/// A prompt template or a skill, run as `/name` (a skill is listed twice: as `name`, unless a
/// template has the name, and as pi's `skill:name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    /// `prompt` or `skill` (pi also has `extension`).
    pub source: String,
    pub source_info: SourceInfo,
    /// keel's addition: a Claude command's `argument-hint` (`<name> [size]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
}

impl CommandInfo {
    /// Where it came from, for a menu: `keel user`, `claude project`, or with a Claude
    /// command's folders under its `commands` directory, `claude project:frontend`.
    pub fn origin(&self) -> String {
        let from = &self.source_info;
        let who = if from.source == "claude" {
            "claude"
        } else {
            "keel"
        };
        let folders = match (&from.base_dir, self.source.as_str()) {
            (Some(base), "prompt") if who == "claude" => {
                let path = std::path::Path::new(&from.path);
                let rel = path.parent().and_then(|d| d.strip_prefix(base).ok());
                let parts: Vec<String> = rel
                    .into_iter()
                    .flat_map(|r| r.components())
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                parts.join(":")
            }
            _ => String::new(),
        };
        match folders.is_empty() {
            true => format!("{who} {}", from.scope),
            false => format!("{who} {}:{folders}", from.scope),
        }
    }
}

/// Where a [`CommandInfo`] comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceInfo {
    /// Its file.
    pub path: String,
    /// `local` for keel's own directories, `claude` for Claude Code's (`.claude/commands`,
    /// `.claude/skills`, `~/.claude/...`).
    pub source: String,
    /// `user` or `project`.
    pub scope: String,
    /// `top-level` in keel.
    pub origin: String,
    /// The directory it was found in (`null` if none): a template's directory (a Claude
    /// command's: the `commands` directory, the namespace being the folders between), a
    /// skill's own directory.
    pub base_dir: Option<String>,
}

/// `get_permissions` and `set_permission_mode` (keel's additions): the session's permission
/// mode and the rules in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsData {
    /// `ask`, `accept-edits`, `plan`, `auto` or `read-only`.
    pub mode: String,
    /// The deny rules, then ask, then allow, each list in the order it is checked; the
    /// settings' first, then those "always" answers added in this session.
    pub rules: Vec<PermissionRule>,
}

/// One permission rule in force.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRule {
    /// `deny`, `ask` or `allow`.
    pub list: String,
    /// As written (`Bash(npm test:*)`).
    pub rule: String,
    /// Where it came from: a settings file, a flag, or an "always" answer.
    pub origin: String,
}

/// `get_checkpoints`' data (keel): the session's checkpoints, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointsData {
    pub checkpoints: Vec<crate::kernel::checkpoint::Listed>,
}

/// `rewind_preview`'s data (keel): what rewinding the files to a checkpoint would change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindPreviewData {
    /// The checkpoint entry that would be restored (`None`: the message has none, and a
    /// rewind would change no file).
    pub checkpoint: Option<String>,
    /// One per file the rewind would write or remove, sorted by path.
    pub files: Vec<crate::kernel::checkpoint::PreviewFile>,
}

/// `get_jobs`' data (keel): the session's background jobs, running and ended, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsData {
    pub jobs: Vec<JobInfo>,
}

/// `read_job`'s data (keel): a stretch of a job's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobReadData {
    /// The job.
    pub id: JobId,
    /// The offset of the first byte of `data`: past `since` when older bytes had left the
    /// job's ring (its log has them).
    pub from: u64,
    /// The offset to ask from next.
    pub next: u64,
    /// How many bytes after `since` were no longer held.
    pub dropped: u64,
    /// The bytes, base64 (standard alphabet, padded): a job writes bytes, not always text.
    pub data: String,
}

impl JobReadData {
    /// What job `id`'s table read.
    pub fn of(id: JobId, chunk: &JobChunk) -> JobReadData {
        JobReadData {
            id,
            from: chunk.from,
            next: chunk.next,
            dropped: chunk.dropped,
            data: encode_base64(&chunk.bytes),
        }
    }

    /// `data`'s bytes; `None` when it is not standard padded base64.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        decode_base64(&self.data)
    }
}

/// Standard padded base64 (RFC 4648).
pub fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Standard padded base64 (RFC 4648) back to bytes; `None` for anything else.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// `kill_job`'s data (keel): the job as it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobData {
    pub job: JobInfo,
}
