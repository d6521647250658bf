//! One settings file: strict JSON into typed values. A file that is not a JSON object is an
//! error naming `file:line:col`; an unknown key or a value of the wrong type is a warning
//! naming the file and the key, and only that entry is skipped.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Error, ErrorKind, Origin};

/// A reasoning effort: the kernel's type, as the settings' `thinking` writes it.
pub use crate::kernel::agent::Thinking;

/// `notify`: how the TUI tells a user in another window that a run finished or waits for an
/// approval. Claude Code's `preferredNotifChannel` words are aliases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum NotifyChannel {
    /// The terminal bell, BEL (Claude: `terminal_bell`, `auto`).
    #[default]
    #[serde(rename = "bell", alias = "terminal_bell", alias = "auto")]
    Bell,
    /// A desktop notification by OSC 9 (iTerm2, kitty, WezTerm, Ghostty; Claude: `iterm2`,
    /// `iterm2_with_bell`, `kitty`).
    #[serde(
        rename = "osc9",
        alias = "iterm2",
        alias = "iterm2_with_bell",
        alias = "kitty"
    )]
    Osc9,
    /// A desktop notification by OSC 777 (urxvt, foot, WezTerm, Ghostty, VTE; Claude:
    /// `ghostty`).
    #[serde(rename = "osc777", alias = "ghostty")]
    Osc777,
    /// None (Claude: `notifications_disabled`).
    #[serde(rename = "off", alias = "notifications_disabled")]
    Off,
}

impl NotifyChannel {
    /// keel's word for the channel.
    pub fn word(self) -> &'static str {
        match self {
            NotifyChannel::Bell => "bell",
            NotifyChannel::Osc9 => "osc9",
            NotifyChannel::Osc777 => "osc777",
            NotifyChannel::Off => "off",
        }
    }
}

/// `permissions.defaultMode`: keel's mode names and Claude Code's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DefaultMode {
    /// Every tool runs (Claude: `bypassPermissions`).
    #[serde(rename = "auto", alias = "bypassPermissions")]
    Auto,
    /// Each write, edit or shell call asks (Claude: `default`, `manual`; and `dontAsk`, which
    /// refuses what no rule allows: keel asks, and a run nobody watches refuses).
    #[serde(rename = "ask", alias = "default", alias = "manual", alias = "dontAsk")]
    Ask,
    /// Writing tools are refused.
    #[serde(rename = "read-only", alias = "readOnly")]
    ReadOnly,
    /// File edits run, shell commands ask (Claude: `acceptEdits`).
    #[serde(rename = "accept-edits", alias = "acceptEdits")]
    AcceptEdits,
    /// Reserved for plan mode (§17).
    #[serde(rename = "plan")]
    Plan,
}

impl DefaultMode {
    pub fn word(self) -> &'static str {
        match self {
            DefaultMode::Auto => "auto",
            DefaultMode::Ask => "ask",
            DefaultMode::ReadOnly => "read-only",
            DefaultMode::AcceptEdits => "accept-edits",
            DefaultMode::Plan => "plan",
        }
    }
}

/// The top-level keys as they stand in a file, each still raw: checked one by one.
#[derive(Deserialize)]
struct RawFile {
    #[serde(rename = "$schema")]
    schema: Option<Value>,
    model: Option<Value>,
    thinking: Option<Value>,
    tools: Option<Value>,
    #[serde(rename = "maxTurns")]
    max_turns: Option<Value>,
    #[serde(rename = "maxSubagentDepth")]
    max_subagent_depth: Option<Value>,
    #[serde(rename = "approvalTimeout")]
    approval_timeout: Option<Value>,
    #[serde(rename = "autoCompaction")]
    auto_compaction: Option<Value>,
    #[serde(rename = "maxCost")]
    max_cost: Option<Value>,
    env: Option<Value>,
    permissions: Option<Value>,
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Value>,
    sandbox: Option<Value>,
    hooks: Option<Value>,
    checkpoints: Option<Value>,
    notify: Option<Value>,
    #[serde(rename = "statusLine")]
    status_line: Option<Value>,
    #[serde(rename = "claudeFiles")]
    claude_files: Option<Value>,
    jobs: Option<Value>,
    worktree: Option<Value>,
    lsp: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// `permissions`' keys as they stand in a file.
#[derive(Deserialize)]
struct RawPermissions {
    #[serde(rename = "defaultMode")]
    default_mode: Option<Value>,
    allow: Option<Value>,
    ask: Option<Value>,
    deny: Option<Value>,
    #[serde(rename = "additionalDirectories")]
    additional_directories: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// The `permissions` values of one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilePermissions {
    pub default_mode: Option<DefaultMode>,
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
    pub additional_directories: Vec<String>,
}

/// The values of one file that passed their checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileValues {
    pub model: Option<String>,
    pub thinking: Option<Thinking>,
    pub tools: Option<Vec<String>>,
    pub max_turns: Option<u32>,
    pub max_subagent_depth: Option<u32>,
    pub approval_timeout: Option<f64>,
    pub auto_compaction: Option<bool>,
    pub max_cost: Option<f64>,
    pub env: BTreeMap<String, String>,
    pub permissions: FilePermissions,
    /// Each server's entry as `mcp.json` writes it (checked when the servers load).
    pub mcp_servers: BTreeMap<String, Value>,
    pub sandbox: super::sandbox::FileSandbox,
    pub hooks: Option<serde_json::Map<String, Value>>,
    pub checkpoints: FileCheckpoints,
    pub notify: Option<NotifyChannel>,
    pub status_line: Option<StatusLine>,
    /// `claudeFiles`: `false` leaves Claude Code's settings files unread.
    pub claude_files: Option<bool>,
    pub jobs: Option<JobsSettings>,
    pub worktree: Option<WorktreeSettings>,
    pub lsp: Option<crate::kernel::lsp::LspSettings>,
}

