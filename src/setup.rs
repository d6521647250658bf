//! Builds what a run needs from its settings and environment facts: the provider, the agent
//! config and the session store (new, continued, resumed or forked). Errors are `StartupError`s
//! with hints. Every mode calls this, in this process or through the daemon's `session/open`; it
//! reads the [`Settings`] resolved once from the flags and settings files, and the environment
//! it is handed, never the flags, the terminal or the process's own arguments.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::StartupError;
use crate::host::models::{Models, StartEndpoint};
use crate::kernel::agent::{AgentConfig, RetryPolicy};
use crate::kernel::clock::Clock;
use crate::kernel::compaction::CompactionPolicy;
use crate::kernel::op::QueueMode;
use crate::kernel::provider::model::Registry;
use crate::kernel::provider::Provider;
use crate::kernel::session::Store;
use crate::kernel::tool;
use crate::mode::Env;

pub mod context;
pub mod first_run;
pub mod hook_list;
pub mod mcp;
pub mod open;
mod provider;
pub mod sandbox;
pub mod sessions;
pub mod settings;
pub mod status_line;
pub mod trust;
pub mod worktree;

use provider::http_options;
pub use provider::{is_configured, list_models, model_list, provider, registry};
pub(crate) use sessions::session_error;
pub use sessions::{locate, open_session, require_regular_file, session_dir, session_dir_in};
pub use settings::Settings;

/// Everything a session host needs, from the flags and environment: the provider, the agent
/// config (`can_ask`: dialogs can be answered; false blocks such tool calls as a print run
/// does), the models, the session and the startup warnings. RPC
/// mode and the daemon's `session/open` start the same way.
pub async fn host_setup(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
    can_ask: bool,
) -> Result<crate::host::HostSetup, StartupError> {
    let (provider, endpoint) = provider::start(settings, env).await?;
    host_setup_at(settings, env, clock, can_ask, provider, endpoint)
}

/// `host_setup` with the provider chosen already (one without a URL: only it is offered
/// besides the providers with their own keys).
pub fn host_setup_with(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
    can_ask: bool,
    provider: Arc<dyn Provider>,
) -> Result<crate::host::HostSetup, StartupError> {
    host_setup_at(settings, env, clock, can_ask, provider, None)
}

/// `host_setup` with the provider chosen and where it is served.
fn host_setup_at(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
    can_ask: bool,
    provider: Arc<dyn Provider>,
    endpoint: Option<StartEndpoint>,
) -> Result<crate::host::HostSetup, StartupError> {
    // Warnings found after startup reach the session's clients as `notify`.
    let (late_tx, late_rx) = tokio::sync::mpsc::unbounded_channel();
    let late: crate::mcp::Warn = std::sync::Arc::new(move |w: String| {
        tracing::warn!("{w}");
        let _ = late_tx.send(w);
    });
    let (mut config, mut warnings, skills) = agent_config_with(settings, env, can_ask, Some(late))?;
    warnings.extend(clamp_thinking(provider.as_ref(), &mut config));
    let approval_timeout = seconds(settings.approval_timeout, "--approval-timeout")?;
    let models = models(settings, env, provider, endpoint)?;
    let opened = open_session(settings, env, clock)?;
    warnings.extend(opened.warnings);
    let (subagents, agent_warnings) = subagent_setup(settings, env);
    warnings.extend(agent_warnings);
    Ok(crate::host::HostSetup {
        config,
        models,
        clock: clock.clone(),
        store: opened.store,
        announce: opened.is_new,
        session_dir: session_dir(settings, env),
        prompt_dirs: prompt_dirs(settings, env),
        approval_timeout,
        unattended: false,
        warnings,
        skills,
        late_warnings: Some(late_rx),
        open_spec: settings.spec.clone(),
        on_saved_rules: Some(trust::saved_rules(settings, env)),
        subagents,
        worktree: env.worktree.clone(),
    })
}

