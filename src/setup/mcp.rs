//! Wires MCP servers into a run: the config files the flags name, the trust check, and the
//! background start of the servers as the agent config's external tool source. Connection
//! failures found later go to the host's clients as `notify` (TUI, RPC, daemon; also the
//! log), and to stderr in print and JSON modes.

use std::sync::Arc;

use crate::cli::args::Cli;
use crate::error::StartupError;
use crate::kernel::tool::external::ToolSource;
use crate::kernel::tool::ToolEnv;
use crate::mcp::config::{self, Sources};
use crate::mcp::{McpTools, Start, Warn, WAIT_BUDGET};
use crate::mode::{self, Env, Mode};

/// Which config files the flags choose.
pub fn sources(cli: &Cli, env: &Env) -> Sources {
    Sources {
        files: cli.mcp_config.iter().map(|f| env.cwd.join(f)).collect(),
        strict: cli.strict_mcp_config,
        disabled: cli.no_mcp,
        trust_project: cli.trust_project,
    }
}

/// The configured servers and the warnings about skipped ones; a broken file is a config error.
pub fn load(cli: &Cli, env: &Env) -> Result<config::Loaded, StartupError> {
    for f in &cli.mcp_config {
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
    config::load(&sources(cli, env), &env.keel_home, &env.cwd, vars).map_err(|e| {
        StartupError::config(e).hint("see README, \"MCP servers\", for the file's shape")
    })
}

/// The external tool sources of an agent config.
type ToolSources = Vec<Arc<dyn ToolSource>>;

/// Starts the configured servers in the background (nothing when there are none, or outside
/// a runtime, as in `keel debug prompt`).
pub fn start(
    cli: &Cli,
    env: &Env,
    allow: Option<Vec<String>>,
    tool_env: &ToolEnv,
    late: Option<Warn>,
) -> Result<(ToolSources, Vec<String>), StartupError> {
    let loaded = load(cli, env)?;
    if loaded.servers.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return Ok((Vec::new(), loaded.warnings));
    }
    let tools = McpTools::start(Start {
        servers: loaded.servers,
        cwd: env.cwd.clone(),
        // A daemon session's servers get the session's environment, as its other tools do.
        vars: env.tool_vars.clone().unwrap_or_else(|| env.vars.clone()),
        log_dir: env.keel_home.join("logs"),
        wait_budget: WAIT_BUDGET,
        allow,
        env: tool_env.clone(),
        warn: late.unwrap_or_else(|| warn_sink(mode::resolve(cli, env))),
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

/// `keel mcp list` and `keel mcp tools NAME`: connects the servers (each within its startup
/// timeout) and reports them. Returns the text for stdout and whether every server worked.
pub async fn command(cli: &crate::cli::McpCli, env: &Env) -> Result<(String, bool), StartupError> {
    use crate::cli::McpCommand;
    let sources = Sources {
        files: cli.mcp_config.iter().map(|f| env.cwd.join(f)).collect(),
        strict: cli.strict_mcp_config,
        disabled: false,
        trust_project: cli.trust_project,
    };
    let mut loaded = config::load(&sources, &env.keel_home, &env.cwd, &env.vars)
        .map_err(|e| StartupError::config(e).hint("see README, \"MCP servers\""))?;
    if let McpCommand::Tools { name } = &cli.command {
        let names: Vec<String> = loaded.servers.iter().map(|s| s.name.clone()).collect();
        loaded.servers.retain(|s| &s.name == name);
        if loaded.servers.is_empty() {
            return Err(
                StartupError::usage(format!("no MCP server named `{name}`")).hint(
                    match names.is_empty() {
                        true => "no servers are configured (see keel mcp list)".to_string(),
                        false => format!("configured servers: {}", names.join(", ")),
                    },
                ),
            );
        }
    }
    let longest = loaded
        .servers
        .iter()
        .map(|s| s.startup_timeout)
        .max()
        .unwrap_or_default();
    let tools = McpTools::start(Start {
        servers: loaded.servers,
        cwd: env.cwd.clone(),
        vars: env.vars.clone(),
        log_dir: env.keel_home.join("logs"),
        wait_budget: WAIT_BUDGET,
        allow: None,
        env: ToolEnv::new(Vec::new()),
        // Failures are in the report itself.
        warn: Arc::new(|_| {}),
    });
    tools
        .settle(longest + std::time::Duration::from_secs(1))
        .await;
    let ok = tools
        .servers()
        .iter()
        .all(|s| s.status() == crate::mcp::server::Status::Ready);
    let text = match &cli.command {
        McpCommand::List => list_report(&tools, &loaded.warnings, cli.json),
        McpCommand::Tools { .. } => tools_report(&tools, cli.json),
    };
    Ok((text, ok))
}

fn list_report(tools: &McpTools, warnings: &[String], json: bool) -> String {
    use crate::mcp::server::Status;
    let rows: Vec<serde_json::Value> = tools
        .servers()
        .iter()
        .map(|s| {
            let status = s.status();
            serde_json::json!({
                "name": s.config.name,
                "transport": s.config.transport.word(),
                "status": status.word(),
                "tools": s.tools().len(),
                "protocolVersion": s.protocol(),
                "error": match &status { Status::Failed(why) => Some(why.clone()), _ => None },
                "source": s.config.source.display().to_string(),
            })
        })
        .collect();
    if json {
        let v = serde_json::json!({"servers": rows, "warnings": warnings});
        return format!("{v}\n");
    }
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("No MCP servers configured ($KEEL_HOME/mcp.json, --mcp-config, a trusted project's .mcp.json).\n");
    }
    let width = rows
        .iter()
        .map(|r| r["name"].as_str().unwrap_or("").len())
        .max()
        .unwrap_or(4)
        .max(4);
    if !rows.is_empty() {
        out.push_str(&format!(
            "{:width$}  TRANSPORT  STATUS      TOOLS  ERROR\n",
            "NAME"
        ));
    }
    for r in &rows {
        let line = format!(
            "{:width$}  {:9}  {:10}  {:>5}  {}",
            r["name"].as_str().unwrap_or(""),
            r["transport"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            r["tools"].as_u64().unwrap_or(0),
            r["error"].as_str().unwrap_or(""),
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for w in warnings {
        out.push_str(&format!("Warning: {w}\n"));
    }
    out
}

fn tools_report(tools: &McpTools, json: bool) -> String {
    let offered = tools.tools();
    if json {
        let v: Vec<serde_json::Value> = offered
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.spec.name, "description": t.spec.description,
                    "readOnly": t.read_only, "inputSchema": t.spec.parameters,
                })
            })
            .collect();
        let error = tools.servers().first().and_then(|s| match s.status() {
            crate::mcp::server::Status::Failed(why) => Some(why),
            _ => None,
        });
        return format!("{}\n", serde_json::json!({"tools": v, "error": error}));
    }
    let mut out = String::new();
    for s in tools.servers() {
        if let crate::mcp::server::Status::Failed(why) = s.status() {
            out.push_str(&format!(
                "Error: MCP server `{}` failed: {why}\n",
                s.config.name
            ));
        }
    }
    for t in &offered {
        let first = t.spec.description.lines().next().unwrap_or("");
        let ro = if t.read_only { " (read-only)" } else { "" };
        out.push_str(&format!("{}{ro}  {first}\n", t.spec.name));
    }
    out
}
