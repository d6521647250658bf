//! Choosing the provider and model from flags, environment and models.json (asking an
//! OpenAI-compatible server what it serves when no model is given), and the `--list-models`
//! output. Errors are `StartupError`s that say what to set.

use std::sync::Arc;

use super::seconds;
use crate::error::StartupError;
use crate::host::models::{Catalog, StartEndpoint};
use crate::kernel::provider::http::{path_has_v1, HttpOptions, HttpProvider};
use crate::kernel::provider::model::{ModelInfo, ProviderInfo, Registry};
use crate::kernel::provider::scripted::ScriptedProvider;
use crate::kernel::provider::served::{self, models_url, ListError, ListFailure};
use crate::kernel::provider::Provider;
use crate::mode::Env;
use crate::setup::Settings;

/// The model registry: built-in providers plus `$KEEL_HOME/models.json` when it exists.
pub fn registry(env: &Env) -> Result<Registry, StartupError> {
    let mut registry = Registry::builtin();
    let path = env.keel_home.join("models.json");
    if path.exists() {
        super::require_regular_file(&path, "models.json")?;
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => registry.merge_file(&text).map_err(|e| {
            StartupError::config(format!("cannot use {}", path.display()))
                .cause(e.message)
                .hint("see docs/providers.md for the format")
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
/// `--api-key`, the environment and models.json (docs/providers.md). Without a
/// model, an OpenAI-compatible server at a URL the user chose is asked what it serves.
pub async fn provider(settings: &Settings, env: &Env) -> Result<Arc<dyn Provider>, StartupError> {
    Ok(start(settings, env).await?.0)
}

/// [`provider`], and where it is served with which key (`None`: the scripted provider), for
/// the models a session can switch to.
pub async fn start(
    settings: &Settings,
    env: &Env,
) -> Result<(Arc<dyn Provider>, Option<StartEndpoint>), StartupError> {
    let started = pick(settings, env).await?;
    check_prices(settings, started.0.info())?;
    Ok(started)
}

/// A cost cap needs the model's prices: a model without them (a custom endpoint, a script
/// without `cost`) cannot take `--max-cost`.
fn check_prices(settings: &Settings, info: &ModelInfo) -> Result<(), StartupError> {
    let c = &info.cost;
    let priced = c.input > 0.0 || c.output > 0.0;
    match (settings.max_cost, priced) {
        (Some(_), false) => Err(StartupError::config(format!(
            "--max-cost needs the model's prices, and keel knows none for `{}/{}`",
            info.provider, info.id
        ))
        .hint(match info.api.as_str() {
            crate::kernel::provider::model::API_SCRIPTED => {
                "give the script its prices: `\"cost\": {\"input\": …, \"output\": …}` (USD per million tokens)"
            }
            _ => "set `cost` for the model in $KEEL_HOME/models.json (USD per million tokens)",
        })),
        _ => Ok(()),
    }
}

/// The API of the model a run with these settings would call, found offline (what `keel
/// debug prompt` needs to show the tools a run offers); `None` when it cannot be told
/// without starting the provider.
pub fn api_of(settings: &Settings, env: &Env) -> Option<String> {
    let registry = registry(env).ok()?;
    let (named, model_id) = split_model(settings, &registry);
    if named.as_deref() == Some("scripted") {
        return Some(crate::kernel::provider::model::API_SCRIPTED.to_string());
    }
    let name = match named {
        Some(n) => n,
        None => provider_name(settings, env, &registry, model_id.as_deref()).ok()?,
    };
    let p = known_provider(&registry, &name, env).ok()?;
    let endpoint = Endpoint::of(settings, env, p);
    let info = model_id.and_then(|id| model_info(p, &id, &endpoint, env).ok());
    Some(info.map_or_else(|| p.api.clone(), |i| i.api))
}

/// [`start`] without the checks that need the model chosen.
async fn pick(
    settings: &Settings,
    env: &Env,
) -> Result<(Arc<dyn Provider>, Option<StartEndpoint>), StartupError> {
    let registry = registry(env)?;
    let (named, model_id) = split_model(settings, &registry);
    if named.as_deref() == Some("scripted") {
        let Some(path) = &settings.script else {
            return Err(
                StartupError::config("the scripted provider needs a script file")
                    .hint("pass --script FILE (see fixtures/providers/ and docs/providers.md)"),
            );
        };
        // Relative to the session's directory: the client's, also in the daemon.
        let path = env.cwd.join(path);
        super::require_regular_file(&path, "the --script file")?;
        let p = ScriptedProvider::load(&path).map_err(|e| StartupError::config(e.message))?;
        return Ok((Arc::new(p), None));
    }
    let name = match named {
        Some(n) => n,
        None => provider_name(settings, env, &registry, model_id.as_deref())?,
    };
    let p = known_provider(&registry, &name, env)?;
    let endpoint = Endpoint::of(settings, env, p);
    let options = http_options(settings)?;
    let served = p.served_by_server(endpoint.custom);
    let (id, listed) = match model_id {
        Some(id) => (id, None),
        None if served => {
            let key = api_key(settings, env, p, &endpoint)?;
            let ids = served_ids(&endpoint, key.as_deref(), &options).await?;
            (served_model(&endpoint, &ids)?, Some(ids))
        }
        None => (
            p.default_model.clone().ok_or_else(|| {
                StartupError::config(format!("no model chosen for provider `{name}`")).hint(
                    format!("pass --model {name}/MODEL (the model id the server knows)"),
                )
            })?,
            None,
        ),
    };
    let info = p.place(model_info(p, &id, &endpoint, env)?, &endpoint.url);
    let key = api_key(settings, env, p, &endpoint)?;
    let provider = HttpProvider::new(info, key.clone(), options)
        .map_err(|e| StartupError::config(e.message))?;
    let catalog = match (served, listed) {
        (false, _) => Catalog::Registry,
        (true, None) => Catalog::Server,
        (true, Some(ids)) => Catalog::Listed(ids),
    };
    let start = StartEndpoint {
        url: endpoint.url,
        key,
        catalog,
    };
    Ok((Arc::new(provider), Some(start)))
}

/// Whether the flags, environment or models.json choose a provider (`false`: nothing does, and
/// `provider` would fail with "no model provider is configured"). A broken models.json counts
/// as configured: `provider` reports it.
pub fn is_configured(settings: &Settings, env: &Env) -> bool {
    let Ok(registry) = registry(env) else {
        return true;
    };
    let (named, model_id) = split_model(settings, &registry);
    named.is_some() || provider_name(settings, env, &registry, model_id.as_deref()).is_ok()
}

/// The provider when no flag names one: the provider of a listed model id, else the one the
/// environment configures (`OPENAI_BASE_URL` takes any model id to openai).
fn provider_name(
    settings: &Settings,
    env: &Env,
    registry: &Registry,
    model_id: Option<&str>,
) -> Result<String, StartupError> {
    let set = |k: &str| env.vars.contains_key(k);
    if settings.base_url.is_some() {
        return Ok("openai".into());
    }
    if let Some(m) = model_id.and_then(|id| registry.models().find(|m| m.id == id)) {
        return Ok(m.provider.clone());
    }
    if model_id.is_some() && set("OPENAI_BASE_URL") {
        return Ok("openai".into());
    }
    if set("ANTHROPIC_API_KEY") {
        return Ok("anthropic".into());
    }
    if set("OPENAI_API_KEY") || set("OPENAI_BASE_URL") {
        return Ok("openai".into());
    }
    if set("GEMINI_API_KEY") || set("GOOGLE_API_KEY") || set("GOOGLE_GEMINI_BASE_URL") {
        return Ok("google".into());
    }
    Err(
        StartupError::config("no model provider is configured").hint(
            "set ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY, or pass --base-url URL (or set \
         OPENAI_BASE_URL) for a local OpenAI-compatible server, or run offline with \
         --provider scripted --script fixtures/providers/hello.json",
        ),
    )
}

fn known_provider<'r>(
    registry: &'r Registry,
    name: &str,
    env: &Env,
) -> Result<&'r ProviderInfo, StartupError> {
    registry.provider(name).ok_or_else(|| {
        let known: Vec<&str> = registry.providers.iter().map(|p| p.name.as_str()).collect();
        StartupError::config(format!("unknown provider `{name}`")).hint(format!(
            "known providers: {}, scripted; add your own in {}",
            known.join(", "),
            env.keel_home.join("models.json").display()
        ))
    })
}

/// Where a provider is reached, and whether the user chose that place.
struct Endpoint {
    url: String,
    /// The URL came from `--base-url` or the provider's URL variable (`OPENAI_BASE_URL`, ...):
    /// any model id is accepted and no key is required.
    custom: bool,
    /// How the user named the URL, for messages: `--base-url` or the variable.
    source: String,
}

impl Endpoint {
    fn of(settings: &Settings, env: &Env, p: &ProviderInfo) -> Endpoint {
        if let Some(url) = &settings.base_url {
            return Endpoint {
                url: url.clone(),
                custom: true,
                source: "--base-url".into(),
            };
        }
        let from_env = p
            .base_url_env
            .as_deref()
            .and_then(|k| env.vars.get(k).map(|v| (k, v)));
        match from_env {
            Some((k, url)) => Endpoint {
                url: url.clone(),
                custom: true,
                source: k.to_string(),
            },
            None => Endpoint {
                url: p.base_url.clone(),
                custom: false,
                source: format!("the `{}` provider", p.name),
            },
        }
    }
}

/// The key for `p`: `--api-key`, models.json, else the provider's variable. A key from the
/// environment is only sent to the provider's own endpoint (or to a `--base-url` given together
/// with an explicit `--provider`): never leak `OPENAI_API_KEY` to any URL.
fn api_key(
    settings: &Settings,
    env: &Env,
    p: &ProviderInfo,
    endpoint: &Endpoint,
) -> Result<Option<String>, StartupError> {
    let env_key_ok = settings.base_url.is_none() || settings.provider.is_some();
    let from_env = |var: &Option<String>| {
        var.as_deref()
            .filter(|_| env_key_ok)
            .and_then(|k| env.vars.get(k).cloned())
    };
    let key = settings
        .api_key
        .clone()
        .or_else(|| p.key.clone())
        .or_else(|| from_env(&p.key_env))
        .or_else(|| from_env(&p.key_env_alt));
    if let (None, Some(k), false) = (&key, &p.key_env, endpoint.custom) {
        let k = match &p.key_env_alt {
            Some(alt) => format!("{k} or {alt}"),
            None => k.clone(),
        };
        return Err(
            StartupError::config(format!("no API key for provider `{}`", p.name)).hint(format!(
                "set {k} (or pass --api-key KEY); for a local server without a key, pass --base-url URL"
            )),
        );
    }
    Ok(key)
}

/// The model a server serves when it serves exactly one (never a built-in default such as
/// `gpt-4.1` for someone else's server).
fn served_model(endpoint: &Endpoint, ids: &[String]) -> Result<String, StartupError> {
    match ids {
        [one] => Ok(one.clone()),
        [] => Err(StartupError::config(format!(
            "no model chosen, and {} lists no models",
            models_url(&endpoint.url)
        ))
        .hint("pass --model ID (the model id the server knows)")),
        many => {
            const SHOWN: usize = 20;
            let mut list = many[..many.len().min(SHOWN)].join(", ");
            if many.len() > SHOWN {
                list.push_str(&format!(", … ({} more)", many.len() - SHOWN));
            }
            Err(StartupError::config(format!(
                "no model chosen, and {} serves {} models: {list}",
                endpoint.url,
                many.len()
            ))
            .hint("pass --model ID with one of them (keel --list-models --base-url URL lists them all)"))
        }
    }
}

/// `GET {url}/models`, with a config error that names the URL when it fails.
async fn served_ids(
    endpoint: &Endpoint,
    key: Option<&str>,
    options: &HttpOptions,
) -> Result<Vec<String>, StartupError> {
    served::list_models(&endpoint.url, key, options)
        .await
        .map_err(|e| list_error(e, endpoint))
}

fn list_error(e: ListError, endpoint: &Endpoint) -> StartupError {
    let check = format!("check the URL ({})", endpoint.source);
    match e.failure {
        ListFailure::Unreachable => StartupError::config(format!("cannot reach {}", e.url))
            .cause(e.detail)
            .hint(format!(
                "is the server running? {check}, or pass --model ID"
            )),
        ListFailure::Status(404) => {
            let err = StartupError::config(format!("{} answered HTTP 404", e.url));
            let err = if e.detail.is_empty() {
                err
            } else {
                err.cause(e.detail)
            };
            if path_has_v1(&endpoint.url) {
                err.hint(format!(
                    "the server does not list its models: pass --model ID, or {check}"
                ))
            } else {
                err.hint(format!(
                    "most OpenAI-compatible servers serve under /v1: try {}/v1",
                    crate::kernel::url::redact_url(endpoint.url.trim_end_matches('/'))
                ))
            }
        }
        ListFailure::Status(status) => {
            let err = StartupError::config(format!("{} answered HTTP {status}", e.url));
            let err = if e.detail.is_empty() {
                err
            } else {
                err.cause(e.detail)
            };
            match status {
                401 | 403 => err.hint("pass --api-key KEY, or --model ID to skip the model list"),
                _ => err.hint(format!("pass --model ID, or {check}")),
            }
        }
        ListFailure::BadBody => {
            StartupError::config(format!("{} did not answer with a model list", e.url))
                .cause(e.detail)
                .hint(format!("pass --model ID, or {check}"))
        }
    }
}

/// The registry entry of model `id`, or an unlisted model when the provider accepts any id.
fn model_info(
    p: &ProviderInfo,
    id: &str,
    endpoint: &Endpoint,
    env: &Env,
) -> Result<ModelInfo, StartupError> {
    if let Some(m) = p.models.iter().find(|m| m.id == id) {
        return Ok(m.clone());
    }
    if endpoint.custom || p.models.is_empty() || p.key_env.is_none() {
        return Ok(ModelInfo::unlisted(&p.name, &p.api, &endpoint.url, id));
    }
    let known: Vec<&str> = p.models.iter().map(|m| m.id.as_str()).collect();
    Err(
        StartupError::config(format!("unknown model `{id}` for provider `{}`", p.name)).hint(
            format!(
                "known {} models: {}; for another model, pass --base-url or add it to {}",
                p.name,
                known.join(", "),
                env.keel_home.join("models.json").display()
            ),
        ),
    )
}

/// `--provider` and `--model` as (provider name, model id). `--model p/id` names the provider
/// when `p` is one (model ids may contain `/` themselves, as on OpenRouter).
fn split_model(settings: &Settings, registry: &Registry) -> (Option<String>, Option<String>) {
    let Some(model) = settings.model.clone() else {
        return (settings.provider.clone(), None);
    };
    match (&settings.provider, model.split_once('/')) {
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

/// The transport settings from `--connect-timeout` and `--idle-timeout`; default caps.
pub(super) fn http_options(settings: &Settings) -> Result<HttpOptions, StartupError> {
    Ok(HttpOptions {
        connect_timeout: seconds(settings.connect_timeout, "--connect-timeout")?,
        idle_timeout: seconds(settings.idle_timeout, "--idle-timeout")?,
        ..HttpOptions::default()
    })
}

/// The `--list-models` output. With `--base-url` or `OPENAI_BASE_URL` (or a keyless local
/// provider such as `--provider ollama`), what that server serves (`GET /models`); otherwise
/// the registry's models.
pub async fn model_list(
    settings: &Settings,
    env: &Env,
    pattern: &str,
    json: bool,
) -> Result<String, StartupError> {
    let registry = registry(env)?;
    let name = match &settings.provider {
        Some(p) => p.clone(),
        None if settings.base_url.is_some() || env.vars.contains_key("OPENAI_BASE_URL") => {
            "openai".into()
        }
        None => return Ok(list_models(&registry, pattern, json)),
    };
    let Some(p) = registry.provider(&name) else {
        return Ok(list_models(&registry, pattern, json));
    };
    let endpoint = Endpoint::of(settings, env, p);
    if !p.served_by_server(endpoint.custom) {
        return Ok(list_models(&registry, pattern, json));
    }
    let key = api_key(settings, env, p, &endpoint)?;
    let ids = served_ids(&endpoint, key.as_deref(), &http_options(settings)?).await?;
    Ok(served_list(&ids, &p.name, &endpoint.url, pattern, json))
}

/// The models a server serves as a list (or JSON lines), filtered by a case-insensitive
/// substring of the id.
fn served_list(ids: &[String], provider: &str, url: &str, pattern: &str, json: bool) -> String {
    let pattern = pattern.to_lowercase();
    let shown = ids.iter().filter(|id| id.to_lowercase().contains(&pattern));
    let mut out = String::new();
    if json {
        for id in shown {
            let line = serde_json::json!({"id": id, "provider": provider, "baseUrl": url});
            out.push_str(&line.to_string());
            out.push('\n');
        }
        return out;
    }
    out.push_str("MODEL\n");
    for id in shown {
        out.push_str(id);
        out.push('\n');
    }
    out.push_str(&format!(
        "\nListed by GET {}; pass one with --model ID.\n",
        models_url(url)
    ));
    out
}

/// The `--list-models` table (or JSON lines) of the registry, filtered by a case-insensitive
/// substring.
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
    out.push_str(&format!(
        "{:<36} {:>8} {:>8} {:>9} {:>15}  {}\n",
        "MODEL", "CONTEXT", "MAX OUT", "THINKING", "$/M IN / OUT", "API"
    ));
    for m in models {
        out.push_str(&format!(
            "{:<36} {:>8} {:>8} {:>9} {:>15}  {}\n",
            format!("{}/{}", m.provider, m.id),
            tokens(m.context_window),
            tokens(m.max_tokens),
            if m.reasoning { "yes" } else { "no" },
            format!("{} / {}", m.cost.input, m.cost.output),
            m.api
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

/// A token count for the table: `512`, `32K`, `1.0M`.
fn tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 1000 {
        format!("{}K", n / 1000)
    } else {
        n.to_string()
    }
}