/// The host setup of a print or JSON run in this process, from the agent settings its startup
/// has reported already (`config` and `skills` from [`agent_config`] without dialogs: calls
/// that need approval are blocked, later warnings go to stderr). The session is opened here,
/// after the prompt was read; its warnings are handed back for the caller to print. The host
/// publishes `said` (the startup warnings printed already) and those as `notify` events, as a
/// daemon session's host does.
pub fn headless_host_setup(
    settings: &Settings,
    env: &Env,
    clock: &Clock,
    (config, skills): (AgentConfig, Vec<crate::skills::Skill>),
    provider: Arc<dyn Provider>,
    said: Vec<String>,
) -> Result<(crate::host::HostSetup, Vec<String>), StartupError> {
    let models = models(settings, env, provider, None)?;
    let mut opened = open_session(settings, env, clock)?;
    let (subagents, agent_warnings) = subagent_setup(settings, env);
    opened.warnings.extend(agent_warnings);
    let setup = crate::host::HostSetup {
        config,
        models,
        clock: clock.clone(),
        store: opened.store,
        announce: opened.is_new,
        session_dir: session_dir(settings, env),
        prompt_dirs: prompt_dirs(settings, env),
        // No dialog ever opens without a client to answer it: the flag is not read.
        approval_timeout: seconds(settings.approval_timeout, "--approval-timeout")
            .unwrap_or(Duration::from_secs(60)),
        unattended: false,
        warnings: said.into_iter().chain(opened.warnings.clone()).collect(),
        skills,
        late_warnings: None,
        open_spec: settings.spec.clone(),
        on_saved_rules: Some(trust::saved_rules(settings, env)),
        subagents,
        worktree: env.worktree.clone(),
    };
    Ok((setup, opened.warnings))
}

/// Where a session's prompt templates are: keel's and Claude Code's directories.
pub fn prompt_dirs(settings: &Settings, env: &Env) -> crate::prompts::Dirs {
    let claude = settings.claude_home.as_deref();
    let root = crate::settings::project_root(&env.cwd);
    crate::prompts::Dirs::new(&env.keel_home, claude, &env.cwd, &root)
        .trusting(project_trusted(settings, env))
}

/// The subagents of a top session (`DESIGN.md` §17), with warnings about definitions left
/// out: none when `maxSubagentDepth` is 0 or `--tools` lists tools without `task`.
pub fn subagent_setup(
    settings: &Settings,
    env: &Env,
) -> (Option<crate::host::subagent::SubagentSetup>, Vec<String>) {
    let listed = settings
        .tools
        .as_ref()
        .is_none_or(|t| t.iter().any(|t| t.trim() == crate::kernel::subagent::TASK));
    if settings.max_subagent_depth == 0 || !listed {
        return (None, Vec::new());
    }
    let (agents, warnings) = crate::agents::load(
        &env.keel_home,
        settings.claude_home.as_deref(),
        &env.cwd,
        project_trusted(settings, env),
    );
    let setup = crate::host::subagent::SubagentSetup {
        agents: Arc::new(agents),
        max_depth: settings.max_subagent_depth,
        depth: 0,
        registry: None,
        parent_id: None,
        relay: None,
    };
    (Some(setup), warnings)
}

/// Whether the project's own definitions (agents, MCP servers) may load: `--trust-project`,
/// or the directory was trusted.
pub fn project_trusted(settings: &Settings, env: &Env) -> bool {
    settings.trust_project || trust::dir_trusted(&env.keel_home, &env.cwd)
}

/// The project's own agents and skills (instructions to the model, loaded only in a trusted
/// project), named for the trust question: `agent NAME`, `skill NAME`.
pub fn project_instructions(settings: &Settings, env: &Env) -> Vec<String> {
    let claude = settings.claude_home.as_deref();
    let (agents, _) = crate::agents::load(&env.keel_home, claude, &env.cwd, true);
    let mut out: Vec<String> = agents
        .iter()
        .filter(|a| matches!(a.origin, crate::kernel::subagent::Origin::Project(_)))
        .map(|a| format!("agent {}", a.name))
        .collect();
    let home = env.vars.get("HOME").map(Path::new);
    let roots = crate::skills::roots(&env.keel_home, home, claude, &env.cwd);
    let project: Vec<_> = roots.into_iter().filter(|r| r.1 == "project").collect();
    let (skills, _) = crate::skills::load(&project);
    out.extend(skills.iter().map(|s| format!("skill {}", s.name)));
    out
}

