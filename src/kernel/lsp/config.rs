//! What the language servers are: the settings' `lsp {…}` in the shape of Claude Code's
//! `.lsp.json` entries, and the built-in defaults for servers found on `PATH`. keel never
//! downloads a server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The settings' `lsp {…}` (taken whole from the highest level that sets it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LspSettings {
    /// Servers by name, each as a Claude Code `.lsp.json` entry. A name of a built-in default
    /// replaces it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, ServerConfig>,
    /// What `edit` and `write` append: `off`, `errors` (default) or `all` (warnings too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<DiagnosticsMode>,
    /// Milliseconds an `edit` or `write` waits for the diagnostics of its change (default 1500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_timeout: Option<u64>,
    /// Whether the model gets the `lsp` navigation tool (default: when `servers` names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<bool>,
    /// `false`: the built-in defaults are not used (only `servers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<bool>,
}

/// What `edit` and `write` append to their result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiagnosticsMode {
    Off,
    #[default]
    Errors,
    All,
}

/// One server, as a Claude Code `.lsp.json` entry (`transport`, `workspaceFolder`,
/// `restartOnCrash`, `maxRestarts` and `shutdownTimeout` are read and kept; only `stdio`
/// transport is spoken).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerConfig {
    pub command: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// File extension (with its dot, `.py`) to LSP language id (`python`).
    #[serde(default)]
    pub extension_to_language: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<Value>,
    /// Sent as `workspace/didChangeConfiguration` and served to `workspace/configuration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// Milliseconds the server has to answer `initialize` (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_on_crash: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_timeout: Option<u64>,
}

impl ServerConfig {
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_millis(self.startup_timeout.unwrap_or(10_000))
    }
}

/// A server keel may start: its name, its entry, and whether it came from the settings (a
/// missing configured one is named once; a missing default is not offered at all).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub config: ServerConfig,
    pub configured: bool,
    /// How to install it, for the note when it is missing.
    pub hint: Option<&'static str>,
}

/// The built-in defaults: name, command, args, extensions and their language, install hint.
type Builtin = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
    &'static str,
);

const DEFAULTS: &[Builtin] = &[
    (
        "rust-analyzer",
        "rust-analyzer",
        &[],
        &[(".rs", "rust")],
        "rustup component add rust-analyzer",
    ),
    (
        "pyright",
        "pyright-langserver",
        &["--stdio"],
        &[(".py", "python"), (".pyi", "python")],
        "npm install -g pyright",
    ),
    (
        "typescript",
        "typescript-language-server",
        &["--stdio"],
        &[
            (".ts", "typescript"),
            (".tsx", "typescriptreact"),
            (".mts", "typescript"),
            (".cts", "typescript"),
            (".js", "javascript"),
            (".jsx", "javascriptreact"),
            (".mjs", "javascript"),
            (".cjs", "javascript"),
        ],
        "npm install -g typescript-language-server typescript",
    ),
    (
        "clangd",
        "clangd",
        &[],
        &[
            (".c", "c"),
            (".h", "c"),
            (".cc", "cpp"),
            (".cpp", "cpp"),
            (".cxx", "cpp"),
            (".hpp", "cpp"),
            (".hh", "cpp"),
        ],
        "apt-get install clangd",
    ),
    (
        "gopls",
        "gopls",
        &[],
        &[(".go", "go")],
        "go install golang.org/x/tools/gopls@latest",
    ),
];

/// The install hint of a default named `command`, if one is.
fn hint_for(command: &str) -> Option<&'static str> {
    DEFAULTS
        .iter()
        .find(|d| d.1 == command || Path::new(command).file_name().is_some_and(|f| f == d.1))
        .map(|d| d.4)
}

/// The servers of `settings`: the configured ones, then the defaults found on `path` (the
/// tools' `PATH`) that none of them replaces by name or by extension.
pub fn servers(settings: &LspSettings, path: Option<&str>) -> Vec<ServerSpec> {
    let mut out: Vec<ServerSpec> = settings
        .servers
        .iter()
        .map(|(name, config)| ServerSpec {
            name: name.clone(),
            hint: hint_for(&config.command),
            config: config.clone(),
            configured: true,
        })
        .collect();
    if settings.defaults == Some(false) {
        return out;
    }
    for (name, command, args, exts, hint) in DEFAULTS {
        let taken = out.iter().any(|s| {
            s.name == *name
                || exts
                    .iter()
                    .any(|(e, _)| s.config.extension_to_language.contains_key(*e))
        });
        if taken || find_program(command, path).is_none() {
            continue;
        }
        out.push(ServerSpec {
            name: name.to_string(),
            config: ServerConfig {
                command: command.to_string(),
                args: args.iter().map(|a| a.to_string()).collect(),
                extension_to_language: exts
                    .iter()
                    .map(|(e, l)| (e.to_string(), l.to_string()))
                    .collect(),
                ..ServerConfig::default()
            },
            configured: false,
            hint: Some(hint),
        });
    }
    out
}

/// `command` as found: itself when it has a slash, else the first executable file of that name
/// in `path`'s directories. A rustup proxy without its component is not found.
pub fn find_program(command: &str, path: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = PathBuf::from(command);
        return executable(&p).then_some(p);
    }
    let found = std::env::split_paths(path?)
        .map(|d| d.join(command))
        .find(|p| executable(p))?;
    if command == "rust-analyzer" && is_rustup_proxy(&found) {
        return None;
    }
    Some(found)
}

/// Whether `p` is rustup's proxy (a link to `rustup`), which fails when the component is not
/// installed.
fn is_rustup_proxy(p: &Path) -> bool {
    std::fs::canonicalize(p)
        .ok()
        .and_then(|c| c.file_name().map(|f| f == "rustup"))
        .unwrap_or(false)
}

/// The language id of `path` among `servers`, with the server's index.
pub fn language_of(servers: &[ServerSpec], path: &Path) -> Option<(usize, String)> {
    let ext = format!(".{}", path.extension()?.to_str()?);
    servers.iter().enumerate().find_map(|(i, s)| {
        s.config
            .extension_to_language
            .get(&ext)
            .map(|l| (i, l.clone()))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn claude_lsp_json_entries_parse_and_replace_a_default() {
        let s: LspSettings = serde_json::from_value(serde_json::json!({
            "servers": {"go": {
                "command": "gopls", "args": ["serve"],
                "extensionToLanguage": {".go": "go"},
                "transport": "stdio", "initializationOptions": {}, "settings": {},
                "startupTimeout": 120000, "env": {"A": "b"}
            }},
            "diagnostics": "all", "diagnosticsTimeout": 500
        }))
        .unwrap();
        let servers = servers(&s, Some(""));
        assert_eq!(servers.len(), 1);
        assert!(servers[0].configured);
        assert_eq!(
            servers[0].hint,
            Some("go install golang.org/x/tools/gopls@latest")
        );
        let (i, lang) = language_of(&servers, Path::new("a/b.go")).unwrap();
        assert_eq!((i, lang.as_str()), (0, "go"));
        assert!(language_of(&servers, Path::new("a/b.py")).is_none());
    }

    #[test]
    fn defaults_are_offered_only_when_found() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("clangd");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = d.path().to_str().unwrap();
        let all = servers(&LspSettings::default(), Some(path));
        let names: Vec<_> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["clangd"]);
        let off = LspSettings {
            defaults: Some(false),
            ..Default::default()
        };
        assert!(servers(&off, Some(path)).is_empty());
    }
}
