//! Model metadata and the model registry: built-in providers and models, plus custom
//! OpenAI-compatible endpoints from `$KEEL_HOME/models.json`. Pure data and lookups; the caller
//! resolves flags and environment into a [`Resolved`] model with its credentials.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::catalog::{BuiltinProvider, EFFORT_MINIMAL, PROVIDERS};
use crate::kernel::message::Usage;

/// The wire API a model speaks.
pub const API_OPENAI: &str = "openai-completions";
pub const API_ANTHROPIC: &str = "anthropic-messages";
pub const API_RESPONSES: &str = "openai-responses";
pub const API_GEMINI: &str = "google-generative-ai";
pub const API_SCRIPTED: &str = "scripted";

/// Every thinking level, weakest first.
pub const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// What keel knows about one model (pi's `Model` shape, without `compat` internals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    pub name: String,
    pub api: String,
    pub provider: String,
    pub base_url: String,
    pub reasoning: bool,
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// The thinking levels the model accepts, weakest first (always starts with `off`).
    #[serde(skip)]
    pub thinking_levels: Vec<String>,
    /// Anthropic adaptive thinking (an effort) rather than a thinking budget.
    #[serde(skip)]
    pub adaptive_thinking: bool,
    /// Differences between OpenAI-compatible servers.
    #[serde(skip)]
    pub compat: OpenAiCompat,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl ModelCost {
    /// Fills `usage.cost` from its token counts.
    pub fn apply(&self, usage: &mut Usage) {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        usage.cost.input = per(usage.input, self.input);
        usage.cost.output = per(usage.output, self.output);
        usage.cost.cache_read = per(usage.cache_read, self.cache_read);
        usage.cost.cache_write = per(usage.cache_write, self.cache_write);
        usage.cost.total =
            usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
    }
}

/// Request details that differ between OpenAI-compatible servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiCompat {
    /// `max_completion_tokens` (OpenAI) or `max_tokens` (most compatible servers).
    pub max_tokens_field: &'static str,
    /// Whether to send `reasoning_effort` for reasoning models.
    pub reasoning_effort: bool,
    /// Whether to send `stream_options: {include_usage: true}`.
    pub stream_usage: bool,
}

impl Default for OpenAiCompat {
    fn default() -> Self {
        OpenAiCompat {
            max_tokens_field: "max_tokens",
            reasoning_effort: true,
            stream_usage: true,
        }
    }
}

impl OpenAiCompat {
    /// The settings for a base URL: OpenAI itself wants `max_completion_tokens`.
    pub fn for_base_url(base_url: &str) -> Self {
        let mut c = OpenAiCompat::default();
        if base_url.contains("api.openai.com") {
            c.max_tokens_field = "max_completion_tokens";
        }
        c
    }
}

impl ModelInfo {
    /// A model with default limits, for ids a registry does not list (custom endpoints).
    pub fn unlisted(provider: &str, api: &str, base_url: &str, id: &str) -> ModelInfo {
        ModelInfo {
            id: id.to_string(),
            name: id.to_string(),
            api: api.to_string(),
            provider: provider.to_string(),
            base_url: base_url.to_string(),
            reasoning: false,
            input: vec!["text".into()],
            cost: ModelCost::default(),
            context_window: 128_000,
            max_tokens: 8_192,
            thinking_levels: vec!["off".into()],
            adaptive_thinking: false,
            compat: OpenAiCompat::for_base_url(base_url),
        }
    }

    /// The strongest supported level not above `requested` (`off` for models without
    /// reasoning). Unknown words count as `off`.
    pub fn clamp_thinking(&self, requested: &str) -> String {
        let rank = |l: &str| THINKING_LEVELS.iter().position(|x| *x == l).unwrap_or(0);
        let want = rank(requested);
        self.thinking_levels
            .iter()
            .filter(|l| rank(l) <= want)
            .max_by_key(|l| rank(l))
            .cloned()
            .unwrap_or_else(|| "off".into())
    }
}