/// The models a session can switch to, from the flags and environment: `start`, served at
/// `endpoint`, and the providers with keys of their own.
pub fn models(
    settings: &Settings,
    env: &Env,
    start: Arc<dyn Provider>,
    endpoint: Option<StartEndpoint>,
) -> Result<Models, StartupError> {
    Ok(Models::new(
        registry(env)?,
        env.vars.clone(),
        http_options(settings)?,
        start,
        endpoint,
    ))
}

pub fn seconds(v: f64, flag: &str) -> Result<Duration, StartupError> {
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(StartupError::usage(format!(
            "{flag} needs a positive number of seconds, got {v}"
        )))
    }
}

/// The kernel settings for this process.
/// `keel debug prompt`: the exact system prompt and tools a run with these flags would send,
/// the context files it loaded (with their sizes) and the warnings; JSON with `--json`.
pub async fn debug_prompt(
    settings: &Settings,
    env: &Env,
    json: bool,
) -> Result<String, StartupError> {
    let (config, warnings, _) = agent_config(settings, env, false)?;
    let context = match settings.no_context_files {
        true => context::Context::default(),
        false => context::load(&env.keel_home, settings.claude_home.as_deref(), &env.cwd),
    };
    // The built-ins as the model of these settings is offered them (the job tools' shape
    // follows its API).
    let api = provider::api_of(settings, env).unwrap_or_default();
    let mut specs: Vec<tool::ToolSpec> = tool::offered(&config.tools, config.job_tools, &api)
        .into_iter()
        .filter_map(tool::spec)
        .collect();
    // `task`, as a run offers it when it has subagents.
    if let (Some(sub), _) = subagent_setup(settings, env) {
        specs.push(crate::kernel::subagent::task_spec(&sub.agents));
    }
    // `lsp`, when its switch is on.
    if crate::kernel::lsp::tool::offered(config.lsp.as_ref(), crate::kernel::lsp::tool::TOOL) {
        specs.push(crate::kernel::lsp::tool::spec());
    }
    // MCP servers' tools, as the first model call would see them (after its short wait).
    for source in &config.external_tools {
        source.ready().await;
        specs.extend(source.tools().into_iter().map(|t| t.spec));
    }
    if json {
        let v = serde_json::json!({
            "systemPrompt": config.system_prompt,
            "tools": specs.iter().map(|s| serde_json::json!({
                "name": s.name, "description": s.description, "parameters": s.parameters,
            })).collect::<Vec<_>>(),
            "contextFiles": context.files.iter().map(|f| serde_json::json!({
                "path": f.path, "bytes": f.bytes, "cut": f.cut,
            })).collect::<Vec<_>>(),
            "warnings": warnings,
        });
        return Ok(format!("{v}\n"));
    }
    let mut s = String::from("Context files:\n");
    if context.files.is_empty() {
        s.push_str(match settings.no_context_files {
            true => "  (not loaded: --no-context-files)\n",
            false => "  (none found)\n",
        });
    }
    for f in &context.files {
        let cut = match f.cut {
            0 => String::new(),
            n => format!(" ({n} bytes left out by the budget)"),
        };
        s.push_str(&format!("  {}  {} bytes{cut}\n", f.path.display(), f.bytes));
    }
    for w in &warnings {
        s.push_str(&format!("Warning: {w}\n"));
    }
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_ref()).collect();
    s.push_str(&format!("Tools: {}\n", names.join(", ")));
    s.push_str(&format!(
        "System prompt ({} bytes):\n{}\n",
        config.system_prompt.len(),
        config.system_prompt
    ));
    Ok(s)
}

/// The agent's settings from the flags, and the warnings about them (context files cut to
/// their budget or unreadable).
pub fn agent_config(
    settings: &Settings,
    env: &Env,
    can_ask: bool,
) -> Result<(AgentConfig, Vec<String>, Vec<crate::skills::Skill>), StartupError> {
    agent_config_with(settings, env, can_ask, None)
}

