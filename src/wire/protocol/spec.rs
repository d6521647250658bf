//! The typed session spec (`DESIGN.md` §2): every choice that shapes a session, as a client
//! asks for it. The command line resolves its flags and environment into one (`cli/spec.rs`);
//! the daemon's `session/open`, a scheduled task, a subagent's child session and a session's
//! snapshot carry one; the session lays it over the settings files of its directory
//! (`setup::Settings::resolve`). A field left out (`None`, empty, false) is "not asked for":
//! the settings files or keel's defaults decide. Paths are absolute, or relative to the
//! session's directory. Secrets are never fields: a provider key is named by where the session
//! reads it ([`KeySource`]). Pure data.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::kernel::agent::{Permission, Thinking};
use crate::kernel::sandbox::{Network, SandboxMode};

/// What a session is opened with. Serialized with camelCase names; every field may be left
/// out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionSpec {
    /// Which session: a new one unless this says otherwise.
    #[serde(skip_serializing_if = "SessionPick::is_new")]
    pub session: SessionPick,
    /// Where session files are stored and looked up (default `$KEEL_HOME/sessions/<cwd>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_dir: Option<PathBuf>,
    /// The model provider (`openai`, `anthropic`, a models.json name, `scripted`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model id, or `provider/id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The script of the scripted provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// Where the provider's key is read (never the key itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<KeySource>,
    /// The base URL of an OpenAI-compatible endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Retries of a model call that failed before any output (default 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Seconds to wait for a connection to the provider (default 30).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<f64>,
    /// Seconds of silence from a streaming provider before the call fails (default 300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<f64>,
    /// The reasoning effort.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// The tool allowlist (default: every tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Model turns a run may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Identical failing tool calls in a row that end a run (default 3; 0: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_repeated_failures: Option<u32>,
    /// USD a run may cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// The permission mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<Permission>,
    /// Permission rules in force for this session, above those of the settings files.
    #[serde(skip_serializing_if = "Rules::is_empty")]
    pub rules: Rules,
    /// Seconds an approval dialog waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_timeout: Option<f64>,
    /// `false`: no automatic compaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_compaction: Option<bool>,
    /// The base prompt, replacing keel's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Text appended to the system prompt, in order (resolved: a file's contents).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub append_system_prompt: Vec<String>,
    /// `false`: no AGENTS.md / CLAUDE.md context files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_files: Option<bool>,
    /// MCP servers.
    #[serde(skip_serializing_if = "McpSpec::is_default")]
    pub mcp: McpSpec,
    /// The session's settings layer (`--settings`): above the project's and the user's files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsLayer>,
    /// `false`: Claude Code's settings files are not read (`--no-claude-files`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claude_files: Option<bool>,
    /// The final answer must be JSON matching this schema (its text, or a file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
    /// What the commands the model runs may do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    /// What they may reach (above `sandbox.network`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// Trust decisions made for this session.
    #[serde(skip_serializing_if = "TrustSpec::is_default")]
    pub trust: TrustSpec,
    /// The agent definition the session runs as (a subagent's; `None`: keel's main agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Run in a git worktree of its own (`-w`; DESIGN §20).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeSpec>,
}

/// The worktree a session runs in (`-w [NAME]`): `.keel/worktrees/NAME` of the repository of
/// its directory, on branch `keel/NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeSpec {
    /// Its name (made up when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

fn is_true(v: &bool) -> bool {
    *v
}

impl Default for McpSpec {
    fn default() -> McpSpec {
        McpSpec {
            config: Vec::new(),
            strict: false,
            enabled: true,
        }
    }
}

/// Which session a spec opens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "how", content = "id")]
pub enum SessionPick {
    /// A new session.
    #[default]
    New,
    /// A new session with exactly this id, or the directory's session that has it.
    Id(String),
    /// The directory's newest session (a new one if there is none).
    Continue,
    /// A stored session by id, unique id prefix or path (`""`: the TUI's picker).
    Resume(String),
    /// A session file (a path) or a session id (exact or unique prefix).
    File(String),
    /// A copy of this session (path or id) as a new session of the directory.
    Fork(String),
    /// In memory only: no file.
    Memory,
}

impl SessionPick {
    pub fn is_new(&self) -> bool {
        *self == SessionPick::New
    }
}

/// Where a provider key is read, on the session's side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeySource {
    /// The value of this variable of the session's environment.
    Env(String),
    /// The contents of this file (trailing whitespace removed).
    File(PathBuf),
}

/// Permission rules (Claude's syntax: `Bash(npm test:*)`, `Read(./secrets/**)`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rules {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }
}

/// The session's MCP servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpSpec {
    /// Config files (`{"mcpServers": …}`) whose servers also start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<PathBuf>,
    /// Only the servers of `config` (not `$KEEL_HOME/mcp.json` or the project's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// `false`: no MCP server starts.
    #[serde(skip_serializing_if = "is_true")]
    pub enabled: bool,
}

