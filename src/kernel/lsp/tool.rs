//! The `lsp` tool: code navigation through the session's language servers (definition,
//! references, hover, document and workspace symbols, implementation, and a rename shown, never
//! applied). Positions by line and column or by a symbol's name; results with paths relative to
//! the session's directory, files the sandbox denies or `.gitignore` leaves out dropped, and
//! bounded ([`super::show`] formats them).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::server::Server;
use super::show::{self, Shown};
use super::{uri, Lsp};
use crate::kernel::abort::AbortSignal;
use crate::kernel::tool::{ToolOutput, ToolSpec};

/// The tool's name.
pub const TOOL: &str = "lsp";

/// A request waits at most this long for the server (a first request may wait for indexing).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `name` is the `lsp` tool of a session whose servers are `lsp`, and it is on.
pub fn offered(lsp: Option<&Lsp>, name: &str) -> bool {
    name == TOOL && lsp.is_some_and(Lsp::tool_enabled)
}

/// The `lsp` tool as the model sees it.
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: TOOL.into(),
        description: "Code navigation through the project's language servers. Operations: \
                      definition, references, hover, implementation (at a position), \
                      documentSymbols (of a file), workspaceSymbols (by query), rename_preview \
                      (the edits a rename would make; nothing is changed). Give the position as \
                      line and column (1-based), or as symbol (a name in the file; with line, on \
                      that line). Paths are relative to the working directory; results leave out \
                      gitignored files and are bounded."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "operation": {"type": "string", "enum": [
                    "definition", "references", "hover", "documentSymbols",
                    "workspaceSymbols", "implementation", "rename_preview"
                ]},
                "path": {"type": "string", "description": "The file (workspaceSymbols: picks the language server; optional)."},
                "line": {"type": "integer", "minimum": 1, "description": "1-based line."},
                "column": {"type": "integer", "minimum": 1, "description": "1-based column (characters)."},
                "symbol": {"type": "string", "description": "A name in the file whose first occurrence (on `line` when given) is the position."},
                "query": {"type": "string", "description": "workspaceSymbols: the name or part of it."},
                "newName": {"type": "string", "description": "rename_preview: the new name."}
            },
            "required": ["operation"],
            "additionalProperties": false
        }),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Args {
    operation: Operation,
    path: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
    symbol: Option<String>,
    query: Option<String>,
    new_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum Operation {
    #[serde(rename = "definition")]
    Definition,
    #[serde(rename = "references")]
    References,
    #[serde(rename = "hover")]
    Hover,
    #[serde(rename = "documentSymbols")]
    DocumentSymbols,
    #[serde(rename = "workspaceSymbols")]
    WorkspaceSymbols,
    #[serde(rename = "implementation")]
    Implementation,
    #[serde(rename = "rename_preview")]
    RenamePreview,
}

impl Operation {
    fn method(self) -> &'static str {
        match self {
            Operation::Definition => "textDocument/definition",
            Operation::References => "textDocument/references",
            Operation::Hover => "textDocument/hover",
            Operation::DocumentSymbols => "textDocument/documentSymbol",
            Operation::WorkspaceSymbols => "workspace/symbol",
            Operation::Implementation => "textDocument/implementation",
            Operation::RenamePreview => "textDocument/rename",
        }
    }
}