/// `jobs {…}`: the model's background jobs (taken whole from the highest level that sets it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobsSettings {
    /// Which shapes of the job tools the model gets: `auto` (by its API), `claude`, `codex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<crate::kernel::tool::JobTools>,
    /// Jobs running at once in a session (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_live: Option<usize>,
    /// A foreground `bash` call that reaches its timeout becomes a job instead of being
    /// killed (default true; never `git` or `sleep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_on_timeout: Option<bool>,
}

/// `worktree {…}`: sessions run with `-w` (taken whole from the highest level that sets it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorktreeSettings {
    /// What a worktree is made from: `head` (default) or `fresh` (the remote's default
    /// branch, fetched first); Claude Code's `baseRef` is read too.
    #[serde(default, alias = "baseRef", skip_serializing_if = "Option::is_none")]
    pub base: Option<WorktreeBase>,
    /// The daemon removes unlocked clean worktrees older than this many days (default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_days: Option<u32>,
}

/// `worktree.base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorktreeBase {
    Head,
    Fresh,
}

/// `statusLine` (Claude Code's shape): a command whose first line of stdout the TUI shows under
/// the editor. It reads Claude's status JSON on stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusLine {
    /// Always `command` (the one kind Claude defines).
    #[serde(rename = "type")]
    pub kind: StatusLineKind,
    /// Run by `sh -c` in the session's directory.
    pub command: String,
    /// Columns of blank space before the text (Claude's `padding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<u16>,
}

/// `statusLine.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusLineKind {
    Command,
}

/// `checkpoints {enabled, maxFileBytes, maxFiles, maxTotalBytes}` (DESIGN §16).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileCheckpoints {
    pub enabled: Option<bool>,
    pub max_file_bytes: Option<u64>,
    pub max_files: Option<usize>,
    pub max_total_bytes: Option<u64>,
}

/// One file parsed: its values and the warnings about the entries left out.
pub struct Parsed {
    pub values: FileValues,
    pub warnings: Vec<String>,
}

/// Parses the text of the settings at `origin`.
pub fn parse(text: &str, origin: &Origin) -> Result<Parsed, Error> {
    let value = json_of(text, origin)?;
    if !value.is_object() {
        return Err(Error {
            kind: ErrorKind::Syntax,
            message: format!("{origin}: the settings must be a JSON object"),
            cause: None,
        });
    }
    parse_value(value, origin)
}

/// The text of a settings file as a JSON value (an error naming `file:line:col` when it is not
/// JSON), not yet checked.
pub fn json_of(text: &str, origin: &Origin) -> Result<Value, Error> {
    serde_json::from_str(text).map_err(|e| Error {
        kind: ErrorKind::Syntax,
        message: format!("{origin}:{}:{}: not valid JSON", e.line(), e.column()),
        cause: Some(strip_position(&e.to_string())),
    })
}

/// Checks the keys of a settings object one by one.
pub fn parse_value(value: Value, origin: &Origin) -> Result<Parsed, Error> {
    let raw: RawFile = serde_json::from_value(value).map_err(|e| Error {
        kind: ErrorKind::Syntax,
        message: format!("{origin}: cannot read the settings"),
        cause: Some(e.to_string()),
    })?;
    let mut c = Checker {
        origin,
        warnings: Vec::new(),
    };
    let values = c.values(raw);
    Ok(Parsed {
        values,
        warnings: c.warnings,
    })
}