/// [`agent_config`] with where warnings found after startup go (`None`: stderr, or the log in
/// the TUI).
pub fn agent_config_with(
    settings: &Settings,
    env: &Env,
    can_ask: bool,
    late: Option<crate::mcp::Warn>,
) -> Result<(AgentConfig, Vec<String>, Vec<crate::skills::Skill>), StartupError> {
    let (tools, mcp_allow) = match &settings.tools {
        None => (tool::ALL.iter().map(|s| s.to_string()).collect(), None),
        Some(list) => {
            let (mcp, list): (Vec<String>, Vec<String>) = list
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .partition(|t| t.starts_with("mcp__"));
            // `task` is offered through the session's subagents, not as a built-in.
            let list: Vec<String> = list
                .into_iter()
                .filter(|t| t != crate::kernel::subagent::TASK)
                .collect();
            if let Some(bad) = list.iter().find(|t| tool::spec(t).is_none()) {
                return Err(
                    StartupError::usage(format!("unknown tool `{bad}` in --tools"))
                        .hint(format!(
                            "available tools: {}, and MCP tools as mcp__server__tool, mcp__server or mcp__server__*",
                            tool::ALL.join(",")
                        )),
                );
            }
            (list, Some(mcp))
        }
    };
    let mut append = Vec::new();
    for extra in &settings.append_system_prompt {
        // A relative path is the session's directory's file (the client's, in the daemon).
        let path = env.cwd.join(extra);
        let text = if path.is_file() {
            std::fs::read_to_string(&path).map_err(|e| {
                StartupError::config(format!("cannot read {}", path.display())).cause(e.to_string())
            })?
        } else {
            extra.clone()
        };
        append.push(text);
    }
    let context = match settings.no_context_files {
        true => context::Context::default(),
        false => context::load(&env.keel_home, settings.claude_home.as_deref(), &env.cwd),
    };
    let today = crate::kernel::clock::iso(
        env.fixed_clock
            .map(|ms| ms as i64)
            .unwrap_or_else(|| crate::kernel::clock::Clock::system().now_ms()),
    );
    let mut warnings = settings.warnings.clone();
    warnings.extend(context.warnings.iter().cloned());
    let roots = crate::skills::roots(
        &env.keel_home,
        env.vars.get("HOME").map(Path::new),
        settings.claude_home.as_deref(),
        &env.cwd,
    );
    let (roots, untrusted) = crate::skills::trusted_roots(roots, project_trusted(settings, env));
    warnings.extend(untrusted);
    let (skills, skill_warnings) = crate::skills::load(&roots);
    warnings.extend(skill_warnings);
    let trust = trust::Trust::read(settings, env);
    warnings.extend(trust.warnings());
    let (rules, rule_warnings) = settings.rules(env, &trust);
    warnings.extend(rule_warnings);
    let catalog = crate::skills::catalog(&skills, tools.iter().any(|t| t == "read"), &mut warnings);
    let system_prompt = context::system_prompt(&context::PromptParts {
        base: settings.system_prompt.as_deref(),
        tools: &tools,
        append: &append,
        context: &context,
        skills: catalog.as_deref(),
        cwd: &env.cwd,
        date: today.get(..10).unwrap_or(&today),
    });
    let tool_env = tool_env(settings, env).with_vars(tool_vars(settings, env, &trust));
    let sandbox_config = settings.sandbox(env, &trust, &mut warnings);
    if !can_ask && !settings.allow_home {
        refuse_home(&sandbox_config, env)?;
    }
    let (external_tools, mcp_warnings) =
        mcp::start(settings, env, mcp_allow, &tool_env, &trust, late)?;
    warnings.extend(mcp_warnings);
    let hooks = settings.hooks(env, &tool_env, &trust, &mut warnings);
    let temp_dir = env.keel_home.join("tmp");
    // A session that may run `bash` in a sandbox has its private /tmp (and, where bubblewrap
    // was never probed, its zygote's start is the probe).
    let sandboxed = sandbox_config.mode != crate::kernel::sandbox::SandboxMode::Off;
    // Named, not created: a run that runs no command makes no directory.
    let sandbox_tmp = match sandboxed && tools.iter().any(|t| t == "bash") {
        true => Some(crate::kernel::tool::bash::private_tmp_path(
            &tool_env, &temp_dir,
        )),
        false => None,
    };
    // The session's own spill directory is the one part of $KEEL_HOME its tools may read.
    let spill = match sandboxed {
        true => Some(tool_env.spill_path(&temp_dir)),
        false => None,
    };
    let sandbox = crate::kernel::sandbox::Sandbox::for_session_at(
        &sandbox_config,
        &env.cwd,
        &env.keel_home,
        env.tool_vars.as_ref().unwrap_or(&env.vars),
        &mut warnings,
        sandbox_tmp.as_deref(),
        spill.as_deref(),
    );
    let sandbox = std::sync::Arc::new(sandbox);
    let lsp = crate::kernel::lsp::Lsp::new(
        &settings.lsp,
        crate::kernel::lsp::Place {
            root: env.cwd.clone(),
            sandbox: sandbox.clone(),
            env: tool_env.clone(),
            temp_dir: temp_dir.clone(),
        },
    );
    let config = AgentConfig {
        cwd: env.cwd.clone(),
        system_prompt,
        tools,
        external_tools,
        max_turns: settings.max_turns,
        max_repeated_failures: settings.max_repeated_failures,
        permission: settings.permission,
        can_ask,
        steering_mode: QueueMode::OneAtATime,
        follow_up_mode: QueueMode::OneAtATime,
        thinking_level: settings.thinking.map_or("off", |t| t.word()).to_string(),
        bash_timeout: Duration::from_secs(600),
        job_tools: settings.jobs.tools.unwrap_or_default(),
        job_limits: crate::kernel::jobs::JobLimits {
            max_live: settings.jobs.max_live.unwrap_or(16).max(1),
            background_on_timeout: settings.jobs.background_on_timeout.unwrap_or(true),
            ..Default::default()
        },
        temp_dir,
        tool_env,
        files: Default::default(),
        retry: RetryPolicy {
            enabled: settings.max_retries > 0,
            max_attempts: settings.max_retries,
            base_delay_ms: env
                .retry_base_ms
                .unwrap_or(RetryPolicy::default().base_delay_ms),
            ..RetryPolicy::default()
        },
        compaction: CompactionPolicy {
            enabled: settings.auto_compaction,
            ..CompactionPolicy::default()
        },
        session_id: None,
        output_schema: output_schema(settings, env)?,
        max_cost: settings.max_cost,
        budget: None,
        rules: Arc::new(rules),
        hooks,
        sandbox,
        checkpoints: settings.checkpoints(env, &mut warnings),
        subagents: None,
        lsp,
    };
    Ok((config, warnings, skills))
}