impl McpSpec {
    pub fn is_default(&self) -> bool {
        *self == McpSpec::default()
    }
}

/// The `--settings` layer: a file, or the JSON itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SettingsLayer {
    File(PathBuf),
    Json(String),
}

impl SettingsLayer {
    /// `--settings VALUE`: the JSON itself when it starts with `{`, else a file.
    pub fn of(value: &str) -> SettingsLayer {
        match value.trim_start().starts_with('{') {
            true => SettingsLayer::Json(value.to_string()),
            false => SettingsLayer::File(value.into()),
        }
    }

    /// The layer a `--settings` flag asks for, if it was given.
    pub fn of_flag(value: Option<&str>) -> Option<SettingsLayer> {
        value.map(SettingsLayer::of)
    }
}

/// Trust decisions made for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrustSpec {
    /// The project's MCP servers, hooks, allow rules and env apply (`--trust-project`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub project: bool,
    /// A run nobody watches may start in (or above) the home directory (`--allow-home`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_home: bool,
}

impl TrustSpec {
    pub fn is_default(&self) -> bool {
        *self == TrustSpec::default()
    }
}

impl SessionSpec {
    /// Every field by its wire name, with what it asks for (the generated protocol reference
    /// lists them; a test holds this to the fields a full spec writes).
    pub const FIELDS: &'static [(&'static str, &'static str)] = &[
        (
            "session",
            "which session: `{how: new|continue|memory}` or `{how: id|resume|file|fork, id}`",
        ),
        ("sessionDir", "where session files are stored and looked up"),
        ("provider", "the model provider"),
        ("model", "the model id, or `provider/id`"),
        ("script", "the scripted provider's script"),
        (
            "apiKey",
            "where the provider key is read: `{env: NAME}` or `{file: PATH}`, never the key",
        ),
        ("baseUrl", "an OpenAI-compatible endpoint"),
        (
            "maxRetries",
            "retries of a model call that failed before any output",
        ),
        (
            "connectTimeout",
            "seconds to wait for a connection to the provider",
        ),
        (
            "idleTimeout",
            "seconds of silence before a streaming call fails",
        ),
        (
            "thinking",
            "the reasoning effort: `off|minimal|low|medium|high|xhigh`",
        ),
        ("tools", "the tool allowlist"),
        ("maxTurns", "model turns a run may take"),
        (
            "maxRepeatedFailures",
            "identical failing tool calls in a row that end a run",
        ),
        ("maxCost", "USD a run may cost"),
        ("permission", "`auto|read-only|ask|accept-edits|plan`"),
        (
            "rules",
            "`{allow, ask, deny}` permission rules above the settings files'",
        ),
        ("approvalTimeout", "seconds an approval dialog waits"),
        ("autoCompaction", "`false`: no automatic compaction"),
        ("systemPrompt", "the base prompt, replacing keel's"),
        ("appendSystemPrompt", "text appended to the system prompt"),
        ("contextFiles", "`false`: no AGENTS.md / CLAUDE.md"),
        ("mcp", "`{config: [path], strict, enabled}`"),
        (
            "settings",
            "the session's settings layer: `{file: PATH}` or `{json: TEXT}`",
        ),
        (
            "claudeFiles",
            "`false`: Claude Code's settings files (`~/.claude`, `.claude/`) are not read",
        ),
        (
            "outputSchema",
            "the JSON Schema the final answer must match (text, or a file)",
        ),
        ("sandbox", "`workspace-write|read-only|off`"),
        ("network", "`\"on\"`, `\"off\"` or `{allow: [HOST]}`"),
        ("trust", "`{project, allowHome}`"),
        ("agent", "the agent definition the session runs as"),
        (
            "worktree",
            "`{name?}`: a new session in a git worktree of its own, `.keel/worktrees/NAME` on \
             branch `keel/NAME`",
        ),
    ];

    /// A spec that asks for nothing: the settings files and keel's defaults decide.
    pub fn new() -> SessionSpec {
        SessionSpec::default()
    }

    /// Whether the session loads AGENTS.md / CLAUDE.md context files.
    pub fn context_files(&self) -> bool {
        self.context_files != Some(false)
    }

    /// The fields of `self` (a session asked for now) that shape a session and differ from
    /// `then` (the spec a live session was opened with), by their wire names. A field `self`
    /// does not set is not a difference: the live session's own value stands. The pick of
    /// the session and where its files live are never differences.
    pub fn differences(&self, then: &SessionSpec) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut check = |name: &'static str, asked: bool, same: bool| {
            if asked && !same {
                out.push(name);
            }
        };
        macro_rules! option {
            ($($field:ident => $name:literal),* $(,)?) => {$(
                check($name, self.$field.is_some(), self.$field == then.$field);
            )*};
        }
        option!(
            provider => "provider",
            model => "model",
            script => "script",
            api_key => "apiKey",
            base_url => "baseUrl",
            max_retries => "maxRetries",
            connect_timeout => "connectTimeout",
            idle_timeout => "idleTimeout",
            thinking => "thinking",
            tools => "tools",
            max_turns => "maxTurns",
            max_repeated_failures => "maxRepeatedFailures",
            max_cost => "maxCost",
            permission => "permission",
            approval_timeout => "approvalTimeout",
            auto_compaction => "autoCompaction",
            system_prompt => "systemPrompt",
            context_files => "contextFiles",
            settings => "settings",
            claude_files => "claudeFiles",
            output_schema => "outputSchema",
            sandbox => "sandbox",
            network => "network",
            agent => "agent",
        );
        let rules = &self.rules;
        check("rules", !rules.is_empty(), *rules == then.rules);
        let append = &self.append_system_prompt;
        check(
            "appendSystemPrompt",
            !append.is_empty(),
            *append == then.append_system_prompt,
        );
        check("mcp", !self.mcp.is_default(), self.mcp == then.mcp);
        check("trust", !self.trust.is_default(), self.trust == then.trust);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_spec_is_an_empty_object_and_reads_back() {
        let spec = SessionSpec::new();
        assert_eq!(serde_json::to_string(&spec).unwrap(), "{}");
        let back: SessionSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn fields_read_back_with_their_wire_names() {
        let text = r#"{"session":{"how":"resume","id":"abc"},"model":"m","thinking":"high",
            "permission":"accept-edits","rules":{"deny":["Bash(rm:*)"]},"contextFiles":false,
            "mcp":{"enabled":false},"sandbox":"read-only","network":{"allow":["crates.io"]},
            "apiKey":{"env":"KEEL_API_KEY"},"trust":{"project":true}}"#;
        let spec: SessionSpec = serde_json::from_str(text).unwrap();
        assert_eq!(spec.session, SessionPick::Resume("abc".into()));
        assert_eq!(spec.permission, Some(Permission::AcceptEdits));
        assert_eq!(spec.thinking, Some(Thinking::High));
        assert!(!spec.context_files() && !spec.mcp.enabled && spec.trust.project);
        assert_eq!(spec.api_key, Some(KeySource::Env("KEEL_API_KEY".into())));
        let again: SessionSpec =
            serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn the_field_table_names_every_field_a_full_spec_writes() {
        let full = SessionSpec {
            session: SessionPick::Continue,
            session_dir: Some("d".into()),
            provider: Some("p".into()),
            model: Some("m".into()),
            script: Some("s".into()),
            api_key: Some(KeySource::Env("K".into())),
            base_url: Some("u".into()),
            max_retries: Some(1),
            connect_timeout: Some(1.0),
            idle_timeout: Some(1.0),
            thinking: Some(Thinking::Low),
            tools: Some(vec![]),
            max_turns: Some(1),
            max_repeated_failures: Some(1),
            max_cost: Some(1.0),
            permission: Some(Permission::Ask),
            rules: Rules {
                deny: vec!["Bash".into()],
                ..Rules::default()
            },
            approval_timeout: Some(1.0),
            auto_compaction: Some(false),
            system_prompt: Some("x".into()),
            append_system_prompt: vec!["y".into()],
            context_files: Some(false),
            mcp: McpSpec {
                strict: true,
                ..McpSpec::default()
            },
            settings: Some(SettingsLayer::Json("{}".into())),
            claude_files: Some(false),
            output_schema: Some("{}".into()),
            sandbox: Some(SandboxMode::ReadOnly),
            network: Some(Network::On),
            trust: TrustSpec {
                project: true,
                allow_home: false,
            },
            agent: Some("general".into()),
            worktree: Some(WorktreeSpec {
                name: Some("w".into()),
            }),
        };
        let value = serde_json::to_value(&full).unwrap();
        let written: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let listed: Vec<&str> = SessionSpec::FIELDS.iter().map(|(n, _)| *n).collect();
        assert_eq!(written, listed);
    }

    #[test]
    fn differences_name_only_fields_asked_for_now_with_other_values() {
        let then = SessionSpec {
            model: Some("a".into()),
            thinking: Some(Thinking::Low),
            tools: Some(vec!["read".into()]),
            ..SessionSpec::new()
        };
        let now = SessionSpec {
            session: SessionPick::Continue,
            model: Some("b".into()),
            tools: Some(vec!["read".into()]),
            max_turns: Some(3),
            ..SessionSpec::new()
        };
        assert_eq!(now.differences(&then), ["model", "maxTurns"]);
        let only_pick = SessionSpec {
            session: SessionPick::Continue,
            session_dir: Some("/d".into()),
            ..SessionSpec::new()
        };
        assert!(only_pick.differences(&then).is_empty());
        assert!(then.differences(&then).is_empty());
    }
}
