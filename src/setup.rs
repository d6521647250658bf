//! Builds what a run needs from flags and environment facts: the provider, the agent config and
//! the session store (new, continued, resumed or forked). Errors are `StartupError`s with hints.
//! Front-end agnostic: every mode calls this.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::{Cli, PermissionFlag, ThinkingFlag};
use crate::error::StartupError;
use crate::kernel::agent::{AgentConfig, Permission, RetryPolicy};
use crate::kernel::clock::Clock;
use crate::kernel::compaction::CompactionPolicy;
use crate::kernel::op::QueueMode;
use crate::kernel::provider::http::{HttpOptions, HttpProvider};
use crate::kernel::provider::model::{ModelInfo, OpenAiCompat, ProviderInfo, Registry};
use crate::kernel::provider::scripted::ScriptedProvider;
use crate::kernel::provider::Provider;
use crate::kernel::session::{self, SessionErrorKind, SessionHeader, Store};
use crate::kernel::tool;
use crate::mode::Env;

/// The model registry: built-in providers plus `$KEEL_HOME/models.json` when it exists.
pub fn registry(env: &Env) -> Result<Registry, StartupError> {
    let mut registry = Registry::builtin();
    let path = env.keel_home.join("models.json");
    if path.exists() {
        require_regular_file(&path, "models.json")?;
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => registry.merge_file(&text).map_err(|e| {
            StartupError::config(format!("cannot use {}", path.display()))
                .cause(e)
                .hint("see the README, \"Models and providers\", for the format")
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(
                StartupError::config(format!("cannot read {}", path.display()))
                    .cause(e.to_string()),
            )
        }
    }
    Ok(registry)
}

/// The provider and model chosen by `--provider`, `--model [provider/]id`, `--base-url`,
/// `--api-key`, the environment and models.json (README, "Models and providers").
pub fn provider(cli: &Cli, env: &Env) -> Result<Arc<dyn Provider>, StartupError> {
    let registry = registry(env)?;
    let (named, model_id) = split_model(cli, &registry);
    if named.as_deref() == Some("scripted") {
        let Some(path) = &cli.script else {
            return Err(
                StartupError::config("the scripted provider needs a script file")
                    .hint("pass --script FILE (see fixtures/providers/ and the README)"),
            );
        };
        require_regular_file(path, "the --script file")?;
        let p = ScriptedProvider::load(path).map_err(StartupError::config)?;
        return Ok(Arc::new(p));
    }
    let var = |k: &str| env.vars.get(k).cloned();
    let name = match named {
        Some(n) => n,
        None if cli.base_url.is_some() => "openai".to_string(),
        None => match model_id.as_deref().and_then(|id| {
            registry
                .models()
                .find(|m| m.id == id)
                .map(|m| m.provider.clone())
        }) {
            Some(p) => p,
            None if var("ANTHROPIC_API_KEY").is_some() => "anthropic".into(),
            None if var("OPENAI_API_KEY").is_some() => "openai".into(),
            None => return Err(
                StartupError::config("no model provider is configured").hint(
                    "set ANTHROPIC_API_KEY or OPENAI_API_KEY, or pass --base-url URL --model NAME \
                     for a local OpenAI-compatible server, or run offline with \
                     --provider scripted --script fixtures/providers/hello.json",
                ),
            ),
        },
    };
    let Some(p) = registry.provider(&name) else {
        let known: Vec<&str> = registry.providers.iter().map(|p| p.name.as_str()).collect();
        return Err(
            StartupError::config(format!("unknown provider `{name}`")).hint(format!(
                "known providers: {}, scripted; add your own in {}",
                known.join(", "),
                env.keel_home.join("models.json").display()
            )),
        );
    };
    let custom_url = cli.base_url.is_some();
    let base_url = cli
        .base_url
        .clone()
        .or_else(|| p.base_url_env.as_deref().and_then(var))
        .unwrap_or_else(|| p.base_url.clone());
    let Some(id) = model_id.or_else(|| p.default_model.clone()) else {
        return Err(
            StartupError::config(format!("no model chosen for provider `{name}`")).hint(format!(
                "pass --model {name}/MODEL (the model id the server knows)"
            )),
        );
    };
    let listed = p.models.iter().find(|m| m.id == id).cloned();
    let mut info = match listed {
        Some(m) => m,
        None if custom_url || p.models.is_empty() || p.key_env.is_none() => {
            ModelInfo::unlisted(&name, &p.api, &base_url, &id)
        }
        None => {
            let known: Vec<&str> = p.models.iter().map(|m| m.id.as_str()).collect();
            return Err(StartupError::config(format!(
                "unknown model `{id}` for provider `{name}`"
            ))
            .hint(format!(
                "known {name} models: {}; for another model, pass --base-url or add it to {}",
                known.join(", "),
                env.keel_home.join("models.json").display()
            )));
        }
    };
    info.base_url = base_url.clone();
    info.compat = OpenAiCompat::for_base_url(&base_url);
    // A key from the environment is only sent to the provider's own endpoint (or to a URL
    // given together with an explicit --provider): never leak OPENAI_API_KEY to any URL.
    let env_key_ok = !custom_url || cli.provider.is_some();
    let key = cli
        .api_key
        .clone()
        .or_else(|| p.key.clone())
        .or_else(|| p.key_env.as_deref().filter(|_| env_key_ok).and_then(var));
    if key.is_none() && !custom_url {
        if let Some(k) = &p.key_env {
            return Err(
                StartupError::config(format!("no API key for provider `{name}`")).hint(format!(
                    "set {k} (or pass --api-key KEY); for a local server without a key, pass --base-url URL"
                )),
            );
        }
    }
    let options = HttpOptions {
        connect_timeout: seconds(cli.connect_timeout, "--connect-timeout")?,
        idle_timeout: seconds(cli.idle_timeout, "--idle-timeout")?,
    };
    let provider = HttpProvider::new(info, key, options).map_err(StartupError::config)?;
    Ok(Arc::new(provider))
}

/// The models a running session can switch to (RPC `set_model`, `cycle_model`): the
/// registry's models whose provider has credentials, plus the model keel started with.
#[derive(Debug)]
pub struct Models {
    registry: Registry,
    vars: std::collections::BTreeMap<String, String>,
    options: HttpOptions,
    /// `--api-key`: used for the provider keel started with.
    api_key: Option<String>,
    /// The model keel started with (a scripted model or an unlisted `--base-url` model is only
    /// reachable through it).
    start: Arc<dyn Provider>,
}

impl Models {
    pub fn new(cli: &Cli, env: &Env, start: Arc<dyn Provider>) -> Result<Models, StartupError> {
        Ok(Models {
            registry: registry(env)?,
            vars: env.vars.clone(),
            options: HttpOptions {
                connect_timeout: seconds(cli.connect_timeout, "--connect-timeout")?,
                idle_timeout: seconds(cli.idle_timeout, "--idle-timeout")?,
            },
            api_key: cli.api_key.clone(),
            start,
        })
    }

    /// The model keel started with.
    pub fn start_provider(&self) -> Arc<dyn Provider> {
        self.start.clone()
    }

    /// The key for a registry provider, if it has one (or needs none).
    fn key(&self, p: &ProviderInfo) -> Option<Option<String>> {
        if p.name == self.start.name() && self.api_key.is_some() {
            return Some(self.api_key.clone());
        }
        match (&p.key, &p.key_env) {
            (Some(k), _) => Some(Some(k.clone())),
            (None, Some(var)) => self.vars.get(var).map(|k| Some(k.clone())),
            (None, None) => Some(None),
        }
    }

    /// Every model that can be used now, the starting model first.
    pub fn available(&self) -> Vec<ModelInfo> {
        let start = self.start.info();
        let mut out = vec![start.clone()];
        for p in &self.registry.providers {
            if self.key(p).is_none() {
                continue;
            }
            for m in &p.models {
                if !(m.provider == start.provider && m.id == start.id) {
                    out.push(self.with_base_url(p, m.clone()));
                }
            }
        }
        out
    }

    fn with_base_url(&self, p: &ProviderInfo, mut info: ModelInfo) -> ModelInfo {
        info.base_url = p
            .base_url_env
            .as_deref()
            .and_then(|v| self.vars.get(v).cloned())
            .unwrap_or_else(|| p.base_url.clone());
        info.compat = OpenAiCompat::for_base_url(&info.base_url);
        info
    }

    /// A provider for `provider/model_id`, if that model is available.
    pub fn build(&self, provider: &str, model_id: &str) -> Result<Arc<dyn Provider>, String> {
        if provider == self.start.name() && model_id == self.start.model() {
            return Ok(self.start.clone());
        }
        let not_found = || format!("Model not found: {provider}/{model_id}");
        let p = self.registry.provider(provider).ok_or_else(not_found)?;
        let info = p
            .models
            .iter()
            .find(|m| m.id == model_id)
            .cloned()
            .ok_or_else(not_found)?;
        let Some(key) = self.key(p) else {
            let var = p.key_env.as_deref().unwrap_or("an API key");
            return Err(format!(
                "No API key for provider {provider}: set {var} before starting keel"
            ));
        };
        let info = self.with_base_url(p, info);
        let http = HttpProvider::new(info, key, self.options)?;
        Ok(Arc::new(http))
    }
}

/// `--provider` and `--model` as (provider name, model id). `--model p/id` names the provider
/// when `p` is one (model ids may contain `/` themselves, as on OpenRouter).
fn split_model(cli: &Cli, registry: &Registry) -> (Option<String>, Option<String>) {
    let Some(model) = cli.model.clone() else {
        return (cli.provider.clone(), None);
    };
    match (&cli.provider, model.split_once('/')) {
        (Some(p), Some((prefix, rest))) if prefix == p => (Some(p.clone()), Some(rest.into())),
        (Some(p), _) => (Some(p.clone()), Some(model)),
        (None, Some((prefix, rest)))
            if prefix == "scripted" || registry.provider(prefix).is_some() =>
        {
            (Some(prefix.to_string()), Some(rest.to_string()))
        }
        (None, _) => (None, Some(model)),
    }
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

/// The `--list-models` table (or JSON lines), filtered by a case-insensitive substring.
pub fn list_models(registry: &Registry, pattern: &str, json: bool) -> String {
    let pattern = pattern.to_lowercase();
    let models: Vec<&ModelInfo> = registry
        .models()
        .filter(|m| {
            pattern.is_empty()
                || format!("{}/{} {}", m.provider, m.id, m.name)
                    .to_lowercase()
                    .contains(&pattern)
        })
        .collect();
    let mut out = String::new();
    if json {
        for m in models {
            out.push_str(&serde_json::to_string(m).unwrap_or_default());
            out.push('\n');
        }
        return out;
    }
    let k = |n: u64| {
        if n >= 1_000_000 {
            format!("{:.1}M", n as f64 / 1e6)
        } else {
            format!("{}K", n / 1000)
        }
    };
    out.push_str(&format!(
        "{:<36} {:>8} {:>8} {:>9} {:>15}\n",
        "MODEL", "CONTEXT", "MAX OUT", "THINKING", "$/M IN / OUT"
    ));
    for m in models {
        out.push_str(&format!(
            "{:<36} {:>8} {:>8} {:>9} {:>15}\n",
            format!("{}/{}", m.provider, m.id),
            k(m.context_window),
            k(m.max_tokens),
            if m.reasoning { "yes" } else { "no" },
            format!("{} / {}", m.cost.input, m.cost.output)
        ));
    }
    let open: Vec<&str> = registry
        .providers
        .iter()
        .filter(|p| p.models.is_empty())
        .map(|p| p.name.as_str())
        .collect();
    if pattern.is_empty() && !open.is_empty() {
        out.push_str(&format!(
            "\nAny model id also works with: {} (pass --model PROVIDER/ID), and with --base-url.\n",
            open.join(", ")
        ));
    }
    out
}

/// The kernel settings for this process.
pub fn agent_config(cli: &Cli, env: &Env, can_ask: bool) -> Result<AgentConfig, StartupError> {
    let tools = match &cli.tools {
        None => tool::ALL.iter().map(|s| s.to_string()).collect(),
        Some(list) => {
            let list: Vec<String> = list
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            if let Some(bad) = list.iter().find(|t| tool::spec(t).is_none()) {
                return Err(
                    StartupError::usage(format!("unknown tool `{bad}` in --tools"))
                        .hint(format!("available tools: {}", tool::ALL.join(","))),
                );
            }
            list
        }
    };
    let mut system_prompt = match &cli.system_prompt {
        Some(s) => s.clone(),
        None => crate::kernel::default_system_prompt(&env.cwd, &tools),
    };
    for extra in &cli.append_system_prompt {
        let path = Path::new(extra);
        let text = if path.is_file() {
            std::fs::read_to_string(path).map_err(|e| {
                StartupError::config(format!("cannot read {}", path.display())).cause(e.to_string())
            })?
        } else {
            extra.clone()
        };
        system_prompt.push_str("\n\n");
        system_prompt.push_str(&text);
    }
    Ok(AgentConfig {
        cwd: env.cwd.clone(),
        system_prompt,
        tools,
        max_turns: cli.max_turns,
        permission: match cli.permission {
            PermissionFlag::Auto => Permission::Auto,
            PermissionFlag::ReadOnly => Permission::ReadOnly,
            PermissionFlag::Ask => Permission::Ask,
        },
        can_ask,
        steering_mode: QueueMode::OneAtATime,
        follow_up_mode: QueueMode::OneAtATime,
        thinking_level: thinking_word(cli.thinking).to_string(),
        bash_timeout: Duration::from_secs(600),
        temp_dir: env.temp_dir.clone(),
        retry: RetryPolicy {
            enabled: cli.max_retries > 0,
            max_attempts: cli.max_retries,
            base_delay_ms: env
                .retry_base_ms
                .unwrap_or(RetryPolicy::default().base_delay_ms),
            ..RetryPolicy::default()
        },
        compaction: CompactionPolicy {
            enabled: !cli.no_auto_compaction,
            ..CompactionPolicy::default()
        },
    })
}

fn thinking_word(t: Option<ThinkingFlag>) -> &'static str {
    match t {
        None | Some(ThinkingFlag::Off) => "off",
        Some(ThinkingFlag::Minimal) => "minimal",
        Some(ThinkingFlag::Low) => "low",
        Some(ThinkingFlag::Medium) => "medium",
        Some(ThinkingFlag::High) => "high",
        Some(ThinkingFlag::Xhigh) => "xhigh",
    }
}

/// An opened session: the store, whether it is new, and load warnings for stderr.
pub struct OpenedSession {
    pub store: Store,
    pub is_new: bool,
    pub warnings: Vec<String>,
}

/// Checks flag combinations that can never work, before anything is opened.
pub fn check_session_flags(cli: &Cli, interactive: bool) -> Result<(), StartupError> {
    let chosen: Vec<&str> = [
        (cli.continue_, "--continue"),
        (cli.resume.is_some(), "--resume"),
        (cli.session.is_some(), "--session"),
        (cli.session_id.is_some(), "--session-id"),
        (cli.no_session, "--no-session"),
        (cli.fork.is_some(), "--fork"),
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
    if cli.resume.as_deref() == Some("") && !interactive {
        return Err(StartupError::usage(
            "--resume without an id needs the interactive session picker",
        )
        .hint("pass the session id: keel --resume <ID> (a unique prefix is enough)"));
    }
    if let Some(id) = &cli.session_id {
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

pub fn session_dir(cli: &Cli, env: &Env) -> PathBuf {
    match &cli.session_dir {
        Some(d) => env.cwd.join(d),
        None => session::session_dir(&env.keel_home, &env.cwd),
    }
}

fn new_header(clock: &Clock, env: &Env, id: Option<String>) -> SessionHeader {
    SessionHeader {
        id: id.unwrap_or_else(|| clock.session_id()),
        timestamp: clock.now_iso(),
        cwd: env.cwd.display().to_string(),
        parent_session: None,
    }
}

fn looks_like_path(v: &str) -> bool {
    v.contains('/') || v.contains('\\') || v.ends_with(".jsonl")
}

fn session_error(e: session::SessionError) -> StartupError {
    let hint = match e.kind {
        SessionErrorKind::Locked => {
            Some("wait for the other keel process, or use --fork to branch")
        }
        SessionErrorKind::NotFound | SessionErrorKind::Ambiguous => {
            Some("pass a longer id prefix, or a session file path")
        }
        _ => None,
    };
    let err = StartupError::config(e.message);
    match hint {
        Some(h) => err.hint(h),
        None => err,
    }
}

/// Finds a session file by path or id (exact or unique prefix).
fn locate(dir: &Path, env: &Env, query: &str) -> Result<PathBuf, StartupError> {
    if looks_like_path(query) {
        let p = env.cwd.join(query);
        if p.exists() {
            require_regular_file(&p, "the session file")?;
        }
        return if p.is_file() {
            Ok(p)
        } else {
            Err(StartupError::config(format!(
                "no session file at {}",
                p.display()
            )))
        };
    }
    session::resolve(dir, query).map_err(session_error)
}

fn open(path: &Path) -> Result<OpenedSession, StartupError> {
    let (store, warnings) = Store::open(path).map_err(session_error)?;
    Ok(OpenedSession {
        store,
        is_new: false,
        warnings,
    })
}

fn fresh(store: Store) -> OpenedSession {
    OpenedSession {
        store,
        is_new: true,
        warnings: Vec::new(),
    }
}

/// Opens or creates the session the flags ask for (`DESIGN.md` §3, §6).
pub fn open_session(cli: &Cli, env: &Env, clock: &Clock) -> Result<OpenedSession, StartupError> {
    let dir = session_dir(cli, env);
    if cli.no_session {
        return Ok(fresh(Store::in_memory(new_header(clock, env, None))));
    }
    if let Some(q) = &cli.session {
        if looks_like_path(q) {
            let p = env.cwd.join(q);
            if !p.exists() {
                return Ok(fresh(Store::new_file(p, new_header(clock, env, None))));
            }
            require_regular_file(&p, "the --session file")?;
            return open(&p);
        }
        return open(&locate(&dir, env, q)?);
    }
    if let Some(q) = cli.resume.as_deref().filter(|q| !q.is_empty()) {
        return open(&locate(&dir, env, q)?);
    }
    if let Some(id) = &cli.session_id {
        if let Some(found) = session::list(&dir).into_iter().find(|s| &s.id == id) {
            return open(&found.path);
        }
        let header = new_header(clock, env, Some(id.clone()));
        let path = dir.join(session::file_name(&header));
        return Ok(fresh(Store::new_file(path, header)));
    }
    if let Some(q) = &cli.fork {
        let source = locate(&dir, env, q)?;
        let (src, warnings) = Store::open(&source).map_err(session_error)?;
        let mut header = new_header(clock, env, None);
        header.parent_session = Some(source.display().to_string());
        let path = dir.join(session::file_name(&header));
        let store = src.fork_to(path, header).map_err(session_error)?;
        return Ok(OpenedSession {
            store,
            is_new: false,
            warnings,
        });
    }
    if cli.continue_ {
        if let Some(p) = session::find_latest(&dir, &env.cwd.display().to_string()) {
            return open(&p);
        }
    }
    let header = new_header(clock, env, None);
    let path = dir.join(session::file_name(&header));
    Ok(fresh(Store::new_file(path, header)))
}

/// Refuses a path that is not a regular file (after following symlinks) before anything opens
/// it: opening a FIFO blocks until a writer appears, and reading `/dev/zero` never ends.
pub fn require_regular_file(path: &Path, what: &str) -> Result<(), StartupError> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        StartupError::config(format!("cannot read {what} {}", path.display())).cause(e.to_string())
    })?;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "of another kind"
    };
    Err(StartupError::config(format!(
        "{what} {} is {kind}, not a regular file",
        path.display()
    ))
    .hint("pass the path of a regular file"))
}