/// serde_json's message without its " at line L column C" (the message names the place).
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_string(),
        None => message.to_string(),
    }
}

/// Checks a file's entries one by one, collecting warnings about the ones it skips.
pub(super) struct Checker<'a> {
    origin: &'a Origin,
    warnings: Vec<String>,
}

impl Checker<'_> {
    fn values(&mut self, raw: RawFile) -> FileValues {
        for key in raw.unknown.keys() {
            self.warn(key, "unknown key");
        }
        let _ = raw.schema;
        let max_turns = self.typed::<u32>("maxTurns", raw.max_turns);
        let max_subagent_depth = self.typed::<u32>("maxSubagentDepth", raw.max_subagent_depth);
        let approval_timeout = self.typed::<f64>("approvalTimeout", raw.approval_timeout);
        FileValues {
            model: self.typed("model", raw.model),
            thinking: self.typed("thinking", raw.thinking),
            tools: self.typed("tools", raw.tools),
            max_turns: self.check("maxTurns", max_turns, |n| *n > 0, "a number above 0"),
            max_subagent_depth,
            approval_timeout: self.check(
                "approvalTimeout",
                approval_timeout,
                |s| *s > 0.0 && *s < 1e9,
                "a positive number of seconds",
            ),
            auto_compaction: self.typed("autoCompaction", raw.auto_compaction),
            max_cost: self.typed("maxCost", raw.max_cost),
            env: self.entries("env", raw.env),
            permissions: self.permissions(raw.permissions),
            mcp_servers: self.entries("mcpServers", raw.mcp_servers),
            sandbox: super::sandbox::check(self, raw.sandbox),
            hooks: self.typed("hooks", raw.hooks),
            checkpoints: self
                .typed("checkpoints", raw.checkpoints)
                .unwrap_or_default(),
            notify: self.typed("notify", raw.notify),
            status_line: self.typed("statusLine", raw.status_line),
            claude_files: self.typed("claudeFiles", raw.claude_files),
            jobs: self.typed("jobs", raw.jobs),
            worktree: self.typed("worktree", raw.worktree),
            lsp: self.typed("lsp", raw.lsp),
        }
    }

    fn permissions(&mut self, raw: Option<Value>) -> FilePermissions {
        let Some(raw) = self.typed::<RawPermissions>("permissions", raw) else {
            return FilePermissions::default();
        };
        for key in raw.unknown.keys() {
            self.warn(&format!("permissions.{key}"), "unknown key");
        }
        let mut list = |key: &str, v| {
            self.typed::<Vec<String>>(&format!("permissions.{key}"), v)
                .unwrap_or_default()
        };
        FilePermissions {
            allow: list("allow", raw.allow),
            ask: list("ask", raw.ask),
            deny: list("deny", raw.deny),
            additional_directories: list("additionalDirectories", raw.additional_directories),
            default_mode: self.typed("permissions.defaultMode", raw.default_mode),
        }
    }

    /// An object whose entries are checked one by one (`env`: strings; `mcpServers`: objects).
    fn entries<T: DeserializeOwned>(&mut self, key: &str, v: Option<Value>) -> BTreeMap<String, T> {
        let Some(map) = self.typed::<serde_json::Map<String, Value>>(key, v) else {
            return BTreeMap::new();
        };
        map.into_iter()
            .filter_map(|(k, v)| Some((k.clone(), self.typed(&format!("{key}.{k}"), Some(v))?)))
            .collect()
    }

    /// `v` as a `T`, or a warning naming `key` (null counts as not set).
    pub(super) fn typed<T: DeserializeOwned>(&mut self, key: &str, v: Option<Value>) -> Option<T> {
        let v = v.filter(|v| !v.is_null())?;
        match serde_json::from_value::<T>(v) {
            Ok(t) => Some(t),
            Err(e) => {
                self.warn(key, &e.to_string());
                None
            }
        }
    }

    /// `v` when `ok` holds, else a warning that `key` must be `what`.
    fn check<T: std::fmt::Debug>(
        &mut self,
        key: &str,
        v: Option<T>,
        ok: impl Fn(&T) -> bool,
        what: &str,
    ) -> Option<T> {
        let v = v?;
        if ok(&v) {
            return Some(v);
        }
        self.warn(key, &format!("must be {what}, got {v:?}"));
        None
    }

    pub(super) fn warn(&mut self, key: &str, why: &str) {
        self.warnings
            .push(format!("{}: `{key}`: {why}; skipped", self.origin));
    }
}