/// The `--output-schema` schema: the named file (relative to the session's directory) or,
/// as Claude's `--json-schema` takes it, the schema's text. Unreadable, not JSON or not a JSON
/// Schema: a usage error.
fn output_schema(
    settings: &Settings,
    env: &Env,
) -> Result<Option<Arc<crate::kernel::output_schema::OutputSchema>>, StartupError> {
    let Some(arg) = &settings.output_schema else {
        return Ok(None);
    };
    let (text, what) = if arg.trim_start().starts_with('{') {
        (arg.clone(), "the --output-schema text".to_string())
    } else {
        let path = env.cwd.join(arg);
        let what = format!("the --output-schema file {}", path.display());
        // A FIFO would block the read, a device could be read forever.
        if std::fs::metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(StartupError::usage(format!("{what} is not a regular file")));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| StartupError::usage(format!("cannot read {what}")).cause(e.to_string()))?;
        (text, what)
    };
    let schema = crate::kernel::output_schema::OutputSchema::parse(&text).map_err(|e| {
        StartupError::usage(format!("cannot use {what}"))
            .cause(e.message)
            .hint("pass a JSON Schema (draft 2020-12 unless its `$schema` names another)")
    })?;
    Ok(Some(Arc::new(schema)))
}

/// The environment the session's tools start from: the session's own (a daemon session's: its
/// client's; `None`: this process's) with the settings' `env` set over it (a project's own
/// only as `trust` allows).
pub(crate) fn tool_vars(
    settings: &Settings,
    env: &Env,
    trust: &trust::Trust,
) -> Option<std::collections::BTreeMap<String, String>> {
    let set = settings.env_vars(trust);
    if set.is_empty() {
        return env.tool_vars.clone();
    }
    let mut vars = env.tool_vars.clone().unwrap_or_else(|| env.vars.clone());
    vars.extend(set);
    Some(vars)
}

