//! Wires MCP servers into a run: the config files the flags name, the trust check, and the
//! background start of the servers as the agent config's external tool source. Connection
//! failures found later go to the host's clients as `notify` (TUI, RPC, daemon; also the
//! log), and to stderr in print and JSON modes.

use std::sync::Arc;

use crate::error::StartupError;
use crate::kernel::tool::external::ToolSource;
use crate::kernel::tool::ToolEnv;
use crate::mcp::config::{self, Sources};
use crate::mcp::{McpTools, Start, Warn, WAIT_BUDGET};
use crate::mode::{Env, Mode};
use crate::setup::Settings;

/// Which config files the flags choose.
pub fn sources(settings: &Settings, env: &Env) -> Sources {
    Sources {
        files: settings
            .mcp_config
            .iter()
            .map(|f| env.cwd.join(f))
            .collect(),
        strict: settings.strict_mcp_config,
        disabled: settings.no_mcp,
        project_dirs: project_dirs(&env.cwd),
        project: super::trust::servers(settings, env),
        settings: Vec::new(),
    }
}

/// The directories whose MCP files are the project's: its root, then `cwd` below it.
pub fn project_dirs(cwd: &std::path::Path) -> Vec<std::path::PathBuf> {
    let root = crate::settings::project_root(cwd);
    let mut dirs = vec![root.clone()];
    if root != cwd {
        dirs.push(cwd.to_path_buf());
    }
    dirs
}

/// The configured servers and the warnings about skipped ones; a broken file is a config error.
pub fn load(settings: &Settings, env: &Env) -> Result<config::Loaded, StartupError> {
    for f in &settings.mcp_config {
        let p = env.cwd.join(f);
        if !p.is_file() {
            return Err(
                StartupError::config(format!("no MCP config file at {}", p.display()))
                    .hint("--mcp-config takes the path of a JSON file like {\"mcpServers\": {…}}"),
            );
        }
    }
    // `${VAR}` expands from the session's environment (a daemon session's: the client's).
    let vars = env.tool_vars.as_ref().unwrap_or(&env.vars);
    let hint = |e: config::ConfigError| {
        StartupError::config(e.message).hint("see docs/mcp.md for the file's shape")
    };
    let mut sources = sources(settings, env);
    let (servers, skipped) = trusted_servers(&settings.mcp_servers, &sources.project);
    sources.settings = settings_servers(&servers, vars).map_err(hint)?;
    let mut loaded = config::load(&sources, &env.keel_home, vars).map_err(hint)?;
    loaded.warnings.extend(skipped_warning(&skipped));
    Ok(loaded)
}

/// Settings servers by name, each with the file it came from.
type SettingsServers =
    std::collections::BTreeMap<String, crate::settings::Sourced<serde_json::Value>>;

/// The settings files' `mcpServers` that may start, and the names of those left out (a
/// changed one says so): a project's own files' start programs as `.mcp.json`'s do, so only
/// as trusted content.
pub fn trusted_servers(
    servers: &SettingsServers,
    trust: &config::ProjectTrust,
) -> (SettingsServers, Vec<String>) {
    let (kept, left): (SettingsServers, SettingsServers) =
        servers.clone().into_iter().partition(|(name, s)| {
            !s.origin.level.is_project() || trust.allows(name, &config::digest(&s.value))
        });
    (kept, left.into_keys().map(|n| trust.why_not(&n)).collect())
}

/// Every MCP server the project brings (its files' and its settings files'), with the digest
/// of its entry, trusted or not: what the trust question lists and a yes records.
pub fn project_servers(settings: &Settings, env: &Env) -> Vec<(String, String)> {
    let sources = sources(settings, env);
    let vars = env.tool_vars.as_ref().unwrap_or(&env.vars);
    let mut out: Vec<(String, String)> = config::project_servers(&sources, vars)
        .into_iter()
        .map(|s| (s.name, s.digest))
        .collect();
    if !(settings.trust_project || sources.strict || sources.disabled) {
        let project = settings
            .mcp_servers
            .iter()
            .filter(|(_, s)| s.origin.level.is_project());
        out.extend(project.map(|(n, s)| (n.clone(), config::digest(&s.value))));
    }
    out
}

/// The one warning about the project's settings servers left out.
fn skipped_warning(skipped: &[String]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    Some(format!(
        "skipped the project's MCP servers {} (its settings files): not trusted; pass --trust-project or trust them in keel's TUI",
        skipped.join(", "),
    ))
}

/// The settings files' `mcpServers`, read as `mcp.json`'s (each names its file).
pub fn settings_servers(
    servers: &SettingsServers,
    vars: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<config::ServerConfig>, config::ConfigError> {
    let mut out = Vec::new();
    for (name, entry) in servers {
        let text = serde_json::json!({"mcpServers": {name.as_str(): &entry.value}}).to_string();
        let origin = std::path::PathBuf::from(entry.origin.to_string());
        out.extend(config::parse(&text, &origin, vars)?);
    }
    Ok(out)
}

/// The external tool sources of an agent config.
type ToolSources = Vec<Arc<dyn ToolSource>>;

/// Starts the configured servers in the background (nothing when there are none, or outside
/// a runtime, as in `keel debug prompt`).
pub fn start(
    settings: &Settings,
    env: &Env,
    allow: Option<Vec<String>>,
    tool_env: &ToolEnv,
    trust: &super::trust::Trust,
    late: Option<Warn>,
) -> Result<(ToolSources, Vec<String>), StartupError> {
    let loaded = load(settings, env)?;
    if loaded.servers.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return Ok((Vec::new(), loaded.warnings));
    }
    let tools = McpTools::start(Start {
        servers: loaded.servers,
        cwd: env.cwd.clone(),
        // A daemon session's servers get the session's environment, as its other tools do.
        vars: super::tool_vars(settings, env, trust).unwrap_or_else(|| env.vars.clone()),
        log_dir: env.keel_home.join("logs"),
        wait_budget: WAIT_BUDGET,
        allow,
        env: tool_env.clone(),
        warn: late.unwrap_or_else(|| warn_sink(settings.mode)),
    });
    Ok((vec![tools as Arc<dyn ToolSource>], loaded.warnings))
}

/// Where warnings found after startup go: the TUI owns the screen, so its go to the log.
pub fn warn_sink(mode: Mode) -> Warn {
    match mode {
        Mode::Tui => Arc::new(|w: String| tracing::warn!("{w}")),
        _ => Arc::new(|w: String| {
            let _ = std::io::Write::write_all(
                &mut crate::output::log_writer(),
                format!("Warning: {w}\n").as_bytes(),
            );
        }),
    }
}
