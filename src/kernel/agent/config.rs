//! An agent session's fixed settings ([`AgentConfig`]), its permission mode and retry policy.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::kernel::compaction::CompactionPolicy;
use crate::kernel::op::QueueMode;

/// What the permission policy does with tools that change things (`write`, `edit`, `bash`).
/// Written as `--permission` takes it (`auto`, `read-only`, `ask`, `accept-edits`, `plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Permission {
    /// Every tool runs.
    #[default]
    Auto,
    /// Mutating tools are refused with a tool error the model sees.
    ReadOnly,
    /// A front end must approve each mutating call.
    Ask,
    /// `edit` and `write` run; `bash` and mutating external tools must be approved.
    AcceptEdits,
    /// Plan mode (`DESIGN.md` §17): read-only tools run, the others are refused with a reason
    /// the model sees; `exit_plan_mode` asks the user to approve the plan, which switches back
    /// to the mode before (headless runs end with the plan as the answer).
    Plan,
}

/// A reasoning effort, as `--thinking`, the settings' `thinking` and a session spec write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl Thinking {
    /// The level's word (`AgentConfig::thinking_level` holds it).
    pub fn word(self) -> &'static str {
        match self {
            Thinking::Off => "off",
            Thinking::Minimal => "minimal",
            Thinking::Low => "low",
            Thinking::Medium => "medium",
            Thinking::High => "high",
            Thinking::Xhigh => "xhigh",
        }
    }
}

/// Fixed settings of one agent session.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub cwd: PathBuf,
    pub system_prompt: String,
    /// Enabled tool names (a subset of `tool::ALL`).
    pub tools: Vec<String>,
    /// Tools from outside the kernel (MCP servers), offered after the built-ins. Those not
    /// read-only obey `permission` like `write`, `edit` and `bash`.
    pub external_tools: Vec<Arc<dyn crate::kernel::tool::external::ToolSource>>,
    pub max_turns: Option<u32>,
    /// Identical failing tool calls in a row that end a run (`tool_loop`); 0: never.
    pub max_repeated_failures: u32,
    pub permission: Permission,
    /// Whether a front end can answer `ApprovalRequested`; if not, `ask` ends the run `Blocked`.
    pub can_ask: bool,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub thinking_level: String,
    pub bash_timeout: Duration,
    /// Which shapes of the background-job tools the model gets with `bash`.
    pub job_tools: crate::kernel::tool::JobTools,
    /// What a session's job table allows (jobs running at once, …).
    pub job_limits: crate::kernel::jobs::JobLimits,
    pub temp_dir: PathBuf,
    /// What tool processes inherit (scrubbed provider keys) and leave behind (the private
    /// spill directory under `temp_dir`, background process groups), cleaned up when the last
    /// clone of this config is dropped.
    pub tool_env: crate::kernel::tool::ToolEnv,
    /// Where `read`, `edit` and `write` get and put file text: the disk unless a front end
    /// hands a client (an editor's buffers).
    pub files: crate::kernel::tool::Files,
    /// Automatic retries of failed model calls.
    pub retry: RetryPolicy,
    /// Automatic context compaction.
    pub compaction: CompactionPolicy,
    /// The id of the session being served, sent to APIs that route prompt caches by it
    /// (`None`: no such hint).
    pub session_id: Option<String>,
    /// The session's hooks (`None`: none configured; nothing is fired).
    pub hooks: Option<crate::kernel::hooks::Hooks>,
    /// The JSON Schema a run's final answer must match (`--output-schema`): sent to the API
    /// in its native form, checked when the model stops, sent back once on a mismatch.
    pub output_schema: Option<Arc<crate::kernel::output_schema::OutputSchema>>,
    /// USD a run may cost (`--max-cost`), its subagents included: checked before each model
    /// call of a run.
    pub max_cost: Option<f64>,
    /// A subagent's: the account of the parent's run, which this session's runs spend from
    /// (instead of opening their own from `max_cost`).
    pub budget: Option<crate::kernel::budget::Budget>,
    /// Permission rules (`deny`, `ask`, `allow`) checked on every tool call before the mode
    /// (`kernel::policy`); empty: the mode alone decides.
    pub rules: Arc<crate::kernel::policy::Rules>,
    /// The sandbox of the processes the model starts and the policy the file tools check
    /// (`DESIGN.md` §14); `workspace-write` unless the user chose otherwise.
    pub sandbox: std::sync::Arc<crate::kernel::sandbox::Sandbox>,
    /// Checkpoints (§16): the shadow repositories' root, `git` and the caps (`None`: off).
    pub checkpoints: Option<Arc<crate::kernel::checkpoint::Checkpoints>>,
    /// The `task` tool's subagents (`DESIGN.md` §17); `None`: this session cannot start one
    /// (no spawner, or it is nested as deep as allowed).
    pub subagents: Option<crate::kernel::subagent::Subagents>,
    /// The session's language servers (`DESIGN.md` §22): diagnostics after `edit` and `write`
    /// (`None`: none configured or found).
    pub lsp: Option<crate::kernel::lsp::Lsp>,
}

/// How failed model calls are retried: only failures before any output, of a transient kind
/// (rate limits, overload, 5xx, connection failures, stalls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub enabled: bool,
    /// Retries after the first attempt.
    pub max_attempts: u32,
    /// The first delay; each retry doubles it (with ±20% jitter).
    pub base_delay_ms: u64,
    /// A server asking to wait longer than this (`Retry-After`) fails the call instead.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            enabled: true,
            max_attempts: 3,
            base_delay_ms: 2_000,
            max_delay_ms: 60_000,
        }
    }
}

impl AgentConfig {
    /// Defaults for an embedder working in `cwd`: every built-in tool, `auto` permission, no
    /// turn limit, a stop after 3 identical failing tool calls, one-at-a-time queues, thinking off, a 10-minute bash timeout and the default
    /// system prompt. `temp_dir` receives capped tool output.
    pub fn new(cwd: PathBuf, temp_dir: PathBuf) -> Self {
        let tools: Vec<String> = crate::kernel::tool::ALL
            .iter()
            .map(|s| s.to_string())
            .collect();
        let sandbox = std::sync::Arc::new(crate::kernel::sandbox::Sandbox::workspace_write(&cwd));
        AgentConfig {
            system_prompt: crate::kernel::default_system_prompt(&cwd, &tools),
            cwd,
            tools,
            external_tools: Vec::new(),
            max_turns: None,
            max_repeated_failures: 3,
            permission: Permission::Auto,
            can_ask: false,
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            thinking_level: "off".into(),
            bash_timeout: Duration::from_secs(600),
            job_tools: Default::default(),
            job_limits: Default::default(),
            temp_dir,
            tool_env: Default::default(),
            files: Default::default(),
            retry: RetryPolicy::default(),
            compaction: CompactionPolicy::default(),
            session_id: None,
            hooks: None,
            output_schema: None,
            max_cost: None,
            budget: None,
            rules: Default::default(),
            sandbox,
            checkpoints: None,
            subagents: None,
            lsp: None,
        }
    }
}