/// A provider keel knows how to reach.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderInfo {
    pub name: String,
    pub api: String,
    pub base_url: String,
    /// Environment variable holding the API key; `None` when no key is needed (local servers).
    pub key_env: Option<String>,
    /// A second variable read when `key_env` is unset (Google: `GOOGLE_API_KEY`).
    pub key_env_alt: Option<String>,
    /// A literal key from models.json.
    pub key: Option<String>,
    /// Environment variable that overrides the base URL.
    pub base_url_env: Option<String>,
    /// The model used when only the provider is given.
    pub default_model: Option<String>,
    pub models: Vec<ModelInfo>,
}

impl ProviderInfo {
    /// Whether this provider's models are what its server lists (`GET /models`) rather than the
    /// registry's: an OpenAI-compatible server at a URL the user chose (`custom_url`: a flag or
    /// the provider's URL variable), or a keyless one without a default model (Ollama).
    pub fn served_by_server(&self, custom_url: bool) -> bool {
        self.api == API_OPENAI
            && (custom_url
                || (self.default_model.is_none() && self.key_env.is_none() && self.key.is_none()))
    }
}

impl ProviderInfo {
    /// `info` (one of this provider's models) served at `base_url`. A listed model speaks its
    /// own API (OpenAI's models: Responses) only at the provider's own URL; at a URL the user
    /// chose it speaks the provider's API (Chat Completions for `openai`), which is what
    /// compatible servers and proxies serve.
    pub fn place(&self, mut info: ModelInfo, base_url: &str) -> ModelInfo {
        if base_url.trim_end_matches('/') != self.base_url.trim_end_matches('/') {
            info.api = self.api.clone();
        }
        info.base_url = base_url.to_string();
        info.compat = OpenAiCompat::for_base_url(base_url);
        info
    }
}

/// Built-in providers plus models.json.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub providers: Vec<ProviderInfo>,
}

fn builtin_models(p: &BuiltinProvider) -> Vec<ModelInfo> {
    p.models
        .iter()
        .map(|b| ModelInfo {
            id: b.id.into(),
            name: b.name.into(),
            api: p.model_api.into(),
            provider: p.name.into(),
            base_url: p.base_url.into(),
            reasoning: b.reasoning.len() > 1,
            input: if b.image {
                vec!["text".into(), "image".into()]
            } else {
                vec!["text".into()]
            },
            cost: ModelCost {
                input: b.cost[0],
                output: b.cost[1],
                cache_read: b.cost[2],
                cache_write: b.cost[3],
            },
            context_window: b.context,
            max_tokens: b.max_out,
            thinking_levels: b.reasoning.iter().map(|s| s.to_string()).collect(),
            adaptive_thinking: b.adaptive,
            compat: OpenAiCompat::for_base_url(p.base_url),
        })
        .collect()
}

fn builtin(p: &BuiltinProvider) -> ProviderInfo {
    ProviderInfo {
        name: p.name.into(),
        api: p.api.into(),
        base_url: p.base_url.into(),
        key_env: p.key_env.map(Into::into),
        key_env_alt: p.key_env_alt.map(Into::into),
        key: None,
        base_url_env: p.base_url_env.map(Into::into),
        default_model: p.default_model.map(Into::into),
        models: builtin_models(p),
    }
}