impl Lsp {
    /// Runs one `lsp` tool call.
    pub async fn tool(&self, args: &Value, cwd: &Path, abort: &AbortSignal) -> ToolOutput {
        let args: Args = match serde_json::from_value(args.clone()) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("Invalid lsp arguments: {e}")),
        };
        tokio::select! {
            _ = abort.aborted() => ToolOutput::error("The lsp call was aborted"),
            out = self.navigate(&args, cwd) => match out {
                Ok(shown) => shown.into_output(),
                Err(e) => ToolOutput::error(e),
            },
        }
    }

    async fn navigate(&self, args: &Args, cwd: &Path) -> Result<Shown, String> {
        let op = args.operation;
        let file = args
            .path
            .as_deref()
            .map(|p| crate::kernel::tool::resolve_path(cwd, p));
        if let Some(f) = &file {
            let real = crate::kernel::sandbox::policy::real(f);
            if let Some(denied) = self.inner.place.sandbox.policy.read_denied(&real) {
                return Err(format!(
                    "Cannot read {}: the sandbox denies reading {}",
                    f.display(),
                    denied.display()
                ));
            }
            if !f.is_file() {
                return Err(format!("{} is not a file", f.display()));
            }
        }
        let filter = show::Filter::new(self.root(), &self.inner.place.sandbox.policy);
        if op == Operation::WorkspaceSymbols {
            let query = args.query.clone().or_else(|| args.symbol.clone());
            let Some(query) = query else {
                return Err("workspaceSymbols needs `query`".into());
            };
            let servers = match &file {
                Some(f) => vec![self.navigation_server(f).await?.0],
                None => self.running().await,
            };
            if servers.is_empty() {
                return Err(
                    "No language server is running: give `path`, a file of the language to search"
                        .into(),
                );
            }
            let mut all = Vec::new();
            for s in servers {
                let v = s
                    .request(op.method(), json!({"query": query}), REQUEST_TIMEOUT)
                    .await
                    .map_err(|e| e.to_string())?;
                all.push(v);
            }
            return Ok(show::workspace_symbols(&all, &filter));
        }
        let Some(file) = file else {
            return Err(format!("{} needs `path`", op_name(op)));
        };
        let (server, language) = self.navigation_server(&file).await?;
        server
            .ensure_open(&file, &language)
            .await
            .map_err(|e| e.to_string())?;
        let doc = json!({"uri": uri::from_path(&file)});
        if op == Operation::DocumentSymbols {
            let v = server
                .request(op.method(), json!({"textDocument": doc}), REQUEST_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(show::document_symbols(&v, &file, &filter));
        }
        let text = tokio::fs::read_to_string(&file)
            .await
            .map_err(|e| format!("Cannot read {}: {e}", file.display()))?;
        let position = position(&text, args)?;
        let mut params = json!({"textDocument": doc, "position": position});
        match op {
            Operation::References => params["context"] = json!({"includeDeclaration": true}),
            Operation::RenamePreview => {
                let Some(new) = &args.new_name else {
                    return Err("rename_preview needs `newName`".into());
                };
                params["newName"] = json!(new);
            }
            _ => {}
        }
        let v = server
            .request(op.method(), params, REQUEST_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        Ok(match op {
            Operation::Hover => show::hover(&v),
            Operation::RenamePreview => show::rename(&v, &filter),
            _ => show::locations(&v, &filter),
        })
    }

    /// The server for `file` (started if needed).
    async fn navigation_server(
        &self,
        file: &Path,
    ) -> Result<(std::sync::Arc<Server>, String), String> {
        let none = || {
            format!(
                "No language server handles {} (see `keel lsp status`)",
                file.display()
            )
        };
        match self.server_for(file).await {
            None => Err(none()),
            Some(Ok((s, lang, _))) => Ok((s, lang)),
            Some(Err(note)) => Err(note.unwrap_or_else(none)),
        }
    }

    /// The servers running now.
    async fn running(&self) -> Vec<std::sync::Arc<Server>> {
        let mut out = Vec::new();
        for slot in &self.inner.slots {
            if let Some(s) = slot.lock().await.server.clone().filter(|s| s.alive()) {
                out.push(s);
            }
        }
        out
    }
}

fn op_name(op: Operation) -> &'static str {
    match op {
        Operation::Definition => "definition",
        Operation::References => "references",
        Operation::Hover => "hover",
        Operation::DocumentSymbols => "documentSymbols",
        Operation::WorkspaceSymbols => "workspaceSymbols",
        Operation::Implementation => "implementation",
        Operation::RenamePreview => "rename_preview",
    }
}

/// The LSP position (0-based line, UTF-16 character) the arguments name in `text`.
fn position(text: &str, args: &Args) -> Result<Value, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let (line, column) = match (&args.symbol, args.line, args.column) {
        (Some(symbol), line, _) => find_symbol(&lines, symbol, line)?,
        (None, Some(line), Some(column)) => (line.max(1) - 1, column.max(1) - 1),
        _ => return Err("Give `line` and `column`, or `symbol`".into()),
    };
    let Some(text) = lines.get(line as usize) else {
        return Err(format!("The file has {} lines", lines.len()));
    };
    let character: usize = text
        .chars()
        .take(column as usize)
        .map(char::len_utf16)
        .sum();
    Ok(json!({"line": line, "character": character}))
}

/// The first whole-word occurrence of `symbol` (on 1-based `line` when given), as a 0-based
/// line and character column.
fn find_symbol(lines: &[&str], symbol: &str, line: Option<u32>) -> Result<(u32, u32), String> {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let on = |i: usize, l: &str| -> Option<(u32, u32)> {
        let mut from = 0;
        while let Some(at) = l[from..].find(symbol).map(|a| a + from) {
            let before = l[..at].chars().next_back().is_some_and(word);
            let after = l[at + symbol.len()..].chars().next().is_some_and(word);
            if !before && !after {
                return Some((i as u32, l[..at].chars().count() as u32));
            }
            from = at + symbol.len().max(1);
        }
        None
    };
    if symbol.is_empty() {
        return Err("`symbol` is empty".into());
    }
    let found = match line {
        Some(n) => lines
            .get((n.max(1) - 1) as usize)
            .and_then(|l| on((n.max(1) - 1) as usize, l)),
        None => lines.iter().enumerate().find_map(|(i, l)| on(i, l)),
    };
    found.ok_or_else(|| match line {
        Some(n) => format!("`{symbol}` is not on line {n}"),
        None => format!("`{symbol}` is not in the file"),
    })
}

/// A path as shown: relative to `root` when inside it.
pub(super) fn shown_path(path: &Path, root: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(v: Value) -> Args {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn positions_by_column_or_by_symbol() {
        let text = "fn main() {\n    let é = helper(1);\n}\nfn helper(x: u8) {}\n";
        let p = position(
            text,
            &args(json!({"operation": "hover", "line": 2, "column": 13})),
        );
        assert_eq!(p.unwrap(), json!({"line": 1, "character": 12}));
        let p = position(
            text,
            &args(json!({"operation": "hover", "symbol": "helper"})),
        );
        assert_eq!(p.unwrap(), json!({"line": 1, "character": 12}));
        let p = position(
            text,
            &args(json!({"operation": "hover", "symbol": "helper", "line": 4})),
        );
        assert_eq!(p.unwrap(), json!({"line": 3, "character": 3}));
        let e = position(text, &args(json!({"operation": "hover", "symbol": "help"})));
        assert_eq!(e.unwrap_err(), "`help` is not in the file");
        assert!(position(text, &args(json!({"operation": "hover"}))).is_err());
    }
}
