//! MCP servers as a kernel `ToolSource`: every configured server connects in its own
//! background task at startup; the first model call waits at most [`WAIT_BUDGET`] for those
//! still connecting; a server that fails, hangs or crashes becomes a warning and offers no
//! tools. Never blocks startup, never prints (warnings go to the sink it is given).

pub mod config;
pub mod names;
pub mod pool;
pub mod result;
pub mod server;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use crate::kernel::tool::external::{BoxFuture, ExternalCall, ExternalSpec, ToolSource};
use crate::kernel::tool::{ToolEnv, ToolOutput, ToolSpec};
use config::ServerConfig;
use server::{Server, Status};

/// The longest the first model call waits for servers still connecting.
pub const WAIT_BUDGET: Duration = Duration::from_secs(2);

/// The longest a call's result waits for a `list_changed` refresh it caused.
pub const REFRESH_WAIT: Duration = Duration::from_secs(2);

/// Where warnings about servers go (stderr in print and JSON modes, a log elsewhere).
pub type Warn = Arc<dyn Fn(String) + Send + Sync>;

/// The MCP servers of one session, shared with the other sessions of this process whose
/// configs are identical (`pool`). Dropping it stops the servers no other session uses.
pub struct McpTools {
    servers: Vec<Arc<Server>>,
    _uses: Vec<pool::Use>,
    changed: Arc<Notify>,
    waited: AtomicBool,
    wait_budget: Duration,
    /// `--tools` entries naming MCP tools (`mcp__srv__tool`, `mcp__srv`, `mcp__srv__*`);
    /// `None` offers every MCP tool.
    allow: Option<Vec<String>>,
    env: ToolEnv,
    warn: Warn,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTools")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.config.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What starting the servers needs.
pub struct Start {
    pub servers: Vec<ServerConfig>,
    /// The session's directory: stdio servers without their own `cwd` run there.
    pub cwd: PathBuf,
    /// The environment stdio servers may inherit from (filtered by the allowlist).
    pub vars: BTreeMap<String, String>,
    /// `$KEEL_HOME/logs`: each stdio server's stderr log.
    pub log_dir: PathBuf,
    pub wait_budget: Duration,
    pub allow: Option<Vec<String>>,
    pub env: ToolEnv,
    pub warn: Warn,
}

impl McpTools {
    /// Starts connecting every server in the background (must run inside a tokio runtime).
    pub fn start(s: Start) -> Arc<McpTools> {
        let place = pool::Place {
            cwd: &s.cwd,
            vars: &s.vars,
            log_dir: &s.log_dir,
        };
        let uses: Vec<pool::Use> = s
            .servers
            .into_iter()
            .map(|config| pool::acquire(config, &place, s.warn.clone()))
            .collect();
        let servers = uses.iter().map(|u| u.running.server.clone()).collect();
        Arc::new(McpTools {
            servers,
            _uses: uses,
            changed: pool::changed(),
            waited: AtomicBool::new(false),
            wait_budget: s.wait_budget,
            allow: s.allow,
            env: s.env,
            warn: s.warn,
        })
    }

    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// Waits until no server is still connecting, or `limit` passed.
    pub async fn settle(&self, limit: Duration) {
        self.wait_until(limit, |s| s.status() != Status::Connecting)
            .await
    }

    /// Waits until `done` holds for every server, or `limit` passed.
    async fn wait_until(&self, limit: Duration, done: impl Fn(&Server) -> bool) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.servers.iter().all(|s| done(s)) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// Every offered tool: its visible name, server and raw tool, in server then list order.
    fn offered(&self) -> Vec<(String, Arc<Server>, server::RawTool)> {
        let mut raw: Vec<(Arc<Server>, server::RawTool)> = Vec::new();
        for s in &self.servers {
            raw.extend(s.tools().into_iter().map(|t| (s.clone(), t)));
        }
        let pairs: Vec<(String, String)> = raw
            .iter()
            .map(|(s, t)| (s.config.name.clone(), t.name.clone()))
            .collect();
        let taken: Vec<String> = crate::kernel::tool::ALL
            .iter()
            .map(|s| s.to_string())
            .collect();
        names::assign(&pairs, &taken)
            .into_iter()
            .zip(raw)
            .filter_map(|(name, (s, t))| Some((name?, s, t)))
            .filter(|(name, s, _)| self.allowed(name, &s.config.name))
            .collect()
    }

    fn allowed(&self, name: &str, server: &str) -> bool {
        let Some(allow) = &self.allow else {
            return true;
        };
        let prefix = names::visible(server, "");
        allow.iter().any(|p| {
            p == name
                || prefix.strip_suffix("__") == Some(p.as_str())
                || p.strip_suffix('*')
                    .is_some_and(|head| name.starts_with(head))
        })
    }
}

impl ToolSource for McpTools {
    fn ready(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !self.waited.swap(true, Ordering::SeqCst) {
                self.settle(self.wait_budget).await;
                for s in self
                    .servers
                    .iter()
                    .filter(|s| s.status() == Status::Connecting)
                {
                    (self.warn)(format!(
                        "MCP server `{}` is still connecting after {}s; the first request goes without its tools",
                        s.config.name,
                        self.wait_budget.as_secs_f64()
                    ));
                }
            }
        })
    }

    fn tools(&self) -> Vec<ExternalSpec> {
        self.offered()
            .into_iter()
            .map(|(name, _, t)| ExternalSpec {
                spec: ToolSpec {
                    name: name.into(),
                    description: names::description(&t.description).into(),
                    parameters: t.schema,
                },
                read_only: t.read_only,
            })
            .collect()
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: &'a Value,
        ctx: ExternalCall,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some((_, server, tool)) = self.offered().into_iter().find(|(n, _, _)| n == name)
            else {
                return ToolOutput::error(format!("MCP tool `{name}` is no longer available"));
            };
            let called = server
                .call(&tool.name, args, &ctx.abort, ctx.progress.clone())
                .await;
            // A `list_changed` sent with the call is followed before the next request.
            self.wait_until(REFRESH_WAIT, |s| !s.refreshing()).await;
            match called {
                Ok(v) => result::map(
                    &v,
                    &result::Origin {
                        server: &server.config.name,
                        tool: &tool.name,
                    },
                    &self.env,
                    &ctx.temp_dir,
                ),
                Err(why) => ToolOutput::error(format!(
                    "MCP tool `{}` of server `{}` failed: {why}",
                    tool.name, server.config.name
                )),
            }
        })
    }
}
