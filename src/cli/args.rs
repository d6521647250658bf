//! The flags of a run (`keel [FLAGS] [PROMPT]…`): raw clap values, no decisions (`mode.rs` and
//! `setup` interpret them). A leaf: it imports nothing of keel, so the daemon can read the flags a
//! session is opened with, and a scheduled task's, without depending on the command line's root.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// A run's flags and prompt (`keel [FLAGS] [PROMPT]…`); also how a daemon session's and a
/// scheduled task's flags are read.
#[derive(Debug, Clone, Parser)]
#[command(name = "keel")]
pub struct Cli {
    /// The run's own arguments as given (without `keel`), kept for the daemon (a session
    /// opened there is opened with them) and for what clap cannot tell (a flag given
    /// explicitly); set once, after the parse, by `app`.
    #[arg(skip)]
    pub argv: Vec<String>,

    /// The prompt (several words are joined with spaces). Piped stdin is prepended to it.
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,

    /// Print mode: run the prompt, print the final answer on stdout, exit.
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Output mode: text (print or TUI by terminal), json (JSONL events), rpc (JSONL over stdio),
    /// acp (an Agent Client Protocol agent for editors, over stdio).
    #[arg(long, value_enum)]
    pub mode: Option<ModeFlag>,

    /// Same as --mode json.
    #[arg(long, conflicts_with = "mode")]
    pub json: bool,

    /// Same as --mode rpc.
    #[arg(long, conflicts_with_all = ["mode", "json"])]
    pub rpc: bool,

    /// Same as --mode acp.
    #[arg(long, conflicts_with_all = ["mode", "json", "rpc"])]
    pub acp: bool,

    /// Continue the newest session of this directory (a new one if there is none).
    #[arg(short = 'c', long = "continue")]
    pub continue_: bool,

    /// Resume a session by id or unique id prefix (without an id: the TUI picker).
    #[arg(short = 'r', long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub resume: Option<String>,

    /// Use this session file (a path) or session id (exact or unique prefix).
    #[arg(long, value_name = "PATH|ID")]
    pub session: Option<String>,

    /// Open this directory's session with exactly this id, or create it.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,

    /// Keep the session in memory only; write no file.
    #[arg(long)]
    pub no_session: bool,

    /// Run the session in a git worktree of its own: .keel/worktrees/NAME on branch
    /// keel/NAME, made from HEAD (a name is made up when none is given). Removed at the end
    /// when nothing changed in it, else kept and reported.
    #[arg(
        short = 'w',
        long = "worktree",
        value_name = "NAME",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub worktree: Option<String>,

    /// Copy a session (path or id) into a new session of this directory and continue there.
    #[arg(long, value_name = "PATH|ID")]
    pub fork: Option<String>,

