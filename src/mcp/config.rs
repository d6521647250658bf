//! MCP server configuration: Claude Code's `{"mcpServers": {NAME: …}}` shape with `${VAR}` and
//! `${VAR:-default}` expansion and the files it is read from (user, trusted project,
//! `--mcp-config`; whether the project is trusted is `setup::trust`'s answer). Reads files;
//! never connects.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// How long a server may take to start (spawn or connect, handshake, first tool list).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one tool call may stay silent (progress notifications restart it).
pub const TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// The most one tool call may take, progress or not.
pub const TOOL_HARD_MAX: Duration = Duration::from_secs(600);

/// What is wrong with an MCP config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// The file cannot be read.
    Unreadable,
    /// Not JSON, or not the `{"mcpServers": …}` shape (an unknown field, a wrong type).
    Syntax,
    /// A server's entry is wrong (no command, a bad url, an unknown type, a bad timeout).
    Server,
    /// A `${…}` in a server's entry cannot be expanded (unset variable, unclosed `${`).
    Variable,
}

/// An MCP config file that cannot be used: its kind and the message naming the file (and the
/// server), as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub kind: ConfigErrorKind,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// One configured server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// Which file it came from (for messages and `keel mcp list`).
    pub source: PathBuf,
    /// The SHA-256 of the entry as the file writes it (before `${VAR}` expansion, keys in
    /// order): a project's server is trusted by this, so a changed one waits for trust again.
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl Transport {
    pub fn word(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    startup_timeout_sec: Option<f64>,
    tool_timeout_sec: Option<f64>,
}

/// Reads one config file into its servers, in name order. `vars` expands `${VAR}`; relative
/// `cwd`s resolve against the file's directory.
pub fn read(
    path: &Path,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        kind: ConfigErrorKind::Unreadable,
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    parse(&text, path, vars)
}

/// Parses a config file's text (see [`read`]).
pub fn parse(
    text: &str,
    path: &Path,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let file: File = serde_json::from_str(text).map_err(|e| ConfigError {
        kind: ConfigErrorKind::Syntax,
        message: format!("{} is not a valid MCP config: {e}", path.display()),
    })?;
    // The entries as written, for their digests (this parses: the typed parse above did).
    let raw: RawFile = serde_json::from_str(text).unwrap_or_default();
    file.mcp_servers
        .into_iter()
        .map(|(name, e)| {
            let digest = raw.mcp_servers.get(&name).map(digest).unwrap_or_default();
            server(name, &e, path, vars).map(|s| ServerConfig { digest, ..s })
        })
        .collect()
}

/// The file's entries as written.
#[derive(Deserialize, Default)]
struct RawFile {
    #[serde(rename = "mcpServers", default)]
    mcp_servers: BTreeMap<String, serde_json::Value>,
}

/// The SHA-256 (hex) of a server's entry as written, its object keys in sorted order.
pub fn digest(entry: &serde_json::Value) -> String {
    use sha2::{Digest, Sha256};
    fn canonical(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&m[k], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(entry, &mut text);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One server's entry of the file at `path`, expanded and checked.
fn server(
    name: String,
    e: &Entry,
    path: &Path,
    vars: &BTreeMap<String, String>,
) -> Result<ServerConfig, ConfigError> {
    let of = |kind, why: String| ConfigError {
        kind,
        message: format!("{}: server `{name}`: {why}", path.display()),
    };
    let bad = |why: String| of(ConfigErrorKind::Server, why);
    if name.is_empty() {
        return Err(bad("the server name is empty".into()));
    }
    let x = |s: &str| expand(s, vars).map_err(|why| of(ConfigErrorKind::Variable, why));
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(ServerConfig {
        transport: transport(e, base, &x, &bad)?,
        startup_timeout: secs(e.startup_timeout_sec, STARTUP_TIMEOUT)
            .map_err(|w| bad(format!("startupTimeoutSec {w}")))?,
        tool_timeout: secs(e.tool_timeout_sec, TOOL_TIMEOUT)
            .map_err(|w| bad(format!("toolTimeoutSec {w}")))?,
        source: path.to_path_buf(),
        digest: String::new(),
        name,
    })
}

/// An entry's transport: `x` expands a value, `bad` words what is wrong with the entry.
fn transport(
    e: &Entry,
    base: &Path,
    x: &dyn Fn(&str) -> Result<String, ConfigError>,
    bad: &dyn Fn(String) -> ConfigError,
) -> Result<Transport, ConfigError> {
    let map = |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, ConfigError> {
        m.iter().map(|(k, v)| Ok((k.clone(), x(v)?))).collect()
    };
    let kind = e.kind.as_deref().unwrap_or(match e.url {
        Some(_) => "http",
        None => "stdio",
    });
    match kind {
        "stdio" => {
            if e.url.is_some() || !e.headers.is_empty() {
                return Err(bad("`url` and `headers` belong to an http server".into()));
            }
            let command = e
                .command
                .as_deref()
                .ok_or_else(|| bad("`command` is missing".into()))?;
            Ok(Transport::Stdio {
                command: x(command)?,
                args: e.args.iter().map(|a| x(a)).collect::<Result<_, _>>()?,
                env: map(&e.env)?,
                cwd: e
                    .cwd
                    .as_deref()
                    .map(|c| x(c).map(|c| base.join(c)))
                    .transpose()?,
            })
        }
        "http" | "streamable-http" => {
            if e.command.is_some() || !e.args.is_empty() || !e.env.is_empty() || e.cwd.is_some() {
                return Err(bad(
                    "`command`, `args`, `env` and `cwd` belong to a stdio server".into(),
                ));
            }
            let url = x(e
                .url
                .as_deref()
                .ok_or_else(|| bad("`url` is missing".into()))?)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(bad(format!(
                    "`url` must start with http:// or https://, got `{url}`"
                )));
            }
            Ok(Transport::Http {
                url,
                headers: map(&e.headers)?,
            })
        }
        "sse" => Err(bad(
            "the old HTTP+SSE transport is not supported; use \"type\": \"http\"".into(),
        )),
        other => Err(bad(format!("unknown type `{other}` (stdio or http)"))),
    }
}

fn secs(v: Option<f64>, default: Duration) -> Result<Duration, String> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e6 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(format!("must be a positive number of seconds, got {s}")),
    }
}