/// An opened session: the store, whether it is new, and load warnings for stderr.
pub struct OpenedSession {
    pub store: Store,
    pub is_new: bool,
    pub warnings: Vec<String>,
}

/// A run nobody watches (`can_ask` false) in a directory that is or holds the home directory
/// is refused before anything starts: the model could write everything in it but the secrets
/// and the protected dotfiles, and nobody would see it happen (issue 43, point 13).
fn refuse_home(
    config: &crate::kernel::sandbox::SandboxConfig,
    env: &Env,
) -> Result<(), StartupError> {
    let vars = env.tool_vars.as_ref().unwrap_or(&env.vars);
    match crate::kernel::sandbox::home_held(config, &env.cwd, &env.keel_home, vars) {
        None => Ok(()),
        Some(home) => Err(StartupError::usage(format!(
            "refusing to run unwatched in {}: it holds the home directory {}, all of which but \
             the secrets and the shell, git, PATH and autostart files the model could write",
            env.cwd.display(),
            home.display()
        ))
        .hint("start keel in a project directory, or pass --allow-home")),
    }
}

/// Checks flag combinations that can never work, before anything is opened.
pub fn check_session_flags(settings: &Settings, interactive: bool) -> Result<(), StartupError> {
    let chosen: Vec<&str> = [
        (settings.continue_, "--continue"),
        (settings.resume.is_some(), "--resume"),
        (settings.session.is_some(), "--session"),
        (settings.session_id.is_some(), "--session-id"),
        (settings.no_session, "--no-session"),
        (settings.fork.is_some(), "--fork"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if chosen.len() > 1 {
        return Err(StartupError::usage(format!(
            "{} cannot be used together",
            chosen.join(" and ")
        ))
        .hint("choose one way to pick the session"));
    }
    if settings.resume.as_deref() == Some("") && !interactive {
        return Err(StartupError::usage(
            "--resume without an id needs the interactive session picker",
        )
        .hint("pass the session id: keel --resume <ID> (a unique prefix is enough)"));
    }
    if let Some(id) = &settings.session_id {
        if !valid_session_id(id) {
            return Err(StartupError::usage(format!("invalid --session-id `{id}`"))
                .hint("use letters, digits, '.', '_' and '-', starting and ending with a letter or digit"));
        }
    }
    Ok(())
}

fn valid_session_id(id: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    !id.is_empty()
        && id.chars().all(ok_char)
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// The directory sessions of `cwd` live in.
/// Clamps `config`'s thinking level to what `provider`'s model supports; returns the warning
/// to show when it had to change.
pub fn clamp_thinking(provider: &dyn Provider, config: &mut AgentConfig) -> Option<String> {
    let thinking = provider.info().clamp_thinking(&config.thinking_level);
    if thinking == config.thinking_level {
        return None;
    }
    let warning = format!(
        "{} does not support thinking level {}; using {thinking}",
        provider.model(),
        config.thinking_level
    );
    config.thinking_level = thinking;
    Some(warning)
}

/// What tool processes must not see: every provider's key variable, any variable holding
/// a secret of `settings` and `env` (`--api-key`, a models.json key, a key variable's value),
/// and every credential variable `sandbox.passEnv` does not name.
pub fn tool_env(settings: &Settings, env: &Env) -> tool::ToolEnv {
    let trust = trust::Trust::read(settings, env);
    tool::ToolEnv::for_credentials(
        // A broken models.json fails in `provider`; the built-in names are scrubbed anyway.
        &registry(env).unwrap_or_else(|_| Registry::builtin()),
        settings.api_key.as_slice(),
        &env.vars,
        &settings.pass_env(&trust),
    )
}
