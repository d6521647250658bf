//! The built-in tools (`DESIGN.md` §8): their JSON schemas for the model and their execution.
//! Tools return data (`ToolOutput`) and stream partial output through `ToolContext::progress`;
//! a tool never prints and never reads the process environment except what it is handed.

pub(crate) mod args;
pub mod background;
pub mod bash;
mod bash_output;
pub(crate) mod bash_proc;
mod credentials;
pub mod details;
mod edit;
mod env;
mod exec;
pub mod external;
pub mod file;
pub mod files;
mod find;
mod grep;
mod guard;
mod ls;
pub mod plan;
pub mod preview;
mod read;
mod text;
pub mod todo;
mod write;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::message::Content;
use crate::kernel::sandbox::Sandbox;

pub use env::{output_dir_of, ToolEnv};
pub use files::{FileClient, Files};

/// What a tool produced: content for the model, structured details for front ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub details: Option<Value>,
    pub is_error: bool,
    /// What only a `PostToolUse` hook's `tool_response` reads. Never saved, never sent.
    pub for_hooks: Option<Arc<ForHooks>>,
}

/// What a `PostToolUse` hook's `tool_response` reads beyond the content and the details.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForHooks {
    /// `edit`, `write` and `todo_write`: the file's (the list's) text before the call (`None`
    /// for a new file), for `originalFile` and `oldTodos`.
    pub before: Option<String>,
    /// `bash`: what the command wrote on stdout and on stderr apart (the model reads them
    /// merged), for `stdout` and `stderr`.
    pub streams: Option<Streams>,
}

/// A command's stdout and stderr apart: the last lines of each within the output caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Streams {
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::text(text)],
            details: None,
            is_error: false,
            for_hooks: None,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![Content::text(text)],
            details: None,
            is_error: true,
            for_hooks: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// With the file's text before the call (see [`ToolOutput::before`]).
    pub fn with_before(mut self, before: Option<String>) -> Self {
        self.hooks_mut().before = before;
        self
    }

    /// With the command's stdout and stderr apart (see [`ForHooks::streams`]).
    pub fn with_streams(mut self, streams: Streams) -> Self {
        self.hooks_mut().streams = Some(streams);
        self
    }

    /// The text before the call (see [`ForHooks::before`]).
    pub fn before(&self) -> Option<&str> {
        self.for_hooks.as_ref()?.before.as_deref()
    }

    /// stdout and stderr apart (see [`ForHooks::streams`]).
    pub fn streams(&self) -> Option<&Streams> {
        self.for_hooks.as_ref()?.streams.as_ref()
    }

    fn hooks_mut(&mut self) -> &mut ForHooks {
        Arc::make_mut(self.for_hooks.get_or_insert_with(Default::default))
    }

    /// The text blocks joined (for summaries and tests).
    pub fn text(&self) -> String {
        crate::kernel::message::joined_text(&self.content)
    }
}

/// Everything a tool may use. Built by the turn loop per call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Relative paths resolve against this directory.
    pub cwd: PathBuf,
    /// Fires when the run is aborted; long tools must stop promptly.
    pub abort: AbortSignal,
    /// Partial results (bash: the last lines of the output so far, replace-not-append).
    pub progress: Option<mpsc::UnboundedSender<ToolOutput>>,
    /// Default bash timeout when the call gives none.
    pub bash_timeout: Duration,
    /// Where capped outputs keep their full text (in a private directory created under it).
    pub temp_dir: PathBuf,
    /// What tool processes inherit, and what they leave behind for the session to clean up.
    pub env: ToolEnv,
    /// Where `read`, `edit` and `write` get and put file text (the disk, or an editor).
    pub files: Files,
    /// The sandbox `bash` runs commands in and the policy the file tools check.
    pub sandbox: Arc<Sandbox>,
    /// Where `bash` reports what the sandbox stopped (the turn loop publishes it).
    pub violations: Option<mpsc::UnboundedSender<crate::kernel::sandbox::Violation>>,
    /// The session's permission rules: walks (`grep`, `find`, `ls`) skip what a `Read(…)`
    /// deny rule covers, globs included, whatever the sandbox.
    pub rules: Arc<crate::kernel::policy::Rules>,
    /// The record of the protected paths taken before this call (`sandbox::watch`), checked
    /// after it by the turn loop, or handed on by a `bash` call that becomes a job.
    pub watched: crate::kernel::sandbox::watch::CallRecord,
}

impl ToolContext {
    /// Resolves a path argument against `cwd` (absolute paths and `~/` are kept/expanded).
    pub fn resolve(&self, p: &str) -> PathBuf {
        resolve_path(&self.cwd, p)
    }
}