/// One provider entry of models.json.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileProvider {
    base_url: String,
    #[serde(default)]
    api: Option<String>,
    /// The name of the environment variable that holds the key.
    #[serde(default)]
    api_key_env: Option<String>,
    /// A literal key (prefer `apiKeyEnv`).
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    models: Vec<FileModel>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileModel {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    reasoning: bool,
    #[serde(default)]
    input: Option<Vec<String>>,
    #[serde(default)]
    cost: ModelCost,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelsFile {
    #[serde(default)]
    providers: BTreeMap<String, FileProvider>,
}

impl Registry {
    /// The built-in providers of the catalog: openai, anthropic, google, deepseek, openrouter,
    /// groq, ollama.
    pub fn builtin() -> Registry {
        Registry {
            providers: PROVIDERS.iter().map(builtin).collect(),
        }
    }

    /// Adds (or replaces) providers from the text of a models.json file.
    pub fn merge_file(&mut self, text: &str) -> Result<(), RegistryError> {
        let file: ModelsFile = serde_json::from_str(text).map_err(|e| RegistryError {
            kind: RegistryErrorKind::Syntax,
            message: e.to_string(),
        })?;
        for (name, p) in file.providers {
            let api = p.api.unwrap_or_else(|| API_OPENAI.to_string());
            if ![API_OPENAI, API_RESPONSES, API_ANTHROPIC, API_GEMINI].contains(&api.as_str()) {
                return Err(RegistryError {
                    kind: RegistryErrorKind::UnknownApi,
                    message: format!(
                        "provider `{name}`: unknown api `{api}` (use `{API_OPENAI}`, `{API_RESPONSES}`, `{API_ANTHROPIC}` or `{API_GEMINI}`)"
                    ),
                });
            }
            let models = p
                .models
                .into_iter()
                .map(|m| {
                    let mut info = ModelInfo::unlisted(&name, &api, &p.base_url, &m.id);
                    info.name = m.name.unwrap_or_else(|| m.id.clone());
                    info.reasoning = m.reasoning;
                    if m.reasoning {
                        info.thinking_levels =
                            EFFORT_MINIMAL.iter().map(|s| s.to_string()).collect();
                    }
                    if let Some(input) = m.input {
                        info.input = input;
                    }
                    info.cost = m.cost;
                    info.context_window = m.context_window.unwrap_or(info.context_window);
                    info.max_tokens = m.max_tokens.unwrap_or(info.max_tokens);
                    info
                })
                .collect::<Vec<_>>();
            let provider = ProviderInfo {
                default_model: models.first().map(|m| m.id.clone()),
                name: name.clone(),
                api,
                base_url: p.base_url,
                key_env: p.api_key_env,
                key_env_alt: None,
                key: p.api_key,
                base_url_env: None,
                models,
            };
            self.providers.retain(|x| x.name != name);
            self.providers.push(provider);
        }
        Ok(())
    }

    pub fn provider(&self, name: &str) -> Option<&ProviderInfo> {
        let found = |name: &str| self.providers.iter().find(|p| p.name == name);
        // `gemini` is the built-in `google` (Gemini's API), unless models.json names its own.
        found(name).or_else(|| (name == "gemini").then(|| found("google")).flatten())
    }

    /// Every listed model, provider by provider.
    pub fn models(&self) -> impl Iterator<Item = &ModelInfo> {
        self.providers.iter().flat_map(|p| p.models.iter())
    }
}

/// What is wrong with a models.json file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryErrorKind {
    /// Not JSON, or not the file's shape (an unknown field, a wrong type).
    Syntax,
    /// A provider names an `api` keel does not speak.
    UnknownApi,
}

/// A models.json file that cannot be used: its kind and what is wrong, as the user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    pub kind: RegistryErrorKind,
    pub message: String,
}