/// Expands `${VAR}` and `${VAR:-default}`; a missing variable without a default is an error.
/// `$` not followed by `{` is kept.
fn expand(s: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unclosed `${{` in `{s}`"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (vars.get(name), default) {
            (Some(v), _) => out.push_str(v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!("environment variable `{name}` is not set (write ${{{name}:-default}} for a fallback)"))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where servers come from, as the flags chose.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// `--mcp-config` files, in order.
    pub files: Vec<PathBuf>,
    /// `--strict-mcp-config`: only `files`.
    pub strict: bool,
    /// `--no-mcp`.
    pub disabled: bool,
    /// The directories whose `.mcp.json` and `.keel/mcp.json` are the project's, in the order
    /// they apply (the project's root, then the session's directory below it).
    pub project_dirs: Vec<PathBuf>,
    /// Which of the project's own servers may start (`setup::trust`'s answer).
    pub project: ProjectTrust,
    /// The settings files' `mcpServers` (after the user's and project's files, before
    /// `files`).
    pub settings: Vec<ServerConfig>,
}

/// Which of a project's own servers (`.mcp.json`, `.keel/mcp.json`, its settings files'
/// `mcpServers`) may start: they run programs, so each is trusted by its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectTrust {
    /// `--trust-project`: every one, for this run.
    All,
    /// Those recorded in the trust store, name → [`digest`].
    Recorded(BTreeMap<String, String>),
}

impl Default for ProjectTrust {
    fn default() -> Self {
        ProjectTrust::Recorded(BTreeMap::new())
    }
}

impl ProjectTrust {
    /// Whether the server `name` with this digest may start.
    pub fn allows(&self, name: &str, digest: &str) -> bool {
        match self {
            ProjectTrust::All => true,
            ProjectTrust::Recorded(r) => r.get(name).is_some_and(|d| d == digest),
        }
    }

