//! `keel mcp list|tools NAME`: connects the configured MCP servers (each within its startup
//! timeout) and reports them on stdout, as a table or JSON; exit 1 when one failed.

use std::path::PathBuf;
use std::sync::Arc;

use super::Logs;
use crate::error::StartupError;
use crate::exit::Exit;
use crate::kernel::tool::external::ToolSource;
use crate::kernel::tool::ToolEnv;
use crate::mcp::config::{self, Sources};
use crate::mcp::{McpTools, Start, WAIT_BUDGET};
use crate::mode::Env;

/// `keel mcp …`: the configured MCP servers.
#[derive(Debug, clap::Args)]
pub struct McpCli {
    #[command(subcommand)]
    pub command: McpCommand,
    /// Also the servers of this file; repeatable.
    #[arg(long, value_name = "FILE", global = true)]
    pub mcp_config: Vec<PathBuf>,
    /// Only the servers of --mcp-config files.
    #[arg(long, global = true)]
    pub strict_mcp_config: bool,
    /// Include this directory's .mcp.json and .keel/mcp.json.
    #[arg(long, global = true)]
    pub trust_project: bool,
    /// JSON output.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Connect to every server and show its transport, status, tool count and last error
    /// (exit 1 when one failed).
    List,
    /// Connect to one server and list its tools as the model sees them.
    Tools {
        /// The server's name in the config.
        name: String,
    },
}

/// `keel mcp …`: logs on stderr; exit 1 when a server failed.
pub fn run(cli: McpCli) -> Exit {
    super::run(Logs::Stderr, async move |env, out| {
        let (text, ok) = command(&cli, env).await?;
        Ok(match out.out(text.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) if ok => Exit::Success,
            Ok(()) => Exit::Failed,
            Err(_) => out.stdout_exit(),
        })
    })
}

/// `keel mcp list` and `keel mcp tools NAME`: connects the servers (each within its startup
/// timeout) and reports them. Returns the text for stdout and whether every server worked.
async fn command(cli: &McpCli, env: &Env) -> Result<(String, bool), StartupError> {
    let hint = |e: config::ConfigError| StartupError::config(e.message).hint("see docs/mcp.md");
    // The servers a run in this directory starts: the settings files' too, and the project's
    // as far as they are trusted.
    let mut spec = crate::wire::protocol::spec::SessionSpec::new();
    spec.trust.project = cli.trust_project;
    spec.mcp.config = cli.mcp_config.clone();
    spec.mcp.strict = cli.strict_mcp_config;
    let settings = crate::setup::Settings::resolve(&spec, crate::mode::Mode::Print, env)?;
    let sources = crate::setup::mcp::sources(&settings, env);
    let (servers, _) = crate::setup::mcp::trusted_servers(&settings.mcp_servers, &sources.project);
    let sources = Sources {
        settings: crate::setup::mcp::settings_servers(&servers, &env.vars).map_err(hint)?,
        ..sources
    };
    let mut loaded = config::load(&sources, &env.keel_home, &env.vars).map_err(hint)?;
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