impl std::fmt::Display for RegistryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RegistryError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_per_million_tokens() {
        let r = Registry::builtin();
        let m = r
            .provider("anthropic")
            .unwrap()
            .models
            .iter()
            .find(|m| m.id == "claude-sonnet-4-5")
            .unwrap();
        let mut u = Usage {
            input: 1_000_000,
            output: 2_000,
            cache_read: 10_000,
            cache_write: 0,
            total_tokens: 1_012_000,
            ..Usage::default()
        };
        m.cost.apply(&mut u);
        assert_eq!(u.cost.input, 3.0);
        assert!((u.cost.output - 0.03).abs() < 1e-12);
        assert!((u.cost.cache_read - 0.003).abs() < 1e-12);
        assert!((u.cost.total - 3.033).abs() < 1e-12);
    }

    #[test]
    fn thinking_is_clamped_to_the_model() {
        let r = Registry::builtin();
        let find = |p: &str, id: &str| {
            r.provider(p)
                .unwrap()
                .models
                .iter()
                .find(|m| m.id == id)
                .unwrap()
                .clone()
        };
        assert_eq!(find("openai", "gpt-4.1").clamp_thinking("high"), "off");
        assert_eq!(find("openai", "gpt-5").clamp_thinking("xhigh"), "high");
        assert_eq!(
            find("openai", "gpt-6.2-sol").clamp_thinking("xhigh"),
            "xhigh"
        );
        assert_eq!(find("openai", "gpt-5").clamp_thinking("minimal"), "minimal");
        assert_eq!(
            find("anthropic", "claude-haiku-4-5").clamp_thinking("xhigh"),
            "xhigh"
        );
        assert_eq!(find("openai", "gpt-5").clamp_thinking("bogus"), "off");
    }

    #[test]
    fn openai_models_speak_responses_only_at_openais_url() {
        let r = Registry::builtin();
        let p = r.provider("openai").unwrap();
        assert_eq!(p.default_model.as_deref(), Some("gpt-6.2-sol"));
        let sol = p.models.iter().find(|m| m.id == "gpt-6.2-sol").unwrap();
        assert_eq!(sol.api, API_RESPONSES);
        let own = p.place(sol.clone(), "https://api.openai.com/v1/");
        assert_eq!(own.api, API_RESPONSES);
        assert_eq!(own.compat.max_tokens_field, "max_completion_tokens");
        let elsewhere = p.place(sol.clone(), "http://127.0.0.1:8080/v1");
        assert_eq!(elsewhere.api, API_OPENAI);
        assert_eq!(elsewhere.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(elsewhere.compat.max_tokens_field, "max_tokens");
        let a = r.provider("anthropic").unwrap();
        assert_eq!(a.default_model.as_deref(), Some("claude-sonnet-5-5"));
        let sonnet = a
            .models
            .iter()
            .find(|m| m.id == "claude-sonnet-5-5")
            .unwrap();
        assert!(sonnet.adaptive_thinking);
        assert_eq!(a.place(sonnet.clone(), "http://proxy/").api, API_ANTHROPIC);
        // Every listed model has prices and limits.
        for m in r.models() {
            assert!(m.cost.input > 0.0 && m.cost.output > 0.0, "{}", m.id);
            assert!(m.context_window >= m.max_tokens, "{}", m.id);
        }
    }

    #[test]
    fn models_file_adds_custom_endpoints_and_rejects_typos() {
        let mut r = Registry::builtin();
        r.merge_file(
            r#"{"providers":{"local":{"baseUrl":"http://127.0.0.1:8080/v1","models":[
                {"id":"qwen","contextWindow":32768,"reasoning":true,"cost":{"input":0.1}}]}}}"#,
        )
        .unwrap();
        let p = r.provider("local").unwrap();
        assert_eq!(p.api, API_OPENAI);
        assert_eq!(p.key_env, None);
        assert_eq!(p.default_model.as_deref(), Some("qwen"));
        assert_eq!(p.models[0].context_window, 32768);
        assert_eq!(p.models[0].cost.input, 0.1);
        assert_eq!(p.models[0].clamp_thinking("high"), "high");
        let e = r
            .merge_file(r#"{"providers":{"x":{"baseUrl":"u","modles":[]}}}"#)
            .unwrap_err();
        assert!(e.message.contains("modles"), "{e}");
        assert_eq!(e.kind, RegistryErrorKind::Syntax);
        r.merge_file(r#"{"providers":{"r":{"baseUrl":"u","api":"openai-responses"}}}"#)
            .unwrap();
        assert_eq!(r.provider("r").unwrap().api, API_RESPONSES);
        let e = r
            .merge_file(r#"{"providers":{"x":{"baseUrl":"u","api":"grpc"}}}"#)
            .unwrap_err();
        assert!(e.message.contains("grpc"), "{e}");
        assert_eq!(e.kind, RegistryErrorKind::UnknownApi);
    }
}