pub(crate) fn resolve_path(cwd: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Built-in tools borrow their names and descriptions; external ones own them.
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// Every built-in tool name, in the order they are offered (`exit_plan_mode` is not among
/// them: the turn loop offers it in plan mode only).
pub const ALL: &[&str] = &[
    "read",
    "write",
    "edit",
    "bash",
    "grep",
    "find",
    "ls",
    "todo_write",
];

/// The background-job tools offered with `bash`: in Claude Code's shapes...
pub const CLAUDE_JOB_TOOLS: &[&str] = &["bash_output", "bash_kill"];
/// ...or in Codex's.
pub const CODEX_JOB_TOOLS: &[&str] = &["exec_command", "write_stdin"];

/// Which shapes of the background-job tools a model is offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobTools {
    /// By the model's API: Codex's for OpenAI's (chat completions, responses), else Claude's.
    #[default]
    Auto,
    Claude,
    Codex,
}

impl JobTools {
    /// The tools offered with `bash` to a model of `api`.
    pub fn for_api(self, api: &str) -> &'static [&'static str] {
        use crate::kernel::provider::model::{API_OPENAI, API_RESPONSES};
        match self {
            JobTools::Claude => CLAUDE_JOB_TOOLS,
            JobTools::Codex => CODEX_JOB_TOOLS,
            JobTools::Auto if api == API_OPENAI || api == API_RESPONSES => CODEX_JOB_TOOLS,
            JobTools::Auto => CLAUDE_JOB_TOOLS,
        }
    }
}

/// The built-in tools a model of `api` is offered, in order: the enabled ones (`exit_plan_mode`
/// aside: the turn loop offers it in plan mode only), then the job tools of the shape `jobs`
/// picks when `bash` is among them.
pub fn offered<'a>(enabled: &'a [String], jobs: JobTools, api: &str) -> Vec<&'a str> {
    let with_bash = enabled.iter().any(|t| t == "bash");
    enabled
        .iter()
        .map(String::as_str)
        .filter(|t| *t != "exit_plan_mode")
        .chain(jobs.for_api(api).iter().copied().filter(|_| with_bash))
        .collect()
}

/// Whether `name` may run in a session whose enabled tools are `enabled` (the job tools, of
/// either shape, come with `bash`: a session that changed models mid-way keeps both working).
pub fn enabled(name: &str, enabled: &[String]) -> bool {
    let on = |t: &str| enabled.iter().any(|e| e == t);
    let job = CLAUDE_JOB_TOOLS.contains(&name) || CODEX_JOB_TOOLS.contains(&name);
    on(name) || (job && on("bash"))
}

/// Tools the turn loop runs itself, on the session's state rather than the workspace.
pub const SESSION_TOOLS: &[&str] = &["todo_write", "exit_plan_mode"];

/// Tools that change the workspace or run commands: refused under `read-only`, asked under `ask`.
pub fn is_mutating(name: &str) -> bool {
    matches!(
        name,
        "write" | "edit" | "bash" | "exec_command" | "write_stdin"
    )
}

/// The schema of one tool, `None` for an unknown name.
pub fn spec(name: &str) -> Option<ToolSpec> {
    match name {
        "read" => Some(read::spec()),
        "write" => Some(write::spec()),
        "edit" => Some(edit::spec()),
        "bash" => Some(bash::spec()),
        "grep" => Some(grep::spec()),
        "find" => Some(find::spec()),
        "ls" => Some(ls::spec()),
        "todo_write" => Some(todo::spec()),
        "bash_output" => Some(background::output_spec()),
        "bash_kill" => Some(background::kill_spec()),
        "exec_command" => Some(exec::exec_spec()),
        "write_stdin" => Some(exec::write_spec()),
        "exit_plan_mode" => Some(plan::spec()),
        _ => None,
    }
}

/// Runs one tool call. Never panics on bad arguments: they become an error output.
pub async fn execute(name: &str, args: &Value, ctx: &ToolContext) -> ToolOutput {
    match name {
        "read" => read::run(args, ctx).await,
        "write" => write::run(args, ctx).await,
        "edit" => edit::run(args, ctx).await,
        "bash" => bash::run(args, ctx).await,
        "grep" => grep::run(args, ctx).await,
        "find" => find::run(args, ctx).await,
        "ls" => ls::run(args, ctx).await,
        "bash_output" => background::output(args, ctx).await,
        "bash_kill" => background::kill(args, ctx).await,
        "exec_command" => exec::exec(args, ctx).await,
        "write_stdin" => exec::write(args, ctx).await,
        other => ToolOutput::error(format!("unknown tool: {other}")),
    }
}

/// A context for tool unit tests: `dir` as cwd and temp dir, no abort, no progress.
#[cfg(test)]
pub(crate) fn test_context(dir: &Path) -> ToolContext {
    ToolContext {
        cwd: dir.to_path_buf(),
        abort: AbortSignal::never(),
        progress: None,
        bash_timeout: Duration::from_secs(10),
        temp_dir: dir.to_path_buf(),
        env: ToolEnv::default(),
        files: Default::default(),
        sandbox: Arc::new(Sandbox::off(dir)),
        violations: None,
        rules: Default::default(),
        watched: Default::default(),
    }
}