    /// How a server left out is named: `` `name` `` or `` `name` (changed since trusted) ``.
    pub fn why_not(&self, name: &str) -> String {
        match self {
            ProjectTrust::Recorded(r) if r.contains_key(name) => {
                format!("`{name}` (changed since trusted)")
            }
            _ => format!("`{name}`"),
        }
    }
}

/// The servers to start, and warnings (project servers skipped for an untrusted project).
#[derive(Debug, Default)]
pub struct Loaded {
    pub servers: Vec<ServerConfig>,
    pub warnings: Vec<String>,
}

/// The project config files in `dirs`, in the order they apply.
pub fn project_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .flat_map(|d| [d.join(".mcp.json"), d.join(".keel").join("mcp.json")])
        .collect()
}

/// Reads the servers: `$KEEL_HOME/mcp.json`, then the project files' trusted servers, then
/// the `--mcp-config` files; a later server of the same name replaces an earlier one.
pub fn load(
    sources: &Sources,
    keel_home: &Path,
    vars: &BTreeMap<String, String>,
) -> Result<Loaded, ConfigError> {
    let mut loaded = Loaded::default();
    if sources.disabled {
        return Ok(loaded);
    }
    let mut all: Vec<ServerConfig> = Vec::new();
    if !sources.strict {
        let user = keel_home.join("mcp.json");
        if user.is_file() {
            all.extend(read(&user, vars)?);
        }
        let (trusted, left): (Vec<_>, Vec<_>) = project_servers_in(&sources.project_dirs, vars)?
            .into_iter()
            .partition(|s| sources.project.allows(&s.name, &s.digest));
        all.extend(trusted);
        if !left.is_empty() {
            let names: Vec<String> = left
                .iter()
                .map(|s| sources.project.why_not(&s.name))
                .collect();
            let mut files: Vec<String> = left
                .iter()
                .map(|s| s.source.display().to_string())
                .collect();
            files.dedup();
            loaded.warnings.push(format!(
                "skipped the project's MCP servers {} ({}): not trusted; pass --trust-project or trust them in keel's TUI",
                names.join(", "),
                files.join(", "),
            ));
        }
    }
    if !sources.strict {
        all.extend(sources.settings.iter().cloned());
    }
    for f in &sources.files {
        all.extend(read(f, vars)?);
    }
    for s in all {
        match loaded.servers.iter_mut().find(|o| o.name == s.name) {
            Some(o) => *o = s,
            None => loaded.servers.push(s),
        }
    }
    Ok(loaded)
}

/// Every server of the project files in `dirs`, trusted or not.
fn project_servers_in(
    dirs: &[PathBuf],
    vars: &BTreeMap<String, String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let mut out = Vec::new();
    for p in project_files(dirs).into_iter().filter(|p| p.is_file()) {
        out.extend(read(&p, vars)?);
    }
    Ok(out)
}