    /// Write a stored session (a path, or an id or unique id prefix) as a self-contained HTML
    /// page and exit, without a provider (default OUT: keel-session-<file name>.html here).
    #[arg(
        long,
        value_names = ["SESSION", "OUT"],
        num_args = 1..=2,
        conflicts_with_all = [
            "prompt", "print", "mode", "json", "rpc", "acp", "continue_", "resume", "session",
            "session_id", "fork", "no_session", "daemon", "list_models"
        ]
    )]
    pub export: Option<Vec<String>>,

    /// Where session files are stored and looked up (default $KEEL_HOME/sessions/<cwd>).
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,

    /// Model provider: openai, anthropic, google (or gemini), deepseek, openrouter, groq, ollama,
    /// one from $KEEL_HOME/models.json, or scripted (offline replay of a script file).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,

    /// Model id, or provider/id.
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,

    /// List the known models (optionally only those matching PATTERN) and exit.
    #[arg(long, value_name = "PATTERN", num_args = 0..=1, default_missing_value = "")]
    pub list_models: Option<String>,

    /// Script file for --provider scripted (see docs/providers.md, "Scripted provider").
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,

    /// Reasoning effort, clamped to what the model supports.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub thinking: Option<ThinkingFlag>,

    /// Comma-separated tool allowlist (default: all of
    /// read,write,edit,bash,grep,find,ls,todo_write,task and every MCP tool; MCP tools by name,
    /// `mcp__server` or `mcp__server__*`).
    #[arg(long, short = 't', value_name = "LIST", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,

    /// Stop after this many model turns (exit 4 if the model was not finished).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Stop a run when the model made the same tool call (same tool, same arguments) this many
    /// times in a row and each failed (exit 1, `tool_loop`); 0 never stops (default: 3).
    #[arg(long, value_name = "N")]
    pub max_repeated_failures: Option<u32>,

    /// Tool permission policy for write, edit and bash (default: the settings'
    /// permissions.defaultMode, else auto).
    #[arg(long, value_enum)]
    pub permission: Option<PermissionFlag>,

    /// RPC mode with --permission ask: seconds a tool approval dialog waits for the client
    /// before the call is denied (default: the settings' approvalTimeout, else 300).
    #[arg(long, value_name = "SECS")]
    pub approval_timeout: Option<f64>,

    /// API key for the provider (overrides the environment).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Base URL of an OpenAI-compatible endpoint (e.g. http://localhost:11434/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Retries of a model call that failed before any output (429, 5xx, overload, network;
    /// default: 3).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,

    /// Seconds to wait for a connection to the provider (default: 30).
    #[arg(long, value_name = "SECS")]
    pub connect_timeout: Option<f64>,

    /// Seconds of silence from a streaming provider before the call fails (default: 300).
    #[arg(long, value_name = "SECS")]
    pub idle_timeout: Option<f64>,

    /// Do not compact the conversation automatically when the context fills up.
    #[arg(long)]
    pub no_auto_compaction: bool,

    /// Replace keel's base prompt (the tool list, context files, environment and date are
    /// still added; see `keel debug prompt`).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,

    /// Append to the system prompt (text, or a file path whose contents are appended).
    #[arg(long, value_name = "TEXT|FILE")]
    pub append_system_prompt: Vec<String>,

    /// Do not load AGENTS.md / CLAUDE.md context files (also `-nc`).
    #[arg(long)]
    pub no_context_files: bool,

    /// Also start the MCP servers of this file ({"mcpServers": …}); repeatable.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,

    /// Start only the MCP servers of --mcp-config files (not $KEEL_HOME/mcp.json or the
    /// project's).
    #[arg(long)]
    pub strict_mcp_config: bool,

    /// Start no MCP servers.
    #[arg(long)]
    pub no_mcp: bool,

    /// Trust this project for this run: its .mcp.json and .keel/mcp.json servers, and the
    /// hooks, allow rules and env of its .keel/settings.json and settings.local.json.
    #[arg(long)]
    pub trust_project: bool,

    /// When to use colour on the terminal.
    #[arg(long, value_enum, default_value_t = ColorFlag::Auto)]
    pub color: ColorFlag,

    /// TUI: columns for East-Asian ambiguous-width characters (±, ①, …): `wide` for CJK
    /// terminals that draw them two columns wide (also KEEL_AMBIGUOUS_WIDTH=wide).
    #[arg(long, value_enum, value_name = "WIDTH")]
    pub ambiguous_width: Option<AmbiguousWidth>,

    /// Print mode: no activity lines on stderr, only errors.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Run the session in the per-user daemon (started if needed), so it outlives this
    /// process. The TUI does by default; print, JSON and RPC modes only with this flag.
    #[arg(long, conflicts_with = "no_daemon")]
    pub daemon: bool,

    /// Run the TUI's session in this process (also KEEL_NO_DAEMON=1): it ends with the window.
    #[arg(long)]
    pub no_daemon: bool,

    /// With --daemon: start the run, print the session id and exit 0 at once.
    #[arg(long, requires = "daemon", conflicts_with = "wait")]
    pub detach: bool,

    /// With --daemon and --resume/--continue/--session: print the rest of the session's
    /// latest run (a detached one) through its end, instead of starting a run.
    #[arg(long, requires = "daemon")]
    pub wait: bool,

    /// The daemon's socket (default $KEEL_SOCKET, else the per-user runtime directory; with
    /// --remote, the remote daemon's).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,

    #[command(flatten)]
    pub remote: RemoteArgs,

    /// With --remote: the session's directory on the remote host (default: this directory's
    /// path, which must exist there).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Print and JSON modes: the final answer must be JSON matching this JSON Schema (a file,
    /// or the schema's text). Print mode prints only that JSON; a mismatch is sent back to the
    /// model once, then fails the run (exit 1, `schema_mismatch`).
    #[arg(long, value_name = "FILE", visible_alias = "json-schema")]
    pub output_schema: Option<String>,

    /// Stop a run before its next model call once it has cost more than USD (at the model's
    /// list prices): exit 4, the session saved for --continue.
    #[arg(long, value_name = "USD", visible_alias = "max-budget-usd", value_parser = usd)]
    pub max_cost: Option<f64>,

    /// Settings for this run, above the project's and the user's settings files: a JSON file,
    /// or the JSON itself (`{…}`). See `keel config`.
    #[arg(long, value_name = "FILE|JSON")]
    pub settings: Option<String>,

    /// Do not read Claude Code's settings files (~/.claude/settings.json, .claude/settings.json,
    /// .claude/settings.local.json); as "claudeFiles": false in keel's settings.
    #[arg(long)]
    pub no_claude_files: bool,

    /// What the commands the model runs may do: workspace-write (default: write the session's
    /// directory and a private /tmp, read all but secrets, no network), read-only, or off
    /// (danger-full-access: no sandbox).
    #[arg(long, value_name = "MODE", value_parser = ["workspace-write", "read-only", "off", "danger-full-access"])]
    pub sandbox: Option<String>,

    /// Let a run nobody watches (print, JSON, a headless daemon session) start in a directory
    /// that is your home directory or holds it: the model may then write everything in it but
    /// the secrets and the shell, git, PATH and autostart files. Without it such a run is refused.
    #[arg(long)]
    pub allow_home: bool,

    /// TEMPORARY test entry point until the `sandbox.network` setting is wired (hidden): `on`
    /// lets the commands the model runs use the network directly, `off` cuts it (the default).
    #[arg(long, hide = true, value_name = "on|off", value_parser = ["on", "off"])]
    pub sandbox_network: Option<String>,

    /// TEMPORARY test entry point until `sandbox.network.allow` is wired (hidden): a host name
    /// (or `*.suffix`, either with `:PORT` or `:*`) the commands the model runs may reach
    /// through keel's proxy; repeatable.
    #[arg(long, hide = true, value_name = "HOST")]
    pub sandbox_network_allow: Vec<String>,
}

