//! The MCP servers an ACP client hands a session (`session/new`, `session/load`,
//! `session/resume`): written in keel's own config shape to a private temporary file that the
//! session's startup reads like any `--mcp-config` file (one path for every server keel runs:
//! the same start, names, permissions, timeouts and process rules), removed once read.
//! `sse` servers are refused with a warning, as keel's config refuses the old HTTP+SSE
//! transport.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::schema::McpServer;

/// keel's `{"mcpServers": {…}}` for `servers`, and a warning per server left out.
pub fn config(servers: &[McpServer]) -> (Value, Vec<String>) {
    let mut map = Map::new();
    let mut warnings = Vec::new();
    for server in servers {
        match server {
            McpServer::Stdio(s) => {
                let env: Map<String, Value> = s
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), json!(e.value)))
                    .collect();
                map.insert(
                    s.name.clone(),
                    json!({"command": s.command, "args": s.args, "env": env}),
                );
            }
            McpServer::Http(h) => {
                let headers: Map<String, Value> = h
                    .headers
                    .iter()
                    .map(|e| (e.name.clone(), json!(e.value)))
                    .collect();
                map.insert(
                    h.name.clone(),
                    json!({"type": "http", "url": h.url, "headers": headers}),
                );
            }
            McpServer::Sse(s) => warnings.push(format!(
                "MCP server `{}` from the client is left out: keel speaks Streamable HTTP, not the old HTTP+SSE transport",
                s.name
            )),
            _ => warnings.push("an MCP server of an unknown transport from the client is left out".into()),
        }
    }
    (json!({"mcpServers": map}), warnings)
}

/// Writes `config` to a new private file in `dir` (0600, in a 0700 directory); the file goes
/// away when the returned path is dropped.
pub fn write(config: &Value, dir: &Path) -> std::io::Result<tempfile::TempPath> {
    crate::kernel::private::create_dir_all(dir)?;
    let file = tempfile::Builder::new()
        .prefix(".acp-mcp-")
        .suffix(".json")
        .tempfile_in(dir)?;
    crate::kernel::private::fix_mode(file.as_file())?;
    std::io::Write::write_all(&mut file.as_file(), config.to_string().as_bytes())?;
    Ok(file.into_temp_path())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn client_servers_become_keels_config_shape() {
        let servers: Vec<McpServer> = serde_json::from_value(json!([
            {"name": "fs", "command": "/usr/bin/mcp-fs", "args": ["--root", "/w"],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]},
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
        ]))
        .unwrap();
        let (config, warnings) = config(&servers);
        assert_eq!(
            config,
            json!({"mcpServers": {
                "fs": {"command": "/usr/bin/mcp-fs", "args": ["--root", "/w"], "env": {"TOKEN": "t"}},
                "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}}
            }})
        );
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("`old`"), "{warnings:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = write(&config, &dir.path().join("tmp")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let kept = path.to_path_buf();
        drop(path);
        assert!(!kept.exists(), "removed once dropped");
    }
}