/// The servers of the project's files, trusted or not, for the "trust this project?"
/// question (none when the flags leave the project's files out; a broken file: none, its
/// error comes when the session loads it).
pub fn project_servers(sources: &Sources, vars: &BTreeMap<String, String>) -> Vec<ServerConfig> {
    if sources.disabled || sources.strict || sources.project == ProjectTrust::All {
        return Vec::new();
    }
    project_files(&sources.project_dirs)
        .iter()
        .filter(|p| p.is_file())
        .filter_map(|p| read(p, vars).ok())
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, String> {
        [("TOKEN", "t0k"), ("HOME", "/h")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_variables_and_defaults_and_refuses_missing_ones() {
        assert_eq!(
            expand("a ${TOKEN} ${NOPE:-d} $X", &vars()).unwrap(),
            "a t0k d $X"
        );
        let err = expand("${NOPE}", &vars()).unwrap_err();
        assert!(err.contains("`NOPE` is not set"), "{err}");
        assert!(expand("${TOKEN", &vars()).is_err());
    }

    #[test]
    fn parses_both_transports_with_expansion() {
        let text = r#"{"mcpServers":{
            "fs":{"command":"srv","args":["${HOME}/x"],"env":{"K":"${TOKEN}"},"cwd":"sub","toolTimeoutSec":5},
            "web":{"type":"http","url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer ${TOKEN}"}}}}"#;
        let s = parse(text, Path::new("/cfg/mcp.json"), &vars()).unwrap();
        assert_eq!(s[0].name, "fs");
        assert_eq!(
            s[0].transport,
            Transport::Stdio {
                command: "srv".into(),
                args: vec!["/h/x".into()],
                env: [("K".to_string(), "t0k".to_string())].into(),
                cwd: Some("/cfg/sub".into()),
            }
        );
        assert_eq!(s[0].tool_timeout, Duration::from_secs(5));
        assert!(
            matches!(&s[1].transport, Transport::Http { headers, .. } if headers["Authorization"] == "Bearer t0k")
        );
    }

    #[test]
    fn bad_entries_are_errors_naming_the_server() {
        use ConfigErrorKind::{Server, Syntax, Variable};
        for (text, want, kind) in [
            (
                r#"{"mcpServers":{"a":{"args":[]}}}"#,
                "`command` is missing",
                Server,
            ),
            (
                r#"{"mcpServers":{"a":{"type":"sse","url":"http://x"}}}"#,
                "not supported",
                Server,
            ),
            (
                r#"{"mcpServers":{"a":{"command":"x","bogus":1}}}"#,
                "bogus",
                Syntax,
            ),
            (
                r#"{"mcpServers":{"a":{"type":"http","url":"ftp://x"}}}"#,
                "http://",
                Server,
            ),
            (
                r#"{"mcpServers":{"a":{"command":"${MISSING}"}}}"#,
                "MISSING",
                Variable,
            ),
        ] {
            let err = parse(text, Path::new("m.json"), &vars()).unwrap_err();
            assert!(err.message.contains(want), "{text}: {err}");
            assert_eq!(err.kind, kind, "{text}");
        }
    }

    #[test]
    fn project_servers_load_only_when_trusted_with_the_content_they_have() {
        let home = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        let write = |entry: &str| {
            let text = format!(r#"{{"mcpServers":{{"p":{entry}}}}}"#);
            std::fs::write(proj.path().join(".mcp.json"), text).unwrap();
        };
        write(r#"{"command":"x","args":["1"]}"#);
        let src = Sources {
            project_dirs: vec![proj.path().to_path_buf()],
            ..Sources::default()
        };
        let l = load(&src, home.path(), &vars()).unwrap();
        assert!(l.servers.is_empty());
        assert_eq!(l.warnings.len(), 1);
        assert!(l.warnings[0].contains("`p`"), "{}", l.warnings[0]);
        let all = Sources {
            project: ProjectTrust::All,
            ..src.clone()
        };
        let l = load(&all, home.path(), &vars()).unwrap();
        assert_eq!(l.servers.len(), 1);
        assert!(l.warnings.is_empty());
        // Recorded by its digest: the same entry (keys in another order) starts ...
        let recorded = [("p".to_string(), l.servers[0].digest.clone())];
        let trusted = Sources {
            project: ProjectTrust::Recorded(recorded.into_iter().collect()),
            ..src.clone()
        };
        write(r#"{"args":["1"],"command":"x"}"#);
        let l = load(&trusted, home.path(), &vars()).unwrap();
        assert_eq!(l.servers.len(), 1, "{:?}", l.warnings);
        // ... a changed one waits, and says so.
        write(r#"{"command":"x","args":["2"]}"#);
        let l = load(&trusted, home.path(), &vars()).unwrap();
        assert!(l.servers.is_empty());
        assert!(
            l.warnings[0].contains("`p` (changed since trusted)"),
            "{}",
            l.warnings[0]
        );
        let strict = Sources {
            strict: true,
            ..all
        };
        assert!(load(&strict, home.path(), &vars())
            .unwrap()
            .servers
            .is_empty());
    }
}