/// A dollar amount: a finite number, not negative.
fn usd(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not an amount in USD (e.g. 0.50)")),
    }
}

/// Reaching another host's daemon over ssh (`DESIGN.md` §10; docs/remote.md).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// Use the daemon of [USER@]HOST, over `ssh -T HOST keel daemon bridge` (the user's own ssh
    /// config, keys and agent; default $KEEL_REMOTE).
    #[arg(long, value_name = "[USER@]HOST")]
    pub remote: Option<String>,
    /// With --remote: an ssh option, as `ssh -o` takes it (e.g. Port=2222); repeatable.
    #[arg(long = "ssh-opt", value_name = "KEY=VALUE")]
    pub ssh_opt: Vec<String>,
    /// With --remote: the keel command on the remote host (default: keel).
    #[arg(long, value_name = "CMD")]
    pub remote_keel: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeFlag {
    Text,
    Json,
    Rpc,
    Acp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThinkingFlag {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PermissionFlag {
    /// Every tool runs.
    #[value(alias = "bypassPermissions")]
    Auto,
    /// write, edit and bash are refused.
    ReadOnly,
    /// Each write, edit or bash call must be approved (headless runs end as blocked, exit 5).
    #[value(alias = "default")]
    Ask,
    /// write and edit run; bash and MCP tools that change things must be approved.
    #[value(alias = "acceptEdits")]
    AcceptEdits,
    /// Plan mode: read-only tools, then exit_plan_mode asks to approve the plan (print and
    /// JSON runs end with the plan as the answer).
    Plan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AmbiguousWidth {
    Narrow,
    Wide,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorFlag {
    Auto,
    Always,
    Never,
}

/// The command line with pi's spellings clap cannot express turned into keel's: `-nc` is
/// `--no-context-files`.
pub fn normalize(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = false;
    for a in args {
        if a == "--" {
            rest = true;
        }
        if !rest && a == "-nc" {
            out.push("--no-context-files".to_string());
        } else {
            out.push(a);
        }
    }
    out
}

/// Flags that only concern a client of the daemon, never the session it opens there.
const CLIENT_FLAGS: &[&str] = &[
    "--daemon",
    "--no-daemon",
    "--rpc",
    "--json",
    "-p",
    "--print",
    "--detach",
    "--wait",
];
const CLIENT_FLAGS_WITH_VALUE: &[&str] = &[
    "--socket",
    "--mode",
    "--remote",
    "--ssh-opt",
    "--remote-keel",
    "--cwd",
];

/// The command line a daemon session starts from: this client's, without the flags that
/// only concern the client.
pub fn session_args(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if CLIENT_FLAGS_WITH_VALUE.contains(&a.as_str()) {
            skip_value = true;
            continue;
        }
        let flag = a.split('=').next().unwrap_or("");
        if CLIENT_FLAGS.contains(&a.as_str()) || CLIENT_FLAGS_WITH_VALUE.contains(&flag) {
            continue;
        }
        out.push(a);
    }
    out
}

/// Session flags (and their values) that pick a session.
const SESSION_FLAGS: &[&str] = &["--continue", "-c", "--no-session"];
const SESSION_FLAGS_WITH_VALUE: &[&str] =
    &["--resume", "-r", "--session", "--session-id", "--fork"];

/// `args` without the flags that pick a session (a client that names its session itself:
/// reopening by file, ACP).
pub fn without_session_flags(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        if SESSION_FLAGS_WITH_VALUE.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        if SESSION_FLAGS.contains(&a.as_str()) || SESSION_FLAGS_WITH_VALUE.contains(&flag) {
            continue;
        }
        out.push(a.clone());
    }
    out
}

#[cfg(test)]
mod session_flag_tests {
    use super::*;

    #[test]
    fn client_flags_stay_with_the_client() {
        let args = [
            "-p",
            "--daemon",
            "--detach",
            "--socket",
            "/s",
            "--provider",
            "scripted",
            "--wait",
            "--socket=/t",
            "--mode",
            "json",
            "--session-id",
            "x",
            "hello",
        ];
        let got = session_args(args.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            ["--provider", "scripted", "--session-id", "x", "hello"]
        );
    }
}

#[cfg(test)]
mod permission_flag_tests {
    use super::*;
    use clap::Parser;

    fn permission(value: &str) -> Result<PermissionFlag, String> {
        Cli::try_parse_from(["keel", "--permission", value])
            .map_err(|e| e.to_string())
            .and_then(|c| c.permission.ok_or_else(|| "no --permission".to_string()))
    }

    #[test]
    fn accept_edits_and_claude_mode_names_are_accepted() {
        assert_eq!(permission("accept-edits"), Ok(PermissionFlag::AcceptEdits));
        assert_eq!(permission("acceptEdits"), Ok(PermissionFlag::AcceptEdits));
        assert_eq!(permission("default"), Ok(PermissionFlag::Ask));
        assert_eq!(permission("bypassPermissions"), Ok(PermissionFlag::Auto));
        assert_eq!(permission("read-only"), Ok(PermissionFlag::ReadOnly));
        assert_eq!(permission("plan"), Ok(PermissionFlag::Plan));
    }
}
